//! What a follower does with each partition, decided from the leader's answers without I/O
//! (Kafka's `PartitionFetchState` and the error handling of `AbstractFetcherThread`).
//!
//! A followed partition is in one [`Phase`]: truncating (asking the leader with
//! OffsetForLeaderEpoch where the local log's latest epoch ends), finding the leader's log
//! start (after OFFSET_OUT_OF_RANGE), fetching, or stopped (the leader says it no longer
//! leads at our epoch: nothing more until the next update gives a new epoch). Any phase may
//! be delayed after an error that can pass (the leader not yet at our epoch, an unknown
//! topic, a storage error) by the backoff.

use kafka_protocol::ResponseError as E;
use tokio::time::{Duration, Instant};

/// Where a followed partition stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before fetching: OffsetForLeaderEpoch for the latest local epoch, then truncate.
    /// `out_of_range` is set when this follows an OFFSET_OUT_OF_RANGE whose leader log start
    /// was at or below the local log end (`leader_log_start`).
    Truncate {
        out_of_range: Option<i64>,
    },
    /// After OFFSET_OUT_OF_RANGE: ListOffsets for the leader's log start.
    FindLogStart,
    Fetch,
    /// Not fetched until a new leader epoch.
    Stopped,
}

/// What to do with one partition of a fetch response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchAction {
    /// Append the records (those that form whole batches) and take the high watermark.
    Append,
    /// No records: take the high watermark.
    HighWatermark,
    /// The local log diverges from the leader's (KIP-595 diverging_epoch): truncate to where
    /// the leader's `epoch` ends (`end_offset`), as an OffsetForLeaderEpoch answer.
    Diverged { epoch: i32, end_offset: i64 },
    /// Find the leader's log start, then truncate.
    OutOfRange,
    /// The leader does not lead at our epoch: wait for the next update.
    Stop,
    /// Try again after the backoff.
    Retry,
}

/// Decides from a fetch response partition's error code, diverging epoch and records.
pub fn on_fetch_partition(error_code: i16, diverging: (i32, i64), records: usize) -> FetchAction {
    match error_code {
        0 if diverging.0 >= 0 && diverging.1 >= 0 => FetchAction::Diverged {
            epoch: diverging.0,
            end_offset: diverging.1,
        },
        0 if records > 0 => FetchAction::Append,
        0 => FetchAction::HighWatermark,
        c if c == E::OffsetOutOfRange.code() => FetchAction::OutOfRange,
        c if stops(c) => FetchAction::Stop,
        // UNKNOWN_LEADER_EPOCH (the leader is not at our epoch yet), UNKNOWN_TOPIC_ID and
        // UNKNOWN_TOPIC_OR_PARTITION (its metadata lags), storage errors and the rest.
        _ => FetchAction::Retry,
    }
}

/// NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH: the leader moved on past our epoch.
fn stops(code: i16) -> bool {
    code == E::NotLeaderOrFollower.code() || code == E::FencedLeaderEpoch.code()
}

/// What to do with one partition's OffsetForLeaderEpoch answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpochAction {
    /// Truncate with the leader's (epoch, end offset) (-1, -1: it has no such epoch).
    Truncate {
        epoch: i32,
        end_offset: i64,
    },
    Stop,
    Retry,
}

pub fn on_epoch_end_offset(error_code: i16, epoch: i32, end_offset: i64) -> EpochAction {
    match error_code {
        0 => EpochAction::Truncate { epoch, end_offset },
        c if stops(c) => EpochAction::Stop,
        _ => EpochAction::Retry,
    }
}

/// What to do once the leader's log start is known after OFFSET_OUT_OF_RANGE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStartAction {
    /// The whole local log is below the leader's: empty it and restart at this offset
    /// (Kafka's `truncateFullyAndStartAt`).
    StartAt(i64),
    /// The local log end is past the leader's log start, so it is past the leader's log end:
    /// truncate by epoch.
    Truncate,
    Stop,
    Retry,
}

pub fn on_leader_log_start(
    error_code: i16,
    leader_log_start: i64,
    local_log_end: i64,
    local_latest_epoch: i32,
) -> LogStartAction {
    match error_code {
        0 if leader_log_start < 0 => LogStartAction::Retry,
        0 if leader_log_start > local_log_end => LogStartAction::StartAt(leader_log_start),
        // An empty local log has no epoch to ask about; start where the leader's log does.
        0 if local_latest_epoch < 0 => LogStartAction::StartAt(leader_log_start),
        0 => LogStartAction::Truncate,
        c if stops(c) => LogStartAction::Stop,
        _ => LogStartAction::Retry,
    }
}

/// After a truncation by epoch that followed OFFSET_OUT_OF_RANGE: when it cut nothing, the
/// local log cannot be a prefix of the leader's (its end is beyond the leader's, yet the
/// leader agrees with all of it), so it restarts at the leader's log start; a fetch from the
/// same place would only be out of range again.
pub fn after_out_of_range_truncation(
    log_end_before: i64,
    log_end_after: i64,
    leader_log_start: i64,
) -> Option<i64> {
    (log_end_after == log_end_before).then_some(leader_log_start)
}

