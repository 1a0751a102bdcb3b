use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::ResponseError as E;
use uuid::Uuid;

use super::super::heartbeat::{self, Outcome, Request, Settings};
use super::super::{Assignment, ConsumerGroup, GroupState, Topics};
use super::*;
use crate::group::state::{Group, Member as ClassicGroupMember, State};

fn topics() -> Topics {
    heartbeat::tests::topics()
}

fn t() -> Uuid {
    Uuid::from_u128(1)
}

fn settings(migration: MigrationPolicy) -> Settings {
    Settings {
        assignors: vec!["uniform".into(), "range".into()],
        max_size: 10,
        migration,
    }
}

/// A ConsumerProtocolSubscription as the Java client writes it.
fn subscription(
    version: i16,
    topics: &[&str],
    owned: &[(&str, &[i32])],
    rack: Option<&str>,
) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(version);
    b.put_i32(topics.len() as i32);
    for t in topics {
        b.put_i16(t.len() as i16);
        b.put_slice(t.as_bytes());
    }
    b.put_i32(-1);
    if version >= 1 {
        b.put_i32(owned.len() as i32);
        for (t, ps) in owned {
            b.put_i16(t.len() as i16);
            b.put_slice(t.as_bytes());
            b.put_i32(ps.len() as i32);
            for p in *ps {
                b.put_i32(*p);
            }
        }
    }
    if version >= 2 {
        b.put_i32(-1);
    }
    if version >= 3 {
        match rack {
            Some(r) => {
                b.put_i16(r.len() as i16);
                b.put_slice(r.as_bytes());
            }
            None => b.put_i16(-1),
        }
    }
    b.freeze()
}

fn parts(a: &[i32]) -> Assignment {
    Assignment::from([(t(), a.iter().copied().collect::<BTreeSet<i32>>())])
}

fn classic_member(id: &str, seq: u64, assigned: &[i32]) -> ClassicGroupMember {
    ClassicGroupMember {
        id: id.into(),
        instance_id: None,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 12_000,
        rebalance_timeout_ms: 30_000,
        protocols: vec![
            ("range".into(), subscription(3, &["t"], &[], Some("r1"))),
            (
                "cooperative-sticky".into(),
                subscription(3, &["t"], &[], Some("r1")),
            ),
        ],
        assignment: encode_assignment(3, &vec![("t".into(), assigned.to_vec())]),
        awaiting_join: false,
        awaiting_sync: false,
        deadline: 0,
        is_new: false,
        seq,
    }
}

fn classic_group() -> Group {
    let mut g = Group::new("g", 0);
    g.state = State::Stable;
    g.generation = 3;
    g.protocol_type = Some("consumer".into());
    g.protocol = Some("range".into());
    g.leader = Some("a".into());
    g.members
        .insert("a".into(), classic_member("a", 0, &[0, 1]));
    g.members
        .insert("b".into(), classic_member("b", 1, &[2, 3]));
    g
}

fn consumer_join(id: &str) -> Request {
    heartbeat::tests::join(id)
}

fn classic_join(id: &str, owned: &[i32]) -> JoinParams {
    JoinParams {
        group_id: "g".into(),
        member_id: id.into(),
        instance_id: None,
        client_id: String::new(),
        client_host: String::new(),
        supports_skip_assignment: false,
        session_timeout_ms: 12_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![(
            "range".into(),
            subscription(3, &["t"], &[("t", owned)], None),
        )],
        require_known_member_id: true,
    }
}

fn joined(out: Result<JoinOutcome, heartbeat::Error>) -> i32 {
    match out.unwrap() {
        JoinOutcome::Joined { epoch, .. } => epoch,
        other => panic!("not joined: {other:?}"),
    }
}

fn synced(g: &ConsumerGroup, id: &str, generation: i32) -> Vec<i32> {
    let b = sync(
        "g",
        g,
        id,
        None,
        generation,
        Some("consumer"),
        Some("range"),
        &topics(),
    )
    .unwrap();
    let named = decode_assignment(&b).unwrap();
    named.into_iter().flat_map(|(_, ps)| ps).collect()
}

