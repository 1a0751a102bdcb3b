//! Kafka's `CurrentAssignmentBuilder`: one step of a member from its current assignment
//! towards the target assignment, taken at each of its heartbeats. Pure.
//!
//! * STABLE at the target epoch stays; behind it, the next assignment is computed.
//! * The next assignment keeps current ∩ target. Partitions the member has but the target
//!   does not are to be revoked: while the member still owns any of them (as its heartbeat's
//!   owned partitions say) it stays at its epoch in UNREVOKED_PARTITIONS with only the kept
//!   partitions assigned. Otherwise it moves to the target epoch with the kept partitions
//!   plus the new ones that no other member holds any more; if some are still held it is in
//!   UNRELEASED_PARTITIONS (and gets them at a later heartbeat), else STABLE.
//! * UNREVOKED_PARTITIONS moves on once the heartbeat's owned partitions hold none of those
//!   pending revocation; UNRELEASED_PARTITIONS re-computes at each heartbeat.

use super::{Assignment, Member, MemberState};

/// Where the member goes next, given the target (epoch and partitions), whether a partition
/// is held by another member, and the partitions the member reports owning (None when the
/// heartbeat did not say).
pub fn next(
    member: &Member,
    target_epoch: i32,
    target: &Assignment,
    held_by_other: &dyn Fn(&uuid::Uuid, i32) -> bool,
    owned: Option<&Assignment>,
) -> Member {
    match member.state {
        MemberState::Stable if member.epoch == target_epoch => member.clone(),
        MemberState::UnrevokedPartitions if owns_any(owned, &member.pending_revocation) => {
            member.clone()
        }
        _ => compute_next(member, target_epoch, target, held_by_other, owned),
    }
}

fn owns_any(owned: Option<&Assignment>, revoking: &Assignment) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    revoking.iter().any(|(t, ps)| {
        owned
            .get(t)
            .is_some_and(|o| ps.iter().any(|p| o.contains(p)))
    })
}

