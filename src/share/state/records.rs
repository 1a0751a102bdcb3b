//! The `__share_group_state` record schemas, as Kafka's share coordinator writes them
//! (share-coordinator `ShareSnapshotKey/Value`, `ShareUpdateKey/Value`).
//!
//! Key: the record type as an int16 (0 = ShareSnapshot, 1 = ShareUpdate), then, not
//! flexible, GroupId (int16-length string), TopicId (16 bytes), Partition (int32). Both key
//! types carry the same fields; a share partition has one key of each.
//!
//! Value: an int16 version (0), then flexible fields. ShareSnapshot: SnapshotEpoch,
//! StateEpoch, LeaderEpoch (int32 each), StartOffset, CreateTimestamp, WriteTimestamp (int64
//! each), StateBatches (compact array of FirstOffset int64, LastOffset int64, DeliveryState
//! int8, DeliveryCount int16, each with empty tagged fields), then tagged fields (tag 0:
//! DeliveryCompleteCount int32, default -1, written only when not -1). ShareUpdate: the same
//! without StateEpoch and the timestamps. A tombstone (no value) of the ShareSnapshot key
//! deletes the share partition's state.

use anyhow::{Result, bail};
use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

pub const SNAPSHOT: i16 = 0;
pub const UPDATE: i16 = 1;

/// Kafka's delivery states in state batches (`RecordState`).
pub const AVAILABLE: i8 = 0;
pub const ACKNOWLEDGED: i8 = 2;
pub const ARCHIVED: i8 = 4;

/// A share partition: group id, topic id, partition (Kafka's `SharePartitionKey`).
pub type Key = (String, Uuid, i32);

/// A range of offsets in one delivery state with one delivery count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Batch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_state: i8,
    pub delivery_count: i16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub snapshot_epoch: i32,
    pub state_epoch: i32,
    pub leader_epoch: i32,
    pub start_offset: i64,
    pub delivery_complete_count: i32,
    pub create_timestamp: i64,
    pub write_timestamp: i64,
    pub batches: Vec<Batch>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub snapshot_epoch: i32,
    pub leader_epoch: i32,
    /// -1: the start offset is not updated.
    pub start_offset: i64,
    pub delivery_complete_count: i32,
    pub batches: Vec<Batch>,
}

/// One `__share_group_state` record's meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Snapshot(Snapshot),
    Update(Update),
    /// The share partition's state is deleted.
    Tombstone,
}

pub fn encode_key(kind: i16, key: &Key) -> Bytes {
    let (group, topic, partition) = key;
    let g = &group.as_bytes()[..group.len().min(i16::MAX as usize)];
    let mut out = BytesMut::with_capacity(24 + g.len());
    out.put_i16(kind);
    out.put_i16(g.len() as i16);
    out.put_slice(g);
    out.put_slice(topic.as_bytes());
    out.put_i32(*partition);
    out.freeze()
}

/// The record type and share partition of a key; None for a type this schema does not know
/// (skipped on replay, as Kafka's serde refuses unknown types).
pub fn decode_key(data: &[u8]) -> Result<Option<(i16, Key)>> {
    let mut r = Reader(data);
    let kind = r.i16()?;
    if kind != SNAPSHOT && kind != UPDATE {
        return Ok(None);
    }
    let len = r.i16()?;
    if len < 0 {
        bail!("null group id");
    }
    let group = String::from_utf8(r.take(len as usize)?.to_vec())?;
    let topic = Uuid::from_slice(r.take(16)?)?;
    let partition = r.i32()?;
    Ok(Some((kind, (group, topic, partition))))
}

