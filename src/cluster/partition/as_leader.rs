//! The partition as leader: taking the role, producer appends (with min.insync.replicas for
//! acks=all), transaction markers, acks=all completion, fetches from followers (their log end
//! offsets feed the leader state, which decides the high watermark and ISR changes), and the
//! controller's answers to ISR changes.

use std::time::Duration;

use super::*;
use crate::cluster::replication::AckStatus;
use crate::log::control::{EndTxnMarker, end_txn_batch};
use crate::producer::state::check_append;
use crate::producer::{AppendOrigin, TxnMarker};

/// What a leader append must pass besides the role: the producer rules for records of that
/// origin, or the marker rules.
#[derive(Clone, Copy)]
enum Check<'a> {
    Records(AppendOrigin),
    Marker(&'a TxnMarker),
}

/// How an acks=all wait ([`Partition::wait_for_ack`]) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckOutcome {
    /// The high watermark passed the append.
    Acked,
    /// The ISR shrank below min.insync.replicas (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    NotEnoughReplicasAfterAppend,
    /// This replica no longer leads in the append's epoch (NOT_LEADER_OR_FOLLOWER).
    NotLeader,
    /// The timeout passed first (REQUEST_TIMED_OUT); the append stays written.
    TimedOut,
}

/// A leader append: what the log did, and the leader epoch it was written in (an acks=all
/// produce is answered only while this replica still leads in that epoch).
#[derive(Debug)]
pub struct LeaderAppend {
    pub info: AppendInfo,
    pub leader_epoch: i32,
}

/// A follower's fetch as the leader served it.
pub struct ReplicaRead {
    /// Whole batches from the fetch offset, up to the leader's log end offset.
    pub slice: FetchSlice,
    /// Set when the follower's log diverges from this one (Fetch v12+ `last_fetched_epoch`):
    /// the epoch and end offset to truncate to; nothing is read then.
    pub diverging: Option<(i32, i64)>,
    /// An ISR expansion to ask the controller for (the follower caught up).
    pub isr_expansion: Option<Vec<i32>>,
}

impl Partition {
    /// Makes this replica the leader of `record` (whose leader must be this node). A new
    /// leader epoch starts at the log end, and the followers' progress starts afresh; the same
    /// leader epoch at a newer partition epoch updates the assignment and ISR. Returns whether
    /// the leader epoch is new; an older epoch than the current one is ignored.
    pub fn become_leader(
        &self,
        record: &PartitionRecord,
        now: i64,
    ) -> Result<bool, PartitionError> {
        if record.leader != self.local_node {
            return Err(PartitionError::NotLeader);
        }
        let mut log = self.log.lock().unwrap();
        let leo = log.log_end_offset();
        let mut r = self.replication.lock().unwrap();
        if record.leader_epoch < r.leader_epoch() {
            return Ok(false);
        }
        let min_isr = r.min_isr;
        let new_epoch = match &mut r.role {
            Role::Leader(ls) if ls.leader_epoch == record.leader_epoch => {
                if record.partition_epoch > ls.partition_epoch {
                    ls.on_committed(record, leo);
                }
                false
            }
            _ => {
                log.assign_epoch_start(record.leader_epoch);
                let mut ls =
                    LeaderState::new(self.local_node, record, leo, r.high_watermark(), now);
                ls.set_min_insync_replicas(min_isr);
                ls.on_local_append(leo);
                r.role = Role::Leader(ls);
                true
            }
        };
        self.publish(&r);
        drop(r);
        drop(log);
        self.wake_waiters();
        Ok(new_epoch)
    }

    /// Appends producer batches as the leader, for acks=0 and acks=1 (and internal writers).
    pub fn append_as_leader(
        &self,
        records: &mut [u8],
        append_time: Option<i64>,
        max_batch_bytes: usize,
    ) -> Result<AppendInfo, PartitionError> {
        self.append_with_acks(records, append_time, max_batch_bytes, 1)
            .map(|a| a.info)
    }

    /// Appends a client's batches as the leader. `append_time` is set for LogAppendTime
    /// topics. With `required_acks` -1 nothing is written while the ISR is smaller than the
    /// effective min.insync.replicas (NOT_ENOUGH_REPLICAS); the caller then waits with
    /// [`Partition::ack_status`] or [`Partition::wait_for_ack`].
    pub fn append_with_acks(
        &self,
        records: &mut [u8],
        append_time: Option<i64>,
        max_batch_bytes: usize,
        required_acks: i16,
    ) -> Result<LeaderAppend, PartitionError> {
        let check = Check::Records(AppendOrigin::Client);
        self.append_leader(
            records,
            append_time,
            max_batch_bytes,
            required_acks,
            None,
            check,
        )
    }

