use std::fs;

use super::*;
use crate::log::LogConfig;
use crate::log::batch::test_support::{
    idempotent_batch as idem_batch, simple_batch, transactional_batch as txn_batch,
};
use crate::log::control::end_txn_batch;
use crate::producer::snapshot::list_snapshots;

fn header(b: &[u8]) -> BatchHeader {
    BatchHeader::parse(b, 0).unwrap()
}

/// Checks and, if new, appends as a client: Ok(first offset) / the duplicate's offset.
fn produce(
    log: &mut Log,
    st: &mut ProducerState,
    mut b: Vec<u8>,
) -> Result<(i64, bool), ProducerError> {
    if let Some(d) = st.check(&[header(&b)], AppendOrigin::Client)? {
        return Ok((d.first_offset, true));
    }
    let info = log.append(&mut b, 0, None, 1 << 20).unwrap();
    st.update(&info.batches, &b);
    Ok((info.first_offset, false))
}

/// Checks and appends a marker as the coordinator asks for it.
fn mark(
    log: &mut Log,
    st: &mut ProducerState,
    m: TxnMarker,
) -> Result<(i64, Vec<CompletedTxn>), ProducerError> {
    st.check_marker(&m)?;
    let marker = EndTxnMarker {
        commit: m.commit,
        coordinator_epoch: m.coordinator_epoch,
    };
    let mut b = end_txn_batch(m.producer_id, m.producer_epoch, marker, 2_000);
    let info = log.append(&mut b, 0, None, 1 << 20).unwrap();
    Ok((info.first_offset, st.update(&info.batches, &b)))
}

fn marker(pid: i64, epoch: i16, coordinator_epoch: i32, commit: bool, tv: i16) -> TxnMarker {
    TxnMarker {
        producer_id: pid,
        producer_epoch: epoch,
        coordinator_epoch,
        commit,
        transaction_version: tv,
    }
}

fn cfg() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        ..LogConfig::default()
    }
}

#[test]
fn sequence_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = Log::open(tmp.path(), cfg(), false).unwrap();
    let mut st = ProducerState::load(&log).unwrap().0;
    // unknown producer: any first sequence is accepted
    assert_eq!(
        produce(&mut log, &mut st, idem_batch(3, 7, 0, 5)),
        Ok((0, false))
    );
    assert_eq!(
        produce(&mut log, &mut st, idem_batch(2, 7, 0, 8)),
        Ok((3, false))
    );
    // retry of either cached batch: original offsets, nothing appended
    assert_eq!(
        produce(&mut log, &mut st, idem_batch(3, 7, 0, 5)),
        Ok((0, true))
    );
    assert_eq!(
        produce(&mut log, &mut st, idem_batch(2, 7, 0, 8)),
        Ok((3, true))
    );
    assert_eq!(log.log_end_offset(), 5);
    // gap, rewind, and a different range overlapping a cached one
    for seq in [11, 9, 6] {
        assert!(matches!(
            produce(&mut log, &mut st, idem_batch(1, 7, 0, seq)),
            Err(ProducerError::OutOfOrderSequence(_))
        ));
    }
    // new epoch must start at 0; old epoch is fenced
    assert!(matches!(
        produce(&mut log, &mut st, idem_batch(1, 7, 1, 10)),
        Err(ProducerError::OutOfOrderSequence(_))
    ));
    assert_eq!(
        produce(&mut log, &mut st, idem_batch(1, 7, 1, 0)),
        Ok((5, false))
    );
    assert!(matches!(
        produce(&mut log, &mut st, idem_batch(1, 7, 0, 10)),
        Err(ProducerError::InvalidEpoch(_))
    ));
    assert!(matches!(
        produce(&mut log, &mut st, idem_batch(1, 8, 0, -1)),
        Err(ProducerError::InvalidSequence(_))
    ));
    // only the last five batches are remembered
    for i in 1..=5 {
        produce(&mut log, &mut st, idem_batch(1, 7, 1, i)).unwrap();
    }
    assert!(matches!(
        produce(&mut log, &mut st, idem_batch(1, 7, 1, 0)),
        Err(ProducerError::OutOfOrderSequence(_))
    ));
    assert_eq!(
        produce(&mut log, &mut st, idem_batch(1, 7, 1, 1)),
        Ok((6, true))
    );
    // sequence wrap-around
    let b = idem_batch(2, 9, 0, i32::MAX - 1);
    assert_eq!(last_seq_of(&header(&b)), i32::MAX);
    produce(&mut log, &mut st, b).unwrap();
    assert!(
        !produce(&mut log, &mut st, idem_batch(1, 9, 0, 0))
            .unwrap()
            .1
    );
    // non-idempotent batches are never checked
    assert!(
        st.check(&[header(&simple_batch(1, 1, 1))], AppendOrigin::Client)
            .unwrap()
            .is_none()
    );
    // expiry makes the producer unknown again: any sequence accepted
    assert_eq!(st.remove_expired(1_000 + 10, 10), 2);
    assert!(
        !produce(&mut log, &mut st, idem_batch(1, 7, 0, 42))
            .unwrap()
            .1
    );
}

