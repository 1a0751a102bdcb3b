//! Dynamic broker configs (Kafka's KIP-226): values set at run time with
//! IncrementalAlterConfigs or AlterConfigs on a BROKER resource, either for every broker (the
//! cluster-wide default, resource name "") or for one broker (its id). They live in the
//! controller's metadata; a broker lays its own and the default ones over its static
//! configuration ([`super::BrokerConfig::with_dynamic`]).
//!
//! This module decides, without I/O: which keys may be changed at run time (Kafka 4.4's
//! reconfigurable broker configs), whether a value is acceptable (Kafka's messages), and the
//! merge precedence (per broker over the default over the static file).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::BrokerConfig;

use super::keys::{KafkaType, kafka_keys};
use crate::cluster::topic_config;

/// Broker configs Kafka 4.4 lets change at run time besides the log defaults (which are the
/// broker synonyms of topic configs, [`topic_config::broker_synonym_of`]). Sluice acts on the
/// log defaults, `message.max.bytes` and `min.insync.replicas`; the rest are stored and
/// described (tools such as kafka-reassign-partitions set the throttle rates).
const OTHER_DYNAMIC: &[&str] = &[
    "background.threads",
    "follower.replication.throttled.rate",
    "leader.replication.throttled.rate",
    "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.threads",
    "max.connection.creation.rate",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "message.max.bytes",
    "metric.reporters",
    "num.io.threads",
    "num.network.threads",
    "num.recovery.threads.per.data.dir",
    "num.replica.fetchers",
    "producer.id.expiration.ms",
    "remote.fetch.max.wait.ms",
    "remote.list.offsets.request.timeout.ms",
    "remote.log.index.file.cache.total.size.bytes",
    "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.fetch.max.bytes.per.second",
    "replica.alter.log.dirs.io.max.bytes.per.second",
    "transaction.partition.verification.enable",
];

/// Whether a known broker config may be changed at run time. Keys Kafka does not know are
/// custom configs, which Kafka stores too (and describes as sensitive).
pub fn is_dynamic(key: &str) -> bool {
    OTHER_DYNAMIC.contains(&key) || topic_config::topic_config_of_broker_key(key).is_some()
}

/// Whether Kafka knows `key` as a broker config (or as one of the dynamic-only rates).
pub fn is_known(key: &str) -> bool {
    kafka_keys().contains_key(key) || OTHER_DYNAMIC.contains(&key)
}

/// Checks the keys being set on a BROKER resource: a known config that is read-only is
/// refused, all of them in one message as Kafka words it (INVALID_REQUEST).
pub fn check_updatable<'a>(keys: impl IntoIterator<Item = &'a str>) -> Result<(), String> {
    let fixed: Vec<&str> = keys
        .into_iter()
        .filter(|k| is_known(k) && !is_dynamic(k))
        .collect();
    if fixed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "Cannot update these configs dynamically: [{}]",
            fixed.join(", ")
        ))
    }
}

/// Checks one value for a dynamic broker config; the error is Kafka's message (sent with
/// INVALID_REQUEST for broker resources). A log default is checked as its topic config is;
/// other known keys by their Kafka type.
pub fn validate(key: &str, value: &str) -> Result<(), String> {
    if let Some(topic_key) = topic_config::topic_config_of_broker_key(key) {
        // `log.retention.hours` has the range of `retention.ms`, and so on.
        return topic_config::validate(topic_key, value).map_err(|m| {
            m.replacen(
                &format!("configuration {topic_key}"),
                &format!("configuration {key}"),
                1,
            )
        });
    }
    let Some(k) = kafka_keys().get(key) else {
        return Ok(());
    };
    let v = value.trim();
    let ok = match k.ty {
        KafkaType::Boolean => v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false"),
        KafkaType::Int => v.parse::<i32>().is_ok(),
        KafkaType::Short => v.parse::<i16>().is_ok(),
        KafkaType::Long => v.parse::<i64>().is_ok(),
        KafkaType::Double => v.parse::<f64>().is_ok(),
        _ => true,
    };
    if ok {
        Ok(())
    } else if k.ty == KafkaType::Boolean {
        Err(format!(
            "Invalid value {value} for configuration {key}: Expected value to be either true or false"
        ))
    } else {
        Err(format!(
            "Invalid value {value} for configuration {key}: Not a number of type {}",
            k.ty.name()
        ))
    }
}

/// Where a dynamic value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DynamicSource {
    /// Set for this broker (Kafka's DYNAMIC_BROKER_CONFIG).
    Broker,
    /// The cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG).
    ClusterDefault,
}

/// The dynamic broker configs one broker sees: the cluster-wide defaults and its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DynamicConfigs {
    pub cluster_default: BTreeMap<String, String>,
    pub this_broker: BTreeMap<String, String>,
}

impl DynamicConfigs {
    pub fn is_empty(&self) -> bool {
        self.cluster_default.is_empty() && self.this_broker.is_empty()
    }

