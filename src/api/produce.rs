//! Produce (key 0), advertised 0-13.
//!
//! Versions 0-2 are advertised (librdkafka enables compression only when it sees Produce v0
//! listed) but not served: a request at one of them closes the connection, as on Kafka 4.4
//! (kafka-protocol cannot decode them either). Batches are validated (magic 2, CRC, size
//! against max.message.bytes) and stored as they came, with only base offset and partition
//! leader epoch patched (and the LogAppendTime fields for such topics).
//! acks=0 gets no response; acks=1 is answered after the append.
//!
//! acks=-1 (all), as Kafka's ReplicaManager and DelayedProduce: a partition whose ISR is
//! smaller than the effective min.insync.replicas (the topic's or the broker's, capped at the
//! replication factor) answers NOT_ENOUGH_REPLICAS and nothing is written; otherwise the
//! response waits until every appended partition's high watermark passes its last offset,
//! for at most the request's timeout_ms (then REQUEST_TIMED_OUT for the partitions still
//! waiting; their records stay written). A partition whose ISR shrank below min.insync.replicas
//! by then answers NOT_ENOUGH_REPLICAS_AFTER_APPEND, one whose leadership moved
//! NOT_LEADER_OR_FOLLOWER. On a cluster of one the ISR is the leader, so the high watermark
//! passes at the append. From v13 topics are named by id.
//!
//! Transactions (Kafka 4.4's KafkaApis and producer state rules): a request holding a
//! transactional batch but no transactional id is refused whole, every partition
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED, nothing written. Per partition, a transactional
//! batch opens (or continues) its producer's transaction; an epoch below the producer's
//! current one is INVALID_PRODUCER_EPOCH, a non-transactional batch from a producer inside a
//! transaction INVALID_TXN_STATE, and a control batch (markers are the coordinator's)
//! INVALID_RECORD.
//!
//! A compacted topic (cleanup.policy holds compact) refuses a record set holding records
//! without a key: INVALID_RECORD, with Kafka's record errors and message (v8+).
//!
//! Transactional batches (KIP-890, `api::txn_verify`): where the producer has no transaction
//! open, the partition is first verified with the transaction coordinator (v3-11: refused
//! with INVALID_TXN_STATE if the producer did not add it; v11 may see
//! TRANSACTION_ABORTABLE) or, v12+ (transaction version 2), added to the transaction by the
//! broker itself; coordinator errors an older client would not retry become
//! NOT_ENOUGH_REPLICAS.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::Data;
use super::{ApiSpec, RequestCtx};
use crate::clock::now_ms;
use crate::cluster::replication::AckStatus;
use crate::cluster::{Partition, PartitionError};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::Produce,
    min: 0,
    max: 13,
    handle: super::Handler::Data(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

/// Lowest version served (older ones carry message formats v0/v1).
const MIN_SERVED: i16 = 3;

fn partition_result(index: i32, error: i16) -> PartitionProduceResponse {
    let mut r = PartitionProduceResponse::default();
    r.index = index;
    r.error_code = error;
    r.base_offset = -1;
    r.log_append_time_ms = -1;
    r.log_start_offset = -1;
    r
}

/// KIP-951: partitions answered NOT_LEADER_OR_FOLLOWER carry the current leader, and the
/// response those leaders' endpoints.
fn add_leader_hints(b: &Data, listener: &str, resp: &mut ProduceResponse) {
    use kafka_protocol::messages::BrokerId;
    use kafka_protocol::messages::produce_response::NodeEndpoint;
    let img = b.node().image();
    let mut leaders = Vec::new();
    for t in &mut resp.responses {
        for p in &mut t.partition_responses {
            if !super::leader_hint::wants_hint(p.error_code) {
                continue;
            }
            if let Some((leader, epoch)) =
                super::leader_hint::current_leader(&img, t.name.0.as_str(), p.index)
            {
                p.current_leader.leader_id = BrokerId(leader);
                p.current_leader.leader_epoch = epoch;
                if !leaders.contains(&leader) {
                    leaders.push(leader);
                }
            }
        }
    }
    resp.node_endpoints = super::leader_hint::endpoints(listener, &img, &leaders)
        .into_iter()
        .map(|(id, host, port, rack)| {
            let mut e = NodeEndpoint::default();
            e.node_id = BrokerId(id);
            e.host = StrBytes::from_string(host);
            e.port = port;
            e.rack = rack.map(StrBytes::from_string);
            e
        })
        .collect();
}

/// An acks=all partition waiting for its high watermark: where its answer is in the response.
struct Pending {
    topic: usize,
    index: usize,
    partition: Arc<Partition>,
    /// The high watermark that acknowledges the append (its last offset + 1).
    required: i64,
    leader_epoch: i32,
}

async fn handle(b: Arc<Data>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    if ctx.version < MIN_SERVED {
        anyhow::bail!(
            "Produce v{} is listed in ApiVersions for librdkafka's sake but not served \
             (v{MIN_SERVED}+ only, as Kafka 4)",
            ctx.version
        );
    }
    let req: ProduceRequest = super::decode(&ctx, body)?;
    let v = ctx.version;
    let acks = req.acks;
    let txn_refused = has_transactional_records(&req)
        && req
            .transactional_id
            .as_ref()
            .is_none_or(|id| !ctx.may_txn(&b, super::authz::Op::Write, id));
    if txn_refused {
        if acks == 0 {
            return Ok(None);
        }
        let code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return super::respond(&ctx, &refused(&req, v, code));
    }
    // KIP-890: transactional writes to partitions not (yet) in the transaction.
    let unverified = super::txn_verify::for_produce(&b.txn, &req, v).await;
    let mut resp = ProduceResponse::default();
    let mut scratch = BytesMut::new();
    let mut pending = Vec::new();
    for td in req.topic_data {
        let topic = if v >= 13 {
            b.controller.topic_by_id(&td.topic_id)
        } else {
            b.controller.topic(td.name.0.as_str())
        };
        let mut tr = TopicProduceResponse::default();
        if v >= 13 {
            tr.topic_id = td.topic_id;
        } else {
            tr.name = td.name.clone();
        }
        let unknown = if v >= 13 {
            ResponseError::UnknownTopicId.code()
        } else {
            ResponseError::UnknownTopicOrPartition.code()
        };
        for pd in td.partition_data {
            let slot = tr.partition_responses.len();
            let mut done = |r: PartitionProduceResponse| tr.partition_responses.push(r);
            if !matches!(acks, -1..=1) {
                done(partition_result(
                    pd.index,
                    ResponseError::InvalidRequiredAcks.code(),
                ));
                continue;
            }
            let found = match &topic {
                Some(t) => super::local_partition(t, pd.index).map(|p| (t, p)),
                None => Err(unknown),
            };
            // Kafka: an unknown topic id first, then WRITE on the topic, then existence.
            let name = topic
                .as_ref()
                .map_or(td.name.0.as_str(), |t| t.name.as_ref());
            if (v < 13 || topic.is_some())
                && let Some(code) = ctx.topic_error(&b, super::authz::Op::Write, name)
            {
                done(partition_result(pd.index, code));
                continue;
            }
            let (t, p) = match found {
                Ok(tp) => tp,
                Err(code) => {
                    done(partition_result(pd.index, code));
                    continue;
                }
            };
            if let Some((code, message)) = unverified.get(&(t.name.to_string(), pd.index)) {
                let mut r = partition_result(pd.index, *code);
                if v >= 8 {
                    r.error_message = message.clone().map(StrBytes::from_string);
                }
                done(r);
                continue;
            }
            let eff = &t.effective;
            if eff.compact
                && let Some(r) = keyless_refusal(pd.records.as_deref(), &t.name, pd.index, v)
            {
                done(r);
                continue;
            }
            // The log patches offsets in place; the request buffer is shared, so the batches
            // are moved into a reusable scratch buffer first.
            scratch.clear();
            scratch.extend_from_slice(&pd.records.unwrap_or_default());
            let append_time = eff.log_append_time.then(now_ms);
            match p.append_with_acks(&mut scratch, append_time, eff.max_message_bytes, acks) {
                Ok(a) => {
                    let (bytes, records) = (a.info.size_bytes as u64, a.info.record_count);
                    b.metrics.produced(&p.stats, bytes, records);
                    let mut r = partition_result(pd.index, 0);
                    r.base_offset = a.info.first_offset;
                    r.log_append_time_ms = a.info.log_append_time;
                    r.log_start_offset = p.log_start_offset();
                    if acks == -1 {
                        pending.push(Pending {
                            topic: resp.responses.len(),
                            index: slot,
                            partition: p.clone(),
                            required: a.info.last_offset + 1,
                            leader_epoch: a.leader_epoch,
                        });
                    }
                    done(r);
                }
                Err(e) => {
                    let mut r = partition_result(pd.index, super::errors::partition_error_code(&e));
                    if let PartitionError::Producer(_) = e {
                        // Kafka answers the producer-state and batch-attribute refusals
                        // (epoch, sequence, transaction state, control batches) with the log
                        // start offset and no message.
                        r.log_start_offset = p.log_start_offset();
                    } else if v >= 8 {
                        r.error_message =
                            error_message(&e, t.name.as_ref(), pd.index).map(StrBytes::from_string);
                    }
                    done(r);
                }
            }
        }
        resp.responses.push(tr);
    }
    let throttle = ctx.quota(&b, crate::quota::QuotaKind::Produce, ctx.size);
    if acks == 0 {
        // No answer to carry the throttle time: this request holds the connection instead.
        tokio::time::sleep(Duration::from_millis(throttle)).await;
        return Ok(None);
    }
    wait_for_acks(&mut resp, pending, req.timeout_ms).await;
    if v >= 10 {
        add_leader_hints(&b, &ctx.listener, &mut resp);
    }
    let codes = resp.responses.iter().flat_map(|t| &t.partition_responses);
    b.metrics
        .errors(ctx.api_key as i16, codes.map(|p| p.error_code));
    resp.throttle_time_ms = throttle as i32;
    let mut out = super::respond(&ctx, &resp)?;
    if let Some(r) = &mut out {
        r.mute = Duration::from_millis(throttle);
    }
    Ok(out)
}

/// A compacted topic refuses records without a key (Kafka's `LogValidator.validateKey`):
/// INVALID_RECORD with a record error per keyless record of the first batch holding one and
/// Kafka's summary message; nothing of the partition's record set is written.
fn keyless_refusal(
    records: Option<&[u8]>,
    topic: &str,
    index: i32,
    v: i16,
) -> Option<PartitionProduceResponse> {
    use kafka_protocol::messages::produce_response::BatchIndexAndErrorMessage;
    let keyless = crate::log::cleaner::records::keyless_records(records?)?;
    let message = format!(
        "Compacted topic cannot accept message without key in topic partition {topic}-{index}"
    );
    let shown: Vec<String> = keyless
        .iter()
        .take(3)
        .map(|i| format!("RecordError(batchIndex={i}, message='{message}')"))
        .collect();
    let mut r = partition_result(index, ResponseError::InvalidRecord.code());
    if v >= 8 {
        r.record_errors = keyless
            .iter()
            .map(|&i| {
                BatchIndexAndErrorMessage::default()
                    .with_batch_index(i)
                    .with_batch_index_error_message(Some(StrBytes::from_string(message.clone())))
            })
            .collect();
        r.error_message = Some(StrBytes::from_string(format!(
            "One or more records have been rejected due to {} record errors in total, and only \
             showing the first three errors at most: [{}]",
            keyless.len(),
            shown.join(", ")
        )));
    }
    Some(r)
}

/// Whether any batch of the request is transactional.
fn has_transactional_records(req: &ProduceRequest) -> bool {
    let batches = req.topic_data.iter().flat_map(|t| &t.partition_data);
    batches
        .filter_map(|p| p.records.as_deref())
        .any(|r| crate::log::batch::batches(r).any(|h| h.is_ok_and(|h| h.is_transactional())))
}

/// The whole request answered with `code` for every partition.
pub(crate) fn refused(req: &ProduceRequest, v: i16, code: i16) -> ProduceResponse {
    let mut resp = ProduceResponse::default();
    for td in &req.topic_data {
        let mut tr = TopicProduceResponse::default();
        if v >= 13 {
            tr.topic_id = td.topic_id;
        } else {
            tr.name = td.name.clone();
        }
        tr.partition_responses = td
            .partition_data
            .iter()
            .map(|pd| partition_result(pd.index, code))
            .collect();
        resp.responses.push(tr);
    }
    resp
}

fn error_message(e: &PartitionError, topic: &str, index: i32) -> Option<String> {
    match e {
        PartitionError::Append(a) => Some(a.to_string()),
        PartitionError::NotEnoughReplicas { isr, min_isr } => Some(format!(
            "The size of the current ISR {isr:?} is insufficient to satisfy the min.isr \
             requirement of {min_isr} for partition {topic}-{index}"
        )),
        _ => None,
    }
}

/// Waits until each pending acks=all partition may be answered, or `timeout_ms` passed,
/// and sets its error in the response accordingly.
async fn wait_for_acks(resp: &mut ProduceResponse, mut pending: Vec<Pending>, timeout_ms: i32) {
    let deadline = Instant::now() + Duration::from_millis(timeout_ms.max(0) as u64);
    while !pending.is_empty() {
        let waiter = Arc::new(Notify::new());
        for w in &pending {
            w.partition.add_waiter(&waiter);
        }
        pending.retain(|w| {
            let code = match w.partition.ack_status(w.required, w.leader_epoch) {
                Ok(AckStatus::Waiting) => return true,
                Ok(AckStatus::Done) => return false,
                Ok(AckStatus::NotEnoughReplicasAfterAppend) => {
                    ResponseError::NotEnoughReplicasAfterAppend.code()
                }
                Err(e) => super::errors::partition_error_code(&e),
            };
            resp.responses[w.topic].partition_responses[w.index].error_code = code;
            false
        });
        if pending.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            for w in &pending {
                resp.responses[w.topic].partition_responses[w.index].error_code =
                    ResponseError::RequestTimedOut.code();
            }
            break;
        }
        let _ = tokio::time::timeout_at(deadline, waiter.notified()).await;
    }
}

