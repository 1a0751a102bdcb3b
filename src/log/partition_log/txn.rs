//! The log's aborted transactions: recorded in the transaction index of the segment holding
//! each ABORT marker, and collected for read_committed fetches as Kafka's
//! `LocalLog.collectAbortedTransactions` does.

use std::io;

use super::Log;
use crate::log::txn_index::AbortedTxn;

impl Log {
    /// Records `txn` (its marker at `txn.last_offset`) in the transaction index of the
    /// segment holding the marker. An entry already there (the replay after a restart meets
    /// markers whose entries were written before) is not added again. Returns whether it was
    /// added.
    pub fn append_aborted_txn(&mut self, txn: AbortedTxn) -> io::Result<bool> {
        let Some((_, seg)) = self.segments.range_mut(..=txn.last_offset).next_back() else {
            return Ok(false);
        };
        if txn.last_offset >= seg.next_offset()
            || seg
                .txn_index()
                .last_offset()
                .is_some_and(|l| l >= txn.last_offset)
        {
            return Ok(false);
        }
        seg.txn_index_mut().append(txn)?;
        Ok(true)
    }

    /// The aborted transactions overlapping the fetched range [`fetch_offset`,
    /// `upper_bound`): from the transaction index of the segment holding `fetch_offset` on
    /// through later segments (a transaction begun here may end in one of them), until an
    /// entry's last stable offset shows that no later one can overlap.
    pub fn collect_aborted_txns(&self, fetch_offset: i64, upper_bound: i64) -> Vec<AbortedTxn> {
        let floor = self
            .segments
            .range(..=fetch_offset)
            .next_back()
            .map_or(self.log_start_offset, |(b, _)| *b);
        let mut out = Vec::new();
        for seg in self.segments.range(floor..).map(|(_, s)| s) {
            let (found, complete) = seg.txn_index().collect(fetch_offset, upper_bound);
            out.extend(found);
            if complete {
                break;
            }
        }
        out
    }
}
