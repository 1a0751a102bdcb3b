//! One cleaning of one log, the I/O around [`super::decide`]: the offset map built over the
//! dirty section, then each size-bounded group of segments from the log start rewritten into
//! one `<base>.log.cleaned` (with its `.index.cleaned`, `.timeindex.cleaned` and
//! `.txnindex.cleaned`), flushed. Nothing here holds the log's lock: the segments read are
//! inactive (immutable until deleted, and an open file stays readable); the log swaps each
//! cleaned group in afterwards ([`crate::log::Log::swap_cleaned`]) if its segments are still
//! the ones read.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::decide::{
    self, BatchFacts, BatchRetention, Control, LastRecord, SegmentInfo, TxnTracker,
};
use super::offset_map::OffsetMap;
use super::records;
use super::throttle::Throttle;
use crate::log::batch::{self, BatchHeader, HEADER_SIZE};
use crate::log::control::parse_end_txn_marker;
use crate::log::offset_index::OffsetIndex;
use crate::log::open_files::LogFile;
use crate::log::segment::{self, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX};
use crate::log::time_index::TimeIndex;
use crate::log::txn_index::{AbortedTxn, TXN_INDEX_SUFFIX, TxnIndex};

/// Suffix of a cleaning's output while it is written (removed at start-up if found).
pub const CLEANED_SUFFIX: &str = ".cleaned";
/// Suffix of a cleaning's complete output while it replaces the old segments (the swap is
/// completed at start-up if found).
pub const SWAP_SUFFIX: &str = ".swap";

/// The four file suffixes of a segment, the `.log` last.
pub const SEGMENT_SUFFIXES: [&str; 4] = [
    INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LOG_SUFFIX,
];

/// An inactive segment as the cleaner reads it: its file is opened (if the process's bound
/// on open segment files closed it) only when the cleaner reads it.
#[derive(Debug, Clone)]
pub struct SegmentSnapshot {
    pub info: SegmentInfo,
    pub file: LogFile,
}

/// Everything one cleaning needs, taken from the log and its producer state under their
/// locks.
#[derive(Debug, Clone)]
pub struct CleanInput {
    pub dir: PathBuf,
    /// The inactive segments, in order.
    pub segments: Vec<SegmentSnapshot>,
    /// Aborted transactions overlapping the segments (from every transaction index).
    pub aborted: Vec<AbortedTxn>,
    pub last_records: HashMap<i64, LastRecord>,
    pub first_dirty_offset: i64,
    /// Exclusive bound of what may be cleaned (Kafka's first uncleanable offset).
    pub end_offset: i64,
    pub delete_retention_ms: i64,
    pub map_buffer_bytes: u64,
    /// `log.cleaner.io.buffer.load.factor`.
    pub map_load_factor: f64,
    pub segment_bytes: u64,
    pub segment_index_bytes: u64,
    pub index_interval_bytes: u64,
    pub now_ms: i64,
    /// The I/O limit shared by the cleaner threads (none: unlimited).
    pub throttle: Option<Arc<Throttle>>,
}

impl CleanInput {
    /// Counts `bytes` read or written against the I/O limit.
    fn charge(&self, bytes: u64) {
        if let Some(t) = &self.throttle {
            t.charge(bytes);
        }
    }
}

/// One group's output, written and flushed under the `.cleaned` suffix.
#[derive(Debug, Clone)]
pub struct CleanedSegment {
    pub base_offset: i64,
    /// The segments it replaces: (base offset, size in bytes) as read.
    pub replaces: Vec<(i64, u64)>,
    pub size: u64,
}

#[derive(Debug, Clone, Default)]
pub struct CleanOutcome {
    pub cleaned: Vec<CleanedSegment>,
    /// The new first dirty offset (`cleaner-offset-checkpoint`).
    pub next_dirty_offset: i64,
    /// The earliest delete horizon set or still pending on a kept tombstone or marker.
    pub pending_delete_horizon: Option<i64>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_dropped: u64,
}

