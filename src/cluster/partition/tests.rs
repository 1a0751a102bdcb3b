//! Tests of a partition replica: the leader's appends, acks=all and min.insync.replicas,
//! follower fetches, roles, and two replicas replicating through each other's methods.

use std::os::unix::fs::FileExt;

use super::*;
use crate::cluster::replication::AckStatus;
use crate::log::LogConfig;
use crate::log::batch::test_support::simple_batch;

pub(super) const MAX: usize = 1 << 20;
/// The broker epoch followers fetch with in these tests.
pub(super) const FOLLOWER_EPOCH: i64 = 9;

pub(super) fn open(
    dir: &Path,
    node: i32,
    replicas: &[i32],
    isr: &[i32],
    leader: i32,
    hw: i64,
) -> Partition {
    let log = Log::open(&dir.join("t-0"), LogConfig::default(), false).unwrap();
    let state = ReplicaState {
        leader,
        leader_epoch: 0,
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
    };
    Partition::new(Arc::from("t"), 0, Uuid::nil(), node, log, state, hw)
}

pub(super) fn record(
    replicas: &[i32],
    isr: &[i32],
    leader: i32,
    leader_epoch: i32,
    pe: i32,
) -> PartitionRecord {
    PartitionRecord {
        leader_epoch,
        partition_epoch: pe,
        ..PartitionRecord::for_test(replicas, isr, leader)
    }
}

fn append(p: &Partition, n: usize, acks: i16) -> Result<LeaderAppend, PartitionError> {
    let mut b = simple_batch(n, 1000, 20);
    p.append_with_acks(&mut b, None, MAX, acks)
}

pub(super) fn follower_fetch(offset: i64, epoch: i32, last_fetched_epoch: i32) -> FollowerFetch {
    FollowerFetch {
        offset,
        max_bytes: MAX,
        min_one_batch: true,
        current_leader_epoch: epoch,
        last_fetched_epoch,
        log_start_offset: -1,
        broker_epoch: FOLLOWER_EPOCH,
    }
}

pub(super) fn bytes(s: &FetchSlice) -> Vec<u8> {
    let mut buf = vec![0u8; s.len];
    if let Some(f) = &s.file {
        f.read_exact_at(&mut buf, s.position).unwrap();
    }
    buf
}

#[test]
fn alone_the_high_watermark_follows_every_append() {
    let tmp = tempfile::tempdir().unwrap();
    let p = open(tmp.path(), 1, &[1], &[1], 1, 0);
    p.set_min_insync_replicas(2);
    // A new leader's epoch starts at its log end, before anything is written in it.
    assert_eq!(p.end_offset_for_epoch(-1, 0).unwrap(), (0, 0));
    for i in 1..=3 {
        // min.insync.replicas=2 with one replica: the effective minimum is 1.
        let a = append(&p, 2, -1).unwrap();
        assert_eq!(a.leader_epoch, 0);
        assert_eq!(p.high_watermark(), 2 * i);
        assert_eq!(p.log_end_offset(), 2 * i);
        assert_eq!(
            p.ack_status(a.info.last_offset + 1, 0).unwrap(),
            AckStatus::Done
        );
    }
    let st = p.replica_state();
    assert_eq!((st.leader, st.leader_epoch, st.isr), (1, 0, vec![1]));
    assert_eq!(p.end_offset_for_epoch(0, 0).unwrap(), (0, 6));
    assert!(matches!(
        p.end_offset_for_epoch(1, 0),
        Err(PartitionError::UnknownLeaderEpoch)
    ));
    assert_eq!(p.check_lagging(i64::MAX, 30_000), None);
}

#[test]
fn acks_all_below_min_isr_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let p = open(tmp.path(), 1, &[1, 2], &[1], 1, 0);
    p.set_min_insync_replicas(2);
    let e = append(&p, 3, -1).unwrap_err();
    assert!(
        matches!(&e, PartitionError::NotEnoughReplicas { isr, min_isr: 2 } if isr == &vec![1]),
        "{e:?}"
    );
    assert_eq!(p.log_end_offset(), 0, "nothing written");
    // acks=1 is written, but an under-min-ISR partition does not expose it.
    append(&p, 3, 1).unwrap();
    assert_eq!(p.log_end_offset(), 3);
    assert_eq!(p.high_watermark(), 0);
    // Lowering min.insync.replicas lets the high watermark move.
    p.set_min_insync_replicas(1);
    assert_eq!(p.high_watermark(), 3);
}

