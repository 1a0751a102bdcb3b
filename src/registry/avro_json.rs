//! Avro data in Avro's JSON encoding, as the REST Proxy's `avro` embedded format reads and
//! writes it, to and from the Avro binary encoding. Pure.
//!
//! Avro's JSON encoding: records and maps are objects, enums their symbol, bytes and fixed
//! strings whose code points 0-255 are the bytes, and a union value is `null` for its null
//! branch, else an object with one member named after the branch it takes (`{"string": "x"}`,
//! `{"sluice.test.User": {...}}`); logical types are their underlying type's value (a uuid
//! its string). A record field missing from the JSON takes its default.

use std::collections::HashMap;

use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::schema::{InnerDecimalSchema, Name, ResolvedSchema, UuidSchema};
use apache_avro::types::Value as Avro;
use apache_avro::writer::datum::GenericDatumWriter;
use apache_avro::{Decimal, Schema};
use serde_json::{Map, Number, Value};

use super::records::SchemaValue;
use super::store::Store;

type Names<'a> = HashMap<Name, &'a Schema>;

/// An Avro schema with the named types its references define.
pub struct AvroSchema {
    main: Schema,
    refs: Vec<Schema>,
}

impl AvroSchema {
    /// `text` parsed with the texts of the schemas it references (each before those that
    /// use it).
    pub fn parse(text: &str, refs: &[String]) -> Result<AvroSchema, String> {
        if refs.is_empty() {
            let main = Schema::parse_str(text).map_err(|e| e.to_string())?;
            return Ok(AvroSchema {
                main,
                refs: Vec::new(),
            });
        }
        let (main, refs) = Schema::parse_str_with_list(text, refs).map_err(|e| e.to_string())?;
        Ok(AvroSchema { main, refs })
    }

    /// The Avro schema a stored version holds, its references resolved from `st`.
    pub fn of(st: &Store, v: &SchemaValue) -> Result<AvroSchema, String> {
        if v.schema_type != "AVRO" {
            return Err(format!(
                "schema {} is of type {}, not AVRO",
                v.id, v.schema_type
            ));
        }
        let refs = st.resolve(&v.references).map_err(|e| e.message)?;
        let texts: Vec<String> = refs.into_iter().map(|r| r.schema).collect();
        AvroSchema::parse(&v.schema, &texts)
    }

    /// Every named type the schema and its references define.
    fn resolve(&self) -> Result<(ResolvedSchema<'_>, Names<'_>), String> {
        let schemata = self.refs.iter().chain([&self.main]).collect();
        let resolved = ResolvedSchema::new_with_schemata(schemata).map_err(|e| e.to_string())?;
        let names = resolved
            .get_names()
            .iter()
            .map(|(n, s)| (n.clone(), *s))
            .collect();
        Ok((resolved, names))
    }

    /// The Avro binary encoding of `json` (Avro's JSON encoding); the error says where it
    /// does not fit.
    pub fn encode(&self, json: &Value) -> Result<Vec<u8>, String> {
        let (resolved, names) = self.resolve()?;
        let value = from_json(&self.main, &names, json, "$")?;
        GenericDatumWriter::builder(&self.main)
            .resolved_schemata(resolved)
            .build()
            .and_then(|w| w.write_value_to_vec(value))
            .map_err(|e| e.to_string())
    }

    /// `datum`, Avro binary, in Avro's JSON encoding.
    pub fn decode(&self, mut datum: &[u8]) -> Result<Value, String> {
        let (resolved, names) = self.resolve()?;
        let value = GenericDatumReader::builder(&self.main)
            .resolved_writer_schemata(resolved)
            .build()
            .and_then(|r| r.read_value(&mut datum))
            .map_err(|e| e.to_string())?;
        to_json(&self.main, &names, value)
    }
}

/// The name a union branch of this schema goes by in the JSON encoding.
fn branch_name(s: &Schema) -> String {
    match s {
        Schema::Null => "null".into(),
        Schema::Boolean => "boolean".into(),
        Schema::Int | Schema::Date | Schema::TimeMillis => "int".into(),
        Schema::Long
        | Schema::TimeMicros
        | Schema::TimestampMillis
        | Schema::TimestampMicros
        | Schema::TimestampNanos
        | Schema::LocalTimestampMillis
        | Schema::LocalTimestampMicros
        | Schema::LocalTimestampNanos => "long".into(),
        Schema::Float => "float".into(),
        Schema::Double => "double".into(),
        Schema::Bytes | Schema::BigDecimal => "bytes".into(),
        Schema::String => "string".into(),
        Schema::Array(_) => "array".into(),
        Schema::Map(_) => "map".into(),
        Schema::Union(_) => "union".into(),
        Schema::Record(r) => r.name.fullname(None),
        Schema::Enum(e) => e.name.fullname(None),
        Schema::Fixed(f) | Schema::Duration(f) => f.name.fullname(None),
        Schema::Ref { name } => name.fullname(None),
        Schema::Decimal(d) => match &d.inner {
            InnerDecimalSchema::Bytes => "bytes".into(),
            InnerDecimalSchema::Fixed(f) => f.name.fullname(None),
        },
        Schema::Uuid(u) => match u {
            UuidSchema::Bytes => "bytes".into(),
            UuidSchema::String => "string".into(),
            UuidSchema::Fixed(f) => f.name.fullname(None),
        },
    }
}

