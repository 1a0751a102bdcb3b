//! Record batch (magic v2) headers: parsing, validation and in-place patching,
//! plus record-level decoding of `(offset, timestamp)` for timestamp lookups.
//!
//! Header layout (61 bytes, big-endian):
//! ```text
//!  0 baseOffset i64        8 batchLength i32     12 partitionLeaderEpoch i32
//! 16 magic i8             17 crc u32 (CRC-32C of bytes 21..end)
//! 21 attributes i16       23 lastOffsetDelta i32 27 baseTimestamp i64
//! 35 maxTimestamp i64     43 producerId i64      51 producerEpoch i16
//! 53 baseSequence i32     57 recordCount i32     61 records...
//! ```

use super::compression::{self, Compression};

/// Size of the fixed v2 batch header.
pub const HEADER_SIZE: usize = 61;
/// baseOffset + batchLength: bytes not counted by batchLength.
pub const LOG_OVERHEAD: usize = 12;
/// The only supported on-disk format.
pub const MAGIC_V2: i8 = 2;
/// Upper bound on the decompressed records section decoded by [`decode_records`].
pub const MAX_DECOMPRESSED_BYTES: usize = 256 << 20;

const PARTITION_LEADER_EPOCH_OFF: usize = 12;
const MAGIC_OFF: usize = 16;
const CRC_OFF: usize = 17;
const ATTRIBUTES_OFF: usize = 21;
const LAST_OFFSET_DELTA_OFF: usize = 23;
const BASE_TIMESTAMP_OFF: usize = 27;
const MAX_TIMESTAMP_OFF: usize = 35;
const PRODUCER_ID_OFF: usize = 43;
const PRODUCER_EPOCH_OFF: usize = 51;
const BASE_SEQUENCE_OFF: usize = 53;
const RECORD_COUNT_OFF: usize = 57;

pub const COMPRESSION_MASK: i16 = 0x07;
pub const TIMESTAMP_TYPE_FLAG: i16 = 0x08;
pub const TRANSACTIONAL_FLAG: i16 = 0x10;
pub const CONTROL_FLAG: i16 = 0x20;

/// A parsed batch header. `position` is where the batch starts in the buffer
/// or file it was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub position: u64,
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

#[inline]
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
#[inline]
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
#[inline]
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

impl BatchHeader {
    /// Parses the header at the start of `buf` without any validation.
    /// Returns `None` when `buf` is shorter than [`HEADER_SIZE`].
    pub fn parse(buf: &[u8], position: u64) -> Option<BatchHeader> {
        if buf.len() < HEADER_SIZE {
            return None;
        }
        Some(BatchHeader {
            position,
            base_offset: be_i64(buf, 0),
            batch_length: be_i32(buf, 8),
            partition_leader_epoch: be_i32(buf, PARTITION_LEADER_EPOCH_OFF),
            magic: buf[MAGIC_OFF] as i8,
            crc: be_i32(buf, CRC_OFF) as u32,
            attributes: be_i16(buf, ATTRIBUTES_OFF),
            last_offset_delta: be_i32(buf, LAST_OFFSET_DELTA_OFF),
            base_timestamp: be_i64(buf, BASE_TIMESTAMP_OFF),
            max_timestamp: be_i64(buf, MAX_TIMESTAMP_OFF),
            producer_id: be_i64(buf, PRODUCER_ID_OFF),
            producer_epoch: be_i16(buf, PRODUCER_EPOCH_OFF),
            base_sequence: be_i32(buf, BASE_SEQUENCE_OFF),
            record_count: be_i32(buf, RECORD_COUNT_OFF),
        })
    }

    /// Bytes occupied by the whole batch (12 + batchLength).
    #[inline]
    pub fn total_size(&self) -> usize {
        LOG_OVERHEAD + self.batch_length.max(0) as usize
    }

    #[inline]
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }

    #[inline]
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    /// Codec, or `None` for an unassigned codec id.
    pub fn compression(&self) -> Option<Compression> {
        Compression::from_attributes(self.attributes)
    }

    pub fn is_log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_FLAG != 0
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG != 0
    }
}

