//! The schema formats: parsing (what makes a schema invalid, 42201), identity (when two
//! registrations are the same schema) and compatibility between versions. Pure.
//!
//! AVRO is parsed with the `apache-avro` crate, references resolved from the referenced
//! schemas' texts; compatibility follows Avro's schema resolution (the crate's
//! `SchemaCompatibility::can_read`, the writer's schema read with the reader's): a reader
//! field missing from the writer needs a default, writer fields the reader lacks are skipped,
//! int -> long -> float -> double and string <-> bytes promote, a reader enum must hold every
//! writer symbol unless it has a default, every branch of a writer union must be readable.
//! Named types a schema takes from its references are compared by name.
//!
//! JSON (JSON Schema) is checked against its draft's meta-schema and compiled, `$ref`s
//! resolved from the referenced schemas by reference name ([`super::json_schema`]);
//! compatibility follows Confluent's JSON Schema rules ([`super::json_diff`]: content models,
//! required properties, enums, bounds, combined types), BACKWARD comparing the old version
//! with the new one and FORWARD the reverse.
//!
//! PROTOBUF (a `.proto` text or a base64 `FileDescriptorProto`) is compiled with `protox`,
//! imports resolved from the references by their names; compatibility is Confluent's
//! `SchemaDiff` (`protobuf.rs`).

use apache_avro::Schema;
use apache_avro::schema_compatibility::{Compatibility, SchemaCompatibility};
use serde_json::Value;

use super::protobuf;
pub use super::records::Referenced;
use super::{json_diff, json_schema};

/// The formats served (`GET /schemas/types`).
pub const TYPES: [&str; 3] = ["JSON", "PROTOBUF", "AVRO"];

/// The compatibility levels, as Confluent names them.
pub const LEVELS: [&str; 7] = [
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
];

/// A level named in any case, as Confluent's (upper case); None if it is not one.
pub fn level(name: &str) -> Option<&'static str> {
    LEVELS
        .iter()
        .copied()
        .find(|l| l.eq_ignore_ascii_case(name.trim()))
}

/// A schema that parsed, in the form it is stored and compared in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub schema_type: &'static str,
    /// The text stored and served: AVRO and JSON as compact JSON (whitespace dropped, object
    /// keys sorted), PROTOBUF as given. Two registrations are the same schema when this, the
    /// type and the references agree.
    pub canonical: String,
}

/// The format a request names (absent: AVRO); None if it is none Sluice knows.
pub fn schema_type(name: Option<&str>) -> Option<&'static str> {
    match name {
        None => Some("AVRO"),
        Some(n) => TYPES.iter().copied().find(|t| t.eq_ignore_ascii_case(n)),
    }
}

/// Parses `schema` of `schema_type` with the schemas it references (each before the ones
/// that use it); the error says why it is invalid.
pub fn parse(
    schema_type: &'static str,
    schema: &str,
    refs: &[Referenced],
) -> Result<Parsed, String> {
    let canonical = match schema_type {
        "AVRO" => {
            avro(schema, refs)?;
            compact(schema)?
        }
        "JSON" => json_schema::parse(schema, refs)?.to_string(),
        _ => {
            if schema.trim().is_empty() {
                return Err("empty Protobuf schema".into());
            }
            protobuf::compile(schema, refs)?;
            schema.to_string()
        }
    };
    Ok(Parsed {
        schema_type,
        canonical,
    })
}

/// The stored form of a schema text already known to be valid (one read from `_schemas`),
/// without parsing it as its format: what [`Parsed::canonical`] would be.
pub fn normalise(schema_type: &str, schema: &str) -> String {
    match schema_type {
        "PROTOBUF" => schema.to_string(),
        _ => compact(schema).unwrap_or_else(|_| schema.to_string()),
    }
}

fn compact(schema: &str) -> Result<String, String> {
    let v: Value = serde_json::from_str(schema).map_err(|e| format!("not JSON: {e}"))?;
    Ok(v.to_string())
}

fn avro(schema: &str, refs: &[Referenced]) -> Result<Schema, String> {
    if refs.is_empty() {
        return Schema::parse_str(schema).map_err(|e| e.to_string());
    }
    let texts: Vec<&str> = refs.iter().map(|r| r.schema.as_str()).collect();
    Schema::parse_str_with_list(schema, &texts)
        .map(|(s, _)| s)
        .map_err(|e| e.to_string())
}

/// What a compatibility check compares: a schema's type, text and referenced schemas.
pub struct Version<'a> {
    pub version: i32,
    pub schema_type: &'a str,
    pub schema: &'a str,
    pub refs: Vec<Referenced>,
}

