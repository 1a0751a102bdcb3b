//! Compaction of a partition log: cleaning, the swap, and start-up after a swap cut short.

use std::collections::{BTreeMap, HashMap};

use super::tests::{MAX, files, small_cfg};
use super::*;
use crate::log::batch::batches;
use crate::log::batch::test_support::keyed_batch;
use crate::log::cleaner::{self, CleanInput, CleanOutcome, records};

fn put(log: &mut Log, key: &str, value: Option<&str>, now: i64) {
    let mut b = keyed_batch(
        &[(Some(key.as_bytes()), value.map(str::as_bytes), 0)],
        now,
        (-1, -1, -1),
    );
    log.append_at(&mut b, 0, None, MAX, now).unwrap();
}

/// Every (offset, key, value) readable, front to back.
fn contents(log: &Log) -> Vec<(i64, String, Option<String>)> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let slice = log.read(offset, 1 << 30, i64::MAX, true).unwrap();
        if slice.is_empty() {
            break;
        }
        let bytes = slice.read_to_vec().unwrap();
        for h in batches(&bytes) {
            let h = h.unwrap();
            let p = h.position as usize;
            let b = &bytes[p..p + h.total_size()];
            assert!(crate::log::batch::verify_crc(b));
            let pl = records::payload(b, &h).unwrap();
            for r in records::parse(&h, &pl).unwrap() {
                if r.offset >= offset {
                    let mut c = crate::log::batch::Cursor {
                        buf: r.tail,
                        pos: 0,
                    };
                    let k = c.bytes_field().unwrap().unwrap();
                    let v = c.bytes_field().unwrap();
                    out.push((
                        r.offset,
                        String::from_utf8_lossy(k).into_owned(),
                        v.map(|v| String::from_utf8_lossy(v).into_owned()),
                    ));
                }
            }
            offset = h.next_offset();
        }
    }
    out
}

fn input(log: &Log, first_dirty: i64, now: i64) -> CleanInput {
    CleanInput {
        dir: log.dir().to_path_buf(),
        segments: log.cleaner_segments(),
        aborted: log.collect_aborted_txns(log.log_start_offset(), log.log_end_offset()),
        last_records: HashMap::new(),
        first_dirty_offset: first_dirty,
        end_offset: log.active_base_offset(),
        delete_retention_ms: 1_000,
        map_buffer_bytes: 1 << 20,
        map_load_factor: 0.9,
        segment_bytes: log.config().segment_bytes,
        segment_index_bytes: log.config().segment_index_bytes,
        index_interval_bytes: log.config().index_interval_bytes as u64,
        now_ms: now,
        throttle: None,
    }
}

fn clean_and_swap(log: &mut Log, first_dirty: i64, now: i64) -> CleanOutcome {
    let out = cleaner::clean::clean(&input(log, first_dirty, now)).unwrap();
    for c in &out.cleaned {
        assert!(log.swap_cleaned(c).unwrap());
    }
    out
}

fn latest(entries: &[(i64, String, Option<String>)]) -> BTreeMap<String, (i64, Option<String>)> {
    let mut m = BTreeMap::new();
    for (o, k, v) in entries {
        m.insert(k.clone(), (*o, v.clone()));
    }
    m
}

/// 10 keys written 30 times each over many small segments, with key 3 deleted at the end.
fn filled_log(dir: &Path) -> Log {
    let mut log = Log::open(dir, small_cfg(), false).unwrap();
    for round in 0..30 {
        for k in 0..10 {
            put(
                &mut log,
                &format!("k{k}"),
                Some(&format!("v{round}")),
                1_000,
            );
        }
    }
    put(&mut log, "k3", None, 1_000);
    log.roll(1_000).unwrap();
    log
}

#[test]
fn cleaning_keeps_the_latest_value_per_key_at_its_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut log = filled_log(&dir);
    let before = contents(&log);
    let segs_before = log.num_segments();
    assert!(segs_before > 4);
    // Groups merge up to segment.bytes: raised, the full small segments fit together.
    log.set_config(LogConfig {
        segment_bytes: 1 << 20,
        ..small_cfg()
    });
    let out = clean_and_swap(&mut log, 0, 2_000);
    assert_eq!(out.next_dirty_offset, 301);
    let after = contents(&log);
    assert_eq!(latest(&after), latest(&before));
    // One record per key; the tombstone stays until its horizon (now + 1 s).
    assert_eq!(after.len(), 10);
    assert!(log.num_segments() < segs_before, "small segments merged");
    assert_eq!(out.pending_delete_horizon, Some(3_000));
    assert_eq!(log.log_end_offset(), 301);
    // Second pass after the horizon: the tombstone goes.
    let out = clean_and_swap(&mut log, 301, 3_000);
    assert_eq!(out.next_dirty_offset, 301);
    let after = contents(&log);
    assert_eq!(after.len(), 9);
    assert!(after.iter().all(|(_, k, _)| k != "k3"));
    // Reopened (clean start), the same.
    log.close().unwrap();
    drop(log);
    let log = Log::open(&dir, small_cfg(), true).unwrap();
    assert!(
        files(&dir)
            .iter()
            .all(|f| !f.ends_with(".swap") && !f.ends_with(".cleaned"))
    );
    assert_eq!(contents(&log), after);
    assert_eq!(log.log_end_offset(), 301);
}

