//! The share group assignor (Kafka's `simple`, `group.share.assignors`): every partition of a
//! subscribed topic goes to at least one of its subscribers. With at least as many partitions
//! as subscribers, each partition goes to one member, round robin; with more subscribers than
//! partitions, each member gets one partition, round robin, so partitions are shared (several
//! share consumers on one partition each get distinct records). Pure and deterministic.

use std::collections::BTreeMap;

use uuid::Uuid;

/// A subscribed topic as the assignment sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMeta {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
}

/// Member id → (topic id → partitions, sorted) for `subscriptions` (member id → topic names).
pub fn assign(
    subscriptions: &BTreeMap<String, Vec<String>>,
    topics: &[TopicMeta],
) -> BTreeMap<String, BTreeMap<Uuid, Vec<i32>>> {
    let mut out: BTreeMap<String, BTreeMap<Uuid, Vec<i32>>> = subscriptions
        .keys()
        .map(|m| (m.clone(), BTreeMap::new()))
        .collect();
    for t in topics {
        let members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, subs)| subs.contains(&t.name))
            .map(|(m, _)| m)
            .collect();
        if members.is_empty() || t.partitions <= 0 {
            continue;
        }
        let n = members.len();
        let p = t.partitions as usize;
        let mut give = |m: &String, partition: i32| {
            if let Some(a) = out.get_mut(m) {
                a.entry(t.id).or_default().push(partition);
            }
        };
        if p >= n {
            for partition in 0..p {
                give(members[partition % n], partition as i32);
            }
        } else {
            for (i, m) in members.iter().enumerate() {
                give(m, (i % p) as i32);
            }
        }
    }
    for a in out.values_mut() {
        for parts in a.values_mut() {
            parts.sort_unstable();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(members: &[&str], topic: &str) -> BTreeMap<String, Vec<String>> {
        members
            .iter()
            .map(|m| (m.to_string(), vec![topic.to_string()]))
            .collect()
    }

    fn meta(partitions: i32) -> Vec<TopicMeta> {
        vec![TopicMeta {
            name: "t".into(),
            id: Uuid::from_u128(1),
            partitions,
        }]
    }

    #[test]
    fn more_members_than_partitions_share_them() {
        let a = assign(&subs(&["a", "b", "c"], "t"), &meta(1));
        for m in ["a", "b", "c"] {
            assert_eq!(a[m][&Uuid::from_u128(1)], vec![0]);
        }
        let a = assign(&subs(&["a", "b", "c"], "t"), &meta(2));
        assert_eq!(a["a"][&Uuid::from_u128(1)], vec![0]);
        assert_eq!(a["b"][&Uuid::from_u128(1)], vec![1]);
        assert_eq!(a["c"][&Uuid::from_u128(1)], vec![0]);
    }

    #[test]
    fn more_partitions_than_members_spread_them() {
        let a = assign(&subs(&["a", "b"], "t"), &meta(5));
        assert_eq!(a["a"][&Uuid::from_u128(1)], vec![0, 2, 4]);
        assert_eq!(a["b"][&Uuid::from_u128(1)], vec![1, 3]);
    }

    #[test]
    fn unsubscribed_members_get_nothing() {
        let mut s = subs(&["a"], "t");
        s.insert("b".into(), vec!["other".into()]);
        let a = assign(&s, &meta(2));
        assert!(a["b"].is_empty());
        assert_eq!(a["a"][&Uuid::from_u128(1)], vec![0, 1]);
    }
}
