//! The `__consumer_offsets` records of consumer groups (KIP-848), as Kafka 4.4 writes them.
//! A key is the record type (i16) followed by its non-flexible fields; a value is version 0
//! (i16) of a flexible schema (compact strings and arrays, tagged fields):
//!
//! * 3 ConsumerGroupMetadata (group): the group epoch; tag 0 the metadata hash of the
//!   subscribed topics.
//! * 5 ConsumerGroupMemberMetadata (group, member): instance id, rack, client id and host,
//!   subscribed topic names and regex, rebalance timeout, server assignor; tag 0 the classic
//!   member metadata (session timeout, supported protocols) of a member using the classic
//!   protocol.
//! * 6 ConsumerGroupTargetAssignmentMetadata (group): the assignment epoch.
//! * 7 ConsumerGroupTargetAssignmentMember (group, member): the member's target partitions.
//! * 8 ConsumerGroupCurrentMemberAssignment (group, member): member epoch, previous epoch,
//!   state, assigned partitions, partitions pending revocation.
//!
//! Tagged fields this coordinator has no use for (assignment timestamps, assignment epochs
//! per partition) are skipped when read and not written. Types 4 (the subscription metadata
//! Kafka wrote before 4.1) and 16 (resolved regular expressions: the coordinator matches a
//! regex against the topics at each heartbeat) are not read.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::{Assignment, MemberState};
use crate::group::records::{R, Reader, put_compact_str, put_str, put_uvarint};

pub const GROUP_EPOCH: i16 = 3;
pub const MEMBER: i16 = 5;
pub const TARGET_EPOCH: i16 = 6;
pub const TARGET_MEMBER: i16 = 7;
pub const CURRENT_ASSIGNMENT: i16 = 8;

/// The key of a consumer group record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    GroupEpoch { group: String },
    Member { group: String, member: String },
    TargetEpoch { group: String },
    TargetMember { group: String, member: String },
    CurrentAssignment { group: String, member: String },
}

impl Key {
    pub fn group(&self) -> &str {
        match self {
            Key::GroupEpoch { group }
            | Key::Member { group, .. }
            | Key::TargetEpoch { group }
            | Key::TargetMember { group, .. }
            | Key::CurrentAssignment { group, .. } => group,
        }
    }
}

/// ConsumerGroupMetadataValue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupEpochValue {
    pub epoch: i32,
    pub metadata_hash: i64,
}

/// ClassicMemberMetadata: what a member using the classic protocol joined with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicMetadata {
    pub session_timeout_ms: i32,
    /// (protocol name, metadata).
    pub protocols: Vec<(String, Bytes)>,
}

/// ConsumerGroupMemberMetadataValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberValue {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_names: Vec<String>,
    pub subscribed_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    pub classic: Option<ClassicMetadata>,
}

/// ConsumerGroupCurrentMemberAssignmentValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentValue {
    pub epoch: i32,
    pub previous_epoch: i32,
    pub state: MemberState,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
}

/// Kafka's `MemberState` values.
fn state_byte(s: MemberState) -> i8 {
    match s {
        MemberState::Stable => 0,
        MemberState::UnrevokedPartitions => 1,
        MemberState::UnreleasedPartitions => 2,
    }
}

fn state_of(b: i8) -> R<MemberState> {
    match b {
        0 => Ok(MemberState::Stable),
        1 => Ok(MemberState::UnrevokedPartitions),
        2 => Ok(MemberState::UnreleasedPartitions),
        _ => Err(format!("unknown member state {b}")),
    }
}

pub fn encode_key(k: &Key) -> Bytes {
    let mut b = BytesMut::new();
    let (kind, group, member) = match k {
        Key::GroupEpoch { group } => (GROUP_EPOCH, group, None),
        Key::Member { group, member } => (MEMBER, group, Some(member)),
        Key::TargetEpoch { group } => (TARGET_EPOCH, group, None),
        Key::TargetMember { group, member } => (TARGET_MEMBER, group, Some(member)),
        Key::CurrentAssignment { group, member } => (CURRENT_ASSIGNMENT, group, Some(member)),
    };
    b.put_i16(kind);
    put_str(&mut b, group);
    if let Some(m) = member {
        put_str(&mut b, m);
    }
    b.freeze()
}