#[test]
fn acks_all_waits_for_the_follower() {
    let tmp = tempfile::tempdir().unwrap();
    let p = open(tmp.path(), 1, &[1, 2], &[1, 2], 1, 0);
    p.set_min_insync_replicas(2);
    let a = append(&p, 4, -1).unwrap();
    assert_eq!(p.ack_status(4, 0).unwrap(), AckStatus::Waiting);
    assert_eq!(p.high_watermark(), 0);
    // The follower reads past the high watermark, up to the log end.
    let r = p
        .read_for_follower(2, &follower_fetch(0, 0, -1), 10)
        .unwrap();
    assert_eq!(bytes(&r.slice).len(), a.info.size_bytes);
    assert_eq!(
        p.high_watermark(),
        0,
        "its log ends at 0 until it fetches from 4"
    );
    // A consumer sees nothing yet.
    assert_eq!(p.read(0, MAX, true).unwrap().len, 0);
    let r = p
        .read_for_follower(2, &follower_fetch(4, 0, 0), 20)
        .unwrap();
    assert_eq!((r.slice.len, r.diverging, r.isr_expansion), (0, None, None));
    assert_eq!(p.high_watermark(), 4);
    assert_eq!(p.ack_status(4, 0).unwrap(), AckStatus::Done);
    assert!(p.read(0, MAX, true).unwrap().len > 0);
}

#[test]
fn a_read_at_the_high_watermark_is_empty_and_one_below_it_is_not() {
    let tmp = tempfile::tempdir().unwrap();
    let p = open(tmp.path(), 1, &[1], &[1], 1, 0);
    append(&p, 4, 1).unwrap();
    assert_eq!(p.high_watermark(), 4);
    let at = p.read(4, MAX, true).unwrap();
    assert_eq!((at.len, at.file.is_none()), (0, true));
    let committed = p.read_committed(4, MAX, true).unwrap();
    assert_eq!((committed.len, committed.aborted), (0, Some(Vec::new())));
    assert!(p.read(3, MAX, true).unwrap().len > 0);
    assert!(matches!(
        p.read(5, MAX, true),
        Err(PartitionError::Read(ReadError::OffsetOutOfRange { .. }))
    ));
}

#[test]
fn fetches_from_replicas_that_are_not_followers() {
    let tmp = tempfile::tempdir().unwrap();
    let p = open(tmp.path(), 1, &[1, 2], &[1, 2], 1, 0);
    for (replica, epoch) in [(3, -1), (1, -1)] {
        let e = p.read_for_follower(replica, &follower_fetch(0, epoch, -1), 0);
        assert!(matches!(e, Err(PartitionError::NotLeader)), "{replica}");
    }
    let e = p.read_for_follower(3, &follower_fetch(0, 0, -1), 0);
    assert!(matches!(e, Err(PartitionError::UnknownLeaderEpoch)));
    assert!(matches!(
        p.on_follower_fetch(3, 0, FOLLOWER_EPOCH, 0),
        Err(PartitionError::NotLeader)
    ));
    // The epoch check comes first.
    let e = p.read_for_follower(3, &follower_fetch(0, 5, -1), 0);
    assert!(matches!(e, Err(PartitionError::UnknownLeaderEpoch)));
    // A follower fetching beyond the log end.
    let e = p.read_for_follower(2, &follower_fetch(9, 0, -1), 0);
    assert!(matches!(e, Err(PartitionError::Read(_))));
}