#[cfg(test)]
mod tests {
    //! acks=all against partitions with followers, driven through the handler: the follower
    //! side is played by calling the partition's leader-state methods, as fetches would.

    use std::collections::BTreeMap;

    use bytes::Buf;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{RequestHeader, ResponseHeader, TopicName};
    use kafka_protocol::protocol::{Decodable, Encodable};

    use super::*;
    use crate::cluster::metadata::PartitionRecord;
    use crate::log::batch::test_support::simple_batch;
    use crate::testing::LocalBroker;

    struct Fixture {
        node: LocalBroker,
        broker: Arc<crate::api::Frontend>,
        partition: Arc<Partition>,
    }

    /// A one-voter node driven by the test, with topic `t` (min.insync.replicas=2) whose
    /// partition 0 it leads with `replicas` assigned and `isr` in sync.
    fn fixture(replicas: &[i32], isr: &[i32]) -> Fixture {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let node = crate::testing::Broker::builder().start_on(rt).unwrap();
        let configs = BTreeMap::from([("min.insync.replicas".into(), "2".into())]);
        let topic = node.block_on(node.create_topic("t", 1, configs)).unwrap();
        let partition = topic.partitions[0].clone();
        let record = PartitionRecord {
            leader_epoch: 1,
            partition_epoch: 1,
            ..PartitionRecord::for_test(replicas, isr, 1)
        };
        assert!(partition.become_leader(&record, now_ms()).unwrap());
        Fixture {
            broker: node.broker().frontend.clone(),
            node,
            partition,
        }
    }