/// Decodes the key of a consumer group record; `Ok(None)` for other record types.
pub fn decode_key(buf: Bytes) -> R<Option<Key>> {
    let mut r = Reader {
        buf,
        flexible: false,
    };
    let kind = r.i16()?;
    let k = match kind {
        GROUP_EPOCH => Key::GroupEpoch { group: r.str()? },
        TARGET_EPOCH => Key::TargetEpoch { group: r.str()? },
        MEMBER | TARGET_MEMBER | CURRENT_ASSIGNMENT => {
            let group = r.str()?;
            let member = r.str()?;
            match kind {
                MEMBER => Key::Member { group, member },
                TARGET_MEMBER => Key::TargetMember { group, member },
                _ => Key::CurrentAssignment { group, member },
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(k))
}

// ---- flexible (compact) encoding ------------------------------------------------------------

fn put_compact_nullable_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_compact_str(b, s),
        None => b.put_u8(0),
    }
}

fn put_compact_bytes(b: &mut BytesMut, v: &[u8]) {
    put_uvarint(b, v.len() as u32 + 1);
    b.put_slice(v);
}

fn put_array_len(b: &mut BytesMut, n: usize) {
    put_uvarint(b, n as u32 + 1);
}

/// The partitions of an assignment by topic, each entry with no tagged fields.
fn put_partitions(b: &mut BytesMut, a: &Assignment) {
    let topics: Vec<_> = a.iter().filter(|(_, ps)| !ps.is_empty()).collect();
    put_array_len(b, topics.len());
    for (t, ps) in topics {
        b.put_slice(t.as_bytes());
        put_array_len(b, ps.len());
        for p in ps {
            b.put_i32(*p);
        }
        b.put_u8(0);
    }
}

fn value_start() -> BytesMut {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b
}

pub fn encode_group_epoch(v: &GroupEpochValue) -> Bytes {
    let mut b = value_start();
    b.put_i32(v.epoch);
    if v.metadata_hash != 0 {
        b.put_u8(1);
        put_uvarint(&mut b, 0);
        put_uvarint(&mut b, 8);
        b.put_i64(v.metadata_hash);
    } else {
        b.put_u8(0);
    }
    b.freeze()
}

/// ClassicMemberMetadata as the data of its tagged field: a presence byte, then the struct.
fn encode_classic(c: &ClassicMetadata) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_u8(1);
    b.put_i32(c.session_timeout_ms);
    put_array_len(&mut b, c.protocols.len());
    for (name, meta) in &c.protocols {
        put_compact_str(&mut b, name);
        put_compact_bytes(&mut b, meta);
        b.put_u8(0);
    }
    b.put_u8(0);
    b
}

pub fn encode_member(v: &MemberValue) -> Bytes {
    let mut b = value_start();
    put_compact_nullable_str(&mut b, v.instance_id.as_deref());
    put_compact_nullable_str(&mut b, v.rack_id.as_deref());
    put_compact_str(&mut b, &v.client_id);
    put_compact_str(&mut b, &v.client_host);
    put_array_len(&mut b, v.subscribed_names.len());
    for n in &v.subscribed_names {
        put_compact_str(&mut b, n);
    }
    put_compact_nullable_str(&mut b, v.subscribed_regex.as_deref());
    b.put_i32(v.rebalance_timeout_ms);
    put_compact_nullable_str(&mut b, v.server_assignor.as_deref());
    match &v.classic {
        Some(c) => {
            let data = encode_classic(c);
            b.put_u8(1);
            put_uvarint(&mut b, 0);
            put_uvarint(&mut b, data.len() as u32);
            b.put_slice(&data);
        }
        None => b.put_u8(0),
    }
    b.freeze()
}

pub fn encode_target_epoch(epoch: i32) -> Bytes {
    let mut b = value_start();
    b.put_i32(epoch);
    b.put_u8(0);
    b.freeze()
}

pub fn encode_target_member(a: &Assignment) -> Bytes {
    let mut b = value_start();
    put_partitions(&mut b, a);
    b.put_u8(0);
    b.freeze()
}

pub fn encode_current(v: &CurrentValue) -> Bytes {
    let mut b = value_start();
    b.put_i32(v.epoch);
    b.put_i32(v.previous_epoch);
    b.put_i8(state_byte(v.state));
    put_partitions(&mut b, &v.assigned);
    put_partitions(&mut b, &v.pending_revocation);
    b.put_u8(0);
    b.freeze()
}

// ---- decoding -------------------------------------------------------------------------------

