//! A partition replica on this broker: the owner of its [`Log`], and of the replication state
//! Kafka keeps per partition (leader, leader epoch, replicas, in-sync replicas, high watermark).
//!
//! On a cluster of one the ISR is {self} and the high watermark follows the log end offset;
//! the same computation (minimum log end offset over the ISR) serves followers later.
//!
//! It also owns the partition's producer state (idempotence, `producer/state.rs`). Lock order:
//! `log`, then `producers`; the producer state only changes with both held, so the duplicate
//! and sequence check, the append and the state update are one atomic step.

use std::collections::HashMap;
use std::fs::File;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use tokio::sync::Notify;
use uuid::Uuid;

use crate::log::{AppendError, AppendInfo, Log, ReadError};
use crate::producer::ProducerState;
use crate::producer::state::ProducerSummary;

/// Replication state of a partition, as the controller assigned it.
#[derive(Debug, Clone)]
pub struct ReplicaState {
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// Bytes of one partition's records for a fetch: a region of a segment file.
pub struct FetchSlice {
    pub file: Option<Arc<File>>,
    pub position: u64,
    pub len: usize,
}

pub struct Partition {
    pub topic: Arc<str>,
    pub index: i32,
    pub topic_id: Uuid,
    local_node: i32,
    log: Mutex<Log>,
    /// Locked only while `log` is held.
    producers: Mutex<ProducerState>,
    state: RwLock<ReplicaState>,
    /// Log end offsets last reported by followers (empty on a cluster of one).
    follower_leo: Mutex<HashMap<i32, i64>>,
    high_watermark: AtomicI64,
    log_start: AtomicI64,
    log_end: AtomicI64,
    /// Fetches waiting for data here; each is woken once when the high watermark moves.
    waiters: Mutex<Vec<Weak<Notify>>>,
}

#[derive(Debug)]
pub enum PartitionError {
    NotLeader,
    FencedLeaderEpoch,
    UnknownLeaderEpoch,
    Append(AppendError),
    Producer(crate::producer::ProducerError),
    Read(ReadError),
    Storage(anyhow::Error),
}

impl Partition {
    pub fn new(
        topic: Arc<str>,
        index: i32,
        topic_id: Uuid,
        local_node: i32,
        log: Log,
        state: ReplicaState,
    ) -> Partition {
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        let producers = ProducerState::load(&log).unwrap_or_else(|e| {
            tracing::error!(dir = %log.dir().display(), "cannot rebuild producer state: {e}");
            ProducerState::new(log.dir())
        });
        let p = Partition {
            topic,
            index,
            topic_id,
            local_node,
            log: Mutex::new(log),
            producers: Mutex::new(producers),
            state: RwLock::new(state),
            follower_leo: Mutex::new(HashMap::new()),
            high_watermark: AtomicI64::new(0),
            log_start: AtomicI64::new(start),
            log_end: AtomicI64::new(end),
            waiters: Mutex::new(Vec::new()),
        };
        p.update_high_watermark();
        p
    }

    pub fn replica_state(&self) -> ReplicaState {
        self.state.read().unwrap().clone()
    }

    pub fn is_leader(&self) -> bool {
        self.state.read().unwrap().leader == self.local_node
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start.load(Ordering::Acquire)
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log_end.load(Ordering::Acquire)
    }

    /// Checks a client's view of the leader epoch (-1 = no check), as Kafka does on
    /// Fetch and ListOffsets.
    pub fn check_epoch(&self, current_leader_epoch: i32) -> Result<(), PartitionError> {
        let st = self.state.read().unwrap();
        if st.leader != self.local_node {
            return Err(PartitionError::NotLeader);
        }
        if current_leader_epoch >= 0 {
            if current_leader_epoch < st.leader_epoch {
                return Err(PartitionError::FencedLeaderEpoch);
            }
            if current_leader_epoch > st.leader_epoch {
                return Err(PartitionError::UnknownLeaderEpoch);
            }
        }
        Ok(())
    }