#[test]
fn isr_shrink_while_waiting_answers_after_append() {
    let tmp = tempfile::tempdir().unwrap();
    let p = open(tmp.path(), 1, &[1, 2, 3], &[1, 2, 3], 1, 0);
    p.set_min_insync_replicas(2);
    // The replicas count as caught up when it became leader, at the wall clock.
    let t0 = now_ms();
    append(&p, 1, -1).unwrap();
    p.on_follower_fetch(2, 1, FOLLOWER_EPOCH, t0 + 20_000)
        .unwrap();
    // 3 never fetches: dropped after replica.lag.time.max.ms.
    let shrink = p.check_lagging(t0 + 40_000, 30_000).unwrap();
    assert_eq!(shrink, vec![1, 2]);
    assert_eq!(p.pending_isr(), Some(vec![1, 2]));
    assert_eq!(
        p.ack_status(1, 0).unwrap(),
        AckStatus::Waiting,
        "3 still counts"
    );
    p.on_refused();
    assert_eq!(p.pending_isr(), None);
    // The controller drops 2 and 3 on its own (say, both brokers were fenced).
    assert!(p.on_committed(&record(&[1, 2, 3], &[1], 1, 0, 1)));
    assert!(!p.on_committed(&record(&[1, 2, 3], &[1], 1, 0, 1)), "seen");
    assert_eq!(
        p.ack_status(1, 0).unwrap(),
        AckStatus::Waiting,
        "under min ISR the high watermark stays"
    );
    // 2 catches up; the high watermark is frozen, so the record waits, and with the ISR back
    // at two it is done.
    p.on_follower_fetch(2, 1, FOLLOWER_EPOCH, t0 + 41_000)
        .unwrap();
    assert!(p.on_committed(&record(&[1, 2, 3], &[1, 2], 1, 0, 2)));
    assert_eq!(p.ack_status(1, 0).unwrap(), AckStatus::Done);
    // Reached everywhere, then the ISR shrinks below min.insync.replicas.
    append(&p, 1, -1).unwrap();
    p.on_follower_fetch(2, 2, FOLLOWER_EPOCH, t0 + 42_000)
        .unwrap();
    assert_eq!(p.high_watermark(), 2);
    assert!(p.on_committed(&record(&[1, 2, 3], &[1], 1, 0, 3)));
    assert_eq!(
        p.ack_status(2, 0).unwrap(),
        AckStatus::NotEnoughReplicasAfterAppend
    );
}

#[test]
fn a_follower_refuses_leader_work_and_stale_roles_are_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let p = open(tmp.path(), 1, &[1, 2], &[1, 2], 1, 0);
    let a = append(&p, 2, 1).unwrap();
    assert!(p.become_follower(2, 1).unwrap());
    assert!(!p.is_leader());
    assert!(!p.become_follower(2, 1).unwrap(), "same epoch");
    assert!(!p.become_follower(2, 0).unwrap(), "older epoch");
    assert!(matches!(append(&p, 1, 1), Err(PartitionError::NotLeader)));
    assert!(matches!(
        p.ack_status(a.info.last_offset + 1, 0),
        Err(PartitionError::NotLeader)
    ));
    assert!(matches!(p.check_epoch(-1), Err(PartitionError::NotLeader)));
    assert!(matches!(
        p.check_epoch(0),
        Err(PartitionError::FencedLeaderEpoch)
    ));
    assert!(matches!(
        p.read_for_follower(2, &follower_fetch(0, 1, -1), 0),
        Err(PartitionError::NotLeader)
    ));
    let st = p.replica_state();
    assert_eq!((st.leader, st.leader_epoch), (2, 1));
    let pos = p.follower_position().unwrap();
    assert_eq!((pos.leader, pos.leader_epoch, pos.fetch_offset), (2, 1, 2));
    assert_eq!(pos.last_fetched_epoch, 0);
    // A stale record does not make it leader again; a newer one does, from its log end.
    assert!(!p.become_leader(&record(&[1, 2], &[1], 1, 0, 5), 0).unwrap());
    assert!(p.become_leader(&record(&[1, 2], &[1], 1, 2, 6), 0).unwrap());
    assert!(p.is_leader());
    assert_eq!(p.end_offset_for_epoch(2, 0).unwrap(), (0, 2));
    assert_eq!(p.end_offset_for_epoch(2, 1).unwrap(), (0, 2));
    assert_eq!(p.end_offset_for_epoch(2, 2).unwrap(), (2, 2));
    assert!(matches!(
        p.become_leader(&record(&[1, 2], &[2], 2, 3, 7), 0),
        Err(PartitionError::NotLeader)
    ));
    assert!(p.follower_position().is_none());
}