    /// Sends a Produce v9 of one 2-record batch to t-0; returns (error, base offset).
    async fn produce(b: &crate::api::Frontend, acks: i16, timeout_ms: i32) -> (i16, i64) {
        let mut pd = PartitionProduceData::default();
        pd.index = 0;
        pd.records = Some(Bytes::from(simple_batch(2, 1000, 10)));
        let mut td = TopicProduceData::default();
        td.name = TopicName(StrBytes::from_static_str("t"));
        td.partition_data = vec![pd];
        let mut req = ProduceRequest::default();
        req.acks = acks;
        req.timeout_ms = timeout_ms;
        req.topic_data = vec![td];
        let mut frame = BytesMut::new();
        let mut h = RequestHeader::default();
        h.request_api_key = ApiKey::Produce as i16;
        h.request_api_version = 9;
        h.correlation_id = 5;
        h.encode(&mut frame, ApiKey::Produce.request_header_version(9))
            .unwrap();
        req.encode(&mut frame, 9).unwrap();
        let resp = b.dispatch(frame.freeze()).await.unwrap().unwrap();
        let mut body = Bytes::from(resp.to_vec().unwrap());
        body.advance(4);
        ResponseHeader::decode(&mut body, ApiKey::Produce.response_header_version(9)).unwrap();
        let r = ProduceResponse::decode(&mut body, 9).unwrap();
        let p = &r.responses[0].partition_responses[0];
        (p.error_code, p.base_offset)
    }

