//! Protobuf schemas: parsing and compatibility as Confluent's Schema Registry defines them.
//! Pure.
//!
//! A schema is a `.proto` text, or (as confluent-kafka's serializers register it) a
//! base64-encoded `FileDescriptorProto`. It compiles with `protox`: an `import` is resolved
//! from the referenced schema whose reference name it gives, or else from the well-known
//! types (`google/protobuf/timestamp.proto` and the rest) that protox carries.
//!
//! Compatibility compares two compiled files as Confluent's `SchemaDiff` does: messages and
//! enums by name (nested ones inside their parent), fields by number, oneofs by name. Each
//! difference has a kind named as Confluent names it; the kinds in [`COMPATIBLE`] are
//! allowed, every other one makes the new schema incompatible. BACKWARD diffs the old
//! schema (original) against the new one (update); FORWARD the new against the old.
//! - Fields: adding or removing an optional field, renaming one, and moving one field into a
//!   new oneof are compatible; adding or removing a `required` one is not. A field's type may
//!   change only within the wire-compatible groups (int32/uint32/int64/uint64/bool and enums,
//!   sint32/sint64, fixed32/sfixed32, fixed64/sfixed64, string/bytes): a change of group is
//!   FIELD_SCALAR_KIND_CHANGED, one between scalar, message and map FIELD_KIND_CHANGED, and a
//!   message field whose type has another name (outside its package), or whose message type
//!   itself changed incompatibly, FIELD_NAMED_TYPE_CHANGED.
//! - Oneofs: adding or removing a oneof and adding a field to one are compatible; removing a
//!   field from one, moving several existing fields into one, or moving a field into a oneof
//!   that already held others are not.
//! - Messages: adding one, reordering them are compatible; removing one is not. Enums and
//!   their constants may be added, removed and renamed.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use prost_reflect::prost::Message as _;
use prost_reflect::prost_types;
use prost_reflect::{Cardinality, EnumDescriptor, FieldDescriptor, FileDescriptor, Kind};
use prost_reflect::{MessageDescriptor, OneofDescriptor};
use protox::file::{File, FileResolver, GoogleFileResolver};

use super::records::Referenced;

/// The name a schema given as text compiles under.
const MAIN: &str = "schema.proto";

/// The kinds of difference that leave a new schema compatible, as in Confluent's
/// `SchemaDiff.COMPATIBLE_CHANGES`.
pub const COMPATIBLE: [&str; 14] = [
    "MESSAGE_ADDED",
    "MESSAGE_MOVED",
    "ENUM_ADDED",
    "ENUM_REMOVED",
    "ENUM_CONST_ADDED",
    "ENUM_CONST_CHANGED",
    "ENUM_CONST_REMOVED",
    "FIELD_ADDED",
    "FIELD_REMOVED",
    "FIELD_NAME_CHANGED",
    "FIELD_STRING_OR_BYTES_LABEL_CHANGED",
    "ONEOF_ADDED",
    "ONEOF_REMOVED",
    "ONEOF_FIELD_ADDED",
];

/// The `FileDescriptorProto` a base64 text encodes; None when the text is not one (a
/// `.proto` text always holds a space or a `;`, which base64 never does).
fn descriptor(text: &str) -> Option<prost_types::FileDescriptorProto> {
    let t = text.trim();
    if t.is_empty() || t.contains(|c: char| c.is_whitespace() || c == ';') {
        return None;
    }
    let bytes = STANDARD.decode(t).ok()?;
    prost_types::FileDescriptorProto::decode(bytes.as_slice()).ok()
}

fn open(name: &str, text: &str) -> Result<File, protox::Error> {
    match descriptor(text) {
        Some(mut d) => {
            d.name = Some(name.to_string());
            Ok(File::from_file_descriptor_proto(d))
        }
        None => File::from_source(name, text),
    }
}