#[test]
fn a_small_map_cleans_as_far_as_it_reaches() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = filled_log(&tmp.path().join("t-0"));
    let mut inp = input(&log, 0, 2_000);
    inp.map_buffer_bytes = 24 * 6; // 5 keys
    let out = cleaner::clean::clean(&inp).unwrap();
    // The map fills at the first record of the 6th key (offset 5).
    assert_eq!(out.next_dirty_offset, 5);
    for c in &out.cleaned {
        assert!(log.swap_cleaned(c).unwrap());
    }
    // Nothing past the map is known to be superseded: every record stays this pass.
    assert_eq!(contents(&log).len(), 301);
    // Pass after pass the checkpoint moves on until the whole log is deduplicated.
    let mut dirty = out.next_dirty_offset;
    for _ in 0..100 {
        if dirty >= 301 {
            break;
        }
        let mut inp = input(&log, dirty, 2_000);
        inp.map_buffer_bytes = 24 * 6;
        let out = cleaner::clean::clean(&inp).unwrap();
        assert!(out.next_dirty_offset > dirty);
        dirty = out.next_dirty_offset;
        for c in &out.cleaned {
            assert!(log.swap_cleaned(c).unwrap());
        }
    }
    assert_eq!(dirty, 301);
    assert_eq!(contents(&log).len(), 10);
}

#[test]
fn a_changed_log_refuses_the_swap() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut log = filled_log(&dir);
    let out = cleaner::clean::clean(&input(&log, 0, 2_000)).unwrap();
    log.truncate_to(150).unwrap();
    let mut swapped = 0;
    for c in &out.cleaned {
        swapped += log.swap_cleaned(c).unwrap() as usize;
    }
    assert!(swapped < out.cleaned.len());
    assert!(files(&dir).iter().all(|f| !f.ends_with(".cleaned")));
}

/// A kill at each step of the swap: start-up shows the old or the new segments, all keys
/// with their latest values, never both copies.
#[test]
fn start_up_completes_or_discards_an_interrupted_swap() {
    for step in 0..5 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        let log = filled_log(&dir);
        let before = contents(&log);
        let out = cleaner::clean::clean(&input(&log, 0, 2_000)).unwrap();
        let c = &out.cleaned[0];
        let base = c.base_offset;
        let name = |suffix: &str, extra: &str| {
            dir.join(format!("{}{extra}", segment::file_name(base, suffix)))
        };
        let suffixes = cleaner::clean::SEGMENT_SUFFIXES;
        if step >= 1 {
            // indexes renamed to .swap
            for s in &suffixes[..3] {
                let _ = std::fs::rename(name(s, ".cleaned"), name(s, ".swap"));
            }
        }
        if step >= 2 {
            std::fs::rename(name(".log", ".cleaned"), name(".log", ".swap")).unwrap();
        }
        if step >= 3 {
            // the first replaced segment deleted
            for s in suffixes {
                let _ = std::fs::remove_file(name(s, ""));
            }
        }
        if step >= 4 {
            for (b, _) in &c.replaces {
                for s in suffixes {
                    let _ = std::fs::remove_file(dir.join(segment::file_name(*b, s)));
                }
            }
        }
        drop(log);
        let log = Log::open(&dir, small_cfg(), true).unwrap();
        let after = contents(&log);
        assert_eq!(latest(&after), latest(&before), "step {step}");
        let mut offsets: Vec<i64> = after.iter().map(|e| e.0).collect();
        offsets.dedup();
        assert_eq!(offsets.len(), after.len(), "step {step}: no offset twice");
        if step >= 2 {
            assert!(
                after.len() < before.len(),
                "step {step}: the cleaned copy is in"
            );
        } else {
            assert_eq!(after, before, "step {step}: the old segments are in");
        }
        assert!(
            files(&dir)
                .iter()
                .all(|f| !f.ends_with(".swap") && !f.ends_with(".cleaned")),
            "step {step}: {:?}",
            files(&dir)
        );
    }
}
