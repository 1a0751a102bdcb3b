//! The cleaner's decisions, without I/O: which log to clean, how far, how its segments are
//! grouped, and what each batch and record keeps (Kafka's `LogCleanerManager` and the
//! `RecordFilter` of `Cleaner.cleanInto`).

use std::collections::{HashMap, HashSet, VecDeque};

use crate::log::txn_index::AbortedTxn;

/// A topic's compaction settings (its own configs over the broker's `log.cleaner.*`).
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionConfig {
    /// `cleanup.policy` holds `compact`.
    pub compact: bool,
    /// `cleanup.policy` holds `delete` (time and size retention apply too).
    pub delete: bool,
    pub min_cleanable_ratio: f64,
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
    pub delete_retention_ms: i64,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            compact: false,
            delete: true,
            min_cleanable_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 86_400_000,
        }
    }
}

/// What the cleaner knows of one non-active segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentInfo {
    pub base_offset: i64,
    /// Offset after its last batch.
    pub next_offset: i64,
    pub size: u64,
    /// Entries of its offset and time indexes (for grouping: a merged segment's indexes
    /// must fit `segment.index.bytes`).
    pub index_entries: u64,
    pub time_index_entries: u64,
    /// Largest timestamp (min.compaction.lag.ms) and its first batch's timestamp
    /// (max.compaction.lag.ms), -1 if none.
    pub largest_timestamp: i64,
    pub first_batch_timestamp: i64,
}

/// A log the cleaner may pick: its non-active segments, where its dirty section starts
/// (the `cleaner-offset-checkpoint`), and the first offset it may not clean (the active
/// segment's base offset, capped at the last stable offset and the high watermark).
#[derive(Debug, Clone)]
pub struct Candidate {
    pub segments: Vec<SegmentInfo>,
    pub log_start_offset: i64,
    pub checkpoint: Option<i64>,
    pub first_uncleanable: i64,
    pub config: CompactionConfig,
    /// The earliest delete horizon the last cleaning left pending on tombstones or markers;
    /// once it passes, a pass removes them even below min.cleanable.dirty.ratio.
    pub pending_delete_horizon: Option<i64>,
}

/// Where a candidate's cleanable section lies and how dirty it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cleanable {
    pub first_dirty_offset: i64,
    /// Exclusive bound of what may be cleaned.
    pub end_offset: i64,
    pub clean_bytes: u64,
    pub cleanable_bytes: u64,
    /// max.compaction.lag.ms has passed for its first dirty segment.
    pub needs_compaction_now: bool,
}

impl Cleanable {
    pub fn ratio(&self) -> f64 {
        let total = self.clean_bytes + self.cleanable_bytes;
        if total == 0 {
            0.0
        } else {
            self.cleanable_bytes as f64 / total as f64
        }
    }
}

/// Kafka's `cleanableOffsets`: the first dirty offset is the checkpoint (the log start if
/// the checkpoint is missing or outside the log); the end is the first uncleanable offset,
/// lowered to the first dirty segment still younger than min.compaction.lag.ms.
pub fn cleanable(c: &Candidate, now_ms: i64) -> Cleanable {
    let last_end = c
        .segments
        .last()
        .map_or(c.log_start_offset, |s| s.next_offset);
    let first_dirty = match c.checkpoint {
        Some(cp) if cp >= c.log_start_offset && cp <= last_end.max(c.first_uncleanable) => cp,
        _ => c.log_start_offset,
    };
    let mut end = c.first_uncleanable.max(first_dirty);
    let lag = c.config.min_compaction_lag_ms;
    if lag > 0
        && let Some(young) = c.segments.iter().find(|s| {
            s.next_offset > first_dirty && s.largest_timestamp > now_ms.saturating_sub(lag)
        })
    {
        end = end.min(young.base_offset.max(first_dirty));
    }
    let mut clean_bytes = 0;
    let mut cleanable_bytes = 0;
    let mut needs_now = false;
    for s in &c.segments {
        if s.next_offset <= first_dirty {
            clean_bytes += s.size;
        } else if s.base_offset < end {
            if cleanable_bytes == 0
                && s.first_batch_timestamp >= 0
                && now_ms.saturating_sub(s.first_batch_timestamp) > c.config.max_compaction_lag_ms
            {
                needs_now = true;
            }
            cleanable_bytes += s.size;
        }
    }
    Cleanable {
        first_dirty_offset: first_dirty,
        end_offset: end,
        clean_bytes,
        cleanable_bytes,
        needs_compaction_now: needs_now,
    }
}

