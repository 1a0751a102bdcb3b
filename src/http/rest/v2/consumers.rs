//! The consumer instance endpoints under `/consumers/{group}`: create (`POST`, 200 with
//! `instance_id` and `base_uri`), and under `.../instances/{instance}`: delete (204, after
//! the instance committed, when it auto-commits, and left its group), `subscription` (POST
//! `{"topics"}` or `{"topic_pattern"}`, GET, DELETE), `assignments` (POST `{"partitions"}`,
//! GET), `records` (GET, by `Accept`), `offsets` (POST commit: the offsets given, each plus
//! one as kafka-rest commits them, or every position; GET committed for `{"partitions"}`),
//! `positions` (seek to offsets or timestamps), `positions/beginning` and `positions/end`.
//!
//! The Java consumer's rules apply: subscribing and assigning exclude each other, a seek
//! needs the partition assigned (both 409 40903); an unknown instance is 404 40403, a name
//! in use 409 40902, an `Accept` of another embedded format than the instance's 406 40601.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use serde::Deserialize;
use serde_json::{Value, json};

use super::instance::{Format, Instance, Mode, Pos, Reset, Settings, Tp, illegal_state};
use super::{
    Answer, Entity, Fail, Inst, V2_JSON, V2Req, media_type, no_content, not_acceptable, reply,
    reply_as, unprocessable,
};
use crate::http::HttpState;
use crate::http::console::cluster::list_offsets;
use crate::http::rest::RestError;
use crate::http::rest::records::parse_instant;

/// kafka-rest's default `consumer.request.timeout.ms`.
const REQUEST_TIMEOUT_MS: u64 = 1_000;
/// How long a DELETE waits for the instance to commit and leave its group.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A value that may come as a JSON string or as the JSON value itself.
#[derive(Deserialize)]
#[serde(untagged)]
enum Loose {
    Text(String),
    Bool(bool),
    Int(i64),
}

impl Loose {
    fn text(&self) -> String {
        match self {
            Loose::Text(s) => s.clone(),
            Loose::Bool(b) => b.to_string(),
            Loose::Int(i) => i.to_string(),
        }
    }
}

#[derive(Deserialize, Default)]
pub(super) struct CreateBody {
    id: Option<String>,
    name: Option<String>,
    format: Option<String>,
    #[serde(rename = "auto.offset.reset")]
    auto_offset_reset: Option<String>,
    #[serde(rename = "auto.commit.enable")]
    auto_commit_enable: Option<Loose>,
    // Both are Integers in kafka-rest's request: a larger number is a body it cannot read.
    #[serde(rename = "fetch.min.bytes", alias = "responseMinBytes")]
    fetch_min_bytes: Option<i32>,
    #[serde(rename = "consumer.request.timeout.ms", alias = "requestWaitMs")]
    request_timeout_ms: Option<i32>,
}

fn invalid_config(why: String) -> RestError {
    unprocessable(42204, format!("Invalid consumer configuration: {why}"))
}

