//! Membership: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, the rebalance that follows
//! them (join phase, initial delay, rebalance timeout) and the per-member session timers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use tokio::sync::oneshot;
use tokio::time::{Instant, sleep, sleep_until};
use tracing::{debug, info};

use super::{Coordinator, GroupCell, group_record, group_tombstones, session};
use crate::clock::now_ms;
pub use crate::group::state::JoinParams;
use crate::group::state::{Group, JoinResult, Member, State, SyncResult};

/// Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a member that joins a group for the first
/// time and never completes the join phase is dropped after this long.
const NEW_MEMBER_JOIN_TIMEOUT: Duration = Duration::from_secs(300);

pub struct SyncParams {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

enum Reply<T> {
    Now(T),
    Later(oneshot::Receiver<T>),
}

impl Coordinator {
    // ---- JoinGroup -------------------------------------------------------------------------

    pub async fn join(self: &Arc<Self>, p: JoinParams) -> JoinResult {
        if p.group_id.is_empty() {
            return JoinResult::error(E::InvalidGroupId.code(), &p.member_id);
        }
        if let Err(code) = self.serves(&p.group_id) {
            return JoinResult::error(code, &p.member_id);
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
            self.get(&p.group_id)
                .and_then(|c| c.ok_or(E::UnknownMemberId.code()))
        };
        let cell = match cell {
            Ok(c) => c,
            Err(code) => return JoinResult::error(code, &p.member_id),
        };
        let reply = {
            let mut g = cell.lock().await;
            if g.consumer
                .as_ref()
                .is_some_and(|c| c.group.members.is_empty())
            {
                let gid = g.id.clone();
                let logged = g.consumer.as_ref().is_some_and(|c| c.logged);
                if logged && let Err(code) = self.write(&cell, &gid, group_tombstones(&g)).await {
                    return JoinResult::error(code, &p.member_id);
                }
                info!(group = %gid, "empty consumer group becomes a classic group");
                g.consumer = None;
                g.protocol_type = None;
            }
            if g.state == State::Dead {
                Reply::Now(JoinResult::error(
                    E::CoordinatorNotAvailable.code(),
                    &p.member_id,
                ))
            } else if let Some(c) = g.consumer.as_ref() {
                let before = c.group.clone();
                let r = self.classic_join(&cell, &mut g, p);
                match self.persist_consumer(&cell, &mut g, before).await {
                    Ok(()) => Reply::Now(r),
                    Err(code) => Reply::Now(JoinResult::error(code, &r.member_id)),
                }
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

    /// A static member rejoins with an unknown member id (Kafka's
    /// `updateStaticMemberThenRebalanceOrCompleteJoin`): the new id takes over the old
    /// membership (assignment, join order, leadership) and the old id is fenced.
    ///
    /// * Stable, and the protocol selected for the next generation is the current one: no
    ///   rebalance, whether or not the member's subscription changed. The group is persisted
    ///   with the new id and the JoinGroup is answered at once with the current generation.
    ///   From v9 a returning leader is named leader, gets the members and is told to skip the
    ///   assignment; below v9 every member (the old leader too) is told the leader id as it was
    ///   before the replacement, so the old leader acts as a follower and syncs its assignment.
    ///   If the write fails the replacement is undone.
    /// * Stable with a different protocol, CompletingRebalance (the leader may already be
    ///   assigning to the old id), PreparingRebalance: the member waits for the join phase.
    async fn rejoin_static_member(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Group,
        p: JoinParams,
        instance: String,
        old_id: String,
        new_id: String,
    ) -> Reply<JoinResult> {
        if matches!(g.state, State::Empty | State::Dead) {
            return Reply::Now(JoinResult::error(E::UnknownMemberId.code(), &new_id));
        }
        let leader_before = g.leader.clone().unwrap_or_default();
        if !g.replace_static_member(&instance, &old_id, &new_id) {
            g.statics.remove(&instance);
            return self.add_member_and_rebalance(cell, g, p, new_id).await;
        }
        let m = g.members.get_mut(&new_id).unwrap();
        m.deadline = Instant::now() + session(m);
        let seq = m.seq;
        let old = (
            std::mem::replace(&mut m.protocols, p.protocols),
            std::mem::replace(&mut m.rebalance_timeout_ms, p.rebalance_timeout_ms),
            std::mem::replace(&mut m.session_timeout_ms, p.session_timeout_ms),
        );
        // The old id's timer ends when it finds its member gone; the new id gets its own.
        self.spawn_session_timer(cell, new_id.clone(), seq);
        info!(group = %g.id, %instance, %old_id, %new_id, state = g.state.name(), "static member rejoined");
        let rebalance = match g.state {
            State::Stable if g.select_protocol() == g.protocol => None,
            State::Stable => Some("static member changed the selected protocol"),
            _ => Some("static member replaced during a rebalance"),
        };
        if let Some(reason) = rebalance {
            let (tx, rx) = oneshot::channel();
            g.members.get_mut(&new_id).unwrap().join_tx = Some(tx);
            self.maybe_prepare_rebalance(cell, g, reason).await;
            return Reply::Later(rx);
        }
        let records = vec![group_record(g)];
        if let Err(code) = self.write(cell, &g.id, records).await {
            // Undo: the old member id stays the member (its session timer is still running).
            g.replace_static_member(&instance, &new_id, &old_id);
            let m = g.members.get_mut(&old_id).unwrap();
            (m.protocols, m.rebalance_timeout_ms, m.session_timeout_ms) = old;
            return Reply::Now(JoinResult {
                error: code,
                leader: leader_before,
                members: Vec::new(),
                ..self.join_result_for(g, "", false)
            });
        }
        if p.supports_skip_assignment {
            let is_leader = g.leader.as_deref() == Some(new_id.as_str());
            return Reply::Now(self.join_result_for(g, &new_id, is_leader));
        }
        Reply::Now(JoinResult {
            leader: leader_before,
            members: Vec::new(),
            ..self.join_result_for(g, &new_id, false)
        })
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

    pub(super) async fn prepare_rebalance(
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
    async fn complete_join(self: &Arc<Self>, cell: &Arc<GroupCell>, g: &mut Group) {
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
            let _ = self.write(cell, &g.id, records).await;
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

    pub(super) fn spawn_session_timer(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        id: String,
        seq: u64,
    ) {
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
        let cell = match self.get(&p.group_id) {
            Ok(Some(c)) => c,
            Ok(None) => return SyncResult::error(E::UnknownMemberId.code()),
            Err(code) => return SyncResult::error(code),
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
        if g.consumer.is_some() {
            return Reply::Now(self.classic_sync(g, &p));
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
        let stored = self.write(cell, &g.id, records).await;
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
        let cell = match self.get(group_id) {
            Ok(Some(c)) => c,
            Ok(None) => return E::UnknownMemberId.code(),
            Err(code) => return code,
        };
        let mut g = cell.lock().await;
        if g.state == State::Dead {
            return E::CoordinatorNotAvailable.code();
        }
        if g.consumer.is_some() {
            return self.classic_heartbeat(&mut g, member_id, instance_id, generation);
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
        let cell = match self.get(group_id) {
            Ok(Some(c)) => c,
            Ok(None) => return (0, vec![E::UnknownMemberId.code(); leaving.len()]),
            Err(code) => return (code, vec![0; leaving.len()]),
        };
        let mut g = cell.lock().await;
        if g.state == State::Dead {
            return (E::CoordinatorNotAvailable.code(), vec![0; leaving.len()]);
        }
        if let Some(c) = g.consumer.as_mut() {
            let before = c.group.clone();
            let errors = leaving
                .iter()
                .map(|(member_id, instance_id)| c.remove_by_identity(member_id, instance_id))
                .collect();
            if let Err(code) = self.persist_consumer(&cell, &mut g, before).await {
                return (code, vec![0; leaving.len()]);
            }
            super::consumer::sync_state(&mut g);
            return (0, errors);
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
}
