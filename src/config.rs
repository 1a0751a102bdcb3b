//! Broker configuration, read with Apache Kafka's property names.
//!
//! Sources, later ones winning: built-in defaults, `--config FILE` (Java properties syntax),
//! then each `--override key=value`, as Kafka's `kafka-server-start.sh` does. An unknown key
//! or a value that does not parse stops start-up with one line naming the key.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, anyhow, bail};

/// A listener as written in `listeners` / `advertised.listeners`: `NAME://host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    /// Empty means all interfaces (when binding) or this machine's name (when advertising).
    pub host: String,
    pub port: u16,
}

impl Listener {
    pub fn bind_addr(&self) -> String {
        let host = if self.host.is_empty() {
            "0.0.0.0"
        } else {
            &self.host
        };
        format_host_port(host, self.port)
    }
}

fn format_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub listeners: Vec<Listener>,
    pub advertised_listeners: Vec<Listener>,
    pub node_id: i32,
    pub log_dirs: Vec<PathBuf>,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics_enable: bool,
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
    pub socket_request_max_bytes: usize,
    pub min_insync_replicas: i32,
    pub offsets_topic_num_partitions: i32,
    pub group_initial_rebalance_delay_ms: u64,
    pub group_min_session_timeout_ms: i32,
    pub group_max_session_timeout_ms: i32,
    pub offsets_retention_minutes: i64,
    pub producer_id_expiration_ms: i64,
    pub producer_id_expiration_check_interval_ms: u64,
    /// Every property as finally set (defaults, file, overrides), for DescribeConfigs later.
    pub raw: BTreeMap<String, String>,
}

/// Kafka property names this broker reads, with Kafka's default value.
/// Keys whose meaning Sluice does not implement are not listed: they are refused at start-up.
const KNOWN: &[(&str, &str)] = &[
    ("listeners", "PLAINTEXT://localhost:9092"),
    ("advertised.listeners", ""),
    ("node.id", "1"),
    ("broker.id", ""),
    ("log.dirs", ""),
    ("log.dir", "./data"),
    ("num.partitions", "1"),
    ("default.replication.factor", "1"),
    ("auto.create.topics.enable", "true"),
    ("log.segment.bytes", "1073741824"),
    ("log.roll.ms", ""),
    ("log.roll.hours", "168"),
    ("log.index.interval.bytes", "4096"),
    ("log.index.size.max.bytes", "10485760"),
    ("log.retention.ms", ""),
    ("log.retention.minutes", ""),
    ("log.retention.hours", "168"),
    ("log.retention.bytes", "-1"),
    ("log.retention.check.interval.ms", "300000"),
    ("log.flush.interval.messages", "9223372036854775807"),
    ("log.flush.interval.ms", ""),
    ("log.message.timestamp.type", "CreateTime"),
    ("message.max.bytes", "1048588"),
    ("socket.request.max.bytes", "104857600"),
    ("min.insync.replicas", "1"),
    ("offsets.topic.num.partitions", "50"),
    ("offsets.topic.replication.factor", "1"),
    ("transaction.state.log.replication.factor", "1"),
    ("transaction.state.log.min.isr", "1"),
    ("group.initial.rebalance.delay.ms", "3000"),
    ("group.min.session.timeout.ms", "6000"),
    ("group.max.session.timeout.ms", "1800000"),
    ("offsets.retention.minutes", "10080"),
    ("producer.id.expiration.ms", "86400000"),
    ("producer.id.expiration.check.interval.ms", "600000"),
    // Read from `raw` by cluster::checkpoints.
    ("replica.high.watermark.checkpoint.interval.ms", "5000"),
    ("log.flush.offset.checkpoint.interval.ms", "60000"),
];

fn is_known(key: &str) -> bool {
    KNOWN.iter().any(|(k, _)| *k == key)
}

/// Parses Java `.properties` text: `key=value` or `key: value`, `#`/`!` comments, blank lines.
/// Line continuations with a trailing backslash are joined.
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for (lineno, raw_line) in text.lines().enumerate() {
        let line = raw_line.trim_start();
        if pending.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
        {
            continue;
        }
        if let Some(stripped) = line.strip_suffix('\\') {
            pending.push_str(stripped);
            continue;
        }
        pending.push_str(line);
        let entry = std::mem::take(&mut pending);
        let sep = entry
            .find(['=', ':'])
            .ok_or_else(|| anyhow!("line {}: expected key=value, got {:?}", lineno + 1, entry))?;
        let key = entry[..sep].trim().to_string();
        let value = entry[sep + 1..].trim().to_string();
        out.push((key, value));
    }
    Ok(out)
}

