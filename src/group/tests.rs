//! State machine tests on a paused tokio clock: the coordinator runs against an in-memory
//! `__consumer_offsets`, and time only moves when every task is idle (or by `advance`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use tokio::time::advance;

use super::coordinator::{
    CommitOffset, CommitParams, Coordinator, GroupConfig, JoinParams, SyncParams,
};
use super::records::{self, Key};
use super::replay::{Entry, Loaded, Replay};
use super::state::{JoinResult, State};
use super::store::MemoryLog;

pub(super) fn config(initial_delay_ms: u64) -> GroupConfig {
    GroupConfig {
        min_session_timeout_ms: 6000,
        max_session_timeout_ms: 1_800_000,
        initial_rebalance_delay_ms: initial_delay_ms,
        offsets_retention_ms: 7 * 24 * 3600 * 1000,
        offsets_retention_check_interval_ms: 600_000,
        offset_metadata_max_bytes: 4096,
        consumer: Default::default(),
    }
}

/// The groups a replay of `log` gives (its records at their offsets, read as partition
/// `partition` of `__consumer_offsets`), with `markers` (producer id, commit) after them.
pub(super) fn replayed(
    log: &MemoryLog,
    partition: i32,
    markers: &[(i64, bool)],
) -> HashMap<String, Loaded> {
    let mut r = Replay::default();
    let producers = log.producers.lock().unwrap();
    for (i, (_, k, v)) in log.appended.lock().unwrap().iter().enumerate() {
        r.apply(Entry::Record {
            partition,
            offset: i as i64,
            producer: producers[i].map(|p| p.id),
            key: k.clone(),
            value: v.clone(),
        });
    }
    for &(producer_id, commit) in markers {
        r.apply(Entry::Marker {
            partition,
            producer_id,
            commit,
        });
    }
    r.finish()
}

pub(super) fn coordinator(initial_delay_ms: u64) -> (Arc<Coordinator>, Arc<MemoryLog>) {
    let log = Arc::new(MemoryLog::default());
    (Coordinator::new(config(initial_delay_ms), log.clone()), log)
}

pub(super) fn join_params(
    group: &str,
    member: &str,
    instance: Option<&str>,
    protocols: &[&str],
) -> JoinParams {
    JoinParams {
        group_id: group.into(),
        member_id: member.into(),
        instance_id: instance.map(String::from),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|p| (p.to_string(), Bytes::from(format!("meta-{p}"))))
            .collect(),
        require_known_member_id: true,
        supports_skip_assignment: false,
    }
}

/// A dynamic member joining from scratch (MEMBER_ID_REQUIRED, then the real join).
pub(super) async fn join_new(c: &Arc<Coordinator>, group: &str, protocols: &[&str]) -> JoinResult {
    let first = c.join(join_params(group, "", None, protocols)).await;
    assert_eq!(first.error, E::MemberIdRequired.code());
    c.join(join_params(group, &first.member_id, None, protocols))
        .await
}

/// A simple consumer's commit (generation -1, no member) of `t`-0 at `offset`.
pub(super) fn simple_commit(group: &str, offset: i64) -> CommitParams {
    CommitParams {
        group_id: group.into(),
        member_id: String::new(),
        instance_id: None,
        generation: -1,
        version: 8,
        offsets: vec![CommitOffset {
            topic: "t".into(),
            partition: 0,
            offset,
            leader_epoch: -1,
            metadata: None,
        }],
    }
}

pub(super) fn spawn_join(
    c: &Arc<Coordinator>,
    p: JoinParams,
) -> tokio::task::JoinHandle<JoinResult> {
    let c = c.clone();
    tokio::spawn(async move { c.join(p).await })
}

pub(super) async fn sync(
    c: &Arc<Coordinator>,
    group: &str,
    r: &JoinResult,
    assignments: Vec<(String, Bytes)>,
) -> super::state::SyncResult {
    c.sync(SyncParams {
        group_id: group.into(),
        member_id: r.member_id.clone(),
        instance_id: None,
        generation: r.generation,
        protocol_type: None,
        protocol_name: None,
        assignments,
    })
    .await
}

