//! Control batches: the transaction markers (end-transaction records) a transaction
//! coordinator has written into a partition to commit or abort a producer's transaction.
//!
//! A marker is a v2 batch with the control (0x20) and transactional (0x10) attributes, the
//! producer's id and epoch, no sequence (-1), uncompressed, CreateTime, and exactly one record:
//! * key: version i16 (0), type i16 (0 = ABORT, 1 = COMMIT; other types, such as the Raft
//!   log's leader-change records, are not transaction markers);
//! * value: version i16 (0), coordinator epoch i32.
//!
//! (Kafka's `ControlRecordType` / `EndTransactionMarker`.) Consumers skip control batches;
//! the producer state and the transaction index are driven by them.

use super::batch::{self, BatchError, CONTROL_FLAG, Cursor, HEADER_SIZE, TRANSACTIONAL_FLAG};
use super::compression::Compression;

/// Control record key and value versions written (newer versions are read as far as known).
const CONTROL_KEY_VERSION: i16 = 0;
const END_TXN_MARKER_VERSION: i16 = 0;
const ABORT: i16 = 0;
const COMMIT: i16 = 1;

/// An end-transaction marker's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnMarker {
    /// COMMIT (true) or ABORT (false).
    pub commit: bool,
    /// The epoch of the transaction coordinator that wrote it (its `__transaction_state`
    /// partition's leader epoch).
    pub coordinator_epoch: i32,
}

/// A marker batch for `producer_id`/`producer_epoch`, stamped `timestamp`; base offset and
/// partition leader epoch are set by the log at append.
pub fn end_txn_batch(
    producer_id: i64,
    producer_epoch: i16,
    marker: EndTxnMarker,
    timestamp: i64,
) -> Vec<u8> {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&CONTROL_KEY_VERSION.to_be_bytes());
    key.extend_from_slice(&(if marker.commit { COMMIT } else { ABORT }).to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&END_TXN_MARKER_VERSION.to_be_bytes());
    value.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());

    let mut body = vec![0u8]; // record attributes
    batch::put_varlong(&mut body, 0); // timestamp delta
    batch::put_varlong(&mut body, 0); // offset delta
    batch::put_varlong(&mut body, key.len() as i64);
    body.extend_from_slice(&key);
    batch::put_varlong(&mut body, value.len() as i64);
    body.extend_from_slice(&value);
    batch::put_varlong(&mut body, 0); // headers
    let mut records = Vec::with_capacity(body.len() + 1);
    batch::put_varlong(&mut records, body.len() as i64);
    records.extend_from_slice(&body);

    batch::build_batch(
        &batch::NewBatch {
            attributes: CONTROL_FLAG | TRANSACTIONAL_FLAG,
            base_timestamp: timestamp,
            max_timestamp: timestamp,
            producer_id,
            producer_epoch,
            base_sequence: -1,
            record_count: 1,
        },
        &records,
    )
}

