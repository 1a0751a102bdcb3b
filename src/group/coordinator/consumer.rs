//! The consumer group protocol's shell (KIP-848): ConsumerGroupHeartbeat and
//! ConsumerGroupDescribe on a group's lock, the session and revocation timers. The decisions
//! are `group::consumer`'s.
//!
//! A group is created by a join (member epoch 0); an empty classic group (offsets only, or
//! left by its last member) becomes a consumer group at a join, a non-empty one is upgraded
//! (`migration`), and an empty consumer group becomes classic at a JoinGroup. Each member has
//! one timer task: it removes the member when its session (`group.consumer.session.timeout.ms`
//! from its last heartbeat; a classic member's own session timeout) expires, when it still has
//! not revoked partitions its rebalance timeout after it was asked to, or, for a classic
//! member, when its JoinGroup or SyncGroup did not come within its rebalance timeout. A
//! consumer-protocol member leaving (or removed) last among classic members downgrades the
//! group to classic.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::{Instant, sleep_until};
use tracing::info;

use kafka_protocol::ResponseError as E;

use super::{Coordinator, GroupCell, Slot, consumer_log};
use crate::clock::now_ms;
use crate::group::consumer::heartbeat::{self, Error, Outcome, Request};
use crate::group::consumer::{Assignment, ConsumerGroup, MemberState, Topics};
use crate::group::state::{ConsumerSide, Group, MemberTimer, State};

/// Numbers the members' timer tasks.
pub(super) static TIMER_SEQ: AtomicU64 = AtomicU64::new(0);

/// What a ConsumerGroupHeartbeat is answered with (when it is not an error).
#[derive(Debug, Clone)]
pub struct HeartbeatAnswer {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    pub assignment: Option<Assignment>,
}

fn not_found(message: String) -> Error {
    Error {
        code: E::GroupIdNotFound.code(),
        message: Some(message),
    }
}

/// Keeps the classic view (`state`, `protocol_type`) of a consumer group in line with it.
pub(super) fn sync_state(g: &mut Group) {
    let Some(c) = &g.consumer else {
        return;
    };
    let want = if c.group.members.is_empty() {
        State::Empty
    } else {
        State::Stable
    };
    if g.state != want {
        g.transition(want, now_ms());
    }
}

impl Coordinator {
    /// The session timeout of a group's members: its `consumer.session.timeout.ms`, else the
    /// broker's `group.consumer.session.timeout.ms`.
    pub(super) fn consumer_session_ms(&self, group: &str) -> u64 {
        let c = &self.cfg.consumer;
        c.per_group
            .num(group, "consumer.session.timeout.ms")
            .unwrap_or(c.session_timeout_ms as i64)
            .max(1) as u64
    }

    /// Its `consumer.heartbeat.interval.ms`, else `group.consumer.heartbeat.interval.ms`.
    fn consumer_heartbeat_ms(&self, group: &str) -> i32 {
        let c = &self.cfg.consumer;
        c.per_group
            .num(group, "consumer.heartbeat.interval.ms")
            .and_then(|v| i32::try_from(v).ok())
            .unwrap_or(c.heartbeat_interval_ms)
    }

