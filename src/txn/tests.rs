//! Unit tests of the transaction state machine and the coordinator's rules, as Kafka's
//! TransactionMetadataTest and TransactionCoordinatorTest exercise them.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError as E;

use super::rules::{self, EndStep, Step};
use super::state::*;

const NOW: i64 = 1_000_000;

fn parts(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
    list.iter().map(|(t, p)| (t.to_string(), *p)).collect()
}

/// An id initialised once: producer id 100, epoch 0, Empty.
fn fresh() -> TxnMetadata {
    let mut md = TxnMetadata::new("txn", 100, 60_000, NOW);
    write(&mut md, |md| {
        rules::init_producer_id(md, 60_000, None, NOW, None)
    });
    md
}

/// Completes the transition a rule asked to write.
fn write(
    md: &mut TxnMetadata,
    rule: impl FnOnce(&mut TxnMetadata) -> Result<Step, Illegal>,
) -> Transit {
    match rule(md).unwrap() {
        Step::Write(t) | Step::Fence(t) => {
            if t.state != TxnState::PrepareEpochFence {
                md.complete(&t).unwrap();
            }
            t
        }
        other => panic!("expected a write, got {other:?}"),
    }
}

fn end_write(
    md: &mut TxnMetadata,
    rule: impl FnOnce(&mut TxnMetadata) -> Result<EndStep, Illegal>,
) -> Transit {
    match rule(md).unwrap() {
        EndStep::Write { transit, .. } => {
            md.complete(&transit).unwrap();
            transit
        }
        other => panic!("expected a write, got {other:?}"),
    }
}

/// `md` with partitions added (Ongoing).
fn ongoing(md: &mut TxnMetadata, v: TxnVersion) {
    let (pid, epoch) = (md.producer_id, md.producer_epoch);
    write(md, |md| {
        rules::add_partitions(md, pid, epoch, &parts(&[("t", 0), ("t", 1)]), NOW, v)
    });
}

/// Ends the transaction and writes the markers' completion.
fn finish(md: &mut TxnMetadata, commit: bool, v: TxnVersion) {
    let (pid, epoch) = (md.producer_id, md.producer_epoch);
    end_write(md, |md| {
        rules::end_txn(md, pid, epoch, commit, true, v, NOW, None)
    });
    let done = rules::after_prepare(md, pid, epoch, commit, v, NOW)
        .unwrap()
        .unwrap();
    md.complete(&done).unwrap();
}

#[test]
fn error_codes_are_kafkas() {
    assert_eq!(CONCURRENT_TRANSACTIONS, E::ConcurrentTransactions.code());
    assert_eq!(
        INVALID_PRODUCER_ID_MAPPING,
        E::InvalidProducerIdMapping.code()
    );
    assert_eq!(INVALID_TXN_STATE, E::InvalidTxnState.code());
    assert_eq!(
        INVALID_TRANSACTION_TIMEOUT,
        E::InvalidTransactionTimeout.code()
    );
    assert_eq!(PRODUCER_FENCED, E::ProducerFenced.code());
    assert_eq!(INVALID_PRODUCER_EPOCH, E::InvalidProducerEpoch.code());
    assert_eq!(TRANSACTION_ABORTABLE, E::TransactionAbortable.code());
    assert_eq!(UNKNOWN_SERVER_ERROR, E::UnknownServerError.code());
    assert_eq!(INVALID_REQUEST, E::InvalidRequest.code());
    assert_eq!(NOT_COORDINATOR, E::NotCoordinator.code());
    assert_eq!(
        COORDINATOR_LOAD_IN_PROGRESS,
        E::CoordinatorLoadInProgress.code()
    );
    assert_eq!(COORDINATOR_NOT_AVAILABLE, E::CoordinatorNotAvailable.code());
    assert_eq!(
        TRANSACTIONAL_ID_NOT_FOUND,
        E::TransactionalIdNotFound.code()
    );
}

