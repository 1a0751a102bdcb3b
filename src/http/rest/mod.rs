//! Confluent's REST Proxy API v3 under `/v3/...` on the HTTP listener: clusters, brokers,
//! topics, partitions, topic configs, consumer groups with their lag, and producing records.
//! Off (404) with `sluice.rest.proxy.enable=false`.
//!
//! Every answer goes through the broker's own Kafka request handlers with the caller's
//! principal, the console's seams ([`console::wire`](super::console::wire)): with SASL on any
//! listener, HTTP Basic credentials name a SASL user (PLAIN or SCRAM) and the ACLs apply to
//! `User:<name>` exactly as to a Kafka client with that name. Resources carry Confluent's
//! `kind`, `metadata` (`self`, `resource_name` as a `crn:///kafka=<cluster>/...`) and
//! `related` links; errors are Confluent's bodies, `{"error_code":40403,"message":...}`,
//! with its codes: 40403 (404) an unknown topic or partition, 40002 (400) a request Kafka
//! refuses (topic exists, bad config, bad replication factor), 40301 (403) a refused
//! principal, 40101 (401) bad credentials, 404 an unknown cluster, group or config, 400 a
//! body that is not the JSON asked for, 50002/50003 (500) other Kafka errors.
//!
//! One module per resource: [`clusters`] (and brokers), [`topics`] (and partitions),
//! [`configs`], [`groups`] (consumers, lags, lag summary), [`records`] (produce, streaming).

mod clusters;
mod configs;
mod groups;
mod records;
mod topics;
mod v2;

pub use v2::Instances;

use std::collections::HashMap;

use axum::Router;
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use kafka_protocol::ResponseError;
use serde_json::{Value, json};

use super::HttpState;
use super::console::cluster::metadata;
use super::console::produce::Refusal;
use super::console::wire::{denied, error_name};
use super::console::{Ctx, Failure, broker_of, sign_in};

pub fn router() -> Router<HttpState> {
    let c = "/v3/clusters/{cluster_id}";
    let t = format!("{c}/topics/{{topic_name}}");
    let g = format!("{c}/consumer-groups/{{consumer_group_id}}");
    Router::new()
        .route("/v3/clusters", get(clusters::list))
        .route(c, get(clusters::get))
        .route(&format!("{c}/brokers"), get(clusters::brokers))
        .route(&format!("{c}/brokers/{{broker_id}}"), get(clusters::broker))
        .route(
            &format!("{c}/topics"),
            get(topics::list).post(topics::create),
        )
        .route(&t, get(topics::get).delete(topics::delete))
        .route(&format!("{t}/partitions"), get(topics::partitions))
        .route(
            &format!("{t}/partitions/{{partition_id}}"),
            get(topics::partition),
        )
        .route(&format!("{t}/configs"), get(configs::list))
        .route(&format!("{t}/configs:alter"), post(configs::alter_batch))
        .route(
            &format!("{t}/configs/{{name}}"),
            get(configs::get).put(configs::set).delete(configs::reset),
        )
        .route(&format!("{t}/records"), post(records::produce))
        .route(&format!("{c}/consumer-groups"), get(groups::list))
        .route(&g, get(groups::get))
        .route(&format!("{g}/consumers"), get(groups::consumers))
        .route(
            &format!("{g}/consumers/{{consumer_id}}"),
            get(groups::consumer),
        )
        .route(&format!("{g}/lags"), get(groups::lags))
        .route(&format!("{g}/lag-summary"), get(groups::lag_summary))
        .merge(v2::router())
}

/// A REST Proxy error: the HTTP status and Confluent's body.
#[derive(Debug)]
pub(super) struct RestError {
    pub status: StatusCode,
    pub code: i32,
    pub message: String,
}

impl RestError {
    pub fn new(status: StatusCode, code: i32, message: impl Into<String>) -> RestError {
        RestError {
            status,
            code,
            message: message.into(),
        }
    }

    /// A body that is not what the endpoint reads (400, as Jackson's errors are).
    pub fn bad_request(message: impl Into<String>) -> RestError {
        RestError::new(StatusCode::BAD_REQUEST, 400, message)
    }

