//! Transactions in a partition replica: markers, the last stable offset, and both surviving
//! replication and restarts.

use std::time::Duration;

use super::tests::{MAX, bytes, follower_fetch, open, record, replicate};
use super::*;
use crate::log::batch::test_support::{simple_batch, transactional_batch};
use crate::producer::{ProducerError, TxnMarker};

fn txn(p: &Partition, pid: i64, epoch: i16, seq: i32, n: usize) -> i64 {
    let mut b = transactional_batch(n, pid, epoch, seq);
    p.append_with_acks(&mut b, None, MAX, 1)
        .unwrap()
        .info
        .first_offset
}

fn plain(p: &Partition, n: usize) -> i64 {
    let mut b = simple_batch(n, 1_000, 10);
    p.append_with_acks(&mut b, None, MAX, 1)
        .unwrap()
        .info
        .first_offset
}

#[test]
fn markers_end_transactions_and_move_the_last_stable_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let p = open(tmp.path(), 1, &[1], &[1], 1, 0);
    plain(&p, 2); // 0-1
    assert_eq!(p.last_stable_offset(), 2);
    assert_eq!(txn(&p, 7, 0, 0, 3), 2); // 2-4
    plain(&p, 1); // 5
    assert_eq!(txn(&p, 8, 0, 0, 1), 6);
    assert!(p.has_ongoing_txn(7, 0) && p.has_ongoing_txn(8, 0));
    assert!(!p.has_ongoing_txn(7, 1));
    assert_eq!((p.high_watermark(), p.last_stable_offset()), (7, 2));
    // A producer in a transaction cannot write outside it.
    let mut b = crate::log::batch::test_support::idempotent_batch(1, 7, 0, 3);
    assert!(matches!(
        p.append_with_acks(&mut b, None, MAX, 1),
        Err(PartitionError::Producer(ProducerError::InvalidTxnState(_)))
    ));
    // 7 commits: the LSO moves to 8's transaction.
    assert_eq!(p.append_marker(7, 0, 0, true, Some(0)).unwrap(), 7);
    assert!(!p.has_ongoing_txn(7, 0));
    assert_eq!((p.high_watermark(), p.last_stable_offset()), (8, 6));
    // Stale markers: an older producer epoch, an older coordinator, a wrong leader epoch.
    p.append_marker(8, 2, 5, false, None).unwrap(); // 8 aborts at epoch 2
    assert_eq!(p.last_stable_offset(), 9);
    assert!(matches!(
        p.append_marker(8, 1, 5, false, None),
        Err(PartitionError::Producer(ProducerError::InvalidEpoch(_)))
    ));
    assert!(matches!(
        p.append_marker(8, 2, 4, false, None),
        Err(PartitionError::Producer(ProducerError::CoordinatorFenced(
            _
        )))
    ));
    assert!(matches!(
        p.append_marker(8, 2, 5, false, Some(1)),
        Err(PartitionError::UnknownLeaderEpoch)
    ));
    assert_eq!(p.log_end_offset(), 9, "nothing refused was written");
    // Transaction version 2: a marker at the producer's current epoch while a transaction is
    // open is refused; the coordinator's bumped epoch is taken.
    txn(&p, 8, 2, 0, 1); // 9
    let tv2 = |epoch| TxnMarker {
        producer_id: 8,
        producer_epoch: epoch,
        coordinator_epoch: 5,
        commit: true,
        transaction_version: 2,
    };
    assert!(p.append_marker_with_acks(&tv2(2), None, 1).is_err());
    let a = p.append_marker_with_acks(&tv2(3), None, -1).unwrap();
    assert_eq!(a.info.first_offset, 10);
    assert_eq!(p.last_stable_offset(), 11);
    // The producers' view (DescribeProducers).
    let s: Vec<_> = p.producers();
    assert_eq!(s.len(), 2);
    assert_eq!(
        (s[1].producer_id, s[1].epoch, s[1].coordinator_epoch),
        (8, 3, 5)
    );
    assert_eq!(s[1].current_txn_start_offset, -1);
}

