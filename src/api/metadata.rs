//! Metadata (key 3), versions 0-13.
//!
//! Lists this broker, the cluster id and controller, and the requested topics (all topics for
//! a null list, or an empty list in v0), with partition leaders, leader epochs, replicas and
//! ISR. Unknown topics are auto-created when `auto.create.topics.enable` and the request allow
//! it (always allowed before v4). Topics can be asked for by id from v10 on.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{ApiKey, BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::authz::Op;
use super::{ApiSpec, RequestCtx};
use crate::cluster::control::active::CreateTopic;
use crate::cluster::controller::validate_topic_name;
use crate::cluster::metadata::{MetadataImage, TopicImage};
use crate::cluster::{TopicError, TopicInfo};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::Metadata,
    min: 0,
    max: 13,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

fn error_entry(
    name: Option<String>,
    id: uuid::Uuid,
    code: i16,
    version: i16,
) -> MetadataResponseTopic {
    let mut e = MetadataResponseTopic::default();
    e.error_code = code;
    e.name = name.map(|n| TopicName(StrBytes::from_string(n)));
    if version >= 10 {
        e.topic_id = id;
    }
    e
}

/// A topic as the cluster's metadata image has it (every partition, wherever it is held).
fn image_entry(img: &MetadataImage, t: &TopicImage, version: i16) -> MetadataResponseTopic {
    let mut e = MetadataResponseTopic::default();
    e.name = Some(TopicName(StrBytes::from_string(t.name.to_string())));
    if version >= 10 {
        e.topic_id = t.id;
    }
    e.is_internal = t.name.starts_with("__");
    e.partitions = t
        .partitions
        .iter()
        .map(|p| {
            let mut pe = MetadataResponsePartition::default();
            pe.partition_index = p.partition;
            pe.leader_id = BrokerId(p.leader);
            if !p.has_leader() {
                pe.error_code = ResponseError::LeaderNotAvailable.code();
            }
            if version >= 7 {
                pe.leader_epoch = p.leader_epoch;
            }
            pe.replica_nodes = p.replicas.iter().map(|r| BrokerId(*r)).collect();
            pe.isr_nodes = p.isr.iter().map(|r| BrokerId(*r)).collect();
            if version >= 5 {
                pe.offline_replicas = p
                    .replicas
                    .iter()
                    .filter(|r| img.brokers.get(r).is_none_or(|b| b.fenced))
                    .map(|r| BrokerId(*r))
                    .collect();
            }
            pe
        })
        .collect();
    e
}

/// The live brokers of a cluster, each at its endpoint for `listener`.
pub fn cluster_brokers(img: &MetadataImage, listener: &str) -> Vec<MetadataResponseBroker> {
    img.brokers
        .values()
        .filter(|s| !s.fenced)
        .filter_map(|s| {
            let e = s
                .registration
                .endpoints
                .iter()
                .find(|e| e.name == listener)?;
            let mut broker = MetadataResponseBroker::default();
            broker.node_id = BrokerId(s.registration.broker_id);
            broker.host = StrBytes::from_string(e.host.clone());
            broker.port = e.port as i32;
            broker.rack = s.registration.rack.clone().map(StrBytes::from_string);
            Some(broker)
        })
        .collect()
}

/// The controller id a cluster shows clients. As Kafka's KRaft brokers answer: clients
/// cannot reach the controllers, so a live broker: the active controller's node if it is one
/// of `live`, else the first of them (-1 if none).
pub fn client_controller_id(c: &crate::cluster::node::ClusterNode, live: &[i32]) -> i32 {
    let leader = c.controller_id();
    live.iter()
        .copied()
        .find(|id| Some(*id) == leader)
        .or_else(|| live.first().copied())
        .unwrap_or(-1)
}

