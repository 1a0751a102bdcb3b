//! The state of one classic group: Kafka's state machine states, members, the generation,
//! and the group's offsets. Pure data plus small queries; the transitions are decided by
//! `group::membership` and carried out by the coordinator, which owns each group behind its
//! own lock.

use std::collections::{HashMap, HashSet};

use bytes::{Buf, Bytes};
use kafka_protocol::ResponseError as E;
use tokio::time::Instant;

use super::consumer::ConsumerGroup;
use super::offset_state::OffsetState;
use super::records::{GroupValue, MemberValue};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl State {
    /// The name Kafka uses in DescribeGroups and ListGroups.
    pub fn name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::PreparingRebalance => "PreparingRebalance",
            State::CompletingRebalance => "CompletingRebalance",
            State::Stable => "Stable",
            State::Dead => "Dead",
        }
    }
}

/// A JoinGroup request.
pub struct JoinParams {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED.
    pub require_known_member_id: bool,
    /// JoinGroup v9+: a rejoining static leader may be told to skip the assignment.
    pub supports_skip_assignment: bool,
}

/// A SyncGroup request.
pub struct SyncParams {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

/// What a JoinGroup request is answered with.
#[derive(Debug, Clone, Default)]
pub struct JoinResult {
    pub error: i16,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    pub skip_assignment: bool,
    /// (member id, group instance id, metadata): for the leader only.
    pub members: Vec<(String, Option<String>, Bytes)>,
}

impl JoinResult {
    pub fn error(error: i16, member_id: &str) -> JoinResult {
        JoinResult {
            error,
            generation: -1,
            member_id: member_id.to_string(),
            ..Default::default()
        }
    }
}

/// What a SyncGroup request is answered with.
#[derive(Debug, Clone, Default)]
pub struct SyncResult {
    pub error: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResult {
    pub fn error(error: i16) -> SyncResult {
        SyncResult {
            error,
            ..Default::default()
        }
    }
}

pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    /// (protocol name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    /// A JoinGroup of this member waits for the join phase to complete.
    pub awaiting_join: bool,
    /// A SyncGroup of this member waits for the leader's assignment.
    pub awaiting_sync: bool,
    /// The session expires at this time (ms on the coordinator's timer clock) unless a
    /// heartbeat (or join, sync) moves it.
    pub deadline: i64,
    /// Joined but never completed a join phase: not kept alive while awaiting the join.
    pub is_new: bool,
    /// Join order within the group; also tells a member apart from an older one of the same id.
    pub seq: u64,
}

impl Member {
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(n, _)| n == protocol)
    }
}

pub struct Group {
    pub id: String,
    pub state: State,
    /// Wall-clock ms of the last state change (drives offset expiry of empty groups).
    pub state_ts: i64,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub generation: i32,
    pub leader: Option<String>,
    pub members: HashMap<String, Member>,
    /// group.instance.id → member id of the static members.
    pub statics: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not yet joined with.
    pub pending: HashSet<String>,
    /// A member joined a new group during the initial rebalance delay (it is extended).
    pub new_member_added: bool,
    /// Counts rebalances, so a stale rebalance timer recognises itself.
    pub rebalance_epoch: u64,
    /// The initial delay of a rebalance from Empty is running: no early completion.
    pub initial_delay: bool,
    /// How much of the rebalance timeout the initial delay may still be extended by.
    pub initial_delay_remaining_ms: i64,
    pub next_seq: u64,
    /// Committed offsets, and those of open transactions.
    pub offsets: OffsetState,
    /// Set when the group uses the consumer group protocol (KIP-848): its members are there,
    /// `members` above stays empty, and `state` is Stable while it has members, else Empty.
    pub consumer: Option<ConsumerSide>,
}

/// A consumer-protocol group: the group's state (pure) and per member the deadlines the
/// coordinator's timer watches.
#[derive(Default)]
pub struct ConsumerSide {
    pub group: ConsumerGroup,
    pub timers: HashMap<String, MemberTimer>,
    /// The group has records in `__consumer_offsets` (written or loaded).
    pub logged: bool,
    /// Loaded from the log: the metadata hash of the subscribed topics the group epoch was
    /// written with, until the first heartbeat compares the topics with it.
    pub loaded_hash: Option<i64>,
}

