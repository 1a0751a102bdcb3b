//! Classic members in consumer groups, and a group's conversion from one kind to the other
//! (KIP-848 online migration): the shell around `group::consumer::classic`, under the
//! group's lock.
//!
//! * Upgrade: a consumer-protocol member joining a non-empty classic group. Its waiting
//!   JoinGroup and SyncGroup requests are answered REBALANCE_IN_PROGRESS, its members become
//!   consumer-group members (their own session timeouts), and the join goes on as in any
//!   consumer group.
//! * Classic JoinGroup, SyncGroup and Heartbeat to a non-empty consumer group: the member's
//!   assignment is the server's; a JoinGroup is answered at once (generation = member epoch,
//!   no leader), and arms a sync timeout; a SyncGroup answers the member's partitions; a
//!   Heartbeat answers REBALANCE_IN_PROGRESS while the member must join again, and arms a join
//!   timeout (both the member's rebalance timeout).
//! * Downgrade: the last consumer-protocol member leaves a group of classic members. The
//!   group becomes classic at the group epoch with the members' target assignments, and a
//!   classic rebalance starts.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError as E;
use tokio::time::Instant;
use tracing::info;

use super::consumer::sync_state;
use super::{Coordinator, GroupCell, JoinParams, Slot, SyncParams, group_record};
use crate::clock::now_ms;
use crate::group::consumer::heartbeat::Error;
use crate::group::consumer::{Topics, classic};
use crate::group::state::{ConsumerSide, Group, JoinResult, Member, State, SyncResult};

impl Coordinator {
    /// Kafka's `convertToConsumerGroup` for the non-empty classic group in `g`; Err with
    /// GROUP_ID_NOT_FOUND when it may not or cannot be upgraded.
    pub(super) fn upgrade(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Slot,
        topics: &Topics,
    ) -> Result<(), Error> {
        let settings = self.cfg.consumer.settings();
        if let Some(why) = classic::upgrade_refusal(g, &settings) {
            info!(group = %g.id, "cannot upgrade the classic group to a consumer group: {why}");
            return Err(Error {
                code: E::GroupIdNotFound.code(),
                message: Some(format!("Group {} is not a consumer group.", g.id)),
            });
        }
        let Ok(cg) = classic::from_classic(g, topics) else {
            info!(group = %g.id, "cannot upgrade the classic group: malformed embedded consumer protocol");
            return Err(Error {
                code: E::GroupIdNotFound.code(),
                message: Some(format!(
                    "Cannot upgrade the classic group {} to consumer group because the embedded consumer protocol is malformed.",
                    g.id
                )),
            });
        };
        g.fail_waiters(E::RebalanceInProgress.code());
        g.members.clear();
        g.statics.clear();
        g.pending.clear();
        g.leader = None;
        g.protocol = None;
        g.protocol_type = Some("consumer".to_string());
        g.initial_delay = false;
        g.new_member_added = false;
        // Rebalance timers of the classic group find it changed and end.
        g.rebalance_epoch += 1;
        let sessions: Vec<(String, i32)> = cg
            .members
            .values()
            .map(|m| {
                let ms = m.classic.as_ref().map_or(0, |c| c.session_timeout_ms);
                (m.id.clone(), ms)
            })
            .collect();
        // Not logged yet: the next write (the heartbeat's) writes the whole consumer group.
        g.consumer = Some(ConsumerSide {
            group: cg,
            timers: Default::default(),
            logged: false,
            loaded_hash: None,
        });
        for (id, ms) in sessions {
            self.start_consumer_timer(cell, g, &id, Duration::from_millis(ms.max(0) as u64));
        }
        info!(group = %g.id, generation = g.generation, "classic group upgraded to a consumer group");
        sync_state(g);
        Ok(())
    }

    /// Kafka's `convertToClassicGroup`: the consumer group in `g` becomes classic without
    /// `leaving`, and a rebalance starts.
    pub(super) async fn downgrade(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        slot: &mut Slot,
        leaving: &str,
        topics: &Topics,
    ) {
        let g = &mut slot.group;
        let Some(side) = g.consumer.as_mut() else {
            return;
        };
        let Some(plan) = classic::to_classic(&side.group, leaving, topics) else {
            side.timers.remove(leaving);
            side.group.remove_member(leaving);
            sync_state(g);
            return;
        };
        // The consumer group's records are deleted in the write of the classic group's.
        let mut records = if side.logged {
            crate::group::consumer::persist::tombstones(&g.id, &side.group)
        } else {
            Vec::new()
        };
        g.consumer = None;
        g.generation = plan.generation;
        g.protocol_type = Some("consumer".to_string());
        g.protocol = Some(plan.protocol);
        g.leader = None;
        g.members.clear();
        g.statics.clear();
        let now = self.now();
        let mut timers = Vec::new();
        for m in plan.members {
            let seq = g.next_seq;
            g.next_seq += 1;
            if let Some(inst) = &m.instance_id {
                g.statics.insert(inst.clone(), m.id.clone());
            }
            if g.leader.is_none() {
                g.leader = Some(m.id.clone());
            }
            timers.push((m.id.clone(), seq));
            g.members.insert(
                m.id.clone(),
                Member {
                    id: m.id,
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocols: m.protocols,
                    assignment: m.assignment,
                    awaiting_join: false,
                    awaiting_sync: false,
                    deadline: now.mono_ms + i64::from(m.session_timeout_ms.max(0)),
                    is_new: false,
                    seq,
                },
            );
        }
        g.transition(State::Stable, now_ms());
        for (id, seq) in timers {
            self.spawn_session_timer(cell, id, seq);
        }
        let reason = format!("Downgrade group {} from consumer to classic.", g.id);
        info!(group = %g.id, generation = g.generation, "{reason}");
        records.push(group_record(g));
        let _ = self.write(cell, &g.id, records).await;
        self.prepare_rebalance(cell, slot, &reason).await;
    }