#[test]
fn transactions_open_at_the_first_batch_and_end_at_the_marker() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = Log::open(tmp.path(), cfg(), false).unwrap();
    let mut st = ProducerState::load(&log).unwrap().0;
    produce(&mut log, &mut st, simple_batch(2, 1_000, 5)).unwrap(); // 0-1
    assert_eq!(
        produce(&mut log, &mut st, txn_batch(2, 7, 0, 0)),
        Ok((2, false))
    );
    assert!(st.has_ongoing_txn(7, 0));
    assert!(!st.has_ongoing_txn(7, 1) && !st.has_ongoing_txn(8, 0));
    produce(&mut log, &mut st, txn_batch(1, 8, 0, 0)).unwrap(); // 4
    produce(&mut log, &mut st, txn_batch(1, 7, 0, 2)).unwrap(); // 5
    assert_eq!(st.first_undecided_offset(), Some(2));
    // A producer in a transaction may not write outside it.
    assert!(matches!(
        produce(&mut log, &mut st, idem_batch(1, 7, 0, 3)),
        Err(ProducerError::InvalidTxnState(_))
    ));
    // Clients never write control batches.
    let b = end_txn_batch(
        7,
        0,
        EndTxnMarker {
            commit: true,
            coordinator_epoch: 0,
        },
        1,
    );
    assert!(matches!(
        st.check(&[header(&b)], AppendOrigin::Client),
        Err(ProducerError::InvalidRecord(_))
    ));
    // The commit of 7's transaction (2..=5) at 6: the LSO it leaves is 8's start.
    let (at, done) = mark(&mut log, &mut st, marker(7, 0, 3, true, 0)).unwrap();
    assert_eq!(at, 6);
    assert_eq!(
        done,
        vec![CompletedTxn {
            producer_id: 7,
            first_offset: 2,
            last_offset: 6,
            last_stable_offset: 4,
            aborted: false,
        }]
    );
    assert!(!st.has_ongoing_txn(7, 0));
    assert_eq!(st.first_undecided_offset(), Some(4));
    // The marker kept the epoch, so the sequence goes on; a plain batch is fine now.
    assert_eq!(
        produce(&mut log, &mut st, idem_batch(1, 7, 0, 3)),
        Ok((7, false))
    );
    // An older coordinator is fenced; an older producer epoch too.
    assert!(matches!(
        mark(&mut log, &mut st, marker(7, 0, 2, false, 0)),
        Err(ProducerError::CoordinatorFenced(_))
    ));
    // 8's abort: the last open transaction, so the LSO after it is past the marker.
    let (at, done) = mark(&mut log, &mut st, marker(8, 0, 3, false, 0)).unwrap();
    assert_eq!(
        done,
        vec![CompletedTxn {
            producer_id: 8,
            first_offset: 4,
            last_offset: at,
            last_stable_offset: at + 1,
            aborted: true,
        }]
    );
    assert_eq!(st.first_undecided_offset(), None);
    // A marker with no transaction open completes nothing but bumps the epoch (forgetting
    // the cached batches: the new epoch starts at sequence 0).
    assert_eq!(
        mark(&mut log, &mut st, marker(7, 1, 3, false, 0))
            .unwrap()
            .1,
        vec![]
    );
    assert!(matches!(
        produce(&mut log, &mut st, idem_batch(1, 7, 0, 4)),
        Err(ProducerError::InvalidEpoch(_))
    ));
    assert!(matches!(
        produce(&mut log, &mut st, txn_batch(1, 7, 1, 4)),
        Err(ProducerError::OutOfOrderSequence(_))
    ));
    assert!(matches!(
        mark(&mut log, &mut st, marker(7, 0, 3, true, 0)),
        Err(ProducerError::InvalidEpoch(_))
    ));
    // Producers inside a transaction never expire.
    produce(&mut log, &mut st, txn_batch(1, 7, 1, 0)).unwrap();
    assert_eq!(st.remove_expired(i64::MAX, 10), 1, "producer 8 went");
    assert!(st.has_ongoing_txn(7, 1));
    let s = &st.summaries()[0];
    assert_eq!((s.producer_id, s.coordinator_epoch), (7, 3));
    assert_eq!(s.current_txn_start_offset, log.log_end_offset() - 1);
}

