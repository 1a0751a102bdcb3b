//! The schema-based embedded format `jsonschema` (`application/vnd.kafka.jsonschema.v2+json`):
//! keys and values are plain JSON, checked against a JSON Schema of the built-in Schema
//! Registry and written in Confluent's wire format (magic byte 0, the schema id, the JSON
//! text), as confluent-kafka's JSONSerializer writes them.
//!
//! The schemas are found as for `avro` ([`super::schemas::registered`]: `key_schema` /
//! `value_schema` found or registered under `<topic>-key` / `<topic>-value`, or
//! `key_schema_id` / `value_schema_id`), and so are the errors: a key or value the schema
//! does not accept is 400 (`Bad Request: Failed to convert JSON using JSON Schema: ...` and
//! the validator's reasons), as kafka-rest's converter validates it. A consumer instance reading in this format gets each key and value as
//! the JSON it holds, its frame taken off.

use bytes::Bytes;
use jsonschema::Validator;
use serde_json::Value;

use super::schemas::{Part, bad_request, needed, registered};
use crate::http::HttpState;
use crate::http::rest::RestError;
use crate::registry::json_schema;
use crate::registry::records::SchemaValue;
use crate::registry::store::Store;
use crate::registry::wire;

/// A JSON Schema a produce request writes with: its registry id and its validator.
pub(super) struct JsonWriteSchema {
    pub id: i32,
    validator: Validator,
}

/// The validator of a stored version, its references resolved from `st`.
fn of(st: &Store, v: &SchemaValue) -> Result<Validator, String> {
    if v.schema_type != "JSON" {
        return Err(format!(
            "schema {} is of type {}, not JSON",
            v.id, v.schema_type
        ));
    }
    let refs = st.resolve(&v.references).map_err(|e| e.message)?;
    let schema: Value = serde_json::from_str(&v.schema).map_err(|e| e.to_string())?;
    json_schema::validator(&schema, &refs)
}

fn parse(text: &str) -> Result<Validator, String> {
    let schema: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    json_schema::validator(&schema, &[])
}

/// The JSON Schema of a produce request's keys or values; None when the request names none.
pub(super) async fn for_produce(
    s: &HttpState,
    topic: &str,
    part: Part,
    text: Option<&str>,
    id: Option<i32>,
) -> Result<Option<JsonWriteSchema>, RestError> {
    let found = registered(s, topic, part, "JSON", text, id, of, parse).await?;
    Ok(found.map(|(id, validator)| JsonWriteSchema { id, validator }))
}

/// The bytes of a produce request's key or value under `schema`, framed with its id.
pub(super) fn encode(
    part: Part,
    schema: Option<&JsonWriteSchema>,
    v: &Value,
) -> Result<Option<Bytes>, RestError> {
    let Some(w) = needed(part, schema, v)? else {
        return Ok(None);
    };
    if let Some(why) = json_schema::misfit(&w.validator, v) {
        return Err(bad_request(format!(
            "Failed to convert JSON using JSON Schema: {why}"
        )));
    }
    Ok(Some(Bytes::from(wire::frame(
        w.id,
        v.to_string().as_bytes(),
    ))))
}

/// A key or value in Confluent's wire format holding JSON: the JSON.
pub(super) fn decode(bytes: &[u8]) -> Result<Value, String> {
    let (_, json) = wire::unframe(bytes).ok_or("Unknown magic byte!")?;
    serde_json::from_slice(json).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rest_v2_jsonschema_encode_checks_and_frames() {
        let w = JsonWriteSchema {
            id: 9,
            validator: parse(r#"{"type":"object","properties":{"n":{"type":"integer"}}}"#).unwrap(),
        };
        let b = encode(Part::Value, Some(&w), &json!({"n": 3}))
            .unwrap()
            .unwrap();
        assert_eq!(&b[..5], &[0, 0, 0, 0, 9]);
        assert_eq!(decode(&b).unwrap(), json!({"n": 3}));
        let e = encode(Part::Value, Some(&w), &json!({"n": "x"})).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.contains("/n"), "{}", e.message);
        assert_eq!(encode(Part::Value, None, &Value::Null).unwrap(), None);
        assert_eq!(encode(Part::Key, None, &json!(1)).unwrap_err().code, 42201);
        assert!(decode(b"{}").is_err());
    }
}
