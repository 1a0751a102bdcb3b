//! How Confluent's JSON Schema loader sees a schema, for [`super::json_diff`]: a view of
//! one side's schema value ([`S`]: its document, its value, the part looked at) and its
//! kind ([`Shape`]). `true`/`{}` accept anything and `false` nothing; a `type` array of
//! several types, or keywords of several types without a `type`, is an `anyOf` of one view
//! per type; `allOf`/`anyOf`/`oneOf` beside other constraints is an `allOf` of each
//! combination and the rest; `enum` and `const` are enum schemas; `integer` and `number`
//! are one kind. Pure.

use serde_json::{Map, Value};

/// Which part of a schema object is looked at.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Part<'a> {
    Whole,
    /// Everything but `allOf`/`anyOf`/`oneOf`.
    Bare,
    /// Only that combination keyword.
    Only(&'a str),
    /// Only the constraints of that type (one of a `type` array's).
    Type(&'a str),
}

/// A schema as seen from one side: the document it is in, its value, the part looked at.
#[derive(Clone, Copy, Debug)]
pub(super) struct S<'a> {
    pub doc: usize,
    pub v: &'a Value,
    pub part: Part<'a>,
}

impl<'a> S<'a> {
    pub(super) fn whole(doc: usize, v: &'a Value) -> S<'a> {
        S {
            doc,
            v,
            part: Part::Whole,
        }
    }

    pub(super) fn get(&self, key: &str) -> Option<&'a Value> {
        self.v.get(key)
    }

    pub(super) fn num(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(Value::as_f64)
    }