    /// Appends producer batches as the leader. `append_time` is set for LogAppendTime topics.
    pub fn append_as_leader(
        &self,
        records: &mut [u8],
        append_time: Option<i64>,
        max_batch_bytes: usize,
    ) -> Result<AppendInfo, PartitionError> {
        let epoch = {
            let st = self.state.read().unwrap();
            if st.leader != self.local_node {
                return Err(PartitionError::NotLeader);
            }
            st.leader_epoch
        };
        let info = {
            let mut log = self.log.lock().unwrap();
            let mut producers = self.producers.lock().unwrap();
            if let Some(dup) = crate::producer::state::check_append(&producers, records)
                .map_err(PartitionError::Producer)?
            {
                // A retry of a batch already written: its original offsets, nothing appended.
                return Ok(AppendInfo {
                    first_offset: dup.first_offset,
                    last_offset: dup.last_offset,
                    log_append_time: dup.timestamp,
                    max_timestamp: dup.timestamp,
                    offset_of_max_timestamp: dup.last_offset,
                    log_start_offset: log.log_start_offset(),
                    rolled_at: None,
                    record_count: 0,
                    size_bytes: 0,
                    batches: Vec::new(),
                });
            }
            let info = log
                .append(records, epoch, append_time, max_batch_bytes)
                .map_err(PartitionError::Append)?;
            if let Some(at) = info.rolled_at
                && let Err(e) = producers.take_snapshot(at)
            {
                tracing::warn!(dir = %log.dir().display(), "producer snapshot at {at} failed: {e}");
            }
            producers.update(&info.batches);
            self.log_end.store(log.log_end_offset(), Ordering::Release);
            info
        };
        self.update_high_watermark();
        Ok(info)
    }

    /// High watermark = the smallest log end offset among the in-sync replicas.
    fn update_high_watermark(&self) {
        let isr = self.state.read().unwrap().isr.clone();
        let local = self.log_end_offset();
        let followers = self.follower_leo.lock().unwrap();
        let hw = isr
            .iter()
            .map(|r| {
                if *r == self.local_node {
                    local
                } else {
                    followers.get(r).copied().unwrap_or(0)
                }
            })
            .min()
            .unwrap_or(local);
        let old = self.high_watermark.fetch_max(hw, Ordering::AcqRel);
        if hw > old {
            self.wake_waiters();
        }
    }

    fn wake_waiters(&self) {
        let waiters = std::mem::take(&mut *self.waiters.lock().unwrap());
        for w in waiters.iter().filter_map(Weak::upgrade) {
            w.notify_one();
        }
    }

    /// Registers a fetch to be woken when the high watermark advances.
    pub fn add_waiter(&self, w: &Arc<Notify>) {
        let mut waiters = self.waiters.lock().unwrap();
        // Fetches that timed out leave dead entries behind on an idle partition.
        if waiters.len() >= 64 {
            waiters.retain(|w| w.strong_count() > 0);
        }
        waiters.push(Arc::downgrade(w));
    }

    /// Reads whole batches from `offset`, bounded by `max_bytes` and the high watermark.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<FetchSlice, PartitionError> {
        let hw = self.high_watermark();
        let log = self.log.lock().unwrap();
        let s = log
            .read(offset, max_bytes, hw, min_one_batch)
            .map_err(PartitionError::Read)?;
        Ok(FetchSlice {
            file: Some(s.file),
            position: s.position,
            len: s.len,
        })
    }

    /// ListOffsets by timestamp: (timestamp, offset) of the first record at or after `ts`.
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<(i64, i64)>, PartitionError> {
        let log = self.log.lock().unwrap();
        let found = log
            .offset_for_timestamp(ts)
            .map_err(PartitionError::Storage)?;
        let hw = self.high_watermark();
        Ok(found.filter(|(_, off)| *off < hw))
    }

    /// ListOffsets MAX_TIMESTAMP: (timestamp, offset) of the record with the largest timestamp.
    pub fn max_timestamp(&self) -> Result<Option<(i64, i64)>, PartitionError> {
        let log = self.log.lock().unwrap();
        log.max_timestamp_offset().map_err(PartitionError::Storage)
    }

    /// Deletes old segments per the retention settings; returns how many went.
    pub fn apply_retention(&self, now_ms: i64) -> anyhow::Result<usize> {
        let mut log = self.log.lock().unwrap();
        let n = log.apply_retention(now_ms)?;
        self.log_start
            .store(log.log_start_offset(), Ordering::Release);
        Ok(n)
    }

    pub fn flush(&self) -> anyhow::Result<()> {
        self.log.lock().unwrap().flush()
    }

    /// Flushes the log and snapshots the producer state at the log end.
    pub fn close(&self) -> anyhow::Result<()> {
        let mut log = self.log.lock().unwrap();
        log.close()?;
        if log.dir().is_dir() {
            self.producers
                .lock()
                .unwrap()
                .take_snapshot(log.log_end_offset())?;
        }
        Ok(())
    }

    /// Forgets producers idle for `expiration_ms` (`producer.id.expiration.ms`).
    pub fn remove_expired_producers(&self, now_ms: i64, expiration_ms: i64) -> usize {
        let _log = self.log.lock().unwrap();
        self.producers
            .lock()
            .unwrap()
            .remove_expired(now_ms, expiration_ms)
    }

    /// The producers this partition remembers (DescribeProducers).
    pub fn producers(&self) -> Vec<ProducerSummary> {
        let _log = self.log.lock().unwrap();
        self.producers.lock().unwrap().summaries()
    }

    pub fn delete(&self) -> anyhow::Result<()> {
        self.log.lock().unwrap().delete_dir()
    }
}
