//! Classic members in consumer groups and the conversions between the two kinds of group
//! (KIP-848's online migration, Kafka's `ConsumerGroup.fromClassicGroup`,
//! `ClassicGroup.fromConsumerGroup` and the classic paths of `GroupMetadataManager`). Pure:
//! the coordinator holds the group's lock and performs the timers and answers.
//!
//! * A non-empty classic group whose protocol type is `consumer` becomes a consumer group when
//!   a consumer-protocol member joins (if `group.consumer.migration.policy` allows upgrades):
//!   each classic member keeps its last assignment as its current and target assignment at an
//!   epoch equal to the classic generation; the joining member then bumps the group epoch.
//! * A classic member (JoinGroup with protocol type `consumer`) of a non-empty consumer group
//!   is a consumer-group member whose subscription and owned partitions come from its
//!   ConsumerProtocolSubscription; the server computes its assignment, its JoinGroup
//!   generation is its member epoch, and its SyncGroup answer is its assigned partitions.
//! * When the last consumer-protocol member leaves or is fenced and classic members remain,
//!   the group becomes classic again (if the policy allows downgrades) with their target
//!   assignments, and a classic rebalance starts.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::ResponseError as E;

use super::heartbeat::{Error, Outcome, Request, Settings};
use super::{Assignment, ConsumerGroup, Member, MemberState, Topics};
use crate::group::state::{Group, JoinParams};

/// `group.consumer.migration.policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationPolicy {
    Bidirectional,
    Upgrade,
    Downgrade,
    Disabled,
}

impl MigrationPolicy {
    /// Kafka's names, case-insensitive.
    pub fn parse(s: &str) -> Option<MigrationPolicy> {
        match s.trim().to_ascii_lowercase().as_str() {
            "bidirectional" => Some(MigrationPolicy::Bidirectional),
            "upgrade" => Some(MigrationPolicy::Upgrade),
            "downgrade" => Some(MigrationPolicy::Downgrade),
            "disabled" => Some(MigrationPolicy::Disabled),
            _ => None,
        }
    }

    pub fn upgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Upgrade
        )
    }

    pub fn downgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Downgrade
        )
    }
}

/// What a member using the classic protocol adds to a consumer-group member (Kafka's
/// `ClassicMemberMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicMember {
    /// (protocol name, metadata) as its last JoinGroup gave them, in its order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub session_timeout_ms: i32,
}

impl ClassicMember {
    /// The protocol its JoinGroup and SyncGroup answers name: its most preferred one.
    pub fn protocol_name(&self) -> &str {
        self.protocols.first().map_or("", |(n, _)| n.as_str())
    }

    /// The ConsumerProtocol version of its most preferred protocol's metadata, which its
    /// assignment is encoded with.
    pub fn protocol_version(&self) -> i16 {
        self.protocols
            .first()
            .and_then(|(_, m)| (m.len() >= 2).then(|| (&m[..2]).get_i16()))
            .unwrap_or(0)
            .max(0)
    }

    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(n, _)| n == protocol)
    }
}

/// Partitions by topic name, as the ConsumerProtocol carries them.
pub type NamedPartitions = Vec<(String, Vec<i32>)>;

/// A ConsumerProtocolSubscription (versions 0-3; a later version's extra fields are ignored).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscription {
    pub version: i16,
    pub topics: Vec<String>,
    pub owned: NamedPartitions,
    pub rack_id: Option<String>,
}

fn get_string(b: &mut &[u8]) -> Option<Option<String>> {
    if b.remaining() < 2 {
        return None;
    }
    let len = b.get_i16();
    if len < 0 {
        return Some(None);
    }
    let len = len as usize;
    if b.remaining() < len {
        return None;
    }
    let s = String::from_utf8(b[..len].to_vec()).ok()?;
    b.advance(len);
    Some(Some(s))
}

fn get_count(b: &mut &[u8]) -> Option<usize> {
    if b.remaining() < 4 {
        return None;
    }
    let n = b.get_i32();
    // Each element takes at least 2 bytes: a count beyond the rest is malformed.
    (n >= 0 && (n as usize) <= b.remaining() / 2).then_some(n as usize)
}

fn skip_bytes(b: &mut &[u8]) -> Option<()> {
    if b.remaining() < 4 {
        return None;
    }
    let len = b.get_i32();
    if len >= 0 {
        if b.remaining() < len as usize {
            return None;
        }
        b.advance(len as usize);
    }
    Some(())
}

