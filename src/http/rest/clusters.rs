//! `GET /v3/clusters`, `/v3/clusters/{cluster_id}`, `.../brokers`, `.../brokers/{broker_id}`:
//! read from the broker's Metadata answer (cluster id, controller, brokers).

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use kafka_protocol::messages::MetadataResponse;
use serde_json::{Value, json};

use super::{Answer, Req, RestError, admit, admit_cluster, ok, reply};
use crate::http::HttpState;
use crate::http::console::cluster::metadata;

fn cluster_json(r: &Req, md: &MetadataResponse) -> Value {
    let id = md
        .cluster_id
        .as_ref()
        .map(|c| c.to_string())
        .unwrap_or_default();
    let mut v = json!({
        "kind": "KafkaCluster",
        "metadata": r.meta(&id, "", ""),
        "cluster_id": id,
        "acls": r.related(&id, "acls"),
        "brokers": r.related(&id, "brokers"),
        "broker_configs": r.related(&id, "broker-configs"),
        "consumer_groups": r.related(&id, "consumer-groups"),
        "topics": r.related(&id, "topics"),
        "partition_reassignments": r.related(&id, "topics/-/partitions/-/reassignment"),
    });
    if md.controller_id.0 >= 0 {
        v["controller"] = r.related(&id, &format!("brokers/{}", md.controller_id.0));
    }
    v
}

pub(super) async fn list(State(s): State<HttpState>, headers: HeaderMap) -> Response {
    reply(list_answer(&s, &headers).await)
}

async fn list_answer(s: &HttpState, headers: &HeaderMap) -> Answer {
    let r = admit(s, headers)?;
    let md = metadata(&r.ctx, Some(&[])).await?;
    Ok(super::Reply::Json(
        axum::http::StatusCode::OK,
        json!({
            "kind": "KafkaClusterList",
            "metadata": { "self": format!("{}/clusters", r.base), "next": null },
            "data": [cluster_json(&r, &md)],
        }),
    ))
}

pub(super) async fn get(
    State(s): State<HttpState>,
    headers: HeaderMap,
    Path(cluster): Path<String>,
) -> Response {
    reply(get_answer(&s, &headers, &cluster).await)
}

async fn get_answer(s: &HttpState, headers: &HeaderMap, cluster: &str) -> Answer {
    let r = admit_cluster(s, headers, cluster).await?;
    let md = metadata(&r.ctx, Some(&[])).await?;
    ok(cluster_json(&r, &md))
}

fn broker_json(r: &Req, cluster: &str, b: &kafka_protocol::messages::metadata_response::MetadataResponseBroker) -> Value {
    let id = b.node_id.0;
    json!({
        "kind": "KafkaBroker",
        "metadata": r.meta(cluster, &format!("brokers/{id}"), &format!("broker={id}")),
        "cluster_id": cluster,
        "broker_id": id,
        "host": b.host.to_string(),
        "port": b.port,
        "rack": b.rack.as_ref().map(|r| r.to_string()),
        "configs": r.related(cluster, &format!("brokers/{id}/configs")),
        "partition_replicas": r.related(cluster, &format!("brokers/{id}/partition-replicas")),
    })
}

pub(super) async fn brokers(
    State(s): State<HttpState>,
    headers: HeaderMap,
    Path(cluster): Path<String>,
) -> Response {
    reply(brokers_answer(&s, &headers, &cluster).await)
}

async fn brokers_answer(s: &HttpState, headers: &HeaderMap, cluster: &str) -> Answer {
    let r = admit_cluster(s, headers, cluster).await?;
    let md = metadata(&r.ctx, Some(&[])).await?;
    let mut data: Vec<&_> = md.brokers.iter().collect();
    data.sort_by_key(|b| b.node_id.0);
    let data = data.into_iter().map(|b| broker_json(&r, cluster, b)).collect();
    ok(r.list("KafkaBrokerList", cluster, "brokers", data))
}

pub(super) async fn broker(
    State(s): State<HttpState>,
    headers: HeaderMap,
    Path((cluster, id)): Path<(String, String)>,
) -> Response {
    reply(broker_answer(&s, &headers, &cluster, &id).await)
}

async fn broker_answer(s: &HttpState, headers: &HeaderMap, cluster: &str, id: &str) -> Answer {
    let r = admit_cluster(s, headers, cluster).await?;
    let Ok(id) = id.parse::<i32>() else {
        return Err(RestError::not_found());
    };
    let md = metadata(&r.ctx, Some(&[])).await?;
    match md.brokers.iter().find(|b| b.node_id.0 == id) {
        Some(b) => ok(broker_json(&r, cluster, b)),
        None => Err(RestError::not_found()),
    }
}
