//! A partition replica on this broker: the owner of its [`Log`], its producer state, and its
//! replication state, as Kafka's `Partition` is.
//!
//! A replica is the leader at some leader epoch, or a follower of another broker at one. As
//! leader it keeps a [`LeaderState`] (`cluster::replication`): the followers' log end offsets
//! and caught-up times, the ISR and the change to it in flight, min.insync.replicas, and the
//! high watermark it decides. This module carries those decisions out: it feeds the state the
//! local appends and the followers' fetches, publishes the high watermark, wakes the fetches
//! and acks=all produces waiting on it, and answers reads. As follower (`as_follower.rs`) it
//! truncates to where its log agrees with the leader's and appends the leader's batches as
//! they are. On a cluster of one every partition leads with ISR = {self}, so its high
//! watermark is its log end offset after every append.
//!
//! Lock order: `log`, then `producers`, then `replication`, then `stable`; `waiters` is taken
//! alone. The producer state only changes with `log` held, so the duplicate and sequence check,
//! the append and the state update are one step. The role (leader or follower, leader epoch) only changes
//! with `log` and `replication` held, so an append under `log` sees one role throughout; a
//! follower's fetch updates the leader state under `replication` alone, without waiting for
//! the log. The atomics are published copies for lock-free readers: the high watermark and the
//! last stable offset are written only with `replication` held, the log offsets only with
//! `log` held.
//!
//! Transactions: the producer state knows each producer's ongoing transaction; `stable`
//! ([`StableOffsets`]) holds what the last stable offset is computed from (the oldest
//! undecided transaction, copied after each append, and the completed ones whose markers the
//! high watermark has not passed). The LSO is recomputed whenever the high watermark is
//! published. Markers are appended by the transaction coordinator through
//! [`Partition::append_marker`] (`as_leader.rs`).

mod as_follower;
mod as_leader;
mod cleaning;
pub use cleaning::CleanerView;
mod log_dir_move;
mod start_offset;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod txn_tests;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Notify;
use uuid::Uuid;

use super::metadata::PartitionRecord;
use super::replication::LeaderState;
use crate::log::{AbortedTxn, AppendError, AppendInfo, Log, ReadError, now_ms};
use crate::producer::state::ProducerSummary;
use crate::producer::{CompletedTxn, ProducerState, StableOffsets};

pub use as_follower::FollowerPosition;
pub use as_leader::{AckOutcome, FollowerFetch, IsrProposal, LeaderAppend, ReplicaRead};
pub use start_offset::HIGH_WATERMARK;

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
    /// For a read_committed read: the aborted transactions overlapping the batches read.
    pub aborted: Option<Vec<AbortedTxn>>,
}

impl FetchSlice {
    /// Nothing read.
    pub fn empty() -> FetchSlice {
        FetchSlice {
            file: None,
            position: 0,
            len: 0,
            aborted: None,
        }
    }

    fn of(s: crate::log::ReadSlice) -> FetchSlice {
        FetchSlice {
            file: s.file,
            position: s.position,
            len: s.len,
            aborted: None,
        }
    }
}

/// What this replica is now.
enum Role {
    Leader(LeaderState),
    /// Following `leader` (-1: none known yet) at `leader_epoch`. Only a leader tracks the
    /// ISR; a follower's high watermark is the last the leader sent it, capped at its log end.
    Follower {
        leader: i32,
        leader_epoch: i32,
        replicas: Vec<i32>,
        high_watermark: i64,
    },
}

struct Replication {
    role: Role,
    /// min.insync.replicas (the topic's, or the broker default).
    min_isr: usize,
}

impl Replication {
    fn leader_epoch(&self) -> i32 {
        match &self.role {
            Role::Leader(ls) => ls.leader_epoch,
            Role::Follower { leader_epoch, .. } => *leader_epoch,
        }
    }

    fn high_watermark(&self) -> i64 {
        match &self.role {
            Role::Leader(ls) => ls.high_watermark(),
            Role::Follower { high_watermark, .. } => *high_watermark,
        }
    }

    fn replicas(&self) -> &[i32] {
        match &self.role {
            Role::Leader(ls) => &ls.replicas,
            Role::Follower { replicas, .. } => replicas,
        }
    }
}

