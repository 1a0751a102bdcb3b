//! The server-side assignors (`group.consumer.assignors`): from the members' subscriptions
//! and the topics' partition counts to a target assignment. Pure.
//!
//! * `uniform` (Kafka's default): every partition of a subscribed topic goes to one of its
//!   subscribers, as evenly as the subscriptions allow (counts differ by at most one between
//!   members that could swap a partition), keeping each member's previous target partitions
//!   where balance permits (sticky: a member joining or leaving moves few partitions).
//! * `range`: per topic, its subscribers in member id order take contiguous ranges of
//!   partitions, the first `partitions % subscribers` one more (co-partitioned topics line up).

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::Assignment;

pub const UNIFORM: &str = "uniform";
pub const RANGE: &str = "range";
/// The assignors this broker has (Kafka's built-in ones).
pub const KNOWN: &[&str] = &[UNIFORM, RANGE];

/// One member as an assignor sees it.
#[derive(Debug, Clone)]
pub struct Subscriber {
    pub member_id: String,
    pub topics: BTreeSet<Uuid>,
}

/// The target assignment of `assignor` (unknown names fall back to uniform): every member
/// gets an entry, possibly empty.
pub fn assign(
    assignor: &str,
    members: &[Subscriber],
    partitions: &BTreeMap<Uuid, i32>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    if assignor == RANGE {
        range(members, partitions)
    } else {
        uniform(members, partitions, previous)
    }
}

pub fn range(
    members: &[Subscriber],
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.member_id.clone(), Assignment::new()))
        .collect();
    for (&topic, &count) in partitions {
        let mut subs: Vec<&str> = members
            .iter()
            .filter(|m| m.topics.contains(&topic))
            .map(|m| m.member_id.as_str())
            .collect();
        if subs.is_empty() || count <= 0 {
            continue;
        }
        subs.sort_unstable();
        let n = subs.len() as i32;
        let (each, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, id) in subs.into_iter().enumerate() {
            let take = each + i32::from((i as i32) < extra);
            if take > 0
                && let Some(a) = out.get_mut(id)
            {
                a.entry(topic).or_default().extend(next..next + take);
            }
            next += take;
        }
    }
    out
}

