//! The HTTP server (`sluice.http.server.listeners`, off by default): `GET /metrics`
//! (Prometheus text format, see `metrics::scrape`), `GET /health` (the process serves) and
//! `GET /ready` (this broker serves clients: 200, else 503).
//!
//! axum on the broker's tokio runtime: routes are plain functions over [`HttpState`], so
//! more pages (a web console) are added by merging their `Router` into [`router`]'s.
//! Nothing here holds state of its own: every answer is read from the broker's owners.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use crate::broker::Broker;
use crate::config::HttpListener;

/// What the handlers read.
#[derive(Clone)]
pub struct HttpState {
    pub broker: Arc<Broker>,
    /// Set once the client listeners accept connections (in a cluster: once this broker
    /// caught up with the metadata log and was unfenced); written by `main` only.
    pub serving: Arc<AtomicBool>,
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
        .with_state(state)
}

/// Serves until the task is dropped.
pub async fn serve(listener: TcpListener, state: HttpState) {
    if let Err(e) = axum::serve(listener, router(state)).await {
        tracing::error!("HTTP server stopped: {e}");
    }
}

async fn metrics(State(s): State<HttpState>) -> impl IntoResponse {
    let body = crate::metrics::scrape::render(&s.broker).await;
    (
        [(
            header::CONTENT_TYPE,
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        )],
        body,
    )
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
    let c = s.broker.cluster()?;
    let id = s.broker.node_id();
    match c.image().brokers.get(&id) {
        None => Some(format!("broker {id} is not registered")),
        Some(b) if b.fenced => Some(format!("broker {id} is fenced")),
        Some(_) => None,
    }
}