/// Kafka's `grabFilthiestCompactedLog`: among the compacted candidates whose cleanable
/// section is past min.cleanable.dirty.ratio (or due by max.compaction.lag.ms), the one with
/// the highest ratio; failing that, one whose pending delete horizon has passed (its
/// tombstones and markers can go). Returns the index and its cleanable section.
pub fn choose(candidates: &[Candidate], now_ms: i64) -> Option<(usize, Cleanable)> {
    let mut best: Option<(usize, Cleanable)> = None;
    for (i, c) in candidates.iter().enumerate() {
        if !c.config.compact {
            continue;
        }
        let cl = cleanable(c, now_ms);
        let due = cl.cleanable_bytes > 0
            && (cl.needs_compaction_now || cl.ratio() > c.config.min_cleanable_ratio);
        if due && best.as_ref().is_none_or(|(_, b)| cl.ratio() > b.ratio()) {
            best = Some((i, cl));
        }
    }
    if best.is_some() {
        return best;
    }
    candidates.iter().enumerate().find_map(|(i, c)| {
        let horizon = c.pending_delete_horizon?;
        (c.config.compact && horizon <= now_ms && !c.segments.is_empty())
            .then(|| (i, cleanable(c, now_ms)))
    })
}

/// Kafka's `groupSegmentsBySize`: consecutive segments merged into one while the sum of
/// their sizes stays within `max_size` (segment.bytes), their index entries within
/// `max_index_entries` and their offsets within an i32 of the first base offset. Each group
/// is given as a range of indexes into `segments`.
pub fn group_by_size(
    segments: &[SegmentInfo],
    max_size: u64,
    max_index_entries: u64,
) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let mut i = 0;
    while i < segments.len() {
        let first = segments[i];
        let (mut size, mut idx, mut tidx) =
            (first.size, first.index_entries, first.time_index_entries);
        let mut j = i + 1;
        while j < segments.len() {
            let s = segments[j];
            if size + s.size > max_size
                || idx + s.index_entries > max_index_entries
                || tidx + s.time_index_entries > max_index_entries
                || s.next_offset - 1 - first.base_offset > i32::MAX as i64
            {
                break;
            }
            size += s.size;
            idx += s.index_entries;
            tidx += s.time_index_entries;
            j += 1;
        }
        groups.push(i..j);
        i = j;
    }
    groups
}

/// What happens to one batch as a whole (Kafka's `BatchRetention`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchRetention {
    /// Dropped with every record.
    Delete,
    /// Kept, as an empty batch if no record stays.
    RetainEmpty,
    /// Dropped only if no record stays.
    DeleteEmpty,
}

/// A batch as the filter sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchFacts {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub last_offset: i64,
    pub next_offset: i64,
    pub is_control: bool,
    pub is_transactional: bool,
    /// The batch's delete horizon, if a cleaning set one.
    pub delete_horizon_ms: Option<i64>,
}

/// A producer's last record in the log (Kafka's `LastRecord`): its last data batch's last
/// offset (None if it wrote only markers since) and epoch. Its batch is kept, even empty, so
/// the producer state rebuilt from the log still knows the producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastRecord {
    pub last_data_offset: Option<i64>,
    pub producer_epoch: i16,
}

/// The control record a marker batch holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Commit,
    Abort,
    /// Another control type, or an empty control batch (already cleaned).
    Other {
        empty: bool,
    },
}

#[derive(Debug, Clone, Copy)]
struct OngoingAbort {
    txn: AbortedTxn,
    saw_batch: bool,
}

