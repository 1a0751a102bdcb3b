//! DescribeQuorum (key 55), versions 0-2: the metadata quorum (`__cluster_metadata-0`), as
//! `kafka-metadata-quorum describe --status / --replication` shows it.
//!
//! Behavior:
//! - The request must name exactly `__cluster_metadata` partition 0; anything else gets
//!   UNKNOWN_TOPIC_OR_PARTITION for every partition it names, as Kafka's Raft client answers.
//! - In a cluster the answer is the Raft leader's view (leader, term as the leader epoch, high
//!   watermark, each voter's and observer's log end offset and last fetch / caught-up times).
//!   A node that does not lead asks the leader, as Kafka's brokers forward DescribeQuorum to
//!   the active controller; with no leader reachable it answers NOT_LEADER_OR_FOLLOWER for
//!   `__cluster_metadata-0`, as a Kafka controller that does not lead does.
//! - On one node: this node is the only voter and the leader of a quorum that elected itself
//!   once (epoch 1, as a freshly formatted Kafka node). There is no metadata log, so the high
//!   watermark and log end offset are 0 and the node has caught up now.
//! - Directory ids (v2): in a cluster each node's quorum directory id (`directory-id` in its
//!   `metadata.log.dir`, created once), as the leader learned it from its connections with
//!   that node (the zero id for one it has not met since it started); on one node the zero id,
//!   as Kafka reports voters configured with `controller.quorum.voters`.
//! - The voters are the quorum's replicated membership, which AddRaftVoter and RemoveRaftVoter
//!   change; a removed voter is listed among the observers.
//!
//! Without DESCRIBE on the cluster: CLUSTER_AUTHORIZATION_FAILED at the top, no topics.
//!
//! Version notes: v1 adds the last fetch and last caught-up timestamps (KIP-836); v2 adds
//! error messages, replica directory ids and `nodes`, the voters' controller listener
//! endpoints (KIP-853). On one node, which has no controller listener, `nodes` names the
//! client listener the request can be sent to.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeQuorumRequest, DescribeQuorumResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::cluster::node::requests::{QuorumView, ReplicaView};
use crate::cluster::node::{ClusterNode, ControllerReply, ControllerRequest};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::DescribeQuorum,
    min: 0,
    max: 2,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

const METADATA_TOPIC: &str = "__cluster_metadata";

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn error_partition(index: i32, e: ResponseError, version: i16) -> PartitionData {
    let mut p = PartitionData::default();
    p.partition_index = index;
    p.error_code = e.code();
    if version >= 2 {
        p.error_message = Some(s(super::errors::default_message(e)));
    }
    p
}

fn topic(name: TopicName, partitions: Vec<PartitionData>) -> TopicData {
    let mut t = TopicData::default();
    t.topic_name = name;
    t.partitions = partitions;
    t
}

fn replica(r: &ReplicaView, version: i16) -> ReplicaState {
    let mut st = ReplicaState::default();
    st.replica_id = BrokerId(r.node_id);
    st.log_end_offset = r.log_end_offset.map_or(-1, |o| o as i64);
    if version >= 2 {
        st.replica_directory_id = uuid::Uuid::from_bytes(r.directory_id.unwrap_or_default());
    }
    if version >= 1 {
        st.last_fetch_timestamp = r.last_fetch_ms.map_or(-1, |t| t as i64);
        st.last_caught_up_timestamp = r.last_caught_up_ms.map_or(-1, |t| t as i64);
    }
    st
}

/// The leader's view: this node's if it leads, else the leader's, asked over the quorum.
async fn cluster_view(c: &ClusterNode) -> Option<QuorumView> {
    if let Some(v) = QuorumView::of_leader(&c.quorum.status().await) {
        return Some(v);
    }
    match c.call(ControllerRequest::DescribeQuorum).await {
        Ok(ControllerReply::Quorum(v)) => Some(v),
        _ => None,
    }
}

/// The voters' endpoints (v2 `nodes`): each voter's quorum address from the membership (the
/// voter list for one no longer there).
fn nodes(b: &Base, view: &QuorumView) -> Vec<Node> {
    let node = |id: i32, name: &str, host: &str, port: u16| {
        let mut l = Listener::default();
        l.name = s(name);
        l.host = s(host);
        l.port = port;
        let mut n = Node::default();
        n.node_id = BrokerId(id);
        n.listeners = vec![l];
        n
    };
    let c = b.node();
    let name = c
        .config
        .controller_listener
        .as_ref()
        .map_or("CONTROLLER".to_string(), |l| l.name.clone());
    let members = c.quorum.member_addresses();
    view.voters
        .iter()
        .filter_map(|r| {
            let id = u64::try_from(r.node_id).ok()?;
            let addr = members
                .get(&id)
                .or_else(|| c.config.voters.get(&r.node_id))?;
            let (host, port) = addr.rsplit_once(':')?;
            Some(node(r.node_id, &name, host, port.parse().ok()?))
        })
        .collect()
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DescribeQuorumRequest = super::decode(&ctx, body)?;
    let v = ctx.version;
    let mut resp = DescribeQuorumResponse::default();
    if let Some(code) = ctx.cluster_error(&b, super::authz::Op::Describe) {
        resp.error_code = code;
        return super::respond(&ctx, &resp);
    }
    let valid = matches!(req.topics.as_slice(), [t] if t.topic_name.0.as_str() == METADATA_TOPIC
        && matches!(t.partitions.as_slice(), [p] if p.partition_index == 0));
    if !valid {
        resp.topics = req
            .topics
            .into_iter()
            .map(|t| {
                let parts = t
                    .partitions
                    .iter()
                    .map(|p| {
                        error_partition(
                            p.partition_index,
                            ResponseError::UnknownTopicOrPartition,
                            v,
                        )
                    })
                    .collect();
                topic(t.topic_name, parts)
            })
            .collect();
        return super::respond(&ctx, &resp);
    }
    let name = TopicName(s(METADATA_TOPIC));
    let view = cluster_view(b.node()).await;
    let Some(view) = view else {
        let p = error_partition(0, ResponseError::NotLeaderOrFollower, v);
        resp.topics = vec![topic(name, vec![p])];
        return super::respond(&ctx, &resp);
    };
    let mut p = PartitionData::default();
    p.partition_index = 0;
    p.leader_id = BrokerId(view.leader);
    p.leader_epoch = view.term as i32;
    p.high_watermark = view.high_watermark as i64;
    p.current_voters = view.voters.iter().map(|r| replica(r, v)).collect();
    p.observers = view.observers.iter().map(|r| replica(r, v)).collect();
    resp.topics = vec![topic(name, vec![p])];
    if v >= 2 {
        resp.nodes = nodes(&b, &view);
    }
    super::respond(&ctx, &resp)
}
