//! v2's read-only cluster views: `GET /topics` (the names), `GET /topics/{t}` (`name`,
//! `configs` as a name to value map, `partitions`), `GET /topics/{t}/partitions[/{p}]`
//! (`partition`, `leader`, `replicas: [{broker, leader, in_sync}]`),
//! `GET /topics/{t}/partitions/{p}/offsets` (`beginning_offset`, `end_offset`) and
//! `GET /brokers` (`{"brokers": [ids]}`). Read with Metadata, DescribeConfigs and
//! ListOffsets as the caller; an unknown topic is 40401, an unknown partition 40402.

use axum::extract::Path;
use axum::http::StatusCode;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponsePartition, MetadataResponseTopic,
};
use serde_json::{Map, Value, json};

use super::{Answer, V2Req, reply};
use crate::http::console::Ctx;
use crate::http::console::cluster::{describe_topic_configs, list_offsets, metadata};
use crate::http::rest::RestError;

pub(super) fn topic_not_found() -> RestError {
    RestError::new(StatusCode::NOT_FOUND, 40401, "Topic not found.")
}

pub(super) fn partition_not_found() -> RestError {
    RestError::new(StatusCode::NOT_FOUND, 40402, "Partition not found.")
}

/// The topic's Metadata, or its error: 40401 when it does not exist, 40301 when the caller
/// may not describe it.
async fn topic(ctx: &Ctx, name: &str) -> Result<MetadataResponseTopic, RestError> {
    let md = metadata(ctx, Some(&[name.to_string()])).await?;
    match md.topics.into_iter().next() {
        Some(t) if t.error_code == 0 => Ok(t),
        Some(t) if t.error_code != ResponseError::UnknownTopicOrPartition.code() => {
            Err(RestError::kafka(t.error_code, None))
        }
        _ => Err(topic_not_found()),
    }
}

fn partition_json(p: &MetadataResponsePartition) -> Value {
    let leader = p.leader_id.0;
    let replicas: Vec<Value> = p
        .replica_nodes
        .iter()
        .map(|b| {
            json!({
                "broker": b.0,
                "leader": b.0 == leader,
                "in_sync": p.isr_nodes.contains(b),
            })
        })
        .collect();
    json!({
        "partition": p.partition_index,
        "leader": (leader >= 0).then_some(leader),
        "replicas": replicas,
    })
}

fn sorted(t: &MetadataResponseTopic) -> Vec<&MetadataResponsePartition> {
    let mut ps: Vec<&MetadataResponsePartition> = t.partitions.iter().collect();
    ps.sort_by_key(|p| p.partition_index);
    ps
}

pub(super) async fn list(r: V2Req) -> Answer {
    let md = metadata(&r.ctx, None).await?;
    let mut names: Vec<String> = md
        .topics
        .iter()
        .filter(|t| t.error_code == 0)
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    names.sort();
    reply(&json!(names))
}

pub(super) async fn get(r: V2Req, Path(name): Path<String>) -> Answer {
    let t = topic(&r.ctx, &name).await?;
    let res = describe_topic_configs(&r.ctx, &name, None).await?;
    if res.error_code != 0 {
        let msg = res.error_message.as_ref().map(|m| m.to_string());
        return Err(RestError::kafka(res.error_code, msg).into());
    }
    let mut configs = Map::new();
    for c in &res.configs {
        let v = if c.is_sensitive {
            Value::Null
        } else {
            c.value
                .as_ref()
                .map_or(Value::Null, |v| Value::String(v.to_string()))
        };
        configs.insert(c.name.to_string(), v);
    }
    let partitions: Vec<Value> = sorted(&t).into_iter().map(partition_json).collect();
    reply(&json!({ "name": name, "configs": configs, "partitions": partitions }))
}

pub(super) async fn partitions(r: V2Req, Path(name): Path<String>) -> Answer {
    let t = topic(&r.ctx, &name).await?;
    let ps: Vec<Value> = sorted(&t).into_iter().map(partition_json).collect();
    reply(&json!(ps))
}

/// The partition of a topic's Metadata that the path names, or 40402.
fn find<'a>(
    t: &'a MetadataResponseTopic,
    partition: &str,
) -> Result<&'a MetadataResponsePartition, RestError> {
    partition
        .parse::<i32>()
        .ok()
        .and_then(|id| t.partitions.iter().find(|p| p.partition_index == id))
        .ok_or_else(partition_not_found)
}

pub(super) async fn partition(r: V2Req, Path((name, partition)): Path<(String, String)>) -> Answer {
    let t = topic(&r.ctx, &name).await?;
    reply(&partition_json(find(&t, &partition)?))
}

pub(super) async fn offsets(r: V2Req, Path((name, partition)): Path<(String, String)>) -> Answer {
    let t = topic(&r.ctx, &name).await?;
    let id = find(&t, &partition)?.partition_index;
    let wanted = [(name.clone(), id, -2), (name.clone(), id, -1)];
    let first = list_offsets(&r.ctx, &wanted[..1]).await?;
    let last = list_offsets(&r.ctx, &wanted[1..]).await?;
    let k = (name, id);
    match (first.get(&k), last.get(&k)) {
        (Some(Ok((b, _))), Some(Ok((e, _)))) => {
            reply(&json!({ "beginning_offset": b, "end_offset": e }))
        }
        (Some(Err(why)), _) | (_, Some(Err(why))) => {
            Err(RestError::new(StatusCode::INTERNAL_SERVER_ERROR, 50002, why.clone()).into())
        }
        _ => Err(partition_not_found().into()),
    }
}

pub(super) async fn brokers(r: V2Req) -> Answer {
    let md = metadata(&r.ctx, Some(&[])).await?;
    let mut ids: Vec<i32> = md.brokers.iter().map(|b| b.node_id.0).collect();
    ids.sort_unstable();
    reply(&json!({ "brokers": ids }))
}
