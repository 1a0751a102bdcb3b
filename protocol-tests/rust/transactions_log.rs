//! Transactions in the log, over real sockets: transactional batches as producers write them,
//! the last stable offset they hold, read_committed Fetch (stops at the LSO, lists the aborted
//! transactions), ListOffsets with isolation levels, DescribeProducers, the producer rules
//! around transactions, and all of it after kill -9 and restarts of the real binary.
//!
//! The markers that end transactions are written by the transaction coordinator; here they are
//! appended in-process (`Partition::append_marker`) on a broker this test serves over a real
//! socket, over the same data directory the binary then runs on. Transactional produces are
//! not verified with a coordinator (`transaction.partition.verification.enable=false`, as on
//! Kafka with that setting).

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::{Client, TestBroker, create_topic_request, fetch_request};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::describe_producers_response::ProducerState;
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsResponse, DescribeProducersRequest, DescribeProducersResponse,
    FetchResponse, InitProducerIdRequest, InitProducerIdResponse, ListOffsetsRequest,
    ListOffsetsResponse, ProduceRequest, ProduceResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

const TOPIC: &str = "txnlog";
const NO_VERIFY: &str = "transaction.partition.verification.enable=false";

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// One batch of `values`: plain (`producer` None), idempotent, or transactional.
fn batch(values: &[&str], producer: Option<(i64, i16, i32)>, transactional: bool) -> Bytes {
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    batch_of(
        values.iter().map(|v| (None, Some(v.as_bytes().to_vec()))),
        pid,
        epoch,
        seq,
        transactional,
        false,
    )
}

