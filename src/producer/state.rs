//! Per-partition producer state: for each producer id, its epoch, the sequence ranges and
//! offsets of its last [`MAX_CACHED_BATCHES`] batches, the epoch of the last transaction
//! coordinator that wrote a marker for it, and the first offset of its ongoing transaction.
//!
//! Rules (Kafka 4's ProducerStateManager / ProducerAppendInfo), for appends from clients:
//! * a client may not write control batches (INVALID_RECORD);
//! * a batch with a producer id must have a base sequence >= 0;
//! * a batch whose epoch and sequence range equal a cached batch is a duplicate: nothing of
//!   the request is appended and the cached offsets are returned;
//! * an epoch below the producer's current one is fenced (`InvalidEpoch`);
//! * a new epoch of a known producer must start at sequence 0;
//! * within an epoch, the base sequence must follow the last one (wrapping after i32::MAX),
//!   otherwise `OutOfOrderSequence`;
//! * an unknown producer (never seen, or its state expired after `producer.id.expiration.ms`)
//!   is accepted at any sequence;
//! * a non-transactional batch from a producer with an ongoing transaction is
//!   `InvalidTxnState`.
//!
//! Appends by a coordinator (transactional offset commits) are checked for the epoch and the
//! transaction state only: they carry no sequence numbers.
//!
//! Transactions: a transactional batch (attribute 0x10) opens the producer's transaction at
//! its base offset unless one is ongoing; the producer's next COMMIT or ABORT marker
//! ([`crate::log::control`]) ends it ([`CompletedTxn`]). A marker is refused when its producer
//! epoch is below the current one (with transaction version 2: not above it, unless it
//! repeats the marker that already ended the transaction) or its coordinator epoch is below
//! the last one seen; otherwise it sets both epochs (a new producer epoch forgets the cached
//! batches).
//!
//! Replaying the log (recovery, follower appends) applies batches without these checks.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};

use tracing::{info, warn};

use super::snapshot;
use super::txn::{CompletedTxn, TxnMarker};
use crate::log::control::{EndTxnMarker, parse_end_txn_marker};
use crate::log::{BatchHeader, Log};

pub use super::snapshot::{SNAPSHOT_SUFFIX, SNAPSHOTS_KEPT, snapshot_path};

/// Batches remembered per producer (the client's max.in.flight.requests.per.connection limit
/// for idempotence).
pub const MAX_CACHED_BATCHES: usize = 5;
const NO_EPOCH: i16 = -1;
const NO_SEQUENCE: i32 = -1;

/// One batch of a producer as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    /// The batch's max timestamp as stored.
    pub timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) epoch: i16,
    pub(crate) batches: VecDeque<BatchMeta>,
    pub(crate) last_timestamp: i64,
    /// Of the last marker written for this producer (-1: none).
    pub(crate) coordinator_epoch: i32,
    pub(crate) current_txn_first_offset: Option<i64>,
}

impl Entry {
    fn new(epoch: i16) -> Entry {
        Entry {
            epoch,
            batches: VecDeque::with_capacity(MAX_CACHED_BATCHES),
            last_timestamp: -1,
            coordinator_epoch: -1,
            current_txn_first_offset: None,
        }
    }

    fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    /// Takes `epoch`; a different one forgets the cached batches.
    fn set_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            self.epoch = epoch;
            self.batches.clear();
        }
    }
}

/// A producer's state as seen from outside (DescribeProducers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerSummary {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp: i64,
    /// -1 if no marker was written for it.
    pub coordinator_epoch: i32,
    /// First offset of its ongoing transaction, -1 if none.
    pub current_txn_start_offset: i64,
}

