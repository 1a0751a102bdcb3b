//! Builders of real v2 batches for tests.

pub use super::put_varlong;
use super::*;
use crate::log::compression::compress;

/// One record to encode: (timestamp delta, value).
pub struct Rec<'a> {
    pub ts_delta: i64,
    pub value: &'a [u8],
}

/// Uncompressed records section; offset deltas are 0..n.
pub fn encode_records(recs: &[Rec<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        let mut body = vec![0u8];
        put_varlong(&mut body, r.ts_delta);
        put_varlong(&mut body, i as i64);
        put_varlong(&mut body, -1); // null key
        put_varlong(&mut body, r.value.len() as i64);
        body.extend_from_slice(r.value);
        put_varlong(&mut body, 0); // no headers
        put_varlong(&mut out, body.len() as i64);
        out.extend_from_slice(&body);
    }
    out
}

/// A record for [`keyed_batch`]: `(key, value, timestamp delta)`, None = null.
pub type KeyedRec<'a> = (Option<&'a [u8]>, Option<&'a [u8]>, i64);

/// An uncompressed batch of keyed records `(key, value, timestamp delta)` (None = null),
/// stamped from `base_ts`, with the producer fields given (-1 for none).
pub fn keyed_batch(recs: &[KeyedRec<'_>], base_ts: i64, producer: (i64, i16, i32)) -> Vec<u8> {
    keyed_batch_with(Compression::None, recs, base_ts, producer)
}

/// [`keyed_batch`] with its records section compressed with `codec`.
pub fn keyed_batch_with(
    codec: Compression,
    recs: &[KeyedRec<'_>],
    base_ts: i64,
    producer: (i64, i16, i32),
) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, (k, v, ts)) in recs.iter().enumerate() {
        let mut body = vec![0u8];
        put_varlong(&mut body, *ts);
        put_varlong(&mut body, i as i64);
        for f in [k, v] {
            match f {
                Some(b) => {
                    put_varlong(&mut body, b.len() as i64);
                    body.extend_from_slice(b);
                }
                None => put_varlong(&mut body, -1),
            }
        }
        put_varlong(&mut body, 0);
        put_varlong(&mut out, body.len() as i64);
        out.extend_from_slice(&body);
    }
    let max_ts = base_ts + recs.iter().map(|r| r.2).max().unwrap_or(0);
    build_batch(
        &NewBatch {
            attributes: codec.id() as i16,
            base_timestamp: base_ts,
            max_timestamp: max_ts,
            producer_id: producer.0,
            producer_epoch: producer.1,
            base_sequence: producer.2,
            record_count: recs.len() as i32,
        },
        &compress(codec, &out),
    )
}

/// Assembles a batch around an already encoded (maybe compressed) records section.
pub fn assemble(
    codec: Compression,
    base_ts: i64,
    max_ts: i64,
    count: i32,
    payload: &[u8],
) -> Vec<u8> {
    build_batch(
        &NewBatch {
            attributes: codec.id() as i16,
            base_timestamp: base_ts,
            max_timestamp: max_ts,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            record_count: count,
        },
        payload,
    )
}

/// A batch whose records have the given timestamps (absolute) and values.
pub fn batch_with(codec: Compression, timestamps: &[i64], value_len: usize) -> Vec<u8> {
    let base_ts = timestamps[0];
    let value = vec![b'v'; value_len];
    let recs: Vec<Rec<'_>> = timestamps
        .iter()
        .map(|&t| Rec {
            ts_delta: t - base_ts,
            value: &value,
        })
        .collect();
    let raw = encode_records(&recs);
    let max_ts = *timestamps.iter().max().unwrap();
    assemble(
        codec,
        base_ts,
        max_ts,
        timestamps.len() as i32,
        &compress(codec, &raw),
    )
}

/// Uncompressed batch of `n` records, all stamped `ts`, with `value_len`-byte values.
pub fn simple_batch(n: usize, ts: i64, value_len: usize) -> Vec<u8> {
    batch_with(Compression::None, &vec![ts; n], value_len)
}

/// [`simple_batch`] of `n` records from producer `pid`/`epoch` starting at sequence `seq`.
pub fn idempotent_batch(n: usize, pid: i64, epoch: i16, seq: i32) -> Vec<u8> {
    let mut b = simple_batch(n, 1_000, 10);
    b[43..51].copy_from_slice(&pid.to_be_bytes());
    b[51..53].copy_from_slice(&epoch.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    let crc = compute_crc(&b);
    b[CRC_OFF..CRC_OFF + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

/// [`idempotent_batch`] with the transactional attribute.
pub fn transactional_batch(n: usize, pid: i64, epoch: i16, seq: i32) -> Vec<u8> {
    let mut b = idempotent_batch(n, pid, epoch, seq);
    let attributes = be_i16(&b, ATTRIBUTES_OFF) | TRANSACTIONAL_FLAG;
    b[ATTRIBUTES_OFF..ATTRIBUTES_OFF + 2].copy_from_slice(&attributes.to_be_bytes());
    let crc = compute_crc(&b);
    b[CRC_OFF..CRC_OFF + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

/// Records section of [`ZSTD_BATCH_TIMESTAMPS`] (value "zz" each), as compressed
/// into [`ZSTD_RECORDS`].
pub fn zstd_source_records() -> Vec<u8> {
    let base = ZSTD_BATCH_TIMESTAMPS[0];
    let recs: Vec<Rec<'_>> = ZSTD_BATCH_TIMESTAMPS
        .iter()
        .map(|&t| Rec {
            ts_delta: t - base,
            value: b"zz",
        })
        .collect();
    encode_records(&recs)
}

pub const ZSTD_BATCH_TIMESTAMPS: [i64; 4] = [1_000, 1_300, 1_100, 1_500];

/// `zstd_source_records()` written to a file and compressed with the Debian
/// zstd CLI v1.5.4: `zstd -19 -c records.bin | xxd -i`.
pub const ZSTD_RECORDS: &[u8] = &[
    0x28, 0xb5, 0x2f, 0xfd, 0x24, 0x27, 0x0d, 0x01, 0x00, 0xc8, 0x10, 0x00, 0x00, 0x00, 0x01, 0x04,
    0x7a, 0x7a, 0x00, 0x12, 0x00, 0xd8, 0x04, 0x02, 0xc8, 0x01, 0x04, 0xe8, 0x07, 0x06, 0x01, 0x04,
    0x7a, 0x7a, 0x00, 0x02, 0x00, 0x20, 0x0f, 0xcd, 0x8a, 0x12, 0x93, 0xa2, 0x35, 0xa8,
];

/// A zstd-compressed batch of 4 records with [`ZSTD_BATCH_TIMESTAMPS`].
pub fn zstd_batch() -> Vec<u8> {
    let ts = ZSTD_BATCH_TIMESTAMPS;
    assemble(
        Compression::Zstd,
        ts[0],
        1_500,
        ts.len() as i32,
        ZSTD_RECORDS,
    )
}