#[tokio::test]
async fn an_unreplicated_marker_holds_the_lso_until_the_high_watermark_passes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2) = (tmp.path().join("b1"), tmp.path().join("b2"));
    let one = open(&d1, 1, &[1, 2], &[1, 2], 1, 0);
    let two = open(&d2, 2, &[1, 2], &[1, 2], 1, 0);
    one.set_min_insync_replicas(2);
    txn(&one, 4, 0, 0, 2); // 0-1
    plain(&one, 1); // 2
    replicate(&one, &two, 2, 10);
    replicate(&one, &two, 2, 20);
    assert_eq!((one.high_watermark(), one.last_stable_offset()), (3, 0));
    assert!(
        two.has_ongoing_txn(4, 0),
        "the follower's producer state has it"
    );
    assert_eq!(two.last_stable_offset(), 0);
    // The commit is written but not yet on the follower: still unstable from 0.
    let marker = TxnMarker {
        producer_id: 4,
        producer_epoch: 0,
        coordinator_epoch: 1,
        commit: true,
        transaction_version: 0,
    };
    let a = one.append_marker_with_acks(&marker, Some(0), -1).unwrap();
    assert_eq!(a.info.first_offset, 3);
    assert!(!one.has_ongoing_txn(4, 0));
    assert_eq!(one.last_stable_offset(), 0);
    assert_eq!(
        one.wait_for_ack(4, a.leader_epoch, Duration::from_millis(20))
            .await,
        AckOutcome::TimedOut
    );
    // The follower fetches the marker, then fetches again from past it: the high watermark
    // passes the marker and the LSO follows.
    let waiting = {
        let r = one
            .read_for_follower(2, &follower_fetch(3, 0, 0), 30)
            .unwrap();
        two.append_as_follower(&bytes(&r.slice), one.high_watermark(), now_ms())
            .unwrap();
        one.read_for_follower(2, &follower_fetch(4, 0, 0), 40)
            .unwrap();
        one.wait_for_ack(4, a.leader_epoch, Duration::from_secs(30))
    };
    assert_eq!(waiting.await, AckOutcome::Acked);
    assert_eq!((one.high_watermark(), one.last_stable_offset()), (4, 4));
    assert!(!two.has_ongoing_txn(4, 0));
    two.on_leader_high_watermark(one.high_watermark());
    assert_eq!(two.last_stable_offset(), 4);
    // A follower does not take markers.
    assert!(matches!(
        two.append_marker(4, 0, 1, false, None),
        Err(PartitionError::NotLeader)
    ));
    // Leadership moves: waiting for an append of the old epoch answers NOT_LEADER.
    assert!(one.become_follower(2, 1).unwrap());
    assert_eq!(
        one.wait_for_ack(5, a.leader_epoch, Duration::from_secs(30))
            .await,
        AckOutcome::NotLeader
    );
    assert!(
        two.become_leader(&record(&[1, 2], &[1, 2], 2, 1, 1), 50)
            .unwrap()
    );
}

#[test]
fn an_open_transaction_survives_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let p = open(tmp.path(), 1, &[1], &[1], 1, 0);
        plain(&p, 1);
        txn(&p, 3, 1, 0, 2); // 1-2
        plain(&p, 1);
        assert_eq!(p.last_stable_offset(), 1);
        p.close().unwrap();
    }
    let p = open(tmp.path(), 1, &[1], &[1], 1, 4);
    assert_eq!((p.high_watermark(), p.last_stable_offset()), (4, 1));
    assert!(p.has_ongoing_txn(3, 1));
    p.append_marker(3, 1, 0, false, None).unwrap();
    assert_eq!(p.last_stable_offset(), 5);
    // Without the clean shutdown's snapshot the log replays to the same.
    let p = {
        drop(p);
        for e in std::fs::read_dir(tmp.path().join("t-0")).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "snapshot") {
                std::fs::remove_file(path).unwrap();
            }
        }
        open(tmp.path(), 1, &[1], &[1], 1, 5)
    };
    assert!(!p.has_ongoing_txn(3, 1));
    assert_eq!(p.last_stable_offset(), 5);
}

/// A leader alone over a log of small segments in `dir`.
fn open_small(dir: &Path, hw: i64) -> Partition {
    let cfg = crate::log::LogConfig {
        segment_bytes: 400,
        retention_ms: -1,
        ..crate::log::LogConfig::default()
    };
    let log = Log::open(&dir.join("t-0"), cfg, true).unwrap();
    let state = ReplicaState {
        leader: 1,
        leader_epoch: 0,
        replicas: vec![1],
        isr: vec![1],
    };
    Partition::new(Arc::from("t"), 0, Uuid::nil(), 1, log, state, hw)
}

