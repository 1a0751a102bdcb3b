//! Fault injection for tests (`sluice.faults.enable=true`): a registry of faults, each
//! matching requests of one API key (optionally only those naming one topic, one partition of
//! it, or coming from one client id) and doing one thing to the next `count` of them:
//!
//! - `error`: answer with a Kafka error code instead of applying the request;
//! - `delay`: hold the response back for some milliseconds;
//! - `close`: close the connection, before the request is applied or after it (no response);
//! - `down`: for a while, every request closes its connection unanswered (a node that does
//!   not answer), shorthand for a `close` of every key with a duration.
//!
//! Two faults act on the node rather than on requests, in a cluster only:
//! - `move_leader`: once, when added, the leadership of one partition moves to another
//!   in-sync replica (`to`, or the first one);
//! - `isolate`: until removed (or for `duration_ms`), the node is cut off from the other
//!   nodes (`crate::net::gate`); clients still reach it.
//!
//! Any fault may also last only `duration_ms` from when it is added.
//!
//! This module is the pure part: what a fault is, how it is parsed from JSON and written
//! back, and which fault a request fires. The request path (`api`) asks [`Registry::fire`]
//! for each request while any fault is live; the HTTP server (`/faults`) and the `sluice
//! faults` command ([`client`]) manage the registry.

pub mod client;
mod names;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub use names::{api_key_by_name, api_name, error_by_name, error_name};

/// When a `close` fault closes the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// The request is read and dropped: nothing is applied.
    BeforeApply,
    /// The request is applied and its response dropped.
    AfterApply,
}

/// What a fault does to a request it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Answer with this error code wherever Kafka puts an error in the response.
    Error(i16),
    /// Send the response this long after it is ready.
    Delay(Duration),
    /// Close the connection instead of answering.
    Close(When),
    /// Move a partition's leadership (the partition is the filter's) to this broker, or with
    /// `None` to another in-sync replica; fires once, when added.
    MoveLeader(Option<i32>),
    /// Cut the node off from the other nodes while the fault is live.
    Isolate,
}

impl Action {
    /// Whether it acts on the node when added rather than on requests.
    pub fn on_node(&self) -> bool {
        matches!(self, Action::MoveLeader(_) | Action::Isolate)
    }
}

/// Which requests of the key a fault matches; every field that is set must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub topic: Option<String>,
    /// Only with `topic`.
    pub partition: Option<i32>,
    pub client_id: Option<String>,
}

/// The `api_key` of a fault that matches requests of every key (`"*"`).
pub const ANY_KEY: i16 = -1;

/// A fault as asked for (`POST /faults`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The key it matches, or [`ANY_KEY`].
    pub api_key: i16,
    pub action: Action,
    pub filter: Filter,
    /// How many requests it fires on; None: every matching request until removed.
    pub count: Option<u64>,
    /// How long after it is added it fires; None: until spent or removed.
    pub lasts: Option<Duration>,
}

/// A fault in the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub id: u64,
    pub spec: Spec,
    /// How many requests it fired on.
    pub fired: u64,
    /// When it stops firing (added + `lasts`).
    pub until: Option<Instant>,
}

impl Fault {
    /// Whether it still fires at `now`.
    pub fn live_at(&self, now: Instant) -> bool {
        self.spec.count.is_none_or(|n| self.fired < n) && self.until.is_none_or(|u| now < u)
    }

    /// The fault as `GET /faults` lists it.
    pub fn to_json(&self) -> Value {
        let s = &self.spec;
        let mut v = json!({
            "id": self.id,
            "api_key": s.api_key,
            "api": if s.api_key == ANY_KEY { Some("*".to_string()) } else { api_name(s.api_key) },
            "count": s.count,
            "live": self.live_at(Instant::now()),
            "fired": self.fired,
            "remaining": s.count.map(|n| n.saturating_sub(self.fired)),
        });
        let o = v.as_object_mut().expect("an object");
        match s.action {
            Action::Error(code) => {
                o.insert("kind".into(), json!("error"));
                o.insert("error_code".into(), json!(code));
                o.insert("error".into(), json!(error_name(code)));
            }
            Action::Delay(d) => {
                o.insert("kind".into(), json!("delay"));
                o.insert("delay_ms".into(), json!(d.as_millis() as u64));
            }
            Action::Close(w) => {
                o.insert("kind".into(), json!("close"));
                let when = match w {
                    When::BeforeApply => "before",
                    When::AfterApply => "after",
                };
                o.insert("when".into(), json!(when));
            }
            Action::MoveLeader(to) => {
                o.insert("kind".into(), json!("move_leader"));
                o.insert("to".into(), json!(to));
            }
            Action::Isolate => {
                o.insert("kind".into(), json!("isolate"));
            }
        }
        if s.action.on_node() {
            o.remove("api_key");
            o.remove("api");
        }
        for (k, f) in [
            ("topic", &s.filter.topic),
            ("client_id", &s.filter.client_id),
        ] {
            if let Some(x) = f {
                o.insert(k.into(), json!(x));
            }
        }
        if let Some(p) = s.filter.partition {
            o.insert("partition".into(), json!(p));
        }
        if let Some(d) = s.lasts {
            o.insert("duration_ms".into(), json!(d.as_millis() as u64));
        }
        v
    }
}

