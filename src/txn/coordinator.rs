//! The transaction coordinator: the owner of every transactional id's state on this broker,
//! and the shell around the pure [`rules`]: it looks the id up, applies a rule under the id's
//! lock, writes the resulting transition to `__transaction_state`, and only then makes it
//! current, as Kafka's TransactionCoordinator and TransactionStateManager do.
//!
//! Locks: the id map (with the [`Ownership`] of `__transaction_state` partitions beside it)
//! is held only to look up, insert or remove; each id has its own mutex, never held across a
//! write (a rule marks its transition pending instead, so a second request meanwhile gets
//! CONCURRENT_TRANSACTIONS). The map is never locked while an id's mutex is held.
//!
//! A transaction's end is completed in the background (`complete`): the markers go to every
//! partition of the transaction (`markers`), then the Complete state is written. The same
//! happens for the transactions found prepared when a partition is loaded, so a commit
//! decided by a coordinator that failed is finished by the next one.
//!
//! Beside this file: `admin` (DescribeTransactions, ListTransactions) and `timers` (the abort
//! of timed-out transactions, the expiry of idle ids).

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::{error, info, warn};

mod admin;
mod timers;

pub use admin::{Described, ListFilter, Listed};

use super::markers::{self, MarkerRequest, MarkerWriter, Outcome};
use super::records;
use super::rules::{self, EndStep, Step};
use super::state::*;
use super::store::{TOPIC, TxnLog};
use crate::clock::now_ms;
use crate::cluster::Partition;
use crate::group::coordinator::ownership::Ownership;
use crate::group::loader::PartitionLoads;

pub type IdFuture<'a> = Pin<Box<dyn Future<Output = Result<i64, i16>> + Send + 'a>>;

/// Where new producer ids come from.
pub trait ProducerIds: Send + Sync {
    fn allocate(&self) -> IdFuture<'_>;
}

#[derive(Debug, Clone)]
pub struct TxnConfig {
    pub max_timeout_ms: i32,
    pub abort_interval_ms: u64,
    pub id_expiration_ms: i64,
    pub id_expiration_interval_ms: u64,
}

impl TxnConfig {
    pub fn from_broker(c: &crate::config::BrokerConfig) -> TxnConfig {
        TxnConfig {
            max_timeout_ms: c.txn.max_timeout_ms,
            abort_interval_ms: c.txn.abort_interval_ms,
            id_expiration_ms: c.txn.id_expiration_ms,
            id_expiration_interval_ms: c.txn.id_expiration_interval_ms,
        }
    }
}

type Entry = Arc<Mutex<TxnMetadata>>;

struct Inner {
    owned: Ownership,
    txns: HashMap<String, Entry>,
}

/// A transaction whose end was decided: its markers, then its Complete state.
#[derive(Debug, Clone)]
struct PendingComplete {
    id: String,
    coordinator_epoch: i32,
    markers: MarkerRequest,
    complete: Transit,
}

pub struct Coordinator {
    cfg: TxnConfig,
    inner: Mutex<Inner>,
    /// Transactions to complete once [`Coordinator::start`] runs (found prepared by a load
    /// before the broker serves), then nothing: loads after that complete them at once.
    resume: Mutex<Option<Vec<PendingComplete>>>,
    log: Arc<dyn TxnLog>,
    markers: Arc<dyn MarkerWriter>,
    ids: Arc<dyn ProducerIds>,
}

impl Coordinator {
    pub fn new(
        cfg: TxnConfig,
        log: Arc<dyn TxnLog>,
        markers: Arc<dyn MarkerWriter>,
        ids: Arc<dyn ProducerIds>,
    ) -> Arc<Coordinator> {
        Arc::new(Coordinator {
            cfg,
            inner: Mutex::new(Inner {
                owned: Ownership::default(),
                txns: HashMap::new(),
            }),
            resume: Mutex::new(Some(Vec::new())),
            log,
            markers,
            ids,
        })
    }

    pub fn config(&self) -> &TxnConfig {
        &self.cfg
    }

    /// The `__transaction_state` partition of `id`, once any partition has been loaded.
    pub fn partition_of(&self, id: &str) -> Option<i32> {
        self.inner.lock().unwrap().owned.partition_of(id)
    }