#[test]
fn checkpointed_high_watermark_is_restored_within_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let p = open(tmp.path(), 1, &[1], &[1], 1, 0);
        append(&p, 5, 1).unwrap();
        p.close().unwrap();
    }
    // With a follower in the ISR the leader starts from the checkpoint...
    assert_eq!(
        open(tmp.path(), 1, &[1, 2], &[1, 2], 1, 3).high_watermark(),
        3
    );
    // ...never above its log end...
    assert_eq!(
        open(tmp.path(), 1, &[1, 2], &[1, 2], 1, 50).high_watermark(),
        5
    );
    // ...and a follower keeps it.
    assert_eq!(
        open(tmp.path(), 2, &[1, 2], &[1, 2], 1, 4).high_watermark(),
        4
    );
    // Alone in the ISR it is at the log end at once.
    assert_eq!(open(tmp.path(), 1, &[1], &[1], 1, 2).high_watermark(), 5);
}

/// One replication round of `follower` from `leader`: fetch at the follower's position,
/// append what came, as a replica fetcher does.
pub(super) fn replicate(
    leader: &Partition,
    follower: &Partition,
    follower_id: i32,
    now: i64,
) -> usize {
    let pos = follower.follower_position().unwrap();
    let mut fetch = follower_fetch(pos.fetch_offset, pos.leader_epoch, pos.last_fetched_epoch);
    fetch.log_start_offset = pos.log_start_offset;
    let r = leader.read_for_follower(follower_id, &fetch, now).unwrap();
    assert_eq!(r.diverging, None);
    let data = bytes(&r.slice);
    if data.is_empty() {
        follower.on_leader_high_watermark(leader.high_watermark());
    } else {
        // The wall clock, as the log's time-based roll wants it.
        follower
            .append_as_follower(&data, leader.high_watermark(), now_ms())
            .unwrap();
    }
    data.len()
}

#[test]
fn two_replicas_replicate_and_truncate_a_divergent_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2) = (tmp.path().join("b1"), tmp.path().join("b2"));
    // Broker 1 leads epoch 0 with 2 in the ISR and writes 3 batches, then 2 more that broker
    // 2 never gets.
    let one = open(&d1, 1, &[1, 2], &[1, 2], 1, 0);
    one.set_min_insync_replicas(2);
    let two = open(&d2, 2, &[1, 2], &[1, 2], 1, 0);
    for _ in 0..3 {
        append(&one, 2, -1).unwrap();
    }
    while replicate(&one, &two, 2, 10) > 0 {}
    replicate(&one, &two, 2, 11);
    assert_eq!(one.high_watermark(), 6);
    assert_eq!(two.high_watermark(), 6);
    assert_eq!(two.log_end_offset(), 6);
    append(&one, 2, 1).unwrap();
    append(&one, 2, 1).unwrap();
    assert_eq!(one.log_end_offset(), 10);
    // Broker 2 is elected for epoch 1 (1 stopped) and writes a batch of its own.
    assert!(
        two.become_leader(&record(&[1, 2], &[2], 2, 1, 1), 20)
            .unwrap()
    );
    append(&two, 3, 1).unwrap();
    assert_eq!(two.log_end_offset(), 9);
    assert_eq!(two.high_watermark(), 9);
    // Broker 1 comes back as follower of epoch 1: its fetch names epoch 0, which ends at 6
    // in the new leader's log; it diverges.
    assert!(one.become_follower(2, 1).unwrap());
    let pos = one.follower_position().unwrap();
    assert_eq!((pos.fetch_offset, pos.last_fetched_epoch), (10, 0));
    let fetch = follower_fetch(pos.fetch_offset, 1, pos.last_fetched_epoch);
    let r = two.read_for_follower(1, &fetch, 30).unwrap();
    assert_eq!(r.diverging, Some((0, 6)));
    // Or, as OffsetForLeaderEpoch answers it: truncate to where epoch 0 ends.
    let (e, end) = two.end_offset_for_epoch(1, pos.last_fetched_epoch).unwrap();
    assert_eq!(one.truncate_for_leader_epoch(e, end).unwrap(), 6);
    assert_eq!(one.log_end_offset(), 6);
    while replicate(&two, &one, 1, 40) > 0 {}
    replicate(&two, &one, 1, 41);
    assert_eq!(one.log_end_offset(), 9);
    assert_eq!(one.high_watermark(), 9);
    // The two logs agree batch for batch.
    assert_eq!(one.whole_log(), two.whole_log());
    assert_eq!(one.end_offset_for_epoch(-1, 1).err().map(|_| ()), Some(()));
    // The ISR expansion for 1 is proposed once it reached the high watermark and epoch start.
    assert_eq!(two.pending_isr(), Some(vec![2, 1]));
}

