//! Every Apache Kafka 4.4 broker property, and what Sluice does with each.
//!
//! A key Sluice acts on ([`ACTED`]) behaves as in Kafka. A key for a feature Sluice does not
//! have yet ([`NOT_YET`]) stops start-up when its value asks for that feature. Every other
//! Kafka key is accepted, type-checked as Kafka would, and named at start-up as having no
//! effect (thread counts, socket buffers, metrics reporters, quotas, ...). A key Kafka does
//! not know stops start-up.

use std::collections::BTreeMap;
use std::sync::LazyLock;

/// Kafka's own list: `name TAB type TAB default`, generated from Kafka 4.4's
/// `KafkaConfig.configDef()` by protocol-tests/java's BrokerKeys (the file's header says how
/// to regenerate it; the java suite's `config-key-list` scenario checks it still matches).
const KAFKA_BROKER_KEYS: &str = include_str!("kafka_broker_keys.txt");

/// Kafka's ConfigDef types, which decide how a value is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KafkaType {
    Boolean,
    String,
    Int,
    Short,
    Long,
    Double,
    List,
    Class,
    Password,
}

impl KafkaType {
    const ALL: [KafkaType; 9] = [
        KafkaType::Boolean,
        KafkaType::String,
        KafkaType::Int,
        KafkaType::Short,
        KafkaType::Long,
        KafkaType::Double,
        KafkaType::List,
        KafkaType::Class,
        KafkaType::Password,
    ];

    fn from_name(s: &str) -> Option<KafkaType> {
        Self::ALL.into_iter().find(|t| t.name() == s)
    }

    /// Kafka's name of the type.
    pub fn name(self) -> &'static str {
        match self {
            KafkaType::Boolean => "BOOLEAN",
            KafkaType::String => "STRING",
            KafkaType::Int => "INT",
            KafkaType::Short => "SHORT",
            KafkaType::Long => "LONG",
            KafkaType::Double => "DOUBLE",
            KafkaType::List => "LIST",
            KafkaType::Class => "CLASS",
            KafkaType::Password => "PASSWORD",
        }
    }

    /// Checks a value as Kafka's `ConfigDef.parseType` does (numbers and booleans trimmed).
    pub fn check(self, value: &str) -> Result<(), String> {
        let v = value.trim();
        let ok = match self {
            KafkaType::Boolean => v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false"),
            KafkaType::Int => v.parse::<i32>().is_ok(),
            KafkaType::Short => v.parse::<i16>().is_ok(),
            KafkaType::Long => v.parse::<i64>().is_ok(),
            KafkaType::Double => v.parse::<f64>().is_ok(),
            KafkaType::String | KafkaType::List | KafkaType::Class | KafkaType::Password => true,
        };
        if ok {
            return Ok(());
        }
        Err(match self {
            KafkaType::Boolean => format!("invalid value {value:?} (expected true or false)"),
            t => format!(
                "invalid value {value:?} (not a number of type {})",
                t.name()
            ),
        })
    }
}

/// One Kafka broker property.
#[derive(Debug, Clone)]
pub struct KafkaKey {
    pub name: &'static str,
    pub ty: KafkaType,
    /// Kafka's default as Kafka prints it; None when it is null or the key is required.
    pub default: Option<&'static str>,
}

/// Kafka's broker properties by name.
pub fn kafka_keys() -> &'static BTreeMap<&'static str, KafkaKey> {
    static KEYS: LazyLock<BTreeMap<&'static str, KafkaKey>> = LazyLock::new(|| {
        let mut map = BTreeMap::new();
        for line in KAFKA_BROKER_KEYS.lines() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let mut f = line.split('\t');
            let (Some(name), Some(ty), Some(default)) = (f.next(), f.next(), f.next()) else {
                panic!("kafka_broker_keys.txt: bad line {line:?}");
            };
            let ty = KafkaType::from_name(ty)
                .unwrap_or_else(|| panic!("kafka_broker_keys.txt: unknown type in {line:?}"));
            let default = default.strip_prefix('=');
            map.insert(name, KafkaKey { name, ty, default });
        }
        map
    });
    &KEYS
}

/// The Kafka version the embedded list was generated from (its first line).
pub fn kafka_version() -> &'static str {
    KAFKA_BROKER_KEYS
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("# Apache Kafka "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or("?")
}