/// Files by name: the schema itself, its references, then the well-known types.
struct Files {
    main: (String, String),
    refs: Vec<Referenced>,
    google: GoogleFileResolver,
}

impl FileResolver for Files {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        if name == self.main.0 {
            return open(name, &self.main.1);
        }
        match self.refs.iter().rev().find(|r| r.name == name) {
            Some(r) => open(name, &r.schema),
            None => self.google.open_file(name),
        }
    }
}

/// `schema` compiled with the schemas it references; the error says why it is invalid.
pub fn compile(schema: &str, refs: &[Referenced]) -> Result<FileDescriptor, String> {
    let name = descriptor(schema)
        .and_then(|d| d.name)
        .filter(|n| !n.is_empty() && !refs.iter().any(|r| &r.name == n))
        .unwrap_or_else(|| MAIN.to_string());
    let mut compiler = protox::Compiler::with_file_resolver(Files {
        main: (name.clone(), schema.to_string()),
        refs: refs.to_vec(),
        google: GoogleFileResolver::new(),
    });
    compiler.include_imports(true);
    compiler.open_file(&name).map_err(|e| e.to_string())?;
    compiler
        .descriptor_pool()
        .get_file_by_name(&name)
        .ok_or_else(|| format!("{name} did not compile"))
}

/// Data in Confluent's Protobuf wire format after the schema id: the message indexes (a
/// zigzag varint count, then that many zigzag varints: the path to the message among the
/// file's top-level messages and their nested ones; a count of 0 stands for the first
/// message), then the message's own bytes. The message as JSON (proto3 JSON mapping).
pub fn decode(file: &FileDescriptor, mut data: &[u8]) -> Result<serde_json::Value, String> {
    let count = zigzag(&mut data)?;
    let path = if count == 0 {
        vec![0]
    } else {
        if !(1..=64).contains(&count) {
            return Err(format!("{count} message indexes"));
        }
        (0..count)
            .map(|_| zigzag(&mut data))
            .collect::<Result<Vec<_>, _>>()?
    };
    let mut message: Option<MessageDescriptor> = None;
    for &i in &path {
        let found = usize::try_from(i).ok().and_then(|i| match &message {
            None => file.messages().nth(i),
            Some(m) => m.child_messages().nth(i),
        });
        message = Some(found.ok_or_else(|| format!("no message at indexes {path:?}"))?);
    }
    let message = message.ok_or("no message indexes")?;
    let value = prost_reflect::DynamicMessage::decode(message, data).map_err(|e| e.to_string())?;
    serde_json::to_value(&value).map_err(|e| e.to_string())
}

/// One zigzag varint, consumed from the front of `data`.
fn zigzag(data: &mut &[u8]) -> Result<i64, String> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = data.split_first().ok_or("truncated message indexes")?;
        *data = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok((v >> 1) as i64 ^ -((v & 1) as i64));
        }
    }
    Err("a message index longer than 10 bytes".into())
}

/// The base64 `FileDescriptorProto` of a schema (what `?format=serialized` serves and
/// confluent-kafka's deserializers read); None when it does not compile.
pub fn serialized(schema: &str, refs: &[Referenced]) -> Option<String> {
    if descriptor(schema).is_some() {
        return Some(schema.trim().to_string());
    }
    let file = compile(schema, refs).ok()?;
    Some(STANDARD.encode(file.file_descriptor_proto().encode_to_vec()))
}

pub use super::difference::Difference;

/// Whether `d` leaves a new schema compatible.
fn compatible(d: &Difference) -> bool {
    d.allowed_by(&COMPATIBLE)
}

