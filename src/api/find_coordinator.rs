//! FindCoordinator (key 10), versions 0-6.
//!
//! A consumer group's (key type 0) coordinator is the leader of its `__consumer_offsets`
//! partition, a transactional id's (key type 1) the leader of its `__transaction_state`
//! partition, a share partition's (key type 2, "group:topicId:partition", the share-state
//! APIs' coordinator) the leader of its `__share_group_state` partition; on a cluster of one
//! this node. `__transaction_state` and `__share_group_state` are created on the first
//! lookup (as Kafka does); until the partition has a leader, COORDINATOR_NOT_AVAILABLE. A
//! share key not of that form is INVALID_REQUEST. v0-3 ask for one key; v4+ batch several in coordinator_keys.
//! librdkafka also reads this API's presence as a capability: it enables LZ4 only when
//! FindCoordinator is advertised.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::Groups;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::FindCoordinator,
    min: 0,
    max: 6,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;
const SHARE: i8 = 2;

/// A share coordinator key names a group, a topic id (Kafka's base64) and a partition.
fn valid_share_key(key: &str) -> bool {
    let mut parts = key.rsplitn(3, ':');
    let (Some(p), Some(t), Some(g)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    !g.is_empty() && p.parse::<i32>().is_ok_and(|p| p >= 0) && t.len() == 22
}

/// (error, node, host, port) for one key.
type Found = (i16, i32, String, i32);

fn error(code: i16) -> Found {
    (code, -1, String::new(), -1)
}

/// A group's coordinator is the leader of its `__consumer_offsets` partition and a
/// transactional id's the leader of its `__transaction_state` partition (each topic is
/// created on first use); on one node, this broker.
/// DESCRIBE on the group or transactional id, CLUSTER_ACTION for share state keys (brokers'),
/// as Kafka checks before looking the coordinator up.
fn refusal(b: &Groups, ctx: &RequestCtx, key: &str, key_type: i8) -> Option<i16> {
    use super::authz::Op;
    match key_type {
        GROUP => ctx.group_error(b, Op::Describe, key),
        TRANSACTION => ctx.txn_error(b, Op::Describe, key),
        SHARE => ctx.cluster_error(b, Op::ClusterAction),
        _ => None,
    }
}

async fn coordinator(b: &Groups, ctx: &RequestCtx, key: &str, key_type: i8) -> Found {
    if let Some(code) = refusal(b, ctx, key, key_type) {
        return error(code);
    }
    let topic = match key_type {
        GROUP => crate::group::store::TOPIC,
        TRANSACTION => crate::txn::store::TOPIC,
        SHARE if valid_share_key(key) => crate::share::state::TOPIC,
        _ => return error(ResponseError::InvalidRequest.code()),
    };
    let ready = match key_type {
        TRANSACTION => crate::txn::ensure_ready(&*b.internal_topics, &b.config.txn).await,
        SHARE => b.share_states.ensure_topic().await.map(|_| ()),
        _ => {
            let cfg = crate::group::store::OffsetsTopic::from_broker(&b.config);
            crate::group::store::offsets_topic(&*b.internal_topics, &cfg)
                .await
                .map(|_| ())
        }
    };
    if let Err(code) = ready {
        return error(code);
    }
    let unavailable = error(ResponseError::CoordinatorNotAvailable.code());
    let img = b.node().image();
    let Some(t) = img.topic(topic) else {
        return unavailable;
    };
    let n = t.partitions.len() as i32;
    let p = &t.partitions[crate::group::records::partition_for(key, n.max(1)) as usize];
    let listener = &*ctx.listener;
    let endpoint = img
        .brokers
        .get(&p.leader)
        .filter(|s| !s.fenced)
        .and_then(|s| s.registration.endpoints.iter().find(|e| e.name == listener));
    match endpoint {
        Some(e) => (0, p.leader, e.host.clone(), e.port as i32),
        None => unavailable,
    }
}

async fn handle(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: FindCoordinatorRequest = super::decode(&ctx, body)?;
    let mut resp = FindCoordinatorResponse::default();
    if ctx.version >= 4 {
        for key in req.coordinator_keys {
            let (err, node, host, port) = coordinator(&b, &ctx, &key, req.key_type).await;
            let mut c = Coordinator::default();
            c.key = key;
            c.node_id = BrokerId(node);
            c.host = StrBytes::from_string(host);
            c.port = port;
            c.error_code = err;
            resp.coordinators.push(c);
        }
    } else {
        let (err, node, host, port) = coordinator(&b, &ctx, &req.key, req.key_type).await;
        resp.error_code = err;
        resp.node_id = BrokerId(node);
        resp.host = StrBytes::from_string(host);
        resp.port = port;
    }
    super::respond(&ctx, &resp)
}