/// The settings of a create request, checked as kafka-rest and the Java consumer check them.
fn settings(b: &CreateBody) -> Result<Settings, RestError> {
    let format = match b.format.as_deref().map(str::to_ascii_uppercase).as_deref() {
        None | Some("BINARY") => Format::Binary,
        Some("JSON") => Format::Json,
        Some("AVRO") => Format::Avro,
        Some("JSONSCHEMA") => Format::JsonSchema,
        Some("PROTOBUF") => Format::Protobuf,
        Some(_) => return Err(unprocessable(422, "Invalid format type.")),
    };
    let reset = Reset::parse(b.auto_offset_reset.as_deref()).ok_or_else(|| {
        invalid_config(format!(
            "Invalid value {} for configuration auto.offset.reset: String must be one of: \
             latest, earliest, none",
            b.auto_offset_reset.as_deref().unwrap_or_default()
        ))
    })?;
    let auto_commit = match b.auto_commit_enable.as_ref().map(Loose::text) {
        None => true,
        Some(v) => match v.to_ascii_lowercase().as_str() {
            "true" => true,
            "false" => false,
            _ => {
                return Err(invalid_config(format!(
                    "Invalid value {v} for configuration enable.auto.commit: Expected value to \
                     be either true or false"
                )));
            }
        },
    };
    let min_bytes = i64::from(b.fetch_min_bytes.unwrap_or(-1));
    if min_bytes < -1 {
        return Err(unprocessable(
            40001,
            format!(
                "Invalid consumer configuration. It does not abide by the constraints: Invalid \
                 value {min_bytes} for configuration fetch.min.bytes: Value must be at least -1"
            ),
        ));
    }
    let request_timeout_ms = b
        .request_timeout_ms
        .and_then(|t| u64::try_from(t).ok())
        .unwrap_or(REQUEST_TIMEOUT_MS);
    Ok(Settings {
        format,
        reset,
        auto_commit,
        min_bytes,
        request_timeout_ms,
    })
}

pub(super) async fn create(
    State(s): State<HttpState>,
    r: V2Req,
    Path(group): Path<String>,
    Entity(want): Entity<CreateBody>,
) -> Answer {
    let want = want.unwrap_or_default();
    let settings = settings(&want)?;
    let name = want
        .id
        .clone()
        .or(want.name.clone())
        .unwrap_or_else(|| format!("rest-consumer-{}", uuid::Uuid::new_v4()));
    let inst = Instance::new(&r.ctx, &group, &name, settings);
    s.rest_consumers.add(inst)?;
    let base_uri = format!(
        "{}/consumers/{}/instances/{}",
        r.base,
        enc(&group),
        enc(&name)
    );
    reply(&json!({ "instance_id": name, "base_uri": base_uri }))
}

/// A path segment, percent-encoded.
fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(super) async fn delete(State(s): State<HttpState>, Inst(inst): Inst) -> Answer {
    s.rest_consumers.forget(&inst);
    inst.closed.cancel();
    let task = inst.task.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(task) = task
        && tokio::time::timeout(CLOSE_WAIT, task).await.is_err()
    {
        tracing::warn!(
            "REST consumer instance {} of group {} did not close in time",
            inst.name,
            inst.group
        );
    }
    no_content()
}

#[derive(Deserialize)]
pub(super) struct SubscribeBody {
    topics: Option<Vec<String>>,
    topic_pattern: Option<String>,
}

pub(super) async fn subscribe(Inst(inst): Inst, want: Entity<SubscribeBody>) -> Answer {
    let want = want.required()?;
    let mode = match (want.topics, want.topic_pattern) {
        (Some(mut topics), _) => {
            topics.sort();
            topics.dedup();
            if topics.is_empty() {
                Mode::Nothing
            } else {
                Mode::Topics(topics)
            }
        }
        (None, Some(pattern)) => match super::member::anchored(&pattern) {
            Ok(re) => Mode::Pattern(re, Vec::new()),
            Err(e) => {
                return Err(unprocessable(42204, format!("Invalid topic pattern: {e}")).into());
            }
        },
        (None, None) => return no_content(),
    };
    {
        let mut st = inst.lock();
        if matches!(st.mode, Mode::Assigned(_)) {
            return Err(illegal_state(
                "Subscription to topics, partitions and pattern are mutually exclusive",
            )
            .into());
        }
        st.mode = mode;
        st.error = None;
    }
    if let Some(ctx) = inst.ctx() {
        super::member::refresh_pattern(&inst, &ctx).await?;
    }
    inst.wake.notify_one();
    no_content()
}

pub(super) async fn unsubscribe(Inst(inst): Inst) -> Answer {
    {
        let _busy = inst.busy.lock().await;
        let mut st = inst.lock();
        st.mode = Mode::Nothing;
        st.positions.clear();
        st.error = None;
    }
    inst.wake.notify_one();
    no_content()
}

