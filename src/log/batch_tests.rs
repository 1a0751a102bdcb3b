//! Tests of batch parsing and validation.

use super::test_support::*;
use super::*;

/// Replaces the records part of `batch` and fixes length and CRC, so only the
/// record-level checks can catch it.
fn with_records(batch: &[u8], records: &[u8]) -> Vec<u8> {
    let mut b = batch[..HEADER_SIZE].to_vec();
    b.extend_from_slice(records);
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

#[test]
fn record_level_validation_rejects_bad_records_with_valid_crc() {
    let good = simple_batch(3, 1000, 10);
    assert!(validate_for_append(&good, 1 << 20).is_ok());
    let records = &good[HEADER_SIZE..];
    // Random bytes.
    let garbage: Vec<u8> = (0..records.len()).map(|i| (i * 37 + 11) as u8).collect();
    let e = validate_for_append(&with_records(&good, &garbage), 1 << 20).unwrap_err();
    assert!(matches!(
        e,
        BatchError::Corrupt { .. } | BatchError::InvalidRecord { .. }
    ));
    // Trailing bytes after the last record.
    let mut extra = records.to_vec();
    extra.extend_from_slice(&[0, 0, 0]);
    let e = validate_for_append(&with_records(&good, &extra), 1 << 20).unwrap_err();
    assert!(matches!(e, BatchError::Corrupt { .. }), "{e}");
    // Too few records for the count.
    let first_len = records[0] as usize / 2 + 1; // zigzag varint, small record
    let short = records[..first_len].to_vec();
    let e = validate_for_append(&with_records(&good, &short), 1 << 20).unwrap_err();
    assert!(matches!(e, BatchError::Corrupt { .. }), "{e}");
}

#[test]
fn parse_and_iterate() {
    let mut buf = simple_batch(3, 1000, 10);
    buf.extend(simple_batch(1, 2000, 5));
    let hs: Vec<_> = batches(&buf).collect::<Result<_, _>>().unwrap();
    assert_eq!(hs.len(), 2);
    assert_eq!(hs[0].record_count, 3);
    assert_eq!(hs[0].last_offset_delta, 2);
    assert_eq!(hs[0].magic, 2);
    assert_eq!(hs[0].max_timestamp, 1000);
    assert_eq!(hs[1].position as usize, hs[0].total_size());
    assert_eq!(hs[0].total_size() + hs[1].total_size(), buf.len());
    assert_eq!(validate_for_append(&buf, 1 << 20).unwrap(), hs);
}

#[test]
fn validation_errors() {
    let good = simple_batch(3, 1000, 10);
    assert!(matches!(
        validate_for_append(&[], 100),
        Err(BatchError::InvalidRecord { .. })
    ));
    // truncated
    let r = validate_for_append(&good[..good.len() - 1], 1 << 20);
    assert!(matches!(r, Err(BatchError::Corrupt { .. })), "{r:?}");
    let r = validate_for_append(&good[..10], 1 << 20);
    assert!(matches!(r, Err(BatchError::Corrupt { .. })), "{r:?}");
    // trailing garbage after a good batch
    let mut two = good.clone();
    two.extend_from_slice(&[0u8; 5]);
    assert!(matches!(
        validate_for_append(&two, 1 << 20),
        Err(BatchError::Corrupt { position, .. }) if position as usize == good.len()
    ));
    // bad crc
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 1] ^= 0xff;
    assert!(matches!(
        validate_for_append(&bad, 1 << 20),
        Err(BatchError::Corrupt { .. })
    ));
    // bad length
    let mut bad = good.clone();
    bad[8..12].copy_from_slice(&10i32.to_be_bytes());
    assert!(matches!(
        validate_for_append(&bad, 1 << 20),
        Err(BatchError::Corrupt { .. })
    ));
    // magic
    let mut bad = good.clone();
    bad[16] = 1;
    assert!(matches!(
        validate_for_append(&bad, 1 << 20),
        Err(BatchError::UnsupportedMagic { magic: 1, .. })
    ));
    // too large
    assert!(matches!(
        validate_for_append(&good, good.len() - 1),
        Err(BatchError::TooLarge { .. })
    ));
    assert!(validate_for_append(&good, good.len()).is_ok());
    // inconsistent count (CRC recomputed so only the count is wrong)
    let mut bad = good.clone();
    bad[57..61].copy_from_slice(&5i32.to_be_bytes());
    let crc = compute_crc(&bad);
    bad[17..21].copy_from_slice(&crc.to_be_bytes());
    assert!(matches!(
        validate_for_append(&bad, 1 << 20),
        Err(BatchError::InvalidRecord { .. })
    ));
    // zero records
    let mut bad = good.clone();
    bad[57..61].copy_from_slice(&0i32.to_be_bytes());
    bad[23..27].copy_from_slice(&(-1i32).to_be_bytes());
    let crc = compute_crc(&bad);
    bad[17..21].copy_from_slice(&crc.to_be_bytes());
    assert!(matches!(
        validate_for_append(&bad, 1 << 20),
        Err(BatchError::InvalidRecord { .. })
    ));
    // unknown codec
    let mut bad = good;
    bad[22] |= 7;
    let crc = compute_crc(&bad);
    bad[17..21].copy_from_slice(&crc.to_be_bytes());
    assert!(matches!(
        validate_for_append(&bad, 1 << 20),
        Err(BatchError::InvalidRecord { .. })
    ));
}

