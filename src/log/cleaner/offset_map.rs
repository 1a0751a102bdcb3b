//! The cleaner's offset map: key → the latest offset it was written at, bounded as Kafka's
//! `SkimpyOffsetMap` is. Kafka stores a 16-byte hash and an 8-byte offset per key in
//! `log.cleaner.dedupe.buffer.size / log.cleaner.threads` bytes, filled to
//! `log.cleaner.io.buffer.load.factor` (0.9 by default); this map holds as many keys, each as a 128-bit
//! hash (two independent SipHash values), so a collision is as unlikely as with MD5.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// Bytes Kafka's map uses per entry (MD5 hash + offset).
pub const BYTES_PER_ENTRY: u64 = 24;
/// Kafka's `log.cleaner.io.buffer.load.factor` default.
pub const DEFAULT_LOAD_FACTOR: f64 = 0.9;

pub struct OffsetMap {
    map: HashMap<u128, i64>,
    capacity: usize,
    latest_offset: i64,
}

fn hash_key(key: &[u8]) -> u128 {
    let half = |salt: u8| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        salt.hash(&mut h);
        key.hash(&mut h);
        h.finish() as u128
    };
    (half(0) << 64) | half(1)
}

impl OffsetMap {
    /// A map for `buffer_bytes` of Kafka's dedupe buffer filled to `load_factor` (at least
    /// one key).
    pub fn with_buffer(buffer_bytes: u64, load_factor: f64) -> OffsetMap {
        let slots = buffer_bytes / BYTES_PER_ENTRY;
        let capacity = ((slots as f64 * load_factor.clamp(0.0, 1.0)) as usize).max(1);
        OffsetMap {
            map: HashMap::new(),
            capacity,
            latest_offset: -1,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Whether a new key would not fit.
    pub fn is_full(&self) -> bool {
        self.map.len() >= self.capacity
    }

    /// Records `key` at `offset` (offsets come in increasing order). Returns false, changing
    /// nothing, if the key is new and the map is full.
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        let h = hash_key(key);
        if self.is_full() && !self.map.contains_key(&h) {
            return false;
        }
        self.map.insert(h, offset);
        self.latest_offset = offset;
        true
    }

    pub fn get(&self, key: &[u8]) -> Option<i64> {
        self.map.get(&hash_key(key)).copied()
    }

    /// The last offset put (-1 if none): records above it are past what the map knows.
    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }

    /// Lowers the latest offset to `offset` after a batch that was only partly mapped.
    pub fn set_latest_offset(&mut self, offset: i64) {
        self.latest_offset = offset;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_by_the_buffer_and_keeps_the_latest_offset() {
        let mut m = OffsetMap::with_buffer(24 * 10, DEFAULT_LOAD_FACTOR);
        assert_eq!(m.capacity(), 9);
        for i in 0..9 {
            assert!(m.put(format!("k{i}").as_bytes(), i));
        }
        assert!(m.is_full());
        assert!(!m.put(b"new", 100));
        assert_eq!(m.latest_offset(), 8);
        // A known key still updates when full.
        assert!(m.put(b"k3", 101));
        assert_eq!(m.get(b"k3"), Some(101));
        assert_eq!(m.get(b"absent"), None);
        assert_eq!(m.latest_offset(), 101);
        assert_eq!(OffsetMap::with_buffer(0, DEFAULT_LOAD_FACTOR).capacity(), 1);
    }
}