    pub(super) fn sub(&self, v: &'a Value) -> S<'a> {
        S::whole(self.doc, v)
    }
}

/// The kind of schema, as Confluent's loader classifies it.
#[derive(Debug)]
pub(super) enum Shape<'a> {
    False,
    Empty,
    Boolean,
    Null,
    Str,
    Num { integer: bool },
    Obj,
    Arr,
    Enum(Vec<&'a Value>),
    Combined(&'static str, Vec<S<'a>>),
    Not(S<'a>),
}

impl Shape<'_> {
    pub(super) fn class(&self) -> u8 {
        match self {
            Shape::False => 0,
            Shape::Empty => 1,
            Shape::Boolean => 2,
            Shape::Null => 3,
            Shape::Str => 4,
            Shape::Num { .. } => 5,
            Shape::Obj => 6,
            Shape::Arr => 7,
            Shape::Enum(_) => 8,
            Shape::Combined(..) => 9,
            Shape::Not(_) => 10,
        }
    }
}

const COMBINERS: [(&str, &str); 3] = [("allOf", "allOf"), ("anyOf", "anyOf"), ("oneOf", "oneOf")];

/// Keywords that constrain nothing.
const ANNOTATIONS: [&str; 13] = [
    "$schema",
    "$id",
    "id",
    "title",
    "description",
    "default",
    "examples",
    "$comment",
    "definitions",
    "$defs",
    "readOnly",
    "writeOnly",
    "deprecated",
];

/// The keywords that make a schema without `type` one of that type.
const TYPE_KEYWORDS: [(&str, &[&str]); 4] = [
    (
        "object",
        &[
            "properties",
            "required",
            "additionalProperties",
            "patternProperties",
            "minProperties",
            "maxProperties",
            "dependencies",
            "dependentRequired",
            "dependentSchemas",
            "propertyNames",
        ],
    ),
    (
        "array",
        &[
            "items",
            "prefixItems",
            "additionalItems",
            "minItems",
            "maxItems",
            "uniqueItems",
            "contains",
        ],
    ),
    ("string", &["minLength", "maxLength", "pattern", "format"]),
    (
        "number",
        &[
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
        ],
    ),
];

pub(super) fn shape<'a>(s: S<'a>) -> Shape<'a> {
    let o: &'a Map<String, Value> = match s.v {
        Value::Bool(false) => return Shape::False,
        Value::Object(o) => o,
        _ => return Shape::Empty,
    };
    if let Part::Only(c) = s.part {
        let subs = o
            .get(c)
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|v| s.sub(v)).collect())
            .unwrap_or_default();
        let crit = COMBINERS
            .iter()
            .find(|(k, _)| *k == c)
            .map_or("allOf", |p| p.1);
        return Shape::Combined(crit, subs);
    }
    if s.part == Part::Whole {
        let combiners: Vec<&'a str> = COMBINERS
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| o.contains_key(*k))
            .collect();
        let others = o
            .keys()
            .any(|k| !ANNOTATIONS.contains(&k.as_str()) && !combiners.contains(&k.as_str()));
        match (combiners.as_slice(), others) {
            ([], _) => {}
            ([one], false) => {
                return shape(S {
                    part: Part::Only(one),
                    ..s
                });
            }
            (several, _) => {
                let mut subs: Vec<S<'a>> = several
                    .iter()
                    .map(|c| S {
                        part: Part::Only(c),
                        ..s
                    })
                    .collect();
                if others {
                    subs.push(S {
                        part: Part::Bare,
                        ..s
                    });
                }
                return Shape::Combined("allOf", subs);
            }
        }
    }
    if let Some(e) = o.get("enum").and_then(Value::as_array) {
        return Shape::Enum(e.iter().collect());
    }
    if let Some(c) = o.get("const") {
        return Shape::Enum(vec![c]);
    }
    if let Some(n) = o.get("not") {
        return Shape::Not(s.sub(n));
    }
    let types: Vec<&'a str> = match (s.part, o.get("type")) {
        (Part::Type(t), _) => vec![t],
        (_, Some(Value::String(t))) => vec![t.as_str()],
        (_, Some(Value::Array(ts))) => ts.iter().filter_map(Value::as_str).collect(),
        _ => TYPE_KEYWORDS
            .iter()
            .filter(|(_, kws)| kws.iter().any(|k| o.contains_key(*k)))
            .map(|(t, _)| *t)
            .collect(),
    };
    match types.as_slice() {
        [] => Shape::Empty,
        [t] => match *t {
            "string" => Shape::Str,
            "number" => Shape::Num { integer: false },
            "integer" => Shape::Num { integer: true },
            "object" => Shape::Obj,
            "array" => Shape::Arr,
            "boolean" => Shape::Boolean,
            "null" => Shape::Null,
            _ => Shape::Empty,
        },
        several => Shape::Combined(
            "anyOf",
            several
                .iter()
                .map(|t| S {
                    part: Part::Type(t),
                    ..s
                })
                .collect(),
        ),
    }
}

/// An array schema's tuple (`prefixItems`, or `items` as an array) if it has one, and the
/// schema of the other items (`items` or `additionalItems`).
pub(super) fn items<'a>(s: &S<'a>) -> (Option<&'a [Value]>, Option<&'a Value>) {
    if let Some(Value::Array(t)) = s.get("prefixItems") {
        return (Some(t), s.get("items"));
    }
    match s.get("items") {
        Some(Value::Array(t)) => (Some(t), s.get("additionalItems")),
        other => (None, other),
    }
}

/// Whether an object schema takes any further property with any value.
pub(super) fn open(s: &S) -> bool {
    s.get("patternProperties")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty)
        && matches!(
            s.get("additionalProperties"),
            None | Some(Value::Bool(true))
        )
}

/// The schema a partially open object schema gives property `key`: the first
/// `patternProperties` entry matching it, else its `additionalProperties` schema.
pub(super) fn partial<'a>(s: &S<'a>, key: &str) -> Option<S<'a>> {
    let by_pattern = s
        .get("patternProperties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .find(|(p, _)| regex::Regex::new(p).is_ok_and(|r| r.is_match(key)))
        .map(|(_, v)| v);
    by_pattern
        .or_else(|| s.get("additionalProperties").filter(|v| v.is_object()))
        .map(|v| s.sub(v))
}