/// Reads whole batches of a segment file in order, through a read-ahead buffer.
struct BatchReader<'a> {
    file: &'a File,
    limit: u64,
    pos: u64,
    buf: Vec<u8>,
    buf_start: u64,
}

const READ_AHEAD: usize = 1 << 20;

impl<'a> BatchReader<'a> {
    fn new(file: &'a File, limit: u64) -> Self {
        BatchReader {
            file,
            limit,
            pos: 0,
            buf: Vec::new(),
            buf_start: 0,
        }
    }

    fn fill(&mut self, pos: u64, len: usize) -> io::Result<()> {
        let end = pos + len as u64;
        if pos >= self.buf_start && end <= self.buf_start + self.buf.len() as u64 {
            return Ok(());
        }
        let want = (len.max(READ_AHEAD) as u64).min(self.limit - pos) as usize;
        self.buf.resize(want, 0);
        self.file.read_exact_at(&mut self.buf, pos)?;
        self.buf_start = pos;
        Ok(())
    }

    /// The next batch: its header (position in the file) and bytes.
    fn next_batch(&mut self) -> io::Result<Option<(BatchHeader, &[u8])>> {
        if self.pos >= self.limit {
            return Ok(None);
        }
        let available = self.limit - self.pos;
        let head_len = available.min(HEADER_SIZE as u64) as usize;
        self.fill(self.pos, head_len)?;
        let off = (self.pos - self.buf_start) as usize;
        let h = batch::parse_header_checked(&self.buf[off..off + head_len], self.pos, available)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        let total = h.total_size();
        self.fill(self.pos, total)?;
        let off = (self.pos - self.buf_start) as usize;
        self.pos += total as u64;
        Ok(Some((h, &self.buf[off..off + total])))
    }
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

fn facts(h: &BatchHeader) -> BatchFacts {
    BatchFacts {
        producer_id: h.producer_id,
        producer_epoch: h.producer_epoch,
        last_offset: h.last_offset(),
        next_offset: h.next_offset(),
        is_control: h.is_control(),
        is_transactional: h.is_transactional(),
        delete_horizon_ms: records::delete_horizon(h),
    }
}

fn control_of(h: &BatchHeader, bytes: &[u8]) -> Control {
    if h.record_count <= 0 {
        return Control::Other { empty: true };
    }
    match parse_end_txn_marker(bytes) {
        Ok(Some(m)) if m.commit => Control::Commit,
        Ok(Some(_)) => Control::Abort,
        _ => Control::Other { empty: false },
    }
}

/// Fills `map` with the latest offset of each key in [`first_dirty`, `end`), skipping
/// aborted transactions' records and control batches, until the map is full (Kafka's
/// `buildOffsetMap`). Returns bytes read.
fn build_offset_map(input: &CleanInput, map: &mut OffsetMap) -> io::Result<u64> {
    let mut txns = TxnTracker::new(input.aborted.clone());
    let mut read = 0;
    'segments: for s in &input.segments {
        if s.info.next_offset <= input.first_dirty_offset {
            continue;
        }
        if s.info.base_offset >= input.end_offset {
            break;
        }
        let file = s.file.get()?;
        let mut reader = BatchReader::new(&file, s.info.size);
        while let Some((h, bytes)) = reader.next_batch()? {
            read += h.total_size() as u64;
            input.charge(h.total_size() as u64);
            if h.base_offset >= input.end_offset {
                break 'segments;
            }
            let f = facts(&h);
            if h.is_control() {
                txns.on_control(&f, control_of(&h, bytes));
                continue;
            }
            if txns.on_batch(&f) || h.last_offset() < input.first_dirty_offset {
                continue;
            }
            let payload = records::payload(bytes, &h).map_err(invalid)?;
            for r in records::parse(&h, &payload).map_err(invalid)? {
                if r.offset < input.first_dirty_offset || r.offset >= input.end_offset {
                    continue;
                }
                if let Some(k) = r.key
                    && !map.put(k, r.offset)
                {
                    break 'segments;
                }
            }
            if h.next_offset() <= input.end_offset {
                map.set_latest_offset(h.last_offset());
            }
        }
    }
    Ok(read)
}

