//! JoinGroup: new members (dynamic, pending, static), known members, static replacement.

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use tracing::{debug, info};

use super::rebalance::{maybe_prepare_rebalance, try_complete_join};
use super::{
    Action, NEW_MEMBER_JOIN_TIMEOUT_MS, Now, Reply, Rules, join_result_for, session_ms, touch,
};
use crate::group::state::{Group, JoinParams, JoinResult, Member, State};

/// A static member's new id took over its membership without a rebalance; the group is to be
/// written, and undone if that fails.
#[derive(Debug)]
pub struct StaticReplacement {
    instance: String,
    old_id: String,
    new_id: String,
    /// The member's protocols, rebalance and session timeouts before the rejoin.
    old: (Vec<(String, Bytes)>, i32, i32),
    leader_before: String,
    supports_skip_assignment: bool,
}

/// JoinGroup of a classic group (not a consumer group's). `new_id` is the id a member joining
/// without one gets.
pub fn join(
    g: &mut Group,
    rules: &Rules,
    p: JoinParams,
    new_id: String,
    now: Now,
    out: &mut Vec<Action>,
) -> Reply<JoinResult> {
    if g.state == State::Dead {
        return Reply::Now(JoinResult::error(
            E::CoordinatorNotAvailable.code(),
            &p.member_id,
        ));
    }
    if p.member_id.is_empty() {
        join_new_member(g, rules, p, new_id, now, out)
    } else {
        join_known_member(g, rules, p, now, out)
    }
}

fn join_new_member(
    g: &mut Group,
    rules: &Rules,
    p: JoinParams,
    new_id: String,
    now: Now,
    out: &mut Vec<Action>,
) -> Reply<JoinResult> {
    if !g.supports(&p.protocol_type, &p.protocols) {
        return Reply::Now(JoinResult::error(E::InconsistentGroupProtocol.code(), ""));
    }
    if let Some(instance) = p.instance_id.clone() {
        if let Some(old_id) = g.statics.get(&instance).cloned() {
            return rejoin_static_member(g, rules, p, instance, old_id, new_id, now, out);
        }
        return add_member_and_rebalance(g, rules, p, new_id, now, out);
    }
    if p.require_known_member_id {
        g.pending.insert(new_id.clone());
        out.push(Action::PendingTimer {
            member: new_id.clone(),
            at: now.mono_ms + i64::from(p.session_timeout_ms.max(0)),
        });
        return Reply::Now(JoinResult::error(E::MemberIdRequired.code(), &new_id));
    }
    add_member_and_rebalance(g, rules, p, new_id, now, out)
}

/// The member id handed out with MEMBER_ID_REQUIRED was not joined with in time.
pub fn pending_expired(g: &mut Group, id: &str, now: Now) -> Vec<Action> {
    let mut out = Vec::new();
    if g.pending.remove(id) {
        debug!(group = %g.id, member = %id, "pending member expired");
        try_complete_join(g, now, &mut out);
    }
    out
}

fn join_known_member(
    g: &mut Group,
    rules: &Rules,
    p: JoinParams,
    now: Now,
    out: &mut Vec<Action>,
) -> Reply<JoinResult> {
    let id = p.member_id.clone();
    if g.pending.remove(&id) {
        return add_member_and_rebalance(g, rules, p, id, now, out);
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
        State::PreparingRebalance => update_member_and_rebalance(g, rules, p, now, out),
        State::CompletingRebalance => {
            if g.members[&id].protocols == p.protocols {
                // A repeated JoinGroup (e.g. after a lost response): same answer again.
                Reply::Now(join_result_for(g, &id, false))
            } else {
                update_member_and_rebalance(g, rules, p, now, out)
            }
        }
        State::Stable => {
            let is_leader = g.leader.as_deref() == Some(id.as_str());
            let same = g.members[&id].protocols == p.protocols;
            if is_leader || !same {
                update_member_and_rebalance(g, rules, p, now, out)
            } else {
                touch(g.members.get_mut(&id).unwrap(), now);
                Reply::Now(join_result_for(g, &id, false))
            }
        }
        State::Empty | State::Dead => Reply::Now(JoinResult::error(E::UnknownMemberId.code(), &id)),
    }
}

fn add_member_and_rebalance(
    g: &mut Group,
    rules: &Rules,
    p: JoinParams,
    id: String,
    now: Now,
    out: &mut Vec<Action>,
) -> Reply<JoinResult> {
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
            awaiting_join: true,
            awaiting_sync: false,
            deadline: now.mono_ms + NEW_MEMBER_JOIN_TIMEOUT_MS,
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
    out.push(Action::SessionTimer {
        member: id.clone(),
        seq,
    });
    maybe_prepare_rebalance(g, rules, "new member joined", now, out);
    Reply::Wait(id)
}

