//! The environment of the apache/kafka container image, read with `sluice --kafka-env`.
//!
//! The image turns every `KAFKA_*` variable but a few (the JVM's and log4j's, [`EXCLUDED`])
//! into a broker property: `KAFKA_` is removed (everywhere in the name, as the image does), the
//! rest lower-cased, then `_` becomes `.`, `...` (from `___`) becomes `-` and `..` (from `__`)
//! becomes `_`. Its properties file is a mounted `server.properties` (here `--config FILE`)
//! with these lines appended, so a variable wins over the file; `--override` wins over both.
//! Only when neither a file nor a variable is given does the image use its default
//! single-node `server.properties` ([`IMAGE_DEFAULTS`]). Before that, its `configure` script
//! derives `KAFKA_LISTENERS` from `KAFKA_ADVERTISED_LISTENERS` (hosts replaced by `0.0.0.0`)
//! when only the latter is given, and refuses advertised listeners on a controller-only node.
//! `CLUSTER_ID` (default [`DEFAULT_CLUSTER_ID`], as the image's) formats the log dirs, and a
//! `-Djava.security.auth.login.config=FILE` in `KAFKA_OPTS` names a static JAAS file whose
//! `KafkaServer` section serves the SASL mechanisms no `sasl.jaas.config` property covers.
//! [`read`] and [`settings`] are pure; [`load`] reads the file system.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};

use super::keys::default_of;
use super::parse::unescape;
use super::{BrokerConfig, Origin, Setting, parse_override};
use crate::security::sasl::jaas;

/// Variables the image leaves out of the broker properties (its `ExcludeServerPropsEnv`):
/// they configure the JVM, JMX and log4j.
pub const EXCLUDED: &[&str] = &[
    "KAFKA_VERSION",
    "KAFKA_HEAP_OPTS",
    "KAFKA_LOG4J_OPTS",
    "KAFKA_OPTS",
    "KAFKA_JMX_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS",
    "KAFKA_GC_LOG_OPTS",
    "KAFKA_LOG4J_ROOT_LOGLEVEL",
    "KAFKA_LOG4J_LOGGERS",
    "KAFKA_TOOLS_LOG4J_LOGLEVEL",
    "KAFKA_JMX_HOSTNAME",
];

/// Variables the image's launch scripts read (the JMX port, the JVM debugger) that it also
/// writes out as properties Kafka does not know and ignores (`jmx.port`, `debug`). Sluice
/// refuses unknown properties, so it skips these and says so.
pub const LAUNCH_ONLY: &[&str] = &["KAFKA_JMX_PORT", "KAFKA_DEBUG"];

/// The cluster id the image formats with when `CLUSTER_ID` is unset or empty.
pub const DEFAULT_CLUSTER_ID: &str = "5L6g3nShT-eMCtK--X86sw";

/// The image's data volume: `log.dirs` when no file or variable sets `log.dirs` or `log.dir`.
pub const DATA_DIR: &str = "/var/lib/kafka/data";

/// The image's default `server.properties` (Kafka's KRaft single-node example), adapted: the
/// data on the image's volume, the quorum listed in `controller.quorum.voters`, and the
/// controller listener not advertised to clients.
pub const IMAGE_DEFAULTS: &[(&str, &str)] = &[
    ("process.roles", "broker,controller"),
    ("node.id", "1"),
    ("controller.quorum.voters", "1@localhost:9093"),
    ("listeners", "PLAINTEXT://:9092,CONTROLLER://:9093"),
    ("inter.broker.listener.name", "PLAINTEXT"),
    ("advertised.listeners", "PLAINTEXT://localhost:9092"),
    ("controller.listener.names", "CONTROLLER"),
    (
        "listener.security.protocol.map",
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
    ),
    ("num.network.threads", "3"),
    ("num.io.threads", "8"),
    ("socket.send.buffer.bytes", "102400"),
    ("socket.receive.buffer.bytes", "102400"),
    ("socket.request.max.bytes", "104857600"),
    ("log.dirs", DATA_DIR),
    ("num.partitions", "1"),
    ("num.recovery.threads.per.data.dir", "1"),
    ("offsets.topic.replication.factor", "1"),
    ("transaction.state.log.replication.factor", "1"),
    ("transaction.state.log.min.isr", "1"),
    ("share.coordinator.state.topic.replication.factor", "1"),
    ("share.coordinator.state.topic.min.isr", "1"),
    ("log.retention.hours", "168"),
    ("log.segment.bytes", "1073741824"),
    ("log.retention.check.interval.ms", "300000"),
];

