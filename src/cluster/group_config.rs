//! Dynamic group configs (config resource type GROUP, KIP-848/932/1071): the keys Kafka 4.4's
//! GroupConfig defines, their validation with Kafka's messages, DescribeConfigs' view of a
//! group, and [`GroupConfigs`], the one owner of the values set per group, which the group
//! and share coordinators query by group id.
//!
//! A key's default is the broker setting it is a synonym of (`group.consumer.*`,
//! `group.share.*`, `group.streams.*`), else GroupConfig's own. Validation is of the group's
//! whole resulting set, in Kafka's order: unknown names, duplicate rack tags, each value's
//! type and lower bound (in definition order), then the broker's min/max bounds and the
//! session-over-heartbeat checks. Values are stored as Kafka shows them after parsing
//! (numbers without sign or spaces, booleans in lower case, strings trimmed).

use std::collections::BTreeMap;
use std::sync::RwLock;

use crate::cluster::topic_config::config_type;
use crate::config::BrokerConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    Int,
    Long,
    Bool,
    Str,
    List,
}

impl Ty {
    pub fn code(self) -> i8 {
        match self {
            Ty::Int => config_type::INT,
            Ty::Long => config_type::LONG,
            Ty::Bool => config_type::BOOLEAN,
            Ty::Str => config_type::STRING,
            Ty::List => config_type::LIST,
        }
    }
}

/// A value check that does not depend on the broker.
#[derive(Debug, Clone, Copy)]
enum Check {
    None,
    AtLeast(i64),
    OneOf(&'static [&'static str]),
    AutoOffsetReset,
}

/// One group config key as Kafka 4.4 defines it.
#[derive(Debug)]
pub struct Key {
    pub name: &'static str,
    pub ty: Ty,
    /// The broker config the default comes from.
    pub synonym: Option<&'static str>,
    /// GroupConfig's own default (used without a synonym).
    default: &'static str,
    check: Check,
    /// Internal keys are described only when set.
    pub internal: bool,
    pub doc: &'static str,
}

const fn key(
    name: &'static str,
    ty: Ty,
    synonym: Option<&'static str>,
    default: &'static str,
    check: Check,
    internal: bool,
    doc: &'static str,
) -> Key {
    Key {
        name,
        ty,
        synonym,
        default,
        check,
        internal,
        doc,
    }
}

use Check::{AtLeast, AutoOffsetReset, OneOf};
use Ty::{Bool, Int, List, Long, Str};