/// Who is appending: a client (every rule) or a coordinator writing its own records
/// (epoch and transaction state only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    Client,
    Coordinator,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProducerError {
    /// The batch's (or marker's) epoch is older than the producer's current epoch.
    #[error("{0}")]
    InvalidEpoch(String),
    /// A gap (or a rewind) in the producer's sequence numbers.
    #[error("{0}")]
    OutOfOrderSequence(String),
    /// A batch with a producer id but no sequence number.
    #[error("{0}")]
    InvalidSequence(String),
    /// A batch a client may not write (a control batch).
    #[error("{0}")]
    InvalidRecord(String),
    /// A non-transactional write from a producer in a transaction.
    #[error("{0}")]
    InvalidTxnState(String),
    /// A marker from a coordinator older than the last one seen for the producer.
    #[error("{0}")]
    CoordinatorFenced(String),
}

/// Sequence `seq + delta`, wrapping to 0 after i32::MAX as the clients do.
fn add_seq(seq: i32, delta: i32) -> i32 {
    if seq > i32::MAX - delta {
        delta - (i32::MAX - seq) - 1
    } else {
        seq + delta
    }
}

fn last_seq_of(h: &BatchHeader) -> i32 {
    add_seq(h.base_sequence, h.last_offset_delta.max(0))
}

fn in_sequence(last: i32, next: i32) -> bool {
    next as i64 == last as i64 + 1 || (next == 0 && last == i32::MAX)
}

/// A client batch's sequence against the producer's current epoch and last sequence.
fn check_sequence(
    pid: i64,
    h: &BatchHeader,
    cur_epoch: i16,
    cur_last: i32,
) -> Result<(), ProducerError> {
    if h.producer_epoch != cur_epoch {
        if h.base_sequence != 0 && cur_epoch != NO_EPOCH {
            return Err(ProducerError::OutOfOrderSequence(format!(
                "Invalid sequence number for new epoch of producer {pid}: {} (request epoch), {} (seq. number), {cur_epoch} (current producer epoch)",
                h.producer_epoch, h.base_sequence
            )));
        }
    } else if cur_epoch != NO_EPOCH && !in_sequence(cur_last, h.base_sequence) {
        return Err(ProducerError::OutOfOrderSequence(format!(
            "Out of order sequence number for producer {pid}: {} (incoming seq. number), {cur_last} (current end sequence number)",
            h.base_sequence
        )));
    }
    Ok(())
}

/// [`ProducerState::check`] on a raw record set. A record set that does not parse is left to
/// the log's validation (`Ok(None)`).
pub fn check_append(
    state: &ProducerState,
    records: &[u8],
    origin: AppendOrigin,
) -> Result<Option<BatchMeta>, ProducerError> {
    let mut headers = Vec::new();
    for h in crate::log::batch::batches(records) {
        match h {
            Ok(h) => headers.push(h),
            Err(_) => return Ok(None),
        }
    }
    state.check(&headers, origin)
}

/// A request's earlier batches' effect on a producer: (id, epoch, last sequence, in a
/// transaction).
type Pending = (i64, i16, i32, bool);

pub struct ProducerState {
    dir: PathBuf,
    producers: HashMap<i64, Entry>,
    /// Ongoing transactions: first offset -> producer id.
    ongoing: BTreeMap<i64, i64>,
}

impl ProducerState {
    /// Empty state for the partition directory `dir` (no files touched).
    pub fn new(dir: &Path) -> ProducerState {
        ProducerState {
            dir: dir.to_path_buf(),
            producers: HashMap::new(),
            ongoing: BTreeMap::new(),
        }
    }

    fn with_producers(dir: &Path, producers: HashMap<i64, Entry>) -> ProducerState {
        let ongoing = producers
            .iter()
            .filter_map(|(id, e)| e.current_txn_first_offset.map(|f| (f, *id)))
            .collect();
        ProducerState {
            dir: dir.to_path_buf(),
            producers,
            ongoing,
        }
    }

    /// Forgets every producer and deletes every snapshot in `dir`: the log there was emptied
    /// and restarts past everything it held (a follower behind its leader's log start).
    pub fn reset(dir: &Path) -> io::Result<ProducerState> {
        for off in snapshot::list_snapshots(dir)? {
            snapshot::remove_if_exists(&snapshot_path(dir, off))?;
        }
        Ok(ProducerState::new(dir))
    }

