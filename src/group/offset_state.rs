//! A group's offsets, as Kafka's OffsetMetadataManager keeps them: the committed ones, and
//! the ones committed inside transactions that are still open (TxnOffsetCommit), pending per
//! producer until the transaction's marker arrives. Pure data and rules, no I/O: the live
//! coordinator and the replay of `__consumer_offsets` apply the same events in log order.
//!
//! * A plain commit replaces the committed offset of its partition; pending ones stay.
//! * A transactional commit is pending under (the `__consumer_offsets` partition its batch
//!   went to, producer id); a later one of the same transaction replaces it.
//! * The COMMIT marker of (partition, producer) makes its pending offsets committed, each
//!   only if its record is newer in the log than the committed one (a plain commit written
//!   after the transactional one wins); the ABORT marker drops them. Markers are per
//!   partition: a transaction that wrote to several partitions ends on each separately.
//! * A tombstone (OffsetDelete, DeleteGroups, expiry) removes the partition's committed
//!   offset and its pending ones of every producer. The producers' transactions stay open
//!   (with nothing pending) until their markers, as in Kafka.

use std::collections::{HashMap, HashSet};

use super::records::OffsetValue;

/// (topic, partition).
pub type TopicPartition = (String, i32);

/// (`__consumer_offsets` partition, producer id): one open transaction's offsets.
pub type TxnKey = (i32, i64);

/// One partition's offset as committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
    /// Where its record is in `__consumer_offsets` (which of two commits is newer).
    pub record_offset: i64,
}

impl Committed {
    pub fn from_record(v: OffsetValue, record_offset: i64) -> Committed {
        Committed {
            offset: v.offset,
            leader_epoch: v.leader_epoch,
            metadata: v.metadata,
            commit_timestamp: v.commit_timestamp,
            record_offset,
        }
    }
}

#[derive(Debug, Default)]
pub struct OffsetState {
    committed: HashMap<TopicPartition, Committed>,
    pending: HashMap<TxnKey, HashMap<TopicPartition, Committed>>,
}

impl OffsetState {
    /// The committed offsets.
    pub fn committed(&self) -> &HashMap<TopicPartition, Committed> {
        &self.committed
    }

    pub fn get(&self, tp: &TopicPartition) -> Option<&Committed> {
        self.committed.get(tp)
    }

    /// A plain (non-transactional) commit.
    pub fn commit(&mut self, tp: TopicPartition, c: Committed) {
        self.committed.insert(tp, c);
    }

    /// A transactional commit of `producer_id`, written to offsets partition `partition`.
    pub fn add_pending(
        &mut self,
        partition: i32,
        producer_id: i64,
        tp: TopicPartition,
        c: Committed,
    ) {
        self.pending
            .entry((partition, producer_id))
            .or_default()
            .insert(tp, c);
    }

    /// The marker of `producer_id`'s transaction in offsets partition `partition`. Returns how
    /// many offsets became committed.
    pub fn complete(&mut self, partition: i32, producer_id: i64, commit: bool) -> usize {
        let Some(offsets) = self.pending.remove(&(partition, producer_id)) else {
            return 0;
        };
        if !commit {
            return 0;
        }
        let mut applied = 0;
        for (tp, c) in offsets {
            let newer = self
                .committed
                .get(&tp)
                .is_none_or(|old| c.record_offset > old.record_offset);
            if newer {
                self.committed.insert(tp, c);
                applied += 1;
            }
        }
        applied
    }

    /// A tombstone for `tp`: its committed offset and every pending one go. Returns whether
    /// there was any.
    pub fn delete(&mut self, tp: &TopicPartition) -> bool {
        let mut found = self.committed.remove(tp).is_some();
        for offsets in self.pending.values_mut() {
            found |= offsets.remove(tp).is_some();
        }
        found
    }

    /// Whether an open transaction holds an offset for `tp` (OffsetFetch with require_stable
    /// answers UNSTABLE_OFFSET_COMMIT for it).
    pub fn has_pending(&self, tp: &TopicPartition) -> bool {
        self.pending.values().any(|o| o.contains_key(tp))
    }

    /// Whether a transaction that committed offsets here is still open.
    pub fn has_open_txns(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The open transactions.
    pub fn open_txns(&self) -> impl Iterator<Item = TxnKey> + '_ {
        self.pending.keys().copied()
    }

    /// Whether `producer_id` has an open transaction here (in any offsets partition).
    pub fn has_producer(&self, producer_id: i64) -> bool {
        self.pending.keys().any(|(_, p)| *p == producer_id)
    }

    /// Partitions with a committed or a pending offset (what a group's deletion tombstones).
    pub fn partitions(&self) -> HashSet<TopicPartition> {
        let mut all: HashSet<TopicPartition> = self.committed.keys().cloned().collect();
        for offsets in self.pending.values() {
            all.extend(offsets.keys().cloned());
        }
        all
    }

    /// No offsets, committed or pending, and no open transaction.
    pub fn is_empty(&self) -> bool {
        self.committed.is_empty() && self.pending.is_empty()
    }