pub struct Partition {
    pub topic: Arc<str>,
    pub index: i32,
    pub topic_id: Uuid,
    local_node: i32,
    /// The log directory this partition's directory is in (its checkpoint files are there).
    /// Changes only with `log` held (a move to another log dir).
    log_dir: Mutex<PathBuf>,
    log: Mutex<Log>,
    /// Locked only while `log` is held.
    producers: Mutex<ProducerState>,
    replication: Mutex<Replication>,
    /// Locked last, only briefly.
    stable: Mutex<StableOffsets>,
    high_watermark: AtomicI64,
    last_stable: AtomicI64,
    log_start: AtomicI64,
    log_end: AtomicI64,
    /// Fetches and acks=all produces waiting here; each is woken once when the log end, the
    /// high watermark, the ISR or the role changes.
    waiters: Mutex<Vec<Weak<Notify>>>,
    /// Client traffic counters (bytes and records in, bytes out), read by `/metrics`.
    pub stats: crate::metrics::PartitionStats,
}

#[derive(Debug)]
pub enum PartitionError {
    NotLeader,
    FencedLeaderEpoch,
    UnknownLeaderEpoch,
    /// acks=all while the ISR is smaller than the effective min.insync.replicas.
    NotEnoughReplicas {
        isr: Vec<i32>,
        min_isr: usize,
    },
    Append(AppendError),
    Producer(crate::producer::ProducerError),
    Read(ReadError),
    Storage(anyhow::Error),
}

impl Partition {
    /// Opens the replica over `log` in the role `state` gives, with the high watermark last
    /// checkpointed for it (`replication-offset-checkpoint`; kept within the log's offsets).
    pub fn new(
        topic: Arc<str>,
        index: i32,
        topic_id: Uuid,
        local_node: i32,
        log: Log,
        state: ReplicaState,
        checkpointed_hw: i64,
    ) -> Partition {
        let mut log = log;
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        let producers = load_producer_state(&mut log).unwrap_or_else(|e| {
            tracing::error!(dir = %log.dir().display(), "cannot rebuild producer state: {e}");
            ProducerState::new(log.dir())
        });
        let mut stable = StableOffsets::default();
        stable.reset(producers.first_undecided_offset());
        let lso = stable.last_stable_offset(checkpointed_hw.clamp(start, end), start);
        let log_dir = log
            .dir()
            .parent()
            .map_or_else(PathBuf::new, Path::to_path_buf);
        let hw = checkpointed_hw.clamp(start, end);
        let p = Partition {
            topic,
            index,
            topic_id,
            local_node,
            log_dir: Mutex::new(log_dir),
            log: Mutex::new(log),
            producers: Mutex::new(producers),
            stable: Mutex::new(stable),
            replication: Mutex::new(Replication {
                role: Role::Follower {
                    leader: -1,
                    leader_epoch: -1,
                    replicas: state.replicas.clone(),
                    high_watermark: hw,
                },
                min_isr: 1,
            }),
            high_watermark: AtomicI64::new(hw),
            last_stable: AtomicI64::new(lso),
            log_start: AtomicI64::new(start),
            log_end: AtomicI64::new(end),
            waiters: Mutex::new(Vec::new()),
            stats: Default::default(),
        };
        let assumed = if state.leader == local_node {
            let record = PartitionRecord {
                topic_id,
                partition: index,
                replicas: state.replicas,
                isr: state.isr,
                adding: vec![],
                removing: vec![],
                leader: state.leader,
                leader_epoch: state.leader_epoch,
                partition_epoch: 0,
            };
            p.become_leader(&record, now_ms())
        } else {
            p.become_follower(state.leader, state.leader_epoch)
        };
        if let Err(e) = assumed {
            tracing::error!(topic = %p.topic, partition = index, "cannot take role: {e:?}");
        }
        p
    }