#[test]
fn subscriptions_of_every_version_decode() {
    let s0 = decode_subscription(&subscription(0, &["a", "b"], &[], None)).unwrap();
    assert_eq!(
        (s0.version, s0.topics.clone()),
        (0, vec!["a".into(), "b".into()])
    );
    assert!(s0.owned.is_empty());
    let s3 = decode_subscription(&subscription(3, &["a"], &[("a", &[1, 2])], Some("r"))).unwrap();
    assert_eq!(s3.owned, vec![("a".to_string(), vec![1, 2])]);
    assert_eq!(s3.rack_id.as_deref(), Some("r"));
    // Truncated, negative version, a count far beyond the bytes: malformed, no allocation.
    let full = subscription(3, &["a"], &[("a", &[1])], None);
    for cut in 0..full.len() {
        assert!(decode_subscription(&full[..cut]).is_none(), "cut at {cut}");
    }
    assert!(decode_subscription(&[0xff, 0xff, 0, 0, 0, 0]).is_none());
    assert!(decode_subscription(&[0, 0, 0x7f, 0xff, 0xff, 0xff]).is_none());
}

#[test]
fn assignments_round_trip() {
    let a = vec![("t".to_string(), vec![0, 3]), ("u".to_string(), vec![])];
    let b = encode_assignment(1, &a);
    assert_eq!(&b[..2], &[0, 1]);
    assert_eq!(decode_assignment(&b).unwrap(), a);
    assert_eq!(decode_assignment(&[]).unwrap(), Vec::new());
    assert!(decode_assignment(&b[..b.len() - 5]).is_none());
}

#[test]
fn a_classic_group_becomes_a_consumer_group_with_its_assignments() {
    let g = classic_group();
    assert_eq!(
        upgrade_refusal(&g, &settings(MigrationPolicy::Bidirectional)),
        None
    );
    let cg = from_classic(&g, &topics()).unwrap();
    assert_eq!((cg.group_epoch, cg.assignment_epoch), (3, 3));
    let a = &cg.members["a"];
    assert_eq!(
        (a.epoch, a.previous_epoch, a.state),
        (3, 3, MemberState::Stable)
    );
    assert_eq!(a.assigned, parts(&[0, 1]));
    assert_eq!(cg.target["b"], parts(&[2, 3]));
    assert_eq!(a.subscribed_names, vec!["t".to_string()]);
    assert_eq!(a.rack_id.as_deref(), Some("r1"));
    let c = a.classic.as_ref().unwrap();
    assert_eq!((c.session_timeout_ms, c.protocol_name()), (12_000, "range"));
    assert_eq!(cg.state(), GroupState::Stable);
}

#[test]
fn upgrades_follow_the_policy_and_the_protocol_type() {
    let mut g = classic_group();
    for p in [MigrationPolicy::Downgrade, MigrationPolicy::Disabled] {
        assert_eq!(
            upgrade_refusal(&g, &settings(p)),
            Some("the online upgrade is disabled")
        );
    }
    assert_eq!(
        upgrade_refusal(&g, &settings(MigrationPolicy::Upgrade)),
        None
    );
    let mut small = settings(MigrationPolicy::Upgrade);
    small.max_size = 1;
    assert!(upgrade_refusal(&g, &small).is_some());
    g.protocol_type = Some("connect".into());
    assert_eq!(
        upgrade_refusal(&g, &settings(MigrationPolicy::Bidirectional)),
        Some("the group does not use the consumer embedded protocol")
    );
    let mut bad = classic_group();
    bad.members.get_mut("a").unwrap().assignment = Bytes::from_static(&[0, 0, 0, 0, 0, 9]);
    assert!(from_classic(&bad, &topics()).is_err());
}

