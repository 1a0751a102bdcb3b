//! The schema-based embedded formats (`avro` here, `jsonschema` and `protobuf` beside it,
//! each a [`SchemaFormat`]): the schemas of a produce request, found or registered in the
//! built-in Schema Registry, keys and values written through them in Confluent's wire
//! format, and the records a consumer instance reads decoded through the schemas their ids
//! name.
//!
//! As kafka-rest with its default TopicNameStrategy: a schema text a request gives
//! (`key_schema`, `value_schema`) is looked up under the subject `<topic>-key` or
//! `<topic>-value` and registered there when it is not (forwarded to the registry's writer
//! in a cluster, so compatibility rules apply); an id (`key_schema_id`, `value_schema_id`)
//! must name a schema registered under that subject. Its errors: a registry that refuses,
//! or knows no such schema, is 422 42207 (`Error serializing message. ...`, the registry's
//! message and code at the end); a schema text that does not parse and a key or value that
//! does not fit its schema are 400 (`Bad Request: ...`); a non-null key without a key schema
//! is 42201, a value without a value schema 42202. A null key or value without a schema is
//! a null in Kafka; with one, it is written through it (a schema that admits null).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use prost_reflect::FileDescriptor;
use serde_json::Value;

use super::unprocessable;
use crate::http::HttpState;
use crate::http::rest::RestError;
use crate::registry::avro_json::AvroSchema;
use crate::registry::records::SchemaValue;
use crate::registry::store::{Store, Submitted};
use crate::registry::{Error, Registry, wire};

/// Which half of a record a schema is for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Part {
    Key,
    Value,
}

impl Part {
    /// The subject TopicNameStrategy registers the part's schema under.
    fn subject(self, topic: &str) -> String {
        match self {
            Part::Key => format!("{topic}-key"),
            Part::Value => format!("{topic}-value"),
        }
    }

    /// kafka-rest's answer to a non-null key or value without a schema.
    fn schema_missing(self) -> RestError {
        match self {
            Part::Key => unprocessable(
                42201,
                "Request includes keys but does not include key schema",
            ),
            Part::Value => unprocessable(
                42202,
                "Request includes values but does not include value schema",
            ),
        }
    }
}

/// A schema-based embedded format: its schemas as the registry holds them and as a request
/// gives them, and a key or value written through one.
pub(super) trait SchemaFormat: Sized {
    /// The registry's `schemaType`.
    const TYPE: &'static str;
    /// The schema of a stored version, its references resolved from `st`.
    fn of(st: &Store, v: &SchemaValue) -> Result<Self, String>;
    /// The schema of a text a request gives.
    fn parse(text: &str) -> Result<Self, String>;
    /// What follows the schema id in the wire format for `v`; kafka-rest's 400 when `v` does
    /// not fit.
    fn data(&self, v: &Value) -> Result<Vec<u8>, RestError>;
}

impl SchemaFormat for AvroSchema {
    const TYPE: &'static str = "AVRO";

    fn of(st: &Store, v: &SchemaValue) -> Result<Self, String> {
        AvroSchema::of(st, v)
    }

    fn parse(text: &str) -> Result<Self, String> {
        AvroSchema::parse(text, &[])
    }

    fn data(&self, v: &Value) -> Result<Vec<u8>, RestError> {
        self.encode(v).map_err(bad_request)
    }
}

/// A schema a produce request writes with: its registry id and the parsed schema.
pub(super) struct Writer<F> {
    pub id: i32,
    pub schema: F,
}

/// kafka-rest's 42207 for a registry that refused: `what` and the registry's error.
fn serialization_error(what: String, e: Error) -> RestError {
    unprocessable(
        42207,
        format!(
            "Error serializing message. {what}\n{}; error code: {}",
            e.message, e.code
        ),
    )
}

/// kafka-rest's 400.
pub(super) fn bad_request(detail: String) -> RestError {
    RestError::bad_request(format!("Bad Request: {detail}"))
}

/// The schema of a produce request's keys or values in format `F`: by `id`, or the `text`
/// given, found or registered under the part's subject; None when the request gives neither.
pub(super) async fn for_produce<F: SchemaFormat>(
    s: &HttpState,
    topic: &str,
    part: Part,
    text: Option<&str>,
    id: Option<i32>,
) -> Result<Option<Writer<F>>, RestError> {
    let schema_type = F::TYPE;
    let subject = part.subject(topic);
    let registry =
        |what: String| crate::http::registry::registry(s).map_err(|e| serialization_error(what, e));
    if let Some(id) = id {
        let what = format!("Error when fetching schema by id. schemaId = {id}");
        let r = registry(what.clone())?;
        let found = r.read(|st| {
            let v = st.by_id(id).map_err(|e| serialization_error(what, e))?;
            let same = Submitted {
                schema: v.schema.clone(),
                schema_type: Some(v.schema_type.clone()),
                references: v.references.clone(),
                ..Submitted::default()
            };
            st.lookup(&subject, &same, false).map_err(|e| {
                let what = format!(
                    "Error when fetching schema version. subject = {subject}, schema = {}",
                    v.schema
                );
                serialization_error(what, e)
            })?;
            F::of(st, v).map_err(|why| {
                bad_request(format!(
                    "Schema {id} is not a usable {schema_type} schema: {why}"
                ))
            })
        })?;
        return Ok(Some(Writer { id, schema: found }));
    }
    let Some(text) = text else { return Ok(None) };
    let schema = F::parse(text).map_err(|why| {
        bad_request(format!(
            "Error parsing schema with format = {schema_type} ({why})"
        ))
    })?;
    let what = format!(
        "Error when registering schema. format = {schema_type}, subject = {subject}, schema = {text}"
    );
    let r = registry(what.clone())?;
    let given = Submitted {
        schema: text.to_string(),
        schema_type: Some(schema_type.into()),
        ..Submitted::default()
    };
    let known = r.read(|st| st.lookup(&subject, &given, false).map(|v| v.id).ok());
    let id = match known {
        Some(id) => id,
        None => crate::http::registry::register_schema(s, &subject, schema_type, text)
            .await
            .map_err(|e| serialization_error(what, e))?,
    };
    Ok(Some(Writer { id, schema }))
}