/// The cleaned copy of one group being written.
struct Writer {
    log: File,
    size: u64,
    index: OffsetIndex,
    time_index: TimeIndex,
    txn_index: TxnIndex,
    index_interval: u64,
    since_index: u64,
    max_ts: i64,
    off_max: i64,
}

fn cleaned_path(dir: &Path, base: i64, suffix: &str) -> PathBuf {
    dir.join(format!(
        "{}{CLEANED_SUFFIX}",
        segment::file_name(base, suffix)
    ))
}

impl Writer {
    fn create(dir: &Path, base: i64, input: &CleanInput) -> io::Result<Writer> {
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(cleaned_path(dir, base, LOG_SUFFIX))?;
        let max = input.segment_index_bytes as usize;
        let idx = cleaned_path(dir, base, INDEX_SUFFIX);
        let tidx = cleaned_path(dir, base, TIME_INDEX_SUFFIX);
        File::create(&idx)?;
        File::create(&tidx)?;
        Ok(Writer {
            log,
            size: 0,
            index: OffsetIndex::open(&idx, base, max)?,
            time_index: TimeIndex::open(&tidx, base, max)?,
            txn_index: TxnIndex::create(cleaned_path(dir, base, TXN_INDEX_SUFFIX))?,
            index_interval: input.index_interval_bytes,
            since_index: 0,
            max_ts: -1,
            off_max: base,
        })
    }

    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        let h = BatchHeader::parse(bytes, 0).ok_or_else(|| invalid("short batch"))?;
        let pos = self.size;
        self.log.write_all_at(bytes, pos)?;
        self.size += bytes.len() as u64;
        if h.max_timestamp > self.max_ts {
            self.max_ts = h.max_timestamp;
            self.off_max = h.last_offset();
        }
        if self.since_index > self.index_interval && !self.index.is_full() {
            self.index.append(h.last_offset(), pos as u32)?;
            self.time_index
                .maybe_append(self.max_ts, self.off_max, true)?;
            self.since_index = 0;
        }
        self.since_index += bytes.len() as u64;
        Ok(())
    }

    fn finish(mut self, aborted: &[AbortedTxn]) -> io::Result<u64> {
        if self.max_ts >= 0 {
            self.time_index
                .maybe_append(self.max_ts, self.off_max, true)?;
        }
        for a in aborted {
            self.txn_index.append(*a)?;
        }
        self.log.sync_data()?;
        self.index.flush()?;
        self.time_index.flush()?;
        self.txn_index.flush()?;
        Ok(self.size)
    }
}

/// Removes whatever a cleaning of segment `base` left under the `.cleaned` suffix.
pub fn remove_cleaned(dir: &Path, base: i64) {
    for s in SEGMENT_SUFFIXES {
        let _ = std::fs::remove_file(cleaned_path(dir, base, s));
    }
}

/// Cleans the log `input` describes: the offset map over the dirty section, then every
/// group of segments from the log start to the end of what the map covers, written as
/// `.cleaned` files. The caller swaps them in.
pub fn clean(input: &CleanInput) -> io::Result<CleanOutcome> {
    let mut map = OffsetMap::with_buffer(input.map_buffer_bytes, input.map_load_factor);
    let mut out = CleanOutcome {
        bytes_read: build_offset_map(input, &mut map)?,
        ..Default::default()
    };
    // Below the first dirty offset keys are already unique: a pass with nothing new mapped
    // still removes tombstones and markers whose horizon has passed.
    let latest = map.latest_offset().max(input.first_dirty_offset - 1);
    let clean_end = (latest + 1).min(input.end_offset);
    out.next_dirty_offset = clean_end.max(input.first_dirty_offset);
    let to_clean: Vec<&SegmentSnapshot> = input
        .segments
        .iter()
        .filter(|s| s.info.base_offset < clean_end)
        .collect();
    let infos: Vec<SegmentInfo> = to_clean.iter().map(|s| s.info).collect();
    let max_entries = input.segment_index_bytes / 12;
    let groups = decide::group_by_size(&infos, input.segment_bytes, max_entries.max(1));
    let mut txns = TxnTracker::new(input.aborted.clone());
    for g in groups {
        let group = &to_clean[g];
        let base = group[0].info.base_offset;
        match clean_group(input, group, &map, latest, &mut txns, &mut out) {
            Ok(size) => out.cleaned.push(CleanedSegment {
                base_offset: base,
                replaces: group
                    .iter()
                    .map(|s| (s.info.base_offset, s.info.size))
                    .collect(),
                size,
            }),
            Err(e) => {
                remove_cleaned(&input.dir, base);
                return Err(e);
            }
        }
    }
    Ok(out)
}

