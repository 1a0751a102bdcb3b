//! On-disk log store, in Kafka's layout.
//!
//! A partition lives in `<log.dirs>/<topic>-<partition>/` as a sequence of
//! segments, each named by its base offset (first offset it may hold),
//! zero-padded to 20 digits:
//!
//! * `<base>.log`: record batches (magic v2) back to back, byte for byte as
//!   the producer sent them except `baseOffset` and `partitionLeaderEpoch`
//!   (and, for LogAppendTime, attributes + `maxTimestamp` with the CRC
//!   recomputed).
//! * `<base>.index`: sparse offset index, 8-byte entries
//!   `[offset - base: u32 BE][file position: u32 BE]`, one entry for the first
//!   batch after more than `index_interval_bytes` have been written since the
//!   previous entry; the offset is that batch's last offset and the position
//!   its start.
//! * `<base>.timeindex`: 12-byte entries `[timestamp: i64 BE][offset - base: u32 BE]`
//!   written alongside offset index entries when the largest timestamp seen
//!   has grown, plus a final one when the segment stops being active.
//! * `<base>.txnindex`: the aborted transactions whose ABORT markers are in the segment,
//!   34-byte entries (Kafka's format, [`txn_index`]); created at the first entry.
//!
//! All files are append-only and exactly sized (no preallocation). The last
//! segment is the active one; older segments are fdatasync'd when the log
//! rolls past them, so after a crash only the last needs validating.
//!
//! Modules: [`batch`] (header parsing, validation, patching, record decode),
//! [`compression`], [`control`] (transaction markers), [`offset_index`], [`time_index`], [`segment`],
//! [`partition_log`] (the [`Log`] type), [`cleaner`] (log compaction), [`leader_epoch`] (the leader epoch cache and its
//! checkpoint), [`checkpoint`] (the per-log-dir offset checkpoint files), [`dir_move`] (moving a
//! partition directory to another log dir, and the start-up rules after a crash mid-move).
//!
//! This module knows the record batch format but nothing of the Kafka wire
//! protocol; callers map [`BatchError`] / [`AppendError`] / [`ReadError`] to
//! protocol error codes.

pub mod batch;
pub mod checkpoint;
pub mod cleaner;
pub mod compression;
pub mod control;
pub mod dir_lock;
pub mod dir_move;
pub mod index_file;
pub mod leader_epoch;
pub mod offset_index;
pub mod open_files;
pub mod partition_log;
pub mod segment;
pub mod time_index;
pub mod txn_index;

pub use batch::{BatchError, BatchHeader, RecordInfo, validate_for_append};
pub use compression::Compression;
pub use control::EndTxnMarker;
pub use dir_lock::{DirLock, lock_dirs};
pub use partition_log::{AppendError, AppendInfo, Log, LogConfig, ReadError, ReadSlice, now_ms};
pub use segment::Segment;
pub use txn_index::AbortedTxn;

/// Removes a file; one that is not there is not an error.
pub(crate) fn remove_if_exists(path: &std::path::Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

/// The metadata quorum's log in a log dir, kept by the quorum's own store (not under the
/// partition logs' bound on open segments).
const METADATA_LOG_DIR: &str = "__cluster_metadata-0";

/// The log segments (`.log` files in partition directories) under these log dirs.
fn segment_files(log_dirs: &[std::path::PathBuf]) -> impl Iterator<Item = std::path::PathBuf> + '_ {
    fn entries(d: &std::path::Path) -> impl Iterator<Item = std::path::PathBuf> + use<> {
        std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
    }
    log_dirs
        .iter()
        .flat_map(|d| entries(d))
        .filter(|p| p.is_dir() && !p.ends_with(METADATA_LOG_DIR))
        .flat_map(|p| entries(&p))
        .filter(|f| f.extension().is_some_and(|x| x == "log"))
}

/// How many log segments these log dirs hold: each holds a file descriptor while the broker
/// runs.
pub fn count_segments(log_dirs: &[std::path::PathBuf]) -> usize {
    segment_files(log_dirs).count()
}

/// Opens, all at once, as many of the log dirs' segments as the broker keeps open
/// ([`open_files::limit`], at most every one), then closes them: start-up's check, before the
/// metadata quorum or any log is opened, that the open-file limit leaves room for them. The
/// error is the first open that failed (EMFILE when the limit is too low).
pub fn probe_segment_files(log_dirs: &[std::path::PathBuf]) -> std::io::Result<()> {
    let mut held = Vec::new();
    for path in segment_files(log_dirs).take(open_files::limit()) {
        held.push(std::fs::File::open(&path)?);
    }
    Ok(())
}