    fn code(e: ResponseError) -> i16 {
        e.code()
    }

    #[test]
    fn below_min_isr_acks_all_is_refused_and_nothing_written() {
        let f = fixture(&[1, 2], &[1]);
        f.node.block_on(async {
            let (err, _) = produce(&f.broker, -1, 1000).await;
            assert_eq!(err, code(ResponseError::NotEnoughReplicas));
            assert_eq!(f.partition.log_end_offset(), 0);
            // acks=1 is written (and not exposed while the partition is under min ISR).
            assert_eq!(produce(&f.broker, 1, 1000).await, (0, 0));
            assert_eq!(f.partition.log_end_offset(), 2);
            assert_eq!(f.partition.high_watermark(), 0);
        });
    }

    #[test]
    fn acks_all_waits_for_the_follower_or_times_out() {
        let f = fixture(&[1, 2], &[1, 2]);
        f.node.block_on(acks_all_waits(&f));
    }

    async fn acks_all_waits(f: &Fixture) {
        // Nobody fetches: the request's timeout answers, the records stay written.
        let (err, base) = produce(&f.broker, -1, 50).await;
        assert_eq!((err, base), (code(ResponseError::RequestTimedOut), 0));
        assert_eq!(f.partition.log_end_offset(), 2);
        // The follower fetches from the log end while the produce waits.
        let b = f.broker.clone();
        let waiting = tokio::spawn(async move { produce(&b, -1, 30_000).await });
        while f.partition.log_end_offset() < 4 {
            tokio::task::yield_now().await;
        }
        f.partition.on_follower_fetch(2, 4, 1, now_ms()).unwrap();
        assert_eq!(waiting.await.unwrap(), (0, 2));
        assert_eq!(f.partition.high_watermark(), 4);
    }

