//! Topic-level configuration: Kafka's topic config names, validation, and the mapping onto the
//! log store's settings (topic value over broker default).

use std::collections::BTreeMap;

use crate::config::BrokerConfig;
pub use crate::config::dynamic::BrokerDefaults;
use crate::config::dynamic::DynamicSource;
use crate::log::LogConfig;

/// Kafka's topic config names. `true` = Sluice acts on it; the others are accepted and stored
/// (clients set them routinely) but have no effect yet.
const TOPIC_CONFIGS: &[(&str, bool)] = &[
    ("cleanup.policy", true),
    ("compression.gzip.level", false),
    ("compression.lz4.level", false),
    ("compression.type", false),
    ("compression.zstd.level", false),
    ("delete.retention.ms", false),
    ("errors.deadletterqueue.group.enable", false),
    ("file.delete.delay.ms", false),
    ("flush.messages", true),
    ("flush.ms", true),
    ("follower.replication.throttled.replicas", false),
    ("index.interval.bytes", true),
    ("internal.segment.bytes", true),
    ("leader.replication.throttled.replicas", false),
    ("local.retention.bytes", false),
    ("local.retention.ms", false),
    ("max.compaction.lag.ms", false),
    ("max.decompressed.message.bytes", false),
    ("max.message.bytes", true),
    ("message.downconversion.enable", false),
    ("message.timestamp.after.max.ms", false),
    ("message.timestamp.before.max.ms", false),
    ("message.timestamp.difference.max.ms", false),
    ("message.timestamp.type", true),
    ("min.cleanable.dirty.ratio", false),
    ("min.compaction.lag.ms", false),
    ("min.insync.replicas", true),
    ("preallocate", false),
    ("remote.copy.lag.bytes", false),
    ("remote.copy.lag.ms", false),
    ("remote.log.copy.disable", false),
    ("remote.log.delete.on.disable", false),
    ("remote.storage.enable", false),
    ("retention.bytes", true),
    ("retention.ms", true),
    ("segment.bytes", true),
    ("segment.index.bytes", true),
    ("segment.jitter.ms", false),
    ("segment.ms", true),
    ("unclean.leader.election.enable", false),
];

/// The smallest `segment.bytes` (and `log.segment.bytes`) Kafka 4 accepts.
pub const MIN_SEGMENT_BYTES: i64 = 1024 * 1024;

pub fn is_topic_config(name: &str) -> bool {
    TOPIC_CONFIGS.iter().any(|(n, _)| *n == name)
}

