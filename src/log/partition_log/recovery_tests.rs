//! Tests of the partition log's recovery: reopening after a clean close, torn and corrupt
//! tails, the recovery point, and rebuilt indexes.

use super::tests::{all_records, append_simple, small_cfg};
use super::*;
#[test]
fn reopen_after_close_same_state() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = Log::open(tmp.path(), small_cfg(), false).unwrap();
    for i in 0..123 {
        append_simple(&mut log, 1 + i % 5, 100 + i as i64, 0);
    }
    let (leo, size, nseg) = (log.log_end_offset(), log.size_bytes(), log.num_segments());
    let before = all_records(&log);
    let maxts = log.max_timestamp_offset().unwrap();
    log.close().unwrap();
    drop(log);
    let mut log = Log::open(tmp.path(), small_cfg(), false).unwrap();
    assert_eq!(
        (log.log_end_offset(), log.size_bytes(), log.num_segments()),
        (leo, size, nseg)
    );
    assert_eq!(all_records(&log), before);
    assert_eq!(log.max_timestamp_offset().unwrap(), maxts);
    let info = append_simple(&mut log, 2, 1, 0);
    assert_eq!(info.first_offset, leo);
    drop(log);
    // an unclean reopen of a clean log changes nothing
    let log = Log::open(tmp.path(), small_cfg(), true).unwrap();
    assert_eq!(log.log_end_offset(), leo + 2);
    assert_eq!(log.size_bytes(), size + info.size_bytes as u64);
}

fn active_log_path(log: &Log) -> PathBuf {
    log.segments().last().unwrap().log_path().to_path_buf()
}

fn build(dir: &Path, batches: usize) -> (i64, u64, u64) {
    let mut log = Log::open(dir, small_cfg(), false).unwrap();
    let mut last = 0;
    for i in 0..batches {
        last = append_simple(&mut log, 3, i as i64, 0).size_bytes as u64;
    }
    let active = log.segments().last().unwrap().size();
    (log.log_end_offset(), active, last)
}

#[test]
fn recovery_truncated_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let (leo, active_size, last_size) = build(tmp.path(), 40);
    let path = {
        let log = Log::open(tmp.path(), small_cfg(), false).unwrap();
        active_log_path(&log)
    };
    // cut mid-batch
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(active_size - last_size / 2).unwrap();
    drop(f);
    let mut log = Log::open(tmp.path(), small_cfg(), true).unwrap();
    assert_eq!(log.log_end_offset(), leo - 3);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        active_size - last_size
    );
    assert_eq!(all_records(&log).len() as i64, leo - 3);
    let info = append_simple(&mut log, 3, 0, 0);
    assert_eq!(info.first_offset, leo - 3);
    drop(log);
    let log = Log::open(tmp.path(), small_cfg(), false).unwrap();
    assert_eq!(log.log_end_offset(), leo);
}

#[test]
fn recovery_corrupt_crc_in_last_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let (leo, active_size, last_size) = build(tmp.path(), 40);
    let path = {
        let log = Log::open(tmp.path(), small_cfg(), false).unwrap();
        active_log_path(&log)
    };
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&[0xEE], active_size - 3).unwrap();
    drop(f);
    let log = Log::open(tmp.path(), small_cfg(), true).unwrap();
    assert_eq!(log.log_end_offset(), leo - 3);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        active_size - last_size
    );
}

#[test]
fn recovery_from_recovery_point_deletes_later_segments() {
    let tmp = tempfile::tempdir().unwrap();
    build(tmp.path(), 60);
    let log = Log::open(tmp.path(), small_cfg(), false).unwrap();
    let bases: Vec<i64> = log.segments().map(Segment::base_offset).collect();
    assert!(bases.len() >= 3);
    let victim = log.segments().nth(1).unwrap();
    let (vpath, vsize, vnext) = (
        victim.log_path().to_path_buf(),
        victim.size(),
        victim.next_offset(),
    );
    drop(log);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&vpath)
        .unwrap();
    f.write_all_at(&[0xEE], vsize - 3).unwrap();
    drop(f);
    let log = Log::open_from_recovery_point(tmp.path(), small_cfg(), true, Some(0)).unwrap();
    assert_eq!(log.num_segments(), 2);
    assert_eq!(log.log_end_offset(), vnext - 3);
    assert!(
        !tmp.path()
            .join(segment::file_name(bases[2], ".log"))
            .exists()
    );
    assert!(
        !tmp.path()
            .join(segment::file_name(bases[2], ".index"))
            .exists()
    );
}

#[test]
fn rebuild_deleted_and_garbage_indexes() {
    let tmp = tempfile::tempdir().unwrap();
    build(tmp.path(), 100);
    let log = Log::open(tmp.path(), small_cfg(), false).unwrap();
    let snapshot = |log: &Log| -> Vec<(Vec<_>, Vec<_>)> {
        log.segments()
            .map(|s| {
                (
                    (0..s.offset_index().len())
                        .map(|i| s.offset_index().entry(i))
                        .collect(),
                    (0..s.time_index().len())
                        .map(|i| s.time_index().entry(i))
                        .collect(),
                )
            })
            .collect()
    };
    let before = snapshot(&log);
    let recs = all_records(&log);
    let bases: Vec<i64> = log.segments().map(Segment::base_offset).collect();
    assert!(before[0].0.len() > 3);
    assert!(bases.len() >= 5);
    drop(log);
    let d = tmp.path();
    std::fs::remove_file(d.join(segment::file_name(bases[0], ".index"))).unwrap();
    std::fs::write(d.join(segment::file_name(bases[1], ".index")), [0x5a; 43]).unwrap();
    std::fs::remove_file(d.join(segment::file_name(bases[2], ".timeindex"))).unwrap();
    let mut garbage_time = vec![0u8; 24];
    garbage_time[0..8].copy_from_slice(&i64::MAX.to_be_bytes());
    std::fs::write(
        d.join(segment::file_name(bases[3], ".timeindex")),
        &garbage_time,
    )
    .unwrap();
    // an index entry pointing past the log
    std::fs::write(
        d.join(segment::file_name(bases[4], ".index")),
        [0, 0, 0, 1, 0x7f, 0, 0, 0],
    )
    .unwrap();
    let log = Log::open(d, small_cfg(), false).unwrap();
    let after = snapshot(&log);
    // Offset indexes are rebuilt identically. (Time indexes may lack the
    // final entry written at roll/close, so they are checked by lookups.)
    for i in 0..5 {
        assert_eq!(before[i].0, after[i].0, "offset index of segment {i}");
    }
    assert_eq!(all_records(&log), recs);
    for target in (0..log.log_end_offset()).step_by(7) {
        let s = log.read(target, 1, i64::MAX, true).unwrap();
        assert!(s.first_batch_offset <= target && target < s.first_batch_offset + 3);
    }
    for r in recs.iter().step_by(5) {
        let found = log.offset_for_timestamp(r.timestamp).unwrap().unwrap();
        assert_eq!(found.0, r.timestamp);
    }
}