    /// Whether any partition is coordinated (or loading) here yet.
    pub fn has_partitions(&self) -> bool {
        self.inner.lock().unwrap().owned.partition_of("").is_some()
    }

    /// The coordinator epoch `id` is served at and its state (None: unknown id), or
    /// NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS.
    fn lookup(&self, id: &str) -> Result<(i32, Option<Entry>), i16> {
        let g = self.inner.lock().unwrap();
        let epoch = g.owned.check(id)?;
        Ok((epoch, g.txns.get(id).cloned()))
    }

    /// `id`'s state if it is still coordinated here at `epoch`.
    fn current(&self, id: &str, epoch: i32) -> Option<Entry> {
        match self.lookup(id) {
            Ok((e, entry)) if e == epoch => entry,
            _ => None,
        }
    }

    async fn allocate(&self) -> Result<i64, i16> {
        self.ids.allocate().await
    }

    /// Writes `t` (the transition pending on `id`, prepared at coordinator epoch `epoch`)
    /// and then completes it; on failure the pending mark is cleared, unless `keep_pending`
    /// says the caller retries with that error. Kafka's appendTransactionToLog.
    async fn write(
        &self,
        id: &str,
        epoch: i32,
        t: &Transit,
        keep_pending: impl Fn(i16) -> bool,
    ) -> Result<(), i16> {
        let (partition, current) = {
            let g = self.inner.lock().unwrap();
            let p = g.owned.partition_of(id);
            (p, g.owned.check(id))
        };
        let partition = partition.ok_or(NOT_COORDINATOR)?;
        if current? != epoch {
            return Err(NOT_COORDINATOR);
        }
        let value = (t.state != TxnState::Dead).then(|| records::encode_value(t));
        let timeout = Duration::from_millis(t.timeout_ms.clamp(1, i32::MAX) as u64)
            .min(super::REQUEST_TIMEOUT);
        let written = self
            .log
            .append(partition, epoch, records::encode_key(id), value, timeout)
            .await;
        let entry = self.lookup(id);
        match (written, entry) {
            (Ok(()), Ok((e, Some(entry)))) if e == epoch => {
                let mut md = entry.lock().unwrap();
                if t.state == TxnState::Dead {
                    drop(md);
                    self.forget_dead(id, &entry, t);
                    return Ok(());
                }
                md.complete(t).map_err(|Illegal(why)| {
                    error!("{why}");
                    md.abandon();
                    UNKNOWN_SERVER_ERROR
                })
            }
            (Ok(()), Err(code)) => Err(code),
            (Ok(()), _) => Err(NOT_COORDINATOR),
            (Err(code), Ok((e, Some(entry)))) if e == epoch => {
                if !keep_pending(code) {
                    entry.lock().unwrap().abandon();
                }
                info!(
                    transactional_id = id,
                    "writing {:?} to {TOPIC} failed with error {code}", t.state
                );
                Err(code)
            }
            (Err(code), _) => Err(code),
        }
    }

    /// An expired id's tombstone is written: it leaves the map if nothing changed meanwhile.
    fn forget_dead(&self, id: &str, entry: &Entry, t: &Transit) {
        let mut g = self.inner.lock().unwrap();
        let md = entry.lock().unwrap();
        let same = g.txns.get(id).is_some_and(|e| Arc::ptr_eq(e, entry));
        if same && md.pending == Some(TxnState::Dead) && md.producer_epoch == t.producer_epoch {
            drop(md);
            g.txns.remove(id);
            info!(transactional_id = id, "expired transactional id removed");
        }
    }

    // ---- requests --------------------------------------------------------------------