/// The fields `POST /faults` accepts.
const FIELDS: &[&str] = &[
    "api_key",
    "kind",
    "error",
    "count",
    "delay_ms",
    "when",
    "topic",
    "partition",
    "client_id",
    "duration_ms",
    "to",
];

impl Spec {
    /// Reads a fault from its JSON form:
    /// `{"api_key": "Produce" | 0, "kind": "error" | "delay" | "close", "error":
    /// "NOT_LEADER_OR_FOLLOWER" | 6, "delay_ms": 500, "when": "before" | "after", "count": 2,
    /// "topic": "t", "partition": 0, "client_id": "c", "duration_ms": 5000}`. `count`
    /// defaults to 1 for `error` and `close` and to every request for `delay` and `down`;
    /// `null` is every request. `api_key` `"*"` (the default for `down`) is every key.
    pub fn from_json(v: &Value) -> Result<Spec, String> {
        let o = v.as_object().ok_or("a fault is a JSON object")?;
        if let Some(k) = o.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(format!(
                "unknown field {k:?} (fields: {})",
                FIELDS.join(", ")
            ));
        }
        let kind = o
            .get("kind")
            .and_then(Value::as_str)
            .ok_or(
                "kind is missing: \"error\", \"delay\", \"close\", \"down\", \"move_leader\" or \"isolate\"",
            )?;
        let on_node = matches!(kind, "move_leader" | "isolate");
        if on_node
            && let Some(k) = ["api_key", "count", "client_id"]
                .iter()
                .find(|k| o.contains_key(**k))
        {
            return Err(format!(
                "{k} is not for kind {kind:?} (it acts on the node)"
            ));
        }
        let api_key = match o.get("api_key") {
            None if kind == "down" || on_node => ANY_KEY,
            None => {
                return Err("api_key is missing (a name such as \"Produce\" or a number)".into());
            }
            Some(Value::String(s)) if s == "*" => ANY_KEY,
            Some(Value::Number(n)) => n
                .as_i64()
                .and_then(|n| i16::try_from(n).ok())
                .filter(|&k| api_name(k).is_some())
                .ok_or_else(|| format!("api_key {n} is not a Kafka API key"))?,
            Some(Value::String(s)) => {
                api_key_by_name(s).ok_or_else(|| format!("api_key {s:?} is not a Kafka API"))?
            }
            Some(_) => return Err("api_key is a name or a number".into()),
        };
        let only_for = |field: &str, kind_of: &str| -> Result<(), String> {
            match o.get(field) {
                Some(_) if kind != kind_of => Err(format!("{field} is only for kind {kind_of:?}")),
                _ => Ok(()),
            }
        };
        only_for("error", "error")?;
        only_for("delay_ms", "delay")?;
        only_for("when", "close")?;
        only_for("to", "move_leader")?;
        let action = match kind {
            "error" => Action::Error(match o.get("error") {
                None => {
                    return Err(
                        "error is missing (a name such as \"REQUEST_TIMED_OUT\" or a code)".into(),
                    );
                }
                Some(Value::Number(n)) => n
                    .as_i64()
                    .and_then(|n| i16::try_from(n).ok())
                    .filter(|&c| c != 0)
                    .ok_or_else(|| format!("error {n} is not an error code"))?,
                Some(Value::String(s)) => {
                    error_by_name(s).ok_or_else(|| format!("error {s:?} is not a Kafka error"))?
                }
                Some(_) => return Err("error is a name or a code".into()),
            }),
            "delay" => {
                let ms = o
                    .get("delay_ms")
                    .and_then(Value::as_u64)
                    .ok_or("delay_ms is missing (milliseconds, at least 0)")?;
                Action::Delay(Duration::from_millis(ms))
            }
            "down" => Action::Close(When::BeforeApply),
            "close" => Action::Close(match o.get("when").map(|w| w.as_str()) {
                None | Some(Some("before")) => When::BeforeApply,
                Some(Some("after")) => When::AfterApply,
                Some(_) => return Err("when is \"before\" or \"after\"".into()),
            }),
            "move_leader" => Action::MoveLeader(match o.get("to") {
                None | Some(Value::Null) => None,
                Some(t) => Some(
                    t.as_i64()
                        .and_then(|t| i32::try_from(t).ok())
                        .filter(|&t| t >= 0)
                        .ok_or("to is a broker id")?,
                ),
            }),
            "isolate" => Action::Isolate,
            other => {
                return Err(format!(
                    "kind {other:?} is not one of \"error\", \"delay\", \"close\", \"down\", \"move_leader\", \"isolate\""
                ));
            }
        };
        let text = |field: &str| -> Result<Option<String>, String> {
            match o.get(field) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(format!("{field} is a string")),
            }
        };
        let filter = Filter {
            topic: text("topic")?,
            partition: match o.get("partition") {
                None | Some(Value::Null) => None,
                Some(p) => Some(
                    p.as_i64()
                        .and_then(|p| i32::try_from(p).ok())
                        .filter(|&p| p >= 0)
                        .ok_or("partition is a number, at least 0")?,
                ),
            },
            client_id: text("client_id")?,
        };
        if filter.partition.is_some() && filter.topic.is_none() {
            return Err("partition needs topic".into());
        }
        if kind == "move_leader" && filter.partition.is_none() {
            return Err("move_leader names its topic and partition".into());
        }
        if kind == "isolate" && filter.topic.is_some() {
            return Err("topic is not for kind \"isolate\" (it cuts the whole node off)".into());
        }
        if api_key == ANY_KEY && matches!(action, Action::Error(_)) {
            return Err("an error fault names its api_key (the response is of that key)".into());
        }
        let lasts = match o.get("duration_ms") {
            None | Some(Value::Null) if kind == "down" => {
                return Err("duration_ms is missing (how long the node does not answer)".into());
            }
            None | Some(Value::Null) => None,
            Some(d) => {
                Some(Duration::from_millis(d.as_u64().filter(|&d| d > 0).ok_or(
                    "duration_ms is a number of milliseconds, at least 1",
                )?))
            }
        };
        let count = match o.get("count") {
            None => match kind {
                "delay" | "down" | "isolate" => None,
                _ => Some(1),
            },
            Some(Value::Null) => None,
            Some(n) => Some(
                n.as_u64()
                    .filter(|&n| n > 0)
                    .ok_or("count is a number, at least 1 (null: every request)")?,
            ),
        };
        if kind == "move_leader" && lasts.is_some() {
            return Err("duration_ms is not for kind \"move_leader\" (it fires once)".into());
        }
        Ok(Spec {
            api_key,
            action,
            filter,
            count,
            lasts,
        })
    }
}

