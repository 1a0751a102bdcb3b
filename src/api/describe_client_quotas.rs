//! DescribeClientQuotas (key 48), versions 0-1 (kafka-configs --describe --entity-type
//! users/clients/ips, Admin.describeClientQuotas).
//!
//! Behavior, as Kafka 4.4 answers: the filter's components are matched against the
//! configured entities (exact name, the default entity, or any entity of a type; `strict`
//! leaves out entities with types the filter does not name), each entity with its quotas.
//! A bad filter is INVALID_REQUEST, an unknown entity type UNSUPPORTED_VERSION, with
//! Kafka's messages and no entries. Without DESCRIBE_CONFIGS on the cluster:
//! CLUSTER_AUTHORIZATION_FAILED and no entries.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{ApiKey, DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;
use crate::quota::entity::{Component, QuotaError};

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::DescribeClientQuotas,
    min: 0,
    max: 1,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DescribeClientQuotasRequest = super::decode(&ctx, body)?;
    let components: Vec<Component> = req
        .components
        .iter()
        .map(|c| Component {
            entity_type: c.entity_type.to_string(),
            match_type: c.match_type,
            name: c._match.as_ref().map(|m| m.to_string()),
        })
        .collect();
    let mut resp = DescribeClientQuotasResponse::default();
    if let Some(code) = ctx.cluster_error(&b, super::authz::Op::DescribeConfigs) {
        resp.error_code = code;
        resp.error_message = Some(StrBytes::from_static_str(
            super::authz::CLUSTER_DENIED_MESSAGE,
        ));
        resp.entries = None;
        return super::respond(&ctx, &resp);
    }
    match b.controller.client_quotas.describe(&components, req.strict) {
        Ok(found) => {
            resp.entries = Some(
                found
                    .into_iter()
                    .map(|(entity, values)| {
                        let mut e = EntryData::default();
                        e.entity = entity
                            .0
                            .into_iter()
                            .map(|(t, n)| {
                                let mut d = EntityData::default();
                                d.entity_type = StrBytes::from_string(t);
                                d.entity_name = n.map(StrBytes::from_string);
                                d
                            })
                            .collect();
                        e.values = values
                            .into_iter()
                            .map(|(k, v)| {
                                let mut d = ValueData::default();
                                d.key = StrBytes::from_string(k);
                                d.value = v;
                                d
                            })
                            .collect();
                        e
                    })
                    .collect(),
            );
        }
        Err(e) => {
            resp.entries = None;
            resp.error_code = match e {
                QuotaError::InvalidRequest(_) => ResponseError::InvalidRequest.code(),
                QuotaError::UnsupportedVersion(_) => ResponseError::UnsupportedVersion.code(),
            };
            resp.error_message = Some(StrBytes::from_string(e.message().to_string()));
        }
    }
    super::respond(&ctx, &resp)
}