    pub fn replica_state(&self) -> ReplicaState {
        let r = self.replication.lock().unwrap();
        match &r.role {
            Role::Leader(ls) => ReplicaState {
                leader: self.local_node,
                leader_epoch: ls.leader_epoch,
                replicas: ls.replicas.clone(),
                isr: ls.isr.clone(),
            },
            Role::Follower {
                leader,
                leader_epoch,
                replicas,
                ..
            } => ReplicaState {
                leader: *leader,
                leader_epoch: *leader_epoch,
                replicas: replicas.clone(),
                isr: Vec::new(),
            },
        }
    }

    pub fn is_leader(&self) -> bool {
        matches!(self.replication.lock().unwrap().role, Role::Leader(_))
    }

    pub fn leader_epoch(&self) -> i32 {
        self.replication.lock().unwrap().leader_epoch()
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    /// The last stable offset: read_committed consumers read below it. The first offset of
    /// the oldest transaction not yet decided or whose marker is not yet replicated (never
    /// below the log start), capped at the high watermark.
    pub fn last_stable_offset(&self) -> i64 {
        self.last_stable.load(Ordering::Acquire)
    }

    /// Whether `producer_id` at `producer_epoch` has a transaction ongoing in this partition
    /// (its first transactional batch is written and its marker is not). KIP-890 part 1: a
    /// transactional produce to a partition without one is verified with the coordinator.
    pub fn has_ongoing_txn(&self, producer_id: i64, producer_epoch: i16) -> bool {
        let _log = self.log.lock().unwrap();
        self.producers
            .lock()
            .unwrap()
            .has_ongoing_txn(producer_id, producer_epoch)
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start.load(Ordering::Acquire)
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log_end.load(Ordering::Acquire)
    }

    /// The log directory holding this partition.
    pub fn log_dir(&self) -> PathBuf {
        self.log_dir.lock().unwrap().clone()
    }

    /// Bytes of this replica's log segments (Kafka's partition size).
    pub fn size_bytes(&self) -> u64 {
        self.log.lock().unwrap().size_bytes()
    }

    /// Bytes and number of this replica's log segments, read together.
    pub fn size_and_segments(&self) -> (u64, usize) {
        let log = self.log.lock().unwrap();
        (log.size_bytes(), log.num_segments())
    }

    /// Offsets below this are on disk (`recovery-point-offset-checkpoint`).
    pub fn recovery_point(&self) -> i64 {
        self.log.lock().unwrap().recovery_point()
    }

    /// Sets min.insync.replicas; a lower value may let the high watermark advance.
    /// Takes a topic's changed settings at once: the log's (the next append, roll and
    /// retention pass follow them) and min.insync.replicas.
    pub fn apply_topic_config(&self, eff: &crate::cluster::topic_config::EffectiveTopicConfig) {
        self.set_log_config(eff.log.clone());
        self.set_min_insync_replicas(eff.min_insync_replicas);
    }

    /// Gives the log new settings; the next append, roll and retention pass follow them.
    pub fn set_log_config(&self, config: crate::log::LogConfig) {
        let mut log = self.log.lock().unwrap();
        if *log.config() != config {
            log.set_config(config);
        }
    }

    pub fn set_min_insync_replicas(&self, n: i32) {
        let leo = self.log_end_offset();
        let mut r = self.replication.lock().unwrap();
        r.min_isr = n.max(1) as usize;
        let min_isr = r.min_isr;
        if let Role::Leader(ls) = &mut r.role {
            ls.set_min_insync_replicas(min_isr);
            ls.on_local_append(leo);
        }
        self.publish(&r);
        drop(r);
        self.wake_waiters();
    }

    /// Checks a client's view of the leader epoch (negative = no check), then that this
    /// replica leads, in Kafka's order (Fetch, ListOffsets, OffsetForLeaderEpoch).
    pub fn check_epoch(&self, current_leader_epoch: i32) -> Result<(), PartitionError> {
        let r = self.replication.lock().unwrap();
        if current_leader_epoch >= 0 {
            let epoch = r.leader_epoch();
            if current_leader_epoch < epoch {
                return Err(PartitionError::FencedLeaderEpoch);
            }
            if current_leader_epoch > epoch {
                return Err(PartitionError::UnknownLeaderEpoch);
            }
        }
        match r.role {
            Role::Leader(_) => Ok(()),
            Role::Follower { .. } => Err(PartitionError::NotLeader),
        }
    }

    /// A consumer's fetch from a follower (KIP-392): the client's view of the leader epoch
    /// is checked as for the leader, but any replica may serve it (up to its own high
    /// watermark).
    pub fn check_epoch_as_replica(&self, current_leader_epoch: i32) -> Result<(), PartitionError> {
        if current_leader_epoch < 0 {
            return Ok(());
        }
        let epoch = self.replication.lock().unwrap().leader_epoch();
        if current_leader_epoch < epoch {
            Err(PartitionError::FencedLeaderEpoch)
        } else if current_leader_epoch > epoch {
            Err(PartitionError::UnknownLeaderEpoch)
        } else {
            Ok(())
        }
    }

    /// OffsetForLeaderEpoch: the largest epoch at or below `epoch` in this log and the offset
    /// where it ends (the log end for the latest); (-1, -1) if none (Kafka's UNDEFINED).
    pub fn end_offset_for_epoch(
        &self,
        current_leader_epoch: i32,
        epoch: i32,
    ) -> Result<(i32, i64), PartitionError> {
        self.check_epoch(current_leader_epoch)?;
        Ok(self.log.lock().unwrap().end_offset_for_epoch(epoch))
    }

    /// After an append of `records` to `log`: the producer state records the batches
    /// (snapshotting itself first if the append rolled the log), the transactions their
    /// markers completed go to the LSO's bookkeeping, and the log offsets are published.
    /// Returns the log end offset.
    fn appended(
        &self,
        log: &mut Log,
        mut producers: std::sync::MutexGuard<'_, ProducerState>,
        info: &AppendInfo,
        records: &[u8],
    ) -> i64 {
        if let Some(at) = info.rolled_at
            && let Err(e) = producers.take_snapshot(at)
        {
            tracing::warn!(dir = %log.dir().display(), "producer snapshot at {at} failed: {e}");
        }
        let completed = producers.update(&info.batches, records);
        record_aborted(log, &completed);
        self.stable
            .lock()
            .unwrap()
            .on_append(producers.first_undecided_offset(), &completed);
        drop(producers);
        let leo = log.log_end_offset();
        self.log_end.store(leo, Ordering::Release);
        self.log_start
            .store(log.log_start_offset(), Ordering::Release);
        leo
    }

    /// Publishes the role's high watermark, and the last stable offset it gives, to
    /// lock-free readers.
    fn publish(&self, r: &Replication) {
        let hw = r.high_watermark();
        let lso = self
            .stable
            .lock()
            .unwrap()
            .last_stable_offset(hw, self.log_start_offset());
        self.high_watermark.store(hw, Ordering::Release);
        self.last_stable.store(lso, Ordering::Release);
    }

    /// The producer state was rebuilt (truncation): the LSO restarts from it.
    fn reset_stable(&self, producers: &ProducerState) {
        self.stable
            .lock()
            .unwrap()
            .reset(producers.first_undecided_offset());
    }

    fn wake_waiters(&self) {
        let waiters = std::mem::take(&mut *self.waiters.lock().unwrap());
        for w in waiters.iter().filter_map(Weak::upgrade) {
            w.notify_one();
        }
    }

    /// Registers a fetch or an acks=all produce to be woken at the next change.
    pub fn add_waiter(&self, w: &Arc<Notify>) {
        let mut waiters = self.waiters.lock().unwrap();
        // Fetches that timed out leave dead entries behind on an idle partition.
        if waiters.len() >= 64 {
            waiters.retain(|w| w.strong_count() > 0);
        }
        waiters.push(Arc::downgrade(w));
    }

    /// Whether a consumer's read from `offset` bounded by `bound` (the high watermark or the
    /// last stable offset) is empty without looking at the log: a poll at the bound, the
    /// common case of a consumer that has caught up, takes neither the log's lock nor a
    /// segment lookup (as Kafka's `LocalLog.read` answers it). An offset below the log start
    /// goes to the log, which refuses it.
    fn nothing_from(&self, offset: i64, bound: i64) -> bool {
        offset == bound && offset >= self.log_start_offset()
    }

    /// A consumer's read_uncommitted read: whole batches from `offset`, bounded by
    /// `max_bytes` and the high watermark.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<FetchSlice, PartitionError> {
        let hw = self.high_watermark();
        if self.nothing_from(offset, hw) {
            return Ok(FetchSlice::empty());
        }
        let log = self.log.lock().unwrap();
        let s = log
            .read(offset, max_bytes, hw, min_one_batch)
            .map_err(PartitionError::Read)?;
        Ok(FetchSlice::of(s))
    }