fn get_partitions(b: &mut &[u8]) -> Option<NamedPartitions> {
    let n = get_count(b)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let topic = get_string(b)??;
        let k = get_count(b)?;
        if b.remaining() < 4 * k {
            return None;
        }
        out.push((topic, (0..k).map(|_| b.get_i32()).collect()));
    }
    Some(out)
}

/// Decodes a ConsumerProtocolSubscription; None if it is malformed.
pub fn decode_subscription(meta: &[u8]) -> Option<Subscription> {
    let mut b = meta;
    if b.remaining() < 2 {
        return None;
    }
    let version = b.get_i16();
    if version < 0 {
        return None;
    }
    let n = get_count(&mut b)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        topics.push(get_string(&mut b)??);
    }
    skip_bytes(&mut b)?;
    let mut s = Subscription {
        version,
        topics,
        ..Default::default()
    };
    if version >= 1 {
        s.owned = get_partitions(&mut b)?;
    }
    if version >= 2 {
        if b.remaining() < 4 {
            return None;
        }
        b.get_i32();
    }
    if version >= 3 {
        s.rack_id = get_string(&mut b)?;
    }
    Some(s)
}

/// Decodes a ConsumerProtocolAssignment's partitions; None if it is malformed. An empty
/// assignment (a member that never synced) has no partitions.
pub fn decode_assignment(bytes: &[u8]) -> Option<NamedPartitions> {
    if bytes.is_empty() {
        return Some(Vec::new());
    }
    let mut b = bytes;
    if b.remaining() < 2 || b.get_i16() < 0 {
        return None;
    }
    get_partitions(&mut b)
}

/// Encodes a ConsumerProtocolAssignment (every version has the same fields) with no user
/// data.
pub fn encode_assignment(version: i16, parts: &NamedPartitions) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(version);
    b.put_i32(parts.len() as i32);
    for (topic, ps) in parts {
        b.put_i16(topic.len() as i16);
        b.put_slice(topic.as_bytes());
        b.put_i32(ps.len() as i32);
        for p in ps {
            b.put_i32(*p);
        }
    }
    b.put_i32(-1);
    b.freeze()
}

/// Partitions by topic id → by topic name (topics no longer known are left out).
pub fn to_named(a: &Assignment, topics: &Topics) -> NamedPartitions {
    let names: BTreeMap<_, _> = topics.iter().map(|(n, t)| (t.id, n)).collect();
    a.iter()
        .filter(|(_, ps)| !ps.is_empty())
        .filter_map(|(id, ps)| {
            names
                .get(id)
                .map(|n| ((*n).clone(), ps.iter().copied().collect()))
        })
        .collect()
}

/// Partitions by topic name → by topic id (topics not known, or partitions beyond a topic's
/// count, are left out).
pub fn to_ids(parts: &NamedPartitions, topics: &Topics) -> Assignment {
    let mut out = Assignment::new();
    for (name, ps) in parts {
        let Some(t) = topics.get(name) else {
            continue;
        };
        for &p in ps {
            if p >= 0 && p < t.partitions {
                out.entry(t.id).or_default().insert(p);
            }
        }
    }
    out
}

/// The member's assigned partitions as its SyncGroup answer carries them.
pub fn sync_assignment(m: &Member, topics: &Topics) -> Bytes {
    let version = m
        .classic
        .as_ref()
        .map_or(0, ClassicMember::protocol_version);
    encode_assignment(version, &to_named(&m.assigned, topics))
}

/// Why a classic group stays classic when a consumer-protocol member joins it: Kafka's
/// `validateOnlineUpgrade` (its log line says which). None: it may be upgraded.
pub fn upgrade_refusal(g: &Group, s: &Settings) -> Option<&'static str> {
    if !s.migration.upgrade_enabled() {
        Some("the online upgrade is disabled")
    } else if g.protocol_type.as_deref() != Some("consumer") {
        Some("the group does not use the consumer embedded protocol")
    } else if g.members.len() > s.max_size {
        Some("the group size exceeds the consumer group maximum size")
    } else {
        None
    }
}

