//! JSON Schema as the registry serves it: what makes a schema valid (42201 otherwise), and the
//! validator that records are checked with. Pure.
//!
//! A schema is checked against its draft's meta-schema (the `$schema` it names, else the
//! newest draft) and compiled with the `jsonschema` crate, which also compiles every `$ref`
//! it holds. References resolve offline only, from the schemas the registration references:
//! each referenced schema is known under its reference name (a relative name such as
//! `address.json` resolves against the crate's default base `json-schema:///`, as a `$ref`
//! in a schema without `$id` does) and under its own `$id`. Nothing is fetched over the
//! network or from files.
//!
//! Compatibility between versions is in [`super::json_diff`].

use jsonschema::{Registry, Validator};
use serde_json::Value;

/// A referenced schema: the reference's name and the schema's text.
pub use super::records::Referenced as Named;

/// The URI a reference name stands for: itself when absolute, else under the default base.
pub fn uri_of(name: &str) -> String {
    if name.contains(':') {
        name.to_string()
    } else {
        format!("json-schema:///{}", name.trim_start_matches('/'))
    }
}

/// The referenced schemas parsed, each with its name.
pub fn documents(refs: &[Named]) -> Result<Vec<(String, Value)>, String> {
    refs.iter()
        .map(|r| {
            serde_json::from_str(&r.schema)
                .map(|v| (r.name.clone(), v))
                .map_err(|e| format!("reference {} is not JSON: {e}", r.name))
        })
        .collect()
}

/// `schema` compiled, its references resolved from `refs`; the error says why it is not a
/// valid JSON Schema.
pub fn validator(schema: &Value, refs: &[Named]) -> Result<Validator, String> {
    if !matches!(schema, Value::Object(_) | Value::Bool(_)) {
        return Err("a JSON schema must be an object or a boolean".into());
    }
    let docs = documents(refs)?;
    let mut builder = Registry::new();
    for (name, doc) in docs {
        builder = builder
            .add(uri_of(&name), doc)
            .map_err(|e| format!("reference {name}: {e}"))?;
    }
    let registry = builder.prepare().map_err(|e| e.to_string())?;
    jsonschema::options()
        .offline()
        .with_registry(&registry)
        .build(schema)
        .map_err(|e| e.to_string())
}

/// Parses and checks `schema`; the value it holds.
pub fn parse(schema: &str, refs: &[Named]) -> Result<Value, String> {
    let v: Value = serde_json::from_str(schema).map_err(|e| format!("not JSON: {e}"))?;
    validator(&v, refs)?;
    Ok(v)
}

/// Why `record` does not fit `validator` (the first few reasons), or None when it does.
pub fn misfit(validator: &Validator, record: &Value) -> Option<String> {
    let why: Vec<String> = validator
        .iter_errors(record)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    (!why.is_empty()).then(|| why.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str, text: &str) -> Named {
        Named {
            name: name.to_string(),
            schema: text.to_string(),
        }
    }

    #[test]
    fn registry_jsonschema_invalid_schemas_are_refused() {
        assert!(parse(r#"{"type":"object"}"#, &[]).is_ok());
        assert!(parse("true", &[]).is_ok());
        assert!(parse("[1]", &[]).is_err());
        assert!(parse("{not json", &[]).is_err());
        // Not valid against the meta-schema.
        assert!(parse(r#"{"type":"strnig"}"#, &[]).is_err());
        assert!(parse(r#"{"type":"string","minLength":-1}"#, &[]).is_err());
        assert!(parse(r#"{"properties":{"a":7}}"#, &[]).is_err());
        assert!(parse(r#"{"required":"a"}"#, &[]).is_err());
    }

    #[test]
    fn registry_jsonschema_refs_resolve_from_references() {
        let uses = r#"{"type":"object","properties":{"a":{"$ref":"address.json"}}}"#;
        let address = r#"{"type":"object","properties":{"city":{"type":"string"}}}"#;
        assert!(parse(uses, &[]).is_err(), "an unknown $ref is refused");
        assert!(parse(uses, &[named("address.json", address)]).is_ok());
        // A local pointer needs nothing else.
        let local = r##"{"definitions":{"n":{"type":"integer"}},"properties":{"n":{"$ref":"#/definitions/n"}}}"##;
        assert!(parse(local, &[]).is_ok());
        // An absolute reference name is used as it is.
        let abs = r#"{"$ref":"https://example.com/address.json"}"#;
        assert!(parse(abs, &[named("https://example.com/address.json", address)]).is_ok());
    }

    #[test]
    fn registry_jsonschema_records_are_checked() {
        let address =
            r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#;
        let v: Value = serde_json::from_str(
            r#"{"type":"object","properties":{"a":{"$ref":"address.json"},"n":{"type":"integer"}}}"#,
        )
        .unwrap();
        let val = validator(&v, &[named("address.json", address)]).unwrap();
        let fits: Value = serde_json::from_str(r#"{"a":{"city":"Oslo"},"n":3}"#).unwrap();
        assert_eq!(misfit(&val, &fits), None);
        let bad: Value = serde_json::from_str(r#"{"a":{},"n":"x"}"#).unwrap();
        let why = misfit(&val, &bad).unwrap();
        assert!(why.contains("city") && why.contains("/n"), "{why}");
    }
}