/// Checks one topic config; the error is the message Kafka clients show with INVALID_CONFIG.
pub fn validate(name: &str, value: &str) -> Result<(), String> {
    if !is_topic_config(name) {
        return Err(format!("Unknown topic config name: {name}"));
    }
    if value.contains(['\n', '\t', '\r']) {
        return Err(format!("Invalid value for configuration {name}"));
    }
    // A number of the config's Kafka type (INT or LONG), at least `min`, in Kafka's words.
    let int = |min: i64| -> Result<(), String> {
        let is_int = config_type_of(name) == Some(config_type::INT);
        let parsed = if is_int {
            value.trim().parse::<i32>().map(i64::from).ok()
        } else {
            value.trim().parse::<i64>().ok()
        };
        match parsed {
            Some(v) if v >= min => Ok(()),
            Some(_) => Err(format!(
                "Invalid value {value} for configuration {name}: Value must be at least {min}"
            )),
            None => Err(format!(
                "Invalid value {value} for configuration {name}: Not a number of type {}",
                if is_int { "INT" } else { "LONG" }
            )),
        }
    };
    // A compression level: `min..=max`, or the codec's own default where that is -1 (gzip).
    let level = |min: i64, max: i64, also: Option<i64>| -> Result<(), String> {
        match value.parse::<i64>() {
            Ok(v) if (min..=max).contains(&v) || Some(v) == also => Ok(()),
            _ => Err(format!(
                "Invalid value {value} for configuration {name}: Value must be between {min} and {max}{}",
                also.map(|v| format!(" or equal to {v}"))
                    .unwrap_or_default()
            )),
        }
    };
    match name {
        "cleanup.policy" => {
            if value
                .split(',')
                .map(str::trim)
                .all(|p| p == "delete" || p == "compact")
            {
                Ok(())
            } else {
                Err(format!(
                    "Invalid value {value} for configuration cleanup.policy: String must be one of: compact, delete"
                ))
            }
        }
        "message.timestamp.type" => match value {
            "CreateTime" | "LogAppendTime" => Ok(()),
            _ => Err(format!(
                "Invalid value {value} for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"
            )),
        },
        "compression.type" => match value {
            "uncompressed" | "zstd" | "lz4" | "snappy" | "gzip" | "producer" => Ok(()),
            _ => Err(format!(
                "Invalid value {value} for configuration compression.type"
            )),
        },
        "retention.ms" | "retention.bytes" | "local.retention.ms" | "local.retention.bytes" => {
            int(-2)
        }
        "segment.bytes" => int(MIN_SEGMENT_BYTES),
        "internal.segment.bytes" => int(i32::MIN.into()),
        "segment.ms" | "flush.messages" | "flush.ms" | "min.insync.replicas" => int(1),
        "segment.index.bytes" => int(4),
        "max.message.bytes" | "index.interval.bytes" => int(0),
        "max.decompressed.message.bytes" => int(1),
        "remote.copy.lag.bytes" => int(-1),
        "remote.copy.lag.ms" => int(i64::MIN),
        "compression.gzip.level" => level(1, 9, Some(-1)),
        "compression.lz4.level" => level(1, 17, None),
        "compression.zstd.level" => level(-131072, 22, None),
        "preallocate"
        | "unclean.leader.election.enable"
        | "remote.storage.enable"
        | "remote.log.copy.disable"
        | "remote.log.delete.on.disable"
        | "errors.deadletterqueue.group.enable"
        | "message.downconversion.enable" => match value {
            "true" | "false" => Ok(()),
            _ => Err(format!(
                "Invalid value {value} for configuration {name}: Expected value to be either true or false"
            )),
        },
        _ => Ok(()),
    }
}

/// Whether a topic's cleanup.policy (its own, else the broker's `log.cleanup.policy`) is
/// `compact` without `delete`: such a log is never cut from the front, and DeleteRecords is
/// refused (POLICY_VIOLATION), as Kafka's `Partition.deleteRecordsOnLeader` does.
pub fn is_compact_only(broker: &BrokerConfig, topic: &BTreeMap<String, String>) -> bool {
    let policy = topic
        .get("cleanup.policy")
        .or_else(|| broker.raw.get("log.cleanup.policy"))
        .map_or("delete", String::as_str);
    let mut policies = policy.split(',').map(str::trim);
    let compact = policies.clone().any(|p| p.eq_ignore_ascii_case("compact"));
    compact && !policies.any(|p| p.eq_ignore_ascii_case("delete"))
}

/// A topic's compaction settings: its own configs over the broker's `log.cleanup.policy` and
/// `log.cleaner.*` (Kafka's defaults where neither is set or parses).
pub fn compaction(
    broker: &BrokerConfig,
    topic: &BTreeMap<String, String>,
) -> crate::log::cleaner::CompactionConfig {
    let value = |key: &str, broker_key: &str| {
        topic
            .get(key)
            .or_else(|| broker.raw.get(broker_key))
            .map(|v| v.trim().to_string())
    };
    let d = crate::log::cleaner::CompactionConfig::default();
    let policy = value("cleanup.policy", "log.cleanup.policy").unwrap_or_else(|| "delete".into());
    let has = |p: &str| policy.split(',').any(|x| x.trim().eq_ignore_ascii_case(p));
    let num = |key: &str, broker_key: &str, default: i64| {
        value(key, broker_key)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    crate::log::cleaner::CompactionConfig {
        compact: has("compact"),
        delete: has("delete"),
        min_cleanable_ratio: value(
            "min.cleanable.dirty.ratio",
            "log.cleaner.min.cleanable.ratio",
        )
        .and_then(|v| v.parse().ok())
        .unwrap_or(d.min_cleanable_ratio),
        min_compaction_lag_ms: num(
            "min.compaction.lag.ms",
            "log.cleaner.min.compaction.lag.ms",
            d.min_compaction_lag_ms,
        ),
        max_compaction_lag_ms: num(
            "max.compaction.lag.ms",
            "log.cleaner.max.compaction.lag.ms",
            d.max_compaction_lag_ms,
        ),
        delete_retention_ms: num(
            "delete.retention.ms",
            "log.cleaner.delete.retention.ms",
            d.delete_retention_ms,
        ),
    }
}

/// The effective settings of one topic: its own configs over the broker's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveTopicConfig {
    pub log: LogConfig,
    pub max_message_bytes: usize,
    pub log_append_time: bool,
    pub min_insync_replicas: i32,
    /// `cleanup.policy` holds `compact`: records without a key are refused.
    pub compact: bool,
}

