//! `sluice-metadata` on one node: every topic (name, id, partition count, its configs), the
//! dynamic broker configs, the feature levels UpdateFeatures set and the dynamic group
//! configs, one record a line, tab-separated; rewritten whole beside the old file and renamed
//! into place at each change, so a crash leaves the old or the new one.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use uuid::Uuid;

use crate::cluster::features::FeatureLevels;
use crate::config::dynamic::DynamicConfigs;
use crate::security::acl::{
    AccessControlEntry, AclBinding, AclOperation, PatternType, Permission, ResourcePattern,
    ResourceType,
};
use crate::security::sasl::scram::{ScramCredential, ScramMechanism};
use crate::security::scram_store::CredentialMap;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;

const METADATA_FILE: &str = "sluice-metadata";

/// Everything `sluice-metadata` holds, as read by [`read`].
#[derive(Default)]
pub struct FileMetadata {
    /// (name, id, partition count, configs) of every topic.
    pub topics: Vec<(String, Uuid, i32, BTreeMap<String, String>)>,
    pub dynamic: DynamicConfigs,
    pub features: FeatureLevels,
    pub groups: GroupMap,
    pub scram: CredentialMap,
    pub quotas: BTreeMap<crate::quota::QuotaEntity, BTreeMap<String, f64>>,
    pub acls: std::collections::BTreeSet<AclBinding>,
}

/// The path of `sluice-metadata` in a node's first log dir.
pub fn path_in(first_log_dir: &std::path::Path) -> PathBuf {
    first_log_dir.join(METADATA_FILE)
}

/// Reads `sluice-metadata` at `path` (empty when there is none): lines `topic <TAB> name <TAB>
/// id <TAB> partitions` followed by `config <TAB> key <TAB> value` lines for that topic, and the
/// dynamic broker configs as `broker-config <TAB> default|<node id> <TAB> key <TAB> value` lines
/// (those of other node ids are skipped), the feature levels as `feature <TAB> name <TAB> level`
/// and their change count as `feature-changes <TAB> n`, the group configs as `group-config <TAB>
/// group <TAB> key <TAB> value` (group and value escaped: [`escape`]), the SCRAM credentials as
/// `scram-credential <TAB> user <TAB> mechanism <TAB> iterations <TAB> salt <TAB> stored key <TAB>
/// server key` (user escaped, keys in base64), the client quotas as `client-quota <TAB> entity
/// <TAB> key <TAB> value` and the ACLs as `acl <TAB> resource type <TAB> name <TAB> pattern type
/// <TAB> principal <TAB> host <TAB> operation <TAB> permission` (Kafka's names; name, principal
/// and host escaped).
pub fn read(path: &std::path::Path, node_id: i32) -> Result<FileMetadata> {
    let mut m = FileMetadata::default();
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(m),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let FileMetadata {
        topics: out,
        dynamic,
        features,
        groups,
        scram,
        quotas,
        acls,
    } = &mut m;
    for (n, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split('\t').collect();
        match f.as_slice() {
            ["topic", name, id, parts] => out.push((
                name.to_string(),
                Uuid::parse_str(id)
                    .with_context(|| format!("{}:{}: bad topic id", path.display(), n + 1))?,
                parts
                    .parse()
                    .with_context(|| format!("{}:{}: bad count", path.display(), n + 1))?,
                BTreeMap::new(),
            )),
            ["config", key, value] if !out.is_empty() => {
                out.last_mut()
                    .unwrap()
                    .3
                    .insert(key.to_string(), value.to_string());
            }
            ["broker-config", who, key, value] => {
                let map = if *who == "default" {
                    &mut dynamic.cluster_default
                } else if who.parse::<i32>().ok() == Some(node_id) {
                    &mut dynamic.this_broker
                } else {
                    continue;
                };
                map.insert(key.to_string(), value.to_string());
            }
            ["feature", name, level] => {
                let level = level
                    .parse()
                    .with_context(|| format!("{}:{}: bad level", path.display(), n + 1))?;
                features.overrides.insert(name.to_string(), level);
            }
            ["feature-changes", count] => {
                features.changes = count
                    .parse()
                    .with_context(|| format!("{}:{}: bad count", path.display(), n + 1))?;
            }
            ["group-config", group, key, value] => {
                let bad = || format!("{}:{}: bad escape", path.display(), n + 1);
                groups
                    .entry(unescape(group).with_context(bad)?)
                    .or_default()
                    .insert(key.to_string(), unescape(value).with_context(bad)?);
            }
            [
                "scram-credential",
                user,
                mech,
                iterations,
                salt,
                stored,
                server,
            ] => {
                let bad = || format!("{}:{}: bad SCRAM credential", path.display(), n + 1);
                let mech = ScramMechanism::from_name(mech).with_context(bad)?;
                let b64 = |s: &str| B64.decode(s).ok();
                let credential = ScramCredential {
                    salt: b64(salt).with_context(bad)?,
                    stored_key: b64(stored).with_context(bad)?,
                    server_key: b64(server).with_context(bad)?,
                    iterations: iterations.parse().ok().with_context(bad)?,
                };
                scram.insert((unescape(user).with_context(bad)?, mech), credential);
            }
            ["client-quota", entity, key, value] => {
                let bad = || format!("{}:{}: bad client quota", path.display(), n + 1);
                let entity = crate::quota::QuotaEntity::from_field(entity).with_context(bad)?;
                let value: f64 = value.parse().ok().with_context(bad)?;
                quotas
                    .entry(entity)
                    .or_default()
                    .insert(key.to_string(), value);
            }
            ["acl", rt, name, pt, principal, host, op, perm] => {
                let bad = || format!("{}:{}: bad ACL", path.display(), n + 1);
                acls.insert(AclBinding {
                    pattern: ResourcePattern {
                        resource_type: ResourceType::parse(rt).with_context(bad)?,
                        name: unescape(name).with_context(bad)?,
                        pattern_type: PatternType::parse(pt).with_context(bad)?,
                    },
                    entry: AccessControlEntry {
                        principal: unescape(principal).with_context(bad)?,
                        host: unescape(host).with_context(bad)?,
                        operation: AclOperation::parse(op).with_context(bad)?,
                        permission: Permission::parse(perm).with_context(bad)?,
                    },
                });
            }
            [""] => {}
            _ => bail!("{}:{}: unreadable line", path.display(), n + 1),
        }
    }
    Ok(m)
}

/// Every group's configs, by group id.
pub type GroupMap = BTreeMap<String, BTreeMap<String, String>>;

/// A group id or value in one tab-separated field: backslash, tab, newline and carriage
/// return escaped with a backslash.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

/// Reverses [`escape`] (a subset of Java properties escaping).
pub fn unescape(s: &str) -> Result<String> {
    crate::config::parse::unescape(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_fields_round_trip() {
        for s in ["", "g", "a\tb", "x\ny\r", "back\\slash\\t", "\\"] {
            assert!(!escape(s).contains(['\t', '\n', '\r']));
            assert_eq!(unescape(&escape(s)).unwrap(), s);
        }
    }
}