/// Kafka's `ConsumerGroup.fromClassicGroup`: every classic member at the generation as its
/// epoch, Stable, its last assignment as its current and target assignment, its
/// subscription decoded from the metadata of the group's protocol. Err: a member's
/// subscription or assignment is malformed.
pub fn from_classic(g: &Group, topics: &Topics) -> Result<ConsumerGroup, ()> {
    let protocol = g.protocol.as_deref().unwrap_or("");
    let mut cg = ConsumerGroup {
        group_epoch: g.generation,
        assignment_epoch: g.generation,
        ..Default::default()
    };
    for cm in g.members.values() {
        let sub = decode_subscription(&cm.metadata(protocol)).ok_or(())?;
        let assigned = to_ids(&decode_assignment(&cm.assignment).ok_or(())?, topics);
        let mut m = Member::new(&cm.id);
        m.instance_id.clone_from(&cm.instance_id);
        m.rack_id = sub.rack_id;
        m.client_id.clone_from(&cm.client_id);
        m.client_host.clone_from(&cm.client_host);
        m.rebalance_timeout_ms = cm.rebalance_timeout_ms;
        let mut names = sub.topics;
        names.sort();
        names.dedup();
        m.subscribed_names = names;
        m.epoch = g.generation;
        m.previous_epoch = g.generation;
        m.state = MemberState::Stable;
        m.assigned = assigned.clone();
        m.classic = Some(ClassicMember {
            protocols: cm.protocols.clone(),
            session_timeout_ms: cm.session_timeout_ms,
        });
        cg.target.insert(cm.id.clone(), assigned);
        cg.members.insert(cm.id.clone(), m);
    }
    Ok(cg)
}

/// Kafka's `validateOnlineDowngradeWithFencedMember`: whether removing `leaving` (a
/// consumer-protocol member) leaves only classic members, at least one, with downgrades
/// allowed.
pub fn downgrades_without(g: &ConsumerGroup, leaving: &str, s: &Settings) -> bool {
    let Some(m) = g.members.get(leaving) else {
        return false;
    };
    m.classic.is_none()
        && g.members.len() > 1
        && g.members
            .values()
            .all(|o| o.id == leaving || o.classic.is_some())
        && s.migration.downgrade_enabled()
}

/// A classic member of the group a downgrade makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DowngradedMember {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocols: Vec<(String, Bytes)>,
    /// Its target assignment, encoded with the version of the selected protocol's metadata.
    pub assignment: Bytes,
}

/// The classic group a downgrade makes (Kafka's `ClassicGroup.fromConsumerGroup`): the
/// group epoch as its generation, the remaining members in member-id order (the first is the
/// leader), the protocol every member supports that most prefer, each member's target
/// assignment. The caller then starts a rebalance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Downgraded {
    pub generation: i32,
    pub protocol: String,
    pub members: Vec<DowngradedMember>,
}

pub fn to_classic(g: &ConsumerGroup, leaving: &str, topics: &Topics) -> Option<Downgraded> {
    let staying: Vec<&Member> = g.members.values().filter(|m| m.id != leaving).collect();
    let classic: Vec<&ClassicMember> = staying
        .iter()
        .map(|m| m.classic.as_ref())
        .collect::<Option<_>>()?;
    let protocols: Vec<&[(String, Bytes)]> =
        classic.iter().map(|c| c.protocols.as_slice()).collect();
    let protocol = crate::group::state::select_protocol(&protocols)?;
    let members = staying
        .iter()
        .zip(&classic)
        .map(|(m, c)| {
            let meta = c
                .protocols
                .iter()
                .find(|(n, _)| *n == protocol)
                .map(|(_, b)| b.clone())
                .unwrap_or_default();
            let version = if meta.len() >= 2 {
                (&meta[..2]).get_i16().max(0)
            } else {
                0
            };
            let target = g.target.get(&m.id).cloned().unwrap_or_default();
            DowngradedMember {
                id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                session_timeout_ms: c.session_timeout_ms,
                protocols: c.protocols.clone(),
                assignment: encode_assignment(version, &to_named(&target, topics)),
            }
        })
        .collect();
    Some(Downgraded {
        generation: g.group_epoch,
        protocol,
        members,
    })
}

/// What a classic member's JoinGroup to a consumer group is answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinOutcome {
    /// MEMBER_ID_REQUIRED with this id.
    MemberIdRequired(String),
    /// The member is in the group at this epoch (its generation); `protocol` is its most
    /// preferred one.
    Joined {
        member_id: String,
        epoch: i32,
        protocol: String,
    },
}

