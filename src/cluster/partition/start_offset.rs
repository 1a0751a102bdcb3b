//! The partition's log start offset moved on request, as Kafka's `Partition.deleteRecordsOnLeader`
//! and the follower side of `ReplicaFetcherThread.processPartitionData`:
//!
//! - on the leader, DeleteRecords advances it to an offset at most the high watermark (-1: the
//!   high watermark); a topic whose cleanup.policy is only `compact` is refused before (the API
//!   handler checks that);
//! - a follower takes the leader's log start from each fetch response (capped at its own high
//!   watermark) and reports its own in its next fetch, from which the leader learns the low
//!   watermark the DeleteRecords answer waits for.
//!
//! In both cases the log deletes the segments wholly below the new start.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::*;

/// DeleteRecords' "up to the high watermark" offset.
pub const HIGH_WATERMARK: i64 = -1;

impl Partition {
    /// DeleteRecords on the leader: moves the log start offset up to `offset`
    /// ([`HIGH_WATERMARK`]: the high watermark). Returns the offset every replica's log start
    /// must reach before the deletion is answered. NOT_LEADER_OR_FOLLOWER on a follower;
    /// OFFSET_OUT_OF_RANGE for an offset below 0 or above the high watermark.
    pub fn delete_records_on_leader(&self, offset: i64) -> Result<i64, PartitionError> {
        let mut log = self.log.lock().unwrap();
        let r = self.replication.lock().unwrap();
        if !matches!(r.role, Role::Leader(_)) {
            return Err(PartitionError::NotLeader);
        }
        let hw = r.high_watermark();
        let offset = if offset == HIGH_WATERMARK { hw } else { offset };
        if offset < 0 || offset > hw {
            return Err(PartitionError::Read(ReadError::OffsetOutOfRange {
                offset,
                log_start_offset: log.log_start_offset(),
                log_end_offset: log.log_end_offset(),
            }));
        }
        if log
            .advance_log_start(offset)
            .map_err(PartitionError::Read)?
        {
            tracing::info!(topic = %self.topic, partition = self.index, offset, "log start offset advanced by DeleteRecords");
        }
        self.started_at(&log, &r);
        drop(r);
        drop(log);
        // Followers waiting in a fetch learn the new start sooner.
        self.wake_waiters();
        Ok(offset)
    }

    /// The low watermark, if this replica leads: the smallest log start offset over it and
    /// its in-sync followers (`LeaderState::low_watermark`).
    pub fn low_watermark(&self) -> Result<i64, PartitionError> {
        let start = self.log_start_offset();
        match &self.replication.lock().unwrap().role {
            Role::Leader(ls) => Ok(ls.low_watermark(start)),
            Role::Follower { .. } => Err(PartitionError::NotLeader),
        }
    }

    /// Waits until the low watermark reaches `required`, for at most `timeout` (Kafka's
    /// DelayedDeleteRecords). `Ok(Some(lw))` once reached, `Ok(None)` on timeout,
    /// NOT_LEADER_OR_FOLLOWER once this replica stops leading.
    pub async fn wait_for_low_watermark(
        &self,
        required: i64,
        timeout: Duration,
    ) -> Result<Option<i64>, PartitionError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let waiter = Arc::new(Notify::new());
            self.add_waiter(&waiter);
            let lw = self.low_watermark()?;
            if lw >= required {
                return Ok(Some(lw));
            }
            if tokio::time::timeout_at(deadline, waiter.notified())
                .await
                .is_err()
            {
                let lw = self.low_watermark()?;
                return Ok((lw >= required).then_some(lw));
            }
        }
    }

    /// A fetch response from the leader carried its log start offset: a follower moves its own
    /// up to it, never past its high watermark. Returns whether it moved.
    pub fn on_leader_log_start(&self, leader_log_start: i64) -> Result<bool, PartitionError> {
        let mut log = self.log.lock().unwrap();
        let r = self.replication.lock().unwrap();
        if !matches!(r.role, Role::Follower { .. }) {
            return Err(PartitionError::NotLeader);
        }
        let to = leader_log_start.min(r.high_watermark());
        let moved = log.advance_log_start(to).map_err(PartitionError::Read)?;
        if moved {
            tracing::info!(topic = %self.topic, partition = self.index, offset = to, "log start offset advanced to the leader's");
            self.started_at(&log, &r);
        }
        Ok(moved)
    }

    /// What `log-start-offset-checkpoint` holds for this replica: its log start offset when
    /// that is inside its first segment (the segments alone do not tell it), as Kafka writes it.
    pub fn log_start_to_checkpoint(&self) -> Option<i64> {
        let log = self.log.lock().unwrap();
        (log.log_start_offset() > log.first_segment_base()).then(|| log.log_start_offset())
    }

    /// Publishes a moved log start, and the last stable offset, which never stays below it.
    fn started_at(&self, log: &Log, r: &Replication) {
        self.log_start
            .store(log.log_start_offset(), Ordering::Release);
        self.publish(r);
    }
}
