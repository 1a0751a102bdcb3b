//! Tests of moving the log start offset: inside a segment, whole-segment deletion, the bounds,
//! and a reopened log given its checkpointed start.

use super::tests::{append_simple, files, small_cfg};
use super::*;

/// A log of 100 two-record batches over several 4 KiB segments.
fn filled(dir: &Path) -> Log {
    let mut log = Log::open(dir, small_cfg(), false).unwrap();
    for i in 0..100 {
        append_simple(&mut log, 2, 1_000 + i, 0);
    }
    assert!(log.num_segments() > 3);
    log
}

fn bases(log: &Log) -> Vec<i64> {
    log.segments().map(Segment::base_offset).collect()
}

#[test]
fn start_inside_a_segment_hides_what_is_below() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = filled(tmp.path());
    let before = bases(&log);
    let first_next = before[1];
    // Inside the first segment and inside a batch (batches hold offsets 2k, 2k+1).
    let start = first_next - 3;
    assert!(start % 2 == 1 && start < first_next);
    assert!(log.advance_log_start(start).unwrap());
    assert_eq!(log.log_start_offset(), start);
    assert_eq!(bases(&log), before, "no segment is wholly below the start");
    assert_eq!(log.first_segment_base(), 0);
    assert!(matches!(
        log.read(start - 1, MAX_READ, i64::MAX, true),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
    let s = log.read(start, MAX_READ, i64::MAX, true).unwrap();
    assert_eq!(
        s.first_batch_offset,
        start - 1,
        "the batch holding the start"
    );
    // A timestamp before every record finds the start, not offset 0.
    let (_, offset) = log.offset_for_timestamp(0).unwrap().unwrap();
    assert_eq!(offset, start);
    // The start never goes back.
    assert!(!log.advance_log_start(start - 1).unwrap());
    assert!(!log.advance_log_start(start).unwrap());
    assert_eq!(log.log_start_offset(), start);
}

const MAX_READ: usize = 1 << 20;

#[test]
fn whole_segments_below_the_start_are_deleted() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = filled(tmp.path());
    let before = bases(&log);
    let size = log.size_bytes();
    let first_size = log.segments().next().unwrap().size();
    // Exactly the third segment's base: the first two go, the third is kept.
    assert!(log.advance_log_start(before[2]).unwrap());
    assert_eq!(bases(&log), before[2..]);
    let names = files(tmp.path());
    for gone in &before[..2] {
        let f = segment::file_name(*gone, segment::LOG_SUFFIX);
        assert!(!names.contains(&f), "{f} still in {names:?}");
    }
    assert!(names.contains(&segment::file_name(before[2], segment::LOG_SUFFIX)));
    assert!(log.size_bytes() < size - first_size);
    // Up to the log end: every segment but the active one goes; the log stays appendable.
    let leo = log.log_end_offset();
    let active = *before.last().unwrap();
    assert!(log.advance_log_start(leo).unwrap());
    assert_eq!(bases(&log), vec![active]);
    assert!(log.read(leo, MAX_READ, i64::MAX, true).unwrap().is_empty());
    let info = append_simple(&mut log, 1, 5_000, 0);
    assert_eq!((info.first_offset, info.log_start_offset), (leo, leo));
}

#[test]
fn start_past_the_log_end_is_out_of_range() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = filled(tmp.path());
    let leo = log.log_end_offset();
    assert!(matches!(
        log.advance_log_start(leo + 1),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
    assert_eq!(log.log_start_offset(), 0);
}

#[test]
fn the_epoch_cache_forgets_what_is_below_the_start() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = Log::open(tmp.path(), small_cfg(), false).unwrap();
    log.assign_epoch_start(1);
    append_simple(&mut log, 2, 1, 0);
    log.assign_epoch_start(2);
    append_simple(&mut log, 2, 2, 0);
    log.advance_log_start(3).unwrap();
    assert_eq!(log.epoch_cache().entries()[0].start_offset, 3);
    drop(log);
    let log = Log::open(tmp.path(), small_cfg(), false).unwrap();
    assert_eq!(log.epoch_cache().entries()[0].start_offset, 3);
}

#[test]
fn a_reopened_log_given_its_checkpointed_start_is_where_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = filled(tmp.path());
    let before = bases(&log);
    let start = before[1] + 3;
    log.advance_log_start(start).unwrap();
    let leo = log.log_end_offset();
    log.close().unwrap();
    drop(log);
    // The segments alone give the first segment's base ...
    let mut log = Log::open(tmp.path(), small_cfg(), true).unwrap();
    assert_eq!(log.log_start_offset(), before[1]);
    // ... and the checkpointed start puts the start back inside it.
    assert!(log.advance_log_start(start).unwrap());
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (start, leo));
    assert_eq!(bases(&log), before[1..]);
}
