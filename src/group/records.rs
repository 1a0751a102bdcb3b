//! The record schemas of `__consumer_offsets`, as Kafka defines them (non-flexible versions are
//! written; flexible v4 values are read too):
//!
//! * OffsetCommitKey v0/v1: group, topic, partition. Value v3: offset, leader epoch, metadata,
//!   commit timestamp (v0-v2 and v4 are read).
//! * GroupMetadataKey v2: group. Value v3: protocol type, generation, protocol, leader, state
//!   timestamp, members (id, instance id, client id, host, timeouts, subscription, assignment)
//!   (v0-v2 and v4 are read).
//!
//! A record with a null value is a tombstone: the offset or the group was deleted.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The key of one `__consumer_offsets` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    Group {
        group: String,
    },
}

impl Key {
    pub fn group(&self) -> &str {
        match self {
            Key::Offset { group, .. } | Key::Group { group } => group,
        }
    }
}

/// OffsetCommitValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

/// One member in GroupMetadataValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberValue {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// GroupMetadataValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub state_timestamp: i64,
    pub members: Vec<MemberValue>,
}

const OFFSET_KEY_VERSION: i16 = 1;
const GROUP_KEY_VERSION: i16 = 2;
const OFFSET_VALUE_VERSION: i16 = 3;
const GROUP_VALUE_VERSION: i16 = 3;

pub(crate) fn put_str(b: &mut BytesMut, s: &str) {
    b.put_i16(s.len() as i16);
    b.put_slice(s.as_bytes());
}

pub(crate) fn put_nullable_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_str(b, s),
        None => b.put_i16(-1),
    }
}

/// An unsigned varint (flexible versions' lengths and tags).
pub(crate) fn put_uvarint(b: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        b.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}

/// A COMPACT_STRING: its length + 1 as a varint, then its bytes.
pub(crate) fn put_compact_str(b: &mut BytesMut, s: &str) {
    put_uvarint(b, s.len() as u32 + 1);
    b.put_slice(s.as_bytes());
}

fn put_bytes(b: &mut BytesMut, v: &[u8]) {
    b.put_i32(v.len() as i32);
    b.put_slice(v);
}

pub fn encode_key(k: &Key) -> Bytes {
    let mut b = BytesMut::new();
    match k {
        Key::Offset {
            group,
            topic,
            partition,
        } => {
            b.put_i16(OFFSET_KEY_VERSION);
            put_str(&mut b, group);
            put_str(&mut b, topic);
            b.put_i32(*partition);
        }
        Key::Group { group } => {
            b.put_i16(GROUP_KEY_VERSION);
            put_str(&mut b, group);
        }
    }
    b.freeze()
}

pub fn encode_offset(v: &OffsetValue) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(OFFSET_VALUE_VERSION);
    b.put_i64(v.offset);
    b.put_i32(v.leader_epoch);
    put_str(&mut b, &v.metadata);
    b.put_i64(v.commit_timestamp);
    b.freeze()
}

pub fn encode_group(v: &GroupValue) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(GROUP_VALUE_VERSION);
    put_str(&mut b, &v.protocol_type);
    b.put_i32(v.generation);
    put_nullable_str(&mut b, v.protocol.as_deref());
    put_nullable_str(&mut b, v.leader.as_deref());
    b.put_i64(v.state_timestamp);
    b.put_i32(v.members.len() as i32);
    for m in &v.members {
        put_str(&mut b, &m.member_id);
        put_nullable_str(&mut b, m.instance_id.as_deref());
        put_str(&mut b, &m.client_id);
        put_str(&mut b, &m.client_host);
        b.put_i32(m.rebalance_timeout_ms);
        b.put_i32(m.session_timeout_ms);
        put_bytes(&mut b, &m.subscription);
        put_bytes(&mut b, &m.assignment);
    }
    b.freeze()
}

/// A reader of Kafka's classic (v0-v3) and flexible (v4) encodings; it never reads past the
/// end (a short record is an error). The transaction coordinator's records use it too.
pub(crate) struct Reader {
    pub(crate) buf: Bytes,
    pub(crate) flexible: bool,
}

pub(crate) type R<T> = Result<T, String>;