fn aborted(s: &FetchSlice) -> Vec<(i64, i64)> {
    let list = s
        .aborted
        .as_ref()
        .expect("read_committed lists aborted transactions");
    list.iter()
        .map(|t| (t.producer_id, t.first_offset))
        .collect()
}

fn txn_index_entries(dir: &Path) -> Vec<(i64, Vec<crate::log::AbortedTxn>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir.join("t-0")).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "txnindex") {
            let base = path.file_stem().unwrap().to_str().unwrap().parse().unwrap();
            let idx = crate::log::txn_index::TxnIndex::open(path).unwrap();
            out.push((base, idx.entries().to_vec()));
        }
    }
    out.sort_by_key(|e| e.0);
    out
}

#[test]
fn read_committed_stops_at_the_lso_and_lists_aborted_transactions() {
    let tmp = tempfile::tempdir().unwrap();
    let p = open(tmp.path(), 1, &[1], &[1], 1, 0);
    plain(&p, 1); // 0
    txn(&p, 1, 0, 0, 2); // 1-2
    txn(&p, 2, 0, 0, 1); // 3
    plain(&p, 1); // 4
    // Only offset 0 is stable: a read_committed read ends there, read_uncommitted does not.
    let s = p.read_committed(0, MAX, true).unwrap();
    assert_eq!(
        (bytes(&s).len(), aborted(&s)),
        (simple_batch(1, 1_000, 10).len(), vec![])
    );
    assert!(p.read(0, MAX, true).unwrap().len > s.len);
    assert_eq!(p.read(0, MAX, true).unwrap().aborted, None);
    p.append_marker(1, 0, 0, false, None).unwrap(); // 5: abort 1's
    assert_eq!(p.last_stable_offset(), 3, "2's transaction is open");
    p.append_marker(2, 0, 0, true, None).unwrap(); // 6: commit 2's
    txn(&p, 1, 0, 2, 1); // 7
    p.append_marker(1, 0, 0, false, None).unwrap(); // 8
    assert_eq!(p.last_stable_offset(), 9);
    // Kafka's entries: the abort at 5 while 2's transaction (from 3) was open.
    assert_eq!(
        txn_index_entries(tmp.path()),
        vec![(
            0,
            vec![
                crate::log::AbortedTxn {
                    producer_id: 1,
                    first_offset: 1,
                    last_offset: 5,
                    last_stable_offset: 3,
                },
                crate::log::AbortedTxn {
                    producer_id: 1,
                    first_offset: 7,
                    last_offset: 8,
                    last_stable_offset: 9,
                },
            ]
        )]
    );
    let all = p.read_committed(0, MAX, true).unwrap();
    assert_eq!(aborted(&all), vec![(1, 1), (1, 7)]);
    assert_eq!(bytes(&all), bytes(&p.read(0, MAX, true).unwrap()));
    // From 6 on only the second aborted transaction overlaps; past the LSO nothing is read.
    assert_eq!(
        aborted(&p.read_committed(6, MAX, true).unwrap()),
        vec![(1, 7)]
    );
    let end = p.read_committed(9, MAX, true).unwrap();
    assert_eq!((end.len, aborted(&end)), (0, vec![]));
    // A read of the first two batches only: the second abort does not overlap it.
    let first = p.read_committed(0, 1, true).unwrap();
    assert_eq!(aborted(&first), vec![]);
}

