//! Topic-level configuration: Kafka's topic config names, validation, and the mapping onto the
//! log store's settings (topic value over broker default).

use std::collections::BTreeMap;

use crate::config::BrokerConfig;
use crate::log::LogConfig;

/// Kafka's topic config names. `true` = Sluice acts on it; the others are accepted and stored
/// (clients set them routinely) but have no effect yet.
const TOPIC_CONFIGS: &[(&str, bool)] = &[
    ("cleanup.policy", true),
    ("compression.type", false),
    ("delete.retention.ms", false),
    ("file.delete.delay.ms", false),
    ("flush.messages", true),
    ("flush.ms", true),
    ("follower.replication.throttled.replicas", false),
    ("index.interval.bytes", true),
    ("leader.replication.throttled.replicas", false),
    ("local.retention.bytes", false),
    ("local.retention.ms", false),
    ("max.compaction.lag.ms", false),
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
    ("remote.storage.enable", false),
    ("retention.bytes", true),
    ("retention.ms", true),
    ("segment.bytes", true),
    ("segment.index.bytes", true),
    ("segment.jitter.ms", false),
    ("segment.ms", true),
    ("unclean.leader.election.enable", false),
];

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
    let int = |min: i64| -> Result<(), String> {
        match value.parse::<i64>() {
            Ok(v) if v >= min => Ok(()),
            _ => Err(format!(
                "Invalid value {value} for configuration {name}: must be an integer of at least {min}"
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
        "segment.bytes" => int(14),
        "segment.ms" | "flush.messages" | "flush.ms" | "min.insync.replicas" => int(1),
        "segment.index.bytes" => int(4),
        "max.message.bytes" | "index.interval.bytes" => int(0),
        "preallocate"
        | "unclean.leader.election.enable"
        | "remote.storage.enable"
        | "message.downconversion.enable" => match value {
            "true" | "false" => Ok(()),
            _ => Err(format!("Invalid value {value} for configuration {name}")),
        },
        _ => Ok(()),
    }
}

/// The effective settings of one topic: its own configs over the broker's defaults.
#[derive(Debug, Clone)]
pub struct EffectiveTopicConfig {
    pub log: LogConfig,
    pub max_message_bytes: usize,
    pub log_append_time: bool,
    pub min_insync_replicas: i32,
}

fn get<T: std::str::FromStr>(cfg: &BTreeMap<String, String>, key: &str) -> Option<T> {
    cfg.get(key).and_then(|v| v.parse().ok())
}

pub fn effective(broker: &BrokerConfig, topic: &BTreeMap<String, String>) -> EffectiveTopicConfig {
    let log = LogConfig {
        segment_bytes: get(topic, "segment.bytes").unwrap_or(broker.log_segment_bytes),
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
    }
}