impl ConsumerSide {
    /// LeaveGroup for a member of a consumer group (Kafka's admin removal of members): by
    /// instance id (FENCED_INSTANCE_ID if a member id is given and is not the instance's) or
    /// member id; UNKNOWN_MEMBER_ID if there is none.
    pub fn remove_by_identity(&mut self, member_id: &str, instance_id: &Option<String>) -> i16 {
        let id = match instance_id {
            Some(inst) => match self.group.static_member(inst) {
                None => return E::UnknownMemberId.code(),
                Some(m) if !member_id.is_empty() && m.id != member_id => {
                    return E::FencedInstanceId.code();
                }
                Some(m) => m.id.clone(),
            },
            None => member_id.to_string(),
        };
        if self.group.remove_member(&id).is_none() {
            return E::UnknownMemberId.code();
        }
        self.timers.remove(&id);
        0
    }
}

pub struct MemberTimer {
    /// Tells a timer task of this member apart from one of an earlier member of the same id.
    pub seq: u64,
    pub session_deadline: Instant,
    /// Set while the member must revoke partitions: it is removed if it has not by then.
    pub revoke_deadline: Option<Instant>,
    /// A classic member told to join again (REBALANCE_IN_PROGRESS) is removed if its
    /// JoinGroup has not come by then (its rebalance timeout).
    pub join_deadline: Option<Instant>,
    /// A classic member that joined is removed if its SyncGroup has not come by then.
    pub sync_deadline: Option<Instant>,
}

impl MemberTimer {
    /// The earliest of its deadlines.
    pub fn next_deadline(&self) -> Instant {
        [self.revoke_deadline, self.join_deadline, self.sync_deadline]
            .into_iter()
            .flatten()
            .fold(self.session_deadline, Instant::min)
    }
}

impl Group {
    pub fn new(id: &str, now_ms: i64) -> Group {
        Group {
            id: id.to_string(),
            state: State::Empty,
            state_ts: now_ms,
            protocol_type: None,
            protocol: None,
            generation: 0,
            leader: None,
            members: HashMap::new(),
            statics: HashMap::new(),
            pending: HashSet::new(),
            new_member_added: false,
            rebalance_epoch: 0,
            initial_delay: false,
            initial_delay_remaining_ms: 0,
            next_seq: 0,
            offsets: OffsetState::default(),
            consumer: None,
        }
    }

    pub fn transition(&mut self, to: State, now_ms: i64) {
        self.state = to;
        self.state_ts = now_ms;
    }

