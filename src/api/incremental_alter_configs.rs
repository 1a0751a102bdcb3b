//! IncrementalAlterConfigs (key 44), versions 0-1 (`kafka-configs --alter`, Admin
//! `incrementalAlterConfigs`).
//!
//! Behavior:
//! - TOPIC resources: SET (0) and DELETE (1) any topic config; APPEND (2) and SUBTRACT (3)
//!   only list configs (`cleanup.policy`, the throttled replica lists), starting from the
//!   value in force (the topic's own or the default). Kafka's errors and messages: an empty
//!   name or a key named twice is INVALID_REQUEST, a null value for SET/APPEND/SUBTRACT
//!   INVALID_REQUEST, an unknown operation UNKNOWN_SERVER_ERROR, an unknown topic
//!   UNKNOWN_TOPIC_OR_PARTITION, an unknown key, a bad value or APPEND/SUBTRACT on a
//!   non-list key INVALID_CONFIG. A resource's changes apply all or none; `validate_only`
//!   checks without applying. In a cluster the active controller commits them and the answer
//!   waits until this broker has applied them; on one node the controller rewrites the
//!   topic's configs. Log settings of existing replicas (segment size, retention) follow on
//!   the next start; min.insync.replicas at once.
//! - BROKER and BROKER_LOGGER resources: the name must be this node's id (or empty for
//!   cluster-wide broker defaults), with Kafka's messages otherwise. Sluice has no dynamic
//!   broker configs or loggers yet: DELETE of broker configs succeeds (nothing is set, so
//!   nothing is left to delete; kafka-reassign-partitions clears its throttles this way),
//!   anything else is refused with INVALID_REQUEST.
//! - Other resource types are INVALID_REQUEST.
//!
//! Version notes: v1 is flexible.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{ApiSpec, RequestCtx};
use crate::broker::Broker;
use crate::cluster::TopicError;
use crate::cluster::metadata::ConfigResource;
use crate::cluster::node::ControllerRequest;
use crate::cluster::topic_config::{self, config_type};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::IncrementalAlterConfigs,
    min: 0,
    max: 1,
    handle: |b, ctx, body| Box::pin(handle(b, ctx, body)),
};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// An error code and its message (None: null).
type Failure = (i16, Option<String>);

fn invalid_request(m: impl Into<String>) -> Failure {
    (ResponseError::InvalidRequest.code(), Some(m.into()))
}

fn invalid_config(m: impl Into<String>) -> Failure {
    (ResponseError::InvalidConfig.code(), Some(m.into()))
}

/// One requested operation.
struct Op {
    name: String,
    op: i8,
    value: Option<String>,
}

/// Checks that do not depend on the resource's state, in Kafka's order.
fn check_ops(ops: &[Op]) -> Result<(), Failure> {
    let mut seen = HashSet::new();
    if !ops.iter().all(|o| seen.insert(o.name.as_str())) {
        return Err(invalid_request("Error due to duplicate config keys"));
    }
    if ops.iter().any(|o| !(SET..=SUBTRACT).contains(&o.op)) {
        return Err((ResponseError::UnknownServerError.code(), None));
    }
    if let Some(o) = ops.iter().find(|o| o.op != DELETE && o.value.is_none()) {
        return Err(invalid_request(format!(
            "Null value not supported for : {}",
            o.name
        )));
    }
    Ok(())
}

/// The changes `ops` make to a topic whose own configs are `current`: each key set to a
/// value (`Some`) or deleted (`None`), validated. APPEND and SUBTRACT work on the value in
/// force, the topic's own or the default.
fn topic_changes(
    b: &Broker,
    current: &BTreeMap<String, String>,
    ops: &[Op],
) -> Result<Vec<(String, Option<String>)>, Failure> {
    let described = topic_config::describe(&b.config, current);
    let mut out = Vec::with_capacity(ops.len());
    for o in ops {
        if !topic_config::is_topic_config(&o.name) {
            return Err(invalid_config(format!(
                "Unknown topic config name: {}",
                o.name
            )));
        }
        let value = match o.op {
            DELETE => None,
            SET => o.value.clone(),
            _ => {
                let verb = if o.op == APPEND { "APPEND" } else { "SUBTRACT" };
                let d = described.iter().find(|d| d.name == o.name);
                let Some(d) = d.filter(|d| d.config_type == config_type::LIST) else {
                    return Err(invalid_config(format!(
                        "Can't {verb} to key {} because its type is not LIST.",
                        o.name
                    )));
                };
                let items = |v: &str| -> Vec<String> {
                    v.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                };
                let mut list = items(&d.value);
                let given = items(o.value.as_deref().unwrap_or_default());
                if o.op == APPEND {
                    for g in given {
                        if !list.contains(&g) {
                            list.push(g);
                        }
                    }
                } else {
                    list.retain(|x| !given.contains(x));
                }
                Some(list.join(","))
            }
        };
        if let Some(v) = &value {
            topic_config::validate(&o.name, v).map_err(invalid_config)?;
        }
        out.push((o.name.clone(), value));
    }
    Ok(out)
}