fn clean_group(
    input: &CleanInput,
    group: &[&SegmentSnapshot],
    map: &OffsetMap,
    latest: i64,
    txns: &mut TxnTracker,
    out: &mut CleanOutcome,
) -> io::Result<u64> {
    let now = input.now_ms;
    let base = group[0].info.base_offset;
    let mut w = Writer::create(&input.dir, base, input)?;
    txns.kept_aborted.clear();
    let horizon = |h: i64, out: &mut CleanOutcome| {
        out.pending_delete_horizon = Some(out.pending_delete_horizon.map_or(h, |p| p.min(h)));
    };
    for s in group {
        let file = s.file.get()?;
        let mut reader = BatchReader::new(&file, s.info.size);
        while let Some((h, bytes)) = reader.next_batch()? {
            out.bytes_read += h.total_size() as u64;
            input.charge(h.total_size() as u64);
            let f = facts(&h);
            let can_discard = if h.is_control() {
                txns.on_control(&f, control_of(&h, bytes))
            } else {
                txns.on_batch(&f)
            };
            let d =
                decide::batch_decision(&f, can_discard, &input.last_records, input.end_offset, now);
            if d.retention == BatchRetention::Delete {
                out.records_dropped += h.record_count.max(0) as u64;
                continue;
            }
            let payload = records::payload(bytes, &h).map_err(invalid)?;
            let all = records::parse(&h, &payload).map_err(invalid)?;
            let mut kept = Vec::with_capacity(all.len());
            let mut tombstones = false;
            for r in &all {
                let keep = if d.discard_records {
                    false
                } else if h.is_control() {
                    true
                } else {
                    decide::keep_record(
                        r.offset,
                        latest,
                        r.key.and_then(|k| map.get(k)),
                        r.key.is_some(),
                        r.has_value,
                        f.delete_horizon_ms,
                        now,
                    )
                };
                if keep {
                    tombstones |= !r.has_value && !h.is_control();
                    kept.push(*r);
                }
            }
            out.records_dropped += (all.len() - kept.len()) as u64;
            if kept.is_empty() {
                if d.retention == BatchRetention::RetainEmpty {
                    let e = records::empty(&h);
                    out.bytes_written += e.len() as u64;
                    input.charge(e.len() as u64);
                    w.append(&e)?;
                }
                continue;
            }
            let set_horizon =
                (tombstones || d.marker_for_empty_txn) && f.delete_horizon_ms.is_none();
            if let Some(h) = f.delete_horizon_ms
                && (tombstones || d.marker_for_empty_txn)
            {
                horizon(h, out);
            }
            if kept.len() == all.len() && !set_horizon {
                out.bytes_written += bytes.len() as u64;
                input.charge(bytes.len() as u64);
                w.append(bytes)?;
            } else {
                let new_horizon =
                    set_horizon.then(|| now.saturating_add(input.delete_retention_ms));
                if let Some(nh) = new_horizon {
                    horizon(nh, out);
                }
                let rebuilt = records::rebuild(&h, &kept, new_horizon.or(f.delete_horizon_ms));
                out.bytes_written += rebuilt.len() as u64;
                input.charge(rebuilt.len() as u64);
                w.append(&rebuilt)?;
            }
        }
    }
    let aborted = std::mem::take(&mut txns.kept_aborted);
    w.finish(&aborted)
}