pub(super) async fn subscription(Inst(inst): Inst) -> Answer {
    let topics = inst.lock().wanted().unwrap_or_default();
    reply(&json!({ "topics": topics }))
}

#[derive(Deserialize)]
struct PartitionIn {
    topic: String,
    partition: i32,
}

#[derive(Deserialize)]
pub(super) struct PartitionsBody {
    #[serde(default)]
    partitions: Vec<PartitionIn>,
}

fn tps(ps: Vec<PartitionIn>) -> Vec<Tp> {
    let mut out: Vec<Tp> = ps.into_iter().map(|p| (p.topic, p.partition)).collect();
    out.sort();
    out.dedup();
    out
}

fn partitions_json(tps: &[Tp]) -> Value {
    let ps: Vec<Value> = tps
        .iter()
        .map(|(t, p)| json!({ "topic": t, "partition": p }))
        .collect();
    json!({ "partitions": ps })
}

pub(super) async fn assign(Inst(inst): Inst, want: Entity<PartitionsBody>) -> Answer {
    let want = want.required()?;
    let assigned = tps(want.partitions);
    let _busy = inst.busy.lock().await;
    let mut st = inst.lock();
    if matches!(st.mode, Mode::Topics(_) | Mode::Pattern(..)) {
        return Err(illegal_state(
            "Subscription to topics, partitions and pattern are mutually exclusive",
        )
        .into());
    }
    st.positions.retain(|tp, _| assigned.contains(tp));
    st.error = None;
    st.mode = if assigned.is_empty() {
        Mode::Nothing
    } else {
        Mode::Assigned(assigned)
    };
    drop(st);
    no_content()
}

pub(super) async fn assignment(Inst(inst): Inst) -> Answer {
    let assigned = inst.lock().assigned();
    reply(&partitions_json(&assigned))
}

/// The embedded format an `Accept` header asks for; None for a media type that is not one
/// of v2's (406).
fn accepted(headers: &HeaderMap) -> Option<Format> {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let types: Vec<String> = accept
        .split(',')
        .map(media_type)
        .filter(|t| !t.is_empty())
        .collect();
    if types.is_empty() {
        return Some(Format::Binary);
    }
    types.iter().find_map(|t| match t.as_str() {
        "application/vnd.kafka.binary.v2+json"
        | "application/vnd.kafka.v2+json"
        | "application/*"
        | "*/*" => Some(Format::Binary),
        "application/vnd.kafka.json.v2+json" => Some(Format::Json),
        "application/vnd.kafka.avro.v2+json" => Some(Format::Avro),
        "application/vnd.kafka.jsonschema.v2+json" => Some(Format::JsonSchema),
        "application/vnd.kafka.protobuf.v2+json" => Some(Format::Protobuf),
        _ => None,
    })
}

/// A read; its errors, 40403 included, come in the media type the `Accept` asked for.
pub(super) async fn records(inst: Result<Inst, Fail>, uri: Uri, headers: HeaderMap) -> Answer {
    let q = crate::http::console::render::parse_query(uri.query().unwrap_or(""));
    let number = |k: &str| q.get(k).and_then(|v| v.parse::<i64>().ok()).unwrap_or(-1);
    let asked = accepted(&headers);
    let media = match asked {
        Some(f) => f.media_type(),
        None => V2_JSON,
    };
    let Inst(inst) = inst.map_err(|Fail(e, _)| Fail(e, media))?;
    match asked {
        None => return Err(Fail(not_acceptable(), V2_JSON)),
        Some(f) if f == inst.settings.format => {}
        Some(_) => {
            return Err(Fail(
                RestError::new(
                    StatusCode::NOT_ACCEPTABLE,
                    40601,
                    "The requested embedded data format does not match the deserializer for \
                     this consumer instance",
                ),
                media,
            ));
        }
    }
    let ctx = inst
        .ctx()
        .ok_or_else(|| Fail(RestError::kafka(8, None), media))?;
    let got = super::read::read(&inst, &ctx, number("timeout"), number("max_bytes"))
        .await
        .map_err(|e| Fail(e, media))?;
    reply_as(&Value::Array(got), media)
}

