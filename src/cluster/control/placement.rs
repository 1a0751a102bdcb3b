//! Replica placement for new partitions.
//!
//! Brokers are ordered by id (with racks: alternating between racks, each rack's brokers by
//! id, so neighbours in the order sit in different racks). Partition `i`'s replica `j` is the
//! broker at `(i + j + start) mod n` in that order, skipping brokers whose rack the partition
//! already uses while an unused rack remains; the first replica is the preferred leader, so
//! leaders spread evenly over the brokers. `start` is chosen per topic by the caller, so that
//! topics do not all put partition 0's leader on the same broker.

use std::collections::BTreeMap;

/// A broker that may receive replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub id: i32,
    pub rack: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlacementError {
    /// More replicas asked for than brokers available (Kafka: INVALID_REPLICATION_FACTOR).
    NotEnoughBrokers {
        replication_factor: usize,
        brokers: usize,
    },
    InvalidReplicationFactor,
}

impl std::fmt::Display for PlacementError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlacementError::NotEnoughBrokers {
                replication_factor,
                brokers,
            } => write!(
                f,
                "Unable to replicate the partition {replication_factor} time(s): The target \
                 replication factor of {replication_factor} cannot be reached because only \
                 {brokers} broker(s) are registered."
            ),
            PlacementError::InvalidReplicationFactor => {
                write!(f, "Replication factor must be larger than 0.")
            }
        }
    }
}

/// The broker order placement walks: by id, or alternating racks when any broker has one.
pub fn broker_order(candidates: &[Candidate]) -> Vec<Candidate> {
    let mut sorted = candidates.to_vec();
    sorted.sort_by_key(|c| c.id);
    if sorted.iter().all(|c| c.rack.is_none()) {
        return sorted;
    }
    let mut racks: BTreeMap<Option<String>, Vec<Candidate>> = BTreeMap::new();
    for c in sorted {
        racks.entry(c.rack.clone()).or_default().push(c);
    }
    let mut queues: Vec<std::collections::VecDeque<Candidate>> =
        racks.into_values().map(Into::into).collect();
    let mut out = Vec::new();
    while queues.iter().any(|q| !q.is_empty()) {
        for q in queues.iter_mut() {
            if let Some(c) = q.pop_front() {
                out.push(c);
            }
        }
    }
    out
}

/// Replica lists for partitions `first..first + count` of a topic.
pub fn place(
    candidates: &[Candidate],
    first: i32,
    count: i32,
    replication_factor: usize,
    start: usize,
) -> Result<Vec<Vec<i32>>, PlacementError> {
    if replication_factor == 0 {
        return Err(PlacementError::InvalidReplicationFactor);
    }
    if replication_factor > candidates.len() {
        return Err(PlacementError::NotEnoughBrokers {
            replication_factor,
            brokers: candidates.len(),
        });
    }
    let order = broker_order(candidates);
    let n = order.len();
    let rack_count = {
        let mut r: Vec<&Option<String>> = order.iter().map(|c| &c.rack).collect();
        r.sort();
        r.dedup();
        r.len()
    };
    let mut out = Vec::with_capacity(count.max(0) as usize);
    for i in first..first.saturating_add(count.max(0)) {
        let base = (i as usize).wrapping_add(start);
        let mut chosen: Vec<usize> = Vec::with_capacity(replication_factor);
        let mut used_racks: Vec<&Option<String>> = Vec::new();
        // First pass: distinct racks while unused ones remain; then fill in order.
        let mut k = 0;
        while chosen.len() < replication_factor && k < n {
            let idx = (base + k) % n;
            let rack = &order[idx].rack;
            let rack_free = used_racks.len() >= rack_count || !used_racks.contains(&rack);
            if rack_free {
                chosen.push(idx);
                used_racks.push(rack);
            }
            k += 1;
        }
        let mut k = 0;
        while chosen.len() < replication_factor {
            let idx = (base + k) % n;
            if !chosen.contains(&idx) {
                chosen.push(idx);
            }
            k += 1;
        }
        out.push(chosen.into_iter().map(|idx| order[idx].id).collect());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brokers(specs: &[(i32, Option<&str>)]) -> Vec<Candidate> {
        specs
            .iter()
            .map(|(id, r)| Candidate {
                id: *id,
                rack: r.map(str::to_string),
            })
            .collect()
    }

    #[test]
    fn round_robin_without_racks() {
        let b = brokers(&[(3, None), (1, None), (2, None)]);
        let p = place(&b, 0, 4, 3, 0).unwrap();
        assert_eq!(
            p,
            vec![vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2], vec![1, 2, 3]]
        );
        let p = place(&b, 0, 2, 2, 1).unwrap();
        assert_eq!(p, vec![vec![2, 3], vec![3, 1]]);
        // Partitions added later continue the same sequence.
        assert_eq!(place(&b, 3, 1, 3, 0).unwrap(), vec![vec![1, 2, 3]]);
    }

    #[test]
    fn leaders_spread_evenly() {
        let b = brokers(&[(1, None), (2, None), (3, None), (4, None)]);
        let p = place(&b, 0, 100, 3, 2).unwrap();
        let mut leaders = BTreeMap::new();
        for r in &p {
            *leaders.entry(r[0]).or_insert(0) += 1;
            let mut s = r.clone();
            s.sort();
            s.dedup();
            assert_eq!(s.len(), 3, "distinct replicas {r:?}");
        }
        assert_eq!(leaders.values().copied().collect::<Vec<_>>(), vec![25; 4]);
    }

    #[test]
    fn racks_are_distinct_where_possible() {
        let b = brokers(&[
            (1, Some("a")),
            (2, Some("a")),
            (3, Some("b")),
            (4, Some("b")),
            (5, Some("c")),
        ]);
        for (i, r) in place(&b, 0, 20, 3, 0).unwrap().iter().enumerate() {
            let mut racks: Vec<_> = r
                .iter()
                .map(|id| b.iter().find(|c| c.id == *id).unwrap().rack.clone())
                .collect();
            racks.sort();
            racks.dedup();
            assert_eq!(racks.len(), 3, "partition {i}: {r:?}");
        }
        // Two racks, three replicas: both racks used, replicas still distinct.
        let b = brokers(&[(1, Some("a")), (2, Some("a")), (3, Some("b"))]);
        for r in place(&b, 0, 6, 3, 0).unwrap() {
            let mut s = r.clone();
            s.sort();
            assert_eq!(s, vec![1, 2, 3]);
        }
    }

    #[test]
    fn not_enough_brokers() {
        let b = brokers(&[(1, None)]);
        let e = place(&b, 0, 1, 3, 0).unwrap_err();
        assert!(e.to_string().contains("only 1 broker(s)"), "{e}");
        assert_eq!(
            place(&b, 0, 1, 0, 0).unwrap_err(),
            PlacementError::InvalidReplicationFactor
        );
    }
}
