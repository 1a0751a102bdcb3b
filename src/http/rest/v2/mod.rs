//! Confluent's REST Proxy API v2 (the `application/vnd.kafka[.format].v2+json` API that
//! kafka-rest serves beside v3): producing to a topic or a partition in the binary, JSON,
//! Avro, JSON Schema and Protobuf embedded formats ([`produce`]; the last three through the
//! built-in Schema Registry, [`schemas`], [`jsonschema`] and [`protobuf`]), topics,
//! partitions and brokers ([`topics`]), and consumer
//! instances ([`consumers`]): named members of a consumer group that subscribe to topics (or
//! are assigned partitions), read records, commit and seek, and expire when unused.
//!
//! As v3 it answers only while `sluice.rest.proxy.enable` is on, signs the caller in the same
//! way (HTTP Basic credentials of a SASL user when SASL is on) and makes every Kafka request
//! as that principal through the broker's own handlers, so ACLs apply as to a Kafka client.
//! Errors are Confluent's bodies (`{"error_code":40403,"message":"Consumer instance not
//! found."}`) with v2's content type; a request body of a media type an endpoint does not
//! read is 415 and an `Accept` it cannot answer 406, as Jersey answers them.
//!
//! A consumer instance is a real member of its group: [`member`] runs the classic consumer
//! protocol for it (JoinGroup, SyncGroup with the range or round-robin assignor when it
//! leads, Heartbeat, LeaveGroup) in a task of its own, and [`instance`] keeps its
//! subscription, assignment and positions and commits with OffsetCommit as the group member,
//! so `kafka-consumer-groups --describe` shows it and a later consumer of the group starts
//! where it committed. The PROTOBUF embedded format is not served.

mod consumers;
mod instance;
mod jsonschema;
mod member;
mod produce;
mod protobuf;
mod read;
mod schemas;
mod topics;

use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;

use super::RestError;
use crate::http::HttpState;
use crate::http::console::Ctx;

use instance::Instance;
pub use instance::Instances;

/// The content type of v2's answers and errors.
pub(super) const V2_JSON: &str = "application/vnd.kafka.v2+json";

pub fn router() -> Router<HttpState> {
    let i = "/consumers/{group}/instances/{instance}";
    Router::new()
        .route("/topics", get(topics::list))
        .route("/topics/{topic}", get(topics::get).post(produce::to_topic))
        .route("/topics/{topic}/partitions", get(topics::partitions))
        .route(
            "/topics/{topic}/partitions/{partition}",
            get(topics::partition).post(produce::to_partition),
        )
        .route(
            "/topics/{topic}/partitions/{partition}/offsets",
            get(topics::offsets),
        )
        .route("/brokers", get(topics::brokers))
        .route("/consumers/{group}", post(consumers::create))
        .route(i, axum::routing::delete(consumers::delete))
        .route(
            &format!("{i}/subscription"),
            get(consumers::subscription)
                .post(consumers::subscribe)
                .delete(consumers::unsubscribe),
        )
        .route(
            &format!("{i}/assignments"),
            get(consumers::assignment).post(consumers::assign),
        )
        .route(&format!("{i}/records"), get(consumers::records))
        .route(
            &format!("{i}/offsets"),
            get(consumers::committed).post(consumers::commit),
        )
        .route(&format!("{i}/positions"), post(consumers::seek))
        .route(
            &format!("{i}/positions/beginning"),
            post(consumers::seek_to_beginning),
        )
        .route(&format!("{i}/positions/end"), post(consumers::seek_to_end))
}

/// A v2 error: Confluent's body, in the content type the request negotiated.
pub(super) struct Fail(pub RestError, pub &'static str);

impl From<RestError> for Fail {
    fn from(e: RestError) -> Fail {
        Fail(e, V2_JSON)
    }
}

impl From<anyhow::Error> for Fail {
    fn from(e: anyhow::Error) -> Fail {
        RestError::from(e).into()
    }
}

impl From<crate::http::console::Failure> for Fail {
    fn from(f: crate::http::console::Failure) -> Fail {
        RestError::from(f).into()
    }
}

impl IntoResponse for Fail {
    fn into_response(self) -> Response {
        let mut r = self.0.into_response();
        if let Ok(v) = header::HeaderValue::from_str(self.1) {
            r.headers_mut().insert(header::CONTENT_TYPE, v);
        }
        r
    }
}

pub(super) type Answer = Result<Response, Fail>;

/// A v2 answer with a body.
pub(super) fn reply(v: &Value) -> Answer {
    reply_as(v, V2_JSON)
}

pub(super) fn reply_as(v: &Value, content_type: &'static str) -> Answer {
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, content_type)],
        v.to_string(),
    )
        .into_response())
}