fn get<T: std::str::FromStr>(cfg: &BTreeMap<String, String>, key: &str) -> Option<T> {
    cfg.get(key).and_then(|v| v.parse().ok())
}

/// `internal.segment.bytes` (Kafka's undocumented topic config for tests: any INT is
/// accepted; below a batch header's size, every batch gets a segment of its own) over
/// `segment.bytes` over the broker's.
fn segment_bytes(broker: &BrokerConfig, topic: &BTreeMap<String, String>) -> u64 {
    match get::<i64>(topic, "internal.segment.bytes") {
        Some(v) => v.max(crate::log::batch::HEADER_SIZE as i64) as u64,
        None => get(topic, "segment.bytes").unwrap_or(broker.log_segment_bytes),
    }
}

pub fn effective(broker: &BrokerConfig, topic: &BTreeMap<String, String>) -> EffectiveTopicConfig {
    let log = LogConfig {
        segment_bytes: segment_bytes(broker, topic),
        roll_ms: get(topic, "segment.ms").unwrap_or(broker.log_roll_ms),
        index_interval_bytes: get(topic, "index.interval.bytes")
            .unwrap_or(broker.log_index_interval_bytes),
        retention_ms: get(topic, "retention.ms").unwrap_or(broker.log_retention_ms),
        retention_bytes: get(topic, "retention.bytes").unwrap_or(broker.log_retention_bytes),
        flush_interval_messages: get(topic, "flush.messages")
            .unwrap_or(broker.log_flush_interval_messages),
        flush_interval_ms: get(topic, "flush.ms").unwrap_or(broker.log_flush_interval_ms),
        segment_index_bytes: get(topic, "segment.index.bytes")
            .unwrap_or(broker.log_index_size_max_bytes as u64),
    };
    EffectiveTopicConfig {
        log,
        max_message_bytes: get::<i64>(topic, "max.message.bytes")
            .unwrap_or(broker.message_max_bytes as i64)
            .max(0) as usize,
        log_append_time: match topic.get("message.timestamp.type") {
            Some(v) => v == "LogAppendTime",
            None => broker.log_message_timestamp_type_log_append,
        },
        min_insync_replicas: get(topic, "min.insync.replicas")
            .unwrap_or(broker.min_insync_replicas),
        compact: compaction(broker, topic).compact,
    }
}

// ---- describing topic configs (DescribeConfigs) -------------------------------------------

/// Kafka's config type ids (DescribeConfigs v3+).
pub mod config_type {
    pub const BOOLEAN: i8 = 1;
    pub const STRING: i8 = 2;
    pub const INT: i8 = 3;
    pub const LONG: i8 = 5;
    pub const DOUBLE: i8 = 6;
    pub const LIST: i8 = 7;
}

/// Where a described value comes from (Kafka's ConfigSource ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    DynamicTopic = 1,
    DynamicBroker = 2,
    DynamicDefaultBroker = 3,
    StaticBroker = 4,
    Default = 5,
    DynamicBrokerLogger = 6,
}

/// One topic config as Kafka describes it: the value in force and where it comes from, plus
/// the synonyms (topic value, then the broker setting it falls back to), highest precedence first.
#[derive(Debug, Clone)]
pub struct DescribedConfig {
    pub name: &'static str,
    pub value: String,
    pub source: ConfigSource,
    pub config_type: i8,
    pub synonyms: Vec<(String, String, ConfigSource)>,
}

