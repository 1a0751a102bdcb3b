//! What the coordinator decides for each request about one transactional id, as Kafka's
//! TransactionCoordinator decides under the id's lock: pure functions of the current
//! [`TxnMetadata`] and the request, returning the error to answer with or the transition to
//! write. The shell (`coordinator.rs`) holds the lock around a call, performs the write and
//! answers.
//!
//! Producer ids are never allocated here: a rule that needs one (an epoch exhausted) returns
//! [`Step::NeedProducerId`] and the shell calls again with one.

use std::collections::BTreeSet;

use super::state::*;

/// A rule's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Answer with this error code (0: success without a write).
    Answer(i16),
    /// Call again with a freshly allocated producer id.
    NeedProducerId,
    /// Write this transition, then answer.
    Write(Transit),
    /// InitProducerId found a transaction open: write this fence and abort the transaction
    /// under its epoch (the client is told CONCURRENT_TRANSACTIONS and retries).
    Fence(Transit),
}

/// EndTxn's outcome: as [`Step`], plus the producer id and epoch a TV2 client continues with
/// when nothing needs writing (a retry of a completed EndTxn).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndStep {
    Answer(i16),
    /// Already done: success, with this producer id and epoch (-1, -1 before TV2).
    Done(i64, i16),
    NeedProducerId,
    /// Write this PrepareCommit/PrepareAbort; `epoch_fence` when it aborts for a fence.
    Write {
        transit: Transit,
        epoch_fence: bool,
    },
}

fn illegal_state(md: &TxnMetadata) -> Illegal {
    Illegal(format!(
        "{} is {:?}, a state it should never be found in",
        md.transactional_id, md.state
    ))
}

/// InitProducerId with a transactional id whose metadata exists (a new id's metadata is
/// created first, at epoch -1). `expected` is the producer id and epoch a recovering
/// producer sent (KIP-360). `new_producer_id` is set on the call after NeedProducerId.
pub fn init_producer_id(
    md: &mut TxnMetadata,
    timeout_ms: i32,
    expected: Option<(i64, i16)>,
    now: i64,
    new_producer_id: Option<i64>,
) -> Result<Step, Illegal> {
    // A request naming another producer is fenced unless: the metadata was just created
    // (epoch -1: a producer recovering from UNKNOWN_PRODUCER_ID gets the new id), it names
    // the current producer id (the epoch is checked below), or it names the previous one at
    // an exhausted epoch (a retry of the rotation that answered it).
    let valid = |(pid, epoch): (i64, i16)| {
        md.producer_epoch == NO_PRODUCER_EPOCH
            || pid == md.producer_id
            || (pid == md.prev_producer_id && epoch_exhausted(epoch))
    };
    if md.pending_in_progress() {
        return Ok(Step::Answer(CONCURRENT_TRANSACTIONS));
    }
    if !expected.is_none_or(valid) {
        return Ok(Step::Answer(PRODUCER_FENCED));
    }
    match md.state {
        TxnState::PrepareAbort | TxnState::PrepareCommit => {
            Ok(Step::Answer(CONCURRENT_TRANSACTIONS))
        }
        TxnState::CompleteAbort | TxnState::CompleteCommit | TxnState::Empty => {
            if md.epoch_exhausted() && expected.is_none_or(|(_, e)| e == md.producer_epoch) {
                let Some(id) = new_producer_id else {
                    return Ok(Step::NeedProducerId);
                };
                let t = md.prepare_producer_id_rotation(id, timeout_ms, now, expected.is_some())?;
                return Ok(Step::Write(t));
            }
            Ok(
                match md.prepare_increment_epoch(timeout_ms, expected.map(|(_, e)| e), now)? {
                    Ok(t) => Step::Write(t),
                    Err(code) => Step::Answer(code),
                },
            )
        }
        // The epoch of the fence is never returned: the client retries, and the retry bumps
        // again (exhausting the epoch there moves to a new producer id).
        TxnState::Ongoing => Ok(Step::Fence(md.prepare_fence_epoch()?)),
        TxnState::Dead | TxnState::PrepareEpochFence => Err(illegal_state(md)),
    }
}

/// AddPartitionsToTxn (and AddOffsetsToTxn, with the group's offsets partition).
pub fn add_partitions(
    md: &mut TxnMetadata,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &BTreeSet<TopicPartition>,
    now: i64,
    client_version: TxnVersion,
) -> Result<Step, Illegal> {
    if md.pending_in_progress() {
        return Ok(Step::Answer(CONCURRENT_TRANSACTIONS));
    }
    if md.producer_id != producer_id {
        return Ok(Step::Answer(INVALID_PRODUCER_ID_MAPPING));
    }
    if md.producer_epoch != producer_epoch {
        return Ok(Step::Answer(PRODUCER_FENCED));
    }
    if matches!(md.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
        return Ok(Step::Answer(CONCURRENT_TRANSACTIONS));
    }
    if md.state == TxnState::Ongoing && partitions.is_subset(&md.partitions) {
        return Ok(Step::Answer(NONE));
    }
    Ok(Step::Write(md.prepare_add_partitions(
        partitions,
        now,
        client_version,
    )?))
}

