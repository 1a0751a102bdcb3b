//! AlterClientQuotas (key 49), versions 0-1 (kafka-configs --alter --entity-type
//! users/clients/ips --add-config producer_byte_rate=..., Admin.alterClientQuotas).
//!
//! Behavior, as Kafka 4.4's controller answers: each entry is checked on its own, in Kafka's
//! order (a key given twice, an entity given twice, the entity's types and names, its keys
//! and values), and fails alone with INVALID_REQUEST and Kafka's message; the changes of the
//! entries that pass are made together (one node: `sluice-metadata`; a cluster: metadata
//! records, on every broker once this one has applied them). `validate_only` changes
//! nothing. Removing a key that is not set is not an error. Without ALTER_CONFIGS on the
//! cluster every entry fails with CLUSTER_AUTHORIZATION_FAILED and nothing changes.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::cluster::node::requests::ControllerRequest;
use crate::net::response::Response;
use crate::quota::QuotaEntity;
use crate::quota::entity::{self, QuotaError};

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::AlterClientQuotas,
    min: 0,
    max: 1,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

type Changes = Vec<(QuotaEntity, BTreeMap<String, Option<f64>>)>;

/// Makes the changes; an error applies to every entry that had changes.
async fn apply(b: &Base, changes: Changes) -> Result<(), (i16, String)> {
    let failure = |e: crate::cluster::TopicError| {
        (
            super::errors::topic_error_code(&e),
            super::errors::topic_error_message(&e).unwrap_or_default(),
        )
    };
    let c = b.node();
    let items: Vec<_> = changes
        .iter()
        .flat_map(|(e, set)| {
            let pairs: Vec<(String, Option<String>)> = e.0.clone().into_iter().collect();
            set.iter()
                .map(move |(k, v)| (pairs.clone(), k.clone(), v.map(|v| v.to_string())))
        })
        .collect();
    let n = items.len();
    let want: Vec<(QuotaEntity, BTreeMap<String, Option<f64>>)> = changes;
    let applied = |c: &crate::cluster::node::ClusterNode| {
        c.host().is_some_and(|b| {
            want.iter().all(|(e, set)| {
                let have = b.replicas().client_quotas.of(e);
                set.iter().all(|(k, v)| have.get(k) == v.as_ref())
            })
        })
    };
    let results = c
        .simple(ControllerRequest::AlterClientQuotas(items), n, applied)
        .await;
    match results.into_iter().find_map(Result::err) {
        Some(e) => Err(failure(e)),
        None => Ok(()),
    }
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: AlterClientQuotasRequest = super::decode(&ctx, body)?;
    let mut results: Vec<(Vec<(String, Option<String>)>, Result<bool, QuotaError>)> = Vec::new();
    let mut changes: Changes = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let refused = ctx.cluster_error(&b, super::authz::Op::AlterConfigs);
    for entry in &req.entries {
        let pairs: Vec<(String, Option<String>)> = entry
            .entity
            .iter()
            .map(|e| {
                (
                    e.entity_type.to_string(),
                    e.entity_name.as_ref().map(|n| n.to_string()),
                )
            })
            .collect();
        let ops: Vec<(String, Option<f64>)> = entry
            .ops
            .iter()
            .map(|o| (o.key.to_string(), (!o.remove).then_some(o.value)))
            .collect();
        let shown = QuotaEntity(pairs.iter().cloned().collect());
        // Kafka 4.4 answers a key given twice for an entity as it answers the entity given
        // twice.
        let outcome = if refused.is_some() {
            Ok(false)
        } else if entity::duplicate_key(&ops).is_some() || !seen.insert(shown.clone()) {
            Err(QuotaError::InvalidRequest(format!(
                "Ignoring duplicate entity {shown}"
            )))
        } else {
            entity::validate_entity(&pairs).and_then(|e| {
                let current = b.controller.client_quotas.of(&e);
                let set = entity::alteration(&current, &e, &ops)?;
                let changed = !set.is_empty();
                if changed {
                    changes.push((e, set));
                }
                Ok(changed)
            })
        };
        results.push((pairs, outcome));
    }
    let applied = if req.validate_only || changes.is_empty() {
        Ok(())
    } else {
        apply(&b, changes).await
    };
    let mut resp = AlterClientQuotasResponse::default();
    resp.entries = results
        .into_iter()
        .map(|(pairs, outcome)| {
            let mut e = EntryData::default();
            e.entity = pairs
                .into_iter()
                .map(|(t, n)| {
                    let mut d = EntityData::default();
                    d.entity_type = StrBytes::from_string(t);
                    d.entity_name = n.map(StrBytes::from_string);
                    d
                })
                .collect();
            let err = match (&outcome, &applied) {
                _ if refused.is_some() => Some((
                    refused.unwrap_or_default(),
                    super::authz::CLUSTER_DENIED_MESSAGE.to_string(),
                )),
                (Err(q), _) => Some((
                    ResponseError::InvalidRequest.code(),
                    q.message().to_string(),
                )),
                (Ok(true), Err((code, msg))) => Some((*code, msg.clone())),
                _ => None,
            };
            // Kafka leaves the message null on success.
            e.error_message = None;
            if let Some((code, msg)) = err {
                e.error_code = code;
                e.error_message = Some(StrBytes::from_string(msg));
            }
            e
        })
        .collect();
    super::respond(&ctx, &resp)
}