/// Creates `name` with the broker defaults, as auto-creation does; a concurrent creation by
/// someone else counts as success.
pub async fn auto_create(b: &Base, name: &str) -> Result<Arc<TopicInfo>, TopicError> {
    let c = b.node();
    let live = c.image().active_brokers().len().max(1);
    let t = CreateTopic {
        name: name.to_string(),
        num_partitions: b.config.num_partitions,
        replication_factor: (b.config.default_replication_factor as usize).min(live) as i16,
        assignments: None,
        configs: Default::default(),
    };
    match c.create_topics(vec![t], false).await.pop() {
        Some(Ok(_)) | Some(Err(TopicError::AlreadyExists(_))) => {
            b.controller.topic(name).ok_or(TopicError::UnknownTopic)
        }
        Some(Err(e)) => Err(e),
        None => Err(TopicError::UnknownTopic),
    }
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: MetadataRequest = super::decode(&ctx, body)?;
    answer(&b, &ctx, req).await
}

/// A partition whose leader is alive but has no endpoint on the request's listener (so is
/// not among the answer's brokers) gets LISTENER_NOT_FOUND and no leader, as Kafka answers;
/// `alive` says whether a broker id is a live broker.
fn unreachable_leaders(resp: &mut MetadataResponse, alive: impl Fn(i32) -> bool) {
    let listed: Vec<i32> = resp.brokers.iter().map(|br| br.node_id.0).collect();
    for p in resp.topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
        let leader = p.leader_id.0;
        if p.error_code == 0 && leader >= 0 && !listed.contains(&leader) && alive(leader) {
            p.error_code = ResponseError::ListenerNotFound.code();
            p.leader_id = BrokerId(-1);
        }
    }
}

/// v8+: the topics' (those the caller may describe) and the cluster's authorized operations
/// when asked; Kafka's "not requested" value otherwise.
fn add_authorized_operations(
    b: &Base,
    ctx: &RequestCtx,
    req: &MetadataRequest,
    resp: &mut MetadataResponse,
) {
    use crate::security::acl::ResourceType;
    if ctx.version < 8 {
        return;
    }
    if req.include_topic_authorized_operations {
        for t in resp.topics.iter_mut() {
            if t.error_code == super::authz::topic_denied() {
                continue;
            }
            if let Some(name) = &t.name {
                t.topic_authorized_operations =
                    ctx.authorized_operations(b, ResourceType::Topic, name.0.as_str());
            }
        }
    }
    if ctx.version <= 10 {
        resp.cluster_authorized_operations = ctx.ops_if(
            b,
            req.include_cluster_authorized_operations,
            ResourceType::Cluster,
            crate::security::acl::model::CLUSTER_NAME,
        );
    }
}

/// Auto-creation: allowed by the broker, and by the request from v4 (always before).
fn allow_create(b: &Base, req: &MetadataRequest, v: i16) -> bool {
    (v < 4 || req.allow_auto_topic_creation) && b.config.auto_create_topics_enable
}