    /// The pairs to lay over the static configuration, lowest precedence first.
    pub fn overlay(&self) -> Vec<(String, String)> {
        self.cluster_default
            .iter()
            .chain(self.this_broker.iter())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The dynamic values of `key`, highest precedence first.
    pub fn values(&self, key: &str) -> Vec<(&str, DynamicSource)> {
        let mut out = Vec::new();
        if let Some(v) = self.this_broker.get(key) {
            out.push((v.as_str(), DynamicSource::Broker));
        }
        if let Some(v) = self.cluster_default.get(key) {
            out.push((v.as_str(), DynamicSource::ClusterDefault));
        }
        out
    }

    /// The map a resource's changes apply to: `None` = the cluster default.
    pub fn map_mut(&mut self, broker: Option<i32>) -> &mut BTreeMap<String, String> {
        match broker {
            None => &mut self.cluster_default,
            Some(_) => &mut self.this_broker,
        }
    }

    pub fn map(&self, broker: Option<i32>) -> &BTreeMap<String, String> {
        match broker {
            None => &self.cluster_default,
            Some(_) => &self.this_broker,
        }
    }
}

/// What topics fall back to: the static configuration, the dynamic configs this broker sees,
/// and the two merged (the values in force).
#[derive(Debug, Clone)]
pub struct BrokerDefaults {
    pub base: Arc<BrokerConfig>,
    pub dynamic: DynamicConfigs,
    pub merged: Arc<BrokerConfig>,
}

impl BrokerDefaults {
    pub fn new(base: Arc<BrokerConfig>, dynamic: DynamicConfigs) -> BrokerDefaults {
        let merged = if dynamic.is_empty() {
            base.clone()
        } else {
            Arc::new(base.with_dynamic(&dynamic.overlay()))
        };
        BrokerDefaults {
            base,
            dynamic,
            merged,
        }
    }
}

/// Applies changes (`Some` sets, `None` deletes) to one resource's dynamic configs.
pub fn apply_changes(map: &mut BTreeMap<String, String>, changes: &[(String, Option<String>)]) {
    for (k, v) in changes {
        match v {
            Some(v) => {
                map.insert(k.clone(), v.clone());
            }
            None => {
                map.remove(k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_keys_are_refused_together_in_kafkas_words() {
        assert_eq!(check_updatable(["log.retention.ms", "foo.custom"]), Ok(()));
        assert_eq!(
            check_updatable(["log.dirs", "log.retention.ms", "node.id"]),
            Err("Cannot update these configs dynamically: [log.dirs, node.id]".into())
        );
        for k in [
            "log.retention.hours",
            "log.segment.bytes",
            "log.cleanup.policy",
            "message.max.bytes",
            "min.insync.replicas",
            "log.message.timestamp.type",
            "leader.replication.throttled.rate",
        ] {
            assert!(is_dynamic(k), "{k}");
        }
    }

    #[test]
    fn values_are_checked_with_kafkas_messages() {
        assert_eq!(
            validate("log.retention.ms", "abc"),
            Err(
                "Invalid value abc for configuration log.retention.ms: Not a number of type LONG"
                    .into()
            )
        );
        assert_eq!(
            validate("log.cleanup.policy", "bogus"),
            Err("Invalid value bogus for configuration log.cleanup.policy: String must be one of: compact, delete".into())
        );
        assert_eq!(validate("log.retention.hours", "2"), Ok(()));
        assert_eq!(
            validate("num.io.threads", "x"),
            Err(
                "Invalid value x for configuration num.io.threads: Not a number of type INT".into()
            )
        );
        assert_eq!(validate("some.custom.key", "anything"), Ok(()));
    }

    #[test]
    fn a_broker_value_wins_over_the_default_which_wins_over_the_file() {
        let base = BrokerConfig::from_pairs([
            ("log.retention.hours".to_string(), "5".to_string()),
            ("log.segment.bytes".to_string(), "5000000".to_string()),
        ])
        .unwrap();
        let mut d = DynamicConfigs::default();
        apply_changes(
            d.map_mut(None),
            &[
                ("log.retention.ms".into(), Some("1000".into())),
                ("log.segment.bytes".into(), Some("2000000".into())),
                ("message.max.bytes".into(), Some("777".into())),
            ],
        );
        apply_changes(
            d.map_mut(Some(1)),
            &[("log.segment.bytes".into(), Some("3000000".into()))],
        );
        let c = base.with_dynamic(&d.overlay());
        assert_eq!(c.log_retention_ms, 1000);
        assert_eq!(c.log_segment_bytes, 3_000_000);
        assert_eq!(c.message_max_bytes, 777);
        assert_eq!(
            d.values("log.segment.bytes"),
            vec![
                ("3000000", DynamicSource::Broker),
                ("2000000", DynamicSource::ClusterDefault)
            ]
        );
        // Deleting the dynamic values brings the static ones back.
        apply_changes(d.map_mut(None), &[("log.retention.ms".into(), None)]);
        assert_eq!(
            base.with_dynamic(&d.overlay()).log_retention_ms,
            5 * 3_600_000
        );
        assert_eq!(base.with_dynamic(&[]).log_segment_bytes, 5_000_000);
    }
}
