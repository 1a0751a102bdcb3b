//! Wall-clock time as Kafka's records and timers use it: milliseconds since the Unix epoch.
//! The decision logic takes `now` as an argument; only the shells that carry it out read the
//! clock, through this one function.

/// Milliseconds since the Unix epoch (0 if the system clock is before it).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
