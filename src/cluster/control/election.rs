//! Leader election, as Kafka's controller does it: the new leader is the first replica, in
//! replica order, that is in the ISR and on an active (registered, unfenced, not shutting
//! down) broker. With none, the partition goes offline (leader -1) and keeps its last ISR
//! member, so that broker leads again when it returns, unless unclean election is allowed,
//! in which case the first active replica leads with an ISR of itself (records it lacks are
//! lost, bounded by its lag).
//!
//! Every function here is pure: it reads a partition and who is active and returns the change
//! to write, or why there is none.

use super::super::metadata::{PartitionChange, PartitionRecord};

/// Where an election landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Elected {
    pub leader: i32,
    pub isr: Vec<i32>,
    pub unclean: bool,
}

/// The leader and ISR that `isr` allows; `leader` is -1 when nobody may lead.
pub fn elect(
    replicas: &[i32],
    isr: &[i32],
    active: &dyn Fn(i32) -> bool,
    unclean_allowed: bool,
) -> Elected {
    if let Some(&l) = replicas.iter().find(|r| isr.contains(r) && active(**r)) {
        return Elected {
            leader: l,
            isr: isr.to_vec(),
            unclean: false,
        };
    }
    if unclean_allowed && let Some(&l) = replicas.iter().find(|r| active(**r)) {
        return Elected {
            leader: l,
            isr: vec![l],
            unclean: true,
        };
    }
    Elected {
        leader: -1,
        isr: isr.to_vec(),
        unclean: false,
    }
}

/// `broker` stopped being active (fenced or shutting down): it leaves the ISR (unless it is
/// the last member) and, if it led, a new leader is elected.
pub fn on_broker_inactive(
    p: &PartitionRecord,
    broker: i32,
    active: &dyn Fn(i32) -> bool,
    unclean_allowed: bool,
) -> Option<PartitionChange> {
    if !p.replicas.contains(&broker) {
        return None;
    }
    let mut isr: Vec<i32> = p.isr.iter().copied().filter(|r| *r != broker).collect();
    if isr.is_empty() {
        isr = p.isr.clone();
    }
    let mut change = PartitionChange::new(p.topic_id, p.partition);
    if p.leader == broker || p.leader < 0 {
        let e = elect(
            &p.replicas,
            &isr,
            &|r| r != broker && active(r),
            unclean_allowed,
        );
        if e.leader != p.leader {
            change.leader = Some(e.leader);
        }
        isr = e.isr;
    }
    if isr != p.isr {
        change.isr = Some(isr);
    }
    (!change.is_empty()).then_some(change)
}

/// A broker became active: an offline partition it can lead gets it as leader.
pub fn on_broker_active(
    p: &PartitionRecord,
    active: &dyn Fn(i32) -> bool,
    unclean_allowed: bool,
) -> Option<PartitionChange> {
    if p.has_leader() {
        return None;
    }
    let e = elect(&p.replicas, &p.isr, active, unclean_allowed);
    if e.leader < 0 {
        return None;
    }
    let mut change = PartitionChange::new(p.topic_id, p.partition);
    change.leader = Some(e.leader);
    if e.isr != p.isr {
        change.isr = Some(e.isr);
    }
    Some(change)
}

/// Why an ElectLeaders request for one partition changes nothing (Kafka's error codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ElectionRefused {
    /// ELECTION_NOT_NEEDED: the wanted leader already leads.
    NotNeeded,
    /// PREFERRED_LEADER_NOT_AVAILABLE: the preferred replica is not in the ISR or not active.
    PreferredNotAvailable,
    /// ELIGIBLE_LEADERS_NOT_AVAILABLE: no active replica may lead.
    EligibleNotAvailable,
}

/// Preferred-leader election: the first replica leads if it is in the ISR and active.
pub fn elect_preferred(
    p: &PartitionRecord,
    active: &dyn Fn(i32) -> bool,
) -> Result<PartitionChange, ElectionRefused> {
    let Some(&preferred) = p.replicas.first() else {
        return Err(ElectionRefused::PreferredNotAvailable);
    };
    if p.leader == preferred {
        return Err(ElectionRefused::NotNeeded);
    }
    if !p.isr.contains(&preferred) || !active(preferred) {
        return Err(ElectionRefused::PreferredNotAvailable);
    }
    let mut c = PartitionChange::new(p.topic_id, p.partition);
    c.leader = Some(preferred);
    Ok(c)
}

