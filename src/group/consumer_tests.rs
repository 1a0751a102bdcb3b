//! KIP-848 consumer groups through the coordinator and its log: a group replayed by another
//! coordinator (a restart, or a new coordinator in a cluster) answers its members at their
//! epochs; a group that is not there is GROUP_ID_NOT_FOUND; a failed write changes nothing.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kafka_protocol::ResponseError as E;
use tokio::time::advance;

use super::consumer::Assignment;
use super::consumer::heartbeat::Request;
use super::consumer::persist::tests::{self as persist_tests, topics};
use super::coordinator::{Coordinator, HeartbeatAnswer};
use super::store::MemoryLog;
use super::tests::{config, replayed};

fn join(id: &str) -> Request {
    persist_tests::join(id, None)
}

fn hb(a: &HeartbeatAnswer, owned: &Assignment) -> Request {
    Request {
        version: 1,
        member_id: a.member_id.clone(),
        member_epoch: a.member_epoch,
        rebalance_timeout_ms: -1,
        owned: Some(owned.clone()),
        client_id: format!("client-{}", a.member_id),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    }
}

fn coordinator() -> (Arc<Coordinator>, Arc<MemoryLog>) {
    let log = Arc::new(MemoryLog::default());
    (Coordinator::new(config(0), log.clone()), log)
}

/// Two members reconcile; the group replayed from the log into a second coordinator
/// answers both at their epochs, with the same assignments, and its group epoch stays.
#[tokio::test(start_paused = true)]
async fn a_replayed_group_keeps_its_members_and_epochs() {
    let (c, log) = coordinator();
    let ts = topics();
    let a = c.consumer_heartbeat("g", join("a"), &ts).await.unwrap();
    let b = c.consumer_heartbeat("g", join("b"), &ts).await.unwrap();
    let mut owned = std::collections::HashMap::new();
    owned.insert("a".to_string(), a.assignment.clone().unwrap());
    owned.insert("b".to_string(), b.assignment.clone().unwrap());
    let mut last = std::collections::HashMap::from([("a".to_string(), a), ("b".to_string(), b)]);
    for _ in 0..4 {
        for id in ["a", "b"] {
            let r = hb(&last[id], &owned[id]);
            let ans = c.consumer_heartbeat("g", r, &ts).await.unwrap();
            if let Some(asg) = &ans.assignment {
                owned.insert(id.to_string(), asg.clone());
            }
            last.insert(id.to_string(), ans);
        }
    }
    let before = c.consumer_describe("g").await.unwrap();
    assert_eq!(before.state().name(), "Stable");

    let (c2, _) = coordinator();
    c2.install(replayed(&log, 0, &[]));
    c2.start();
    let after = c2.consumer_describe("g").await.unwrap();
    assert_eq!(after.group_epoch, before.group_epoch);
    assert_eq!(after.assignment_epoch, before.assignment_epoch);
    for id in ["a", "b"] {
        let r = hb(&last[id], &owned[id]);
        let ans = c2.consumer_heartbeat("g", r, &ts).await.unwrap();
        assert_eq!(ans.member_epoch, last[id].member_epoch, "{id}");
        assert_eq!(after.members[id].assigned, owned[id], "{id}");
    }
    assert_eq!(
        c2.consumer_describe("g").await.unwrap().group_epoch,
        before.group_epoch
    );
    // The loaded members' sessions run: silent, they are removed, and so is the record of
    // them.
    advance(Duration::from_millis(46_000)).await;
    tokio::task::yield_now().await;
    let g = c2.consumer_describe("g").await.unwrap();
    assert!(g.members.is_empty(), "{:?}", g.members.keys());
}

#[tokio::test(start_paused = true)]
async fn an_unknown_group_is_not_found_and_a_failed_write_changes_nothing() {
    let (c, log) = coordinator();
    let ts = topics();
    let mut r = join("a");
    r.member_epoch = 3;
    r.rebalance_timeout_ms = -1;
    let e = c.consumer_heartbeat("nope", r, &ts).await.unwrap_err();
    assert_eq!(e.code, E::GroupIdNotFound.code());
    assert_eq!(e.message.as_deref(), Some("Consumer group nope not found."));

    let a = c.consumer_heartbeat("g", join("a"), &ts).await.unwrap();
    log.fail.store(true, Ordering::SeqCst);
    let e = c.consumer_heartbeat("g", join("b"), &ts).await.unwrap_err();
    assert_eq!(e.code, E::CoordinatorNotAvailable.code());
    log.fail.store(false, Ordering::SeqCst);
    let g = c.consumer_describe("g").await.unwrap();
    assert_eq!(g.members.keys().collect::<Vec<_>>(), ["a"]);
    assert_eq!(g.group_epoch, a.member_epoch);
}
