//! One transactional id's state, as Kafka's `TransactionMetadata` keeps it, and its legal
//! transitions. Pure: no clock, no I/O, no locks.
//!
//! A change is made in two steps, as in Kafka: a `prepare_*` method checks that the
//! transition is legal, marks it pending (so no second one can start: the coordinator answers
//! CONCURRENT_TRANSACTIONS meanwhile) and returns the new state as a [`Transit`]; once that
//! is written to `__transaction_state`, [`TxnMetadata::complete`] makes it current (or
//! [`TxnMetadata::abandon`] clears the pending mark when the write failed).
//!
//! A transition that breaks the rules is a bug in the caller, never the client's doing; it is
//! reported as [`Illegal`] (answered UNKNOWN_SERVER_ERROR) instead of ending the broker.

use std::collections::BTreeSet;

/// A partition of a transaction: (topic, partition).
pub type TopicPartition = (String, i32);

/// Kafka's `RecordBatch.NO_PRODUCER_ID` / `NO_PRODUCER_EPOCH`.
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// The transaction protocol version a request was made with (Kafka's TransactionVersion):
/// 0 before KIP-890, 2 with the epoch bump at the end of every transaction.
pub type TxnVersion = i16;

pub fn supports_epoch_bump(v: TxnVersion) -> bool {
    v >= 2
}

/// Kafka's TransactionState, with the ids it is written with in `__transaction_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnState {
    /// No transaction yet (or the last one was fenced away before starting).
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    /// Being expired (`transactional.id.expiration.ms`); never written.
    Dead,
    /// A newer producer instance is fencing this one: the open transaction is being aborted.
    PrepareEpochFence,
}

impl TxnState {
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    /// The id in TransactionLogValue's TransactionStatus.
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    pub fn from_id(id: i8) -> Option<TxnState> {
        Self::ALL.into_iter().find(|s| s.id() == id)
    }

    /// The name DescribeTransactions and ListTransactions report.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<TxnState> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The states this one may be entered from.
    pub fn valid_previous(self) -> &'static [TxnState] {
        use TxnState::*;
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            PrepareAbort => &[
                Ongoing,
                PrepareEpochFence,
                Empty,
                CompleteCommit,
                CompleteAbort,
            ],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteAbort, CompleteCommit],
            PrepareEpochFence => &[Ongoing],
        }
    }

    /// Whether a transactional id in this state may expire.
    pub fn expiration_allowed(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }
}

/// An epoch is exhausted one below i16::MAX, so the coordinator can always fence with +1.
pub fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// A transition the rules do not allow: a coordinator bug.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Illegal(pub String);

/// The state a prepared transition leads to (Kafka's TxnTransitMetadata); what is written to
/// `__transaction_state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transit {
    pub producer_id: i64,
    pub prev_producer_id: i64,
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<TopicPartition>,
    pub start_ms: i64,
    pub last_update_ms: i64,
    pub client_version: TxnVersion,
}

/// One transactional id's state: the fields of its last written transition (reached through
/// `Deref`, so `md.producer_epoch` reads as in Kafka's TransactionMetadata), plus what is
/// only kept in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    /// As last written: producer id and epoch, the previous producer id (of the last
    /// committed transaction, after a rotation), the next one (handed out when a TV2 EndTxn
    /// overflowed the epoch, until the transaction completes), the epoch before the last bump
    /// (to recognise a retry of the request that bumped it), timeout, state, partitions,
    /// start time (-1: no transaction) and last update.
    pub current: Transit,
    /// The state a prepared transition is leading to.
    pub pending: Option<TxnState>,
    /// An epoch fence was prepared but its write failed: the next fence does not bump again.
    pub failed_epoch_fence: bool,
}

impl std::ops::Deref for TxnMetadata {
    type Target = Transit;
    fn deref(&self) -> &Transit {
        &self.current
    }
}

impl std::ops::DerefMut for TxnMetadata {
    fn deref_mut(&mut self) -> &mut Transit {
        &mut self.current
    }
}

