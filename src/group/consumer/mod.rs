//! KIP-848 consumer groups: the group coordinator decides the assignment (Kafka's
//! `ConsumerGroup`, `ConsumerGroupMember`, `CurrentAssignmentBuilder` and server-side
//! assignors). Everything here is pure: the coordinator (`coordinator/consumer.rs`) holds a
//! group's lock, calls in with the current time and topic metadata, and performs the timers
//! and writes the answers ask for.
//!
//! * `assignor`: the `uniform` and `range` server-side assignors (target assignment).
//! * `reconcile`: a member's way from its current assignment to its target, one heartbeat at a
//!   time (a partition goes to its new owner only once the previous owner has revoked it).
//! * `heartbeat`: ConsumerGroupHeartbeat's validation, joins, leaves and epochs.
//! * `classic`: classic-protocol members of consumer groups, and the conversions between
//!   classic and consumer groups (online upgrade and downgrade).
//! * `records`, `persist`: the group's records in `__consumer_offsets` (which a change
//!   writes, and the group replayed from them).

pub mod assignor;
pub mod classic;
pub mod heartbeat;
pub mod persist;
pub mod reconcile;
pub mod records;

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

/// Partitions by topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// Member epoch of a static member that left temporarily (it keeps its assignment until its
/// session expires or its instance id joins again).
pub const LEAVE_STATIC_EPOCH: i32 = -2;
/// Member epoch of a member leaving the group.
pub const LEAVE_EPOCH: i32 = -1;

/// A topic as the assignment sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMeta {
    pub id: Uuid,
    pub partitions: i32,
    pub internal: bool,
}

/// Every topic of the cluster, by name.
pub type Topics = BTreeMap<String, TopicMeta>;

/// Kafka's `MemberState` of a consumer-protocol member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// At its target assignment's epoch with every partition of it.
    Stable,
    /// Must revoke `pending_revocation` before it moves on (keeps its epoch meanwhile).
    UnrevokedPartitions,
    /// At the target epoch, waiting for partitions other members have not released yet.
    UnreleasedPartitions,
}

impl MemberState {
    pub fn name(self) -> &'static str {
        match self {
            MemberState::Stable => "STABLE",
            MemberState::UnrevokedPartitions => "UNREVOKED_PARTITIONS",
            MemberState::UnreleasedPartitions => "UNRELEASED_PARTITIONS",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub subscribed_names: Vec<String>,
    pub subscribed_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub state: MemberState,
    pub epoch: i32,
    pub previous_epoch: i32,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
    /// Set for a member that uses the classic protocol (JoinGroup, SyncGroup, Heartbeat).
    pub classic: Option<classic::ClassicMember>,
}

impl Member {
    pub fn new(id: &str) -> Member {
        Member {
            id: id.to_string(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: -1,
            subscribed_names: Vec::new(),
            subscribed_regex: None,
            server_assignor: None,
            state: MemberState::Stable,
            epoch: 0,
            previous_epoch: 0,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            classic: None,
        }
    }

    /// Kafka's `validateMemberEpoch` for offset requests: a classic member gives its
    /// generation (ILLEGAL_GENERATION when it is not its epoch), a consumer-protocol member
    /// its epoch (STALE_MEMBER_EPOCH).
    fn check_epoch(&self, received: i32) -> Result<(), i16> {
        use kafka_protocol::ResponseError as E;
        match (received == self.epoch, self.classic.is_some()) {
            (true, _) => Ok(()),
            (false, true) => Err(E::IllegalGeneration.code()),
            (false, false) => Err(E::StaleMemberEpoch.code()),
        }
    }

    /// The topics this member subscribes to (names, and regex matches among non-internal
    /// topics), by name, that exist.
    pub fn subscribed_topics<'a>(&self, topics: &'a Topics) -> BTreeMap<&'a str, &'a TopicMeta> {
        let mut out = BTreeMap::new();
        for n in &self.subscribed_names {
            if let Some((k, t)) = topics.get_key_value(n.as_str()) {
                out.insert(k.as_str(), t);
            }
        }
        if let Some(re) = self.subscribed_regex.as_deref().and_then(compile_regex) {
            for (k, t) in topics {
                if !t.internal && re.is_match(k) {
                    out.insert(k.as_str(), t);
                }
            }
        }
        out
    }
}

/// A subscription regex (RE2/J syntax, which the `regex` crate follows closely), matched
/// against the whole topic name as Java's `Pattern.matcher(..).matches()` does.
pub fn compile_regex(re: &str) -> Option<regex::Regex> {
    regex::Regex::new(&format!("^(?:{re})$")).ok()
}

/// Kafka's `ConsumerGroup`: the group epoch (bumped when members or their subscriptions
/// change), the target assignment and its epoch, the members.
#[derive(Debug, Clone, Default)]
pub struct ConsumerGroup {
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, Member>,
    /// Member id → its partitions in the target assignment of `assignment_epoch`.
    pub target: BTreeMap<String, Assignment>,
    /// The subscribed topics (name → id, partition count) the group epoch was computed with.
    pub subscribed: BTreeMap<String, (Uuid, i32)>,
    /// The assignor the last target assignment was computed with.
    pub assignor: Option<String>,
}

/// Kafka's `ConsumerGroupState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    Assigning,
    Reconciling,
    Stable,
}

