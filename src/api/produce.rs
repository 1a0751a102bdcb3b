//! Produce (key 0), advertised 0-13.
//!
//! Versions 0-2 are advertised (librdkafka enables compression only when it sees Produce v0
//! listed) but not served: a request at one of them closes the connection, as on Kafka 4.4
//! (kafka-protocol cannot decode them either). Batches are validated (magic 2, CRC, size
//! against max.message.bytes) and stored as they came, with only base offset and partition
//! leader epoch patched (and the LogAppendTime fields for such topics).
//! acks=0 gets no response; acks=1 and acks=-1 are answered after the append (on a cluster of
//! one the ISR is the leader). From v13 topics are named by id.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;

use super::{ApiSpec, RequestCtx};
use crate::broker::{Broker, now_ms};
use crate::cluster::PartitionError;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::Produce,
    min: 0,
    max: 13,
    handle: |b, ctx, body| Box::pin(handle(b, ctx, body)),
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

async fn handle(b: Arc<Broker>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
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
    let mut resp = ProduceResponse::default();
    let mut scratch = BytesMut::new();
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
        for pd in td.partition_data {
            let unknown = if v >= 13 {
                ResponseError::UnknownTopicId.code()
            } else {
                ResponseError::UnknownTopicOrPartition.code()
            };
            let result = if !matches!(acks, -1..=1) {
                partition_result(pd.index, ResponseError::InvalidRequiredAcks.code())
            } else {
                match topic
                    .as_ref()
                    .and_then(|t| t.partitions.get(pd.index as usize).map(|p| (t, p)))
                {
                    None => partition_result(pd.index, unknown),
                    Some((t, p)) => {
                        let eff = &t.effective;
                        let records = pd.records.unwrap_or_default();
                        if acks == -1
                            && (p.replica_state().isr.len() as i32) < eff.min_insync_replicas
                        {
                            partition_result(pd.index, ResponseError::NotEnoughReplicas.code())
                        } else {
                            // The log patches offsets in place; the request buffer is shared, so
                            // the batches are moved into a reusable scratch buffer first.
                            scratch.clear();
                            scratch.extend_from_slice(&records);
                            let append_time = eff.log_append_time.then(now_ms);
                            match p.append_as_leader(
                                &mut scratch,
                                append_time,
                                eff.max_message_bytes,
                            ) {
                                Ok(info) => {
                                    let mut r = partition_result(pd.index, 0);
                                    r.base_offset = info.first_offset;
                                    r.log_append_time_ms = info.log_append_time;
                                    r.log_start_offset = p.log_start_offset();
                                    r
                                }
                                Err(e) => {
                                    let mut r = partition_result(
                                        pd.index,
                                        super::errors::partition_error_code(&e),
                                    );
                                    if v >= 8 {
                                        let msg = match &e {
                                            PartitionError::Append(a) => Some(a.to_string()),
                                            PartitionError::Producer(p) => Some(p.to_string()),
                                            _ => None,
                                        };
                                        r.error_message = msg.map(StrBytes::from_string);
                                    }
                                    r
                                }
                            }
                        }
                    }
                }
            };
            tr.partition_responses.push(result);
        }
        resp.responses.push(tr);
    }
    if acks == 0 {
        return Ok(None);
    }
    super::respond(&ctx, &resp)
}