#[test]
fn classic_and_consumer_members_share_the_partitions() {
    let s = settings(MigrationPolicy::Bidirectional);
    let mut g = from_classic(&classic_group(), &topics()).unwrap();
    g.members.remove("b");
    g.target.remove("b");
    // A consumer-protocol member joins: the group epoch moves, its partitions are a's still.
    let out = heartbeat::heartbeat("g", &mut g, &consumer_join("c"), &topics(), &s, &|| {
        "x".into()
    })
    .unwrap();
    let Outcome::Member { epoch, .. } = out else {
        panic!()
    };
    assert_eq!((epoch, g.group_epoch), (4, 4));
    // a's heartbeat asks it to join again; its sync would too.
    assert_eq!(super::heartbeat("g", &g, "a", None, 3), Ok(true));
    let e = sync("g", &g, "a", None, 3, None, None, &topics()).unwrap_err();
    assert_eq!(e.code, E::RebalanceInProgress.code());
    // The eager client rejoins owning nothing: epoch 4 with the partitions the target keeps.
    assert_eq!(
        joined(join(
            &mut g,
            &classic_join("a", &[]),
            &topics(),
            &s,
            &|| "n".into()
        )),
        4
    );
    let a = synced(&g, "a", 4);
    assert_eq!(super::heartbeat("g", &g, "a", None, 4), Ok(false));
    // c gets the rest: every partition once.
    let owned = g.members["c"].assigned.clone();
    let r = heartbeat::tests::hb("c", 4, &owned);
    heartbeat::heartbeat("g", &mut g, &r, &topics(), &s, &|| "x".into()).unwrap();
    let c: Vec<i32> = g.members["c"].assigned[&t()].iter().copied().collect();
    let mut all: Vec<i32> = a.iter().chain(&c).copied().collect();
    all.sort();
    assert_eq!(all, vec![0, 1, 2, 3]);
    assert_eq!((a.len(), c.len()), (2, 2));
    assert_eq!(g.state(), GroupState::Stable);
}

#[test]
fn a_cooperative_member_revokes_before_it_moves_on() {
    let s = settings(MigrationPolicy::Bidirectional);
    let mut g = from_classic(&classic_group(), &topics()).unwrap();
    g.members.remove("b");
    g.target = [("a".to_string(), parts(&[0, 1, 2, 3]))].into();
    g.members.get_mut("a").unwrap().assigned = parts(&[0, 1, 2, 3]);
    heartbeat::heartbeat("g", &mut g, &consumer_join("c"), &topics(), &s, &|| {
        "x".into()
    })
    .unwrap();
    // a rejoins still owning all four: it stays at epoch 3 and keeps two.
    assert_eq!(
        joined(join(
            &mut g,
            &classic_join("a", &[0, 1, 2, 3]),
            &topics(),
            &s,
            &|| "n".into()
        )),
        3
    );
    assert_eq!(g.members["a"].state, MemberState::UnrevokedPartitions);
    let kept = synced(&g, "a", 3);
    assert_eq!(kept.len(), 2);
    assert_eq!(super::heartbeat("g", &g, "a", None, 3), Ok(true));
    // Having revoked the others it joins at epoch 4.
    assert_eq!(
        joined(join(
            &mut g,
            &classic_join("a", &kept),
            &topics(),
            &s,
            &|| "n".into()
        )),
        4
    );
    assert_eq!(synced(&g, "a", 4), kept);
}

#[test]
fn classic_requests_are_checked_as_kafka_checks_them() {
    let s = settings(MigrationPolicy::Bidirectional);
    let mut g = from_classic(&classic_group(), &topics()).unwrap();
    let mut j = classic_join("", &[]);
    assert_eq!(
        join(&mut g, &j, &topics(), &s, &|| "new-id".into()).unwrap(),
        JoinOutcome::MemberIdRequired("new-id".into())
    );
    j.protocol_type = "connect".into();
    let e = join(&mut g, &j, &topics(), &s, &|| "new-id".into()).unwrap_err();
    assert_eq!(e.code, E::InconsistentGroupProtocol.code());
    assert_eq!(
        e.message.as_deref(),
        Some("Member new-id's protocols are not supported.")
    );
    let mut j = classic_join("d", &[]);
    j.protocols = vec![("roundrobin".into(), subscription(0, &["t"], &[], None))];
    assert_eq!(
        join(&mut g, &j, &topics(), &s, &|| "x".into())
            .unwrap_err()
            .code,
        E::InconsistentGroupProtocol.code()
    );
    let mut full = settings(MigrationPolicy::Bidirectional);
    full.max_size = 2;
    let e = join(&mut g, &classic_join("d", &[]), &topics(), &full, &|| {
        "x".into()
    })
    .unwrap_err();
    assert_eq!(e.code, E::GroupMaxSizeReached.code());
    let e = sync("g", &g, "a", None, 2, None, None, &topics()).unwrap_err();
    assert_eq!(e.code, E::IllegalGeneration.code());
    assert_eq!(
        e.message.as_deref(),
        Some("The request generation id 2 is not equal to the member epoch 3 of member a.")
    );
    let e = sync(
        "g",
        &g,
        "a",
        None,
        3,
        Some("consumer"),
        Some("roundrobin"),
        &topics(),
    )
    .unwrap_err();
    assert_eq!(e.code, E::InconsistentGroupProtocol.code());
    assert_eq!(
        super::heartbeat("g", &g, "zz", None, 3).unwrap_err().code,
        E::UnknownMemberId.code()
    );
    heartbeat::heartbeat("g", &mut g, &consumer_join("c"), &topics(), &s, &|| {
        "x".into()
    })
    .unwrap();
    let e = super::heartbeat("g", &g, "c", None, 4).unwrap_err();
    assert_eq!(
        e.message.as_deref(),
        Some("Member c does not use the classic protocol.")
    );
}