impl Reader {
    pub(crate) fn need(&self, n: usize) -> R<()> {
        if self.buf.remaining() < n {
            Err("truncated".into())
        } else {
            Ok(())
        }
    }
    pub(crate) fn i16(&mut self) -> R<i16> {
        self.need(2)?;
        Ok(self.buf.get_i16())
    }
    pub(crate) fn i32(&mut self) -> R<i32> {
        self.need(4)?;
        Ok(self.buf.get_i32())
    }
    pub(crate) fn i64(&mut self) -> R<i64> {
        self.need(8)?;
        Ok(self.buf.get_i64())
    }
    pub(crate) fn uvarint(&mut self) -> R<u32> {
        let mut v: u32 = 0;
        for i in 0..5 {
            self.need(1)?;
            let b = self.buf.get_u8();
            v |= ((b & 0x7f) as u32) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("bad varint".into())
    }
    /// Length of a string/bytes field; None for null.
    pub(crate) fn len(&mut self, bytes: bool) -> R<Option<usize>> {
        let n: i64 = if self.flexible {
            self.uvarint()? as i64 - 1
        } else if bytes {
            self.i32()? as i64
        } else {
            self.i16()? as i64
        };
        if n < 0 {
            return Ok(None);
        }
        self.need(n as usize)?;
        Ok(Some(n as usize))
    }
    pub(crate) fn nullable_str(&mut self) -> R<Option<String>> {
        match self.len(false)? {
            None => Ok(None),
            Some(n) => String::from_utf8(self.buf.split_to(n).to_vec())
                .map(Some)
                .map_err(|_| "bad utf-8".into()),
        }
    }
    pub(crate) fn str(&mut self) -> R<String> {
        Ok(self.nullable_str()?.unwrap_or_default())
    }
    pub(crate) fn bytes(&mut self) -> R<Bytes> {
        Ok(match self.len(true)? {
            None => Bytes::new(),
            Some(n) => self.buf.split_to(n),
        })
    }
    pub(crate) fn array_len(&mut self) -> R<usize> {
        let n: i64 = if self.flexible {
            self.uvarint()? as i64 - 1
        } else {
            self.i32()? as i64
        };
        Ok(n.max(0) as usize)
    }
    pub(crate) fn skip_tags(&mut self) -> R<()> {
        if self.flexible {
            let n = self.uvarint()?;
            for _ in 0..n {
                self.uvarint()?;
                let len = self.uvarint()? as usize;
                self.need(len)?;
                self.buf.advance(len);
            }
        }
        Ok(())
    }
}

/// Decodes a key; `Ok(None)` for record types this coordinator does not use (the records of
/// the new consumer protocol, share groups, ...).
pub fn decode_key(buf: Bytes) -> R<Option<Key>> {
    let mut r = Reader {
        buf,
        flexible: false,
    };
    match r.i16()? {
        0 | 1 => Ok(Some(Key::Offset {
            group: r.str()?,
            topic: r.str()?,
            partition: r.i32()?,
        })),
        2 => Ok(Some(Key::Group { group: r.str()? })),
        _ => Ok(None),
    }
}

pub fn decode_offset(buf: Bytes) -> R<OffsetValue> {
    let mut r = Reader {
        buf,
        flexible: false,
    };
    let version = r.i16()?;
    r.flexible = version >= 4;
    let offset = r.i64()?;
    let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
    let metadata = r.str()?;
    let commit_timestamp = r.i64()?;
    if version == 1 {
        r.i64()?; // expire timestamp: Kafka ignores it since 2.1
    }
    Ok(OffsetValue {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp,
    })
}

pub fn decode_group(buf: Bytes) -> R<GroupValue> {
    let mut r = Reader {
        buf,
        flexible: false,
    };
    let version = r.i16()?;
    r.flexible = version >= 4;
    let protocol_type = r.str()?;
    let generation = r.i32()?;
    let protocol = r.nullable_str()?;
    let leader = r.nullable_str()?;
    let state_timestamp = if version >= 2 { r.i64()? } else { -1 };
    let n = r.array_len()?;
    let mut members = Vec::new();
    for _ in 0..n {
        let member_id = r.str()?;
        let instance_id = if version >= 3 {
            r.nullable_str()?
        } else {
            None
        };
        let client_id = r.str()?;
        let client_host = r.str()?;
        let session_timeout_ms;
        let rebalance_timeout_ms;
        if version >= 1 {
            rebalance_timeout_ms = r.i32()?;
            session_timeout_ms = r.i32()?;
        } else {
            session_timeout_ms = r.i32()?;
            rebalance_timeout_ms = session_timeout_ms;
        }
        let subscription = r.bytes()?;
        let assignment = r.bytes()?;
        r.skip_tags()?;
        members.push(MemberValue {
            member_id,
            instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    Ok(GroupValue {
        protocol_type,
        generation,
        protocol,
        leader,
        state_timestamp,
        members,
    })
}

/// The `__consumer_offsets` partition of a group: abs(Java `String.hashCode`) mod `n`
/// (Kafka's `Utils.abs` maps i32::MIN to 0).
pub fn partition_for(group: &str, n: i32) -> i32 {
    let mut h: i32 = 0;
    for unit in group.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_partition() {
        // "my-group".hashCode() = -1906497762 (Java): abs % 50 = 12.
        assert_eq!(partition_for("my-group", 50), 12);
        assert_eq!(partition_for("", 50), 0);
        // A string whose Java hashCode is negative: "polygenelubricants" = Integer.MIN_VALUE.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
    }

    #[test]
    fn round_trips() {
        let k = Key::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
        };
        assert_eq!(decode_key(encode_key(&k)).unwrap(), Some(k));
        let k = Key::Group { group: "g".into() };
        assert_eq!(decode_key(encode_key(&k)).unwrap(), Some(k));
        let v = OffsetValue {
            offset: 42,
            leader_epoch: 7,
            metadata: "meta".into(),
            commit_timestamp: 1000,
        };
        assert_eq!(decode_offset(encode_offset(&v)).unwrap(), v);
        let g = GroupValue {
            protocol_type: "consumer".into(),
            generation: 5,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            state_timestamp: 99,
            members: vec![MemberValue {
                member_id: "m1".into(),
                instance_id: Some("i1".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300000,
                session_timeout_ms: 45000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
        };
        assert_eq!(decode_group(encode_group(&g)).unwrap(), g);
    }

    #[test]
    fn reads_offset_value_v1() {
        let mut b = BytesMut::new();
        b.put_i16(1);
        b.put_i64(10);
        put_str(&mut b, "m");
        b.put_i64(5);
        b.put_i64(-1);
        let v = decode_offset(b.freeze()).unwrap();
        assert_eq!(
            (v.offset, v.leader_epoch, v.metadata.as_str()),
            (10, -1, "m")
        );
    }
}
