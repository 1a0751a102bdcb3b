//! Broker loggers (Kafka's BROKER_LOGGER config resource, `kafka-configs --entity-type
//! broker-loggers`): the log levels of Sluice's tracing targets, read and changed at run time.
//!
//! The loggers are `root` (the default level), each top-level module of the broker
//! (`sluice::api`, `sluice::cluster`, ...; `sluice` for all of them) and `openraft` (the
//! metadata quorum's library). A logger without a level of its own has its parent's (`sluice::x`
//! → `sluice` → `root`), as log4j's do. Levels are Kafka's names (FATAL and ERROR both mean
//! tracing's error). A change rebuilds the log filter at once (tracing-subscriber's reload
//! handle) and, as in Kafka, is not persisted: a restart starts from `SLUICE_LOG`/`RUST_LOG`.
//!
//! [`Levels`] is the pure part (the start-up filter read, Kafka's checks, the filter built);
//! the process holds one behind a mutex with the reload function `main` registers.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

pub const ROOT: &str = "root";

/// Kafka's valid log levels, in the order its error message lists them.
pub const LEVELS: [&str; 6] = ["DEBUG", "ERROR", "FATAL", "INFO", "TRACE", "WARN"];

/// Every logger, `root` first.
pub const LOGGERS: &[&str] = &[
    ROOT,
    "openraft",
    "sluice",
    "sluice::alloc",
    "sluice::api",
    "sluice::broker",
    "sluice::clock",
    "sluice::cluster",
    "sluice::config",
    "sluice::faults",
    "sluice::group",
    "sluice::health",
    "sluice::http",
    "sluice::log",
    "sluice::logging",
    "sluice::metrics",
    "sluice::net",
    "sluice::producer",
    "sluice::quota",
    "sluice::registry",
    "sluice::run",
    "sluice::security",
    "sluice::share",
    "sluice::testing",
    "sluice::txn",
    "sluice::verify",
];

/// Why a change was refused: INVALID_CONFIG or INVALID_REQUEST, with Kafka's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    InvalidConfig(String),
    InvalidRequest(String),
}

/// One change: SET (`Some(level)`), DELETE (`None`), or an operation loggers do not have
/// (APPEND, SUBTRACT, unknown: its Kafka name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Set(String, String),
    Delete(String),
    Other(String, String),
}

/// The levels loggers were given, and the filter directives that name no logger (kept as
/// they were at start-up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Levels {
    explicit: BTreeMap<String, String>,
    other: Vec<String>,
}

fn kafka_level(tracing: &str) -> Option<&'static str> {
    Some(match tracing.to_ascii_lowercase().as_str() {
        "error" => "ERROR",
        "warn" => "WARN",
        "info" => "INFO",
        "debug" => "DEBUG",
        "trace" => "TRACE",
        "off" => "OFF",
        _ => return None,
    })
}

fn tracing_level(kafka: &str) -> &'static str {
    match kafka {
        "FATAL" | "ERROR" => "error",
        "WARN" => "warn",
        "DEBUG" => "debug",
        "TRACE" => "trace",
        "OFF" => "off",
        _ => "info",
    }
}

impl Levels {
    /// The levels a start-up filter (EnvFilter syntax) gives: a bare level is root's,
    /// `logger=level` a logger's; anything else stays in the filter as it is.
    pub fn from_spec(spec: &str) -> Levels {
        let mut l = Levels {
            explicit: BTreeMap::from([(ROOT.to_string(), "INFO".to_string())]),
            other: Vec::new(),
        };
        for d in spec.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            match d.split_once('=') {
                None if kafka_level(d).is_some() => {
                    l.explicit
                        .insert(ROOT.into(), kafka_level(d).unwrap_or("INFO").into());
                }
                Some((t, lv)) if LOGGERS.contains(&t) && t != ROOT && kafka_level(lv).is_some() => {
                    l.explicit
                        .insert(t.into(), kafka_level(lv).unwrap_or("INFO").into());
                }
                _ => l.other.push(d.to_string()),
            }
        }
        l
    }

    /// A logger's level: its own, else its nearest ancestor's.
    pub fn level(&self, logger: &str) -> String {
        let mut at = logger;
        loop {
            if let Some(l) = self.explicit.get(at) {
                return l.clone();
            }
            at = match at.rsplit_once("::") {
                Some((parent, _)) => parent,
                None if at != ROOT => ROOT,
                None => return "INFO".into(),
            };
        }
    }

    /// Every logger with its level, as DescribeConfigs lists them.
    pub fn describe(&self) -> Vec<(String, String)> {
        LOGGERS
            .iter()
            .map(|l| (l.to_string(), self.level(l)))
            .collect()
    }

    /// Kafka's checks of every change, then the changes (all or none). Deleting a logger's
    /// level gives it root's level at that moment, as Kafka's `unsetLogLevel` does.
    pub fn apply(&mut self, changes: &[Change]) -> Result<(), Refused> {
        let exists = |name: &str| {
            if LOGGERS.contains(&name) {
                Ok(())
            } else {
                Err(Refused::InvalidConfig(format!(
                    "Logger {name} does not exist!"
                )))
            }
        };
        for c in changes {
            match c {
                Change::Set(name, level) => {
                    exists(name)?;
                    if !LEVELS.contains(&level.as_str()) {
                        return Err(Refused::InvalidConfig(format!(
                            "Cannot set the log level of {name} to {level} as it is not a \
                             supported log level. Valid log levels are {}",
                            LEVELS.join(", ")
                        )));
                    }
                }
                Change::Delete(name) => {
                    exists(name)?;
                    if name == ROOT {
                        return Err(Refused::InvalidRequest(
                            "Removing the log level of the root logger is not allowed".into(),
                        ));
                    }
                }
                Change::Other(_, op) => {
                    return Err(Refused::InvalidRequest(format!(
                        "{op} operation is not allowed for the BROKER_LOGGER resource"
                    )));
                }
            }
        }
        for c in changes {
            match c {
                Change::Set(name, level) => {
                    self.explicit.insert(name.clone(), level.clone());
                }
                Change::Delete(name) => {
                    let root = self.level(ROOT);
                    self.explicit.insert(name.clone(), root);
                }
                Change::Other(..) => {}
            }
        }
        Ok(())
    }

    /// The filter (EnvFilter syntax) these levels make: root's level, the start-up
    /// directives that name no logger, then each logger's own level.
    pub fn filter_spec(&self) -> String {
        let mut parts = vec![tracing_level(&self.level(ROOT)).to_string()];
        parts.extend(self.other.iter().cloned());
        for (name, level) in &self.explicit {
            if name != ROOT {
                parts.push(format!("{name}={}", tracing_level(level)));
            }
        }
        parts.join(",")
    }
}