#[test]
fn states_have_kafkas_ids_names_and_predecessors() {
    let names: Vec<(i8, &str)> = TxnState::ALL.iter().map(|s| (s.id(), s.name())).collect();
    assert_eq!(
        names,
        vec![
            (0, "Empty"),
            (1, "Ongoing"),
            (2, "PrepareCommit"),
            (3, "PrepareAbort"),
            (4, "CompleteCommit"),
            (5, "CompleteAbort"),
            (6, "Dead"),
            (7, "PrepareEpochFence"),
        ]
    );
    for s in TxnState::ALL {
        assert_eq!(TxnState::from_id(s.id()), Some(s));
        assert_eq!(TxnState::from_name(s.name()), Some(s));
    }
    assert_eq!(TxnState::from_id(8), None);
    assert_eq!(TxnState::from_name("ongoing"), None);
    use TxnState::*;
    assert!(PrepareCommit.valid_previous() == [Ongoing]);
    assert!(CompleteAbort.valid_previous() == [PrepareAbort]);
    assert!(PrepareAbort.valid_previous().contains(&PrepareEpochFence));
    assert!(!Dead.valid_previous().contains(&Ongoing));
    let expirable: Vec<TxnState> = TxnState::ALL
        .into_iter()
        .filter(|s| s.expiration_allowed())
        .collect();
    assert_eq!(expirable, vec![Empty, CompleteCommit, CompleteAbort]);
}

#[test]
fn a_prepared_transition_is_pending_until_completed_or_abandoned() {
    let mut md = fresh();
    let t = md
        .prepare_add_partitions(&parts(&[("t", 0)]), NOW, 0)
        .unwrap();
    assert_eq!(md.pending, Some(TxnState::Ongoing));
    assert!(
        md.prepare_add_partitions(&parts(&[("t", 1)]), NOW, 0)
            .is_err()
    );
    md.abandon();
    assert_eq!(md.state, TxnState::Empty);
    assert!(md.complete(&t).is_err(), "nothing pending any more");
    let t = md
        .prepare_add_partitions(&parts(&[("t", 0)]), NOW, 0)
        .unwrap();
    md.complete(&t).unwrap();
    assert_eq!((md.state, md.pending), (TxnState::Ongoing, None));
    assert_eq!(md.start_ms, NOW);
}

#[test]
fn illegal_transitions_are_refused() {
    let mut md = fresh();
    // Empty cannot be committed (PrepareCommit follows only Ongoing).
    assert!(
        md.prepare_abort_or_commit(TxnState::PrepareCommit, 0, -1, NOW, false)
            .is_err()
    );
    assert_eq!(md.pending, None);
    // Complete* follows only Prepare*.
    assert!(md.prepare_fence_epoch().is_err());
    ongoing(&mut md, 0);
    assert!(md.prepare_dead().is_err());
    assert!(md.remove_partition(&("t".into(), 0)).is_err());
    // A fence is never completed.
    let fence = md.prepare_fence_epoch().unwrap();
    assert!(md.complete(&fence).is_err());
}

#[test]
fn completing_checks_the_transit_against_the_state() {
    let mut md = fresh();
    ongoing(&mut md, 0);
    let mut t = md
        .prepare_abort_or_commit(TxnState::PrepareCommit, 0, -1, NOW, false)
        .unwrap();
    t.producer_epoch += 1; // TV0 never bumps here
    assert!(md.complete(&t).is_err());
    md.abandon();
    let mut t = md
        .prepare_abort_or_commit(TxnState::PrepareCommit, 0, -1, NOW, false)
        .unwrap();
    t.partitions.clear();
    assert!(md.complete(&t).is_err(), "partitions must match");
    md.abandon();
    let mut t = md
        .prepare_add_partitions(&parts(&[("u", 0)]), NOW, 0)
        .unwrap();
    t.partitions = parts(&[("u", 0)]);
    assert!(md.complete(&t).is_err(), "partitions may only grow");
}

#[test]
fn init_producer_id_bumps_the_epoch() {
    let mut md = TxnMetadata::new("txn", 100, 60_000, NOW);
    let t = write(&mut md, |md| {
        rules::init_producer_id(md, 30_000, None, NOW + 1, None)
    });
    assert_eq!(
        (t.producer_id, t.producer_epoch, t.state),
        (100, 0, TxnState::Empty)
    );
    assert_eq!(
        (md.timeout_ms, md.last_update_ms, md.start_ms),
        (30_000, NOW + 1, -1)
    );
    write(&mut md, |md| {
        rules::init_producer_id(md, 30_000, None, NOW, None)
    });
    assert_eq!(
        (md.producer_epoch, md.last_producer_epoch),
        (1, NO_PRODUCER_EPOCH)
    );
    // After a transaction completes, a new instance bumps again.
    finish_after_ongoing(&mut md);
    write(&mut md, |md| {
        rules::init_producer_id(md, 30_000, None, NOW, None)
    });
    assert_eq!((md.state, md.producer_epoch), (TxnState::Empty, 2));
}

