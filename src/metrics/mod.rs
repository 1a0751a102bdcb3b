//! Broker metrics, named as the Prometheus JMX exporter's Kafka rules name Kafka's JMX beans
//! (`kafka_server_brokertopicmetrics_bytesin_total{topic=...}` for
//! `kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=...`), so that dashboards
//! built for Kafka read Sluice's.
//!
//! Two kinds of numbers:
//! - counters on the hot paths (requests, latency, errors, bytes and messages, connections,
//!   ISR changes): plain atomics written where the event happens, no lock. The broker-wide
//!   ones live in [`Metrics`] (owned by the `Broker`); per-topic bytes and messages in each
//!   partition's [`PartitionStats`] (owned by its `Partition`), summed per topic at scrape time.
//! - gauges (log sizes, segment counts, under-replicated partitions, the active controller,
//!   groups by state, consumer lag): computed at scrape time from the owners' state
//!   ([`scrape`]); nothing is kept for them here.
//!
//! The exposition is prometheus-client's Prometheus text format (version 0.0.4).

pub mod scrape;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// API keys counted (Kafka 4.4's highest key is below this).
const MAX_KEYS: usize = 128;
/// Versions counted per key (higher ones are counted as this minus one).
const MAX_VERSIONS: usize = 24;
/// Error codes counted: -1 (UNKNOWN_SERVER_ERROR) up to `MAX_CODES - 2`.
const MAX_CODES: usize = 160;

/// Upper bounds (ms) of the request latency histogram's buckets (+Inf implied).
pub const LATENCY_BUCKETS_MS: [f64; 14] = [
    0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0,
];

/// ISR changes committed by partitions this broker leads (Kafka's `IsrShrinksPerSec` and
/// `IsrExpandsPerSec` of `ReplicaManager`). Process-wide: a partition has no handle on the
/// broker, and a process runs one broker.
pub static ISR_SHRINKS: AtomicU64 = AtomicU64::new(0);
pub static ISR_EXPANDS: AtomicU64 = AtomicU64::new(0);

/// Records an ISR change of a led partition from `before` to `after` members.
pub fn isr_changed(before: usize, after: usize) {
    if after < before {
        ISR_SHRINKS.fetch_add(1, Ordering::Relaxed);
    } else if after > before {
        ISR_EXPANDS.fetch_add(1, Ordering::Relaxed);
    }
}

/// One partition's traffic from clients (Kafka's per-topic `BrokerTopicMetrics`).
#[derive(Debug, Default)]
pub struct PartitionStats {
    pub bytes_in: AtomicU64,
    pub messages_in: AtomicU64,
    pub bytes_out: AtomicU64,
}

/// A request latency histogram of atomics (non-cumulative bucket counts; the scrape
/// accumulates them).
#[derive(Debug, Default)]
struct Latency {
    buckets: [AtomicU64; LATENCY_BUCKETS_MS.len() + 1],
    sum_us: AtomicU64,
    count: AtomicU64,
}

/// Connections of one listener (Kafka's `socket-server-metrics` `connection-count` and
/// `connection-creation-total`).
#[derive(Debug)]
pub struct ListenerConnections {
    pub name: Arc<str>,
    pub open: AtomicI64,
    pub created: AtomicU64,
}

/// The broker-wide counters.
#[derive(Debug)]
pub struct Metrics {
    /// Requests by `key * MAX_VERSIONS + version`.
    requests: Box<[AtomicU64]>,
    latency: Box<[Latency]>,
    /// Error codes in responses by `key * MAX_CODES + code + 1`.
    errors: Box<[AtomicU64]>,
    /// All topics together (Kafka's BrokerTopicMetrics without a topic tag); kept apart from
    /// the partitions' counters so that deleting a topic does not make them go back.
    pub bytes_in: AtomicU64,
    pub messages_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub listeners: Vec<ListenerConnections>,
}

