//! DescribeTransactions (key 65), version 0.
//!
//! The state of each transactional id this broker coordinates: state name, timeout, start
//! time, producer id and epoch, partitions by topic. An id coordinated elsewhere gets
//! NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while its partition loads), an unknown one
//! (or one being expired) TRANSACTIONAL_ID_NOT_FOUND, an empty one INVALID_REQUEST.
//!
//! Authorization (Kafka's `KafkaApis`): an id the principal may not DESCRIBE is
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED, before its existence is told; the partitions listed
//! are only those of topics the principal may DESCRIBE.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::Txns;
use super::authz::Op;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::DescribeTransactions,
    min: 0,
    max: 0,
    handle: super::Handler::Txns(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Txns>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DescribeTransactionsRequest = super::decode(&ctx, body)?;
    let mut resp = DescribeTransactionsResponse::default();
    for id in req.transactional_ids {
        let mut s = TransactionState::default();
        let described = match ctx.txn_error(&b, Op::Describe, &id.0) {
            Some(code) => Err(code),
            None => b.txns.describe(&id.0),
        };
        match described {
            Ok(d) => {
                s.transaction_state = StrBytes::from_static_str(d.state.name());
                s.transaction_timeout_ms = d.timeout_ms;
                s.transaction_start_time_ms = d.start_ms;
                s.producer_id = ProducerId(d.producer_id);
                s.producer_epoch = d.producer_epoch;
                s.topics = d
                    .topics
                    .into_iter()
                    .filter(|(t, _)| ctx.may_topic(&b, Op::Describe, t))
                    .map(|(t, ps)| {
                        let mut td = TopicData::default();
                        td.topic = TopicName(StrBytes::from_string(t));
                        td.partitions = ps;
                        td
                    })
                    .collect();
            }
            Err(code) => s.error_code = code,
        }
        s.transactional_id = id;
        resp.transaction_states.push(s);
    }
    super::respond(&ctx, &resp)
}
