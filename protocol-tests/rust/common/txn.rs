//! Transactional clients' requests, as raw Kafka requests: for the transaction tests on one
//! node and on a cluster.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::Client;

pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub fn txn_id(v: &str) -> TransactionalId {
    TransactionalId(s(v))
}

/// FindCoordinator v4 for a transactional id: (error, coordinator node).
pub fn find_coordinator(c: &mut Client, id: &str) -> (i16, i32) {
    let mut r = FindCoordinatorRequest::default();
    r.key_type = 1;
    r.coordinator_keys = vec![s(id)];
    let resp: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 4, &r);
    let k = &resp.coordinators[0];
    (k.error_code, k.node_id.0)
}

/// InitProducerId: (error, producer id, epoch).
pub fn init(c: &mut Client, id: &str, timeout_ms: i32, version: i16) -> (i16, i64, i16) {
    let mut r = InitProducerIdRequest::default();
    r.transactional_id = Some(txn_id(id));
    r.transaction_timeout_ms = timeout_ms;
    r.producer_id = ProducerId(-1);
    r.producer_epoch = -1;
    let resp: InitProducerIdResponse = c.call(ApiKey::InitProducerId, version, &r);
    (resp.error_code, resp.producer_id.0, resp.producer_epoch)
}

/// Repeats `f` while it answers one of `retriable`, within
/// [`retry_while`](super::coordinator::retry_while)'s bounds; its last answer.
pub fn retrying<T>(retriable: &[i16], f: impl FnMut() -> (i16, T)) -> (i16, T) {
    super::coordinator::retry_while(retriable, f)
}

/// InitProducerId, retried while the coordinator is busy, loading or not yet serving (a
/// new leader of the id's partition that has not begun to load it).
pub fn init_retrying(c: &mut Client, id: &str, timeout_ms: i32) -> (i64, i16) {
    init_retrying_at(c, id, timeout_ms, 4)
}

/// [`init_retrying`] at InitProducerId `version`.
pub fn init_retrying_at(c: &mut Client, id: &str, timeout_ms: i32, version: i16) -> (i64, i16) {
    let busy = [
        E::ConcurrentTransactions.code(),
        E::CoordinatorLoadInProgress.code(),
        E::CoordinatorNotAvailable.code(),
        E::NotCoordinator.code(),
    ];
    let (code, (pid, epoch)) = retrying(&busy, || {
        let (code, pid, epoch) = init(c, id, timeout_ms, version);
        (code, (pid, epoch))
    });
    assert_eq!(code, 0, "InitProducerId of {id}");
    (pid, epoch)
}

/// AddPartitionsToTxn v3 (as clients send it): each partition's error.
pub fn add_partitions(
    c: &mut Client,
    id: &str,
    pid: i64,
    epoch: i16,
    parts: &[(&str, i32)],
) -> Vec<i16> {
    let mut r = AddPartitionsToTxnRequest::default();
    r.v3_and_below_transactional_id = txn_id(id);
    r.v3_and_below_producer_id = ProducerId(pid);
    r.v3_and_below_producer_epoch = epoch;
    r.v3_and_below_topics = parts
        .iter()
        .map(|(t, p)| {
            let mut at = AddPartitionsToTxnTopic::default();
            at.name = TopicName(s(t));
            at.partitions = vec![*p];
            at
        })
        .collect();
    let resp: AddPartitionsToTxnResponse = c.call(ApiKey::AddPartitionsToTxn, 3, &r);
    resp.results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition
                .iter()
                .map(|p| p.partition_error_code)
        })
        .collect()
}

pub fn end_txn(
    c: &mut Client,
    version: i16,
    id: &str,
    pid: i64,
    epoch: i16,
    commit: bool,
) -> EndTxnResponse {
    let mut r = EndTxnRequest::default();
    r.transactional_id = txn_id(id);
    r.producer_id = ProducerId(pid);
    r.producer_epoch = epoch;
    r.committed = commit;
    c.call(ApiKey::EndTxn, version, &r)
}

