//! The records of a batch as the cleaner needs them (offset, timestamp, key, whether it has a
//! value), and batches rebuilt from the records a cleaning keeps: the original base offset,
//! partition leader epoch, producer id, epoch and base sequence, the records' own offsets
//! and timestamps, and a new CRC (Kafka's `MemoryRecords.filterTo`).

use std::borrow::Cow;

use crate::log::batch::{
    self, BatchError, BatchHeader, COMPRESSION_MASK, Cursor, HEADER_SIZE, MAX_DECOMPRESSED_BYTES,
    NewBatch,
};
use crate::log::compression::{self, Compression};

/// Kafka's attribute bit saying the batch's base timestamp is its delete horizon (KIP-534).
pub const DELETE_HORIZON_FLAG: i16 = 0x40;

/// The delete horizon a cleaning set on the batch, if any.
pub fn delete_horizon(h: &BatchHeader) -> Option<i64> {
    (h.attributes & DELETE_HORIZON_FLAG != 0).then_some(h.base_timestamp)
}

/// One record of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub offset: i64,
    pub timestamp: i64,
    pub attributes: u8,
    pub key: Option<&'a [u8]>,
    pub has_value: bool,
    /// The encoded key, value and headers, as they are in the batch.
    pub tail: &'a [u8],
}

/// The records section of a whole batch, decompressed.
pub fn payload<'a>(batch: &'a [u8], h: &BatchHeader) -> Result<Cow<'a, [u8]>, BatchError> {
    let body = &batch[HEADER_SIZE..h.total_size()];
    match h.compression() {
        Some(Compression::None) => Ok(Cow::Borrowed(body)),
        Some(codec) => compression::decompress(codec, body, MAX_DECOMPRESSED_BYTES)
            .map(Cow::Owned)
            .map_err(|e| BatchError::corrupt(h.position, e.to_string())),
        None => Err(BatchError::invalid(h.position, "unknown compression codec")),
    }
}

/// The records of `payload` (what [`payload`] gave for the batch `h`).
pub fn parse<'a>(h: &BatchHeader, payload: &'a [u8]) -> Result<Vec<Record<'a>>, BatchError> {
    let bad = |i: usize| BatchError::corrupt(h.position, format!("record {i} is corrupt"));
    let count = h.record_count.max(0) as usize;
    let mut out = Vec::with_capacity(count.min(payload.len()));
    let mut cur = Cursor {
        buf: payload,
        pos: 0,
    };
    for i in 0..count {
        let len = cur.varint().ok_or_else(|| bad(i))?;
        if len < 1 || len as usize > payload.len() - cur.pos {
            return Err(bad(i));
        }
        let end = cur.pos + len as usize;
        let mut rec = Cursor {
            buf: &payload[..end],
            pos: cur.pos,
        };
        let attributes = payload[rec.pos];
        rec.pos += 1;
        let ts_delta = rec.varlong(10).ok_or_else(|| bad(i))?;
        let offset_delta = rec.varint().ok_or_else(|| bad(i))?;
        let tail_start = rec.pos;
        let key = rec.bytes_field().ok_or_else(|| bad(i))?;
        let value = rec.bytes_field().ok_or_else(|| bad(i))?;
        out.push(Record {
            offset: h.base_offset + offset_delta as i64,
            timestamp: if h.is_log_append_time() {
                h.max_timestamp
            } else {
                h.base_timestamp.wrapping_add(ts_delta)
            },
            attributes,
            key,
            has_value: value.is_some(),
            tail: &payload[tail_start..end],
        });
        cur.pos = end;
    }
    Ok(out)
}

/// For a record set produced to a compacted topic: the indexes (within their batch) of the
/// records without a key in the first data batch holding any, as Kafka's `LogValidator`
/// refuses them. A batch that does not parse is left to the append's own validation.
pub fn keyless_records(buf: &[u8]) -> Option<Vec<i32>> {
    for h in batch::batches(buf) {
        let Ok(h) = h else {
            return None;
        };
        if h.is_control() {
            continue;
        }
        let start = h.position as usize;
        let bytes = &buf[start..start + h.total_size()];
        let Ok(p) = payload(bytes, &h) else {
            return None;
        };
        let Ok(recs) = parse(&h, &p) else {
            return None;
        };
        let keyless: Vec<i32> = recs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.key.is_none())
            .map(|(i, _)| i as i32)
            .collect();
        if !keyless.is_empty() {
            return Some(keyless);
        }
    }
    None
}

fn put_varint(out: &mut Vec<u8>, v: i64) {
    batch::put_varlong(out, v)
}

struct Header {
    last_offset_delta: i32,
    attributes: i16,
    base_timestamp: i64,
    max_timestamp: i64,
    record_count: i32,
}

fn assemble(h: &BatchHeader, hd: Header, records: &[u8]) -> Vec<u8> {
    let nb = NewBatch {
        attributes: hd.attributes,
        base_timestamp: hd.base_timestamp,
        max_timestamp: hd.max_timestamp,
        producer_id: h.producer_id,
        producer_epoch: h.producer_epoch,
        base_sequence: h.base_sequence,
        record_count: hd.record_count,
    };
    batch::build_batch_at(
        &nb,
        records,
        (
            h.base_offset,
            h.partition_leader_epoch,
            hd.last_offset_delta,
        ),
    )
}

