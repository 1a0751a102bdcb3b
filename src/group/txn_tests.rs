//! Transactional offset commits on a paused tokio clock against an in-memory
//! `__consumer_offsets`: TxnOffsetCommit's checks (as Kafka 4.4 answers them), offsets
//! pending until `complete_txn`, OffsetFetch with require_stable, the replay of the same log,
//! and deletion and expiry with open transactions.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use kafka_protocol::ResponseError as E;

use super::coordinator::{CommitOffset, Coordinator, FetchedOffset, TxnCommitParams};
use super::records::{self, Key};
use super::store::{Leader, MemoryLog, TxnProducer};
use super::tests::{coordinator, join_new, join_params, replayed, simple_commit, spawn_join, sync};
use crate::group::loader::PartitionLoads;

const UNSTABLE: i16 = 88;

fn offset(topic: &str, partition: i32, offset: i64) -> CommitOffset {
    CommitOffset {
        topic: topic.into(),
        partition,
        offset,
        leader_epoch: -1,
        metadata: Some(format!("at {offset}")),
    }
}

/// Producer `pid` (epoch 0) commits `t`-0 at `at` to `group`, as a simple consumer would.
fn txn(group: &str, pid: i64, at: i64) -> TxnCommitParams {
    TxnCommitParams {
        group_id: group.into(),
        member_id: String::new(),
        instance_id: None,
        generation: -1,
        producer_id: pid,
        producer_epoch: 0,
        offsets: vec![offset("t", 0, at)],
    }
}

fn as_member(
    group: &str,
    member: &str,
    instance: Option<&str>,
    generation: i32,
) -> TxnCommitParams {
    TxnCommitParams {
        member_id: member.into(),
        instance_id: instance.map(String::from),
        generation,
        ..txn(group, 1, 5)
    }
}

async fn fetched(
    c: &Coordinator,
    group: &str,
    partitions: &[i32],
    stable: bool,
) -> Vec<(i64, i16)> {
    let f = c
        .fetch_offsets(group, Some(vec![("t".into(), partitions.to_vec())]), stable)
        .await
        .unwrap();
    f[0].1.iter().map(|o| (o.offset, o.error)).collect()
}

