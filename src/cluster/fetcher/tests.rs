//! The replica fetcher against a leader over real sockets (`fake_leader`: real leader
//! partitions behind kafka-protocol's decoding and encoding), with real logs on disk.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::fake_leader::{FakeLeader, Fault};
use super::{FetcherConfig, FollowTarget, ReplicaFetchers};
use crate::cluster::Partition;
use crate::cluster::metadata::PartitionRecord;
use crate::cluster::partition::{FollowerFetch, ReplicaState};
use crate::log::batch::test_support::simple_batch;
use crate::log::{Log, LogConfig, now_ms};

const MAX: usize = 1 << 20;
const BROKER_EPOCH: i64 = 7;
/// The followers' node id.
const FOLLOWER: i32 = 2;

/// A replica of partition 0 of topic `topic` on node `node`, leading at `epoch` if `leader`
/// is `node`, else following it; replicas 1, 2 and 3, the ISR the leader and the follower.
fn replica(
    dir: &Path,
    topic: &str,
    id: Uuid,
    node: i32,
    leader: i32,
    epoch: i32,
) -> Arc<Partition> {
    let log = Log::open(
        &dir.join(format!("{topic}-0-{node}")),
        LogConfig::default(),
        false,
    )
    .unwrap();
    let state = ReplicaState {
        leader,
        leader_epoch: epoch,
        replicas: vec![1, 2, 3],
        isr: isr(leader),
    };
    Arc::new(Partition::new(Arc::from(topic), 0, id, node, log, state, 0))
}

/// The leader and the follower under test (node 3 never fetches, so it is left out).
fn isr(leader: i32) -> Vec<i32> {
    let mut isr = vec![leader, FOLLOWER];
    isr.dedup();
    isr
}

fn lead(p: &Partition, node: i32, epoch: i32) {
    let record = PartitionRecord {
        topic_id: p.topic_id,
        leader_epoch: epoch,
        partition_epoch: epoch,
        ..PartitionRecord::for_test(&[1, 2, 3], &isr(node), node)
    };
    assert!(p.become_leader(&record, now_ms()).unwrap());
}

fn produce(p: &Partition, batches: usize, records: usize) {
    for _ in 0..batches {
        let mut b = simple_batch(records, 1000, 16);
        p.append_as_leader(&mut b, None, MAX).unwrap();
    }
}

/// Every byte of the log up to its high watermark, whatever its segments.
fn log_bytes(p: &Partition) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = p.log_start_offset();
    while offset < p.high_watermark() {
        let s = p.read(offset, 64 << 20, true).unwrap();
        let mut buf = vec![0u8; s.len];
        if let Some(f) = &s.file {
            f.read_exact_at(&mut buf, s.position).unwrap();
        }
        for h in crate::log::batch::batches(&buf) {
            offset = h.unwrap().next_offset();
        }
        assert!(!buf.is_empty(), "nothing read at {offset}");
        out.extend(buf);
    }
    out
}

/// Copies `from`'s log into `to` by hand, as node `to_node` fetching (no fetcher).
fn copy(from: &Partition, to: &Partition, to_node: i32, epoch: i32) {
    loop {
        let pos = to.follower_position().unwrap();
        let fetch = FollowerFetch {
            offset: pos.fetch_offset,
            max_bytes: MAX,
            min_one_batch: true,
            current_leader_epoch: epoch,
            last_fetched_epoch: pos.last_fetched_epoch,
            log_start_offset: pos.log_start_offset,
            broker_epoch: BROKER_EPOCH,
        };
        let r = from.read_for_follower(to_node, &fetch, now_ms()).unwrap();
        if r.slice.len == 0 {
            return;
        }
        let mut buf = vec![0u8; r.slice.len];
        r.slice
            .file
            .as_ref()
            .unwrap()
            .read_exact_at(&mut buf, r.slice.position)
            .unwrap();
        to.append_as_follower(&buf, from.high_watermark(), now_ms())
            .unwrap();
    }
}

fn config() -> FetcherConfig {
    FetcherConfig {
        local_id: FOLLOWER,
        max_bytes: 1 << 20,
        // Small enough that catching up takes several fetches.
        partition_max_bytes: 600,
        min_bytes: 1,
        max_wait_ms: 200,
        backoff_ms: 20,
        security: crate::net::client::InterBroker::plaintext(),
    }
}

fn fetchers() -> ReplicaFetchers {
    ReplicaFetchers::new(
        config(),
        Arc::new(AtomicI64::new(BROKER_EPOCH)),
        CancellationToken::new(),
    )
}

