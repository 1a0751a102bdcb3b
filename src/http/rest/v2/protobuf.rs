//! The schema-based embedded format `protobuf` (`application/vnd.kafka.protobuf.v2+json`):
//! keys and values are JSON in proto3's JSON mapping, converted to the first message of a
//! Protobuf schema of the built-in Schema Registry and written in Confluent's wire format
//! (magic byte 0, the schema id, the message indexes, the message's bytes), as
//! confluent-kafka's ProtobufSerializer writes them. The first message's indexes are the
//! single byte 0, as Confluent's serializers write them.
//!
//! The schemas are found as for `avro` ([`super::schemas::for_produce`]: `key_schema` /
//! `value_schema`, a `.proto` text, found or registered under `<topic>-key` /
//! `<topic>-value`, or `key_schema_id` / `value_schema_id`), and so are the errors: a key or
//! value that does not convert to the message is 400 (`Bad Request: Failed to convert JSON to
//! Protobuf: ...`). A consumer instance reading in this format gets each key and value as
//! the message its indexes name, in proto3's JSON mapping.

use prost_reflect::prost::Message as _;
use prost_reflect::{DynamicMessage, FileDescriptor, MessageDescriptor};
use serde_json::Value;

use super::schemas::{SchemaFormat, bad_request};
use crate::http::rest::RestError;
use crate::registry::protobuf;
use crate::registry::records::SchemaValue;
use crate::registry::store::Store;
use crate::registry::wire;

/// The file of a stored version, compiled with the schemas it references.
pub(super) fn file_of(st: &Store, v: &SchemaValue) -> Result<FileDescriptor, String> {
    if v.schema_type != "PROTOBUF" {
        return Err(format!(
            "schema {} is of type {}, not PROTOBUF",
            v.id, v.schema_type
        ));
    }
    let refs = st.resolve(&v.references).map_err(|e| e.message)?;
    protobuf::compile(&v.schema, &refs)
}

/// The message records are written as: the file's first, as kafka-rest takes it.
fn first(file: FileDescriptor) -> Result<MessageDescriptor, String> {
    file.messages()
        .next()
        .ok_or_else(|| "the schema defines no message".to_string())
}

impl SchemaFormat for MessageDescriptor {
    const TYPE: &'static str = "PROTOBUF";

    fn of(st: &Store, v: &SchemaValue) -> Result<MessageDescriptor, String> {
        file_of(st, v).and_then(first)
    }

    fn parse(text: &str) -> Result<MessageDescriptor, String> {
        first(protobuf::compile(text, &[])?)
    }

    /// The message indexes of the first message (the single byte 0), then the message.
    fn data(&self, v: &Value) -> Result<Vec<u8>, RestError> {
        let refused = |e: String| bad_request(format!("Failed to convert JSON to Protobuf: {e}"));
        let message =
            DynamicMessage::deserialize(self.clone(), v).map_err(|e| refused(e.to_string()))?;
        let mut data = vec![0u8];
        message
            .encode(&mut data)
            .map_err(|e| refused(e.to_string()))?;
        Ok(data)
    }
}

/// A key or value in Confluent's wire format holding a Protobuf message, decoded through
/// the file its schema id names (`file`): the message as JSON.
pub(super) fn decode(
    bytes: &[u8],
    file: impl FnOnce(i32) -> Result<FileDescriptor, String>,
) -> Result<Value, String> {
    let (id, data) = wire::unframe(bytes).ok_or("Unknown magic byte!")?;
    protobuf::decode(&file(id)?, data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::rest::v2::schemas::{Part, Writer, encode};
    use serde_json::json;

    const PROTO: &str = r#"syntax = "proto3";
package t;
message Order { string id = 1; int64 amount = 2; repeated string tags = 3; }
message Other { bool b = 1; }
"#;

    #[test]
    fn rest_v2_protobuf_encode_writes_the_first_message_and_decodes_back() {
        let w = Writer {
            id: 5,
            schema: MessageDescriptor::parse(PROTO).unwrap(),
        };
        assert_eq!(w.schema.full_name(), "t.Order");
        let v = json!({"id": "a1", "amount": "12", "tags": ["x", "y"]});
        let b = encode(Part::Value, Some(&w), &v).unwrap().unwrap();
        // magic byte, id 5, message indexes [0] as one byte, then the message
        assert_eq!(&b[..6], &[0, 0, 0, 0, 5, 0]);
        let file = protobuf::compile(PROTO, &[]).unwrap();
        let back = decode(&b, |id| {
            assert_eq!(id, 5);
            Ok(file.clone())
        })
        .unwrap();
        assert_eq!(back, v);
        let e = encode(Part::Value, Some(&w), &json!({"amount": "many"})).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message.contains("Failed to convert JSON to Protobuf"),
            "{}",
            e.message
        );
        let e = encode(Part::Value, Some(&w), &json!({"nope": 1})).unwrap_err();
        assert_eq!(e.code, 400);
        let none: Option<&Writer<MessageDescriptor>> = None;
        assert_eq!(encode(Part::Value, none, &Value::Null).unwrap(), None);
        assert_eq!(
            encode(Part::Key, none, &json!("k")).unwrap_err().code,
            42201
        );
        assert!(decode(b"{}", |_| Ok(file.clone())).is_err());
        assert!(MessageDescriptor::parse("syntax = \"proto3\";").is_err());
    }
}
