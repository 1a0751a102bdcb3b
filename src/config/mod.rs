//! Broker configuration, read with Apache Kafka 4.4's property names.
//!
//! Sources, later ones winning: built-in defaults, `--config FILE` (Java properties syntax),
//! then each `--override key=value`, as Kafka's `kafka-server-start.sh` does. Every Kafka
//! broker property is recognised (see [`keys`]): the ones Sluice acts on behave as in
//! Kafka, the ones that mean nothing here are accepted and reported once at start-up, and
//! the ones that ask for a feature Sluice lacks stop start-up saying which. A key Kafka does
//! not know, or a value Kafka would refuse, stops start-up with `FILE:LINE: ...` (or
//! `--override: ...`).

pub mod cluster;
pub mod dynamic;
pub mod env;
pub mod keys;
mod listeners;
pub(crate) mod parse;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};

pub use cluster::{ClusterConfig, Roles};
pub use listeners::{HttpListener, Listener, format_host_port};
use listeners::{
    advertised_listeners, check_distinct_ports, check_inter_broker_listener,
    implied_controller_protocols, listener_names, parse_listeners, parse_protocol_map,
};
pub use parse::{Origin, Setting, parse_override, parse_properties, read_pairs};

use keys::{NOT_YET, Treatment, default_of, lookup};

#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub listeners: Vec<Listener>,
    pub advertised_listeners: Vec<Listener>,
    pub node_id: i32,
    /// Absolute paths (relative ones are taken from the directory Sluice started in).
    pub log_dirs: Vec<PathBuf>,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics_enable: bool,
    pub delete_topic_enable: bool,
    pub log_segment_bytes: u64,
    pub log_roll_ms: i64,
    pub log_index_interval_bytes: u32,
    pub log_index_size_max_bytes: u32,
    pub log_retention_ms: i64,
    pub log_retention_bytes: i64,
    pub log_retention_check_interval_ms: u64,
    pub log_flush_interval_messages: u64,
    pub log_flush_interval_ms: i64,
    pub log_message_timestamp_type_log_append: bool,
    pub message_max_bytes: i32,
    /// `max.request.partition.size.limit`: the most partitions one DescribeTopicPartitions
    /// answer holds.
    pub max_request_partition_size_limit: i32,
    pub socket_request_max_bytes: usize,
    /// `quota.window.num` and `quota.window.size.seconds`: the client quotas' rate windows.
    pub quota_window_num: usize,
    /// `max.incremental.fetch.session.cache.slots`: the fetch sessions the broker keeps.
    pub max_incremental_fetch_session_cache_slots: usize,
    pub quota_window_size_seconds: u64,
    pub min_insync_replicas: i32,
    pub offsets_topic_num_partitions: i32,
    pub group_initial_rebalance_delay_ms: u64,
    pub group_min_session_timeout_ms: i32,
    pub group_max_session_timeout_ms: i32,
    pub group_consumer: GroupConsumerSettings,
    pub offsets_retention_minutes: i64,
    pub offsets_retention_check_interval_ms: u64,
    pub offset_metadata_max_bytes: usize,
    /// In a cluster, how long a `__consumer_offsets` write waits to be committed.
    pub offsets_commit_timeout_ms: u64,
    pub producer_id_expiration_ms: i64,
    pub producer_id_expiration_check_interval_ms: u64,
    /// The transaction coordinator's settings (`transaction.*`, `transactional.id.*`).
    pub txn: TxnSettings,
    /// `sluice.http.server.listeners`: where the HTTP server (metrics, health) listens; None
    /// when it is off (the default).
    pub http_listener: Option<HttpListener>,
    /// `sluice.console.enabled` and `sluice.console.read.only`: the web console on the HTTP
    /// listener, and whether it may produce records.
    pub console_enabled: bool,
    pub console_read_only: bool,
    /// `sluice.faults.enable`: whether `/faults` on the HTTP listener may inject faults.
    pub faults_enabled: bool,
    /// `sluice.schema.registry.enable`: the Schema Registry on the HTTP listener.
    pub schema_registry_enabled: bool,
    /// `sluice.rest.proxy.enable`: the REST Proxy API v3 on the HTTP listener.
    pub rest_proxy_enabled: bool,
    /// `sluice.rest.consumer.instance.timeout.ms`: how long an unused REST Proxy v2
    /// consumer instance lives.
    pub rest_consumer_instance_timeout_ms: u64,
    /// `sluice.schema.registry.topic.replication.factor`: of `_schemas` in a cluster.
    pub schema_registry_replication_factor: i16,
    /// `sluice.log.open.segments.max`: the most segment files kept open (0: half of the
    /// open-file limit).
    pub open_segments_max: usize,
    /// The KRaft settings, when `process.roles` makes this node part of a replicated cluster.
    pub cluster: Option<ClusterConfig>,
    /// The authorizer's settings when `authorizer.class.name` names one (ACLs are then
    /// enforced); None: every request is allowed, as Kafka without an authorizer.
    pub authorizer: Option<crate::security::acl::AuthorizerConfig>,
    /// The SASL settings of each `SASL_PLAINTEXT` and `SASL_SSL` listener, by listener name.
    pub sasl: BTreeMap<String, std::sync::Arc<crate::security::sasl::SaslListener>>,
    /// Keys that were set but have no effect in Sluice, sorted (logged once at start-up).
    pub no_effect: Vec<String>,
    /// Every property Sluice acts on with its value, and every property that was set, for
    /// DescribeConfigs.
    pub raw: BTreeMap<String, String>,
    /// Where each set property was given.
    origins: BTreeMap<String, Origin>,
    /// The settings this configuration was built from, in order (config file, overrides);
    /// dynamic broker configs are laid over them by [`BrokerConfig::with_dynamic`].
    settings: Vec<Setting>,
}