/// Parses one `--override key=value` argument.
pub fn parse_override(arg: &str) -> Result<(String, String)> {
    let (k, v) = arg
        .split_once('=')
        .ok_or_else(|| anyhow!("--override {arg:?}: expected key=value"))?;
    Ok((k.trim().to_string(), v.trim().to_string()))
}

fn parse_listeners(key: &str, value: &str) -> Result<Vec<Listener>> {
    let mut out = Vec::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, rest) = item
            .split_once("://")
            .ok_or_else(|| anyhow!("{key}: {item:?} is not of the form NAME://host:port"))?;
        let (host, port) = if let Some(r) = rest.strip_prefix('[') {
            let (h, p) = r
                .split_once("]:")
                .ok_or_else(|| anyhow!("{key}: {item:?} has a bad IPv6 address"))?;
            (h.to_string(), p)
        } else {
            let (h, p) = rest
                .rsplit_once(':')
                .ok_or_else(|| anyhow!("{key}: {item:?} has no port"))?;
            (h.to_string(), p)
        };
        let port: u16 = port
            .parse()
            .map_err(|_| anyhow!("{key}: {item:?} has an invalid port {port:?}"))?;
        if name != "PLAINTEXT" {
            bail!("{key}: listener {name} is not supported (only PLAINTEXT)");
        }
        out.push(Listener {
            name: name.to_string(),
            host,
            port,
        });
    }
    if out.is_empty() {
        bail!("{key}: no listener given");
    }
    Ok(out)
}

struct Props(BTreeMap<String, String>);

impl Props {
    fn get(&self, key: &str) -> &str {
        self.0.get(key).map(String::as_str).unwrap_or("")
    }
    fn is_set(&self, key: &str) -> bool {
        !self.get(key).is_empty()
    }
    fn num<T: std::str::FromStr>(&self, key: &str) -> Result<T> {
        let v = self.get(key);
        v.parse::<T>()
            .map_err(|_| anyhow!("{key}: invalid value {v:?}"))
    }
    fn num_at_least<T: std::str::FromStr + PartialOrd + std::fmt::Display>(
        &self,
        key: &str,
        min: T,
    ) -> Result<T> {
        let v: T = self.num(key)?;
        if v < min {
            bail!("{key}: value {v} must be at least {min}");
        }
        Ok(v)
    }
    fn boolean(&self, key: &str) -> Result<bool> {
        match self.get(key).to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            v => bail!("{key}: invalid value {v:?} (expected true or false)"),
        }
    }
    /// The first of `keys` that is set, converted to milliseconds by its factor.
    fn millis(&self, keys: &[(&str, i64)]) -> Result<i64> {
        for (key, factor) in keys {
            if self.is_set(key) {
                let v: i64 = self.num(key)?;
                return Ok(if v < 0 { -1 } else { v.saturating_mul(*factor) });
            }
        }
        Ok(-1)
    }
}

impl BrokerConfig {
    /// Builds the configuration from (key, value) pairs applied in order over the defaults.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Result<BrokerConfig> {
        let mut map: BTreeMap<String, String> = KNOWN
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for (k, v) in pairs {
            if !is_known(&k) {
                bail!("unknown configuration key {k:?}");
            }
            map.insert(k, v);
        }
        let p = Props(map);

