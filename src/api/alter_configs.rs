//! AlterConfigs (key 33), versions 0-2: the legacy form of IncrementalAlterConfigs (Admin
//! `alterConfigs`, older tools). Each resource's configs are replaced whole: the keys given
//! are set, every other key the resource has set is deleted.
//!
//! Behavior: TOPIC, BROKER and GROUP resources as IncrementalAlterConfigs does them (validation,
//! errors, live application, persistence: `config_changes`); BROKER_LOGGER and other
//! resource types are INVALID_REQUEST. `validate_only` checks without applying.
//!
//! Authorization (Kafka's `ControllerApis`): ALTER_CONFIGS on the topic, the group, or the
//! cluster for BROKER; a refused resource is TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED
//! with no message and is left unchanged. BROKER_LOGGER is refused as invalid before that.
//!
//! Version notes: v1 is the same as v0 (throttle behaviour, KIP-219); v2 is flexible.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse, ApiKey};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::authz;
use super::config_changes::{
    BROKER, Failure, GROUP, Op, SET, TOPIC, alter_broker, alter_group, alter_topic, invalid_request,
};
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::AlterConfigs,
    min: 0,
    max: 2,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn alter(b: &Base, res: &AlterConfigsResource, validate_only: bool) -> Result<(), Failure> {
    let name = res.resource_name.as_str();
    let ops: Vec<Op> = res
        .configs
        .iter()
        .map(|c| Op {
            name: c.name.to_string(),
            op: SET,
            value: c.value.as_ref().map(|v| v.to_string()),
        })
        .collect();
    match res.resource_type {
        TOPIC => alter_topic(b, name, ops, true, validate_only).await,
        BROKER => alter_broker(b, name, ops, true, validate_only).await,
        GROUP => alter_group(b, name, ops, true, validate_only).await,
        super::config_changes::BROKER_LOGGER => Err(invalid_request(
            "AlterConfigs is deprecated and does not support the resource type BROKER_LOGGER",
        )),
        other => Err(invalid_request(format!(
            "Altering configs of resource type {other} is not supported"
        ))),
    }
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: AlterConfigsRequest = super::decode(&ctx, body)?;
    let mut resp = AlterConfigsResponse::default();
    for res in &req.resources {
        let mut r = AlterConfigsResourceResponse::default();
        r.resource_type = res.resource_type;
        r.resource_name = res.resource_name.clone();
        r.error_message = None;
        let name = res.resource_name.as_str();
        let refused = match res.resource_type {
            super::config_changes::BROKER_LOGGER => None,
            t => ctx.config_resource_error(&b, authz::Op::AlterConfigs, t, name),
        };
        let done = match refused {
            Some(code) => Err((code, None)),
            None => alter(&b, res, req.validate_only).await,
        };
        if let Err((code, message)) = done {
            r.error_code = code;
            r.error_message = message.map(StrBytes::from_string);
        }
        resp.responses.push(r);
    }
    super::respond(&ctx, &resp)
}
