//! The rules for objects (properties under open, closed and partially open content models,
//! required properties, dependencies, `additionalProperties`, property counts) and arrays
//! (`items` as one schema or a tuple, `additionalItems`, item counts, `uniqueItems`).

use std::collections::HashSet;

use serde_json::Value;

use super::Ctx;
use crate::registry::json_shape::{S, Shape, items, open, partial, shape};

const PROPERTY_ADDED_COVERED: [&str; 2] = [
    "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
];
const PROPERTY_REMOVED_COVERED: [&str; 2] = [
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
];
const ITEM_ADDED_COVERED: [&str; 2] = [
    "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
];
const ITEM_REMOVED_COVERED: [&str; 2] = [
    "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
];

impl<'a> Ctx<'a> {
    pub(super) fn objects(&mut self, o: S<'a>, u: S<'a>) {
        let props = |s: &S<'a>| s.get("properties").and_then(Value::as_object);
        let required = |s: &S<'a>, k: &str| {
            s.get("required")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().any(|x| x.as_str() == Some(k)))
        };
        let has_default = |s: Option<&Value>| s.is_some_and(|v| v.get("default").is_some());
        let (op, up) = (props(&o), props(&u));
        // required
        self.within("required", |c| {
            for k in op.into_iter().flat_map(|m| m.keys()) {
                let Some(us) = up.and_then(|m| m.get(k)) else {
                    continue;
                };
                match (required(&o, k), required(&u, k)) {
                    (true, false) => c.add_at(k, "REQUIRED_ATTRIBUTE_REMOVED"),
                    (false, true) if has_default(Some(us)) => {
                        c.add_at(k, "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED")
                    }
                    (false, true) => c.add_at(k, "REQUIRED_ATTRIBUTE_ADDED"),
                    _ => {}
                }
            }
        });
        // properties
        let mut keys: Vec<&String> = op.into_iter().chain(up).flat_map(|m| m.keys()).collect();
        keys.sort();
        keys.dedup();
        self.within("properties", |c| {
            for k in keys {
                let os = op.and_then(|m| m.get(k));
                let us = up.and_then(|m| m.get(k));
                c.within(k, |c| match (os, us) {
                    (Some(a), None) => {
                        if open(&u) {
                            c.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL");
                        } else if let Some(p) = partial(&u, k) {
                            c.covered(o.sub(a), p, PROPERTY_REMOVED_COVERED);
                        } else if *a == Value::Bool(false) {
                            c.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL");
                        } else {
                            c.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL");
                        }
                    }
                    (None, Some(b)) => {
                        if open(&o) {
                            c.add(if matches!(shape(u.sub(b)), Shape::Empty) {
                                "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                            } else {
                                "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"
                            });
                            return;
                        }
                        if let Some(p) = partial(&o, k) {
                            c.covered(p, u.sub(b), PROPERTY_ADDED_COVERED);
                        }
                        c.add(match (required(&u, k), has_default(Some(b))) {
                            (true, true) => {
                                "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
                            }
                            (true, false) => "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
                            _ => "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
                        });
                    }
                    (Some(a), Some(b)) => c.compare(Some(o.sub(a)), Some(u.sub(b))),
                    (None, None) => {}
                });
            }
        });
        self.dependencies(o, u);
        // additionalProperties
        self.within("additionalProperties", |c| {
            let (oa, ua) = (o.get("additionalProperties"), u.get("additionalProperties"));
            let permits = |a: Option<&Value>| a != Some(&Value::Bool(false));
            let schema = |a: Option<&'a Value>| a.filter(|v| v.is_object());
            if permits(oa) != permits(ua) {
                c.add(if permits(ua) {
                    "ADDITIONAL_PROPERTIES_ADDED"
                } else {
                    "ADDITIONAL_PROPERTIES_REMOVED"
                });
            } else {
                match (schema(oa), schema(ua)) {
                    (None, Some(_)) => c.add("ADDITIONAL_PROPERTIES_NARROWED"),
                    (Some(_), None) => c.add("ADDITIONAL_PROPERTIES_EXTENDED"),
                    (Some(a), Some(b)) => c.compare(Some(o.sub(a)), Some(u.sub(b))),
                    (None, None) => {}
                }
            }
        });
        self.bounds(
            o,
            u,
            &[
                (
                    "maxProperties",
                    [
                        "MAX_PROPERTIES_ADDED",
                        "MAX_PROPERTIES_REMOVED",
                        "MAX_PROPERTIES_INCREASED",
                        "MAX_PROPERTIES_DECREASED",
                    ],
                ),
                (
                    "minProperties",
                    [
                        "MIN_PROPERTIES_ADDED",
                        "MIN_PROPERTIES_REMOVED",
                        "MIN_PROPERTIES_INCREASED",
                        "MIN_PROPERTIES_DECREASED",
                    ],
                ),
            ],
        );
    }

    /// `dependencies` (arrays and schemas) and their 2019-09 forms `dependentRequired` and
    /// `dependentSchemas`.
    pub(super) fn dependencies(&mut self, o: S<'a>, u: S<'a>) {
        let deps = |s: &S<'a>, arrays: bool| -> Vec<(&'a String, &'a Value)> {
            let mut out = Vec::new();
            for key in ["dependencies", "dependentRequired", "dependentSchemas"] {
                for (k, v) in s.get(key).and_then(Value::as_object).into_iter().flatten() {
                    if v.is_array() == arrays {
                        out.push((k, v));
                    }
                }
            }
            out
        };
        self.within("dependencies", |c| {
            for arrays in [true, false] {
                let (od, ud) = (deps(&o, arrays), deps(&u, arrays));
                let mut keys: Vec<&String> = od.iter().chain(&ud).map(|(k, _)| *k).collect();
                keys.sort();
                keys.dedup();
                for k in keys {
                    let find = |d: &[(&'a String, &'a Value)]| {
                        d.iter().find(|(x, _)| *x == k).map(|(_, v)| *v)
                    };
                    c.within(k, |c| match (find(&od), find(&ud), arrays) {
                        (Some(_), None, true) => c.add("DEPENDENCY_ARRAY_REMOVED"),
                        (None, Some(_), true) => c.add("DEPENDENCY_ARRAY_ADDED"),
                        (Some(_), None, false) => c.add("DEPENDENCY_SCHEMA_REMOVED"),
                        (None, Some(_), false) => c.add("DEPENDENCY_SCHEMA_ADDED"),
                        (Some(a), Some(b), true) => {
                            let set = |v: &'a Value| -> HashSet<&'a Value> {
                                v.as_array().into_iter().flatten().collect()
                            };
                            let (a, b) = (set(a), set(b));
                            if a != b {
                                c.add(if b.is_superset(&a) {
                                    "DEPENDENCY_ARRAY_EXTENDED"
                                } else if a.is_superset(&b) {
                                    "DEPENDENCY_ARRAY_NARROWED"
                                } else {
                                    "DEPENDENCY_ARRAY_CHANGED"
                                });
                            }
                        }
                        (Some(a), Some(b), false) => c.compare(Some(o.sub(a)), Some(u.sub(b))),
                        (None, None, _) => {}
                    });
                }
            }
        });
    }

    pub(super) fn arrays(&mut self, o: S<'a>, u: S<'a>) {
        self.bounds(
            o,
            u,
            &[
                (
                    "maxItems",
                    [
                        "MAX_ITEMS_ADDED",
                        "MAX_ITEMS_REMOVED",
                        "MAX_ITEMS_INCREASED",
                        "MAX_ITEMS_DECREASED",
                    ],
                ),
                (
                    "minItems",
                    [
                        "MIN_ITEMS_ADDED",
                        "MIN_ITEMS_REMOVED",
                        "MIN_ITEMS_INCREASED",
                        "MIN_ITEMS_DECREASED",
                    ],
                ),
            ],
        );
        let unique = |s: &S<'a>| s.get("uniqueItems") == Some(&Value::Bool(true));
        match (unique(&o), unique(&u)) {
            (false, true) => self.add_at("uniqueItems", "UNIQUE_ITEMS_ADDED"),
            (true, false) => self.add_at("uniqueItems", "UNIQUE_ITEMS_REMOVED"),
            _ => {}
        }
        let (ot, oa) = items(&o);
        let (ut, ua) = (items(&u).0, items(&u).1);
        // additionalItems (the schema for items past a tuple, or for all items)
        self.within("additionalItems", |c| {
            let permits = |a: Option<&Value>| a != Some(&Value::Bool(false));
            let schema = |a: Option<&'a Value>| a.filter(|v| v.is_object());
            if ot.is_some() || ut.is_some() {
                if permits(oa) != permits(ua) {
                    c.add(if permits(ua) {
                        "ADDITIONAL_ITEMS_ADDED"
                    } else {
                        "ADDITIONAL_ITEMS_REMOVED"
                    });
                    return;
                }
                match (schema(oa), schema(ua)) {
                    (None, Some(_)) => c.add("ADDITIONAL_ITEMS_NARROWED"),
                    (Some(_), None) => c.add("ADDITIONAL_ITEMS_EXTENDED"),
                    (Some(a), Some(b)) => c.compare(Some(o.sub(a)), Some(u.sub(b))),
                    (None, None) => {}
                }
            }
        });
        if ot.is_none() && ut.is_none() {
            let all = |a: Option<&'a Value>, s: &S<'a>| a.map(|v| s.sub(v));
            self.within("items", |c| c.compare(all(oa, &o), all(ua, &u)));
            return;
        }
        let (ot, ut) = (ot.unwrap_or(&[]), ut.unwrap_or(&[]));
        let is_open = |a: Option<&Value>| a.is_none() || a == Some(&Value::Bool(true));
        self.within("items", |c| {
            for i in 0..ot.len().max(ut.len()) {
                c.within(&i.to_string(), |c| match (ot.get(i), ut.get(i)) {
                    (Some(a), None) => {
                        if is_open(ua) {
                            c.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL");
                        } else if let Some(p) = ua.filter(|v| v.is_object()) {
                            c.covered(o.sub(a), u.sub(p), ITEM_REMOVED_COVERED);
                        } else if *a == Value::Bool(false) {
                            c.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL");
                        } else {
                            c.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL");
                        }
                    }
                    (None, Some(b)) => {
                        if is_open(oa) {
                            c.add(if matches!(shape(u.sub(b)), Shape::Empty) {
                                "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                            } else {
                                "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"
                            });
                        } else if let Some(p) = oa.filter(|v| v.is_object()) {
                            c.covered(o.sub(p), u.sub(b), ITEM_ADDED_COVERED);
                        } else {
                            c.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL");
                        }
                    }
                    (Some(a), Some(b)) => c.compare(Some(o.sub(a)), Some(u.sub(b))),
                    (None, None) => {}
                });
            }
        });
    }
}