/// Why a batch was rejected. `position` is the batch's start in the buffer/file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// Bad CRC, impossible length, or the buffer ends mid-batch.
    #[error("corrupt record batch at position {position}: {reason}")]
    Corrupt { position: u64, reason: String },
    /// One batch is larger than the allowed maximum.
    #[error("record batch at position {position} is {size} bytes, more than the maximum {max}")]
    TooLarge {
        position: u64,
        size: usize,
        max: usize,
    },
    /// Magic byte other than 2.
    #[error("unsupported record batch magic {magic} at position {position}")]
    UnsupportedMagic { position: u64, magic: i8 },
    /// Structurally sound and CRC-valid, but the contents are not acceptable.
    #[error("invalid record batch at position {position}: {reason}")]
    InvalidRecord { position: u64, reason: String },
}

impl BatchError {
    pub(crate) fn corrupt(position: u64, reason: impl Into<String>) -> Self {
        BatchError::Corrupt {
            position,
            reason: reason.into(),
        }
    }
    pub(crate) fn invalid(position: u64, reason: impl Into<String>) -> Self {
        BatchError::InvalidRecord {
            position,
            reason: reason.into(),
        }
    }
}

/// Parses and structurally checks a batch header.
///
/// `head` holds the first `min(HEADER_SIZE, available)` bytes of the batch and
/// `available` is how many bytes exist from the batch start to the end of the
/// buffer or file. Checks: enough bytes for the length field, magic == 2,
/// batchLength covers at least the header, and the whole batch is present.
/// The CRC is not checked (see [`verify_crc`]).
pub fn parse_header_checked(
    head: &[u8],
    position: u64,
    available: u64,
) -> Result<BatchHeader, BatchError> {
    if available < LOG_OVERHEAD as u64 || head.len() < LOG_OVERHEAD {
        return Err(BatchError::corrupt(
            position,
            format!("truncated: only {available} bytes left"),
        ));
    }
    if head.len() > MAGIC_OFF && head[MAGIC_OFF] as i8 != MAGIC_V2 {
        return Err(BatchError::UnsupportedMagic {
            position,
            magic: head[MAGIC_OFF] as i8,
        });
    }
    let batch_length = be_i32(head, 8);
    if batch_length < (HEADER_SIZE - LOG_OVERHEAD) as i32 {
        return Err(BatchError::corrupt(
            position,
            format!("batch length {batch_length} is smaller than the batch header"),
        ));
    }
    let total = LOG_OVERHEAD as u64 + batch_length as u64;
    if total > available {
        return Err(BatchError::corrupt(
            position,
            format!("truncated: batch needs {total} bytes, only {available} left"),
        ));
    }
    // total >= HEADER_SIZE and total <= available, so a well-formed caller has
    // given us the whole header.
    BatchHeader::parse(head, position)
        .ok_or_else(|| BatchError::corrupt(position, "header not fully supplied"))
}

/// Iterator over the batches of a buffer, yielding structurally checked headers
/// (no CRC check). After the first error it yields nothing more.
pub struct BatchIter<'a> {
    buf: &'a [u8],
    pos: usize,
    failed: bool,
}

impl<'a> BatchIter<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        BatchIter {
            buf,
            pos: 0,
            failed: false,
        }
    }

    /// Position of the next batch (== bytes consumed so far).
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl Iterator for BatchIter<'_> {
    type Item = Result<BatchHeader, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.pos..];
        let head = &rest[..rest.len().min(HEADER_SIZE)];
        match parse_header_checked(head, self.pos as u64, rest.len() as u64) {
            Ok(h) => {
                self.pos += h.total_size();
                Some(Ok(h))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Iterates the batches of `buf`.
pub fn batches(buf: &[u8]) -> BatchIter<'_> {
    BatchIter::new(buf)
}

/// CRC-32C of a batch as it should be stored at bytes 17..21.
#[inline]
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[ATTRIBUTES_OFF..])
}

/// Whether the stored CRC of `batch` (exactly one whole batch) matches.
#[inline]
pub fn verify_crc(batch: &[u8]) -> bool {
    batch.len() >= HEADER_SIZE && be_i32(batch, CRC_OFF) as u32 == compute_crc(batch)
}

