//! Decisions about adding partitions to a topic, as Kafka's controller makes them
//! (`ReplicationControlManager.createPartitions`, `validateManualPartitionAssignment`,
//! `validateTotalNumberOfPartitions`). Pure functions over counts and broker ids; the
//! controller performs what they decide.

use super::super::controller::{MAX_PARTITIONS_PER_TOPIC, TopicError};

/// Most partitions one CreateTopics or CreatePartitions request may add over all its topics
/// (Kafka's `MAX_RECORDS_PER_USER_OP`).
pub const MAX_ADDITIONAL_PARTITIONS_PER_REQUEST: i64 = 10_000;

/// Kafka's `validateTotalNumberOfPartitions`: the partitions a request would add, summed over
/// its topics that exist (`current` is None for an unknown topic) and would grow. More than
/// [`MAX_ADDITIONAL_PARTITIONS_PER_REQUEST`] fails the whole request.
pub fn additional_in_request(topics: impl IntoIterator<Item = (i32, Option<usize>)>) -> i64 {
    topics
        .into_iter()
        .filter_map(|(count, current)| Some(count as i64 - current? as i64))
        .filter(|added| *added > 0)
        .sum()
}

pub fn request_too_large() -> TopicError {
    TopicError::PolicyViolation(
        "Excessively large number of additional partitions per request.".into(),
    )
}

/// How many partitions a topic named `name` with `current` partitions of `replication`
/// replicas each gains when asked for `count` in all, with optional manual `assignments` (one
/// replica list per new partition) over the registered `brokers`. Checks in Kafka's order,
/// with Kafka's messages; then this broker's cap on partitions per topic.
pub fn plan_increase(
    name: &str,
    current: usize,
    replication: usize,
    count: i32,
    assignments: Option<&[Vec<i32>]>,
    brokers: &[i32],
) -> Result<usize, TopicError> {
    let current_i = current as i64;
    if count as i64 == current_i {
        return Err(TopicError::InvalidPartitions(format!(
            "Topic already has {current} partition(s)."
        )));
    }
    if (count as i64) < current_i {
        return Err(TopicError::InvalidPartitions(format!(
            "The topic {name} currently has {current} partition(s); {count} would not be an increase."
        )));
    }
    let additional = (count as i64 - current_i) as usize;
    if let Some(a) = assignments {
        if a.len() != additional {
            return Err(TopicError::InvalidReplicaAssignment(format!(
                "Attempted to add {additional} additional partition(s), but only {} assignment(s) were specified.",
                a.len()
            )));
        }
        for replicas in a {
            check_manual_assignment(replicas, replication, brokers)?;
        }
    }
    if count > MAX_PARTITIONS_PER_TOPIC {
        return Err(TopicError::InvalidPartitions(format!(
            "Number of partitions {count} exceeds the maximum of {MAX_PARTITIONS_PER_TOPIC} per topic."
        )));
    }
    Ok(additional)
}

/// Kafka's `validateManualPartitionAssignment`: a non-empty list of distinct registered
/// brokers, as many as the topic's other partitions have.
pub fn check_manual_assignment(
    replicas: &[i32],
    replication: usize,
    brokers: &[i32],
) -> Result<(), TopicError> {
    let bad = |m: String| Err(TopicError::InvalidReplicaAssignment(m));
    if replicas.is_empty() {
        return bad("The manual partition assignment includes an empty replica list.".into());
    }
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    let mut prev = None;
    for id in sorted.iter().copied() {
        if !brokers.contains(&id) {
            return bad(format!(
                "The manual partition assignment includes broker {id}, but no such broker is registered."
            ));
        }
        if prev == Some(id) {
            return bad(format!(
                "The manual partition assignment includes the broker {id} more than once."
            ));
        }
        prev = Some(id);
    }
    if sorted.len() != replication {
        return bad(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {replication} replica(s).",
            sorted.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(r: Result<usize, TopicError>) -> String {
        match r {
            Err(
                TopicError::InvalidPartitions(m)
                | TopicError::InvalidReplicaAssignment(m)
                | TopicError::PolicyViolation(m),
            ) => m,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn counts() {
        assert_eq!(plan_increase("t", 3, 1, 5, None, &[1]).unwrap(), 2);
        assert_eq!(
            msg(plan_increase("t", 3, 1, 3, None, &[1])),
            "Topic already has 3 partition(s)."
        );
        assert_eq!(
            msg(plan_increase("t", 3, 1, 2, None, &[1])),
            "The topic t currently has 3 partition(s); 2 would not be an increase."
        );
        assert_eq!(
            msg(plan_increase("t", 3, 1, -1, None, &[1])),
            "The topic t currently has 3 partition(s); -1 would not be an increase."
        );
        assert!(matches!(
            plan_increase("t", 3, 1, MAX_PARTITIONS_PER_TOPIC + 1, None, &[1]),
            Err(TopicError::InvalidPartitions(_))
        ));
    }

    #[test]
    fn manual_assignments() {
        let a = |v: &[&[i32]]| v.iter().map(|r| r.to_vec()).collect::<Vec<_>>();
        assert_eq!(
            plan_increase("t", 3, 1, 5, Some(&a(&[&[1], &[1]])), &[1]).unwrap(),
            2
        );
        assert_eq!(
            msg(plan_increase("t", 3, 1, 5, Some(&a(&[&[1]])), &[1])),
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."
        );
        assert_eq!(
            msg(plan_increase("t", 3, 1, 4, Some(&[]), &[1])),
            "Attempted to add 1 additional partition(s), but only 0 assignment(s) were specified."
        );
        assert_eq!(
            msg(plan_increase("t", 3, 1, 4, Some(&a(&[&[1, 7]])), &[1])),
            "The manual partition assignment includes broker 7, but no such broker is registered."
        );
        assert_eq!(
            msg(plan_increase("t", 3, 1, 4, Some(&a(&[&[]])), &[1])),
            "The manual partition assignment includes an empty replica list."
        );
        assert_eq!(
            msg(plan_increase("t", 3, 1, 4, Some(&a(&[&[1, 1]])), &[1])),
            "The manual partition assignment includes the broker 1 more than once."
        );
        assert_eq!(
            msg(plan_increase("t", 3, 1, 4, Some(&a(&[&[1, 2]])), &[1, 2])),
            "The manual partition assignment includes a partition with 2 replica(s), but this is not consistent with previous partitions, which have 1 replica(s)."
        );
    }

    #[test]
    fn request_total() {
        // Unknown topics and non-increases add nothing; the sum, not each topic, is bounded.
        assert_eq!(
            additional_in_request([(10_003, Some(3)), (3, None), (1, Some(3))]),
            10_000
        );
        assert_eq!(
            additional_in_request([(6_003, Some(3)), (6_002, Some(2))]),
            12_000
        );
    }
}