fn update_member_and_rebalance(
    g: &mut Group,
    rules: &Rules,
    p: JoinParams,
    now: Now,
    out: &mut Vec<Action>,
) -> Reply<JoinResult> {
    let m = g.members.get_mut(&p.member_id).unwrap();
    m.protocols = p.protocols;
    m.rebalance_timeout_ms = p.rebalance_timeout_ms;
    m.session_timeout_ms = p.session_timeout_ms;
    m.client_id = p.client_id;
    m.client_host = p.client_host;
    m.awaiting_join = true;
    maybe_prepare_rebalance(g, rules, "member rejoined", now, out);
    Reply::Wait(p.member_id)
}

/// A static member rejoins with an unknown member id (Kafka's
/// `updateStaticMemberThenRebalanceOrCompleteJoin`): the new id takes over the old
/// membership (assignment, join order, leadership) and the old id is fenced: a JoinGroup or
/// SyncGroup it still awaits is answered FENCED_INSTANCE_ID.
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
#[allow(clippy::too_many_arguments)]
fn rejoin_static_member(
    g: &mut Group,
    rules: &Rules,
    p: JoinParams,
    instance: String,
    old_id: String,
    new_id: String,
    now: Now,
    out: &mut Vec<Action>,
) -> Reply<JoinResult> {
    if matches!(g.state, State::Empty | State::Dead) {
        return Reply::Now(JoinResult::error(E::UnknownMemberId.code(), &new_id));
    }
    let leader_before = g.leader.clone().unwrap_or_default();
    let Some((awaited_join, awaited_sync)) = g.replace_static_member(&instance, &old_id, &new_id)
    else {
        g.statics.remove(&instance);
        return add_member_and_rebalance(g, rules, p, new_id, now, out);
    };
    let fenced = E::FencedInstanceId.code();
    if awaited_join {
        out.push(Action::Join(
            old_id.clone(),
            JoinResult::error(fenced, &old_id),
        ));
    }
    if awaited_sync {
        out.push(Action::Sync(
            old_id.clone(),
            crate::group::state::SyncResult::error(fenced),
        ));
    }
    let m = g.members.get_mut(&new_id).unwrap();
    m.deadline = now.mono_ms + session_ms(m);
    let seq = m.seq;
    let old = (
        std::mem::replace(&mut m.protocols, p.protocols),
        std::mem::replace(&mut m.rebalance_timeout_ms, p.rebalance_timeout_ms),
        std::mem::replace(&mut m.session_timeout_ms, p.session_timeout_ms),
    );
    // The old id's timer ends when it finds its member gone; the new id gets its own.
    out.push(Action::SessionTimer {
        member: new_id.clone(),
        seq,
    });
    info!(group = %g.id, %instance, %old_id, %new_id, state = g.state.name(), "static member rejoined");
    let rebalance = match g.state {
        State::Stable if g.select_protocol() == g.protocol => None,
        State::Stable => Some("static member changed the selected protocol"),
        _ => Some("static member replaced during a rebalance"),
    };
    if let Some(reason) = rebalance {
        g.members.get_mut(&new_id).unwrap().awaiting_join = true;
        maybe_prepare_rebalance(g, rules, reason, now, out);
        return Reply::Wait(new_id);
    }
    Reply::Persist(Box::new(StaticReplacement {
        instance,
        old_id,
        new_id,
        old,
        leader_before,
        supports_skip_assignment: p.supports_skip_assignment,
    }))
}

/// The group with a static member's new id was written (or not): the JoinGroup's answer.
pub fn static_replacement_stored(
    g: &mut Group,
    r: StaticReplacement,
    stored: Result<(), i16>,
) -> JoinResult {
    if let Err(code) = stored {
        // Undo: the old member id stays the member (its session timer is still running).
        g.replace_static_member(&r.instance, &r.new_id, &r.old_id);
        let m = g.members.get_mut(&r.old_id).unwrap();
        (m.protocols, m.rebalance_timeout_ms, m.session_timeout_ms) = r.old;
        return JoinResult {
            error: code,
            leader: r.leader_before,
            members: Vec::new(),
            ..join_result_for(g, "", false)
        };
    }
    if r.supports_skip_assignment {
        let is_leader = g.leader.as_deref() == Some(r.new_id.as_str());
        return join_result_for(g, &r.new_id, is_leader);
    }
    JoinResult {
        leader: r.leader_before,
        members: Vec::new(),
        ..join_result_for(g, &r.new_id, false)
    }
}