async fn state(c: &Arc<Coordinator>, group: &str) -> State {
    c.describe(group)
        .await
        .unwrap()
        .map(|d| d.state)
        .unwrap_or(State::Dead)
}

#[tokio::test(start_paused = true)]
async fn single_member_lifecycle() {
    let (c, log) = coordinator(0);
    let r = join_new(&c, "g", &["range"]).await;
    assert_eq!(r.error, 0);
    assert_eq!(r.generation, 1);
    assert_eq!(r.leader, r.member_id);
    assert_eq!(r.members.len(), 1);
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    assert_eq!(state(&c, "g").await, State::CompletingRebalance);
    let s = sync(
        &c,
        "g",
        &r,
        vec![(r.member_id.clone(), Bytes::from_static(b"A"))],
    )
    .await;
    assert_eq!(s.error, 0);
    assert_eq!(&s.assignment[..], b"A");
    assert_eq!(state(&c, "g").await, State::Stable);
    // The assignment was persisted as GroupMetadata before the sync was answered.
    assert!(log.appended.lock().unwrap().iter().any(|(_, k, v)| {
        records::decode_key(k.clone()).unwrap() == Some(Key::Group { group: "g".into() })
            && v.is_some()
    }));
    assert_eq!(c.heartbeat("g", &r.member_id, None, 1).await, 0);
    assert_eq!(
        c.heartbeat("g", &r.member_id, None, 0).await,
        E::IllegalGeneration.code()
    );
    assert_eq!(
        c.heartbeat("g", "nobody", None, 1).await,
        E::UnknownMemberId.code()
    );
    let (top, errs) = c.leave("g", &[(r.member_id.clone(), None)]).await;
    assert_eq!((top, errs), (0, vec![0]));
    assert_eq!(state(&c, "g").await, State::Empty);
}

#[tokio::test(start_paused = true)]
async fn session_timeout_expires_silent_member() {
    let (c, _) = coordinator(0);
    let a = join_new(&c, "g", &["range"]).await;
    sync(&c, "g", &a, vec![]).await;
    // A second member triggers a rebalance; A rejoins, both get generation 2.
    let b_first = c.join(join_params("g", "", None, &["range"])).await;
    let b = spawn_join(&c, join_params("g", &b_first.member_id, None, &["range"]));
    tokio::task::yield_now().await;
    assert_eq!(
        c.heartbeat("g", &a.member_id, None, 1).await,
        E::RebalanceInProgress.code()
    );
    let a2 = c
        .join(join_params("g", &a.member_id, None, &["range"]))
        .await;
    let b = b.await.unwrap();
    assert_eq!((a2.generation, b.generation), (2, 2));
    assert_eq!(a2.members.len(), 2, "the leader sees both members");
    assert!(b.members.is_empty());
    let sa = sync(
        &c,
        "g",
        &a2,
        vec![
            (a2.member_id.clone(), Bytes::from_static(b"0")),
            (b.member_id.clone(), Bytes::from_static(b"1")),
        ],
    );
    let sb = sync(&c, "g", &b, vec![]);
    let (sa, sb) = tokio::join!(sa, sb);
    assert_eq!(
        (&sa.assignment[..], &sb.assignment[..]),
        (&b"0"[..], &b"1"[..])
    );
    // A keeps heartbeating, B goes silent: after B's 10 s session, the group rebalances.
    for _ in 0..8 {
        advance(Duration::from_secs(3)).await;
        for _ in 0..10 {
            tokio::task::yield_now().await; // let the timers that fired run
        }
        let e = c.heartbeat("g", &a.member_id, None, 2).await;
        if e != 0 {
            assert_eq!(e, E::RebalanceInProgress.code());
            break;
        }
    }
    assert_eq!(state(&c, "g").await, State::PreparingRebalance);
    let a3 = c
        .join(join_params("g", &a.member_id, None, &["range"]))
        .await;
    assert_eq!(a3.generation, 3);
    assert_eq!(a3.members.len(), 1, "B was removed");
    assert_eq!(
        c.heartbeat("g", &b.member_id, None, 2).await,
        E::UnknownMemberId.code()
    );
}

