//! ConsumerGroupHeartbeat on a group's state (Kafka's `GroupMetadataManager
//! .consumerGroupHeartbeat`): validation with Kafka's messages, joins (epoch 0), static
//! members (group.instance.id: a new member id takes over a released instance's
//! assignment), leaves (-1; -2 = a static member's temporary leave), epoch checks, the group
//! epoch bump when members or subscriptions change, the target assignment when the group epoch
//! passes the assignment epoch, and the member's reconciliation step. Pure: the coordinator
//! arms the timers the outcome asks for.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError as E;

use super::assignor::{self, Subscriber};
use super::reconcile;
use super::{
    Assignment, ConsumerGroup, LEAVE_EPOCH, LEAVE_STATIC_EPOCH, Member, MemberState, Topics,
};

#[derive(Debug, Clone, Default)]
pub struct Request {
    pub version: i16,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed_names: Option<Vec<String>>,
    pub subscribed_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub owned: Option<Assignment>,
    pub client_id: String,
    pub client_host: String,
}

/// The broker's settings a heartbeat needs (`group.consumer.*`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// `group.consumer.assignors`: the first is the default.
    pub assignors: Vec<String>,
    /// `group.consumer.max.size`.
    pub max_size: usize,
    /// `group.consumer.migration.policy`.
    pub migration: super::classic::MigrationPolicy,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub code: i16,
    pub message: Option<String>,
}

fn err(e: E, message: impl Into<String>) -> Error {
    Error {
        code: e.code(),
        message: Some(message.into()),
    }
}

fn invalid(message: &str) -> Error {
    err(E::InvalidRequest, message)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The member is in the group at `epoch`; `assignment` is sent when it changed or the
    /// request was a full one; `revoking` arms its rebalance timeout (it must revoke).
    Member {
        member_id: String,
        epoch: i32,
        assignment: Option<Assignment>,
        revoking: bool,
    },
    /// The member left (epoch -1) or, static, left for now (-2). With `downgrade` the member
    /// is still in the group: it was the last consumer-protocol member, the others use the
    /// classic protocol, and the group becomes classic without it.
    Left {
        member_id: String,
        epoch: i32,
        downgrade: bool,
    },
}

/// Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`.
pub fn validate(group_id: &str, r: &Request, s: &Settings) -> Result<(), Error> {
    if group_id.is_empty() {
        return Err(invalid("GroupId can't be empty."));
    }
    if r.instance_id.as_deref() == Some("") {
        return Err(invalid("InstanceId can't be empty."));
    }
    if r.rack_id.as_deref() == Some("") {
        return Err(invalid("RackId can't be empty."));
    }
    if r.member_epoch == 0 {
        if r.version >= 1 && r.member_id.is_empty() {
            return Err(invalid("MemberId can't be empty."));
        }
        if r.rebalance_timeout_ms == -1 {
            return Err(invalid(
                "RebalanceTimeoutMs must be provided in first request.",
            ));
        }
        if r.owned.as_ref().is_none_or(|o| !o.is_empty()) {
            return Err(invalid("TopicPartitions must be empty when (re-)joining."));
        }
        let names = r.subscribed_names.as_ref().is_some_and(|n| !n.is_empty());
        let regex = r.subscribed_regex.as_ref().is_some_and(|n| !n.is_empty());
        if !names && !regex {
            return Err(invalid(
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
            ));
        }
    } else if r.member_epoch == LEAVE_STATIC_EPOCH {
        if r.member_id.is_empty() {
            return Err(invalid("MemberId can't be empty."));
        }
        if r.instance_id.is_none() {
            return Err(invalid("InstanceId can't be null."));
        }
    } else if r.member_epoch < LEAVE_STATIC_EPOCH {
        return Err(invalid("MemberEpoch is invalid."));
    } else if r.member_id.is_empty() {
        return Err(invalid("MemberId can't be empty."));
    }
    if let Some(re) = &r.subscribed_regex
        && super::compile_regex(re).is_none()
    {
        return Err(invalid(
            "SubscribedTopicRegex is not a valid regular expression.",
        ));
    }
    if let Some(a) = &r.server_assignor
        && !s.assignors.iter().any(|k| k == a)
    {
        return Err(err(
            E::UnsupportedAssignor,
            format!(
                "ServerAssignor {a} is not supported. Supported assignors: {}.",
                s.assignors.join(", ")
            ),
        ));
    }
    Ok(())
}

