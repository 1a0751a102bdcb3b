//! Idempotent produce against the real binary, raw protocol over TCP: InitProducerId, a retried
//! batch stored once and acknowledged with its original offset, a sequence gap refused with
//! OUT_OF_ORDER_SEQUENCE_NUMBER, a fenced epoch, and all of it across a clean restart and a
//! kill -9.

mod common;

use bytes::Bytes;
use common::{Client, TestBroker, coordinator, record_batch_from};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, InitProducerIdRequest, InitProducerIdResponse, ListOffsetsRequest, ListOffsetsResponse,
    MetadataRequest, MetadataResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "idem";

/// An idempotent batch of `n` records from `pid`/`epoch` with base sequence `seq`.
fn batch(n: usize, pid: i64, epoch: i16, seq: i32) -> Bytes {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let values: Vec<String> = (0..n)
        .map(|i| format!("p{pid}-s{}", seq + i as i32))
        .collect();
    let values: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
    record_batch_from(&values, now, Some((pid, epoch, seq)))
}

/// Produces one batch (acks=all, v9); returns (error code, base offset).
fn produce(c: &mut Client, records: Bytes) -> (i16, i64) {
    let p = common::produce_one(c, TOPIC, 0, records);
    (p.error_code, p.base_offset)
}

fn init_producer_id(c: &mut Client, version: i16) -> (i16, i64, i16) {
    let mut r = InitProducerIdRequest::default();
    r.transactional_id = None;
    r.transaction_timeout_ms = 60_000;
    r.producer_id = ProducerId(-1);
    r.producer_epoch = -1;
    let resp: InitProducerIdResponse = c.call(ApiKey::InitProducerId, version, &r);
    (resp.error_code, resp.producer_id.0, resp.producer_epoch)
}