/// (topic config, type, broker properties it falls back to (first = the one named as synonym),
/// Kafka 4.4's default): the topic configs Kafka 4.4 describes. Configs removed in Kafka 4 are
/// described only when a topic sets them.
const DESCRIBE_TABLE: &[(&str, i8, &[&str], &str)] = {
    use config_type::*;
    &[
        ("cleanup.policy", LIST, &["log.cleanup.policy"], "delete"),
        (
            "compression.gzip.level",
            INT,
            &["compression.gzip.level"],
            "-1",
        ),
        (
            "compression.lz4.level",
            INT,
            &["compression.lz4.level"],
            "9",
        ),
        (
            "compression.type",
            STRING,
            &["compression.type"],
            "producer",
        ),
        (
            "compression.zstd.level",
            INT,
            &["compression.zstd.level"],
            "3",
        ),
        (
            "delete.retention.ms",
            LONG,
            &["log.cleaner.delete.retention.ms"],
            "86400000",
        ),
        ("errors.deadletterqueue.group.enable", BOOLEAN, &[], "false"),
        (
            "file.delete.delay.ms",
            LONG,
            &["log.segment.delete.delay.ms"],
            "60000",
        ),
        (
            "flush.messages",
            LONG,
            &["log.flush.interval.messages"],
            "9223372036854775807",
        ),
        (
            "flush.ms",
            LONG,
            &["log.flush.interval.ms"],
            "9223372036854775807",
        ),
        ("follower.replication.throttled.replicas", LIST, &[], ""),
        (
            "index.interval.bytes",
            INT,
            &["log.index.interval.bytes"],
            "4096",
        ),
        ("leader.replication.throttled.replicas", LIST, &[], ""),
        (
            "local.retention.bytes",
            LONG,
            &["log.local.retention.bytes"],
            "-2",
        ),
        (
            "local.retention.ms",
            LONG,
            &["log.local.retention.ms"],
            "-2",
        ),
        (
            "max.compaction.lag.ms",
            LONG,
            &["log.cleaner.max.compaction.lag.ms"],
            "9223372036854775807",
        ),
        (
            "max.decompressed.message.bytes",
            INT,
            &["max.decompressed.message.bytes"],
            "2147483639",
        ),
        ("max.message.bytes", INT, &["message.max.bytes"], "1048588"),
        (
            "message.timestamp.after.max.ms",
            LONG,
            &["log.message.timestamp.after.max.ms"],
            "3600000",
        ),
        (
            "message.timestamp.before.max.ms",
            LONG,
            &["log.message.timestamp.before.max.ms"],
            "9223372036854775807",
        ),
        (
            "message.timestamp.type",
            STRING,
            &["log.message.timestamp.type"],
            "CreateTime",
        ),
        (
            "min.cleanable.dirty.ratio",
            DOUBLE,
            &["log.cleaner.min.cleanable.ratio"],
            "0.5",
        ),
        (
            "min.compaction.lag.ms",
            LONG,
            &["log.cleaner.min.compaction.lag.ms"],
            "0",
        ),
        ("min.insync.replicas", INT, &["min.insync.replicas"], "1"),
        ("preallocate", BOOLEAN, &["log.preallocate"], "false"),
        (
            "remote.copy.lag.bytes",
            LONG,
            &["log.remote.copy.lag.bytes"],
            "-1",
        ),
        ("remote.copy.lag.ms", LONG, &["log.remote.copy.lag.ms"], "0"),
        ("remote.log.copy.disable", BOOLEAN, &[], "false"),
        ("remote.log.delete.on.disable", BOOLEAN, &[], "false"),
        ("remote.storage.enable", BOOLEAN, &[], "false"),
        ("retention.bytes", LONG, &["log.retention.bytes"], "-1"),
        (
            "retention.ms",
            LONG,
            &[
                "log.retention.ms",
                "log.retention.minutes",
                "log.retention.hours",
            ],
            "604800000",
        ),
        ("segment.bytes", INT, &["log.segment.bytes"], "1073741824"),
        ("internal.segment.bytes", INT, &[], ""),
        (
            "segment.index.bytes",
            INT,
            &["log.index.size.max.bytes"],
            "10485760",
        ),
        ("segment.jitter.ms", LONG, &["log.roll.jitter.ms"], "0"),
        (
            "segment.ms",
            LONG,
            &["log.roll.ms", "log.roll.hours"],
            "604800000",
        ),
        (
            "unclean.leader.election.enable",
            BOOLEAN,
            &["unclean.leader.election.enable"],
            "false",
        ),
        ("message.downconversion.enable", BOOLEAN, &[], "true"),
        (
            "message.timestamp.difference.max.ms",
            LONG,
            &[],
            "9223372036854775807",
        ),
    ]
};

