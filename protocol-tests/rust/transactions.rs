//! The transaction coordinator over real sockets against the real binary, with requests as
//! transactional clients send them: FindCoordinator for a transactional id, InitProducerId
//! (epochs, fencing, timeouts), AddPartitionsToTxn and AddOffsetsToTxn, transactional
//! produces with KIP-890 verification (v9) and the implicit add of transaction version 2
//! (Produce v12), EndTxn v3 and v5, the markers it leaves in the partitions, WriteTxnMarkers,
//! DescribeTransactions and ListTransactions; then a kill -9 and restart: the state is
//! reloaded from `__transaction_state`; and a transaction left open past its timeout is
//! aborted by the coordinator.

mod common;

use bytes::Bytes;
use common::txn::{self, *};
use common::{Client, TestBroker, create_topic_request};
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::*;

const TOPIC: &str = "txn-data";

fn produce(c: &mut Client, version: i16, id: &str, partition: i32, batch: Bytes) -> (i16, i64) {
    txn::produce(c, version, id, TOPIC, partition, batch)
}

fn batches(c: &mut Client, partition: i32) -> Vec<Seen> {
    txn::batches(c, TOPIC, partition)
}

fn start() -> (TestBroker, Client) {
    let b = TestBroker::start(&[
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
        "transaction.max.timeout.ms=120000",
    ]);
    let mut c = b.connect();
    let created: CreateTopicsResponse = c.call(
        ApiKey::CreateTopics,
        7,
        &create_topic_request(TOPIC, 2, 1, &[]),
    );
    assert_eq!(created.topics[0].error_code, 0);
    (b, c)
}

#[test]
fn transactions_of_a_version_0_client() {
    let (mut b, mut c) = start();
    // The coordinator is this node; the lookup creates __transaction_state.
    assert_eq!(find_coordinator(&mut c, "app"), (0, 1));
    let mut r = MetadataRequest::default();
    let mut t = metadata_request::MetadataRequestTopic::default();
    t.name = Some(TopicName(s("__transaction_state")));
    r.topics = Some(vec![t]);
    let md: MetadataResponse = c.call(ApiKey::Metadata, 12, &r);
    assert_eq!(md.topics[0].partitions.len(), 50);
    assert!(md.topics[0].is_internal);

    assert_eq!(
        init(&mut c, "app", 120_001, 4).0,
        E::InvalidTransactionTimeout.code()
    );
    // The coordinator may still be loading the new topic: retried as clients do.
    let (pid, epoch) = init_retrying(&mut c, "app", 60_000);
    assert_eq!(epoch, 0);
    // A second instance bumps the epoch; the first is fenced from then on.
    let (code, pid2, epoch) = init(&mut c, "app", 60_000, 4);
    assert_eq!((code, pid2, epoch), (0, pid, 1));
    assert_eq!(
        add_partitions(&mut c, "app", pid, 0, &[(TOPIC, 0)]),
        vec![E::ProducerFenced.code()]
    );

    // KIP-890 part 1: a transactional produce to a partition never added is refused.
    let (code, _) = produce(&mut c, 9, "app", 0, txn_batch(&["x"], pid, epoch, 0));
    assert_eq!(code, E::InvalidTxnState.code());
    // Unknown partitions spoil the whole add.
    assert_eq!(
        add_partitions(&mut c, "app", pid, epoch, &[(TOPIC, 0), (TOPIC, 7)]),
        vec![
            E::OperationNotAttempted.code(),
            E::UnknownTopicOrPartition.code()
        ]
    );
    assert_eq!(
        add_partitions(&mut c, "app", pid, epoch, &[(TOPIC, 0), (TOPIC, 1)]),
        vec![0, 0]
    );
    assert_eq!(
        describe(&mut c, "app").transaction_state.as_str(),
        "Ongoing"
    );
    assert_eq!(
        produce(&mut c, 9, "app", 0, txn_batch(&["a", "b"], pid, epoch, 0)),
        (0, 0)
    );
    assert_eq!(
        produce(&mut c, 9, "app", 1, txn_batch(&["c"], pid, epoch, 0)).0,
        0
    );
    // AddOffsetsToTxn adds the group's __consumer_offsets partition.
    let mut r = AddOffsetsToTxnRequest::default();
    r.transactional_id = txn_id("app");
    r.producer_id = ProducerId(pid);
    r.producer_epoch = epoch;
    r.group_id = GroupId(s("g"));
    let resp: AddOffsetsToTxnResponse = c.call(ApiKey::AddOffsetsToTxn, 3, &r);
    assert_eq!(resp.error_code, 0);
    let d = describe(&mut c, "app");
    let topics: Vec<&str> = d.topics.iter().map(|t| t.topic.0.as_str()).collect();
    assert_eq!(topics, vec!["__consumer_offsets", TOPIC]);
    assert_eq!(
        (d.producer_id.0, d.producer_epoch, d.transaction_timeout_ms),
        (pid, epoch, 60_000)
    );

    // Commit: answered once prepared; the markers follow.
    let resp = end_txn(&mut c, 3, "app", pid, epoch, true);
    assert_eq!(resp.error_code, 0);
    wait_state(&mut c, "app", "CompleteCommit");
    let p0 = batches(&mut c, 0);
    assert_eq!(p0.len(), 2, "{p0:?}");
    assert_eq!(p0[0], Seen::data(pid, epoch, &["a", "b"]));
    assert_eq!(p0[1], Seen::marker(pid, epoch, true));
    assert_eq!(batches(&mut c, 1)[1], Seen::marker(pid, epoch, true));
    // A retry of the commit succeeds; an abort now is a state error.
    assert_eq!(end_txn(&mut c, 3, "app", pid, epoch, true).error_code, 0);
    assert_eq!(
        end_txn(&mut c, 3, "app", pid, epoch, false).error_code,
        E::InvalidTxnState.code()
    );
    // Old versions get INVALID_PRODUCER_EPOCH where newer get PRODUCER_FENCED.
    assert_eq!(
        end_txn(&mut c, 1, "app", pid, 0, true).error_code,
        E::InvalidProducerEpoch.code()
    );

    // A transaction left open is aborted by the next instance (which retries meanwhile).
    assert_eq!(
        add_partitions(&mut c, "app", pid, epoch, &[(TOPIC, 1)]),
        vec![0]
    );
    assert_eq!(
        produce(&mut c, 9, "app", 1, txn_batch(&["z"], pid, epoch, 1)).0,
        0
    );
    let (_, epoch2) = init_retrying(&mut c, "app", 60_000);
    assert!(epoch2 > epoch);
    let p1 = batches(&mut c, 1);
    assert_eq!(p1.last().unwrap().values, vec!["ABORT"], "{p1:?}");
    assert_eq!(
        end_txn(&mut c, 3, "app", pid, epoch, false).error_code,
        E::ProducerFenced.code(),
        "the zombie"
    );

    // The state survives a kill -9.
    b.kill9();
    b.launch();
    let mut c = b.connect();
    assert_eq!(find_coordinator(&mut c, "app"), (0, 1));
    let d = describe(&mut c, "app");
    assert_eq!((d.error_code, d.producer_epoch), (0, epoch2));
    assert_eq!(d.transaction_state.as_str(), "Empty");
    let (code, pid3, epoch3) = init(&mut c, "app", 60_000, 4);
    assert_eq!((code, pid3, epoch3), (0, pid, epoch2 + 1));
}