/// Keys Sluice acts on, with Kafka's meaning (config/server.properties documents each).
pub const ACTED: &[&str] = &[
    "advertised.listeners",
    "authorizer.class.name",
    "auto.create.topics.enable",
    "auto.leader.rebalance.enable",
    "broker.heartbeat.interval.ms",
    "broker.id",
    "broker.rack",
    "connection.failed.authentication.delay.ms",
    "connections.max.reauth.ms",
    "broker.session.timeout.ms",
    "controlled.shutdown.enable",
    "controller.listener.names",
    "controller.quorum.bootstrap.servers",
    "controller.quorum.election.timeout.ms",
    "controller.quorum.fetch.timeout.ms",
    "controller.quorum.request.timeout.ms",
    "controller.quorum.voters",
    "default.replication.factor",
    "delete.topic.enable",
    "group.consumer.assignors",
    "group.consumer.heartbeat.interval.ms",
    "group.consumer.max.heartbeat.interval.ms",
    "group.consumer.max.session.timeout.ms",
    "group.consumer.max.size",
    "group.consumer.min.heartbeat.interval.ms",
    "group.consumer.migration.policy",
    "group.consumer.min.session.timeout.ms",
    "group.consumer.session.timeout.ms",
    "group.initial.rebalance.delay.ms",
    "group.max.session.timeout.ms",
    "group.min.session.timeout.ms",
    "group.share.delivery.count.limit",
    "group.share.heartbeat.interval.ms",
    "group.share.max.delivery.count.limit",
    "group.share.max.heartbeat.interval.ms",
    "group.share.max.partition.max.record.locks",
    "group.share.max.record.lock.duration.ms",
    "group.share.max.session.timeout.ms",
    "group.share.max.share.sessions",
    "group.share.max.size",
    "group.share.min.delivery.count.limit",
    "group.share.min.heartbeat.interval.ms",
    "group.share.min.partition.max.record.locks",
    "group.share.min.record.lock.duration.ms",
    "group.share.min.session.timeout.ms",
    "group.share.partition.max.record.locks",
    "group.share.record.lock.duration.ms",
    "group.share.session.timeout.ms",
    "inter.broker.listener.name",
    "leader.imbalance.check.interval.seconds",
    "listener.security.protocol.map",
    "listeners",
    "sasl.enabled.mechanisms",
    "sasl.mechanism.inter.broker.protocol",
    "sasl.server.max.receive.size",
    "security.inter.broker.protocol",
    "log.dir",
    "log.dirs",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "log.flush.offset.checkpoint.interval.ms",
    "log.flush.start.offset.checkpoint.interval.ms",
    "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.enable",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio",
    "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.threads",
    "log.cleanup.policy",
    "log.index.interval.bytes",
    "log.index.size.max.bytes",
    "log.message.timestamp.type",
    "log.retention.bytes",
    "log.retention.check.interval.ms",
    "log.retention.hours",
    "log.retention.minutes",
    "log.retention.ms",
    "log.roll.hours",
    "log.roll.ms",
    "log.segment.bytes",
    "max.incremental.fetch.session.cache.slots",
    "max.request.partition.size.limit",
    "message.max.bytes",
    "metadata.log.dir",
    "min.insync.replicas",
    "node.id",
    "num.partitions",
    "offset.metadata.max.bytes",
    "offsets.commit.timeout.ms",
    "offsets.retention.check.interval.ms",
    "offsets.retention.minutes",
    "offsets.topic.num.partitions",
    "offsets.topic.replication.factor",
    "offsets.topic.segment.bytes",
    "process.roles",
    "producer.id.expiration.check.interval.ms",
    "producer.id.expiration.ms",
    "quota.window.num",
    "quota.window.size.seconds",
    "replica.fetch.backoff.ms",
    "replica.fetch.max.bytes",
    "replica.fetch.min.bytes",
    "replica.fetch.response.max.bytes",
    "replica.fetch.wait.max.ms",
    "replica.high.watermark.checkpoint.interval.ms",
    "replica.lag.time.max.ms",
    "replica.selector.class",
    "socket.request.max.bytes",
    "ssl.cipher.suites",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm",
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.principal.mapping.rules",
    "ssl.protocol",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.max.timeout.ms",
    "transaction.partition.verification.enable",
    "transaction.remove.expired.transaction.cleanup.interval.ms",
    "transaction.state.log.min.isr",
    "transaction.state.log.num.partitions",
    "transaction.state.log.replication.factor",
    "transaction.state.log.segment.bytes",
    "transactional.id.expiration.ms",
    "unclean.leader.election.enable",
];