/// The Kafka type id of a topic config.
fn config_type_of(name: &str) -> Option<i8> {
    DESCRIBE_TABLE
        .iter()
        .find(|(n, ..)| *n == name)
        .map(|(_, t, ..)| *t)
}

/// The topic config a broker property is the default of (`log.retention.hours` ->
/// `retention.ms`), for the broker properties Kafka has.
pub fn topic_config_of_broker_key(key: &str) -> Option<&'static str> {
    DESCRIBE_TABLE
        .iter()
        .find(|(_, _, broker_keys, _)| broker_keys.contains(&key))
        .filter(|_| crate::config::keys::kafka_keys().contains_key(key))
        .map(|(n, ..)| *n)
}

/// Configs described only when a topic sets them: the Kafka-4-removed ones still accepted for
/// old clients, and the internal one for tests.
const DESCRIBED_WHEN_SET: &[&str] = &[
    "message.downconversion.enable",
    "message.timestamp.difference.max.ms",
    "internal.segment.bytes",
];

/// The broker-level value a topic config falls back to (`broker` is the merged configuration).
fn broker_value(broker: &BrokerConfig, name: &str) -> Option<String> {
    Some(match name {
        "flush.messages" => broker.log_flush_interval_messages.to_string(),
        "flush.ms" => broker.log_flush_interval_ms.to_string(),
        "index.interval.bytes" => broker.log_index_interval_bytes.to_string(),
        "max.message.bytes" => broker.message_max_bytes.to_string(),
        "message.timestamp.type" => if broker.log_message_timestamp_type_log_append {
            "LogAppendTime"
        } else {
            "CreateTime"
        }
        .to_string(),
        "min.insync.replicas" => broker.min_insync_replicas.to_string(),
        "retention.bytes" => broker.log_retention_bytes.to_string(),
        "retention.ms" => broker.log_retention_ms.to_string(),
        "segment.bytes" => broker.log_segment_bytes.to_string(),
        "segment.index.bytes" => broker.log_index_size_max_bytes.to_string(),
        "segment.ms" => broker.log_roll_ms.to_string(),
        // The others as the broker property reads (a dynamic value included).
        _ => {
            let (_, _, keys, _) = DESCRIBE_TABLE.iter().find(|(n, ..)| *n == name)?;
            return keys
                .first()
                .and_then(|k| broker.raw.get(*k))
                .filter(|v| !v.is_empty())
                .cloned();
        }
    })
}

/// Every config of a topic with `topic` set, as DescribeConfigs reports it, sorted by name.
/// The value in force is the topic's own, else the broker's (dynamic for this broker, dynamic
/// cluster default, static), else Kafka's default; the synonyms list each level that is set,
/// highest precedence first, as Kafka does.
pub fn describe(broker: &BrokerDefaults, topic: &BTreeMap<String, String>) -> Vec<DescribedConfig> {
    let mut out = Vec::new();
    for &(name, config_type, broker_keys, default) in DESCRIBE_TABLE {
        let own = topic.get(name);
        if own.is_none() && DESCRIBED_WHEN_SET.contains(&name) {
            continue;
        }
        let mut synonyms = Vec::new();
        if let Some(v) = own {
            synonyms.push((name.to_string(), v.clone(), ConfigSource::DynamicTopic));
        }
        for k in broker_keys.iter() {
            for (v, src) in broker.dynamic.values(k) {
                synonyms.push((k.to_string(), v.to_string(), src.into()));
            }
        }
        let dynamic_source = synonyms
            .iter()
            .map(|(_, _, src)| *src)
            .find(|src| *src != ConfigSource::DynamicTopic);
        let explicit = broker_keys.iter().any(|k| broker.base.is_explicitly_set(k));
        let fallback = broker_value(&broker.merged, name).unwrap_or_else(|| default.to_string());
        let static_value = broker_value(&broker.base, name).unwrap_or_else(|| default.to_string());
        if let Some(k) = broker_keys.first() {
            let src = if explicit {
                ConfigSource::StaticBroker
            } else {
                ConfigSource::Default
            };
            synonyms.push((k.to_string(), static_value, src));
        }
        let (value, source) = match (own, dynamic_source) {
            (Some(v), _) => (v.clone(), ConfigSource::DynamicTopic),
            (None, Some(src)) => (fallback, src),
            (None, None) if explicit => (fallback, ConfigSource::StaticBroker),
            (None, None) => (fallback, ConfigSource::Default),
        };
        out.push(DescribedConfig {
            name,
            value,
            source,
            config_type,
            synonyms,
        });
    }
    out.sort_by_key(|c| c.name);
    out
}