    pub async fn consumer_heartbeat(
        self: &Arc<Self>,
        group_id: &str,
        r: Request,
        topics: &Topics,
    ) -> Result<HeartbeatAnswer, Error> {
        let settings = self.cfg.consumer.settings();
        heartbeat::validate(group_id, &r, &settings)?;
        let code = |code: i16| Error {
            code,
            message: None,
        };
        let cell = if r.member_epoch == 0 {
            self.get_or_create(group_id).map_err(code)?
        } else {
            match self.get(group_id).map_err(code)? {
                Some(c) => c,
                None => return Err(not_found(format!("Consumer group {group_id} not found."))),
            }
        };
        let mut g = cell.lock().await;
        if g.state == State::Dead {
            return Err(code(E::CoordinatorNotAvailable.code()));
        }
        if g.consumer.is_none() && !g.members.is_empty() {
            if r.member_epoch != 0 {
                return Err(not_found(format!(
                    "Group {group_id} is not a consumer group."
                )));
            }
            self.upgrade(&cell, &mut g, topics)?;
        }
        if g.consumer.is_none() {
            if r.member_epoch != 0 {
                return Err(not_found(format!(
                    "Group {group_id} is not a consumer group."
                )));
            }
            info!(group = %group_id, "empty classic group becomes a consumer group");
            g.consumer = Some(ConsumerSide::default());
            g.protocol_type = Some("consumer".to_string());
            g.protocol = None;
            g.leader = None;
        }
        let gid = g.id.clone();
        let side = g.consumer.as_mut().expect("set above");
        consumer_log::adopt_loaded_topics(side, topics);
        let before = side.group.clone();
        let out = heartbeat::heartbeat(&gid, &mut side.group, &r, topics, &settings, &|| {
            uuid::Uuid::new_v4().simple().to_string()
        });
        let out = match out {
            Err(e) => {
                side.group = before;
                sync_state(&mut g);
                return Err(e);
            }
            Ok(out) => match self.persist_consumer(&cell, &mut g, before).await {
                Ok(()) => Ok(out),
                Err(c) => Err(code(c)),
            },
        };
        let side = g.consumer.as_mut().expect("set above");
        let answer = match out {
            Err(e) => {
                sync_state(&mut g);
                return Err(e);
            }
            Ok(Outcome::Left {
                member_id,
                epoch,
                downgrade,
            }) => {
                if epoch != crate::group::consumer::LEAVE_STATIC_EPOCH {
                    side.timers.remove(&member_id);
                    info!(group = %gid, member = %member_id, "member left");
                }
                if downgrade {
                    self.downgrade(&cell, &mut g, &member_id, topics).await;
                }
                HeartbeatAnswer {
                    member_id,
                    member_epoch: epoch,
                    heartbeat_interval_ms: 0,
                    assignment: None,
                }
            }
            Ok(Outcome::Member {
                member_id,
                epoch,
                assignment,
                revoking,
            }) => {
                let now = Instant::now();
                let session = now + Duration::from_millis(self.consumer_session_ms(&gid));
                let rebalance_ms = side
                    .group
                    .members
                    .get(&member_id)
                    .map_or(0, |m| m.rebalance_timeout_ms.max(0) as u64);
                let spawn = match side.timers.get_mut(&member_id) {
                    Some(t) => {
                        t.session_deadline = session;
                        if !revoking {
                            t.revoke_deadline = None;
                        } else if t.revoke_deadline.is_none() {
                            t.revoke_deadline = Some(now + Duration::from_millis(rebalance_ms));
                        }
                        None
                    }
                    None => {
                        let seq = TIMER_SEQ.fetch_add(1, Ordering::Relaxed);
                        side.timers.insert(
                            member_id.clone(),
                            MemberTimer {
                                seq,
                                session_deadline: session,
                                revoke_deadline: revoking
                                    .then(|| now + Duration::from_millis(rebalance_ms)),
                                join_deadline: None,
                                sync_deadline: None,
                            },
                        );
                        Some(seq)
                    }
                };
                if let Some(seq) = spawn {
                    self.spawn_consumer_timer(&cell, member_id.clone(), seq);
                }
                HeartbeatAnswer {
                    member_id,
                    member_epoch: epoch,
                    heartbeat_interval_ms: self.consumer_heartbeat_ms(&gid),
                    assignment,
                }
            }
        };
        sync_state(&mut g);
        Ok(answer)
    }

    /// A new timer for a member of the consumer group in `g` (whose lock the caller holds),
    /// replacing any it had.
    pub(super) fn start_consumer_timer(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Group,
        id: &str,
        session: Duration,
    ) {
        let Some(side) = g.consumer.as_mut() else {
            return;
        };
        let seq = TIMER_SEQ.fetch_add(1, Ordering::Relaxed);
        side.timers.insert(
            id.to_string(),
            MemberTimer {
                seq,
                session_deadline: Instant::now() + session,
                revoke_deadline: None,
                join_deadline: None,
                sync_deadline: None,
            },
        );
        self.spawn_consumer_timer(cell, id.to_string(), seq);
    }

