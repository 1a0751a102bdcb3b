//! DescribeProducers (key 61), version 0 (Kafka 4.4's only version; kafka-protocol has the
//! same).
//!
//! Behavior, as Kafka's `ReplicaManager.activeProducerState`:
//! - Per requested partition, the producers its replica on this broker remembers: producer id,
//!   epoch, last sequence (-1 if no batch of the epoch is cached), last timestamp, the epoch of
//!   the coordinator that last wrote a marker for it (-1: none), and the first offset of its
//!   ongoing transaction (-1: none). kafka-transactions' describe-producers and find-hanging
//!   read it.
//! - Any replica answers, leader or follower (the admin client asks the leader unless told a
//!   broker id). A partition with no replica here is NOT_LEADER_OR_FOLLOWER (the topic has it,
//!   other brokers hold it); an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION.
//! - A topic the principal may not READ: TOPIC_AUTHORIZATION_FAILED on each of its
//!   partitions, before its existence is told.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeProducersResponse, ProducerId,
};

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::DescribeProducers,
    min: 0,
    max: 0,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DescribeProducersRequest = super::decode(&ctx, body)?;
    let mut resp = DescribeProducersResponse::default();
    for rt in req.topics {
        let refused = ctx.topic_error(&b, super::authz::Op::Read, rt.name.0.as_str());
        let topic = b.controller.topic(rt.name.0.as_str());
        let mut tr = TopicResponse::default();
        tr.name = rt.name;
        for index in rt.partition_indexes {
            let mut pr = PartitionResponse::default();
            pr.partition_index = index;
            let found = match (refused, &topic) {
                (Some(code), _) => Err(code),
                (None, Some(t)) => super::local_partition(t, index),
                (None, None) => Err(ResponseError::UnknownTopicOrPartition.code()),
            };
            match found {
                Err(code) => pr.error_code = code,
                Ok(p) => {
                    pr.active_producers = p
                        .producers()
                        .into_iter()
                        .map(|s| {
                            let mut ps = ProducerState::default();
                            ps.producer_id = ProducerId(s.producer_id);
                            ps.producer_epoch = s.epoch as i32;
                            ps.last_sequence = s.last_sequence;
                            ps.last_timestamp = s.last_timestamp;
                            ps.coordinator_epoch = s.coordinator_epoch;
                            ps.current_txn_start_offset = s.current_txn_start_offset;
                            ps
                        })
                        .collect()
                }
            }
            tr.partitions.push(pr);
        }
        resp.topics.push(tr);
    }
    super::respond(&ctx, &resp)
}
