//! The Schema Registry's REST API (`crate::registry`), under the paths Confluent's clients
//! use, answered in `application/vnd.schemaregistry.v1+json` (requests may be that, JSON or
//! anything else: the body is read as JSON), with Confluent's error bodies
//! (`{"error_code":40401,"message":"Subject 'x' not found."}`):
//!
//! - `GET /subjects` (`?deleted=true`), `GET|POST /subjects/{s}/versions` (`?deleted=true`),
//!   `GET /subjects/{s}/versions/{v|latest}` (+ `/schema`, `/referencedby`),
//!   `POST /subjects/{s}` (lookup), `DELETE /subjects/{s}` and
//!   `DELETE /subjects/{s}/versions/{v}` (`?permanent=true`);
//! - `GET /schemas/ids/{id}` (+ `/schema`, `/versions`, `/subjects`), `GET /schemas/types`;
//! - `GET|PUT|DELETE /config` and `/config/{s}` (`?defaultToGlobal=true`);
//! - `POST /compatibility/subjects/{s}/versions[/{v}]` (`?verbose=true`);
//! - `GET|PUT /mode`, `GET|PUT|DELETE /mode/{s}` (`?force=true`).
//!
//! Every broker answers reads from its own replica of `_schemas`; writes (registrations,
//! deletes, config and mode changes) go to the registry's one writer, forwarded there by
//! any other broker ([`forward`]). A broker that holds no replica (the topic's replication
//! factor is below the number of brokers) forwards reads to the writer too.
//!
//! Off (404) with `sluice.schema.registry.enable=false`. No authentication, as Confluent's
//! registry without its security plugin.

mod forward;

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::HttpState;
use crate::registry::records::{Record, Reference, SchemaValue};
use crate::registry::store::{Store, Submitted, Which};
use crate::registry::{Error, Registry, formats, protobuf};
use forward::WriteRequest;

const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

pub fn router(state: HttpState) -> Router<HttpState> {
    let without_replica = axum::middleware::from_fn_with_state(state, forward::without_replica);
    Router::new()
        .route("/subjects", get(subjects))
        .route("/subjects/{subject}", post(lookup).delete(delete_subject))
        .route("/subjects/{subject}/versions", get(versions).post(register))
        .route(
            "/subjects/{subject}/versions/{version}",
            get(version).delete(delete_version),
        )
        .route(
            "/subjects/{subject}/versions/{version}/schema",
            get(version_schema),
        )
        .route(
            "/subjects/{subject}/versions/{version}/referencedby",
            get(referenced_by),
        )
        .route("/schemas/types", get(types))
        .route("/schemas/ids/{id}", get(by_id))
        .route("/schemas/ids/{id}/schema", get(by_id_schema))
        .route("/schemas/ids/{id}/versions", get(id_versions))
        .route("/schemas/ids/{id}/subjects", get(id_subjects))
        .route("/config", get(config).put(set_config).delete(delete_config))
        .route(
            "/config/{subject}",
            get(config_of).put(set_config_of).delete(delete_config_of),
        )
        .route(
            "/compatibility/subjects/{subject}/versions",
            post(check_all),
        )
        .route(
            "/compatibility/subjects/{subject}/versions/{version}",
            post(check_version),
        )
        .route("/mode", get(mode).put(set_mode))
        .route(
            "/mode/{subject}",
            get(mode_of).put(set_mode_of).delete(delete_mode_of),
        )
        .route_layer(without_replica)
}

type Answer = Result<Value, Error>;

/// A write of one record: `decide` gives the answer and the record.
async fn write_one<T>(
    r: &Registry,
    decide: impl FnOnce(&Store) -> Result<(T, Record), Error>,
) -> Result<T, Error> {
    r.write(|st| decide(st).map(|(t, record)| (t, vec![record])))
        .await
}

fn reply(a: Answer) -> Response {
    let (status, body) = match a {
        Ok(v) => (StatusCode::OK, v),
        Err(e) => (
            StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            json!({"error_code": e.code, "message": e.message}),
        ),
    };
    (
        status,
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        body.to_string(),
    )
        .into_response()
}

