//! SyncGroup (and the leader's assignment once stored), Heartbeat and LeaveGroup.

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use tracing::info;

use super::rebalance::{prepare_rebalance, remove_and_rebalance, try_complete_join};
use super::{Action, Now, Reply, Rules, touch};
use crate::group::state::{Group, State, SyncParams, SyncResult};

/// SyncGroup of a classic group (not Dead, not a consumer group).
pub fn sync(g: &mut Group, p: SyncParams, now: Now, out: &mut Vec<Action>) -> Reply<SyncResult> {
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
            touch(g.members.get_mut(&p.member_id).unwrap(), now);
            Reply::Now(SyncResult {
                error: 0,
                protocol_type: g.protocol_type.clone(),
                protocol_name: g.protocol.clone(),
                assignment: g.members[&p.member_id].assignment.clone(),
            })
        }
        State::CompletingRebalance => {
            let m = g.members.get_mut(&p.member_id).unwrap();
            m.awaiting_sync = true;
            touch(m, now);
            if g.leader.as_deref() == Some(p.member_id.as_str()) {
                // The leader's assignment: persisted with the group, then handed to every
                // member.
                let mut given: HashMap<String, Bytes> = p.assignments.into_iter().collect();
                for m in g.members.values_mut() {
                    m.assignment = given.remove(&m.id).unwrap_or_default();
                }
                out.push(Action::PersistAssignment {
                    generation: g.generation,
                });
            }
            Reply::Wait(p.member_id)
        }
    }
}

/// The group with the leader's assignment of `generation` was written (or not): the waiting
/// SyncGroups get their assignments and the group is Stable, or they get the error and the
/// group rebalances. Nothing happens if the group moved on meanwhile.
pub fn assignment_stored(
    g: &mut Group,
    rules: &Rules,
    generation: i32,
    stored: Result<(), i16>,
    now: Now,
) -> Vec<Action> {
    let mut out = Vec::new();
    if g.state != State::CompletingRebalance || g.generation != generation {
        return out;
    }
    match stored {
        Ok(()) => {
            let (ptype, pname) = (g.protocol_type.clone(), g.protocol.clone());
            for m in g.members.values_mut() {
                if std::mem::take(&mut m.awaiting_sync) {
                    out.push(Action::Sync(
                        m.id.clone(),
                        SyncResult {
                            error: 0,
                            protocol_type: ptype.clone(),
                            protocol_name: pname.clone(),
                            assignment: m.assignment.clone(),
                        },
                    ));
                }
            }
            g.transition(State::Stable, now.wall_ms);
            info!(group = %g.id, generation, "group is stable");
        }
        Err(code) => {
            for m in g.members.values_mut() {
                m.assignment = Bytes::new();
                if std::mem::take(&mut m.awaiting_sync) {
                    out.push(Action::Sync(m.id.clone(), SyncResult::error(code)));
                }
            }
            prepare_rebalance(g, rules, "storing the assignment failed", now, &mut out);
        }
    }
    out
}

/// Heartbeat of a classic group member (the group is not Dead, not a consumer group).
pub fn heartbeat(
    g: &mut Group,
    member_id: &str,
    instance_id: Option<&str>,
    generation: i32,
    now: Now,
) -> i16 {
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
    touch(g.members.get_mut(member_id).unwrap(), now);
    if g.state == State::PreparingRebalance {
        E::RebalanceInProgress.code()
    } else {
        0
    }
}

/// LeaveGroup of classic group members, each (member id, instance id): an error code each.
pub fn leave(
    g: &mut Group,
    rules: &Rules,
    leaving: &[(String, Option<String>)],
    now: Now,
    out: &mut Vec<Action>,
) -> Vec<i16> {
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
            try_complete_join(g, now, out);
            continue;
        }
        if !g.members.contains_key(&id) {
            errors.push(E::UnknownMemberId.code());
            continue;
        }
        info!(group = %g.id, member = %id, "member left");
        remove_and_rebalance(g, rules, &id, "member left", now, out);
        errors.push(0);
    }
    errors
}