fn err(e: E, message: impl Into<String>) -> Error {
    Error {
        code: e.code(),
        message: Some(message.into()),
    }
}

/// Kafka's `ConsumerGroup.supportsClassicProtocols`: the `consumer` protocol type and one
/// protocol every classic member supports.
fn supports_classic(g: &ConsumerGroup, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
    if protocol_type != "consumer" || protocols.is_empty() {
        return false;
    }
    protocols.iter().any(|(n, _)| {
        g.members
            .values()
            .filter_map(|m| m.classic.as_ref())
            .all(|c| c.supports(n))
    })
}

/// Kafka's `classicGroupJoinToConsumerGroup`: the member is created or updated from its
/// subscription (topics, rack, owned partitions), the group epoch bumps if its subscription
/// changed, and it takes one reconciliation step with the partitions it says it owns.
pub fn join(
    g: &mut ConsumerGroup,
    j: &JoinParams,
    topics: &Topics,
    s: &Settings,
    new_id: &dyn Fn() -> String,
) -> Result<JoinOutcome, Error> {
    let unknown = j.member_id.is_empty();
    let member_id = if unknown {
        new_id()
    } else {
        j.member_id.clone()
    };
    if g.members.len() >= s.max_size && (unknown || !g.members.contains_key(&member_id)) {
        return Err(err(
            E::GroupMaxSizeReached,
            format!(
                "The consumer group has reached its maximum capacity of {} members.",
                s.max_size
            ),
        ));
    }
    if !supports_classic(g, &j.protocol_type, &j.protocols) {
        return Err(err(
            E::InconsistentGroupProtocol,
            format!("Member {member_id}'s protocols are not supported."),
        ));
    }
    if unknown && j.instance_id.is_none() && j.require_known_member_id {
        return Ok(JoinOutcome::MemberIdRequired(member_id));
    }
    let Some(sub) = decode_subscription(&j.protocols[0].1) else {
        return Err(err(
            E::UnknownServerError,
            "Malformed embedded consumer protocol in subscription deserialization.",
        ));
    };
    let mut bump = false;
    let mut member = match &j.instance_id {
        None => match g.members.get(&member_id) {
            Some(m) => m.clone(),
            None => {
                bump = true;
                Member::new(&member_id)
            }
        },
        Some(inst) => match g.static_member(inst).cloned() {
            None if !unknown => {
                return Err(err(
                    E::UnknownMemberId,
                    format!("Instance id {inst} is unknown."),
                ));
            }
            None => {
                bump = true;
                let mut m = Member::new(&member_id);
                m.instance_id = Some(inst.clone());
                m
            }
            Some(old) if old.id == member_id => old,
            Some(_) if !unknown => {
                return Err(err(
                    E::FencedInstanceId,
                    format!(
                        "Static member {member_id} with instance id {inst} is not the member known by the group coordinator."
                    ),
                ));
            }
            Some(old) => {
                // The new member id continues the instance: its assignment and target.
                let mut m = old.clone();
                m.id = member_id.clone();
                m.epoch = 0;
                m.previous_epoch = 0;
                g.members.remove(&old.id);
                if let Some(t) = g.target.remove(&old.id) {
                    g.target.insert(member_id.clone(), t);
                }
                m
            }
        },
    };
    member.classic = Some(ClassicMember {
        protocols: j.protocols.clone(),
        session_timeout_ms: j.session_timeout_ms,
    });
    let r = Request {
        member_id: member_id.clone(),
        member_epoch: 0,
        instance_id: j.instance_id.clone(),
        rack_id: sub.rack_id,
        rebalance_timeout_ms: j.rebalance_timeout_ms,
        subscribed_names: Some(sub.topics),
        owned: Some(to_ids(&sub.owned, topics)),
        client_id: j.client_id.clone(),
        client_host: j.client_host.clone(),
        ..Default::default()
    };
    let epoch = match super::heartbeat::apply(g, member, &r, bump, true, topics, s) {
        Outcome::Member { epoch, .. } | Outcome::Left { epoch, .. } => epoch,
    };
    let protocol = j.protocols[0].0.clone();
    Ok(JoinOutcome::Joined {
        member_id,
        epoch,
        protocol,
    })
}