/// The registry, when the broker is open and the registry on.
pub(in crate::http) fn registry(s: &HttpState) -> Result<Arc<Registry>, Error> {
    let Some(b) = s.broker.get() else {
        return Err(Error {
            status: 503,
            code: 50003,
            message: "the broker is not open yet".into(),
        });
    };
    if !b.config.schema_registry_enabled {
        return Err(Error {
            status: 404,
            code: 404,
            message: "the schema registry is off (sluice.schema.registry.enable=false)".into(),
        });
    }
    Ok(b.schemas.clone())
}

/// The query parameters (percent-decoding aside: the flags are plain words).
fn query(uri: &Uri) -> HashMap<String, String> {
    uri.query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (p.to_string(), String::new()),
        })
        .collect()
}

fn flag(uri: &Uri, name: &str) -> bool {
    query(uri)
        .get(name)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// The body as a JSON object; 400 when it is not JSON, 422 when not an object.
fn object(body: &[u8]) -> Result<serde_json::Map<String, Value>, Error> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err(Error::unprocessable(
            "Unprocessable entity: the body must be a JSON object".into(),
        )),
        Err(e) => Err(Error::bad_request(format!("Unexpected request body: {e}"))),
    }
}

/// A schema request body: `schema`, `schemaType`, `references`, and `id`/`version` (IMPORT).
fn submitted(body: &[u8]) -> Result<Submitted, Error> {
    let o = object(body)?;
    let schema = match o.get("schema") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        _ => return Err(Error::invalid_schema("Empty schema")),
    };
    let schema_type = match o.get("schemaType") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(t.clone()),
        Some(_) => return Err(Error::invalid_schema("schemaType must be a string")),
    };
    let references = match o.get("references") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|r| {
                Reference::from_json(r)
                    .ok_or_else(|| Error::invalid_schema(&format!("invalid reference {r}")))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(Error::invalid_schema("references must be an array")),
    };
    let int = |f: &str| {
        o.get(f)
            .and_then(Value::as_i64)
            .and_then(|n| i32::try_from(n).ok())
    };
    Ok(Submitted {
        schema,
        schema_type,
        references,
        id: int("id"),
        version: int("version"),
    })
}

/// A field of a body (`compatibility`, `mode`) as text (another JSON value as its JSON
/// text, which then names no level or mode).
fn field(body: &[u8], names: &[&str]) -> Result<String, Error> {
    let o = object(body)?;
    names
        .iter()
        .find_map(|n| o.get(*n).filter(|v| !v.is_null()))
        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
        .ok_or_else(|| Error::unprocessable(format!("Unprocessable entity: {} missing", names[0])))
}

fn id_of(id: &str) -> Result<i32, Error> {
    id.parse::<i32>().map_err(|_| Error::schema_not_found(None))
}

/// A schema's type, text and references, as the answers carry them (type and references
/// only when not AVRO / not empty, as Confluent's).
fn schema_fields(v: &SchemaValue, o: &mut serde_json::Map<String, Value>) {
    if v.schema_type != "AVRO" {
        o.insert("schemaType".into(), json!(v.schema_type));
    }
    if !v.references.is_empty() {
        let refs = v.references.iter().map(Reference::to_json).collect();
        o.insert("references".into(), Value::Array(refs));
    }
    o.insert("schema".into(), json!(v.schema));
}

fn version_json(v: &SchemaValue) -> Value {
    let mut o = serde_json::Map::new();
    o.insert("subject".into(), json!(v.subject));
    o.insert("version".into(), json!(v.version));
    o.insert("id".into(), json!(v.id));
    schema_fields(v, &mut o);
    Value::Object(o)
}

async fn subjects(State(s): State<HttpState>, uri: Uri) -> Response {
    reply(registry(&s).map(|r| json!(r.read(|st| st.subjects(flag(&uri, "deleted"))))))
}

async fn versions(State(s): State<HttpState>, Path(subject): Path<String>, uri: Uri) -> Response {
    reply(registry(&s).and_then(|r| {
        r.read(|st| st.versions(&subject, flag(&uri, "deleted")))
            .map(|v| json!(v))
    }))
}

