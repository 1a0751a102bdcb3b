//! Rebalances: preparing one (from Empty with the initial delay, else bounded by the rebalance
//! timeout), completing the join phase, and the timers' inputs (rebalance timeout, initial
//! delay, member sessions).

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use tracing::info;

use super::{Action, Now, Rules, join_result_for, session_ms};
use crate::group::state::{Group, JoinResult, State, SyncResult};

pub(super) fn maybe_prepare_rebalance(
    g: &mut Group,
    rules: &Rules,
    reason: &str,
    now: Now,
    out: &mut Vec<Action>,
) {
    match g.state {
        State::Stable | State::CompletingRebalance | State::Empty => {
            prepare_rebalance(g, rules, reason, now, out)
        }
        State::PreparingRebalance => try_complete_join(g, now, out),
        State::Dead => {}
    }
}

/// A rebalance starts: SyncGroups waiting in CompletingRebalance are told
/// REBALANCE_IN_PROGRESS and the join phase begins, with the initial delay if the group was
/// Empty.
pub fn prepare_rebalance(
    g: &mut Group,
    rules: &Rules,
    reason: &str,
    now: Now,
    out: &mut Vec<Action>,
) {
    if g.state == State::CompletingRebalance {
        for m in g.members.values_mut() {
            m.assignment = Bytes::new();
            if std::mem::take(&mut m.awaiting_sync) {
                out.push(Action::Sync(
                    m.id.clone(),
                    SyncResult::error(E::RebalanceInProgress.code()),
                ));
            }
        }
    }
    let from_empty = g.state == State::Empty;
    g.transition(State::PreparingRebalance, now.wall_ms);
    g.rebalance_epoch += 1;
    let epoch = g.rebalance_epoch;
    info!(group = %g.id, generation = g.generation, reason, "preparing rebalance");
    let rebalance_timeout = i64::from(g.max_rebalance_timeout_ms().max(0));
    if from_empty {
        let initial = rules.initial_rebalance_delay_ms;
        g.initial_delay = true;
        g.initial_delay_remaining_ms = (rebalance_timeout - initial).max(0);
        out.push(Action::InitialDelay {
            epoch,
            at: now.mono_ms + initial,
        });
    } else {
        g.initial_delay = false;
        out.push(Action::RebalanceTimer {
            epoch,
            at: now.mono_ms + rebalance_timeout,
        });
        try_complete_join(g, now, out);
    }
}

/// The initial delay of rebalance `epoch` ran out: it is extended (up to the rebalance
/// timeout) while new members keep joining, else the join phase completes.
pub fn initial_delay_fired(g: &mut Group, rules: &Rules, epoch: u64, now: Now) -> Vec<Action> {
    let mut out = Vec::new();
    if g.rebalance_epoch != epoch || g.state != State::PreparingRebalance {
        return out;
    }
    if g.new_member_added && g.initial_delay_remaining_ms > 0 {
        g.new_member_added = false;
        let delay = rules
            .initial_rebalance_delay_ms
            .min(g.initial_delay_remaining_ms);
        g.initial_delay_remaining_ms -= delay;
        out.push(Action::InitialDelay {
            epoch,
            at: now.mono_ms + delay,
        });
        return out;
    }
    g.initial_delay = false;
    complete_join(g, now, &mut out);
    out
}

/// The rebalance timeout of rebalance `epoch` ran out: the join phase completes without the
/// members that have not rejoined.
pub fn rebalance_timer_fired(g: &mut Group, epoch: u64, now: Now) -> Vec<Action> {
    let mut out = Vec::new();
    if g.rebalance_epoch == epoch && g.state == State::PreparingRebalance {
        complete_join(g, now, &mut out);
    }
    out
}

pub(super) fn try_complete_join(g: &mut Group, now: Now, out: &mut Vec<Action>) {
    if g.state == State::PreparingRebalance && !g.initial_delay && g.all_joined() {
        complete_join(g, now, out);
    }
}