/// The bytes of a produce request's key or value under `schema`, framed with its id: None
/// for a null without a schema (a null in Kafka), kafka-rest's 42201 or 42202 for a non-null
/// without one.
pub(super) fn encode<F: SchemaFormat>(
    part: Part,
    schema: Option<&Writer<F>>,
    v: &Value,
) -> Result<Option<Bytes>, RestError> {
    let w = match (schema, v) {
        (Some(w), _) => w,
        (None, Value::Null) => return Ok(None),
        (None, _) => return Err(part.schema_missing()),
    };
    Ok(Some(Bytes::from(wire::frame(w.id, &w.schema.data(v)?))))
}

type Lookup<'a, T> = Box<dyn Fn(i32) -> Result<T, String> + Send + Sync + 'a>;

/// Decodes the keys and values of one read, each schema looked up and parsed once.
pub(super) struct Decoder<'a> {
    lookup: Lookup<'a, AvroSchema>,
    parsed: HashMap<i32, Result<Arc<AvroSchema>, String>>,
    files: Lookup<'a, FileDescriptor>,
    compiled: HashMap<i32, Result<FileDescriptor, String>>,
}

impl<'a> Decoder<'a> {
    /// A decoder reading schemas from `registry`.
    pub fn new(registry: &'a Registry) -> Decoder<'a> {
        let mut d = Decoder::with(move |id| {
            registry.read(|st| {
                let v = st.by_id(id).map_err(|e| e.message)?;
                AvroSchema::of(st, v)
            })
        });
        d.files = Box::new(move |id| {
            registry.read(|st| {
                let v = st.by_id(id).map_err(|e| e.message)?;
                super::protobuf::file_of(st, v)
            })
        });
        d
    }

    /// A decoder reading the schema of an id with `lookup`.
    pub fn with(
        lookup: impl Fn(i32) -> Result<AvroSchema, String> + Send + Sync + 'a,
    ) -> Decoder<'a> {
        Decoder {
            lookup: Box::new(lookup),
            parsed: HashMap::new(),
            files: Box::new(|id| Err(format!("Schema {id} not found"))),
            compiled: HashMap::new(),
        }
    }

    /// A key or value in Confluent's wire format holding a Protobuf message, as JSON.
    pub fn protobuf(&mut self, bytes: &[u8]) -> Result<Value, String> {
        let (files, compiled) = (&self.files, &mut self.compiled);
        super::protobuf::decode(bytes, |id| {
            compiled.entry(id).or_insert_with(|| files(id)).clone()
        })
    }

    /// A key or value in Confluent's wire format, in Avro's JSON encoding.
    pub fn avro(&mut self, bytes: &[u8]) -> Result<Value, String> {
        let (id, datum) = wire::unframe(bytes).ok_or("Unknown magic byte!")?;
        let lookup = &self.lookup;
        let schema = self
            .parsed
            .entry(id)
            .or_insert_with(|| lookup(id).map(Arc::new))
            .clone()?;
        schema.decode(datum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_and_values_are_framed_with_their_schema_id() {
        let w = Writer {
            id: 7,
            schema: AvroSchema::parse(r#""long""#, &[]).unwrap(),
        };
        let b = encode(Part::Value, Some(&w), &json!(21)).unwrap().unwrap();
        assert_eq!(&b[..], b"\x00\x00\x00\x00\x07\x2a");
        let none: Option<&Writer<AvroSchema>> = None;
        assert_eq!(encode(Part::Key, none, &Value::Null).unwrap(), None);
        assert_eq!(encode(Part::Key, none, &json!(1)).unwrap_err().code, 42201);
        assert_eq!(
            encode(Part::Value, none, &json!(1)).unwrap_err().code,
            42202
        );
        let e = encode(Part::Value, Some(&w), &json!("x")).unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (400, 400));
        // null under a schema that does not admit it
        assert_eq!(
            encode(Part::Value, Some(&w), &Value::Null)
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn registry_refusals_are_serialization_errors() {
        let e = serialization_error(
            "Error when fetching schema by id. schemaId = 9".into(),
            Error::schema_not_found(Some(9)),
        );
        assert_eq!((e.status.as_u16(), e.code), (422, 42207));
        assert!(
            e.message
                .starts_with("Error serializing message. Error when fetching")
        );
        assert!(
            e.message.ends_with("Schema 9 not found; error code: 40403"),
            "{}",
            e.message
        );
    }
}