#[test]
fn the_txn_index_follows_segments_through_recovery_retention_and_truncation() {
    let tmp = tempfile::tempdir().unwrap();
    let p = open_small(tmp.path(), 0);
    // Producer 5's transaction starts in one segment and aborts in a later one.
    txn(&p, 5, 0, 0, 1);
    for _ in 0..6 {
        plain(&p, 1);
    }
    let abort_at = p.append_marker(5, 0, 0, false, None).unwrap();
    for i in 0..6 {
        txn(&p, 6, 0, i, 1);
        p.append_marker(6, 0, 0, i % 2 == 0, None).unwrap();
    }
    let entries = txn_index_entries(tmp.path());
    assert!(
        entries.len() > 1,
        "markers in several segments: {entries:?}"
    );
    assert!(
        entries[0].0 > 0,
        "no index for the segment without an abort"
    );
    assert_eq!(entries[0].1[0].first_offset, 0);
    assert_eq!(entries[0].1[0].last_offset, abort_at);
    let aborts: usize = entries.iter().map(|e| e.1.len()).sum();
    assert_eq!(aborts, 4);
    // Reading the first segment finds the transaction aborted in a later one.
    assert_eq!(
        aborted(&p.read_committed(0, 100, true).unwrap()),
        vec![(5, 0)]
    );

    // A crash: the snapshots and an index file are lost, recovery replays the log.
    drop(p);
    for e in std::fs::read_dir(tmp.path().join("t-0")).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "snapshot") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let last = entries.last().unwrap().0;
    std::fs::remove_file(tmp.path().join("t-0").join(format!("{last:020}.txnindex"))).unwrap();
    let p = open_small(tmp.path(), 0);
    assert_eq!(txn_index_entries(tmp.path()), entries, "rebuilt as written");
    assert_eq!(p.last_stable_offset(), p.log_end_offset());

    // Retention of the oldest segments takes their indexes with them (the log reopened
    // with a byte limit).
    let before = txn_index_entries(tmp.path()).len();
    {
        let mut log = p.log.lock().unwrap();
        // Keep the segments after the first one with an index.
        let kept: u64 = log
            .segments()
            .filter(|s| s.base_offset() > entries[0].0)
            .map(|s| s.size())
            .sum();
        let cfg = crate::log::LogConfig {
            retention_bytes: kept as i64,
            ..log.config().clone()
        };
        *log = Log::open(&tmp.path().join("t-0"), cfg, false).unwrap();
    }
    assert!(p.apply_retention(now_ms()).unwrap() > 0);
    let after = txn_index_entries(tmp.path());
    assert!(after.len() < before);
    let bases: Vec<i64> = p
        .log
        .lock()
        .unwrap()
        .segments()
        .map(|s| s.base_offset())
        .collect();
    assert!(after.iter().all(|(b, _)| bases.contains(b)));

    // A follower truncating below the last abort marker drops its entry.
    let last_abort = after.last().unwrap().1.last().unwrap().last_offset;
    assert!(p.become_follower(2, 1).unwrap());
    p.truncate_to(last_abort).unwrap();
    let now: usize = txn_index_entries(tmp.path())
        .iter()
        .map(|e| e.1.len())
        .sum();
    let was: usize = after.iter().map(|e| e.1.len()).sum();
    assert_eq!(now, was - 1);
    assert!(
        p.has_ongoing_txn(6, 0),
        "the truncated transaction is open again"
    );
}

/// The sequence a Kafka 4.4 broker wrote for two Java transactional producers (transaction
/// version 2: every marker bumps the epoch) gives the transaction index entries it wrote, as
/// its DumpLogSegments printed them.
#[test]
fn kafka_s_transaction_index_for_the_same_log() {
    let tmp = tempfile::tempdir().unwrap();
    let p = open(tmp.path(), 1, &[1], &[1], 1, 0);
    let tv2 = |pid, epoch, commit| TxnMarker {
        producer_id: pid,
        producer_epoch: epoch,
        coordinator_epoch: 0,
        commit,
        transaction_version: 2,
    };
    txn(&p, 1, 0, 0, 1); // 0
    txn(&p, 2, 0, 0, 1); // 1
    p.append_marker_with_acks(&tv2(1, 1, false), None, -1)
        .unwrap(); // 2
    p.append_marker_with_acks(&tv2(2, 1, true), None, -1)
        .unwrap(); // 3
    txn(&p, 1, 1, 0, 1); // 4
    p.append_marker_with_acks(&tv2(1, 2, false), None, -1)
        .unwrap(); // 5
    let entry = |first, last, lso| crate::log::AbortedTxn {
        producer_id: 1,
        first_offset: first,
        last_offset: last,
        last_stable_offset: lso,
    };
    assert_eq!(
        txn_index_entries(tmp.path()),
        vec![(0, vec![entry(0, 2, 1), entry(4, 5, 6)])]
    );
    assert_eq!(
        aborted(&p.read_committed(0, MAX, true).unwrap()),
        vec![(1, 0), (1, 4)]
    );
}