/// Why `new` may not follow `old` (ordered oldest first) under `level`: empty when it may.
/// Non-transitive levels look at the last of `old` only.
pub fn incompatibilities(level: &str, new: &Version, old: &[Version]) -> Vec<String> {
    let (backward, forward) = match level.trim_end_matches("_TRANSITIVE") {
        "BACKWARD" => (true, false),
        "FORWARD" => (false, true),
        "FULL" => (true, true),
        _ => return Vec::new(),
    };
    let against: &[Version] = if level.ends_with("_TRANSITIVE") {
        old
    } else {
        &old[old.len().saturating_sub(1)..]
    };
    let mut out = Vec::new();
    for o in against.iter().rev() {
        let mut fail = |kind: &str, description: String| {
            out.push(format!(
                "{{errorType:'{kind}', description:'{description}', oldSchemaVersion: {}}}",
                o.version
            ))
        };
        if o.schema_type != new.schema_type {
            fail(
                "TYPE_MISMATCH",
                format!(
                    "The new schema is of type {}, version {} of type {}",
                    new.schema_type, o.version, o.schema_type
                ),
            );
            continue;
        }
        if new.schema_type == "JSON" {
            for (kind, d) in json_diff::verbose(backward, forward, new, o) {
                fail(kind, d);
            }
            continue;
        }
        if new.schema_type == "PROTOBUF" {
            for (kind, d) in protobuf_incompatibilities(backward, forward, new, o) {
                fail(kind, d);
            }
            continue;
        }
        if new.schema_type != "AVRO" {
            continue;
        }
        let (Ok(n), Ok(old)) = (avro(new.schema, &new.refs), avro(o.schema, &o.refs)) else {
            fail(
                "INVALID_SCHEMA",
                format!("version {} does not parse", o.version),
            );
            continue;
        };
        if backward && let Err(why) = can_read(&old, &n) {
            let d = format!(
                "{why} (the new schema reading data written with version {})",
                o.version
            );
            fail("BACKWARD", d);
        }
        if forward && let Err(why) = can_read(&n, &old) {
            let d = format!(
                "{why} (version {} reading data written with the new schema)",
                o.version
            );
            fail("FORWARD", d);
        }
    }
    out
}

/// Why Protobuf `new` may not follow `old`: the kind and description of each incompatible
/// difference (Confluent diffs the reader's schema as the update of the writer's).
fn protobuf_incompatibilities(
    backward: bool,
    forward: bool,
    new: &Version,
    old: &Version,
) -> Vec<(&'static str, String)> {
    let (Ok(n), Ok(o)) = (
        protobuf::compile(new.schema, &new.refs),
        protobuf::compile(old.schema, &old.refs),
    ) else {
        let d = format!("version {} does not parse", old.version);
        return vec![("INVALID_SCHEMA", d)];
    };
    let mut out = Vec::new();
    let pairs = [(backward, &o, &n), (forward, &n, &o)];
    for (_, original, update) in pairs.into_iter().filter(|p| p.0) {
        for d in protobuf::incompatible(original, update) {
            out.push((d.kind, protobuf::description(&d)));
        }
    }
    out
}