pub fn describe(c: &mut Client, id: &str) -> describe_transactions_response::TransactionState {
    let mut r = DescribeTransactionsRequest::default();
    r.transactional_ids = vec![txn_id(id)];
    let mut resp: DescribeTransactionsResponse = c.call(ApiKey::DescribeTransactions, 0, &r);
    resp.transaction_states.remove(0)
}

/// Waits (bounded) until `id` is described in `state`; the description.
pub fn wait_state(
    c: &mut Client,
    id: &str,
    state: &str,
) -> describe_transactions_response::TransactionState {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let d = describe(c, id);
        if d.error_code == 0 && d.transaction_state.as_str() == state {
            return d;
        }
        assert!(
            Instant::now() < deadline,
            "{id} never reached {state}: {} (error {})",
            d.transaction_state.as_str(),
            d.error_code
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A transactional batch of `values` from `pid`/`epoch` at sequence `seq`.
pub fn txn_batch(values: &[&str], pid: i64, epoch: i16, seq: i32) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: seq + i as i32,
            timestamp: 1_700_000_000_000 + i as i64,
            key: None,
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).unwrap();
    buf.freeze()
}

/// A transactional produce to `topic`-`partition` (acks=all): (error, base offset).
pub fn produce(
    c: &mut Client,
    version: i16,
    id: &str,
    topic: &str,
    partition: i32,
    batch: Bytes,
) -> (i16, i64) {
    let mut pd = PartitionProduceData::default();
    pd.index = partition;
    pd.records = Some(batch);
    let mut td = TopicProduceData::default();
    td.name = TopicName(s(topic));
    td.partition_data = vec![pd];
    let mut r = ProduceRequest::default();
    r.transactional_id = Some(txn_id(id));
    r.acks = -1;
    r.timeout_ms = 5000;
    r.topic_data = vec![td];
    let resp: ProduceResponse = c.call(ApiKey::Produce, version, &r);
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// One batch of a partition as a consumer reading uncommitted sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub control: bool,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The values, or the control record's type (COMMIT, ABORT).
    pub values: Vec<String>,
}

impl Seen {
    pub fn marker(pid: i64, epoch: i16, commit: bool) -> Seen {
        Seen {
            control: true,
            producer_id: pid,
            producer_epoch: epoch,
            values: vec![if commit { "COMMIT" } else { "ABORT" }.to_string()],
        }
    }

    pub fn data(pid: i64, epoch: i16, values: &[&str]) -> Seen {
        Seen {
            control: false,
            producer_id: pid,
            producer_epoch: epoch,
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }
}

/// The batches of `topic`-`partition` from offset 0 up to the high watermark.
pub fn batches(c: &mut Client, topic: &str, partition: i32) -> Vec<Seen> {
    let r = super::fetch_request(12, topic, uuid::Uuid::nil(), partition, 0);
    let resp: FetchResponse = c.call(ApiKey::Fetch, 12, &r);
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0, "fetch of {topic}-{partition}");
    let mut bytes = p.records.clone().unwrap_or_default();
    let mut out = Vec::new();
    for b in RecordBatchDecoder::decode_all(&mut bytes).unwrap() {
        let Some(first) = b.records.first() else {
            continue;
        };
        let control = first.control;
        let values = b
            .records
            .iter()
            .map(|r| match (control, &r.key) {
                // The control record's key: version 0, type 0 ABORT / 1 COMMIT.
                (true, Some(k)) if k.len() >= 4 => {
                    if k[3] == 1 { "COMMIT" } else { "ABORT" }.to_string()
                }
                _ => String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned(),
            })
            .collect();
        out.push(Seen {
            control,
            producer_id: first.producer_id,
            producer_epoch: first.producer_epoch,
            values,
        });
    }
    out
}