/// The entry for one requested topic, by name or (v10+) id: found by `by_name` / `by_id`, or
/// auto-created (then looked up again; LEADER_NOT_AVAILABLE if not visible yet), or the
/// error Kafka answers. A topic the caller may not describe is TOPIC_AUTHORIZATION_FAILED
/// (after an unknown id); so is a missing one the request would auto-create (`asked_create`)
/// without CREATE on the cluster or the topic.
#[allow(clippy::too_many_arguments)]
async fn requested(
    b: &Base,
    ctx: &RequestCtx,
    asked_create: bool,
    rt: kafka_protocol::messages::metadata_request::MetadataRequestTopic,
    v: i16,
    allow_create: bool,
    by_name: impl Fn(&str) -> Option<MetadataResponseTopic>,
    by_id: impl Fn(&uuid::Uuid) -> Option<MetadataResponseTopic>,
) -> MetadataResponseTopic {
    let nil = uuid::Uuid::nil();
    // A topic given by id only: no name, or (as the Java consumer's lookups of a regex
    // subscription's assigned topics send it) an empty one.
    let by_id_only = !rt.topic_id.is_nil() && rt.name.as_ref().is_none_or(|n| n.0.is_empty());
    let name = rt.name.filter(|_| !by_id_only);
    let denied = super::authz::topic_denied();
    let Some(name) = name else {
        return match by_id(&rt.topic_id) {
            None => error_entry(None, rt.topic_id, ResponseError::UnknownTopicId.code(), v),
            Some(e) => match &e.name {
                Some(n) if !ctx.may_topic(b, Op::Describe, n.0.as_str()) => {
                    error_entry(None, rt.topic_id, denied, v)
                }
                _ => e,
            },
        };
    };
    let name = name.0.to_string();
    if !ctx.may_topic(b, Op::Describe, &name) {
        return error_entry(Some(name), nil, denied, v);
    }
    if let Some(e) = by_name(&name) {
        return e;
    }
    if asked_create && !ctx.may_create_topic(b, &name) {
        return error_entry(Some(name), nil, denied, v);
    }
    if validate_topic_name(&name).is_err() {
        return error_entry(
            Some(name),
            nil,
            ResponseError::InvalidTopicException.code(),
            v,
        );
    }
    if !allow_create {
        return error_entry(
            Some(name),
            nil,
            ResponseError::UnknownTopicOrPartition.code(),
            v,
        );
    }
    // Kafka answers the creating request with LEADER_NOT_AVAILABLE; here the leader usually
    // exists by the time the creation is answered, so the topic is returned ready.
    match auto_create(b, &name).await {
        Ok(_) => by_name(&name).unwrap_or_else(|| {
            error_entry(Some(name), nil, ResponseError::LeaderNotAvailable.code(), v)
        }),
        Err(e) => error_entry(Some(name), nil, super::errors::topic_error_code(&e), v),
    }
}

/// Brokers and partitions from the metadata image.
async fn answer(
    b: &Arc<Base>,
    ctx: &RequestCtx,
    req: MetadataRequest,
) -> anyhow::Result<Option<Response>> {
    let c = b.node();
    let v = ctx.version;
    let mut img = c.image();
    let listener = &*ctx.listener;
    let mut resp = MetadataResponse::default();
    if v >= 2 {
        resp.cluster_id = img.cluster_id.clone().map(StrBytes::from_string);
    }
    let all = match &req.topics {
        None => true,
        Some(t) => t.is_empty() && v == 0,
    };
    if all {
        let mut topics: Vec<&Arc<TopicImage>> = img
            .topics
            .values()
            .filter(|t| ctx.may_topic(b, Op::Describe, &t.name))
            .collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        resp.topics = topics.iter().map(|t| image_entry(&img, t, v)).collect();
    } else {
        let create = allow_create(b, &req, v);
        let asked_create = v < 4 || req.allow_auto_topic_creation;
        for rt in req.topics.clone().unwrap_or_default() {
            // A fresh image each time: auto-creation changes it.
            let by_name = |name: &str| {
                let img = c.image();
                img.topic(name).map(|t| image_entry(&img, t, v))
            };
            let by_id = |id: &uuid::Uuid| {
                let img = c.image();
                img.topics.get(id).map(|t| image_entry(&img, t, v))
            };
            resp.topics
                .push(requested(b, ctx, asked_create, rt, v, create, by_name, by_id).await);
        }
        img = c.image();
    }
    resp.brokers = cluster_brokers(&img, listener);
    if v >= 1 {
        let live: Vec<i32> = resp.brokers.iter().map(|br| br.node_id.0).collect();
        resp.controller_id = BrokerId(client_controller_id(c, &live));
    }
    add_authorized_operations(b, ctx, &req, &mut resp);
    unreachable_leaders(&mut resp, |id| {
        img.brokers.get(&id).is_some_and(|s| !s.fenced)
    });
    super::respond(ctx, &resp)
}