/// Properties only Sluice has, prefixed `sluice.` (as vendors prefix theirs, e.g. Confluent
/// Server's `confluent.http.server.listeners`) so that no Kafka property can ever collide:
/// acted on, typed and defaulted like Kafka's own. config/server.properties documents each.
pub static SLUICE_KEYS: &[KafkaKey] = &[
    // The HTTP server (`/metrics`, `/health`, `/ready`): `http://host:port`; empty is off.
    KafkaKey {
        name: "sluice.http.server.listeners",
        ty: KafkaType::List,
        default: Some(""),
    },
    // The web console on the HTTP listener (`/` and `/api/...`); on when the listener is.
    KafkaKey {
        name: "sluice.console.enabled",
        ty: KafkaType::Boolean,
        default: Some("true"),
    },
    // The console only reads unless this is false (then it can produce test records).
    KafkaKey {
        name: "sluice.console.read.only",
        ty: KafkaType::Boolean,
        default: Some("true"),
    },
    // Fault injection for tests (`/faults` on the HTTP listener, `sluice faults`): off
    // unless true.
    KafkaKey {
        name: "sluice.faults.enable",
        ty: KafkaType::Boolean,
        default: Some("false"),
    },
    // The Schema Registry on the HTTP listener (`/subjects`, `/schemas`, `/config`, ...);
    // on when the listener is.
    KafkaKey {
        name: "sluice.schema.registry.enable",
        ty: KafkaType::Boolean,
        default: Some("true"),
    },
    // Confluent's REST Proxy API v3 on the HTTP listener (`/v3/clusters/...`); on when the
    // listener is.
    KafkaKey {
        name: "sluice.rest.proxy.enable",
        ty: KafkaType::Boolean,
        default: Some("true"),
    },
    // How long a REST Proxy v2 consumer instance may stay unused before it leaves its group
    // and is deleted, as Confluent's `consumer.instance.timeout.ms`.
    KafkaKey {
        name: "sluice.rest.consumer.instance.timeout.ms",
        ty: KafkaType::Int,
        default: Some("300000"),
    },
    // The replication factor of the registry's `_schemas` topic, created on first use (one
    // on a single node), as Confluent's `kafkastore.topic.replication.factor`.
    KafkaKey {
        name: "sluice.schema.registry.topic.replication.factor",
        ty: KafkaType::Short,
        default: Some("3"),
    },
    // The most segment `.log` files kept open at once; past it the least recently used are
    // closed and reopened when next used. 0: half of the open-file limit (RLIMIT_NOFILE,
    // raised to its hard limit at start-up), the other half left to connections.
    KafkaKey {
        name: "sluice.log.open.segments.max",
        ty: KafkaType::Int,
        default: Some("0"),
    },
    // Where a node without `process.roles` keeps its metadata: `raft`, the only value (the
    // cluster's Raft quorum and controller, itself the only voter). An earlier release's
    // `file` is refused at start-up, naming the key.
    KafkaKey {
        name: "sluice.metadata.quorum",
        ty: KafkaType::String,
        default: Some("raft"),
    },
];

/// The StandardAuthorizer's own properties: Kafka passes every broker property to the
/// authorizer named by `authorizer.class.name`, which reads these (they are not in
/// `KafkaConfig`'s list).
pub static AUTHORIZER_KEYS: &[KafkaKey] = &[
    // `User:a;User:b`: principals allowed everything.
    KafkaKey {
        name: "super.users",
        ty: KafkaType::String,
        default: Some(""),
    },
    KafkaKey {
        name: "allow.everyone.if.no.acl.found",
        ty: KafkaType::Boolean,
        default: Some("false"),
    },
];