/// AddPartitionsToTxn with verify_only (KIP-890 part 1): for each partition NONE if it is in
/// the transaction, TRANSACTION_ABORTABLE if not; or one error for all.
pub fn verify_partitions(
    md: &TxnMetadata,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &BTreeSet<TopicPartition>,
) -> Result<Vec<(TopicPartition, i16)>, i16> {
    if md.producer_id != producer_id {
        return Err(INVALID_PRODUCER_ID_MAPPING);
    }
    if md.producer_epoch != producer_epoch {
        return Err(PRODUCER_FENCED);
    }
    if matches!(md.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
        return Err(CONCURRENT_TRANSACTIONS);
    }
    Ok(partitions
        .iter()
        .map(|tp| {
            let code = if md.partitions.contains(tp) {
                NONE
            } else {
                TRANSACTION_ABORTABLE
            };
            (tp.clone(), code)
        })
        .collect())
}

/// An EndTxn request, or an abort the coordinator starts itself (`from_client` false: a
/// fence or a timed-out transaction). `client_version` is 2 for EndTxn v5 and for the
/// coordinator's own aborts (the broker's finalized transaction.version), 0 otherwise.
#[allow(clippy::too_many_arguments)]
pub fn end_txn(
    md: &mut TxnMetadata,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    from_client: bool,
    client_version: TxnVersion,
    now: i64,
    next_producer_id: Option<i64>,
) -> Result<EndStep, Illegal> {
    if !supports_epoch_bump(client_version) {
        return end_txn_v1(md, producer_id, producer_epoch, commit, from_client, now);
    }
    let (pid_before, epoch_before) = (md.producer_id, md.producer_epoch);
    let epoch_fence = md.pending == Some(TxnState::PrepareEpochFence);
    // A retry of an EndTxn whose epoch bump overflowed to a new producer id...
    let retry_on_overflow = !epoch_fence
        && md.prev_producer_id == producer_id
        && producer_epoch == i16::MAX - 1
        && md.producer_epoch == 0;
    // ...or of one whose bump is stored.
    let retry_on_bump = !epoch_fence && md.producer_epoch == producer_epoch.wrapping_add(1);
    let valid_epoch = if epoch_fence {
        (!from_client || producer_epoch == md.producer_epoch) && producer_epoch >= md.producer_epoch
    } else {
        match md.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_bump,
            TxnState::CompleteCommit | TxnState::CompleteAbort => {
                retry_on_bump || retry_on_overflow || producer_epoch == md.producer_epoch
            }
            _ => producer_epoch == md.producer_epoch,
        }
    };
    let is_retry = retry_on_bump || retry_on_overflow;

    if md.producer_id != producer_id && !retry_on_overflow {
        return Ok(EndStep::Answer(INVALID_PRODUCER_ID_MAPPING));
    }
    if !valid_epoch {
        return Ok(EndStep::Answer(PRODUCER_FENCED));
    }
    if md.pending.is_some_and(|p| p != TxnState::PrepareEpochFence) {
        return Ok(EndStep::Answer(CONCURRENT_TRANSACTIONS));
    }
    let complete = |md: &mut TxnMetadata, next: TxnState, no_partition_added: bool| {
        let next_pid = if !epoch_fence && md.epoch_exhausted() {
            match next_producer_id {
                Some(id) => id,
                None => return Ok(EndStep::NeedProducerId),
            }
        } else {
            NO_PRODUCER_ID
        };
        if next == TxnState::PrepareAbort && epoch_fence {
            take_fence(md, producer_epoch);
        }
        let transit =
            md.prepare_abort_or_commit(next, client_version, next_pid, now, no_partition_added)?;
        Ok(EndStep::Write {
            transit,
            epoch_fence,
        })
    };
    let done = EndStep::Done(pid_before, epoch_before);
    let invalid = EndStep::Answer(INVALID_TXN_STATE);
    let prepare = if commit {
        TxnState::PrepareCommit
    } else {
        TxnState::PrepareAbort
    };
    match (md.state, commit) {
        (TxnState::Ongoing, _) => complete(md, prepare, false),
        (TxnState::CompleteCommit, true) => Ok(if is_retry { done } else { invalid }),
        (TxnState::CompleteCommit, false) if is_retry => Ok(invalid),
        (TxnState::CompleteCommit, false) => complete(md, TxnState::PrepareAbort, true),
        (TxnState::CompleteAbort, false) if is_retry => Ok(done),
        (TxnState::CompleteAbort, false) => complete(md, TxnState::PrepareAbort, true),
        (TxnState::CompleteAbort, true) => Ok(invalid),
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
            Ok(EndStep::Answer(CONCURRENT_TRANSACTIONS))
        }
        (TxnState::PrepareCommit, false) | (TxnState::PrepareAbort, true) => Ok(invalid),
        (TxnState::Empty, false) => complete(md, TxnState::PrepareAbort, true),
        (TxnState::Empty, true) => Ok(invalid),
        (TxnState::Dead | TxnState::PrepareEpochFence, _) => Err(illegal_state(md)),
    }
}