/// The batch `h` rebuilt with only `kept` (in order, not empty). With `delete_horizon` the
/// base timestamp is the horizon and the delete-horizon attribute is set (record timestamps
/// are kept through their deltas). The records are compressed again with the batch's codec.
pub fn rebuild(h: &BatchHeader, kept: &[Record<'_>], delete_horizon: Option<i64>) -> Vec<u8> {
    let first_ts = kept.first().map_or(-1, |r| r.timestamp);
    let base_timestamp = delete_horizon.unwrap_or(first_ts);
    let mut attributes = h.attributes & !DELETE_HORIZON_FLAG;
    if delete_horizon.is_some() {
        attributes |= DELETE_HORIZON_FLAG;
    }
    let max_timestamp = if h.is_log_append_time() {
        h.max_timestamp
    } else {
        kept.iter().map(|r| r.timestamp).max().unwrap_or(-1)
    };
    let mut body = Vec::new();
    let mut rec = Vec::new();
    for r in kept {
        rec.clear();
        rec.push(r.attributes);
        put_varint(&mut rec, r.timestamp.wrapping_sub(base_timestamp));
        put_varint(&mut rec, r.offset - h.base_offset);
        rec.extend_from_slice(r.tail);
        put_varint(&mut body, rec.len() as i64);
        body.extend_from_slice(&rec);
    }
    let last = kept.last().map_or(h.base_offset, |r| r.offset);
    let body = match h.compression() {
        Some(codec) if codec != Compression::None => compression::compress(codec, &body),
        _ => body,
    };
    assemble(
        h,
        Header {
            last_offset_delta: (last - h.base_offset) as i32,
            attributes,
            base_timestamp,
            max_timestamp,
            record_count: kept.len() as i32,
        },
        &body,
    )
}

/// The batch `h` without any record, kept for its producer's state or as the last batch of
/// the cleaned range (Kafka's `writeEmptyHeader`): same offsets, producer fields and max
/// timestamp, no records.
pub fn empty(h: &BatchHeader) -> Vec<u8> {
    assemble(
        h,
        Header {
            last_offset_delta: h.last_offset_delta,
            attributes: h.attributes & !COMPRESSION_MASK & !DELETE_HORIZON_FLAG,
            base_timestamp: -1,
            max_timestamp: h.max_timestamp,
            record_count: 0,
        },
        &[],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::test_support::{KeyedRec, keyed_batch, keyed_batch_with};

    #[test]
    fn rebuilt_batch_keeps_its_codec() {
        let recs: [KeyedRec<'_>; 3] = [
            (Some(b"a"), Some(b"1"), 0),
            (Some(b"b"), Some(b"2"), 1),
            (Some(b"a"), Some(b"3"), 2),
        ];
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let b = keyed_batch_with(codec, &recs, 5_000, (-1, -1, -1));
            let h = batch::validate_for_append(&b, usize::MAX).unwrap()[0];
            assert_eq!(h.compression(), Some(codec));
            let p = payload(&b, &h).unwrap();
            let all = parse(&h, &p).unwrap();
            let kept = [all[1], all[2]];
            let r = rebuild(&h, &kept, None);
            let nh = batch::validate_replicated(&r).unwrap()[0];
            assert_eq!(nh.compression(), Some(codec), "{codec:?}");
            let p2 = payload(&r, &nh).unwrap();
            assert_eq!(parse(&nh, &p2).unwrap(), kept, "{codec:?}");
        }
    }

    #[test]
    fn rebuilt_batch_keeps_offsets_and_producer_fields() {
        let recs: [KeyedRec<'_>; 3] = [
            (Some(b"a"), Some(b"1"), 0),
            (Some(b"b"), None, 5),
            (Some(b"a"), Some(b"2"), 9),
        ];
        let mut b = keyed_batch(&recs, 1_000, (42, 3, 10));
        batch::set_base_offset(&mut b, 100);
        let h = batch::validate_for_append(&b, usize::MAX).unwrap()[0];
        let p = payload(&b, &h).unwrap();
        let all = parse(&h, &p).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(
            (all[1].offset, all[1].timestamp, all[1].has_value),
            (101, 1_005, false)
        );
        let kept = [all[1], all[2]];
        let r = rebuild(&h, &kept, Some(77_000));
        let nh = batch::validate_replicated(&r).unwrap()[0];
        assert!(batch::verify_crc(&r));
        assert_eq!(
            (nh.base_offset, nh.last_offset(), nh.record_count),
            (100, 102, 2)
        );
        assert_eq!(
            (nh.producer_id, nh.producer_epoch, nh.base_sequence),
            (42, 3, 10)
        );
        assert_eq!(delete_horizon(&nh), Some(77_000));
        let p2 = payload(&r, &nh).unwrap();
        assert_eq!(parse(&nh, &p2).unwrap(), kept);
        assert_eq!(keyless_records(&b), None);
        let unkeyed = keyed_batch(
            &[(Some(b"a"), Some(b"1"), 0), (None, Some(b"2"), 0)],
            0,
            (-1, -1, -1),
        );
        assert_eq!(keyless_records(&unkeyed), Some(vec![1]));
        let e = empty(&h);
        let eh = batch::validate_replicated(&e).unwrap()[0];
        assert_eq!(
            (eh.base_offset, eh.last_offset(), eh.record_count),
            (100, 102, 0)
        );
        assert_eq!(eh.producer_id, 42);
    }
}
