//! The schema-based embedded format `jsonschema` (`application/vnd.kafka.jsonschema.v2+json`):
//! keys and values are plain JSON, checked against a JSON Schema of the built-in Schema
//! Registry and written in Confluent's wire format (magic byte 0, the schema id, the JSON
//! text), as confluent-kafka's JSONSerializer writes them.
//!
//! The schemas are found as for `avro` ([`super::schemas::for_produce`]: `key_schema` /
//! `value_schema` found or registered under `<topic>-key` / `<topic>-value`, or
//! `key_schema_id` / `value_schema_id`), and so are the errors: a key or value the schema
//! does not accept is 400 (`Bad Request: Failed to convert JSON using JSON Schema: ...` and
//! the validator's reasons), as kafka-rest's converter validates it. A consumer instance reading in this format gets each key and value as
//! the JSON it holds, its frame taken off.

use jsonschema::Validator;
use serde_json::Value;

use super::schemas::{SchemaFormat, bad_request};
use crate::http::rest::RestError;
use crate::registry::json_schema;
use crate::registry::records::SchemaValue;
use crate::registry::store::Store;
use crate::registry::wire;

impl SchemaFormat for Validator {
    const TYPE: &'static str = "JSON";

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

    /// The JSON text, once the schema accepts it.
    fn data(&self, v: &Value) -> Result<Vec<u8>, RestError> {
        if let Some(why) = json_schema::misfit(self, v) {
            return Err(bad_request(format!(
                "Failed to convert JSON using JSON Schema: {why}"
            )));
        }
        Ok(v.to_string().into_bytes())
    }
}

/// A key or value in Confluent's wire format holding JSON: the JSON.
pub(super) fn decode(bytes: &[u8]) -> Result<Value, String> {
    let (_, json) = wire::unframe(bytes).ok_or("Unknown magic byte!")?;
    serde_json::from_slice(json).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::rest::v2::schemas::{Part, Writer, encode};
    use serde_json::json;

    #[test]
    fn rest_v2_jsonschema_encode_checks_and_frames() {
        let w = Writer {
            id: 9,
            schema: Validator::parse(r#"{"type":"object","properties":{"n":{"type":"integer"}}}"#)
                .unwrap(),
        };
        let b = encode(Part::Value, Some(&w), &json!({"n": 3}))
            .unwrap()
            .unwrap();
        assert_eq!(&b[..5], &[0, 0, 0, 0, 9]);
        assert_eq!(decode(&b).unwrap(), json!({"n": 3}));
        let e = encode(Part::Value, Some(&w), &json!({"n": "x"})).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.contains("/n"), "{}", e.message);
        let none: Option<&Writer<Validator>> = None;
        assert_eq!(encode(Part::Value, none, &Value::Null).unwrap(), None);
        assert_eq!(encode(Part::Key, none, &json!(1)).unwrap_err().code, 42201);
        assert!(decode(b"{}").is_err());
    }
}