impl Metrics {
    pub fn new(listener_names: impl IntoIterator<Item = String>) -> Metrics {
        Metrics {
            requests: (0..MAX_KEYS * MAX_VERSIONS)
                .map(|_| AtomicU64::new(0))
                .collect(),
            latency: (0..MAX_KEYS).map(|_| Latency::default()).collect(),
            errors: (0..MAX_KEYS * MAX_CODES)
                .map(|_| AtomicU64::new(0))
                .collect(),
            bytes_in: AtomicU64::new(0),
            messages_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            listeners: listener_names
                .into_iter()
                .map(|n| ListenerConnections {
                    name: Arc::from(n.as_str()),
                    open: AtomicI64::new(0),
                    created: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    /// A request of `key` at `version` was answered (or dropped, acks=0) after `took`.
    /// Keys and versions outside the counted range are ignored.
    pub fn request(&self, key: i16, version: i16, took: Duration) {
        let (Ok(k), Ok(v)) = (usize::try_from(key), usize::try_from(version)) else {
            return;
        };
        if k >= MAX_KEYS {
            return;
        }
        let v = v.min(MAX_VERSIONS - 1);
        self.requests[k * MAX_VERSIONS + v].fetch_add(1, Ordering::Relaxed);
        let l = &self.latency[k];
        let ms = took.as_secs_f64() * 1000.0;
        let b = LATENCY_BUCKETS_MS
            .iter()
            .position(|&le| ms <= le)
            .unwrap_or(LATENCY_BUCKETS_MS.len());
        l.buckets[b].fetch_add(1, Ordering::Relaxed);
        l.sum_us
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
        l.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Error codes of one response of `key` (one per partition where the API has them),
    /// NONE included, as Kafka's `ErrorsPerSec` counts a response's `errorCounts`.
    pub fn errors(&self, key: i16, codes: impl IntoIterator<Item = i16>) {
        let Ok(k) = usize::try_from(key) else { return };
        if k >= MAX_KEYS {
            return;
        }
        for code in codes {
            if let Ok(c) = usize::try_from(i32::from(code) + 1)
                && c < MAX_CODES
            {
                self.errors[k * MAX_CODES + c].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Records appended for a client: `bytes` of batches holding `messages` records.
    pub fn produced(&self, stats: &PartitionStats, bytes: u64, messages: u64) {
        stats.bytes_in.fetch_add(bytes, Ordering::Relaxed);
        stats.messages_in.fetch_add(messages, Ordering::Relaxed);
        self.bytes_in.fetch_add(bytes, Ordering::Relaxed);
        self.messages_in.fetch_add(messages, Ordering::Relaxed);
    }

    /// Record bytes sent to a consumer (follower fetches are replication, not counted).
    pub fn fetched(&self, stats: &PartitionStats, bytes: u64) {
        stats.bytes_out.fetch_add(bytes, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
    }

    /// A connection on listener `name` opened; it counts until the guard is dropped.
    pub fn connection_opened(self: &Arc<Self>, name: &str) -> ConnectionGuard {
        let at = self.listeners.iter().position(|l| &*l.name == name);
        if let Some(i) = at {
            self.listeners[i].open.fetch_add(1, Ordering::Relaxed);
            self.listeners[i].created.fetch_add(1, Ordering::Relaxed);
        }
        ConnectionGuard {
            metrics: self.clone(),
            at,
        }
    }
}

/// Keeps a connection counted as open.
pub struct ConnectionGuard {
    metrics: Arc<Metrics>,
    at: Option<usize>,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        if let Some(i) = self.at {
            self.metrics.listeners[i]
                .open
                .fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Kafka's name of an error code (`Errors.name()`: "NONE", "UNKNOWN_TOPIC_OR_PARTITION").
pub fn error_name(code: i16) -> String {
    if code == 0 {
        return "NONE".to_string();
    }
    let camel = match kafka_protocol::ResponseError::try_from_code(code) {
        Some(e) => format!("{e:?}"),
        None => String::new(),
    };
    // Codes the crate does not know come back as `Unknown(code)`.
    if camel.is_empty() || !camel.chars().all(|c| c.is_ascii_alphabetic()) {
        return format!("UNKNOWN_{code}");
    }
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, ch) in camel.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(9999), "UNKNOWN_9999");
    }

    #[test]
    fn counters_ignore_what_is_out_of_range() {
        let m = Metrics::new(["PLAINTEXT".to_string()]);
        m.request(0, 9, Duration::from_millis(3));
        m.request(-1, 0, Duration::ZERO);
        m.request(500, 0, Duration::ZERO);
        m.request(1, 99, Duration::from_secs(60));
        m.errors(0, [0, 3, -1, i16::MAX, i16::MIN]);
        let snap = m.snapshot();
        assert_eq!(snap.requests, vec![(0, 9, 1), (1, 23, 1)]);
        assert_eq!(snap.errors, vec![(0, -1, 1), (0, 0, 1), (0, 3, 1)]);
        let (key, hist) = &snap.latency[0];
        assert_eq!(*key, 0);
        assert_eq!(hist.count, 1);
        // 3 ms lands in the 5 ms bucket.
        assert_eq!(hist.buckets[2], (2.5, 0));
        assert_eq!(hist.buckets[3], (5.0, 1));
        let (_, slow) = &snap.latency[1];
        assert_eq!(slow.buckets.len(), LATENCY_BUCKETS_MS.len() + 1);
        assert_eq!(slow.buckets[13], (10000.0, 0));
        assert_eq!(
            slow.buckets[14],
            (f64::INFINITY, 1),
            "60 s is above every bound"
        );
    }
}
