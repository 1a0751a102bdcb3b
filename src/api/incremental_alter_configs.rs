//! IncrementalAlterConfigs (key 44), versions 0-1 (`kafka-configs --alter`, Admin
//! `incrementalAlterConfigs`).
//!
//! Behavior:
//! - TOPIC resources: SET (0) and DELETE (1) any topic config; APPEND (2) and SUBTRACT (3)
//!   only list configs (`cleanup.policy`, the throttled replica lists), starting from the
//!   value in force (the topic's own or the broker's). The partitions take the new settings
//!   at once (retention, segment size and age, flush, min.insync.replicas, max.message.bytes,
//!   message.timestamp.type).
//! - BROKER resources (this node's id, or empty for the cluster-wide default): dynamic broker
//!   configs (KIP-226), persisted in the controller's metadata; topics without an override
//!   follow changed log defaults at once.
//! - BROKER_LOGGER resources (this node's id): SET a logger's level, DELETE it (root's level
//!   then); Kafka's errors for unknown loggers and levels, root's deletion, APPEND and
//!   SUBTRACT (`crate::logging`). Effective at once, not persisted (as Kafka).
//! - GROUP resources (any group name, whether or not the group exists): SET and DELETE the
//!   dynamic group configs (`cluster::group_config`), validated as a whole with Kafka's messages;
//!   APPEND and SUBTRACT are INVALID_CONFIG for every key, as Kafka answers. Persisted in the
//!   controller's metadata; the group and share coordinators read them at the next heartbeat.
//! - Other resource types are INVALID_REQUEST.
//!
//! Validation, errors and how changes are applied: `config_changes`.
//!
//! Authorization (Kafka's `ControllerApis` and, for loggers, `ConfigAdminManager`):
//! ALTER_CONFIGS on the topic, the group, or the cluster for BROKER and BROKER_LOGGER; a
//! refused resource is TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED with no message and is
//! left unchanged.
//!
//! Version notes: v1 is flexible.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::config_changes::{
    APPEND, BROKER, BROKER_LOGGER, DELETE, Failure, GROUP, Op, SET, TOPIC, alter_broker,
    alter_group, alter_topic, check_node_name, check_ops, invalid_request,
};
use super::{ApiSpec, RequestCtx};
use crate::logging::{self, Change, Refused};
use crate::net::response::Response;
use kafka_protocol::ResponseError;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::IncrementalAlterConfigs,
    min: 0,
    max: 1,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn alter(b: &Base, res: &AlterConfigsResource, validate_only: bool) -> Result<(), Failure> {
    let name = res.resource_name.as_str();
    let ops: Vec<Op> = res
        .configs
        .iter()
        .map(|c| Op {
            name: c.name.to_string(),
            op: c.config_operation,
            value: c.value.as_ref().map(|v| v.to_string()),
        })
        .collect();
    match res.resource_type {
        TOPIC => alter_topic(b, name, ops, false, validate_only).await,
        BROKER => alter_broker(b, name, ops, false, validate_only).await,
        GROUP => alter_group(b, name, ops, false, validate_only).await,
        BROKER_LOGGER => {
            check_node_name(b, BROKER_LOGGER, name)?;
            check_ops(&ops)?;
            let changes: Vec<Change> = ops
                .into_iter()
                .map(|o| match (o.op, o.value) {
                    (SET, v) => Change::Set(o.name, v.unwrap_or_default()),
                    (DELETE, _) => Change::Delete(o.name),
                    (APPEND, _) => Change::Other(o.name, "APPEND".into()),
                    (_, _) => Change::Other(o.name, "SUBTRACT".into()),
                })
                .collect();
            logging::change(&changes, validate_only).map_err(|e| match e {
                Refused::InvalidConfig(m) => (ResponseError::InvalidConfig.code(), Some(m)),
                Refused::InvalidRequest(m) => invalid_request(m),
            })
        }
        other => Err(invalid_request(format!(
            "Altering configs of resource type {other} is not supported"
        ))),
    }
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: IncrementalAlterConfigsRequest = super::decode(&ctx, body)?;
    let mut resp = IncrementalAlterConfigsResponse::default();
    for res in &req.resources {
        let mut r = AlterConfigsResourceResponse::default();
        r.resource_type = res.resource_type;
        r.resource_name = res.resource_name.clone();
        r.error_message = None;
        let name = res.resource_name.as_str();
        let refused =
            ctx.config_resource_error(&b, super::authz::Op::AlterConfigs, res.resource_type, name);
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