#[derive(Deserialize)]
struct OffsetIn {
    topic: String,
    partition: i32,
    offset: i64,
    metadata: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct CommitBody {
    #[serde(default)]
    offsets: Vec<OffsetIn>,
}

pub(super) async fn commit(Inst(inst): Inst, Entity(want): Entity<CommitBody>) -> Answer {
    let ctx = inst.ctx().ok_or_else(|| RestError::kafka(8, None))?;
    let _busy = inst.busy.lock().await;
    let offsets: Vec<(Tp, i64, Option<String>)> = match want {
        Some(c) => c
            .offsets
            .into_iter()
            .map(|o| {
                (
                    (o.topic, o.partition),
                    o.offset.saturating_add(1),
                    o.metadata,
                )
            })
            .collect(),
        None => inst
            .lock()
            .consumed()
            .into_iter()
            .map(|(tp, o)| (tp, o, None))
            .collect(),
    };
    inst.commit(&ctx, &offsets).await?;
    reply(&json!([]))
}

pub(super) async fn committed(Inst(inst): Inst, Entity(want): Entity<PartitionsBody>) -> Answer {
    let Some(want) = want else {
        return Err(super::topics::partition_not_found().into());
    };
    let ctx = inst.ctx().ok_or_else(|| RestError::kafka(8, None))?;
    let wanted = tps(want.partitions);
    let got = inst.committed(&ctx, &wanted).await?;
    let offsets: Vec<Value> = wanted
        .iter()
        .filter_map(|tp| {
            let (o, meta) = got.get(tp)?;
            Some(json!({ "topic": tp.0, "partition": tp.1, "offset": o, "metadata": meta }))
        })
        .collect();
    reply(&json!({ "offsets": offsets }))
}

#[derive(Deserialize)]
struct TimestampIn {
    topic: String,
    partition: i32,
    timestamp: String,
}

#[derive(Deserialize)]
pub(super) struct SeekBody {
    #[serde(default)]
    offsets: Vec<OffsetIn>,
    #[serde(default)]
    timestamps: Vec<TimestampIn>,
}

/// Refuses a seek of a partition the instance does not read (as the Java consumer does).
fn check_assigned(inst: &Instance, tps: &[Tp]) -> Result<(), RestError> {
    let assigned = inst.lock().assigned();
    match tps.iter().find(|tp| !assigned.contains(tp)) {
        Some((t, p)) => Err(illegal_state(&format!(
            "No current assignment for partition {t}-{p}"
        ))),
        None => Ok(()),
    }
}

pub(super) async fn seek(Inst(inst): Inst, want: Entity<SeekBody>) -> Answer {
    let want = want.required()?;
    let mut at: Vec<(Tp, i64)> = want
        .offsets
        .into_iter()
        .map(|o| ((o.topic, o.partition), o.offset))
        .collect();
    let mut times = Vec::with_capacity(want.timestamps.len());
    for t in want.timestamps {
        let ms = parse_instant(&t.timestamp).ok_or_else(|| {
            RestError::bad_request(format!(
                "timestamp {:?} is not an ISO-8601 instant",
                t.timestamp
            ))
        })?;
        times.push((t.topic, t.partition, ms));
    }
    let all: Vec<Tp> = at
        .iter()
        .map(|(tp, _)| tp.clone())
        .chain(times.iter().map(|(t, p, _)| (t.clone(), *p)))
        .collect();
    check_assigned(&inst, &all)?;
    let _busy = inst.busy.lock().await;
    let mut ends = Vec::new();
    if !times.is_empty() {
        let ctx = inst.ctx().ok_or_else(|| RestError::kafka(8, None))?;
        for (k, v) in list_offsets(&ctx, &times).await? {
            match v {
                Ok((o, _)) if o >= 0 => at.push((k, o)),
                Ok(_) => ends.push(k),
                Err(why) => {
                    return Err(RestError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        50002,
                        format!("Kafka error: {why}"),
                    )
                    .into());
                }
            }
        }
    }
    let mut st = inst.lock();
    for (tp, o) in at {
        st.positions.insert(tp, Pos::At(o));
    }
    for tp in ends {
        st.positions.insert(tp, Pos::End);
    }
    drop(st);
    no_content()
}