#[test]
fn the_last_consumer_member_leaving_downgrades_the_group() {
    let s = settings(MigrationPolicy::Bidirectional);
    let mut g = from_classic(&classic_group(), &topics()).unwrap();
    heartbeat::heartbeat("g", &mut g, &consumer_join("c"), &topics(), &s, &|| {
        "x".into()
    })
    .unwrap();
    assert!(!downgrades_without(&g, "a", &s), "a classic member leaving");
    assert!(downgrades_without(&g, "c", &s));
    assert!(!downgrades_without(
        &g,
        "c",
        &settings(MigrationPolicy::Upgrade)
    ));
    let leave = Request {
        version: 1,
        member_id: "c".into(),
        member_epoch: -1,
        ..Default::default()
    };
    let out = heartbeat::heartbeat("g", &mut g, &leave, &topics(), &s, &|| "x".into()).unwrap();
    assert_eq!(
        out,
        Outcome::Left {
            member_id: "c".into(),
            epoch: -1,
            downgrade: true
        }
    );
    let d = to_classic(&g, "c", &topics()).unwrap();
    assert_eq!(d.generation, g.group_epoch);
    assert_eq!(d.protocol, "range");
    assert_eq!(d.members.len(), 2);
    let mut all = Vec::new();
    for m in &d.members {
        assert_eq!(m.session_timeout_ms, 12_000);
        assert_eq!(
            &m.assignment[..2],
            &[0, 3],
            "the version of the member's metadata"
        );
        let target: Vec<i32> = g.target[&m.id].values().flatten().copied().collect();
        let got: Vec<i32> = decode_assignment(&m.assignment)
            .unwrap()
            .into_iter()
            .flat_map(|(_, p)| p)
            .collect();
        assert_eq!(got, target);
        all.extend(got);
    }
    all.sort();
    assert!(all.iter().all(|p| (0..4).contains(p)));
    // With only consumer-protocol members left there is nothing to downgrade to.
    let mut only = ConsumerGroup::default();
    heartbeat::heartbeat("g", &mut only, &consumer_join("c"), &topics(), &s, &|| {
        "x".into()
    })
    .unwrap();
    assert!(!downgrades_without(&only, "c", &s));
}

#[test]
fn policies_parse_case_insensitively() {
    assert_eq!(
        MigrationPolicy::parse("BIDIRECTIONAL"),
        Some(MigrationPolicy::Bidirectional)
    );
    assert_eq!(
        MigrationPolicy::parse("Upgrade"),
        Some(MigrationPolicy::Upgrade)
    );
    assert_eq!(
        MigrationPolicy::parse("downgrade"),
        Some(MigrationPolicy::Downgrade)
    );
    assert_eq!(
        MigrationPolicy::parse("disabled"),
        Some(MigrationPolicy::Disabled)
    );
    assert_eq!(MigrationPolicy::parse("both"), None);
    assert!(MigrationPolicy::Upgrade.upgrade_enabled());
    assert!(!MigrationPolicy::Upgrade.downgrade_enabled());
}
