//! Membership: JoinGroup, SyncGroup, Heartbeat and LeaveGroup of classic groups. What they do
//! is decided by the pure `group::membership`; this shell feeds it the requests and the timers
//! that fire, with the time, and carries out its actions: answering waiting requests, tokio
//! timers, writes to `__consumer_offsets`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError as E;
use tokio::sync::oneshot;
use tokio::time::sleep_until;
use tracing::info;

use super::{Coordinator, GroupCell, Slot, group_record, group_tombstones};
use crate::clock::now_ms;
use crate::group::membership::{self as rules, Action, Expiry, Now, Reply, Rules};
use crate::group::state::{JoinParams, JoinResult, State, SyncParams, SyncResult};

enum Answer<T> {
    Now(T),
    Later(oneshot::Receiver<T>),
}

impl<T> Answer<T> {
    async fn get(self, dropped: impl FnOnce() -> T) -> T {
        match self {
            Answer::Now(r) => r,
            Answer::Later(rx) => rx.await.unwrap_or_else(|_| dropped()),
        }
    }
}

impl Coordinator {
    /// The time for the membership rules: the timer clock and the wall clock.
    pub(super) fn now(&self) -> Now {
        Now {
            mono_ms: self.clock_base.elapsed().as_millis() as i64,
            wall_ms: now_ms(),
        }
    }

    fn rules(&self) -> Rules {
        Rules {
            initial_rebalance_delay_ms: self.cfg.initial_rebalance_delay_ms as i64,
        }
    }

