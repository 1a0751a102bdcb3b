//! JSON Schema compatibility as Confluent's registry decides it. Pure.
//!
//! [`differences`] walks an original schema and an update side by side and lists every
//! difference, each with its kind (Confluent's names: `TYPE_CHANGED`,
//! `PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL`, ...) and the JSON path where it is found. A kind
//! in [`COMPATIBLE`] is one after which the update still accepts every document the original
//! accepts; any other kind makes the update incompatible. BACKWARD compares the old version
//! (original) with the new one (update), FORWARD the new one with the old, FULL both.
//!
//! The schemas are read as Confluent's loader reads them: `true`/`{}` accept anything,
//! `false` nothing; a `type` array of several types, or keywords of several types without a
//! `type`, is an `anyOf` of one schema per type; `allOf`/`anyOf`/`oneOf` beside other
//! constraints is an `allOf` of the combination and the rest; `enum` and `const` are enum
//! schemas; `integer` and `number` are one kind of schema (`integer` -> `number` extends the
//! type). `$ref` is followed, locally (`#/definitions/..`) or into a referenced schema named
//! by the reference, and a pair of schemas already being compared higher up (a recursive
//! schema) is not compared again.
//!
//! Rules, original -> update:
//! - a different kind of schema: `TYPE_CHANGED`, unless the original is `false` or the update
//!   accepts anything; a schema added where there was none: `SCHEMA_ADDED`.
//! - strings: `maxLength` added/decreased, `minLength` added/increased, `pattern`
//!   added/changed are incompatible; the reverse changes are compatible. Numbers likewise for
//!   `maximum`/`exclusiveMaximum` (decreased), `minimum`/`exclusiveMinimum` (increased),
//!   `multipleOf` (added, or not a divisor of the old one), `number` -> `integer`.
//! - objects: a property added to an open content model (no `additionalProperties` schema,
//!   not `false`, no `patternProperties`) is incompatible unless its schema accepts anything;
//!   added to a closed model it is compatible unless it is required without a default; a
//!   property a partially open model (`patternProperties`, an `additionalProperties` schema)
//!   covers is compared with that schema. Removing a property is compatible from an open
//!   update, else only when the original's property was `false` or the update's partial
//!   model covers it. A property becoming required without a default, `additionalProperties`
//!   turned off or given a schema, `min/maxProperties` tightened, dependencies added or
//!   extended are incompatible.
//! - arrays: the same for `items` (one schema, or a tuple with `additionalItems`),
//!   `min/maxItems`, `uniqueItems` added.
//! - `enum` values: extended is compatible, narrowed or changed is not.
//! - `allOf`/`anyOf`/`oneOf`: the criterion may change only towards `anyOf` (or from a
//!   single subschema); `anyOf`/`oneOf` may gain subschemas, `allOf` lose them; each
//!   subschema of the smaller side must pair with a compatible one of the other (a
//!   maximum matching), else `COMBINED_TYPE_SUBSCHEMAS_CHANGED`. A schema that becomes a
//!   union holding a compatible branch is `SUM_TYPE_EXTENDED`.
//! - `not`: the excluded schema may only narrow.
//!
//! Changes of `$id`, `title`, `description` and `default` are listed and compatible.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::formats::Version;
use super::json_schema::{Named, documents, uri_of};
use super::json_shape::{Part, S, Shape, shape};

/// The kinds of difference that keep the update compatible with the original.
pub const COMPATIBLE: &[&str] = &[
    "ID_CHANGED",
    "DESCRIPTION_CHANGED",
    "TITLE_CHANGED",
    "DEFAULT_CHANGED",
    "SCHEMA_REMOVED",
    "TYPE_EXTENDED",
    "MAX_LENGTH_INCREASED",
    "MAX_LENGTH_REMOVED",
    "MIN_LENGTH_DECREASED",
    "MIN_LENGTH_REMOVED",
    "PATTERN_REMOVED",
    "MAXIMUM_INCREASED",
    "MAXIMUM_REMOVED",
    "MINIMUM_DECREASED",
    "MINIMUM_REMOVED",
    "EXCLUSIVE_MAXIMUM_INCREASED",
    "EXCLUSIVE_MAXIMUM_REMOVED",
    "EXCLUSIVE_MINIMUM_DECREASED",
    "EXCLUSIVE_MINIMUM_REMOVED",
    "MULTIPLE_OF_REDUCED",
    "MULTIPLE_OF_REMOVED",
    "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED",
    "REQUIRED_ATTRIBUTE_REMOVED",
    "DEPENDENCY_ARRAY_NARROWED",
    "DEPENDENCY_ARRAY_REMOVED",
    "DEPENDENCY_SCHEMA_REMOVED",
    "MAX_PROPERTIES_INCREASED",
    "MAX_PROPERTIES_REMOVED",
    "MIN_PROPERTIES_DECREASED",
    "MIN_PROPERTIES_REMOVED",
    "ADDITIONAL_PROPERTIES_ADDED",
    "ADDITIONAL_PROPERTIES_EXTENDED",
    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "MAX_ITEMS_INCREASED",
    "MAX_ITEMS_REMOVED",
    "MIN_ITEMS_DECREASED",
    "MIN_ITEMS_REMOVED",
    "UNIQUE_ITEMS_REMOVED",
    "ADDITIONAL_ITEMS_ADDED",
    "ADDITIONAL_ITEMS_EXTENDED",
    "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
    "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ENUM_ARRAY_EXTENDED",
    "COMBINED_TYPE_EXTENDED",
    "PRODUCT_TYPE_NARROWED",
    "SUM_TYPE_EXTENDED",
    "NOT_TYPE_NARROWED",
];