impl GroupState {
    /// The name Kafka shows (ListGroups, ConsumerGroupDescribe).
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::Assigning => "Assigning",
            GroupState::Reconciling => "Reconciling",
            GroupState::Stable => "Stable",
        }
    }
}

impl ConsumerGroup {
    pub fn state(&self) -> GroupState {
        if self.members.is_empty() {
            GroupState::Empty
        } else if self.group_epoch != self.assignment_epoch {
            GroupState::Assigning
        } else if self.members.values().any(|m| {
            m.state != MemberState::Stable
                || (m.epoch != self.assignment_epoch && m.epoch != LEAVE_STATIC_EPOCH)
        }) {
            GroupState::Reconciling
        } else {
            GroupState::Stable
        }
    }

    pub fn static_member(&self, instance_id: &str) -> Option<&Member> {
        self.members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance_id))
    }

    /// Whether `topic`/`partition` is held (assigned or pending revocation) by a member other
    /// than `except`: Kafka's current partition epoch is not -1.
    pub fn owned_by_other(&self, except: &str, topic: &Uuid, partition: i32) -> bool {
        self.members.values().any(|m| {
            m.id != except
                && (m
                    .assigned
                    .get(topic)
                    .is_some_and(|p| p.contains(&partition))
                    || m.pending_revocation
                        .get(topic)
                        .is_some_and(|p| p.contains(&partition)))
        })
    }

    /// The subscribed topics of all members (Kafka's subscription metadata).
    pub fn compute_subscribed(&self, topics: &Topics) -> BTreeMap<String, (Uuid, i32)> {
        let mut out = BTreeMap::new();
        for m in self.members.values() {
            for (name, t) in m.subscribed_topics(topics) {
                out.insert(name.to_string(), (t.id, t.partitions));
            }
        }
        out
    }

    /// Removes a member (fenced, expired or left): its target goes too and the group epoch
    /// moves, so the next heartbeat computes a new target assignment.
    pub fn remove_member(&mut self, id: &str) -> Option<Member> {
        let m = self.members.remove(id)?;
        self.target.remove(id);
        self.group_epoch += 1;
        Some(m)
    }
}

impl ConsumerGroup {
    /// Kafka's `ConsumerGroup.validateOffsetCommit`: a commit with a negative epoch is an
    /// admin's or a standalone consumer's, allowed while the group is empty; otherwise the
    /// member must be known (UNKNOWN_MEMBER_ID), use OffsetCommit v9+ (UNSUPPORTED_VERSION) and
    /// give its current epoch (STALE_MEMBER_EPOCH).
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
        transactional: bool,
        version: i16,
    ) -> Result<(), i16> {
        use kafka_protocol::ResponseError as E;
        if member_epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let Some(m) = self.members.get(member_id) else {
            return Err(E::UnknownMemberId.code());
        };
        if !transactional && m.classic.is_none() && version < 9 {
            return Err(E::UnsupportedVersion.code());
        }
        m.check_epoch(member_epoch)
    }

    /// Kafka's `ConsumerGroup.validateOffsetFetch`: without a member id and epoch (admin
    /// clients, OffsetFetch before v9) any fetch is allowed.
    pub fn validate_offset_fetch(
        &self,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), i16> {
        use kafka_protocol::ResponseError as E;
        let Some(id) = member_id else {
            return Ok(());
        };
        if member_epoch < 0 && id.is_empty() {
            return Ok(());
        }
        let Some(m) = self.members.get(id) else {
            return Err(E::UnknownMemberId.code());
        };
        m.check_epoch(member_epoch)
    }
}