    /// Rebuilds the state of `log`: the newest readable snapshot at or below the log end
    /// offset (newer ones are stale after a truncation and are deleted), then every batch
    /// from there to the log end. Writes a snapshot at the log end if anything was replayed.
    /// Also returns the transactions the replayed markers completed (their aborted ones belong
    /// in the transaction index).
    pub fn load(log: &Log) -> io::Result<(ProducerState, Vec<CompletedTxn>)> {
        let dir = log.dir();
        let leo = log.log_end_offset();
        let mut st = ProducerState::new(dir);
        let mut from = log.log_start_offset();
        let mut found = None;
        for off in snapshot::list_snapshots(dir)?.into_iter().rev() {
            let path = snapshot_path(dir, off);
            if off > leo {
                info!(file = %path.display(), "removing snapshot beyond the log end");
                snapshot::remove_if_exists(&path)?;
                continue;
            }
            if found.is_some() {
                continue;
            }
            match snapshot::read(&path) {
                Ok(producers) => {
                    st = ProducerState::with_producers(dir, producers);
                    from = from.max(off);
                    found = Some(off);
                }
                Err(e) => {
                    warn!(file = %path.display(), "unreadable producer snapshot ({e}); removing it");
                    snapshot::remove_if_exists(&path)?;
                }
            }
        }
        let mut replayed = 0u64;
        let mut completed = Vec::new();
        let mut failed = None;
        if from < leo {
            log.scan_headers_from(from, |h| {
                if h.base_offset < from || failed.is_some() {
                    return;
                }
                let marker = match marker_of(dir, h, || log.read_batch(h)) {
                    Ok(m) => m,
                    Err(e) => {
                        failed = Some(e);
                        return;
                    }
                };
                completed.extend(st.apply(h, marker));
                replayed += 1;
            })?;
        }
        if let Some(e) = failed {
            return Err(e);
        }
        if found != Some(leo) && (replayed > 0 || !st.producers.is_empty()) {
            st.take_snapshot(leo)?;
        }
        if replayed > 0 {
            info!(dir = %dir.display(), snapshot = ?found, replayed, producers = st.producers.len(), "rebuilt producer state");
        }
        Ok((st, completed))
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Checks the batches of one append (headers as received). `Ok(Some(meta))`: the
    /// request repeats the cached batch `meta` and must not be appended. `Ok(None)`: append.
    pub fn check(
        &self,
        batches: &[BatchHeader],
        origin: AppendOrigin,
    ) -> Result<Option<BatchMeta>, ProducerError> {
        let client = origin == AppendOrigin::Client;
        let mut pending: Vec<Pending> = Vec::new();
        for h in batches
            .iter()
            .filter(|h| h.producer_id >= 0 || h.is_control())
        {
            let pid = h.producer_id;
            if h.is_control() {
                if client {
                    return Err(ProducerError::InvalidRecord(
                        "Clients are not allowed to write control records".into(),
                    ));
                }
                continue;
            }
            if client && h.base_sequence < 0 {
                return Err(ProducerError::InvalidSequence(format!(
                    "Invalid sequence number {} in record batch with producerId {pid}",
                    h.base_sequence
                )));
            }
            let last_seq = last_seq_of(h);
            let entry = self.producers.get(&pid);
            if client
                && let Some(e) = entry
                && e.epoch == h.producer_epoch
                && let Some(b) = e
                    .batches
                    .iter()
                    .find(|b| b.first_seq == h.base_sequence && b.last_seq == last_seq)
            {
                return Ok(Some(*b));
            }
            let (cur_epoch, cur_last, in_txn) = match pending.iter().rev().find(|p| p.0 == pid) {
                Some(&(_, e, s, t)) => (e, s, t),
                None => entry.map_or((NO_EPOCH, NO_SEQUENCE, false), |e| {
                    (e.epoch, e.last_seq(), e.current_txn_first_offset.is_some())
                }),
            };
            if h.producer_epoch < cur_epoch {
                return Err(ProducerError::InvalidEpoch(format!(
                    "Epoch of producer {pid} is {}, which is smaller than the last seen epoch {cur_epoch}",
                    h.producer_epoch
                )));
            }
            if client {
                check_sequence(pid, h, cur_epoch, cur_last)?;
            }
            if in_txn && !h.is_transactional() {
                return Err(ProducerError::InvalidTxnState(format!(
                    "Expected transactional write from producer {pid}"
                )));
            }
            pending.push((
                pid,
                h.producer_epoch,
                last_seq,
                in_txn || h.is_transactional(),
            ));
        }
        Ok(None)
    }

    /// Checks a marker the coordinator wants appended (Kafka's `appendEndTxnMarker` checks).
    pub fn check_marker(&self, m: &TxnMarker) -> Result<(), ProducerError> {
        let pid = m.producer_id;
        let entry = self.producers.get(&pid);
        let current = entry.map_or(NO_EPOCH, |e| e.epoch);
        let ongoing = entry.is_some_and(|e| e.current_txn_first_offset.is_some());
        let tv2 = m.transaction_version >= 2;
        let fenced = if tv2 {
            m.producer_epoch <= current
        } else {
            m.producer_epoch < current
        };
        // With transaction version 2 a marker at the current epoch after the transaction
        // ended repeats one already written (a coordinator retrying): it is written again.
        let repeat = tv2 && m.producer_epoch == current && !ongoing;
        if fenced && !repeat {
            return Err(ProducerError::InvalidEpoch(format!(
                "Epoch of producer {pid} is {}, which is {} the last seen epoch {current} (TV{})",
                m.producer_epoch,
                if tv2 { "<=" } else { "<" },
                m.transaction_version
            )));
        }
        if let Some(e) = entry
            && e.coordinator_epoch > m.coordinator_epoch
        {
            return Err(ProducerError::CoordinatorFenced(format!(
                "Invalid coordinator epoch for producerId {pid}: {} (zombie), {} (current)",
                m.coordinator_epoch, e.coordinator_epoch
            )));
        }
        Ok(())
    }

    /// Records appended batches: `batches` are the headers as written (final offsets and
    /// timestamps) with positions in `records`, the bytes appended (markers are read from
    /// them). Returns the transactions the markers among them completed.
    pub fn update(&mut self, batches: &[BatchHeader], records: &[u8]) -> Vec<CompletedTxn> {
        let mut completed = Vec::new();
        for h in batches {
            let bytes = || {
                let start = h.position as usize;
                records
                    .get(start..start + h.total_size())
                    .map(<[u8]>::to_vec)
                    .ok_or_else(|| io::Error::other("batch outside the appended bytes"))
            };
            let marker = marker_of(&self.dir, h, bytes).unwrap_or_else(|e| {
                warn!(dir = %self.dir.display(), offset = h.base_offset, "control batch: {e}");
                None
            });
            completed.extend(self.apply(h, marker));
        }
        completed
    }

    fn apply(&mut self, h: &BatchHeader, marker: Option<EndTxnMarker>) -> Option<CompletedTxn> {
        let pid = h.producer_id;
        if pid < 0 {
            return None;
        }
        if h.is_control() {
            let m = marker?;
            let e = self
                .producers
                .entry(pid)
                .or_insert_with(|| Entry::new(h.producer_epoch));
            e.set_epoch(h.producer_epoch);
            e.coordinator_epoch = m.coordinator_epoch;
            // The marker record's timestamp (its batch's only record).
            e.last_timestamp = if h.is_log_append_time() {
                h.max_timestamp
            } else {
                h.base_timestamp
            };
            let first = e.current_txn_first_offset.take()?;
            // The LSO once this one is done: the oldest other undecided transaction.
            let last_stable_offset = self
                .ongoing
                .iter()
                .find(|&(_, &p)| p != pid)
                .map_or(h.base_offset + 1, |(&f, _)| f);
            self.ongoing.remove(&first);
            return Some(CompletedTxn {
                producer_id: pid,
                first_offset: first,
                last_offset: h.base_offset,
                last_stable_offset,
                aborted: !m.commit,
            });
        }
        let e = self
            .producers
            .entry(pid)
            .or_insert_with(|| Entry::new(h.producer_epoch));
        e.set_epoch(h.producer_epoch);
        if e.batches.len() == MAX_CACHED_BATCHES {
            e.batches.pop_front();
        }
        e.batches.push_back(BatchMeta {
            first_seq: h.base_sequence,
            last_seq: last_seq_of(h),
            first_offset: h.base_offset,
            last_offset: h.last_offset(),
            timestamp: h.max_timestamp,
        });
        e.last_timestamp = h.max_timestamp;
        if h.is_transactional() && e.current_txn_first_offset.is_none() {
            e.current_txn_first_offset = Some(h.base_offset);
            self.ongoing.insert(h.base_offset, pid);
        }
        None
    }

    /// Whether `producer_id` at `producer_epoch` has a transaction ongoing here.
    pub fn has_ongoing_txn(&self, producer_id: i64, producer_epoch: i16) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.current_txn_first_offset.is_some() && e.epoch == producer_epoch)
    }

    /// First offset of the oldest ongoing transaction.
    pub fn first_undecided_offset(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
    }

    /// Forgets producers without an ongoing transaction whose last batch timestamp is
    /// `expiration_ms` or more before `now_ms` (`producer.id.expiration.ms`). Returns how
    /// many went.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| {
            e.current_txn_first_offset.is_some()
                || now_ms.saturating_sub(e.last_timestamp) < expiration_ms
        });
        before - self.producers.len()
    }

    /// Each producer's last record in the log (Kafka's `lastRecordsOfActiveProducers`): the
    /// last offset of its last data batch (None if only markers followed it) and its epoch.
    /// The log cleaner keeps those batches so this state can be rebuilt from the log.
    pub fn last_records(&self) -> HashMap<i64, crate::log::cleaner::LastRecord> {
        self.producers
            .iter()
            .map(|(id, e)| {
                (
                    *id,
                    crate::log::cleaner::LastRecord {
                        last_data_offset: e.batches.back().map(|b| b.last_offset),
                        producer_epoch: e.epoch,
                    },
                )
            })
            .collect()
    }

    /// Active producers, by id.
    pub fn summaries(&self) -> Vec<ProducerSummary> {
        let mut v: Vec<ProducerSummary> = self
            .producers
            .iter()
            .map(|(id, e)| ProducerSummary {
                producer_id: *id,
                epoch: e.epoch,
                last_sequence: e.last_seq(),
                last_timestamp: e.last_timestamp,
                coordinator_epoch: e.coordinator_epoch,
                current_txn_start_offset: e.current_txn_first_offset.unwrap_or(-1),
            })
            .collect();
        v.sort_by_key(|s| s.producer_id);
        v
    }

    /// Writes `<offset>.snapshot` (the state must be that after every batch below `offset`)
    /// beside and renamed into place, then keeps only the newest [`SNAPSHOTS_KEPT`].
    pub fn take_snapshot(&self, offset: i64) -> io::Result<()> {
        snapshot::write(&self.dir, offset, &self.producers)
    }
}

/// The marker a batch carries, if it is a producer's control batch (`bytes` reads it). A
/// control batch that does not parse is logged and taken for no marker.
fn marker_of(
    dir: &Path,
    h: &BatchHeader,
    bytes: impl FnOnce() -> io::Result<Vec<u8>>,
) -> io::Result<Option<EndTxnMarker>> {
    if !h.is_control() || h.producer_id < 0 {
        return Ok(None);
    }
    Ok(parse_end_txn_marker(&bytes()?).unwrap_or_else(|e| {
        warn!(dir = %dir.display(), offset = h.base_offset, "unreadable control batch: {e}");
        None
    }))
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