/// Kafka's `CleanedTransactionMetadata`: the aborted transactions of the range being read
/// (from its transaction indexes), and which transactions are open at the current batch.
/// Batches of aborted transactions are discarded; a marker is discarded once nothing of its
/// transaction remains in the log.
#[derive(Debug, Default)]
pub struct TxnTracker {
    aborted: VecDeque<AbortedTxn>,
    ongoing_aborted: HashMap<i64, OngoingAbort>,
    ongoing_committed: HashSet<i64>,
    /// Aborted transactions whose ABORT marker stays (the cleaned segment's `.txnindex`).
    pub kept_aborted: Vec<AbortedTxn>,
}

impl TxnTracker {
    pub fn new(mut aborted: Vec<AbortedTxn>) -> TxnTracker {
        aborted.sort_by_key(|a| a.first_offset);
        TxnTracker {
            aborted: aborted.into(),
            ..Default::default()
        }
    }

    fn consume_up_to(&mut self, offset: i64) {
        while let Some(a) = self.aborted.front().copied() {
            if a.first_offset > offset {
                break;
            }
            self.aborted.pop_front();
            self.ongoing_aborted.insert(
                a.producer_id,
                OngoingAbort {
                    txn: a,
                    saw_batch: false,
                },
            );
        }
    }

    /// A data batch: whether it belongs to an aborted transaction (and so goes).
    pub fn on_batch(&mut self, b: &BatchFacts) -> bool {
        self.consume_up_to(b.last_offset);
        if !b.is_transactional {
            return false;
        }
        match self.ongoing_aborted.get_mut(&b.producer_id) {
            Some(o) => {
                o.saw_batch = true;
                true
            }
            None => {
                self.ongoing_committed.insert(b.producer_id);
                false
            }
        }
    }

    /// A control batch: whether its marker may go (its transaction has nothing left).
    pub fn on_control(&mut self, b: &BatchFacts, control: Control) -> bool {
        self.consume_up_to(b.last_offset);
        match control {
            Control::Abort => match self.ongoing_aborted.remove(&b.producer_id) {
                Some(o) if o.saw_batch => {
                    self.kept_aborted.push(o.txn);
                    false
                }
                _ => true,
            },
            Control::Commit => !self.ongoing_committed.remove(&b.producer_id),
            Control::Other { empty } => empty,
        }
    }
}

/// Kafka's `checkBatchRetention`: the batch's fate, and whether its records are all
/// discarded regardless of the offset map (`discard_records`); `marker_for_empty_txn` says a
/// marker that may go once its delete horizon passes (so one is set on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchDecision {
    pub retention: BatchRetention,
    pub discard_records: bool,
    pub marker_for_empty_txn: bool,
}

pub fn batch_decision(
    b: &BatchFacts,
    can_discard: bool,
    last_records: &HashMap<i64, LastRecord>,
    upper_bound: i64,
    now_ms: i64,
) -> BatchDecision {
    let discard_records = if b.is_control {
        can_discard && b.delete_horizon_ms.is_some_and(|h| h <= now_ms)
    } else {
        can_discard
    };
    let last_of_producer = b.producer_id >= 0
        && last_records
            .get(&b.producer_id)
            .is_some_and(|l| match l.last_data_offset {
                Some(o) => b.last_offset == o,
                None => b.is_control && b.producer_epoch == l.producer_epoch,
            });
    let retention = if last_of_producer || b.next_offset == upper_bound {
        BatchRetention::RetainEmpty
    } else if discard_records {
        BatchRetention::Delete
    } else {
        BatchRetention::DeleteEmpty
    };
    BatchDecision {
        retention,
        discard_records,
        marker_for_empty_txn: can_discard && b.is_control,
    }
}

/// Kafka's `shouldRetainRecord` for a data record: records past what the offset map covers
/// stay; a keyless record goes; otherwise it stays if it is the latest for its key (the map
/// has no later offset) and, for a tombstone, while its batch's delete horizon has not
/// passed.
pub fn keep_record(
    offset: i64,
    map_latest_offset: i64,
    latest_for_key: Option<i64>,
    has_key: bool,
    has_value: bool,
    delete_horizon_ms: Option<i64>,
    now_ms: i64,
) -> bool {
    if offset > map_latest_offset {
        return true;
    }
    if !has_key {
        return false;
    }
    let latest = latest_for_key.is_none_or(|o| offset >= o);
    let keep_delete = delete_horizon_ms.is_none_or(|h| now_ms < h);
    latest && (has_value || keep_delete)
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