fn target(p: &Arc<Partition>, leader: i32, epoch: i32) -> FollowTarget {
    FollowTarget {
        partition: p.clone(),
        leader,
        leader_epoch: epoch,
    }
}

fn addresses(leaders: &[(i32, &FakeLeader)]) -> HashMap<i32, String> {
    leaders
        .iter()
        .map(|(id, l)| (*id, l.addr.clone()))
        .collect()
}

/// Waits for `done`, failing after a generous bound (a hang guard, not a timing check).
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}

/// The follower holds the leader's whole log, byte for byte, and both high watermarks are
/// at its end.
async fn caught_up(leader: &Partition, follower: &Partition) {
    let done = || {
        let end = leader.log_end_offset();
        follower.log_end_offset() == end
            && leader.high_watermark() == end
            && follower.high_watermark() == end
    };
    for _ in 0..2000 {
        if done() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        done(),
        "the follower never caught up: leader log end {} high watermark {}, follower log end {} high watermark {}, {:?}",
        leader.log_end_offset(),
        leader.high_watermark(),
        follower.log_end_offset(),
        follower.high_watermark(),
        follower.follower_position()
    );
    assert_eq!(log_bytes(follower), log_bytes(leader));
}

/// A leader (node 1, epoch 0) with `batches` batches of 2 records, behind a fake leader
/// that first commits `faults`, and a fetcher following it, caught up.
struct Running {
    _tmp: tempfile::TempDir,
    leader: Arc<Partition>,
    follower: Arc<Partition>,
    fake: FakeLeader,
    fetchers: ReplicaFetchers,
}

