//! One test per compatibility rule of [`super`]: the kinds of difference found from an
//! original to an update, and whether the update stays compatible.

use super::*;
use crate::registry::formats::{Version, incompatibilities};

fn side(s: &str) -> Side {
    Side::new(s, &[]).unwrap()
}

/// The kinds found from `original` to `update`.
fn kinds(original: &str, update: &str) -> Vec<&'static str> {
    differences(&side(original), &side(update))
        .into_iter()
        .map(|d| d.kind)
        .collect()
}

/// Whether `update` accepts all that `original` does, by Confluent's rules.
fn compatible(original: &str, update: &str) -> bool {
    incompatible(&side(original), &side(update)).is_empty()
}

fn obj(props: &str, extra: &str) -> String {
    format!(r#"{{"type":"object","properties":{{{props}}}{extra}}}"#)
}

#[test]
fn registry_jsonschema_type_changed_extended_narrowed() {
    assert_eq!(
        kinds(r#"{"type":"string"}"#, r#"{"type":"integer"}"#),
        ["TYPE_CHANGED"]
    );
    assert_eq!(
        kinds(r#"{"type":"integer"}"#, r#"{"type":"number"}"#),
        ["TYPE_EXTENDED"]
    );
    assert!(compatible(r#"{"type":"integer"}"#, r#"{"type":"number"}"#));
    assert!(!compatible(r#"{"type":"number"}"#, r#"{"type":"integer"}"#));
    // Anything may become `true`/`{}`; `false` may become anything.
    assert!(compatible(r#"{"type":"string"}"#, "{}"));
    assert!(compatible("false", r#"{"type":"string"}"#));
    assert!(!compatible("{}", r#"{"type":"string"}"#));
    // A type array is a union: gaining a type is compatible, losing one is not.
    assert!(compatible(
        r#"{"type":"string"}"#,
        r#"{"type":["string","null"]}"#
    ));
    assert_eq!(
        kinds(r#"{"type":"string"}"#, r#"{"type":["string","null"]}"#),
        ["SUM_TYPE_EXTENDED"]
    );
    assert!(!compatible(
        r#"{"type":["string","null"]}"#,
        r#"{"type":"string"}"#
    ));
}

#[test]
fn registry_jsonschema_open_content_model_properties() {
    let v1 = obj(r#""a":{"type":"string"}"#, "");
    let v2 = obj(r#""a":{"type":"string"},"b":{"type":"integer"}"#, "");
    // Adding a typed property to an open model: old data may hold any `b`.
    assert_eq!(kinds(&v1, &v2), ["PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]);
    assert!(!compatible(&v1, &v2));
    // Removing one from an open model is compatible.
    assert_eq!(
        kinds(&v2, &v1),
        ["PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL"]
    );
    assert!(compatible(&v2, &v1));
    // A property that accepts anything may be added.
    let any = obj(r#""a":{"type":"string"},"b":{}"#, "");
    assert!(compatible(&v1, &any));
}

#[test]
fn registry_jsonschema_closed_content_model_properties() {
    let closed = r#","additionalProperties":false"#;
    let v1 = obj(r#""a":{"type":"string"}"#, closed);
    let optional = obj(r#""a":{"type":"string"},"b":{"type":"integer"}"#, closed);
    let required = obj(
        r#""a":{"type":"string"},"b":{"type":"integer"}"#,
        &format!(r#"{closed},"required":["b"]"#),
    );
    let with_default = obj(
        r#""a":{"type":"string"},"b":{"type":"integer","default":0}"#,
        &format!(r#"{closed},"required":["b"]"#),
    );
    assert_eq!(
        kinds(&v1, &optional),
        ["OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"]
    );
    assert!(compatible(&v1, &optional));
    assert!(!compatible(&v1, &required));
    assert!(compatible(&v1, &with_default));
    // Removing a property from a closed model: its data is then refused.
    assert_eq!(
        kinds(&optional, &v1),
        ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]
    );
    assert!(!compatible(&optional, &v1));
    // Closing an open model removes additional properties.
    let open = obj(r#""a":{"type":"string"}"#, "");
    assert_eq!(kinds(&open, &v1), ["ADDITIONAL_PROPERTIES_REMOVED"]);
    assert!(compatible(&v1, &open));
}

#[test]
fn registry_jsonschema_partially_open_content_model() {
    let partial = obj(
        r#""a":{"type":"string"}"#,
        r#","additionalProperties":{"type":"integer"}"#,
    );
    let covered = obj(
        r#""a":{"type":"string"},"b":{"type":"integer"}"#,
        r#","additionalProperties":{"type":"integer"}"#,
    );
    let uncovered = obj(
        r#""a":{"type":"string"},"b":{"type":"string"}"#,
        r#","additionalProperties":{"type":"integer"}"#,
    );
    assert!(compatible(&partial, &covered));
    assert!(
        kinds(&partial, &covered)
            .contains(&"PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    );
    assert!(!compatible(&partial, &uncovered));
    assert!(compatible(&covered, &partial));
    // patternProperties cover the names they match.
    let pattern = obj(
        r#""a":{"type":"string"}"#,
        r#","patternProperties":{"^n_":{"type":"integer"}}"#,
    );
    let adds = |t: &str| {
        obj(
            &format!(r#""a":{{"type":"string"}},"n_x":{{"type":"{t}"}}"#),
            r#","patternProperties":{"^n_":{"type":"integer"}}"#,
        )
    };
    assert!(compatible(&pattern, &adds("number")));
    assert!(!compatible(&pattern, &adds("string")));
}

#[test]
fn registry_jsonschema_required_attribute() {
    let p = r#""a":{"type":"string"}"#;
    let optional = obj(p, "");
    let required = obj(p, r#","required":["a"]"#);
    assert_eq!(kinds(&optional, &required), ["REQUIRED_ATTRIBUTE_ADDED"]);
    assert!(!compatible(&optional, &required));
    assert_eq!(kinds(&required, &optional), ["REQUIRED_ATTRIBUTE_REMOVED"]);
    assert!(compatible(&required, &optional));
    let with_default = obj(
        r#""a":{"type":"string","default":"x"}"#,
        r#","required":["a"]"#,
    );
    let kinds_default = kinds(&optional, &with_default);
    assert!(kinds_default.contains(&"REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"));
    assert!(compatible(&optional, &with_default));
}

#[test]
fn registry_jsonschema_enum_narrowed_extended() {
    let ab = r#"{"enum":["a","b"]}"#;
    let abc = r#"{"enum":["a","b","c"]}"#;
    let ad = r#"{"enum":["a","d"]}"#;
    assert_eq!(kinds(ab, abc), ["ENUM_ARRAY_EXTENDED"]);
    assert!(compatible(ab, abc));
    assert_eq!(kinds(abc, ab), ["ENUM_ARRAY_NARROWED"]);
    assert!(!compatible(abc, ab));
    assert_eq!(kinds(ab, ad), ["ENUM_ARRAY_CHANGED"]);
}

#[test]
fn registry_jsonschema_string_bounds() {
    let s = |extra: &str| format!(r#"{{"type":"string"{extra}}}"#);
    assert_eq!(kinds(&s(""), &s(r#","maxLength":5"#)), ["MAX_LENGTH_ADDED"]);
    assert!(!compatible(
        &s(r#","maxLength":9"#),
        &s(r#","maxLength":5"#)
    ));
    assert!(compatible(&s(r#","maxLength":5"#), &s(r#","maxLength":9"#)));
    assert!(compatible(&s(r#","maxLength":5"#), &s("")));
    assert!(!compatible(
        &s(r#","minLength":1"#),
        &s(r#","minLength":2"#)
    ));
    assert!(compatible(&s(r#","minLength":2"#), &s(r#","minLength":1"#)));
    assert_eq!(kinds(&s(""), &s(r#","pattern":"^a""#)), ["PATTERN_ADDED"]);
    assert!(!compatible(
        &s(r#","pattern":"^a""#),
        &s(r#","pattern":"^b""#)
    ));
    assert!(compatible(&s(r#","pattern":"^a""#), &s("")));
}

#[test]
fn registry_jsonschema_numeric_bounds() {
    let n = |extra: &str| format!(r#"{{"type":"number"{extra}}}"#);
    assert_eq!(
        kinds(&n(r#","maximum":5"#), &n(r#","maximum":9"#)),
        ["MAXIMUM_INCREASED"]
    );
    assert!(compatible(&n(r#","maximum":5"#), &n(r#","maximum":9"#)));
    assert!(!compatible(&n(r#","maximum":9"#), &n(r#","maximum":5"#)));
    assert!(!compatible(&n(""), &n(r#","minimum":0"#)));
    assert!(compatible(&n(r#","minimum":0"#), &n(r#","minimum":-1"#)));
    assert!(!compatible(
        &n(r#","exclusiveMinimum":0"#),
        &n(r#","exclusiveMinimum":1"#)
    ));
    assert!(compatible(
        &n(r#","exclusiveMaximum":1"#),
        &n(r#","exclusiveMaximum":2"#)
    ));
    assert_eq!(
        kinds(&n(r#","multipleOf":4"#), &n(r#","multipleOf":2"#)),
        ["MULTIPLE_OF_REDUCED"]
    );
    assert!(compatible(
        &n(r#","multipleOf":4"#),
        &n(r#","multipleOf":2"#)
    ));
    assert!(!compatible(
        &n(r#","multipleOf":2"#),
        &n(r#","multipleOf":4"#)
    ));
}

#[test]
fn registry_jsonschema_property_and_item_counts() {
    let o = |extra: &str| format!(r#"{{"type":"object"{extra}}}"#);
    assert!(!compatible(&o(""), &o(r#","maxProperties":3"#)));
    assert!(compatible(
        &o(r#","maxProperties":3"#),
        &o(r#","maxProperties":4"#)
    ));
    assert!(!compatible(
        &o(r#","minProperties":1"#),
        &o(r#","minProperties":2"#)
    ));
    let a = |extra: &str| format!(r#"{{"type":"array","items":{{"type":"string"}}{extra}}}"#);
    assert!(!compatible(&a(""), &a(r#","maxItems":3"#)));
    assert!(compatible(&a(r#","maxItems":3"#), &a("")));
    assert!(compatible(&a(r#","minItems":2"#), &a(r#","minItems":1"#)));
    assert_eq!(
        kinds(&a(""), &a(r#","uniqueItems":true"#)),
        ["UNIQUE_ITEMS_ADDED"]
    );
    assert!(compatible(&a(r#","uniqueItems":true"#), &a("")));
}

#[test]
fn registry_jsonschema_items() {
    let a = |t: &str| format!(r#"{{"type":"array","items":{{"type":"{t}"}}}}"#);
    assert_eq!(kinds(&a("string"), &a("integer")), ["TYPE_CHANGED"]);
    assert!(compatible(&a("integer"), &a("number")));
    // Tuples: an item added to an open tuple must accept anything; to a closed one it may
    // be anything; an item removed from a closed tuple breaks.
    let t = |items: &str, extra: &str| format!(r#"{{"type":"array","items":[{items}]{extra}}}"#);
    let one = t(r#"{"type":"string"}"#, "");
    let two = t(r#"{"type":"string"},{"type":"integer"}"#, "");
    assert_eq!(kinds(&one, &two), ["ITEM_ADDED_TO_OPEN_CONTENT_MODEL"]);
    assert!(!compatible(&one, &two));
    assert!(compatible(&two, &one));
    let closed = r#","additionalItems":false"#;
    assert!(compatible(
        &t(r#"{"type":"string"}"#, closed),
        &t(r#"{"type":"string"},{"type":"integer"}"#, closed)
    ));
    assert!(!compatible(
        &t(r#"{"type":"string"},{"type":"integer"}"#, closed),
        &t(r#"{"type":"string"}"#, closed)
    ));
}

#[test]
fn registry_jsonschema_combined_types() {
    let any = |subs: &str| format!(r#"{{"anyOf":[{subs}]}}"#);
    let one = |subs: &str| format!(r#"{{"oneOf":[{subs}]}}"#);
    let all = |subs: &str| format!(r#"{{"allOf":[{subs}]}}"#);
    let s = r#"{"type":"string"}"#;
    let i = r#"{"type":"integer"}"#;
    let si = format!("{s},{i}");
    // A sum type may gain branches, not lose them.
    assert_eq!(kinds(&one(s), &one(&si)), ["SUM_TYPE_EXTENDED"]);
    assert!(compatible(&one(s), &one(&si)));
    assert!(!compatible(&one(&si), &one(s)));
    // A product type may lose parts, not gain them.
    assert!(compatible(&all(&si), &all(s)));
    assert!(!compatible(&all(s), &all(&si)));
    // Towards anyOf is compatible; anyOf -> oneOf with several branches is not.
    assert_eq!(kinds(&one(&si), &any(&si)), ["COMBINED_TYPE_EXTENDED"]);
    assert!(!compatible(&any(&si), &one(&si)));
    // Every branch needs a compatible partner.
    let n = r#"{"type":"number"}"#;
    let b = r#"{"type":"boolean"}"#;
    assert!(compatible(&one(&si), &one(&format!("{s},{n}"))));
    assert_eq!(
        kinds(&one(&si), &one(&format!("{s},{b}"))),
        ["COMBINED_TYPE_SUBSCHEMAS_CHANGED"]
    );
    // A schema becoming a union that holds it.
    assert!(compatible(s, &one(&si)));
}

#[test]
fn registry_jsonschema_not_type() {
    let not = |t: &str| format!(r#"{{"not":{{"type":"{t}"}}}}"#);
    assert_eq!(
        kinds(&not("number"), &not("integer")),
        ["NOT_TYPE_NARROWED"]
    );
    assert!(compatible(&not("number"), &not("integer")));
    assert!(!compatible(&not("integer"), &not("number")));
}

#[test]
fn registry_jsonschema_refs_and_recursion() {
    // A local $ref is compared through; a recursive schema ends.
    let tree = |t: &str| {
        format!(
            r##"{{"$ref":"#/definitions/node","definitions":{{"node":{{"type":"object","properties":{{"v":{{"type":"{t}"}},"kids":{{"type":"array","items":{{"$ref":"#/definitions/node"}}}}}}}}}}}}"##
        )
    };
    assert!(compatible(&tree("integer"), &tree("number")));
    assert!(!compatible(&tree("number"), &tree("integer")));
    // A $ref into a referenced schema.
    let uses = r#"{"type":"object","properties":{"a":{"$ref":"addr.json"}}}"#;
    let addr = |t: &str| {
        vec![crate::registry::records::Referenced {
            name: "addr.json".to_string(),
            schema: format!(r#"{{"type":"object","properties":{{"zip":{{"type":"{t}"}}}}}}"#),
        }]
    };
    let o = Side::new(uses, &addr("string")).unwrap();
    let u = Side::new(uses, &addr("integer")).unwrap();
    let found = incompatible(&o, &u);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].kind, "TYPE_CHANGED");
    assert_eq!(found[0].path, "#/properties/a/properties/zip");
}

#[test]
fn registry_jsonschema_levels_and_messages() {
    let v = |version: i32, schema: &'static str| Version {
        version,
        schema_type: "JSON",
        schema,
        refs: Vec::new(),
    };
    let v1 =
        r#"{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}"#;
    // v2 adds an optional property to the closed model: backward, not forward.
    let v2 = r#"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"additionalProperties":false}"#;
    assert!(incompatibilities("BACKWARD", &v(2, v2), &[v(1, v1)]).is_empty());
    let why = incompatibilities("FORWARD", &v(2, v2), &[v(1, v1)]);
    assert_eq!(why.len(), 1);
    assert!(
        why[0].starts_with("{errorType:'PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL'"),
        "{}",
        why[0]
    );
    assert!(why[0].contains("#/properties/b") && why[0].ends_with("oldSchemaVersion: 1}"));
    assert_eq!(incompatibilities("FULL", &v(2, v2), &[v(1, v1)]).len(), 1);
    assert!(incompatibilities("NONE", &v(2, v2), &[v(1, v1)]).is_empty());
    // Transitive levels look at every version.
    let v0 =
        r#"{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false}"#;
    assert!(incompatibilities("BACKWARD", &v(3, v2), &[v(1, v0), v(2, v1)]).is_empty());
    assert!(!incompatibilities("BACKWARD_TRANSITIVE", &v(3, v2), &[v(1, v0), v(2, v1)]).is_empty());
}