pub use super::difference::Difference;

/// Whether `d` leaves a new schema compatible.
fn compatible(d: &Difference) -> bool {
    d.allowed_by(&COMPATIBLE)
}

/// A schema document and the documents its `$ref`s may reach, by URI.
pub struct Side {
    root: Value,
    docs: Vec<(String, Value)>,
}

impl Side {
    /// A schema text with its referenced schemas.
    pub fn new(schema: &str, refs: &[Named]) -> Result<Side, String> {
        let root = serde_json::from_str(schema).map_err(|e| format!("not JSON: {e}"))?;
        let mut docs = Vec::new();
        for (name, doc) in documents(refs)? {
            if let Some(id) = doc.get("$id").and_then(Value::as_str) {
                docs.push((id.to_string(), doc.clone()));
            }
            docs.push((uri_of(&name), doc));
        }
        Ok(Side { root, docs })
    }

    fn doc(&self, i: usize) -> &Value {
        if i == 0 {
            &self.root
        } else {
            &self.docs[i - 1].1
        }
    }

    /// The schema `r` points at from document `doc`, with the document it is in.
    fn follow(&self, doc: usize, r: &str) -> Option<(usize, &Value)> {
        let (base, pointer) = r.split_once('#').unwrap_or((r, ""));
        let doc = if base.is_empty() {
            doc
        } else {
            let uri = uri_of(base);
            1 + self.docs.iter().position(|(u, _)| *u == uri)?
        };
        let pointer = pointer.replace("%25", "%");
        self.doc(doc).pointer(&pointer).map(|v| (doc, v))
    }
}

/// Every difference from `original` to `update`, in the order found.
pub fn differences(original: &Side, update: &Side) -> Vec<Difference> {
    let mut ctx = Ctx {
        sides: [original, update],
        path: vec!["#".to_string()],
        found: Vec::new(),
        visiting: HashSet::new(),
    };
    let o = S::whole(0, &original.root);
    let u = S::whole(0, &update.root);
    ctx.compare(Some(o), Some(u));
    ctx.found
}

/// The incompatible differences from `original` to `update`.
pub fn incompatible(original: &Side, update: &Side) -> Vec<Difference> {
    differences(original, update)
        .into_iter()
        .filter(|d| !compatible(d))
        .collect()
}

/// Why `new` may not follow `old` under a level that checks `backward` (the new schema
/// accepting what the old one does) and/or `forward` (the reverse), in Confluent's verbose
/// style: each an error type and its description.
pub fn verbose(
    backward: bool,
    forward: bool,
    new: &Version,
    old: &Version,
) -> Vec<(&'static str, String)> {
    let (n, o) = match (
        Side::new(new.schema, &new.refs),
        Side::new(old.schema, &old.refs),
    ) {
        (Ok(n), Ok(o)) => (n, o),
        _ => {
            let d = format!("version {} does not parse", old.version);
            return vec![("INVALID_SCHEMA", d)];
        }
    };
    let mut out = Vec::new();
    let mut report = |diffs: Vec<Difference>, reading: String| {
        for d in diffs {
            let why = format!(
                "Found incompatible change: Difference{{jsonPath={}, type={}}} ({reading})",
                d.path, d.kind
            );
            out.push((d.kind, why));
        }
    };
    if backward {
        let reading = format!(
            "the new schema reading data written with version {}",
            old.version
        );
        report(incompatible(&o, &n), reading);
    }
    if forward {
        let reading = format!(
            "version {} reading data written with the new schema",
            old.version
        );
        report(incompatible(&n, &o), reading);
    }
    out
}

