//! Partition reassignment as Kafka's controller runs it (KIP-455): the replica set grows to
//! the union of the current and the target replicas (`adding` and `removing` say which are
//! which); once every added replica is in the ISR, the set shrinks to the target, removed
//! replicas leave the ISR, and if the leader was removed the first in-sync target replica
//! leads. A new replica therefore catches up and joins the ISR before an old one is dropped.

use super::super::metadata::{PartitionChange, PartitionRecord};
use super::election;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ReassignError {
    /// INVALID_REPLICA_ASSIGNMENT: empty, duplicated or unknown brokers.
    Invalid(String),
    /// NO_REASSIGNMENT_IN_PROGRESS: a cancel with nothing to cancel.
    NoneInProgress,
}

/// Checks a target replica list as Kafka's controller checks a manual assignment, with its
/// messages: not empty, then in broker id order each broker registered and listed once.
pub fn validate_target(target: &[i32], registered: &dyn Fn(i32) -> bool) -> Result<(), String> {
    if target.is_empty() {
        return Err("The manual partition assignment includes an empty replica list.".into());
    }
    let mut sorted = target.to_vec();
    sorted.sort();
    let mut previous = None;
    for b in sorted {
        if !registered(b) {
            return Err(format!(
                "The manual partition assignment includes broker {b}, but no such broker is registered."
            ));
        }
        if previous == Some(b) {
            return Err(format!(
                "The manual partition assignment includes the broker {b} more than once."
            ));
        }
        previous = Some(b);
    }
    Ok(())
}

/// The replicas before the reassignment in progress, if any: the current ones minus those
/// being added.
pub fn original_replicas(p: &PartitionRecord) -> Vec<i32> {
    p.replicas
        .iter()
        .copied()
        .filter(|r| !p.adding.contains(r))
        .collect()
}

/// Starts (or replaces) a reassignment of `p` to `target`. The first step of the change;
/// [`complete`] finishes it once the new replicas are in sync.
pub fn start(
    p: &PartitionRecord,
    target: &[i32],
    registered: &dyn Fn(i32) -> bool,
) -> Result<Option<PartitionChange>, ReassignError> {
    validate_target(target, registered).map_err(ReassignError::Invalid)?;
    let original = original_replicas(p);
    if original == target && p.adding.is_empty() && p.removing.is_empty() {
        return Ok(None);
    }
    let mut replicas = target.to_vec();
    replicas.extend(original.iter().filter(|r| !target.contains(r)));
    let adding: Vec<i32> = target
        .iter()
        .copied()
        .filter(|r| !original.contains(r))
        .collect();
    let removing: Vec<i32> = original
        .iter()
        .copied()
        .filter(|r| !target.contains(r))
        .collect();
    let mut c = PartitionChange::new(p.topic_id, p.partition);
    c.replicas = Some(replicas);
    c.adding = Some(adding);
    c.removing = Some(removing);
    // Replicas that were being added by an earlier reassignment and are no longer wanted
    // leave the ISR at once.
    let isr: Vec<i32> = p
        .isr
        .iter()
        .copied()
        .filter(|r| target.contains(r) || original.contains(r))
        .collect();
    if isr != p.isr {
        c.isr = Some(isr);
    }
    Ok(Some(c))
}

/// Cancels a reassignment in progress: back to the original replicas.
pub fn cancel(
    p: &PartitionRecord,
    active: &dyn Fn(i32) -> bool,
) -> Result<PartitionChange, ReassignError> {
    if p.adding.is_empty() && p.removing.is_empty() {
        return Err(ReassignError::NoneInProgress);
    }
    Ok(shrink_to(p, &original_replicas(p), active))
}

/// Finishes a reassignment whose added replicas are all in the ISR.
pub fn complete(p: &PartitionRecord, active: &dyn Fn(i32) -> bool) -> Option<PartitionChange> {
    if p.adding.is_empty() && p.removing.is_empty() {
        return None;
    }
    if !p.adding.iter().all(|r| p.isr.contains(r)) {
        return None;
    }
    let target: Vec<i32> = p
        .replicas
        .iter()
        .copied()
        .filter(|r| !p.removing.contains(r))
        .collect();
    Some(shrink_to(p, &target, active))
}

fn shrink_to(
    p: &PartitionRecord,
    replicas: &[i32],
    active: &dyn Fn(i32) -> bool,
) -> PartitionChange {
    let mut c = PartitionChange::new(p.topic_id, p.partition);
    let mut isr: Vec<i32> = p
        .isr
        .iter()
        .copied()
        .filter(|r| replicas.contains(r))
        .collect();
    if !replicas.contains(&p.leader) || !isr.contains(&p.leader) {
        let e = election::elect(replicas, &isr, active, false);
        c.leader = Some(e.leader);
        isr = e.isr;
    }
    c.replicas = Some(replicas.to_vec());
    c.isr = Some(isr);
    c.adding = Some(Vec::new());
    c.removing = Some(Vec::new());
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::metadata::image::apply_change;

    fn part(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionRecord {
        PartitionRecord::for_test(replicas, isr, leader)
    }

    #[test]
    fn move_a_replica_waits_for_the_new_one_to_join_the_isr() {
        let mut p = part(&[1, 2, 3], &[1, 2, 3], 1);
        let c = start(&p, &[4, 2, 3], &|_| true).unwrap().unwrap();
        apply_change(&mut p, &c);
        assert_eq!(p.replicas, vec![4, 2, 3, 1]);
        assert_eq!((p.adding.clone(), p.removing.clone()), (vec![4], vec![1]));
        assert_eq!(complete(&p, &|_| true), None, "4 not in sync yet");
        p.isr.push(4);
        let c = complete(&p, &|_| true).unwrap();
        apply_change(&mut p, &c);
        assert_eq!(p.replicas, vec![4, 2, 3]);
        assert_eq!(p.isr, vec![2, 3, 4]);
        // The leader (1) was removed: the first in-sync target replica leads.
        assert_eq!(p.leader, 4);
        assert!(p.adding.is_empty() && p.removing.is_empty());
        assert!(p.leader_epoch > 0);
    }

    #[test]
    fn grow_and_cancel() {
        let mut p = part(&[1], &[1], 1);
        let c = start(&p, &[1, 2], &|_| true).unwrap().unwrap();
        apply_change(&mut p, &c);
        assert_eq!(
            (p.replicas.clone(), p.adding.clone()),
            (vec![1, 2], vec![2])
        );
        let c = cancel(&p, &|_| true).unwrap();
        apply_change(&mut p, &c);
        assert_eq!((p.replicas.clone(), p.leader), (vec![1], 1));
        assert_eq!(cancel(&p, &|_| true), Err(ReassignError::NoneInProgress));
        assert!(start(&p, &[1], &|_| true).unwrap().is_none());
        let invalid = |m: &str| Err(ReassignError::Invalid(m.into()));
        assert_eq!(
            start(&p, &[1, 1], &|_| true),
            invalid("The manual partition assignment includes the broker 1 more than once.")
        );
        assert_eq!(
            start(&p, &[7, 7], &|b| b != 7),
            invalid(
                "The manual partition assignment includes broker 7, but no such broker is registered."
            )
        );
        assert_eq!(
            start(&p, &[], &|_| true),
            invalid("The manual partition assignment includes an empty replica list.")
        );
    }
}