/// A member leaving (epoch -1 or -2).
pub fn leave(
    group_id: &str,
    g: &mut ConsumerGroup,
    r: &Request,
    s: &Settings,
) -> Result<Outcome, Error> {
    let member_id = match &r.instance_id {
        None => {
            if !g.members.contains_key(&r.member_id) {
                return Err(unknown_member(group_id, &r.member_id));
            }
            r.member_id.clone()
        }
        Some(inst) => {
            let Some(m) = g.static_member(inst) else {
                return Err(err(
                    E::UnknownMemberId,
                    format!("Instance id {inst} is unknown."),
                ));
            };
            if m.id != r.member_id {
                return Err(fenced_instance(inst, &r.member_id));
            }
            m.id.clone()
        }
    };
    if r.instance_id.is_some() && r.member_epoch == LEAVE_STATIC_EPOCH {
        if let Some(m) = g.members.get_mut(&member_id) {
            m.epoch = LEAVE_STATIC_EPOCH;
        }
        return Ok(Outcome::Left {
            member_id,
            epoch: LEAVE_STATIC_EPOCH,
            downgrade: false,
        });
    }
    let downgrade = super::classic::downgrades_without(g, &member_id, s);
    if !downgrade {
        g.remove_member(&member_id);
    }
    Ok(Outcome::Left {
        member_id,
        epoch: LEAVE_EPOCH,
        downgrade,
    })
}

fn unknown_member(group_id: &str, member_id: &str) -> Error {
    err(
        E::UnknownMemberId,
        format!("Member {member_id} is not a member of group {group_id}."),
    )
}

fn fenced_instance(instance: &str, member_id: &str) -> Error {
    err(
        E::FencedInstanceId,
        format!(
            "Static member {member_id} with instance id {instance} is not the member known by the group coordinator."
        ),
    )
}

/// Kafka's `throwIfMemberEpochIsInvalid`: an older epoch is accepted only as the previous one
/// with owned partitions within the current assignment (the member missed an answer).
fn check_epoch(m: &Member, received: i32, owned: Option<&Assignment>) -> Result<(), Error> {
    if received > m.epoch {
        return Err(err(
            E::FencedMemberEpoch,
            format!(
                "The consumer group member has a greater epoch ({received}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
                m.epoch
            ),
        ));
    }
    if received < m.epoch {
        let subset = owned.is_some_and(|o| {
            o.iter()
                .all(|(t, ps)| ps.is_empty() || m.assigned.get(t).is_some_and(|a| ps.is_subset(a)))
        });
        if received != m.previous_epoch || !subset {
            return Err(err(
                E::FencedMemberEpoch,
                format!(
                    "The consumer group member has a smaller member epoch ({received}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
                    m.epoch
                ),
            ));
        }
    }
    Ok(())
}

/// A heartbeat of a member in the group or joining it (epoch >= 0). `new_id` gives a member
/// id for a v0 join without one.
pub fn heartbeat(
    group_id: &str,
    g: &mut ConsumerGroup,
    r: &Request,
    topics: &Topics,
    s: &Settings,
    new_id: &dyn Fn() -> String,
) -> Result<Outcome, Error> {
    if r.member_epoch < 0 {
        return leave(group_id, g, r, s);
    }
    let joining = r.member_epoch == 0;
    let mut member_id = if r.member_id.is_empty() {
        new_id()
    } else {
        r.member_id.clone()
    };
    let mut bump = false;
    let full = joining;
    let member = match &r.instance_id {
        None => match g.members.get(&member_id) {
            Some(m) => {
                if !joining {
                    check_epoch(m, r.member_epoch, r.owned.as_ref())?;
                }
                m.clone()
            }
            None if joining => {
                bump = true;
                Member::new(&member_id)
            }
            None => return Err(unknown_member(group_id, &member_id)),
        },
        Some(inst) => match g.static_member(inst).cloned() {
            None if joining => {
                bump = true;
                let mut m = Member::new(&member_id);
                m.instance_id = Some(inst.clone());
                m
            }
            None => {
                return Err(err(
                    E::UnknownMemberId,
                    format!("Instance id {inst} is unknown."),
                ));
            }
            Some(old) if joining => {
                if old.id == member_id && old.epoch != LEAVE_STATIC_EPOCH {
                    old
                } else if old.epoch != LEAVE_STATIC_EPOCH {
                    return Err(err(
                        E::UnreleasedInstanceId,
                        format!(
                            "Static member {} with instance id {inst} cannot be replaced because it has not left the group.",
                            old.id
                        ),
                    ));
                } else {
                    // The new member id continues the released instance: its assignment,
                    // target and epoch; the group epoch does not move.
                    let mut m = old.clone();
                    m.id = member_id.clone();
                    m.epoch = old.previous_epoch.max(0);
                    g.members.remove(&old.id);
                    if let Some(t) = g.target.remove(&old.id) {
                        g.target.insert(member_id.clone(), t);
                    }
                    m.epoch = 0;
                    m
                }
            }
            Some(old) => {
                if old.id != member_id {
                    return Err(fenced_instance(inst, &member_id));
                }
                check_epoch(&old, r.member_epoch, r.owned.as_ref())?;
                old
            }
        },
    };
    member_id.clone_from(&member.id);
    if !g.members.contains_key(&member_id) && g.members.len() >= s.max_size {
        return Err(err(
            E::GroupMaxSizeReached,
            format!(
                "The consumer group has reached its maximum capacity of {} members.",
                s.max_size
            ),
        ));
    }
    Ok(apply(g, member, r, bump, full, topics, s))
}