#[test]
fn patching() {
    let mut b = simple_batch(2, 1000, 3);
    set_base_offset(&mut b, 42);
    set_partition_leader_epoch(&mut b, 7);
    assert!(verify_crc(&b), "offset/epoch are outside the CRC");
    let h = BatchHeader::parse(&b, 0).unwrap();
    assert_eq!(
        (h.base_offset, h.partition_leader_epoch, h.last_offset()),
        (42, 7, 43)
    );
    assert!(!h.is_log_append_time());
    let crc = set_log_append_time(&mut b, 5555);
    assert!(verify_crc(&b));
    let h = BatchHeader::parse(&b, 0).unwrap();
    assert!(h.is_log_append_time());
    assert_eq!((h.max_timestamp, h.crc), (5555, crc));
    let recs = decode_records(&b).unwrap();
    assert!(recs.iter().all(|r| r.timestamp == 5555));
    assert_eq!(
        recs.iter().map(|r| r.offset).collect::<Vec<_>>(),
        vec![42, 43]
    );
}

fn check_decode(codec: Compression) {
    let ts = [500, 900, 700, 1200, 300];
    let mut b = batch_with(codec, &ts, 100);
    set_base_offset(&mut b, 10);
    assert!(validate_for_append(&b, 1 << 20).is_ok());
    let h = BatchHeader::parse(&b, 0).unwrap();
    assert_eq!(h.compression(), Some(codec));
    let recs = decode_records(&b).unwrap();
    let got: Vec<_> = recs.iter().map(|r| (r.offset, r.timestamp)).collect();
    assert_eq!(
        got,
        vec![(10, 500), (11, 900), (12, 700), (13, 1200), (14, 300)]
    );
}

#[test]
fn decode_all_codecs() {
    check_decode(Compression::None);
    check_decode(Compression::Gzip);
    check_decode(Compression::Snappy);
    check_decode(Compression::Lz4);
    let z = zstd_batch();
    assert_eq!(
        compression::decompress(Compression::Zstd, ZSTD_RECORDS, 1 << 20).unwrap(),
        zstd_source_records(),
        "the embedded zstd frame must match the helper's records"
    );
    assert!(validate_for_append(&z, 1 << 20).is_ok());
    let got: Vec<_> = decode_records(&z)
        .unwrap()
        .iter()
        .map(|r| r.timestamp)
        .collect();
    assert_eq!(got, ZSTD_BATCH_TIMESTAMPS.to_vec());
}

#[test]
fn decode_rejects_garbage() {
    let mut b = batch_with(Compression::Gzip, &[1, 2, 3], 10);
    let n = b.len();
    b[n - 12] ^= 0x55; // damage the gzip stream (CRC is not checked by decode)
    assert!(decode_records(&b).is_err());
    let mut b = simple_batch(3, 1, 10);
    let n = b.len();
    b.truncate(n - 20);
    assert!(decode_records(&b).is_err());
}