/// The length of the longest prefix of `records` made of whole batches (by their 12-byte
/// offset and length prefix): a leader may cut the last batch of a response short.
pub fn whole_batches_len(records: &[u8]) -> usize {
    const LOG_OVERHEAD: usize = crate::log::batch::LOG_OVERHEAD;
    let mut pos = 0usize;
    while records.len() - pos >= LOG_OVERHEAD {
        let len = i32::from_be_bytes(records[pos + 8..pos + 12].try_into().expect("4 bytes"));
        let Some(total) = usize::try_from(len)
            .ok()
            .and_then(|l| l.checked_add(LOG_OVERHEAD))
        else {
            break;
        };
        if total > records.len() - pos {
            break;
        }
        pos += total;
    }
    pos
}

/// One followed partition's phase and delay.
#[derive(Debug, Clone, Copy)]
pub struct FetchState {
    pub phase: Phase,
    /// Not before this (after an error).
    pub delayed_until: Option<Instant>,
}

impl FetchState {
    pub fn new(phase: Phase) -> FetchState {
        FetchState {
            phase,
            delayed_until: None,
        }
    }

    /// In `phase`, and not delayed at `now`.
    pub fn ready_in(&self, phase: fn(&Phase) -> bool, now: Instant) -> bool {
        phase(&self.phase) && self.delayed_until.is_none_or(|t| t <= now)
    }

    /// Moves to `phase` at once.
    pub fn go(&mut self, phase: Phase) {
        self.phase = phase;
        self.delayed_until = None;
    }

    /// Stays in the phase, retried after `backoff`.
    pub fn delay(&mut self, now: Instant, backoff: Duration) {
        self.delayed_until = Some(now + backoff);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: (i32, i64) = (-1, -1);

    #[test]
    fn fetch_answers() {
        assert_eq!(on_fetch_partition(0, NONE, 10), FetchAction::Append);
        assert_eq!(on_fetch_partition(0, NONE, 0), FetchAction::HighWatermark);
        assert_eq!(
            on_fetch_partition(0, (3, 120), 0),
            FetchAction::Diverged {
                epoch: 3,
                end_offset: 120
            }
        );
        let code = |e: E| e.code();
        assert_eq!(
            on_fetch_partition(code(E::OffsetOutOfRange), NONE, 0),
            FetchAction::OutOfRange
        );
        for stop in [E::NotLeaderOrFollower, E::FencedLeaderEpoch] {
            assert_eq!(on_fetch_partition(code(stop), NONE, 0), FetchAction::Stop);
        }
        for retry in [
            E::UnknownLeaderEpoch,
            E::UnknownTopicId,
            E::UnknownTopicOrPartition,
            E::KafkaStorageError,
        ] {
            assert_eq!(on_fetch_partition(code(retry), NONE, 5), FetchAction::Retry);
        }
    }

    #[test]
    fn epoch_and_log_start_answers() {
        assert_eq!(
            on_epoch_end_offset(0, -1, -1),
            EpochAction::Truncate {
                epoch: -1,
                end_offset: -1
            }
        );
        assert_eq!(
            on_epoch_end_offset(E::FencedLeaderEpoch.code(), 0, 0),
            EpochAction::Stop
        );
        assert_eq!(
            on_epoch_end_offset(E::UnknownLeaderEpoch.code(), 0, 0),
            EpochAction::Retry
        );
        // The leader deleted everything the follower has.
        assert_eq!(
            on_leader_log_start(0, 500, 100, 2),
            LogStartAction::StartAt(500)
        );
        // The follower is past the leader's log end instead.
        assert_eq!(on_leader_log_start(0, 50, 100, 2), LogStartAction::Truncate);
        assert_eq!(
            on_leader_log_start(0, 50, 100, -1),
            LogStartAction::StartAt(50)
        );
        assert_eq!(on_leader_log_start(0, -1, 100, 2), LogStartAction::Retry);
        assert_eq!(
            on_leader_log_start(E::NotLeaderOrFollower.code(), 0, 0, 0),
            LogStartAction::Stop
        );
        assert_eq!(after_out_of_range_truncation(100, 100, 50), Some(50));
        assert_eq!(after_out_of_range_truncation(100, 80, 50), None);
    }

    #[test]
    fn whole_batches_only() {
        let mut b = crate::log::batch::test_support::simple_batch(3, 1000, 10);
        let one = b.len();
        b.extend(b.clone());
        assert_eq!(whole_batches_len(&b), 2 * one);
        assert_eq!(whole_batches_len(&b[..2 * one - 1]), one);
        assert_eq!(whole_batches_len(&b[..11]), 0);
        // A negative length is not a batch.
        let mut bad = b.clone();
        bad[8..12].copy_from_slice(&(-5i32).to_be_bytes());
        assert_eq!(whole_batches_len(&bad), 0);
        assert_eq!(whole_batches_len(&[]), 0);
    }

    #[test]
    fn delays() {
        let now = Instant::now();
        let mut s = FetchState::new(Phase::Fetch);
        let fetching = |p: &Phase| *p == Phase::Fetch;
        assert!(s.ready_in(fetching, now));
        s.delay(now, Duration::from_millis(100));
        assert!(!s.ready_in(fetching, now));
        assert!(s.ready_in(fetching, now + Duration::from_millis(100)));
        s.go(Phase::FindLogStart);
        assert!(!s.ready_in(fetching, now));
    }
}