    /// Kafka's `classicGroupJoinToConsumerGroup`, for the non-empty consumer group in `g`.
    pub(super) fn classic_join(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Group,
        p: JoinParams,
    ) -> JoinResult {
        let settings = self.cfg.consumer.settings();
        let topics = self.topics();
        let gid = g.id.clone();
        let Some(side) = g.consumer.as_mut() else {
            return JoinResult::error(E::UnknownMemberId.code(), &p.member_id);
        };
        let out = classic::join(&mut side.group, &p, &topics, &settings, &|| {
            uuid::Uuid::new_v4().to_string()
        });
        let (member_id, epoch, protocol) = match out {
            Err(e) => return JoinResult::error(e.code, &p.member_id),
            Ok(classic::JoinOutcome::MemberIdRequired(id)) => {
                return JoinResult::error(E::MemberIdRequired.code(), &id);
            }
            Ok(classic::JoinOutcome::Joined {
                member_id,
                epoch,
                protocol,
            }) => (member_id, epoch, protocol),
        };
        // A replaced static member's timer goes with it.
        let members = &side.group.members;
        side.timers.retain(|id, _| members.contains_key(id));
        let now = Instant::now();
        let session = Duration::from_millis(p.session_timeout_ms.max(0) as u64);
        let sync_by = now + Duration::from_millis(p.rebalance_timeout_ms.max(0) as u64);
        match side.timers.get_mut(&member_id) {
            Some(t) => {
                t.session_deadline = now + session;
                t.join_deadline = None;
                t.sync_deadline = Some(sync_by);
            }
            None => {
                self.start_consumer_timer(cell, g, &member_id, session);
                if let Some(t) = g
                    .consumer
                    .as_mut()
                    .and_then(|c| c.timers.get_mut(&member_id))
                {
                    t.sync_deadline = Some(sync_by);
                }
            }
        }
        info!(group = %gid, member = %member_id, epoch, "classic member joined the consumer group");
        sync_state(g);
        JoinResult {
            error: 0,
            generation: epoch,
            protocol_type: Some("consumer".to_string()),
            protocol_name: Some(protocol),
            leader: String::new(),
            member_id,
            skip_assignment: false,
            members: Vec::new(),
        }
    }

    /// Kafka's `classicGroupSyncToConsumerGroup`.
    pub(super) fn classic_sync(&self, g: &mut Group, p: &SyncParams) -> SyncResult {
        let topics = self.topics();
        let gid = g.id.clone();
        let Some(side) = g.consumer.as_mut() else {
            return SyncResult::error(E::UnknownMemberId.code());
        };
        let out = classic::sync(
            &gid,
            &side.group,
            &p.member_id,
            p.instance_id.as_deref(),
            p.generation,
            p.protocol_type.as_deref(),
            p.protocol_name.as_deref(),
            &topics,
        );
        match out {
            Ok(assignment) => {
                let session = classic_session(&side.group, &p.member_id);
                if let Some(t) = side.timers.get_mut(&p.member_id) {
                    t.sync_deadline = None;
                    t.session_deadline = Instant::now() + session;
                }
                SyncResult {
                    error: 0,
                    protocol_type: p.protocol_type.clone(),
                    protocol_name: p.protocol_name.clone(),
                    assignment,
                }
            }
            Err(e) => {
                if e.code == E::RebalanceInProgress.code() {
                    arm_join_timeout(side, &p.member_id);
                }
                SyncResult::error(e.code)
            }
        }
    }

    /// Kafka's `classicGroupHeartbeatToConsumerGroup`.
    pub(super) fn classic_heartbeat(
        &self,
        g: &mut Group,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> i16 {
        let gid = g.id.clone();
        let Some(side) = g.consumer.as_mut() else {
            return E::UnknownMemberId.code();
        };
        match classic::heartbeat(&gid, &side.group, member_id, instance_id, generation) {
            Err(e) => e.code,
            Ok(rejoin) => {
                let session = classic_session(&side.group, member_id);
                if let Some(t) = side.timers.get_mut(member_id) {
                    t.session_deadline = Instant::now() + session;
                }
                if rejoin {
                    arm_join_timeout(side, member_id);
                    E::RebalanceInProgress.code()
                } else {
                    0
                }
            }
        }
    }
}

/// A classic member's own session timeout.
fn classic_session(g: &crate::group::consumer::ConsumerGroup, id: &str) -> Duration {
    let ms = g
        .members
        .get(id)
        .and_then(|m| m.classic.as_ref())
        .map_or(0, |c| c.session_timeout_ms);
    Duration::from_millis(ms.max(0) as u64)
}

/// The member must join again within its rebalance timeout (unless it was told so already).
fn arm_join_timeout(side: &mut ConsumerSide, id: &str) {
    let ms = side
        .group
        .members
        .get(id)
        .map_or(0, |m| m.rebalance_timeout_ms.max(0) as u64);
    if let Some(t) = side.timers.get_mut(id)
        && t.join_deadline.is_none()
    {
        t.join_deadline = Some(Instant::now() + Duration::from_millis(ms));
    }
}