impl Partition {
    /// Every batch in the log, whatever the role and the segments (tests only).
    fn whole_log(&self) -> Vec<u8> {
        let log = self.log.lock().unwrap();
        let mut out = Vec::new();
        let mut offset = log.log_start_offset();
        while offset < log.log_end_offset() {
            let s = log.read(offset, MAX, log.log_end_offset(), true).unwrap();
            let data = s.read_to_vec().unwrap();
            for h in crate::log::batch::batches(&data) {
                offset = h.unwrap().next_offset();
            }
            out.extend(data);
        }
        out
    }
}

#[test]
fn a_producer_retry_after_failover_is_deduplicated_by_the_follower_state() {
    // The follower's producer state is built from the leader's batches, so a retry of an
    // idempotent batch sent to the new leader is recognised there.
    let tmp = tempfile::tempdir().unwrap();
    let one = open(&tmp.path().join("b1"), 1, &[1, 2], &[1, 2], 1, 0);
    let two = open(&tmp.path().join("b2"), 2, &[1, 2], &[1, 2], 1, 0);
    let b = crate::log::batch::test_support::idempotent_batch(2, 77, 0, 0);
    let mut first = b.clone();
    one.append_with_acks(&mut first, None, MAX, -1).unwrap();
    while replicate(&one, &two, 2, 1) > 0 {}
    assert!(
        two.become_leader(&record(&[1, 2], &[2], 2, 1, 1), 2)
            .unwrap()
    );
    let mut retry = b.clone();
    let a = two.append_with_acks(&mut retry, None, MAX, -1).unwrap();
    assert_eq!(a.info.first_offset, 0, "the original offsets");
    assert_eq!(two.log_end_offset(), 2, "nothing appended");
}

#[test]
fn a_follower_behind_the_leader_log_start_restarts_there() {
    let tmp = tempfile::tempdir().unwrap();
    let p = open(tmp.path(), 2, &[1, 2], &[1, 2], 2, 0);
    let b = crate::log::batch::test_support::idempotent_batch(2, 77, 0, 0);
    p.append_with_acks(&mut b.clone(), None, MAX, 1).unwrap();
    append(&p, 3, 1).unwrap();
    assert!(!p.producers().is_empty());
    // As leader it refuses; as follower the log restarts past its old end.
    assert!(matches!(
        p.truncate_fully_and_start_at(100),
        Err(PartitionError::NotLeader)
    ));
    assert!(p.become_follower(1, 1).unwrap());
    assert_eq!(p.truncate_fully_and_start_at(100).unwrap(), 100);
    assert_eq!((p.log_start_offset(), p.log_end_offset()), (100, 100));
    assert_eq!(p.high_watermark(), 100);
    assert!(p.producers().is_empty(), "the producer state went too");
    let pos = p.follower_position().unwrap();
    assert_eq!((pos.fetch_offset, pos.last_fetched_epoch), (100, -1));
    // The leader's batches from its log start append there.
    let mut leader_batch = simple_batch(2, 1000, 20);
    crate::log::batch::set_base_offset(&mut leader_batch, 100);
    crate::log::batch::set_partition_leader_epoch(&mut leader_batch, 1);
    p.append_as_follower(&leader_batch, 102, now_ms()).unwrap();
    assert_eq!((p.log_end_offset(), p.high_watermark()), (102, 102));
    p.close().unwrap();
    drop(p);
    // Reopened, it is the same log.
    let log = Log::open(&tmp.path().join("t-0"), LogConfig::default(), false).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (100, 102));
    assert_eq!(log.latest_epoch(), Some(1));
    let epochs: Vec<(i32, i64)> = log
        .epoch_cache()
        .entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect();
    assert_eq!(epochs, vec![(1, 100)], "no epoch before the restart");
}

