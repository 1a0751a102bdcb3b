//! The records of `_schemas`, in Confluent's format (JSON keys and values), so that a
//! Confluent Schema Registry pointed at the same cluster reads what Sluice wrote and the
//! other way round:
//!
//! | key | value |
//! |---|---|
//! | `{"keytype":"SCHEMA","subject":s,"version":v,"magic":1}` | `{"subject","version","id","schema","schemaType"?,"references"?,"deleted"}`; a tombstone is a hard delete |
//! | `{"keytype":"CONFIG","subject":s or null,"magic":0}` | `{"compatibilityLevel":"BACKWARD"}`; a tombstone removes the subject's level |
//! | `{"keytype":"MODE","subject":s or null,"magic":0}` | `{"mode":"READONLY"}`; a tombstone removes it |
//! | `{"keytype":"DELETE_SUBJECT","subject":s,"magic":0}` | `{"subject":s,"version":v}`: every version up to `v` soft-deleted |
//!
//! `NOOP` keys (Confluent's registry writes them to find the end of the topic) and keys of
//! types not listed are read and ignored. Pure.

use serde_json::{Value, json};

/// A schema's reference to a named type registered under another subject.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Reference {
    pub name: String,
    pub subject: String,
    pub version: i32,
}

impl Reference {
    pub fn to_json(&self) -> Value {
        json!({"name": self.name, "subject": self.subject, "version": self.version})
    }

    /// A reference object of a request or a record; None when a field is missing or of the
    /// wrong type.
    pub fn from_json(v: &Value) -> Option<Reference> {
        Some(Reference {
            name: v.get("name")?.as_str()?.to_string(),
            subject: v.get("subject")?.as_str()?.to_string(),
            version: i32::try_from(v.get("version")?.as_i64()?).ok()?,
        })
    }
}

/// A referenced schema as parsing sees it: the name it is imported by and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Referenced {
    pub name: String,
    pub schema: String,
}

/// One version of a subject as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaValue {
    pub subject: String,
    pub version: i32,
    pub id: i32,
    pub schema: String,
    /// `AVRO`, `JSON` or `PROTOBUF`.
    pub schema_type: String,
    pub references: Vec<Reference>,
    pub deleted: bool,
}

/// One record of `_schemas`, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A version registered or soft-deleted (`Some`), or hard-deleted (`None`).
    Schema {
        subject: String,
        version: i32,
        value: Option<SchemaValue>,
    },
    /// A compatibility level set (`Some`) or removed; `subject` None is the global one.
    Config {
        subject: Option<String>,
        level: Option<String>,
    },
    /// A mode set (`Some`) or removed; `subject` None is the global one.
    Mode {
        subject: Option<String>,
        mode: Option<String>,
    },
    /// Every version of `subject` up to `version` soft-deleted.
    DeleteSubject { subject: String, version: i32 },
}

/// A key's JSON with its fields in the order Confluent's registry writes them (`keytype`,
/// `subject`, `version`, `magic`): compaction and tombstones match keys by their bytes.
fn key(keytype: &str, subject: Option<&str>, version: Option<i32>, magic: u8) -> Vec<u8> {
    let subject = serde_json::to_string(&subject).unwrap_or_else(|_| "null".into());
    let version = version
        .map(|v| format!(",\"version\":{v}"))
        .unwrap_or_default();
    format!("{{\"keytype\":\"{keytype}\",\"subject\":{subject}{version},\"magic\":{magic}}}")
        .into_bytes()
}

/// The key and value bytes of `r` (a None value is a tombstone).
pub fn encode(r: &Record) -> (Vec<u8>, Option<Vec<u8>>) {
    let (key, value) = match r {
        Record::Schema {
            subject,
            version,
            value,
        } => (
            key("SCHEMA", Some(subject), Some(*version), 1),
            value.as_ref().map(|v| {
                let mut o = json!({
                    "subject": v.subject,
                    "version": v.version,
                    "id": v.id,
                    "schema": v.schema,
                    "deleted": v.deleted,
                });
                if v.schema_type != "AVRO" {
                    o["schemaType"] = json!(v.schema_type);
                }
                if !v.references.is_empty() {
                    o["references"] =
                        Value::Array(v.references.iter().map(Reference::to_json).collect());
                }
                o
            }),
        ),
        Record::Config { subject, level } => (
            key("CONFIG", subject.as_deref(), None, 0),
            level.as_ref().map(|l| json!({"compatibilityLevel": l})),
        ),
        Record::Mode { subject, mode } => (
            key("MODE", subject.as_deref(), None, 0),
            mode.as_ref().map(|m| json!({"mode": m})),
        ),
        Record::DeleteSubject { subject, version } => (
            key("DELETE_SUBJECT", Some(subject), None, 0),
            Some(json!({"subject": subject, "version": version})),
        ),
    };
    (key, value.map(|v| v.to_string().into_bytes()))
}