    /// InitProducerId with a transactional id: (error, producer id, epoch).
    pub async fn init_producer_id(
        self: &Arc<Self>,
        id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> (i16, i64, i16) {
        let fail = |code| (code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH);
        if id.is_empty() {
            return fail(INVALID_REQUEST);
        }
        if timeout_ms <= 0 || timeout_ms > self.cfg.max_timeout_ms {
            return fail(INVALID_TRANSACTION_TIMEOUT);
        }
        let (epoch, entry) = match self.lookup(id) {
            Ok(v) => v,
            Err(code) => return fail(code),
        };
        let entry = match entry {
            Some(e) => e,
            None => {
                let pid = match self.allocate().await {
                    Ok(p) => p,
                    Err(code) => return fail(code),
                };
                let md = TxnMetadata::new(id, pid, timeout_ms, now_ms());
                let mut g = self.inner.lock().unwrap();
                if g.owned.check(id) != Ok(epoch) {
                    return fail(NOT_COORDINATOR);
                }
                g.txns
                    .entry(id.to_string())
                    .or_insert_with(|| Arc::new(Mutex::new(md)))
                    .clone()
            }
        };
        let mut new_pid = None;
        let step = loop {
            let step = {
                let mut md = entry.lock().unwrap();
                rules::init_producer_id(&mut md, timeout_ms, expected, now_ms(), new_pid)
            };
            match step {
                Ok(Step::NeedProducerId) => match self.allocate().await {
                    Ok(p) => new_pid = Some(p),
                    Err(code) => return fail(code),
                },
                Ok(s) => break s,
                Err(Illegal(why)) => {
                    error!("{why}");
                    return fail(UNKNOWN_SERVER_ERROR);
                }
            }
        };
        match step {
            Step::Answer(code) => fail(code),
            Step::Write(t) => match self.write(id, epoch, &t, |_| false).await {
                Ok(()) => {
                    info!(
                        transactional_id = id,
                        producer_id = t.producer_id,
                        producer_epoch = t.producer_epoch,
                        "initialized transactional id"
                    );
                    (0, t.producer_id, t.producer_epoch)
                }
                Err(code) => fail(code),
            },
            // The open transaction is aborted under the bumped epoch; the client retries.
            Step::Fence(t) => fail(match self.abort_fenced(id, &entry, &t).await {
                NONE => CONCURRENT_TRANSACTIONS,
                code => code,
            }),
            Step::NeedProducerId => fail(UNKNOWN_SERVER_ERROR),
        }
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn with the group's offsets partition).
    pub async fn add_partitions(
        &self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &BTreeSet<TopicPartition>,
        client_version: TxnVersion,
    ) -> i16 {
        if id.is_empty() {
            return INVALID_REQUEST;
        }
        let (epoch, entry) = match self.lookup(id) {
            Ok((e, Some(entry))) => (e, entry),
            Ok((_, None)) => return INVALID_PRODUCER_ID_MAPPING,
            Err(code) => return code,
        };
        let step = {
            let mut md = entry.lock().unwrap();
            rules::add_partitions(
                &mut md,
                producer_id,
                producer_epoch,
                partitions,
                now_ms(),
                client_version,
            )
        };
        match step {
            Ok(Step::Answer(code)) => code,
            Ok(Step::Write(t)) => self
                .write(id, epoch, &t, |_| false)
                .await
                .err()
                .unwrap_or(0),
            Ok(other) => {
                error!("add partitions: unexpected {other:?}");
                UNKNOWN_SERVER_ERROR
            }
            Err(Illegal(why)) => {
                error!("{why}");
                UNKNOWN_SERVER_ERROR
            }
        }
    }

    /// AddPartitionsToTxn with verify_only: each partition's error code.
    pub fn verify(
        &self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &BTreeSet<TopicPartition>,
    ) -> Vec<(TopicPartition, i16)> {
        let all = |code: i16| partitions.iter().map(|tp| (tp.clone(), code)).collect();
        if id.is_empty() {
            return all(INVALID_REQUEST);
        }
        let entry = match self.lookup(id) {
            Ok((_, Some(entry))) => entry,
            Ok((_, None)) => return all(INVALID_PRODUCER_ID_MAPPING),
            Err(code) => return all(code),
        };
        let md = entry.lock().unwrap();
        rules::verify_partitions(&md, producer_id, producer_epoch, partitions).unwrap_or_else(all)
    }

    /// EndTxn: (error, producer id, epoch); the producer id and epoch are the ones a TV2
    /// client continues with (-1, -1 otherwise and on errors).
    pub async fn end_txn(
        self: &Arc<Self>,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        client_version: TxnVersion,
    ) -> (i16, i64, i16) {
        self.end(
            id,
            producer_id,
            producer_epoch,
            commit,
            true,
            client_version,
        )
        .await
    }

    /// Kafka's endTransaction: a client's EndTxn, or an abort the coordinator starts.
    async fn end(
        self: &Arc<Self>,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        from_client: bool,
        client_version: TxnVersion,
    ) -> (i16, i64, i16) {
        let fail = |code| (code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH);
        if id.is_empty() {
            return fail(INVALID_REQUEST);
        }
        let (epoch, entry) = match self.lookup(id) {
            Ok((e, Some(entry))) => (e, entry),
            Ok((_, None)) => return fail(INVALID_PRODUCER_ID_MAPPING),
            Err(code) => return fail(code),
        };
        let mut next_pid = None;
        let (transit, epoch_fence) = loop {
            let step = {
                let mut md = entry.lock().unwrap();
                rules::end_txn(
                    &mut md,
                    producer_id,
                    producer_epoch,
                    commit,
                    from_client,
                    client_version,
                    now_ms(),
                    next_pid,
                )
            };
            match step {
                Ok(EndStep::Answer(code)) => return fail(code),
                Ok(EndStep::Done(pid, e)) => return (NONE, pid, e),
                Ok(EndStep::NeedProducerId) => match self.allocate().await {
                    Ok(p) => next_pid = Some(p),
                    Err(code) => return fail(code),
                },
                Ok(EndStep::Write {
                    transit,
                    epoch_fence,
                }) => break (transit, epoch_fence),
                Err(Illegal(why)) => {
                    error!("{why}");
                    return fail(UNKNOWN_SERVER_ERROR);
                }
            }
        };
        if let Err(code) = self.write(id, epoch, &transit, |_| false).await {
            if epoch_fence && let Some(entry) = self.current(id, epoch) {
                // Never returned to a client: the next fence does not bump again.
                entry.lock().unwrap().failed_epoch_fence = true;
            }
            return fail(code);
        }
        let Some(entry) = self.current(id, epoch) else {
            return fail(NOT_COORDINATOR);
        };
        let pending = {
            let mut md = entry.lock().unwrap();
            match rules::after_prepare(
                &mut md,
                producer_id,
                producer_epoch,
                commit,
                client_version,
                now_ms(),
            ) {
                Ok(Ok(complete)) => pending_complete(&md, epoch, commit, complete),
                Ok(Err(code)) => return fail(code),
                Err(Illegal(why)) => {
                    error!("{why}");
                    return fail(UNKNOWN_SERVER_ERROR);
                }
            }
        };
        let answer = (
            NONE,
            pending.complete.producer_id,
            pending.complete.producer_epoch,
        );
        let me = self.clone();
        tokio::spawn(async move { me.complete(pending).await });
        if supports_epoch_bump(client_version) {
            answer
        } else {
            (NONE, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        }
    }

    /// Writes the markers of a decided transaction until every partition has one, then its
    /// Complete state; gives up when the id is no longer coordinated here at the same epoch
    /// (the new coordinator finishes it after loading) or a marker was refused for good.
    async fn complete(self: Arc<Self>, mut pc: PendingComplete) {
        let mut backoff = MIN_BACKOFF;
        loop {
            let Some(entry) = self.current(&pc.id, pc.coordinator_epoch) else {
                return;
            };
            pc.markers.partitions = entry.lock().unwrap().partitions.iter().cloned().collect();
            if pc.markers.partitions.is_empty() {
                break;
            }
            let results = self.markers.write(&pc.markers).await;
            let mut retry = false;
            {
                let mut md = entry.lock().unwrap();
                for (tp, written) in results {
                    match markers::classify(written) {
                        Outcome::Done => {
                            if let Err(Illegal(why)) = md.remove_partition(&tp) {
                                error!("{why}");
                                return;
                            }
                        }
                        Outcome::Retry => retry = true,
                        Outcome::Abandon => {
                            warn!(
                                transactional_id = pc.id,
                                topic = tp.0,
                                partition = tp.1,
                                "marker refused for good ({written:?}): not completing"
                            );
                            return;
                        }
                    }
                }
            }
            if retry {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
        let keep = |code| code == COORDINATOR_NOT_AVAILABLE;
        loop {
            match self
                .write(&pc.id, pc.coordinator_epoch, &pc.complete, keep)
                .await
            {
                Ok(()) => return,
                Err(COORDINATOR_NOT_AVAILABLE) => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                // No longer ours (or loading): whoever loads the partition completes it.
                Err(code) => {
                    info!(
                        transactional_id = pc.id,
                        "completion not written: error {code}"
                    );
                    return;
                }
            }
        }
    }

    // ---- loading ---------------------------------------------------------------------
}

impl PartitionLoads for Coordinator {
    type Loaded = HashMap<String, Transit>;
    const TOPIC: &'static str = TOPIC;

    /// This broker leads `partition` (of `count`) of `__transaction_state` at `epoch`.
    /// Returns whether the caller must load it now (then [`Coordinator::finish_load`]);
    /// meanwhile its ids get COORDINATOR_LOAD_IN_PROGRESS.
    fn begin_load(&self, partition: i32, epoch: i32, count: i32) -> bool {
        self.inner
            .lock()
            .unwrap()
            .owned
            .begin_load(partition, epoch, count)
    }

    fn is_loading(&self, partition: i32, epoch: i32) -> bool {
        self.inner
            .lock()
            .unwrap()
            .owned
            .is_loading(partition, epoch)
    }

    /// Installs the ids replayed from `partition` (loaded at `epoch`) unless the load is
    /// stale, and completes the transactions found prepared (their markers may not all have
    /// been written). Ids that belong to another partition are left to that one.
    fn finish_load(
        self: &Arc<Self>,
        partition: i32,
        epoch: i32,
        loaded: HashMap<String, Transit>,
    ) -> bool {
        let mut resume = Vec::new();
        let count;
        {
            let mut g = self.inner.lock().unwrap();
            let Inner { owned, txns } = &mut *g;
            if !owned.finish_load(partition, epoch) {
                return false;
            }
            txns.retain(|id, _| owned.partition_of(id) != Some(partition));
            count = loaded.len();
            for (id, t) in loaded {
                if owned.partition_of(&id) != Some(partition) {
                    continue;
                }
                let mut md = TxnMetadata::from_transit(&id, &t);
                let commit = md.state == TxnState::PrepareCommit;
                if matches!(md.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
                    match md.prepare_complete(now_ms()) {
                        Ok(complete) => resume.push(pending_complete(&md, epoch, commit, complete)),
                        Err(Illegal(why)) => error!("{why}"),
                    }
                }
                txns.insert(id, Arc::new(Mutex::new(md)));
            }
        }
        if count > 0 {
            info!(
                partition,
                epoch,
                transactional_ids = count,
                resumed = resume.len(),
                "coordinating the transactions of {TOPIC}-{partition}"
            );
        }
        if let Some(queue) = self.resume.lock().unwrap().as_mut() {
            queue.extend(resume);
            return true;
        }
        for pc in resume {
            let me = self.clone();
            tokio::spawn(async move { me.complete(pc).await });
        }
        true
    }

    /// This broker no longer leads `partition`: its ids are forgotten here at once (their
    /// requests get NOT_COORDINATOR; markers in flight stop at their next step).
    fn unload(&self, partition: i32) {
        let mut g = self.inner.lock().unwrap();
        let Inner { owned, txns } = &mut *g;
        if owned.unload(partition) {
            txns.retain(|id, _| owned.partition_of(id) != Some(partition));
        }
    }

    fn replay(parts: &[Arc<Partition>], _count: i32) -> anyhow::Result<Vec<Self::Loaded>> {
        parts
            .iter()
            .map(|p| super::store::load_partition(p))
            .collect()
    }
}

const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// The background completion of `md`'s prepared end: markers at its current producer id and
/// epoch (after a TV2 bump), then `complete`.
fn pending_complete(
    md: &TxnMetadata,
    epoch: i32,
    commit: bool,
    complete: Transit,
) -> PendingComplete {
    PendingComplete {
        id: md.transactional_id.clone(),
        coordinator_epoch: epoch,
        markers: MarkerRequest {
            producer_id: md.producer_id,
            producer_epoch: md.producer_epoch,
            coordinator_epoch: epoch,
            commit,
            transaction_version: md.client_version,
            partitions: md.partitions.iter().cloned().collect(),
        },
        complete,
    }
}