/// The key and value of the record that stores `v` for `key`.
pub fn encode(key: &Key, v: &Value) -> (Bytes, Option<Bytes>) {
    match v {
        Value::Tombstone => (encode_key(SNAPSHOT, key), None),
        Value::Snapshot(s) => {
            let mut out = BytesMut::new();
            out.put_i16(0);
            out.put_i32(s.snapshot_epoch);
            out.put_i32(s.state_epoch);
            out.put_i32(s.leader_epoch);
            out.put_i64(s.start_offset);
            out.put_i64(s.create_timestamp);
            out.put_i64(s.write_timestamp);
            put_batches(&mut out, &s.batches);
            put_tags(&mut out, s.delivery_complete_count);
            (encode_key(SNAPSHOT, key), Some(out.freeze()))
        }
        Value::Update(u) => {
            let mut out = BytesMut::new();
            out.put_i16(0);
            out.put_i32(u.snapshot_epoch);
            out.put_i32(u.leader_epoch);
            out.put_i64(u.start_offset);
            put_batches(&mut out, &u.batches);
            put_tags(&mut out, u.delivery_complete_count);
            (encode_key(UPDATE, key), Some(out.freeze()))
        }
    }
}

/// The value of a record of type `kind`; a missing value is a tombstone.
pub fn decode_value(kind: i16, data: Option<&[u8]>) -> Result<Value> {
    let Some(data) = data else {
        return Ok(Value::Tombstone);
    };
    let mut r = Reader(data);
    let version = r.i16()?;
    if version != 0 {
        bail!("unknown value version {version}");
    }
    if kind == SNAPSHOT {
        let snapshot_epoch = r.i32()?;
        let state_epoch = r.i32()?;
        let leader_epoch = r.i32()?;
        let start_offset = r.i64()?;
        let create_timestamp = r.i64()?;
        let write_timestamp = r.i64()?;
        let batches = r.batches()?;
        let delivery_complete_count = r.tags()?;
        Ok(Value::Snapshot(Snapshot {
            snapshot_epoch,
            state_epoch,
            leader_epoch,
            start_offset,
            delivery_complete_count,
            create_timestamp,
            write_timestamp,
            batches,
        }))
    } else {
        let snapshot_epoch = r.i32()?;
        let leader_epoch = r.i32()?;
        let start_offset = r.i64()?;
        let batches = r.batches()?;
        let delivery_complete_count = r.tags()?;
        Ok(Value::Update(Update {
            snapshot_epoch,
            leader_epoch,
            start_offset,
            delivery_complete_count,
            batches,
        }))
    }
}

