//! `/faults`: the fault injection API (`crate::faults`), JSON in and out.
//!
//! - `POST /faults` with a fault (`faults::Spec::from_json`): 201 and the fault with its id;
//! - `GET /faults`: every fault, live or spent, with how many requests it fired on;
//! - `DELETE /faults/{id}`: removes one (404 if there is none); `DELETE /faults`: all.
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
use std::sync::Arc;

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
    let created = (|| -> Answer {
        let b = admit(&s, &headers)?;
        let v: Value = serde_json::from_str(&body)
            .map_err(|e| Failure::bad_request(format!("the body is not JSON: {e}")))?;
        let spec = crate::faults::Spec::from_json(&v).map_err(Failure::bad_request)?;
        if let Some(why) = crate::api::injected::unsupported(&spec) {
            return Err(Failure::bad_request(why));
        }
        let f = b
            .faults
            .add(spec)
            .ok_or_else(|| Failure::internal("fault injection is off"))?;
        let j = f.to_json();
        tracing::info!("faults: added {j}");
        Ok(j)
    })();
    let mut r = answer(created);
    if r.status() == StatusCode::OK {
        *r.status_mut() = StatusCode::CREATED;
    }
    r
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
        tracing::info!("faults: removed all ({n})");
        json!({ "removed": n })
    }))
}