/// Unclean election (ElectLeaders type 1): only for a partition without a leader; a clean
/// choice from the ISR is still preferred.
pub fn elect_unclean(
    p: &PartitionRecord,
    active: &dyn Fn(i32) -> bool,
) -> Result<PartitionChange, ElectionRefused> {
    if p.has_leader() && active(p.leader) {
        return Err(ElectionRefused::NotNeeded);
    }
    let e = elect(&p.replicas, &p.isr, active, true);
    if e.leader < 0 {
        return Err(ElectionRefused::EligibleNotAvailable);
    }
    let mut c = PartitionChange::new(p.topic_id, p.partition);
    c.leader = Some(e.leader);
    if e.isr != p.isr {
        c.isr = Some(e.isr);
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionRecord {
        PartitionRecord::for_test(replicas, isr, leader)
    }

    #[test]
    fn leader_failure_elects_first_live_isr_member_in_replica_order() {
        let p = part(&[1, 2, 3], &[3, 1, 2], 1);
        let c = on_broker_inactive(&p, 1, &|_| true, false).unwrap();
        assert_eq!(c.leader, Some(2));
        assert_eq!(c.isr, Some(vec![3, 2]));
        // 2 is down too: 3 leads.
        let c = on_broker_inactive(&p, 1, &|r| r != 2, false).unwrap();
        assert_eq!(c.leader, Some(3));
    }

    #[test]
    fn follower_failure_only_shrinks_the_isr() {
        let p = part(&[1, 2, 3], &[1, 2, 3], 1);
        let c = on_broker_inactive(&p, 3, &|_| true, false).unwrap();
        assert_eq!(c.leader, None);
        assert_eq!(c.isr, Some(vec![1, 2]));
        assert!(on_broker_inactive(&part(&[1, 2], &[1], 1), 2, &|_| true, false).is_none());
        assert!(on_broker_inactive(&part(&[1, 2], &[1, 2], 1), 9, &|_| true, false).is_none());
    }

    #[test]
    fn last_isr_member_down_goes_offline_unless_unclean() {
        let p = part(&[1, 2, 3], &[1], 1);
        let c = on_broker_inactive(&p, 1, &|r| r != 1, false).unwrap();
        assert_eq!(c.leader, Some(-1));
        assert_eq!(c.isr, None, "the last ISR member is kept");
        let mut offline = p.clone();
        offline.leader = -1;
        // It comes back: it leads again.
        let c = on_broker_active(&offline, &|_| true, false).unwrap();
        assert_eq!(c.leader, Some(1));
        // It does not come back; 2 and 3 are up: only unclean election lets 2 lead.
        assert!(on_broker_active(&offline, &|r| r != 1, false).is_none());
        let c = on_broker_active(&offline, &|r| r != 1, true).unwrap();
        assert_eq!((c.leader, c.isr), (Some(2), Some(vec![2])));
        let c = elect_unclean(&offline, &|r| r != 1).unwrap();
        assert_eq!(c.leader, Some(2));
        assert_eq!(
            elect_unclean(&offline, &|_| false),
            Err(ElectionRefused::EligibleNotAvailable)
        );
    }

    #[test]
    fn preferred_election() {
        let p = part(&[1, 2, 3], &[1, 2, 3], 2);
        assert_eq!(elect_preferred(&p, &|_| true).unwrap().leader, Some(1));
        assert_eq!(
            elect_preferred(&p, &|r| r != 1),
            Err(ElectionRefused::PreferredNotAvailable)
        );
        let p = part(&[1, 2, 3], &[2, 3], 2);
        assert_eq!(
            elect_preferred(&p, &|_| true),
            Err(ElectionRefused::PreferredNotAvailable)
        );
        let p = part(&[1, 2, 3], &[1, 2, 3], 1);
        assert_eq!(
            elect_preferred(&p, &|_| true),
            Err(ElectionRefused::NotNeeded)
        );
    }
}
