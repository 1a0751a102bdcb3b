//! The registry's state, rebuilt from `_schemas` (`apply`, record by record in log order),
//! and its decisions: each request is answered from the state, and a write is decided here
//! as the records to append (the shell appends them, then applies them as it reads them
//! back). Pure.
//!
//! A subject exists while it has a version not soft-deleted (with `deleted=true`, while it
//! has any). Ids: the same schema (type, normalised text, references) registered under any
//! subject keeps its id; a new one takes the highest id seen plus one. A new version number
//! is the subject's highest (soft-deleted ones included) plus one.

use std::collections::{BTreeMap, BTreeSet};

use super::errors::Error;
use super::formats::{self, Parsed, Referenced, Version};
use super::records::{Record, Reference, SchemaValue};

pub const DEFAULT_LEVEL: &str = "BACKWARD";
pub const DEFAULT_MODE: &str = "READWRITE";
pub const MODES: [&str; 4] = ["READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT"];

/// Which version a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Latest,
    Number(i32),
}

impl Which {
    /// `latest`, `-1` or a version from 1 to 2^31-1; else INVALID_VERSION (42202).
    pub fn parse(s: &str) -> Result<Which, Error> {
        match s {
            "latest" | "-1" => Ok(Which::Latest),
            _ => match s.parse::<i32>() {
                Ok(n) if n >= 1 => Ok(Which::Number(n)),
                _ => Err(Error::invalid_version(s)),
            },
        }
    }
}

/// A schema to register, look up or check, as a request gives it.
#[derive(Debug, Clone, Default)]
pub struct Submitted {
    pub schema: String,
    pub schema_type: Option<String>,
    pub references: Vec<Reference>,
    /// IMPORT mode only: the id and version to register it under.
    pub id: Option<i32>,
    pub version: Option<i32>,
}

/// What a registration decided: the id, and the record to append when it is new.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    pub id: i32,
    pub record: Option<Record>,
}

#[derive(Debug, Default, Clone)]
pub struct Store {
    /// Every stored version of every subject, soft-deleted ones included.
    subjects: BTreeMap<String, BTreeMap<i32, SchemaValue>>,
    /// The (subject, version)s holding each id.
    by_id: BTreeMap<i32, BTreeSet<(String, i32)>>,
    max_id: i32,
    global_level: Option<String>,
    levels: BTreeMap<String, String>,
    global_mode: Option<String>,
    modes: BTreeMap<String, String>,
}

impl Store {
    /// Applies one record of `_schemas`.
    pub fn apply(&mut self, r: Record) {
        match r {
            Record::Schema {
                subject,
                version,
                value,
            } => {
                let versions = self.subjects.entry(subject.clone()).or_default();
                if let Some(old) = versions.remove(&version)
                    && let Some(set) = self.by_id.get_mut(&old.id)
                {
                    set.remove(&(subject.clone(), version));
                    if set.is_empty() {
                        self.by_id.remove(&old.id);
                    }
                }
                if let Some(v) = value {
                    self.max_id = self.max_id.max(v.id);
                    self.by_id
                        .entry(v.id)
                        .or_default()
                        .insert((subject.clone(), version));
                    versions.insert(version, v);
                }
                if versions.is_empty() {
                    self.subjects.remove(&subject);
                }
            }
            Record::Config { subject, level } => match (subject, level) {
                (None, l) => self.global_level = l,
                (Some(s), Some(l)) => {
                    self.levels.insert(s, l);
                }
                (Some(s), None) => {
                    self.levels.remove(&s);
                }
            },
            Record::Mode { subject, mode } => match (subject, mode) {
                (None, m) => self.global_mode = m,
                (Some(s), Some(m)) => {
                    self.modes.insert(s, m);
                }
                (Some(s), None) => {
                    self.modes.remove(&s);
                }
            },
            Record::DeleteSubject { subject, version } => {
                if let Some(versions) = self.subjects.get_mut(&subject) {
                    for (_, v) in versions.range_mut(..=version) {
                        v.deleted = true;
                    }
                }
            }
        }
    }