    /// A produce or config body with nothing in it (422).
    pub fn empty_body() -> RestError {
        RestError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            42206,
            "Payload error. Request body is empty. Data is required.",
        )
    }

    /// JAX-RS's plain 404 (an unknown group, config, broker, path).
    pub fn not_found() -> RestError {
        RestError::new(StatusCode::NOT_FOUND, 404, "HTTP 404 Not Found")
    }

    /// A Kafka error code as Confluent's exception mapper answers it; `message` is the
    /// broker's, when it gave one.
    pub fn kafka(code: i16, message: Option<String>) -> RestError {
        let message = message.filter(|m| !m.is_empty());
        let (status, rest_code, default) = match ResponseError::try_from_code(code) {
            Some(e) if denied(code) => (StatusCode::FORBIDDEN, 40301, denied_message(e)),
            Some(ResponseError::UnknownTopicOrPartition) => (
                StatusCode::NOT_FOUND,
                40403,
                "This server does not host this topic-partition.".to_string(),
            ),
            Some(ResponseError::BrokerNotAvailable) => (
                StatusCode::SERVICE_UNAVAILABLE,
                50302,
                "The broker is not available.".to_string(),
            ),
            Some(
                ResponseError::TopicAlreadyExists
                | ResponseError::InvalidReplicationFactor
                | ResponseError::InvalidPartitions
                | ResponseError::InvalidRequest
                | ResponseError::PolicyViolation
                | ResponseError::InvalidConfig
                | ResponseError::InvalidTopicException
                | ResponseError::UnsupportedVersion
                | ResponseError::SecurityDisabled
                | ResponseError::UnknownServerError,
            ) => (StatusCode::BAD_REQUEST, 40002, error_name(code)),
            Some(e) if e.is_retriable() => {
                (StatusCode::INTERNAL_SERVER_ERROR, 50003, error_name(code))
            }
            _ => (StatusCode::INTERNAL_SERVER_ERROR, 50002, error_name(code)),
        };
        RestError::new(status, rest_code, message.unwrap_or(default))
    }

    pub fn body(&self) -> Value {
        json!({ "error_code": self.code, "message": self.message })
    }
}

/// Kafka's message for an authorization error.
fn denied_message(e: ResponseError) -> String {
    match e {
        ResponseError::TopicAuthorizationFailed => "Topic authorization failed.",
        ResponseError::GroupAuthorizationFailed => "Group authorization failed.",
        ResponseError::ClusterAuthorizationFailed => "Cluster authorization failed.",
        _ => "Transactional Id authorization failed.",
    }
    .to_string()
}

impl From<Failure> for RestError {
    fn from(f: Failure) -> RestError {
        let code = match f.0 {
            StatusCode::UNAUTHORIZED => 40101,
            StatusCode::FORBIDDEN => 40301,
            StatusCode::INTERNAL_SERVER_ERROR => 50002,
            s => i32::from(s.as_u16()),
        };
        RestError::new(f.0, code, f.1)
    }
}

impl From<Refusal> for RestError {
    fn from(r: Refusal) -> RestError {
        match r {
            Refusal::Kafka(code, msg) => RestError::kafka(code, msg),
            Refusal::Http(f) => f.into(),
        }
    }
}

impl From<anyhow::Error> for RestError {
    fn from(e: anyhow::Error) -> RestError {
        RestError::new(StatusCode::INTERNAL_SERVER_ERROR, 50002, format!("{e:#}"))
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        let mut r = json_response(self.status, &self.body());
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Basic realm=\"Sluice REST Proxy\""),
            );
        }
        r
    }
}

pub(super) fn json_response(status: StatusCode, v: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

/// What a handler answers: a status and a body, or no body (204).
pub(super) enum Reply {
    Json(StatusCode, Value),
    NoContent,
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        match self {
            Reply::Json(status, v) => json_response(status, &v),
            Reply::NoContent => StatusCode::NO_CONTENT.into_response(),
        }
    }
}

pub(super) type Answer = Result<Reply, RestError>;

pub(super) fn ok(v: Value) -> Answer {
    Ok(Reply::Json(StatusCode::OK, v))
}

/// A request that passed the checks every REST call passes: there is a broker, the proxy
/// is on, the credentials are a SASL user's (when SASL is on), and the path's `cluster_id`
/// (when it has one) names this cluster; `base` is the URL prefix of the links in the
/// answer.
pub(super) struct Req {
    pub ctx: Ctx,
    pub base: String,
    /// The path's cluster id (empty under `/v3/clusters` itself).
    pub cluster: String,
}

impl FromRequestParts<HttpState> for Req {
    type Rejection = RestError;

    async fn from_request_parts(parts: &mut Parts, s: &HttpState) -> Result<Req, RestError> {
        let mut req = admit(s, &parts.headers)?;
        let params = Path::<HashMap<String, String>>::from_request_parts(parts, s).await;
        if let Ok(Path(params)) = params
            && let Some(cluster) = params.get("cluster_id")
        {
            if cluster_id_of(&req.ctx).await? != *cluster {
                return Err(RestError::new(
                    StatusCode::NOT_FOUND,
                    404,
                    format!("Cluster {cluster} cannot be found."),
                ));
            }
            req.cluster = cluster.clone();
        }
        Ok(req)
    }
}