fn finish_after_ongoing(md: &mut TxnMetadata) {
    ongoing(md, 0);
    finish(md, true, 0);
    assert_eq!(md.state, TxnState::CompleteCommit);
}

#[test]
fn init_producer_id_with_an_expected_epoch_kip_360() {
    let mut md = fresh();
    // The current epoch: bumped, the old one remembered.
    write(&mut md, |md| {
        rules::init_producer_id(md, 60_000, Some((100, 0)), NOW, None)
    });
    assert_eq!((md.producer_epoch, md.last_producer_epoch), (1, 0));
    // A retry of that call (the client never saw the answer): the same epoch again.
    let t = write(&mut md, |md| {
        rules::init_producer_id(md, 60_000, Some((100, 0)), NOW, None)
    });
    assert_eq!(t.producer_epoch, 1);
    // Anything older is a zombie.
    assert_eq!(
        rules::init_producer_id(&mut md, 60_000, Some((100, 5)), NOW, None),
        Ok(Step::Answer(PRODUCER_FENCED))
    );
    // Another producer id than the current or the previous one: fenced.
    assert_eq!(
        rules::init_producer_id(&mut md, 60_000, Some((7, 1)), NOW, None),
        Ok(Step::Answer(PRODUCER_FENCED))
    );
    // A brand-new id (epoch -1) accepts any expected producer: it gets the new id.
    let mut new = TxnMetadata::new("n", 200, 60_000, NOW);
    let t = write(&mut new, |md| {
        rules::init_producer_id(md, 60_000, Some((7, 3)), NOW, None)
    });
    assert_eq!((t.producer_id, t.producer_epoch), (200, 0));
}

#[test]
fn init_producer_id_while_busy_is_concurrent() {
    let mut md = fresh();
    ongoing(&mut md, 0);
    let _pending = md
        .prepare_abort_or_commit(TxnState::PrepareCommit, 0, -1, NOW, false)
        .unwrap();
    assert_eq!(
        rules::init_producer_id(&mut md, 60_000, None, NOW, None),
        Ok(Step::Answer(CONCURRENT_TRANSACTIONS))
    );
    md.complete(&_pending).unwrap();
    assert_eq!(
        rules::init_producer_id(&mut md, 60_000, None, NOW, None),
        Ok(Step::Answer(CONCURRENT_TRANSACTIONS)),
        "PrepareCommit: markers are being written"
    );
}

#[test]
fn init_producer_id_rotates_an_exhausted_producer_id() {
    let mut md = fresh();
    md.producer_epoch = i16::MAX - 1;
    assert_eq!(
        rules::init_producer_id(&mut md, 60_000, None, NOW, None),
        Ok(Step::NeedProducerId)
    );
    assert_eq!(md.pending, None);
    let t = write(&mut md, |md| {
        rules::init_producer_id(md, 60_000, None, NOW, Some(555))
    });
    assert_eq!((t.producer_id, t.producer_epoch), (555, 0));
    assert_eq!(
        (md.prev_producer_id, md.last_producer_epoch),
        (100, NO_PRODUCER_EPOCH)
    );

    // A recovering producer (KIP-360) at the exhausted epoch: rotated, the last epoch kept,
    // so a retry naming the old producer at that epoch gets the same answer.
    let mut md = fresh();
    md.producer_epoch = i16::MAX - 1;
    let expected = Some((100, i16::MAX - 1));
    let t = write(&mut md, |md| {
        rules::init_producer_id(md, 60_000, expected, NOW, Some(556))
    });
    assert_eq!((t.producer_id, t.producer_epoch), (556, 0));
    assert_eq!(md.last_producer_epoch, i16::MAX - 1);
    let t = write(&mut md, |md| {
        rules::init_producer_id(md, 60_000, expected, NOW, None)
    });
    assert_eq!((t.producer_id, t.producer_epoch), (556, 0));
}

