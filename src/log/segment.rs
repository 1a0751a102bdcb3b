//! One log segment: `<base>.log` plus its `.index`, `.timeindex` and `.txnindex` (the last
//! only once an aborted transaction's marker is in the segment).
//!
//! The `.log` file is shared as an `Arc<File>`: readers keep their own handle,
//! so a segment deleted by retention stays readable by them. All file access
//! is positional (`pread`/`pwrite`), with the write position tracked in
//! memory (`size`).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use tracing::warn;

use super::batch::{self, BatchHeader, HEADER_SIZE};
use super::offset_index::OffsetIndex;
use super::open_files::LogFile;
use super::partition_log::LogConfig;
use super::remove_if_exists;
use super::time_index::TimeIndex;
use super::txn_index::{TXN_INDEX_SUFFIX, TxnIndex};

pub const LOG_SUFFIX: &str = ".log";
pub const INDEX_SUFFIX: &str = ".index";
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";

/// Read-ahead when walking batch headers.
const SCAN_CHUNK: usize = 16 << 10;
/// Read-ahead when validating whole batches during recovery.
const RECOVERY_CHUNK: usize = 1 << 20;

/// `<base offset, 20 digits>` + suffix, as Kafka names segment files.
pub fn file_name(base_offset: i64, suffix: &str) -> String {
    format!("{base_offset:020}{suffix}")
}

/// Splits a segment file name into base offset and suffix (`.log`, `.index`, `.timeindex`,
/// `.txnindex`).
pub fn parse_file_name(name: &str) -> Option<(i64, &'static str)> {
    let (stem, suffix) = [
        LOG_SUFFIX,
        INDEX_SUFFIX,
        TIME_INDEX_SUFFIX,
        TXN_INDEX_SUFFIX,
    ]
    .iter()
    .find_map(|s| name.strip_suffix(s).map(|stem| (stem, *s)))?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((stem.parse().ok()?, suffix))
}

fn invalid_data(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

fn mtime_ms(file: &File) -> i64 {
    file.metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as i64)
}

/// Buffered positional reader over the first `limit` bytes of a file.
struct FileReader<'a> {
    file: &'a File,
    limit: u64,
    buf: Vec<u8>,
    start: u64,
    chunk: usize,
}

impl<'a> FileReader<'a> {
    fn new(file: &'a File, limit: u64, chunk: usize) -> Self {
        FileReader {
            file,
            limit,
            buf: Vec::new(),
            start: 0,
            chunk,
        }
    }

    fn bytes(&mut self, pos: u64, len: usize) -> io::Result<&[u8]> {
        let end = pos + len as u64;
        if end > self.limit {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("read of {len} bytes at {pos} beyond {}", self.limit),
            ));
        }
        if pos < self.start || end > self.start + self.buf.len() as u64 {
            let want = (len.max(self.chunk) as u64).min(self.limit - pos) as usize;
            self.buf.resize(want, 0);
            self.file.read_exact_at(&mut self.buf, pos)?;
            self.start = pos;
        }
        let off = (pos - self.start) as usize;
        Ok(&self.buf[off..off + len])
    }

    /// Structurally checked header of the batch at `pos`.
    fn header(&mut self, pos: u64) -> io::Result<BatchHeader> {
        let available = self.limit.saturating_sub(pos);
        let n = available.min(HEADER_SIZE as u64) as usize;
        let head = self.bytes(pos, n)?;
        batch::parse_header_checked(head, pos, available).map_err(invalid_data)
    }
}

pub struct Segment {
    base_offset: i64,
    /// The `.log` file, closed while idle when the process keeps too many open.
    log: LogFile,
    size: u64,
    next_offset: i64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    txn_index: TxnIndex,
    index_interval_bytes: u64,
    bytes_since_last_index_entry: u64,
    /// When the roll timer started: wall clock of the first append, or after a
    /// reload the first batch's max timestamp (file mtime if it has none).
    roll_base_ms: Option<i64>,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
}

impl Segment {
    fn paths(dir: &Path, base_offset: i64) -> [PathBuf; 3] {
        [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX].map(|s| dir.join(file_name(base_offset, s)))
    }

    fn assemble(
        base_offset: i64,
        log: File,
        log_path: PathBuf,
        size: u64,
        (idx, tidx, txn_index): (OffsetIndex, TimeIndex, TxnIndex),
        cfg: &LogConfig,
    ) -> Segment {
        Segment {
            base_offset,
            log: LogFile::new(log, log_path),
            size,
            next_offset: base_offset,
            offset_index: idx,
            time_index: tidx,
            txn_index,
            index_interval_bytes: cfg.index_interval_bytes as u64,
            bytes_since_last_index_entry: 0,
            roll_base_ms: None,
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
        }
    }