/// The bytes a JSON string of code points 0-255 stands for.
fn latin1(s: &str, at: &str) -> Result<Vec<u8>, String> {
    s.chars()
        .map(|c| u8::try_from(u32::from(c)).map_err(|_| format!("{at}: {c:?} is not a byte")))
        .collect()
}

fn latin1_text(b: &[u8]) -> Value {
    Value::String(b.iter().map(|&c| char::from(c)).collect())
}

/// Bytes of exactly `size` (a fixed type's).
fn sized(b: Vec<u8>, size: usize, at: &str) -> Result<Vec<u8>, String> {
    if b.len() != size {
        return Err(format!(
            "{at}: {} bytes, the fixed type holds {size}",
            b.len()
        ));
    }
    Ok(b)
}

fn from_json(s: &Schema, names: &Names, j: &Value, at: &str) -> Result<Avro, String> {
    let wrong = || format!("{at}: {j} is not a {}", branch_name(s));
    let int = || {
        j.as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(wrong)
    };
    let long = || j.as_i64().ok_or_else(wrong);
    let text = || j.as_str().ok_or_else(wrong);
    Ok(match s {
        Schema::Null if j.is_null() => Avro::Null,
        Schema::Boolean => Avro::Boolean(j.as_bool().ok_or_else(wrong)?),
        Schema::Int => Avro::Int(int()?),
        Schema::Date => Avro::Date(int()?),
        Schema::TimeMillis => Avro::TimeMillis(int()?),
        Schema::Long => Avro::Long(long()?),
        Schema::TimeMicros => Avro::TimeMicros(long()?),
        Schema::TimestampMillis => Avro::TimestampMillis(long()?),
        Schema::TimestampMicros => Avro::TimestampMicros(long()?),
        Schema::TimestampNanos => Avro::TimestampNanos(long()?),
        Schema::LocalTimestampMillis => Avro::LocalTimestampMillis(long()?),
        Schema::LocalTimestampMicros => Avro::LocalTimestampMicros(long()?),
        Schema::LocalTimestampNanos => Avro::LocalTimestampNanos(long()?),
        Schema::Float => Avro::Float(j.as_f64().ok_or_else(wrong)? as f32),
        Schema::Double => Avro::Double(j.as_f64().ok_or_else(wrong)?),
        Schema::Bytes => Avro::Bytes(latin1(text()?, at)?),
        Schema::String => Avro::String(text()?.to_string()),
        Schema::Fixed(f) => Avro::Fixed(f.size, sized(latin1(text()?, at)?, f.size, at)?),
        Schema::Duration(_) => {
            let b: [u8; 12] = sized(latin1(text()?, at)?, 12, at)?
                .try_into()
                .map_err(|_| wrong())?;
            Avro::Duration(apache_avro::Duration::from(b))
        }
        Schema::Decimal(d) => {
            let b = latin1(text()?, at)?;
            let b = match &d.inner {
                InnerDecimalSchema::Bytes => b,
                InnerDecimalSchema::Fixed(f) => sized(b, f.size, at)?,
            };
            Avro::Decimal(Decimal::from(b))
        }
        Schema::Uuid(UuidSchema::String) => {
            let u = apache_avro::Uuid::parse_str(text()?).map_err(|e| format!("{at}: {e}"))?;
            Avro::Uuid(u)
        }
        Schema::Uuid(_) => {
            let b = sized(latin1(text()?, at)?, 16, at)?;
            Avro::Uuid(apache_avro::Uuid::from_slice(&b).map_err(|e| format!("{at}: {e}"))?)
        }
        Schema::Enum(e) => {
            let sym = text()?;
            let pos = e.symbols.iter().position(|x| x == sym);
            let pos = pos.ok_or_else(|| format!("{at}: {sym:?} is not a symbol of {}", e.name))?;
            Avro::Enum(pos as u32, sym.to_string())
        }
        Schema::Array(a) => {
            let items = j.as_array().ok_or_else(wrong)?;
            let items = items
                .iter()
                .enumerate()
                .map(|(i, v)| from_json(&a.items, names, v, &format!("{at}[{i}]")));
            Avro::Array(items.collect::<Result<_, _>>()?)
        }
        Schema::Map(m) => {
            let o = j.as_object().ok_or_else(wrong)?;
            let entries = o.iter().map(|(k, v)| {
                let v = from_json(&m.types, names, v, &format!("{at}.{k}"))?;
                Ok((k.clone(), v))
            });
            Avro::Map(entries.collect::<Result<_, String>>()?)
        }
        Schema::Record(r) => {
            let o = j.as_object().ok_or_else(wrong)?;
            let mut fields = Vec::with_capacity(r.fields.len());
            for f in &r.fields {
                let at = format!("{at}.{}", f.name);
                let v = match (o.get(&f.name), &f.default) {
                    (Some(v), _) => from_json(&f.schema, names, v, &at)?,
                    (None, Some(d)) => default(&f.schema, names, d, &at)?,
                    (None, None) => return Err(format!("{at}: missing, and it has no default")),
                };
                fields.push((f.name.clone(), v));
            }
            Avro::Record(fields)
        }
        Schema::Union(u) => {
            let branches = u.variants();
            if j.is_null()
                && let Some(i) = branches.iter().position(|b| matches!(b, Schema::Null))
            {
                return Ok(Avro::Union(i as u32, Box::new(Avro::Null)));
            }
            let Some((name, v)) = j
                .as_object()
                .filter(|o| o.len() == 1)
                .and_then(|o| o.iter().next())
            else {
                return Err(format!(
                    "{at}: {j} is not a union value ({{\"<branch>\": value}} or null)"
                ));
            };
            let i = branches
                .iter()
                .position(|b| branch_name(b) == *name)
                .ok_or_else(|| format!("{at}: the union has no branch {name:?}"))?;
            Avro::Union(i as u32, Box::new(from_json(&branches[i], names, v, at)?))
        }
        Schema::Ref { name } => {
            let s = names
                .get(name)
                .ok_or_else(|| format!("{at}: unknown type {name}"))?;
            return from_json(s, names, j, at);
        }
        _ => return Err(wrong()),
    })
}