/// OffsetFetch of every committed offset of `group`: (topic, partition, offset, error).
async fn fetched_all(c: &Coordinator, group: &str, stable: bool) -> Vec<(String, i32, i64, i16)> {
    let f = c.fetch_offsets(group, None, stable).await.unwrap();
    f.into_iter()
        .flat_map(|(t, ps)| {
            ps.into_iter()
                .map(move |o: FetchedOffset| (t.clone(), o.partition, o.offset, o.error))
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn members_generations_and_instances_are_checked_as_kafka_does() {
    let (c, _) = coordinator(0);
    // An unknown group: ILLEGAL_GENERATION with a generation, a simple group without.
    assert_eq!(
        c.commit_txn(as_member("new", "", None, 5)).await,
        Err(E::IllegalGeneration.code())
    );
    assert_eq!(
        c.commit_txn(as_member("new", "m", None, 5)).await,
        Err(E::IllegalGeneration.code())
    );
    assert_eq!(
        c.commit_txn(as_member("new", "m", None, -1)).await,
        Ok(vec![0])
    );

    // A dynamic member: accepted while the group completes its rebalance (a plain commit
    // would get REBALANCE_IN_PROGRESS), then checked.
    let r = join_new(&c, "g", &["range"]).await;
    let (m, generation) = (r.member_id.clone(), r.generation);
    assert_eq!(
        c.commit_txn(as_member("g", &m, None, generation)).await,
        Ok(vec![0])
    );
    sync(&c, "g", &r, vec![]).await;
    for (p, want) in [
        (
            as_member("g", "bogus", None, generation),
            Err(E::UnknownMemberId.code()),
        ),
        (
            as_member("g", &m, None, generation + 1),
            Err(E::IllegalGeneration.code()),
        ),
        // No member at all (TxnOffsetCommit below v3): accepted in a live group.
        (as_member("g", "", None, -1), Ok(vec![0])),
        (
            as_member("g", &m, Some("i9"), generation),
            Err(E::UnknownMemberId.code()),
        ),
        (
            as_member("g", &m, None, -1),
            Err(E::IllegalGeneration.code()),
        ),
        (as_member("g", &m, None, generation), Ok(vec![0])),
    ] {
        assert_eq!(c.commit_txn(p).await, want);
    }

    // A static member: another member id with its instance id is fenced.
    let mut jp = join_params("s", "", Some("i1"), &["range"]);
    jp.require_known_member_id = false;
    let r = spawn_join(&c, jp).await.unwrap();
    sync(&c, "s", &r, vec![]).await;
    let (m, generation) = (r.member_id.clone(), r.generation);
    for (p, want) in [
        (
            as_member("s", "other", Some("i1"), generation),
            Err(E::FencedInstanceId.code()),
        ),
        (as_member("s", &m, Some("i1"), generation), Ok(vec![0])),
        (
            as_member("s", &m, Some("i2"), generation),
            Err(E::UnknownMemberId.code()),
        ),
    ] {
        assert_eq!(c.commit_txn(p).await, want);
    }

    // Metadata too large fails its own partition only.
    let mut p = txn("new", 2, 1);
    p.offsets.push(CommitOffset {
        metadata: Some("x".repeat(5000)),
        ..offset("t", 1, 2)
    });
    assert_eq!(
        c.commit_txn(p).await,
        Ok(vec![0, E::OffsetMetadataTooLarge.code()])
    );
}

#[tokio::test(start_paused = true)]
async fn offsets_are_pending_until_the_marker_and_replay_agrees() {
    let (c, log) = coordinator(0);
    assert_eq!(c.commit(simple_commit("g", 5)).await, Ok(vec![0]));
    let mut p = txn("g", 7, 10);
    p.offsets.push(offset("t", 1, 11));
    assert_eq!(c.commit_txn(p).await, Ok(vec![0, 0]));
    // The batch carries the producer; the offsets are invisible, and unstable.
    assert_eq!(
        log.producers.lock().unwrap().last(),
        Some(&Some(TxnProducer { id: 7, epoch: 0 }))
    );
    assert_eq!(
        fetched(&c, "g", &[0, 1], false).await,
        vec![(5, 0), (-1, 0)]
    );
    assert_eq!(
        fetched(&c, "g", &[0, 1, 2], true).await,
        vec![(-1, UNSTABLE), (-1, UNSTABLE), (-1, 0)]
    );
    // "All offsets" lists the committed ones only; with require_stable they are unstable.
    assert_eq!(
        fetched_all(&c, "g", false).await,
        vec![("t".into(), 0, 5, 0)]
    );
    assert_eq!(
        fetched_all(&c, "g", true).await,
        vec![("t".into(), 0, -1, UNSTABLE)]
    );

    // A replay of the log up to here: the transaction is still open.
    let (open, _) = coordinator(0);
    open.install(replayed(&log, 0, &[]));
    assert_eq!(
        fetched(&open, "g", &[0, 1], true).await,
        vec![(-1, UNSTABLE), (-1, UNSTABLE)]
    );

    // Another partition's marker, or another producer's, changes nothing.
    assert_eq!(c.complete_txn(1, 7, true).await, Ok(()));
    assert_eq!(c.complete_txn(0, 8, true).await, Ok(()));
    assert_eq!(fetched(&c, "g", &[0], true).await, vec![(-1, UNSTABLE)]);
    assert_eq!(c.complete_txn(0, 7, true).await, Ok(()));
    assert_eq!(
        fetched(&c, "g", &[0, 1], true).await,
        vec![(10, 0), (11, 0)]
    );
    // Marker for the already completed transaction: nothing more.
    assert_eq!(c.complete_txn(0, 7, false).await, Ok(()));
    assert_eq!(
        fetched(&c, "g", &[0, 1], true).await,
        vec![(10, 0), (11, 0)]
    );

    // An aborted transaction leaves the committed offsets as they were.
    assert_eq!(c.commit_txn(txn("g", 8, 20)).await, Ok(vec![0]));
    assert_eq!(fetched(&c, "g", &[0], true).await, vec![(-1, UNSTABLE)]);
    assert_eq!(c.complete_txn(0, 8, false).await, Ok(()));
    assert_eq!(fetched(&c, "g", &[0], true).await, vec![(10, 0)]);

    // The replay with the same markers gives the same offsets.
    let (again, _) = coordinator(0);
    again.install(replayed(&log, 0, &[(7, true), (8, false)]));
    assert_eq!(
        fetched(&again, "g", &[0, 1], true).await,
        vec![(10, 0), (11, 0)]
    );
    // The replayed open transaction ends live.
    assert_eq!(open.complete_txn(0, 7, true).await, Ok(()));
    assert_eq!(
        fetched(&open, "g", &[0, 1], true).await,
        vec![(10, 0), (11, 0)]
    );
}

#[tokio::test(start_paused = true)]
async fn a_plain_commit_after_the_transactional_one_is_kept() {
    let (c, _) = coordinator(0);
    assert_eq!(c.commit_txn(txn("g", 7, 10)).await, Ok(vec![0]));
    assert_eq!(c.commit(simple_commit("g", 20)).await, Ok(vec![0]));
    assert_eq!(fetched(&c, "g", &[0], false).await, vec![(20, 0)]);
    c.complete_txn(0, 7, true).await.unwrap();
    assert_eq!(fetched(&c, "g", &[0], true).await, vec![(20, 0)]);
    // Within one transaction the last commit wins.
    assert_eq!(c.commit_txn(txn("g", 9, 30)).await, Ok(vec![0]));
    assert_eq!(c.commit_txn(txn("g", 9, 29)).await, Ok(vec![0]));
    c.complete_txn(0, 9, true).await.unwrap();
    assert_eq!(fetched(&c, "g", &[0], true).await, vec![(29, 0)]);
}

#[tokio::test(start_paused = true)]
async fn a_failed_write_leaves_nothing_pending() {
    let (c, log) = coordinator(0);
    log.fail.store(true, Ordering::SeqCst);
    assert_eq!(
        c.commit_txn(txn("g", 7, 10)).await,
        Ok(vec![E::CoordinatorNotAvailable.code()])
    );
    log.fail.store(false, Ordering::SeqCst);
    assert_eq!(fetched(&c, "g", &[0], true).await, vec![(-1, 0)]);
    assert_eq!(c.complete_txn(0, 7, true).await, Ok(()));
    assert_eq!(fetched(&c, "g", &[0], true).await, vec![(-1, 0)]);
}

#[tokio::test(start_paused = true)]
async fn deleting_a_group_or_an_offset_drops_pending_offsets() {
    let (c, log) = coordinator(0);
    assert_eq!(c.commit(simple_commit("g", 5)).await, Ok(vec![0]));
    let mut p = txn("g", 7, 10);
    p.offsets.push(offset("t", 1, 11));
    c.commit_txn(p).await.unwrap();
    // DeleteGroups tombstones the committed and the pending-only partitions.
    assert_eq!(c.delete_group("g").await, 0);
    let tombstones: Vec<Key> = log
        .appended
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, _, v)| v.is_none())
        .map(|(_, k, _)| records::decode_key(k.clone()).unwrap().unwrap())
        .collect();
    for partition in [0, 1] {
        assert!(tombstones.contains(&Key::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition,
        }));
    }
    assert!(tombstones.contains(&Key::Group { group: "g".into() }));
    c.complete_txn(0, 7, true).await.unwrap();
    assert_eq!(
        fetched(&c, "g", &[0, 1], true).await,
        vec![(-1, 0), (-1, 0)]
    );
    // The replay agrees: the marker after the tombstones commits nothing.
    let (r, _) = coordinator(0);
    r.install(replayed(&log, 0, &[(7, true)]));
    assert_eq!(
        fetched(&r, "g", &[0, 1], true).await,
        vec![(-1, 0), (-1, 0)]
    );

    // OffsetDelete of a partition whose only offset is pending.
    c.commit_txn(txn("h", 8, 12)).await.unwrap();
    assert_eq!(
        c.delete_offsets("h", vec![("t".into(), 0)]).await,
        Ok(vec![0])
    );
    assert_eq!(fetched(&c, "h", &[0], true).await, vec![(-1, 0)]);
    c.complete_txn(0, 8, true).await.unwrap();
    assert_eq!(fetched(&c, "h", &[0], true).await, vec![(-1, 0)]);
}