    /// Creates a new empty segment. Fails if its `.log` already exists; stale
    /// index files of the same name are removed. The `.index` and `.timeindex`
    /// files are made with the segment's first data, so an unwritten partition
    /// has only its `.log`.
    pub fn create(dir: &Path, base_offset: i64, cfg: &LogConfig) -> io::Result<Segment> {
        let [log_path, idx_path, tidx_path] = Self::paths(dir, base_offset);
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&log_path)?;
        remove_if_exists(&idx_path)?;
        remove_if_exists(&tidx_path)?;
        let idx = OffsetIndex::open(&idx_path, base_offset, cfg.segment_index_bytes as usize)?;
        let tidx = TimeIndex::open(&tidx_path, base_offset, cfg.segment_index_bytes as usize)?;
        let txn = TxnIndex::create(dir.join(file_name(base_offset, TXN_INDEX_SUFFIX)))?;
        Ok(Self::assemble(
            base_offset,
            log,
            log_path,
            0,
            (idx, tidx, txn),
            cfg,
        ))
    }

    /// Opens an existing segment without validating it. The second value tells
    /// whether an index file of a segment holding data was missing (then
    /// [`Segment::recover`] must run); an empty segment needs none.
    /// Call [`Segment::load_state`] or [`Segment::recover`] before use.
    pub fn open(dir: &Path, base_offset: i64, cfg: &LogConfig) -> io::Result<(Segment, bool)> {
        let [log_path, idx_path, tidx_path] = Self::paths(dir, base_offset);
        let log = OpenOptions::new().read(true).write(true).open(&log_path)?;
        let size = log.metadata()?.len();
        let missing = size > 0 && (!idx_path.exists() || !tidx_path.exists());
        let idx = OffsetIndex::open(&idx_path, base_offset, cfg.segment_index_bytes as usize)?;
        let tidx = TimeIndex::open(&tidx_path, base_offset, cfg.segment_index_bytes as usize)?;
        let txn = TxnIndex::open(dir.join(file_name(base_offset, TXN_INDEX_SUFFIX)))?;
        Ok((
            Self::assemble(base_offset, log, log_path, size, (idx, tidx, txn), cfg),
            missing,
        ))
    }

    /// Trusts the indexes (after sanity checks) and derives the in-memory state
    /// from them plus a walk over the batches after the last index entry.
    /// An `Err` means the segment needs [`Segment::recover`].
    pub fn load_state(&mut self) -> Result<(), String> {
        if self.size > u32::MAX as u64 {
            return Err(format!("{}: larger than 4 GiB", self.log.path().display()));
        }
        self.offset_index.sanity_check(self.size)?;
        self.scan_tail()?;
        self.time_index.sanity_check(self.next_offset)?;
        self.txn_index
            .truncate_to(self.next_offset)
            .map_err(|e| format!("{}: {e}", self.txn_index.path().display()))
    }

    /// Sets next offset, max timestamp and index spacing from the last index
    /// entries and the batches after the last offset index entry.
    fn scan_tail(&mut self) -> Result<(), String> {
        let last = self.offset_index.last_entry();
        let start = last.map_or(0, |e| e.position as u64);
        let (mut max_ts, mut off_max) = match self.time_index.last_entry() {
            Some(e) => (e.timestamp, e.offset),
            None => (-1, self.base_offset),
        };
        let mut next = self.base_offset;
        let log = self
            .log
            .get()
            .map_err(|e| format!("{}: {e}", self.log.path().display()))?;
        let mut reader = FileReader::new(&log, self.size, SCAN_CHUNK);
        let mut pos = start;
        let mut first = true;
        while pos < self.size {
            let h = reader
                .header(pos)
                .map_err(|e| format!("{}: {e}", self.log.path().display()))?;
            if first
                && let Some(e) = last
                && h.last_offset() != e.offset
            {
                return Err(format!(
                    "{}: index entry {} points at a batch ending at {}",
                    self.log.path().display(),
                    e.offset,
                    h.last_offset()
                ));
            }
            // `next` is the base offset before the first batch, then the
            // previous batch's next offset.
            if h.base_offset < next {
                return Err(format!(
                    "{}: batch at {pos} has offset {} below {next}",
                    self.log.path().display(),
                    h.base_offset
                ));
            }
            first = false;
            if h.max_timestamp > max_ts {
                max_ts = h.max_timestamp;
                off_max = h.last_offset();
            }
            next = h.next_offset();
            pos += h.total_size() as u64;
        }
        self.next_offset = next;
        self.max_timestamp = max_ts;
        self.offset_of_max_timestamp = off_max;
        self.bytes_since_last_index_entry = self.size - start;
        self.roll_base_ms = self.first_batch_roll_base();
        Ok(())
    }

    fn first_batch_roll_base(&self) -> Option<i64> {
        if self.size == 0 {
            return None;
        }
        let mut head = [0u8; HEADER_SIZE];
        let ts = if self.size >= HEADER_SIZE as u64
            && self
                .log
                .get()
                .is_ok_and(|f| f.read_exact_at(&mut head, 0).is_ok())
        {
            BatchHeader::parse(&head, 0).map_or(-1, |h| h.max_timestamp)
        } else {
            -1
        };
        Some(if ts >= 0 {
            ts
        } else {
            self.log.get().map_or(0, |f| mtime_ms(&f))
        })
    }

    /// Validates every batch (length, magic, CRC, increasing offsets), cuts the
    /// file at the first bad one and rebuilds both indexes. Returns the number
    /// of bytes truncated.
    pub fn recover(&mut self) -> io::Result<u64> {
        self.offset_index.reset()?;
        self.time_index.reset()?;
        let log = self.log.get()?;
        let file_len = log.metadata()?.len();
        let mut reader = FileReader::new(&log, file_len, RECOVERY_CHUNK);
        let mut pos = 0u64;
        let mut last_index_pos = 0u64;
        let mut next = self.base_offset;
        let mut max_ts = -1i64;
        let mut off_max = self.base_offset;
        while pos < file_len {
            let available = file_len - pos;
            let head = reader.bytes(pos, available.min(HEADER_SIZE as u64) as usize)?;
            let h = match batch::parse_header_checked(head, pos, available) {
                Ok(h) => h,
                Err(e) => {
                    warn!(segment = %self.log.path().display(), "recovery: {e}");
                    break;
                }
            };
            let total = h.total_size() as u64;
            if !batch::verify_crc(reader.bytes(pos, total as usize)?) {
                warn!(segment = %self.log.path().display(), position = pos, "recovery: CRC mismatch");
                break;
            }
            if h.base_offset < next
                || h.last_offset_delta < 0
                || h.last_offset() - self.base_offset > i32::MAX as i64
                || pos + total > u32::MAX as u64
            {
                warn!(segment = %self.log.path().display(), position = pos, "recovery: bad offsets");
                break;
            }
            if h.max_timestamp > max_ts {
                max_ts = h.max_timestamp;
                off_max = h.last_offset();
            }
            if pos - last_index_pos > self.index_interval_bytes && !self.offset_index.is_full() {
                self.offset_index.append(h.last_offset(), pos as u32)?;
                self.time_index.maybe_append(max_ts, off_max, true)?;
                last_index_pos = pos;
            }
            next = h.next_offset();
            pos += total;
        }
        let truncated = file_len - pos;
        if truncated > 0 {
            warn!(segment = %self.log.path().display(), valid_bytes = pos, truncated, "truncating corrupt tail");
            log.set_len(pos)?;
        }
        self.size = pos;
        self.next_offset = next;
        self.max_timestamp = max_ts;
        self.offset_of_max_timestamp = off_max;
        self.bytes_since_last_index_entry = pos - last_index_pos;
        self.roll_base_ms = self.first_batch_roll_base();
        // Entries of markers cut off go; the producer state's replay restores any missing.
        self.txn_index.truncate_to(next)?;
        Ok(truncated)
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Offset after the last batch (== base offset when empty).
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    /// The `.log` file, opened again if it was closed while idle.
    pub fn file(&self) -> io::Result<Arc<File>> {
        self.log.get()
    }

    pub fn log_path(&self) -> &Path {
        self.log.path()
    }

    /// The `.log` file's handle in the process's table of open segment files.
    pub fn log_file(&self) -> &LogFile {
        &self.log
    }

    /// Largest batch max timestamp seen, -1 if none.
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    /// Last offset of the batch that first carried [`Segment::max_timestamp`].
    pub fn offset_of_max_timestamp(&self) -> i64 {
        self.offset_of_max_timestamp
    }

    /// Timestamp used by time retention: max timestamp, or file mtime if none.
    pub fn largest_timestamp(&self) -> i64 {
        if self.max_timestamp >= 0 {
            self.max_timestamp
        } else {
            self.log.get().map_or(0, |f| mtime_ms(&f))
        }
    }

    pub fn roll_base_ms(&self) -> Option<i64> {
        self.roll_base_ms
    }

    pub fn offset_index(&self) -> &OffsetIndex {
        &self.offset_index
    }

    pub fn time_index(&self) -> &TimeIndex {
        &self.time_index
    }

    pub fn txn_index(&self) -> &TxnIndex {
        &self.txn_index
    }

    pub fn txn_index_mut(&mut self) -> &mut TxnIndex {
        &mut self.txn_index
    }

    /// Whether an append of `append_size` bytes ending at `last_offset` must go
    /// to a new segment. Never true for an empty segment.
    pub fn should_roll(
        &self,
        cfg: &LogConfig,
        append_size: u64,
        last_offset: i64,
        now_ms: i64,
    ) -> bool {
        if self.size == 0 {
            return false;
        }
        self.size + append_size > cfg.segment_bytes
            || self
                .roll_base_ms
                .is_some_and(|t| now_ms.saturating_sub(t) > cfg.roll_ms)
            || self.offset_index.is_full()
            || self.time_index.is_full()
            || last_offset - self.base_offset > i32::MAX as i64
    }

    /// Appends batches already patched with their final offsets. `headers` are
    /// the batches of `buf` with positions relative to `buf`.
    pub fn append(&mut self, buf: &[u8], headers: &[BatchHeader], now_ms: i64) -> io::Result<()> {
        let Some(last) = headers.last() else {
            return Ok(());
        };
        let start = self.size;
        if start == 0 {
            // The first data: from here on the segment has its index files, as Kafka's do.
            self.offset_index.ensure_on_disk()?;
            self.time_index.ensure_on_disk()?;
        }
        let log = self.log.get()?;
        if let Err(e) = log.write_all_at(buf, start) {
            // leave no partial batch behind the tracked size
            let _ = log.set_len(start);
            return Err(e);
        }
        self.size += buf.len() as u64;
        self.next_offset = last.next_offset();
        self.roll_base_ms.get_or_insert(now_ms);
        for h in headers {
            let pos = start + h.position;
            if h.max_timestamp > self.max_timestamp {
                self.max_timestamp = h.max_timestamp;
                self.offset_of_max_timestamp = h.last_offset();
            }
            if self.bytes_since_last_index_entry > self.index_interval_bytes
                && !self.offset_index.is_full()
            {
                self.offset_index.append(h.last_offset(), pos as u32)?;
                self.time_index.maybe_append(
                    self.max_timestamp,
                    self.offset_of_max_timestamp,
                    true,
                )?;
                self.bytes_since_last_index_entry = 0;
            }
            self.bytes_since_last_index_entry += h.total_size() as u64;
        }
        Ok(())
    }

    /// The batch holding `target` (or the first batch after it, if `target`
    /// falls in a gap): its file position and header. `None` if the segment
    /// has nothing at or after `target`.
    pub fn translate_offset(&self, target: i64) -> io::Result<Option<(u64, BatchHeader)>> {
        if target >= self.next_offset {
            return Ok(None);
        }
        let mut pos = self.offset_index.lookup(target).position as u64;
        let log = self.log.get()?;
        let mut reader = FileReader::new(&log, self.size, SCAN_CHUNK);
        while pos < self.size {
            let h = reader.header(pos)?;
            if h.last_offset() >= target {
                return Ok(Some((pos, h)));
            }
            pos += h.total_size() as u64;
        }
        Ok(None)
    }

    /// Calls `f` with the header of every batch holding offsets >= `from`, in order.
    pub fn scan_headers_from(&self, from: i64, f: &mut dyn FnMut(&BatchHeader)) -> io::Result<()> {
        let Some((mut pos, _)) = self.translate_offset(from)? else {
            return Ok(());
        };
        let log = self.log.get()?;
        let mut reader = FileReader::new(&log, self.size, SCAN_CHUNK);
        while pos < self.size {
            let h = reader.header(pos)?;
            f(&h);
            pos += h.total_size() as u64;
        }
        Ok(())
    }

    /// Length of the run of whole batches starting at `start_pos` (a batch
    /// start) that fits in `max_bytes` (at least one batch if `min_one_batch`)
    /// and holds only offsets below `max_offset_exclusive`, and an offset no record of the
    /// run reaches (the base offset of the batch after it, or the segment's next offset).
    pub fn read_len(
        &self,
        start_pos: u64,
        max_bytes: usize,
        max_offset_exclusive: i64,
        min_one_batch: bool,
    ) -> io::Result<(usize, i64)> {
        let limit = start_pos.saturating_add(max_bytes as u64);
        let mut end = start_pos;
        // Index entries mark batch starts: jump over the whole batches before
        // the last entry that fits.
        if let Some(e) = self
            .offset_index
            .last_entry_within(limit, max_offset_exclusive)
            && e.position as u64 > start_pos
        {
            end = e.position as u64;
        }
        let log = self.log.get()?;
        let mut reader = FileReader::new(&log, self.size, SCAN_CHUNK);
        let mut upper = self.next_offset;
        while end < self.size {
            let h = reader.header(end)?;
            upper = h.base_offset;
            if h.last_offset() >= max_offset_exclusive {
                break;
            }
            let new_end = end + h.total_size() as u64;
            if new_end > limit && !(min_one_batch && end == start_pos) {
                break;
            }
            end = new_end;
            upper = h.next_offset();
        }
        Ok(((end - start_pos) as usize, upper))
    }

    /// Reads one whole batch.
    pub fn read_batch(&self, position: u64, header: &BatchHeader) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; header.total_size()];
        self.log.get()?.read_exact_at(&mut buf, position)?;
        Ok(buf)
    }

    /// First record with timestamp >= `target` and offset >= `start_offset`:
    /// `(timestamp, offset)`.
    pub fn find_by_timestamp(
        &self,
        target: i64,
        start_offset: i64,
    ) -> io::Result<Option<(i64, i64)>> {
        if self.max_timestamp < target || start_offset >= self.next_offset {
            return Ok(None);
        }
        let from = self.time_index.lookup(target).offset.max(start_offset);
        let mut pos = self.offset_index.lookup(from).position as u64;
        let log = self.log.get()?;
        let mut reader = FileReader::new(&log, self.size, SCAN_CHUNK);
        while pos < self.size {
            let h = reader.header(pos)?;
            let total = h.total_size();
            if h.max_timestamp >= target && h.last_offset() >= start_offset {
                let records =
                    batch::decode_records(reader.bytes(pos, total)?).map_err(invalid_data)?;
                if let Some(r) = records
                    .iter()
                    .find(|r| r.timestamp >= target && r.offset >= start_offset)
                {
                    return Ok(Some((r.timestamp, r.offset)));
                }
            }
            pos += total as u64;
        }
        Ok(None)
    }

    /// The earliest record carrying the segment's max timestamp:
    /// `(timestamp, offset)`. `None` if the segment has no timestamps.
    pub fn max_timestamp_record(&self) -> io::Result<Option<(i64, i64)>> {
        if self.max_timestamp < 0 {
            return Ok(None);
        }
        let fallback = Some((self.max_timestamp, self.offset_of_max_timestamp));
        let Some((pos, h)) = self.translate_offset(self.offset_of_max_timestamp)? else {
            return Ok(fallback);
        };
        let records = batch::decode_records(&self.read_batch(pos, &h)?).map_err(invalid_data)?;
        Ok(records
            .iter()
            .find(|r| r.timestamp == self.max_timestamp)
            .map(|r| (r.timestamp, r.offset))
            .or(fallback))
    }

    /// Removes every batch holding offsets >= `offset` (the batch holding
    /// `offset` goes entirely). Returns bytes removed.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<u64> {
        let Some((pos, h)) = self.translate_offset(offset)? else {
            return Ok(0);
        };
        self.offset_index.truncate_to_position(pos)?;
        self.time_index.truncate_to(h.base_offset)?;
        self.log.get()?.set_len(pos)?;
        let removed = self.size - pos;
        self.size = pos;
        self.scan_tail().map_err(invalid_data)?;
        self.txn_index.truncate_to(self.next_offset)?;
        Ok(removed)
    }

    /// Called when the segment stops being the active one (roll, close):
    /// records the final max timestamp in the time index.
    pub fn on_become_inactive(&mut self) -> io::Result<()> {
        if self.max_timestamp >= 0 {
            self.time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp, true)?;
        }
        Ok(())
    }

    /// fdatasync of the log and the indexes; a segment holding data whose index
    /// files were lost gets them again here.
    pub fn flush(&self) -> io::Result<()> {
        self.log.get()?.sync_data()?;
        if self.size > 0 {
            self.offset_index.ensure_on_disk()?;
            self.time_index.ensure_on_disk()?;
        }
        self.offset_index.flush()?;
        self.time_index.flush()?;
        self.txn_index.flush()
    }

    /// Removes the segment's files. Open readers keep the data.
    pub fn delete(self) -> io::Result<()> {
        let log = std::fs::remove_file(self.log.path());
        self.offset_index.delete()?;
        self.time_index.delete()?;
        self.txn_index.delete()?;
        match log {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            r => r,
        }
    }
}

#[cfg(test)]
#[path = "segment_tests.rs"]
mod tests;
