//! A consumer group's records in `__consumer_offsets` on the coordinator's side: the write
//! of a change under the group's lock (before the request that made it is answered; a
//! failed write undoes the change), and the group installed from a replay with fresh
//! sessions for its members (Kafka gives loaded members a new session timeout).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::consumer::TIMER_SEQ;
use super::{Coordinator, GroupCell};
use crate::group::consumer::persist::{self, Loading};
use crate::group::consumer::{ConsumerGroup, MemberState, Topics};
use crate::group::state::{ConsumerSide, Group, MemberTimer, State};

impl Coordinator {
    /// Writes what changed in the consumer group of `g` (whose lock the caller holds) since
    /// `before`. If the write fails the group is `before` again and the error is returned.
    pub(super) async fn persist_consumer(
        &self,
        cell: &Arc<GroupCell>,
        g: &mut Group,
        before: ConsumerGroup,
    ) -> Result<(), i16> {
        let gid = g.id.clone();
        let Some(side) = g.consumer.as_mut() else {
            return Ok(());
        };
        let records = persist::changes(&gid, side.logged.then_some(&before), &side.group);
        if records.is_empty() {
            return Ok(());
        }
        match self.write(cell, &gid, records).await {
            Ok(()) => {
                side.logged = true;
                Ok(())
            }
            Err(code) => {
                side.group = before;
                Err(code)
            }
        }
    }

    /// Starts the session timer of every member of a loaded consumer group (and the
    /// rebalance timeout of those that must revoke partitions).
    pub(super) fn start_consumer_sessions(self: &Arc<Self>, cell: &Arc<GroupCell>, g: &mut Group) {
        let session = Duration::from_millis(self.consumer_session_ms(&g.id));
        let Some(side) = g.consumer.as_mut() else {
            return;
        };
        let now = Instant::now();
        for m in side.group.members.values() {
            if side.timers.contains_key(&m.id) {
                continue;
            }
            let seq = TIMER_SEQ.fetch_add(1, Ordering::Relaxed);
            let revoke = (m.state == MemberState::UnrevokedPartitions)
                .then(|| now + Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64));
            side.timers.insert(
                m.id.clone(),
                MemberTimer {
                    seq,
                    session_deadline: now + session,
                    revoke_deadline: revoke,
                    join_deadline: None,
                    sync_deadline: None,
                },
            );
            self.spawn_consumer_timer(cell, m.id.clone(), seq);
        }
    }
}

/// A loaded group has consumer group records: it is a consumer group (any classic metadata
/// of it is older: a consumer group becoming classic deletes its records first).
pub(super) fn restore(g: &mut Group, l: Loading) {
    let has_members = !l.group.members.is_empty();
    g.consumer = Some(ConsumerSide {
        group: l.group,
        timers: Default::default(),
        logged: true,
        loaded_hash: Some(l.metadata_hash),
    });
    g.protocol_type = Some("consumer".to_string());
    g.protocol = None;
    g.leader = None;
    g.members.clear();
    g.statics.clear();
    g.state = if has_members {
        State::Stable
    } else {
        State::Empty
    };
}

/// A loaded group's first heartbeat: if its subscribed topics still have the hash its group
/// epoch was written with, the group takes them as they are (no new epoch); otherwise they
/// changed while it was not coordinated here and the heartbeat moves the epoch.
pub(super) fn adopt_loaded_topics(side: &mut ConsumerSide, topics: &Topics) {
    if let Some(h) = side.loaded_hash.take() {
        let now = side.group.compute_subscribed(topics);
        if persist::metadata_hash(&now) == h {
            side.group.subscribed = now;
        }
    }
}