#[test]
fn transactions_of_a_version_2_client() {
    let (_b, mut c) = start();
    assert_eq!(find_coordinator(&mut c, "v2").0, 0);
    let (pid, epoch) = init_retrying_at(&mut c, "v2", 60_000, 5);
    // Produce v12 adds the partition itself: no AddPartitionsToTxn.
    assert_eq!(
        produce(&mut c, 12, "v2", 0, txn_batch(&["a"], pid, epoch, 0)).0,
        0
    );
    assert_eq!(
        produce(&mut c, 12, "v2", 0, txn_batch(&["b"], pid, epoch, 1)).0,
        0
    );
    let d = describe(&mut c, "v2");
    assert_eq!(d.transaction_state.as_str(), "Ongoing");
    assert_eq!(d.topics[0].partitions, vec![0]);
    // EndTxn v5 bumps the epoch and says so; the markers carry the new epoch.
    let resp = end_txn(&mut c, 5, "v2", pid, epoch, true);
    assert_eq!(
        (resp.error_code, resp.producer_id.0, resp.producer_epoch),
        (0, pid, epoch + 1)
    );
    wait_state(&mut c, "v2", "CompleteCommit");
    let p0 = batches(&mut c, 0);
    assert_eq!(p0.last().unwrap(), &Seen::marker(pid, epoch + 1, true));
    // A retry with the old epoch is answered with the new one.
    let resp = end_txn(&mut c, 5, "v2", pid, epoch, true);
    assert_eq!((resp.error_code, resp.producer_epoch), (0, epoch + 1));
    // The old epoch cannot write any more; an abort with nothing open is accepted (TV2).
    assert_ne!(
        produce(&mut c, 12, "v2", 0, txn_batch(&["late"], pid, epoch, 2)).0,
        0
    );
    let resp = end_txn(&mut c, 5, "v2", pid, epoch + 1, false);
    assert_eq!((resp.error_code, resp.producer_epoch), (0, epoch + 2));
    wait_state(&mut c, "v2", "CompleteAbort");

    // Brokers' verify-only AddPartitionsToTxn (v4+): in the transaction or not.
    let e = epoch + 2;
    assert_eq!(
        produce(&mut c, 12, "v2", 1, txn_batch(&["c"], pid, e, 0)).0,
        0
    );
    let mut tx = AddPartitionsToTxnTransaction::default();
    tx.transactional_id = txn_id("v2");
    tx.producer_id = ProducerId(pid);
    tx.producer_epoch = e;
    tx.verify_only = true;
    let mut at = AddPartitionsToTxnTopic::default();
    at.name = TopicName(s(TOPIC));
    at.partitions = vec![0, 1];
    tx.topics = vec![at];
    let mut r = AddPartitionsToTxnRequest::default();
    r.transactions = vec![tx];
    let resp: AddPartitionsToTxnResponse = c.call(ApiKey::AddPartitionsToTxn, 5, &r);
    let codes: Vec<(i32, i16)> = resp.results_by_transaction[0].topic_results[0]
        .results_by_partition
        .iter()
        .map(|p| (p.partition_index, p.partition_error_code))
        .collect();
    assert_eq!(codes, vec![(0, E::TransactionAbortable.code()), (1, 0)]);

    // ListTransactions with its filters.
    let list =
        |c: &mut Client, v: i16, r: ListTransactionsRequest| -> (i16, Vec<String>, Vec<String>) {
            let resp: ListTransactionsResponse = c.call(ApiKey::ListTransactions, v, &r);
            (
                resp.error_code,
                resp.transaction_states
                    .iter()
                    .map(|t| t.transactional_id.0.to_string())
                    .collect(),
                resp.unknown_state_filters
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            )
        };
    init_retrying_at(&mut c, "other", 60_000, 5);
    assert_eq!(list(&mut c, 0, Default::default()).1, vec!["other", "v2"]);
    let mut r = ListTransactionsRequest::default();
    r.state_filters = vec![s("Ongoing"), s("Nope")];
    assert_eq!(
        list(&mut c, 0, r),
        (0, vec!["v2".to_string()], vec!["Nope".to_string()])
    );
    let mut r = ListTransactionsRequest::default();
    r.producer_id_filters = vec![ProducerId(pid)];
    assert_eq!(list(&mut c, 1, r).1, vec!["v2"]);
    let mut r = ListTransactionsRequest::default();
    r.transactional_id_pattern = Some(s("v."));
    assert_eq!(list(&mut c, 2, r).1, vec!["v2"]);
    let mut r = ListTransactionsRequest::default();
    r.transactional_id_pattern = Some(s("(unclosed"));
    assert_eq!(list(&mut c, 2, r).0, E::InvalidRegularExpression.code());
    let d = describe(&mut c, "nope");
    assert_eq!(d.error_code, E::TransactionalIdNotFound.code());
}