/// What the faults a request fired ask of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fired {
    /// Hold the response back this long.
    pub delay: Option<Duration>,
    /// Answer with an error, or close the connection, instead of answering normally.
    pub outcome: Option<Action>,
}

/// The faults of one broker. Empty and idle unless the broker was started with
/// `sluice.faults.enable=true`; the request path checks [`Registry::idle`] first, one atomic
/// load.
#[derive(Debug, Default)]
pub struct Registry {
    enabled: bool,
    /// How many faults are live (0: requests pass untouched).
    live: AtomicUsize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    faults: Vec<Fault>,
}

impl Inner {
    /// How many faults that act on requests are live.
    fn live(&self, now: Instant) -> usize {
        self.faults
            .iter()
            .filter(|f| !f.spec.action.on_node() && f.live_at(now))
            .count()
    }
}

impl Registry {
    pub fn new(enabled: bool) -> Registry {
        Registry {
            enabled,
            ..Registry::default()
        }
    }

    /// Whether faults may be injected (`sluice.faults.enable`).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Whether no fault is live.
    pub fn idle(&self) -> bool {
        self.live.load(Ordering::Acquire) == 0
    }

    fn with<T>(&self, now: Instant, f: impl FnOnce(&mut Inner) -> T) -> T {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let out = f(&mut inner);
        self.live.store(inner.live(now), Ordering::Release);
        out
    }