async fn seek_to(inst: Inst, want: Entity<PartitionsBody>, to: Pos) -> Answer {
    let Inst(inst) = inst;
    let want = want.required()?;
    let wanted = tps(want.partitions);
    check_assigned(&inst, &wanted)?;
    let _busy = inst.busy.lock().await;
    let mut st = inst.lock();
    for tp in wanted {
        st.positions.insert(tp, to);
    }
    drop(st);
    no_content()
}

pub(super) async fn seek_to_beginning(inst: Inst, want: Entity<PartitionsBody>) -> Answer {
    seek_to(inst, want, Pos::Beginning).await
}

pub(super) async fn seek_to_end(inst: Inst, want: Entity<PartitionsBody>) -> Answer {
    seek_to(inst, want, Pos::End).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(v: Value) -> CreateBody {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn create_requests_are_checked() {
        let s = settings(&body(
            json!({"format": "json", "auto.offset.reset": "earliest",
                                       "auto.commit.enable": "false"}),
        ))
        .unwrap();
        assert_eq!(
            (s.format, s.reset, s.auto_commit),
            (Format::Json, Reset::Earliest, false)
        );
        assert_eq!(
            (s.min_bytes, s.request_timeout_ms),
            (-1, REQUEST_TIMEOUT_MS)
        );
        let s = settings(&body(
            json!({"auto.commit.enable": true, "fetch.min.bytes": 10}),
        ))
        .unwrap();
        assert!(s.auto_commit && s.min_bytes == 10 && s.format == Format::Binary);
        let code = |v| settings(&body(v)).err().map(|e| e.code);
        assert_eq!(code(json!({"format": "xml"})), Some(422));
        assert_eq!(
            settings(&body(json!({"format": "protobuf"})))
                .unwrap()
                .format,
            Format::Protobuf
        );
        assert_eq!(
            settings(&body(json!({"format": "AVRO"}))).unwrap().format,
            Format::Avro
        );
        assert_eq!(
            settings(&body(json!({"format": "jsonschema"})))
                .unwrap()
                .format,
            Format::JsonSchema
        );
        assert_eq!(code(json!({"auto.offset.reset": "middle"})), Some(42204));
        assert_eq!(code(json!({"auto.commit.enable": "maybe"})), Some(42204));
        assert_eq!(code(json!({"fetch.min.bytes": -5})), Some(40001));
        let huge = json!({"consumer.request.timeout.ms": 1_u64 << 40});
        assert!(serde_json::from_value::<CreateBody>(huge).is_err());
    }

    #[test]
    fn accept_headers_pick_the_format() {
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(header::ACCEPT, v.parse().unwrap());
            accepted(&m)
        };
        assert_eq!(accepted(&HeaderMap::new()), Some(Format::Binary));
        assert_eq!(h("application/vnd.kafka.json.v2+json"), Some(Format::Json));
        assert_eq!(h("*/*"), Some(Format::Binary));
        assert_eq!(
            h("text/html, application/vnd.kafka.json.v2+json; q=0.5"),
            Some(Format::Json)
        );
        assert_eq!(h("application/vnd.kafka.avro.v2+json"), Some(Format::Avro));
        assert_eq!(
            h("application/vnd.kafka.jsonschema.v2+json"),
            Some(Format::JsonSchema)
        );
        assert_eq!(
            h("application/vnd.kafka.protobuf.v2+json"),
            Some(Format::Protobuf)
        );
        assert_eq!(h("application/json"), None);
        assert_eq!(enc("a b/c"), "a%20b%2Fc");
    }
}