#[tokio::test]
async fn delete_records_moves_both_replicas_and_waits_for_the_follower() {
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2) = (tmp.path().join("b1"), tmp.path().join("b2"));
    let one = open(&d1, 1, &[1, 2], &[1, 2], 1, 0);
    let two = open(&d2, 2, &[1, 2], &[1, 2], 1, 0);
    for _ in 0..5 {
        append(&one, 2, 1).unwrap();
    }
    while replicate(&one, &two, 2, 10) > 0 {}
    replicate(&one, &two, 2, 11);
    assert_eq!((one.high_watermark(), two.high_watermark()), (10, 10));
    // A follower refuses; the leader refuses past its high watermark and below 0.
    assert!(matches!(
        two.delete_records_on_leader(4),
        Err(PartitionError::NotLeader)
    ));
    for bad in [11, -2] {
        assert!(matches!(
            one.delete_records_on_leader(bad),
            Err(PartitionError::Read(ReadError::OffsetOutOfRange { .. }))
        ));
    }
    assert_eq!(one.delete_records_on_leader(5).unwrap(), 5);
    assert_eq!(one.log_start_offset(), 5);
    assert!(matches!(
        one.read(4, MAX, true),
        Err(PartitionError::Read(ReadError::OffsetOutOfRange { .. }))
    ));
    // The follower still starts at 0: the low watermark waits for it.
    assert_eq!(one.low_watermark().unwrap(), 0);
    let waited = one
        .wait_for_low_watermark(5, std::time::Duration::from_millis(20))
        .await
        .unwrap();
    assert_eq!(waited, None, "times out while the follower starts below");
    // Its next fetch answer carries the leader's start; it reports its own in the next fetch.
    assert!(two.on_leader_log_start(one.log_start_offset()).unwrap());
    assert!(!two.on_leader_log_start(one.log_start_offset()).unwrap());
    assert_eq!(two.log_start_offset(), 5);
    assert_eq!(two.log_start_to_checkpoint(), Some(5));
    replicate(&one, &two, 2, 20);
    assert_eq!(one.low_watermark().unwrap(), 5);
    let waited = one
        .wait_for_low_watermark(5, std::time::Duration::from_millis(20))
        .await
        .unwrap();
    assert_eq!(waited, Some(5));
    // -1 is the high watermark; a follower never moves past its own high watermark.
    append(&one, 2, 1).unwrap();
    assert_eq!(one.delete_records_on_leader(-1).unwrap(), 10);
    assert!(two.on_leader_log_start(12).unwrap());
    assert_eq!(two.log_start_offset(), 10);
}

#[test]
fn a_move_to_another_log_dir_keeps_records_and_producers() {
    use crate::log::batch::test_support::idempotent_batch;
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    std::fs::create_dir_all(&b).unwrap();
    let p = open(&a, 1, &[1], &[1], 1, 0);
    append(&p, 3, -1).unwrap();
    let mut idem = idempotent_batch(2, 7, 0, 0);
    p.append_with_acks(&mut idem, None, MAX, -1).unwrap();
    let before = bytes(&p.read(0, MAX, true).unwrap());

    assert_eq!(p.move_to_log_dir(&b).unwrap(), Some(a.clone()));
    assert_eq!(p.log_dir(), b);
    assert!(!a.join("t-0").exists());
    assert!(b.join("t-0").join("00000000000000000000.log").exists());
    assert_eq!(std::fs::read_dir(&a).unwrap().count(), 0);
    assert_eq!(bytes(&p.read(0, MAX, true).unwrap()), before);
    assert_eq!((p.log_start_offset(), p.log_end_offset()), (0, 5));
    // The producer's sequence carried over: its next batch continues it, a replay is refused.
    let mut next = idempotent_batch(1, 7, 0, 2);
    p.append_with_acks(&mut next, None, MAX, -1).unwrap();
    let mut replay = idempotent_batch(1, 7, 0, 5);
    assert!(p.append_with_acks(&mut replay, None, MAX, -1).is_err());
    append(&p, 1, -1).unwrap();
    assert_eq!(p.log_end_offset(), 7);
    // Already there: nothing to do.
    assert_eq!(p.move_to_log_dir(&b).unwrap(), None);
}
