//! DescribeCluster (key 60), versions 0-2: the cluster id, a controller id and the brokers.
//!
//! Behavior:
//! - One node: this node is the only broker and the controller.
//! - A cluster: the registered brokers from the metadata image at the endpoint of the
//!   listener clients use, unfenced ones only unless v2 asks for fenced ones too
//!   (`include_fenced_brokers`, marked `is_fenced`); the controller id is a live broker, the
//!   active controller's node if it is one, as Kafka's KRaft brokers answer (see
//!   `metadata::client_controller_id`).
//! - Brokers serve the BROKER endpoint type only: asking for CONTROLLER (2) is
//!   MISMATCHED_ENDPOINT_TYPE, any other type UNSUPPORTED_ENDPOINT_TYPE, with Kafka's messages.
//!
//! Version notes: v1 adds `endpoint_type` (KIP-919); v2 `include_fenced_brokers` and
//! `is_fenced` (KIP-1073).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{ApiKey, BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::DescribeCluster,
    min: 0,
    max: 2,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

/// Kafka's endpoint types (KIP-919).
const BROKER_ENDPOINT: i8 = 1;
const CONTROLLER_ENDPOINT: i8 = 2;

fn broker(id: i32, host: &str, port: u16, rack: Option<String>) -> DescribeClusterBroker {
    let mut node = DescribeClusterBroker::default();
    node.broker_id = BrokerId(id);
    node.host = StrBytes::from_string(host.to_string());
    node.port = port as i32;
    node.rack = rack.map(StrBytes::from_string);
    node
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DescribeClusterRequest = super::decode(&ctx, body)?;
    let mut resp = DescribeClusterResponse::default();
    if ctx.version >= 1 && req.endpoint_type != BROKER_ENDPOINT {
        let (e, m) = if req.endpoint_type == CONTROLLER_ENDPOINT {
            (
                ResponseError::MismatchedEndpointType,
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER".to_string(),
            )
        } else {
            (
                ResponseError::UnsupportedEndpointType,
                format!("Unsupported endpoint type {}", req.endpoint_type),
            )
        };
        resp.error_code = e.code();
        resp.error_message = Some(StrBytes::from_string(m));
        return super::respond(&ctx, &resp);
    }
    resp.cluster_authorized_operations = ctx.ops_if(
        &b,
        req.include_cluster_authorized_operations,
        crate::security::acl::ResourceType::Cluster,
        crate::security::acl::model::CLUSTER_NAME,
    );
    let c = b.node();
    let img = c.image();
    let listener = &*ctx.listener;
    let fenced_too = ctx.version >= 2 && req.include_fenced_brokers;
    resp.cluster_id = StrBytes::from_string(
        img.cluster_id
            .clone()
            .unwrap_or_else(|| b.controller.cluster_id.clone()),
    );
    for st in img.brokers.values() {
        if st.fenced && !fenced_too {
            continue;
        }
        let reg = &st.registration;
        let Some(e) = reg.endpoints.iter().find(|e| e.name == listener) else {
            continue;
        };
        let mut node = broker(reg.broker_id, &e.host, e.port, reg.rack.clone());
        node.is_fenced = ctx.version >= 2 && st.fenced;
        resp.brokers.push(node);
    }
    let live: Vec<i32> = resp
        .brokers
        .iter()
        .filter(|n| !n.is_fenced)
        .map(|n| n.broker_id.0)
        .collect();
    resp.controller_id = BrokerId(super::metadata::client_controller_id(c, &live));
    super::respond(&ctx, &resp)
}