    /// Adds a fault; None when injection is off.
    pub fn add(&self, spec: Spec) -> Option<Fault> {
        self.add_at(spec, Instant::now())
    }

    /// Adds a fault at `now` (its duration counts from then).
    pub fn add_at(&self, spec: Spec, now: Instant) -> Option<Fault> {
        if !self.enabled {
            return None;
        }
        Some(self.with(now, |i| {
            i.next_id += 1;
            let f = Fault {
                id: i.next_id,
                until: spec.lasts.map(|d| now + d),
                spec,
                fired: 0,
            };
            i.faults.push(f.clone());
            f
        }))
    }

    /// Every fault, live or spent, oldest first.
    pub fn list(&self) -> Vec<Fault> {
        self.with(Instant::now(), |i| i.faults.clone())
    }

    /// Removes fault `id`; whether there was one.
    pub fn remove(&self, id: u64) -> bool {
        self.take(id).is_some()
    }

    /// Removes fault `id` and returns it.
    pub fn take(&self, id: u64) -> Option<Fault> {
        self.with(Instant::now(), |i| {
            let at = i.faults.iter().position(|f| f.id == id)?;
            Some(i.faults.remove(at))
        })
    }

    /// Removes every fault; how many there were.
    pub fn clear(&self) -> usize {
        self.with(Instant::now(), |i| std::mem::take(&mut i.faults).len())
    }

    /// Counts one firing of fault `id` (a fault that acts on the node fires when added).
    pub fn fired(&self, id: u64) {
        self.with(Instant::now(), |i| {
            if let Some(f) = i.faults.iter_mut().find(|f| f.id == id) {
                f.fired += 1;
            }
        })
    }

    /// Whether the node is down at `now`: a live fault closes every request of every key
    /// and client, with no count (`down`, or a `close` of `"*"` until removed). New
    /// connections are then closed at accept, as no broker listens.
    pub fn down_at(&self, now: Instant) -> bool {
        self.with(now, |i| {
            i.faults.iter().any(|f| {
                let s = &f.spec;
                s.action == Action::Close(When::BeforeApply)
                    && s.api_key == ANY_KEY
                    && s.count.is_none()
                    && s.filter == Filter::default()
                    && f.live_at(now)
            })
        })
    }

    /// Whether a live `isolate` fault cuts the node off at `now`.
    pub fn isolating_at(&self, now: Instant) -> bool {
        self.with(now, |i| {
            i.faults
                .iter()
                .any(|f| f.spec.action == Action::Isolate && f.live_at(now))
        })
    }

    /// The faults a request of `api_key` from `client_id` fires: the oldest live matching
    /// delay, and the oldest live matching error or close. Each fault that fires counts the
    /// request. `touches(topic, partition)` says whether the request names the topic (and,
    /// when given, that partition of it); it is asked only of faults with a topic.
    pub fn fire(
        &self,
        api_key: i16,
        client_id: Option<&str>,
        touches: &mut dyn FnMut(&str, Option<i32>) -> bool,
    ) -> Fired {
        self.fire_at(api_key, client_id, touches, Instant::now())
    }

    /// [`Registry::fire`] at `now`.
    pub fn fire_at(
        &self,
        api_key: i16,
        client_id: Option<&str>,
        touches: &mut dyn FnMut(&str, Option<i32>) -> bool,
        now: Instant,
    ) -> Fired {
        self.with(now, |i| {
            let mut fired = Fired::default();
            for f in i.faults.iter_mut() {
                let s = &f.spec;
                if (s.api_key != api_key && s.api_key != ANY_KEY)
                    || s.action.on_node()
                    || !f.live_at(now)
                {
                    continue;
                }
                let is_delay = matches!(s.action, Action::Delay(_));
                if (is_delay && fired.delay.is_some()) || (!is_delay && fired.outcome.is_some()) {
                    continue;
                }
                if s.filter
                    .client_id
                    .as_deref()
                    .is_some_and(|c| Some(c) != client_id)
                {
                    continue;
                }
                if let Some(t) = &s.filter.topic
                    && !touches(t, s.filter.partition)
                {
                    continue;
                }
                f.fired += 1;
                match s.action {
                    Action::Delay(d) => fired.delay = Some(d),
                    a => fired.outcome = Some(a),
                }
            }
            fired
        })
    }
}

#[cfg(test)]
mod tests;
