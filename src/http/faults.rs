//! `/faults`: the fault injection API (`crate::faults`), JSON in and out.
//!
//! - `POST /faults` with a fault (`faults::Spec::from_json`): 201 and the fault with its id;
//! - `GET /faults`: every fault, live or spent, with how many requests it fired on;
//! - `DELETE /faults/{id}`: removes one (404 if there is none); `DELETE /faults`: all.
//!
//! Faults that act on the node do so here: `move_leader` moves the leadership when it is
//! added (400 with the reason when it cannot, or on a broker outside a cluster), `isolate`
//! closes the node's gate (`crate::net::gate`) until it is removed or expires.
//!
//! Every call is refused (403) unless the broker runs with `sluice.faults.enable=true`.
//! When a listener uses SASL, calls carry HTTP Basic credentials of a SASL user (as the
//! console's); with an authorizer, only a super user (`super.users`) may call.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{delete, get};
use serde_json::{Value, json};

use super::HttpState;
use super::console::{Answer, Failure, answer, broker_of, sign_in};
use crate::broker::Broker;
use crate::faults::{Action, Spec};
use std::sync::Arc;
use std::time::Instant;

pub fn router() -> Router<HttpState> {
    Router::new()
        .route("/faults", get(list).post(create).delete(clear))
        .route("/faults/{id}", delete(remove))
}

/// The broker, when this caller may manage its faults.
fn admit(s: &HttpState, headers: &HeaderMap) -> Result<Arc<Broker>, Failure> {
    let broker = broker_of(s)?;
    if !broker.faults.enabled() {
        return Err(Failure(
            StatusCode::FORBIDDEN,
            "fault injection is off: start the broker with sluice.faults.enable=true".into(),
        ));
    }
    let session = sign_in(s, &broker, headers)?;
    if let Some(a) = &broker.config.authorizer {
        let me = session.principal.to_string();
        if !a.super_users.contains(&me) {
            tracing::warn!("faults: {me} is not a super user");
            return Err(Failure(
                StatusCode::FORBIDDEN,
                format!("only a super user (super.users) may inject faults, not {me}"),
            ));
        }
    }
    Ok(broker)
}

async fn list(State(s): State<HttpState>, headers: HeaderMap) -> Response {
    answer(admit(&s, &headers).map(|b| {
        let faults: Vec<Value> = b.faults.list().iter().map(|f| f.to_json()).collect();
        json!({ "faults": faults })
    }))
}

async fn create(State(s): State<HttpState>, headers: HeaderMap, body: String) -> Response {
    let mut r = answer(add(&s, &headers, &body).await);
    if r.status() == StatusCode::OK {
        *r.status_mut() = StatusCode::CREATED;
    }
    r
}

async fn add(s: &HttpState, headers: &HeaderMap, body: &str) -> Answer {
    let b = admit(s, headers)?;
    let v: Value = serde_json::from_str(body)
        .map_err(|e| Failure::bad_request(format!("the body is not JSON: {e}")))?;
    let spec = Spec::from_json(&v).map_err(Failure::bad_request)?;
    if let Some(why) = crate::api::injected::unsupported(&spec) {
        return Err(Failure::bad_request(why));
    }
    let action = spec.action;
    let cluster = b.cluster().cloned();
    // a single node runs alone whether it keeps its metadata in a file or as the only voter
    let alone = cluster.is_none() || b.config.cluster.as_ref().is_some_and(|c| c.one_voter);
    if action.on_node() && alone {
        return Err(Failure::bad_request(format!(
            "{} acts on a node of a cluster: this broker runs alone",
            v["kind"].as_str().unwrap_or_default()
        )));
    }
    let mut leader = None;
    if let (Action::MoveLeader(to), Some(c)) = (action, &cluster) {
        let topic = spec.filter.topic.clone().unwrap_or_default();
        let partition = spec.filter.partition.unwrap_or_default();
        let l = c.move_leader(&topic, partition, to).await.map_err(|why| {
            Failure::bad_request(format!(
                "cannot move the leader of {topic}-{partition}: {why}"
            ))
        })?;
        tracing::info!("faults: broker {l} leads {topic}-{partition} now");
        leader = Some(l);
    }
    let lasts = spec.lasts;
    let f = b
        .faults
        .add(spec)
        .ok_or_else(|| Failure::internal("fault injection is off"))?;
    if action.on_node() {
        b.faults.fired(f.id);
    }
    if action == Action::Isolate {
        isolate_as_listed(&b);
        if let Some(d) = lasts {
            let weak = Arc::downgrade(&b);
            tokio::spawn(async move {
                tokio::time::sleep(d).await;
                if let Some(b) = weak.upgrade() {
                    isolate_as_listed(&b);
                }
            });
        }
    }
    let mut j = b
        .faults
        .list()
        .into_iter()
        .find(|x| x.id == f.id)
        .unwrap_or(f)
        .to_json();
    if let Some(l) = leader {
        j["leader"] = json!(l);
    }
    tracing::info!("faults: added {j}");
    Ok(j)
}

/// Cuts the node off from the other nodes while an `isolate` fault is live, and lets it
/// talk to them again once none is.
fn isolate_as_listed(b: &Broker) {
    let gate = &b.inter_broker.gate;
    let on = b.faults.isolating_at(Instant::now());
    if on != gate.isolated() {
        gate.isolate(on);
        if on {
            tracing::warn!("faults: node {} isolated from the other nodes", b.node_id());
        } else {
            tracing::warn!(
                "faults: node {} may reach the other nodes again",
                b.node_id()
            );
        }
    }
}

async fn remove(
    State(s): State<HttpState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    answer(admit(&s, &headers).and_then(|b| {
        let id: u64 = id
            .parse()
            .map_err(|_| Failure::bad_request(format!("{id:?} is not a fault id")))?;
        if b.faults.remove(id) {
            isolate_as_listed(&b);
            tracing::info!("faults: removed {id}");
            Ok(json!({ "removed": 1 }))
        } else {
            Err(Failure::not_found(format!("there is no fault {id}")))
        }
    }))
}

async fn clear(State(s): State<HttpState>, headers: HeaderMap) -> Response {
    answer(admit(&s, &headers).map(|b| {
        let n = b.faults.clear();
        isolate_as_listed(&b);
        tracing::info!("faults: removed all ({n})");
        json!({ "removed": n })
    }))
}