    #[test]
    fn isr_shrink_or_leadership_loss_while_waiting() {
        let f = fixture(&[1, 2], &[1, 2]);
        f.node.block_on(isr_shrink_or_leadership_loss(&f));
    }

    async fn isr_shrink_or_leadership_loss(f: &Fixture) {
        let b = f.broker.clone();
        let waiting = tokio::spawn(async move { produce(&b, -1, 30_000).await });
        while f.partition.log_end_offset() < 2 {
            tokio::task::yield_now().await;
        }
        // The follower gets the records, then the controller drops it from the ISR, before
        // the waiting produce runs again.
        f.partition.on_follower_fetch(2, 2, 1, now_ms()).unwrap();
        let shrunk = PartitionRecord {
            leader_epoch: 1,
            partition_epoch: 2,
            ..PartitionRecord::for_test(&[1, 2], &[1], 1)
        };
        assert!(f.partition.on_committed(&shrunk));
        assert_eq!(
            waiting.await.unwrap(),
            (code(ResponseError::NotEnoughReplicasAfterAppend), 0)
        );
        // Back in the ISR; a produce waits, and this broker stops leading.
        let grown = PartitionRecord {
            leader_epoch: 1,
            partition_epoch: 3,
            ..PartitionRecord::for_test(&[1, 2], &[1, 2], 1)
        };
        assert!(f.partition.on_committed(&grown));
        let b = f.broker.clone();
        let waiting = tokio::spawn(async move { produce(&b, -1, 30_000).await });
        while f.partition.log_end_offset() < 4 {
            tokio::task::yield_now().await;
        }
        assert!(f.partition.become_follower(2, 2).unwrap());
        assert_eq!(
            waiting.await.unwrap(),
            (code(ResponseError::NotLeaderOrFollower), 2)
        );
        // And a follower takes no produce at all.
        let (err, _) = produce(&f.broker, 1, 1000).await;
        assert_eq!(err, code(ResponseError::NotLeaderOrFollower));
    }
}