    pub fn clear(&mut self) {
        self.committed.clear();
        self.pending.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(offset: i64, record_offset: i64) -> Committed {
        Committed {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 1,
            record_offset,
        }
    }

    fn tp(t: &str, p: i32) -> TopicPartition {
        (t.to_string(), p)
    }

    fn offset(s: &OffsetState, t: &str, p: i32) -> Option<i64> {
        s.get(&tp(t, p)).map(|c| c.offset)
    }

    #[test]
    fn pending_offsets_are_invisible_until_the_commit_marker() {
        let mut s = OffsetState::default();
        s.commit(tp("t", 0), at(5, 0));
        s.add_pending(3, 100, tp("t", 0), at(10, 1));
        s.add_pending(3, 100, tp("t", 1), at(20, 2));
        assert_eq!(offset(&s, "t", 0), Some(5));
        assert_eq!(offset(&s, "t", 1), None);
        assert!(s.has_pending(&tp("t", 0)) && s.has_pending(&tp("t", 1)));
        assert!(!s.has_pending(&tp("t", 2)));
        assert!(s.has_open_txns() && s.has_producer(100) && !s.has_producer(101));
        assert_eq!(s.complete(3, 100, true), 2);
        assert_eq!(offset(&s, "t", 0), Some(10));
        assert_eq!(offset(&s, "t", 1), Some(20));
        assert!(!s.has_pending(&tp("t", 0)) && !s.has_open_txns());
        // A second marker for the same transaction finds nothing.
        assert_eq!(s.complete(3, 100, true), 0);
        assert_eq!(offset(&s, "t", 0), Some(10));
    }

    #[test]
    fn the_abort_marker_drops_pending_offsets() {
        let mut s = OffsetState::default();
        s.commit(tp("t", 0), at(5, 0));
        s.add_pending(0, 7, tp("t", 0), at(10, 1));
        assert_eq!(s.complete(0, 7, false), 0);
        assert_eq!(offset(&s, "t", 0), Some(5));
        assert!(!s.has_pending(&tp("t", 0)) && !s.has_open_txns());
    }

    #[test]
    fn a_plain_commit_written_after_the_transactional_one_wins() {
        let mut s = OffsetState::default();
        s.add_pending(0, 7, tp("t", 0), at(10, 1));
        s.add_pending(0, 7, tp("t", 1), at(11, 2));
        s.commit(tp("t", 0), at(20, 3));
        assert_eq!(s.complete(0, 7, true), 1);
        assert_eq!(offset(&s, "t", 0), Some(20));
        assert_eq!(offset(&s, "t", 1), Some(11));
    }

    #[test]
    fn the_last_commit_of_a_transaction_wins() {
        let mut s = OffsetState::default();
        s.add_pending(0, 7, tp("t", 0), at(10, 1));
        s.add_pending(0, 7, tp("t", 0), at(9, 2));
        s.complete(0, 7, true);
        assert_eq!(offset(&s, "t", 0), Some(9));
    }

    #[test]
    fn transactions_end_per_producer_and_per_offsets_partition() {
        let mut s = OffsetState::default();
        s.add_pending(0, 7, tp("t", 0), at(10, 1));
        s.add_pending(0, 8, tp("t", 1), at(11, 2));
        s.add_pending(1, 7, tp("t", 2), at(12, 1));
        assert_eq!(s.complete(0, 7, true), 1);
        assert_eq!(offset(&s, "t", 0), Some(10));
        assert_eq!(offset(&s, "t", 1), None);
        assert_eq!(offset(&s, "t", 2), None);
        assert!(s.has_producer(7) && s.has_producer(8));
        let mut open: Vec<TxnKey> = s.open_txns().collect();
        open.sort();
        assert_eq!(open, vec![(0, 8), (1, 7)]);
        s.complete(1, 7, false);
        s.complete(0, 8, true);
        assert_eq!(offset(&s, "t", 1), Some(11));
        assert_eq!(offset(&s, "t", 2), None);
        assert!(!s.has_open_txns());
    }

    #[test]
    fn a_tombstone_removes_committed_and_pending_offsets() {
        let mut s = OffsetState::default();
        s.commit(tp("t", 0), at(5, 0));
        s.add_pending(0, 7, tp("t", 0), at(10, 1));
        s.add_pending(0, 8, tp("t", 0), at(11, 2));
        s.add_pending(0, 8, tp("t", 1), at(12, 3));
        let all = s.partitions();
        assert_eq!(all.len(), 2);
        assert!(s.delete(&tp("t", 0)));
        assert!(!s.delete(&tp("t", 0)));
        assert_eq!(offset(&s, "t", 0), None);
        assert!(!s.has_pending(&tp("t", 0)));
        // The transactions stay open until their markers; what they still hold commits.
        assert!(s.has_producer(7) && s.has_open_txns());
        assert_eq!(s.complete(0, 7, true), 0);
        assert_eq!(s.complete(0, 8, true), 1);
        assert_eq!(offset(&s, "t", 0), None);
        assert_eq!(offset(&s, "t", 1), Some(12));
        assert!(!s.is_empty());
        s.clear();
        assert!(s.is_empty());
    }
}