    async fn sleep_until_ms(&self, at: i64) {
        sleep_until(self.clock_base + Duration::from_millis(at.max(0) as u64)).await;
    }

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
        let answer = {
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
            if g.state != State::Dead && g.consumer.is_some() {
                let before = g.consumer.as_ref().unwrap().group.clone();
                let r = self.classic_join(&cell, &mut g, p);
                match self.persist_consumer(&cell, &mut g, before).await {
                    Ok(()) => Answer::Now(r),
                    Err(code) => Answer::Now(JoinResult::error(code, &r.member_id)),
                }
            } else {
                self.classic_group_join(&cell, &mut g, p).await
            }
        };
        answer
            .get(|| JoinResult::error(E::UnknownMemberId.code(), ""))
            .await
    }

    async fn classic_group_join(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Slot,
        p: JoinParams,
    ) -> Answer<JoinResult> {
        let prefix = p.instance_id.as_deref().unwrap_or(&p.client_id);
        let new_id = format!("{prefix}-{}", uuid::Uuid::new_v4());
        let mut actions = Vec::new();
        let reply = rules::join(g, &self.rules(), p, new_id, self.now(), &mut actions);
        let answer = match reply {
            Reply::Now(r) => Answer::Now(r),
            Reply::Wait(id) => {
                let (tx, rx) = oneshot::channel();
                g.joins.insert(id, tx);
                Answer::Later(rx)
            }
            Reply::Persist(replacement) => {
                let stored = self.write(cell, &g.id, vec![group_record(g)]).await;
                Answer::Now(rules::static_replacement_stored(g, *replacement, stored))
            }
        };
        self.carry_out(cell, g, actions).await;
        answer
    }

    // ---- carrying out ----------------------------------------------------------------------

    /// Carries out the membership rules' actions in order (the outcome of a write may add
    /// more), then drops waiters whose member no longer waits (their requests see the
    /// channel closed: UNKNOWN_MEMBER_ID).
    pub(super) async fn carry_out(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Slot,
        actions: Vec<Action>,
    ) {
        let mut queue: VecDeque<Action> = actions.into();
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Join(id, r) => {
                    if let Some(tx) = g.joins.remove(&id) {
                        let _ = tx.send(r);
                    }
                }
                Action::Sync(id, r) => {
                    if let Some(tx) = g.syncs.remove(&id) {
                        let _ = tx.send(r);
                    }
                }
                Action::Persist => {
                    let records = vec![group_record(g)];
                    let _ = self.write(cell, &g.id, records).await;
                }
                Action::PersistAssignment { generation } => {
                    let records = vec![group_record(g)];
                    let stored = self.write(cell, &g.id, records).await;
                    let more =
                        rules::assignment_stored(g, &self.rules(), generation, stored, self.now());
                    for a in more.into_iter().rev() {
                        queue.push_front(a);
                    }
                }
                timer => self.arm(cell, timer),
            }
        }
        let Slot {
            group,
            joins,
            syncs,
        } = g;
        joins.retain(|id, _| group.members.get(id).is_some_and(|m| m.awaiting_join));
        syncs.retain(|id, _| group.members.get(id).is_some_and(|m| m.awaiting_sync));
    }

    /// Starts the tokio task of a timer action; when it fires, the rules decide what follows.
    fn arm(self: &Arc<Self>, cell: &Arc<GroupCell>, timer: Action) {
        let (me, cell) = (self.clone(), cell.clone());
        match timer {
            Action::SessionTimer { member, seq } => self.spawn_session_timer(&cell, member, seq),
            Action::PendingTimer { member, at } => {
                tokio::spawn(async move {
                    me.sleep_until_ms(at).await;
                    let mut g = cell.lock().await;
                    let actions = rules::pending_expired(&mut g, &member, me.now());
                    me.carry_out(&cell, &mut g, actions).await;
                });
            }
            Action::RebalanceTimer { epoch, at } => {
                tokio::spawn(async move {
                    me.sleep_until_ms(at).await;
                    let mut g = cell.lock().await;
                    let actions = rules::rebalance_timer_fired(&mut g, epoch, me.now());
                    me.carry_out(&cell, &mut g, actions).await;
                });
            }
            Action::InitialDelay { epoch, at } => {
                tokio::spawn(async move {
                    me.sleep_until_ms(at).await;
                    let mut g = cell.lock().await;
                    let actions = rules::initial_delay_fired(&mut g, &me.rules(), epoch, me.now());
                    me.carry_out(&cell, &mut g, actions).await;
                });
            }
            Action::Join(..)
            | Action::Sync(..)
            | Action::Persist
            | Action::PersistAssignment { .. } => unreachable!("not a timer"),
        }
    }

    /// A rebalance starts (a downgraded consumer group).
    pub(super) async fn prepare_rebalance(
        self: &Arc<Self>,
        cell: &Arc<GroupCell>,
        g: &mut Slot,
        reason: &str,
    ) {
        let mut actions = Vec::new();
        rules::prepare_rebalance(g, &self.rules(), reason, self.now(), &mut actions);
        self.carry_out(cell, g, actions).await;
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
                let wake = {
                    let g = cell.lock().await;
                    match rules::session_wake(&g, &id, seq, me.now()) {
                        Some(at) => at,
                        None => return,
                    }
                };
                me.sleep_until_ms(wake).await;
                let mut g = cell.lock().await;
                match rules::session_fired(&mut g, &me.rules(), &id, seq, me.now()) {
                    Expiry::Gone => return,
                    Expiry::Alive => continue,
                    Expiry::Expired(actions) => {
                        me.carry_out(&cell, &mut g, actions).await;
                        return;
                    }
                }
            }
        });
    }

    // ---- SyncGroup -------------------------------------------------------------------------

    pub async fn sync(self: &Arc<Self>, p: SyncParams) -> SyncResult {
        let cell = match self.get(&p.group_id) {
            Ok(Some(c)) => c,
            Ok(None) => return SyncResult::error(E::UnknownMemberId.code()),
            Err(code) => return SyncResult::error(code),
        };
        let answer = {
            let mut g = cell.lock().await;
            if g.state != State::Dead && g.consumer.is_some() {
                Answer::Now(self.classic_sync(&mut g, &p))
            } else {
                let mut actions = Vec::new();
                let answer = match rules::sync(&mut g, p, self.now(), &mut actions) {
                    Reply::Wait(id) => {
                        let (tx, rx) = oneshot::channel();
                        g.syncs.insert(id, tx);
                        Answer::Later(rx)
                    }
                    Reply::Now(r) => Answer::Now(r),
                    Reply::Persist(_) => unreachable!("a SyncGroup is not a static rejoin"),
                };
                self.carry_out(&cell, &mut g, actions).await;
                answer
            }
        };
        answer
            .get(|| SyncResult::error(E::UnknownMemberId.code()))
            .await
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
        if g.state != State::Dead && g.consumer.is_some() {
            return self.classic_heartbeat(&mut g, member_id, instance_id, generation);
        }
        rules::heartbeat(&mut g, member_id, instance_id, generation, self.now())
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
        let mut actions = Vec::new();
        let errors = rules::leave(&mut g, &self.rules(), leaving, self.now(), &mut actions);
        self.carry_out(&cell, &mut g, actions).await;
        (0, errors)
    }
}