#[test]
fn init_producer_id_fences_an_open_transaction() {
    let mut md = fresh();
    ongoing(&mut md, 0);
    let fence = match rules::init_producer_id(&mut md, 60_000, None, NOW, None).unwrap() {
        Step::Fence(t) => t,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        (fence.state, fence.producer_epoch),
        (TxnState::PrepareEpochFence, 1)
    );
    assert_eq!(md.pending, Some(TxnState::PrepareEpochFence));
    // The coordinator then aborts under the fenced epoch (here with TV2: one more bump).
    let step = rules::end_txn(&mut md, 100, 1, false, false, 2, NOW, None).unwrap();
    let EndStep::Write {
        transit,
        epoch_fence,
    } = step
    else {
        panic!("{step:?}");
    };
    assert!(epoch_fence);
    assert_eq!(
        (transit.state, transit.producer_epoch),
        (TxnState::PrepareAbort, 2)
    );
    assert_eq!(transit.last_producer_epoch, 1);
    md.complete(&transit).unwrap();
    // Meanwhile the old instance is fenced and a retry of the new one waits.
    assert_eq!(
        rules::add_partitions(&mut md, 100, 0, &parts(&[("t", 9)]), NOW, 0),
        Ok(Step::Answer(PRODUCER_FENCED))
    );
    assert_eq!(
        rules::init_producer_id(&mut md, 60_000, None, NOW, None),
        Ok(Step::Answer(CONCURRENT_TRANSACTIONS))
    );
    let done = rules::after_prepare(&mut md, 100, 1, false, 2, NOW)
        .unwrap()
        .unwrap();
    md.complete(&done).unwrap();
    assert_eq!((md.state, md.producer_epoch), (TxnState::CompleteAbort, 2));
    assert_eq!(
        rules::add_partitions(&mut md, 100, 0, &parts(&[("t", 9)]), NOW, 0),
        Ok(Step::Answer(PRODUCER_FENCED))
    );
    write(&mut md, |md| {
        rules::init_producer_id(md, 60_000, None, NOW, None)
    });
    assert_eq!(md.producer_epoch, 3);
}

#[test]
fn a_failed_fence_does_not_bump_twice() {
    let mut md = fresh();
    ongoing(&mut md, 0);
    let f = md.prepare_fence_epoch().unwrap();
    assert_eq!(f.producer_epoch, 1);
    md.abandon();
    md.failed_epoch_fence = true;
    assert_eq!(md.prepare_fence_epoch().unwrap().producer_epoch, 0);
    md.abandon();
    md.failed_epoch_fence = false;
    md.producer_epoch = i16::MAX;
    assert_eq!(md.prepare_fence_epoch().unwrap().producer_epoch, i16::MAX);
}

#[test]
fn add_partitions_checks_in_kafkas_order() {
    let mut md = fresh();
    let p = parts(&[("t", 0)]);
    assert_eq!(
        rules::add_partitions(&mut md, 101, 5, &p, NOW, 0),
        Ok(Step::Answer(INVALID_PRODUCER_ID_MAPPING))
    );
    assert_eq!(
        rules::add_partitions(&mut md, 100, 5, &p, NOW, 0),
        Ok(Step::Answer(PRODUCER_FENCED))
    );
    let t = write(&mut md, |md| rules::add_partitions(md, 100, 0, &p, NOW, 0));
    assert_eq!((t.state, t.start_ms), (TxnState::Ongoing, NOW));
    // Already in: no write.
    assert_eq!(
        rules::add_partitions(&mut md, 100, 0, &p, NOW + 5, 0),
        Ok(Step::Answer(NONE))
    );
    // More: the start time stays.
    let t = write(&mut md, |md| {
        rules::add_partitions(md, 100, 0, &parts(&[("u", 3)]), NOW + 5, 0)
    });
    assert_eq!(
        (t.partitions.len(), t.start_ms, t.last_update_ms),
        (2, NOW, NOW + 5)
    );
    // A pending transition comes first, even before the producer checks.
    let _p = md
        .prepare_add_partitions(&parts(&[("v", 0)]), NOW, 0)
        .unwrap();
    assert_eq!(
        rules::add_partitions(&mut md, 999, 9, &p, NOW, 0),
        Ok(Step::Answer(CONCURRENT_TRANSACTIONS))
    );
    md.abandon();
    end_write(&mut md, |md| {
        rules::end_txn(md, 100, 0, true, true, 0, NOW, None)
    });
    assert_eq!(
        rules::add_partitions(&mut md, 100, 0, &p, NOW, 0),
        Ok(Step::Answer(CONCURRENT_TRANSACTIONS)),
        "PrepareCommit"
    );
}

