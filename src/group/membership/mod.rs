//! The classic group membership state machine (Kafka's ClassicGroup rules): JoinGroup,
//! SyncGroup, Heartbeat and LeaveGroup, the rebalance they start (Empty, PreparingRebalance,
//! CompletingRebalance, Stable) and what the session, join and rebalance timers do when they
//! fire.
//!
//! Pure: every input (a request, a timer that fired) comes with the time as a plain value,
//! changes the [`Group`] and returns the answer plus the [`Action`]s the coordinator carries
//! out: answering requests that wait, arming timers, writing the group to
//! `__consumer_offsets`. No clock, no tasks, no I/O here.
//!
//! * `join`: JoinGroup (new, known, pending and static members).
//! * `rebalance`: preparing and completing a rebalance, the timers' inputs, member removal.
//! * `sync`: SyncGroup and the stored assignment, Heartbeat, LeaveGroup.

mod join;
mod rebalance;
mod sync;

#[cfg(test)]
mod sim;

pub use join::{join, pending_expired, static_replacement_stored};
pub use rebalance::{
    Expiry, initial_delay_fired, prepare_rebalance, rebalance_timer_fired, session_fired,
    session_wake,
};
pub use sync::{assignment_stored, heartbeat, leave, sync};

use crate::group::state::{Group, JoinResult, Member, SyncResult};

/// Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a member that joins a group for the first
/// time and never completes the join phase is dropped after this long.
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: i64 = 300_000;

/// The time an input happens at.
#[derive(Clone, Copy, Debug)]
pub struct Now {
    /// The coordinator's timer clock (ms): deadlines and timers are on it.
    pub mono_ms: i64,
    /// Wall-clock ms: the timestamps of state changes.
    pub wall_ms: i64,
}

/// The coordinator's settings the rules use.
#[derive(Clone, Copy, Debug)]
pub struct Rules {
    /// group.initial.rebalance.delay.ms
    pub initial_rebalance_delay_ms: i64,
}

/// How a request is answered.
#[derive(Debug)]
pub enum Reply<T> {
    Now(T),
    /// Later, by an [`Action::Join`] or [`Action::Sync`] for this member id.
    Wait(String),
    /// Once the group is written with a static member's new id: the outcome of the write goes
    /// to [`static_replacement_stored`], which gives the answer.
    Persist(Box<join::StaticReplacement>),
}

/// What the coordinator carries out, in order.
#[derive(Debug)]
pub enum Action {
    /// Answer the JoinGroup this member id waits on (if any still waits).
    Join(String, JoinResult),
    /// Answer the SyncGroup this member id waits on (if any still waits).
    Sync(String, SyncResult),
    /// Watch the session of this member (this `seq` of it) with [`session_wake`] and
    /// [`session_fired`] until it is gone.
    SessionTimer { member: String, seq: u64 },
    /// At `at`, call [`pending_expired`] for this member id handed out with
    /// MEMBER_ID_REQUIRED.
    PendingTimer { member: String, at: i64 },
    /// At `at`, call [`rebalance_timer_fired`] with this epoch.
    RebalanceTimer { epoch: u64, at: i64 },
    /// At `at`, call [`initial_delay_fired`] with this epoch.
    InitialDelay { epoch: u64, at: i64 },
    /// Write the group's metadata; nothing depends on the outcome.
    Persist,
    /// Write the group's metadata with the leader's assignment of this generation, then call
    /// [`assignment_stored`] with the outcome.
    PersistAssignment { generation: i32 },
}

pub(crate) fn session_ms(m: &Member) -> i64 {
    i64::from(m.session_timeout_ms.max(0))
}

/// A heartbeat, join, sync or commit of the member: its session starts again.
pub fn touch(m: &mut Member, now: Now) {
    m.deadline = now.mono_ms + session_ms(m);
}

/// The current generation's JoinGroup answer for `member`; the leader gets the members.
pub(crate) fn join_result_for(g: &Group, member: &str, skip_assignment: bool) -> JoinResult {
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