/// The transaction marker held by one whole control batch (header included). `Ok(None)`:
/// the batch is not a control batch, has no record (its transaction was cleaned away), or its
/// control type is not COMMIT or ABORT. A key or value too short for the fields is corrupt.
pub fn parse_end_txn_marker(batch_bytes: &[u8]) -> Result<Option<EndTxnMarker>, BatchError> {
    let h = batch::parse_header_checked(
        &batch_bytes[..batch_bytes.len().min(HEADER_SIZE)],
        0,
        batch_bytes.len() as u64,
    )?;
    if !h.is_control() || h.record_count <= 0 {
        return Ok(None);
    }
    let corrupt = |reason: &str| BatchError::Corrupt {
        position: 0,
        reason: format!("control record: {reason}"),
    };
    let payload = &batch_bytes[HEADER_SIZE..h.total_size()];
    let decompressed;
    let records: &[u8] = match h.compression() {
        Some(Compression::None) => payload,
        Some(codec) => {
            decompressed = super::compression::decompress(codec, payload, 1 << 20)
                .map_err(|e| corrupt(&e.to_string()))?;
            &decompressed
        }
        None => return Err(corrupt("unknown compression codec")),
    };
    let mut cur = Cursor {
        buf: records,
        pos: 0,
    };
    let fields = (|| {
        let len = cur.varint()?;
        let end = cur.pos.checked_add(usize::try_from(len).ok()?)?;
        if end > records.len() {
            return None;
        }
        cur.pos += 1; // attributes
        cur.varlong(10)?; // timestamp delta
        cur.varint()?; // offset delta
        let key = cur.bytes_field()?;
        let value = cur.bytes_field()?;
        (cur.pos <= end).then_some((key, value))
    })();
    let Some((key, value)) = fields else {
        return Err(corrupt("truncated record"));
    };
    let key = key.ok_or_else(|| corrupt("null key"))?;
    if key.len() < 4 {
        return Err(corrupt("key shorter than 4 bytes"));
    }
    let key_version = i16::from_be_bytes([key[0], key[1]]);
    if key_version < 0 {
        return Err(corrupt("negative key version"));
    }
    let commit = match i16::from_be_bytes([key[2], key[3]]) {
        ABORT => false,
        COMMIT => true,
        _ => return Ok(None),
    };
    let value = value.ok_or_else(|| corrupt("null value"))?;
    if value.len() < 6 || i16::from_be_bytes([value[0], value[1]]) < 0 {
        return Err(corrupt("end transaction marker value is invalid"));
    }
    let coordinator_epoch = i32::from_be_bytes(value[2..6].try_into().unwrap());
    Ok(Some(EndTxnMarker {
        commit,
        coordinator_epoch,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::BatchHeader;
    use crate::log::batch::{test_support::simple_batch, validate_for_append};

    #[test]
    fn marker_round_trip_and_layout() {
        for commit in [true, false] {
            let marker = EndTxnMarker {
                commit,
                coordinator_epoch: 7,
            };
            let b = end_txn_batch(42, 3, marker, 1_700_000_000_000);
            // A valid batch, as the log validates appends.
            let hs = validate_for_append(&b, usize::MAX).unwrap();
            let h = hs[0];
            assert!(h.is_control() && h.is_transactional());
            assert_eq!((h.producer_id, h.producer_epoch), (42, 3));
            assert_eq!((h.base_sequence, h.record_count), (-1, 1));
            assert_eq!(h.max_timestamp, 1_700_000_000_000);
            assert_eq!(parse_end_txn_marker(&b).unwrap(), Some(marker));
            // Kafka's layout: one 16-byte record (length 16, attributes, two zero deltas,
            // key of 4 bytes, value of 6 bytes, no headers).
            assert_eq!(b.len(), HEADER_SIZE + 17);
            let rec = &b[HEADER_SIZE..];
            let kind = if commit { 1 } else { 0 };
            assert_eq!(
                rec,
                &[32, 0, 0, 0, 8, 0, 0, 0, kind, 12, 0, 0, 0, 0, 0, 7, 0][..]
            );
        }
    }

    #[test]
    fn non_markers_and_corrupt_markers() {
        // A data batch is not a marker.
        assert_eq!(parse_end_txn_marker(&simple_batch(1, 5, 3)).unwrap(), None);
        // Another control type (a Raft leader change, type 2) is not one either.
        let mut b = end_txn_batch(
            1,
            0,
            EndTxnMarker {
                commit: true,
                coordinator_epoch: 0,
            },
            5,
        );
        b[HEADER_SIZE + 8] = 2;
        assert_eq!(parse_end_txn_marker(&b).unwrap(), None);
        // A value cut short is corrupt (the CRC is not what is checked here).
        let mut b = end_txn_batch(
            1,
            0,
            EndTxnMarker {
                commit: true,
                coordinator_epoch: 0,
            },
            5,
        );
        b[HEADER_SIZE + 9] = 4; // value length 2 instead of 6
        assert!(parse_end_txn_marker(&b).is_err());
        let h = BatchHeader::parse(&b, 0).unwrap();
        assert!(h.is_control());
    }
}