    /// The subjects, in name order (with `deleted`, also those with only soft-deleted
    /// versions).
    pub fn subjects(&self, deleted: bool) -> Vec<String> {
        self.subjects
            .iter()
            .filter(|(_, vs)| deleted || vs.values().any(|v| !v.deleted))
            .map(|(s, _)| s.clone())
            .collect()
    }

    /// The versions of `subject` (with `deleted`, soft-deleted ones too); SUBJECT_NOT_FOUND
    /// when there are none.
    fn versions_of(&self, subject: &str, deleted: bool) -> Result<Vec<&SchemaValue>, Error> {
        let vs: Vec<&SchemaValue> = self
            .subjects
            .get(subject)
            .map(|vs| vs.values().filter(|v| deleted || !v.deleted).collect())
            .unwrap_or_default();
        if vs.is_empty() {
            return Err(Error::subject_not_found(subject));
        }
        Ok(vs)
    }

    pub fn versions(&self, subject: &str, deleted: bool) -> Result<Vec<i32>, Error> {
        Ok(self
            .versions_of(subject, deleted)?
            .iter()
            .map(|v| v.version)
            .collect())
    }

    /// One version of `subject`; a soft-deleted one only with `deleted`.
    pub fn version(
        &self,
        subject: &str,
        which: Which,
        deleted: bool,
    ) -> Result<&SchemaValue, Error> {
        let vs = self.versions_of(subject, deleted)?;
        let found = match which {
            Which::Latest => vs.last().copied(),
            Which::Number(n) => vs.iter().copied().find(|v| v.version == n),
        };
        found.ok_or_else(|| match which {
            Which::Number(n) => Error::version_not_found(n),
            Which::Latest => Error::version_not_found(-1),
        })
    }

    /// The schema with id `id` (held by any version, soft-deleted ones included).
    pub fn by_id(&self, id: i32) -> Result<&SchemaValue, Error> {
        self.by_id
            .get(&id)
            .and_then(|set| set.iter().next())
            .and_then(|(s, v)| self.subjects.get(s)?.get(v))
            .ok_or(Error::schema_not_found(Some(id)))
    }

    /// The (subject, version)s holding id `id` (with `deleted`, soft-deleted ones too).
    pub fn id_versions(&self, id: i32, deleted: bool) -> Result<Vec<(String, i32)>, Error> {
        self.by_id(id)?;
        Ok(self.by_id[&id]
            .iter()
            .filter(|(s, v)| deleted || self.subjects[s].get(v).is_some_and(|x| !x.deleted))
            .cloned()
            .collect())
    }

    /// The ids of the versions that reference `subject`'s version `version`.
    pub fn referenced_by(&self, subject: &str, version: i32) -> Vec<i32> {
        let mut ids: Vec<i32> = self
            .subjects
            .values()
            .flat_map(|vs| vs.values())
            .filter(|v| {
                !v.deleted
                    && v.references
                        .iter()
                        .any(|r| r.subject == subject && r.version == version)
            })
            .map(|v| v.id)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The schemas `refs` name, each after those it references itself.
    pub fn resolve(&self, refs: &[Reference]) -> Result<Vec<Referenced>, Error> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        self.resolve_into(refs, &mut out, &mut seen, 0)?;
        Ok(out)
    }

    fn resolve_into(
        &self,
        refs: &[Reference],
        out: &mut Vec<Referenced>,
        seen: &mut BTreeSet<(String, i32)>,
        depth: usize,
    ) -> Result<(), Error> {
        if depth > 32 {
            return Err(Error::invalid_schema("references nest too deeply"));
        }
        for r in refs {
            if !seen.insert((r.subject.clone(), r.version)) {
                continue;
            }
            let v = self
                .subjects
                .get(&r.subject)
                .and_then(|vs| vs.get(&r.version))
                .ok_or_else(|| {
                    Error::invalid_schema(&format!(
                        "reference {} (subject '{}', version {}) not found",
                        r.name, r.subject, r.version
                    ))
                })?;
            self.resolve_into(&v.references, out, seen, depth + 1)?;
            out.push(Referenced {
                name: r.name.clone(),
                schema: v.schema.clone(),
            });
        }
        Ok(())
    }