impl TxnMetadata {
    /// A transactional id seen for the first time: a fresh producer id, no epoch yet.
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: i32, now: i64) -> Self {
        Self::from_transit(
            transactional_id,
            &Transit {
                producer_id,
                prev_producer_id: NO_PRODUCER_ID,
                next_producer_id: NO_PRODUCER_ID,
                producer_epoch: NO_PRODUCER_EPOCH,
                last_producer_epoch: NO_PRODUCER_EPOCH,
                timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                start_ms: -1,
                last_update_ms: now,
                client_version: 0,
            },
        )
    }

    /// The state as loaded from a record of `__transaction_state`.
    pub fn from_transit(transactional_id: &str, t: &Transit) -> Self {
        TxnMetadata {
            transactional_id: transactional_id.to_string(),
            current: t.clone(),
            pending: None,
            failed_epoch_fence: false,
        }
    }

    pub fn pending_in_progress(&self) -> bool {
        self.pending.is_some()
    }

    pub fn epoch_exhausted(&self) -> bool {
        epoch_exhausted(self.producer_epoch)
    }

    fn has_pending_transaction(&self) -> bool {
        matches!(
            self.state,
            TxnState::Ongoing | TxnState::PrepareAbort | TxnState::PrepareCommit
        )
    }

    /// The current state as a transition to `state` (the base every prepare_* starts from).
    fn unchanged(&self, state: TxnState) -> Transit {
        Transit {
            state,
            ..self.current.clone()
        }
    }

    /// Marks `t` pending if the transition to it is legal.
    fn prepare(&mut self, mut t: Transit) -> Result<Transit, Illegal> {
        if let Some(p) = self.pending {
            return Err(Illegal(format!(
                "{}: transition to {:?} while {p:?} is pending",
                self.transactional_id, t.state
            )));
        }
        if t.producer_id < 0 {
            return Err(Illegal(format!("illegal producer id {}", t.producer_id)));
        }
        if t.state != TxnState::Dead && t.producer_epoch < 0 {
            return Err(Illegal(format!(
                "illegal producer epoch {}",
                t.producer_epoch
            )));
        }
        if !t.state.valid_previous().contains(&self.state) {
            return Err(Illegal(format!(
                "{}: {:?} cannot follow {:?}",
                self.transactional_id, t.state, self.state
            )));
        }
        t.prev_producer_id = self.producer_id;
        self.pending = Some(t.state);
        Ok(t)
    }

    /// InitProducerId fencing an open transaction: the epoch goes up by one (unless a
    /// previous fence failed to be written, or it is at i16::MAX) and the transaction will be
    /// aborted under it.
    pub fn prepare_fence_epoch(&mut self) -> Result<Transit, Illegal> {
        let mut t = self.unchanged(TxnState::PrepareEpochFence);
        if !self.failed_epoch_fence && self.producer_epoch != i16::MAX {
            t.producer_epoch = self.producer_epoch + 1;
        }
        self.prepare(t)
    }

    /// InitProducerId on an idle transactional id: the next epoch. With `expected` (KIP-360:
    /// a producer recovering with its last id and epoch) the epoch must be the current one
    /// (bump), or the one before (a retry of the bump that answered it: no change); anything
    /// else is PRODUCER_FENCED, `Ok(Err(code))`.
    pub fn prepare_increment_epoch(
        &mut self,
        timeout_ms: i32,
        expected: Option<i16>,
        now: i64,
    ) -> Result<Result<Transit, i16>, Illegal> {
        if self.epoch_exhausted() {
            return Err(Illegal(format!(
                "no epochs left for producer id {}",
                self.producer_id
            )));
        }
        let mut t = self.unchanged(TxnState::Empty);
        let bumped = self.producer_epoch + 1;
        match expected {
            None => {
                t.producer_epoch = bumped;
                t.last_producer_epoch = NO_PRODUCER_EPOCH;
            }
            Some(e) if self.producer_epoch == NO_PRODUCER_EPOCH || e == self.producer_epoch => {
                t.producer_epoch = bumped;
                t.last_producer_epoch = self.producer_epoch;
            }
            Some(e) if e == self.last_producer_epoch => {}
            Some(_) => return Ok(Err(PRODUCER_FENCED)),
        }
        t.timeout_ms = timeout_ms;
        t.partitions.clear();
        t.start_ms = -1;
        t.last_update_ms = now;
        self.prepare(t).map(Ok)
    }

    /// InitProducerId when the epoch is exhausted: a new producer id at epoch 0.
    pub fn prepare_producer_id_rotation(
        &mut self,
        new_producer_id: i64,
        timeout_ms: i32,
        now: i64,
        record_last_epoch: bool,
    ) -> Result<Transit, Illegal> {
        if self.has_pending_transaction() {
            return Err(Illegal(format!(
                "{}: cannot rotate producer ids with a transaction pending",
                self.transactional_id
            )));
        }
        let mut t = self.unchanged(TxnState::Empty);
        t.producer_id = new_producer_id;
        t.producer_epoch = 0;
        t.last_producer_epoch = if record_last_epoch {
            self.producer_epoch
        } else {
            NO_PRODUCER_EPOCH
        };
        t.timeout_ms = timeout_ms;
        t.partitions.clear();
        t.start_ms = -1;
        t.last_update_ms = now;
        self.prepare(t)
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: the transaction is (now) Ongoing with these
    /// partitions too; it starts now unless it was already running.
    pub fn prepare_add_partitions(
        &mut self,
        added: &BTreeSet<TopicPartition>,
        now: i64,
        client_version: TxnVersion,
    ) -> Result<Transit, Illegal> {
        let mut t = self.unchanged(TxnState::Ongoing);
        if matches!(
            self.state,
            TxnState::Empty | TxnState::CompleteAbort | TxnState::CompleteCommit
        ) {
            t.start_ms = now;
        }
        t.partitions.extend(added.iter().cloned());
        t.last_update_ms = now;
        t.client_version = client_version;
        self.prepare(t)
    }

    /// EndTxn (or an abort the coordinator starts): PrepareCommit or PrepareAbort. With
    /// TV2 the epoch goes up by one here (KIP-890 part 2); `next_producer_id` is the id the
    /// producer moves to when that bump exhausts the epoch. A TV2 abort may come with no
    /// partitions added (`no_partition_added`): the transaction starts now.
    pub fn prepare_abort_or_commit(
        &mut self,
        state: TxnState,
        client_version: TxnVersion,
        next_producer_id: i64,
        now: i64,
        no_partition_added: bool,
    ) -> Result<Transit, Illegal> {
        let mut t = self.unchanged(state);
        if supports_epoch_bump(client_version) {
            // At i16::MAX only an abort is let through (without a bump), to recover.
            if !(self.producer_epoch == i16::MAX && state == TxnState::PrepareAbort) {
                t.producer_epoch = self.producer_epoch.saturating_add(1);
            }
            t.last_producer_epoch = self.producer_epoch;
        }
        t.start_ms = if no_partition_added {
            now
        } else {
            self.start_ms
        };
        t.next_producer_id = next_producer_id;
        t.last_update_ms = now;
        t.client_version = client_version;
        self.prepare(t)
    }

    /// After the markers of a prepared commit or abort are written: CompleteCommit or
    /// CompleteAbort, no partitions. A TV2 epoch overflow moves to the next producer id at
    /// epoch 0 here (the last epoch stays what the client last saw).
    pub fn prepare_complete(&mut self, now: i64) -> Result<Transit, Illegal> {
        self.failed_epoch_fence = false;
        let state = if self.state == TxnState::PrepareCommit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        let mut t = self.unchanged(state);
        if supports_epoch_bump(self.client_version) && self.next_producer_id != NO_PRODUCER_ID {
            t.producer_id = self.next_producer_id;
            t.producer_epoch = 0;
        }
        t.next_producer_id = NO_PRODUCER_ID;
        t.partitions.clear();
        t.last_update_ms = now;
        self.prepare(t)
    }

    /// Expiry (`transactional.id.expiration.ms`): Dead, removed once its tombstone is written.
    pub fn prepare_dead(&mut self) -> Result<Transit, Illegal> {
        let mut t = self.unchanged(TxnState::Dead);
        t.partitions.clear();
        self.prepare(t)
    }

    /// A marker for `tp` was written (or the partition is gone): one partition less to wait
    /// for. Only while a commit or abort is being completed.
    pub fn remove_partition(&mut self, tp: &TopicPartition) -> Result<(), Illegal> {
        if !matches!(self.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            return Err(Illegal(format!(
                "{}: removing a partition whose marker was written in state {:?}",
                self.transactional_id, self.state
            )));
        }
        self.partitions.remove(tp);
        Ok(())
    }

    /// The write of a failed transition did not happen: nothing is pending any more.
    pub fn abandon(&mut self) {
        self.pending = None;
    }

    /// `t` was written: it becomes the state, if it is the pending transition and consistent
    /// with the current one (Kafka's completeTransitionTo checks).
    pub fn complete(&mut self, t: &Transit) -> Result<(), Illegal> {
        let fail = |why: &str| {
            Err(Illegal(format!(
                "{}: completing {:?} from {:?} failed: {why}",
                self.transactional_id, t.state, self.state
            )))
        };
        let Some(to) = self.pending else {
            return fail("no transition is pending");
        };
        if to != t.state {
            return fail("another transition is pending");
        }
        match to {
            TxnState::Empty => {
                if (self.producer_epoch != t.producer_epoch && !self.valid_epoch_bump(t))
                    || !t.partitions.is_empty()
                    || t.start_ms != -1
                {
                    return fail("unexpected epoch, partitions or start time");
                }
            }
            TxnState::Ongoing => {
                if !self.valid_epoch(t)
                    || !t.partitions.is_superset(&self.partitions)
                    || self.timeout_ms != t.timeout_ms
                {
                    return fail("unexpected epoch, partitions or timeout");
                }
            }
            TxnState::PrepareAbort | TxnState::PrepareCommit => {
                let empty_abort = to == TxnState::PrepareAbort
                    && supports_epoch_bump(t.client_version)
                    && matches!(
                        self.state,
                        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                    );
                if !self.valid_epoch(t)
                    || self.partitions != t.partitions
                    || self.timeout_ms != t.timeout_ms
                    || !(self.start_ms == t.start_ms || empty_abort)
                {
                    return fail("unexpected epoch, partitions, timeout or start time");
                }
            }
            TxnState::CompleteAbort | TxnState::CompleteCommit => {
                if !self.valid_epoch(t) || self.timeout_ms != t.timeout_ms || t.start_ms == -1 {
                    return fail("unexpected epoch, timeout or start time");
                }
            }
            TxnState::PrepareEpochFence => return fail("a fence is never completed"),
            TxnState::Dead => return fail("an expired id is removed, never completed"),
        }
        self.current = t.clone();
        self.pending = None;
        Ok(())
    }

    /// Kafka's validProducerEpoch: the same producer id and epoch, except where TV2 bumps
    /// the epoch (Prepare*: the last epoch is the current one) or overflows it (Complete*
    /// at epoch 0 under a new producer id).
    fn valid_epoch(&self, t: &Transit) -> bool {
        let v2 = supports_epoch_bump(t.client_version);
        if v2
            && matches!(t.state, TxnState::CompleteCommit | TxnState::CompleteAbort)
            && t.producer_epoch == 0
        {
            return t.last_producer_epoch == self.last_producer_epoch
                && t.prev_producer_id == self.producer_id;
        }
        if v2 && matches!(t.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            return t.last_producer_epoch == self.producer_epoch
                && t.producer_id == self.producer_id;
        }
        t.producer_epoch == self.producer_epoch && t.producer_id == self.producer_id
    }

    fn valid_epoch_bump(&self, t: &Transit) -> bool {
        t.producer_epoch == self.producer_epoch.wrapping_add(1)
            || (t.producer_epoch == 0 && t.producer_id != self.producer_id)
    }
}

/// Kafka error codes the coordinator answers with.
pub const NONE: i16 = 0;
pub const CONCURRENT_TRANSACTIONS: i16 = 51;
pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
pub const INVALID_TXN_STATE: i16 = 48;
pub const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
pub const PRODUCER_FENCED: i16 = 90;
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
pub const TRANSACTION_ABORTABLE: i16 = 120;
pub const UNKNOWN_SERVER_ERROR: i16 = -1;
pub const INVALID_REQUEST: i16 = 42;
pub const NOT_COORDINATOR: i16 = 16;
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;
