//! The configured client quotas and the rules for setting, describing and applying them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};

pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// A quota entity: entity type ("user", "client-id", "ip") → name, `None` for the default
/// entity of that type (`--entity-default`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct QuotaEntity(pub BTreeMap<String, Option<String>>);

impl QuotaEntity {
    pub fn of(parts: &[(&str, Option<&str>)]) -> QuotaEntity {
        QuotaEntity(
            parts
                .iter()
                .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
                .collect(),
        )
    }

    /// One line's field: `type=name` pairs joined by ',', the default written `<default>`;
    /// names are percent-escaped so ',', '=', '%' and control characters survive.
    pub fn to_field(&self) -> String {
        self.0
            .iter()
            .map(|(t, n)| {
                format!(
                    "{}={}",
                    escape(t),
                    n.as_deref().map_or_else(|| "<default>".to_string(), escape)
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn from_field(s: &str) -> Option<QuotaEntity> {
        let mut out = BTreeMap::new();
        for part in s.split(',') {
            let (t, n) = part.split_once('=')?;
            let name = if n == "<default>" {
                None
            } else {
                Some(unescape(n)?)
            };
            out.insert(unescape(t)?, name);
        }
        Some(QuotaEntity(out))
    }
}

impl std::fmt::Display for QuotaEntity {
    /// As Kafka's ClientQuotaEntity prints in error messages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner: Vec<String> = self
            .0
            .iter()
            .map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("null")))
            .collect();
        write!(f, "ClientQuotaEntity(entries={{{}}})", inner.join(", "))
    }
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            ',' | '=' | '%' | '<' | '>' | '\t' | '\n' | '\r' => {
                let mut b = [0u8; 4];
                for byte in c.encode_utf8(&mut b).bytes() {
                    out.push_str(&format!("%{byte:02X}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

fn unescape(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// An error for one entity of AlterClientQuotas or for a DescribeClientQuotas filter.
#[derive(Debug, Clone, PartialEq)]
pub enum QuotaError {
    InvalidRequest(String),
    UnsupportedVersion(String),
}

impl QuotaError {
    pub fn message(&self) -> &str {
        match self {
            QuotaError::InvalidRequest(m) | QuotaError::UnsupportedVersion(m) => m,
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum KeyType {
    Int,
    Long,
    Double,
}

/// The keys an entity may set, by its combination of types (Kafka's QuotaConfigs).
fn keys_for(entity: &QuotaEntity) -> Result<&'static [(&'static str, KeyType)], QuotaError> {
    const USER_OR_CLIENT: &[(&str, KeyType)] = &[
        (PRODUCER_BYTE_RATE, KeyType::Long),
        (CONSUMER_BYTE_RATE, KeyType::Long),
        (REQUEST_PERCENTAGE, KeyType::Double),
        (CONTROLLER_MUTATION_RATE, KeyType::Double),
    ];
    const IP_KEYS: &[(&str, KeyType)] = &[(CONNECTION_CREATION_RATE, KeyType::Int)];
    let has = |t: &str| entity.0.contains_key(t);
    if has(IP) {
        if has(USER) || has(CLIENT_ID) {
            // Kafka's message, missing space included.
            return Err(QuotaError::InvalidRequest(
                "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
                    .into(),
            ));
        }
        return match entity.0.get(IP).cloned().flatten() {
            Some(ip) if ip.parse::<std::net::IpAddr>().is_err() => Err(QuotaError::InvalidRequest(
                format!("{ip} is not a valid IP or resolvable host."),
            )),
            _ => Ok(IP_KEYS),
        };
    }
    if has(USER) || has(CLIENT_ID) {
        return Ok(USER_OR_CLIENT);
    }
    Err(QuotaError::InvalidRequest(
        "Invalid empty client quota entity".into(),
    ))
}

/// Checks an entity as it came on the wire (type, name pairs) and builds it.
pub fn validate_entity(parts: &[(String, Option<String>)]) -> Result<QuotaEntity, QuotaError> {
    if parts.is_empty() {
        return Err(QuotaError::InvalidRequest(
            "Invalid empty client quota entity".into(),
        ));
    }
    let mut out = BTreeMap::new();
    for (t, n) in parts {
        if out.contains_key(t) {
            return Err(QuotaError::InvalidRequest(format!(
                "Invalid client quota entity, duplicate entity entry {t}"
            )));
        }
        if t != USER && t != CLIENT_ID && t != IP {
            return Err(QuotaError::InvalidRequest(format!(
                "Unhandled client quota entity type: {t}"
            )));
        }
        if n.as_deref() == Some("") {
            return Err(QuotaError::InvalidRequest(format!(
                "Empty {t} not supported"
            )));
        }
        out.insert(t.clone(), n.clone());
    }
    Ok(QuotaEntity(out))
}

/// A key that appears twice among `ops` (Kafka checks this before the entity itself).
pub fn duplicate_key(ops: &[(String, Option<f64>)]) -> Option<&str> {
    let mut seen = BTreeSet::new();
    ops.iter()
        .map(|(k, _)| k.as_str())
        .find(|k| !seen.insert(*k))
}

/// The changes one AlterClientQuotas entry makes: key → new value (`None`: removed), only
/// the keys whose value changes, after Kafka's checks (duplicate keys, unknown keys, whole
/// numbers for the byte rates).
pub fn alteration(
    current: &BTreeMap<String, f64>,
    entity: &QuotaEntity,
    ops: &[(String, Option<f64>)],
) -> Result<BTreeMap<String, Option<f64>>, QuotaError> {
    if let Some(k) = duplicate_key(ops) {
        return Err(QuotaError::InvalidRequest(format!(
            "Duplicate quota key {k} not updating quota for this entity {entity}"
        )));
    }
    let keys = keys_for(entity)?;
    let mut out = BTreeMap::new();
    for (k, v) in ops {
        match v {
            None => {
                if current.contains_key(k) {
                    out.insert(k.clone(), None);
                }
            }
            Some(v) => {
                let Some((_, ty)) = keys.iter().find(|(name, _)| name == k) else {
                    return Err(QuotaError::InvalidRequest(format!(
                        "Invalid configuration key {k}"
                    )));
                };
                let invalid = |m: String| Err(QuotaError::InvalidRequest(m));
                if *v <= 0.0 {
                    return invalid(format!("Quota {k} must be greater than 0"));
                }
                match ty {
                    KeyType::Double => {}
                    KeyType::Int if *v > i32::MAX as f64 => {
                        return invalid(format!("Proposed value for {k} is too large for an INT."));
                    }
                    KeyType::Long if *v > i64::MAX as f64 => {
                        return invalid(format!("Proposed value for {k} is too large for a LONG."));
                    }
                    _ if (v % 1.0).abs() > 1e-6 => {
                        return invalid(format!("{k} cannot be a fractional value."));
                    }
                    _ => {}
                }
                if current.get(k) != Some(v) {
                    out.insert(k.clone(), Some(*v));
                }
            }
        }
    }
    Ok(out)
}

/// One component of a DescribeClientQuotas filter.
#[derive(Debug, Clone)]
pub struct Component {
    pub entity_type: String,
    /// 0 exact (`name`), 1 the default entity, 2 any entity of the type.
    pub match_type: i8,
    pub name: Option<String>,
}

/// Every configured quota, by entity: the one owner is the controller; the quota manager
/// and DescribeClientQuotas read it.
#[derive(Debug, Default)]
pub struct ClientQuotas {
    by_entity: RwLock<BTreeMap<QuotaEntity, BTreeMap<String, f64>>>,
    /// Whether any quota is set (read on every request: no lock while none is).
    any: AtomicBool,
}

impl ClientQuotas {
    pub fn of(&self, entity: &QuotaEntity) -> BTreeMap<String, f64> {
        self.by_entity
            .read()
            .unwrap()
            .get(entity)
            .cloned()
            .unwrap_or_default()
    }

    pub fn all(&self) -> BTreeMap<QuotaEntity, BTreeMap<String, f64>> {
        self.by_entity.read().unwrap().clone()
    }

    pub fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// Applies changes (key → value, `None` removes it) to `entity`.
    pub fn apply(&self, entity: &QuotaEntity, changes: &BTreeMap<String, Option<f64>>) {
        let mut all = self.by_entity.write().unwrap();
        let set = all.entry(entity.clone()).or_default();
        for (k, v) in changes {
            match v {
                Some(v) => set.insert(k.clone(), *v),
                None => set.remove(k),
            };
        }
        if set.is_empty() {
            all.remove(entity);
        }
        self.any.store(!all.is_empty(), Ordering::Release);
    }

    /// Replaces every quota; whether anything changed.
    pub fn replace_all(&self, new: BTreeMap<QuotaEntity, BTreeMap<String, f64>>) -> bool {
        let mut all = self.by_entity.write().unwrap();
        if *all == new {
            return false;
        }
        *all = new;
        self.any.store(!all.is_empty(), Ordering::Release);
        true
    }

    /// DescribeClientQuotas: the entities the filter matches, with their quotas (Kafka's
    /// ClientQuotasImage.describe).
    #[allow(clippy::type_complexity)]
    pub fn describe(
        &self,
        components: &[Component],
        strict: bool,
    ) -> Result<Vec<(QuotaEntity, BTreeMap<String, f64>)>, QuotaError> {
        let mut exact: BTreeMap<&str, Option<&str>> = BTreeMap::new();
        let mut typed: BTreeSet<&str> = BTreeSet::new();
        for c in components {
            let t = c.entity_type.as_str();
            if t.is_empty() {
                return Err(QuotaError::InvalidRequest(
                    "Invalid empty entity type.".into(),
                ));
            }
            if exact.contains_key(t) || typed.contains(t) {
                return Err(QuotaError::InvalidRequest(format!(
                    "Entity type {t} cannot appear more than once in the filter."
                )));
            }
            if t != USER && t != CLIENT_ID && t != IP {
                return Err(QuotaError::UnsupportedVersion(format!(
                    "Unsupported entity type {t}"
                )));
            }
            match c.match_type {
                0 => {
                    let Some(n) = c.name.as_deref() else {
                        return Err(QuotaError::InvalidRequest(
                            "Request specified MATCH_TYPE_EXACT, but set match string to null."
                                .into(),
                        ));
                    };
                    exact.insert(t, Some(n));
                }
                1 | 2 if c.name.is_some() => {
                    let which = if c.match_type == 1 {
                        "DEFAULT"
                    } else {
                        "SPECIFIED"
                    };
                    return Err(QuotaError::InvalidRequest(format!(
                        "Request specified MATCH_TYPE_{which}, but also specified a match string."
                    )));
                }
                1 => {
                    exact.insert(t, None);
                }
                2 => {
                    typed.insert(t);
                }
                m => {
                    return Err(QuotaError::InvalidRequest(format!(
                        "Unknown match type {m}"
                    )));
                }
            }
        }
        let uses = |t: &str| exact.contains_key(t) || typed.contains(t);
        if uses(IP) && (uses(USER) || uses(CLIENT_ID)) {
            return Err(QuotaError::InvalidRequest(
                "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."
                    .into(),
            ));
        }
        let all = self.by_entity.read().unwrap();
        let wanted = exact.len() + typed.len();
        Ok(all
            .iter()
            .filter(|(e, _)| {
                if wanted == 0 {
                    return !strict;
                }
                exact
                    .iter()
                    .all(|(t, n)| e.0.get(*t).is_some_and(|have| have.as_deref() == *n))
                    && typed.iter().all(|t| e.0.contains_key(*t))
                    && (!strict || e.0.len() == wanted)
            })
            .map(|(e, q)| (e.clone(), q.clone()))
            .collect())
    }

    /// The quota `key` that applies to `user` (the principal's name) with `client_id`, and the
    /// (user, client-id) pair whose clients share one rate, in Kafka's order of precedence:
    /// user+client, user+default client, user, default user+client, default user+default
    /// client, default user, client, default client.
    pub fn resolve(&self, key: &str, user: &str, client_id: &str) -> Option<(f64, String, String)> {
        let all = self.by_entity.read().unwrap();
        let get = |parts: &[(&str, Option<&str>)]| {
            all.get(&QuotaEntity::of(parts))
                .and_then(|q| q.get(key))
                .copied()
        };
        let (u, c) = (Some(user), Some(client_id));
        let levels: [(&[(&str, Option<&str>)], bool, bool); 8] = [
            (&[(USER, u), (CLIENT_ID, c)], true, true),
            (&[(USER, u), (CLIENT_ID, None)], true, true),
            (&[(USER, u)], true, false),
            (&[(USER, None), (CLIENT_ID, c)], true, true),
            (&[(USER, None), (CLIENT_ID, None)], true, true),
            (&[(USER, None)], true, false),
            (&[(CLIENT_ID, c)], false, true),
            (&[(CLIENT_ID, None)], false, true),
        ];
        levels.iter().find_map(|(parts, by_user, by_client)| {
            get(parts).map(|bound| {
                (
                    bound,
                    if *by_user {
                        user.to_string()
                    } else {
                        String::new()
                    },
                    if *by_client {
                        client_id.to_string()
                    } else {
                        String::new()
                    },
                )
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ent(parts: &[(&str, Option<&str>)]) -> QuotaEntity {
        QuotaEntity::of(parts)
    }

    #[test]
    fn entities_round_trip_through_their_field() {
        for e in [
            ent(&[(USER, Some("a,b=c%<d>\t"))]),
            ent(&[(USER, None), (CLIENT_ID, Some("x"))]),
            ent(&[(IP, Some("10.0.0.1"))]),
        ] {
            assert_eq!(QuotaEntity::from_field(&e.to_field()), Some(e.clone()));
        }
        assert_eq!(QuotaEntity::from_field("user=%4"), None);
    }

    #[test]
    fn alterations_are_checked_as_kafka_checks_them() {
        let u = ent(&[(USER, Some("alice"))]);
        let none = BTreeMap::new();
        let set = |k: &str, v: f64| (k.to_string(), Some(v));
        assert_eq!(
            alteration(&none, &u, &[set(PRODUCER_BYTE_RATE, 1024.0)]).unwrap(),
            BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), Some(1024.0))])
        );
        assert_eq!(
            alteration(&none, &u, &[set(PRODUCER_BYTE_RATE, 1.5)]),
            Err(QuotaError::InvalidRequest(
                "producer_byte_rate cannot be a fractional value.".into()
            ))
        );
        assert_eq!(
            alteration(&none, &u, &[set("foo", 1.0)]),
            Err(QuotaError::InvalidRequest(
                "Invalid configuration key foo".into()
            ))
        );
        assert!(alteration(&none, &u, &[set(REQUEST_PERCENTAGE, 12.5)]).is_ok());
        assert!(matches!(
            alteration(&none, &u, &[set(CONNECTION_CREATION_RATE, 5.0)]),
            Err(QuotaError::InvalidRequest(_))
        ));
        let ip = ent(&[(IP, Some("nohost"))]);
        assert_eq!(
            alteration(&none, &ip, &[set(CONNECTION_CREATION_RATE, 5.0)]),
            Err(QuotaError::InvalidRequest(
                "nohost is not a valid IP or resolvable host.".into()
            ))
        );
        let dup = [set(PRODUCER_BYTE_RATE, 1.0), set(PRODUCER_BYTE_RATE, 2.0)];
        assert!(
            matches!(alteration(&none, &u, &dup), Err(QuotaError::InvalidRequest(m)) if m.starts_with("Duplicate quota key producer_byte_rate"))
        );
        // Removing a key that is not set changes nothing.
        assert!(
            alteration(&none, &u, &[(PRODUCER_BYTE_RATE.into(), None)])
                .unwrap()
                .is_empty()
        );
        assert!(matches!(
            validate_entity(&[("group".into(), Some("g".into()))]),
            Err(QuotaError::InvalidRequest(m)) if m == "Unhandled client quota entity type: group"
        ));
        assert!(matches!(
            validate_entity(&[(USER.into(), Some(String::new()))]),
            Err(QuotaError::InvalidRequest(m)) if m == "Empty user not supported"
        ));
    }

    #[test]
    fn the_most_specific_level_applies() {
        let q = ClientQuotas::default();
        let put = |parts: &[(&str, Option<&str>)], v: f64| {
            q.apply(
                &ent(parts),
                &BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), Some(v))]),
            )
        };
        assert_eq!(q.resolve(PRODUCER_BYTE_RATE, "alice", "app"), None);
        put(&[(CLIENT_ID, None)], 8.0);
        assert_eq!(
            q.resolve(PRODUCER_BYTE_RATE, "alice", "app"),
            Some((8.0, String::new(), "app".into()))
        );
        put(&[(USER, Some("alice"))], 4.0);
        assert_eq!(
            q.resolve(PRODUCER_BYTE_RATE, "alice", "app"),
            Some((4.0, "alice".into(), String::new()))
        );
        put(&[(USER, Some("alice")), (CLIENT_ID, Some("app"))], 2.0);
        assert_eq!(
            q.resolve(PRODUCER_BYTE_RATE, "alice", "app"),
            Some((2.0, "alice".into(), "app".into()))
        );
        assert_eq!(
            q.resolve(PRODUCER_BYTE_RATE, "bob", "app"),
            Some((8.0, String::new(), "app".into()))
        );
        assert_eq!(q.resolve(CONSUMER_BYTE_RATE, "alice", "app"), None);
    }

    #[test]
    fn describe_filters_as_kafka_does() {
        let q = ClientQuotas::default();
        let one = BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), Some(1.0))]);
        for parts in [
            &[(USER, Some("alice"))][..],
            &[(USER, Some("alice")), (CLIENT_ID, Some("app"))][..],
            &[(USER, None)][..],
            &[(CLIENT_ID, Some("app"))][..],
        ] {
            q.apply(&ent(parts), &one);
        }
        let c = |t: &str, m: i8, n: Option<&str>| Component {
            entity_type: t.into(),
            match_type: m,
            name: n.map(str::to_string),
        };
        let names = |r: Vec<(QuotaEntity, BTreeMap<String, f64>)>| {
            r.into_iter().map(|(e, _)| e.to_field()).collect::<Vec<_>>()
        };
        assert_eq!(q.describe(&[], false).unwrap().len(), 4);
        assert!(q.describe(&[], true).unwrap().is_empty());
        assert_eq!(
            names(q.describe(&[c(USER, 0, Some("alice"))], false).unwrap()),
            ["client-id=app,user=alice", "user=alice"]
        );
        assert_eq!(
            names(q.describe(&[c(USER, 0, Some("alice"))], true).unwrap()),
            ["user=alice"]
        );
        assert_eq!(
            names(q.describe(&[c(USER, 1, None)], false).unwrap()),
            ["user=<default>"]
        );
        assert_eq!(
            q.describe(&[c(CLIENT_ID, 2, None)], false).unwrap().len(),
            2
        );
        assert!(matches!(
            q.describe(&[c("group", 2, None)], false),
            Err(QuotaError::UnsupportedVersion(_))
        ));
        assert!(matches!(
            q.describe(&[c(USER, 0, None)], false),
            Err(QuotaError::InvalidRequest(_))
        ));
        assert!(matches!(
            q.describe(&[c(IP, 2, None), c(USER, 2, None)], false),
            Err(QuotaError::InvalidRequest(_))
        ));
    }
}