        let listeners = parse_listeners("listeners", p.get("listeners"))?;
        let advertised_listeners = if p.is_set("advertised.listeners") {
            parse_listeners("advertised.listeners", p.get("advertised.listeners"))?
        } else {
            listeners.clone()
        };
        let node_id = if p.is_set("broker.id") {
            p.num_at_least::<i32>("broker.id", 0)?
        } else {
            p.num_at_least::<i32>("node.id", 0)?
        };
        let dirs_value = if p.is_set("log.dirs") {
            p.get("log.dirs")
        } else {
            p.get("log.dir")
        };
        let log_dirs: Vec<PathBuf> = dirs_value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect();
        if log_dirs.is_empty() {
            bail!("log.dirs: no directory given");
        }
        let timestamp_type = p.get("log.message.timestamp.type");
        let log_append = match timestamp_type {
            "CreateTime" => false,
            "LogAppendTime" => true,
            v => bail!(
                "log.message.timestamp.type: invalid value {v:?} (CreateTime or LogAppendTime)"
            ),
        };
        let flush_ms = if p.is_set("log.flush.interval.ms") {
            p.num_at_least::<i64>("log.flush.interval.ms", 0)?
        } else {
            i64::MAX
        };
        let cfg = BrokerConfig {
            listeners,
            advertised_listeners,
            node_id,
            log_dirs,
            num_partitions: p.num_at_least("num.partitions", 1)?,
            default_replication_factor: p.num_at_least("default.replication.factor", 1)?,
            auto_create_topics_enable: p.boolean("auto.create.topics.enable")?,
            log_segment_bytes: p.num_at_least("log.segment.bytes", 14)?,
            log_roll_ms: p
                .millis(&[("log.roll.ms", 1), ("log.roll.hours", 3_600_000)])
                .and_then(|v| {
                    if v < 1 {
                        bail!("log.roll.ms: must be at least 1")
                    } else {
                        Ok(v)
                    }
                })?,
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
            socket_request_max_bytes: p.num_at_least("socket.request.max.bytes", 1)?,
            min_insync_replicas: p.num_at_least("min.insync.replicas", 1)?,
            offsets_topic_num_partitions: p.num_at_least("offsets.topic.num.partitions", 1)?,
            group_initial_rebalance_delay_ms: p.num("group.initial.rebalance.delay.ms")?,
            group_min_session_timeout_ms: p.num("group.min.session.timeout.ms")?,
            group_max_session_timeout_ms: p.num("group.max.session.timeout.ms")?,
            offsets_retention_minutes: p.num_at_least("offsets.retention.minutes", 1)?,
            producer_id_expiration_ms: p.num_at_least("producer.id.expiration.ms", 1)?,
            producer_id_expiration_check_interval_ms: p
                .num_at_least("producer.id.expiration.check.interval.ms", 1)?,
            raw: p.0,
        };
        Ok(cfg)
    }

    /// Loads `--config FILE` (if any) and applies the overrides.
    pub fn load(file: Option<&std::path::Path>, overrides: &[String]) -> Result<BrokerConfig> {
        let mut pairs = Vec::new();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read config file {}", path.display()))?;
            pairs
                .extend(parse_properties(&text).with_context(|| format!("in {}", path.display()))?);
        }
        for o in overrides {
            pairs.push(parse_override(o)?);
        }
        Self::from_pairs(pairs)
    }

    /// True if `key` was given a value other than Kafka's default (config file or override).
    pub fn is_explicitly_set(&self, key: &str) -> bool {
        match (self.raw.get(key), KNOWN.iter().find(|(k, _)| *k == key)) {
            (Some(v), Some((_, default))) => v != default,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// The advertised host and port of this broker (first advertised listener).
    pub fn advertised(&self) -> (String, u16) {
        let l = &self.advertised_listeners[0];
        let host = if l.host.is_empty() {
            nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .unwrap_or_else(|| "localhost".to_string())
        } else {
            l.host.clone()
        };
        (host, l.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Result<BrokerConfig> {
        BrokerConfig::from_pairs(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn defaults_match_kafka() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.listeners[0].port, 9092);
        assert_eq!(c.log_dirs, vec![PathBuf::from("./data")]);
        assert_eq!(c.message_max_bytes, 1048588);
        assert_eq!(c.socket_request_max_bytes, 104857600);
        assert_eq!(c.log_retention_ms, 168 * 3_600_000);
        assert_eq!(c.log_roll_ms, 168 * 3_600_000);
        assert_eq!(c.log_segment_bytes, 1 << 30);
    }

    #[test]
    fn unknown_and_invalid_keys_are_named() {
        let e = cfg(&[("no.such.key", "1")]).unwrap_err().to_string();
        assert!(e.contains("no.such.key"), "{e}");
        let e = cfg(&[("num.partitions", "zero")]).unwrap_err().to_string();
        assert!(e.contains("num.partitions"), "{e}");
        let e = cfg(&[("listeners", "PLAINTEXT://:notaport")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("listeners"), "{e}");
    }

    #[test]
    fn properties_syntax() {
        let p = parse_properties("# c\n! c\n\na=1\nb : two\nc=x\\\n  y\n").unwrap();
        assert_eq!(
            p,
            vec![
                ("a".into(), "1".into()),
                ("b".into(), "two".into()),
                ("c".into(), "xy".into())
            ]
        );
    }

    #[test]
    fn retention_precedence_and_aliases() {
        let c = cfg(&[("log.retention.minutes", "2"), ("broker.id", "7")]).unwrap();
        assert_eq!(c.log_retention_ms, 120_000);
        assert_eq!(c.node_id, 7);
        let c = cfg(&[("log.retention.ms", "5"), ("log.retention.minutes", "2")]).unwrap();
        assert_eq!(c.log_retention_ms, 5);
        let c = cfg(&[("log.retention.ms", "-1")]).unwrap();
        assert_eq!(c.log_retention_ms, -1);
    }
}