#[test]
fn verify_only_reports_each_partition() {
    let mut md = fresh();
    ongoing(&mut md, 0);
    let ask = parts(&[("t", 0), ("x", 0)]);
    assert_eq!(
        rules::verify_partitions(&md, 100, 0, &ask),
        Ok(vec![
            (("t".into(), 0), NONE),
            (("x".into(), 0), TRANSACTION_ABORTABLE)
        ])
    );
    assert_eq!(
        rules::verify_partitions(&md, 1, 0, &ask),
        Err(INVALID_PRODUCER_ID_MAPPING)
    );
    assert_eq!(
        rules::verify_partitions(&md, 100, 1, &ask),
        Err(PRODUCER_FENCED)
    );
    end_write(&mut md, |md| {
        rules::end_txn(md, 100, 0, false, true, 0, NOW, None)
    });
    assert_eq!(
        rules::verify_partitions(&md, 100, 0, &ask),
        Err(CONCURRENT_TRANSACTIONS)
    );
}

#[test]
fn end_txn_before_tv2() {
    let mut md = fresh();
    let end = |md: &mut TxnMetadata, pid, epoch, commit| {
        rules::end_txn(md, pid, epoch, commit, true, 0, NOW, None).unwrap()
    };
    // Nothing to end.
    assert_eq!(
        end(&mut md, 100, 0, true),
        EndStep::Answer(INVALID_TXN_STATE)
    );
    assert_eq!(
        end(&mut md, 100, 0, false),
        EndStep::Answer(INVALID_TXN_STATE)
    );
    assert_eq!(
        end(&mut md, 7, 0, true),
        EndStep::Answer(INVALID_PRODUCER_ID_MAPPING)
    );
    assert_eq!(end(&mut md, 100, 1, true), EndStep::Answer(PRODUCER_FENCED));
    ongoing(&mut md, 0);
    let step = end(&mut md, 100, 0, true);
    let EndStep::Write {
        transit,
        epoch_fence,
    } = step
    else {
        panic!("{step:?}")
    };
    assert!(!epoch_fence);
    assert_eq!(
        (transit.state, transit.producer_epoch),
        (TxnState::PrepareCommit, 0)
    );
    assert_eq!(
        end(&mut md, 100, 0, true),
        EndStep::Answer(CONCURRENT_TRANSACTIONS)
    );
    md.complete(&transit).unwrap();
    assert_eq!(
        end(&mut md, 100, 0, true),
        EndStep::Answer(CONCURRENT_TRANSACTIONS)
    );
    assert_eq!(
        end(&mut md, 100, 0, false),
        EndStep::Answer(INVALID_TXN_STATE)
    );
    let done = rules::after_prepare(&mut md, 100, 0, true, 0, NOW)
        .unwrap()
        .unwrap();
    md.complete(&done).unwrap();
    assert!(md.partitions.is_empty());
    // A retry of the commit succeeds; an abort now is a state error.
    assert_eq!(end(&mut md, 100, 0, true), EndStep::Done(-1, -1));
    assert_eq!(
        end(&mut md, 100, 0, false),
        EndStep::Answer(INVALID_TXN_STATE)
    );
    ongoing(&mut md, 0);
    finish(&mut md, false, 0);
    assert_eq!(end(&mut md, 100, 0, false), EndStep::Done(-1, -1));
    assert_eq!(
        end(&mut md, 100, 0, true),
        EndStep::Answer(INVALID_TXN_STATE)
    );
    // The coordinator's own abort may carry a newer epoch; a client's may not.
    ongoing(&mut md, 0);
    assert_eq!(
        end(&mut md, 100, 3, false),
        EndStep::Answer(PRODUCER_FENCED)
    );
    assert!(matches!(
        rules::end_txn(&mut md, 100, 3, false, false, 0, NOW, None),
        Ok(EndStep::Write { .. })
    ));
}