/// What `d` means, in the words of a verbose compatibility answer.
pub fn description(d: &Difference) -> String {
    let what = match d.kind {
        "PACKAGE_CHANGED" => "The package changed",
        "MESSAGE_REMOVED" => "A message in the old schema is missing from the new one",
        "FIELD_KIND_CHANGED" => {
            "The kind (scalar, message or map) of a field changed in the new schema"
        }
        "FIELD_SCALAR_KIND_CHANGED" => {
            "The scalar type of a field changed to one that is not wire-compatible"
        }
        "FIELD_NAMED_TYPE_CHANGED" => "The message type of a field changed to an incompatible one",
        "REQUIRED_FIELD_ADDED" => "A required field was added in the new schema",
        "REQUIRED_FIELD_REMOVED" => "A required field of the old schema was removed",
        "ONEOF_FIELD_REMOVED" => "A field was removed from a oneof",
        "MULTIPLE_FIELDS_MOVED_TO_ONEOF" => {
            "More than one existing field was moved into a new oneof"
        }
        "FIELD_MOVED_TO_EXISTING_ONEOF" => "An existing field was moved into an existing oneof",
        _ => "The schema changed",
    };
    format!("{what} at path {}", d.path)
}

/// Every difference of `update` from `original`, compatible ones included.
pub fn differences(original: &FileDescriptor, update: &FileDescriptor) -> Vec<Difference> {
    let mut d = Diff::default();
    if original.package_name() != update.package_name() {
        d.add("PACKAGE_CHANGED", "#/".into());
    }
    d.types(
        "",
        original.messages().collect(),
        original.enums().collect(),
        update.messages().collect(),
        update.enums().collect(),
    );
    d.out
}

/// The incompatible differences of `update` from `original`.
pub fn incompatible(original: &FileDescriptor, update: &FileDescriptor) -> Vec<Difference> {
    let mut all = differences(original, update);
    all.retain(|d| !compatible(d));
    all
}

#[derive(Default)]
struct Diff {
    out: Vec<Difference>,
    /// Message pairs compared or being compared, by full names: whether they are
    /// compatible (a pair under comparison counts as compatible, which ends recursion).
    compared: HashMap<(String, String), bool>,
}

/// A field's type as the comparison sees it.
enum Type {
    /// A scalar or an enum, by its wire-compatible group.
    Scalar(&'static str),
    Message(MessageDescriptor),
    Map(Box<Type>, Box<Type>),
}

fn scalar_group(kind: &Kind) -> Option<&'static str> {
    Some(match kind {
        Kind::Int32 | Kind::Int64 | Kind::Uint32 | Kind::Uint64 | Kind::Bool | Kind::Enum(_) => {
            "GENERAL_NUMBER"
        }
        Kind::Sint32 | Kind::Sint64 => "SIGNED_NUMBER",
        Kind::String | Kind::Bytes => "STRING_OR_BYTES",
        Kind::Fixed32 | Kind::Sfixed32 => "FIXED32",
        Kind::Fixed64 | Kind::Sfixed64 => "FIXED64",
        Kind::Float => "FLOAT",
        Kind::Double => "DOUBLE",
        Kind::Message(_) => return None,
    })
}

fn type_of_kind(kind: Kind) -> Type {
    if let Some(g) = scalar_group(&kind) {
        return Type::Scalar(g);
    }
    let Kind::Message(m) = kind else {
        unreachable!("every kind but a message has a scalar group")
    };
    if m.is_map_entry() {
        let key = m.map_entry_key_field().kind();
        let value = m.map_entry_value_field().kind();
        return Type::Map(Box::new(type_of_kind(key)), Box::new(type_of_kind(value)));
    }
    Type::Message(m)
}

/// A message's name inside its package, as Confluent compares named types.
fn local_name(m: &MessageDescriptor) -> &str {
    let package = m.package_name();
    let full = m.full_name();
    if package.is_empty() {
        full
    } else {
        full.strip_prefix(package)
            .and_then(|n| n.strip_prefix('.'))
            .unwrap_or(full)
    }
}

/// The oneof a field belongs to, proto3 `optional`'s synthetic oneofs aside.
fn real_oneof(f: &FieldDescriptor) -> Option<OneofDescriptor> {
    f.containing_oneof().filter(|o| !o.is_synthetic())
}