    /// Appends a coordinator's own batches as the leader (the group coordinator's
    /// transactional offset commits): producer epoch and transaction state are checked, not
    /// sequences, and a repeated batch is appended again. Otherwise as
    /// [`Partition::append_with_acks`].
    pub fn append_as_coordinator(
        &self,
        records: &mut [u8],
        max_batch_bytes: usize,
        required_acks: i16,
    ) -> Result<LeaderAppend, PartitionError> {
        let check = Check::Records(AppendOrigin::Coordinator);
        self.append_leader(records, None, max_batch_bytes, required_acks, None, check)
    }

    /// Appends a COMMIT (`commit`) or ABORT marker for `producer_id` as the leader and returns
    /// its offset, with the marker rules of transaction versions 0 and 1 (a marker's producer
    /// epoch may equal the producer's current one; see [`Partition::append_marker_with_acks`]
    /// for version 2). `leader_epoch`: the leader epoch the caller expects (None: no check;
    /// older: FENCED_LEADER_EPOCH, newer: UNKNOWN_LEADER_EPOCH); a replica that does not lead
    /// answers NOT_LEADER_OR_FOLLOWER. The marker ends the producer's transaction here (an
    /// ABORT goes into the transaction index) and, like any batch, is replicated to the
    /// followers; it is acknowledged (acks=1) once in the local log. Refused with
    /// INVALID_PRODUCER_EPOCH for an older producer epoch and TRANSACTION_COORDINATOR_FENCED
    /// for an older coordinator epoch, nothing written.
    pub fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        commit: bool,
        leader_epoch: Option<i32>,
    ) -> Result<i64, PartitionError> {
        let marker = TxnMarker {
            producer_id,
            producer_epoch,
            coordinator_epoch,
            commit,
            transaction_version: 0,
        };
        self.append_marker_with_acks(&marker, leader_epoch, 1)
            .map(|a| a.info.first_offset)
    }

    /// [`Partition::append_marker`] for `marker` (which names its transaction version), with
    /// `required_acks` as a produce's: with -1 it is refused (NOT_ENOUGH_REPLICAS, nothing
    /// written) while the ISR is below min.insync.replicas, and once written the caller waits
    /// for the followers with [`Partition::wait_for_ack`]`(info.last_offset + 1,
    /// leader_epoch, timeout)`, as Kafka's WriteTxnMarkers does (acks=all).
    pub fn append_marker_with_acks(
        &self,
        marker: &TxnMarker,
        leader_epoch: Option<i32>,
        required_acks: i16,
    ) -> Result<LeaderAppend, PartitionError> {
        let end = EndTxnMarker {
            commit: marker.commit,
            coordinator_epoch: marker.coordinator_epoch,
        };
        let mut batch = end_txn_batch(marker.producer_id, marker.producer_epoch, end, now_ms());
        let check = Check::Marker(marker);
        self.append_leader(
            &mut batch,
            None,
            usize::MAX,
            required_acks,
            leader_epoch,
            check,
        )
    }

    fn append_leader(
        &self,
        records: &mut [u8],
        append_time: Option<i64>,
        max_batch_bytes: usize,
        required_acks: i16,
        expected_epoch: Option<i32>,
        check: Check<'_>,
    ) -> Result<LeaderAppend, PartitionError> {
        let mut log = self.log.lock().unwrap();
        let leader_epoch = {
            let r = self.replication.lock().unwrap();
            if let Some(e) = expected_epoch {
                let current = r.leader_epoch();
                if e < current {
                    return Err(PartitionError::FencedLeaderEpoch);
                }
                if e > current {
                    return Err(PartitionError::UnknownLeaderEpoch);
                }
            }
            let Role::Leader(ls) = &r.role else {
                return Err(PartitionError::NotLeader);
            };
            if required_acks == -1 && !ls.enough_replicas() {
                return Err(PartitionError::NotEnoughReplicas {
                    isr: ls.isr.clone(),
                    min_isr: ls.effective_min_isr(),
                });
            }
            ls.leader_epoch
        };
        let producers = self.producers.lock().unwrap();
        let dup = match check {
            Check::Records(origin) => check_append(&producers, records, origin),
            Check::Marker(m) => producers.check_marker(m).map(|()| None),
        };
        if let Some(dup) = dup.map_err(PartitionError::Producer)? {
            // A retry of a batch already written: its original offsets, nothing appended.
            let info = AppendInfo {
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
            };
            return Ok(LeaderAppend { info, leader_epoch });
        }
        let info = log
            .append(records, leader_epoch, append_time, max_batch_bytes)
            .map_err(PartitionError::Append)?;
        let leo = self.appended(&mut log, producers, &info, records);
        {
            let mut r = self.replication.lock().unwrap();
            if let Role::Leader(ls) = &mut r.role {
                ls.on_local_append(leo);
            }
            self.publish(&r);
        }
        drop(log);
        // Followers wait for the log end, consumers for the high watermark.
        self.wake_waiters();
        Ok(LeaderAppend { info, leader_epoch })
    }

    /// Whether an acks=all produce appended in `leader_epoch` and ending before `required`
    /// may be answered. NOT_LEADER_OR_FOLLOWER once this replica no longer leads in that epoch
    /// (its log may since have been truncated).
    pub fn ack_status(
        &self,
        required: i64,
        leader_epoch: i32,
    ) -> Result<AckStatus, PartitionError> {
        match &self.replication.lock().unwrap().role {
            Role::Leader(ls) if ls.leader_epoch == leader_epoch => Ok(ls.ack_status(required)),
            _ => Err(PartitionError::NotLeader),
        }
    }

    /// Waits until an acks=all append that ends before `required`, written in
    /// `leader_epoch`, may be answered ([`Partition::ack_status`]), for at most `timeout`.
    pub async fn wait_for_ack(
        &self,
        required: i64,
        leader_epoch: i32,
        timeout: Duration,
    ) -> AckOutcome {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut timed_out = false;
        loop {
            let waiter = Arc::new(Notify::new());
            self.add_waiter(&waiter);
            match self.ack_status(required, leader_epoch) {
                Ok(AckStatus::Done) => return AckOutcome::Acked,
                Ok(AckStatus::NotEnoughReplicasAfterAppend) => {
                    return AckOutcome::NotEnoughReplicasAfterAppend;
                }
                Err(_) => return AckOutcome::NotLeader,
                Ok(AckStatus::Waiting) if timed_out => return AckOutcome::TimedOut,
                Ok(AckStatus::Waiting) => {}
            }
            timed_out = tokio::time::timeout_at(deadline, waiter.notified())
                .await
                .is_err();
        }
    }

    /// A follower fetched from `fetch_offset`: its log ends there. Returns an ISR expansion to
    /// propose, if it caught up. NOT_LEADER_OR_FOLLOWER if this replica does not lead or
    /// `replica` is not one of its followers.
    pub fn on_follower_fetch(
        &self,
        replica: i32,
        fetch_offset: i64,
        broker_epoch: i64,
        now: i64,
    ) -> Result<Option<Vec<i32>>, PartitionError> {
        self.follower_fetched(
            replica,
            (fetch_offset, -1, broker_epoch),
            self.log_end_offset(),
            now,
        )
    }

    /// `position`: the follower's fetch offset, log start offset (negative: not sent) and
    /// broker epoch (-1: not registered).
    fn follower_fetched(
        &self,
        replica: i32,
        (fetch_offset, log_start_offset, broker_epoch): (i64, i64, i64),
        leader_leo: i64,
        now: i64,
    ) -> Result<Option<Vec<i32>>, PartitionError> {
        let mut r = self.replication.lock().unwrap();
        let Role::Leader(ls) = &mut r.role else {
            return Err(PartitionError::NotLeader);
        };
        if !ls.is_follower(replica) {
            return Err(PartitionError::NotLeader);
        }
        let (advanced, expand) =
            ls.on_follower_fetch(replica, fetch_offset, broker_epoch, leader_leo, now);
        // A moved follower log start may complete a DeleteRecords waiting on the low watermark.
        let started = ls.on_follower_log_start(replica, log_start_offset);
        self.publish(&r);
        drop(r);
        if advanced || started {
            self.wake_waiters();
        }
        Ok(expand)
    }

    /// Serves a fetch from follower `replica`, as Kafka's `Partition.fetchRecords` does: the
    /// leader epoch check, then `replica` must be an assigned follower (else
    /// UNKNOWN_LEADER_EPOCH when the fetch names an epoch, NOT_LEADER_OR_FOLLOWER when not),
    /// the divergence check, then a read up to the log end offset (not the high watermark);
    /// the fetch offset then becomes the follower's log end offset in the leader state.
    pub fn read_for_follower(
        &self,
        replica: i32,
        fetch: &FollowerFetch,
        now: i64,
    ) -> Result<ReplicaRead, PartitionError> {
        self.check_epoch(fetch.current_leader_epoch)?;
        let assigned = match &self.replication.lock().unwrap().role {
            Role::Leader(ls) => ls.is_follower(replica),
            Role::Follower { .. } => false,
        };
        if !assigned {
            return Err(if fetch.current_leader_epoch >= 0 {
                PartitionError::UnknownLeaderEpoch
            } else {
                PartitionError::NotLeader
            });
        }
        if let Some(d) = self.diverging_epoch(fetch.last_fetched_epoch, fetch.offset)? {
            return Ok(ReplicaRead {
                slice: FetchSlice::empty(),
                diverging: Some(d),
                isr_expansion: None,
            });
        }
        let (slice, leader_leo) = {
            let log = self.log.lock().unwrap();
            let leo = log.log_end_offset();
            let s = log
                .read(fetch.offset, fetch.max_bytes, leo, fetch.min_one_batch)
                .map_err(PartitionError::Read)?;
            (s, leo)
        };
        let isr_expansion = self.follower_fetched(
            replica,
            (fetch.offset, fetch.log_start_offset, fetch.broker_epoch),
            leader_leo,
            now,
        )?;
        Ok(ReplicaRead {
            slice: FetchSlice::of(slice),
            diverging: None,
            isr_expansion,
        })
    }

    /// Time passed: an ISR shrink to propose if followers fell behind for `lag_max_ms`
    /// (`replica.lag.time.max.ms`).
    pub fn check_lagging(&self, now: i64, lag_max_ms: i64) -> Option<Vec<i32>> {
        match &mut self.replication.lock().unwrap().role {
            Role::Leader(ls) => ls.check_lagging(now, lag_max_ms),
            Role::Follower { .. } => None,
        }
    }

    /// The ISR change in flight (sent to the controller, not yet answered).
    pub fn pending_isr(&self) -> Option<Vec<i32>> {
        match &self.replication.lock().unwrap().role {
            Role::Leader(ls) => ls.pending_isr().map(<[i32]>::to_vec),
            Role::Follower { .. } => None,
        }
    }

    /// The controller committed a change to this partition (an ISR change, ours or its own)
    /// at our leader epoch. Returns false if this replica does not lead at that epoch or
    /// already has that partition epoch. Wakes acks=all produces: an ISR below
    /// min.insync.replicas answers them NOT_ENOUGH_REPLICAS_AFTER_APPEND.
    pub fn on_committed(&self, record: &PartitionRecord) -> bool {
        let leo = self.log_end_offset();
        let mut r = self.replication.lock().unwrap();
        let applied = match &mut r.role {
            Role::Leader(ls)
                if ls.leader_epoch == record.leader_epoch
                    && record.leader == self.local_node
                    && record.partition_epoch > ls.partition_epoch =>
            {
                let before = ls.isr.len();
                ls.on_committed(record, leo);
                crate::metrics::isr_changed(before, ls.isr.len());
                true
            }
            _ => false,
        };
        self.publish(&r);
        drop(r);
        if applied {
            self.wake_waiters();
        }
        applied
    }

    /// The ISR change in flight as the controller must see it, while this replica leads:
    /// the leader and partition epochs, the new ISR and the broker epoch of each member (this
    /// broker's is `local_epoch`).
    pub fn isr_proposal(&self, local_epoch: i64) -> Option<IsrProposal> {
        match &self.replication.lock().unwrap().role {
            Role::Leader(ls) => ls.pending_isr().map(|isr| IsrProposal {
                leader_epoch: ls.leader_epoch,
                partition_epoch: ls.partition_epoch,
                current_isr: ls.isr.clone(),
                new_isr: isr.to_vec(),
                new_isr_epochs: ls.member_epochs(isr, local_epoch),
            }),
            Role::Follower { .. } => None,
        }
    }

    /// The controller refused the ISR change in flight.
    pub fn on_refused(&self) {
        if let Role::Leader(ls) = &mut self.replication.lock().unwrap().role {
            ls.on_refused();
        }
    }
}

/// An ISR change a leader asks the controller for (Kafka's AlterPartition partition data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrProposal {
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// The ISR the change starts from.
    pub current_isr: Vec<i32>,
    pub new_isr: Vec<i32>,
    /// The broker epoch of each member of `new_isr`, in order (-1: not known).
    pub new_isr_epochs: Vec<i64>,
}

/// What a follower's fetch asks of one partition.
#[derive(Debug, Clone, Copy)]
pub struct FollowerFetch {
    pub offset: i64,
    pub max_bytes: usize,
    pub min_one_batch: bool,
    /// Negative: not checked.
    pub current_leader_epoch: i32,
    /// Negative: not sent.
    pub last_fetched_epoch: i32,
    /// The follower's log start offset (negative: not sent).
    pub log_start_offset: i64,
    /// The follower's broker epoch (Fetch v15+ ReplicaState.ReplicaEpoch; -1: not sent, or
    /// the follower has no accepted registration).
    pub broker_epoch: i64,
}