/// Kafka's table for TV2 EndTxn on an idle id (Retry: the request's epoch is the stored
/// one minus one; Current: the stored one):
///
/// |                | Abort Retry | Abort Current | Commit Retry | Commit Current |
/// | Empty          | PF          | EB            | PF           | ITS            |
/// | CompleteAbort  | NONE        | EB            | ITS          | ITS            |
/// | CompleteCommit | ITS         | EB            | NONE         | ITS            |
#[test]
fn end_txn_tv2_on_an_idle_id_follows_kafkas_table() {
    #[derive(Debug, PartialEq)]
    enum Want {
        Pf,
        Eb,
        Its,
        None,
    }
    let idle = |state: TxnState| {
        let mut md = fresh();
        write(&mut md, |md| {
            rules::init_producer_id(md, 60_000, None, NOW, None)
        });
        match state {
            TxnState::Empty => {}
            TxnState::CompleteAbort | TxnState::CompleteCommit => {
                ongoing(&mut md, 2);
                let commit = state == TxnState::CompleteCommit;
                let (pid, epoch) = (md.producer_id, md.producer_epoch);
                end_write(&mut md, |md| {
                    rules::end_txn(md, pid, epoch, commit, true, 2, NOW, None)
                });
                let done = rules::after_prepare(&mut md, pid, epoch, commit, 2, NOW)
                    .unwrap()
                    .unwrap();
                md.complete(&done).unwrap();
            }
            _ => unreachable!(),
        }
        assert_eq!(md.state, state);
        md
    };
    let cases = [
        (TxnState::Empty, [Want::Pf, Want::Eb, Want::Pf, Want::Its]),
        (
            TxnState::CompleteAbort,
            [Want::None, Want::Eb, Want::Its, Want::Its],
        ),
        (
            TxnState::CompleteCommit,
            [Want::Its, Want::Eb, Want::None, Want::Its],
        ),
    ];
    for (state, wants) in cases {
        for (i, want) in wants.into_iter().enumerate() {
            let mut md = idle(state);
            let commit = i >= 2;
            let retry = i % 2 == 0;
            let epoch = md.producer_epoch - i16::from(retry);
            let got = match rules::end_txn(&mut md, 100, epoch, commit, true, 2, NOW, None).unwrap()
            {
                EndStep::Answer(PRODUCER_FENCED) => Want::Pf,
                EndStep::Answer(INVALID_TXN_STATE) => Want::Its,
                EndStep::Done(pid, e) => {
                    assert_eq!((pid, e), (md.producer_id, md.producer_epoch));
                    Want::None
                }
                EndStep::Write { transit, .. } => {
                    assert_eq!(transit.state, TxnState::PrepareAbort);
                    assert_eq!(transit.producer_epoch, md.producer_epoch + 1);
                    assert_eq!(transit.start_ms, NOW, "an empty abort starts now");
                    Want::Eb
                }
                other => panic!("{state:?} case {i}: {other:?}"),
            };
            assert_eq!(got, want, "{state:?} commit={commit} retry={retry}");
        }
    }
}

#[test]
fn end_txn_tv2_bumps_the_epoch_and_a_retry_is_recognised() {
    let mut md = fresh();
    ongoing(&mut md, 2);
    let step = rules::end_txn(&mut md, 100, 0, true, true, 2, NOW, None).unwrap();
    let EndStep::Write { transit, .. } = step else {
        panic!("{step:?}")
    };
    assert_eq!(
        (transit.producer_epoch, transit.last_producer_epoch),
        (1, 0)
    );
    md.complete(&transit).unwrap();
    // A retry while markers are written: the stored epoch is the request's + 1.
    assert_eq!(
        rules::end_txn(&mut md, 100, 0, true, true, 2, NOW, None),
        Ok(EndStep::Answer(CONCURRENT_TRANSACTIONS))
    );
    assert_eq!(
        rules::end_txn(&mut md, 100, 1, true, true, 2, NOW, None),
        Ok(EndStep::Answer(PRODUCER_FENCED)),
        "the new epoch cannot end a transaction being prepared"
    );
    let done = rules::after_prepare(&mut md, 100, 0, true, 2, NOW)
        .unwrap()
        .unwrap();
    assert_eq!((done.producer_id, done.producer_epoch), (100, 1));
    md.complete(&done).unwrap();
    assert_eq!(
        rules::end_txn(&mut md, 100, 0, true, true, 2, NOW, None),
        Ok(EndStep::Done(100, 1))
    );
    // The next transaction runs at the new epoch.
    assert_eq!(
        rules::add_partitions(&mut md, 100, 0, &parts(&[("t", 0)]), NOW, 2),
        Ok(Step::Answer(PRODUCER_FENCED))
    );
    ongoing(&mut md, 2);
    assert_eq!(md.producer_epoch, 1);
}