    /// The submitted schema parsed: its type known (else 42201), its references found and
    /// the text valid.
    pub fn parse(&self, s: &Submitted) -> Result<Parsed, Error> {
        let ty = formats::schema_type(s.schema_type.as_deref()).ok_or_else(|| {
            Error::invalid_schema(&format!(
                "unknown schema type {}",
                s.schema_type.as_deref().unwrap_or("")
            ))
        })?;
        let refs = self.resolve(&s.references)?;
        formats::parse(ty, &s.schema, &refs).map_err(|why| Error::invalid_schema(&why))
    }

    fn same(&self, v: &SchemaValue, p: &Parsed, refs: &[Reference]) -> bool {
        v.schema_type == p.schema_type
            && v.references == refs
            && formats::normalise(&v.schema_type, &v.schema) == p.canonical
    }

    /// The level in force for `subject` (its own, else the global one, else BACKWARD).
    pub fn level_of(&self, subject: Option<&str>) -> &str {
        Setting::levels(self).in_force(subject)
    }

    /// A subject's own level, or with `default_to_global` the one in force.
    pub fn config(&self, subject: Option<&str>, default_to_global: bool) -> Result<&str, Error> {
        Setting::levels(self).get(subject, default_to_global)
    }

    /// The mode in force for `subject` (its own, else the global one, else READWRITE).
    pub fn mode_of(&self, subject: Option<&str>) -> &str {
        Setting::modes(self).in_force(subject)
    }

    /// A subject's own mode, or with `default_to_global` the one in force.
    pub fn mode(&self, subject: Option<&str>, default_to_global: bool) -> Result<&str, Error> {
        Setting::modes(self).get(subject, default_to_global)
    }

    fn writable(&self, subject: &str) -> Result<(), Error> {
        match self.mode_of(Some(subject)) {
            "READONLY" | "READONLY_OVERRIDE" => Err(Error::read_only(subject)),
            _ => Ok(()),
        }
    }

    /// `POST /subjects/{subject}/versions`.
    pub fn register(&self, subject: &str, s: &Submitted) -> Result<Registered, Error> {
        self.writable(subject)?;
        let import = self.mode_of(Some(subject)) == "IMPORT";
        if !import && s.id.is_some_and(|id| id >= 0) {
            return Err(Error::not_permitted(format!(
                "Subject {subject} is not in import mode"
            )));
        }
        let p = self.parse(s)?;
        let live: Vec<&SchemaValue> = self
            .subjects
            .get(subject)
            .map(|vs| vs.values().filter(|v| !v.deleted).collect())
            .unwrap_or_default();
        if !import && let Some(v) = live.iter().rev().find(|v| self.same(v, &p, &s.references)) {
            return Ok(Registered {
                id: v.id,
                record: None,
            });
        }
        if !import {
            let level = self.level_of(Some(subject));
            let why = self.incompatibilities(level, &p, &s.references, &live)?;
            if !why.is_empty() {
                return Err(Error::incompatible(subject, &why, level));
            }
        }
        let same_id = self
            .subjects
            .values()
            .flat_map(|vs| vs.values())
            .find(|v| self.same(v, &p, &s.references))
            .map(|v| v.id);
        let id = match s.id.filter(|id| *id >= 0) {
            Some(id) => {
                if let Ok(v) = self.by_id(id)
                    && !self.same(v, &p, &s.references)
                {
                    return Err(Error::id_taken(id));
                }
                id
            }
            None => same_id.unwrap_or(self.max_id + 1),
        };
        let last = self
            .subjects
            .get(subject)
            .and_then(|vs| vs.keys().next_back().copied())
            .unwrap_or(0);
        let version = match s.version.filter(|v| import && *v >= 1) {
            Some(v) => v,
            None => last
                .checked_add(1)
                .ok_or_else(|| Error::invalid_version("2147483648"))?,
        };
        Ok(Registered {
            id,
            record: Some(Record::Schema {
                subject: subject.to_string(),
                version,
                value: Some(SchemaValue {
                    subject: subject.to_string(),
                    version,
                    id,
                    schema: p.canonical,
                    schema_type: p.schema_type.to_string(),
                    references: s.references.clone(),
                    deleted: false,
                }),
            }),
        })
    }

