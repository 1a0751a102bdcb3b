//! The leader epoch cache of a partition: for each leader epoch, the first offset written in it
//! (Kafka's `LeaderEpochFileCache`), kept in `<partition dir>/leader-epoch-checkpoint` in
//! Kafka's format:
//!
//! ```text
//! 0          version
//! 2          number of entries
//! 0 0        epoch start-offset
//! 3 1500
//! ```
//!
//! Invariants: epochs and start offsets both strictly increase down the list. A follower
//! uses it to find where its log diverged from a new leader's (KIP-101/279), and the leader to
//! answer OffsetForLeaderEpoch.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

pub const CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// Epochs and offsets Kafka calls UNDEFINED.
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_OFFSET: i64 = -1;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    pub fn from_entries(entries: Vec<EpochEntry>) -> LeaderEpochCache {
        let mut c = LeaderEpochCache::default();
        for e in entries {
            c.assign(e.epoch, e.start_offset);
        }
        c
    }

    /// A cache of (epoch, start offset) pairs.
    pub fn from_pairs(pairs: &[(i32, i64)]) -> LeaderEpochCache {
        Self::from_entries(
            pairs
                .iter()
                .map(|&(epoch, start_offset)| EpochEntry {
                    epoch,
                    start_offset,
                })
                .collect(),
        )
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset`. An epoch at or below the latest is
    /// ignored; entries at or past `start_offset` with lower epochs are dropped (their
    /// batches were truncated away).
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || self.latest_epoch().is_some_and(|l| epoch <= l) {
            return false;
        }
        while self
            .entries
            .last()
            .is_some_and(|e| e.start_offset >= start_offset)
        {
            self.entries.pop();
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        true
    }

    /// (epoch, end offset) as OffsetForLeaderEpoch answers for `requested`: the largest epoch
    /// at or below it and the offset where the next epoch starts (the log end offset for the
    /// latest epoch); UNDEFINED for both when `requested` is above every epoch or undefined.
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_OFFSET);
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end_offset);
        }
        let Some(higher) = self.entries.iter().find(|e| e.epoch > requested) else {
            return (UNDEFINED_EPOCH, UNDEFINED_OFFSET);
        };
        match self.entries.iter().rev().find(|e| e.epoch <= requested) {
            Some(floor) => (floor.epoch, higher.start_offset),
            None => (requested, higher.start_offset),
        }
    }

    /// After the log was emptied: no epoch is known any more.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// After the log is truncated to end at `end_offset`: entries starting at or past it go.
    pub fn truncate_from_end(&mut self, end_offset: i64) {
        self.entries.retain(|e| e.start_offset < end_offset);
    }

    /// After the log start moved to `start_offset`: entries wholly below it go, and the one
    /// covering it starts there.
    pub fn truncate_from_start(&mut self, start_offset: i64) {
        let keep_from = self
            .entries
            .iter()
            .rposition(|e| e.start_offset <= start_offset);
        if let Some(i) = keep_from {
            self.entries.drain(..i);
            self.entries[0].start_offset = start_offset;
        }
    }

    pub fn to_text(&self) -> String {
        let mut s = format!("0\n{}\n", self.entries.len());
        for e in &self.entries {
            s.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
        }
        s
    }

    pub fn parse(text: &str) -> Result<LeaderEpochCache> {
        let mut lines = text.lines();
        let count = super::checkpoint::parse_header(&mut lines)?;
        let mut entries = Vec::with_capacity(count.min(1 << 16));
        for (i, line) in lines.by_ref().take(count).enumerate() {
            let mut f = line.split_whitespace();
            let (Some(e), Some(o), None) = (f.next(), f.next(), f.next()) else {
                bail!("entry {}: expected \"epoch offset\", got {line:?}", i + 1);
            };
            entries.push(EpochEntry {
                epoch: e
                    .parse()
                    .with_context(|| format!("entry {}: bad epoch", i + 1))?,
                start_offset: o
                    .parse()
                    .with_context(|| format!("entry {}: bad offset", i + 1))?,
            });
        }
        if entries.len() != count {
            bail!("{} entries announced, {} present", count, entries.len());
        }
        Ok(LeaderEpochCache::from_entries(entries))
    }
}

/// The cache with its checkpoint file.
#[derive(Debug)]
pub struct LeaderEpochFile {
    path: PathBuf,
    pub cache: LeaderEpochCache,
}

impl LeaderEpochFile {
    /// Reads `<dir>/leader-epoch-checkpoint` (empty cache if absent). An unreadable file is an
    /// error naming it: the cache can be rebuilt from the batches' leader epochs, which the
    /// caller does.
    pub fn open(dir: &Path) -> Result<LeaderEpochFile> {
        let path = dir.join(CHECKPOINT_FILE);
        let cache = match fs::read_to_string(&path) {
            Ok(t) => LeaderEpochCache::parse(&t).with_context(|| format!("{}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => LeaderEpochCache::default(),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        Ok(LeaderEpochFile { path, cache })
    }

    /// An empty cache for `dir` (its file, if any, is overwritten at the next write).
    pub fn empty(dir: &Path) -> LeaderEpochFile {
        LeaderEpochFile {
            path: dir.join(CHECKPOINT_FILE),
            cache: LeaderEpochCache::default(),
        }
    }

    /// Writes the checkpoint beside and renames it into place (fsynced).
    pub fn write(&self) -> Result<()> {
        super::checkpoint::write_atomically(&self.path, self.cache.to_text().as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(e: &[(i32, i64)]) -> LeaderEpochCache {
        LeaderEpochCache::from_pairs(e)
    }

    #[test]
    fn end_offsets_as_kafka() {
        let c = cache(&[(0, 0), (2, 100), (5, 250)]);
        assert_eq!(c.end_offset_for(5, 300), (5, 300));
        assert_eq!(c.end_offset_for(2, 300), (2, 250));
        // Epoch 3 was never seen here: the floor (2) and where the next (5) starts.
        assert_eq!(c.end_offset_for(3, 300), (2, 250));
        assert_eq!(c.end_offset_for(0, 300), (0, 100));
        assert_eq!(c.end_offset_for(9, 300), (-1, -1));
        assert_eq!(c.end_offset_for(-1, 300), (-1, -1));
        let c = cache(&[(4, 10)]);
        assert_eq!(c.end_offset_for(1, 30), (1, 10));
    }

    #[test]
    fn assign_and_truncate() {
        let mut c = cache(&[(0, 0), (2, 100)]);
        assert!(!c.assign(1, 150), "older epoch ignored");
        assert!(c.assign(3, 100), "same start offset replaces");
        assert_eq!(c.entries().len(), 2);
        assert_eq!(
            c.entries()[1],
            EpochEntry {
                epoch: 3,
                start_offset: 100
            }
        );
        c.assign(4, 200);
        c.truncate_from_end(150);
        assert_eq!(c.latest_epoch(), Some(3));
        c.truncate_from_start(120);
        assert_eq!(
            c.entries(),
            &[EpochEntry {
                epoch: 3,
                start_offset: 120
            }]
        );
    }

    #[test]
    fn checkpoint_file_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = LeaderEpochFile::open(dir.path()).unwrap();
        assert!(f.cache.entries().is_empty());
        f.cache.assign(0, 0);
        f.cache.assign(7, 42);
        f.write().unwrap();
        let text = std::fs::read_to_string(dir.path().join(CHECKPOINT_FILE)).unwrap();
        assert_eq!(text, "0\n2\n0 0\n7 42\n");
        assert_eq!(LeaderEpochFile::open(dir.path()).unwrap().cache, f.cache);
        std::fs::write(dir.path().join(CHECKPOINT_FILE), "0\n3\n0 0\n").unwrap();
        let e = LeaderEpochFile::open(dir.path()).unwrap_err();
        assert!(format!("{e:#}").contains(CHECKPOINT_FILE), "{e:#}");
    }
}
