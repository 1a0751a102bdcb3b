//! `GET /v3/clusters`, `/v3/clusters/{cluster_id}`, `.../brokers`, `.../brokers/{broker_id}`:
//! read from the broker's Metadata answer (cluster id, controller, brokers).

use axum::extract::Path;
use axum::http::StatusCode;
use kafka_protocol::messages::MetadataResponse;
use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
use serde_json::{Value, json};

use super::{Answer, Reply, Req, RestError, ok};
use crate::http::console::cluster::metadata;

fn cluster_json(r: &Req, md: &MetadataResponse) -> Value {
    let mut v = json!({
        "kind": "KafkaCluster",
        "metadata": r.meta("", ""),
        "cluster_id": r.cluster,
        "acls": r.related("acls"),
        "brokers": r.related("brokers"),
        "broker_configs": r.related("broker-configs"),
        "consumer_groups": r.related("consumer-groups"),
        "topics": r.related("topics"),
        "partition_reassignments": r.related("topics/-/partitions/-/reassignment"),
    });
    if md.controller_id.0 >= 0 {
        v["controller"] = r.related(&format!("brokers/{}", md.controller_id.0));
    }
    v
}

pub(super) async fn list(mut r: Req) -> Answer {
    let md = metadata(&r.ctx, Some(&[])).await?;
    r.cluster = md
        .cluster_id
        .as_ref()
        .map(|c| c.to_string())
        .unwrap_or_default();
    Ok(Reply::Json(
        StatusCode::OK,
        json!({
            "kind": "KafkaClusterList",
            "metadata": { "self": format!("{}/clusters", r.base), "next": null },
            "data": [cluster_json(&r, &md)],
        }),
    ))
}

pub(super) async fn get(r: Req) -> Answer {
    let md = metadata(&r.ctx, Some(&[])).await?;
    ok(cluster_json(&r, &md))
}

fn broker_json(r: &Req, b: &MetadataResponseBroker) -> Value {
    let id = b.node_id.0;
    json!({
        "kind": "KafkaBroker",
        "metadata": r.meta(&format!("brokers/{id}"), &format!("broker={id}")),
        "cluster_id": r.cluster,
        "broker_id": id,
        "host": b.host.to_string(),
        "port": b.port,
        "rack": b.rack.as_ref().map(|r| r.to_string()),
        "configs": r.related(&format!("brokers/{id}/configs")),
        "partition_replicas": r.related(&format!("brokers/{id}/partition-replicas")),
    })
}

pub(super) async fn brokers(r: Req) -> Answer {
    let md = metadata(&r.ctx, Some(&[])).await?;
    let mut brokers: Vec<&MetadataResponseBroker> = md.brokers.iter().collect();
    brokers.sort_by_key(|b| b.node_id.0);
    let data = brokers.into_iter().map(|b| broker_json(&r, b)).collect();
    r.list("KafkaBrokerList", "brokers", data)
}

pub(super) async fn broker(r: Req, Path((_, id)): Path<(String, String)>) -> Answer {
    let md = metadata(&r.ctx, Some(&[])).await?;
    let found = id
        .parse::<i32>()
        .ok()
        .and_then(|id| md.brokers.iter().find(|b| b.node_id.0 == id));
    match found {
        Some(b) => ok(broker_json(&r, b)),
        None => Err(RestError::not_found()),
    }
}
