//! Tests of the leader epoch cache as the log keeps it, and of a follower's appends.

use super::*;
use crate::log::batch::test_support::simple_batch;
use crate::log::leader_epoch::{CHECKPOINT_FILE, EpochEntry};

const MAX: usize = 1 << 20;

fn cfg() -> LogConfig {
    super::tests::small_cfg()
}

fn entries(log: &Log) -> Vec<(i32, i64)> {
    log.epoch_cache()
        .entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect()
}

/// A leader's log with epochs 0 (offsets 0..10), 2 (10..15) and 5 (15..20).
fn leader_log(dir: &Path) -> Log {
    let mut log = Log::open(dir, cfg(), false).unwrap();
    for (epoch, n) in [(0, 10), (2, 5), (5, 5)] {
        let mut b = simple_batch(n, 1_000, 20);
        log.append_at(&mut b, epoch, None, MAX, 1).unwrap();
    }
    log
}

#[test]
fn leader_appends_record_epochs_and_the_file_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = leader_log(dir.path());
    assert_eq!(entries(&log), vec![(0, 0), (2, 10), (5, 15)]);
    assert_eq!(log.end_offset_for_epoch(2), (2, 15));
    assert_eq!(log.end_offset_for_epoch(3), (2, 15));
    assert_eq!(log.end_offset_for_epoch(5), (5, 20));
    log.close().unwrap();
    let text = std::fs::read_to_string(dir.path().join(CHECKPOINT_FILE)).unwrap();
    assert_eq!(text, "0\n3\n0 0\n2 10\n5 15\n");
    drop(log);
    let log = Log::open(dir.path(), cfg(), false).unwrap();
    assert_eq!(entries(&log), vec![(0, 0), (2, 10), (5, 15)]);
}

#[test]
fn a_lost_or_corrupt_checkpoint_is_rebuilt_from_the_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = leader_log(dir.path());
    log.close().unwrap();
    drop(log);
    std::fs::remove_file(dir.path().join(CHECKPOINT_FILE)).unwrap();
    let log = Log::open(dir.path(), cfg(), false).unwrap();
    assert_eq!(entries(&log), vec![(0, 0), (2, 10), (5, 15)]);
    drop(log);
    std::fs::write(dir.path().join(CHECKPOINT_FILE), "0\n9\nbad\n").unwrap();
    let log = Log::open(dir.path(), cfg(), true).unwrap();
    assert_eq!(entries(&log), vec![(0, 0), (2, 10), (5, 15)]);
    // The rebuilt cache was written back.
    let text = std::fs::read_to_string(dir.path().join(CHECKPOINT_FILE)).unwrap();
    assert_eq!(text, "0\n3\n0 0\n2 10\n5 15\n");
}

#[test]
fn a_crash_before_the_file_was_written_is_recovered() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut log = leader_log(dir.path());
        log.flush().unwrap();
        let mut b = simple_batch(3, 1_000, 20);
        log.append_at(&mut b, 7, None, MAX, 2).unwrap();
        // Dropped without close: epoch 7 is not in the file.
    }
    let text = std::fs::read_to_string(dir.path().join(CHECKPOINT_FILE)).unwrap();
    assert!(!text.contains("7 20"), "{text}");
    let log = Log::open(dir.path(), cfg(), true).unwrap();
    assert_eq!(entries(&log), vec![(0, 0), (2, 10), (5, 15), (7, 20)]);
}

#[test]
fn truncation_and_retention_trim_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = leader_log(dir.path());
    log.truncate_to(15).unwrap();
    assert_eq!(entries(&log), vec![(0, 0), (2, 10)]);
    assert_eq!(log.end_offset_for_epoch(5), (-1, -1));
    let text = std::fs::read_to_string(dir.path().join(CHECKPOINT_FILE)).unwrap();
    assert_eq!(text, "0\n2\n0 0\n2 10\n", "a truncation is saved at once");
    log.truncate_to(0).unwrap();
    assert!(entries(&log).is_empty());
}

#[test]
fn follower_appends_keep_the_leaders_offsets_and_epochs() {
    let leader_dir = tempfile::tempdir().unwrap();
    let leader = leader_log(leader_dir.path());
    let bytes = leader
        .read(0, 1 << 20, i64::MAX, true)
        .unwrap()
        .read_to_vec()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut follower = Log::open(dir.path(), cfg(), false).unwrap();
    let info = follower.append_as_follower(&bytes, 5).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 19));
    assert_eq!(follower.log_end_offset(), 20);
    assert_eq!(entries(&follower), entries(&leader));
    let copy = follower
        .read(0, 1 << 20, i64::MAX, true)
        .unwrap()
        .read_to_vec()
        .unwrap();
    assert_eq!(copy, bytes, "stored byte for byte as the leader has them");
    // The same batches again do not follow the log end.
    assert!(matches!(
        follower.append_as_follower(&bytes, 6),
        Err(AppendError::OutOfOrder { .. })
    ));
    // A batch from further on (a compacted leader's gap) starts where it says.
    let mut later = simple_batch(2, 1_000, 20);
    batch::set_base_offset(&mut later, 30);
    batch::set_partition_leader_epoch(&mut later, 9);
    follower.append_as_follower(&later, 7).unwrap();
    assert_eq!(follower.log_end_offset(), 32);
    assert_eq!(
        follower.epoch_cache().entries().last(),
        Some(&EpochEntry {
            epoch: 9,
            start_offset: 30
        })
    );
    // A corrupt copy is refused.
    let mut bad = simple_batch(1, 1_000, 20);
    batch::set_base_offset(&mut bad, 32);
    let n = bad.len();
    bad[n - 1] ^= 0xff;
    assert!(matches!(
        follower.append_as_follower(&bad, 8),
        Err(AppendError::Batch(_))
    ));
}

#[test]
fn an_empty_follower_starts_at_the_leaders_first_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut follower = Log::open(dir.path(), cfg(), false).unwrap();
    let mut b = simple_batch(3, 1_000, 20);
    batch::set_base_offset(&mut b, 100);
    follower.append_as_follower(&b, 1).unwrap();
    assert_eq!(
        (follower.log_start_offset(), follower.log_end_offset()),
        (100, 103)
    );
    drop(follower);
    let log = Log::open(dir.path(), cfg(), true).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (100, 103));
}

#[test]
fn truncating_at_the_log_end_forgets_an_epoch_with_nothing_in_it() {
    // A leader took epoch 7 at its log end and died before appending: as a follower of the
    // new leader (which never had epoch 7) it must stop naming it.
    let dir = tempfile::tempdir().unwrap();
    let mut log = leader_log(dir.path());
    log.assign_epoch_start(7);
    assert_eq!(entries(&log), vec![(0, 0), (2, 10), (5, 15), (7, 20)]);
    log.truncate_to(20).unwrap();
    assert_eq!(entries(&log), vec![(0, 0), (2, 10), (5, 15)]);
    assert_eq!(log.latest_epoch(), Some(5));
    assert_eq!(log.log_end_offset(), 20);
    let text = std::fs::read_to_string(dir.path().join(CHECKPOINT_FILE)).unwrap();
    assert_eq!(text, "0\n3\n0 0\n2 10\n5 15\n");
}