/// The member's fields from the request, the group epoch bump if its subscription (or the
/// group's subscribed topics) changed, a new target assignment if the group epoch passed the
/// assignment epoch, and the member's reconciliation step with the partitions it owns.
pub(super) fn apply(
    g: &mut ConsumerGroup,
    mut member: Member,
    r: &Request,
    mut bump: bool,
    mut full: bool,
    topics: &Topics,
    s: &Settings,
) -> Outcome {
    let member_id = member.id.clone();
    // Fields the request carries replace the member's.
    if r.rack_id.is_some() {
        member.rack_id.clone_from(&r.rack_id);
    }
    if r.rebalance_timeout_ms != -1 {
        member.rebalance_timeout_ms = r.rebalance_timeout_ms;
    }
    member.client_id.clone_from(&r.client_id);
    member.client_host.clone_from(&r.client_host);
    if let Some(names) = &r.subscribed_names {
        let mut names = names.clone();
        names.sort();
        names.dedup();
        if names != member.subscribed_names {
            member.subscribed_names = names;
            bump = true;
        }
        full = true;
    }
    if let Some(re) = &r.subscribed_regex {
        let re = Some(re.clone()).filter(|s| !s.is_empty());
        if re != member.subscribed_regex {
            member.subscribed_regex = re;
            bump = true;
        }
    }
    if let Some(a) = &r.server_assignor {
        let a = Some(a.clone()).filter(|s| !s.is_empty());
        if a != member.server_assignor {
            member.server_assignor = a;
            bump = true;
        }
    }
    let before = g.members.get(&member_id).map(|m| m.assigned.clone());
    g.members.insert(member_id.clone(), member);
    let subscribed = g.compute_subscribed(topics);
    if subscribed != g.subscribed {
        g.subscribed = subscribed;
        bump = true;
    }
    if bump {
        g.group_epoch += 1;
    }
    if g.group_epoch > g.assignment_epoch {
        compute_target(g, topics, s);
    }
    let empty = Assignment::new();
    let target = g.target.get(&member_id).unwrap_or(&empty).clone();
    let current = g.members[&member_id].clone();
    let next = {
        let held = |t: &uuid::Uuid, p: i32| g.owned_by_other(&member_id, t, p);
        reconcile::next(
            &current,
            g.assignment_epoch,
            &target,
            &held,
            r.owned.as_ref(),
        )
    };
    let changed = before.as_ref() != Some(&next.assigned);
    let revoking = next.state == MemberState::UnrevokedPartitions;
    let epoch = next.epoch;
    let send = full || changed || r.owned.as_ref().is_some_and(|o| !same(o, &next.assigned));
    let assignment = send.then(|| next.assigned.clone());
    g.members.insert(member_id.clone(), next);
    Outcome::Member {
        member_id,
        epoch,
        assignment,
        revoking,
    }
}

fn same(a: &Assignment, b: &Assignment) -> bool {
    let strip = |x: &Assignment| -> Assignment {
        x.iter()
            .filter(|(_, p)| !p.is_empty())
            .map(|(t, p)| (*t, p.clone()))
            .collect()
    };
    strip(a) == strip(b)
}

/// The assignor the group uses: the one most members name (ties: the earlier in the
/// broker's list), else the broker's default.
pub fn preferred_assignor(g: &ConsumerGroup, s: &Settings) -> String {
    let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
    for m in g.members.values() {
        if let Some(a) = &m.server_assignor {
            *votes.entry(a.as_str()).or_default() += 1;
        }
    }
    let best = votes.values().copied().max().unwrap_or(0);
    if best > 0 {
        for a in &s.assignors {
            if votes.get(a.as_str()) == Some(&best) {
                return a.clone();
            }
        }
    }
    s.assignors
        .first()
        .cloned()
        .unwrap_or_else(|| assignor::UNIFORM.to_string())
}

