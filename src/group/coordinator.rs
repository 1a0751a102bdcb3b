//! Kafka's classic group coordinator.
//!
//! Each group is owned by its own async mutex (`GroupCell`); the map from group id to group is
//! locked only to look up, insert or remove. Requests that must wait for a rebalance (JoinGroup
//! until the join phase completes, SyncGroup until the leader's assignment is stored) leave a
//! oneshot sender in their member and await the receiver after releasing the group lock.
//! Timers are tokio tasks (session expiry per member, the rebalance timeout and the initial
//! rebalance delay per rebalance), so they follow a paused tokio clock in tests.
//!
//! Writes to `__consumer_offsets` (group metadata when a generation's assignment is stored or a
//! group empties, offset commits, tombstones) are made under the group's lock and a request is
//! answered only after its write.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use tokio::sync::oneshot;
use tokio::time::{Instant, sleep, sleep_until};
use tracing::{debug, info};

use super::records::{self, Key, OffsetValue};
use super::state::{Committed, Group, JoinResult, Member, State, SyncResult};
use super::store::{Loaded, OffsetsLog, Records};
use crate::broker::now_ms;

pub type GroupCell = tokio::sync::Mutex<Group>;

/// Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a member that joins a group for the first
/// time and never completes the join phase is dropped after this long.
const NEW_MEMBER_JOIN_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub initial_rebalance_delay_ms: u64,
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_interval_ms: u64,
    pub offset_metadata_max_bytes: usize,
}

impl GroupConfig {
    pub fn from_broker(c: &crate::config::BrokerConfig) -> GroupConfig {
        GroupConfig {
            min_session_timeout_ms: c.group_min_session_timeout_ms,
            max_session_timeout_ms: c.group_max_session_timeout_ms,
            initial_rebalance_delay_ms: c.group_initial_rebalance_delay_ms,
            offsets_retention_ms: c.offsets_retention_minutes * 60_000,
            offsets_retention_check_interval_ms: c.offsets_retention_check_interval_ms,
            offset_metadata_max_bytes: c.offset_metadata_max_bytes,
        }
    }
}

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

pub struct SyncParams {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

pub struct CommitOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

pub struct CommitParams {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    /// OffsetCommit v9+ answers GROUP_ID_NOT_FOUND rather than ILLEGAL_GENERATION.
    pub version: i16,
    pub offsets: Vec<CommitOffset>,
}

/// One partition's committed offset as OffsetFetch reports it.
pub struct FetchedOffset {
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
}

pub struct DescribedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

pub struct Described {
    pub state: State,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<DescribedMember>,
}

pub struct Listed {
    pub group_id: String,
    pub protocol_type: String,
    pub state: State,
}

enum Reply<T> {
    Now(T),
    Later(oneshot::Receiver<T>),
}

pub struct Coordinator {
    cfg: GroupConfig,
    groups: Mutex<HashMap<String, Arc<GroupCell>>>,
    log: Arc<dyn OffsetsLog>,
}

impl Coordinator {
    pub fn new(cfg: GroupConfig, log: Arc<dyn OffsetsLog>) -> Arc<Coordinator> {
        Arc::new(Coordinator {
            cfg,
            groups: Mutex::new(HashMap::new()),
            log,
        })
    }

    pub fn config(&self) -> &GroupConfig {
        &self.cfg
    }

    fn get(&self, id: &str) -> Option<Arc<GroupCell>> {
        self.groups.lock().unwrap().get(id).cloned()
    }