/// Checks a produced record set before it is appended: every batch is whole,
/// magic 2, no bigger than `max_batch_bytes`, CRC-valid, has a known codec and
/// a consistent record count (`recordCount == lastOffsetDelta + 1 > 0`).
/// Returns the headers (positions relative to `buf`). An empty buffer is an
/// `InvalidRecord` error.
///
/// Records inside the batches are not decoded.
pub fn validate_for_append(
    buf: &[u8],
    max_batch_bytes: usize,
) -> Result<Vec<BatchHeader>, BatchError> {
    validate(buf, max_batch_bytes, true)
}

/// [`validate_for_append`] for batches copied from a leader's log as they are: a batch the
/// log cleaner rebuilt keeps its offsets, so its records' offset deltas may have gaps and it
/// may hold fewer records than its offset range, or none at all (a producer's last batch kept
/// for its state, Kafka's empty batch).
pub fn validate_replicated(buf: &[u8]) -> Result<Vec<BatchHeader>, BatchError> {
    validate(buf, usize::MAX, false)
}

fn validate(
    buf: &[u8],
    max_batch_bytes: usize,
    as_produced: bool,
) -> Result<Vec<BatchHeader>, BatchError> {
    if buf.is_empty() {
        return Err(BatchError::invalid(0, "empty record set"));
    }
    let mut out = Vec::with_capacity(1);
    for h in batches(buf) {
        let h = h?;
        let size = h.total_size();
        if size > max_batch_bytes {
            return Err(BatchError::TooLarge {
                position: h.position,
                size,
                max: max_batch_bytes,
            });
        }
        let start = h.position as usize;
        if !verify_crc(&buf[start..start + size]) {
            return Err(BatchError::corrupt(h.position, "CRC mismatch"));
        }
        if h.compression().is_none() {
            return Err(BatchError::invalid(
                h.position,
                format!(
                    "unknown compression codec id {}",
                    h.attributes & COMPRESSION_MASK
                ),
            ));
        }
        if h.record_count < 0 || (as_produced && h.record_count == 0) {
            return Err(BatchError::invalid(
                h.position,
                format!("batch has {} records", h.record_count),
            ));
        }
        let counted = h.record_count as i64;
        let range = h.last_offset_delta as i64 + 1;
        if h.last_offset_delta < 0 || counted > range || (as_produced && counted != range) {
            return Err(BatchError::invalid(
                h.position,
                format!(
                    "record count {} does not match last offset delta {}",
                    h.record_count, h.last_offset_delta
                ),
            ));
        }
        walk_records_as(
            &buf[start..start + size],
            h.position,
            as_produced,
            |_, _| {},
        )?;
        out.push(h);
    }
    Ok(out)
}

