//! `POST /topics/{topic}` and `POST /topics/{topic}/partitions/{partition}`: produce the
//! records of one body, `{"records": [{"key", "value", "partition"?}]}`, and answer
//! `{"key_schema_id": null, "value_schema_id": null, "offsets": [{"partition", "offset",
//! "error_code", "error"}]}` with one entry per record, in order.
//!
//! The body's `Content-Type` is the embedded format: `application/vnd.kafka.binary.v2+json`
//! (key and value base64), `application/vnd.kafka.json.v2+json` (any JSON, written as its
//! text) or `application/vnd.kafka.avro.v2+json` (Avro data in Avro's JSON encoding, written
//! in Confluent's wire format through the schemas the body names: `key_schema` or
//! `key_schema_id`, `value_schema` or `value_schema_id`, see [`super::schemas`]; the answer
//! carries their ids), `application/vnd.kafka.jsonschema.v2+json` (JSON checked against a
//! JSON Schema, [`super::jsonschema`]) or `application/vnd.kafka.protobuf.v2+json` (proto3's
//! JSON mapping of a Protobuf schema's first message, [`super::protobuf`]); others are 415. A record goes to its own `partition`, else the path's, else the
//! partition the Java client's partitioner picks for its key. Each is written through the
//! Produce handler (acks=all) as the caller; a record Kafka refuses gets its error in its
//! entry (40301 refused, 50003 retriable, 50002 other), and the status is 403 when one was
//! refused, as kafka-rest answers.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use base64::Engine;
use bytes::Bytes;
use kafka_protocol::ResponseError;
use serde::Deserialize;
use serde_json::{Value, json};

use super::schemas::{Part, Writer, encode, for_produce};
use super::topics::{partition_not_found, topic_not_found};
use super::{Answer, Fail, V2_JSON, V2Req, unprocessable, unsupported_media_type};
use crate::http::HttpState;
use crate::http::console::produce::{Outgoing, Refusal, Target, send};
use crate::http::console::wire::denied;
use crate::http::rest::RestError;
use crate::registry::avro_json::AvroSchema;
use jsonschema::Validator;
use prost_reflect::MessageDescriptor;

/// The embedded formats a produce body may use.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Format {
    Binary,
    Json,
    Avro,
    JsonSchema,
    Protobuf,
}

impl Format {
    fn of(content_type: &str) -> Result<Format, RestError> {
        match content_type {
            "application/vnd.kafka.binary.v2+json" => Ok(Format::Binary),
            "application/vnd.kafka.json.v2+json" => Ok(Format::Json),
            "application/vnd.kafka.avro.v2+json" => Ok(Format::Avro),
            "application/vnd.kafka.jsonschema.v2+json" => Ok(Format::JsonSchema),
            "application/vnd.kafka.protobuf.v2+json" => Ok(Format::Protobuf),
            _ => Err(unsupported_media_type()),
        }
    }

    /// The bytes of a key or value; None for null. `schema`: the key's or value's.
    fn bytes(self, part: Part, schema: &Schemas, v: &Value) -> Result<Option<Bytes>, RestError> {
        match (self, v) {
            (Format::Avro, v) => encode(part, schema.avro.as_ref(), v),
            (Format::JsonSchema, v) => encode(part, schema.json.as_ref(), v),
            (Format::Protobuf, v) => encode(part, schema.protobuf.as_ref(), v),
            (_, Value::Null) => Ok(None),
            (Format::Json, v) => Ok(Some(Bytes::from(v.to_string()))),
            (Format::Binary, Value::String(s)) => base64::engine::general_purpose::STANDARD
                .decode(s)
                .map(|b| Some(Bytes::from(b)))
                .map_err(|_| not_base64(v)),
            (Format::Binary, v) => Err(not_base64(v)),
        }
    }
}

/// The schema a key or value is written with, in the request's format.
#[derive(Default)]
struct Schemas {
    avro: Option<Writer<AvroSchema>>,
    json: Option<Writer<Validator>>,
    protobuf: Option<Writer<MessageDescriptor>>,
}

impl Schemas {
    fn id(&self) -> Option<i32> {
        let avro = self.avro.as_ref().map(|w| w.id);
        let protobuf = self.protobuf.as_ref().map(|w| w.id);
        avro.or(self.json.as_ref().map(|w| w.id)).or(protobuf)
    }
}