impl From<DynamicSource> for ConfigSource {
    fn from(s: DynamicSource) -> ConfigSource {
        match s {
            DynamicSource::Broker => ConfigSource::DynamicBroker,
            DynamicSource::ClusterDefault => ConfigSource::DynamicDefaultBroker,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_described_config_can_be_set() {
        for (name, _, _, default) in DESCRIBE_TABLE {
            assert!(is_topic_config(name), "{name} is described but refused");
            if default.is_empty() && DESCRIBED_WHEN_SET.contains(name) {
                continue;
            }
            assert_eq!(
                validate(name, default),
                Ok(()),
                "{name}'s default {default}"
            );
        }
        assert_eq!(DESCRIBE_TABLE.len(), TOPIC_CONFIGS.len());
    }

    #[test]
    fn segment_bytes_is_at_least_a_mebibyte_unless_internal() {
        assert_eq!(
            validate("segment.bytes", "1024"),
            Err("Invalid value 1024 for configuration segment.bytes: Value must be at least 1048576".into())
        );
        assert_eq!(validate("segment.bytes", "1048576"), Ok(()));
        for v in ["1024", "0", "-1"] {
            assert_eq!(validate("internal.segment.bytes", v), Ok(()), "{v}");
        }
        assert!(validate("internal.segment.bytes", "4294967296").is_err());
        let broker = BrokerConfig::from_pairs(Vec::<(String, String)>::new()).unwrap();
        let mut topic = BTreeMap::new();
        topic.insert("segment.bytes".to_string(), "2097152".to_string());
        assert_eq!(effective(&broker, &topic).log.segment_bytes, 2_097_152);
        topic.insert("internal.segment.bytes".to_string(), "1024".to_string());
        assert_eq!(effective(&broker, &topic).log.segment_bytes, 1024);
        topic.insert("internal.segment.bytes".to_string(), "-1".to_string());
        assert_eq!(
            effective(&broker, &topic).log.segment_bytes,
            crate::log::batch::HEADER_SIZE as u64
        );
        let described = |t: &BTreeMap<String, String>| {
            let d = BrokerDefaults::new(std::sync::Arc::new(broker.clone()), Default::default());
            describe(&d, t)
                .iter()
                .any(|c| c.name == "internal.segment.bytes")
        };
        assert!(described(&topic));
        assert!(!described(&BTreeMap::new()));
    }

    #[test]
    fn compression_levels_are_bounded_as_in_kafka() {
        for (name, ok, bad) in [
            (
                "compression.gzip.level",
                ["-1", "1", "9"],
                ["0", "10", "-2"],
            ),
            ("compression.lz4.level", ["1", "9", "17"], ["0", "18", "-1"]),
            (
                "compression.zstd.level",
                ["-131072", "3", "22"],
                ["23", "-131073", "x"],
            ),
        ] {
            for v in ok {
                assert_eq!(validate(name, v), Ok(()), "{name}={v}");
            }
            for v in bad {
                assert!(validate(name, v).is_err(), "{name}={v} accepted");
            }
        }
        assert!(validate("max.decompressed.message.bytes", "0").is_err());
        assert!(validate("remote.copy.lag.bytes", "-2").is_err());
        assert_eq!(validate("remote.copy.lag.ms", "-1"), Ok(()));
        assert!(validate("remote.log.copy.disable", "yes").is_err());
    }
}