type Reload = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

static STATE: Mutex<Option<Levels>> = Mutex::new(None);
static RELOAD: OnceLock<Reload> = OnceLock::new();

/// Registers the filter the process started with and the function that installs a new one
/// (called once, by `main`).
pub fn install(spec: &str, reload: Reload) {
    *STATE.lock().unwrap_or_else(|e| e.into_inner()) = Some(Levels::from_spec(spec));
    let _ = RELOAD.set(reload);
}

fn with_state<T>(f: impl FnOnce(&mut Levels) -> T) -> T {
    let mut st = STATE.lock().unwrap_or_else(|e| e.into_inner());
    f(st.get_or_insert_with(|| Levels::from_spec("info")))
}

/// Every logger and its level now.
pub fn describe() -> Vec<(String, String)> {
    with_state(|l| l.describe())
}

/// Applies the changes (all or none) and installs the new filter; `validate_only` checks
/// them only.
pub fn change(changes: &[Change], validate_only: bool) -> Result<(), Refused> {
    with_state(|l| {
        let mut next = l.clone();
        next.apply(changes)?;
        if validate_only {
            return Ok(());
        }
        if let Some(reload) = RELOAD.get() {
            reload(&next.filter_spec()).map_err(Refused::InvalidRequest)?;
        }
        tracing::info!(?changes, "changed log levels");
        *l = next;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loggers_are_the_broker_modules() {
        let mods: Vec<String> = include_str!("lib.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("pub mod "))
            .map(|m| format!("sluice::{}", m.trim_end_matches(';')))
            .collect();
        let listed: Vec<String> = LOGGERS
            .iter()
            .filter(|l| l.starts_with("sluice::"))
            .map(|l| l.to_string())
            .collect();
        assert_eq!(listed, mods);
    }

    #[test]
    fn start_up_filter_levels_and_inheritance() {
        let l = Levels::from_spec("warn,sluice::net=debug,openraft=error,hyper=trace");
        assert_eq!(l.level(ROOT), "WARN");
        assert_eq!(l.level("sluice::net"), "DEBUG");
        assert_eq!(l.level("sluice::api"), "WARN");
        assert_eq!(l.level("openraft"), "ERROR");
        assert_eq!(
            l.filter_spec(),
            "warn,hyper=trace,openraft=error,sluice::net=debug"
        );
        assert_eq!(Levels::from_spec("").level("sluice"), "INFO");
    }

    #[test]
    fn changes_are_checked_as_kafka_checks_them() {
        let mut l = Levels::from_spec("info");
        let set = |n: &str, v: &str| Change::Set(n.into(), v.into());
        assert_eq!(
            l.apply(&[set("sluice::api", "BOGUS")]),
            Err(Refused::InvalidConfig(
                "Cannot set the log level of sluice::api to BOGUS as it is not a supported log \
                 level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"
                    .into()
            ))
        );
        assert_eq!(
            l.apply(&[set("no.such", "DEBUG")]),
            Err(Refused::InvalidConfig(
                "Logger no.such does not exist!".into()
            ))
        );
        assert_eq!(
            l.apply(&[Change::Delete(ROOT.into())]),
            Err(Refused::InvalidRequest(
                "Removing the log level of the root logger is not allowed".into()
            ))
        );
        assert!(matches!(
            l.apply(&[Change::Other("sluice".into(), "APPEND".into())]),
            Err(Refused::InvalidRequest(m)) if m == "APPEND operation is not allowed for the BROKER_LOGGER resource"
        ));
        // All or none.
        assert!(
            l.apply(&[set("sluice::api", "DEBUG"), set("x", "DEBUG")])
                .is_err()
        );
        assert_eq!(l.level("sluice::api"), "INFO");
        l.apply(&[set("sluice::api", "DEBUG"), set(ROOT, "WARN")])
            .unwrap();
        assert_eq!(l.level("sluice::api"), "DEBUG");
        assert_eq!(l.level("sluice::net"), "WARN");
        assert_eq!(l.filter_spec(), "warn,sluice::api=debug");
        l.apply(&[Change::Delete("sluice::api".into())]).unwrap();
        assert_eq!(l.level("sluice::api"), "WARN");
    }
}
