//! A consumer group in `__consumer_offsets`: the records a change of the group writes, and
//! the group built back from them at load (Kafka's replay of the same records).
//!
//! [`changes`] compares the group before and after a heartbeat, a leave or an expiry and
//! gives the records in the order Kafka's coordinator writes them: a removed member's
//! tombstones (current assignment, target assignment, member metadata), the metadata of new
//! or changed members, the group epoch, the changed target assignments and the assignment
//! epoch, then the changed current assignments. [`tombstones`] deletes a whole group.
//! [`Loading::apply`] replays records in log order.

use std::collections::BTreeMap;

use bytes::Bytes;
use uuid::Uuid;

use super::records::{
    self as rec, ClassicMetadata, CurrentValue, GroupEpochValue, Key, MemberValue,
};
use super::{Assignment, ConsumerGroup, Member};

/// (key, value) pairs; a `None` value is a tombstone.
pub type Records = Vec<(Bytes, Option<Bytes>)>;

/// The hash of the subscribed topics (name, id, partition count) written with the group
/// epoch as Kafka's `MetadataHash`: a loaded group whose topics still hash the same continues
/// at its epoch, one whose topics changed meanwhile gets a new epoch at its next heartbeat.
/// FNV-1a over the topics in name order; 0 for no topics, as Kafka writes for an empty group.
pub fn metadata_hash(subscribed: &BTreeMap<String, (Uuid, i32)>) -> i64 {
    if subscribed.is_empty() {
        return 0;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for (name, (id, partitions)) in subscribed {
        eat(&(name.len() as u32).to_be_bytes());
        eat(name.as_bytes());
        eat(id.as_bytes());
        eat(&partitions.to_be_bytes());
    }
    h as i64
}

/// The classic protocol metadata of a member that joined with JoinGroup (its session
/// timeout and protocols); None for a member of the consumer protocol.
fn classic_metadata(m: &Member) -> Option<ClassicMetadata> {
    m.classic.as_ref().map(|c| ClassicMetadata {
        session_timeout_ms: c.session_timeout_ms,
        protocols: c.protocols.clone(),
    })
}

fn member_value(m: &Member) -> MemberValue {
    MemberValue {
        instance_id: m.instance_id.clone(),
        rack_id: m.rack_id.clone(),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        subscribed_names: m.subscribed_names.clone(),
        subscribed_regex: m.subscribed_regex.clone(),
        rebalance_timeout_ms: m.rebalance_timeout_ms,
        server_assignor: m.server_assignor.clone(),
        classic: classic_metadata(m),
    }
}

fn current_value(m: &Member) -> CurrentValue {
    CurrentValue {
        epoch: m.epoch,
        previous_epoch: m.previous_epoch,
        state: m.state,
        assigned: m.assigned.clone(),
        pending_revocation: m.pending_revocation.clone(),
    }
}

fn strip(a: &Assignment) -> Assignment {
    a.iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(t, p)| (*t, p.clone()))
        .collect()
}

fn key(k: Key) -> Bytes {
    rec::encode_key(&k)
}

fn member_key(group: &str, member: &str) -> Key {
    Key::Member {
        group: group.to_string(),
        member: member.to_string(),
    }
}

fn target_key(group: &str, member: &str) -> Key {
    Key::TargetMember {
        group: group.to_string(),
        member: member.to_string(),
    }
}

fn current_key(group: &str, member: &str) -> Key {
    Key::CurrentAssignment {
        group: group.to_string(),
        member: member.to_string(),
    }
}

/// A member's tombstones, as Kafka removes a member.
fn member_tombstones(out: &mut Records, group: &str, member: &str) {
    out.push((key(current_key(group, member)), None));
    out.push((key(target_key(group, member)), None));
    out.push((key(member_key(group, member)), None));
}

fn group_epoch_record(group: &str, g: &ConsumerGroup) -> (Bytes, Option<Bytes>) {
    (
        key(Key::GroupEpoch {
            group: group.to_string(),
        }),
        Some(rec::encode_group_epoch(&GroupEpochValue {
            epoch: g.group_epoch,
            metadata_hash: metadata_hash(&g.subscribed),
        })),
    )
}