fn admit(s: &HttpState, headers: &HeaderMap) -> Result<Req, RestError> {
    let broker = broker_of(s)?;
    if !broker.config.rest_proxy_enabled {
        return Err(RestError::new(
            StatusCode::NOT_FOUND,
            404,
            "the REST proxy is off (sluice.rest.proxy.enable=false)",
        ));
    }
    let session = sign_in(s, &broker, headers).map_err(|f| {
        let mut e = RestError::from(f);
        if e.status == StatusCode::UNAUTHORIZED {
            e.message = "Authentication failed".to_string();
        }
        e
    })?;
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()))
        .unwrap_or("localhost");
    Ok(Req {
        ctx: Ctx { broker, session },
        base: format!("http://{host}/v3"),
        cluster: String::new(),
    })
}

/// The cluster id, from this broker's Metadata answer.
pub(super) async fn cluster_id_of(ctx: &Ctx) -> Result<String, RestError> {
    let md = metadata(ctx, Some(&[])).await?;
    Ok(md.cluster_id.map(|c| c.to_string()).unwrap_or_default())
}

impl Req {
    /// `{base}/clusters/{cluster}/{path}` in the request's cluster (no trailing slash for an
    /// empty path).
    pub fn url(&self, path: &str) -> String {
        if path.is_empty() {
            format!("{}/clusters/{}", self.base, self.cluster)
        } else {
            format!("{}/clusters/{}/{path}", self.base, self.cluster)
        }
    }

    /// A `{"related": url}` link to `path` in the request's cluster.
    pub fn related(&self, path: &str) -> Value {
        json!({ "related": self.url(path) })
    }

    /// A resource's `metadata`: its URL and its CRN (`crn:///kafka=<cluster>/<crn>`).
    pub fn meta(&self, path: &str, crn: &str) -> Value {
        let cluster = &self.cluster;
        let resource_name = if crn.is_empty() {
            format!("crn:///kafka={cluster}")
        } else {
            format!("crn:///kafka={cluster}/{crn}")
        };
        json!({ "self": self.url(path), "resource_name": resource_name })
    }

    /// A collection: `{"kind", "metadata": {"self", "next": null}, "data"}`.
    pub fn list(&self, kind: &str, path: &str, data: Vec<Value>) -> Answer {
        ok(json!({
            "kind": kind,
            "metadata": { "self": self.url(path), "next": null },
            "data": data,
        }))
    }
}

/// A request body read as JSON of type `T` (400 with the parser's reason when it is not).
pub(super) fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, RestError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(RestError::empty_body());
    }
    serde_json::from_slice(body).map_err(|e| RestError::bad_request(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_errors_map_to_confluents_codes() {
        let e = RestError::kafka(ResponseError::UnknownTopicOrPartition.code(), None);
        assert_eq!((e.status, e.code), (StatusCode::NOT_FOUND, 40403));
        assert_eq!(e.message, "This server does not host this topic-partition.");
        let e = RestError::kafka(
            ResponseError::TopicAlreadyExists.code(),
            Some("Topic 't' already exists.".into()),
        );
        assert_eq!((e.status, e.code), (StatusCode::BAD_REQUEST, 40002));
        assert_eq!(e.message, "Topic 't' already exists.");
        let e = RestError::kafka(ResponseError::TopicAuthorizationFailed.code(), None);
        assert_eq!((e.status, e.code), (StatusCode::FORBIDDEN, 40301));
        let e = RestError::kafka(ResponseError::GroupAuthorizationFailed.code(), None);
        assert_eq!(e.code, 40301);
        let e = RestError::kafka(ResponseError::NotCoordinator.code(), None);
        assert_eq!(
            (e.status, e.code),
            (StatusCode::INTERNAL_SERVER_ERROR, 50003)
        );
        let e = RestError::kafka(ResponseError::InvalidConfig.code(), Some(String::new()));
        assert_eq!((e.code, e.message.as_str()), (40002, "INVALID_CONFIG"));
    }

    #[test]
    fn bodies_that_are_not_json_are_400() {
        let e = parse_body::<Value>(b"{nope").unwrap_err();
        assert_eq!((e.status, e.code), (StatusCode::BAD_REQUEST, 400));
        let e = parse_body::<Value>(b"  ").unwrap_err();
        assert_eq!(e.code, 42206);
    }
}
