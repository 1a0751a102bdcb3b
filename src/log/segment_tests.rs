//! Tests of `log::segment`: file names, appends, offset lookups, truncation, recovery, and when the index files are made.

use super::*;
use crate::log::batch::test_support::simple_batch;

fn append_one(seg: &mut Segment, n: usize, ts: i64) {
    let mut b = simple_batch(n, ts, 100);
    batch::set_base_offset(&mut b, seg.next_offset());
    let hs = batch::validate_for_append(&b, usize::MAX).unwrap();
    seg.append(&b, &hs, 0).unwrap();
}

#[test]
fn names() {
    assert_eq!(file_name(42, LOG_SUFFIX), "00000000000000000042.log");
    assert_eq!(
        parse_file_name("00000000000000000042.timeindex"),
        Some((42, TIME_INDEX_SUFFIX))
    );
    assert_eq!(
        parse_file_name("00000000000000000042.index"),
        Some((42, INDEX_SUFFIX))
    );
    assert_eq!(parse_file_name("0000000000000000042.log"), None);
    assert_eq!(parse_file_name("00000000000000000042.log.deleted"), None);
    assert_eq!(parse_file_name("leader-epoch-checkpoint"), None);
}

#[test]
fn append_translate_truncate_recover() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        index_interval_bytes: 500,
        ..LogConfig::default()
    };
    let mut seg = Segment::create(dir.path(), 100, &cfg).unwrap();
    assert!(Segment::create(dir.path(), 100, &cfg).is_err());
    for i in 0..50 {
        append_one(&mut seg, 3, 1000 + i);
    }
    assert_eq!(seg.next_offset(), 250);
    assert!(seg.offset_index().len() > 5);
    for target in 100..250 {
        let (pos, h) = seg.translate_offset(target).unwrap().unwrap();
        assert!(h.base_offset <= target && target <= h.last_offset());
        assert_eq!(h.base_offset, 100 + (target - 100) / 3 * 3);
        assert_eq!(
            pos,
            (h.base_offset - 100) as u64 / 3 * h.total_size() as u64
        );
    }
    assert!(seg.translate_offset(250).unwrap().is_none());
    assert_eq!(seg.find_by_timestamp(1010, 0).unwrap(), Some((1010, 130)));
    assert_eq!(seg.max_timestamp_record().unwrap(), Some((1049, 247)));

    let entries: Vec<_> = (0..seg.offset_index().len())
        .map(|i| seg.offset_index().entry(i))
        .collect();
    let tentries: Vec<_> = (0..seg.time_index().len())
        .map(|i| seg.time_index().entry(i))
        .collect();
    let size = seg.size();
    assert_eq!(seg.recover().unwrap(), 0);
    assert_eq!(seg.size(), size);
    let rebuilt: Vec<_> = (0..seg.offset_index().len())
        .map(|i| seg.offset_index().entry(i))
        .collect();
    let trebuilt: Vec<_> = (0..seg.time_index().len())
        .map(|i| seg.time_index().entry(i))
        .collect();
    assert_eq!(entries, rebuilt, "rebuilt index equals the appended one");
    assert_eq!(tentries, trebuilt);

    let removed = seg.truncate_to(201).unwrap();
    assert!(removed > 0);
    assert_eq!(seg.next_offset(), 199);
    assert_eq!(seg.max_timestamp(), 1032);
    assert!(seg.load_state().is_ok());
    append_one(&mut seg, 1, 5);
    assert_eq!(seg.next_offset(), 200);
    drop(seg);
    let (mut seg, missing) = Segment::open(dir.path(), 100, &cfg).unwrap();
    assert!(!missing);
    seg.load_state().unwrap();
    assert_eq!(seg.next_offset(), 200);
    assert_eq!(seg.max_timestamp(), 1032);
    seg.delete().unwrap();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn index_files_are_made_when_needed() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig::default();
    let names = || {
        let mut v: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    // Stale index files under the new segment's name are removed, none are made.
    std::fs::write(dir.path().join(file_name(0, INDEX_SUFFIX)), [1u8; 8]).unwrap();
    std::fs::write(dir.path().join(file_name(0, TIME_INDEX_SUFFIX)), [1u8; 12]).unwrap();
    let seg = Segment::create(dir.path(), 0, &cfg).unwrap();
    seg.flush().unwrap();
    assert_eq!(names(), vec!["00000000000000000000.log"]);
    drop(seg);
    // An empty segment without index files opens as it is: nothing to recover.
    let (mut seg, missing) = Segment::open(dir.path(), 0, &cfg).unwrap();
    assert!(!missing);
    seg.load_state().unwrap();
    assert_eq!(names(), vec!["00000000000000000000.log"]);
    // The first data, without an index entry yet, makes both files.
    append_one(&mut seg, 1, 5);
    assert_eq!(seg.offset_index().len(), 0);
    assert_eq!(
        names(),
        vec![
            "00000000000000000000.index",
            "00000000000000000000.log",
            "00000000000000000000.timeindex"
        ]
    );
    drop(seg);
    // A segment holding data whose index files are gone is recovered.
    std::fs::remove_file(dir.path().join(file_name(0, INDEX_SUFFIX))).unwrap();
    let (_, missing) = Segment::open(dir.path(), 0, &cfg).unwrap();
    assert!(missing);
}
