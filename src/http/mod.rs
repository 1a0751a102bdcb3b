//! The HTTP server (`sluice.http.server.listeners`, off by default): `GET /metrics`
//! (Prometheus text format, see `metrics::scrape`), `GET /health` (the process serves) and
//! `GET /ready` (this node serves: 200, else 503). It serves from start-up on, before the
//! broker is open (a cluster node waits for its quorum first): `/health` answers at once,
//! `/ready` and `/metrics` 503 until there is a broker to read.
//!
//! The web console ([`console`]) is merged in: `/` and `/api/...`; so is fault injection
//! ([`faults`]): `/faults`, refused unless `sluice.faults.enable=true`; and so is the Schema
//! Registry ([`registry`]): `/subjects`, `/schemas`, `/config`, `/compatibility`, `/mode`; and
//! so is Confluent's REST Proxy ([`rest`]): API v3 under `/v3/clusters/...`, API v2 under
//! `/topics`, `/brokers` and `/consumers`.
//!
//! axum on the broker's tokio runtime: routes are plain functions over [`HttpState`], so
//! more pages are added by merging their `Router` into [`router`]'s.
//! Nothing here holds state of its own but the REST Proxy's consumer instances: every other
//! answer is read from the broker's owners.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

pub mod console;
pub mod faults;
pub mod registry;
pub mod rest;

use crate::broker::Broker;
use crate::config::HttpListener;

/// What the handlers read; `run` is the only writer of both.
#[derive(Clone, Default)]
pub struct HttpState {
    /// Set once the broker is open (never on a controller-only node).
    pub broker: Arc<OnceLock<Arc<Broker>>>,
    /// Set once the node serves: the client listeners accept connections (in a cluster,
    /// once this broker caught up with the metadata log and was unfenced), or a
    /// controller-only node runs its controller.
    pub serving: Arc<AtomicBool>,
    /// The console's remembered SCRAM password checks.
    pub console: Arc<console::Verified>,
    /// The REST Proxy's v2 consumer instances.
    pub rest_consumers: Arc<rest::Instances>,
}

/// Binds the HTTP listener (at start-up, beside the Kafka listeners: a port in use stops
/// start-up).
pub async fn bind(l: &HttpListener) -> Result<TcpListener> {
    let addr = l.bind_addr();
    TcpListener::bind(&addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (sluice.http.server.listeners)"))
}

pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .merge(console::router())
        .merge(faults::router())
        .merge(registry::router(state.clone()))
        .merge(rest::router())
        .with_state(state)
}

/// Serves until the task is dropped.
pub async fn serve(listener: TcpListener, state: HttpState) {
    if let Err(e) = axum::serve(listener, router(state)).await {
        tracing::error!("HTTP server stopped: {e}");
    }
}

async fn metrics(State(s): State<HttpState>) -> axum::response::Response {
    let Some(broker) = s.broker.get() else {
        let why = "no broker on this node (yet)\n";
        return (StatusCode::SERVICE_UNAVAILABLE, why).into_response();
    };
    let body = crate::metrics::scrape::render(broker).await;
    let content_type = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

async fn health() -> &'static str {
    "ok\n"
}

async fn ready(State(s): State<HttpState>) -> (StatusCode, String) {
    match not_ready(&s) {
        None => (StatusCode::OK, "ready\n".to_string()),
        Some(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        ),
    }
}

/// Why this broker should get no traffic yet, if it should not: its listeners do not accept
/// yet, or (a cluster) the metadata it has does not show it registered and unfenced.
fn not_ready(s: &HttpState) -> Option<String> {
    if !s.serving.load(Ordering::Acquire) {
        return Some("the listeners do not accept connections yet".to_string());
    }
    let broker = s.broker.get()?;
    let c = broker.cluster()?;
    let id = broker.node_id();
    match c.image().brokers.get(&id) {
        None => Some(format!("broker {id} is not registered")),
        Some(b) if b.fenced => Some(format!("broker {id} is fenced")),
        Some(_) => None,
    }
}