async fn running(batches: usize, faults: &[Fault]) -> Running {
    let tmp = tempfile::tempdir().unwrap();
    let id = Uuid::new_v4();
    let leader = replica(tmp.path(), "t", id, 1, 1, 0);
    let follower = replica(tmp.path(), "t", id, FOLLOWER, 1, 0);
    produce(&leader, batches, 2);
    let fake = FakeLeader::start(vec![leader.clone()]).await;
    fake.inject(faults);
    let fetchers = fetchers();
    fetchers.update(vec![target(&follower, 1, 0)], &addresses(&[(1, &fake)]));
    caught_up(&leader, &follower).await;
    Running {
        _tmp: tmp,
        leader,
        follower,
        fake,
        fetchers,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_catches_up_byte_identical_with_the_high_watermark() {
    let tmp = tempfile::tempdir().unwrap();
    let id = Uuid::new_v4();
    let leader = replica(tmp.path(), "t", id, 1, 1, 0);
    let follower = replica(tmp.path(), "t", id, FOLLOWER, 1, 0);
    produce(&leader, 6, 3);
    // The ISR holds the follower: the leader's high watermark waits for its fetches.
    assert_eq!(leader.high_watermark(), 0);
    let fake = FakeLeader::start(vec![leader.clone()]).await;
    let f = fetchers();
    f.update(vec![target(&follower, 1, 0)], &addresses(&[(1, &fake)]));
    caught_up(&leader, &follower).await;
    assert_eq!(follower.log_end_offset(), 18);
    // More while it runs, in a later leader epoch.
    lead(&leader, 1, 1);
    assert!(follower.become_follower(1, 1).unwrap());
    f.update(vec![target(&follower, 1, 1)], &addresses(&[(1, &fake)]));
    produce(&leader, 4, 2);
    caught_up(&leader, &follower).await;
    assert_eq!(follower.follower_position().unwrap().last_fetched_epoch, 1);
    let seen = fake.fetches();
    assert!(seen.len() > 3, "several fetches: {}", seen.len());
    for s in &seen {
        assert_eq!((s.replica_id, s.replica_epoch), (FOLLOWER, BROKER_EPOCH));
        assert_eq!(s.partitions, vec![(id, 0)]);
    }
    // Nothing to truncate in the new epoch, but it asked.
    assert_eq!(fake.shared.epoch_requests.load(Ordering::SeqCst), 1);
    f.shutdown().await;
}

/// Node 2 led epoch 0 and wrote a tail node 1 never got; node 1 then led epoch 1 and wrote
/// its own. Node 2, following node 1 in epoch 1, must drop its tail and take node 1's.
async fn divergent_tail(lie_about_epochs: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let id = Uuid::new_v4();
    let old_leader = replica(tmp.path(), "t", id, FOLLOWER, FOLLOWER, 0);
    let new_leader = replica(tmp.path(), "t", id, 1, FOLLOWER, 0);
    produce(&old_leader, 3, 2);
    copy(&old_leader, &new_leader, 1, 0);
    assert_eq!(new_leader.log_end_offset(), 6);
    produce(&old_leader, 2, 2);
    lead(&new_leader, 1, 1);
    produce(&new_leader, 1, 3);
    assert!(old_leader.become_follower(1, 1).unwrap());
    assert_eq!(old_leader.log_end_offset(), 10);

    let fake = FakeLeader::start(vec![new_leader.clone()]).await;
    fake.shared
        .lie_about_epochs
        .store(lie_about_epochs, Ordering::SeqCst);
    let f = fetchers();
    f.update(vec![target(&old_leader, 1, 1)], &addresses(&[(1, &fake)]));
    caught_up(&new_leader, &old_leader).await;
    assert_eq!(old_leader.log_end_offset(), 9);
    assert_eq!(fake.shared.epoch_requests.load(Ordering::SeqCst), 1);
    let diverged = fake.shared.diverging_answers.load(Ordering::SeqCst);
    if lie_about_epochs {
        assert_eq!(diverged, 1, "the fetch revealed the divergence");
    } else {
        assert_eq!(diverged, 0, "OffsetForLeaderEpoch truncated first");
    }
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_divergent_tail_is_truncated_by_offset_for_leader_epoch() {
    divergent_tail(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_divergent_tail_is_truncated_by_the_fetch_diverging_epoch() {
    divergent_tail(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_the_leader_log_start_restarts_there() {
    let tmp = tempfile::tempdir().unwrap();
    let id = Uuid::new_v4();
    // The leader's log starts at 100 (everything before was deleted).
    let leader = replica(tmp.path(), "t", id, 1, 3, 0);
    leader.truncate_fully_and_start_at(100).unwrap();
    lead(&leader, 1, 1);
    produce(&leader, 3, 2);
    // The follower has offsets 0..4 of epoch 0.
    let follower = replica(tmp.path(), "t", id, FOLLOWER, FOLLOWER, 0);
    produce(&follower, 2, 2);
    assert!(follower.become_follower(1, 1).unwrap());
    let fake = FakeLeader::start(vec![leader.clone()]).await;
    let f = fetchers();
    f.update(vec![target(&follower, 1, 1)], &addresses(&[(1, &fake)]));
    caught_up(&leader, &follower).await;
    assert_eq!(follower.log_start_offset(), 100);
    assert_eq!(follower.log_end_offset(), 106);
    assert!(fake.shared.list_offsets_requests.load(Ordering::SeqCst) >= 1);
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fetcher_reconnects_after_the_leader_drops_the_connection() {
    let r = running(2, &[]).await;
    r.fake.inject(&[Fault::Drop, Fault::Drop]);
    eventually("both drops happened", || r.fake.faults_left() == 0).await;
    produce(&r.leader, 3, 2);
    caught_up(&r.leader, &r.follower).await;
    assert!(r.fake.connections() >= 3, "{}", r.fake.connections());
    r.fetchers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_answers_do_not_stop_the_fetcher() {
    let faults = [
        Fault::Garbage,
        Fault::WrongCorrelation,
        Fault::HugeCount,
        Fault::NegativeSize,
    ];
    // From the very first request, and again once caught up.
    let r = running(2, &faults).await;
    r.fake.inject(&faults);
    eventually("all faults served", || r.fake.faults_left() == 0).await;
    produce(&r.leader, 2, 5);
    caught_up(&r.leader, &r.follower).await;
    // Each malformed answer cost its connection.
    assert!(
        r.fake.connections() > 2 * faults.len(),
        "{}",
        r.fake.connections()
    );
    r.fetchers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_leader_epoch_is_retried_until_the_leader_gets_there() {
    let tmp = tempfile::tempdir().unwrap();
    let id = Uuid::new_v4();
    let leader = replica(tmp.path(), "t", id, 1, 1, 0);
    let follower = replica(tmp.path(), "t", id, FOLLOWER, 1, 0);
    produce(&leader, 2, 2);
    // The follower learnt of epoch 1 before the leader did.
    assert!(follower.become_follower(1, 1).unwrap());
    let fake = FakeLeader::start(vec![leader.clone()]).await;
    let f = fetchers();
    f.update(vec![target(&follower, 1, 1)], &addresses(&[(1, &fake)]));
    eventually("a few fetches refused", || fake.fetches().len() >= 3).await;
    assert_eq!(follower.log_end_offset(), 0);
    lead(&leader, 1, 1);
    caught_up(&leader, &follower).await;
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_moved_to_another_leader_is_fetched_from_there_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (moved, stays) = (Uuid::new_v4(), Uuid::new_v4());
    // Node 1 leads both partitions at epoch 0.
    let moved_on_1 = replica(tmp.path(), "m", moved, 1, 1, 0);
    let stays_on_1 = replica(tmp.path(), "s", stays, 1, 1, 0);
    let moved_here = replica(tmp.path(), "m", moved, FOLLOWER, 1, 0);
    let stays_here = replica(tmp.path(), "s", stays, FOLLOWER, 1, 0);
    produce(&moved_on_1, 2, 2);
    produce(&stays_on_1, 2, 2);
    // Node 3 will lead "m" at epoch 1, from a copy of node 1's log.
    let moved_on_3 = replica(tmp.path(), "m", moved, 3, 1, 0);
    copy(&moved_on_1, &moved_on_3, 3, 0);
    let one = FakeLeader::start(vec![moved_on_1.clone(), stays_on_1.clone()]).await;
    let three = FakeLeader::start(vec![moved_on_3.clone()]).await;
    let addrs = addresses(&[(1, &one), (3, &three)]);
    let f = fetchers();
    f.update(
        vec![target(&moved_here, 1, 0), target(&stays_here, 1, 0)],
        &addrs,
    );
    caught_up(&moved_on_1, &moved_here).await;
    caught_up(&stays_on_1, &stays_here).await;
    assert_eq!(f.leaders(), vec![1]);

    lead(&moved_on_3, 3, 1);
    assert!(moved_here.become_follower(3, 1).unwrap());
    f.update(
        vec![target(&moved_here, 3, 1), target(&stays_here, 1, 0)],
        &addrs,
    );
    let before = one.fetches().len();
    produce(&moved_on_3, 2, 3);
    produce(&stays_on_1, 2, 3);
    caught_up(&moved_on_3, &moved_here).await;
    caught_up(&stays_on_1, &stays_here).await;
    eventually("node 1 keeps being fetched from", || {
        one.fetches().len() >= before + 3
    })
    .await;
    // Only the fetch in flight when update returned may still name the moved partition.
    for s in &one.fetches()[before + 1..] {
        assert_eq!(s.partitions, vec![(stays, 0)]);
    }
    assert!(
        three
            .fetches()
            .iter()
            .all(|s| s.partitions == vec![(moved, 0)])
    );
    assert_eq!(f.leaders(), vec![1, 3]);

    // Nothing left to follow on node 1: its fetcher ends and stops asking.
    f.update(vec![target(&moved_here, 3, 1)], &addrs);
    assert_eq!(f.leaders(), vec![3]);
    let connections = one.connections();
    let n = one.fetches().len();
    produce(&stays_on_1, 1, 1);
    produce(&moved_on_3, 1, 1);
    caught_up(&moved_on_3, &moved_here).await;
    f.shutdown().await;
    assert!(one.fetches().len() <= n + 1, "at most the fetch in flight");
    assert_eq!(one.connections(), connections);
    assert!(stays_here.log_end_offset() < stays_on_1.log_end_offset());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_is_not_a_follower_at_its_epoch_is_not_fetched() {
    let tmp = tempfile::tempdir().unwrap();
    let id = Uuid::new_v4();
    let leader = replica(tmp.path(), "t", id, 1, 1, 0);
    let follower = replica(tmp.path(), "t", id, FOLLOWER, 1, 0);
    let other_id = Uuid::new_v4();
    let other_leader = replica(tmp.path(), "o", other_id, 1, 1, 0);
    let other = replica(tmp.path(), "o", other_id, FOLLOWER, 1, 0);
    produce(&leader, 1, 1);
    produce(&other_leader, 1, 1);
    let fake = FakeLeader::start(vec![leader.clone(), other_leader.clone()]).await;
    let f = fetchers();
    // The target says epoch 4, the replica follows epoch 0: the update is not for it.
    f.update(
        vec![target(&follower, 1, 4), target(&other, 1, 0)],
        &addresses(&[(1, &fake)]),
    );
    caught_up(&other_leader, &other).await;
    assert_eq!(follower.log_end_offset(), 0);
    assert!(
        fake.fetches()
            .iter()
            .all(|s| s.partitions == vec![(other_id, 0)])
    );
    f.shutdown().await;
}