/// Sluice's built-in defaults where they differ from Kafka's built-in ones. A broker started
/// without a config file is a development broker on one machine, so these are the values of
/// Kafka's own single-node `config/server.properties` where it sets them, and otherwise
/// what a first run needs.
pub const SLUICE_DEFAULTS: &[(&str, &str)] = &[
    // Kafka binds all interfaces (`PLAINTEXT://:9092`). With no authentication, Sluice
    // listens on loopback only unless told otherwise.
    ("listeners", "PLAINTEXT://localhost:9092"),
    // Kafka: /tmp/kafka-logs (its shipped file: /tmp/kraft-combined-logs). A directory next
    // to where the broker was started survives a reboot.
    ("log.dir", "./data"),
    // Kafka requires node.id; its shipped file sets 1.
    ("node.id", "1"),
    // Kafka's shipped single-node file sets these (Kafka's defaults, 3 and 2, need 3 brokers).
    ("num.recovery.threads.per.data.dir", "1"),
    ("offsets.topic.replication.factor", "1"),
    ("share.coordinator.state.topic.min.isr", "1"),
    ("share.coordinator.state.topic.replication.factor", "1"),
    ("transaction.state.log.min.isr", "1"),
    ("transaction.state.log.replication.factor", "1"),
];

/// What a value must look like to ask for a feature Sluice does not have.
#[derive(Debug, Clone, Copy)]
pub enum Asks {
    /// Any non-empty value.
    NonEmpty,
    /// `true`.
    True,
    /// Anything but this value (case-insensitive).
    Not(&'static str),
}

impl Asks {
    pub fn matches(self, value: &str) -> bool {
        let v = value.trim();
        match self {
            Asks::NonEmpty => !v.is_empty(),
            Asks::True => v.eq_ignore_ascii_case("true"),
            Asks::Not(x) => !v.eq_ignore_ascii_case(x),
        }
    }
}

/// Features Sluice does not have yet, as the keys that ask for them: the one list to shorten
/// as features arrive.
pub const NOT_YET: &[(&str, Asks, &str)] = &[
    (
        "remote.log.storage.system.enable",
        Asks::True,
        "tiered storage",
    ),
    (
        "config.providers",
        Asks::NonEmpty,
        "config providers (${provider:path:key} values)",
    ),
];

/// Kafka's security protocols, all served: SSL over `net::tls`, SASL_PLAINTEXT with the SASL
/// gate of `net::sasl`, SASL_SSL with that gate over the TLS transport.
pub const SECURITY_PROTOCOLS: &[&str] = &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

/// How Sluice treats a key that is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Treatment {
    /// Sluice acts on it.
    Acted,
    /// Kafka knows it; Sluice accepts it without effect (unless [`NOT_YET`] refuses its value).
    NoEffect,
}

/// A key as Kafka would accept it: a broker property, or one of Kafka's prefixed forms
/// (`listener.name.<listener>.<property>`, optionally with a SASL mechanism between:
/// `listener.name.<l>.<mechanism>.sasl.jaas.config`). Returns the property it names and
/// how Sluice treats it; None if Kafka does not know the key.
pub fn lookup(key: &str, listener_names: &[String]) -> Option<(&'static KafkaKey, Treatment)> {
    if let Some(k) = SLUICE_KEYS
        .iter()
        .chain(AUTHORIZER_KEYS)
        .find(|k| k.name == key)
    {
        return Some((k, Treatment::Acted));
    }
    let keys = kafka_keys();
    if let Some(k) = keys.get(key) {
        let t = if ACTED.contains(&k.name) {
            Treatment::Acted
        } else {
            Treatment::NoEffect
        };
        return Some((k, t));
    }
    let rest = key.strip_prefix("listener.name.")?;
    let (listener, prop) = rest.split_once('.')?;
    if !listener_names
        .iter()
        .any(|n| n.eq_ignore_ascii_case(listener))
    {
        return None;
    }
    let k = keys.get(prop).or_else(|| {
        let (_mechanism, p) = prop.split_once('.')?;
        keys.get(p).filter(|k| k.name.starts_with("sasl."))
    })?;
    // A listener's own ssl.* settings are acted on as the plain ones are (`net::tls`), and a
    // SASL listener's mechanisms and JAAS entries (`net::sasl`); the other per-listener
    // settings only tune what a listener does and are not.
    let t = if (k.name.starts_with("ssl.") && ACTED.contains(&k.name))
        || ["sasl.enabled.mechanisms", "sasl.jaas.config"].contains(&k.name)
    {
        Treatment::Acted
    } else {
        Treatment::NoEffect
    };
    Some((k, t))
}

