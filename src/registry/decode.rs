//! Keys and values in Confluent's wire format ([`super::wire`]) shown as JSON through the
//! registry's schemas, for readers that display records (the console's message browser).
//! Avro through `avro_json`, JSON Schema data as its JSON, Protobuf through `protobuf::decode`
//! (the message the indexes name, in proto3's JSON mapping). Pure: the schemas come from a
//! [`Store`], each parsed once per [`Shown`].
//!
//! Bytes that are not in the wire format, or name an id the registry does not hold, are not
//! schema data (a plain text or JSON value may begin with a zero byte): they get no answer
//! rather than an error. Bytes that name a schema but do not decode with it get the reason.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::avro_json::AvroSchema;
use super::protobuf;
use super::store::Store;
use super::wire;

/// How one schema id's data is decoded.
enum Reader {
    Avro(AvroSchema),
    Json,
    Protobuf(prost_reflect::FileDescriptor),
    /// A format this reader cannot decode; the reason.
    Unreadable(String),
}

/// One id's schema: what it is and how its data reads.
struct Known {
    schema_type: String,
    subject: String,
    version: i32,
    reader: Reader,
}

/// Decodes the keys and values of one display, each schema looked up and parsed once.
#[derive(Default)]
pub struct Shown {
    schemas: HashMap<i32, Option<Arc<Known>>>,
}

impl Shown {
    pub fn new() -> Shown {
        Shown::default()
    }

    /// `bytes` decoded through the schema they name: `{"id", "type", "subject", "version"}`
    /// and either `"json"` (the data, pretty-printed) or `"error"`. None when the bytes name
    /// no schema the registry holds.
    pub fn show(&mut self, st: &Store, bytes: &[u8]) -> Option<Value> {
        let (id, data) = wire::unframe(bytes)?;
        let known = self
            .schemas
            .entry(id)
            .or_insert_with(|| known(st, id).map(Arc::new))
            .clone()?;
        let decoded = match &known.reader {
            Reader::Avro(schema) => schema.decode(data),
            Reader::Json => serde_json::from_slice::<Value>(data).map_err(|e| e.to_string()),
            Reader::Protobuf(file) => protobuf::decode(file, data),
            Reader::Unreadable(why) => Err(why.clone()),
        };
        let mut out = json!({
            "id": id,
            "type": known.schema_type,
            "subject": known.subject,
            "version": known.version,
        });
        match decoded {
            Ok(v) => out["json"] = json!(serde_json::to_string_pretty(&v).unwrap_or_default()),
            Err(e) => out["error"] = json!(e),
        }
        Some(out)
    }
}

fn known(st: &Store, id: i32) -> Option<Known> {
    let v = st.by_id(id).ok()?;
    // The version that registered it first (a soft-deleted one still names it).
    let (subject, version) = st
        .id_versions(id, true)
        .ok()
        .and_then(|vs| vs.into_iter().next())
        .unwrap_or_else(|| (v.subject.clone(), v.version));
    let reader = match v.schema_type.as_str() {
        "AVRO" => match AvroSchema::of(st, v) {
            Ok(s) => Reader::Avro(s),
            Err(e) => Reader::Unreadable(format!("schema {id} does not parse: {e}")),
        },
        "JSON" => Reader::Json,
        "PROTOBUF" => match st
            .resolve(&v.references)
            .map_err(|e| e.message)
            .and_then(|refs| protobuf::compile(&v.schema, &refs))
        {
            Ok(file) => Reader::Protobuf(file),
            Err(e) => Reader::Unreadable(format!("schema {id} does not compile: {e}")),
        },
        other => Reader::Unreadable(format!("{other} data is shown as bytes only")),
    };
    Some(Known {
        schema_type: v.schema_type.clone(),
        subject,
        version,
        reader,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::records::{Record, SchemaValue};

    fn store_with(id: i32, subject: &str, schema_type: &str, schema: &str) -> Store {
        let mut st = Store::default();
        st.apply(Record::Schema {
            subject: subject.into(),
            version: 1,
            value: Some(SchemaValue {
                subject: subject.into(),
                version: 1,
                id,
                schema: schema.into(),
                schema_type: schema_type.into(),
                references: Vec::new(),
                deleted: false,
            }),
        });
        st
    }

    #[test]
    fn registry_shown_decodes_avro_and_json_and_passes_over_other_bytes() {
        let avro = r#"{"type":"record","name":"U","fields":[{"name":"n","type":"long"}]}"#;
        let st = store_with(3, "t-value", "AVRO", avro);
        let mut shown = Shown::new();
        // 21 as a zigzag varint is 42.
        let v = shown.show(&st, &wire::frame(3, &[42])).unwrap();
        assert_eq!(v["subject"], "t-value");
        assert_eq!(v["type"], "AVRO");
        assert_eq!(v["json"], "{\n  \"n\": 21\n}");
        // Not in the wire format, or an id the registry does not hold: not schema data.
        assert_eq!(shown.show(&st, b"plain text"), None);
        assert_eq!(shown.show(&st, &wire::frame(9, b"x")), None);
        // Named but not decodable: the reason, not a failure.
        let bad = shown.show(&st, &wire::frame(3, &[])).unwrap();
        assert!(bad["error"].is_string(), "{bad}");

        let st = store_with(4, "j-value", "JSON", r#"{"type":"object"}"#);
        let v = shown.show(&st, &wire::frame(4, br#"{"a":1}"#)).unwrap();
        assert_eq!(v["json"], "{\n  \"a\": 1\n}");

        // Protobuf: message indexes [1] (the second message, zigzag 2), then field 1 = 150.
        let proto = "syntax = \"proto3\"; message A { int32 x = 1; } message B { int32 n = 1; }";
        let st = store_with(5, "p-value", "PROTOBUF", proto);
        let data = [&[0x02, 0x02][..], &[0x08, 0x96, 0x01]].concat();
        let v = shown.show(&st, &wire::frame(5, &data)).unwrap();
        assert_eq!(v["json"], "{\n  \"n\": 150\n}", "{v}");
        // A count of 0: the first message.
        let data = [&[0x00][..], &[0x08, 0x01]].concat();
        let v = shown.show(&st, &wire::frame(5, &data)).unwrap();
        assert_eq!(v["json"], "{\n  \"x\": 1\n}", "{v}");
    }
}