/// Every key, in Kafka's definition order (the order values are parsed and checked in).
#[rustfmt::skip]
pub static KEYS: &[Key] = &[
    key("consumer.session.timeout.ms", Int, Some("group.consumer.session.timeout.ms"), "45000", AtLeast(1), false,
        "The timeout to detect client failures when using the consumer group protocol."),
    key("consumer.heartbeat.interval.ms", Int, Some("group.consumer.heartbeat.interval.ms"), "5000", AtLeast(1), false,
        "The heartbeat interval given to the members of a consumer group."),
    key("consumer.assignment.interval.ms", Int, Some("group.consumer.assignment.interval.ms"), "1000", AtLeast(0), false,
        "The interval between assignment updates for a consumer group."),
    key("consumer.assignor.offload.enable", Bool, Some("group.consumer.assignor.offload.enable"), "true", Check::None, true,
        "Whether to offload consumer group assignment to a group coordinator background thread."),
    key("share.session.timeout.ms", Int, Some("group.share.session.timeout.ms"), "45000", AtLeast(1), false,
        "The timeout to detect client failures when using the share group protocol."),
    key("share.heartbeat.interval.ms", Int, Some("group.share.heartbeat.interval.ms"), "5000", AtLeast(1), false,
        "The heartbeat interval given to the members of a share group."),
    key("share.record.lock.duration.ms", Int, Some("group.share.record.lock.duration.ms"), "30000", AtLeast(1000), false,
        "The record acquisition lock duration in milliseconds for share groups."),
    key("share.delivery.count.limit", Int, Some("group.share.delivery.count.limit"), "5", AtLeast(2), false,
        "The maximum number of delivery attempts for a record delivered to a share group."),
    key("share.partition.max.record.locks", Int, Some("group.share.partition.max.record.locks"), "2000", AtLeast(100), false,
        "Share-group record lock limit per share-partition."),
    key("share.auto.offset.reset", Str, None, "latest", AutoOffsetReset, false,
        "The strategy to initialize the share-partition start offset. <ul><li>earliest: automatically reset the offset to the earliest offset</li><li>latest: automatically reset the offset to the latest offset</li><li>by_duration:&lt;duration&gt;: automatically reset the offset to a configured duration from the current timestamp. &lt;duration&gt; must be specified in ISO8601 format (PnDTnHnMn.nS). Negative duration is not allowed.</li><li>anything else: throw exception to the share consumer.</li></ul>"),
    key("share.isolation.level", Str, None, "read_uncommitted", OneOf(&["read_committed", "read_uncommitted"]), false,
        "Controls how to read records written transactionally. If set to \"read_committed\", the share group will only deliver transactional records which have been committed. If set to \"read_uncommitted\", the share group will return all messages, even transactional messages which have been aborted. Non-transactional records will be returned unconditionally in either mode."),
    key("share.renew.acknowledge.enable", Bool, None, "true", Check::None, false,
        "Whether the renew acknowledge type is enabled for the share group."),
    key("share.assignment.interval.ms", Int, Some("group.share.assignment.interval.ms"), "1000", AtLeast(0), false,
        "The interval between assignment updates for a share group."),
    key("share.assignor.offload.enable", Bool, Some("group.share.assignor.offload.enable"), "true", Check::None, true,
        "Whether to offload share group assignment to a group coordinator background thread."),
    key("streams.session.timeout.ms", Int, Some("group.streams.session.timeout.ms"), "45000", AtLeast(1), false,
        "The timeout to detect client failures when using the streams group protocol."),
    key("streams.heartbeat.interval.ms", Int, Some("group.streams.heartbeat.interval.ms"), "5000", AtLeast(1), false,
        "The heartbeat interval given to the members."),
    key("streams.num.standby.replicas", Int, Some("group.streams.num.standby.replicas"), "0", AtLeast(0), false,
        "The number of standby replicas for each task."),
    key("streams.initial.rebalance.delay.ms", Int, Some("group.streams.initial.rebalance.delay.ms"), "3000", AtLeast(0), false,
        "The amount of time the group coordinator will wait for more streams clients to join a new group before performing the first rebalance. A longer delay means potentially fewer rebalances."),
    key("streams.assignment.interval.ms", Int, Some("group.streams.assignment.interval.ms"), "1000", AtLeast(0), false,
        "The interval between assignment updates for a streams group."),
    key("streams.assignor.offload.enable", Bool, Some("group.streams.assignor.offload.enable"), "true", Check::None, true,
        "Whether to offload streams group assignment to a group coordinator background thread."),
    key("streams.task.offset.interval.ms", Int, Some("group.streams.task.offset.interval.ms"), "60000", AtLeast(1), true,
        "The interval in which the warmup task changelog offsets on a client are updated on the broker. The offsets are sent with the next heartbeat after this time has passed."),
    key("streams.num.warmup.replicas", Int, Some("group.streams.num.warmup.replicas"), "2", AtLeast(0), true,
        "The maximum number of warmup task replicas."),
    key("streams.rack.aware.assignment.tags", List, Some("group.streams.rack.aware.assignment.tags"), "", Check::None, false,
        "List of client tag keys used to distribute standby replicas across Kafka Streams instances. When configured, and the used broker-side assignor supports it, it will make a best-effort to distribute standby tasks over each client tag dimension."),
    key("streams.acceptable.recovery.lag", Long, Some("group.streams.acceptable.recovery.lag"), "10000", AtLeast(0), true,
        "The maximum acceptable lag (number of offsets to catch up) for a client to be considered caught-up enough to receive an active task assignment."),
    key("streams.assignor.name", Str, Some("group.streams.assignors"), "", Check::None, false,
        "The task assignor to use for this streams group, selected by short name from the assignors registered via the broker configuration group.streams.assignors. When unset, the group defaults to the first assignor configured in the broker's group.streams.assignors setting. Changing the assignor does not trigger a rebalance for the group; the new assignor takes effect on the next rebalance."),
    key("errors.deadletterqueue.topic.name", Str, None, "", Check::None, false,
        "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. If blank (the default), the group does not have a DLQ topic."),
    key("errors.deadletterqueue.copy.record.enable", Bool, None, "false", Check::None, false,
        "When writing onto the dead-letter queue topic, whether to copy the original record onto the DLQ topic, or just write a record containing the context information headers."),
];