async fn register(
    State(s): State<HttpState>,
    Path(subject): Path<String>,
    w: WriteRequest,
) -> Response {
    forward::write(&s, &w, || register_here(&s, &subject, &w.body)).await
}

/// Registers `schema` of `schema_type` under `subject` as `POST /subjects/{subject}/versions`
/// does, forwarded to the registry's writer when that is another broker: its id, or the
/// registry's error. The REST Proxy registers the schemas a produce request gives so.
pub(in crate::http) async fn register_schema(
    s: &HttpState,
    subject: &str,
    schema_type: &str,
    schema: &str,
) -> Result<i32, Error> {
    let body = json!({"schema": schema, "schemaType": schema_type}).to_string();
    let w = WriteRequest::post(format!("/subjects/{subject}/versions"), body);
    let answer = register(State(s.clone()), Path(subject.to_string()), w).await;
    let status = answer.status().as_u16();
    let bytes = axum::body::to_bytes(answer.into_body(), 1 << 20)
        .await
        .map_err(|e| Error::store(e.to_string()))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| Error::store(e.to_string()))?;
    match (v["id"].as_i64(), v["error_code"].as_u64()) {
        (Some(id), _) if status == 200 => {
            i32::try_from(id).map_err(|e| Error::store(e.to_string()))
        }
        (_, Some(code)) => Err(Error {
            status,
            code: u32::try_from(code).unwrap_or(50001),
            message: v["message"].as_str().unwrap_or_default().to_string(),
        }),
        _ => Err(Error::store(format!("the registry answered {status} {v}"))),
    }
}

async fn register_here(s: &HttpState, subject: &str, body: &[u8]) -> Answer {
    let r = registry(s)?;
    let sub = submitted(body)?;
    let id = r
        .write(|st| {
            let reg = st.register(subject, &sub)?;
            Ok((reg.id, reg.record.into_iter().collect()))
        })
        .await?;
    Ok(json!({"id": id}))
}

fn read_version(
    s: &HttpState,
    subject: &str,
    version: &str,
    uri: &Uri,
) -> Result<SchemaValue, Error> {
    let r = registry(s)?;
    let which = Which::parse(version)?;
    r.read(|st| {
        let v = st.version(subject, which, flag(uri, "deleted"))?;
        Ok(formatted(st, v.clone(), uri))
    })
}

/// `v` with its text in the `?format=` asked: `serialized` turns a Protobuf schema into its
/// base64 `FileDescriptorProto` (what confluent-kafka's Protobuf deserializers ask for);
/// any other format leaves the text as stored.
fn formatted(st: &Store, mut v: SchemaValue, uri: &Uri) -> SchemaValue {
    let serialized = query(uri).get("format").is_some_and(|f| f == "serialized");
    if serialized && v.schema_type == "PROTOBUF" {
        let refs = st.resolve(&v.references).unwrap_or_default();
        if let Some(b64) = protobuf::serialized(&v.schema, &refs) {
            v.schema = b64;
        }
    }
    v
}

async fn version(
    State(s): State<HttpState>,
    Path((subject, version)): Path<(String, String)>,
    uri: Uri,
) -> Response {
    reply(read_version(&s, &subject, &version, &uri).map(|v| version_json(&v)))
}

async fn version_schema(
    State(s): State<HttpState>,
    Path((subject, version)): Path<(String, String)>,
    uri: Uri,
) -> Response {
    match read_version(&s, &subject, &version, &uri) {
        Ok(v) => raw_schema(&v),
        Err(e) => reply(Err(e)),
    }
}