/// Sets baseOffset (bytes 0..8). Not covered by the CRC.
#[inline]
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Sets partitionLeaderEpoch (bytes 12..16). Not covered by the CRC.
#[inline]
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[PARTITION_LEADER_EPOCH_OFF..PARTITION_LEADER_EPOCH_OFF + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// Marks the batch as LogAppendTime with `timestamp` as maxTimestamp and
/// recomputes the CRC. `batch` must be exactly one whole batch. Returns the new CRC.
pub fn set_log_append_time(batch: &mut [u8], timestamp: i64) -> u32 {
    let attributes = be_i16(batch, ATTRIBUTES_OFF) | TIMESTAMP_TYPE_FLAG;
    batch[ATTRIBUTES_OFF..ATTRIBUTES_OFF + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP_OFF..MAX_TIMESTAMP_OFF + 8].copy_from_slice(&timestamp.to_be_bytes());
    let crc = compute_crc(batch);
    batch[CRC_OFF..CRC_OFF + 4].copy_from_slice(&crc.to_be_bytes());
    crc
}

/// The header fields of a batch built here (base offset 0 and leader epoch -1 until the log
/// patches them at append).
#[derive(Debug, Clone, Copy)]
pub struct NewBatch {
    pub attributes: i16,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

/// A whole v2 batch around an encoded records section (offset deltas 0..record_count), with
/// its CRC.
pub fn build_batch(h: &NewBatch, records: &[u8]) -> Vec<u8> {
    build_batch_at(h, records, (0, -1, h.record_count - 1))
}

/// [`build_batch`] with its place in a log: `(base offset, partition leader epoch, last
/// offset delta)` (a batch the log cleaner rebuilt keeps its offsets, so its last offset
/// delta need not be its record count less one).
pub fn build_batch_at(
    h: &NewBatch,
    records: &[u8],
    (base, epoch, last_delta): (i64, i32, i32),
) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER_SIZE + records.len());
    b.extend_from_slice(&base.to_be_bytes());
    b.extend_from_slice(&((HEADER_SIZE - LOG_OVERHEAD + records.len()) as i32).to_be_bytes());
    b.extend_from_slice(&epoch.to_be_bytes());
    b.push(MAGIC_V2 as u8);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&h.attributes.to_be_bytes());
    b.extend_from_slice(&last_delta.to_be_bytes());
    b.extend_from_slice(&h.base_timestamp.to_be_bytes());
    b.extend_from_slice(&h.max_timestamp.to_be_bytes());
    b.extend_from_slice(&h.producer_id.to_be_bytes());
    b.extend_from_slice(&h.producer_epoch.to_be_bytes());
    b.extend_from_slice(&h.base_sequence.to_be_bytes());
    b.extend_from_slice(&h.record_count.to_be_bytes());
    b.extend_from_slice(records);
    let crc = compute_crc(&b);
    b[CRC_OFF..CRC_OFF + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

/// Offset and timestamp of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordInfo {
    pub offset: i64,
    pub timestamp: i64,
}

/// Appends `v` as a zigzag varint (records' lengths, deltas and field sizes).
pub fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        if z < 0x80 {
            out.push(z as u8);
            return;
        }
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
}

/// Zigzag varint cursor over a byte slice.
pub(crate) struct Cursor<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn varlong(&mut self, max_bytes: usize) -> Option<i64> {
        let mut value: u64 = 0;
        for i in 0..max_bytes {
            let b = *self.buf.get(self.pos)?;
            self.pos += 1;
            value |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Some(((value >> 1) as i64) ^ -((value & 1) as i64));
            }
        }
        None
    }
    pub(crate) fn varint(&mut self) -> Option<i32> {
        let v = self.varlong(5)?;
        i32::try_from(v).ok()
    }
    /// Moves past `n` bytes if they are there.
    fn advance(&mut self, n: usize) -> bool {
        if n > self.buf.len() - self.pos {
            return false;
        }
        self.pos += n;
        true
    }
    /// Skips a varint-length-prefixed byte field (-1 = null).
    fn skip_bytes_field(&mut self) -> Option<()> {
        self.bytes_field().map(|_| ())
    }
    /// Reads a varint-length-prefixed byte field: `Some(None)` for null (-1).
    pub(crate) fn bytes_field(&mut self) -> Option<Option<&'a [u8]>> {
        let len = self.varint()?;
        if len < -1 {
            return None;
        }
        if len <= 0 {
            return Some((len == 0).then_some(&[][..]));
        }
        let start = self.pos;
        if !self.advance(len as usize) {
            return None;
        }
        Some(Some(&self.buf[start..self.pos]))
    }
}

/// Walks every record of one whole batch (header included), decompressing if
/// needed, and checks its structure as Kafka's validator does: each record's
/// length, attributes, timestamp and offset deltas, key, value and headers lie
/// inside the record; offset deltas run 0, 1, 2, ...; exactly `recordCount`
/// records fill the (decompressed) payload. `visit(offset_delta, timestamp_delta)`
/// sees each record. Errors carry `position` (the batch's place in its buffer).
pub fn walk_records(
    batch: &[u8],
    position: u64,
    visit: impl FnMut(i32, i64),
) -> Result<(), BatchError> {
    walk_records_as(batch, position, false, visit)
}