fn required(f: &FieldDescriptor) -> bool {
    f.cardinality() == Cardinality::Required
}

fn join(scope: &str, name: &str) -> String {
    if scope.is_empty() {
        name.to_string()
    } else {
        format!("{scope}.{name}")
    }
}

impl Diff {
    fn add(&mut self, kind: &'static str, path: String) {
        self.out.push(Difference { kind, path });
    }

    /// Messages and enums declared side by side (in a file or a message), by name.
    fn types(
        &mut self,
        scope: &str,
        om: Vec<MessageDescriptor>,
        oe: Vec<EnumDescriptor>,
        um: Vec<MessageDescriptor>,
        ue: Vec<EnumDescriptor>,
    ) {
        let by_name = |ms: Vec<MessageDescriptor>| -> BTreeMap<String, (usize, MessageDescriptor)> {
            ms.into_iter()
                .filter(|m| !m.is_map_entry())
                .enumerate()
                .map(|(i, m)| (m.name().to_string(), (i, m)))
                .collect()
        };
        let (om, um) = (by_name(om), by_name(um));
        let names: BTreeSet<&String> = om.keys().chain(um.keys()).collect();
        for name in names {
            let path = join(scope, name);
            match (om.get(name), um.get(name)) {
                (Some(_), None) => self.add("MESSAGE_REMOVED", format!("#/{path}")),
                (None, Some(_)) => self.add("MESSAGE_ADDED", format!("#/{path}")),
                (Some((oi, o)), Some((ui, u))) => {
                    self.message(&path, o, u);
                    if oi != ui {
                        self.add("MESSAGE_MOVED", format!("#/{path}"));
                    }
                }
                (None, None) => {}
            }
        }
        let by_name = |es: Vec<EnumDescriptor>| -> BTreeMap<String, EnumDescriptor> {
            es.into_iter().map(|e| (e.name().to_string(), e)).collect()
        };
        let (oe, ue) = (by_name(oe), by_name(ue));
        let names: BTreeSet<&String> = oe.keys().chain(ue.keys()).collect();
        for name in names {
            let path = format!("#/{}", join(scope, name));
            match (oe.get(name), ue.get(name)) {
                (Some(_), None) => self.add("ENUM_REMOVED", path),
                (None, Some(_)) => self.add("ENUM_ADDED", path),
                (Some(o), Some(u)) => self.enumeration(&path, o, u),
                (None, None) => {}
            }
        }
    }

    fn enumeration(&mut self, path: &str, o: &EnumDescriptor, u: &EnumDescriptor) {
        let by_number = |e: &EnumDescriptor| -> BTreeMap<i32, String> {
            e.values()
                .map(|v| (v.number(), v.name().to_string()))
                .collect()
        };
        let (ov, uv) = (by_number(o), by_number(u));
        let numbers: BTreeSet<&i32> = ov.keys().chain(uv.keys()).collect();
        for n in numbers {
            let at = format!("{path}/{n}");
            match (ov.get(n), uv.get(n)) {
                (Some(_), None) => self.add("ENUM_CONST_REMOVED", at),
                (None, Some(_)) => self.add("ENUM_CONST_ADDED", at),
                (Some(a), Some(b)) if a != b => self.add("ENUM_CONST_CHANGED", at),
                _ => {}
            }
        }
    }