#[tokio::test(start_paused = true)]
async fn rebalance_timeout_drops_members_that_do_not_rejoin() {
    let (c, _) = coordinator(0);
    let a = join_new(&c, "g", &["range"]).await;
    sync(&c, "g", &a, vec![]).await;
    let b_first = c.join(join_params("g", "", None, &["range"])).await;
    let b = spawn_join(&c, join_params("g", &b_first.member_id, None, &["range"]));
    // A heartbeats (so its session lives) but never rejoins: the join phase ends at the
    // rebalance timeout (30 s) without it.
    let start = tokio::time::Instant::now();
    let hb = {
        let (c, id) = (c.clone(), a.member_id.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                c.heartbeat("g", &id, None, 1).await;
            }
        })
    };
    let b = b.await.unwrap();
    hb.abort();
    assert_eq!(b.error, 0);
    assert!(
        start.elapsed() >= Duration::from_secs(30),
        "waited {:?}",
        start.elapsed()
    );
    assert_eq!(b.members.len(), 1, "B is alone and the leader");
    assert_eq!(b.leader, b.member_id);
}

#[tokio::test(start_paused = true)]
async fn initial_delay_collects_members() {
    let (c, _) = coordinator(3000);
    let start = tokio::time::Instant::now();
    let a_first = c.join(join_params("g", "", None, &["range"])).await;
    let a = spawn_join(&c, join_params("g", &a_first.member_id, None, &["range"]));
    advance(Duration::from_millis(2000)).await;
    let b_first = c.join(join_params("g", "", None, &["range"])).await;
    let b = spawn_join(&c, join_params("g", &b_first.member_id, None, &["range"]));
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    // One generation with both, formed after the delay was extended once for B.
    assert_eq!((a.generation, b.generation), (1, 1));
    assert!(
        start.elapsed() >= Duration::from_millis(6000),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn protocol_selection_and_inconsistency() {
    let (c, _) = coordinator(0);
    let a = spawn_join(&c, {
        let mut p = join_params("g", "", None, &["roundrobin", "range"]);
        p.require_known_member_id = false;
        p
    });
    let b = spawn_join(&c, {
        let mut p = join_params("g", "", None, &["range", "roundrobin"]);
        p.require_known_member_id = false;
        p
    });
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    assert_eq!(a.protocol_name, b.protocol_name);
    // A member with no protocol in common is refused.
    let r = c.join(join_params("g", "", None, &["sticky"])).await;
    assert_eq!(r.error, E::InconsistentGroupProtocol.code());
    let mut p = join_params("g", "", None, &["range"]);
    p.session_timeout_ms = 1000;
    assert_eq!(c.join(p).await.error, E::InvalidSessionTimeout.code());
}

#[tokio::test(start_paused = true)]
async fn static_member_rejoins_without_rebalance_and_fences_old_id() {
    let (c, _) = coordinator(0);
    let mut pa = join_params("g", "", Some("ia"), &["range"]);
    pa.require_known_member_id = false;
    let a = c.join(pa).await;
    assert_eq!(a.error, 0);
    sync(&c, "g", &a, vec![]).await;
    let b = spawn_join(&c, join_params("g", "", Some("ib"), &["range"]));
    tokio::task::yield_now().await;
    let a2 = c
        .join(join_params("g", &a.member_id, Some("ia"), &["range"]))
        .await;
    let b = b.await.unwrap();
    let (sa, sb) = tokio::join!(
        sync(
            &c,
            "g",
            &a2,
            vec![
                (a2.member_id.clone(), Bytes::from_static(b"A")),
                (b.member_id.clone(), Bytes::from_static(b"B"))
            ]
        ),
        sync(&c, "g", &b, vec![])
    );
    assert_eq!((sa.error, sb.error), (0, 0));
    // B restarts: unknown member id, same instance id. No rebalance: same generation.
    let b2 = c.join(join_params("g", "", Some("ib"), &["range"])).await;
    assert_eq!(b2.error, 0);
    assert_eq!(b2.generation, b.generation);
    assert_ne!(b2.member_id, b.member_id);
    assert_eq!(state(&c, "g").await, State::Stable);
    let s = sync(&c, "g", &b2, vec![]).await;
    assert_eq!(&s.assignment[..], b"B");
    // The old incarnation is fenced.
    assert_eq!(
        c.heartbeat("g", &b.member_id, Some("ib"), b.generation)
            .await,
        E::FencedInstanceId.code()
    );
    assert_eq!(
        c.heartbeat("g", &a2.member_id, Some("ia"), b.generation)
            .await,
        0
    );
}

#[tokio::test(start_paused = true)]
async fn commits_and_fetches() {
    let (c, log) = coordinator(0);
    let commit = |g: &str, generation: i32, member: &str| CommitParams {
        group_id: g.into(),
        member_id: member.into(),
        instance_id: None,
        generation,
        version: 8,
        offsets: vec![CommitOffset {
            topic: "t".into(),
            partition: 0,
            offset: 42,
            leader_epoch: 3,
            metadata: Some("m".into()),
        }],
    };
    // A simple consumer (generation -1) creates the group.
    assert_eq!(c.commit(commit("simple", -1, "")).await, Ok(vec![0]));
    let f = c
        .fetch_offsets("simple", Some(vec![("t".into(), vec![0, 1])]), false)
        .await
        .unwrap();
    assert_eq!(
        (
            f[0].1[0].offset,
            f[0].1[0].metadata.as_str(),
            f[0].1[0].leader_epoch
        ),
        (42, "m", 3)
    );
    assert_eq!(f[0].1[1].offset, -1);
    // Unknown group with a generation: ILLEGAL_GENERATION (GROUP_ID_NOT_FOUND from v9).
    assert_eq!(
        c.commit(commit("nope", 1, "x")).await,
        Err(E::IllegalGeneration.code())
    );
    // A live group: member and generation are checked.
    let r = join_new(&c, "g", &["range"]).await;
    assert_eq!(
        c.commit(commit("g", 1, &r.member_id)).await,
        Err(E::RebalanceInProgress.code())
    );
    sync(&c, "g", &r, vec![]).await;
    assert_eq!(c.commit(commit("g", 1, &r.member_id)).await, Ok(vec![0]));
    assert_eq!(
        c.commit(commit("g", 0, &r.member_id)).await,
        Err(E::IllegalGeneration.code())
    );
    assert_eq!(
        c.commit(commit("g", 1, "other")).await,
        Err(E::UnknownMemberId.code())
    );
    assert_eq!(
        c.commit(commit("g", -1, "")).await,
        Err(E::UnknownMemberId.code())
    );
    assert_eq!(c.delete_group("g").await, E::NonEmptyGroup.code());
    // A failed append is reported, and nothing is committed.
    log.fail.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut p = commit("simple", -1, "");
    p.offsets[0].offset = 99;
    assert_eq!(
        c.commit(p).await,
        Ok(vec![E::CoordinatorNotAvailable.code()])
    );
    log.fail.store(false, std::sync::atomic::Ordering::SeqCst);
    let all = c.fetch_offsets("simple", None, false).await.unwrap();
    assert_eq!(all[0].1[0].offset, 42);
    // Replaying the log gives the same offsets back.
    let (c2, _) = coordinator(0);
    c2.install(replayed(&log, 0, &[]));
    let f = c2.fetch_offsets("simple", None, false).await.unwrap();
    assert_eq!(f[0].1[0].offset, 42);
    assert_eq!(
        c2.describe("g").await.unwrap().unwrap().state,
        State::Stable
    );
    // Deleting the simple group writes tombstones.
    assert_eq!(c.delete_group("simple").await, 0);
    assert_eq!(c.delete_group("simple").await, E::GroupIdNotFound.code());
}

#[tokio::test(start_paused = true)]
async fn offsets_of_empty_groups_expire() {
    let (c, _) = coordinator(0);
    c.commit(simple_commit("s", 1)).await.unwrap();
    let now = crate::clock::now_ms();
    c.expire_offsets(now + 1000).await;
    assert_eq!(c.list().await.len(), 1);
    c.expire_offsets(now + 7 * 24 * 3600 * 1000 + 1000).await;
    assert!(
        c.list().await.is_empty(),
        "the empty group went with its offsets"
    );
}

const BOTH: &[&str] = &["range", "roundrobin"];

/// Three static members `ia`, `ib`, `ic` (in that order), Stable at generation 1 with
/// assignments A, B, C; `ia` leads. Each supports range and roundrobin; range is selected.
/// The coordinator's initial rebalance delay gathers the three into one generation.
async fn stable_static_group(c: &Arc<Coordinator>) -> Vec<JoinResult> {
    let params = |inst: &str| {
        let mut p = join_params("g", "", Some(inst), BOTH);
        p.require_known_member_id = false;
        p
    };
    let mut joins = Vec::new();
    for inst in ["ia", "ib", "ic"] {
        joins.push(spawn_join(c, params(inst)));
        tokio::task::yield_now().await;
    }
    let mut rs = Vec::new();
    for j in joins {
        rs.push(j.await.unwrap());
    }
    assert!(rs.iter().all(|r| r.error == 0 && r.generation == 1));
    assert_eq!(rs[0].protocol_name.as_deref(), Some("range"));
    assert!(rs[0].member_id.starts_with("ia-"));
    assert_eq!(rs[0].leader, rs[0].member_id);
    let assignment: Vec<(String, Bytes)> = rs
        .iter()
        .zip([b"A", b"B", b"C"])
        .map(|(r, a)| (r.member_id.clone(), Bytes::from_static(a)))
        .collect();
    let (sa, sb, sc) = tokio::join!(
        sync(c, "g", &rs[0], assignment),
        sync(c, "g", &rs[1], vec![]),
        sync(c, "g", &rs[2], vec![])
    );
    assert_eq!(
        [&sa.assignment[..], &sb.assignment[..], &sc.assignment[..]],
        [b"A", b"B", b"C"]
    );
    assert_eq!(state(c, "g").await, State::Stable);
    rs
}

/// A static member's JoinGroup after a restart (unknown member id, same instance id).
fn static_rejoin(inst: &str, protocols: &[&str], version9: bool) -> JoinParams {
    let mut p = join_params("g", "", Some(inst), protocols);
    p.require_known_member_id = false;
    p.supports_skip_assignment = version9;
    p
}

/// The members still in generation 1 heartbeat without being asked to rejoin.
async fn no_rebalance(c: &Arc<Coordinator>, members: &[(&str, &str)]) {
    assert_eq!(state(c, "g").await, State::Stable);
    for (id, inst) in members {
        assert_eq!(c.heartbeat("g", id, Some(inst), 1).await, 0, "{inst}");
    }
}

#[tokio::test(start_paused = true)]
async fn static_leader_restart_below_v9_keeps_generation() {
    let (c, _) = coordinator(3000);
    let rs = stable_static_group(&c).await;
    let (a, b, cc) = (&rs[0], &rs[1], &rs[2]);
    // The leader restarts within its session timeout. Below v9 it is told the old leader id,
    // so it is a follower of its former self and gets no member list.
    let a2 = c.join(static_rejoin("ia", BOTH, false)).await;
    assert_eq!(a2.error, 0);
    assert_eq!(a2.generation, 1);
    assert_ne!(a2.member_id, a.member_id);
    assert_eq!(a2.leader, a.member_id);
    assert!(a2.members.is_empty());
    assert!(!a2.skip_assignment);
    no_rebalance(&c, &[(&b.member_id, "ib"), (&cc.member_id, "ic")]).await;
    // Its SyncGroup hands back the assignment it had; the new id now leads.
    let s = sync(&c, "g", &a2, vec![]).await;
    assert_eq!((s.error, &s.assignment[..]), (0, &b"A"[..]));
    assert_eq!(
        c.heartbeat("g", &a.member_id, Some("ia"), 1).await,
        E::FencedInstanceId.code()
    );
    let d = c.describe("g").await.unwrap().unwrap();
    assert_eq!(d.members[0].member_id, a2.member_id, "join order is kept");
    // A later rebalance is led by the new id.
    let a3 = spawn_join(&c, join_params("g", &a2.member_id, Some("ia"), BOTH));
    tokio::task::yield_now().await;
    let b2 = spawn_join(&c, join_params("g", &b.member_id, Some("ib"), BOTH));
    let c2 = spawn_join(&c, join_params("g", &cc.member_id, Some("ic"), BOTH));
    let (a3, _, _) = (a3.await.unwrap(), b2.await.unwrap(), c2.await.unwrap());
    assert_eq!((a3.generation, &a3.leader), (2, &a2.member_id));
    assert_eq!(a3.members.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn static_leader_restart_v9_skips_assignment() {
    let (c, log) = coordinator(3000);
    let rs = stable_static_group(&c).await;
    let writes = log.appended.lock().unwrap().len();
    let a2 = c.join(static_rejoin("ia", BOTH, true)).await;
    assert_eq!((a2.error, a2.generation), (0, 1));
    assert_eq!(a2.leader, a2.member_id);
    assert!(a2.skip_assignment);
    assert_eq!(a2.members.len(), 3, "the leader gets the members");
    assert!(a2.members.iter().any(|(id, _, _)| *id == a2.member_id));
    assert_eq!(
        log.appended.lock().unwrap().len(),
        writes + 1,
        "the new member id is persisted before the answer"
    );
    no_rebalance(&c, &[(&rs[1].member_id, "ib"), (&rs[2].member_id, "ic")]).await;
    let s = sync(&c, "g", &a2, vec![]).await;
    assert_eq!(&s.assignment[..], b"A");
}

#[tokio::test(start_paused = true)]
async fn static_follower_restart_with_new_subscription_keeps_generation() {
    let (c, _) = coordinator(3000);
    let rs = stable_static_group(&c).await;
    // New metadata for the same protocol (a changed subscription): no rebalance.
    let mut p = static_rejoin("ib", BOTH, true);
    p.protocols[0].1 = Bytes::from_static(b"other subscription");
    let b2 = c.join(p).await;
    assert_eq!((b2.error, b2.generation), (0, 1));
    assert_eq!(b2.leader, rs[0].member_id);
    assert!(b2.members.is_empty() && !b2.skip_assignment);
    no_rebalance(&c, &[(&rs[0].member_id, "ia"), (&rs[2].member_id, "ic")]).await;
    assert_eq!(&sync(&c, "g", &b2, vec![]).await.assignment[..], b"B");
}

#[tokio::test(start_paused = true)]
async fn static_restart_that_changes_the_protocol_rebalances() {
    let (c, _) = coordinator(3000);
    let rs = stable_static_group(&c).await;
    // ic comes back supporting roundrobin only: the next generation's protocol would change.
    let c2 = spawn_join(&c, static_rejoin("ic", &["roundrobin"], true));
    tokio::task::yield_now().await;
    assert!(!c2.is_finished(), "waits for the join phase");
    assert_eq!(state(&c, "g").await, State::PreparingRebalance);
    assert_eq!(
        c.heartbeat("g", &rs[0].member_id, Some("ia"), 1).await,
        E::RebalanceInProgress.code()
    );
}

#[tokio::test(start_paused = true)]
async fn static_restart_whose_write_fails_is_undone() {
    let (c, log) = coordinator(3000);
    let rs = stable_static_group(&c).await;
    log.fail.store(true, std::sync::atomic::Ordering::SeqCst);
    let a2 = c.join(static_rejoin("ia", BOTH, true)).await;
    log.fail.store(false, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(a2.error, E::CoordinatorNotAvailable.code());
    assert_eq!((a2.member_id.as_str(), a2.generation), ("", 1));
    assert_eq!(a2.leader, rs[0].member_id);
    // The old incarnation is still the member and the leader.
    no_rebalance(&c, &[(&rs[0].member_id, "ia"), (&rs[1].member_id, "ib")]).await;
    let d = c.describe("g").await.unwrap().unwrap();
    assert_eq!(d.members[0].member_id, rs[0].member_id);
}