#[tokio::test(start_paused = true)]
async fn offsets_pending_in_a_transaction_do_not_expire() {
    let (c, _) = coordinator(0);
    let retention = c.config().offsets_retention_ms;
    assert_eq!(c.commit(simple_commit("g", 5)).await, Ok(vec![0]));
    c.commit_txn(txn("g", 7, 10)).await.unwrap();
    // A simple group's offset expires by its commit time, but not while a transaction
    // holds one for its partition; nor is the group deleted with a transaction open.
    let later = crate::clock::now_ms() + retention + 1;
    c.expire_offsets(later).await;
    assert_eq!(fetched(&c, "g", &[0], false).await, vec![(5, 0)]);
    c.complete_txn(0, 7, false).await.unwrap();
    c.expire_offsets(later).await;
    assert_eq!(fetched(&c, "g", &[0], false).await, vec![(-1, 0)]);
    assert!(
        c.describe("g").await.unwrap().is_none(),
        "the group is gone"
    );

    // A group holding nothing but an open transaction stays.
    c.commit_txn(txn("h", 8, 1)).await.unwrap();
    c.expire_offsets(later).await;
    assert!(c.describe("h").await.unwrap().is_some());
    c.complete_txn(0, 8, true).await.unwrap();
    assert_eq!(fetched(&c, "h", &[0], true).await, vec![(1, 0)]);
}