/// What the environment gives, read by [`read`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaEnv {
    /// The properties of the `KAFKA_*` variables, in variable name order.
    pub settings: Vec<Setting>,
    /// `CLUSTER_ID`, else [`DEFAULT_CLUSTER_ID`].
    pub cluster_id: String,
    /// The static JAAS file `KAFKA_OPTS` names, if any.
    pub jaas_file: Option<PathBuf>,
    /// The [`LAUNCH_ONLY`] variables that were set.
    pub skipped: Vec<String>,
}

/// The property `var` sets, or None for a variable that sets none (not `KAFKA_*`, or one of
/// [`EXCLUDED`] or [`LAUNCH_ONLY`]).
pub fn property_name(var: &str) -> Option<String> {
    if !var.starts_with("KAFKA_") || EXCLUDED.contains(&var) || LAUNCH_ONLY.contains(&var) {
        return None;
    }
    Some(
        var.replace("KAFKA_", "")
            .to_lowercase()
            .replace('_', ".")
            .replace("...", "-")
            .replace("..", "_"),
    )
}

/// `KAFKA_ADVERTISED_LISTENERS` with every host (from `://` to the next `:`) replaced by
/// `0.0.0.0`, as the image's `sed -e 's|://[^:]*:|://0.0.0.0:|g'`.
fn bind_all_hosts(advertised: &str) -> String {
    let mut out = String::new();
    let mut rest = advertised;
    while let Some(at) = rest.find("://") {
        let after = &rest[at + 3..];
        match after.find(':') {
            Some(colon) => {
                out.push_str(&rest[..at]);
                out.push_str("://0.0.0.0:");
                rest = &after[colon + 1..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    out
}

/// A cluster id as `kafka-storage format` takes it: a UUID in URL-safe base64 without
/// padding (22 characters). Java's decoder ignores the unused low bits of the last character,
/// so ids such as `MkU3OEVBNTcwNTJENDM2Qk` are taken.
fn valid_cluster_id(id: &str) -> bool {
    use base64::Engine;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    let lenient = GeneralPurpose::new(
        &base64::alphabet::URL_SAFE,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::RequireNone),
    );
    id.len() == 22 && lenient.decode(id).is_ok_and(|b| b.len() == 16)
}

/// The static JAAS file of a JVM's options: the last `-Djava.security.auth.login.config=`
/// (`==FILE`, which makes it the only file, is read the same). The options are split at
/// whitespace, as the start script passes them unquoted; the rest are ignored.
fn jaas_file_of(opts: &str) -> Option<PathBuf> {
    opts.split_whitespace()
        .filter_map(|o| o.strip_prefix("-Djava.security.auth.login.config="))
        .map(|f| f.strip_prefix('=').unwrap_or(f))
        .next_back()
        .filter(|f| !f.is_empty())
        .map(PathBuf::from)
}

/// Reads the environment as the image's `configure` script and its wrapper do.
pub fn read(vars: impl IntoIterator<Item = (String, String)>) -> Result<KafkaEnv> {
    let mut vars: BTreeMap<String, String> = vars.into_iter().collect();
    let given =
        |vars: &BTreeMap<String, String>, k: &str| vars.get(k).is_some_and(|v| !v.is_empty());
    let controller_only = vars.get("KAFKA_PROCESS_ROLES").map(String::as_str) == Some("controller");
    if controller_only {
        if given(&vars, "KAFKA_ADVERTISED_LISTENERS") {
            bail!(
                "environment variable KAFKA_ADVERTISED_LISTENERS: not supported on a KRaft \
                 controller (KAFKA_PROCESS_ROLES=controller)"
            );
        }
        vars.remove("KAFKA_ADVERTISED_LISTENERS");
    }
    let mut derived = None;
    if !given(&vars, "KAFKA_LISTENERS")
        && !controller_only
        && given(&vars, "KAFKA_ADVERTISED_LISTENERS")
    {
        let listeners = bind_all_hosts(&vars["KAFKA_ADVERTISED_LISTENERS"]);
        vars.insert("KAFKA_LISTENERS".to_string(), listeners);
        derived = Some("KAFKA_LISTENERS (from KAFKA_ADVERTISED_LISTENERS)");
    }
    let mut settings = Vec::new();
    let mut skipped = Vec::new();
    for (var, value) in &vars {
        if LAUNCH_ONLY.contains(&var.as_str()) {
            skipped.push(var.clone());
            continue;
        }
        let Some(key) = property_name(var) else {
            continue;
        };
        let name = match derived {
            Some(d) if var == "KAFKA_LISTENERS" => d.to_string(),
            _ => var.clone(),
        };
        // The image writes `key=value` into a properties file: the value is read as such.
        let value = unescape(value.trim_start_matches([' ', '\t', '\x0c']))
            .map_err(|e| anyhow!("environment variable {name}: {e}"))?;
        settings.push(Setting {
            key,
            value: value.trim_end().to_string(),
            origin: Origin::Env(name),
        });
    }
    let cluster_id = match vars.get("CLUSTER_ID").filter(|v| !v.is_empty()) {
        Some(id) if !valid_cluster_id(id) => bail!(
            "environment variable CLUSTER_ID: {id:?} is not a cluster id (a UUID in URL-safe \
             base64, 22 characters, as `kafka-storage random-uuid` prints)"
        ),
        Some(id) => id.clone(),
        None => DEFAULT_CLUSTER_ID.to_string(),
    };
    Ok(KafkaEnv {
        settings,
        cluster_id,
        jaas_file: vars.get("KAFKA_OPTS").and_then(|o| jaas_file_of(o)),
        skipped,
    })
}

/// The settings in the order they apply (later ones win): the image's defaults when neither
/// `file` nor a variable gives anything, else `log.dirs` on the image's volume unless the file
/// or a variable sets `log.dirs` or `log.dir`; then the file, the variables, the overrides.
pub fn settings(
    file: Option<Vec<Setting>>,
    env: &KafkaEnv,
    overrides: Vec<Setting>,
) -> Vec<Setting> {
    let default = |key: &str, value: &str| Setting {
        key: key.to_string(),
        value: value.to_string(),
        origin: Origin::ImageDefault,
    };
    let mut out = Vec::new();
    if file.is_none() && env.settings.is_empty() {
        out.extend(IMAGE_DEFAULTS.iter().map(|(k, v)| default(k, v)));
    } else {
        let file_and_env = file.iter().flatten().chain(&env.settings);
        if !file_and_env
            .clone()
            .any(|s| s.key == "log.dirs" || s.key == "log.dir")
        {
            out.push(default("log.dirs", DATA_DIR));
        }
        out.extend(file_and_env.cloned());
    }
    out.extend(overrides);
    out
}

/// The login module class Kafka serves `mechanism` with.
fn login_module(mechanism: &str) -> Option<&'static str> {
    match mechanism {
        "PLAIN" => Some("org.apache.kafka.common.security.plain.PlainLoginModule"),
        "SCRAM-SHA-256" | "SCRAM-SHA-512" => {
            Some("org.apache.kafka.common.security.scram.ScramLoginModule")
        }
        "OAUTHBEARER" => {
            Some("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule")
        }
        _ => None,
    }
}

/// The `listener.name.<l>.<mechanism>.sasl.jaas.config` settings a static JAAS file gives,
/// as Kafka falls back to it: for each SASL listener and enabled mechanism with no such
/// property, the entry of the mechanism's login module in the file's `<l>.KafkaServer`
/// section, else its `KafkaServer` section. `read` reads the file; it is read only when some
/// mechanism needs it. Without a file nothing is added (the listener's own checks then say
/// what is missing).
pub fn jaas_settings(
    settings: &[Setting],
    file: Option<&Path>,
    read: &dyn Fn(&Path) -> std::io::Result<String>,
) -> Result<Vec<Setting>> {
    let mut last: BTreeMap<&str, &str> = BTreeMap::new();
    for s in settings {
        last.insert(&s.key, &s.value);
    }
    let get = |k: &str| -> String {
        last.get(k)
            .copied()
            .or_else(|| default_of(k))
            .unwrap_or("")
            .trim()
            .to_string()
    };
    let protocols: BTreeMap<String, String> = get("listener.security.protocol.map")
        .split(',')
        .filter_map(|item| item.split_once(':'))
        .map(|(n, p)| (n.trim().to_ascii_uppercase(), p.trim().to_ascii_uppercase()))
        .collect();
    let mut needed = Vec::new();
    for item in get("listeners").split(',') {
        let Some((name, _)) = item.trim().split_once("://") else {
            continue;
        };
        let name = name.trim().to_ascii_uppercase();
        if !protocols.get(&name).is_some_and(|p| p.starts_with("SASL_")) {
            continue;
        }
        let prefix = format!("listener.name.{}.", name.to_ascii_lowercase());
        let own = get(&format!("{prefix}sasl.enabled.mechanisms"));
        let list = if own.is_empty() {
            get("sasl.enabled.mechanisms")
        } else {
            own
        };
        for mech in list.split(',').map(|m| m.trim().to_ascii_uppercase()) {
            let key = format!("{prefix}{}.sasl.jaas.config", mech.to_ascii_lowercase());
            if let Some(class) = login_module(&mech)
                && get(&key).is_empty()
            {
                needed.push((name.clone(), mech, class, key));
            }
        }
    }
    let Some(path) = file else {
        return Ok(Vec::new());
    };
    if needed.is_empty() {
        return Ok(Vec::new());
    }
    let what = "the JAAS file of -Djava.security.auth.login.config in KAFKA_OPTS";
    let text = read(path).with_context(|| format!("cannot read {} ({what})", path.display()))?;
    let sections =
        jaas::parse_file(&text).map_err(|e| anyhow!("{}: {e} ({what})", path.display()))?;
    let mut out = Vec::new();
    for (listener, mech, class, key) in needed {
        let own = format!("{}.KafkaServer", listener.to_ascii_lowercase());
        let Some(section) = sections
            .iter()
            .find(|s| s.name == own)
            .or_else(|| sections.iter().find(|s| s.name == "KafkaServer"))
        else {
            bail!(
                "{}: no 'KafkaServer' or '{own}' section, which listener {listener} needs for \
                 {mech} ({what})",
                path.display()
            );
        };
        match section
            .entries
            .iter()
            .find(|(_, e)| e.login_module == class)
        {
            Some((line, entry)) => out.push(Setting {
                key,
                value: entry.to_config_text(),
                origin: Origin::Jaas {
                    path: path.to_path_buf(),
                    line: *line,
                    section: section.name.clone(),
                },
            }),
            // SCRAM's and OAUTHBEARER's entries carry no users: the mechanism runs without.
            None if mech != "PLAIN" => {}
            None => bail!(
                "{}: section {} has no {class} entry with the users of PLAIN on listener \
                 {listener} ({what})",
                path.display(),
                section.name
            ),
        }
    }
    Ok(out)
}

/// The variables of the process environment that matter here, as text. A name that is not
/// UTF-8 cannot be a `KAFKA_*` variable; a value that is not, of one that matters, is an error.
fn utf8_vars(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (k, v) in vars {
        let Ok(k) = k.into_string() else {
            continue;
        };
        if !k.starts_with("KAFKA_") && k != "CLUSTER_ID" {
            continue;
        }
        let v = v
            .into_string()
            .map_err(|_| anyhow!("environment variable {k}: not valid UTF-8"))?;
        out.push((k, v));
    }
    Ok(out)
}

/// The configuration of `sluice --kafka-env [--config FILE] [--override k=v ...]` in the
/// environment `vars`, and what the environment gave.
pub fn load(
    file: Option<&Path>,
    overrides: &[String],
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> Result<(BrokerConfig, KafkaEnv)> {
    let env = read(utf8_vars(vars)?)?;
    let file = file.map(super::file_settings).transpose()?;
    let overrides = overrides
        .iter()
        .map(|o| parse_override(o))
        .collect::<Result<Vec<_>>>()?;
    let mut all = settings(file, &env, overrides);
    let jaas = jaas_settings(&all, env.jaas_file.as_deref(), &|p| {
        std::fs::read_to_string(p)
    })?;
    all.splice(0..0, jaas);
    Ok((BrokerConfig::from_settings(all)?, env))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn config(
        file: Option<&str>,
        env: &[(&str, &str)],
        overrides: &[&str],
    ) -> Result<BrokerConfig> {
        let file = file
            .map(|t| super::super::parse_properties(t, Path::new("server.properties")))
            .transpose()?;
        let env = read(vars(env))?;
        let overrides = overrides
            .iter()
            .map(|o| parse_override(o))
            .collect::<Result<_>>()?;
        BrokerConfig::from_settings(settings(file, &env, overrides))
    }

    fn err(r: Result<BrokerConfig>) -> String {
        format!("{:#}", r.unwrap_err())
    }

    #[test]
    fn names_map_as_the_image_maps_them() {
        let cases = [
            ("KAFKA_NUM_PARTITIONS", "num.partitions"),
            (
                "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
                "listener.security.protocol.map",
            ),
            (
                "KAFKA_LISTENER_NAME_SASL__PLAINTEXT_PLAIN_SASL_JAAS_CONFIG",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
            ),
            (
                "KAFKA_LISTENER_NAME_EXTERNAL_SCRAM___SHA___256_SASL_JAAS_CONFIG",
                "listener.name.external.scram-sha-256.sasl.jaas.config",
            ),
            // Four underscores: `...` first, then the dot left over.
            ("KAFKA_A____B", "a-.b"),
            // Every `KAFKA_` goes, not only the prefix.
            (
                "KAFKA_KAFKA_METRICS_POLLING_INTERVAL_SECS",
                "metrics.polling.interval.secs",
            ),
        ];
        for (var, key) in cases {
            assert_eq!(property_name(var).as_deref(), Some(key), "{var}");
        }
        for var in EXCLUDED.iter().chain(LAUNCH_ONLY) {
            assert_eq!(property_name(var), None, "{var}");
        }
        assert_eq!(property_name("CLUSTER_ID"), None);
        assert_eq!(property_name("SLUICE_KAFKA_X"), None);
    }

    #[test]
    fn reads_what_the_image_reads() {
        let env = read(vars(&[
            ("KAFKA_NUM_PARTITIONS", " 3 "),
            ("KAFKA_ADVERTISED_LISTENERS", "PLAINTEXT://kafka:9092,SASL_PLAINTEXT://h.example:9094"),
            ("KAFKA_OPTS", "-Xfoo -Dx=y -Djava.security.auth.login.config=/a.conf -Djava.security.auth.login.config==/etc/kafka/jaas.conf"),
            ("KAFKA_HEAP_OPTS", "-Xmx1G"),
            ("KAFKA_JMX_PORT", "9101"),
            ("KAFKA_LOG4J_LOGGERS", "kafka=WARN"),
            ("KAFKA_SSL_KEY_PASSWORD", "a\\\\b"),
            ("PATH", "/bin"),
        ]))
        .unwrap();
        let got: Vec<(&str, &str, String)> = env
            .settings
            .iter()
            .map(|s| (s.key.as_str(), s.value.as_str(), s.origin.to_string()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "advertised.listeners",
                    "PLAINTEXT://kafka:9092,SASL_PLAINTEXT://h.example:9094",
                    "environment variable KAFKA_ADVERTISED_LISTENERS".to_string()
                ),
                (
                    "listeners",
                    "PLAINTEXT://0.0.0.0:9092,SASL_PLAINTEXT://0.0.0.0:9094",
                    "environment variable KAFKA_LISTENERS (from KAFKA_ADVERTISED_LISTENERS)"
                        .to_string()
                ),
                (
                    "num.partitions",
                    "3",
                    "environment variable KAFKA_NUM_PARTITIONS".to_string()
                ),
                // Read as a properties file line: `\\` is one backslash.
                (
                    "ssl.key.password",
                    "a\\b",
                    "environment variable KAFKA_SSL_KEY_PASSWORD".to_string()
                ),
            ]
        );
        assert_eq!(env.jaas_file, Some(PathBuf::from("/etc/kafka/jaas.conf")));
        assert_eq!(env.skipped, vec!["KAFKA_JMX_PORT".to_string()]);
        assert_eq!(env.cluster_id, DEFAULT_CLUSTER_ID);
        // Given listeners are kept; a controller-only node advertises nothing.
        let env = read(vars(&[
            ("KAFKA_LISTENERS", "PLAINTEXT://:1"),
            ("KAFKA_ADVERTISED_LISTENERS", "PLAINTEXT://h:2"),
            ("CLUSTER_ID", "MkU3OEVBNTcwNTJENDM2Qk"),
        ]))
        .unwrap();
        assert_eq!(env.settings[1].value, "PLAINTEXT://:1");
        assert_eq!(env.cluster_id, "MkU3OEVBNTcwNTJENDM2Qk");
        let e = read(vars(&[
            ("KAFKA_PROCESS_ROLES", "controller"),
            ("KAFKA_ADVERTISED_LISTENERS", "CONTROLLER://h:2"),
        ]))
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("KAFKA_ADVERTISED_LISTENERS: not supported on a KRaft controller"),
            "{e}"
        );
        let env = read(vars(&[
            ("KAFKA_PROCESS_ROLES", "controller"),
            ("KAFKA_ADVERTISED_LISTENERS", ""),
        ]))
        .unwrap();
        assert_eq!(env.settings.len(), 1);
        let e = read(vars(&[("CLUSTER_ID", "not-a-uuid")])).unwrap_err();
        assert!(
            e.to_string()
                .contains("CLUSTER_ID: \"not-a-uuid\" is not a cluster id"),
            "{e}"
        );
        let e = read(vars(&[("KAFKA_X", "\\u12")])).unwrap_err();
        assert!(
            e.to_string().starts_with("environment variable KAFKA_X: "),
            "{e}"
        );
    }

    #[test]
    fn variables_win_over_the_file_and_overrides_over_both() {
        let file = "num.partitions=2\nlog.dirs=/srv/a\ndefault.replication.factor=1\n";
        let c = config(Some(file), &[("KAFKA_NUM_PARTITIONS", "3")], &[]).unwrap();
        assert_eq!(c.num_partitions, 3);
        assert_eq!(c.log_dirs, vec![PathBuf::from("/srv/a")]);
        assert_eq!(
            c.origin("num.partitions"),
            Some(&Origin::Env("KAFKA_NUM_PARTITIONS".into()))
        );
        let c = config(
            Some(file),
            &[("KAFKA_NUM_PARTITIONS", "3")],
            &["num.partitions=4"],
        )
        .unwrap();
        assert_eq!(c.num_partitions, 4);
        // The file alone: no image defaults.
        let c = config(Some(file), &[], &[]).unwrap();
        assert!(c.cluster.as_ref().is_some_and(|c| c.one_voter));
    }

    #[test]
    fn errors_name_the_variable() {
        let e = err(config(None, &[("KAFKA_NO_SUCH_KEY", "1")], &[]));
        assert!(
            e.starts_with("environment variable KAFKA_NO_SUCH_KEY: unknown key \"no.such.key\""),
            "{e}"
        );
        let e = err(config(None, &[("KAFKA_NUM_PARTITIONS", "many")], &[]));
        assert!(
            e.starts_with("environment variable KAFKA_NUM_PARTITIONS: num.partitions: "),
            "{e}"
        );
        assert!(e.contains("many"), "{e}");
        let e = err(config(None, &[("KAFKA_HOME", "/opt/kafka")], &[]));
        assert!(e.contains("KAFKA_HOME"), "{e}");
    }

    #[test]
    fn image_defaults_when_nothing_is_given() {
        let c = config(None, &[], &[]).unwrap();
        let cc = c.cluster.as_ref().expect("a KRaft node");
        assert!(cc.roles.broker && cc.roles.controller);
        assert_eq!(c.node_id, 1);
        assert_eq!(cc.voters[&1], "localhost:9093");
        assert_eq!(
            cc.controller_listener.as_ref().unwrap().to_string(),
            "CONTROLLER://:9093"
        );
        assert_eq!(c.listeners.len(), 1);
        assert_eq!(c.listeners[0].bind_addr(), "0.0.0.0:9092");
        assert_eq!(c.advertised(), ("localhost".to_string(), 9092));
        assert_eq!(c.log_dirs, vec![PathBuf::from(DATA_DIR)]);
        assert_eq!(c.origin("node.id"), Some(&Origin::ImageDefault));
        assert_eq!(
            c.security_protocol("CONTROLLER").as_deref(),
            Some("PLAINTEXT")
        );
        // Overrides still apply over the defaults.
        let c = config(None, &[], &["num.partitions=5"]).unwrap();
        assert_eq!(c.num_partitions, 5);
        assert!(c.cluster.as_ref().is_some_and(|c| !c.one_voter));
        // Any variable replaces the defaults; log.dirs stays on the image's volume.
        let c = config(None, &[("KAFKA_NUM_PARTITIONS", "2")], &[]).unwrap();
        assert!(c.cluster.as_ref().is_some_and(|c| c.one_voter));
        assert_eq!(c.log_dirs, vec![PathBuf::from(DATA_DIR)]);
        let c = config(None, &[("KAFKA_LOG_DIR", "/d")], &[]).unwrap();
        assert_eq!(c.log_dirs, vec![PathBuf::from("/d")]);
        // An excluded variable alone leaves the defaults.
        let c = config(None, &[("KAFKA_HEAP_OPTS", "-Xmx1G")], &[]).unwrap();
        assert!(c.cluster.as_ref().is_some_and(|c| !c.one_voter));
    }

    const JAAS: &str = r#"
KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin" password="admin-secret"
    user_admin="admin-secret" user_alice="alice-secret";
    org.apache.kafka.common.security.scram.ScramLoginModule required;
};
"#;

    fn sasl_config(env: &[(&str, &str)], jaas: Option<&str>) -> Result<BrokerConfig> {
        let mut all = vec![
            ("KAFKA_LISTENERS", "SASL_PLAINTEXT://:9094"),
            (
                "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
                "SASL_PLAINTEXT:SASL_PLAINTEXT",
            ),
            ("KAFKA_SASL_ENABLED_MECHANISMS", "PLAIN,SCRAM-SHA-256"),
            (
                "KAFKA_OPTS",
                "-Djava.security.auth.login.config=/etc/jaas.conf",
            ),
        ];
        all.extend_from_slice(env);
        let env = read(vars(&all))?;
        let s = settings(None, &env, Vec::new());
        let read_jaas = |p: &Path| -> std::io::Result<String> {
            assert_eq!(p, Path::new("/etc/jaas.conf"));
            jaas.map(str::to_string)
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
        };
        let mut s2 = jaas_settings(&s, env.jaas_file.as_deref(), &read_jaas)?;
        s2.extend(s);
        BrokerConfig::from_settings(s2)
    }

    #[test]
    fn a_static_jaas_file_serves_the_mechanisms_without_a_property() {
        let c = sasl_config(&[], Some(JAAS)).unwrap();
        let l = &c.sasl["SASL_PLAINTEXT"];
        assert_eq!(l.plain_users["alice"], "alice-secret");
        assert_eq!(l.plain_users.len(), 2);
        let key = "listener.name.sasl_plaintext.plain.sasl.jaas.config";
        assert_eq!(
            c.origin(key).unwrap().to_string(),
            "/etc/jaas.conf:3 (JAAS section KafkaServer)"
        );
        // A property wins over the file.
        let own =
            "org.apache.kafka.common.security.plain.PlainLoginModule required user_bob=\"b\";";
        let c = sasl_config(
            &[(
                "KAFKA_LISTENER_NAME_SASL__PLAINTEXT_PLAIN_SASL_JAAS_CONFIG",
                own,
            )],
            Some(JAAS),
        )
        .unwrap();
        assert_eq!(
            c.sasl["SASL_PLAINTEXT"]
                .plain_users
                .keys()
                .collect::<Vec<_>>(),
            ["bob"]
        );
        // The listener's own section wins over KafkaServer.
        let two = format!(
            "{JAAS}\nsasl_plaintext.KafkaServer {{ org.apache.kafka.common.security.plain.PlainLoginModule required user_carol=\"c\"; }};"
        );
        let c = sasl_config(&[], Some(&two)).unwrap();
        assert_eq!(
            c.sasl["SASL_PLAINTEXT"]
                .plain_users
                .keys()
                .collect::<Vec<_>>(),
            ["carol"]
        );
    }

    #[test]
    fn jaas_file_errors_name_the_file() {
        let e = format!(
            "{:#}",
            sasl_config(&[], Some("Client { M required; };")).unwrap_err()
        );
        assert!(
            e.starts_with(
                "/etc/jaas.conf: no 'KafkaServer' or 'sasl_plaintext.KafkaServer' section"
            ),
            "{e}"
        );
        let e = format!("{:#}", sasl_config(&[], None).unwrap_err());
        assert!(e.starts_with("cannot read /etc/jaas.conf"), "{e}");
        let e = format!(
            "{:#}",
            sasl_config(&[], Some("KafkaServer {\n M required a=;\n};")).unwrap_err()
        );
        assert!(e.starts_with("/etc/jaas.conf: line 2: "), "{e}");
        let scram_only =
            "KafkaServer { org.apache.kafka.common.security.scram.ScramLoginModule required; };";
        let e = format!("{:#}", sasl_config(&[], Some(scram_only)).unwrap_err());
        assert!(
            e.contains("no org.apache.kafka.common.security.plain.PlainLoginModule entry"),
            "{e}"
        );
        // Without SASL listeners the file is not read.
        let env = read(vars(&[(
            "KAFKA_OPTS",
            "-Djava.security.auth.login.config=/nowhere",
        )]))
        .unwrap();
        let s = settings(None, &env, Vec::new());
        let none = jaas_settings(&s, env.jaas_file.as_deref(), &|_| panic!("read")).unwrap();
        assert!(none.is_empty());
    }
}
