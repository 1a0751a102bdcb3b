//! The broker's per-client quota rates: one [`SampledRate`] per quota kind and (user,
//! client-id) pair the applying quota level names, created at a client's first request
//! after a quota applies to it and forgotten after an hour without traffic (Kafka's
//! inactive sensor expiry). Recording is a no-op while no quota is configured at all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::entity::{self, ClientQuotas};
use super::rate::{RateConfig, SampledRate};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QuotaKind {
    /// `producer_byte_rate`: Produce request bytes.
    Produce,
    /// `consumer_byte_rate`: Fetch response bytes.
    Fetch,
    /// `request_percentage`: time spent handling requests, in percent of one thread.
    Request,
}

impl QuotaKind {
    pub fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => entity::PRODUCER_BYTE_RATE,
            QuotaKind::Fetch => entity::CONSUMER_BYTE_RATE,
            QuotaKind::Request => entity::REQUEST_PERCENTAGE,
        }
    }

    /// The `type` of Kafka's per-client quota metrics (`kafka.server:type=Produce,...`).
    pub fn metric_type(self) -> &'static str {
        match self {
            QuotaKind::Produce => "Produce",
            QuotaKind::Fetch => "Fetch",
            QuotaKind::Request => "Request",
        }
    }
}

const EXPIRE_MS: u64 = 3_600_000;
/// How many rates are kept before the idle ones are looked for.
const PRUNE_AT: usize = 4096;

#[derive(Debug)]
struct Sensor {
    rate: SampledRate,
    /// The throttle times given (0 for a request within the quota) and their count, over the
    /// same windows: their ratio is Kafka's `throttle-time` average.
    throttle_sum: SampledRate,
    throttle_count: SampledRate,
    last_ms: u64,
}

/// A client's average throttle time, as Kafka's per-client `throttle-time` metric of
/// `type=Produce|Fetch|Request` (the user and client id of the quota that applies).
#[derive(Debug, Clone, PartialEq)]
pub struct ThrottleTime {
    pub kind: QuotaKind,
    pub user: String,
    pub client_id: String,
    pub avg_ms: f64,
}

#[derive(Debug)]
pub struct QuotaManager {
    quotas: Arc<ClientQuotas>,
    config: RateConfig,
    start: Instant,
    sensors: Mutex<HashMap<(QuotaKind, String, String), Sensor>>,
}

impl QuotaManager {
    pub fn new(quotas: Arc<ClientQuotas>, config: RateConfig) -> QuotaManager {
        QuotaManager {
            quotas,
            config,
            start: Instant::now(),
            sensors: Mutex::new(HashMap::new()),
        }
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// Whether any quota is configured (else nothing needs measuring).
    pub fn active(&self) -> bool {
        self.quotas.any()
    }

    /// Records `value` for the client (`user` is the principal's name) and returns how long it
    /// is throttled for, in ms (0: within its quota, or no quota applies).
    pub fn record(&self, kind: QuotaKind, user: &str, client_id: &str, value: f64) -> u64 {
        if !self.quotas.any() {
            return 0;
        }
        self.record_at(kind, user, client_id, value, self.now_ms())
    }

    /// Takes back a value [`record`](Self::record)ed for a response that was not sent (a
    /// throttled fetch is answered empty, as Kafka's).
    pub fn unrecord(&self, kind: QuotaKind, user: &str, client_id: &str, value: f64) {
        if self.quotas.any() {
            let now = self.now_ms();
            if let Some((_, u, c)) = self.quotas.resolve(kind.key(), user, client_id)
                && let Some(s) = self.sensors.lock().unwrap().get_mut(&(kind, u, c))
            {
                s.rate.record(-value, now);
            }
        }
    }

    fn record_at(
        &self,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
        value: f64,
        now_ms: u64,
    ) -> u64 {
        let Some((bound, u, c)) = self.quotas.resolve(kind.key(), user, client_id) else {
            return 0;
        };
        let mut sensors = self.sensors.lock().unwrap();
        if sensors.len() >= PRUNE_AT {
            sensors.retain(|_, s| now_ms.saturating_sub(s.last_ms) < EXPIRE_MS);
        }
        let config = self.config;
        let s = sensors.entry((kind, u, c)).or_insert_with(|| Sensor {
            rate: SampledRate::new(config, now_ms),
            throttle_sum: SampledRate::new(config, now_ms),
            throttle_count: SampledRate::new(config, now_ms),
            last_ms: now_ms,
        });
        s.last_ms = now_ms;
        let throttle = s.rate.record_and_throttle(value, bound, now_ms);
        s.throttle_sum.record(throttle as f64, now_ms);
        s.throttle_count.record(1.0, now_ms);
        throttle
    }

    /// Every client under a quota with its average throttle time over the rate's windows.
    pub fn throttle_times(&self) -> Vec<ThrottleTime> {
        let now = self.now_ms();
        let mut sensors = self.sensors.lock().unwrap();
        let mut out: Vec<ThrottleTime> = sensors
            .iter_mut()
            .map(|((kind, u, c), s)| {
                let n = s.throttle_count.measure(now);
                ThrottleTime {
                    kind: *kind,
                    user: u.clone(),
                    client_id: c.clone(),
                    avg_ms: if n > 0.0 {
                        s.throttle_sum.measure(now) / n
                    } else {
                        0.0
                    },
                }
            })
            .collect();
        out.sort_by(|a, b| (a.kind, &a.user, &a.client_id).cmp(&(b.kind, &b.user, &b.client_id)));
        out
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::quota::QuotaEntity;

    #[test]
    fn clients_under_a_user_quota_share_one_rate() {
        let q = Arc::new(ClientQuotas::default());
        let m = QuotaManager::new(q.clone(), RateConfig::default());
        assert_eq!(m.record_at(QuotaKind::Produce, "alice", "a", 1e9, 0), 0);
        q.apply(
            &QuotaEntity::of(&[(entity::USER, Some("alice"))]),
            &BTreeMap::from([(entity::PRODUCER_BYTE_RATE.to_string(), Some(1000.0))]),
        );
        // 10 kB measured over 10 s is exactly the bound; the second client's byte on top
        // of it goes over.
        assert_eq!(
            m.record_at(QuotaKind::Produce, "alice", "a", 10_000.0, 0),
            0
        );
        assert!(m.record_at(QuotaKind::Produce, "alice", "b", 100.0, 0) > 0);
        assert_eq!(m.record_at(QuotaKind::Produce, "bob", "b", 1e9, 0), 0);
        assert_eq!(m.record_at(QuotaKind::Fetch, "alice", "a", 1e9, 0), 0);
    }
}
