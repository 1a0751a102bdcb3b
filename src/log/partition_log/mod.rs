//! The log of one partition: an ordered set of segments in one directory.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail, ensure};
use tracing::{info, warn};

use super::batch::{self, BatchError, BatchHeader, HEADER_SIZE};
use super::leader_epoch::{LeaderEpochCache, LeaderEpochFile};
use super::segment::{self, Segment};

/// Per-log settings; defaults are Kafka's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// Roll when an append would make the active segment larger than this.
    pub segment_bytes: u64,
    /// Roll when the active segment's first append is older than this.
    pub roll_ms: i64,
    /// Bytes between offset index entries.
    pub index_interval_bytes: u32,
    /// Delete segments whose newest timestamp is older than this; -1 = forever.
    pub retention_ms: i64,
    /// Delete oldest segments while the log exceeds this; -1 = unlimited.
    pub retention_bytes: i64,
    /// fdatasync after this many unflushed records.
    pub flush_interval_messages: u64,
    /// fdatasync when the last flush is older than this.
    pub flush_interval_ms: i64,
    /// Maximum size of each index file; a full index rolls the segment.
    pub segment_index_bytes: u64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1_073_741_824,
            roll_ms: 604_800_000,
            index_interval_bytes: 4096,
            retention_ms: 604_800_000,
            retention_bytes: -1,
            flush_interval_messages: u64::MAX,
            flush_interval_ms: i64::MAX,
            segment_index_bytes: 10_485_760,
        }
    }
}

/// Result of a successful append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    /// The LogAppendTime applied, or -1 for CreateTime.
    pub log_append_time: i64,
    /// Largest batch max timestamp of the append (-1 if none).
    pub max_timestamp: i64,
    /// Last offset of the batch carrying `max_timestamp`.
    pub offset_of_max_timestamp: i64,
    pub log_start_offset: i64,
    /// Set when this append rolled the log: the base offset of the new active segment
    /// (equal to `first_offset`). Owners of per-log state snapshot it here.
    pub rolled_at: Option<i64>,
    pub record_count: u64,
    pub size_bytes: usize,
    /// Headers as written (final offsets, epoch, timestamps); positions are
    /// relative to the appended buffer.
    pub batches: Vec<BatchHeader>,
}

#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error(transparent)]
    Batch(#[from] BatchError),
    #[error("record set of {size} bytes is larger than the segment size {segment_bytes}")]
    RecordSetTooLarge { size: usize, segment_bytes: u64 },
    /// A follower's batches must continue the log: offsets from the log end, increasing.
    #[error("batch at offset {base_offset} does not follow the log end offset {log_end_offset}")]
    OutOfOrder {
        base_offset: i64,
        log_end_offset: i64,
    },
    #[error("log I/O error: {0}")]
    Io(#[from] io::Error),
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    #[error("log I/O error: {0}")]
    Io(#[from] io::Error),
}

/// Whole batches `[position, position + len)` of one segment file, ready for
/// `sendfile`/`pread`. Holding it keeps the file readable even if the segment
/// is deleted meanwhile.
#[derive(Debug, Clone)]
pub struct ReadSlice {
    /// The segment's file; None for an empty slice (an idle segment is not reopened for it).
    pub file: Option<Arc<File>>,
    pub position: u64,
    pub len: usize,
    /// Base offset of the first batch (may be below the offset asked for).
    /// For an empty slice, the offset that was asked for.
    pub first_batch_offset: i64,
    /// No offset in the slice is at or above this: the offset after its last batch (for an
    /// empty slice, `first_batch_offset`).
    pub end_offset: i64,
    pub segment_base_offset: i64,
}

impl ReadSlice {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the bytes out.
    pub fn read_to_vec(&self) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; self.len];
        if let Some(f) = &self.file {
            f.read_exact_at(&mut buf, self.position)?;
        }
        Ok(buf)
    }
}

pub use crate::clock::now_ms;

const STRAY_SUFFIXES: [&str; 3] = [".cleaned", ".swap", ".deleted"];

pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn remove_segment_files(dir: &Path, base: i64) -> io::Result<()> {
    for suffix in [
        segment::LOG_SUFFIX,
        segment::INDEX_SUFFIX,
        segment::TIME_INDEX_SUFFIX,
        super::txn_index::TXN_INDEX_SUFFIX,
    ] {
        match std::fs::remove_file(dir.join(segment::file_name(base, suffix))) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// The log of one partition. Not internally synchronized: `&self` methods
/// (reads) may run concurrently, mutation needs `&mut self`.
pub struct Log {
    dir: PathBuf,
    config: LogConfig,
    segments: BTreeMap<i64, Segment>,
    log_start_offset: i64,
    log_end_offset: i64,
    recovery_point: i64,
    size_bytes: u64,
    unflushed_messages: u64,
    last_flush_ms: i64,
    /// Where each leader epoch starts (`leader-epoch-checkpoint`).
    epochs: LeaderEpochFile,
    /// The epoch cache changed since its file was written. The file is written at the next
    /// flush, roll, truncation or close; after a crash, recovery rebuilds the entries of the
    /// segments it scans from their batches' leader epochs.
    epochs_dirty: bool,
    /// Set by [`Log::delete_dir`].
    deleted: bool,
}

impl Log {
    /// Opens (creating if needed) the log in `dir`. With `needs_recovery`
    /// (unclean shutdown) the last segment is fully validated and a torn or
    /// corrupt tail is cut off. Segments before the last are fsynced when the
    /// log rolls past them, so only the last can be torn; see
    /// [`Log::open_from_recovery_point`] to validate more.
    pub fn open(dir: &Path, config: LogConfig, needs_recovery: bool) -> anyhow::Result<Log> {
        Self::open_from_recovery_point(dir, config, needs_recovery, None)
    }

    /// Like [`Log::open`]; with `needs_recovery`, every segment holding offsets
    /// >= `recovery_point` is validated too (all segments if it is 0).
    pub fn open_from_recovery_point(
        dir: &Path,
        config: LogConfig,
        needs_recovery: bool,
        recovery_point: Option<i64>,
    ) -> anyhow::Result<Log> {
        ensure!(
            (HEADER_SIZE as u64..=i32::MAX as u64).contains(&config.segment_bytes),
            "segment_bytes {} out of range",
            config.segment_bytes
        );
        ensure!(
            config.segment_index_bytes >= 12,
            "segment_index_bytes too small"
        );
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        cleaning::recover_swaps(dir)
            .with_context(|| format!("completing segment swaps in {}", dir.display()))?;

        let mut log_bases = BTreeSet::new();
        let mut index_files = Vec::new();
        for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
            let entry = entry?;
            if !entry.file_type()?.is_file() {
                continue;
            }
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if STRAY_SUFFIXES.iter().any(|s| name.ends_with(s)) {
                info!(file = %entry.path().display(), "removing stray file");
                std::fs::remove_file(entry.path())?;
            } else if let Some((base, suffix)) = segment::parse_file_name(&name) {
                if suffix == segment::LOG_SUFFIX {
                    log_bases.insert(base);
                } else {
                    index_files.push((base, entry.path()));
                }
            }
        }
        for (base, path) in index_files {
            if !log_bases.contains(&base) {
                info!(file = %path.display(), "removing index without a log file");
                std::fs::remove_file(path)?;
            }
        }

        let bases: Vec<i64> = log_bases.into_iter().collect();
        let recover_from = if !needs_recovery {
            i64::MAX
        } else {
            let last = bases.last().copied().unwrap_or(0);
            match recovery_point {
                Some(rp) => bases
                    .iter()
                    .rev()
                    .find(|&&b| b <= rp)
                    .copied()
                    .unwrap_or(i64::MIN)
                    .min(last),
                None => last,
            }
        };

        let mut segments: BTreeMap<i64, Segment> = BTreeMap::new();
        let mut changed_dir = false;
        for (i, &base) in bases.iter().enumerate() {
            let (mut seg, missing) = Segment::open(dir, base, &config)
                .with_context(|| format!("opening segment {base} in {}", dir.display()))?;
            let mut truncated = 0;
            if base >= recover_from {
                truncated = seg.recover()?;
                info!(dir = %dir.display(), base, truncated, next_offset = seg.next_offset(), "recovered segment");
            } else if missing {
                warn!(dir = %dir.display(), base, "index missing, rebuilding");
                seg.recover()?;
            } else if let Err(e) = seg.load_state() {
                warn!(dir = %dir.display(), base, "{e}; rebuilding indexes");
                seg.recover()?;
            }
            let overlaps = segments
                .values()
                .next_back()
                .is_some_and(|prev| prev.next_offset() > base);
            if overlaps {
                if !needs_recovery {
                    bail!(
                        "segment {base} in {} overlaps the previous segment",
                        dir.display()
                    );
                }
                warn!(dir = %dir.display(), base, "segment overlaps the previous one; deleting it and later ones");
                drop(seg);
                for &b in &bases[i..] {
                    remove_segment_files(dir, b)?;
                }
                changed_dir = true;
                break;
            }
            segments.insert(base, seg);
            if truncated > 0 && i + 1 < bases.len() {
                warn!(dir = %dir.display(), base, "corrupt segment tail; deleting later segments");
                for &b in &bases[i + 1..] {
                    remove_segment_files(dir, b)?;
                }
                changed_dir = true;
                break;
            }
        }
        if segments.is_empty() {
            // A new, empty log: not synced (one fsync per partition made creating a
            // 10,000-partition topic take 20 s). If the files vanish in a power loss, open
            // creates them again; data written later is synced per the flush policy.
            segments.insert(0, Segment::create(dir, 0, &config)?);
        }
        if changed_dir {
            sync_dir(dir)?;
        }
        let log_start_offset = *segments.keys().next().unwrap();
        let log_end_offset = segments.values().next_back().unwrap().next_offset();
        let size_bytes = segments.values().map(Segment::size).sum();
        let (epochs, rebuild_all) = match LeaderEpochFile::open(dir) {
            Ok(f) => {
                let missing = f.cache.entries().is_empty();
                (f, missing)
            }
            Err(e) => {
                warn!(dir = %dir.display(), "{e:#}; rebuilding the leader epoch cache");
                (LeaderEpochFile::empty(dir), true)
            }
        };
        let mut log = Log {
            dir: dir.to_path_buf(),
            config,
            segments,
            log_start_offset,
            log_end_offset,
            recovery_point: log_end_offset,
            size_bytes,
            unflushed_messages: 0,
            last_flush_ms: now_ms(),
            epochs,
            epochs_dirty: false,
            deleted: false,
        };
        log.reconcile_epochs(if rebuild_all || !needs_recovery {
            if rebuild_all {
                log_start_offset
            } else {
                i64::MAX
            }
        } else {
            recover_from.max(log_start_offset)
        })?;
        Ok(log)
    }

    /// Makes the epoch cache agree with the segments: entries past the log end go, the first
    /// starts at the log start, and the leader epochs of the batches from `scan_from` on are
    /// recorded (after a crash the cache may lack those written since it was last saved).
    fn reconcile_epochs(&mut self, scan_from: i64) -> io::Result<()> {
        let before = self.epochs.cache.clone();
        self.epochs.cache.truncate_from_end(self.log_end_offset);
        self.epochs.cache.truncate_from_start(self.log_start_offset);
        if scan_from < self.log_end_offset {
            let mut found = Vec::new();
            self.scan_headers_from(scan_from, |h| {
                found.push((h.partition_leader_epoch, h.base_offset))
            })?;
            for (epoch, offset) in found {
                self.epochs.cache.assign(epoch, offset);
            }
        }
        if self.epochs.cache != before {
            self.epochs_dirty = true;
            self.save_epochs()?;
        }
        Ok(())
    }

    /// Writes the epoch cache's file if it changed.
    fn save_epochs(&mut self) -> io::Result<()> {
        if self.epochs_dirty && !self.deleted {
            self.epochs.write().map_err(io::Error::other)?;
            self.epochs_dirty = false;
        }
        Ok(())
    }

    /// The latest leader epoch written to this log, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.cache.latest_epoch()
    }

    /// A new leader epoch starts at the log end (Kafka's `maybeAssignEpochStartOffset`): a
    /// leader records its epoch when elected, so OffsetForLeaderEpoch knows it before anything
    /// is written in it and a follower that wrote in a later epoch can still truncate. An epoch
    /// at or below the latest is ignored. The file is written at the next flush, roll or close.
    pub fn assign_epoch_start(&mut self, epoch: i32) {
        if self.epochs.cache.assign(epoch, self.log_end_offset) {
            self.epochs_dirty = true;
        }
    }

    /// OffsetForLeaderEpoch: the largest epoch at or below `epoch` and where it ends.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.epochs.cache.end_offset_for(epoch, self.log_end_offset)
    }

    pub fn epoch_cache(&self) -> &LeaderEpochCache {
        &self.epochs.cache
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Replaces the settings: the next append, roll, flush and retention pass follow them
    /// (existing segments keep the index files they were created with). Values outside what
    /// `open` accepts are clamped into range.
    pub fn set_config(&mut self, mut config: LogConfig) {
        config.segment_bytes = config
            .segment_bytes
            .clamp(HEADER_SIZE as u64, i32::MAX as u64);
        config.segment_index_bytes = config.segment_index_bytes.max(12);
        self.config = config;
    }

    /// First offset still in the log.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// Offset the next appended record will get.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// Offsets below this are known to be on disk (fdatasync'd).
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }

    /// Total bytes of all segment `.log` files.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    pub fn num_segments(&self) -> usize {
        self.segments.len()
    }

    /// Segments in offset order (the last is the active one).
    pub fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.segments.values()
    }

    fn active(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .expect("a log always has a segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log always has a segment")
    }

    /// Starts a new active segment at the log end offset (no-op if the active
    /// segment is empty). The old segment is fdatasync'd and the directory synced.
    pub fn roll(&mut self, now_ms: i64) -> io::Result<()> {
        if self.active().is_empty() {
            return Ok(());
        }
        let new_base = self.log_end_offset;
        {
            let old = self.active_mut();
            old.on_become_inactive()?;
            old.flush()?;
        }
        let seg = Segment::create(&self.dir, new_base, &self.config)?;
        sync_dir(&self.dir)?;
        self.segments.insert(new_base, seg);
        self.recovery_point = new_base;
        self.unflushed_messages = 0;
        self.last_flush_ms = now_ms;
        // Recovery scans from the recovery point only: the epochs of the segment just
        // rolled must be in the file.
        self.save_epochs()
    }

    /// Whole batches of one segment starting with the batch holding `offset`:
    /// at most `max_bytes` (but at least one batch if `min_one_batch`) and only
    /// batches whose last offset is below `max_offset_exclusive` (the high
    /// watermark). `offset == log_end_offset` gives an empty slice.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset_exclusive: i64,
        min_one_batch: bool,
    ) -> Result<ReadSlice, ReadError> {
        if offset < self.log_start_offset || offset > self.log_end_offset {
            return Err(ReadError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        let floor = self
            .segments
            .range(..=offset)
            .next_back()
            .map_or(self.log_start_offset, |(b, _)| *b);
        for seg in self.segments.range(floor..).map(|(_, s)| s) {
            // None: `offset` is past this segment's data (a gap); try the next.
            if let Some((position, h)) = seg.translate_offset(offset)? {
                let (len, end_offset) =
                    seg.read_len(position, max_bytes, max_offset_exclusive, min_one_batch)?;
                return Ok(ReadSlice {
                    file: if len == 0 { None } else { Some(seg.file()?) },
                    position,
                    len,
                    first_batch_offset: h.base_offset,
                    end_offset: if len == 0 { h.base_offset } else { end_offset },
                    segment_base_offset: seg.base_offset(),
                });
            }
        }
        let active = self.active();
        Ok(ReadSlice {
            file: None,
            position: active.size(),
            len: 0,
            first_batch_offset: offset,
            end_offset: offset,
            segment_base_offset: active.base_offset(),
        })
    }

    /// Calls `f` with the header of every batch holding offsets >= `from` (from the log
    /// start if `from` is below it), in offset order. Headers only: no record is decoded.
    pub fn scan_headers_from(&self, from: i64, mut f: impl FnMut(&BatchHeader)) -> io::Result<()> {
        let from = from.max(self.log_start_offset);
        let floor = self
            .segments
            .range(..=from)
            .next_back()
            .map_or(self.log_start_offset, |(b, _)| *b);
        for seg in self.segments.range(floor..).map(|(_, s)| s) {
            seg.scan_headers_from(from, &mut f)?;
        }
        Ok(())
    }

    /// The bytes of one batch whose header [`Log::scan_headers_from`] gave.
    pub fn read_batch(&self, h: &BatchHeader) -> io::Result<Vec<u8>> {
        let (_, seg) = self
            .segments
            .range(..=h.base_offset)
            .next_back()
            .ok_or_else(|| {
                io::Error::other(format!("no segment holds offset {}", h.base_offset))
            })?;
        seg.read_batch(h.position, h)
    }

    /// First record (at or after the log start) with timestamp >= `timestamp`:
    /// `(timestamp, offset)` (same order as [`Log::max_timestamp_offset`]).
    /// Decodes the records of the one batch that matters. The caller filters
    /// out offsets at or above the high watermark.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> anyhow::Result<Option<(i64, i64)>> {
        for seg in self.segments.values() {
            if seg.max_timestamp() >= timestamp
                && let Some(found) = seg.find_by_timestamp(timestamp, self.log_start_offset)?
            {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// The record with the largest timestamp (earliest offset on ties):
    /// `(timestamp, offset)`, as ListOffsets MAX_TIMESTAMP wants it.
    pub fn max_timestamp_offset(&self) -> anyhow::Result<Option<(i64, i64)>> {
        let mut best: Option<&Segment> = None;
        for seg in self.segments.values() {
            if seg.max_timestamp() >= 0
                && best.is_none_or(|b| seg.max_timestamp() > b.max_timestamp())
            {
                best = Some(seg);
            }
        }
        match best {
            Some(seg) => Ok(seg.max_timestamp_record()?),
            None => Ok(None),
        }
    }

    /// Deletes the oldest segments that are past `retention_ms` (by their
    /// newest timestamp, or mtime if they have none), then while the log is
    /// larger than `retention_bytes` by at least a whole segment. If every
    /// segment qualifies, the active one is rolled first so an empty segment
    /// remains. Advances the log start offset. Returns segments deleted.
    pub fn apply_retention(&mut self, now_ms: i64) -> anyhow::Result<usize> {
        let mut deleted = 0;
        let retention_ms = self.config.retention_ms;
        if retention_ms >= 0 {
            deleted += self.delete_oldest_segments(now_ms, |seg| {
                now_ms.saturating_sub(seg.largest_timestamp()) > retention_ms
            })?;
        }
        let retention_bytes = self.config.retention_bytes;
        if retention_bytes >= 0 && self.size_bytes >= retention_bytes as u64 {
            let mut excess = self.size_bytes - retention_bytes as u64;
            deleted += self.delete_oldest_segments(now_ms, |seg| {
                if seg.size() <= excess {
                    excess -= seg.size();
                    true
                } else {
                    false
                }
            })?;
        }
        Ok(deleted)
    }

    fn delete_oldest_segments(
        &mut self,
        now_ms: i64,
        mut pred: impl FnMut(&Segment) -> bool,
    ) -> io::Result<usize> {
        let n = self.segments.len();
        let mut doomed = Vec::new();
        for (i, (base, seg)) in self.segments.iter().enumerate() {
            let last_and_empty = i + 1 == n && seg.is_empty();
            if last_and_empty || !pred(seg) {
                break;
            }
            doomed.push(*base);
        }
        if doomed.is_empty() {
            return Ok(0);
        }
        if doomed.len() == n {
            self.roll(now_ms)?;
        }
        for base in &doomed {
            let seg = self.segments.remove(base).expect("segment present");
            self.size_bytes -= seg.size();
            info!(dir = %self.dir.display(), base, "deleting segment (retention)");
            seg.delete()?;
        }
        let first = *self.segments.keys().next().expect("active segment kept");
        self.log_start_offset = self.log_start_offset.max(first);
        self.epochs.cache.truncate_from_start(self.log_start_offset);
        self.epochs_dirty = true;
        sync_dir(&self.dir)?;
        Ok(doomed.len())
    }

    /// Removes everything at offsets >= `offset` (whole batches: if `offset`
    /// is inside a batch the log ends before that batch). If `offset` is at or
    /// below the log start, the log is emptied and restarts at `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        if offset >= self.log_end_offset {
            // Nothing to cut, but an epoch may start here with nothing written in it (a
            // leader that took its epoch and died before appending): the follower forgets
            // it, or its fetches keep naming an epoch the new leader never had (as Kafka's
            // UnifiedLog.truncateTo does).
            let before = self.epochs.cache.entries().len();
            self.epochs.cache.truncate_from_end(offset);
            if self.epochs.cache.entries().len() != before {
                self.epochs_dirty = true;
                return self.save_epochs();
            }
            return Ok(());
        }
        if offset <= self.log_start_offset {
            return self.truncate_fully_and_start_at(offset);
        }
        let doomed: Vec<i64> = self.segments.range(offset..).map(|(b, _)| *b).collect();
        for base in doomed {
            self.segments.remove(&base).expect("present").delete()?;
        }
        self.active_mut().truncate_to(offset)?;
        sync_dir(&self.dir)?;
        self.log_end_offset = self.active().next_offset();
        self.size_bytes = self.segments.values().map(Segment::size).sum();
        self.recovery_point = self.recovery_point.min(self.log_end_offset);
        self.epochs.cache.truncate_from_end(self.log_end_offset);
        self.epochs.cache.truncate_from_start(self.log_start_offset);
        self.epochs_dirty = true;
        self.save_epochs()
    }

    /// Deletes every segment and restarts the log, empty, at `offset`, which may lie beyond
    /// the old log end (Kafka's `truncateFullyAndStartAt`: a follower whose log ends below
    /// its leader's log start). The leader epoch cache is emptied too.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> io::Result<()> {
        for (_, seg) in std::mem::take(&mut self.segments) {
            seg.delete()?;
        }
        self.segments
            .insert(offset, Segment::create(&self.dir, offset, &self.config)?);
        sync_dir(&self.dir)?;
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.size_bytes = 0;
        self.recovery_point = offset;
        self.unflushed_messages = 0;
        self.epochs.cache.clear();
        self.epochs_dirty = true;
        self.save_epochs()
    }

    /// fdatasync of everything not yet flushed.
    pub fn flush(&mut self) -> anyhow::Result<()> {
        Ok(self.flush_at(now_ms())?)
    }

    fn flush_at(&mut self, now_ms: i64) -> io::Result<()> {
        self.active().flush()?;
        self.save_epochs()?;
        self.recovery_point = self.log_end_offset;
        self.unflushed_messages = 0;
        self.last_flush_ms = now_ms;
        Ok(())
    }

    /// Flushes if `flush_interval_ms` has passed since the last flush (for a
    /// periodic flusher task). Returns whether it flushed.
    pub fn maybe_flush(&mut self, now_ms: i64) -> io::Result<bool> {
        if self.recovery_point < self.log_end_offset
            && now_ms.saturating_sub(self.last_flush_ms) >= self.config.flush_interval_ms
        {
            self.flush_at(now_ms)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Records the final time index entry of the active segment and flushes.
    /// The log stays usable.
    pub fn close(&mut self) -> anyhow::Result<()> {
        if self.deleted {
            return Ok(());
        }
        self.active_mut().on_become_inactive()?;
        self.flush()
    }

    /// Removes the directory and everything in it. Open [`ReadSlice`]s stay
    /// readable; later appends fail.
    pub fn delete_dir(&mut self) -> anyhow::Result<()> {
        self.deleted = true;
        match std::fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                Err(anyhow::Error::new(e).context(format!("deleting {}", self.dir.display())))
            }
            _ => Ok(()),
        }
    }
}

mod append;
mod cleaning;
#[cfg(test)]
mod cleaning_tests;
#[cfg(test)]
mod epoch_tests;
#[cfg(test)]
mod recovery_tests;
mod start_offset;
#[cfg(test)]
mod start_offset_tests;
#[cfg(test)]
mod tests;
mod txn;