/// The schema text alone (`.../schema`): the JSON itself for AVRO and JSON, the text for
/// PROTOBUF.
fn raw_schema(v: &SchemaValue) -> Response {
    let body = v.schema.clone();
    (StatusCode::OK, [(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response()
}

async fn referenced_by(
    State(s): State<HttpState>,
    Path((subject, version)): Path<(String, String)>,
    uri: Uri,
) -> Response {
    reply(read_version(&s, &subject, &version, &uri).and_then(|v| {
        let r = registry(&s)?;
        Ok(json!(r.read(|st| st.referenced_by(&subject, v.version))))
    }))
}

async fn lookup(
    State(s): State<HttpState>,
    Path(subject): Path<String>,
    uri: Uri,
    body: Bytes,
) -> Response {
    reply((|| {
        let r = registry(&s)?;
        let sub = submitted(&body)?;
        r.read(|st| {
            st.lookup(&subject, &sub, flag(&uri, "deleted"))
                .map(version_json)
        })
    })())
}

async fn delete_subject(
    State(s): State<HttpState>,
    Path(subject): Path<String>,
    uri: Uri,
    w: WriteRequest,
) -> Response {
    forward::write(&s, &w, || delete_subject_here(&s, &subject, &uri)).await
}

async fn delete_subject_here(s: &HttpState, subject: &str, uri: &Uri) -> Answer {
    let r = registry(s)?;
    let permanent = flag(uri, "permanent");
    let deleted = r.write(|st| st.delete_subject(subject, permanent)).await?;
    Ok(json!(deleted))
}

async fn delete_version(
    State(s): State<HttpState>,
    Path((subject, version)): Path<(String, String)>,
    uri: Uri,
    w: WriteRequest,
) -> Response {
    forward::write(&s, &w, || delete_version_here(&s, &subject, &version, &uri)).await
}

async fn delete_version_here(s: &HttpState, subject: &str, version: &str, uri: &Uri) -> Answer {
    let r = registry(s)?;
    let which = Which::parse(version)?;
    let permanent = flag(uri, "permanent");
    let deleted = write_one(&r, |st| st.delete_version(subject, which, permanent)).await?;
    Ok(json!(deleted))
}

async fn types() -> Response {
    reply(Ok(json!(formats::TYPES)))
}

fn read_id(s: &HttpState, id: &str, uri: &Uri) -> Result<SchemaValue, Error> {
    let r = registry(s)?;
    let id = id_of(id)?;
    r.read(|st| Ok(formatted(st, st.by_id(id)?.clone(), uri)))
}

async fn by_id(State(s): State<HttpState>, Path(id): Path<String>, uri: Uri) -> Response {
    reply(read_id(&s, &id, &uri).map(|v| {
        let mut o = serde_json::Map::new();
        schema_fields(&v, &mut o);
        Value::Object(o)
    }))
}

async fn by_id_schema(State(s): State<HttpState>, Path(id): Path<String>, uri: Uri) -> Response {
    match read_id(&s, &id, &uri) {
        Ok(v) => raw_schema(&v),
        Err(e) => reply(Err(e)),
    }
}

fn id_versions_of(s: &HttpState, id: &str, uri: &Uri) -> Result<Vec<(String, i32)>, Error> {
    let r = registry(s)?;
    let id = id_of(id)?;
    r.read(|st| st.id_versions(id, flag(uri, "deleted")))
}

async fn id_versions(State(s): State<HttpState>, Path(id): Path<String>, uri: Uri) -> Response {
    reply(id_versions_of(&s, &id, &uri).map(|vs| {
        let list: Vec<Value> = vs
            .iter()
            .map(|(subject, version)| json!({"subject": subject, "version": version}))
            .collect();
        Value::Array(list)
    }))
}

async fn id_subjects(State(s): State<HttpState>, Path(id): Path<String>, uri: Uri) -> Response {
    reply(id_versions_of(&s, &id, &uri).map(|vs| {
        let mut subjects: Vec<String> = vs.into_iter().map(|(s, _)| s).collect();
        subjects.dedup();
        json!(subjects)
    }))
}

fn get_config(s: &HttpState, subject: Option<&str>, uri: &Uri) -> Answer {
    let r = registry(s)?;
    let global = flag(uri, "defaultToGlobal");
    r.read(|st| {
        st.config(subject, global)
            .map(|l| json!({"compatibilityLevel": l}))
    })
}

async fn put_config(s: &HttpState, subject: Option<&str>, body: &[u8]) -> Answer {
    let r = registry(s)?;
    let level = field(body, &["compatibility", "compatibilityLevel"])?;
    let set = write_one(&r, |st| st.set_config(subject, &level)).await?;
    Ok(json!({"compatibility": set}))
}

async fn remove_config(s: &HttpState, subject: Option<&str>) -> Answer {
    let r = registry(s)?;
    let was = write_one(&r, |st| st.delete_config(subject)).await?;
    Ok(json!({"compatibilityLevel": was}))
}

async fn config(State(s): State<HttpState>, uri: Uri) -> Response {
    reply(get_config(&s, None, &uri))
}

async fn config_of(State(s): State<HttpState>, Path(subject): Path<String>, uri: Uri) -> Response {
    reply(get_config(&s, Some(&subject), &uri))
}

async fn set_config(State(s): State<HttpState>, w: WriteRequest) -> Response {
    forward::write(&s, &w, || put_config(&s, None, &w.body)).await
}

async fn set_config_of(
    State(s): State<HttpState>,
    Path(subject): Path<String>,
    w: WriteRequest,
) -> Response {
    forward::write(&s, &w, || put_config(&s, Some(&subject), &w.body)).await
}

async fn delete_config(State(s): State<HttpState>, w: WriteRequest) -> Response {
    forward::write(&s, &w, || remove_config(&s, None)).await
}

async fn delete_config_of(
    State(s): State<HttpState>,
    Path(subject): Path<String>,
    w: WriteRequest,
) -> Response {
    forward::write(&s, &w, || remove_config(&s, Some(&subject))).await
}

fn check(s: &HttpState, subject: &str, version: Option<&str>, uri: &Uri, body: &[u8]) -> Answer {
    let r = registry(s)?;
    let which = version.map(Which::parse).transpose()?;
    let sub = submitted(body)?;
    let why = r.read(|st| st.check(subject, which, &sub))?;
    let mut o = json!({"is_compatible": why.is_empty()});
    if flag(uri, "verbose") {
        o["messages"] = json!(why);
    }
    Ok(o)
}

async fn check_all(
    State(s): State<HttpState>,
    Path(subject): Path<String>,
    uri: Uri,
    body: Bytes,
) -> Response {
    reply(check(&s, &subject, None, &uri, &body))
}

async fn check_version(
    State(s): State<HttpState>,
    Path((subject, version)): Path<(String, String)>,
    uri: Uri,
    body: Bytes,
) -> Response {
    reply(check(&s, &subject, Some(&version), &uri, &body))
}

fn get_mode(s: &HttpState, subject: Option<&str>, uri: &Uri) -> Answer {
    let r = registry(s)?;
    let global = flag(uri, "defaultToGlobal");
    r.read(|st| st.mode(subject, global).map(|m| json!({"mode": m})))
}

async fn put_mode(s: &HttpState, subject: Option<&str>, uri: &Uri, body: &[u8]) -> Answer {
    let r = registry(s)?;
    let mode = field(body, &["mode"])?;
    let force = flag(uri, "force");
    let set = write_one(&r, |st| st.set_mode(subject, &mode, force)).await?;
    Ok(json!({"mode": set}))
}

async fn mode(State(s): State<HttpState>, uri: Uri) -> Response {
    reply(get_mode(&s, None, &uri))
}

async fn mode_of(State(s): State<HttpState>, Path(subject): Path<String>, uri: Uri) -> Response {
    reply(get_mode(&s, Some(&subject), &uri))
}

async fn set_mode(State(s): State<HttpState>, uri: Uri, w: WriteRequest) -> Response {
    forward::write(&s, &w, || put_mode(&s, None, &uri, &w.body)).await
}

async fn set_mode_of(
    State(s): State<HttpState>,
    Path(subject): Path<String>,
    uri: Uri,
    w: WriteRequest,
) -> Response {
    forward::write(&s, &w, || put_mode(&s, Some(&subject), &uri, &w.body)).await
}

async fn delete_mode_of(
    State(s): State<HttpState>,
    Path(subject): Path<String>,
    w: WriteRequest,
) -> Response {
    forward::write(&s, &w, || delete_mode_here(&s, &subject)).await
}

async fn delete_mode_here(s: &HttpState, subject: &str) -> Answer {
    let r = registry(s)?;
    let mode = write_one(&r, |st| st.delete_mode(subject)).await?;
    Ok(json!({"mode": mode}))
}