    pub(super) fn spawn_consumer_timer(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        id: String,
        seq: u64,
    ) {
        let (me, cell) = (self.clone(), cell.clone());
        tokio::spawn(async move {
            loop {
                let deadline = {
                    let g = cell.lock().await;
                    let Some(t) = g
                        .consumer
                        .as_ref()
                        .and_then(|c| c.timers.get(&id))
                        .filter(|t| t.seq == seq)
                    else {
                        return;
                    };
                    t.next_deadline()
                };
                sleep_until(deadline).await;
                let mut g = cell.lock().await;
                if g.state == State::Dead {
                    return;
                }
                let now = Instant::now();
                let gid = g.id.clone();
                let Some(side) = g.consumer.as_mut() else {
                    return;
                };
                let Some(t) = side.timers.get_mut(&id).filter(|t| t.seq == seq) else {
                    return;
                };
                let passed = |d: Option<Instant>| d.is_some_and(|d| now >= d);
                let why = if now >= t.session_deadline {
                    "session timed out"
                } else if passed(t.join_deadline) {
                    "the classic member failed to join within the rebalance timeout"
                } else if passed(t.sync_deadline) {
                    "the member failed to sync within timeout"
                } else if passed(t.revoke_deadline)
                    && side
                        .group
                        .members
                        .get(&id)
                        .is_some_and(|m| m.state == MemberState::UnrevokedPartitions)
                {
                    "did not revoke its partitions within its rebalance timeout"
                } else {
                    if passed(t.revoke_deadline) {
                        t.revoke_deadline = None;
                    }
                    continue;
                };
                if !me.fence_consumer_member(&cell, &mut g, &id).await {
                    // The member stays until a write of its removal succeeds.
                    tracing::warn!(group = %gid, member = %id, "{why}: cannot remove member");
                    let retry = Instant::now() + Duration::from_secs(1);
                    if let Some(t) = g.consumer.as_mut().and_then(|s| s.timers.get_mut(&id)) {
                        t.session_deadline = t.session_deadline.max(retry);
                        t.revoke_deadline = t.revoke_deadline.map(|r| r.max(retry));
                    }
                    continue;
                }
                info!(group = %gid, member = %id, "{why}: member removed");
                return;
            }
        });
    }

    /// Removes a member of the consumer group in `g` (its lock held) and writes its removal;
    /// if it was the last consumer-protocol member among classic ones, the group becomes
    /// classic instead. False if the write failed (the member is still there).
    pub(super) async fn fence_consumer_member(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Slot,
        id: &str,
    ) -> bool {
        let settings = self.cfg.consumer.settings();
        let Some(side) = g.consumer.as_mut() else {
            return true;
        };
        if crate::group::consumer::classic::downgrades_without(&side.group, id, &settings) {
            side.timers.remove(id);
            let topics = self.topics();
            self.downgrade(cell, g, id, &topics).await;
            return true;
        }
        let before = side.group.clone();
        side.group.remove_member(id);
        if self.persist_consumer(cell, g, before).await.is_err() {
            return false;
        }
        if let Some(side) = g.consumer.as_mut() {
            side.timers.remove(id);
        }
        sync_state(g);
        true
    }

    /// ConsumerGroupDescribe of one group: its state, or GROUP_ID_NOT_FOUND with Kafka's
    /// message.
    pub async fn consumer_describe(&self, group_id: &str) -> Result<ConsumerGroup, Error> {
        let code = |code: i16| Error {
            code,
            message: None,
        };
        let Some(cell) = self.get(group_id).map_err(code)? else {
            return Err(not_found(format!("Group {group_id} not found.")));
        };
        let g = cell.lock().await;
        match &g.consumer {
            Some(c) if g.state != State::Dead => Ok(c.group.clone()),
            Some(_) => Err(not_found(format!("Group {group_id} not found."))),
            None => Err(not_found(format!(
                "Group {group_id} is not a consumer group."
            ))),
        }
    }
}