#[test]
fn transaction_version_2_markers_carry_a_higher_epoch() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = Log::open(tmp.path(), cfg(), false).unwrap();
    let mut st = ProducerState::load(&log).unwrap().0;
    produce(&mut log, &mut st, txn_batch(1, 5, 3, 0)).unwrap();
    // The same epoch is refused with TV2 (accepted below it).
    assert!(matches!(
        st.check_marker(&marker(5, 3, 0, true, 2)),
        Err(ProducerError::InvalidEpoch(_))
    ));
    assert_eq!(st.check_marker(&marker(5, 3, 0, true, 1)), Ok(()));
    let (_, done) = mark(&mut log, &mut st, marker(5, 4, 0, true, 2)).unwrap();
    assert_eq!(done.len(), 1);
    // A retry of that marker (same epoch, transaction over) is written again.
    assert_eq!(st.check_marker(&marker(5, 4, 0, true, 2)), Ok(()));
    assert!(matches!(
        st.check_marker(&marker(5, 3, 0, true, 2)),
        Err(ProducerError::InvalidEpoch(_))
    ));
    // The next transaction runs at the bumped epoch from sequence 0.
    assert_eq!(
        produce(&mut log, &mut st, txn_batch(1, 5, 4, 0)).map(|r| r.1),
        Ok(false)
    );
    assert!(matches!(
        st.check_marker(&marker(5, 4, 0, true, 2)),
        Err(ProducerError::InvalidEpoch(_))
    ));
}

#[test]
fn coordinator_appends_are_checked_for_epoch_and_transaction_only() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = Log::open(tmp.path(), cfg(), false).unwrap();
    let mut st = ProducerState::load(&log).unwrap().0;
    // Transactional offset commits carry no sequence.
    let b = txn_batch(1, 9, 2, -1);
    assert_eq!(st.check(&[header(&b)], AppendOrigin::Coordinator), Ok(None));
    assert!(matches!(
        st.check(&[header(&b)], AppendOrigin::Client),
        Err(ProducerError::InvalidSequence(_))
    ));
    let mut bytes = b.clone();
    let info = log.append(&mut bytes, 0, None, 1 << 20).unwrap();
    st.update(&info.batches, &bytes);
    assert!(st.has_ongoing_txn(9, 2));
    // Again at -1: not a duplicate (only clients' retries are), still in the transaction.
    assert_eq!(st.check(&[header(&b)], AppendOrigin::Coordinator), Ok(None));
    assert!(matches!(
        st.check(
            &[header(&txn_batch(1, 9, 1, -1))],
            AppendOrigin::Coordinator
        ),
        Err(ProducerError::InvalidEpoch(_))
    ));
}

