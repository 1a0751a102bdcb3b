//! FindCoordinator (key 10), versions 0-6.
//!
//! On a cluster of one this node coordinates every consumer group (key type 0) and every
//! transactional id (key type 1). v0-3 ask for one key; v4+ batch several in coordinator_keys.
//! librdkafka also reads this API's presence as a capability: it enables LZ4 only when
//! FindCoordinator is advertised.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::{ApiSpec, RequestCtx};
use crate::broker::Broker;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::FindCoordinator,
    min: 0,
    max: 6,
    handle: |b, ctx, body| Box::pin(handle(b, ctx, body)),
};

const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;

/// (error, node, host, port) for one key.
fn coordinator_for(b: &Broker, key_type: i8) -> (i16, i32, String, i32) {
    if key_type == GROUP || key_type == TRANSACTION {
        (
            0,
            b.node_id(),
            b.advertised.0.clone(),
            b.advertised.1 as i32,
        )
    } else {
        (ResponseError::InvalidRequest.code(), -1, String::new(), -1)
    }
}

/// In a cluster, a group's coordinator is the leader of its `__consumer_offsets` partition.
async fn cluster_coordinator(b: &Broker, key: &str, key_type: i8) -> (i16, i32, String, i32) {
    let (Some(c), GROUP) = (b.cluster(), key_type) else {
        return coordinator_for(b, key_type);
    };
    let unavailable = (
        ResponseError::CoordinatorNotAvailable.code(),
        -1,
        String::new(),
        -1,
    );
    if let Err(code) = crate::group::store::offsets_topic(b).await {
        return (code, -1, String::new(), -1);
    }
    let img = c.image();
    let Some(t) = img.topic(crate::group::store::TOPIC) else {
        return unavailable;
    };
    let n = t.partitions.len() as i32;
    let p = &t.partitions[crate::group::records::partition_for(key, n.max(1)) as usize];
    let listener = &b.config.advertised_listeners[0].name;
    let endpoint = img
        .brokers
        .get(&p.leader)
        .filter(|s| !s.fenced)
        .and_then(|s| {
            s.registration
                .endpoints
                .iter()
                .find(|e| &e.name == listener)
        });
    match endpoint {
        Some(e) => (0, p.leader, e.host.clone(), e.port as i32),
        None => unavailable,
    }
}

async fn handle(b: Arc<Broker>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: FindCoordinatorRequest = super::decode(&ctx, body)?;
    let mut resp = FindCoordinatorResponse::default();
    if ctx.version >= 4 {
        for key in req.coordinator_keys {
            let (err, node, host, port) = cluster_coordinator(&b, &key, req.key_type).await;
            let mut c = Coordinator::default();
            c.key = key;
            c.node_id = BrokerId(node);
            c.host = StrBytes::from_string(host);
            c.port = port;
            c.error_code = err;
            resp.coordinators.push(c);
        }
    } else {
        let (err, node, host, port) = cluster_coordinator(&b, &req.key, req.key_type).await;
        resp.error_code = err;
        resp.node_id = BrokerId(node);
        resp.host = StrBytes::from_string(host);
        resp.port = port;
    }
    super::respond(&ctx, &resp)
}
