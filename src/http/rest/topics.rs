//! Topics and partitions: `GET|POST /v3/clusters/{c}/topics`, `GET|DELETE .../topics/{t}`,
//! `GET .../topics/{t}/partitions[/{p}]`. Read with Metadata; created with CreateTopics v7
//! (201 with the topic, 200 for `validate_only`), deleted with DeleteTopics v6 (204).

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    TopicName,
    create_topics_request::{CreatableTopic, CreatableTopicConfig},
    delete_topics_request::DeleteTopicState,
    metadata_response::{MetadataResponsePartition, MetadataResponseTopic},
};
use kafka_protocol::protocol::StrBytes;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Answer, Reply, Req, RestError, ok, parse_body};
use crate::http::console::cluster::metadata;
use crate::http::console::wire::call;

/// How long CreateTopics and DeleteTopics may take on the controller.
const TIMEOUT_MS: i32 = 30_000;

fn topic_json(r: &Req, name: &str, internal: bool, rf: i32, count: i32) -> Value {
    let path = format!("topics/{name}");
    json!({
        "kind": "KafkaTopic",
        "metadata": r.meta(&path, &format!("topic={name}")),
        "cluster_id": r.cluster,
        "topic_name": name,
        "is_internal": internal,
        "replication_factor": rf,
        "partitions_count": count,
        "partitions": r.related(&format!("{path}/partitions")),
        "configs": r.related(&format!("{path}/configs")),
        "partition_reassignments": r.related(&format!("{path}/partitions/-/reassignment")),
    })
}

fn described(r: &Req, t: &MetadataResponseTopic) -> Value {
    let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
    let rf = t
        .partitions
        .iter()
        .map(|p| p.replica_nodes.len())
        .max()
        .unwrap_or(0) as i32;
    topic_json(r, &name, t.is_internal, rf, t.partitions.len() as i32)
}

/// The named topic's Metadata: its error (UNKNOWN_TOPIC_OR_PARTITION,
/// TOPIC_AUTHORIZATION_FAILED) as Confluent's.
pub(super) async fn one_topic(r: &Req, name: &str) -> Result<MetadataResponseTopic, RestError> {
    let md = metadata(&r.ctx, Some(&[name.to_string()])).await?;
    let t = md
        .topics
        .into_iter()
        .next()
        .ok_or_else(|| RestError::kafka(3, None))?;
    if t.error_code != 0 {
        return Err(RestError::kafka(t.error_code, None));
    }
    Ok(t)
}

pub(super) async fn list(r: Req) -> Answer {
    let md = metadata(&r.ctx, None).await?;
    let mut topics: Vec<&MetadataResponseTopic> =
        md.topics.iter().filter(|t| t.error_code == 0).collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    let data = topics.iter().map(|t| described(&r, t)).collect();
    r.list("KafkaTopicList", "topics", data)
}

pub(super) async fn get(r: Req, Path((_, topic)): Path<(String, String)>) -> Answer {
    let t = one_topic(&r, &topic).await?;
    ok(described(&r, &t))
}

/// The body of `POST .../topics`.
#[derive(Deserialize)]
struct CreateTopic {
    topic_name: String,
    partitions_count: Option<i32>,
    replication_factor: Option<i16>,
    #[serde(default)]
    configs: Vec<ConfigEntry>,
    #[serde(default)]
    validate_only: bool,
}

#[derive(Deserialize)]
struct ConfigEntry {
    name: String,
    value: Option<String>,
}

pub(super) async fn create(r: Req, body: Bytes) -> Response {
    match create_answer(&r, &body).await {
        Ok((v, status)) => {
            let mut resp = super::json_response(status, &v);
            if let Some(l) = v["metadata"]["self"].as_str()
                && let Ok(l) = header::HeaderValue::from_str(l)
            {
                resp.headers_mut().insert(header::LOCATION, l);
            }
            resp
        }
        Err(e) => e.into_response(),
    }
}