fn compute_next(
    member: &Member,
    target_epoch: i32,
    target: &Assignment,
    held_by_other: &dyn Fn(&uuid::Uuid, i32) -> bool,
    owned: Option<&Assignment>,
) -> Member {
    let mut kept = Assignment::new();
    let mut revoke = Assignment::new();
    let mut assign = Assignment::new();
    let mut unreleased = false;
    let topics: std::collections::BTreeSet<_> = member
        .assigned
        .keys()
        .chain(target.keys())
        .copied()
        .collect();
    for topic in topics {
        let current = member.assigned.get(&topic);
        let wanted = target.get(&topic);
        for &p in current.into_iter().flatten() {
            if wanted.is_some_and(|w| w.contains(&p)) {
                kept.entry(topic).or_default().insert(p);
            } else {
                revoke.entry(topic).or_default().insert(p);
            }
        }
        for &p in wanted.into_iter().flatten() {
            if current.is_some_and(|c| c.contains(&p)) {
                continue;
            }
            if held_by_other(&topic, p) {
                unreleased = true;
            } else {
                assign.entry(topic).or_default().insert(p);
            }
        }
    }
    let mut m = member.clone();
    if !revoke.is_empty() && owns_any(owned, &revoke) {
        m.state = MemberState::UnrevokedPartitions;
        m.assigned = kept;
        m.pending_revocation = revoke;
        return m;
    }
    for (t, ps) in assign {
        kept.entry(t).or_default().extend(ps);
    }
    m.state = if unreleased {
        MemberState::UnreleasedPartitions
    } else {
        MemberState::Stable
    };
    m.previous_epoch = member.epoch;
    m.epoch = target_epoch;
    m.assigned = kept;
    m.pending_revocation = Assignment::new();
    m
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use uuid::Uuid;

    use super::*;

    fn t() -> Uuid {
        Uuid::from_u128(7)
    }

    fn a(ps: &[i32]) -> Assignment {
        if ps.is_empty() {
            return Assignment::new();
        }
        Assignment::from([(t(), ps.iter().copied().collect::<BTreeSet<_>>())])
    }

    fn member(epoch: i32, assigned: &[i32]) -> Member {
        let mut m = Member::new("m");
        m.epoch = epoch;
        m.assigned = a(assigned);
        m
    }

    const FREE: &dyn Fn(&Uuid, i32) -> bool = &|_, _| false;

    #[test]
    fn a_stable_member_at_the_target_epoch_stays() {
        let m = member(3, &[0, 1]);
        let n = next(&m, 3, &a(&[0]), FREE, None);
        assert_eq!(n.assigned, a(&[0, 1]));
        assert_eq!(n.epoch, 3);
    }

    #[test]
    fn new_free_partitions_come_with_the_target_epoch() {
        let m = member(0, &[]);
        let n = next(&m, 2, &a(&[0, 1]), FREE, Some(&a(&[])));
        assert_eq!(
            (n.state, n.epoch, n.previous_epoch),
            (MemberState::Stable, 2, 0)
        );
        assert_eq!(n.assigned, a(&[0, 1]));
    }

    #[test]
    fn revocation_comes_first_and_keeps_the_epoch() {
        let m = member(2, &[0, 1, 2]);
        let n = next(&m, 3, &a(&[0, 3]), FREE, Some(&a(&[0, 1, 2])));
        assert_eq!(n.state, MemberState::UnrevokedPartitions);
        assert_eq!(n.epoch, 2);
        assert_eq!(n.assigned, a(&[0]));
        assert_eq!(n.pending_revocation, a(&[1, 2]));
        // Still owning one of them: no progress.
        let still = next(&n, 3, &a(&[0, 3]), FREE, Some(&a(&[0, 2])));
        assert_eq!(still.state, MemberState::UnrevokedPartitions);
        // Revoked: the target epoch and the new partition.
        let done = next(&n, 3, &a(&[0, 3]), FREE, Some(&a(&[0])));
        assert_eq!((done.state, done.epoch), (MemberState::Stable, 3));
        assert_eq!(done.assigned, a(&[0, 3]));
        assert!(done.pending_revocation.is_empty());
    }

    #[test]
    fn without_owned_partitions_the_member_is_assumed_to_own_them() {
        let m = member(2, &[0, 1]);
        let n = next(&m, 3, &a(&[0]), FREE, None);
        assert_eq!(n.state, MemberState::UnrevokedPartitions);
        let n2 = next(&n, 3, &a(&[0]), FREE, None);
        assert_eq!(n2.state, MemberState::UnrevokedPartitions);
    }

    #[test]
    fn partitions_held_elsewhere_are_unreleased_until_freed() {
        let m = member(1, &[0]);
        let held: &dyn Fn(&Uuid, i32) -> bool = &|_, p| p == 1;
        let n = next(&m, 2, &a(&[0, 1]), held, Some(&a(&[0])));
        assert_eq!((n.state, n.epoch), (MemberState::UnreleasedPartitions, 2));
        assert_eq!(n.assigned, a(&[0]));
        let n2 = next(&n, 2, &a(&[0, 1]), held, Some(&a(&[0])));
        assert_eq!(n2.state, MemberState::UnreleasedPartitions);
        let n3 = next(&n2, 2, &a(&[0, 1]), FREE, Some(&a(&[0])));
        assert_eq!((n3.state, n3.epoch), (MemberState::Stable, 2));
        assert_eq!(n3.assigned, a(&[0, 1]));
        assert_eq!(n3.previous_epoch, 2);
    }

    #[test]
    fn a_member_no_longer_owning_revoked_partitions_skips_the_revoke_step() {
        let m = member(2, &[0, 1]);
        let n = next(&m, 3, &a(&[0]), FREE, Some(&a(&[0])));
        assert_eq!((n.state, n.epoch), (MemberState::Stable, 3));
        assert_eq!(n.assigned, a(&[0]));
    }
}