fn not_base64(v: &Value) -> RestError {
    unprocessable(
        42207,
        format!("Error serializing message. data={v} is not a base64 string."),
    )
}

#[derive(Deserialize)]
struct ProduceBody {
    #[serde(default)]
    records: Vec<RecordIn>,
    key_schema: Option<String>,
    key_schema_id: Option<i32>,
    value_schema: Option<String>,
    value_schema_id: Option<i32>,
}

#[derive(Deserialize)]
struct RecordIn {
    partition: Option<i32>,
    #[serde(default)]
    key: Value,
    #[serde(default)]
    value: Value,
}

pub(super) async fn to_topic(
    State(s): State<HttpState>,
    r: V2Req,
    Path(topic): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    produce(&s, r, &topic, None, &headers, &body).await
}

pub(super) async fn to_partition(
    State(s): State<HttpState>,
    r: V2Req,
    Path((topic, partition)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let Ok(p) = partition.parse::<i32>() else {
        return Err(RestError::not_found().into());
    };
    produce(&s, r, &topic, Some(p), &headers, &body).await
}

/// A per-record error entry, as kafka-rest classifies the producer's exception.
fn failed(code: i16, message: Option<String>) -> Value {
    let rest_code = if denied(code) {
        40301
    } else if ResponseError::try_from_code(code).is_some_and(|e| e.is_retriable()) {
        50003
    } else {
        50002
    };
    let message = message
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| crate::http::console::wire::error_name(code));
    json!({ "partition": null, "offset": null, "error_code": rest_code, "error": message })
}

async fn produce(
    s: &HttpState,
    r: V2Req,
    topic: &str,
    path_partition: Option<i32>,
    headers: &HeaderMap,
    body: &[u8],
) -> Answer {
    let format = Format::of(&super::content_type(headers))?;
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(RestError::empty_body().into());
    }
    let req: ProduceBody =
        serde_json::from_slice(body).map_err(|e| RestError::bad_request(e.to_string()))?;
    if req.records.is_empty() {
        return Err(unprocessable(42206, "Payload error. records may not be empty").into());
    }
    let (mut key_schema, mut value_schema) = (Schemas::default(), Schemas::default());
    let (key, value) = (
        (req.key_schema.as_deref(), req.key_schema_id),
        (req.value_schema.as_deref(), req.value_schema_id),
    );
    match format {
        Format::Avro => {
            key_schema.avro = for_produce(s, topic, Part::Key, key.0, key.1).await?;
            value_schema.avro = for_produce(s, topic, Part::Value, value.0, value.1).await?;
        }
        Format::JsonSchema => {
            key_schema.json = for_produce(s, topic, Part::Key, key.0, key.1).await?;
            value_schema.json = for_produce(s, topic, Part::Value, value.0, value.1).await?;
        }
        Format::Protobuf => {
            key_schema.protobuf = for_produce(s, topic, Part::Key, key.0, key.1).await?;
            value_schema.protobuf = for_produce(s, topic, Part::Value, value.0, value.1).await?;
        }
        Format::Binary | Format::Json => {}
    }
    let ids = (key_schema.id(), value_schema.id());
    // Every record is encoded first: a record that does not encode fails the request.
    let mut encoded = Vec::with_capacity(req.records.len());
    for rec in &req.records {
        let key = format.bytes(Part::Key, &key_schema, &rec.key)?;
        let value = format.bytes(Part::Value, &value_schema, &rec.value)?;
        encoded.push((rec.partition.or(path_partition), key, value));
    }
    let target = match Target::of(&r.ctx, topic).await {
        Ok(t) => t,
        Err(Refusal::Kafka(code, msg)) if denied(code) => {
            let offsets: Vec<Value> = encoded.iter().map(|_| failed(code, msg.clone())).collect();
            return answer(StatusCode::FORBIDDEN, ids, offsets);
        }
        Err(Refusal::Kafka(code, _)) if code == ResponseError::UnknownTopicOrPartition.code() => {
            return Err(topic_not_found().into());
        }
        Err(e) => return Err(Fail::from(RestError::from(e))),
    };
    if let Some(p) = path_partition
        && !target.partitions.iter().any(|(id, _)| *id == p)
    {
        return Err(partition_not_found().into());
    }
    if encoded
        .iter()
        .any(|(p, _, _)| p.is_some_and(|p| !target.partitions.iter().any(|(id, _)| *id == p)))
    {
        return Err(partition_not_found().into());
    }
    let mut offsets = Vec::with_capacity(encoded.len());
    let mut status = StatusCode::OK;
    for (named, key, value) in encoded {
        let partition = target.partition_for(named, key.as_deref());
        let out = Outgoing {
            key,
            value,
            headers: Vec::new(),
            timestamp: crate::clock::now_ms(),
        };
        match send(&r.ctx, &target, partition, &out).await {
            Ok(sent) => offsets.push(json!({
                "partition": partition,
                "offset": sent.offset,
                "error_code": null,
                "error": null,
            })),
            Err(Refusal::Kafka(code, msg)) => {
                if denied(code) {
                    status = StatusCode::FORBIDDEN;
                }
                offsets.push(failed(code, msg));
            }
            Err(Refusal::Http(f)) => return Err(f.into()),
        }
    }
    answer(status, ids, offsets)
}