/// The records that turn `before` into `after` in the log (empty when nothing persisted
/// changed). `before` is None for a group not in the log yet: its epoch record is written
/// whatever its epoch.
pub fn changes(group: &str, before: Option<&ConsumerGroup>, after: &ConsumerGroup) -> Records {
    let empty = ConsumerGroup::default();
    let old = before.unwrap_or(&empty);
    let mut out = Records::new();
    for id in old.members.keys() {
        if !after.members.contains_key(id) {
            member_tombstones(&mut out, group, id);
        }
    }
    for (id, m) in &after.members {
        let changed = old
            .members
            .get(id)
            .is_none_or(|o| member_value(o) != member_value(m));
        if changed {
            out.push((
                key(member_key(group, id)),
                Some(rec::encode_member(&member_value(m))),
            ));
        }
    }
    if before.is_none()
        || old.group_epoch != after.group_epoch
        || metadata_hash(&old.subscribed) != metadata_hash(&after.subscribed)
    {
        out.push(group_epoch_record(group, after));
    }
    for id in after.members.keys() {
        let was = old.target.get(id).map(strip);
        let now = after.target.get(id).map(strip);
        if was != now {
            out.push((
                key(target_key(group, id)),
                Some(rec::encode_target_member(&now.unwrap_or_default())),
            ));
        }
    }
    if old.assignment_epoch != after.assignment_epoch {
        out.push((
            key(Key::TargetEpoch {
                group: group.to_string(),
            }),
            Some(rec::encode_target_epoch(after.assignment_epoch)),
        ));
    }
    for (id, m) in &after.members {
        let changed = old
            .members
            .get(id)
            .is_none_or(|o| current_value(o) != current_value(m));
        if changed {
            out.push((
                key(current_key(group, id)),
                Some(rec::encode_current(&current_value(m))),
            ));
        }
    }
    out
}

/// The tombstones that delete a group from the log: its members' assignments, the target
/// assignment epoch, the members' metadata, the group epoch (Kafka's order).
pub fn tombstones(group: &str, g: &ConsumerGroup) -> Records {
    let mut out = Records::new();
    for id in g.members.keys() {
        out.push((key(current_key(group, id)), None));
    }
    for id in g.members.keys() {
        out.push((key(target_key(group, id)), None));
    }
    out.push((
        key(Key::TargetEpoch {
            group: group.to_string(),
        }),
        None,
    ));
    for id in g.members.keys() {
        out.push((key(member_key(group, id)), None));
    }
    out.push((
        key(Key::GroupEpoch {
            group: group.to_string(),
        }),
        None,
    ));
    out
}

fn member_entry<'a>(g: &'a mut ConsumerGroup, id: &str) -> &'a mut Member {
    g.members
        .entry(id.to_string())
        .or_insert_with(|| Member::new(id))
}

fn set_current(m: &mut Member, v: CurrentValue) {
    m.epoch = v.epoch;
    m.previous_epoch = v.previous_epoch;
    m.state = v.state;
    m.assigned = v.assigned;
    m.pending_revocation = v.pending_revocation;
}

/// A consumer group as replayed so far.
#[derive(Debug, Clone, Default)]
pub struct Loading {
    pub group: ConsumerGroup,
    /// The metadata hash of the last group epoch record.
    pub metadata_hash: i64,
}

impl Loading {
    /// Applies one record of the group (in log order) to `slot`: the group epoch record
    /// creates the group and its tombstone deletes it; member records create the member they
    /// name.
    pub fn apply(slot: &mut Option<Loading>, k: &Key, value: Option<Bytes>) -> Result<(), String> {
        let Some(value) = value else {
            if matches!(k, Key::GroupEpoch { .. }) {
                *slot = None;
                return Ok(());
            }
            let Some(l) = slot.as_mut() else {
                return Ok(());
            };
            let g = &mut l.group;
            match k {
                Key::Member { member, .. } => {
                    g.members.remove(member);
                }
                Key::TargetMember { member, .. } => {
                    g.target.remove(member);
                }
                Key::CurrentAssignment { member, .. } => {
                    if let Some(m) = g.members.get_mut(member) {
                        set_current(m, current_value(&Member::new(member)));
                    }
                }
                Key::TargetEpoch { .. } => g.assignment_epoch = 0,
                Key::GroupEpoch { .. } => {}
            }
            return Ok(());
        };
        let l = slot.get_or_insert_with(Loading::default);
        let g = &mut l.group;
        match k {
            Key::GroupEpoch { .. } => {
                let v = rec::decode_group_epoch(value)?;
                g.group_epoch = v.epoch;
                l.metadata_hash = v.metadata_hash;
            }
            Key::Member { member, .. } => {
                let v = rec::decode_member(value)?;
                let m = member_entry(g, member);
                m.instance_id = v.instance_id;
                m.rack_id = v.rack_id;
                m.client_id = v.client_id;
                m.client_host = v.client_host;
                m.subscribed_names = v.subscribed_names;
                m.subscribed_regex = v.subscribed_regex;
                m.rebalance_timeout_ms = v.rebalance_timeout_ms;
                m.server_assignor = v.server_assignor;
                m.classic = v.classic.map(|c| super::classic::ClassicMember {
                    protocols: c.protocols,
                    session_timeout_ms: c.session_timeout_ms,
                });
            }
            Key::TargetEpoch { .. } => g.assignment_epoch = rec::decode_target_epoch(value)?,
            Key::TargetMember { member, .. } => {
                g.target
                    .insert(member.clone(), rec::decode_target_member(value)?);
            }
            Key::CurrentAssignment { member, .. } => {
                let v = rec::decode_current(value)?;
                set_current(member_entry(g, member), v);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "persist_tests.rs"]
pub(crate) mod tests;