    /// Compares two messages of the same name; whether they are compatible.
    fn message(&mut self, path: &str, o: &MessageDescriptor, u: &MessageDescriptor) -> bool {
        let key = (o.full_name().to_string(), u.full_name().to_string());
        if let Some(ok) = self.compared.get(&key) {
            return *ok;
        }
        self.compared.insert(key.clone(), true);
        let start = self.out.len();
        let at = |tail: &dyn std::fmt::Display| format!("#/{path}/{tail}");

        let fields = |m: &MessageDescriptor| -> BTreeMap<u32, FieldDescriptor> {
            m.fields().map(|f| (f.number(), f)).collect()
        };
        let (o_all, u_all) = (fields(o), fields(u));
        let oneof_of = |all: &BTreeMap<u32, FieldDescriptor>| -> BTreeMap<u32, String> {
            all.iter()
                .filter_map(|(n, f)| real_oneof(f).map(|x| (*n, x.name().to_string())))
                .collect()
        };
        let (o_oneof, u_oneof) = (oneof_of(&o_all), oneof_of(&u_all));
        let mut o_top: BTreeMap<u32, &FieldDescriptor> = o_all
            .iter()
            .filter(|(n, _)| !o_oneof.contains_key(n))
            .map(|(n, f)| (*n, f))
            .collect();
        let u_top: BTreeMap<u32, &FieldDescriptor> = u_all
            .iter()
            .filter(|(n, _)| !u_oneof.contains_key(n))
            .map(|(n, f)| (*n, f))
            .collect();

        let oneofs = |m: &MessageDescriptor| -> BTreeMap<String, OneofDescriptor> {
            m.oneofs()
                .filter(|x| !x.is_synthetic())
                .map(|x| (x.name().to_string(), x))
                .collect()
        };
        let (oo, uo) = (oneofs(o), oneofs(u));
        for (name, x) in &uo {
            let (mut moved, mut existing) = (0, 0);
            for f in x.fields() {
                if o_top.remove(&f.number()).is_some() {
                    moved += 1;
                } else if o_oneof.contains_key(&f.number()) {
                    existing += 1;
                }
            }
            if moved > 1 {
                self.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF", at(name));
            } else if moved == 1 && existing > 0 {
                self.add("FIELD_MOVED_TO_EXISTING_ONEOF", at(name));
            }
        }
        let names: BTreeSet<&String> = oo.keys().chain(uo.keys()).collect();
        for name in names {
            match (oo.get(name), uo.get(name)) {
                (Some(_), None) => self.add("ONEOF_REMOVED", at(name)),
                (None, Some(_)) => self.add("ONEOF_ADDED", at(name)),
                (Some(a), Some(b)) => {
                    let numbers = |x: &OneofDescriptor| -> BTreeSet<u32> {
                        x.fields().map(|f| f.number()).collect()
                    };
                    let (an, bn) = (numbers(a), numbers(b));
                    for n in an.union(&bn) {
                        let p = format!("#/{path}/{name}/{n}");
                        match (an.contains(n), bn.contains(n)) {
                            (true, false) => self.add("ONEOF_FIELD_REMOVED", p),
                            (false, true) => self.add("ONEOF_FIELD_ADDED", p),
                            _ => self.field(&p, &o_all[n], &u_all[n]),
                        }
                    }
                }
                (None, None) => {}
            }
        }

        let numbers: BTreeSet<u32> = o_top.keys().chain(u_top.keys()).copied().collect();
        for n in numbers {
            let p = at(&n);
            match (o_top.get(&n), u_top.get(&n)) {
                (Some(f), None) if required(f) => self.add("REQUIRED_FIELD_REMOVED", p),
                (Some(_), None) => self.add("FIELD_REMOVED", p),
                (None, Some(f)) if required(f) => self.add("REQUIRED_FIELD_ADDED", p),
                (None, Some(_)) => self.add("FIELD_ADDED", p),
                (Some(a), Some(b)) => self.field(&p, a, b),
                (None, None) => {}
            }
        }
        // A field that moved into, out of or between oneofs is still compared by content.
        for (n, a) in &o_all {
            let Some(b) = u_all.get(n) else { continue };
            let (x, y) = (o_oneof.get(n), u_oneof.get(n));
            if x.is_none() && y.is_none() || x.is_some() && x == y {
                continue;
            }
            self.field(&at(n), a, b);
        }

        self.types(
            path,
            o.child_messages().collect(),
            o.child_enums().collect(),
            u.child_messages().collect(),
            u.child_enums().collect(),
        );
        let ok = self.out[start..].iter().all(compatible);
        self.compared.insert(key, ok);
        ok
    }