fn put_uvarint(out: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        out.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

fn put_batches(out: &mut BytesMut, batches: &[Batch]) {
    put_uvarint(out, batches.len() as u32 + 1);
    for b in batches {
        out.put_i64(b.first_offset);
        out.put_i64(b.last_offset);
        out.put_i8(b.delivery_state);
        out.put_i16(b.delivery_count);
        put_uvarint(out, 0);
    }
}

fn put_tags(out: &mut BytesMut, delivery_complete_count: i32) {
    if delivery_complete_count == -1 {
        put_uvarint(out, 0);
    } else {
        put_uvarint(out, 1);
        put_uvarint(out, 0);
        put_uvarint(out, 4);
        out.put_i32(delivery_complete_count);
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.0.len() < n {
            bail!("truncated");
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn i8(&mut self) -> Result<i8> {
        Ok(self.take(1)?[0] as i8)
    }
    fn i16(&mut self) -> Result<i16> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into()?))
    }
    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into()?))
    }
    fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into()?))
    }
    fn uvarint(&mut self) -> Result<u32> {
        let mut v: u32 = 0;
        for i in 0..5 {
            let b = self.take(1)?[0];
            v |= ((b & 0x7f) as u32) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        bail!("varint too long")
    }
    /// Tagged fields; returns DeliveryCompleteCount (tag 0), -1 when absent.
    fn tags(&mut self) -> Result<i32> {
        let mut dcc = -1;
        for _ in 0..self.uvarint()? {
            let tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            let data = self.take(size)?;
            if tag == 0 && size == 4 {
                dcc = i32::from_be_bytes(data.try_into()?);
            }
        }
        Ok(dcc)
    }
    fn batches(&mut self) -> Result<Vec<Batch>> {
        let n = self.uvarint()?;
        if n == 0 {
            bail!("null state batches");
        }
        let n = (n - 1) as usize;
        // Each batch takes at least 20 bytes: a count beyond what is left is damage.
        if n > self.0.len() / 20 {
            bail!("truncated state batches");
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let b = Batch {
                first_offset: self.i64()?,
                last_offset: self.i64()?,
                delivery_state: self.i8()?,
                delivery_count: self.i16()?,
            };
            self.tags()?;
            out.push(b);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        ("grp".to_string(), Uuid::from_u128(0x0102), 7)
    }

    #[test]
    fn snapshot_bytes_are_kafkas() {
        let s = Snapshot {
            snapshot_epoch: 1,
            state_epoch: 2,
            leader_epoch: 3,
            start_offset: 10,
            delivery_complete_count: -1,
            create_timestamp: 5,
            write_timestamp: 6,
            batches: vec![Batch {
                first_offset: 10,
                last_offset: 12,
                delivery_state: ARCHIVED,
                delivery_count: 2,
            }],
        };
        let (k, v) = encode(&key(), &Value::Snapshot(s.clone()));
        let mut want_key = vec![0, 0, 0, 3, b'g', b'r', b'p'];
        want_key.extend_from_slice(Uuid::from_u128(0x0102).as_bytes());
        want_key.extend_from_slice(&[0, 0, 0, 7]);
        assert_eq!(&k[..], &want_key[..]);
        let v = v.unwrap();
        let mut want = vec![0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3];
        want.extend_from_slice(&10i64.to_be_bytes());
        want.extend_from_slice(&5i64.to_be_bytes());
        want.extend_from_slice(&6i64.to_be_bytes());
        want.push(2); // one batch
        want.extend_from_slice(&10i64.to_be_bytes());
        want.extend_from_slice(&12i64.to_be_bytes());
        want.extend_from_slice(&[4, 0, 2, 0]);
        want.push(0); // no tagged fields
        assert_eq!(&v[..], &want[..]);
        assert_eq!(decode_key(&k).unwrap(), Some((SNAPSHOT, key())));
        assert_eq!(
            decode_value(SNAPSHOT, Some(&v)).unwrap(),
            Value::Snapshot(s)
        );
    }

    #[test]
    fn updates_tags_and_tombstones_round_trip() {
        let u = Update {
            snapshot_epoch: 4,
            leader_epoch: -1,
            start_offset: -1,
            delivery_complete_count: 9,
            batches: vec![],
        };
        let (k, v) = encode(&key(), &Value::Update(u.clone()));
        assert_eq!(decode_key(&k).unwrap(), Some((UPDATE, key())));
        assert_eq!(
            decode_value(UPDATE, v.as_deref()).unwrap(),
            Value::Update(u)
        );
        let (k, v) = encode(&key(), &Value::Tombstone);
        assert_eq!(decode_key(&k).unwrap(), Some((SNAPSHOT, key())));
        assert_eq!(
            decode_value(SNAPSHOT, v.as_deref()).unwrap(),
            Value::Tombstone
        );
    }

    #[test]
    fn damage_is_an_error_not_a_panic() {
        let (k, v) = encode(
            &key(),
            &Value::Snapshot(Snapshot {
                snapshot_epoch: 0,
                state_epoch: 0,
                leader_epoch: 0,
                start_offset: 0,
                delivery_complete_count: -1,
                create_timestamp: 0,
                write_timestamp: 0,
                batches: vec![Batch {
                    first_offset: 0,
                    last_offset: 0,
                    delivery_state: 0,
                    delivery_count: 1,
                }],
            }),
        );
        let v = v.unwrap();
        for n in 0..v.len() {
            assert!(decode_value(SNAPSHOT, Some(&v[..n])).is_err());
        }
        for n in 0..k.len() {
            assert!(decode_key(&k[..n]).is_err());
        }
        let mut huge = v[..38].to_vec();
        huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(decode_value(SNAPSHOT, Some(&huge)).is_err());
        assert_eq!(decode_key(&[0, 9, 0, 0]).unwrap(), None);
    }
}
