//! The record schemas of `__transaction_state`, as Kafka defines them:
//!
//! * key: version i16 = 0 (the coordinator record type TRANSACTION_LOG), then
//!   TransactionLogKey v0: the transactional id.
//! * value: version i16, then TransactionLogValue: producer id, producer epoch, timeout,
//!   status (the state's id), partitions by topic (null when Empty), last update and start
//!   timestamps. Version 1 (flexible, what Kafka 4.4 writes when transaction.version >= 1,
//!   and what is written here) adds tagged fields: previous producer id (tag 0), next
//!   producer id (1), client transaction version (2), next producer epoch (3); each is
//!   written only when it differs from its default. Version 0 is read too.
//!
//! A record with a null value is a tombstone: the transactional id expired.
//!
//! A transactional id's partition is abs(Java `String.hashCode`) mod the partition count,
//! as for groups (`group::records::partition_for`).

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::state::{NO_PRODUCER_EPOCH, NO_PRODUCER_ID, Transit, TxnState};
use crate::group::records::{R, Reader, put_compact_str, put_str, put_uvarint};

const KEY_VERSION: i16 = 0;
const VALUE_VERSION: i16 = 1;

const TAG_PREV_PRODUCER_ID: u32 = 0;
const TAG_NEXT_PRODUCER_ID: u32 = 1;
const TAG_CLIENT_VERSION: u32 = 2;
const TAG_NEXT_PRODUCER_EPOCH: u32 = 3;

pub use crate::group::records::partition_for;

pub fn encode_key(transactional_id: &str) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(KEY_VERSION);
    put_str(&mut b, transactional_id);
    b.freeze()
}

/// The transactional id of a key; `Ok(None)` for a key version Kafka would skip too.
pub fn decode_key(buf: Bytes) -> R<Option<String>> {
    let mut r = Reader {
        buf,
        flexible: false,
    };
    match r.i16()? {
        KEY_VERSION => Ok(Some(r.str()?)),
        _ => Ok(None),
    }
}

/// Partitions grouped by topic, in name order.
fn by_topic(partitions: &BTreeSet<(String, i32)>) -> BTreeMap<&str, Vec<i32>> {
    let mut m: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in partitions {
        m.entry(t.as_str()).or_default().push(*p);
    }
    m
}

/// TransactionLogValue v1 for a transition.
pub fn encode_value(t: &Transit) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(VALUE_VERSION);
    b.put_i64(t.producer_id);
    b.put_i16(t.producer_epoch);
    b.put_i32(t.timeout_ms);
    b.put_i8(t.state.id());
    if t.state == TxnState::Empty {
        put_uvarint(&mut b, 0);
    } else {
        let topics = by_topic(&t.partitions);
        put_uvarint(&mut b, topics.len() as u32 + 1);
        for (topic, parts) in topics {
            put_compact_str(&mut b, topic);
            put_uvarint(&mut b, parts.len() as u32 + 1);
            for p in parts {
                b.put_i32(p);
            }
            put_uvarint(&mut b, 0);
        }
    }
    b.put_i64(t.last_update_ms);
    b.put_i64(t.start_ms);
    let mut tags: Vec<(u32, Vec<u8>)> = Vec::new();
    if t.prev_producer_id != NO_PRODUCER_ID {
        tags.push((
            TAG_PREV_PRODUCER_ID,
            t.prev_producer_id.to_be_bytes().to_vec(),
        ));
    }
    if t.next_producer_id != NO_PRODUCER_ID {
        tags.push((
            TAG_NEXT_PRODUCER_ID,
            t.next_producer_id.to_be_bytes().to_vec(),
        ));
    }
    if t.client_version != 0 {
        tags.push((TAG_CLIENT_VERSION, t.client_version.to_be_bytes().to_vec()));
    }
    put_uvarint(&mut b, tags.len() as u32);
    for (tag, data) in tags {
        put_uvarint(&mut b, tag);
        put_uvarint(&mut b, data.len() as u32);
        b.put_slice(&data);
    }
    b.freeze()
}

