//! The Schema Registry's pages: its subjects (latest version, format, id, compatibility
//! level) and one subject's versions with their schemas, read from the registry's own state
//! (the one the registry's REST API answers from). With the registry off, the list says so.

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use serde_json::{Value, json};

use super::{Answer, Failure, admit, answer, query};
use crate::http::HttpState;
use crate::registry::records::SchemaValue;
use crate::registry::store::{Store, Which};

pub(super) async fn subjects(State(s): State<HttpState>, headers: HeaderMap) -> Response {
    answer(subjects_answer(&s, &headers))
}

pub(super) async fn subject(State(s): State<HttpState>, headers: HeaderMap, uri: Uri) -> Response {
    answer(subject_answer(&s, &headers, &uri))
}

fn subjects_answer(s: &HttpState, headers: &HeaderMap) -> Answer {
    let ctx = admit(s, headers)?;
    let b = &ctx.broker;
    if !b.config.schema_registry_enabled {
        return Ok(json!({ "enabled": false, "subjects": [] }));
    }
    let subjects = b.schemas.read(|st| {
        st.subjects(false)
            .iter()
            .filter_map(|name| {
                let latest = st.version(name, Which::Latest, false).ok()?;
                let count = st.versions(name, false).map(|v| v.len()).unwrap_or(0);
                Some(json!({
                    "subject": name,
                    "latest_version": latest.version,
                    "id": latest.id,
                    "type": latest.schema_type,
                    "versions": count,
                    "compatibility": st.level_of(Some(name)),
                }))
            })
            .collect::<Vec<_>>()
    });
    Ok(json!({ "enabled": true, "subjects": subjects }))
}

fn subject_answer(s: &HttpState, headers: &HeaderMap, uri: &Uri) -> Answer {
    let ctx = admit(s, headers)?;
    let b = &ctx.broker;
    let q = query(uri);
    let name = q
        .get("name")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| Failure::bad_request("name the subject: ?name=..."))?;
    if !b.config.schema_registry_enabled {
        return Err(Failure::not_found(
            "the schema registry is off (sluice.schema.registry.enable=false)",
        ));
    }
    b.schemas.read(|st| {
        let numbers = st
            .versions(name, false)
            .map_err(|e| Failure::not_found(e.message))?;
        let versions: Vec<Value> = numbers
            .iter()
            .filter_map(|n| st.version(name, Which::Number(*n), false).ok())
            .map(|v| version_json(st, v))
            .collect();
        Ok(json!({
            "subject": name,
            "compatibility": st.level_of(Some(name)),
            "mode": st.mode_of(Some(name)),
            "versions": versions,
        }))
    })
}

/// One version: its number, id, format, references, the versions of other subjects that
/// use it, and its schema (JSON formats pretty-printed, Protobuf as registered).
fn version_json(st: &Store, v: &SchemaValue) -> Value {
    let schema = serde_json::from_str::<Value>(&v.schema)
        .ok()
        .filter(|_| v.schema_type != "PROTOBUF")
        .and_then(|j| serde_json::to_string_pretty(&j).ok())
        .unwrap_or_else(|| v.schema.clone());
    let references: Vec<Value> = v
        .references
        .iter()
        .map(|r| json!({ "name": r.name, "subject": r.subject, "version": r.version }))
        .collect();
    json!({
        "version": v.version,
        "id": v.id,
        "type": v.schema_type,
        "schema": schema,
        "references": references,
        "referenced_by": st.referenced_by(&v.subject, v.version),
    })
}