fn log_end_offset(c: &mut Client) -> i64 {
    let mut p = ListOffsetsPartition::default();
    p.partition_index = 0;
    p.current_leader_epoch = -1;
    p.timestamp = -1;
    let mut t = ListOffsetsTopic::default();
    t.name = TopicName(StrBytes::from_static_str(TOPIC));
    t.partitions = vec![p];
    let mut r = ListOffsetsRequest::default();
    r.replica_id = kafka_protocol::messages::BrokerId(-1);
    r.topics = vec![t];
    let resp: ListOffsetsResponse = c.call(ApiKey::ListOffsets, 7, &r);
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

fn create_topic(c: &mut Client) {
    let mut t = MetadataRequestTopic::default();
    t.name = Some(TopicName(StrBytes::from_static_str(TOPIC)));
    let mut m = MetadataRequest::default();
    m.topics = Some(vec![t]);
    m.allow_auto_topic_creation = true;
    let md: MetadataResponse = c.call(ApiKey::Metadata, 12, &m);
    assert_eq!(md.topics[0].error_code, 0);
}

const OOS: i16 = ResponseError::OutOfOrderSequenceNumber.code();

#[test]
fn retries_are_stored_once_across_restarts() {
    let mut b = TestBroker::start(&[]);
    let mut c = b.connect();
    create_topic(&mut c);

    let (err, pid, epoch) = init_producer_id(&mut c, 4);
    assert_eq!((err, epoch), (0, 0));
    let (err, pid2, _) = init_producer_id(&mut c, 0);
    assert_eq!(err, 0);
    assert_ne!(
        pid, pid2,
        "every InitProducerId without a transactional id gets a new id"
    );

    let a = batch(3, pid, 0, 0);
    let bb = batch(2, pid, 0, 3);
    assert_eq!(produce(&mut c, a.clone()), (0, 0));
    assert_eq!(
        produce(&mut c, a.clone()),
        (0, 0),
        "duplicate: original offset"
    );
    assert_eq!(produce(&mut c, bb.clone()), (0, 3));
    assert_eq!(produce(&mut c, a.clone()), (0, 0), "older cached batch");
    assert_eq!(produce(&mut c, bb.clone()), (0, 3));
    assert_eq!(log_end_offset(&mut c), 5, "one copy of each batch stored");
    assert_eq!(produce(&mut c, batch(1, pid, 0, 10)).0, OOS, "gap");
    assert_eq!(produce(&mut c, batch(1, pid, 0, 4)).0, OOS, "rewind");
    assert_eq!(log_end_offset(&mut c), 5);

    // A newer epoch (the client's local bump) starts at 0 and fences the old one.
    assert_eq!(
        produce(&mut c, batch(1, pid2, 3, 7)).0,
        0,
        "unknown producer"
    );
    assert_eq!(
        produce(&mut c, batch(1, pid2, 4, 1)).0,
        OOS,
        "new epoch not at 0"
    );
    assert_eq!(produce(&mut c, batch(1, pid2, 4, 0)), (0, 6));
    assert_eq!(
        produce(&mut c, batch(1, pid2, 3, 8)).0,
        ResponseError::InvalidProducerEpoch.code()
    );

    // A transactional id goes to the transaction coordinator (protocol-tests/rust/
    // transactions.rs): an empty one is an invalid request, a timeout of 0 an invalid one.
    let mut r = InitProducerIdRequest::default();
    r.transactional_id = Some(TransactionalId(StrBytes::from_static_str("")));
    r.producer_id = ProducerId(-1);
    r.producer_epoch = -1;
    let resp: InitProducerIdResponse = c.call(ApiKey::InitProducerId, 3, &r);
    assert_eq!(resp.error_code, ResponseError::InvalidRequest.code());
    r.transactional_id = Some(TransactionalId(StrBytes::from_static_str("tx")));
    let resp: InitProducerIdResponse = c.call(ApiKey::InitProducerId, 3, &r);
    assert_eq!(
        resp.error_code,
        ResponseError::InvalidTransactionTimeout.code()
    );
    r.transaction_timeout_ms = 60_000;
    let resp = coordinator::call(&mut c, coordinator::TRANSACTION, "tx", |c| {
        let resp: InitProducerIdResponse = c.call(ApiKey::InitProducerId, 3, &r);
        (resp.error_code, resp)
    });
    assert_eq!((resp.error_code, resp.producer_epoch), (0, 0));
    assert!(resp.producer_id.0 > pid2, "ids from the same allocator");

    // Clean restart: the state comes back from the snapshot written at shutdown.
    drop(c);
    assert_eq!(b.terminate(), Some(0));
    b.launch();
    let mut c = b.connect();
    assert_eq!(produce(&mut c, a.clone()), (0, 0));
    assert_eq!(produce(&mut c, bb.clone()), (0, 3));
    assert_eq!(produce(&mut c, batch(1, pid, 0, 6)).0, OOS);
    assert_eq!(log_end_offset(&mut c), 7);
    let cc = batch(4, pid, 0, 5);
    assert_eq!(produce(&mut c, cc.clone()), (0, 7));
    let (_, pid3, _) = init_producer_id(&mut c, 4);
    assert!(pid3 > pid2, "ids are unique across restarts");

    // kill -9: the state is rebuilt from the snapshot plus the log after it.
    drop(c);
    b.kill9();
    b.launch();
    let mut c = b.connect();
    assert_eq!(produce(&mut c, cc.clone()), (0, 7));
    assert_eq!(produce(&mut c, bb.clone()), (0, 3));
    assert_eq!(produce(&mut c, a.clone()), (0, 0));
    assert_eq!(produce(&mut c, batch(1, pid, 0, 10)).0, OOS);
    assert_eq!(log_end_offset(&mut c), 11);
    assert_eq!(produce(&mut c, batch(1, pid, 0, 9)), (0, 11));
    let (_, pid4, _) = init_producer_id(&mut c, 4);
    assert!(pid4 > pid3, "ids are unique across kill -9");
    assert_eq!(
        produce(&mut c, batch(1, pid2, 3, 9)).0,
        ResponseError::InvalidProducerEpoch.code()
    );
}