/// A value as the transition that wrote it (the last producer epoch is not stored: -1).
pub fn decode_value(buf: Bytes) -> R<Transit> {
    let mut r = Reader {
        buf,
        flexible: false,
    };
    let version = r.i16()?;
    if !(0..=1).contains(&version) {
        return Err(format!("unknown value version {version}"));
    }
    r.flexible = version >= 1;
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    r.need(1)?;
    let status = r.buf.get_i8();
    let state = TxnState::from_id(status).ok_or_else(|| format!("unknown status {status}"))?;
    let mut partitions = BTreeSet::new();
    for _ in 0..r.array_len()? {
        let topic = r.str()?;
        for _ in 0..r.array_len()? {
            partitions.insert((topic.clone(), r.i32()?));
        }
        r.skip_tags()?;
    }
    if state == TxnState::Empty {
        partitions.clear();
    }
    let last_update_ms = r.i64()?;
    let start_ms = r.i64()?;
    let mut t = Transit {
        producer_id,
        prev_producer_id: NO_PRODUCER_ID,
        next_producer_id: NO_PRODUCER_ID,
        producer_epoch,
        last_producer_epoch: NO_PRODUCER_EPOCH,
        timeout_ms,
        state,
        partitions,
        start_ms,
        last_update_ms,
        client_version: 0,
    };
    if r.flexible {
        for _ in 0..r.uvarint()? {
            let tag = r.uvarint()?;
            let len = r.uvarint()? as usize;
            r.need(len)?;
            let mut data = r.buf.split_to(len);
            match (tag, len) {
                (TAG_PREV_PRODUCER_ID, 8) => t.prev_producer_id = data.get_i64(),
                (TAG_NEXT_PRODUCER_ID, 8) => t.next_producer_id = data.get_i64(),
                (TAG_CLIENT_VERSION, 2) => t.client_version = data.get_i16(),
                // Kafka's two-phase commit (KIP-939) producer epoch: not used here.
                (TAG_NEXT_PRODUCER_EPOCH, _) => {}
                (TAG_PREV_PRODUCER_ID | TAG_NEXT_PRODUCER_ID | TAG_CLIENT_VERSION, _) => {
                    return Err(format!("tagged field {tag} of {len} bytes"));
                }
                _ => {}
            }
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transit(state: TxnState) -> Transit {
        Transit {
            producer_id: 4000,
            prev_producer_id: 3000,
            next_producer_id: NO_PRODUCER_ID,
            producer_epoch: 7,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms: 60000,
            state,
            partitions: [("a".to_string(), 1), ("a".to_string(), 0), ("b".into(), 2)]
                .into_iter()
                .collect(),
            start_ms: 1_700_000_000_000,
            last_update_ms: 1_700_000_000_500,
            client_version: 2,
        }
    }

    #[test]
    fn key_round_trip_and_bytes() {
        let k = encode_key("my-txn");
        assert_eq!(&k[..], b"\x00\x00\x00\x06my-txn");
        assert_eq!(decode_key(k).unwrap().as_deref(), Some("my-txn"));
        assert_eq!(decode_key(Bytes::from_static(b"\x00\x05")).unwrap(), None);
        assert!(decode_key(Bytes::from_static(b"\x00\x00\x00\x09ab")).is_err());
    }

    #[test]
    fn value_round_trips() {
        for s in [
            TxnState::Ongoing,
            TxnState::PrepareCommit,
            TxnState::CompleteAbort,
        ] {
            let t = transit(s);
            assert_eq!(decode_value(encode_value(&t)).unwrap(), t);
        }
        let mut t = transit(TxnState::Empty);
        t.partitions.clear();
        t.prev_producer_id = NO_PRODUCER_ID;
        t.client_version = 0;
        t.next_producer_id = 9;
        assert_eq!(decode_value(encode_value(&t)).unwrap(), t);
    }

    /// The bytes Kafka 4.4's generated TransactionLogValue v1 writes for a PrepareCommit
    /// with one partition, client version 2 and previous producer id 5 (only non-default
    /// tagged fields, in tag order).
    #[test]
    fn value_bytes_are_kafkas() {
        let t = Transit {
            producer_id: 5,
            prev_producer_id: 5,
            next_producer_id: NO_PRODUCER_ID,
            producer_epoch: 1,
            last_producer_epoch: 0,
            timeout_ms: 60000,
            state: TxnState::PrepareCommit,
            partitions: [("t".to_string(), 0)].into_iter().collect(),
            start_ms: 10,
            last_update_ms: 20,
            client_version: 2,
        };
        let mut want = vec![0, 1];
        want.extend(5i64.to_be_bytes());
        want.extend(1i16.to_be_bytes());
        want.extend(60000i32.to_be_bytes());
        want.push(2);
        want.extend([2, 2, b't', 2, 0, 0, 0, 0, 0]);
        want.extend(20i64.to_be_bytes());
        want.extend(10i64.to_be_bytes());
        want.extend([2, 0, 8]);
        want.extend(5i64.to_be_bytes());
        want.extend([2, 2, 0, 2]);
        assert_eq!(&encode_value(&t)[..], &want[..]);
    }

    #[test]
    fn reads_value_v0() {
        let mut b = BytesMut::new();
        b.put_i16(0);
        b.put_i64(12);
        b.put_i16(3);
        b.put_i32(1000);
        b.put_i8(TxnState::Ongoing.id());
        b.put_i32(1);
        put_str(&mut b, "topic");
        b.put_i32(2);
        b.put_i32(4);
        b.put_i32(5);
        b.put_i64(99);
        b.put_i64(98);
        let t = decode_value(b.freeze()).unwrap();
        assert_eq!(t.producer_id, 12);
        assert_eq!(t.producer_epoch, 3);
        assert_eq!(t.state, TxnState::Ongoing);
        assert_eq!(t.partitions.len(), 2);
        assert_eq!((t.last_update_ms, t.start_ms), (99, 98));
        assert_eq!((t.prev_producer_id, t.client_version), (NO_PRODUCER_ID, 0));
    }

    #[test]
    fn malformed_values_are_errors() {
        let good = encode_value(&transit(TxnState::Ongoing));
        for n in 0..good.len() {
            assert!(
                decode_value(good.slice(..n)).is_err(),
                "prefix of {n} bytes"
            );
        }
        let mut bad = good.to_vec();
        bad[2 + 8 + 2 + 4] = 42; // status
        assert!(decode_value(Bytes::from(bad)).is_err());
        assert!(decode_value(Bytes::from_static(b"\x00\x07")).is_err());
    }

    #[test]
    fn transactional_ids_spread_like_kafka() {
        // Java: "my-txn".hashCode() = -1061187895, abs % 50 = 45.
        assert_eq!(partition_for("my-txn", 50), 45);
    }
}