struct Ctx<'a> {
    sides: [&'a Side; 2],
    path: Vec<String>,
    found: Vec<Difference>,
    /// The pairs being compared further up (by address), so recursion through `$ref` ends.
    visiting: HashSet<(usize, usize, String, String)>,
}

impl<'a> Ctx<'a> {
    fn add(&mut self, kind: &'static str) {
        self.found.push(Difference {
            kind,
            path: self.path.join("/"),
        });
    }

    fn add_at(&mut self, key: &str, kind: &'static str) {
        self.within(key, |c| c.add(kind));
    }

    fn within<R>(&mut self, key: &str, f: impl FnOnce(&mut Self) -> R) -> R {
        self.path.push(key.replace('~', "~0").replace('/', "~1"));
        let r = f(self);
        self.path.pop();
        r
    }

    /// Runs `f` on a fresh list of differences: what it found, and whether all is compatible.
    fn trial(&mut self, f: impl FnOnce(&mut Self)) -> (Vec<Difference>, bool) {
        let saved = std::mem::take(&mut self.found);
        f(self);
        let got = std::mem::replace(&mut self.found, saved);
        let ok = got.iter().all(compatible);
        (got, ok)
    }

    /// Compares a schema with the one a partially open content model gives in its place and
    /// lists what it found, then whether it is covered (`kinds[0]`) or not (`kinds[1]`).
    fn covered(&mut self, o: S<'a>, u: S<'a>, kinds: [&'static str; 2]) {
        let (got, ok) = self.trial(|c| c.compare(Some(o), Some(u)));
        self.found.extend(got);
        self.add(if ok { kinds[0] } else { kinds[1] });
    }

    /// `s` with its `$ref`s followed (an unresolvable one stays as it is).
    fn deref(&self, side: usize, mut s: S<'a>) -> S<'a> {
        for _ in 0..32 {
            let Some(r) = s.v.get("$ref").and_then(Value::as_str) else {
                break;
            };
            match self.sides[side].follow(s.doc, r) {
                Some((doc, v)) => s = S::whole(doc, v),
                None => break,
            }
        }
        s
    }

    fn compare(&mut self, o: Option<S<'a>>, u: Option<S<'a>>) {
        let (o, u) = match (o, u) {
            (None, None) => return,
            (None, Some(_)) => return self.add("SCHEMA_ADDED"),
            (Some(_), None) => return self.add("SCHEMA_REMOVED"),
            (Some(o), Some(u)) => (self.deref(0, o), self.deref(1, u)),
        };
        let key = (
            o.v as *const Value as usize,
            u.v as *const Value as usize,
            format!("{:?}", o.part),
            format!("{:?}", u.part),
        );
        if !self.visiting.insert(key.clone()) {
            return;
        }
        self.compare_shapes(o, u);
        self.visiting.remove(&key);
    }

    fn compare_shapes(&mut self, o: S<'a>, u: S<'a>) {
        let (so, su) = (shape(o), shape(u));
        match (&so, &su) {
            (Shape::Combined(..), Shape::Combined(..)) => {}
            (_, Shape::Combined(crit, subs)) => {
                if subs.len() == 1 {
                    let (got, ok) = self.trial(|c| c.compare(Some(o), Some(subs[0])));
                    if ok {
                        self.found.extend(got);
                        return;
                    }
                } else if *crit != "allOf" {
                    for sub in subs {
                        let (got, ok) = self.trial(|c| c.compare(Some(o), Some(*sub)));
                        if ok {
                            self.found.extend(got);
                            self.add("SUM_TYPE_EXTENDED");
                            return;
                        }
                    }
                }
            }
            (Shape::Combined(_, subs), _) if subs.len() == 1 => {
                let (got, ok) = self.trial(|c| c.compare(Some(subs[0]), Some(u)));
                if ok {
                    self.found.extend(got);
                    return;
                }
            }
            _ => {}
        }
        if so.class() != su.class() {
            if !matches!(so, Shape::False) && !matches!(su, Shape::Empty) {
                self.add("TYPE_CHANGED");
            }
            return;
        }
        if o.part == Part::Whole && u.part == Part::Whole {
            let id = |s: &S<'a>| s.get("$id").or_else(|| s.get("id"));
            for (a, b, kind) in [
                (id(&o), id(&u), "ID_CHANGED"),
                (o.get("title"), u.get("title"), "TITLE_CHANGED"),
                (
                    o.get("description"),
                    u.get("description"),
                    "DESCRIPTION_CHANGED",
                ),
                (o.get("default"), u.get("default"), "DEFAULT_CHANGED"),
            ] {
                if a != b {
                    self.add(kind);
                }
            }
        }
        match (so, su) {
            (Shape::Str, Shape::Str) => self.strings(o, u),
            (Shape::Num { integer: oi }, Shape::Num { integer: ui }) => {
                if oi && !ui {
                    self.add("TYPE_EXTENDED");
                } else if !oi && ui {
                    self.add("TYPE_NARROWED");
                }
                self.numbers(o, u)
            }
            (Shape::Enum(a), Shape::Enum(b)) => {
                let has_all = |x: &[&Value], y: &[&Value]| y.iter().all(|v| x.contains(v));
                if !(has_all(&a, &b) && has_all(&b, &a)) {
                    if has_all(&b, &a) {
                        self.add_at("enum", "ENUM_ARRAY_EXTENDED");
                    } else if has_all(&a, &b) {
                        self.add_at("enum", "ENUM_ARRAY_NARROWED");
                    } else {
                        self.add_at("enum", "ENUM_ARRAY_CHANGED");
                    }
                }
            }
            (Shape::Combined(oc, os), Shape::Combined(uc, us)) => self.combined(oc, &os, uc, &us),
            (Shape::Not(a), Shape::Not(b)) => {
                let (_, ok) = self.within("not", |c| c.trial(|c| c.compare(Some(b), Some(a))));
                self.add(if ok {
                    "NOT_TYPE_NARROWED"
                } else {
                    "NOT_TYPE_EXTENDED"
                });
            }
            (Shape::Obj, Shape::Obj) => self.objects(o, u),
            (Shape::Arr, Shape::Arr) => self.arrays(o, u),
            _ => {}
        }
    }

    /// A bound where a larger value accepts more (`loosen_up`) or fewer.
    fn bound(&mut self, key: &str, o: Option<f64>, u: Option<f64>, names: [&'static str; 4]) {
        let [added, removed, increased, decreased] = names;
        match (o, u) {
            (None, Some(_)) => self.add_at(key, added),
            (Some(_), None) => self.add_at(key, removed),
            (Some(a), Some(b)) if a < b => self.add_at(key, increased),
            (Some(a), Some(b)) if a > b => self.add_at(key, decreased),
            _ => {}
        }
    }

    fn bounds(&mut self, o: S<'a>, u: S<'a>, keys: &[(&str, [&'static str; 4])]) {
        for (key, names) in keys {
            self.bound(key, o.num(key), u.num(key), *names);
        }
    }

    fn strings(&mut self, o: S<'a>, u: S<'a>) {
        self.bounds(
            o,
            u,
            &[
                (
                    "maxLength",
                    [
                        "MAX_LENGTH_ADDED",
                        "MAX_LENGTH_REMOVED",
                        "MAX_LENGTH_INCREASED",
                        "MAX_LENGTH_DECREASED",
                    ],
                ),
                (
                    "minLength",
                    [
                        "MIN_LENGTH_ADDED",
                        "MIN_LENGTH_REMOVED",
                        "MIN_LENGTH_INCREASED",
                        "MIN_LENGTH_DECREASED",
                    ],
                ),
            ],
        );
        match (o.get("pattern"), u.get("pattern")) {
            (None, Some(_)) => self.add_at("pattern", "PATTERN_ADDED"),
            (Some(_), None) => self.add_at("pattern", "PATTERN_REMOVED"),
            (Some(a), Some(b)) if a != b => self.add_at("pattern", "PATTERN_CHANGED"),
            _ => {}
        }
    }

    fn numbers(&mut self, o: S<'a>, u: S<'a>) {
        self.bounds(
            o,
            u,
            &[
                (
                    "maximum",
                    [
                        "MAXIMUM_ADDED",
                        "MAXIMUM_REMOVED",
                        "MAXIMUM_INCREASED",
                        "MAXIMUM_DECREASED",
                    ],
                ),
                (
                    "minimum",
                    [
                        "MINIMUM_ADDED",
                        "MINIMUM_REMOVED",
                        "MINIMUM_INCREASED",
                        "MINIMUM_DECREASED",
                    ],
                ),
                (
                    "exclusiveMaximum",
                    [
                        "EXCLUSIVE_MAXIMUM_ADDED",
                        "EXCLUSIVE_MAXIMUM_REMOVED",
                        "EXCLUSIVE_MAXIMUM_INCREASED",
                        "EXCLUSIVE_MAXIMUM_DECREASED",
                    ],
                ),
                (
                    "exclusiveMinimum",
                    [
                        "EXCLUSIVE_MINIMUM_ADDED",
                        "EXCLUSIVE_MINIMUM_REMOVED",
                        "EXCLUSIVE_MINIMUM_INCREASED",
                        "EXCLUSIVE_MINIMUM_DECREASED",
                    ],
                ),
            ],
        );
        match (o.num("multipleOf"), u.num("multipleOf")) {
            (None, Some(_)) => self.add_at("multipleOf", "MULTIPLE_OF_ADDED"),
            (Some(_), None) => self.add_at("multipleOf", "MULTIPLE_OF_REMOVED"),
            (Some(a), Some(b)) if a != b => {
                let kind = if b != 0.0 && (a / b).fract() == 0.0 {
                    "MULTIPLE_OF_REDUCED"
                } else if a != 0.0 && (b / a).fract() == 0.0 {
                    "MULTIPLE_OF_EXPANDED"
                } else {
                    "MULTIPLE_OF_CHANGED"
                };
                self.add_at("multipleOf", kind)
            }
            _ => {}
        }
    }

    fn combined(&mut self, oc: &str, os: &[S<'a>], uc: &str, us: &[S<'a>]) {
        if oc != uc {
            let kind = match uc {
                "anyOf" => "COMBINED_TYPE_EXTENDED",
                "oneOf" if os.len() == 1 => "COMBINED_TYPE_EXTENDED",
                "allOf" if os.len() == 1 && us.len() == 1 => "COMBINED_TYPE_EXTENDED",
                _ => "COMBINED_TYPE_CHANGED",
            };
            self.add(kind);
            if kind == "COMBINED_TYPE_CHANGED" {
                return;
            }
        }
        let os = distinct(os);
        let us = distinct(us);
        if os.len() != us.len() {
            let product = uc == "allOf";
            self.add(match (os.len() < us.len(), product) {
                (true, true) => "PRODUCT_TYPE_EXTENDED",
                (true, false) => "SUM_TYPE_EXTENDED",
                (false, true) => "PRODUCT_TYPE_NARROWED",
                (false, false) => "SUM_TYPE_NARROWED",
            });
        }
        // Which pairs are compatible, and what each pair's comparison found.
        let mut edges: HashMap<(usize, usize), Vec<Difference>> = HashMap::new();
        for (i, a) in os.iter().enumerate() {
            self.within(&format!("{oc}/{i}"), |c| {
                for (j, b) in us.iter().enumerate() {
                    let (got, ok) = c.trial(|c| c.compare(Some(*a), Some(*b)));
                    if ok {
                        edges.insert((i, j), got);
                    }
                }
            });
        }
        let pairs = matching(os.len(), us.len(), |i, j| edges.contains_key(&(i, j)));
        for p in &pairs {
            if let Some(d) = edges.remove(p) {
                self.found.extend(d);
            }
        }
        if pairs.len() < os.len().min(us.len()) {
            self.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED");
        }
    }
}

/// The subschemas with repeats dropped (equal JSON, equal part).
fn distinct<'a>(subs: &[S<'a>]) -> Vec<S<'a>> {
    let mut out: Vec<S<'a>> = Vec::new();
    for s in subs {
        if !out.iter().any(|x| x.v == s.v && x.part == s.part) {
            out.push(*s);
        }
    }
    out
}

/// A maximum matching between `left` and `right` items where `edge(i, j)` (augmenting paths).
fn matching(left: usize, right: usize, edge: impl Fn(usize, usize) -> bool) -> Vec<(usize, usize)> {
    fn augment(
        i: usize,
        right: usize,
        edge: &dyn Fn(usize, usize) -> bool,
        seen: &mut [bool],
        owner: &mut [Option<usize>],
    ) -> bool {
        for j in 0..right {
            if edge(i, j) && !seen[j] {
                seen[j] = true;
                if owner[j].is_none_or(|k| augment(k, right, edge, seen, owner)) {
                    owner[j] = Some(i);
                    return true;
                }
            }
        }
        false
    }
    let mut owner = vec![None; right];
    for i in 0..left {
        let mut seen = vec![false; right];
        augment(i, right, &edge, &mut seen, &mut owner);
    }
    owner
        .iter()
        .enumerate()
        .filter_map(|(j, i)| i.map(|i| (i, j)))
        .collect()
}

#[path = "json_diff_containers.rs"]
mod containers;

#[cfg(test)]
#[path = "json_diff_tests.rs"]
mod tests;