#[test]
fn an_open_transaction_past_its_timeout_is_aborted() {
    let (_b, mut c) = start();
    find_coordinator(&mut c, "slow");
    let (pid, epoch) = init_retrying(&mut c, "slow", 1000);
    assert_eq!(
        add_partitions(&mut c, "slow", pid, epoch, &[(TOPIC, 0)]),
        vec![0]
    );
    assert_eq!(
        produce(&mut c, 9, "slow", 0, txn_batch(&["lost"], pid, epoch, 0)).0,
        0
    );
    let d = wait_state(&mut c, "slow", "CompleteAbort");
    assert!(d.producer_epoch > epoch, "the producer is fenced");
    let p0 = batches(&mut c, 0);
    assert_eq!(p0.last().unwrap().values, vec!["ABORT"]);
    assert_eq!(
        end_txn(&mut c, 3, "slow", pid, epoch, true).error_code,
        E::ProducerFenced.code()
    );
}

#[test]
fn write_txn_markers_from_another_coordinator() {
    let (_b, mut c) = start();
    let mut m = WritableTxnMarker::default();
    m.producer_id = ProducerId(4242);
    m.producer_epoch = 3;
    m.coordinator_epoch = 5;
    m.transaction_result = true;
    let mut t = WritableTxnMarkerTopic::default();
    t.name = TopicName(s(TOPIC));
    t.partition_indexes = vec![0, 9];
    m.topics = vec![t];
    let mut t = WritableTxnMarkerTopic::default();
    t.name = TopicName(s("no-such-topic"));
    t.partition_indexes = vec![0];
    m.topics.push(t);
    let mut r = WriteTxnMarkersRequest::default();
    r.markers = vec![m.clone()];
    let resp: WriteTxnMarkersResponse = c.call(ApiKey::WriteTxnMarkers, 1, &r);
    let codes: Vec<(String, i32, i16)> = resp.markers[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.to_string(), p.partition_index, p.error_code))
        })
        .collect();
    let unknown = E::UnknownTopicOrPartition.code();
    assert_eq!(
        codes,
        vec![
            (TOPIC.to_string(), 0, 0),
            (TOPIC.to_string(), 9, unknown),
            ("no-such-topic".to_string(), 0, unknown)
        ]
    );
    assert_eq!(batches(&mut c, 0), vec![Seen::marker(4242, 3, true)]);
    // An older coordinator epoch is fenced.
    m.coordinator_epoch = 4;
    m.topics.truncate(1);
    m.topics[0].partition_indexes = vec![0];
    r.markers = vec![m];
    let resp: WriteTxnMarkersResponse = c.call(ApiKey::WriteTxnMarkers, 1, &r);
    assert_eq!(
        resp.markers[0].topics[0].partitions[0].error_code,
        E::TransactionCoordinatorFenced.code()
    );
}
