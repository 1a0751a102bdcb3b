//! Kafka's quota rate (a `Rate` over a `SampledStat` of `quota.window.num` windows of
//! `quota.window.size.seconds`): the sum of the values in the live windows divided by the
//! elapsed time, which counts at least `samples - 1` full windows so that a first burst is
//! not measured over a few milliseconds. A value that takes the rate over the bound earns
//! the delay that brings it back: X = (O - T) / T * W for observed rate O, bound T and
//! window W (Kafka's ClientQuotaManager.throttleTime).

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateConfig {
    pub samples: usize,
    pub window_ms: u64,
}

impl Default for RateConfig {
    fn default() -> Self {
        RateConfig {
            samples: 11,
            window_ms: 1000,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    start_ms: u64,
    total: f64,
}

#[derive(Debug, Clone)]
pub struct SampledRate {
    config: RateConfig,
    samples: Vec<Sample>,
    current: usize,
}

impl SampledRate {
    pub fn new(config: RateConfig, now_ms: u64) -> SampledRate {
        SampledRate {
            config,
            samples: vec![Sample {
                start_ms: now_ms,
                total: 0.0,
            }],
            current: 0,
        }
    }

    /// Adds `value` at `now_ms`, starting a new window when the current one is over.
    pub fn record(&mut self, value: f64, now_ms: u64) {
        let cur = self.samples[self.current];
        if now_ms.saturating_sub(cur.start_ms) >= self.config.window_ms {
            self.current = (self.current + 1) % self.config.samples.max(1);
            let fresh = Sample {
                start_ms: now_ms,
                total: 0.0,
            };
            if self.current == self.samples.len() {
                self.samples.push(fresh);
            } else {
                self.samples[self.current] = fresh;
            }
        }
        self.samples[self.current].total += value;
    }

    /// Forgets the windows that ended more than `samples` windows ago.
    fn purge(&mut self, now_ms: u64) {
        let horizon = self.config.samples as u64 * self.config.window_ms;
        for s in &mut self.samples {
            if now_ms.saturating_sub(s.start_ms) >= horizon {
                *s = Sample {
                    start_ms: now_ms,
                    total: 0.0,
                };
            }
        }
    }

    /// The time the rate is measured over, in ms.
    pub fn window_size_ms(&mut self, now_ms: u64) -> u64 {
        self.purge(now_ms);
        let oldest = self
            .samples
            .iter()
            .map(|s| s.start_ms)
            .min()
            .unwrap_or(now_ms);
        let mut elapsed = now_ms.saturating_sub(oldest);
        let full = elapsed / self.config.window_ms;
        let min_full = self.config.samples.saturating_sub(1) as u64;
        if full < min_full {
            elapsed += (min_full - full) * self.config.window_ms;
        }
        elapsed.max(1)
    }

    /// Units per second.
    pub fn measure(&mut self, now_ms: u64) -> f64 {
        let window = self.window_size_ms(now_ms);
        let total: f64 = self.samples.iter().map(|s| s.total).sum();
        total * 1000.0 / window as f64
    }

    /// Records `value` and returns the throttle time in ms (0 if the rate stays within
    /// `bound` per second).
    pub fn record_and_throttle(&mut self, value: f64, bound: f64, now_ms: u64) -> u64 {
        self.record(value, now_ms);
        let observed = self.measure(now_ms);
        if observed <= bound {
            return 0;
        }
        let window = self.window_size_ms(now_ms) as f64;
        let bound = bound.max(f64::MIN_POSITIVE);
        ((observed - bound) / bound * window)
            .round()
            .min(i32::MAX as f64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_burst_is_measured_over_ten_windows() {
        let mut r = SampledRate::new(RateConfig::default(), 0);
        r.record(10_000.0, 0);
        assert_eq!(r.window_size_ms(500), 10_500);
        assert!((r.measure(500) - 10_000.0 / 10.5).abs() < 1e-9);
    }

    #[test]
    fn the_throttle_time_brings_the_rate_back_to_the_bound() {
        let mut r = SampledRate::new(RateConfig::default(), 0);
        // 2 MB in the first window against 100 kB/s measured over 10 s: 200 kB/s, so
        // throttled for (200 - 100) / 100 * 10 s = 10 s.
        let t = r.record_and_throttle(2_000_000.0, 100_000.0, 0);
        assert_eq!(t, 10_000);
        // Half the burst's worth: (150 - 100) / 100 * 10 s.
        let mut r = SampledRate::new(RateConfig::default(), 0);
        assert_eq!(r.record_and_throttle(1_500_000.0, 100_000.0, 0), 5_000);
        // Once the burst's window is older than the 11 windows, it no longer counts.
        assert_eq!(r.record_and_throttle(1.0, 100_000.0, 11_000), 0);
    }

    #[test]
    fn old_windows_are_forgotten() {
        let mut r = SampledRate::new(RateConfig::default(), 0);
        r.record(5_000.0, 0);
        for s in 1..=11u64 {
            r.record(0.0, s * 1000);
        }
        assert_eq!(r.measure(12_000), 0.0);
        assert_eq!(r.record_and_throttle(10.0, 100.0, 12_000), 0);
    }

    #[test]
    fn a_steady_rate_at_the_bound_is_not_throttled() {
        let mut r = SampledRate::new(RateConfig::default(), 0);
        let mut throttled = 0;
        for i in 0..100u64 {
            throttled += r.record_and_throttle(100.0, 1000.0, i * 100);
        }
        assert_eq!(throttled, 0);
    }
}
