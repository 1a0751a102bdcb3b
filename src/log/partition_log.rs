//! The log of one partition: an ordered set of segments in one directory.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use tracing::{info, warn};

use super::batch::{self, BatchError, BatchHeader, HEADER_SIZE};
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
    pub file: Arc<File>,
    pub position: u64,
    pub len: usize,
    /// Base offset of the first batch (may be below the offset asked for).
    /// For an empty slice, the offset that was asked for.
    pub first_batch_offset: i64,
    pub segment_base_offset: i64,
}

impl ReadSlice {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the bytes out.
    pub fn read_to_vec(&self) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; self.len];
        self.file.read_exact_at(&mut buf, self.position)?;
        Ok(buf)
    }
}

/// Wall clock in milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

const STRAY_SUFFIXES: [&str; 3] = [".cleaned", ".swap", ".deleted"];

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn remove_segment_files(dir: &Path, base: i64) -> io::Result<()> {
    for suffix in [
        segment::LOG_SUFFIX,
        segment::INDEX_SUFFIX,
        segment::TIME_INDEX_SUFFIX,
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
        Ok(Log {
            dir: dir.to_path_buf(),
            config,
            segments,
            log_start_offset,
            log_end_offset,
            recovery_point: log_end_offset,
            size_bytes,
            unflushed_messages: 0,
            last_flush_ms: now_ms(),
            deleted: false,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
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

    /// Appends a producer's record set (see [`Log::append_at`]) using the wall clock.
    pub fn append(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        append_time: Option<i64>,
        max_batch_bytes: usize,
    ) -> Result<AppendInfo, AppendError> {
        self.append_at(
            records,
            leader_epoch,
            append_time,
            max_batch_bytes,
            now_ms(),
        )
    }

    /// Validates `records`, assigns offsets from the log end offset, stamps the
    /// leader epoch and (if `append_time` is `Some`) LogAppendTime, rolls the
    /// active segment if needed and writes the bytes in one positional write.
    /// `now_ms` drives time-based roll and flush.
    pub fn append_at(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        append_time: Option<i64>,
        max_batch_bytes: usize,
        now_ms: i64,
    ) -> Result<AppendInfo, AppendError> {
        if self.deleted {
            return Err(AppendError::Io(io::Error::other(
                "log directory was deleted",
            )));
        }
        let mut headers = batch::validate_for_append(records, max_batch_bytes)?;
        if records.len() as u64 > self.config.segment_bytes {
            return Err(AppendError::RecordSetTooLarge {
                size: records.len(),
                segment_bytes: self.config.segment_bytes,
            });
        }
        let first_offset = self.log_end_offset;
        let mut next = first_offset;
        let mut max_timestamp = -1;
        let mut offset_of_max_timestamp = first_offset;
        let mut record_count = 0u64;
        for h in headers.iter_mut() {
            let start = h.position as usize;
            let b = &mut records[start..start + h.total_size()];
            batch::set_base_offset(b, next);
            batch::set_partition_leader_epoch(b, leader_epoch);
            h.base_offset = next;
            h.partition_leader_epoch = leader_epoch;
            if let Some(t) = append_time {
                h.crc = batch::set_log_append_time(b, t);
                h.attributes |= batch::TIMESTAMP_TYPE_FLAG;
                h.max_timestamp = t;
            }
            if h.max_timestamp > max_timestamp {
                max_timestamp = h.max_timestamp;
                offset_of_max_timestamp = h.last_offset();
            }
            record_count += h.record_count as u64;
            next = h.next_offset();
        }
        let last_offset = next - 1;

        let mut rolled_at = None;
        if self
            .active()
            .should_roll(&self.config, records.len() as u64, last_offset, now_ms)
        {
            self.roll(now_ms)?;
            rolled_at = Some(first_offset);
        }
        self.active_mut().append(records, &headers, now_ms)?;
        self.log_end_offset = next;
        self.size_bytes += records.len() as u64;
        self.unflushed_messages += record_count;

        if self.unflushed_messages >= self.config.flush_interval_messages
            || now_ms.saturating_sub(self.last_flush_ms) >= self.config.flush_interval_ms
        {
            self.flush_at(now_ms)?;
        }

        Ok(AppendInfo {
            first_offset,
            last_offset,
            log_append_time: append_time.unwrap_or(-1),
            max_timestamp,
            offset_of_max_timestamp,
            log_start_offset: self.log_start_offset,
            rolled_at,
            record_count,
            size_bytes: records.len(),
            batches: headers,
        })
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
        Ok(())
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
                let len = seg.read_len(position, max_bytes, max_offset_exclusive, min_one_batch)?;
                return Ok(ReadSlice {
                    file: Arc::clone(seg.file()),
                    position,
                    len,
                    first_batch_offset: h.base_offset,
                    segment_base_offset: seg.base_offset(),
                });
            }
        }
        let active = self.active();
        Ok(ReadSlice {
            file: Arc::clone(active.file()),
            position: active.size(),
            len: 0,
            first_batch_offset: offset,
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
        sync_dir(&self.dir)?;
        Ok(doomed.len())
    }

    /// Removes everything at offsets >= `offset` (whole batches: if `offset`
    /// is inside a batch the log ends before that batch). If `offset` is at or
    /// below the log start, the log is emptied and restarts at `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        if offset >= self.log_end_offset {
            return Ok(());
        }
        if offset <= self.log_start_offset {
            for (_, seg) in std::mem::take(&mut self.segments) {
                seg.delete()?;
            }
            self.segments
                .insert(offset, Segment::create(&self.dir, offset, &self.config)?);
            self.log_start_offset = offset;
        } else {
            let doomed: Vec<i64> = self.segments.range(offset..).map(|(b, _)| *b).collect();
            for base in doomed {
                self.segments.remove(&base).expect("present").delete()?;
            }
            self.active_mut().truncate_to(offset)?;
        }
        sync_dir(&self.dir)?;
        self.log_end_offset = self.active().next_offset();
        self.size_bytes = self.segments.values().map(Segment::size).sum();
        self.recovery_point = self.recovery_point.min(self.log_end_offset);
        Ok(())
    }

    /// fdatasync of everything not yet flushed.
    pub fn flush(&mut self) -> anyhow::Result<()> {
        Ok(self.flush_at(now_ms())?)
    }

    fn flush_at(&mut self, now_ms: i64) -> io::Result<()> {
        self.active().flush()?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::test_support::{
        ZSTD_BATCH_TIMESTAMPS, batch_with, simple_batch, zstd_batch,
    };
    use crate::log::batch::{RecordInfo, batches, decode_records};
    use crate::log::compression::Compression;

    const MAX: usize = 1 << 20;

    fn small_cfg() -> LogConfig {
        LogConfig {
            segment_bytes: 4096,
            index_interval_bytes: 256,
            retention_ms: -1,
            ..LogConfig::default()
        }
    }

    fn append_simple(log: &mut Log, n: usize, ts: i64, now: i64) -> AppendInfo {
        let mut b = simple_batch(n, ts, 50);
        log.append_at(&mut b, 3, None, MAX, now).unwrap()
    }

    /// Every record in the log, by reading it front to back.
    fn all_records(log: &Log) -> Vec<RecordInfo> {
        let mut out = Vec::new();
        let mut offset = log.log_start_offset();
        while offset < log.log_end_offset() {
            let slice = log.read(offset, 1 << 30, i64::MAX, true).unwrap();
            assert!(!slice.is_empty());
            let bytes = slice.read_to_vec().unwrap();
            for h in batches(&bytes) {
                let h = h.unwrap();
                let p = h.position as usize;
                let recs = decode_records(&bytes[p..p + h.total_size()]).unwrap();
                out.extend(recs.into_iter().filter(|r| r.offset >= offset));
                offset = h.next_offset();
            }
        }
        out
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn empty_dir_starts_at_zero_and_strays_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("topic-0");
        std::fs::create_dir(&dir).unwrap();
        for f in [
            "00000000000000000000.log.deleted",
            "x.cleaned",
            "00000000000000000007.index.swap",
            "00000000000000000009.index",
        ] {
            std::fs::write(dir.join(f), b"junk").unwrap();
        }
        std::fs::write(dir.join("partition.metadata"), b"keep").unwrap();
        let log = Log::open(&dir, LogConfig::default(), false).unwrap();
        assert_eq!(
            (
                log.log_start_offset(),
                log.log_end_offset(),
                log.size_bytes()
            ),
            (0, 0, 0)
        );
        assert_eq!(
            files(&dir),
            vec![
                "00000000000000000000.index",
                "00000000000000000000.log",
                "00000000000000000000.timeindex",
                "partition.metadata"
            ]
        );
        let r = log.read(0, 100, i64::MAX, true).unwrap();
        assert!(r.is_empty());
        assert!(matches!(
            log.read(1, 100, i64::MAX, true),
            Err(ReadError::OffsetOutOfRange { .. })
        ));
    }

    #[test]
    fn append_assigns_offsets_and_patches() {
        let tmp = tempfile::tempdir().unwrap();
        let mut log = Log::open(tmp.path(), LogConfig::default(), false).unwrap();
        let mut buf = simple_batch(3, 1000, 10);
        buf.extend(simple_batch(2, 2000, 10));
        let info = log.append_at(&mut buf, 9, None, MAX, 0).unwrap();
        assert_eq!(
            (info.first_offset, info.last_offset, info.record_count),
            (0, 4, 5)
        );
        assert_eq!(
            (
                info.max_timestamp,
                info.offset_of_max_timestamp,
                info.log_append_time
            ),
            (2000, 4, -1)
        );
        assert_eq!(info.batches[1].base_offset, 3);
        assert_eq!(log.log_end_offset(), 5);
        let mut b = simple_batch(1, 5, 10);
        let info = log.append_at(&mut b, 10, Some(777_777), MAX, 0).unwrap();
        assert_eq!(
            (info.first_offset, info.log_append_time, info.max_timestamp),
            (5, 777_777, 777_777)
        );
        let bytes = log
            .read(0, MAX, i64::MAX, true)
            .unwrap()
            .read_to_vec()
            .unwrap();
        let hs: Vec<_> = batches(&bytes).map(Result::unwrap).collect();
        assert_eq!(
            hs.iter().map(|h| h.base_offset).collect::<Vec<_>>(),
            vec![0, 3, 5]
        );
        assert_eq!(
            hs.iter()
                .map(|h| h.partition_leader_epoch)
                .collect::<Vec<_>>(),
            vec![9, 9, 10]
        );
        assert!(hs[2].is_log_append_time() && !hs[0].is_log_append_time());
        assert!(
            crate::log::validate_for_append(&bytes, MAX).is_ok(),
            "stored CRCs valid"
        );
        assert_eq!(log.max_timestamp_offset().unwrap(), Some((777_777, 5)));
        assert_eq!(log.offset_for_timestamp(1500).unwrap(), Some((2000, 3)));
        assert_eq!(log.offset_for_timestamp(777_778).unwrap(), None);

        // rejected appends change nothing
        let mut bad = simple_batch(1, 5, 10);
        let n = bad.len();
        bad[n - 1] ^= 1;
        assert!(matches!(
            log.append(&mut bad, 0, None, MAX),
            Err(AppendError::Batch(BatchError::Corrupt { .. }))
        ));
        let mut big = simple_batch(1, 5, 2000);
        assert!(matches!(
            log.append(&mut big, 0, None, 1000),
            Err(AppendError::Batch(BatchError::TooLarge { .. }))
        ));
        assert_eq!(log.log_end_offset(), 6);
    }

    #[test]
    fn roll_by_size() {
        let tmp = tempfile::tempdir().unwrap();
        let mut log = Log::open(tmp.path(), small_cfg(), false).unwrap();
        for i in 0..100 {
            append_simple(&mut log, 2, 1000 + i, 0);
        }
        assert_eq!(log.log_end_offset(), 200);
        assert!(log.num_segments() > 3, "{}", log.num_segments());
        let mut expected_base = 0;
        for seg in log.segments() {
            assert!(seg.size() <= 4096);
            assert_eq!(seg.base_offset(), expected_base);
            expected_base = seg.next_offset();
            assert!(
                tmp.path()
                    .join(segment::file_name(seg.base_offset(), ".log"))
                    .exists()
            );
        }
        assert_eq!(
            log.size_bytes(),
            log.segments().map(Segment::size).sum::<u64>()
        );
        assert_eq!(
            log.recovery_point(),
            log.segments().last().unwrap().base_offset()
        );
        let mut huge = simple_batch(1, 0, 5000);
        assert!(matches!(
            log.append(&mut huge, 0, None, MAX),
            Err(AppendError::RecordSetTooLarge { .. })
        ));
    }

    #[test]
    fn roll_by_time() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = LogConfig {
            roll_ms: 1000,
            ..LogConfig::default()
        };
        let mut log = Log::open(tmp.path(), cfg, false).unwrap();
        append_simple(&mut log, 1, 1, 10_000);
        append_simple(&mut log, 1, 1, 10_900);
        append_simple(&mut log, 1, 1, 11_000);
        assert_eq!(log.num_segments(), 1);
        append_simple(&mut log, 1, 1, 11_001);
        assert_eq!(log.num_segments(), 2);
        assert_eq!(log.segments().last().unwrap().base_offset(), 3);
        append_simple(&mut log, 1, 1, 11_500);
        assert_eq!(log.num_segments(), 2);
        append_simple(&mut log, 1, 1, 12_002);
        assert_eq!(log.num_segments(), 3);
    }

    #[test]
    fn roll_when_index_full() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = LogConfig {
            index_interval_bytes: 1,
            segment_index_bytes: 8 * 3,
            ..LogConfig::default()
        };
        let mut log = Log::open(tmp.path(), cfg, false).unwrap();
        for _ in 0..10 {
            append_simple(&mut log, 1, 1, 0);
        }
        assert!(log.num_segments() >= 3);
        for seg in log.segments() {
            assert!(seg.offset_index().len() <= 3);
        }
    }

    #[test]
    fn lookup_every_offset() {
        let tmp = tempfile::tempdir().unwrap();
        let mut log = Log::open(tmp.path(), small_cfg(), false).unwrap();
        for i in 0..300 {
            append_simple(&mut log, 1 + (i % 4), i as i64, 0);
        }
        let leo = log.log_end_offset();
        for target in 0..leo {
            let s = log.read(target, 1, i64::MAX, true).unwrap();
            let bytes = s.read_to_vec().unwrap();
            let h = BatchHeader::parse(&bytes, 0).unwrap();
            assert_eq!(h.total_size(), s.len, "exactly one batch");
            assert_eq!(h.base_offset, s.first_batch_offset);
            assert!(
                h.base_offset <= target && target <= h.last_offset(),
                "target {target}"
            );
            assert!(s.segment_base_offset <= h.base_offset);
        }
        assert_eq!(all_records(&log).len() as i64, leo);
    }

    #[test]
    fn read_limits() {
        let tmp = tempfile::tempdir().unwrap();
        let mut log = Log::open(tmp.path(), LogConfig::default(), false).unwrap();
        let mut sizes = Vec::new();
        for _ in 0..10 {
            let info = append_simple(&mut log, 5, 1, 0);
            sizes.push(info.size_bytes);
        }
        let sz = sizes[0];
        assert!(sizes.iter().all(|&s| s == sz));
        // max_bytes covers 3.5 batches -> 3 batches
        let s = log.read(0, sz * 7 / 2, i64::MAX, false).unwrap();
        assert_eq!(s.len, 3 * sz);
        // exact fit
        assert_eq!(log.read(0, sz * 3, i64::MAX, false).unwrap().len, 3 * sz);
        // mid-batch offset starts at the batch
        let s = log.read(12, sz * 2, i64::MAX, false).unwrap();
        assert_eq!(
            (s.first_batch_offset, s.position as usize, s.len),
            (10, 2 * sz, 2 * sz)
        );
        // too small: nothing unless min_one_batch
        assert_eq!(log.read(0, sz - 1, i64::MAX, false).unwrap().len, 0);
        assert_eq!(log.read(0, 0, i64::MAX, true).unwrap().len, sz);
        assert_eq!(log.read(0, sz + 1, i64::MAX, true).unwrap().len, sz);
        // high watermark: batches with last offset >= hw excluded
        assert_eq!(log.read(0, MAX, 20, true).unwrap().len, 4 * sz);
        assert_eq!(log.read(0, MAX, 19, true).unwrap().len, 3 * sz);
        assert_eq!(
            log.read(17, MAX, 19, true).unwrap().len,
            0,
            "hw bound beats min_one_batch"
        );
        assert_eq!(log.read(0, MAX, i64::MAX, true).unwrap().len, 10 * sz);
        // end and out of range
        let s = log.read(50, MAX, i64::MAX, true).unwrap();
        assert!(s.is_empty());
        assert_eq!(s.first_batch_offset, 50);
        assert!(matches!(
            log.read(51, MAX, i64::MAX, true),
            Err(ReadError::OffsetOutOfRange {
                offset: 51,
                log_start_offset: 0,
                log_end_offset: 50
            })
        ));
        assert!(matches!(
            log.read(-1, MAX, i64::MAX, true),
            Err(ReadError::OffsetOutOfRange { .. })
        ));
    }

    #[test]
    fn read_jumps_with_index_and_stays_in_one_segment() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = LogConfig {
            segment_bytes: 64 * 1024,
            index_interval_bytes: 512,
            ..LogConfig::default()
        };
        let mut log = Log::open(tmp.path(), cfg, false).unwrap();
        for i in 0..2000 {
            append_simple(&mut log, 1 + i % 3, 1, 0);
        }
        assert!(log.num_segments() > 2);
        // Compare against a brute force walk for many (start, max_bytes, hw).
        let mut seed = 12345u64;
        let mut rnd = |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        let leo = log.log_end_offset() as u64;
        for _ in 0..300 {
            let start = rnd(leo) as i64;
            let max_bytes = rnd(20_000) as usize;
            let hw = start + rnd(3000) as i64;
            let min_one = rnd(2) == 1;
            let s = log.read(start, max_bytes, hw, min_one).unwrap();
            let seg = log
                .segments()
                .find(|g| g.base_offset() == s.segment_base_offset)
                .unwrap();
            let whole = {
                let mut v = vec![0u8; (seg.size() - s.position) as usize];
                s.file.read_exact_at(&mut v, s.position).unwrap();
                v
            };
            let mut expect = 0usize;
            for h in batches(&whole) {
                let h = h.unwrap();
                if h.last_offset() >= hw {
                    break;
                }
                if expect + h.total_size() > max_bytes && !(min_one && expect == 0) {
                    break;
                }
                expect += h.total_size();
            }
            assert_eq!(
                s.len, expect,
                "start {start} max {max_bytes} hw {hw} min_one {min_one}"
            );
        }
    }

    #[test]
    fn timestamp_lookup_record_level_all_codecs() {
        let tmp = tempfile::tempdir().unwrap();
        let mut log = Log::open(tmp.path(), small_cfg(), false).unwrap();
        let codecs = [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
        ];
        let mut t = 10_000i64;
        for round in 0..12 {
            let codec = codecs[round % codecs.len()];
            // out of order timestamps inside the batch
            let ts = [t + 30, t + 10, t + 50, t + 20, t + 40];
            let mut b = batch_with(codec, &ts, 40);
            log.append_at(&mut b, 0, None, MAX, 0).unwrap();
            if round == 5 {
                let mut z = zstd_batch();
                log.append_at(&mut z, 0, None, MAX, 0).unwrap();
            }
            t += 100;
        }
        let recs = all_records(&log);
        assert_eq!(recs.len() as i64, log.log_end_offset());
        assert!(recs.iter().any(|r| r.timestamp == ZSTD_BATCH_TIMESTAMPS[1]));
        let brute = |target: i64| {
            recs.iter()
                .filter(|r| r.timestamp >= target)
                .min_by_key(|r| r.offset)
                .map(|r| (r.timestamp, r.offset))
        };
        let mut targets: Vec<i64> = recs
            .iter()
            .flat_map(|r| [r.timestamp - 1, r.timestamp, r.timestamp + 1])
            .collect();
        targets.extend([i64::MIN, 0, 999, 1000, 1200, 1301, 1500, 1501, i64::MAX]);
        for target in targets {
            assert_eq!(
                log.offset_for_timestamp(target).unwrap(),
                brute(target),
                "target {target}"
            );
        }
        // max timestamp: the earliest record with the largest timestamp
        let max = recs.iter().map(|r| r.timestamp).max().unwrap();
        let first = recs.iter().find(|r| r.timestamp == max).unwrap();
        assert_eq!(
            log.max_timestamp_offset().unwrap(),
            Some((max, first.offset))
        );
        // survives reopen
        log.close().unwrap();
        drop(log);
        let log = Log::open(tmp.path(), small_cfg(), false).unwrap();
        assert_eq!(
            log.max_timestamp_offset().unwrap(),
            Some((max, first.offset))
        );
        assert_eq!(log.offset_for_timestamp(10_535).unwrap(), brute(10_535));
    }

    #[test]
    fn max_timestamp_ties_pick_earliest() {
        let tmp = tempfile::tempdir().unwrap();
        let mut log = Log::open(tmp.path(), LogConfig::default(), false).unwrap();
        let mut b = batch_with(Compression::None, &[5, 9, 7, 9], 5);
        log.append(&mut b, 0, None, MAX).unwrap();
        let mut b = batch_with(Compression::Lz4, &[9, 9], 5);
        log.append(&mut b, 0, None, MAX).unwrap();
        assert_eq!(log.max_timestamp_offset().unwrap(), Some((9, 1)));
        assert_eq!(log.offset_for_timestamp(8).unwrap(), Some((9, 1)));
        assert_eq!(log.offset_for_timestamp(6).unwrap(), Some((9, 1)));
    }

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

    #[test]
    fn retention_by_time() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = LogConfig {
            retention_ms: 1000,
            ..small_cfg()
        };
        let mut log = Log::open(tmp.path(), cfg, false).unwrap();
        for i in 0..100 {
            append_simple(&mut log, 2, 10_000 + i * 10, 0);
        }
        let nseg = log.num_segments();
        assert!(nseg > 3);
        let second = log.segments().nth(1).unwrap();
        let (second_base, first_max) = (
            second.base_offset(),
            log.segments().next().unwrap().max_timestamp(),
        );
        // keep a reader on the first segment
        let held = log.read(0, 100, i64::MAX, true).unwrap();
        assert_eq!(log.apply_retention(first_max + 1000).unwrap(), 0);
        assert_eq!(log.apply_retention(first_max + 1001).unwrap(), 1);
        assert_eq!(log.log_start_offset(), second_base);
        assert!(
            !held.read_to_vec().unwrap().is_empty(),
            "deleted segment still readable"
        );
        assert!(matches!(
            log.read(0, 100, i64::MAX, true),
            Err(ReadError::OffsetOutOfRange { .. })
        ));
        assert_eq!(
            log.read(second_base, 100, i64::MAX, true)
                .unwrap()
                .first_batch_offset,
            second_base
        );
        // everything expired: active is rolled, all data segments deleted
        let leo = log.log_end_offset();
        let n = log.apply_retention(10_000_000).unwrap();
        assert_eq!(n, nseg - 1);
        assert_eq!(log.num_segments(), 1);
        assert_eq!(
            (
                log.log_start_offset(),
                log.log_end_offset(),
                log.size_bytes()
            ),
            (leo, leo, 0)
        );
        assert_eq!(
            log.apply_retention(10_000_000).unwrap(),
            0,
            "empty active never deleted"
        );
        assert!(log.read(leo, 100, i64::MAX, true).unwrap().is_empty());
        let info = append_simple(&mut log, 1, 1, 0);
        assert_eq!(info.first_offset, leo);
        assert_eq!(info.log_start_offset, leo);
        drop(log);
        let log = Log::open(tmp.path(), small_cfg(), false).unwrap();
        assert_eq!(
            (log.log_start_offset(), log.log_end_offset()),
            (leo, leo + 1)
        );
    }

    #[test]
    fn retention_by_size() {
        let tmp = tempfile::tempdir().unwrap();
        let mut log = Log::open(tmp.path(), small_cfg(), false).unwrap();
        for i in 0..100 {
            append_simple(&mut log, 2, i, 0);
        }
        let sizes: Vec<u64> = log.segments().map(Segment::size).collect();
        let total = log.size_bytes();
        // excess smaller than the first segment: nothing
        log.config.retention_bytes = (total - sizes[0] + 1) as i64;
        assert_eq!(log.apply_retention(0).unwrap(), 0);
        // excess of exactly two segments
        log.config.retention_bytes = (total - sizes[0] - sizes[1]) as i64;
        assert_eq!(log.apply_retention(0).unwrap(), 2);
        assert_eq!(log.size_bytes(), total - sizes[0] - sizes[1]);
        assert_eq!(
            log.log_start_offset(),
            log.segments().next().unwrap().base_offset()
        );
        assert!(log.log_start_offset() > 0);
        log.config.retention_bytes = -1;
        assert_eq!(log.apply_retention(0).unwrap(), 0);
        log.config.retention_bytes = 0;
        let leo = log.log_end_offset();
        assert!(log.apply_retention(0).unwrap() > 0);
        assert_eq!((log.log_start_offset(), log.size_bytes()), (leo, 0));
    }

    #[test]
    fn read_skips_gap_at_segment_end() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        {
            let mut log = Log::open(d, LogConfig::default(), false).unwrap();
            append_simple(&mut log, 5, 1, 0);
            log.close().unwrap();
        }
        // A second segment starting at 20, as compaction could leave it.
        let mut b = simple_batch(2, 7, 10);
        batch::set_base_offset(&mut b, 20);
        std::fs::write(d.join(segment::file_name(20, ".log")), &b).unwrap();
        let log = Log::open(d, LogConfig::default(), true).unwrap();
        assert_eq!((log.num_segments(), log.log_end_offset()), (2, 22));
        let s = log.read(7, MAX, i64::MAX, true).unwrap();
        assert_eq!(
            (s.first_batch_offset, s.segment_base_offset, s.len),
            (20, 20, b.len())
        );
        let s = log.read(3, MAX, i64::MAX, true).unwrap();
        assert_eq!(s.first_batch_offset, 0);
        assert_eq!(log.offset_for_timestamp(7).unwrap(), Some((7, 20)));
    }

    #[test]
    fn truncate_to() {
        let tmp = tempfile::tempdir().unwrap();
        let mut log = Log::open(tmp.path(), small_cfg(), false).unwrap();
        for i in 0..100 {
            append_simple(&mut log, 2, i, 0);
        }
        let nseg = log.num_segments();
        log.truncate_to(101).unwrap(); // mid-batch: the batch [100, 101] goes
        assert_eq!(log.log_end_offset(), 100);
        assert!(log.num_segments() < nseg);
        assert_eq!(all_records(&log).len(), 100);
        assert_eq!(log.max_timestamp_offset().unwrap(), Some((49, 98)));
        let info = append_simple(&mut log, 1, 500, 0);
        assert_eq!(info.first_offset, 100);
        log.truncate_to(0).unwrap();
        assert_eq!(
            (
                log.log_start_offset(),
                log.log_end_offset(),
                log.num_segments()
            ),
            (0, 0, 1)
        );
    }

    #[test]
    fn flush_policy() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = LogConfig {
            flush_interval_messages: 3,
            ..LogConfig::default()
        };
        let mut log = Log::open(tmp.path(), cfg, false).unwrap();
        append_simple(&mut log, 2, 1, 0);
        assert_eq!(log.recovery_point(), 0);
        append_simple(&mut log, 1, 1, 0);
        assert_eq!(log.recovery_point(), 3);
        log.config.flush_interval_ms = 100;
        let now = now_ms();
        append_simple(&mut log, 1, 1, now);
        assert_eq!(log.recovery_point(), 3);
        assert!(!log.maybe_flush(now + 50).unwrap());
        assert!(log.maybe_flush(now + 100_000).unwrap());
        assert_eq!(log.recovery_point(), 4);
    }

    #[test]
    fn ten_thousand_batches_random_lookups() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = LogConfig {
            segment_bytes: 256 * 1024,
            ..LogConfig::default()
        };
        let mut log = Log::open(tmp.path(), cfg.clone(), false).unwrap();
        let mut seed = 7u64;
        let mut rnd = move |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        let mut bases = Vec::with_capacity(10_000);
        for i in 0..10_000 {
            let n = 1 + rnd(5) as usize;
            let mut b = simple_batch(n, 1_000_000 + i, 20 + rnd(100) as usize);
            bases.push(log.append_at(&mut b, 1, None, MAX, 0).unwrap().first_offset);
        }
        let leo = log.log_end_offset();
        let check = |log: &Log, rnd: &mut dyn FnMut(u64) -> u64| {
            for _ in 0..2000 {
                let target = rnd(leo as u64) as i64;
                let s = log.read(target, 1, i64::MAX, true).unwrap();
                let expect = bases[bases.partition_point(|&b| b <= target) - 1];
                assert_eq!(s.first_batch_offset, expect, "target {target}");
                let ts = 1_000_000 + rnd(10_000) as i64;
                let (t, off) = log.offset_for_timestamp(ts).unwrap().unwrap();
                assert_eq!((off, t), (bases[(ts - 1_000_000) as usize], ts));
            }
        };
        check(&log, &mut rnd);
        assert!(log.num_segments() > 5);
        log.close().unwrap();
        drop(log);
        let log = Log::open(tmp.path(), cfg, true).unwrap();
        assert_eq!(log.log_end_offset(), leo);
        check(&log, &mut rnd);
        let mut log = log;
        let held = log.read(0, 100, i64::MAX, true).unwrap();
        log.delete_dir().unwrap();
        assert!(!tmp.path().exists());
        assert!(!held.read_to_vec().unwrap().is_empty());
        let mut b = simple_batch(1, 1, 1);
        assert!(matches!(
            log.append(&mut b, 0, None, MAX),
            Err(AppendError::Io(_))
        ));
        log.close().unwrap();
    }
}