/// A new target assignment at the group epoch.
pub fn compute_target(g: &mut ConsumerGroup, topics: &Topics, s: &Settings) {
    let assignor = preferred_assignor(g, s);
    let subscribers: Vec<Subscriber> = g
        .members
        .values()
        .map(|m| Subscriber {
            member_id: m.id.clone(),
            topics: m.subscribed_topics(topics).values().map(|t| t.id).collect(),
        })
        .collect();
    let partitions: BTreeMap<uuid::Uuid, i32> =
        g.subscribed.values().map(|(id, n)| (*id, *n)).collect();
    g.target = assignor::assign(&assignor, &subscribers, &partitions, &g.target);
    g.assignment_epoch = g.group_epoch;
    g.assignor = Some(assignor);
}

#[cfg(test)]
pub(in crate::group) mod tests {
    use std::collections::BTreeSet;

    use uuid::Uuid;

    use super::super::TopicMeta;
    use super::*;

    /// One topic `t` of 4 partitions.
    pub(in crate::group::consumer) fn topics() -> Topics {
        Topics::from([(
            "t".to_string(),
            TopicMeta {
                id: Uuid::from_u128(1),
                partitions: 4,
                internal: false,
            },
        )])
    }

    fn settings() -> Settings {
        Settings {
            assignors: vec!["uniform".into(), "range".into()],
            max_size: 3,
            migration: super::super::classic::MigrationPolicy::Bidirectional,
        }
    }

    /// A consumer-protocol member's first heartbeat, subscribed to `t`.
    pub(in crate::group) fn join(id: &str) -> Request {
        Request {
            version: 1,
            member_id: id.into(),
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            subscribed_names: Some(vec!["t".into()]),
            owned: Some(Assignment::new()),
            ..Default::default()
        }
    }

    /// A heartbeat of member `id` at `epoch` owning `owned`.
    pub(in crate::group) fn hb(id: &str, epoch: i32, owned: &Assignment) -> Request {
        Request {
            version: 1,
            member_id: id.into(),
            member_epoch: epoch,
            rebalance_timeout_ms: -1,
            owned: Some(owned.clone()),
            ..Default::default()
        }
    }

    fn run(g: &mut ConsumerGroup, r: &Request) -> Result<Outcome, Error> {
        heartbeat("g", g, r, &topics(), &settings(), &|| "generated".into())
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(BTreeSet::len).sum()
    }