fn topic_failure(e: &TopicError, topic: &str) -> Failure {
    match e {
        TopicError::UnknownTopic => (
            ResponseError::UnknownTopicOrPartition.code(),
            Some(format!("The topic '{topic}' does not exist.")),
        ),
        e => (
            super::errors::topic_error_code(e),
            super::errors::topic_error_message(e),
        ),
    }
}

async fn alter_topic(
    b: &Broker,
    name: &str,
    ops: &[Op],
    validate_only: bool,
) -> Result<(), Failure> {
    if name.is_empty() {
        return Err(invalid_request("Default topic resources are not allowed."));
    }
    check_ops(ops)?;
    let unknown = || topic_failure(&TopicError::UnknownTopic, name);
    let current = match b.cluster() {
        Some(c) => {
            let img = c.image();
            if img.topic(name).is_none() {
                return Err(unknown());
            }
            img.configs
                .get(&ConfigResource::Topic(name.to_string()))
                .cloned()
                .unwrap_or_default()
        }
        None => b
            .controller
            .topic(name)
            .ok_or_else(unknown)?
            .configs
            .clone(),
    };
    let changes = topic_changes(b, &current, ops)?;
    if validate_only || changes.is_empty() {
        return Ok(());
    }
    let Some(c) = b.cluster() else {
        return b
            .controller
            .alter_topic_configs(name, &changes)
            .await
            .map_err(|e| topic_failure(&e, name));
    };
    let req = ControllerRequest::AlterTopicConfigs(
        changes
            .iter()
            .map(|(k, v)| (name.to_string(), k.clone(), v.clone()))
            .collect(),
    );
    let applied = |c: &crate::cluster::node::ClusterNode| {
        c.broker()
            .and_then(|b| b.controller.topic(name))
            .is_some_and(|t| changes.iter().all(|(k, v)| t.configs.get(k) == v.as_ref()))
    };
    let results = c.simple(req, changes.len(), applied).await;
    match results.into_iter().find_map(Result::err) {
        Some(e) => Err(topic_failure(&e, name)),
        None => Ok(()),
    }
}

/// A BROKER or BROKER_LOGGER resource name must be this node's id (or, for BROKER, empty:
/// the cluster-wide default).
fn check_node_name(b: &Broker, resource_type: i8, name: &str) -> Result<(), Failure> {
    if resource_type == BROKER && name.is_empty() {
        return Ok(());
    }
    let id: i32 = name
        .parse()
        .map_err(|_| invalid_request(format!("Node id must be an integer, but it is: {name}")))?;
    if id != b.node_id() {
        return Err(invalid_request(format!(
            "Unexpected broker id, expected {}, but received {name}",
            b.node_id()
        )));
    }
    Ok(())
}

async fn alter(b: &Broker, res: &AlterConfigsResource, validate_only: bool) -> Result<(), Failure> {
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
        TOPIC => alter_topic(b, name, &ops, validate_only).await,
        BROKER | BROKER_LOGGER => {
            check_node_name(b, res.resource_type, name)?;
            check_ops(&ops)?;
            // No dynamic value is ever set, so deleting one is done already (tools such as
            // kafka-reassign-partitions clear their throttles this way).
            if res.resource_type == BROKER && ops.iter().all(|o| o.op == DELETE) {
                return Ok(());
            }
            let keys: Vec<&str> = ops.iter().map(|o| o.name.as_str()).collect();
            let what = if res.resource_type == BROKER {
                "Dynamic broker configs are"
            } else {
                "Broker loggers are"
            };
            Err(invalid_request(format!(
                "{what} not supported by this broker yet: cannot alter {}",
                keys.join(", ")
            )))
        }
        other => Err(invalid_request(format!(
            "Altering configs of resource type {other} is not supported"
        ))),
    }
}

async fn handle(b: Arc<Broker>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: IncrementalAlterConfigsRequest = super::decode(&ctx, body)?;
    let mut resp = IncrementalAlterConfigsResponse::default();
    for res in &req.resources {
        let mut r = AlterConfigsResourceResponse::default();
        r.resource_type = res.resource_type;
        r.resource_name = res.resource_name.clone();
        r.error_message = None;
        if let Err((code, message)) = alter(&b, res, req.validate_only).await {
            r.error_code = code;
            r.error_message = message.map(StrBytes::from_string);
        }
        resp.responses.push(r);
    }
    super::respond(&ctx, &resp)
}