#[test]
fn snapshot_and_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = Log::open(tmp.path(), cfg(), false).unwrap();
    let mut st = ProducerState::load(&log).unwrap().0;
    let mut offsets = Vec::new();
    for i in 0..60 {
        let b = idem_batch(2, 3, 0, i * 2);
        let mut bytes = b.clone();
        st.check(&[header(&b)], AppendOrigin::Client).unwrap();
        let info = log.append(&mut bytes, 0, None, 1 << 20).unwrap();
        if let Some(at) = info.rolled_at {
            st.take_snapshot(at).unwrap();
        }
        st.update(&info.batches, &bytes);
        offsets.push(info.first_offset);
    }
    assert!(log.num_segments() > 3);
    let snaps = list_snapshots(tmp.path()).unwrap();
    assert_eq!(snaps.len(), SNAPSHOTS_KEPT);
    // reload from the newest snapshot plus the active segment
    let st2 = ProducerState::load(&log).unwrap().0;
    assert_eq!(st2.producers, st.producers);
    // no snapshots at all: full replay gives the same
    assert!(snapshot_path(tmp.path(), log.log_end_offset()).exists());
    for f in list_snapshots(tmp.path()).unwrap() {
        fs::remove_file(snapshot_path(tmp.path(), f)).unwrap();
    }
    let st3 = ProducerState::load(&log).unwrap().0;
    assert_eq!(st3.producers, st.producers);
    // a corrupt newest snapshot is skipped
    let leo = log.log_end_offset();
    fs::write(snapshot_path(tmp.path(), leo), b"SLPS\0\x02garbage").unwrap();
    let st4 = ProducerState::load(&log).unwrap().0;
    assert_eq!(st4.producers, st.producers);
    // a snapshot beyond the log end (after truncation) is dropped
    st.take_snapshot(leo + 100).unwrap();
    log.truncate_to(offsets[58]).unwrap();
    let st5 = ProducerState::load(&log).unwrap().0;
    assert!(!snapshot_path(tmp.path(), leo + 100).exists());
    let e = &st5.producers[&3];
    assert_eq!(e.last_seq(), 58 * 2 - 1);
    assert_eq!(e.batches.back().unwrap().first_offset, offsets[57]);
    assert_eq!(
        st5.check(&[header(&idem_batch(2, 3, 0, 116))], AppendOrigin::Client)
            .unwrap(),
        None,
        "the truncated batch may be sent again"
    );
}

#[test]
fn ongoing_transactions_survive_snapshots_and_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = Log::open(tmp.path(), cfg(), false).unwrap();
    let mut st = ProducerState::load(&log).unwrap().0;
    produce(&mut log, &mut st, txn_batch(1, 1, 0, 0)).unwrap(); // 0: stays open
    produce(&mut log, &mut st, txn_batch(1, 2, 0, 0)).unwrap(); // 1
    mark(&mut log, &mut st, marker(2, 0, 4, false, 0)).unwrap(); // 2: aborts 2's
    st.take_snapshot(log.log_end_offset()).unwrap();
    produce(&mut log, &mut st, txn_batch(1, 3, 0, 0)).unwrap(); // 3
    let (_, after) = mark(&mut log, &mut st, marker(3, 0, 4, false, 0)).unwrap(); // 4
    // From the snapshot at 3: producer 1's transaction is still open, and replaying 3..5
    // finds 3's abort again with the same LSO.
    let (st2, replayed) = ProducerState::load(&log).unwrap();
    assert_eq!(st2.producers, st.producers);
    assert_eq!(st2.first_undecided_offset(), Some(0));
    assert_eq!(replayed, after);
    assert_eq!(replayed[0].last_stable_offset, 0);
    // Without snapshots, the whole log replays to the same state.
    for f in list_snapshots(tmp.path()).unwrap() {
        fs::remove_file(snapshot_path(tmp.path(), f)).unwrap();
    }
    let (st3, replayed) = ProducerState::load(&log).unwrap();
    assert_eq!(st3.producers, st.producers);
    assert_eq!(replayed.len(), 2);
    assert!(replayed.iter().all(|t| t.aborted));
    // A version 1 snapshot (no transactions) is still read.
    let mut v1 = Vec::new();
    let mut body = Vec::new();
    body.extend_from_slice(&1u32.to_be_bytes());
    body.extend_from_slice(&5i64.to_be_bytes());
    body.extend_from_slice(&2i16.to_be_bytes());
    body.extend_from_slice(&900i64.to_be_bytes());
    body.push(0);
    v1.extend_from_slice(b"SLPS");
    v1.extend_from_slice(&1u16.to_be_bytes());
    v1.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    v1.extend_from_slice(&body);
    let read = crate::producer::snapshot::decode(&v1).unwrap();
    assert_eq!(read[&5].epoch, 2);
    assert_eq!(read[&5].current_txn_first_offset, None);
    assert_eq!(read[&5].coordinator_epoch, -1);
}
