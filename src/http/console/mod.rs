//! The web console: a single-page UI under `/` (hand-written HTML, CSS and JS compiled into
//! the binary) over a JSON API under `/api/...`, on the HTTP listener beside `/metrics`.
//! Off with `sluice.console.enabled=false` (404); read-only unless
//! `sluice.console.read.only=false` (a POST is then 403); behind HTTP Basic authentication
//! when any Kafka listener uses SASL ([`auth`]).
//!
//! Every answer is read through the broker's own Kafka request handlers ([`wire::call`])
//! with the console user's principal: Metadata for brokers, topics, partitions, leaders and
//! ISR; DescribeLogDirs for sizes; DescribeConfigs; ListOffsets and Fetch for the message
//! browser; ListGroups, DescribeGroups, ConsumerGroupDescribe and OffsetFetch for groups;
//! Produce for a test record. The Schema Registry's subjects and versions are read from the
//! registry's state. The handlers for each page live in their own module.

mod auth;
pub(super) mod cluster;
pub(super) mod groups;
pub(super) mod messages;
pub(super) mod produce;
pub mod render;
pub(super) mod schemas;
pub(super) mod wire;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::HttpState;
use crate::broker::Broker;
use crate::security::{Principal, Session};

pub use auth::Verified;

/// The console's routes, merged into the HTTP server's router.
pub fn router() -> Router<HttpState> {
    Router::new()
        .route("/", get(index))
        .route("/console/app.js", get(app_js))
        .route("/console/style.css", get(style_css))
        .route("/api/cluster", get(cluster::brokers))
        .route("/api/topics", get(cluster::topics))
        .route("/api/topic", get(cluster::topic))
        .route("/api/messages", get(messages::browse))
        .route("/api/groups", get(groups::list))
        .route("/api/group", get(groups::describe))
        .route("/api/produce", post(produce::produce))
        .route("/api/subjects", get(schemas::subjects))
        .route("/api/subject", get(schemas::subject))
}

/// A request that got past the console's checks: the broker and the user's session.
pub(in crate::http) struct Ctx {
    pub broker: Arc<Broker>,
    pub session: Session,
}

/// An API failure: its status and a message for the person using the console.
pub(crate) struct Failure(pub StatusCode, pub String);

impl Failure {
    pub fn bad_request(msg: impl Into<String>) -> Failure {
        Failure(StatusCode::BAD_REQUEST, msg.into())
    }
    pub fn internal(e: impl std::fmt::Display) -> Failure {
        Failure(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
    }
    pub fn not_found(msg: impl Into<String>) -> Failure {
        Failure(StatusCode::NOT_FOUND, msg.into())
    }
    /// A Kafka error in the answer to `request`: 403 when the user may not, else 500.
    pub fn from_kafka(request: &str, code: i16) -> Failure {
        let status = if wire::denied(code) {
            StatusCode::FORBIDDEN
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        };
        Failure(status, format!("{request}: {}", wire::error_name(code)))
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Failure {
        Failure::internal(format!("{e:#}"))
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let mut r = json_response(self.0, &json!({ "error": self.1 }));
        if self.0 == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static(auth::CHALLENGE),
            );
        }
        r
    }
}

fn json_response(status: StatusCode, v: &Value) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        v.to_string(),
    )
        .into_response()
}

/// What an API handler returns.
pub(crate) type Answer = Result<Value, Failure>;

pub(crate) fn answer(a: Answer) -> Response {
    match a {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(f) => f.into_response(),
    }
}

/// The checks every console request passes: there is a broker, the console is on, and
/// (with SASL) the credentials are a SASL user's.
pub(super) fn admit(s: &HttpState, headers: &HeaderMap) -> Result<Ctx, Failure> {
    let broker = broker_of(s)?;
    if !broker.config.console_enabled {
        let why = "the console is off (sluice.console.enabled=false)".to_string();
        return Err(Failure(StatusCode::NOT_FOUND, why));
    }
    let session = sign_in(s, &broker, headers)?;
    Ok(Ctx { broker, session })
}

/// The broker, once it is open.
pub(crate) fn broker_of(s: &HttpState) -> Result<Arc<Broker>, Failure> {
    match s.broker.get() {
        Some(b) => Ok(b.clone()),
        None => {
            let why = "no broker on this node (yet)".to_string();
            Err(Failure(StatusCode::SERVICE_UNAVAILABLE, why))
        }
    }
}

/// The session of an HTTP request: on the internal listener (the brokers are seen as the
/// other brokers see them), as the SASL user its HTTP Basic credentials name when any
/// listener uses SASL, else as User:ANONYMOUS.
pub(crate) fn sign_in(
    s: &HttpState,
    broker: &Broker,
    headers: &HeaderMap,
) -> Result<Session, Failure> {
    let mut session = Session::anonymous(None, broker.internal_listener());
    if auth::required(broker) {
        let creds = headers
            .get(header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(auth::parse_basic);
        let Some((user, password)) = creds else {
            let why = "sign in with a SASL user's name and password".to_string();
            return Err(Failure(StatusCode::UNAUTHORIZED, why));
        };
        if !s.console.check(broker, &user, &password) {
            tracing::warn!("HTTP: failed authentication for user {user:?}");
            let why = "wrong user name or password".to_string();
            return Err(Failure(StatusCode::UNAUTHORIZED, why));
        }
        session.principal = Arc::new(Principal::user(user));
    }
    Ok(session)
}

/// The query string's parameters.
pub(super) fn query(uri: &Uri) -> BTreeMap<String, String> {
    render::parse_query(uri.query().unwrap_or(""))
}

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");

async fn index(State(s): State<HttpState>, headers: HeaderMap) -> Response {
    asset(&s, &headers, "text/html; charset=utf-8", INDEX_HTML)
}

async fn app_js(State(s): State<HttpState>, headers: HeaderMap) -> Response {
    asset(&s, &headers, "text/javascript; charset=utf-8", APP_JS)
}

async fn style_css(State(s): State<HttpState>, headers: HeaderMap) -> Response {
    asset(&s, &headers, "text/css; charset=utf-8", STYLE_CSS)
}

fn asset(
    s: &HttpState,
    headers: &HeaderMap,
    content_type: &'static str,
    body: &'static str,
) -> Response {
    match admit(s, headers) {
        Ok(_) => ([(header::CONTENT_TYPE, content_type)], body).into_response(),
        Err(f) => {
            let status = f.0;
            let mut r = (status, format!("{}\n", f.1)).into_response();
            if status == StatusCode::UNAUTHORIZED {
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static(auth::CHALLENGE),
                );
            }
            r
        }
    }
}