/// The answer: the schema ids written with (avro; null otherwise) and each record's entry.
fn answer(status: StatusCode, ids: (Option<i32>, Option<i32>), offsets: Vec<Value>) -> Answer {
    let body = json!({
        "key_schema_id": ids.0,
        "value_schema_id": ids.1,
        "offsets": offsets,
    });
    Ok((status, [(header::CONTENT_TYPE, V2_JSON)], body.to_string()).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_follow_the_content_type() {
        assert_eq!(
            Format::of("application/vnd.kafka.binary.v2+json").unwrap(),
            Format::Binary
        );
        assert_eq!(
            Format::of("application/vnd.kafka.json.v2+json").unwrap(),
            Format::Json
        );
        assert_eq!(
            Format::of("application/vnd.kafka.avro.v2+json").unwrap(),
            Format::Avro
        );
        assert_eq!(
            Format::of("application/vnd.kafka.jsonschema.v2+json").unwrap(),
            Format::JsonSchema
        );
        assert_eq!(
            Format::of("application/vnd.kafka.protobuf.v2+json").unwrap(),
            Format::Protobuf
        );
        for bad in ["application/json", "application/vnd.kafka.v2+json", ""] {
            assert_eq!(Format::of(bad).unwrap_err().code, 415, "{bad}");
        }
        let bytes = |f: Format, v: &Value| f.bytes(Part::Value, &Schemas::default(), v);
        let b = bytes(Format::Binary, &json!("aGk=")).unwrap();
        assert_eq!(b.as_deref(), Some(&b"hi"[..]));
        assert_eq!(bytes(Format::Binary, &json!(7)).unwrap_err().code, 42207);
        assert_eq!(bytes(Format::Binary, &json!("!!")).unwrap_err().code, 42207);
        let j = bytes(Format::Json, &json!({"a": 1})).unwrap();
        assert_eq!(j.as_deref(), Some(&br#"{"a":1}"#[..]));
        assert_eq!(bytes(Format::Json, &Value::Null).unwrap(), None);
        assert_eq!(bytes(Format::Avro, &json!(1)).unwrap_err().code, 42202);
        assert_eq!(
            bytes(Format::JsonSchema, &json!(1)).unwrap_err().code,
            42202
        );
        assert_eq!(bytes(Format::Protobuf, &json!({})).unwrap_err().code, 42202);
    }

    #[test]
    fn refused_records_carry_kafka_rests_codes() {
        let v = failed(ResponseError::TopicAuthorizationFailed.code(), None);
        assert_eq!(v["error_code"], 40301);
        assert_eq!(v["partition"], Value::Null);
        let v = failed(ResponseError::NotEnoughReplicas.code(), None);
        assert_eq!(v["error_code"], 50003);
        let v = failed(
            ResponseError::MessageTooLarge.code(),
            Some("too big".into()),
        );
        assert_eq!(
            (v["error_code"].as_i64(), v["error"].as_str()),
            (Some(50002), Some("too big"))
        );
    }
}