/// A field's default: a union's is a value of its first branch, not wrapped.
fn default(s: &Schema, names: &Names, d: &Value, at: &str) -> Result<Avro, String> {
    match s {
        Schema::Union(u) => {
            let first = u
                .variants()
                .first()
                .ok_or_else(|| format!("{at}: empty union"))?;
            Ok(Avro::Union(0, Box::new(from_json(first, names, d, at)?)))
        }
        s => from_json(s, names, d, at),
    }
}

fn number(f: f64) -> Value {
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

fn to_json(s: &Schema, names: &Names, v: Avro) -> Result<Value, String> {
    let s = match s {
        Schema::Ref { name } => *names
            .get(name)
            .ok_or_else(|| format!("unknown type {name}"))?,
        s => s,
    };
    Ok(match (s, v) {
        (_, Avro::Null) => Value::Null,
        (_, Avro::Boolean(b)) => Value::Bool(b),
        (_, Avro::Int(n) | Avro::Date(n) | Avro::TimeMillis(n)) => n.into(),
        (
            _,
            Avro::Long(n)
            | Avro::TimeMicros(n)
            | Avro::TimestampMillis(n)
            | Avro::TimestampMicros(n)
            | Avro::TimestampNanos(n)
            | Avro::LocalTimestampMillis(n)
            | Avro::LocalTimestampMicros(n)
            | Avro::LocalTimestampNanos(n),
        ) => n.into(),
        (_, Avro::Float(f)) => number(f64::from(f)),
        (_, Avro::Double(f)) => number(f),
        (_, Avro::Bytes(b) | Avro::Fixed(_, b)) => latin1_text(&b),
        (_, Avro::String(t)) => Value::String(t),
        (_, Avro::Enum(_, sym)) => Value::String(sym),
        (Schema::Uuid(UuidSchema::String), Avro::Uuid(u)) => Value::String(u.to_string()),
        (_, Avro::Uuid(u)) => latin1_text(u.as_bytes()),
        (_, Avro::Decimal(d)) => latin1_text(&Vec::<u8>::try_from(&d).map_err(|e| e.to_string())?),
        (_, Avro::Duration(d)) => latin1_text(&<[u8; 12]>::from(d)),
        (Schema::Array(a), Avro::Array(items)) => Value::Array(
            items
                .into_iter()
                .map(|v| to_json(&a.items, names, v))
                .collect::<Result<_, _>>()?,
        ),
        (Schema::Map(m), Avro::Map(entries)) => {
            let mut o = Map::new();
            for (k, v) in entries {
                o.insert(k, to_json(&m.types, names, v)?);
            }
            Value::Object(o)
        }
        (Schema::Record(r), Avro::Record(fields)) => {
            let mut o = Map::new();
            for ((name, v), f) in fields.into_iter().zip(&r.fields) {
                o.insert(name, to_json(&f.schema, names, v)?);
            }
            Value::Object(o)
        }
        (Schema::Union(u), Avro::Union(i, v)) => {
            let branch = u
                .variants()
                .get(i as usize)
                .ok_or_else(|| format!("union branch {i} out of range"))?;
            match *v {
                Avro::Null => Value::Null,
                v => {
                    let mut o = Map::new();
                    o.insert(branch_name(branch), to_json(branch, names, v)?);
                    Value::Object(o)
                }
            }
        }
        (s, v) => return Err(format!("a {v:?} value under {}", branch_name(s))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(text: &str) -> AvroSchema {
        AvroSchema::parse(text, &[]).unwrap()
    }

    #[test]
    fn json_round_trips_through_the_binary_encoding() {
        let s = schema(
            r#"{"type": "record", "name": "User", "namespace": "sluice.test", "fields": [
                {"name": "name", "type": "string"},
                {"name": "age", "type": "int", "default": 0},
                {"name": "email", "type": ["null", "string"], "default": null},
                {"name": "tags", "type": {"type": "array", "items": "string"}},
                {"name": "scores", "type": {"type": "map", "values": "double"}},
                {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
                {"name": "raw", "type": "bytes"},
                {"name": "id", "type": {"type": "string", "logicalType": "uuid"},
                 "default": "00000000-0000-0000-0000-000000000000"},
                {"name": "next", "type": ["null", "User"], "default": null}
            ]}"#,
        );
        let v = json!({"name": "ada", "age": 36, "email": {"string": "a@x"}, "tags": ["x"],
                       "scores": {"m": 1.5}, "kind": "B", "raw": "\u{0}\u{ff}",
                       "id": "67e55044-10b1-426f-9247-bb680e5fe0c8",
                       "next": {"sluice.test.User": {"name": "bo", "tags": [], "scores": {},
                                "kind": "A", "raw": ""}}});
        let bin = s.encode(&v).unwrap();
        let back = s.decode(&bin).unwrap();
        assert_eq!(back["name"], "ada");
        assert_eq!(back["email"], json!({"string": "a@x"}));
        assert_eq!(back["raw"], "\u{0}\u{ff}");
        assert_eq!(back["id"], "67e55044-10b1-426f-9247-bb680e5fe0c8");
        // defaults filled in: age 0, email null
        let next = &back["next"]["sluice.test.User"];
        assert_eq!((&next["age"], &next["email"]), (&json!(0), &Value::Null));
        assert_eq!(next["next"], Value::Null);
        assert_eq!(back, s.decode(&s.encode(&back).unwrap()).unwrap());
        // the encoding is Avro's binary one: a string is its zig-zag length, then its bytes
        assert_eq!(
            schema(r#""string""#).encode(&json!("hi")).unwrap(),
            b"\x04hi"
        );
    }

    #[test]
    fn values_that_do_not_fit_say_where() {
        let s = schema(
            r#"{"type": "record", "name": "R", "fields": [
            {"name": "n", "type": "int"}, {"name": "u", "type": ["null", "string"]}]}"#,
        );
        let e = s.encode(&json!({"n": "x", "u": null})).unwrap_err();
        assert!(e.contains("$.n"), "{e}");
        let e = s.encode(&json!({"n": 1, "u": "bare"})).unwrap_err();
        assert!(e.contains("$.u"), "{e}");
        let e = s.encode(&json!({"u": null})).unwrap_err();
        assert!(e.contains("$.n: missing"), "{e}");
        assert!(s.encode(&json!({"n": 1u64 << 40, "u": null})).is_err());
        assert!(schema(r#""bytes""#).encode(&json!("\u{100}")).is_err());
        assert!(schema(r#""string""#).encode(&Value::Null).is_err());
    }

    #[test]
    fn named_types_come_from_references() {
        let address = r#"{"type": "record", "name": "Address", "namespace": "a",
                          "fields": [{"name": "city", "type": "string"}]}"#;
        let s = AvroSchema::parse(
            r#"{"type": "record", "name": "P", "fields": [{"name": "home", "type": "a.Address"}]}"#,
            &[address.to_string()],
        )
        .unwrap();
        let v = json!({"home": {"city": "Oslo"}});
        assert_eq!(s.decode(&s.encode(&v).unwrap()).unwrap(), v);
    }
}