    /// A consumer's read_committed read: as [`Partition::read`] but bounded by the last
    /// stable offset, with the aborted transactions overlapping the batches read (from the
    /// transaction indexes; none when nothing was read), so that the consumer drops their
    /// records. Control batches are returned like others (consumers skip them).
    pub fn read_committed(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<FetchSlice, PartitionError> {
        let lso = self.last_stable_offset();
        if self.nothing_from(offset, lso) {
            return Ok(FetchSlice {
                aborted: Some(Vec::new()),
                ..FetchSlice::empty()
            });
        }
        let log = self.log.lock().unwrap();
        let s = log
            .read(offset, max_bytes, lso, min_one_batch)
            .map_err(PartitionError::Read)?;
        let aborted = if s.len == 0 {
            Vec::new()
        } else {
            log.collect_aborted_txns(offset, s.end_offset)
        };
        Ok(FetchSlice {
            aborted: Some(aborted),
            ..FetchSlice::of(s)
        })
    }

    /// Fetch v12+ `last_fetched_epoch` (KIP-595/Kafka's readRecords): when the fetcher's log
    /// ended in `last_fetched_epoch` (negative: not sent) at `fetch_offset`, the epoch and end
    /// offset of this log it diverges from, if it does. Diverging fetches read nothing.
    pub fn diverging_epoch(
        &self,
        last_fetched_epoch: i32,
        fetch_offset: i64,
    ) -> Result<Option<(i32, i64)>, PartitionError> {
        if last_fetched_epoch < 0 {
            return Ok(None);
        }
        let log = self.log.lock().unwrap();
        let (epoch, end) = log.end_offset_for_epoch(last_fetched_epoch);
        let out_of_range = || {
            PartitionError::Read(ReadError::OffsetOutOfRange {
                offset: fetch_offset,
                log_start_offset: log.log_start_offset(),
                log_end_offset: log.log_end_offset(),
            })
        };
        if epoch < 0 || end < 0 || fetch_offset < log.log_start_offset() {
            return Err(out_of_range());
        }
        Ok((epoch < last_fetched_epoch || end < fetch_offset).then_some((epoch, end)))
    }

    /// ListOffsets by timestamp: (timestamp, offset) of the first record at or after `ts`
    /// (the caller drops what is past what the client may fetch).
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<(i64, i64)>, PartitionError> {
        let log = self.log.lock().unwrap();
        log.offset_for_timestamp(ts)
            .map_err(PartitionError::Storage)
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
        if n > 0 {
            // The LSO never stays below the log start.
            self.publish(&self.replication.lock().unwrap());
        }
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

/// The producer state of `log` rebuilt from its snapshots and batches; the aborted
/// transactions the replay completed are put in the transaction index if missing (recovery).
fn load_producer_state(log: &mut Log) -> std::io::Result<ProducerState> {
    let (producers, completed) = ProducerState::load(log)?;
    record_aborted(log, &completed);
    Ok(producers)
}

/// Records the aborted ones of `completed` in the transaction index of `log`. A failed write
/// is logged: the log holds the marker, so the next recovery restores the entry.
fn record_aborted(log: &mut Log, completed: &[CompletedTxn]) {
    for t in completed.iter().filter(|t| t.aborted) {
        let entry = AbortedTxn {
            producer_id: t.producer_id,
            first_offset: t.first_offset,
            last_offset: t.last_offset,
            last_stable_offset: t.last_stable_offset,
        };
        if let Err(e) = log.append_aborted_txn(entry) {
            tracing::warn!(dir = %log.dir().display(), "transaction index entry for {entry:?}: {e}");
        }
    }
}
