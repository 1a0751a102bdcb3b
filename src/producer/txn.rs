//! Transactions as a partition sees them (Kafka's ProducerStateManager transaction parts):
//! the markers a coordinator writes, the transactions they complete, and the last stable
//! offset those leave.
//!
//! A producer's transaction on a partition starts at its first transactional batch there and
//! ends at the COMMIT or ABORT marker for it. Until its marker is written the transaction is
//! *undecided*; after that, until the high watermark passes the marker, it is *unreplicated*.
//! Either way its records are unstable: the last stable offset (LSO) is the first offset of
//! the oldest unstable transaction (not below the log start), capped at the high watermark.
//! read_committed consumers read below the LSO only.

use std::collections::BTreeMap;

/// A transaction marker to append, as the coordinator asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    /// COMMIT (true) or ABORT (false).
    pub commit: bool,
    /// The transaction version the coordinator runs (WriteTxnMarkers v2
    /// `transaction_version`): from 2 (KIP-890 part 2) every marker carries an epoch above
    /// the producer's current one; below 2, the same epoch is accepted.
    pub transaction_version: i16,
}

/// A transaction ended by a marker appended at `last_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The marker's offset.
    pub last_offset: i64,
    /// The LSO once this transaction is done, as of its marker: the first offset of the oldest
    /// other undecided transaction, else the offset after the marker (recorded in the
    /// transaction index for aborted ones).
    pub last_stable_offset: i64,
    pub aborted: bool,
}

/// What the LSO is made of, kept apart from the producer state so that it can be read with
/// only the high watermark at hand: the first offset of the oldest undecided transaction
/// (copied from the producer state after each change) and the completed transactions whose
/// markers the high watermark has not passed yet. Pure; its owner locks it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StableOffsets {
    first_undecided: Option<i64>,
    /// First offset -> marker offset.
    unreplicated: BTreeMap<i64, i64>,
}

impl StableOffsets {
    /// After the producer state was rebuilt (start-up, truncation): only undecided
    /// transactions remain unstable (a reload happens at or below the high watermark).
    pub fn reset(&mut self, first_undecided: Option<i64>) {
        self.first_undecided = first_undecided;
        self.unreplicated.clear();
    }

    /// After an append: the producer state's oldest undecided transaction, and the
    /// transactions the append completed.
    pub fn on_append(&mut self, first_undecided: Option<i64>, completed: &[CompletedTxn]) {
        self.first_undecided = first_undecided;
        for t in completed {
            self.unreplicated.insert(t.first_offset, t.last_offset);
        }
    }

    /// The first offset still unstable, once the high watermark is `high_watermark`
    /// (completed transactions whose marker is below it are forgotten).
    pub fn first_unstable_offset(&mut self, high_watermark: i64) -> Option<i64> {
        self.unreplicated.retain(|_, last| *last >= high_watermark);
        let unreplicated = self.unreplicated.keys().next().copied();
        match (self.first_undecided, unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The last stable offset: the first unstable offset (not below `log_start`), capped at
    /// `high_watermark`.
    pub fn last_stable_offset(&mut self, high_watermark: i64, log_start: i64) -> i64 {
        match self.first_unstable_offset(high_watermark) {
            Some(first) => first.max(log_start).min(high_watermark),
            None => high_watermark,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(first: i64, last: i64) -> CompletedTxn {
        CompletedTxn {
            producer_id: 1,
            first_offset: first,
            last_offset: last,
            last_stable_offset: last + 1,
            aborted: false,
        }
    }

    #[test]
    fn lso_follows_undecided_and_unreplicated_transactions() {
        let mut s = StableOffsets::default();
        assert_eq!(s.last_stable_offset(10, 0), 10);
        // A transaction opened at 4: the LSO stops there whatever the high watermark does.
        s.on_append(Some(4), &[]);
        assert_eq!(s.last_stable_offset(3, 0), 3);
        assert_eq!(s.last_stable_offset(12, 0), 4);
        // Its marker at 12 is written but not replicated: still unstable at 4.
        s.on_append(None, &[done(4, 12)]);
        assert_eq!(s.last_stable_offset(12, 0), 4);
        // The high watermark passes the marker: stable up to the high watermark.
        assert_eq!(s.last_stable_offset(13, 0), 13);
        assert_eq!(s.first_unstable_offset(13), None);
        // Two open transactions: the older one counts; retention past it lifts the LSO to
        // the log start.
        s.on_append(Some(20), &[]);
        s.on_append(Some(20), &[done(15, 35)]);
        assert_eq!(s.last_stable_offset(30, 0), 15);
        assert_eq!(s.last_stable_offset(30, 17), 17);
        assert_eq!(s.last_stable_offset(30, 25), 25);
        // A reload forgets completed transactions.
        s.reset(Some(20));
        assert_eq!(s.last_stable_offset(30, 0), 20);
    }
}