    fn get_or_create(&self, id: &str) -> Arc<GroupCell> {
        self.groups
            .lock()
            .unwrap()
            .entry(id.to_string())
            .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(Group::new(id, now_ms()))))
            .clone()
    }

    fn cells(&self) -> Vec<Arc<GroupCell>> {
        self.groups.lock().unwrap().values().cloned().collect()
    }

    /// Removes a group that is now Dead from the map (the caller holds its lock).
    fn forget(&self, cell: &Arc<GroupCell>, id: &str) {
        let mut m = self.groups.lock().unwrap();
        if m.get(id).is_some_and(|c| Arc::ptr_eq(c, cell)) {
            m.remove(id);
        }
    }

    // ---- loading ---------------------------------------------------------------------------

    /// Installs the groups replayed from `__consumer_offsets`. Groups with members come back
    /// Stable (their sessions restart when [`Coordinator::start`] runs), others Empty.
    pub fn install(&self, loaded: HashMap<String, Loaded>) {
        let now = now_ms();
        let mut map = self.groups.lock().unwrap();
        for (id, l) in loaded {
            let mut g = Group::new(&id, now);
            g.offsets = l
                .offsets
                .into_iter()
                .map(|(k, v)| (k, Committed::from(v)))
                .collect();
            if let Some(v) = l.metadata {
                g.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
                g.generation = v.generation;
                g.protocol = v.protocol.clone();
                g.leader = v.leader;
                if v.state_timestamp > 0 {
                    g.state_ts = v.state_timestamp;
                }
                let deadline = Instant::now();
                for (i, m) in v.members.into_iter().enumerate() {
                    let mut protocols = Vec::new();
                    if let Some(p) = &v.protocol {
                        protocols.push((p.clone(), m.subscription));
                    }
                    if let Some(inst) = &m.instance_id {
                        g.statics.insert(inst.clone(), m.member_id.clone());
                    }
                    g.members.insert(
                        m.member_id.clone(),
                        Member {
                            id: m.member_id,
                            instance_id: m.instance_id,
                            client_id: m.client_id,
                            client_host: m.client_host,
                            session_timeout_ms: m.session_timeout_ms,
                            rebalance_timeout_ms: m.rebalance_timeout_ms,
                            protocols,
                            assignment: m.assignment,
                            join_tx: None,
                            sync_tx: None,
                            deadline: deadline
                                + Duration::from_millis(m.session_timeout_ms.max(0) as u64),
                            is_new: false,
                            seq: i as u64,
                        },
                    );
                }
                g.next_seq = g.members.len() as u64;
                if !g.members.is_empty() && g.protocol.is_some() {
                    g.state = State::Stable;
                } else {
                    g.members.clear();
                    g.statics.clear();
                    g.leader = None;
                }
            }
            map.insert(id, Arc::new(tokio::sync::Mutex::new(g)));
        }
    }

    /// Starts the session timers of loaded members and the periodic offset expiry.
    pub fn start(self: &Arc<Self>) {
        for cell in self.cells() {
            let me = self.clone();
            tokio::spawn(async move {
                let ids: Vec<(String, u64)> = {
                    let g = cell.lock().await;
                    g.members.values().map(|m| (m.id.clone(), m.seq)).collect()
                };
                for (id, seq) in ids {
                    me.spawn_session_timer(&cell, id, seq);
                }
            });
        }
        let me = Arc::downgrade(self);
        let every = Duration::from_millis(self.cfg.offsets_retention_check_interval_ms.max(1));
        tokio::spawn(async move {
            loop {
                sleep(every).await;
                let Some(c) = me.upgrade() else { return };
                c.expire_offsets(now_ms()).await;
            }
        });
    }

    // ---- JoinGroup -------------------------------------------------------------------------

    pub async fn join(self: &Arc<Self>, p: JoinParams) -> JoinResult {
        if p.group_id.is_empty() {
            return JoinResult::error(E::InvalidGroupId.code(), &p.member_id);
        }
        if p.session_timeout_ms < self.cfg.min_session_timeout_ms
            || p.session_timeout_ms > self.cfg.max_session_timeout_ms
        {
            return JoinResult::error(E::InvalidSessionTimeout.code(), &p.member_id);
        }
        if p.protocol_type.is_empty() || p.protocols.is_empty() {
            return JoinResult::error(E::InconsistentGroupProtocol.code(), &p.member_id);
        }
        let cell = if p.member_id.is_empty() {
            self.get_or_create(&p.group_id)
        } else {
            match self.get(&p.group_id) {
                Some(c) => c,
                None => return JoinResult::error(E::UnknownMemberId.code(), &p.member_id),
            }
        };
        let reply = {
            let mut g = cell.lock().await;
            if g.state == State::Dead {
                Reply::Now(JoinResult::error(
                    E::CoordinatorNotAvailable.code(),
                    &p.member_id,
                ))
            } else if p.member_id.is_empty() {
                self.join_new_member(&cell, &mut g, p).await
            } else {
                self.join_known_member(&cell, &mut g, p).await
            }
        };
        match reply {
            Reply::Now(r) => r,
            Reply::Later(rx) => rx
                .await
                .unwrap_or_else(|_| JoinResult::error(E::UnknownMemberId.code(), "")),
        }
    }

    async fn join_new_member(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Group,
        p: JoinParams,
    ) -> Reply<JoinResult> {
        if !g.supports(&p.protocol_type, &p.protocols) {
            return Reply::Now(JoinResult::error(E::InconsistentGroupProtocol.code(), ""));
        }
        let prefix = p.instance_id.as_deref().unwrap_or(&p.client_id);
        let new_id = format!("{prefix}-{}", uuid::Uuid::new_v4());
        if let Some(instance) = p.instance_id.clone() {
            if let Some(old_id) = g.statics.get(&instance).cloned() {
                return self
                    .rejoin_static_member(cell, g, p, instance, old_id, new_id)
                    .await;
            }
            return self.add_member_and_rebalance(cell, g, p, new_id).await;
        }
        if p.require_known_member_id {
            g.pending.insert(new_id.clone());
            let timeout = Duration::from_millis(p.session_timeout_ms as u64);
            let (me, cell2, id) = (self.clone(), cell.clone(), new_id.clone());
            tokio::spawn(async move {
                sleep(timeout).await;
                let mut g = cell2.lock().await;
                if g.pending.remove(&id) {
                    debug!(group = %g.id, member = %id, "pending member expired");
                    me.try_complete_join(&cell2, &mut g).await;
                }
            });
            return Reply::Now(JoinResult::error(E::MemberIdRequired.code(), &new_id));
        }
        self.add_member_and_rebalance(cell, g, p, new_id).await
    }

    async fn join_known_member(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Group,
        p: JoinParams,
    ) -> Reply<JoinResult> {
        let id = p.member_id.clone();
        if g.pending.remove(&id) {
            return self.add_member_and_rebalance(cell, g, p, id).await;
        }
        if g.is_static_fenced(p.instance_id.as_deref(), &id) {
            return Reply::Now(JoinResult::error(E::FencedInstanceId.code(), &id));
        }
        if !g.members.contains_key(&id) {
            return Reply::Now(JoinResult::error(E::UnknownMemberId.code(), &id));
        }
        if !g.supports(&p.protocol_type, &p.protocols) {
            return Reply::Now(JoinResult::error(E::InconsistentGroupProtocol.code(), &id));
        }
        match g.state {
            State::PreparingRebalance => self.update_member_and_rebalance(cell, g, p).await,
            State::CompletingRebalance => {
                let same = g.members[&id].protocols == p.protocols;
                if same {
                    // A repeated JoinGroup (e.g. after a lost response): same answer again.
                    Reply::Now(self.join_result_for(g, &id, false))
                } else {
                    self.update_member_and_rebalance(cell, g, p).await
                }
            }
            State::Stable => {
                let is_leader = g.leader.as_deref() == Some(id.as_str());
                let same = g.members[&id].protocols == p.protocols;
                if is_leader || !same {
                    self.update_member_and_rebalance(cell, g, p).await
                } else {
                    let m = g.members.get_mut(&id).unwrap();
                    m.deadline = Instant::now() + session(m);
                    Reply::Now(self.join_result_for(g, &id, false))
                }
            }
            State::Empty | State::Dead => {
                Reply::Now(JoinResult::error(E::UnknownMemberId.code(), &id))
            }
        }
    }

    /// The current generation's JoinGroup answer for `member`; the leader gets the members.
    fn join_result_for(&self, g: &Group, member: &str, skip_assignment: bool) -> JoinResult {
        let leader = g.leader.clone().unwrap_or_default();
        let protocol = g.protocol.clone().unwrap_or_default();
        let members = if leader == member {
            let mut ms: Vec<&Member> = g.members.values().collect();
            ms.sort_by_key(|m| m.seq);
            ms.into_iter()
                .map(|m| (m.id.clone(), m.instance_id.clone(), m.metadata(&protocol)))
                .collect()
        } else {
            Vec::new()
        };
        JoinResult {
            error: 0,
            generation: g.generation,
            protocol_type: g.protocol_type.clone(),
            protocol_name: g.protocol.clone(),
            leader,
            member_id: member.to_string(),
            skip_assignment,
            members,
        }
    }

    async fn add_member_and_rebalance(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Group,
        p: JoinParams,
        id: String,
    ) -> Reply<JoinResult> {
        let (tx, rx) = oneshot::channel();
        if g.members.is_empty() {
            g.protocol_type = Some(p.protocol_type.clone());
        }
        let seq = g.next_seq;
        g.next_seq += 1;
        if let Some(inst) = &p.instance_id {
            g.statics.insert(inst.clone(), id.clone());
        }
        g.members.insert(
            id.clone(),
            Member {
                id: id.clone(),
                instance_id: p.instance_id,
                client_id: p.client_id,
                client_host: p.client_host,
                session_timeout_ms: p.session_timeout_ms,
                rebalance_timeout_ms: p.rebalance_timeout_ms,
                protocols: p.protocols,
                assignment: Bytes::new(),
                join_tx: Some(tx),
                sync_tx: None,
                deadline: Instant::now() + NEW_MEMBER_JOIN_TIMEOUT,
                is_new: true,
                seq,
            },
        );
        if g.leader.is_none() {
            g.leader = Some(id.clone());
        }
        if g.state == State::PreparingRebalance && g.generation == 0 {
            g.new_member_added = true;
        }
        self.spawn_session_timer(cell, id, seq);
        self.maybe_prepare_rebalance(cell, g, "new member joined")
            .await;
        Reply::Later(rx)
    }

    async fn update_member_and_rebalance(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Group,
        p: JoinParams,
    ) -> Reply<JoinResult> {
        let (tx, rx) = oneshot::channel();
        let m = g.members.get_mut(&p.member_id).unwrap();
        m.protocols = p.protocols;
        m.rebalance_timeout_ms = p.rebalance_timeout_ms;
        m.session_timeout_ms = p.session_timeout_ms;
        m.client_id = p.client_id;
        m.client_host = p.client_host;
        m.join_tx = Some(tx);
        self.maybe_prepare_rebalance(cell, g, "member rejoined")
            .await;
        Reply::Later(rx)
    }

    /// A static member rejoins with an unknown member id: it takes over its old membership
    /// (the old id is fenced). In a Stable group whose subscription is unchanged it gets the
    /// current generation back without a rebalance.
    async fn rejoin_static_member(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Group,
        p: JoinParams,
        instance: String,
        old_id: String,
        new_id: String,
    ) -> Reply<JoinResult> {
        let Some(mut m) = g.members.remove(&old_id) else {
            g.statics.remove(&instance);
            return self.add_member_and_rebalance(cell, g, p, new_id).await;
        };
        if let Some(tx) = m.join_tx.take() {
            let _ = tx.send(JoinResult::error(E::FencedInstanceId.code(), &old_id));
        }
        if let Some(tx) = m.sync_tx.take() {
            let _ = tx.send(SyncResult::error(E::FencedInstanceId.code()));
        }
        let old = (
            m.protocols.clone(),
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
        );
        let old_topics = g.subscribed_topics();
        let old_protocol = g.protocol.clone();
        m.id = new_id.clone();
        m.protocols = p.protocols.clone();
        m.rebalance_timeout_ms = p.rebalance_timeout_ms;
        m.session_timeout_ms = p.session_timeout_ms;
        m.client_id = p.client_id.clone();
        m.client_host = p.client_host.clone();
        m.deadline = Instant::now() + session(&m);
        let seq = m.seq;
        g.members.insert(new_id.clone(), m);
        g.statics.insert(instance.clone(), new_id.clone());
        let was_leader = g.leader.as_deref() == Some(old_id.as_str());
        if was_leader {
            g.leader = Some(new_id.clone());
        }
        // The old id's timer ends when it finds its member gone; the new id gets its own.
        self.spawn_session_timer(cell, new_id.clone(), seq);
        info!(group = %g.id, %instance, %old_id, %new_id, "static member rejoined");
        match g.state {
            State::Stable => {
                let changed = g.select_protocol() != old_protocol
                    || g.subscribed_topics() != old_topics
                    || (was_leader && !p.supports_skip_assignment);
                if changed {
                    let (tx, rx) = oneshot::channel();
                    g.members.get_mut(&new_id).unwrap().join_tx = Some(tx);
                    self.maybe_prepare_rebalance(cell, g, "static member changed")
                        .await;
                    return Reply::Later(rx);
                }
                let records = vec![group_record(g)];
                if let Err(e) = self.log.append(&g.id, records).await {
                    // Undo: the old member id stays the member.
                    let mut m = g.members.remove(&new_id).unwrap();
                    m.id = old_id.clone();
                    (m.protocols, m.rebalance_timeout_ms, m.session_timeout_ms) = old;
                    g.members.insert(old_id.clone(), m);
                    g.statics.insert(instance, old_id.clone());
                    if was_leader {
                        g.leader = Some(old_id);
                    }
                    return Reply::Now(JoinResult::error(e, ""));
                }
                Reply::Now(self.join_result_for(g, &new_id, was_leader))
            }
            State::CompletingRebalance | State::PreparingRebalance => {
                let (tx, rx) = oneshot::channel();
                g.members.get_mut(&new_id).unwrap().join_tx = Some(tx);
                self.maybe_prepare_rebalance(cell, g, "static member replaced")
                    .await;
                Reply::Later(rx)
            }
            State::Empty | State::Dead => {
                Reply::Now(JoinResult::error(E::UnknownMemberId.code(), &new_id))
            }
        }
    }

    // ---- rebalance -------------------------------------------------------------------------

    async fn maybe_prepare_rebalance(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Group,
        reason: &str,
    ) {
        match g.state {
            State::Stable | State::CompletingRebalance | State::Empty => {
                self.prepare_rebalance(cell, g, reason).await
            }
            State::PreparingRebalance => self.try_complete_join(cell, g).await,
            State::Dead => {}
        }
    }

    async fn prepare_rebalance(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Group,
        reason: &str,
    ) {
        if g.state == State::CompletingRebalance {
            for m in g.members.values_mut() {
                m.assignment = Bytes::new();
                if let Some(tx) = m.sync_tx.take() {
                    let _ = tx.send(SyncResult::error(E::RebalanceInProgress.code()));
                }
            }
        }
        let from_empty = g.state == State::Empty;
        g.transition(State::PreparingRebalance, now_ms());
        g.rebalance_epoch += 1;
        let epoch = g.rebalance_epoch;
        info!(group = %g.id, generation = g.generation, reason, "preparing rebalance");
        let rebalance_timeout = Duration::from_millis(g.max_rebalance_timeout_ms().max(0) as u64);
        let (me, cell2) = (self.clone(), cell.clone());
        if from_empty {
            g.initial_delay = true;
            let initial = Duration::from_millis(self.cfg.initial_rebalance_delay_ms);
            tokio::spawn(async move {
                let mut delay = initial;
                let mut remaining = rebalance_timeout.saturating_sub(initial);
                loop {
                    sleep(delay).await;
                    let mut g = cell2.lock().await;
                    if g.rebalance_epoch != epoch || g.state != State::PreparingRebalance {
                        return;
                    }
                    if g.new_member_added && !remaining.is_zero() {
                        g.new_member_added = false;
                        delay = initial.min(remaining);
                        remaining -= delay;
                        continue;
                    }
                    g.initial_delay = false;
                    me.complete_join(&cell2, &mut g).await;
                    return;
                }
            });
        } else {
            g.initial_delay = false;
            tokio::spawn(async move {
                sleep(rebalance_timeout).await;
                let mut g = cell2.lock().await;
                if g.rebalance_epoch == epoch && g.state == State::PreparingRebalance {
                    me.complete_join(&cell2, &mut g).await;
                }
            });
            self.try_complete_join(cell, g).await;
        }
    }

    async fn try_complete_join(self: &Arc<Self>, cell: &Arc<GroupCell>, g: &mut Group) {
        if g.state == State::PreparingRebalance && !g.initial_delay && g.all_joined() {
            self.complete_join(cell, g).await;
        }
    }

    /// The join phase ends: members that did not rejoin are dropped, the next generation
    /// starts, and every waiting JoinGroup is answered.
    async fn complete_join(self: &Arc<Self>, _cell: &Arc<GroupCell>, g: &mut Group) {
        let gone: Vec<String> = g
            .members
            .values()
            .filter(|m| m.join_tx.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in gone {
            info!(group = %g.id, member = %id, "member did not rejoin in time: removed");
            g.remove_member(&id);
        }
        if g.leader.as_ref().is_none_or(|l| !g.members.contains_key(l)) {
            g.leader = g.first_member();
        }
        g.generation += 1;
        g.rebalance_epoch += 1;
        if g.members.is_empty() {
            g.protocol = None;
            g.leader = None;
            g.transition(State::Empty, now_ms());
            info!(group = %g.id, generation = g.generation, "group is empty");
            let records = vec![group_record(g)];
            let _ = self.log.append(&g.id, records).await;
            return;
        }
        g.protocol = g.select_protocol();
        g.transition(State::CompletingRebalance, now_ms());
        info!(
            group = %g.id,
            generation = g.generation,
            members = g.members.len(),
            protocol = g.protocol.as_deref().unwrap_or(""),
            "join phase complete"
        );
        let ids: Vec<String> = g.members.keys().cloned().collect();
        for id in ids {
            let result = self.join_result_for(g, &id, false);
            let m = g.members.get_mut(&id).unwrap();
            m.is_new = false;
            m.deadline = Instant::now() + session(m);
            if let Some(tx) = m.join_tx.take() {
                let _ = tx.send(result);
            }
        }
    }

    // ---- sessions --------------------------------------------------------------------------

    fn spawn_session_timer(self: &Arc<Self>, cell: &Arc<GroupCell>, id: String, seq: u64) {
        let (me, cell) = (self.clone(), cell.clone());
        tokio::spawn(async move {
            loop {
                // The deadline can also move earlier (a new member's join timeout is replaced
                // by its session timeout): wake at least once per session timeout.
                let deadline = {
                    let g = cell.lock().await;
                    match g.members.get(&id) {
                        Some(m) if m.seq == seq => m.deadline.min(Instant::now() + session(m)),
                        _ => return,
                    }
                };
                sleep_until(deadline).await;
                let mut g = cell.lock().await;
                let now = Instant::now();
                let Some(m) = g.members.get_mut(&id).filter(|m| m.seq == seq) else {
                    return;
                };
                if now < m.deadline {
                    continue;
                }
                // Members waiting in a rebalance are kept alive (new ones only until their
                // join timeout).
                let waiting = (m.join_tx.is_some() && !m.is_new) || m.sync_tx.is_some();
                if waiting {
                    m.deadline = now + session(m);
                    continue;
                }
                info!(group = %g.id, member = %id, "session timed out: member removed");
                me.remove_and_rebalance(&cell, &mut g, &id, "member session expired")
                    .await;
                return;
            }
        });
    }

    async fn remove_and_rebalance(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Group,
        id: &str,
        reason: &str,
    ) {
        if let Some(mut m) = g.remove_member(id) {
            if let Some(tx) = m.join_tx.take() {
                let _ = tx.send(JoinResult::error(E::UnknownMemberId.code(), id));
            }
            if let Some(tx) = m.sync_tx.take() {
                let _ = tx.send(SyncResult::error(E::UnknownMemberId.code()));
            }
        }
        match g.state {
            State::Stable | State::CompletingRebalance => {
                self.prepare_rebalance(cell, g, reason).await
            }
            State::PreparingRebalance => self.try_complete_join(cell, g).await,
            _ => {}
        }
    }

    // ---- SyncGroup -------------------------------------------------------------------------

    pub async fn sync(self: &Arc<Self>, p: SyncParams) -> SyncResult {
        let Some(cell) = self.get(&p.group_id) else {
            return SyncResult::error(E::UnknownMemberId.code());
        };
        let reply = {
            let mut g = cell.lock().await;
            self.sync_locked(&cell, &mut g, p).await
        };
        match reply {
            Reply::Now(r) => r,
            Reply::Later(rx) => rx
                .await
                .unwrap_or_else(|_| SyncResult::error(E::UnknownMemberId.code())),
        }
    }

    async fn sync_locked(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Group,
        p: SyncParams,
    ) -> Reply<SyncResult> {
        let err = |e: E| Reply::Now(SyncResult::error(e.code()));
        if g.state == State::Dead {
            return err(E::CoordinatorNotAvailable);
        }
        if g.is_static_fenced(p.instance_id.as_deref(), &p.member_id) {
            return err(E::FencedInstanceId);
        }
        if !g.members.contains_key(&p.member_id) {
            return err(E::UnknownMemberId);
        }
        if p.generation != g.generation {
            return err(E::IllegalGeneration);
        }
        if p.protocol_type.is_some() && p.protocol_type != g.protocol_type
            || p.protocol_name.is_some() && p.protocol_name != g.protocol
        {
            return err(E::InconsistentGroupProtocol);
        }
        match g.state {
            State::Empty | State::Dead => err(E::UnknownMemberId),
            State::PreparingRebalance => err(E::RebalanceInProgress),
            State::Stable => {
                let m = g.members.get_mut(&p.member_id).unwrap();
                m.deadline = Instant::now() + session(m);
                Reply::Now(SyncResult {
                    error: 0,
                    protocol_type: g.protocol_type.clone(),
                    protocol_name: g.protocol.clone(),
                    assignment: g.members[&p.member_id].assignment.clone(),
                })
            }
            State::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                let m = g.members.get_mut(&p.member_id).unwrap();
                m.sync_tx = Some(tx);
                m.deadline = Instant::now() + session(m);
                if g.leader.as_deref() == Some(p.member_id.as_str()) {
                    self.store_assignment(cell, g, p.assignments).await;
                }
                Reply::Later(rx)
            }
        }
    }

    /// The leader's assignment: persisted with the group, then handed to every member.
    async fn store_assignment(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Group,
        assignments: Vec<(String, Bytes)>,
    ) {
        let mut given: HashMap<String, Bytes> = assignments.into_iter().collect();
        for m in g.members.values_mut() {
            m.assignment = given.remove(&m.id).unwrap_or_default();
        }
        let records = vec![group_record(g)];
        let generation = g.generation;
        let stored = self.log.append(&g.id, records).await;
        if g.state != State::CompletingRebalance || g.generation != generation {
            return;
        }
        match stored {
            Ok(()) => {
                let (ptype, pname) = (g.protocol_type.clone(), g.protocol.clone());
                for m in g.members.values_mut() {
                    if let Some(tx) = m.sync_tx.take() {
                        let _ = tx.send(SyncResult {
                            error: 0,
                            protocol_type: ptype.clone(),
                            protocol_name: pname.clone(),
                            assignment: m.assignment.clone(),
                        });
                    }
                }
                g.transition(State::Stable, now_ms());
                info!(group = %g.id, generation, "group is stable");
            }
            Err(code) => {
                for m in g.members.values_mut() {
                    m.assignment = Bytes::new();
                    if let Some(tx) = m.sync_tx.take() {
                        let _ = tx.send(SyncResult::error(code));
                    }
                }
                self.prepare_rebalance(cell, g, "storing the assignment failed")
                    .await;
            }
        }
    }

    // ---- Heartbeat, LeaveGroup -------------------------------------------------------------

    pub async fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> i16 {
        let Some(cell) = self.get(group_id) else {
            return E::UnknownMemberId.code();
        };
        let mut g = cell.lock().await;
        if g.state == State::Dead {
            return E::CoordinatorNotAvailable.code();
        }
        if g.is_static_fenced(instance_id, member_id) {
            return E::FencedInstanceId.code();
        }
        if !g.members.contains_key(member_id) || g.state == State::Empty {
            return E::UnknownMemberId.code();
        }
        if generation != g.generation {
            return E::IllegalGeneration.code();
        }
        let m = g.members.get_mut(member_id).unwrap();
        m.deadline = Instant::now() + session(m);
        if g.state == State::PreparingRebalance {
            E::RebalanceInProgress.code()
        } else {
            0
        }
    }

    /// Members leave: (member id, instance id) each; answers (group error, member errors).
    pub async fn leave(
        self: &Arc<Self>,
        group_id: &str,
        leaving: &[(String, Option<String>)],
    ) -> (i16, Vec<i16>) {
        let Some(cell) = self.get(group_id) else {
            return (0, vec![E::UnknownMemberId.code(); leaving.len()]);
        };
        let mut g = cell.lock().await;
        if g.state == State::Dead {
            return (E::CoordinatorNotAvailable.code(), vec![0; leaving.len()]);
        }
        let mut errors = Vec::new();
        for (member_id, instance_id) in leaving {
            let id = match instance_id {
                Some(inst) => match g.statics.get(inst) {
                    None => {
                        errors.push(E::UnknownMemberId.code());
                        continue;
                    }
                    Some(id) if !member_id.is_empty() && id != member_id => {
                        errors.push(E::FencedInstanceId.code());
                        continue;
                    }
                    Some(id) => id.clone(),
                },
                None => member_id.clone(),
            };
            if g.pending.remove(&id) {
                errors.push(0);
                self.try_complete_join(&cell, &mut g).await;
                continue;
            }
            if !g.members.contains_key(&id) {
                errors.push(E::UnknownMemberId.code());
                continue;
            }
            info!(group = %g.id, member = %id, "member left");
            self.remove_and_rebalance(&cell, &mut g, &id, "member left")
                .await;
            errors.push(0);
        }
        (0, errors)
    }

    // ---- offsets ---------------------------------------------------------------------------

    /// Commits offsets; answers one error code per offset (in order), or one for all.
    pub async fn commit(self: &Arc<Self>, p: CommitParams) -> Result<Vec<i16>, i16> {
        let cell = match self.get(&p.group_id) {
            Some(c) => c,
            None if p.generation < 0 => self.get_or_create(&p.group_id),
            None if p.version >= 9 => return Err(E::GroupIdNotFound.code()),
            None => return Err(E::IllegalGeneration.code()),
        };
        let mut g = cell.lock().await;
        if g.state == State::Dead {
            return Err(E::CoordinatorNotAvailable.code());
        }
        let simple = p.generation < 0 && g.state == State::Empty;
        if !simple {
            if p.generation >= 0 || !p.member_id.is_empty() || p.instance_id.is_some() {
                if g.is_static_fenced(p.instance_id.as_deref(), &p.member_id) {
                    return Err(E::FencedInstanceId.code());
                }
                if p.instance_id
                    .as_ref()
                    .is_some_and(|i| !g.statics.contains_key(i))
                    || !g.members.contains_key(&p.member_id)
                {
                    return Err(E::UnknownMemberId.code());
                }
                if p.generation != g.generation {
                    return Err(E::IllegalGeneration.code());
                }
            } else if g.state != State::Empty {
                return Err(E::UnknownMemberId.code());
            }
            if g.state == State::CompletingRebalance {
                return Err(E::RebalanceInProgress.code());
            }
            if let Some(m) = g.members.get_mut(&p.member_id) {
                m.deadline = Instant::now() + session(m);
            }
        }
        let now = now_ms();
        let mut codes = vec![0i16; p.offsets.len()];
        let mut records: Records = Vec::new();
        let mut accepted = Vec::new();
        for (i, o) in p.offsets.into_iter().enumerate() {
            let metadata = o.metadata.unwrap_or_default();
            if metadata.len() > self.cfg.offset_metadata_max_bytes {
                codes[i] = E::OffsetMetadataTooLarge.code();
                continue;
            }
            let value = OffsetValue {
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata,
                commit_timestamp: now,
            };
            let key = Key::Offset {
                group: g.id.clone(),
                topic: o.topic.clone(),
                partition: o.partition,
            };
            records.push((
                records::encode_key(&key),
                Some(records::encode_offset(&value)),
            ));
            accepted.push((i, (o.topic, o.partition), Committed::from(value)));
        }
        if records.is_empty() {
            return Ok(codes);
        }
        match self.log.append(&g.id, records).await {
            Ok(()) => {
                for (_, k, c) in accepted {
                    g.offsets.insert(k, c);
                }
            }
            Err(code) => {
                for (i, _, _) in accepted {
                    codes[i] = code;
                }
            }
        }
        Ok(codes)
    }

    /// Committed offsets of `topics` (None: all). An unknown group has none.
    pub async fn fetch_offsets(
        &self,
        group_id: &str,
        topics: Option<Vec<(String, Vec<i32>)>>,
    ) -> Result<Vec<(String, Vec<FetchedOffset>)>, i16> {
        let cell = self.get(group_id);
        let g = match &cell {
            Some(c) => Some(c.lock().await),
            None => None,
        };
        if g.as_ref().is_some_and(|g| g.state == State::Dead) {
            return Err(E::GroupIdNotFound.code());
        }
        let lookup = |t: &str, p: i32| {
            let c = g.as_ref().and_then(|g| g.offsets.get(&(t.to_string(), p)));
            match c {
                Some(c) => FetchedOffset {
                    partition: p,
                    offset: c.offset,
                    leader_epoch: c.leader_epoch,
                    metadata: c.metadata.clone(),
                },
                None => FetchedOffset {
                    partition: p,
                    offset: -1,
                    leader_epoch: -1,
                    metadata: String::new(),
                },
            }
        };
        Ok(match topics {
            Some(ts) => ts
                .into_iter()
                .map(|(t, ps)| {
                    let v = ps.into_iter().map(|p| lookup(&t, p)).collect();
                    (t, v)
                })
                .collect(),
            None => {
                let mut by_topic: HashMap<String, Vec<i32>> = HashMap::new();
                if let Some(g) = &g {
                    for (t, p) in g.offsets.keys() {
                        by_topic.entry(t.clone()).or_default().push(*p);
                    }
                }
                let mut v: Vec<(String, Vec<FetchedOffset>)> = by_topic
                    .into_iter()
                    .map(|(t, mut ps)| {
                        ps.sort();
                        let o = ps.into_iter().map(|p| lookup(&t, p)).collect();
                        (t, o)
                    })
                    .collect();
                v.sort_by(|a, b| a.0.cmp(&b.0));
                v
            }
        })
    }

    /// OffsetDelete: per (topic, partition) an error code; or one error for the group.
    pub async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: Vec<(String, i32)>,
    ) -> Result<Vec<i16>, i16> {
        let Some(cell) = self.get(group_id) else {
            return Err(E::GroupIdNotFound.code());
        };
        let mut g = cell.lock().await;
        match g.state {
            State::Dead => return Err(E::GroupIdNotFound.code()),
            State::Empty => {}
            _ if g.protocol_type.as_deref() != Some("consumer") => {
                return Err(E::NonEmptyGroup.code());
            }
            _ => {}
        }
        let mut codes = Vec::new();
        let mut records: Records = Vec::new();
        let mut removed = Vec::new();
        for (t, p) in partitions {
            if g.state != State::Empty && g.is_subscribed_to(&t) {
                codes.push(E::GroupSubscribedToTopic.code());
                continue;
            }
            codes.push(0);
            if g.offsets.contains_key(&(t.clone(), p)) {
                records.push((offset_key(&g.id, &t, p), None));
                removed.push((t, p));
            }
        }
        if !records.is_empty() {
            self.log.append(&g.id, records).await?;
            for k in removed {
                g.offsets.remove(&k);
            }
        }
        Ok(codes)
    }

    // ---- admin -----------------------------------------------------------------------------

    pub async fn describe(&self, group_id: &str) -> Option<Described> {
        let cell = self.get(group_id)?;
        let g = cell.lock().await;
        let stable = g.state == State::Stable;
        let protocol = if stable {
            g.protocol.clone().unwrap_or_default()
        } else {
            String::new()
        };
        let mut ms: Vec<&Member> = g.members.values().collect();
        ms.sort_by_key(|m| m.seq);
        Some(Described {
            state: g.state,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            members: ms
                .into_iter()
                .map(|m| DescribedMember {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(&protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
            protocol,
        })
    }

    pub async fn list(&self) -> Vec<Listed> {
        let mut out = Vec::new();
        for cell in self.cells() {
            let g = cell.lock().await;
            if g.state == State::Dead {
                continue;
            }
            out.push(Listed {
                group_id: g.id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state,
            });
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// DeleteGroups for one group: tombstones for its offsets and metadata.
    pub async fn delete_group(&self, group_id: &str) -> i16 {
        let Some(cell) = self.get(group_id) else {
            return E::GroupIdNotFound.code();
        };
        let mut g = cell.lock().await;
        match g.state {
            State::Dead => return E::GroupIdNotFound.code(),
            State::Empty => {}
            _ => return E::NonEmptyGroup.code(),
        }
        let mut records: Records = g
            .offsets
            .keys()
            .map(|(t, p)| (offset_key(&g.id, t, *p), None))
            .collect();
        records.push((
            records::encode_key(&Key::Group {
                group: g.id.clone(),
            }),
            None,
        ));
        if let Err(e) = self.log.append(&g.id, records).await {
            return e;
        }
        g.offsets.clear();
        g.transition(State::Dead, now_ms());
        self.forget(&cell, group_id);
        info!(group = group_id, "group deleted");
        0
    }

    /// Expires offsets per `offsets.retention.minutes` (Kafka's rules: an empty group's
    /// offsets once it has been empty that long, a simple group's once not committed that
    /// long) and deletes empty groups left without offsets.
    pub async fn expire_offsets(&self, now: i64) {
        let retention = self.cfg.offsets_retention_ms;
        for cell in self.cells() {
            let mut g = cell.lock().await;
            // The time an offset's retention counts from: the moment an empty group became
            // empty (else its commit time); a simple group's commit time. None: kept.
            let since: Option<i64> = match &g.protocol_type {
                Some(_) if g.state == State::Empty => Some(g.state_ts),
                Some(_) => continue,
                None => None,
            };
            let base = |c: &Committed| since.filter(|t| *t > 0).unwrap_or(c.commit_timestamp);
            let expired: Vec<(String, i32)> = g
                .offsets
                .iter()
                .filter(|(_, c)| now - base(c) >= retention)
                .map(|(k, _)| k.clone())
                .collect();
            let mut records: Records = expired
                .iter()
                .map(|(t, p)| (offset_key(&g.id, t, *p), None))
                .collect();
            let dead = g.state == State::Empty && g.offsets.len() == expired.len();
            if dead {
                records.push((
                    records::encode_key(&Key::Group {
                        group: g.id.clone(),
                    }),
                    None,
                ));
            }
            if records.is_empty() || self.log.append(&g.id, records).await.is_err() {
                continue;
            }
            for k in &expired {
                g.offsets.remove(k);
            }
            if !expired.is_empty() {
                info!(group = %g.id, count = expired.len(), "expired offsets");
            }
            if dead {
                g.transition(State::Dead, now);
                let id = g.id.clone();
                self.forget(&cell, &id);
            }
        }
    }
}

fn session(m: &Member) -> Duration {
    Duration::from_millis(m.session_timeout_ms.max(0) as u64)
}

/// The GroupMetadata record of the group's current generation.
fn group_record(g: &Group) -> (Bytes, Option<Bytes>) {
    (
        records::encode_key(&Key::Group {
            group: g.id.clone(),
        }),
        Some(records::encode_group(&g.to_value())),
    )
}

fn offset_key(group: &str, topic: &str, partition: i32) -> Bytes {
    records::encode_key(&Key::Offset {
        group: group.to_string(),
        topic: topic.to_string(),
        partition,
    })
}