    fn incompatibilities(
        &self,
        level: &str,
        p: &Parsed,
        refs: &[Reference],
        old: &[&SchemaValue],
    ) -> Result<Vec<String>, Error> {
        let new = Version {
            version: 0,
            schema_type: p.schema_type,
            schema: &p.canonical,
            refs: self.resolve(refs)?,
        };
        let old: Vec<Version> = old
            .iter()
            .map(|v| Version {
                version: v.version,
                schema_type: &v.schema_type,
                schema: &v.schema,
                refs: self.resolve(&v.references).unwrap_or_default(),
            })
            .collect();
        Ok(formats::incompatibilities(level, &new, &old))
    }

    /// `POST /compatibility/subjects/{subject}/versions[/{version}]`: why the schema may not
    /// follow that version (`which`), or the versions the subject's level looks at (`None`).
    pub fn check(
        &self,
        subject: &str,
        which: Option<Which>,
        s: &Submitted,
    ) -> Result<Vec<String>, Error> {
        let p = self.parse(s)?;
        let level = self.level_of(Some(subject));
        match which {
            None => {
                let live: Vec<&SchemaValue> = self
                    .subjects
                    .get(subject)
                    .map(|vs| vs.values().filter(|v| !v.deleted).collect())
                    .unwrap_or_default();
                self.incompatibilities(level, &p, &s.references, &live)
            }
            Some(w) => {
                let v = self.version(subject, w, false)?;
                let one = level.trim_end_matches("_TRANSITIVE");
                self.incompatibilities(one, &p, &s.references, &[v])
            }
        }
    }

    /// `POST /subjects/{subject}`: the latest version of `subject` holding this schema.
    pub fn lookup(
        &self,
        subject: &str,
        s: &Submitted,
        deleted: bool,
    ) -> Result<&SchemaValue, Error> {
        let vs = self.versions_of(subject, deleted)?;
        let p = self.parse(s)?;
        vs.into_iter()
            .rev()
            .find(|v| self.same(v, &p, &s.references))
            .ok_or(Error::schema_not_found(None))
    }

    /// `DELETE /subjects/{subject}/versions/{version}`: the version deleted and its record.
    pub fn delete_version(
        &self,
        subject: &str,
        which: Which,
        permanent: bool,
    ) -> Result<(i32, Record), Error> {
        self.writable(subject)?;
        let v = match (which, permanent) {
            (Which::Number(n), true) => self
                .versions_of(subject, true)?
                .into_iter()
                .find(|v| v.version == n)
                .ok_or(Error::version_not_found(n))?,
            (which, true) => self.version(subject, which, true)?,
            (Which::Number(n), false) => {
                let v = self
                    .versions_of(subject, true)?
                    .into_iter()
                    .find(|v| v.version == n)
                    .ok_or(Error::version_not_found(n))?;
                if v.deleted {
                    return Err(Error::version_soft_deleted(subject, n));
                }
                v
            }
            (which, false) => self.version(subject, which, false)?,
        };
        if !self.referenced_by(subject, v.version).is_empty() {
            return Err(Error::reference_exists(subject, v.version));
        }
        let value = if permanent {
            if !v.deleted {
                return Err(Error::version_not_soft_deleted(subject, v.version));
            }
            None
        } else {
            Some(SchemaValue {
                deleted: true,
                ..v.clone()
            })
        };
        Ok((
            v.version,
            Record::Schema {
                subject: subject.to_string(),
                version: v.version,
                value,
            },
        ))
    }

    /// `DELETE /subjects/{subject}`: the versions deleted and the records.
    pub fn delete_subject(
        &self,
        subject: &str,
        permanent: bool,
    ) -> Result<(Vec<i32>, Vec<Record>), Error> {
        self.writable(subject)?;
        let all = self.versions_of(subject, true)?;
        for v in &all {
            if !v.deleted && !self.referenced_by(subject, v.version).is_empty() {
                return Err(Error::reference_exists(subject, v.version));
            }
        }
        let live: Vec<i32> = all
            .iter()
            .filter(|v| !v.deleted)
            .map(|v| v.version)
            .collect();
        if permanent {
            if !live.is_empty() {
                return Err(Error::subject_not_soft_deleted(subject));
            }
            let mut records: Vec<Record> = all
                .iter()
                .map(|v| Record::Schema {
                    subject: subject.to_string(),
                    version: v.version,
                    value: None,
                })
                .collect();
            if self.levels.contains_key(subject) {
                records.push(Record::Config {
                    subject: Some(subject.to_string()),
                    level: None,
                });
            }
            if self.modes.contains_key(subject) {
                records.push(Record::Mode {
                    subject: Some(subject.to_string()),
                    mode: None,
                });
            }
            return Ok((all.iter().map(|v| v.version).collect(), records));
        }
        let Some(&last) = live.last() else {
            return Err(Error::subject_soft_deleted(subject));
        };
        let record = Record::DeleteSubject {
            subject: subject.to_string(),
            version: last,
        };
        Ok((live, vec![record]))
    }

