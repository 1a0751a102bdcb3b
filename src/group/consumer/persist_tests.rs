//! The records a group's changes write, replayed, give the group back: members, epochs,
//! targets; a loaded group continues at its epochs.

use super::super::heartbeat::{self, Outcome, Request, Settings};
use super::super::{LEAVE_EPOCH, LEAVE_STATIC_EPOCH, TopicMeta, Topics};
use super::*;

pub(crate) fn topics() -> Topics {
    Topics::from([(
        "t".to_string(),
        TopicMeta {
            id: Uuid::from_u128(1),
            partitions: 6,
            internal: false,
        },
    )])
}

fn settings() -> Settings {
    Settings {
        assignors: vec!["uniform".into(), "range".into()],
        max_size: 10,
        migration: crate::group::consumer::classic::MigrationPolicy::Bidirectional,
    }
}

pub(crate) fn join(id: &str, instance: Option<&str>) -> Request {
    Request {
        version: 1,
        member_id: id.into(),
        member_epoch: 0,
        instance_id: instance.map(String::from),
        rebalance_timeout_ms: 30_000,
        subscribed_names: Some(vec!["t".into()]),
        owned: Some(Assignment::new()),
        client_id: format!("client-{id}"),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    }
}

fn hb(g: &ConsumerGroup, id: &str) -> Request {
    let m = &g.members[id];
    Request {
        version: 1,
        member_id: id.into(),
        member_epoch: m.epoch,
        instance_id: m.instance_id.clone(),
        rebalance_timeout_ms: -1,
        owned: Some(m.assigned.clone()),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        ..Default::default()
    }
}

/// A log of the group's records and the group the coordinator holds.
struct Logged {
    live: ConsumerGroup,
    log: Records,
    written: bool,
}

impl Logged {
    fn new() -> Logged {
        Logged {
            live: ConsumerGroup::default(),
            log: Vec::new(),
            written: false,
        }
    }

    fn run(&mut self, r: &Request) -> Outcome {
        let before = self.live.clone();
        let out = heartbeat::heartbeat("g", &mut self.live, r, &topics(), &settings(), &|| {
            "generated".into()
        })
        .unwrap();
        self.log
            .extend(changes("g", self.written.then_some(&before), &self.live));
        self.written = true;
        out
    }

    fn replayed(&self) -> Option<Loading> {
        let mut slot = None;
        for (k, v) in &self.log {
            let k = rec::decode_key(k.clone()).unwrap().unwrap();
            Loading::apply(&mut slot, &k, v.clone()).unwrap();
        }
        slot
    }
}

fn same(a: &ConsumerGroup, b: &ConsumerGroup) {
    assert_eq!(a.group_epoch, b.group_epoch);
    assert_eq!(a.assignment_epoch, b.assignment_epoch);
    assert_eq!(format!("{:?}", a.members), format!("{:?}", b.members));
    let targets = |g: &ConsumerGroup| -> BTreeMap<String, Assignment> {
        g.target
            .iter()
            .map(|(k, v)| (k.clone(), strip(v)))
            .collect()
    };
    assert_eq!(targets(a), targets(b));
}

/// Three members join and reconcile; the replayed group equals the live one after every
/// step, and a replayed group answers the members' next heartbeats as the live one would.
#[test]
fn the_replayed_group_is_the_live_group() {
    let mut l = Logged::new();
    l.run(&join("a", None));
    same(&l.replayed().unwrap().group, &l.live);
    l.run(&join("b", Some("inst-b")));
    l.run(&join("c", None));
    for _ in 0..4 {
        for id in ["a", "b", "c"] {
            let r = hb(&l.live, id);
            l.run(&r);
            same(&l.replayed().unwrap().group, &l.live);
        }
    }
    assert_eq!(l.live.state(), super::super::GroupState::Stable);
    let loaded = l.replayed().unwrap();
    assert_eq!(loaded.metadata_hash, metadata_hash(&l.live.subscribed));
    // The loaded group, its topics unchanged, continues: the same epochs for every member.
    let mut g = loaded.group;
    g.subscribed = g.compute_subscribed(&topics());
    assert_eq!(metadata_hash(&g.subscribed), loaded.metadata_hash);
    for id in ["a", "b", "c"] {
        let r = hb(&l.live, id);
        let epoch = l.live.members[id].epoch;
        let out = heartbeat::heartbeat("g", &mut g, &r, &topics(), &settings(), &|| "x".into());
        let Ok(Outcome::Member { epoch: e, .. }) = out else {
            panic!("{out:?}")
        };
        assert_eq!(e, epoch);
    }
    assert_eq!(g.group_epoch, l.live.group_epoch);
}

#[test]
fn leaves_write_tombstones_and_a_static_leave_keeps_the_member() {
    let mut l = Logged::new();
    l.run(&join("a", None));
    l.run(&join("b", Some("i")));
    let mut leave = hb(&l.live, "a");
    leave.member_epoch = LEAVE_EPOCH;
    let at = l.log.len();
    l.run(&leave);
    let kinds: Vec<(i16, bool)> = l.log[at..]
        .iter()
        .map(|(k, v)| (i16::from_be_bytes([k[0], k[1]]), v.is_some()))
        .collect();
    assert_eq!(
        kinds[..4],
        [
            (rec::CURRENT_ASSIGNMENT, false),
            (rec::TARGET_MEMBER, false),
            (rec::MEMBER, false),
            (rec::GROUP_EPOCH, true)
        ]
    );
    let mut leave = hb(&l.live, "b");
    leave.member_epoch = LEAVE_STATIC_EPOCH;
    l.run(&leave);
    let g = l.replayed().unwrap().group;
    same(&g, &l.live);
    assert!(!g.members.contains_key("a"));
    assert_eq!(g.members["b"].epoch, LEAVE_STATIC_EPOCH);
    // Deleting the group: nothing is left of it.
    l.log.extend(tombstones("g", &l.live));
    assert!(l.replayed().is_none());
}

#[test]
fn nothing_is_written_for_a_heartbeat_that_changes_nothing() {
    let mut l = Logged::new();
    l.run(&join("a", None));
    let r = hb(&l.live, "a");
    l.run(&r);
    let at = l.log.len();
    let r = hb(&l.live, "a");
    l.run(&r);
    assert_eq!(l.log.len(), at);
}

#[test]
fn the_hash_follows_the_topics() {
    let t = |n: i32| BTreeMap::from([("t".to_string(), (Uuid::from_u128(1), n))]);
    assert_eq!(metadata_hash(&t(3)), metadata_hash(&t(3)));
    assert_ne!(metadata_hash(&t(3)), metadata_hash(&t(4)));
    assert_eq!(metadata_hash(&BTreeMap::new()), 0);
}
