//! AddPartitionsToTxn (key 24), versions 0-5.
//!
//! Behavior:
//! * v0-3 come from transactional producers: one transaction, whose partitions are added to
//!   it by the coordinator (written to `__transaction_state` before the answer). If any
//!   partition's topic is unknown, none is added: those get UNKNOWN_TOPIC_OR_PARTITION, the
//!   others OPERATION_NOT_ATTEMPTED.
//! * v4+ come from brokers (KIP-890): a batch of transactions, each `verify_only` (part 1:
//!   is each partition in the transaction? NONE or TRANSACTION_ABORTABLE) or an add made for
//!   a producer of transaction version 2 (part 2).
//! * Every partition of a transaction gets the transaction's error when the coordinator
//!   refuses it (NOT_COORDINATOR, CONCURRENT_TRANSACTIONS, PRODUCER_FENCED, ...).
//!
//! Version notes: v2+ PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH); v3
//! flexible; v4 batched, verify_only (KIP-890 part 1); v5 TRANSACTION_ABORTABLE (part 2).

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::Txns;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;
use crate::txn::state::TopicPartition;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::AddPartitionsToTxn,
    min: 0,
    max: 5,
    handle: super::Handler::Txns(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

/// Results by topic for (partition, error) pairs, topics in name order.
fn by_topic(results: Vec<(TopicPartition, i16)>) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut topics: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    let mut sorted = results;
    sorted.sort();
    for ((topic, index), code) in sorted {
        if topics.last().is_none_or(|t| t.name.0.as_str() != topic) {
            let mut t = AddPartitionsToTxnTopicResult::default();
            t.name = TopicName(StrBytes::from_string(topic));
            topics.push(t);
        }
        let mut p = AddPartitionsToTxnPartitionResult::default();
        p.partition_index = index;
        p.partition_error_code = code;
        if let Some(t) = topics.last_mut() {
            t.results_by_partition.push(p);
        }
    }
    topics
}

fn partitions(topics: &[AddPartitionsToTxnTopic]) -> BTreeSet<TopicPartition> {
    topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), *p)))
        .collect()
}

/// One transaction's per-partition results. Clients (v0-3) need WRITE on the transactional
/// id; every partition needs WRITE on its topic (checked before its existence), else the
/// transaction is refused with OPERATION_NOT_ATTEMPTED for the partitions that passed.
#[allow(clippy::too_many_arguments)]
async fn one(
    b: &Txns,
    ctx: &RequestCtx,
    version: i16,
    id: &str,
    producer_id: i64,
    producer_epoch: i16,
    verify_only: bool,
    parts: BTreeSet<TopicPartition>,
) -> Vec<(TopicPartition, i16)> {
    if version < 4
        && let Some(code) = ctx.txn_error(b, super::authz::Op::Write, id)
    {
        return parts.into_iter().map(|tp| (tp, code)).collect();
    }
    let refusal = |(t, p): &TopicPartition| {
        ctx.topic_error(b, super::authz::Op::Write, t).or_else(|| {
            (!b.controller.topic(t).is_some_and(|i| i.has_partition(*p)))
                .then(|| E::UnknownTopicOrPartition.code())
        })
    };
    if parts.iter().any(|tp| refusal(tp).is_some()) {
        return parts
            .into_iter()
            .map(|tp| {
                let code = refusal(&tp).unwrap_or(E::OperationNotAttempted.code());
                (tp, code)
            })
            .collect();
    }
    if verify_only {
        return b.txns.verify(id, producer_id, producer_epoch, &parts);
    }
    // Clients (v0-3) add with transaction version 0, brokers (v4+) for version-2 producers.
    let client_version = if version > 3 { 2 } else { 0 };
    let mut code = b
        .txns
        .add_partitions(id, producer_id, producer_epoch, &parts, client_version)
        .await;
    if version < 2 && code == E::ProducerFenced.code() {
        code = E::InvalidProducerEpoch.code();
    }
    parts.into_iter().map(|tp| (tp, code)).collect()
}

async fn handle(b: Arc<Txns>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: AddPartitionsToTxnRequest = super::decode(&ctx, body)?;
    let v = ctx.version;
    let mut resp = AddPartitionsToTxnResponse::default();
    if v >= 4
        && let Some(code) = ctx.cluster_error(&b, super::authz::Op::ClusterAction)
    {
        resp.error_code = code;
        return super::respond(&ctx, &resp);
    }
    if v < 4 {
        let parts = partitions(&req.v3_and_below_topics);
        let results = one(
            &b,
            &ctx,
            v,
            &req.v3_and_below_transactional_id.0,
            req.v3_and_below_producer_id.0,
            req.v3_and_below_producer_epoch,
            false,
            parts,
        )
        .await;
        resp.results_by_topic_v3_and_below = by_topic(results);
        return super::respond(&ctx, &resp);
    }
    for t in req.transactions {
        let results = one(
            &b,
            &ctx,
            v,
            &t.transactional_id.0,
            t.producer_id.0,
            t.producer_epoch,
            t.verify_only,
            partitions(&t.topics),
        )
        .await;
        let mut r = AddPartitionsToTxnResult::default();
        r.transactional_id = t.transactional_id;
        r.topic_results = by_topic(results);
        resp.results_by_transaction.push(r);
    }
    super::respond(&ctx, &resp)
}