    /// Whether a member with this protocol type and these protocols may join (Kafka's
    /// `supportsProtocols`): any in an empty group, else the same type and one protocol that
    /// every member supports.
    pub fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.state == State::Empty || self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols
                .iter()
                .any(|(n, _)| self.members.values().all(|m| m.supports(n)))
    }

    /// Kafka's `selectProtocol` over the members in join order.
    pub fn select_protocol(&self) -> Option<String> {
        let mut ordered: Vec<&Member> = self.members.values().collect();
        ordered.sort_by_key(|m| m.seq);
        let protocols: Vec<&[(String, Bytes)]> =
            ordered.iter().map(|m| m.protocols.as_slice()).collect();
        select_protocol(&protocols)
    }

    pub fn all_joined(&self) -> bool {
        self.pending.is_empty() && self.members.values().all(|m| m.awaiting_join)
    }

    pub fn is_static_fenced(&self, instance_id: Option<&str>, member_id: &str) -> bool {
        match instance_id.and_then(|i| self.statics.get(i)) {
            Some(id) => id != member_id,
            None => false,
        }
    }

    /// Kafka's `validateOffsetCommit` for a group that is not Dead: a commit without a
    /// generation (-1) to an empty group is a simple consumer's; otherwise a member, static
    /// instance or generation given must be this group's (UNKNOWN_MEMBER_ID,
    /// FENCED_INSTANCE_ID, ILLEGAL_GENERATION). A plain commit with none of them needs an
    /// empty group, and one during CompletingRebalance gets REBALANCE_IN_PROGRESS; a
    /// transactional commit (TxnOffsetCommit below v3 has no member fields) needs neither.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        transactional: bool,
    ) -> Result<(), i16> {
        if generation < 0 && self.state == State::Empty {
            return Ok(());
        }
        if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
            if let Some(inst) = instance_id {
                match self.statics.get(inst) {
                    None => return Err(E::UnknownMemberId.code()),
                    Some(id) if id != member_id => return Err(E::FencedInstanceId.code()),
                    Some(_) => {}
                }
            }
            if !self.members.contains_key(member_id) {
                return Err(E::UnknownMemberId.code());
            }
            if generation != self.generation {
                return Err(E::IllegalGeneration.code());
            }
        } else if !transactional {
            return Err(E::UnknownMemberId.code());
        }
        if !transactional && self.state == State::CompletingRebalance {
            return Err(E::RebalanceInProgress.code());
        }
        Ok(())
    }

    /// Removes a member; a new leader is the longest-standing remaining member.
    pub fn remove_member(&mut self, id: &str) -> Option<Member> {
        let m = self.members.remove(id)?;
        if let Some(inst) = &m.instance_id
            && self.statics.get(inst).map(String::as_str) == Some(id)
        {
            self.statics.remove(inst);
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = self.first_member();
        }
        Some(m)
    }

    /// Kafka's `replaceStaticMember`: the static member `old_id` continues as `new_id` with
    /// everything else kept (client, timeouts, protocols, assignment, join order, leadership).
    /// Returns whether the old id awaited a JoinGroup and a SyncGroup answer (the new id
    /// awaits neither), or None if there is no member `old_id`.
    pub fn replace_static_member(
        &mut self,
        instance: &str,
        old_id: &str,
        new_id: &str,
    ) -> Option<(bool, bool)> {
        let mut m = self.members.remove(old_id)?;
        let awaited = (m.awaiting_join, m.awaiting_sync);
        m.awaiting_join = false;
        m.awaiting_sync = false;
        m.id = new_id.to_string();
        self.members.insert(new_id.to_string(), m);
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.to_string());
        }
        self.statics
            .insert(instance.to_string(), new_id.to_string());
        Some(awaited)
    }

    pub fn first_member(&self) -> Option<String> {
        self.members
            .values()
            .min_by_key(|m| m.seq)
            .map(|m| m.id.clone())
    }

    pub fn max_rebalance_timeout_ms(&self) -> i32 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    /// Topics the members subscribe to, when the group uses the consumer protocol and its
    /// subscriptions parse (Kafka's `computeSubscribedTopics`); `None` when unknown.
    pub fn subscribed_topics(&self) -> Option<HashSet<String>> {
        if let Some(c) = &self.consumer {
            return Some(c.group.subscribed.keys().cloned().collect());
        }
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        if self.members.is_empty() {
            return Some(HashSet::new());
        }
        let protocol = self.protocol.as_deref()?;
        let mut all = HashSet::new();
        for m in self.members.values() {
            all.extend(subscription_topics(&m.metadata(protocol))?);
        }
        Some(all)
    }

    /// Kafka's `isSubscribedToTopic`.
    pub fn is_subscribed_to(&self, topic: &str) -> bool {
        match self.subscribed_topics() {
            Some(t) => t.contains(topic),
            None => self.protocol_type.as_deref() == Some("consumer"),
        }
    }

    /// The GroupMetadataValue of the current generation.
    pub fn to_value(&self) -> GroupValue {
        let protocol = self.protocol.clone();
        let mut members: Vec<&Member> = self.members.values().collect();
        members.sort_by_key(|m| m.seq);
        GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: protocol.clone(),
            leader: self.leader.clone(),
            state_timestamp: self.state_ts,
            members: members
                .into_iter()
                .map(|m| MemberValue {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: protocol
                        .as_deref()
                        .map(|p| m.metadata(p))
                        .unwrap_or_default(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }
}

/// Kafka's `selectProtocol`: among the protocols every member supports, each member votes
/// for its most preferred one; most votes wins (ties: the first member's preference order).
/// Each member's protocols are (name, metadata) in its order of preference.
pub fn select_protocol(members: &[&[(String, Bytes)]]) -> Option<String> {
    let supports = |ps: &[(String, Bytes)], n: &str| ps.iter().any(|(p, _)| p == n);
    let first = members.first()?;
    let candidates: Vec<&String> = first
        .iter()
        .map(|(n, _)| n)
        .filter(|n| members.iter().all(|m| supports(m, n)))
        .collect();
    let mut votes: HashMap<&String, usize> = HashMap::new();
    for m in members {
        if let Some((n, _)) = m.iter().find(|(n, _)| candidates.contains(&n)) {
            *votes.entry(n).or_default() += 1;
        }
    }
    let best = votes.values().copied().max()?;
    candidates
        .into_iter()
        .find(|n| votes.get(n) == Some(&best))
        .cloned()
}

/// The topics of a ConsumerProtocolSubscription (every version starts with v0's fields:
/// version, topics, user data).
pub fn subscription_topics(meta: &[u8]) -> Option<Vec<String>> {
    let mut b = meta;
    if b.remaining() < 6 {
        return None;
    }
    let _version = b.get_i16();
    let n = b.get_i32();
    if n < 0 {
        return None;
    }
    let mut out = Vec::new();
    for _ in 0..n {
        if b.remaining() < 2 {
            return None;
        }
        let len = b.get_i16();
        if len < 0 || b.remaining() < len as usize {
            return None;
        }
        out.push(String::from_utf8(b[..len as usize].to_vec()).ok()?);
        b.advance(len as usize);
    }
    Some(out)
}
