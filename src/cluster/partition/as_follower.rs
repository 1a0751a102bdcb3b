//! The partition as follower: taking the role, what a replica fetcher asks the leader for,
//! truncation to where this log agrees with the leader's (from its OffsetForLeaderEpoch
//! answer, `replication::follower`, or a fetch's diverging epoch), and appending the leader's
//! batches as they are (offsets, epochs and timestamps kept).

use std::sync::atomic::Ordering;

use super::*;
use crate::cluster::replication::follower::truncation_offset;

/// Where a follower's replica fetcher stands with its leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerPosition {
    pub leader: i32,
    pub leader_epoch: i32,
    /// The next fetch starts here: the local log end offset.
    pub fetch_offset: i64,
    /// The latest leader epoch in the local log (-1 if none): what OffsetForLeaderEpoch asks
    /// the leader about before the first fetch, and Fetch v12+ sends as `last_fetched_epoch`.
    pub last_fetched_epoch: i32,
    pub log_start_offset: i64,
    pub high_watermark: i64,
}

impl Partition {
    /// Makes this replica a follower of `leader` at `leader_epoch`: producer appends and
    /// reads for consumers then get NOT_LEADER_OR_FOLLOWER, and so do the acks=all produces
    /// waiting here (they are woken). The high watermark is kept. Returns whether the leader
    /// epoch is new (the fetcher must then truncate and restart); an older epoch, or the same
    /// one, changes nothing.
    pub fn become_follower(&self, leader: i32, leader_epoch: i32) -> Result<bool, PartitionError> {
        if leader == self.local_node {
            return Err(PartitionError::NotLeader);
        }
        let _log = self.log.lock().unwrap();
        let mut r = self.replication.lock().unwrap();
        let current = r.leader_epoch();
        if leader_epoch < current
            || leader_epoch == current && matches!(r.role, Role::Follower { .. })
        {
            return Ok(false);
        }
        r.role = Role::Follower {
            leader,
            leader_epoch,
            replicas: r.replicas().to_vec(),
            high_watermark: r.high_watermark(),
        };
        self.publish(&r);
        drop(r);
        drop(_log);
        self.wake_waiters();
        Ok(true)
    }

    /// The fetcher's position, if this replica follows a known leader.
    pub fn follower_position(&self) -> Option<FollowerPosition> {
        let log = self.log.lock().unwrap();
        let r = self.replication.lock().unwrap();
        match r.role {
            Role::Follower {
                leader,
                leader_epoch,
                high_watermark,
                ..
            } if leader >= 0 => Some(FollowerPosition {
                leader,
                leader_epoch,
                fetch_offset: log.log_end_offset(),
                last_fetched_epoch: log.latest_epoch().unwrap_or(-1),
                log_start_offset: log.log_start_offset(),
                high_watermark,
            }),
            _ => None,
        }
    }

    /// Truncates after the leader answered OffsetForLeaderEpoch for our latest epoch with
    /// (`leader_epoch`, `end_offset`): to where the two logs agree. Returns the new log end.
    pub fn truncate_for_leader_epoch(
        &self,
        leader_epoch: i32,
        end_offset: i64,
    ) -> Result<i64, PartitionError> {
        let to = {
            let log = self.log.lock().unwrap();
            truncation_offset(
                log.epoch_cache(),
                log.log_end_offset(),
                self.high_watermark(),
                leader_epoch,
                end_offset,
            )
        };
        self.truncate_to(to)
    }

    /// Removes everything at and after `offset` (whole batches) as a follower, and rebuilds
    /// the producer state for the shorter log; the high watermark is capped at the new log
    /// end. Returns the new log end.
    pub fn truncate_to(&self, offset: i64) -> Result<i64, PartitionError> {
        let mut log = self.log.lock().unwrap();
        if !matches!(self.replication.lock().unwrap().role, Role::Follower { .. }) {
            return Err(PartitionError::NotLeader);
        }
        if offset >= log.log_end_offset() {
            log.truncate_to(offset)
                .map_err(|e| PartitionError::Storage(e.into()))?;
            return Ok(log.log_end_offset());
        }
        log.truncate_to(offset)
            .map_err(|e| PartitionError::Storage(e.into()))?;
        let producers =
            super::load_producer_state(&mut log).map_err(|e| PartitionError::Storage(e.into()))?;
        self.reset_stable(&producers);
        *self.producers.lock().unwrap() = producers;
        let leo = log.log_end_offset();
        self.log_end.store(leo, Ordering::Release);
        self.log_start
            .store(log.log_start_offset(), Ordering::Release);
        let mut r = self.replication.lock().unwrap();
        if let Role::Follower { high_watermark, .. } = &mut r.role {
            *high_watermark = (*high_watermark).min(leo);
        }
        self.publish(&r);
        tracing::info!(topic = %self.topic, partition = self.index, "truncated to {leo} as follower");
        Ok(leo)
    }

    /// Empties the log and restarts it at `offset` as a follower whose whole log is below the
    /// leader's log start (Kafka's `truncateFullyAndStartAt`): the producer state and its
    /// snapshots go, and the high watermark is the new log end. Returns the new log end.
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<i64, PartitionError> {
        let mut log = self.log.lock().unwrap();
        if !matches!(self.replication.lock().unwrap().role, Role::Follower { .. }) {
            return Err(PartitionError::NotLeader);
        }
        log.truncate_fully_and_start_at(offset)
            .map_err(|e| PartitionError::Storage(e.into()))?;
        let producers =
            ProducerState::reset(log.dir()).map_err(|e| PartitionError::Storage(e.into()))?;
        self.reset_stable(&producers);
        *self.producers.lock().unwrap() = producers;
        self.log_end.store(offset, Ordering::Release);
        self.log_start.store(offset, Ordering::Release);
        let mut r = self.replication.lock().unwrap();
        if let Role::Follower { high_watermark, .. } = &mut r.role {
            *high_watermark = offset;
        }
        self.publish(&r);
        drop(r);
        drop(log);
        tracing::info!(topic = %self.topic, partition = self.index, "emptied and restarted at {offset} as follower");
        self.wake_waiters();
        Ok(offset)
    }

    /// Appends the leader's batches (from a fetch) as they are, and takes the high watermark
    /// the leader sent, capped at the local log end; it never goes back.
    pub fn append_as_follower(
        &self,
        records: &[u8],
        leader_hw: i64,
        now: i64,
    ) -> Result<AppendInfo, PartitionError> {
        let mut log = self.log.lock().unwrap();
        if !matches!(self.replication.lock().unwrap().role, Role::Follower { .. }) {
            return Err(PartitionError::NotLeader);
        }
        let producers = self.producers.lock().unwrap();
        let info = log
            .append_as_follower(records, now)
            .map_err(PartitionError::Append)?;
        let leo = self.appended(&mut log, producers, &info, records);
        self.follow_high_watermark(leader_hw, leo);
        drop(log);
        self.wake_waiters();
        Ok(info)
    }

    /// A fetch response from the leader carried `leader_hw` (with records or without).
    pub fn on_leader_high_watermark(&self, leader_hw: i64) {
        self.follow_high_watermark(leader_hw, self.log_end_offset());
    }

    /// The follower's high watermark: the leader's, capped at the local log end; it never
    /// goes back.
    fn follow_high_watermark(&self, leader_hw: i64, leo: i64) {
        let mut r = self.replication.lock().unwrap();
        if let Role::Follower { high_watermark, .. } = &mut r.role {
            *high_watermark = (*high_watermark).max(leader_hw.min(leo));
        }
        self.publish(&r);
    }
}
