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
