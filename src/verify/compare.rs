//! The comparison behind `sluice verify`: what a producer was told was written (its acked
//! records) against what the topic holds. Pure: the acked records and the records read are
//! given, the report is returned.
//!
//! A record is known by its value, which the producer makes unique (VerifiableProducer sends
//! increasing integers, optionally after a prefix). For each acked record:
//! - found at its acked partition and offset: as it should be;
//! - found elsewhere (another offset or partition): **moved**;
//! - found nowhere: **lost**.
//!
//! Over the records read, a value held more than once is **duplicated**. Within one
//! partition, acked values are expected in the log in the order they were acked (the order of
//! the acked file, which for one partition is the order the producer's callbacks ran); each
//! acked value found earlier in that partition than the one acked before it is **reordered**.
//! Records in the topic that were never acked (sends whose answer was lost) are only counted.

use std::collections::{BTreeMap, HashMap};

/// One acked record, as the producer's log reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acked {
    pub partition: i32,
    pub offset: i64,
    pub value: String,
}

/// One record read from the topic (a null value is `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub partition: i32,
    pub offset: i64,
    pub value: Option<String>,
}

/// Where a value was acked and where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    pub value: String,
    pub acked: (i32, i64),
    pub found: (i32, i64),
}

/// A value the topic holds more than once, with every place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Duplicated {
    pub value: String,
    pub at: Vec<(i32, i64)>,
}

/// An acked value found, in its partition, before the value acked just before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reordered {
    pub partition: i32,
    pub value: String,
    pub offset: i64,
    pub after: String,
    pub after_offset: i64,
}

/// The outcome of a comparison.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub acked: usize,
    pub read: usize,
    /// Records read whose value was never acked.
    pub unacked: usize,
    pub lost: Vec<Acked>,
    pub duplicated: Vec<Duplicated>,
    pub moved: Vec<Moved>,
    pub reordered: Vec<Reordered>,
}

impl Report {
    /// Whether every acked record is there and no record is there twice.
    pub fn ok(&self) -> bool {
        self.lost.is_empty() && self.duplicated.is_empty()
    }
}

