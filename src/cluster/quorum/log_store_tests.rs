//! Log store recovery: a torn or corrupt tail is cut at the last good entry, later segments go
//! with it, truncation and purge survive a reopen.

use std::fs::{self, OpenOptions};
use std::path::Path;
use std::sync::Arc;

use openraft::{CommittedLeaderId, EntryPayload};

use super::*;
use crate::cluster::quorum::types::Record;

fn entry(term: u64, index: u64) -> RaftEntry {
    RaftEntry {
        log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
        payload: EntryPayload::Normal(Record(format!("t{term}-i{index}").into_bytes())),
    }
}

fn open(dir: &Path, segment_bytes: u64) -> LogStore {
    let state = Arc::new(StateFile::open(dir).unwrap());
    LogStore::open(dir, state, segment_bytes, None).unwrap()
}

/// (index, term, payload) of every entry the store holds.
fn contents(store: &LogStore) -> Vec<(u64, u64, Vec<u8>)> {
    read_range(&store.cache, ..)
        .into_iter()
        .map(|e| {
            let EntryPayload::Normal(r) = e.payload else {
                panic!("not a record")
            };
            (e.log_id.index, e.log_id.leader_id.term, r.0)
        })
        .collect()
}

fn indexes(store: &LogStore) -> Vec<u64> {
    contents(store).into_iter().map(|(i, _, _)| i).collect()
}

fn segment_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    names
}

fn append(store: &mut LogStore, term: u64, range: std::ops::Range<u64>) {
    store
        .append_entries(range.map(|i| entry(term, i)).collect())
        .unwrap();
}

#[test]
fn entries_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path(), 1 << 20);
    append(&mut store, 1, 0..5);
    let before = contents(&store);
    drop(store);
    let store = open(dir.path(), 1 << 20);
    assert_eq!(contents(&store), before);
    assert_eq!(store.last_log_id().map(|l| l.index), Some(4));
}

#[test]
fn torn_tail_is_cut_and_the_log_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path(), 1 << 20);
    append(&mut store, 1, 0..5);
    drop(store);
    let seg = dir.path().join(&segment_files(dir.path())[0]);
    let full = fs::metadata(&seg).unwrap().len();
    // A crash in the middle of writing the last frame.
    OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(full - 3)
        .unwrap();

    let mut store = open(dir.path(), 1 << 20);
    assert_eq!(indexes(&store), vec![0, 1, 2, 3]);
    let cut = fs::metadata(&seg).unwrap().len();
    assert!(cut < full - 3, "the partial frame is removed from the file");
    append(&mut store, 2, 4..6);
    drop(store);
    let store = open(dir.path(), 1 << 20);
    assert_eq!(indexes(&store), vec![0, 1, 2, 3, 4, 5]);
    assert_eq!(contents(&store)[4].1, 2);
}

#[test]
fn zero_filled_tail_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path(), 1 << 20);
    append(&mut store, 1, 0..3);
    drop(store);
    let seg = dir.path().join(&segment_files(dir.path())[0]);
    let good = fs::metadata(&seg).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(good + 4096)
        .unwrap();
    let store = open(dir.path(), 1 << 20);
    assert_eq!(indexes(&store), vec![0, 1, 2]);
    assert_eq!(fs::metadata(&seg).unwrap().len(), good);
}

#[test]
fn crc_corruption_cuts_the_log_there_and_drops_later_segments() {
    let dir = tempfile::tempdir().unwrap();
    // Small segments: a few entries each.
    let mut store = open(dir.path(), 64);
    append(&mut store, 1, 0..12);
    drop(store);
    let files = segment_files(dir.path());
    assert!(files.len() >= 3, "several segments: {files:?}");

    // Flip a payload byte of the second entry of the second segment.
    let second = dir.path().join(&files[1]);
    let bytes = fs::read(&second).unwrap();
    let (_, entries) = scan_frames(&bytes, files[1].trim_end_matches(".log").parse().unwrap());
    let victim = entries[1].0 as usize + FRAME_HEADER + 2;
    let first_bad_index = entries[1].1.log_id.index;
    let mut bad = bytes.clone();
    bad[victim] ^= 0x10;
    fs::write(&second, bad).unwrap();

    let mut store = open(dir.path(), 64);
    assert_eq!(indexes(&store), (0..first_bad_index).collect::<Vec<_>>());
    assert_eq!(segment_files(dir.path()), files[..2].to_vec());
    // The leader sends the rest again.
    append(&mut store, 3, first_bad_index..first_bad_index + 3);
    drop(store);
    let store = open(dir.path(), 64);
    assert_eq!(
        indexes(&store),
        (0..first_bad_index + 3).collect::<Vec<_>>()
    );
}

#[test]
fn truncation_on_conflict_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path(), 64);
    append(&mut store, 1, 0..10);
    store.truncate_from(6).unwrap();
    assert_eq!(indexes(&store), (0..6).collect::<Vec<_>>());
    append(&mut store, 2, 6..9);
    drop(store);
    let store = open(dir.path(), 64);
    let got = contents(&store);
    assert_eq!(
        got.iter().map(|e| e.0).collect::<Vec<_>>(),
        (0..9).collect::<Vec<_>>()
    );
    assert!(got[..6].iter().all(|e| e.1 == 1));
    assert!(
        got[6..]
            .iter()
            .all(|e| e.1 == 2 && e.2 == format!("t2-i{}", e.0).into_bytes())
    );
}

#[test]
fn purge_deletes_covered_segments_and_is_remembered() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path(), 64);
    append(&mut store, 1, 0..12);
    let before = segment_files(dir.path()).len();
    store
        .purge_upto(LogId::new(CommittedLeaderId::new(1, 1), 6))
        .unwrap();
    assert_eq!(indexes(&store), (7..12).collect::<Vec<_>>());
    assert!(segment_files(dir.path()).len() < before);
    drop(store);
    let mut store = open(dir.path(), 64);
    assert_eq!(indexes(&store), (7..12).collect::<Vec<_>>());
    assert_eq!(store.state.get().purged.map(|p| p.index), Some(6));

    // Purged past the end (a snapshot installed from the leader): the log restarts after it.
    store
        .purge_upto(LogId::new(CommittedLeaderId::new(4, 1), 40))
        .unwrap();
    assert!(indexes(&store).is_empty());
    assert_eq!(store.last_log_id().map(|l| l.index), Some(40));
    assert!(segment_files(dir.path()).is_empty());
    append(&mut store, 4, 41..43);
    drop(store);
    let store = open(dir.path(), 64);
    assert_eq!(indexes(&store), vec![41, 42]);
}

#[test]
fn a_segment_that_does_not_continue_the_log_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path(), 64);
    append(&mut store, 1, 0..12);
    drop(store);
    let files = segment_files(dir.path());
    // Lose a middle segment: what follows it cannot be used.
    fs::remove_file(dir.path().join(&files[1])).unwrap();
    let store = open(dir.path(), 64);
    let first_of_second: u64 = files[1].trim_end_matches(".log").parse().unwrap();
    assert_eq!(indexes(&store), (0..first_of_second).collect::<Vec<_>>());
    assert_eq!(segment_files(dir.path()), files[..1].to_vec());
}