/// The join phase ends: members that did not rejoin are dropped, the next generation
/// starts, and every waiting JoinGroup is answered.
fn complete_join(g: &mut Group, now: Now, out: &mut Vec<Action>) {
    let gone: Vec<String> = g
        .members
        .values()
        .filter(|m| !m.awaiting_join)
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
        g.transition(State::Empty, now.wall_ms);
        info!(group = %g.id, generation = g.generation, "group is empty");
        out.push(Action::Persist);
        return;
    }
    g.protocol = g.select_protocol();
    g.transition(State::CompletingRebalance, now.wall_ms);
    info!(
        group = %g.id,
        generation = g.generation,
        members = g.members.len(),
        protocol = g.protocol.as_deref().unwrap_or(""),
        "join phase complete"
    );
    let mut ids: Vec<String> = g.members.keys().cloned().collect();
    ids.sort_by_key(|id| g.members[id].seq);
    for id in ids {
        let result = join_result_for(g, &id, false);
        let m = g.members.get_mut(&id).unwrap();
        m.is_new = false;
        m.deadline = now.mono_ms + session_ms(m);
        if std::mem::take(&mut m.awaiting_join) {
            out.push(Action::Join(id, result));
        }
    }
}

/// When the session timer of member `id` (this `seq` of it) is next to look; None once the
/// member is gone. The deadline can also move earlier (a new member's join timeout is
/// replaced by its session timeout): it looks at least once per session timeout.
pub fn session_wake(g: &Group, id: &str, seq: u64, now: Now) -> Option<i64> {
    let m = g.members.get(id).filter(|m| m.seq == seq)?;
    Some(m.deadline.min(now.mono_ms + session_ms(m)))
}

/// What the session timer of a member found.
#[derive(Debug)]
pub enum Expiry {
    /// The member is gone (or is a later member of the same id): the timer ends.
    Gone,
    /// The session has not expired: the timer looks again at [`session_wake`].
    Alive,
    /// The member was removed: the timer ends after these actions.
    Expired(Vec<Action>),
}

/// The session timer of member `id` (this `seq` of it) woke.
pub fn session_fired(g: &mut Group, rules: &Rules, id: &str, seq: u64, now: Now) -> Expiry {
    let Some(m) = g.members.get_mut(id).filter(|m| m.seq == seq) else {
        return Expiry::Gone;
    };
    if now.mono_ms < m.deadline {
        return Expiry::Alive;
    }
    // Members waiting in a rebalance are kept alive (new ones only until their join timeout).
    if (m.awaiting_join && !m.is_new) || m.awaiting_sync {
        m.deadline = now.mono_ms + session_ms(m);
        return Expiry::Alive;
    }
    info!(group = %g.id, member = %id, "session timed out: member removed");
    let mut out = Vec::new();
    remove_and_rebalance(g, rules, id, "member session expired", now, &mut out);
    Expiry::Expired(out)
}

/// Member `id` leaves or times out: a JoinGroup or SyncGroup it awaits is answered
/// UNKNOWN_MEMBER_ID and the group rebalances.
pub(super) fn remove_and_rebalance(
    g: &mut Group,
    rules: &Rules,
    id: &str,
    reason: &str,
    now: Now,
    out: &mut Vec<Action>,
) {
    if let Some(m) = g.remove_member(id) {
        let code = E::UnknownMemberId.code();
        if m.awaiting_join {
            out.push(Action::Join(id.to_string(), JoinResult::error(code, id)));
        }
        if m.awaiting_sync {
            out.push(Action::Sync(id.to_string(), SyncResult::error(code)));
        }
    }
    match g.state {
        State::Stable | State::CompletingRebalance => prepare_rebalance(g, rules, reason, now, out),
        State::PreparingRebalance => try_complete_join(g, now, out),
        _ => {}
    }
}
