//! The cleaner's I/O limit (`log.cleaner.io.max.bytes.per.second`), shared by every cleaner
//! thread as Kafka's `Throttler` is: the bytes read and written are counted over periods of
//! at least [`CHECK_INTERVAL_MS`]; when a period's rate is above the limit, the thread that
//! closes it sleeps until the period's bytes fit the limit.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The shortest period over which the rate is measured.
pub const CHECK_INTERVAL_MS: u64 = 300;

/// The decision, pure: how long to sleep once `bytes` more have been read or written.
#[derive(Debug, Clone, PartialEq)]
pub struct Rate {
    /// Bytes per second; `None`: unlimited (Kafka's default, `Double.MAX_VALUE`).
    pub limit: Option<f64>,
    period_start_ms: u64,
    observed: f64,
}

impl Rate {
    pub fn new(limit: Option<f64>, now_ms: u64) -> Rate {
        Rate {
            limit,
            period_start_ms: now_ms,
            observed: 0.0,
        }
    }

    /// Counts `bytes` at `now_ms`; returns the sleep (ms) that brings the period's rate down
    /// to the limit. A period ends when it is long enough to be measured; the next one starts
    /// after the sleep.
    pub fn record(&mut self, bytes: u64, now_ms: u64) -> u64 {
        let Some(limit) = self.limit.filter(|l| *l > 0.0 && l.is_finite()) else {
            return 0;
        };
        self.observed += bytes as f64;
        let elapsed = now_ms.saturating_sub(self.period_start_ms);
        if elapsed < CHECK_INTERVAL_MS {
            return 0;
        }
        let needed_ms = (self.observed * 1000.0 / limit) as u64;
        let sleep = needed_ms.saturating_sub(elapsed);
        self.period_start_ms = now_ms + sleep;
        self.observed = 0.0;
        sleep
    }
}

/// [`Rate`] on the wall clock, shared by the cleaner threads.
#[derive(Debug)]
pub struct Throttle {
    origin: Instant,
    rate: Mutex<Rate>,
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle {
            origin: Instant::now(),
            rate: Mutex::new(Rate::new(None, 0)),
        }
    }
}

impl Throttle {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// Follows a changed limit (the setting is dynamic); the current period starts over.
    pub fn set_limit(&self, limit: Option<f64>) {
        let mut r = self.rate.lock().unwrap();
        if r.limit != limit {
            *r = Rate::new(limit, self.now_ms());
        }
    }

    /// Counts `bytes` read or written, sleeping the calling (cleaner) thread if they go over
    /// the limit.
    pub fn charge(&self, bytes: u64) {
        let sleep = self.rate.lock().unwrap().record(bytes, self.now_ms());
        if sleep > 0 {
            std::thread::sleep(Duration::from_millis(sleep));
        }
    }
}

/// The limit `log.cleaner.io.max.bytes.per.second` sets: Kafka's default (the largest double)
/// and anything not positive or not a number mean unlimited.
pub fn limit_of(value: Option<&str>) -> Option<f64> {
    value
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|l| *l > 0.0 && *l < f64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_the_limit_sleeps_until_the_period_fits() {
        // 1 MB/s: 600 kB in the first 300 ms need 600 ms, so 300 ms more.
        let mut r = Rate::new(Some(1_000_000.0), 1_000);
        assert_eq!(r.record(400_000, 1_100), 0, "period too short to measure");
        assert_eq!(r.record(200_000, 1_300), 300);
        // The next period starts after the sleep: 100 kB in 400 ms is under the limit.
        assert_eq!(r.record(100_000, 2_000), 0);
        assert_eq!(r.record(1, 2_350), 0);
    }

    #[test]
    fn unlimited_never_sleeps() {
        let mut r = Rate::new(None, 0);
        assert_eq!(r.record(u64::MAX / 2, 10_000), 0);
        assert_eq!(limit_of(Some("1.7976931348623157E308")), None);
        assert_eq!(limit_of(None), None);
        assert_eq!(limit_of(Some("0")), None);
        assert_eq!(limit_of(Some("x")), None);
        assert_eq!(limit_of(Some("5242880")), Some(5_242_880.0));
    }
}