/// A fence's pending transition gives way to its abort, which carries the fenced epoch.
fn take_fence(md: &mut TxnMetadata, fenced_epoch: i16) {
    md.pending = None;
    md.producer_epoch = fenced_epoch;
    md.last_producer_epoch = NO_PRODUCER_EPOCH;
}

/// EndTxn before TV2 (v0-4): no epoch bump; the epoch must match exactly from a client.
fn end_txn_v1(
    md: &mut TxnMetadata,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    from_client: bool,
    now: i64,
) -> Result<EndStep, Illegal> {
    if md.producer_id != producer_id {
        return Ok(EndStep::Answer(INVALID_PRODUCER_ID_MAPPING));
    }
    if (from_client && producer_epoch != md.producer_epoch) || producer_epoch < md.producer_epoch {
        return Ok(EndStep::Answer(PRODUCER_FENCED));
    }
    let epoch_fence = md.pending == Some(TxnState::PrepareEpochFence);
    if md.pending.is_some() && !epoch_fence {
        return Ok(EndStep::Answer(CONCURRENT_TRANSACTIONS));
    }
    let done = EndStep::Done(NO_PRODUCER_ID, NO_PRODUCER_EPOCH);
    let invalid = EndStep::Answer(INVALID_TXN_STATE);
    match (md.state, commit) {
        (TxnState::Ongoing, _) => {
            let next = if commit {
                TxnState::PrepareCommit
            } else {
                TxnState::PrepareAbort
            };
            let fencing = next == TxnState::PrepareAbort && epoch_fence;
            if fencing {
                take_fence(md, producer_epoch);
            }
            let transit = md.prepare_abort_or_commit(next, 0, NO_PRODUCER_ID, now, false)?;
            Ok(EndStep::Write {
                transit,
                epoch_fence: fencing,
            })
        }
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(done),
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
            Ok(EndStep::Answer(CONCURRENT_TRANSACTIONS))
        }
        (
            TxnState::CompleteCommit
            | TxnState::CompleteAbort
            | TxnState::PrepareCommit
            | TxnState::PrepareAbort
            | TxnState::Empty,
            _,
        ) => Ok(invalid),
        (TxnState::Dead | TxnState::PrepareEpochFence, _) => Err(illegal_state(md)),
    }
}

/// After a PrepareCommit/PrepareAbort written for `producer_id` at `producer_epoch` (the
/// request's): the transition to its Complete state, to write once the markers are out; or
/// the error the request is answered with instead (the state moved on meanwhile).
pub fn after_prepare(
    md: &mut TxnMetadata,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    client_version: TxnVersion,
    now: i64,
) -> Result<Result<Transit, i16>, Illegal> {
    if md.producer_id != producer_id {
        return Ok(Err(INVALID_PRODUCER_ID_MAPPING));
    }
    let epoch_ok = md.producer_epoch == producer_epoch
        || (supports_epoch_bump(client_version)
            && md.producer_epoch == producer_epoch.wrapping_add(1));
    if !epoch_ok {
        return Ok(Err(PRODUCER_FENCED));
    }
    if md.pending_in_progress() {
        return Ok(Err(CONCURRENT_TRANSACTIONS));
    }
    match (md.state, commit) {
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
            md.prepare_complete(now).map(Ok)
        }
        (TxnState::Dead | TxnState::PrepareEpochFence, _) => Err(illegal_state(md)),
        _ => Ok(Err(INVALID_TXN_STATE)),
    }
}

/// Whether an open transaction has run past its timeout (the coordinator aborts it).
pub fn timed_out(md: &TxnMetadata, now: i64) -> bool {
    !md.pending_in_progress()
        && md.state == TxnState::Ongoing
        && md.start_ms + i64::from(md.timeout_ms) < now
}

/// Whether an idle transactional id has been unused for `expiration_ms`.
pub fn expired(md: &TxnMetadata, now: i64, expiration_ms: i64) -> bool {
    md.pending.is_none()
        && md.state.expiration_allowed()
        && md.last_update_ms <= now - expiration_ms
}