/// A reader of a version 0 value (flexible).
fn value_reader(buf: Bytes) -> R<Reader> {
    let mut r = Reader {
        buf,
        flexible: false,
    };
    let version = r.i16()?;
    if version != 0 {
        return Err(format!("unknown value version {version}"));
    }
    r.flexible = true;
    Ok(r)
}

fn uuid(r: &mut Reader) -> R<Uuid> {
    r.need(16)?;
    let mut b = [0u8; 16];
    r.buf.copy_to_slice(&mut b);
    Ok(Uuid::from_bytes(b))
}

fn partitions(r: &mut Reader) -> R<Assignment> {
    let mut a = Assignment::new();
    for _ in 0..r.array_len()? {
        let t = uuid(r)?;
        let n = r.array_len()?;
        let ps = a.entry(t).or_default();
        for _ in 0..n {
            ps.insert(r.i32()?);
        }
        r.skip_tags()?;
    }
    a.retain(|_, ps| !ps.is_empty());
    Ok(a)
}

/// Reads the tagged fields, giving each (tag, data) to `f`.
fn tags(r: &mut Reader, mut f: impl FnMut(u32, Bytes) -> R<()>) -> R<()> {
    let n = r.uvarint()?;
    for _ in 0..n {
        let tag = r.uvarint()?;
        let len = r.uvarint()? as usize;
        r.need(len)?;
        let data = r.buf.split_to(len);
        f(tag, data)?;
    }
    Ok(())
}

pub fn decode_group_epoch(buf: Bytes) -> R<GroupEpochValue> {
    let mut r = value_reader(buf)?;
    let epoch = r.i32()?;
    let mut metadata_hash = 0;
    tags(&mut r, |tag, mut data| {
        if tag == 0 {
            if data.remaining() < 8 {
                return Err("truncated metadata hash".into());
            }
            metadata_hash = data.get_i64();
        }
        Ok(())
    })?;
    Ok(GroupEpochValue {
        epoch,
        metadata_hash,
    })
}

fn decode_classic(data: Bytes) -> R<Option<ClassicMetadata>> {
    let mut r = Reader {
        buf: data,
        flexible: true,
    };
    r.need(1)?;
    if r.buf.get_i8() < 0 {
        return Ok(None);
    }
    let session_timeout_ms = r.i32()?;
    let mut protocols = Vec::new();
    for _ in 0..r.array_len()? {
        let name = r.str()?;
        let meta = r.bytes()?;
        r.skip_tags()?;
        protocols.push((name, meta));
    }
    Ok(Some(ClassicMetadata {
        session_timeout_ms,
        protocols,
    }))
}

pub fn decode_member(buf: Bytes) -> R<MemberValue> {
    let mut r = value_reader(buf)?;
    let instance_id = r.nullable_str()?;
    let rack_id = r.nullable_str()?;
    let client_id = r.str()?;
    let client_host = r.str()?;
    let mut subscribed_names = Vec::new();
    for _ in 0..r.array_len()? {
        subscribed_names.push(r.str()?);
    }
    let subscribed_regex = r.nullable_str()?;
    let rebalance_timeout_ms = r.i32()?;
    let server_assignor = r.nullable_str()?;
    let mut classic = None;
    tags(&mut r, |tag, data| {
        if tag == 0 {
            classic = decode_classic(data)?;
        }
        Ok(())
    })?;
    Ok(MemberValue {
        instance_id,
        rack_id,
        client_id,
        client_host,
        subscribed_names,
        subscribed_regex,
        rebalance_timeout_ms,
        server_assignor,
        classic,
    })
}

pub fn decode_target_epoch(buf: Bytes) -> R<i32> {
    let mut r = value_reader(buf)?;
    let epoch = r.i32()?;
    r.skip_tags()?;
    Ok(epoch)
}

pub fn decode_target_member(buf: Bytes) -> R<Assignment> {
    let mut r = value_reader(buf)?;
    let a = partitions(&mut r)?;
    r.skip_tags()?;
    Ok(a)
}

pub fn decode_current(buf: Bytes) -> R<CurrentValue> {
    let mut r = value_reader(buf)?;
    let epoch = r.i32()?;
    let previous_epoch = r.i32()?;
    r.need(1)?;
    let state = state_of(r.buf.get_i8())?;
    let assigned = partitions(&mut r)?;
    let pending_revocation = partitions(&mut r)?;
    r.skip_tags()?;
    Ok(CurrentValue {
        epoch,
        previous_epoch,
        state,
        assigned,
        pending_revocation,
    })
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