/// The record of a key and value read from `_schemas`: `Ok(None)` for keys to ignore (NOOP,
/// unknown types), `Err` for what does not parse.
pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Option<Record>, String> {
    let k: Value = serde_json::from_slice(key).map_err(|e| format!("key: {e}"))?;
    let v: Option<Value> = match value {
        Some(b) => Some(serde_json::from_slice(b).map_err(|e| format!("value: {e}"))?),
        None => None,
    };
    let v = v.filter(|v| !v.is_null());
    let subject = || k.get("subject").and_then(Value::as_str).map(str::to_string);
    let text = |v: &Value, f: &str| v.get(f).and_then(Value::as_str).map(str::to_string);
    let int = |v: &Value, f: &str| {
        v.get(f)
            .and_then(Value::as_i64)
            .and_then(|n| i32::try_from(n).ok())
    };
    let keytype = k.get("keytype").and_then(Value::as_str).unwrap_or("");
    Ok(Some(match keytype {
        "SCHEMA" => {
            let subject = subject().ok_or("SCHEMA key without a subject")?;
            let version = int(&k, "version").ok_or("SCHEMA key without a version")?;
            let value = match v {
                None => None,
                Some(v) => Some(SchemaValue {
                    subject: subject.clone(),
                    version,
                    id: int(&v, "id").ok_or("SCHEMA value without an id")?,
                    schema: text(&v, "schema").ok_or("SCHEMA value without a schema")?,
                    schema_type: text(&v, "schemaType").unwrap_or_else(|| "AVRO".into()),
                    references: v
                        .get("references")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(Reference::from_json).collect())
                        .unwrap_or_default(),
                    deleted: v.get("deleted").and_then(Value::as_bool).unwrap_or(false),
                }),
            };
            Record::Schema {
                subject,
                version,
                value,
            }
        }
        "CONFIG" => Record::Config {
            subject: subject(),
            level: v.and_then(|v| text(&v, "compatibilityLevel")),
        },
        "MODE" => Record::Mode {
            subject: subject(),
            mode: v.and_then(|v| text(&v, "mode")),
        },
        "DELETE_SUBJECT" => {
            let subject = subject().ok_or("DELETE_SUBJECT key without a subject")?;
            match v.and_then(|v| int(&v, "version")) {
                Some(version) => Record::DeleteSubject { subject, version },
                None => return Ok(None),
            }
        }
        _ => return Ok(None),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_records_round_trip_in_confluents_format() {
        let schema = Record::Schema {
            subject: "orders-value".into(),
            version: 2,
            value: Some(SchemaValue {
                subject: "orders-value".into(),
                version: 2,
                id: 7,
                schema: r#"{"type":"string"}"#.into(),
                schema_type: "AVRO".into(),
                references: vec![Reference {
                    name: "a.B".into(),
                    subject: "b".into(),
                    version: 1,
                }],
                deleted: false,
            }),
        };
        let (k, v) = encode(&schema);
        assert_eq!(
            k,
            br#"{"keytype":"SCHEMA","subject":"orders-value","version":2,"magic":1}"#
        );
        let global = Record::Config {
            subject: None,
            level: None,
        };
        assert_eq!(
            encode(&global).0,
            br#"{"keytype":"CONFIG","subject":null,"magic":0}"#
        );
        let value: Value = serde_json::from_slice(v.as_ref().unwrap()).unwrap();
        assert_eq!(value["id"], 7);
        assert!(value.get("schemaType").is_none());
        assert_eq!(decode(&k, v.as_deref()).unwrap(), Some(schema));

        for r in [
            Record::Config {
                subject: None,
                level: Some("FULL".into()),
            },
            Record::Config {
                subject: Some("s".into()),
                level: None,
            },
            Record::Mode {
                subject: None,
                mode: Some("READONLY".into()),
            },
            Record::DeleteSubject {
                subject: "s".into(),
                version: 3,
            },
        ] {
            let (k, v) = encode(&r);
            assert_eq!(decode(&k, v.as_deref()).unwrap(), Some(r));
        }
        let tomb = Record::Schema {
            subject: "s".into(),
            version: 1,
            value: None,
        };
        let (k, v) = encode(&tomb);
        assert!(v.is_none());
        assert_eq!(decode(&k, None).unwrap(), Some(tomb));
    }

    #[test]
    fn registry_records_of_other_writers_are_read_or_skipped() {
        // What Confluent's registry writes: schemaType for other formats, NOOP keys.
        let v = br#"{"subject":"p","version":1,"id":3,"schemaType":"PROTOBUF","schema":"syntax = \"proto3\";","deleted":true}"#;
        let k = br#"{"keytype":"SCHEMA","subject":"p","version":1,"magic":1}"#;
        let Some(Record::Schema { value: Some(s), .. }) = decode(k, Some(v)).unwrap() else {
            panic!("not a schema record");
        };
        assert_eq!(
            (s.schema_type.as_str(), s.deleted, s.id),
            ("PROTOBUF", true, 3)
        );
        assert_eq!(
            decode(br#"{"keytype":"NOOP","magic":0}"#, None).unwrap(),
            None
        );
        assert!(decode(b"not json", None).is_err());
        assert!(decode(br#"{"keytype":"SCHEMA","magic":1}"#, None).is_err());
    }
}