#[test]
fn end_txn_tv2_epoch_overflow_moves_to_a_new_producer_id() {
    let mut md = fresh();
    md.producer_epoch = i16::MAX - 1;
    ongoing(&mut md, 2);
    let e = i16::MAX - 1;
    assert_eq!(
        rules::end_txn(&mut md, 100, e, true, true, 2, NOW, None),
        Ok(EndStep::NeedProducerId)
    );
    assert_eq!(md.pending, None);
    let step = rules::end_txn(&mut md, 100, e, true, true, 2, NOW, Some(777)).unwrap();
    let EndStep::Write { transit, .. } = step else {
        panic!("{step:?}")
    };
    assert_eq!(
        (transit.producer_epoch, transit.next_producer_id),
        (i16::MAX, 777)
    );
    md.complete(&transit).unwrap();
    let done = rules::after_prepare(&mut md, 100, e, true, 2, NOW)
        .unwrap()
        .unwrap();
    assert_eq!((done.producer_id, done.producer_epoch), (777, 0));
    assert_eq!((done.prev_producer_id, done.last_producer_epoch), (100, e));
    md.complete(&done).unwrap();
    // A retry with the old producer id at its last epoch is recognised.
    assert_eq!(
        rules::end_txn(&mut md, 100, e, true, true, 2, NOW, None),
        Ok(EndStep::Done(777, 0))
    );
}

#[test]
fn after_prepare_rechecks_the_state() {
    let mut md = fresh();
    ongoing(&mut md, 0);
    end_write(&mut md, |md| {
        rules::end_txn(md, 100, 0, true, true, 0, NOW, None)
    });
    assert_eq!(
        rules::after_prepare(&mut md, 5, 0, true, 0, NOW),
        Ok(Err(INVALID_PRODUCER_ID_MAPPING))
    );
    assert_eq!(
        rules::after_prepare(&mut md, 100, 1, true, 0, NOW),
        Ok(Err(PRODUCER_FENCED))
    );
    assert_eq!(
        rules::after_prepare(&mut md, 100, 0, false, 0, NOW),
        Ok(Err(INVALID_TXN_STATE))
    );
    let done = rules::after_prepare(&mut md, 100, 0, true, 0, NOW)
        .unwrap()
        .unwrap();
    assert_eq!(done.state, TxnState::CompleteCommit);
    assert_eq!(
        rules::after_prepare(&mut md, 100, 0, true, 0, NOW),
        Ok(Err(CONCURRENT_TRANSACTIONS))
    );
}

#[test]
fn markers_remove_partitions_one_by_one() {
    let mut md = fresh();
    ongoing(&mut md, 0);
    end_write(&mut md, |md| {
        rules::end_txn(md, 100, 0, true, true, 0, NOW, None)
    });
    md.remove_partition(&("t".into(), 0)).unwrap();
    assert_eq!(md.partitions, parts(&[("t", 1)]));
    md.remove_partition(&("t".into(), 1)).unwrap();
    assert!(md.partitions.is_empty());
}

#[test]
fn timeouts_and_expiry() {
    let mut md = fresh();
    assert!(!rules::timed_out(&md, NOW + 10_000_000));
    ongoing(&mut md, 0);
    assert!(!rules::timed_out(&md, NOW + 60_000));
    assert!(rules::timed_out(&md, NOW + 60_001));
    assert!(
        !rules::expired(&md, NOW + 1_000_000_000, 1000),
        "open: never expires"
    );
    finish(&mut md, false, 0);
    assert!(!rules::timed_out(&md, NOW + 60_001));
    assert!(!rules::expired(&md, NOW + 999, 1000));
    assert!(rules::expired(&md, NOW + 1000, 1000));
    let dead = md.prepare_dead().unwrap();
    assert_eq!(dead.state, TxnState::Dead);
    assert!(!rules::expired(&md, NOW + 1000, 1000), "already expiring");
    assert!(md.complete(&dead).is_err());
}