/// The member a classic SyncGroup, Heartbeat or LeaveGroup names (Kafka's
/// `validateConsumerGroupMember` and `throwIfMemberDoesNotUseClassicProtocol`).
pub fn classic_member<'a>(
    group_id: &str,
    g: &'a ConsumerGroup,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<&'a Member, Error> {
    let m = match instance_id {
        None => g.members.get(member_id).ok_or_else(|| {
            err(
                E::UnknownMemberId,
                format!("Member {member_id} is not a member of group {group_id}."),
            )
        })?,
        Some(inst) => {
            let m = g.static_member(inst).ok_or_else(|| {
                err(
                    E::UnknownMemberId,
                    format!("Member with instance id {inst} is not a member of group {group_id}."),
                )
            })?;
            if m.id != member_id {
                return Err(err(
                    E::FencedInstanceId,
                    format!(
                        "Static member {member_id} with instance id {inst} is not the member known by the group coordinator."
                    ),
                ));
            }
            m
        }
    };
    if m.classic.is_none() {
        return Err(err(
            E::UnknownMemberId,
            format!("Member {} does not use the classic protocol.", m.id),
        ));
    }
    Ok(m)
}

fn check_generation(m: &Member, generation: i32) -> Result<(), Error> {
    if generation != m.epoch {
        return Err(err(
            E::IllegalGeneration,
            format!(
                "The request generation id {generation} is not equal to the member epoch {} of member {}.",
                m.epoch, m.id
            ),
        ));
    }
    Ok(())
}

/// What a classic member's SyncGroup is answered with: its assigned partitions, or the error
/// (REBALANCE_IN_PROGRESS: the group epoch moved past the member's and it is not revoking, so
/// it must join again; the caller arms its join timeout).
pub fn sync(
    group_id: &str,
    g: &ConsumerGroup,
    member_id: &str,
    instance_id: Option<&str>,
    generation: i32,
    protocol_type: Option<&str>,
    protocol_name: Option<&str>,
    topics: &Topics,
) -> Result<Bytes, Error> {
    let m = classic_member(group_id, g, member_id, instance_id)?;
    check_generation(m, generation)?;
    let ours = m.classic.as_ref().map_or("", ClassicMember::protocol_name);
    if let Some(t) = protocol_type.filter(|t| *t != "consumer") {
        return Err(err(
            E::InconsistentGroupProtocol,
            format!(
                "The protocol type {t} from member {} request is not equal to the group protocol type consumer.",
                m.id
            ),
        ));
    }
    if let Some(n) = protocol_name.filter(|n| *n != ours) {
        return Err(err(
            E::InconsistentGroupProtocol,
            format!(
                "The protocol name {n} from member {} request is not equal to the protocol name {ours} returned in the join response.",
                m.id
            ),
        ));
    }
    if g.group_epoch > m.epoch && m.state != MemberState::UnrevokedPartitions {
        return Err(err(
            E::RebalanceInProgress,
            format!(
                "A new rebalance is triggered in group {group_id} and member {} should rejoin to catch up.",
                m.id
            ),
        ));
    }
    Ok(sync_assignment(m, topics))
}

/// Kafka's `classicGroupHeartbeatToConsumerGroup`: Ok(true) when the member must join again
/// (REBALANCE_IN_PROGRESS: the group epoch moved past its epoch, it must revoke, or
/// partitions it waits for are free now).
pub fn heartbeat(
    group_id: &str,
    g: &ConsumerGroup,
    member_id: &str,
    instance_id: Option<&str>,
    generation: i32,
) -> Result<bool, Error> {
    let m = classic_member(group_id, g, member_id, instance_id)?;
    check_generation(m, generation)?;
    Ok(m.epoch < g.group_epoch
        || m.state == MemberState::UnrevokedPartitions
        || (m.state == MemberState::UnreleasedPartitions && !waits_on_unreleased(g, m)))
}

/// Kafka's `waitingOnUnreleasedPartition`: a partition of its target is still held by
/// another member.
fn waits_on_unreleased(g: &ConsumerGroup, m: &Member) -> bool {
    let Some(target) = g.target.get(&m.id) else {
        return false;
    };
    target.iter().any(|(t, ps)| {
        ps.iter().any(|&p| {
            !m.assigned.get(t).is_some_and(|a| a.contains(&p)) && g.owned_by_other(&m.id, t, p)
        })
    })
}

#[cfg(test)]
#[path = "classic_tests.rs"]
mod tests;