#[tokio::test(start_paused = true)]
async fn in_a_cluster_markers_need_the_partition_active_here() {
    let log = Arc::new(MemoryLog::default());
    let c = Coordinator::clustered(super::tests::config(0), log.clone());
    let n = 50;
    let home = records::partition_for("g", n);
    assert_eq!(
        c.complete_txn(home, 7, true).await,
        Err(E::NotCoordinator.code())
    );
    assert!(c.begin_load(home, 3, n));
    assert_eq!(
        c.complete_txn(home, 7, true).await,
        Err(E::CoordinatorLoadInProgress.code())
    );
    // The partition's replay holds an open transaction of producer 7 for "g" (written to
    // the same log before this broker led the partition).
    let before = Coordinator::new(super::tests::config(0), log.clone());
    before.commit_txn(txn("g", 7, 10)).await.unwrap();
    let loaded = replayed(&log, home, &[]);
    assert!(c.finish_load(home, 3, loaded));
    assert_eq!(fetched(&c, "g", &[0], true).await, vec![(-1, UNSTABLE)]);
    // New transactional commits go to the group's partition in the loaded epoch.
    c.commit_txn(txn("g", 9, 20)).await.unwrap();
    assert_eq!(
        log.targets.lock().unwrap().last(),
        Some(&Some(Leader {
            partition: home,
            epoch: 3
        }))
    );
    assert_eq!(c.complete_txn(home, 7, true).await, Ok(()));
    assert_eq!(fetched(&c, "g", &[0], true).await, vec![(-1, UNSTABLE)]);
    assert_eq!(c.complete_txn(home, 9, true).await, Ok(()));
    assert_eq!(fetched(&c, "g", &[0], true).await, vec![(20, 0)]);
    // Unloaded: the transactions of its groups are no longer completed here.
    c.commit_txn(txn("g", 11, 30)).await.unwrap();
    c.unload(home);
    assert_eq!(
        c.complete_txn(home, 11, true).await,
        Err(E::NotCoordinator.code())
    );
}
