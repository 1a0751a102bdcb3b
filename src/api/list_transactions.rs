//! ListTransactions (key 66), versions 0-2.
//!
//! The transactional ids this broker coordinates (kafka-transactions asks every broker),
//! filtered by state names, producer ids, (v1+) a minimum running time and (v2+) a regular
//! expression the whole id must match (RE2 syntax, as Kafka's re2j). State names that are
//! not states come back in unknown_state_filters; COORDINATOR_LOAD_IN_PROGRESS while a
//! partition loads; INVALID_REGULAR_EXPRESSION for a pattern that does not compile. Only the
//! ids the principal may DESCRIBE are listed.
//!
//! Version notes: v1 adds duration_filter (KIP-994), v2 transactional_id_pattern (KIP-1152).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ApiKey, ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::Txns;
use super::{ApiSpec, RequestCtx};
use crate::clock::now_ms;
use crate::net::response::Response;
use crate::txn::coordinator::ListFilter;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::ListTransactions,
    min: 0,
    max: 2,
    handle: super::Handler::Txns(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Txns>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: ListTransactionsRequest = super::decode(&ctx, body)?;
    let mut resp = ListTransactionsResponse::default();
    let pattern = match req.transactional_id_pattern.as_deref() {
        Some(p) if ctx.version >= 2 && !p.is_empty() => {
            match regex::Regex::new(&format!("^(?:{p})$")) {
                Ok(r) => Some(r),
                Err(_) => {
                    resp.error_code = E::InvalidRegularExpression.code();
                    return super::respond(&ctx, &resp);
                }
            }
        }
        _ => None,
    };
    let filter = ListFilter {
        states: req.state_filters.iter().map(|s| s.to_string()).collect(),
        producer_ids: req.producer_id_filters.iter().map(|p| p.0).collect(),
        min_duration_ms: if ctx.version >= 1 {
            req.duration_filter
        } else {
            -1
        },
        pattern,
    };
    match b.txns.list(&filter, now_ms()) {
        Ok((listed, unknown)) => {
            resp.unknown_state_filters = unknown.into_iter().map(StrBytes::from_string).collect();
            resp.transaction_states = listed
                .into_iter()
                .filter(|l| ctx.may_txn(&b, super::authz::Op::Describe, &l.transactional_id))
                .map(|l| {
                    let mut s = TransactionState::default();
                    s.transactional_id = TransactionalId(StrBytes::from_string(l.transactional_id));
                    s.producer_id = ProducerId(l.producer_id);
                    s.transaction_state = StrBytes::from_static_str(l.state.name());
                    s
                })
                .collect();
        }
        Err(code) => resp.error_code = code,
    }
    super::respond(&ctx, &resp)
}