/// `authorizer.class.name` with `super.users` and `allow.everyone.if.no.acl.found`.
fn parse_authorizer(p: &Props) -> Result<Option<crate::security::acl::AuthorizerConfig>> {
    use crate::security::acl::{AuthorizerConfig, STANDARD_AUTHORIZER};
    let class = p.get("authorizer.class.name").trim();
    if class.is_empty() {
        return Ok(None);
    }
    if class != STANDARD_AUTHORIZER {
        return Err(p.err(
            "authorizer.class.name",
            format!("Sluice serves {STANDARD_AUTHORIZER} only, not {class}"),
        ));
    }
    let mut super_users = std::collections::BTreeSet::new();
    for u in p.get("super.users").split(';') {
        let u = u.trim();
        if u.is_empty() {
            continue;
        }
        if crate::security::Principal::parse(u).is_none() {
            return Err(p.err(
                "super.users",
                format!("{u:?} is not a principal (type:name, e.g. User:admin)"),
            ));
        }
        super_users.insert(u.to_string());
    }
    Ok(Some(AuthorizerConfig {
        super_users,
        allow_everyone_if_no_acl_found: p.boolean("allow.everyone.if.no.acl.found")?,
    }))
}

/// The consumer group protocol's settings (`group.consumer.*`), checked as Kafka's
/// GroupCoordinatorConfig checks them.
#[derive(Debug, Clone)]
pub struct GroupConsumerSettings {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.assignors`: names of built-in assignors, the first the default.
    pub assignors: Vec<String>,
    pub max_size: usize,
    /// `group.consumer.migration.policy`.
    pub migration: crate::group::consumer::classic::MigrationPolicy,
}

impl GroupConsumerSettings {
    fn parse(p: &Props) -> Result<GroupConsumerSettings> {
        let bounded = |key: &str, min_key: &str, max_key: &str| -> Result<i32> {
            let v: i32 = p.num_at_least(key, 1)?;
            let min: i32 = p.num_at_least(min_key, 1)?;
            let max: i32 = p.num_at_least(max_key, 1)?;
            if min > max {
                return Err(p.err(min_key, format!("must be less than or equal to {max_key}")));
            }
            if v < min {
                return Err(p.err(key, format!("must be greater than or equal to {min_key}")));
            }
            if v > max {
                return Err(p.err(key, format!("must be less than or equal to {max_key}")));
            }
            Ok(v)
        };
        let session = bounded(
            "group.consumer.session.timeout.ms",
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
        )?;
        let heartbeat = bounded(
            "group.consumer.heartbeat.interval.ms",
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
        )?;
        if heartbeat >= session {
            return Err(p.err(
                "group.consumer.heartbeat.interval.ms",
                "must be less than group.consumer.session.timeout.ms",
            ));
        }
        let key = "group.consumer.assignors";
        let mut assignors = Vec::new();
        for a in p
            .get(key)
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
        {
            let name = match a {
                "org.apache.kafka.coordinator.group.assignor.UniformAssignor" => "uniform",
                "org.apache.kafka.coordinator.group.assignor.RangeAssignor" => "range",
                other => other,
            };
            if !crate::group::consumer::assignor::KNOWN.contains(&name) {
                return Err(p.err(
                    key,
                    format!("unknown assignor {a:?} (uniform and range are served)"),
                ));
            }
            assignors.push(name.to_string());
        }
        if assignors.is_empty() {
            return Err(p.err(key, "must name at least one assignor"));
        }
        let max_size: i32 = p.num_at_least("group.consumer.max.size", 1)?;
        let key = "group.consumer.migration.policy";
        let Some(migration) = crate::group::consumer::classic::MigrationPolicy::parse(p.get(key))
        else {
            return Err(p.err(
                key,
                "String must be one of (case insensitive): BIDIRECTIONAL, UPGRADE, DOWNGRADE, DISABLED",
            ));
        };
        Ok(GroupConsumerSettings {
            session_timeout_ms: session,
            heartbeat_interval_ms: heartbeat,
            assignors,
            max_size: max_size as usize,
            migration,
        })
    }
}

/// The transaction coordinator's settings, as Kafka's TransactionConfig.
#[derive(Debug, Clone)]
pub struct TxnSettings {
    /// `transaction.state.log.num.partitions`.
    pub num_partitions: i32,
    /// `transaction.state.log.replication.factor` (in a cluster).
    pub replication_factor: i16,
    /// `transaction.state.log.min.isr`: the topic's min.insync.replicas.
    pub min_isr: i32,
    /// `transaction.state.log.segment.bytes`.
    pub segment_bytes: i32,
    /// `transaction.max.timeout.ms`.
    pub max_timeout_ms: i32,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub abort_interval_ms: u64,
    /// `transactional.id.expiration.ms`.
    pub id_expiration_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub id_expiration_interval_ms: u64,
    /// `transaction.partition.verification.enable` (KIP-890 part 1).
    pub verification: bool,
}

/// The settings as finally given (later ones won), each with its origin.
struct Props(BTreeMap<String, (String, Origin)>);

impl Props {
    /// The value: as set, else Sluice's default, else empty (Kafka's null).
    fn get(&self, key: &str) -> &str {
        match self.0.get(key) {
            Some((v, _)) => v,
            None => default_of(key).unwrap_or(""),
        }
    }
    fn is_set(&self, key: &str) -> bool {
        !self.get(key).trim().is_empty()
    }
    fn given(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }
    /// An error about `key`, prefixed with where it was set.
    fn err(&self, key: &str, msg: impl std::fmt::Display) -> anyhow::Error {
        match self.0.get(key) {
            Some((_, origin)) => anyhow!("{origin}: {key}: {msg}"),
            None => anyhow!("{key}: {msg}"),
        }
    }
    fn num<T: std::str::FromStr>(&self, key: &str) -> Result<T> {
        let v = self.get(key).trim();
        v.parse::<T>()
            .map_err(|_| self.err(key, format!("invalid value {v:?}")))
    }
    fn num_at_least<T: std::str::FromStr + PartialOrd + std::fmt::Display>(
        &self,
        key: &str,
        min: T,
    ) -> Result<T> {
        let v: T = self.num(key)?;
        if v < min {
            return Err(self.err(key, format!("value {v} must be at least {min}")));
        }
        Ok(v)
    }
    fn boolean(&self, key: &str) -> Result<bool> {
        let v = self.get(key).trim();
        if v.eq_ignore_ascii_case("true") {
            Ok(true)
        } else if v.eq_ignore_ascii_case("false") {
            Ok(false)
        } else {
            Err(self.err(key, format!("invalid value {v:?} (expected true or false)")))
        }
    }
    /// The first of `keys` that is set, converted to milliseconds by its factor (a negative
    /// value means unlimited: -1). `keys` must not be empty; the last one is the fallback.
    fn millis(&self, keys: &[(&str, i64)]) -> Result<i64> {
        let (key, factor) = keys
            .iter()
            .find(|(k, _)| self.is_set(k))
            .unwrap_or(&keys[keys.len() - 1]);
        let v: i64 = self.num(key)?;
        Ok(if v < 0 { -1 } else { v.saturating_mul(*factor) })
    }
}

/// The settings of a properties file (`--config FILE`).
pub fn file_settings(path: &Path) -> Result<Vec<Setting>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    parse_properties(&text, path)
}

impl BrokerConfig {
    /// Builds the configuration from settings applied in order over the defaults.
    pub fn from_settings(settings: Vec<Setting>) -> Result<BrokerConfig> {
        let kept = settings.clone();
        let names = listener_names(&settings);
        let mut set: BTreeMap<String, (String, Origin)> = BTreeMap::new();
        let mut no_effect = Vec::new();
        for s in settings {
            let origin = &s.origin;
            let Some((k, treatment)) = lookup(&s.key, &names) else {
                bail!("{origin}: unknown key {:?}", s.key);
            };
            k.ty.check(&s.value)
                .map_err(|e| anyhow!("{origin}: {}: {e}", s.key))?;
            if treatment == Treatment::NoEffect && !no_effect.contains(&s.key) {
                no_effect.push(s.key.clone());
            }
            set.insert(s.key, (s.value, s.origin));
        }
        no_effect.sort();
        let p = Props(set);
        for (key, asks, feature) in NOT_YET {
            if let Some((v, _)) = p.0.get(*key)
                && asks.matches(v)
            {
                return Err(p.err(key, format!("{feature}: not supported by Sluice yet")));
            }
        }

        let mut protocols = parse_protocol_map(&p)?;
        let implied_protocols = implied_controller_protocols(&p, &mut protocols);
        let mut listeners = parse_listeners(&p, "listeners")?;
        check_distinct_ports(&p, &listeners)?;
        for l in &listeners {
            if !protocols.contains_key(&l.name) {
                return Err(p.err(
                    "listeners",
                    format!(
                        "no security protocol for listener {} in listener.security.protocol.map",
                        l.name
                    ),
                ));
            }
        }
        let mut sasl = BTreeMap::new();
        for l in &listeners {
            if protocols
                .get(&l.name)
                .is_some_and(|proto| proto.starts_with("SASL_"))
            {
                let get = |k: &str| {
                    let v = p.get(k);
                    (!v.trim().is_empty()).then(|| v.to_string())
                };
                let parsed = crate::security::sasl::SaslListener::parse(&l.name, &get)
                    .map_err(|(key, msg)| p.err(&key, msg))?;
                sasl.insert(l.name.clone(), std::sync::Arc::new(parsed));
            }
        }
        // node.id and broker.id name the same thing; Kafka refuses two different values.
        let node_id = match (p.given("node.id"), p.given("broker.id")) {
            (true, true) if p.get("node.id").trim() != p.get("broker.id").trim() => {
                return Err(p.err(
                    "broker.id",
                    format!(
                        "must equal node.id ({}, at {})",
                        p.get("node.id"),
                        p.0["node.id"].1
                    ),
                ));
            }
            (false, true) => p.num_at_least::<i32>("broker.id", 0)?,
            _ => p.num_at_least::<i32>("node.id", 0)?,
        };
        let dirs_key = if p.is_set("log.dirs") {
            "log.dirs"
        } else {
            "log.dir"
        };
        let log_dirs = p
            .get(dirs_key)
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|d| std::path::absolute(d).map_err(|e| p.err(dirs_key, format!("{d}: {e}"))))
            .collect::<Result<Vec<PathBuf>>>()?;
        if log_dirs.is_empty() {
            return Err(p.err(dirs_key, "no directory given"));
        }
        let mut cluster = cluster::parse(&p, node_id, &mut listeners, &log_dirs)?;
        // The Raft quorum's connections between controllers are plain TCP.
        if let Some(l) = cluster
            .as_ref()
            .and_then(|c| c.controller_listener.as_ref())
            && let Some(proto) = protocols.get(&l.name).filter(|p| *p != "PLAINTEXT")
        {
            return Err(p.err(
                "listener.security.protocol.map",
                format!(
                    "the controller listener {} uses {proto}: TLS and SASL between \
                     controllers are not supported by Sluice yet (PLAINTEXT is)",
                    l.name
                ),
            ));
        }
        let advertised_listeners = advertised_listeners(&p, &listeners, cluster.as_ref())?;
        check_inter_broker_listener(&p, &advertised_listeners, cluster.as_ref())?;
        // A one-voter node has no other broker to reach it: when the listener Kafka would
        // pick is not advertised, the first advertised one stands in (what internal callers
        // use to find brokers by listener).
        if let Some(c) = cluster.as_mut().filter(|c| c.one_voter)
            && !advertised_listeners
                .iter()
                .any(|l| l.name == c.inter_broker_listener)
            && let Some(first) = advertised_listeners.first()
        {
            c.inter_broker_listener = first.name.clone();
        }

        let log_append = match p.get("log.message.timestamp.type").trim() {
            "CreateTime" => false,
            "LogAppendTime" => true,
            v => {
                return Err(p.err(
                    "log.message.timestamp.type",
                    format!("invalid value {v:?} (CreateTime or LogAppendTime)"),
                ));
            }
        };
        // Unset, Kafka flushes on log.flush.scheduler.interval.ms, which defaults to never.
        let flush_ms = if p.is_set("log.flush.interval.ms") {
            p.num_at_least::<i64>("log.flush.interval.ms", 0)?
        } else {
            i64::MAX
        };
        let log_roll_ms = p.millis(&[("log.roll.ms", 1), ("log.roll.hours", 3_600_000)])?;
        if log_roll_ms < 1 {
            let key = if p.is_set("log.roll.ms") {
                "log.roll.ms"
            } else {
                "log.roll.hours"
            };
            return Err(p.err(key, "must be at least 1"));
        }
        let mut raw: BTreeMap<String, String> = keys::ACTED
            .iter()
            .chain(keys::SLUICE_DEFAULTS.iter().map(|(k, _)| k))
            .filter_map(|k| default_of(k).map(|d| (k.to_string(), d.to_string())))
            .collect();
        let mut origins = BTreeMap::new();
        for (k, (v, o)) in &p.0 {
            raw.insert(k.clone(), v.clone());
            origins.insert(k.clone(), o.clone());
        }
        if let Some(map) = implied_protocols {
            raw.insert("listener.security.protocol.map".to_string(), map);
        }
        Ok(BrokerConfig {
            listeners,
            advertised_listeners,
            node_id,
            log_dirs,
            num_partitions: p.num_at_least("num.partitions", 1)?,
            default_replication_factor: p.num_at_least("default.replication.factor", 1)?,
            auto_create_topics_enable: p.boolean("auto.create.topics.enable")?,
            delete_topic_enable: p.boolean("delete.topic.enable")?,
            log_segment_bytes: p.num_at_least(
                "log.segment.bytes",
                crate::cluster::topic_config::MIN_SEGMENT_BYTES as u64,
            )?,
            log_roll_ms,
            log_index_interval_bytes: p.num_at_least("log.index.interval.bytes", 0)?,
            log_index_size_max_bytes: p.num_at_least("log.index.size.max.bytes", 4)?,
            log_retention_ms: p.millis(&[
                ("log.retention.ms", 1),
                ("log.retention.minutes", 60_000),
                ("log.retention.hours", 3_600_000),
            ])?,
            log_retention_bytes: p.num("log.retention.bytes")?,
            log_retention_check_interval_ms: p
                .num_at_least("log.retention.check.interval.ms", 1)?,
            log_flush_interval_messages: p.num_at_least("log.flush.interval.messages", 1)?,
            log_flush_interval_ms: flush_ms,
            log_message_timestamp_type_log_append: log_append,
            message_max_bytes: p.num_at_least("message.max.bytes", 0)?,
            max_request_partition_size_limit: p
                .num_at_least("max.request.partition.size.limit", 1)?,
            socket_request_max_bytes: p.num_at_least("socket.request.max.bytes", 1)?,
            quota_window_num: p.num_at_least("quota.window.num", 1)?,
            max_incremental_fetch_session_cache_slots: p
                .num_at_least("max.incremental.fetch.session.cache.slots", 0)?,
            quota_window_size_seconds: p.num_at_least("quota.window.size.seconds", 1)?,
            min_insync_replicas: p.num_at_least("min.insync.replicas", 1)?,
            offsets_topic_num_partitions: p.num_at_least("offsets.topic.num.partitions", 1)?,
            group_initial_rebalance_delay_ms: p.num("group.initial.rebalance.delay.ms")?,
            group_min_session_timeout_ms: p.num("group.min.session.timeout.ms")?,
            group_max_session_timeout_ms: p.num("group.max.session.timeout.ms")?,
            group_consumer: GroupConsumerSettings::parse(&p)?,
            offsets_retention_minutes: p.num_at_least("offsets.retention.minutes", 1)?,
            offsets_retention_check_interval_ms: p
                .num_at_least("offsets.retention.check.interval.ms", 1)?,
            offset_metadata_max_bytes: p.num("offset.metadata.max.bytes")?,
            offsets_commit_timeout_ms: p.num_at_least("offsets.commit.timeout.ms", 1)?,
            producer_id_expiration_ms: p.num_at_least("producer.id.expiration.ms", 1)?,
            producer_id_expiration_check_interval_ms: p
                .num_at_least("producer.id.expiration.check.interval.ms", 1)?,
            txn: TxnSettings {
                num_partitions: p.num_at_least("transaction.state.log.num.partitions", 1)?,
                replication_factor: p
                    .num_at_least("transaction.state.log.replication.factor", 1)?,
                min_isr: p.num_at_least("transaction.state.log.min.isr", 1)?,
                segment_bytes: p.num_at_least("transaction.state.log.segment.bytes", 1)?,
                max_timeout_ms: p.num_at_least("transaction.max.timeout.ms", 1)?,
                abort_interval_ms: p.num_at_least(
                    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                    1,
                )?,
                id_expiration_ms: p.num_at_least("transactional.id.expiration.ms", 1)?,
                id_expiration_interval_ms: p.num_at_least(
                    "transaction.remove.expired.transaction.cleanup.interval.ms",
                    1,
                )?,
                verification: p.boolean("transaction.partition.verification.enable")?,
            },
            http_listener: HttpListener::parse(&p)?,
            console_enabled: p.boolean("sluice.console.enabled")?,
            console_read_only: p.boolean("sluice.console.read.only")?,
            faults_enabled: p.boolean("sluice.faults.enable")?,
            schema_registry_enabled: p.boolean("sluice.schema.registry.enable")?,
            rest_proxy_enabled: p.boolean("sluice.rest.proxy.enable")?,
            rest_consumer_instance_timeout_ms: p
                .num_at_least::<i32>("sluice.rest.consumer.instance.timeout.ms", 1)?
                as u64,
            schema_registry_replication_factor: p
                .num_at_least::<i16>("sluice.schema.registry.topic.replication.factor", 1)?,
            open_segments_max: p.num_at_least::<i32>("sluice.log.open.segments.max", 0)? as usize,
            cluster,
            authorizer: parse_authorizer(&p)?,
            sasl,
            no_effect,
            raw,
            origins,
            settings: kept,
        })
    }

    /// Builds the configuration from (key, value) pairs given as if by `--override`.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Result<BrokerConfig> {
        Self::from_settings(
            pairs
                .into_iter()
                .map(|(key, value)| Setting {
                    key,
                    value,
                    origin: Origin::Override,
                })
                .collect(),
        )
    }

    /// Loads `--config FILE` (if any) and applies the overrides.
    pub fn load(file: Option<&Path>, overrides: &[String]) -> Result<BrokerConfig> {
        let mut settings = Vec::new();
        if let Some(path) = file {
            settings.extend(file_settings(path)?);
        }
        for o in overrides {
            settings.push(parse_override(o)?);
        }
        Self::from_settings(settings)
    }

    /// This configuration with dynamic broker configs (`key`, `value`, later ones winning)
    /// laid over the static settings, as Kafka merges them; keys this broker does not know
    /// are skipped. The values were validated when they were set; should the merge still fail,
    /// the static configuration is kept.
    pub fn with_dynamic(&self, dynamic: &[(String, String)]) -> BrokerConfig {
        if dynamic.is_empty() {
            return self.clone();
        }
        let mut settings = self.settings.clone();
        settings.extend(
            dynamic
                .iter()
                .filter(|(k, _)| keys::kafka_keys().contains_key(k.as_str()))
                .map(|(key, value)| Setting {
                    key: key.clone(),
                    value: value.clone(),
                    origin: Origin::Dynamic,
                }),
        );
        match Self::from_settings(settings) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("dynamic broker configs not applied: {e:#}");
                self.clone()
            }
        }
    }

    /// True if `key` was given (config file or override) a value other than the default.
    pub fn is_explicitly_set(&self, key: &str) -> bool {
        self.origins.contains_key(key) && self.raw.get(key).map(String::as_str) != default_of(key)
    }

    /// The security protocol of the listener called `name` (`listener.security.protocol.map`,
    /// checked at start-up): PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
    pub fn security_protocol(&self, name: &str) -> Option<String> {
        let map = self.raw.get("listener.security.protocol.map")?;
        map.split(',')
            .filter_map(|item| item.split_once(':'))
            .find(|(n, _)| n.trim().eq_ignore_ascii_case(name))
            .map(|(_, proto)| proto.trim().to_ascii_uppercase())
    }

    /// Where `key` was set, if it was.
    pub fn origin(&self, key: &str) -> Option<&Origin> {
        self.origins.get(key)
    }

    /// The advertised host and port of this broker (first advertised listener).
    pub fn advertised(&self) -> (String, u16) {
        let l = &self.advertised_endpoints()[0];
        (l.host.clone(), l.port)
    }

    /// Every advertised listener with the host clients get: an empty host advertises this
    /// machine's name, as Kafka advertises its canonical host name.
    pub fn advertised_endpoints(&self) -> Vec<Listener> {
        let mut out = self.advertised_listeners.clone();
        for l in out.iter_mut().filter(|l| l.host.is_empty()) {
            l.host = nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .unwrap_or_else(|| "localhost".to_string());
        }
        out
    }
}
