//! The coordinator shell with an in-memory log, a scripted marker writer and a counter for
//! producer ids: every request path, the background completion, loading and the timers.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use super::coordinator::*;
use super::markers::{MarkerFuture, MarkerRequest, MarkerWriter, Written};
use super::records;
use super::state::*;
use super::store::MemoryLog;
use crate::group::loader::PartitionLoads;

#[derive(Default)]
struct Markers {
    sent: Mutex<Vec<MarkerRequest>>,
    /// Answers to give, one list per call (then every partition succeeds).
    script: Mutex<VecDeque<i16>>,
}

impl MarkerWriter for Markers {
    fn write<'a>(&'a self, m: &'a MarkerRequest) -> MarkerFuture<'a> {
        Box::pin(async move {
            self.sent.lock().unwrap().push(m.clone());
            let code = self.script.lock().unwrap().pop_front().unwrap_or(0);
            m.partitions
                .iter()
                .map(|tp| (tp.clone(), Written::Code(code)))
                .collect()
        })
    }
}

struct Ids(AtomicI64);

impl ProducerIds for Ids {
    fn allocate(&self) -> IdFuture<'_> {
        Box::pin(async move { Ok(self.0.fetch_add(1, Ordering::SeqCst)) })
    }
}

struct Fx {
    c: Arc<Coordinator>,
    log: Arc<MemoryLog>,
    markers: Arc<Markers>,
}

const PARTITIONS: i32 = 4;
const EPOCH: i32 = 3;

fn cfg() -> TxnConfig {
    TxnConfig {
        max_timeout_ms: 900_000,
        abort_interval_ms: 10_000,
        id_expiration_ms: 1_000,
        id_expiration_interval_ms: 3_600_000,
    }
}

/// A coordinator owning every partition at `EPOCH`, already started.
fn fx() -> Fx {
    let log = Arc::new(MemoryLog::default());
    let markers = Arc::new(Markers::default());
    let c = Coordinator::new(
        cfg(),
        log.clone(),
        markers.clone(),
        Arc::new(Ids(AtomicI64::new(1000))),
    );
    for p in 0..PARTITIONS {
        assert!(c.begin_load(p, EPOCH, PARTITIONS));
        assert!(c.finish_load(p, EPOCH, HashMap::new()));
    }
    c.start();
    Fx { c, log, markers }
}

fn parts(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
    list.iter().map(|(t, p)| (t.to_string(), *p)).collect()
}

/// The last value written for `id`.
fn last_written(log: &MemoryLog, id: &str) -> Option<Transit> {
    let key = records::encode_key(id);
    let a = log.appended.lock().unwrap();
    let (_, _, _, v) = a.iter().rev().find(|(_, _, k, _)| *k == key)?;
    v.clone().map(|v| records::decode_value(v).unwrap())
}