/// The created topic and the status: 201, or 200 when only validated.
async fn create_answer(r: &Req, body: &[u8]) -> Result<(Value, StatusCode), RestError> {
    let want: CreateTopic = parse_body(body)?;
    let mut t = CreatableTopic::default();
    t.name = TopicName(StrBytes::from_string(want.topic_name.clone()));
    t.num_partitions = want.partitions_count.unwrap_or(-1);
    t.replication_factor = want.replication_factor.unwrap_or(-1);
    t.configs = want
        .configs
        .into_iter()
        .map(|c| {
            let mut e = CreatableTopicConfig::default();
            e.name = StrBytes::from_string(c.name);
            e.value = c.value.map(StrBytes::from_string);
            e
        })
        .collect();
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = TIMEOUT_MS;
    req.validate_only = want.validate_only;
    let resp: CreateTopicsResponse =
        call(&r.ctx.broker, &r.ctx.session, ApiKey::CreateTopics, 7, &req).await?;
    let created = resp
        .topics
        .into_iter()
        .next()
        .ok_or_else(|| RestError::kafka(-1, Some("no CreateTopics answer".into())))?;
    if created.error_code != 0 {
        let msg = created.error_message.map(|m| m.to_string());
        return Err(RestError::kafka(created.error_code, msg));
    }
    let v = topic_json(
        r,
        &want.topic_name,
        false,
        i32::from(created.replication_factor),
        created.num_partitions,
    );
    let status = if want.validate_only {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((v, status))
}

pub(super) async fn delete(r: Req, Path((_, topic)): Path<(String, String)>) -> Answer {
    let mut t = DeleteTopicState::default();
    t.name = Some(TopicName(StrBytes::from_string(topic.to_string())));
    let mut req = DeleteTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = TIMEOUT_MS;
    let resp: DeleteTopicsResponse =
        call(&r.ctx.broker, &r.ctx.session, ApiKey::DeleteTopics, 6, &req).await?;
    match resp.responses.into_iter().next() {
        Some(d) if d.error_code != 0 => Err(RestError::kafka(
            d.error_code,
            d.error_message.map(|m| m.to_string()),
        )),
        Some(_) => Ok(Reply::NoContent),
        None => Err(RestError::kafka(-1, Some("no DeleteTopics answer".into()))),
    }
}

fn partition_json(r: &Req, topic: &str, p: &MetadataResponsePartition) -> Value {
    let id = p.partition_index;
    let path = format!("topics/{topic}/partitions/{id}");
    let mut v = json!({
        "kind": "KafkaPartition",
        "metadata": r.meta(&path, &format!("topic={topic}/partition={id}")),
        "cluster_id": r.cluster,
        "topic_name": topic,
        "partition_id": id,
        "replicas": r.related(&format!("{path}/replicas")),
        "reassignment": r.related(&format!("{path}/reassignment")),
    });
    if p.leader_id.0 >= 0 {
        v["leader"] = r.related(&format!("{path}/replicas/{}", p.leader_id.0));
    }
    v
}

pub(super) async fn partitions(r: Req, Path((_, topic)): Path<(String, String)>) -> Answer {
    let t = one_topic(&r, &topic).await?;
    let mut ps: Vec<&MetadataResponsePartition> = t.partitions.iter().collect();
    ps.sort_by_key(|p| p.partition_index);
    let data = ps
        .into_iter()
        .map(|p| partition_json(&r, &topic, p))
        .collect();
    r.list(
        "KafkaPartitionList",
        &format!("topics/{topic}/partitions"),
        data,
    )
}

pub(super) async fn partition(
    r: Req,
    Path((_, topic, partition)): Path<(String, String, String)>,
) -> Answer {
    let t = one_topic(&r, &topic).await?;
    let found = partition
        .parse::<i32>()
        .ok()
        .and_then(|id| t.partitions.iter().find(|p| p.partition_index == id));
    match found {
        Some(p) => ok(partition_json(&r, &topic, p)),
        None => Err(RestError::kafka(3, None)),
    }
}