    /// `PUT /config[/{subject}]`: the level (Confluent's name) and its record.
    pub fn set_config(
        &self,
        subject: Option<&str>,
        level: &str,
    ) -> Result<(&'static str, Record), Error> {
        let level = formats::level(level).ok_or(Error::invalid_level())?;
        let record = Record::Config {
            subject: subject.map(str::to_string),
            level: Some(level.to_string()),
        };
        Ok((level, record))
    }

    /// `DELETE /config[/{subject}]`: the level removed and its record.
    pub fn delete_config(&self, subject: Option<&str>) -> Result<(String, Record), Error> {
        let was = self.config(subject, subject.is_none())?.to_string();
        let record = Record::Config {
            subject: subject.map(str::to_string),
            level: None,
        };
        Ok((was, record))
    }

    /// `PUT /mode[/{subject}]`: the mode and its record. IMPORT needs an empty registry (or
    /// subject) unless forced.
    pub fn set_mode(
        &self,
        subject: Option<&str>,
        mode: &str,
        force: bool,
    ) -> Result<(&'static str, Record), Error> {
        let mode = MODES
            .iter()
            .copied()
            .find(|m| m.eq_ignore_ascii_case(mode.trim()))
            .ok_or(Error::invalid_mode())?;
        if mode == "IMPORT" && !force {
            let used = match subject {
                Some(s) => self.subjects.contains_key(s),
                None => !self.subjects.is_empty(),
            };
            if used {
                return Err(Error::not_permitted(
                    "Cannot import since found existing subjects".into(),
                ));
            }
        }
        let record = Record::Mode {
            subject: subject.map(str::to_string),
            mode: Some(mode.to_string()),
        };
        Ok((mode, record))
    }

    /// `DELETE /mode/{subject}`: the mode removed and its record.
    pub fn delete_mode(&self, subject: &str) -> Result<(String, Record), Error> {
        let was = self.mode(Some(subject), false)?.to_string();
        let record = Record::Mode {
            subject: Some(subject.to_string()),
            mode: None,
        };
        Ok((was, record))
    }
}

/// A per-subject setting with a global value and a default (the compatibility level, the
/// mode).
struct Setting<'a> {
    own: &'a BTreeMap<String, String>,
    global: &'a Option<String>,
    default: &'static str,
    /// The refusal for a subject without a setting of its own.
    missing: fn(&str) -> Error,
}

impl<'a> Setting<'a> {
    fn levels(st: &'a Store) -> Setting<'a> {
        Setting {
            own: &st.levels,
            global: &st.global_level,
            default: DEFAULT_LEVEL,
            missing: Error::no_subject_level,
        }
    }

    fn modes(st: &'a Store) -> Setting<'a> {
        Setting {
            own: &st.modes,
            global: &st.global_mode,
            default: DEFAULT_MODE,
            missing: Error::no_subject_mode,
        }
    }

    fn in_force(&self, subject: Option<&str>) -> &'a str {
        subject
            .and_then(|s| self.own.get(s))
            .or(self.global.as_ref())
            .map_or(self.default, String::as_str)
    }

    fn get(&self, subject: Option<&str>, default_to_global: bool) -> Result<&'a str, Error> {
        match subject {
            Some(s) if !default_to_global => self
                .own
                .get(s)
                .map(String::as_str)
                .ok_or_else(|| (self.missing)(s)),
            s => Ok(self.in_force(s)),
        }
    }
}

#[cfg(test)]
mod tests;