fn batch_of(
    records: impl Iterator<Item = (Option<Vec<u8>>, Option<Vec<u8>>)>,
    pid: i64,
    epoch: i16,
    seq: i32,
    transactional: bool,
    control: bool,
) -> Bytes {
    let ts = now_ms();
    let records: Vec<Record> = records
        .enumerate()
        .map(|(i, (key, value))| Record {
            transactional,
            control,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: if seq < 0 { -1 } else { seq + i as i32 },
            timestamp: ts,
            key: key.map(Bytes::from),
            value: value.map(Bytes::from),
            headers: Default::default(),
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).unwrap();
    buf.freeze()
}

/// Produce v9 (acks=all) of one batch to partition 0, naming a transactional id when
/// `transactional_id` (Kafka refuses transactional batches without one).
fn produce_as(c: &mut Client, records: Bytes, transactional_id: Option<&str>) -> ProduceResponse {
    let mut pd = PartitionProduceData::default();
    pd.records = Some(records);
    let mut td = TopicProduceData::default();
    td.name = TopicName(StrBytes::from_static_str(TOPIC));
    td.partition_data = vec![pd];
    let mut r = ProduceRequest::default();
    r.transactional_id = transactional_id.map(|t| TransactionalId(StrBytes::from_string(t.into())));
    r.acks = -1;
    r.timeout_ms = 5000;
    r.topic_data = vec![td];
    c.call(ApiKey::Produce, 9, &r)
}

fn produce(c: &mut Client, records: Bytes) -> (i16, i64) {
    let resp = produce_as(c, records, Some("txnlog-producer"));
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

fn init_producer_id(c: &mut Client) -> (i64, i16) {
    let mut r = InitProducerIdRequest::default();
    r.transactional_id = None;
    r.transaction_timeout_ms = 60_000;
    r.producer_id = ProducerId(-1);
    r.producer_epoch = -1;
    // A coordinator still loading answers COORDINATOR_LOAD_IN_PROGRESS: retried, as clients do.
    for _ in 0..100 {
        let resp: InitProducerIdResponse = c.call(ApiKey::InitProducerId, 4, &r);
        if resp.error_code != ResponseError::CoordinatorLoadInProgress.code() {
            assert_eq!(resp.error_code, 0);
            return (resp.producer_id.0, resp.producer_epoch);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("InitProducerId kept answering COORDINATOR_LOAD_IN_PROGRESS")
}

fn create_topic(c: &mut Client) {
    let resp: CreateTopicsResponse = c.call(
        ApiKey::CreateTopics,
        5,
        &create_topic_request(TOPIC, 1, 1, &[]),
    );
    assert_eq!(resp.topics[0].error_code, 0);
}

/// Fetch v12 of partition 0 from `offset` at `isolation` (0 read_uncommitted, 1 committed).
fn fetch(c: &mut Client, offset: i64, isolation: i8) -> PartitionData {
    let mut r = fetch_request(12, TOPIC, uuid::Uuid::nil(), 0, offset);
    r.isolation_level = isolation;
    let mut resp: FetchResponse = c.call(ApiKey::Fetch, 12, &r);
    resp.responses.remove(0).partitions.remove(0)
}

/// ListOffsets v7 LATEST at `isolation`.
fn latest(c: &mut Client, isolation: i8) -> i64 {
    let mut p = ListOffsetsPartition::default();
    p.timestamp = -1;
    p.current_leader_epoch = -1;
    let mut t = ListOffsetsTopic::default();
    t.name = TopicName(StrBytes::from_static_str(TOPIC));
    t.partitions = vec![p];
    let mut r = ListOffsetsRequest::default();
    r.replica_id = kafka_protocol::messages::BrokerId(-1);
    r.isolation_level = isolation;
    r.topics = vec![t];
    let resp: ListOffsetsResponse = c.call(ApiKey::ListOffsets, 7, &r);
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

fn describe_producers(c: &mut Client) -> Vec<ProducerState> {
    let mut t = TopicRequest::default();
    t.name = TopicName(StrBytes::from_static_str(TOPIC));
    t.partition_indexes = vec![0];
    let mut r = DescribeProducersRequest::default();
    r.topics = vec![t];
    let mut resp: DescribeProducersResponse = c.call(ApiKey::DescribeProducers, 0, &r);
    let p = resp.topics.remove(0).partitions.remove(0);
    assert_eq!(p.error_code, 0);
    let mut v = p.active_producers;
    v.sort_by_key(|s| s.producer_id.0);
    v
}

/// What a read_committed consumer delivers from `p` (Kafka's consumer rule): records of an
/// aborted transaction, from its first offset to its marker, are dropped; control records
/// are skipped. Also the offsets of every record returned, control records included.
fn consume(p: &PartitionData) -> (Vec<String>, Vec<i64>) {
    let mut bytes = p.records.clone().unwrap_or_default();
    let sets = RecordBatchDecoder::decode_all(&mut bytes).unwrap();
    let mut aborted = p.aborted_transactions.clone().unwrap_or_default();
    aborted.sort_by_key(|a| std::cmp::Reverse(a.first_offset));
    let mut dropping: Vec<i64> = Vec::new();
    let (mut values, mut offsets) = (Vec::new(), Vec::new());
    for r in sets.iter().flat_map(|s| s.records.iter()) {
        offsets.push(r.offset);
        let pid = r.producer_id;
        while aborted.last().is_some_and(|a| a.first_offset <= r.offset) {
            dropping.push(aborted.pop().unwrap().producer_id.0);
        }
        if r.control {
            dropping.retain(|d| *d != pid);
        } else if !(r.transactional && dropping.contains(&pid)) {
            values.push(String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap());
        }
    }
    (values, offsets)
}

/// Plain records at 0-1, a transaction of producer `pid` at 2-3 left open, a plain record at 4.
/// Checked as Kafka 4.4 answers.
fn write_open_transaction(c: &mut Client) -> (i64, i16) {
    create_topic(c);
    let (pid, epoch) = init_producer_id(c);
    // Plain batches of one record: the crate's encoder splits records without sequence
    // numbers into batches of one, and Kafka takes one batch per partition and request.
    assert_eq!(produce(c, batch(&["a"], None, false)), (0, 0));
    assert_eq!(produce(c, batch(&["b"], None, false)), (0, 1));
    assert_eq!(
        produce(c, batch(&["t1", "t2"], Some((pid, epoch, 0)), true)),
        (0, 2)
    );
    assert_eq!(produce(c, batch(&["c"], None, false)), (0, 4));
    // Inside its transaction the producer may not write outside it; nor may a client write a
    // control batch, or an older epoch. Kafka answers these with the log start offset and
    // no message.
    let refused = |c: &mut Client, records| {
        let resp = produce_as(c, records, Some("txnlog-producer"));
        let p = resp.responses[0].partition_responses[0].clone();
        assert_eq!((p.base_offset, p.log_start_offset), (-1, 0));
        assert_eq!(p.error_message, None);
        p.error_code
    };
    let err = refused(c, batch(&["x"], Some((pid, epoch, 2)), false));
    assert_eq!(err, ResponseError::InvalidTxnState.code());
    let marker = batch_of(
        [(Some(vec![0, 0, 0, 1]), Some(vec![0, 0, 0, 0, 0, 0]))].into_iter(),
        pid,
        epoch,
        -1,
        true,
        true,
    );
    assert_eq!(refused(c, marker), ResponseError::InvalidRecord.code());
    let stale = batch(&["x"], Some((pid, epoch - 1, 2)), true);
    assert_eq!(
        refused(c, stale),
        ResponseError::InvalidProducerEpoch.code()
    );
    // Transactional batches come with a transactional id, or the request is refused.
    let resp = produce_as(c, batch(&["t3"], Some((pid, epoch, 2)), true), None);
    let p = &resp.responses[0].partition_responses[0];
    let code = ResponseError::TransactionalIdAuthorizationFailed.code();
    assert_eq!(
        (p.error_code, p.base_offset, p.log_start_offset),
        (code, -1, -1)
    );
    (pid, epoch)
}

/// The partition as [`write_open_transaction`] left it.
fn check_open_transaction(c: &mut Client, pid: i64, epoch: i16) {
    let committed = fetch(c, 0, 1);
    assert_eq!(committed.error_code, 0);
    assert_eq!(
        (committed.high_watermark, committed.last_stable_offset),
        (5, 2)
    );
    assert_eq!(committed.aborted_transactions.as_deref(), Some(&[][..]));
    assert_eq!(
        consume(&committed),
        (vec!["a".into(), "b".into()], vec![0, 1])
    );
    let uncommitted = fetch(c, 0, 0);
    assert_eq!(uncommitted.last_stable_offset, 2);
    assert_eq!(uncommitted.aborted_transactions, None);
    assert_eq!(consume(&uncommitted).1, vec![0, 1, 2, 3, 4]);
    // Past the LSO a read_committed fetch reads nothing, without error.
    let past = fetch(c, 3, 1);
    assert_eq!(
        (past.error_code, past.records.map(|r| r.len())),
        (0, Some(0))
    );
    assert_eq!((latest(c, 1), latest(c, 0)), (2, 5));
    let producers = describe_producers(c);
    assert_eq!(producers.len(), 1);
    let p = &producers[0];
    assert_eq!((p.producer_id.0, p.producer_epoch), (pid, epoch as i32));
    assert_eq!((p.last_sequence, p.current_txn_start_offset), (1, 2));
    assert_eq!(p.coordinator_epoch, -1);
}

#[test]
fn an_open_transaction_holds_the_lso_across_kill_9() {
    let mut b = TestBroker::start(&[NO_VERIFY]);
    let mut c = b.connect();
    let (pid, epoch) = write_open_transaction(&mut c);
    check_open_transaction(&mut c, pid, epoch);
    b.kill9();
    b.launch();
    check_open_transaction(&mut b.connect(), pid, epoch);
}

/// A broker of this process (`sluice::testing::Broker`: the binary's start-up on a thread and
/// a runtime of its own) on `port` over `dir`.
struct InProcess {
    node: sluice::testing::Broker,
}

impl InProcess {
    fn start(port: u16, dir: &std::path::Path) -> InProcess {
        let node = sluice::testing::Broker::builder()
            .data_dir(dir)
            .property("listeners", &format!("PLAINTEXT://127.0.0.1:{port}"))
            .property("transaction.partition.verification.enable", "false")
            .start()
            .unwrap();
        InProcess { node }
    }

    fn partition(&self) -> Arc<sluice::cluster::Partition> {
        self.node
            .broker()
            .unwrap()
            .controller
            .topic(TOPIC)
            .unwrap()
            .partition(0)
            .unwrap()
            .clone()
    }

    /// Stops serving without a clean shutdown (no snapshot, no clean-shutdown file).
    fn crash(self) {
        self.node.kill();
    }
}

/// After [`write_open_transaction`] and a second producer's transaction at 5: producer 1
/// aborts (marker at 6), producer 2 commits (7), a plain record (8).
fn check_ended_transactions(c: &mut Client, pid1: i64, pid2: i64) {
    let pids: Vec<i64> = describe_producers(c)
        .iter()
        .map(|p| p.producer_id.0)
        .collect();
    assert_eq!(pids, vec![pid1.min(pid2), pid1.max(pid2)]);
    let committed = fetch(c, 0, 1);
    assert_eq!(
        (committed.high_watermark, committed.last_stable_offset),
        (9, 9)
    );
    let aborted: Vec<(i64, i64)> = committed
        .aborted_transactions
        .clone()
        .unwrap()
        .iter()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    assert_eq!(aborted, vec![(pid1, 2)]);
    let (values, offsets) = consume(&committed);
    assert_eq!(values, ["a", "b", "c", "u1", "d"]);
    assert_eq!(
        offsets,
        (0..9).collect::<Vec<i64>>(),
        "markers are returned too"
    );
    assert_eq!((latest(c, 1), latest(c, 0)), (9, 9));
    // From after the aborted transaction's marker, it is not listed.
    assert_eq!(
        fetch(c, 7, 1).aborted_transactions.as_deref(),
        Some(&[][..])
    );
    let producers = describe_producers(c);
    assert_eq!(producers.len(), 2);
    for p in &producers {
        assert_eq!((p.coordinator_epoch, p.current_txn_start_offset), (3, -1));
    }
}

#[test]
fn markers_end_transactions_for_read_committed_consumers_across_restarts() {
    let mut b = TestBroker::start(&[NO_VERIFY]);
    b.kill9();
    let node = InProcess::start(b.port, &b.data_dir());
    let mut c = Client::connect(b.port);
    let (pid1, epoch1) = write_open_transaction(&mut c);
    let (pid2, epoch2) = init_producer_id(&mut c);
    assert_eq!(
        produce(&mut c, batch(&["u1"], Some((pid2, epoch2, 0)), true)),
        (0, 5)
    );
    let p = node.partition();
    assert!(p.has_ongoing_txn(pid1, epoch1) && p.has_ongoing_txn(pid2, epoch2));
    assert_eq!(p.append_marker(pid1, epoch1, 3, false, Some(0)).unwrap(), 6);
    assert_eq!(
        fetch(&mut c, 0, 1).last_stable_offset,
        5,
        "producer 2's is open"
    );
    assert_eq!(p.append_marker(pid2, epoch2, 3, true, None).unwrap(), 7);
    // A marker from an older coordinator is refused, and nothing is written.
    assert!(p.append_marker(pid2, epoch2, 2, true, None).is_err());
    assert_eq!(produce(&mut c, batch(&["d"], None, false)), (0, 8));
    check_ended_transactions(&mut c, pid1, pid2);
    drop(c);
    node.crash();
    // The binary recovers the same state from the log and its transaction index.
    b.launch();
    check_ended_transactions(&mut b.connect(), pid1, pid2);
    b.kill9();
    b.launch();
    check_ended_transactions(&mut b.connect(), pid1, pid2);
    let index = b
        .data_dir()
        .join(format!("{TOPIC}-0"))
        .join("00000000000000000000.txnindex");
    let entry = std::fs::read(&index).unwrap();
    // Kafka's entry: version 0, producer id, first offset 2, marker at 6, LSO 5.
    let mut want = vec![0u8, 0];
    for v in [pid1, 2, 6, 5] {
        want.extend_from_slice(&v.to_be_bytes());
    }
    assert_eq!(entry, want);
}