    #[test]
    fn invalid_requests_get_kafkas_messages() {
        let s = settings();
        let mut r = join("a");
        r.subscribed_names = Some(vec![]);
        assert_eq!(
            validate("g", &r, &s).unwrap_err().message.as_deref(),
            Some("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        );
        let mut r = join("a");
        r.server_assignor = Some("sticky".into());
        let e = validate("g", &r, &s).unwrap_err();
        assert_eq!(e.code, E::UnsupportedAssignor.code());
        assert_eq!(
            e.message.as_deref(),
            Some("ServerAssignor sticky is not supported. Supported assignors: uniform, range.")
        );
        let mut r = join("");
        r.version = 1;
        assert_eq!(
            validate("g", &r, &s).unwrap_err().code,
            E::InvalidRequest.code()
        );
        assert_eq!(
            validate("", &join("a"), &s).unwrap_err().message.as_deref(),
            Some("GroupId can't be empty.")
        );
        let mut r = hb("a", -3, &Assignment::new());
        r.member_epoch = -3;
        assert_eq!(
            validate("g", &r, &s).unwrap_err().message.as_deref(),
            Some("MemberEpoch is invalid.")
        );
    }

    #[test]
    fn a_partition_moves_only_after_its_owner_revoked_it() {
        let mut g = ConsumerGroup::default();
        let Outcome::Member {
            epoch, assignment, ..
        } = run(&mut g, &join("a")).unwrap()
        else {
            panic!()
        };
        assert_eq!(epoch, 1);
        let a_all = assignment.unwrap();
        assert_eq!(count(&a_all), 4);
        // b joins: epoch 2; its partitions are still a's.
        let Outcome::Member {
            epoch, assignment, ..
        } = run(&mut g, &join("b")).unwrap()
        else {
            panic!()
        };
        assert_eq!(epoch, 2);
        assert_eq!(count(&assignment.unwrap()), 0);
        // a must revoke two and stays at epoch 1.
        let Outcome::Member {
            epoch,
            assignment,
            revoking,
            ..
        } = run(&mut g, &hb("a", 1, &a_all)).unwrap()
        else {
            panic!()
        };
        assert_eq!((epoch, revoking), (1, true));
        let a_kept = assignment.unwrap();
        assert_eq!(count(&a_kept), 2);
        // b still waits.
        let Outcome::Member { assignment, .. } =
            run(&mut g, &hb("b", 2, &Assignment::new())).unwrap()
        else {
            panic!()
        };
        assert!(assignment.is_none_or(|a| count(&a) == 0));
        // a revoked: epoch 2.
        let Outcome::Member { epoch, .. } = run(&mut g, &hb("a", 1, &a_kept)).unwrap() else {
            panic!()
        };
        assert_eq!(epoch, 2);
        let Outcome::Member {
            epoch, assignment, ..
        } = run(&mut g, &hb("b", 2, &Assignment::new())).unwrap()
        else {
            panic!()
        };
        assert_eq!(epoch, 2);
        assert_eq!(count(&assignment.unwrap()), 2);
        assert_eq!(g.state(), super::super::GroupState::Stable);
    }

    #[test]
    fn epochs_and_membership_are_checked() {
        let mut g = ConsumerGroup::default();
        run(&mut g, &join("a")).unwrap();
        let e = run(&mut g, &hb("a", 5, &Assignment::new())).unwrap_err();
        assert_eq!(e.code, E::FencedMemberEpoch.code());
        let e = run(&mut g, &hb("x", 1, &Assignment::new())).unwrap_err();
        assert_eq!(e.code, E::UnknownMemberId.code());
        assert_eq!(
            e.message.as_deref(),
            Some("Member x is not a member of group g.")
        );
        run(&mut g, &join("b")).unwrap();
        run(&mut g, &join("c")).unwrap();
        let e = run(&mut g, &join("d")).unwrap_err();
        assert_eq!(e.code, E::GroupMaxSizeReached.code());
        let Outcome::Left { epoch, .. } = run(&mut g, &hb("b", -1, &Assignment::new())).unwrap()
        else {
            panic!()
        };
        assert_eq!(epoch, -1);
        assert!(!g.members.contains_key("b"));
    }

    #[test]
    fn a_static_member_leaves_for_now_and_its_instance_comes_back() {
        let mut g = ConsumerGroup::default();
        let mut r = join("a1");
        r.instance_id = Some("i".into());
        let Outcome::Member { assignment, .. } = run(&mut g, &r).unwrap() else {
            panic!()
        };
        let owned = assignment.unwrap();
        let mut second = r.clone();
        second.member_id = "a2".into();
        let e = run(&mut g, &second).unwrap_err();
        assert_eq!(e.code, E::UnreleasedInstanceId.code());
        let mut leave = hb("a1", -2, &owned);
        leave.instance_id = Some("i".into());
        assert_eq!(
            run(&mut g, &leave).unwrap(),
            Outcome::Left {
                member_id: "a1".into(),
                epoch: -2,
                downgrade: false,
            }
        );
        let epoch_before = g.group_epoch;
        let Outcome::Member {
            member_id,
            assignment,
            ..
        } = run(&mut g, &second).unwrap()
        else {
            panic!()
        };
        assert_eq!(member_id, "a2");
        assert_eq!(assignment.unwrap(), owned);
        assert_eq!(g.group_epoch, epoch_before);
        assert!(!g.members.contains_key("a1"));
    }

    #[test]
    fn the_client_names_the_assignor() {
        let mut g = ConsumerGroup::default();
        let mut r = join("a");
        r.server_assignor = Some("range".into());
        run(&mut g, &r).unwrap();
        assert_eq!(g.assignor.as_deref(), Some("range"));
    }

    #[test]
    fn a_regex_follows_the_topics() {
        let mut g = ConsumerGroup::default();
        let mut r = join("a");
        r.subscribed_names = None;
        r.subscribed_regex = Some("t.*".into());
        run(&mut g, &r).unwrap();
        let mut ts = topics();
        ts.insert(
            "t2".into(),
            TopicMeta {
                id: Uuid::from_u128(2),
                partitions: 1,
                internal: false,
            },
        );
        ts.insert(
            "other".into(),
            TopicMeta {
                id: Uuid::from_u128(3),
                partitions: 1,
                internal: false,
            },
        );
        let owned = g.members["a"].assigned.clone();
        let out = heartbeat("g", &mut g, &hb("a", 1, &owned), &ts, &settings(), &|| {
            "x".into()
        })
        .unwrap();
        let Outcome::Member {
            epoch, assignment, ..
        } = out
        else {
            panic!()
        };
        assert_eq!(epoch, 2);
        assert_eq!(count(&assignment.unwrap()), 5);
    }
}