pub fn uniform(
    members: &[Subscriber],
    partitions: &BTreeMap<Uuid, i32>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let mut ids: Vec<&Subscriber> = members.iter().collect();
    ids.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    // Owner of each partition (index into `ids`), previous targets first.
    let mut owner: BTreeMap<(Uuid, i32), usize> = BTreeMap::new();
    let mut held: Vec<BTreeSet<(Uuid, i32)>> = vec![BTreeSet::new(); ids.len()];
    for (i, m) in ids.iter().enumerate() {
        let Some(prev) = previous.get(&m.member_id) else {
            continue;
        };
        for (topic, ps) in prev {
            let Some(&count) = partitions.get(topic) else {
                continue;
            };
            if !m.topics.contains(topic) {
                continue;
            }
            for &p in ps {
                if p >= 0 && p < count && !owner.contains_key(&(*topic, p)) {
                    owner.insert((*topic, p), i);
                    held[i].insert((*topic, p));
                }
            }
        }
    }
    let eligible = |topic: &Uuid| -> Vec<usize> {
        ids.iter()
            .enumerate()
            .filter(|(_, m)| m.topics.contains(topic))
            .map(|(i, _)| i)
            .collect()
    };
    // Partitions without an owner go to the least loaded subscriber.
    for (&topic, &count) in partitions {
        let subs = eligible(&topic);
        if subs.is_empty() {
            continue;
        }
        for p in 0..count.max(0) {
            if owner.contains_key(&(topic, p)) {
                continue;
            }
            if let Some(&to) = subs.iter().min_by_key(|&&i| (held[i].len(), i)) {
                owner.insert((topic, p), to);
                held[to].insert((topic, p));
            }
        }
    }
    // Balance: move a partition from a member to an eligible one holding two or more fewer,
    // until no such move exists (each move lowers the sum of squared counts, so this ends).
    let subscribers: BTreeMap<Uuid, Vec<usize>> =
        partitions.keys().map(|t| (*t, eligible(t))).collect();
    loop {
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(held[i].len()), i));
        let mut moved = None;
        'find: for &from in &order {
            for &(topic, p) in held[from].iter().rev() {
                let Some(subs) = subscribers.get(&topic) else {
                    continue;
                };
                if let Some(&to) = subs.iter().min_by_key(|&&i| (held[i].len(), i))
                    && held[to].len() + 1 < held[from].len()
                {
                    moved = Some((from, to, topic, p));
                    break 'find;
                }
            }
        }
        let Some((from, to, topic, p)) = moved else {
            break;
        };
        held[from].remove(&(topic, p));
        held[to].insert((topic, p));
    }
    ids.iter()
        .zip(held)
        .map(|(m, h)| {
            let mut a = Assignment::new();
            for (t, p) in h {
                a.entry(t).or_default().insert(p);
            }
            (m.member_id.clone(), a)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn sub(id: &str, topics: &[u128]) -> Subscriber {
        Subscriber {
            member_id: id.to_string(),
            topics: topics.iter().map(|&n| t(n)).collect(),
        }
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(BTreeSet::len).sum()
    }

    fn all_once(out: &BTreeMap<String, Assignment>, partitions: &BTreeMap<Uuid, i32>) {
        let mut seen = BTreeSet::new();
        for a in out.values() {
            for (topic, ps) in a {
                for &p in ps {
                    assert!(seen.insert((*topic, p)), "{topic}-{p} assigned twice");
                }
            }
        }
        let total: i32 = partitions.values().sum();
        assert_eq!(seen.len(), total as usize);
    }

    #[test]
    fn uniform_balances_homogeneous_members() {
        let parts = BTreeMap::from([(t(1), 7), (t(2), 3)]);
        let members = vec![sub("a", &[1, 2]), sub("b", &[1, 2]), sub("c", &[1, 2])];
        let out = uniform(&members, &parts, &BTreeMap::new());
        all_once(&out, &parts);
        let counts: Vec<usize> = out.values().map(count).collect();
        assert!(counts.iter().all(|&c| c == 3 || c == 4), "{counts:?}");
    }

    #[test]
    fn uniform_is_sticky_when_a_member_joins() {
        let parts = BTreeMap::from([(t(1), 6)]);
        let first = uniform(&[sub("a", &[1]), sub("b", &[1])], &parts, &BTreeMap::new());
        let members = vec![sub("a", &[1]), sub("b", &[1]), sub("c", &[1])];
        let second = uniform(&members, &parts, &first);
        all_once(&second, &parts);
        for id in ["a", "b"] {
            let before = &first[id][&t(1)];
            let after = &second[id][&t(1)];
            assert_eq!(after.len(), 2);
            assert!(after.is_subset(before), "{id} kept {after:?} of {before:?}");
        }
        assert_eq!(count(&second["c"]), 2);
    }

    #[test]
    fn uniform_moves_only_a_leavers_partitions() {
        let parts = BTreeMap::from([(t(1), 6)]);
        let members = vec![sub("a", &[1]), sub("b", &[1]), sub("c", &[1])];
        let first = uniform(&members, &parts, &BTreeMap::new());
        let second = uniform(&members[..2], &parts, &first);
        all_once(&second, &parts);
        for id in ["a", "b"] {
            assert!(first[id][&t(1)].is_subset(&second[id][&t(1)]));
            assert_eq!(count(&second[id]), 3);
        }
    }

    #[test]
    fn uniform_respects_heterogeneous_subscriptions() {
        let parts = BTreeMap::from([(t(1), 4), (t(2), 2)]);
        let members = vec![sub("a", &[1]), sub("b", &[1, 2])];
        let out = uniform(&members, &parts, &BTreeMap::new());
        all_once(&out, &parts);
        assert!(!out["a"].contains_key(&t(2)));
        assert_eq!(count(&out["a"]), 3);
        assert_eq!(count(&out["b"]), 3);
    }

    #[test]
    fn uniform_drops_unsubscribed_and_vanished_partitions() {
        let parts = BTreeMap::from([(t(1), 2)]);
        let prev = BTreeMap::from([(
            "a".to_string(),
            Assignment::from([
                (t(1), BTreeSet::from([0, 1, 5])),
                (t(9), BTreeSet::from([0])),
            ]),
        )]);
        let out = uniform(&[sub("a", &[1])], &parts, &prev);
        assert_eq!(out["a"], Assignment::from([(t(1), BTreeSet::from([0, 1]))]));
    }

    #[test]
    fn range_gives_contiguous_ranges_in_member_order() {
        let parts = BTreeMap::from([(t(1), 5), (t(2), 5)]);
        let members = vec![sub("b", &[1, 2]), sub("a", &[1, 2])];
        let out = range(&members, &parts);
        all_once(&out, &parts);
        assert_eq!(out["a"][&t(1)], BTreeSet::from([0, 1, 2]));
        assert_eq!(out["b"][&t(1)], BTreeSet::from([3, 4]));
        assert_eq!(out["a"][&t(2)], out["a"][&t(1)]);
    }

    #[test]
    fn more_members_than_partitions_leaves_some_empty() {
        let parts = BTreeMap::from([(t(1), 1)]);
        let members = vec![sub("a", &[1]), sub("b", &[1])];
        for out in [
            range(&members, &parts),
            uniform(&members, &parts, &BTreeMap::new()),
        ] {
            all_once(&out, &parts);
            assert_eq!(out.len(), 2);
            assert_eq!(out.values().filter(|a| count(a) == 0).count(), 1);
        }
    }
}