/// Waits (bounded) until `id` is described in `state`.
async fn wait_state(c: &Coordinator, id: &str, state: TxnState) -> Described {
    for _ in 0..1000 {
        if let Ok(d) = c.describe(id)
            && d.state == state
        {
            return d;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{id} never reached {state:?}: {:?}", c.describe(id));
}

#[tokio::test(start_paused = true)]
async fn init_writes_the_new_producer_and_bumps_on_the_next_instance() {
    let f = fx();
    assert_eq!(f.c.init_producer_id("a", 60_000, None).await, (0, 1000, 0));
    let t = last_written(&f.log, "a").unwrap();
    assert_eq!(
        (t.producer_id, t.producer_epoch, t.state),
        (1000, 0, TxnState::Empty)
    );
    let (p, epoch, _, _) = f.log.appended.lock().unwrap()[0].clone();
    assert_eq!((p, epoch), (records::partition_for("a", PARTITIONS), EPOCH));
    assert_eq!(f.c.init_producer_id("a", 60_000, None).await, (0, 1000, 1));
    assert_eq!(
        f.c.init_producer_id("a", 900_001, None).await.0,
        INVALID_TRANSACTION_TIMEOUT
    );
    assert_eq!(
        f.c.init_producer_id("a", 0, None).await.0,
        INVALID_TRANSACTION_TIMEOUT
    );
    assert_eq!(
        f.c.init_producer_id("", 1000, None).await.0,
        INVALID_REQUEST
    );
}

#[tokio::test(start_paused = true)]
async fn a_commit_writes_markers_then_completes() {
    let f = fx();
    let (_, pid, epoch) = f.c.init_producer_id("a", 60_000, None).await;
    let p = parts(&[("t", 0), ("t", 1), ("u", 0)]);
    assert_eq!(f.c.add_partitions("a", pid, epoch, &p, 0).await, 0);
    assert_eq!(
        wait_state(&f.c, "a", TxnState::Ongoing).await.topics.len(),
        2
    );
    assert_eq!(f.c.end_txn("a", pid, epoch, true, 0).await, (0, -1, -1));
    let d = wait_state(&f.c, "a", TxnState::CompleteCommit).await;
    assert!(d.topics.is_empty());
    let sent = f.markers.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    assert_eq!((sent[0].producer_id, sent[0].producer_epoch), (pid, epoch));
    assert_eq!((sent[0].coordinator_epoch, sent[0].commit), (EPOCH, true));
    assert_eq!(
        sent[0].partitions.iter().cloned().collect::<BTreeSet<_>>(),
        p
    );
    assert_eq!(
        last_written(&f.log, "a").unwrap().state,
        TxnState::CompleteCommit
    );
    // A retry of the commit succeeds without a write.
    let writes = f.log.appended.lock().unwrap().len();
    assert_eq!(f.c.end_txn("a", pid, epoch, true, 0).await.0, 0);
    assert_eq!(f.log.appended.lock().unwrap().len(), writes);
}

#[tokio::test(start_paused = true)]
async fn a_tv2_end_answers_the_bumped_epoch_and_marks_with_it() {
    let f = fx();
    let (_, pid, epoch) = f.c.init_producer_id("a", 60_000, None).await;
    f.c.add_partitions("a", pid, epoch, &parts(&[("t", 0)]), 2)
        .await;
    assert_eq!(
        f.c.end_txn("a", pid, epoch, false, 2).await,
        (0, pid, epoch + 1)
    );
    wait_state(&f.c, "a", TxnState::CompleteAbort).await;
    let sent = f.markers.sent.lock().unwrap().clone();
    assert_eq!(
        (sent[0].producer_epoch, sent[0].transaction_version),
        (epoch + 1, 2)
    );
    assert!(!sent[0].commit);
    // The old epoch is now fenced; the new one works.
    assert_eq!(
        f.c.add_partitions("a", pid, epoch, &parts(&[("t", 0)]), 2)
            .await,
        PRODUCER_FENCED
    );
    assert_eq!(
        f.c.add_partitions("a", pid, epoch + 1, &parts(&[("t", 0)]), 2)
            .await,
        0
    );
}

#[tokio::test(start_paused = true)]
async fn markers_are_retried_until_written() {
    let f = fx();
    let (_, pid, epoch) = f.c.init_producer_id("a", 60_000, None).await;
    f.c.add_partitions("a", pid, epoch, &parts(&[("t", 0)]), 0)
        .await;
    f.markers.script.lock().unwrap().extend([
        kafka_protocol::ResponseError::NotLeaderOrFollower.code(),
        kafka_protocol::ResponseError::NotEnoughReplicas.code(),
    ]);
    f.c.end_txn("a", pid, epoch, true, 0).await;
    wait_state(&f.c, "a", TxnState::CompleteCommit).await;
    assert_eq!(f.markers.sent.lock().unwrap().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_fenced_marker_stops_the_completion() {
    let f = fx();
    let (_, pid, epoch) = f.c.init_producer_id("a", 60_000, None).await;
    f.c.add_partitions("a", pid, epoch, &parts(&[("t", 0)]), 0)
        .await;
    f.markers
        .script
        .lock()
        .unwrap()
        .push_back(INVALID_PRODUCER_EPOCH);
    f.c.end_txn("a", pid, epoch, true, 0).await;
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert_eq!(f.markers.sent.lock().unwrap().len(), 1);
    assert_eq!(f.c.describe("a").unwrap().state, TxnState::PrepareCommit);
    assert_eq!(
        f.c.init_producer_id("a", 60_000, None).await.0,
        CONCURRENT_TRANSACTIONS
    );
}

/// A new instance (InitProducerId) fences the open transaction of `client_version` and
/// aborts it; returns the aborting markers' epoch and the new instance's, relative to the
/// first epoch.
async fn fence_open_transaction(client_version: i16) -> (i16, i16) {
    let f = fx();
    let (_, pid, epoch) = f.c.init_producer_id("a", 60_000, None).await;
    f.c.add_partitions("a", pid, epoch, &parts(&[("t", 0)]), client_version)
        .await;
    assert_eq!(
        f.c.init_producer_id("a", 60_000, None).await.0,
        CONCURRENT_TRANSACTIONS
    );
    wait_state(&f.c, "a", TxnState::CompleteAbort).await;
    let sent = f.markers.sent.lock().unwrap().clone();
    assert!(!sent[0].commit);
    let (code, p2, e2) = f.c.init_producer_id("a", 60_000, None).await;
    assert_eq!((code, p2), (0, pid));
    assert_eq!(
        f.c.end_txn("a", pid, epoch, true, client_version).await.0,
        PRODUCER_FENCED,
        "the zombie"
    );
    (sent[0].producer_epoch - epoch, e2 - epoch)
}

#[tokio::test(start_paused = true)]
async fn a_new_instance_aborts_the_open_transaction() {
    // The fence bumps the epoch once; the abort follows the transaction's own version, as
    // Kafka's coordinator does: a TV2 abort bumps once more, an older one does not.
    assert_eq!(fence_open_transaction(0).await, (1, 2));
    assert_eq!(fence_open_transaction(2).await, (2, 3));
}

#[tokio::test(start_paused = true)]
async fn a_failed_write_leaves_nothing_pending() {
    let f = fx();
    let (_, pid, epoch) = f.c.init_producer_id("a", 60_000, None).await;
    *f.log.fail.lock().unwrap() = Some(COORDINATOR_NOT_AVAILABLE);
    assert_eq!(
        f.c.add_partitions("a", pid, epoch, &parts(&[("t", 0)]), 0)
            .await,
        COORDINATOR_NOT_AVAILABLE
    );
    *f.log.fail.lock().unwrap() = None;
    assert_eq!(f.c.describe("a").unwrap().state, TxnState::Empty);
    assert_eq!(
        f.c.add_partitions("a", pid, epoch, &parts(&[("t", 0)]), 0)
            .await,
        0
    );
}

#[tokio::test(start_paused = true)]
async fn unknown_ids_and_unowned_partitions() {
    let f = fx();
    let p = parts(&[("t", 0)]);
    assert_eq!(
        f.c.add_partitions("zz", 1, 0, &p, 0).await,
        INVALID_PRODUCER_ID_MAPPING
    );
    assert_eq!(
        f.c.end_txn("zz", 1, 0, true, 0).await.0,
        INVALID_PRODUCER_ID_MAPPING
    );
    assert_eq!(f.c.describe("zz"), Err(TRANSACTIONAL_ID_NOT_FOUND));
    assert_eq!(f.c.describe(""), Err(INVALID_REQUEST));
    assert_eq!(
        f.c.verify("zz", 1, 0, &p),
        vec![(("t".into(), 0), INVALID_PRODUCER_ID_MAPPING)]
    );
    let (_, pid, epoch) = f.c.init_producer_id("a", 60_000, None).await;
    f.c.unload(records::partition_for("a", PARTITIONS));
    assert_eq!(
        f.c.add_partitions("a", pid, epoch, &p, 0).await,
        NOT_COORDINATOR
    );
    assert_eq!(f.c.describe("a"), Err(NOT_COORDINATOR));
}

#[tokio::test(start_paused = true)]
async fn a_load_resumes_prepared_transactions_and_reports_loading() {
    let log = Arc::new(MemoryLog::default());
    let markers = Arc::new(Markers::default());
    let c = Coordinator::new(
        cfg(),
        log.clone(),
        markers.clone(),
        Arc::new(Ids(AtomicI64::new(1))),
    );
    let p = records::partition_for("a", PARTITIONS);
    assert!(c.begin_load(p, 7, PARTITIONS));
    assert_eq!(c.describe("a"), Err(COORDINATOR_LOAD_IN_PROGRESS));
    assert_eq!(
        c.list(&ListFilter::default(), 0),
        Err(COORDINATOR_LOAD_IN_PROGRESS)
    );
    let prepared = Transit {
        producer_id: 5,
        prev_producer_id: 5,
        next_producer_id: NO_PRODUCER_ID,
        producer_epoch: 2,
        last_producer_epoch: NO_PRODUCER_EPOCH,
        timeout_ms: 60_000,
        state: TxnState::PrepareCommit,
        partitions: parts(&[("t", 3)]),
        start_ms: 100,
        last_update_ms: 200,
        client_version: 0,
    };
    assert!(c.finish_load(p, 7, HashMap::from([("a".to_string(), prepared)])));
    assert!(
        !c.finish_load(p, 7, HashMap::new()),
        "a second finish is stale"
    );
    assert!(
        markers.sent.lock().unwrap().is_empty(),
        "nothing before start"
    );
    c.start();
    wait_state(&c, "a", TxnState::CompleteCommit).await;
    let sent = markers.sent.lock().unwrap().clone();
    assert_eq!(
        (
            sent[0].producer_id,
            sent[0].producer_epoch,
            sent[0].coordinator_epoch
        ),
        (5, 2, 7)
    );
    assert_eq!(
        log.appended.lock().unwrap()[0].1,
        7,
        "written at the new epoch"
    );
}

#[tokio::test(start_paused = true)]
async fn timed_out_transactions_are_aborted_and_idle_ids_expire() {
    let f = fx();
    let (_, pid, epoch) = f.c.init_producer_id("a", 1_000, None).await;
    f.c.add_partitions("a", pid, epoch, &parts(&[("t", 0)]), 0)
        .await;
    f.c.init_producer_id("b", 60_000, None).await;
    let now = crate::clock::now_ms();
    assert_eq!(f.c.abort_timed_out(now).await, 0);
    assert_eq!(f.c.abort_timed_out(now + 2_000).await, 1);
    wait_state(&f.c, "a", TxnState::CompleteAbort).await;
    assert_eq!(
        f.c.add_partitions("a", pid, epoch, &parts(&[("t", 0)]), 0)
            .await,
        PRODUCER_FENCED
    );
    // Both idle now; expiry writes tombstones and forgets them.
    assert_eq!(f.c.expire_ids(now + 3_000).await, 2);
    assert_eq!(f.c.describe("a"), Err(TRANSACTIONAL_ID_NOT_FOUND));
    assert!(last_written(&f.log, "b").is_none(), "a tombstone");
    // A forgotten id starts over with a new producer id.
    let (code, p2, e2) = f.c.init_producer_id("a", 1_000, None).await;
    assert_eq!(code, 0);
    assert_ne!(p2, pid);
    assert_eq!(e2, 0);
}

#[tokio::test(start_paused = true)]
async fn list_filters_as_kafka() {
    let f = fx();
    let (_, pa, ea) = f.c.init_producer_id("app-1", 60_000, None).await;
    f.c.init_producer_id("app-2", 60_000, None).await;
    f.c.init_producer_id("other", 60_000, None).await;
    f.c.add_partitions("app-1", pa, ea, &parts(&[("t", 0)]), 0)
        .await;
    let list = |filter: ListFilter, now: i64| {
        let (l, unknown) = f.c.list(&filter, now).unwrap();
        (
            l.into_iter()
                .map(|l| l.transactional_id)
                .collect::<Vec<_>>(),
            unknown,
        )
    };
    let now = crate::clock::now_ms();
    assert_eq!(
        list(ListFilter::default(), now).0,
        vec!["app-1", "app-2", "other"]
    );
    let by_state = ListFilter {
        states: vec!["Ongoing".into(), "Bogus".into()],
        ..Default::default()
    };
    assert_eq!(
        list(by_state, now),
        (vec!["app-1".into()], vec!["Bogus".into()])
    );
    let by_pid = ListFilter {
        producer_ids: vec![pa],
        ..Default::default()
    };
    assert_eq!(list(by_pid, now).0, vec!["app-1"]);
    let by_pattern = ListFilter {
        pattern: Some(regex::Regex::new("^(?:app-.)$").unwrap()),
        ..Default::default()
    };
    assert_eq!(list(by_pattern, now).0, vec!["app-1", "app-2"]);
    let long = ListFilter {
        min_duration_ms: 10_000,
        states: vec!["Ongoing".into()],
        ..Default::default()
    };
    assert!(list(long, now).0.is_empty());
    let long = ListFilter {
        min_duration_ms: 10_000,
        states: vec!["Ongoing".into()],
        ..Default::default()
    };
    assert_eq!(list(long, now + 20_000).0, vec!["app-1"]);
}