pub fn find(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// The broker bounds checked after parsing, in Kafka's order: (key, min key, max key).
#[rustfmt::skip]
const RANGES: &[(&str, Option<&str>, Option<&str>)] = &[
    ("consumer.heartbeat.interval.ms", Some("group.consumer.min.heartbeat.interval.ms"), Some("group.consumer.max.heartbeat.interval.ms")),
    ("consumer.session.timeout.ms", Some("group.consumer.min.session.timeout.ms"), Some("group.consumer.max.session.timeout.ms")),
    ("consumer.assignment.interval.ms", Some("group.consumer.min.assignment.interval.ms"), Some("group.consumer.max.assignment.interval.ms")),
    ("share.heartbeat.interval.ms", Some("group.share.min.heartbeat.interval.ms"), Some("group.share.max.heartbeat.interval.ms")),
    ("share.session.timeout.ms", Some("group.share.min.session.timeout.ms"), Some("group.share.max.session.timeout.ms")),
    ("share.record.lock.duration.ms", Some("group.share.min.record.lock.duration.ms"), Some("group.share.max.record.lock.duration.ms")),
    ("share.delivery.count.limit", Some("group.share.min.delivery.count.limit"), Some("group.share.max.delivery.count.limit")),
    ("share.partition.max.record.locks", Some("group.share.min.partition.max.record.locks"), Some("group.share.max.partition.max.record.locks")),
    ("share.assignment.interval.ms", Some("group.share.min.assignment.interval.ms"), Some("group.share.max.assignment.interval.ms")),
    ("streams.heartbeat.interval.ms", Some("group.streams.min.heartbeat.interval.ms"), Some("group.streams.max.heartbeat.interval.ms")),
    ("streams.session.timeout.ms", Some("group.streams.min.session.timeout.ms"), Some("group.streams.max.session.timeout.ms")),
    ("streams.num.standby.replicas", None, Some("group.streams.max.standby.replicas")),
    ("streams.assignment.interval.ms", Some("group.streams.min.assignment.interval.ms"), Some("group.streams.max.assignment.interval.ms")),
    ("streams.task.offset.interval.ms", Some("group.streams.min.task.offset.interval.ms"), None),
    ("streams.num.warmup.replicas", None, Some("group.streams.max.warmup.replicas")),
];

/// (session key, heartbeat key) pairs: a group's session must exceed its heartbeat.
const SESSIONS: &[(&str, &str)] = &[
    (
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
    ),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    (
        "streams.session.timeout.ms",
        "streams.heartbeat.interval.ms",
    ),
];

/// A broker setting as a string: its value in force, else Sluice's or Kafka's default.
fn broker_value(c: &BrokerConfig, key: &str) -> String {
    c.raw
        .get(key)
        .map(String::as_str)
        .or_else(|| crate::config::keys::default_of(key))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn broker_num(c: &BrokerConfig, key: &str) -> i64 {
    broker_value(c, key).parse().unwrap_or(0)
}

/// A key's value when the group does not set it.
pub fn default_value(c: &BrokerConfig, k: &Key) -> String {
    match k.synonym {
        Some("group.streams.assignors") => broker_value(c, "group.streams.assignors")
            .split(',')
            .map(str::trim)
            .find(|s| !s.is_empty())
            .unwrap_or_default()
            .to_string(),
        Some(s) => broker_value(c, s),
        None => k.default.to_string(),
    }
}

/// An ISO-8601 duration (`PnDTnHnMn.nS`, as Java's `Duration.parse` reads it,
/// case-insensitive) that is not negative, in milliseconds: what `by_duration:` takes.
pub fn duration_ms(d: &str) -> Option<i64> {
    let d = d.to_ascii_uppercase();
    let rest = d.strip_prefix('P')?;
    let (days, time) = match rest.split_once('T') {
        Some((days, time)) => (days, Some(time)),
        None => (rest, None),
    };
    // A whole number (and, for seconds, up to 9 fraction digits) in milliseconds per unit.
    let number = |s: &str, unit_ms: i64, frac: bool| -> Option<i64> {
        let (int, fr) = match s.split_once(['.', ',']) {
            Some((i, f)) if frac => (i, Some(f)),
            Some(_) => return None,
            None => (s, None),
        };
        let int = int.strip_prefix('+').unwrap_or(int);
        if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let mut ms = int.parse::<i64>().ok()?.checked_mul(unit_ms)?;
        if let Some(f) = fr {
            if f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let millis: String = f.chars().chain("000".chars()).take(3).collect();
            ms = ms.checked_add(millis.parse::<i64>().ok()?)?;
        }
        Some(ms)
    };
    let mut total: Option<i64> = None;
    if !days.is_empty() {
        let n = days.strip_suffix('D')?;
        total = Some(number(n, 86_400_000, false)?);
    }
    if let Some(mut t) = time {
        if t.is_empty() {
            return None;
        }
        for (unit, unit_ms) in [('H', 3_600_000), ('M', 60_000), ('S', 1_000)] {
            if let Some(i) = t.find(unit) {
                let ms = number(&t[..i], unit_ms, unit == 'S')?;
                total = Some(total.unwrap_or(0).checked_add(ms)?);
                t = &t[i + 1..];
            }
        }
        if !t.is_empty() {
            return None;
        }
    }
    total
}

fn is_duration(d: &str) -> bool {
    duration_ms(d).is_some()
}

/// Parses one value as Kafka's ConfigDef does, returning it as Kafka shows it afterwards.
fn parse(k: &Key, raw: &str) -> Result<String, String> {
    let v = raw.trim();
    let bad = |why: &str| format!("Invalid value {raw} for configuration {}: {why}", k.name);
    let value = match k.ty {
        Int => v
            .parse::<i32>()
            .map(|n| n.to_string())
            .map_err(|_| bad("Not a number of type INT"))?,
        Long => v
            .parse::<i64>()
            .map(|n| n.to_string())
            .map_err(|_| bad("Not a number of type LONG"))?,
        Bool => match v.to_ascii_lowercase().as_str() {
            b @ ("true" | "false") => b.to_string(),
            _ => return Err(bad("Expected value to be either true or false")),
        },
        Str => v.to_string(),
        List => v
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(","),
    };
    match k.check {
        Check::None => {}
        AtLeast(min) => {
            if value.parse::<i64>().is_ok_and(|n| n < min) {
                return Err(bad(&format!("Value must be at least {min}")));
            }
        }
        OneOf(options) => {
            if !options.contains(&value.as_str()) {
                return Err(bad(&format!(
                    "String must be one of: {}",
                    options.join(", ")
                )));
            }
        }
        AutoOffsetReset => {
            let ok = value == "earliest"
                || value == "latest"
                || value.strip_prefix("by_duration:").is_some_and(is_duration);
            if !ok {
                return Err(bad(&format!(
                    "Invalid value `{raw}` for configuration {}. The value must be either \
                     'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
                    k.name
                )));
            }
        }
    }
    Ok(value)
}

/// Validates a group's whole set of configs (after a change) against the broker's bounds;
/// returns them as they are stored, or Kafka's INVALID_CONFIG message.
pub fn validate(
    c: &BrokerConfig,
    set: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    if let Some(name) = set.keys().find(|n| find(n).is_none()) {
        return Err(format!("Unknown group config name: {name}"));
    }
    if let Some(tags) = set.get("streams.rack.aware.assignment.tags") {
        let items: Vec<&str> = tags.trim().split(',').map(str::trim).collect();
        let mut unique = items.clone();
        unique.sort_unstable();
        unique.dedup();
        if !tags.trim().is_empty() && unique.len() != items.len() {
            return Err(
                "streams.rack.aware.assignment.tags must not contain duplicate tag keys.".into(),
            );
        }
    }
    let mut out = BTreeMap::new();
    for k in KEYS {
        if let Some(v) = set.get(k.name) {
            out.insert(k.name.to_string(), parse(k, v)?);
        }
    }
    let num = |key: &str| out.get(key).and_then(|v| v.parse::<i64>().ok());
    for (key, min, max) in RANGES {
        let Some(v) = num(key) else { continue };
        let (lo, hi) = (min.map(|m| broker_num(c, m)), max.map(|m| broker_num(c, m)));
        match (lo, hi) {
            (Some(lo), Some(hi)) if v < lo || v > hi => {
                return Err(format!(
                    "{key} must be in the range {lo} to {hi} inclusive."
                ));
            }
            (None, Some(hi)) if v > hi => {
                return Err(format!("{key} must be less than or equal to {hi}"));
            }
            (Some(lo), None) if v < lo => {
                return Err(format!("{key} must be greater than or equal to {lo}"));
            }
            _ => {}
        }
    }
    if let Some(name) = out.get("streams.assignor.name") {
        let registered: Vec<String> = broker_value(c, "group.streams.assignors")
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if !registered.contains(name) {
            return Err(format!(
                "streams.assignor.name '{name}' is not a registered task assignor. \
                 Registered assignors are: [{}].",
                registered.join(", ")
            ));
        }
    }
    for (session, heartbeat) in SESSIONS {
        if num(session).is_none() && num(heartbeat).is_none() {
            continue;
        }
        let or_default = |key: &str| {
            num(key).unwrap_or_else(|| {
                find(key).map_or(0, |k| default_value(c, k).parse().unwrap_or(0))
            })
        };
        if or_default(session) <= or_default(heartbeat) {
            return Err(format!("{session} must be greater than {heartbeat}"));
        }
    }
    if let Some(t) = out.get("errors.deadletterqueue.topic.name")
        && t.starts_with("__")
    {
        return Err(
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'".into(),
        );
    }
    Ok(out)
}

/// One group config as DescribeConfigs shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Described {
    pub name: &'static str,
    pub value: String,
    /// Set for this group (DYNAMIC_GROUP_CONFIG) rather than the default.
    pub dynamic: bool,
    pub config_type: i8,
    pub doc: &'static str,
    /// The broker setting (or, without one, the key itself) the default comes from, and
    /// that default.
    pub default_name: &'static str,
    pub default: String,
}

/// Every key a group shows (internal ones only when set), in definition order.
pub fn describe(c: &BrokerConfig, set: &BTreeMap<String, String>) -> Vec<Described> {
    KEYS.iter()
        .filter(|k| !k.internal || set.contains_key(k.name))
        .map(|k| {
            let default = default_value(c, k);
            let own = set.get(k.name);
            Described {
                name: k.name,
                value: own.cloned().unwrap_or_else(|| default.clone()),
                dynamic: own.is_some(),
                config_type: k.ty.code(),
                doc: k.doc,
                default_name: k.synonym.unwrap_or(k.name),
                default,
            }
        })
        .collect()
}

/// The configs set per group: the one owner. On one node the controller changes it after
/// persisting a change; in a cluster it follows the metadata image.
#[derive(Debug, Default)]
pub struct GroupConfigs {
    by_group: RwLock<BTreeMap<String, BTreeMap<String, String>>>,
}

impl GroupConfigs {
    /// The configs `group` sets (empty if none).
    pub fn of(&self, group: &str) -> BTreeMap<String, String> {
        self.by_group
            .read()
            .unwrap()
            .get(group)
            .cloned()
            .unwrap_or_default()
    }

    /// A number `group` sets for `key`.
    pub fn num(&self, group: &str, key: &str) -> Option<i64> {
        self.by_group
            .read()
            .unwrap()
            .get(group)?
            .get(key)?
            .parse()
            .ok()
    }

    /// A value `group` sets for `key`.
    pub fn value(&self, group: &str, key: &str) -> Option<String> {
        self.by_group.read().unwrap().get(group)?.get(key).cloned()
    }

    /// The groups that set any config, sorted.
    pub fn groups(&self) -> Vec<String> {
        self.by_group.read().unwrap().keys().cloned().collect()
    }

    pub fn all(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        self.by_group.read().unwrap().clone()
    }

    /// Replaces every group's configs; whether anything changed.
    pub fn replace_all(&self, all: BTreeMap<String, BTreeMap<String, String>>) -> bool {
        let mut g = self.by_group.write().unwrap();
        let changed = *g != all;
        *g = all;
        changed
    }

    /// Replaces one group's configs (none: the group has none left).
    pub fn replace(&self, group: &str, set: BTreeMap<String, String>) {
        let mut g = self.by_group.write().unwrap();
        if set.is_empty() {
            g.remove(group);
        } else {
            g.insert(group.to_string(), set);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker() -> BrokerConfig {
        BrokerConfig::from_pairs(Vec::<(String, String)>::new()).unwrap()
    }

    fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn twenty_one_keys_shown_by_default() {
        let d = describe(&broker(), &BTreeMap::new());
        assert_eq!(d.len(), 21);
        let hb = d
            .iter()
            .find(|d| d.name == "consumer.heartbeat.interval.ms")
            .unwrap();
        assert_eq!((hb.value.as_str(), hb.dynamic), ("5000", false));
        assert_eq!(hb.default_name, "group.consumer.heartbeat.interval.ms");
        let a = d
            .iter()
            .find(|d| d.name == "streams.assignor.name")
            .unwrap();
        assert_eq!(a.value, "sticky");
        let internal = describe(
            &broker(),
            &set(&[("consumer.assignor.offload.enable", "false")]),
        );
        assert_eq!(internal.len(), 22);
    }

    #[test]
    #[rustfmt::skip]
    fn kafkas_messages() {
        let c = broker();
        let err = |pairs: &[(&str, &str)]| validate(&c, &set(pairs)).unwrap_err();
        for (key, value, message) in [
            ("x", "1", "Unknown group config name: x"),
            ("consumer.session.timeout.ms", "1000",
             "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
            ("consumer.session.timeout.ms", "abc",
             "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
            ("share.record.lock.duration.ms", "500",
             "Invalid value 500 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
            ("streams.num.standby.replicas", "5",
             "streams.num.standby.replicas must be less than or equal to 2"),
            ("streams.task.offset.interval.ms", "10",
             "streams.task.offset.interval.ms must be greater than or equal to 15000"),
            ("share.isolation.level", "READ_COMMITTED",
             "Invalid value READ_COMMITTED for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"),
            ("streams.assignor.name", "foo",
             "streams.assignor.name 'foo' is not a registered task assignor. Registered assignors are: [sticky]."),
            ("streams.rack.aware.assignment.tags", "a,b,a",
             "streams.rack.aware.assignment.tags must not contain duplicate tag keys."),
            ("errors.deadletterqueue.topic.name", "__x",
             "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"),
        ] {
            assert_eq!(err(&[(key, value)]), message);
        }
        // Parse errors come in definition order, before any range check.
        assert_eq!(
            err(&[("share.isolation.level", "x"), ("consumer.session.timeout.ms", "x")]),
            "Invalid value x for configuration consumer.session.timeout.ms: Not a number of type INT"
        );
        assert!(err(&[("share.auto.offset.reset", "EARLIEST")]).contains("by_duration:<PnDTnHnMn.nS>"));
    }

    #[test]
    fn values_stored_as_parsed() {
        let c = broker();
        let ok = validate(
            &c,
            &set(&[
                ("consumer.heartbeat.interval.ms", " +7000 "),
                ("share.renew.acknowledge.enable", "TRUE"),
                ("share.auto.offset.reset", "by_duration:pt1h"),
            ]),
        )
        .unwrap();
        assert_eq!(ok["consumer.heartbeat.interval.ms"], "7000");
        assert_eq!(ok["share.renew.acknowledge.enable"], "true");
        for good in ["PT0S", "P1D", "PT1.5S", "P1DT2H3M4S"] {
            assert!(is_duration(good), "{good}");
        }
        for bad in ["", "P", "P1DT", "P-1D", "PT1.5M", "1D", "PT1S2H"] {
            assert!(!is_duration(bad), "{bad}");
        }
        assert_eq!(duration_ms("P1DT1H1M1.5S"), Some(90_061_500));
        assert_eq!(duration_ms("pt2m"), Some(120_000));
    }
}