pub(super) fn no_content() -> Answer {
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Jersey's answer to a body of a media type the endpoint does not read.
pub(super) fn unsupported_media_type() -> RestError {
    RestError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        415,
        "HTTP 415 Unsupported Media Type",
    )
}

/// Jersey's answer to an `Accept` header the endpoint cannot satisfy.
pub(super) fn not_acceptable() -> RestError {
    RestError::new(StatusCode::NOT_ACCEPTABLE, 406, "HTTP 406 Not Acceptable")
}

/// A body that parses but breaks the endpoint's rules (422).
pub(super) fn unprocessable(code: i32, message: impl Into<String>) -> RestError {
    RestError::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
}

/// A request past v3's checks (a broker, the proxy on, the caller signed in): the caller's
/// context, and the URL prefix of the links in answers (`http://host`).
pub(super) struct V2Req {
    pub ctx: Ctx,
    pub base: String,
}

impl FromRequestParts<HttpState> for V2Req {
    type Rejection = Fail;

    async fn from_request_parts(parts: &mut Parts, s: &HttpState) -> Result<V2Req, Fail> {
        let r = super::admit(s, &parts.headers)?;
        let base = r.base.trim_end_matches("/v3").to_string();
        Ok(V2Req { ctx: r.ctx, base })
    }
}

/// The caller's consumer instance that the path `/consumers/{group}/instances/{instance}`
/// names (404 40403 when the caller has none of that name), marked used.
struct Inst(Arc<Instance>);

impl FromRequestParts<HttpState> for Inst {
    type Rejection = Fail;

    async fn from_request_parts(parts: &mut Parts, s: &HttpState) -> Result<Inst, Fail> {
        let r = V2Req::from_request_parts(parts, s).await?;
        let Path((group, name)) = Path::<(String, String)>::from_request_parts(parts, s)
            .await
            .map_err(|_| RestError::not_found())?;
        let inst = s
            .rest_consumers
            .get(&group, &name, &r.ctx.session.principal)?;
        Ok(Inst(inst))
    }
}

/// A JSON entity of a v2 body (subscriptions, assignments, offsets, positions, instance
/// settings): 415 in a media type [`json_entity`] refuses, 400 when it does not parse,
/// `None` when the body is empty.
pub(super) struct Entity<T>(pub Option<T>);

impl<T: serde::de::DeserializeOwned> FromRequest<HttpState> for Entity<T> {
    type Rejection = Fail;

    async fn from_request(req: Request, s: &HttpState) -> Result<Entity<T>, Fail> {
        if !json_entity(&content_type(req.headers())) {
            return Err(unsupported_media_type().into());
        }
        let b = bytes::Bytes::from_request(req, s)
            .await
            .map_err(|e| RestError::bad_request(e.to_string()))?;
        Ok(Entity(parse_opt(&b)?))
    }
}

impl<T> Entity<T> {
    /// The entity of an endpoint that needs one (422 when the body is empty).
    pub fn required(self) -> Result<T, Fail> {
        self.0.ok_or_else(|| RestError::empty_body().into())
    }
}

/// The media type of a header value, lower case, without its parameters.
pub(super) fn media_type(v: &str) -> String {
    v.split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The request's `Content-Type` media type (empty without one).
pub(super) fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(media_type)
        .unwrap_or_default()
}

/// Whether a request body of `ct` may carry v2's plain JSON entities (subscriptions,
/// offsets, positions): Jersey reads them from `application/vnd.kafka[.format].v2+json`
/// and `application/json`. No content type at all is read as JSON as well.
pub(super) fn json_entity(ct: &str) -> bool {
    ct.is_empty()
        || ct == "application/json"
        || (ct.starts_with("application/vnd.kafka.") && ct.ends_with(".v2+json"))
}

/// A body read as JSON of type `T`: an empty body is `None`.
pub(super) fn parse_opt<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<Option<T>, Fail> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(None);
    }
    serde_json::from_slice(body)
        .map(Some)
        .map_err(|e| RestError::bad_request(e.to_string()).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_are_read_without_parameters() {
        assert_eq!(
            media_type("Application/Vnd.Kafka.Binary.V2+Json; charset=utf-8"),
            "application/vnd.kafka.binary.v2+json"
        );
        assert!(json_entity("application/vnd.kafka.v2+json"));
        assert!(json_entity("application/vnd.kafka.json.v2+json"));
        assert!(json_entity("application/json"));
        assert!(json_entity(""));
        assert!(!json_entity("text/plain"));
        assert!(!json_entity("application/vnd.kafka.v3+json"));
    }
}