/// Whether data written with `writer` can be read with `reader`; else why not. A partial
/// match (some enum symbols or union branches missing) is a failure, as in Avro's Java
/// `SchemaCompatibility`.
fn can_read(writer: &Schema, reader: &Schema) -> Result<(), String> {
    match SchemaCompatibility::can_read(writer, reader) {
        Ok(Compatibility::Full) => Ok(()),
        Ok(Compatibility::Partial) => Err(
            "Incompatible schemata! The reader lacks some enum symbols or union branches of the writer"
                .into(),
        ),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version<'_> {
        Version {
            version: 1,
            schema_type: "AVRO",
            schema: s,
            refs: Vec::new(),
        }
    }

    /// Whether `new` may follow `old` under `level`.
    fn ok(level: &str, old: &[&str], new: &str) -> bool {
        let old: Vec<Version> = old.iter().map(|s| v(s)).collect();
        let why = incompatibilities(level, &v(new), &old);
        why.is_empty()
    }

    const V1: &str =
        r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}"#;
    const ADD_DEFAULT: &str = r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","default":0}]}"#;
    const ADD_NO_DEFAULT: &str = r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int"}]}"#;
    const EMPTY: &str = r#"{"type":"record","name":"User","fields":[]}"#;

    #[test]
    fn registry_avro_add_field_with_default_is_backward_and_forward() {
        assert!(ok("BACKWARD", &[V1], ADD_DEFAULT));
        assert!(ok("FORWARD", &[V1], ADD_DEFAULT));
        assert!(ok("FULL", &[V1], ADD_DEFAULT));
    }

    #[test]
    fn registry_avro_add_field_without_default_is_forward_only() {
        assert!(!ok("BACKWARD", &[V1], ADD_NO_DEFAULT));
        assert!(ok("FORWARD", &[V1], ADD_NO_DEFAULT));
        assert!(!ok("FULL", &[V1], ADD_NO_DEFAULT));
        assert!(ok("NONE", &[V1], ADD_NO_DEFAULT));
    }

    #[test]
    fn registry_avro_remove_field() {
        // Removing a field: backward always (the reader skips it); forward only when the old
        // reader has a default for it.
        assert!(ok("BACKWARD", &[V1], EMPTY));
        assert!(!ok("FORWARD", &[V1], EMPTY));
        assert!(ok("FORWARD", &[ADD_DEFAULT], V1));
        assert!(ok("FULL", &[ADD_DEFAULT], V1));
    }

    #[test]
    fn registry_avro_type_promotions() {
        let rec = |t: &str| {
            format!(r#"{{"type":"record","name":"R","fields":[{{"name":"f","type":"{t}"}}]}}"#)
        };
        // Backward: the new reader reads the old writer's data.
        for (old, new) in [
            ("int", "long"),
            ("int", "float"),
            ("int", "double"),
            ("long", "double"),
            ("float", "double"),
            ("string", "bytes"),
            ("bytes", "string"),
        ] {
            assert!(ok("BACKWARD", &[&rec(old)], &rec(new)), "{old} -> {new}");
        }
        assert!(!ok("BACKWARD", &[&rec("long")], &rec("int")));
        assert!(!ok("FORWARD", &[&rec("int")], &rec("long")));
        assert!(!ok("BACKWARD", &[&rec("string")], &rec("int")));
    }

    #[test]
    fn registry_avro_enum_symbols() {
        let e = |syms: &str, default: &str| {
            format!(r#"{{"type":"enum","name":"Color","symbols":[{syms}]{default}}}"#)
        };
        let ab = e(r#""A","B""#, "");
        let abc = e(r#""A","B","C""#, "");
        // Adding a symbol: the new reader knows all old ones (backward), old readers do not
        // know the new one (not forward) unless they have a default.
        assert!(ok("BACKWARD", &[&ab], &abc));
        assert!(!ok("FORWARD", &[&ab], &abc));
        assert!(ok(
            "FORWARD",
            &[&e(r#""A","B""#, r#","default":"A""#)],
            &abc
        ));
        // Removing a symbol: the reverse.
        assert!(!ok("BACKWARD", &[&abc], &ab));
        assert!(ok("FORWARD", &[&abc], &ab));
    }

    #[test]
    fn registry_avro_union_changes() {
        let rec = |t: &str| {
            format!(r#"{{"type":"record","name":"R","fields":[{{"name":"f","type":{t}}}]}}"#)
        };
        let s = rec(r#""string""#);
        let ns = rec(r#"["null","string"]"#);
        let nsi = rec(r#"["null","string","int"]"#);
        // Widening a type to a union holding it: backward; the old reader cannot read null.
        assert!(ok("BACKWARD", &[&s], &ns));
        assert!(!ok("FORWARD", &[&s], &ns));
        // Adding a branch: backward, not forward; removing one: forward, not backward.
        assert!(ok("BACKWARD", &[&ns], &nsi));
        assert!(!ok("FORWARD", &[&ns], &nsi));
        assert!(!ok("BACKWARD", &[&nsi], &ns));
        assert!(ok("FORWARD", &[&nsi], &ns));
    }

    #[test]
    fn registry_avro_transitive_levels_check_every_version() {
        // v1 -> v2 (age with default) -> v3 (age without default, name default): each step
        // backward against the last, but v3 cannot read v1's data (no age there).
        let v3 = r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string","default":""},{"name":"age","type":"int"}]}"#;
        assert!(ok("BACKWARD", &[V1, ADD_DEFAULT], v3));
        assert!(!ok("BACKWARD_TRANSITIVE", &[V1, ADD_DEFAULT], v3));
        assert!(ok("FORWARD_TRANSITIVE", &[V1, ADD_DEFAULT], ADD_DEFAULT));
        assert!(!ok("FULL_TRANSITIVE", &[V1, ADD_DEFAULT], v3));
    }

    #[test]
    fn registry_parse_validates_and_normalises() {
        let a = parse(
            "AVRO",
            r#"{ "type" : "record", "name":"R", "fields": [] }"#,
            &[],
        )
        .unwrap();
        let b = parse("AVRO", r#"{"name":"R","type":"record","fields":[]}"#, &[]).unwrap();
        assert_eq!(a, b);
        assert!(parse("AVRO", r#"{"type":"record","name":"R"}"#, &[]).is_err());
        assert!(parse("AVRO", "{not json", &[]).is_err());
        assert!(parse("AVRO", r#""nosuchtype""#, &[]).is_err());
        // A reference makes a named type known.
        let other = Referenced {
            name: "a.Other".into(),
            schema: r#"{"type":"record","name":"Other","namespace":"a","fields":[]}"#.into(),
        };
        let uses = r#"{"type":"record","name":"R","fields":[{"name":"o","type":"a.Other"}]}"#;
        assert!(parse("AVRO", uses, &[]).is_err());
        assert!(parse("AVRO", uses, &[other]).is_ok());
        assert!(parse("JSON", r#"{"type":"object"}"#, &[]).is_ok());
        assert!(parse("JSON", "[1]", &[]).is_err());
        assert!(parse("PROTOBUF", "syntax = \"proto3\"; message M {}", &[]).is_ok());
        assert!(parse("PROTOBUF", " ", &[]).is_err());
        assert_eq!(level("backward_transitive"), Some("BACKWARD_TRANSITIVE"));
        assert_eq!(level("sideways"), None);
        assert_eq!(schema_type(Some("protobuf")), Some("PROTOBUF"));
        assert_eq!(schema_type(Some("XML")), None);
    }
}