    fn field(&mut self, path: &str, o: &FieldDescriptor, u: &FieldDescriptor) {
        if o.name() != u.name() {
            self.add("FIELD_NAME_CHANGED", path.to_string());
        }
        self.types_of(path, type_of_kind(o.kind()), type_of_kind(u.kind()));
    }

    fn types_of(&mut self, path: &str, o: Type, u: Type) {
        match (o, u) {
            (Type::Scalar(a), Type::Scalar(b)) => {
                if a != b {
                    self.add("FIELD_SCALAR_KIND_CHANGED", path.to_string());
                }
            }
            (Type::Map(ok, ov), Type::Map(uk, uv)) => {
                self.types_of(path, *ok, *uk);
                self.types_of(path, *ov, *uv);
            }
            (Type::Message(a), Type::Message(b)) => {
                let name = local_name(&a);
                if name != local_name(&b) {
                    self.add("FIELD_NAMED_TYPE_CHANGED", path.to_string());
                    return;
                }
                let name = name.to_string();
                if !self.message(&name, &a, &b) {
                    self.add("FIELD_NAMED_TYPE_CHANGED", path.to_string());
                }
            }
            _ => self.add("FIELD_KIND_CHANGED", path.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> FileDescriptor {
        compile(text, &[]).unwrap()
    }

    /// The incompatible kinds of `new` read as the update of `old` (BACKWARD).
    fn backward(old: &str, new: &str) -> Vec<&'static str> {
        incompatible(&file(old), &file(new))
            .into_iter()
            .map(|d| d.kind)
            .collect()
    }

    /// Every difference kind, compatible ones included.
    fn kinds(old: &str, new: &str) -> Vec<&'static str> {
        differences(&file(old), &file(new))
            .into_iter()
            .map(|d| d.kind)
            .collect()
    }

    fn msg(body: &str) -> String {
        format!("syntax = \"proto3\";\npackage p;\nmessage M {{\n{body}\n}}\n")
    }

    #[test]
    fn registry_protobuf_parse_validates_and_resolves_references() {
        assert!(compile(&msg("string a = 1;"), &[]).is_ok());
        let bad = compile("syntax = \"proto3\"; message M { strin a = 1; }", &[]);
        assert!(bad.is_err(), "an unknown type is invalid");
        assert!(compile("message {", &[]).is_err());
        // Well-known types come with the parser.
        let ts = "syntax = \"proto3\"; import \"google/protobuf/timestamp.proto\";\n\
                  message E { google.protobuf.Timestamp at = 1; }";
        assert!(compile(ts, &[]).is_ok());
        // Other imports resolve from the references by name.
        let uses = "syntax = \"proto3\"; import \"other.proto\"; message U { o.Other x = 1; }";
        assert!(compile(uses, &[]).is_err());
        let other = Referenced {
            name: "other.proto".into(),
            schema: "syntax = \"proto3\"; package o; message Other { int32 v = 1; }".into(),
        };
        assert!(compile(uses, &[other]).is_ok());
    }

    #[test]
    fn registry_protobuf_base64_descriptors_parse_and_serialize() {
        let text = msg("string a = 1; int64 b = 2;");
        let b64 = serialized(&text, &[]).unwrap();
        let again = compile(&b64, &[]).unwrap();
        assert_eq!(again.messages().next().unwrap().full_name(), "p.M");
        assert_eq!(serialized(&b64, &[]).unwrap(), b64);
        assert!(kinds(&text, &b64).is_empty());
        assert!(serialized("message {", &[]).is_none());
    }

    #[test]
    fn registry_protobuf_optional_fields_may_come_and_go_and_be_renamed() {
        let v1 = msg("string a = 1;");
        let v2 = msg("string a = 1; int32 b = 2;");
        assert_eq!(kinds(&v1, &v2), ["FIELD_ADDED"]);
        assert!(backward(&v1, &v2).is_empty());
        assert_eq!(kinds(&v2, &v1), ["FIELD_REMOVED"]);
        assert!(backward(&v2, &v1).is_empty());
        let renamed = msg("string name = 1;");
        assert_eq!(kinds(&v1, &renamed), ["FIELD_NAME_CHANGED"]);
        assert!(backward(&v1, &renamed).is_empty());
        // proto3 `optional` (a synthetic oneof) is a plain field here.
        assert!(backward(&v1, &msg("optional string a = 1;")).is_empty());
    }

    #[test]
    fn registry_protobuf_required_fields_may_not_come_or_go() {
        let p2 = |body: &str| format!("syntax = \"proto2\";\nmessage M {{\n{body}\n}}\n");
        let v1 = p2("optional string a = 1;");
        let v2 = p2("optional string a = 1; required int32 b = 2;");
        assert_eq!(backward(&v1, &v2), ["REQUIRED_FIELD_ADDED"]);
        assert_eq!(backward(&v2, &v1), ["REQUIRED_FIELD_REMOVED"]);
    }

    #[test]
    fn registry_protobuf_scalar_types_change_within_their_groups_only() {
        let f = |t: &str| msg(&format!("{t} a = 1;"));
        for (a, b) in [
            ("int32", "int64"),
            ("int32", "uint32"),
            ("uint64", "bool"),
            ("sint32", "sint64"),
            ("fixed32", "sfixed32"),
            ("fixed64", "sfixed64"),
            ("string", "bytes"),
        ] {
            assert!(backward(&f(a), &f(b)).is_empty(), "{a} -> {b}");
            assert!(backward(&f(b), &f(a)).is_empty(), "{b} -> {a}");
        }
        for (a, b) in [
            ("int32", "sint32"),
            ("int32", "fixed32"),
            ("fixed32", "fixed64"),
            ("float", "double"),
            ("string", "int32"),
        ] {
            assert_eq!(
                backward(&f(a), &f(b)),
                ["FIELD_SCALAR_KIND_CHANGED"],
                "{a} -> {b}"
            );
        }
        // An enum is a number of the int32 group.
        let with_enum = |t: &str| {
            format!("syntax = \"proto3\"; enum E {{ A = 0; }} message M {{ {t} a = 1; }}")
        };
        assert!(backward(&with_enum("int32"), &with_enum("E")).is_empty());
        assert_eq!(
            backward(&with_enum("sint32"), &with_enum("E")),
            ["FIELD_SCALAR_KIND_CHANGED"]
        );
    }

    #[test]
    fn registry_protobuf_kind_and_named_type_changes_are_incompatible() {
        let two = |t: &str| {
            format!(
                "syntax = \"proto3\"; message A {{ int32 x = 1; }} message B {{ string y = 1; }}\n\
                 message M {{ {t} f = 1; }}"
            )
        };
        assert_eq!(backward(&two("int32"), &two("A")), ["FIELD_KIND_CHANGED"]);
        assert_eq!(
            backward(&two("int32"), &two("map<string, int32>")),
            ["FIELD_KIND_CHANGED"]
        );
        assert_eq!(backward(&two("A"), &two("B")), ["FIELD_NAMED_TYPE_CHANGED"]);
        assert_eq!(
            backward(&two("map<string, int32>"), &two("map<string, string>")),
            ["FIELD_SCALAR_KIND_CHANGED"]
        );
        assert!(backward(&two("map<int32, A>"), &two("map<int64, A>")).is_empty());
        // A field whose message type changed incompatibly is itself a named type change.
        let a = |t: &str| {
            format!("syntax = \"proto3\"; message A {{ {t} x = 1; }} message M {{ A f = 1; }}")
        };
        let why = backward(&a("int32"), &a("string"));
        assert!(why.contains(&"FIELD_SCALAR_KIND_CHANGED"), "{why:?}");
        assert!(why.contains(&"FIELD_NAMED_TYPE_CHANGED"), "{why:?}");
        // The package does not count in a type's name.
        let pkg = |p: &str| {
            format!("syntax = \"proto3\"; package {p}; message A {{}} message M {{ A f = 1; }}")
        };
        assert_eq!(kinds(&pkg("one"), &pkg("two")), ["PACKAGE_CHANGED"]);
    }

    #[test]
    fn registry_protobuf_messages_and_enums_added_removed_moved() {
        let v1 = "syntax = \"proto3\"; message A {} message B {}";
        let v2 = "syntax = \"proto3\"; message B {} message A {} message C {}";
        let k = kinds(v1, v2);
        assert!(
            k.contains(&"MESSAGE_ADDED") && k.contains(&"MESSAGE_MOVED"),
            "{k:?}"
        );
        assert!(backward(v1, v2).is_empty());
        assert_eq!(backward(v2, v1), ["MESSAGE_REMOVED"]);
        let nested = |inner: &str| format!("syntax = \"proto3\"; message A {{ {inner} }}");
        assert_eq!(
            backward(&nested("message In { int32 v = 1; }"), &nested("")),
            ["MESSAGE_REMOVED"]
        );
        let e = |body: &str| format!("syntax = \"proto3\"; {body} message M {{}}");
        assert_eq!(kinds(&e(""), &e("enum E { A = 0; }")), ["ENUM_ADDED"]);
        assert_eq!(kinds(&e("enum E { A = 0; }"), &e("")), ["ENUM_REMOVED"]);
        let (ab, abc) = (
            e("enum E { A = 0; B = 1; }"),
            e("enum E { A = 0; B = 1; C = 2; }"),
        );
        assert_eq!(kinds(&ab, &abc), ["ENUM_CONST_ADDED"]);
        assert_eq!(kinds(&abc, &ab), ["ENUM_CONST_REMOVED"]);
        assert_eq!(
            kinds(&ab, &e("enum E { A = 0; BB = 1; }")),
            ["ENUM_CONST_CHANGED"]
        );
        assert!(backward(&abc, &ab).is_empty());
    }

    #[test]
    fn registry_protobuf_oneof_rules() {
        let plain = msg("string a = 1; string b = 2;");
        let one_moved = msg("oneof o { string a = 1; } string b = 2;");
        let both_moved = msg("oneof o { string a = 1; string b = 2; }");
        assert!(backward(&plain, &one_moved).is_empty());
        assert_eq!(
            backward(&plain, &both_moved),
            ["MULTIPLE_FIELDS_MOVED_TO_ONEOF"]
        );
        // Adding a new field to a oneof is fine, removing one is not.
        let wider = msg("oneof o { string a = 1; string c = 3; } string b = 2;");
        assert!(backward(&one_moved, &wider).is_empty());
        assert_eq!(backward(&wider, &one_moved), ["ONEOF_FIELD_REMOVED"]);
        // An existing field joining a oneof that already holds one.
        assert_eq!(
            backward(&one_moved, &both_moved),
            ["FIELD_MOVED_TO_EXISTING_ONEOF"]
        );
        // A field keeps its type rules when it moves into a oneof.
        let retyped = msg("oneof o { int32 a = 1; } string b = 2;");
        assert_eq!(backward(&plain, &retyped), ["FIELD_SCALAR_KIND_CHANGED"]);
    }

    #[test]
    fn registry_protobuf_recursive_types_terminate() {
        let tree = |t: &str| {
            format!("syntax = \"proto3\"; message Node {{ {t} v = 1; repeated Node kids = 2; }}")
        };
        assert!(backward(&tree("int32"), &tree("int64")).is_empty());
        let why = backward(&tree("int32"), &tree("string"));
        assert!(why.contains(&"FIELD_SCALAR_KIND_CHANGED"), "{why:?}");
    }
}