/// Compares the acked records with the records read from the topic.
pub fn compare(acked: &[Acked], found: &[Found]) -> Report {
    // Every place each value was found, in log order per partition.
    let mut places: HashMap<&str, Vec<(i32, i64)>> = HashMap::new();
    for f in found {
        if let Some(v) = &f.value {
            places.entry(v).or_default().push((f.partition, f.offset));
        }
    }
    let mut report = Report {
        acked: acked.len(),
        read: found.len(),
        ..Report::default()
    };
    let mut acked_values: HashMap<&str, ()> = HashMap::new();
    // Per partition, the previous acked value found there and its offset.
    let mut last_in: BTreeMap<i32, (&str, i64)> = BTreeMap::new();
    for a in acked {
        acked_values.insert(&a.value, ());
        let Some(at) = places.get(a.value.as_str()) else {
            report.lost.push(a.clone());
            continue;
        };
        let here = (a.partition, a.offset);
        if !at.contains(&here) {
            report.moved.push(Moved {
                value: a.value.clone(),
                acked: here,
                found: at[0],
            });
        }
        let Some(&(_, offset)) = at.iter().find(|(p, _)| *p == a.partition) else {
            continue;
        };
        if let Some(&(prev, prev_offset)) = last_in.get(&a.partition)
            && offset < prev_offset
        {
            report.reordered.push(Reordered {
                partition: a.partition,
                value: a.value.clone(),
                offset,
                after: prev.to_string(),
                after_offset: prev_offset,
            });
        }
        last_in.insert(a.partition, (&a.value, offset));
    }
    let mut dups: Vec<Duplicated> = places
        .iter()
        .filter(|(_, at)| at.len() > 1)
        .map(|(v, at)| Duplicated {
            value: v.to_string(),
            at: at.clone(),
        })
        .collect();
    dups.sort_by_key(|d| d.at[0]);
    report.duplicated = dups;
    report.unacked = found
        .iter()
        .filter(|f| {
            f.value
                .as_deref()
                .is_none_or(|v| !acked_values.contains_key(v))
        })
        .count();
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acked(p: i32, o: i64, v: &str) -> Acked {
        Acked {
            partition: p,
            offset: o,
            value: v.into(),
        }
    }

    fn found(p: i32, o: i64, v: &str) -> Found {
        Found {
            partition: p,
            offset: o,
            value: Some(v.into()),
        }
    }

    #[test]
    fn everything_in_place_is_clean() {
        let a = [acked(0, 0, "0"), acked(1, 0, "1"), acked(0, 1, "2")];
        let f = [found(0, 0, "0"), found(0, 1, "2"), found(1, 0, "1")];
        let r = compare(&a, &f);
        assert!(r.ok());
        assert_eq!((r.acked, r.read, r.unacked), (3, 3, 0));
        assert!(r.moved.is_empty() && r.reordered.is_empty());
    }

    #[test]
    fn a_missing_record_is_lost() {
        let a = [acked(0, 0, "0"), acked(0, 1, "1"), acked(0, 7, "2")];
        let f = [found(0, 0, "0"), found(0, 1, "1")];
        let r = compare(&a, &f);
        assert!(!r.ok());
        assert_eq!(r.lost, vec![acked(0, 7, "2")]);
        assert!(r.duplicated.is_empty() && r.moved.is_empty());
    }

    #[test]
    fn a_value_twice_is_duplicated_wherever_it_is() {
        let a = [acked(0, 0, "0"), acked(0, 1, "1")];
        let f = [
            found(0, 0, "0"),
            found(0, 1, "1"),
            found(0, 2, "1"),
            found(1, 0, "0"),
        ];
        let r = compare(&a, &f);
        assert!(!r.ok());
        assert_eq!(
            r.duplicated,
            vec![
                Duplicated {
                    value: "0".into(),
                    at: vec![(0, 0), (1, 0)]
                },
                Duplicated {
                    value: "1".into(),
                    at: vec![(0, 1), (0, 2)]
                },
            ]
        );
        assert!(r.lost.is_empty() && r.moved.is_empty());
    }

    #[test]
    fn a_record_at_another_offset_or_partition_is_moved_not_lost() {
        let a = [acked(0, 0, "0"), acked(0, 1, "1"), acked(1, 5, "2")];
        let f = [found(0, 0, "0"), found(0, 3, "1"), found(2, 0, "2")];
        let r = compare(&a, &f);
        assert!(r.ok(), "moved records are not lost");
        assert_eq!(
            r.moved,
            vec![
                Moved {
                    value: "1".into(),
                    acked: (0, 1),
                    found: (0, 3)
                },
                Moved {
                    value: "2".into(),
                    acked: (1, 5),
                    found: (2, 0)
                },
            ]
        );
    }

    #[test]
    fn values_out_of_acked_order_in_a_partition_are_reordered() {
        // Acked 0, 1, 2 in partition 0; the log holds 0, 2, 1.
        let a = [acked(0, 0, "0"), acked(0, 1, "1"), acked(0, 2, "2")];
        let f = [found(0, 0, "0"), found(0, 1, "2"), found(0, 2, "1")];
        let r = compare(&a, &f);
        assert_eq!(
            r.reordered,
            vec![Reordered {
                partition: 0,
                value: "2".into(),
                offset: 1,
                after: "1".into(),
                after_offset: 2
            }]
        );
        assert_eq!(r.moved.len(), 2);
        // Other partitions do not constrain each other.
        let a = [acked(0, 0, "0"), acked(1, 0, "1"), acked(0, 1, "2")];
        let f = [found(0, 0, "0"), found(0, 1, "2"), found(1, 0, "1")];
        assert!(compare(&a, &f).reordered.is_empty());
    }

    #[test]
    fn unacked_and_null_records_are_only_counted() {
        let a = [acked(0, 0, "0")];
        let f = [
            found(0, 0, "0"),
            found(0, 1, "9"),
            Found {
                partition: 0,
                offset: 2,
                value: None,
            },
            Found {
                partition: 0,
                offset: 3,
                value: None,
            },
        ];
        let r = compare(&a, &f);
        assert!(r.ok(), "null values are never duplicates: {r:?}");
        assert_eq!(r.unacked, 3);
    }
}