/// True for the keys whose values Kafka keeps secret (type PASSWORD), prefixed or not:
/// DescribeConfigs shows them as sensitive, without their value.
pub fn is_password(key: &str) -> bool {
    let password = |k: &str| {
        kafka_keys()
            .get(k)
            .is_some_and(|k| k.ty == KafkaType::Password)
    };
    let Some(rest) = key.strip_prefix("listener.name.") else {
        return password(key);
    };
    let Some((_, prop)) = rest.split_once('.') else {
        return false;
    };
    // `listener.name.<l>.<mechanism>.sasl.jaas.config` puts a mechanism before the property.
    password(prop) || prop.split_once('.').is_some_and(|(_, p)| password(p))
}

/// The default Sluice uses for `key`: its own where [`SLUICE_DEFAULTS`] has one, else Kafka's.
pub fn default_of(key: &str) -> Option<&'static str> {
    SLUICE_DEFAULTS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| *v)
        .or_else(|| {
            SLUICE_KEYS
                .iter()
                .chain(AUTHORIZER_KEYS)
                .find(|k| k.name == key)
                .and_then(|k| k.default)
        })
        .or_else(|| kafka_keys().get(key).and_then(|k| k.default))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_list_is_kafka_4_4() {
        assert_eq!(kafka_version(), "4.4.0");
        let keys = kafka_keys();
        assert!(keys.len() > 350, "{}", keys.len());
        assert_eq!(keys["num.network.threads"].ty, KafkaType::Int);
        assert_eq!(keys["log.segment.bytes"].default, Some("1073741824"));
        assert_eq!(keys["node.id"].default, None);
    }

    #[test]
    fn every_listed_key_is_a_kafka_key() {
        let keys = kafka_keys();
        for k in ACTED {
            assert!(
                keys.contains_key(k),
                "ACTED names {k}, which Kafka does not know"
            );
        }
        for (k, _) in SLUICE_DEFAULTS {
            assert!(keys.contains_key(k), "SLUICE_DEFAULTS names {k}");
        }
        for k in SLUICE_KEYS {
            assert!(k.name.starts_with("sluice."), "{}", k.name);
            assert!(!keys.contains_key(k.name), "{} is a Kafka key", k.name);
        }
        for (k, _, _) in NOT_YET {
            assert!(keys.contains_key(k), "NOT_YET names {k}");
            assert!(!ACTED.contains(k), "{k} is both acted on and not yet");
        }
    }

    #[test]
    fn not_yet_keys_do_not_fire_on_kafka_defaults() {
        // Kafka's own defaults never ask for a missing feature, so a file of defaults starts.
        for (k, asks, _) in NOT_YET {
            if let Some(d) = kafka_keys()[k].default {
                assert!(!asks.matches(d), "{k}={d}");
            }
        }
    }

    #[test]
    fn listener_prefixed_keys() {
        let names = vec!["PLAINTEXT".to_string()];
        let (k, t) = lookup("listener.name.plaintext.ssl.keystore.type", &names).unwrap();
        assert_eq!((k.name, t), ("ssl.keystore.type", Treatment::Acted));
        let (k, t) = lookup("listener.name.plaintext.ssl.keymanager.algorithm", &names).unwrap();
        assert_eq!(
            (k.name, t),
            ("ssl.keymanager.algorithm", Treatment::NoEffect)
        );
        let (k, _) = lookup("listener.name.plaintext.plain.sasl.jaas.config", &names).unwrap();
        assert_eq!(k.name, "sasl.jaas.config");
        assert!(lookup("listener.name.other.ssl.keystore.type", &names).is_none());
        assert!(lookup("listener.name.plaintext.no.such", &names).is_none());
        assert!(lookup("zookeeper.connect", &names).is_none());
    }

    #[test]
    fn password_keys_are_known_prefixed_or_not() {
        assert!(is_password("ssl.key.password"));
        assert!(is_password("listener.name.ssl.ssl.keystore.key"));
        assert!(is_password("listener.name.sasl_ssl.plain.sasl.jaas.config"));
        assert!(!is_password("ssl.keystore.location"));
        assert!(!is_password("listener.name.ssl.ssl.client.auth"));
    }

    #[test]
    fn types_check_as_kafka() {
        assert!(KafkaType::Int.check(" 12 ").is_ok());
        assert!(KafkaType::Int.check("3000000000").is_err());
        assert!(KafkaType::Short.check("40000").is_err());
        assert!(KafkaType::Boolean.check("TRUE").is_ok());
        let e = KafkaType::Long.check("x").unwrap_err();
        assert!(e.contains("type LONG"), "{e}");
        assert!(KafkaType::Double.check("0.5").is_ok());
    }
}