/// [`walk_records`]; with `as_produced` the offset deltas must run 0, 1, 2, ... (a
/// producer's batch), otherwise they only increase within the batch's offset range (a batch
/// the log cleaner rebuilt keeps its records' offsets).
pub fn walk_records_as(
    batch: &[u8],
    position: u64,
    as_produced: bool,
    mut visit: impl FnMut(i32, i64),
) -> Result<(), BatchError> {
    let h = parse_header_checked(
        &batch[..batch.len().min(HEADER_SIZE)],
        position,
        batch.len() as u64,
    )?;
    let batch = &batch[..h.total_size()];
    let codec = h
        .compression()
        .ok_or_else(|| BatchError::invalid(position, "unknown compression codec"))?;
    let payload = &batch[HEADER_SIZE..];
    let decompressed;
    let records: &[u8] = if codec == Compression::None {
        payload
    } else {
        decompressed = compression::decompress(codec, payload, MAX_DECOMPRESSED_BYTES)
            .map_err(|e| BatchError::corrupt(position, e.to_string()))?;
        &decompressed
    };
    let count = h.record_count.max(0) as usize;
    let mut cur = Cursor {
        buf: records,
        pos: 0,
    };
    let mut min_delta = 0i32;
    for i in 0..count {
        let bad = || BatchError::corrupt(position, format!("record {i} is corrupt"));
        let len = cur.varint().ok_or_else(bad)?;
        if len < 0 || len as usize > records.len() - cur.pos {
            return Err(bad());
        }
        let end = cur.pos + len as usize;
        let mut rec = Cursor {
            buf: &records[..end],
            pos: cur.pos,
        };
        rec.pos += 1; // attributes
        if rec.pos > end {
            return Err(bad());
        }
        let ts_delta = rec.varlong(10).ok_or_else(bad)?;
        let offset_delta = rec.varint().ok_or_else(bad)?;
        let in_order = if as_produced {
            offset_delta == i as i32
        } else {
            offset_delta >= min_delta && offset_delta <= h.last_offset_delta
        };
        min_delta = offset_delta.saturating_add(1);
        if !in_order {
            return Err(BatchError::invalid(
                position,
                format!("record {i} has offset delta {offset_delta}"),
            ));
        }
        rec.skip_bytes_field().ok_or_else(bad)?; // key
        rec.skip_bytes_field().ok_or_else(bad)?; // value
        let headers = rec.varint().ok_or_else(bad)?;
        if headers < 0 {
            return Err(bad());
        }
        for _ in 0..headers {
            let key_len = rec.varint().ok_or_else(bad)?;
            if key_len < 0 || !rec.advance(key_len as usize) {
                return Err(bad());
            }
            rec.skip_bytes_field().ok_or_else(bad)?;
        }
        if rec.pos != end {
            return Err(bad());
        }
        visit(offset_delta, ts_delta);
        cur.pos = end;
    }
    if cur.pos != records.len() {
        return Err(BatchError::corrupt(
            position,
            format!(
                "{} bytes after the last of {count} records",
                records.len() - cur.pos
            ),
        ));
    }
    Ok(())
}

/// Decodes `(offset, timestamp)` of every record of one whole batch
/// (header included), decompressing if needed. For LogAppendTime batches every
/// record carries the batch maxTimestamp, as Kafka defines it.
pub fn decode_records(batch: &[u8]) -> Result<Vec<RecordInfo>, BatchError> {
    let h = parse_header_checked(
        &batch[..batch.len().min(HEADER_SIZE)],
        0,
        batch.len() as u64,
    )?;
    let log_append = h.is_log_append_time();
    let mut out = Vec::with_capacity((h.record_count.max(0) as usize).min(4096));
    walk_records(batch, 0, |offset_delta, ts_delta| {
        out.push(RecordInfo {
            offset: h.base_offset + offset_delta as i64,
            timestamp: if log_append {
                h.max_timestamp
            } else {
                h.base_timestamp.wrapping_add(ts_delta)
            },
        })
    })?;
    Ok(out)
}

/// Builders of real v2 batches for tests.
#[cfg(test)]
#[path = "batch_test_support.rs"]
pub(crate) mod test_support;

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
