//! DescribeCluster (key 60), versions 0-2: this node as the only broker and the controller.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{ApiKey, BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use super::{ApiSpec, RequestCtx};
use crate::broker::Broker;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::DescribeCluster,
    min: 0,
    max: 2,
    handle: |b, ctx, body| Box::pin(handle(b, ctx, body)),
};

async fn handle(b: Arc<Broker>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DescribeClusterRequest = super::decode(&ctx, body)?;
    let mut resp = DescribeClusterResponse::default();
    if ctx.version >= 1 {
        resp.endpoint_type = req.endpoint_type;
    }
    resp.cluster_id = StrBytes::from_string(b.controller.cluster_id.clone());
    resp.controller_id = BrokerId(b.node_id());
    let mut node = DescribeClusterBroker::default();
    node.broker_id = BrokerId(b.node_id());
    node.host = StrBytes::from_string(b.advertised.0.clone());
    node.port = b.advertised.1 as i32;
    resp.brokers = vec![node];
    super::respond(&ctx, &resp)
}
