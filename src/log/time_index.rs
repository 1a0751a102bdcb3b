//! Sparse time index (`.timeindex`): 12-byte entries of
//! `[timestamp i64 BE][relative offset u32 BE]`.
//!
//! An entry `(t, o)` means: the largest timestamp among batches up to and
//! including the batch holding offset `o` is `t`, and it first appeared at `o`.
//! Timestamps are strictly increasing, offsets non-decreasing.

use std::io;
use std::path::Path;

use super::index_file::{IndexEntry, IndexFile};

pub const TIME_ENTRY_SIZE: usize = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeEntry {
    pub timestamp: i64,
    pub offset: i64,
}

/// (timestamp, relative offset) as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Raw(i64, u32);

impl IndexEntry for Raw {
    const SIZE: usize = TIME_ENTRY_SIZE;
    fn decode(c: &[u8]) -> Raw {
        Raw(
            i64::from_be_bytes(c[0..8].try_into().unwrap()),
            u32::from_be_bytes(c[8..12].try_into().unwrap()),
        )
    }
    fn encode(&self, out: &mut [u8]) {
        out[0..8].copy_from_slice(&self.0.to_be_bytes());
        out[8..12].copy_from_slice(&self.1.to_be_bytes());
    }
}

pub struct TimeIndex {
    file: IndexFile<Raw>,
    base_offset: i64,
}

impl TimeIndex {
    /// Opens (creating if missing) and loads a time index; a partial trailing
    /// entry is ignored and cut off the file.
    pub fn open(path: &Path, base_offset: i64, max_index_bytes: usize) -> io::Result<TimeIndex> {
        Ok(TimeIndex {
            file: IndexFile::open(path, max_index_bytes)?,
            base_offset,
        })
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    pub fn len(&self) -> usize {
        self.file.entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.file.entries().is_empty()
    }

    pub fn is_full(&self) -> bool {
        self.file.is_full()
    }

    fn to_entry(&self, e: Raw) -> TimeEntry {
        TimeEntry {
            timestamp: e.0,
            offset: self.base_offset + e.1 as i64,
        }
    }

    pub fn entry(&self, i: usize) -> TimeEntry {
        self.to_entry(self.file.entries()[i])
    }

    pub fn last_entry(&self) -> Option<TimeEntry> {
        self.file.entries().last().map(|&e| self.to_entry(e))
    }

    /// Appends `(timestamp, offset)` if `timestamp` is above the last entry's.
    /// Returns whether an entry was written. `skip_full_check` allows one entry
    /// past the size limit (used for the final entry when a segment is closed).
    pub fn maybe_append(
        &mut self,
        timestamp: i64,
        offset: i64,
        skip_full_check: bool,
    ) -> io::Result<bool> {
        let rel = offset - self.base_offset;
        if !(0..=u32::MAX as i64).contains(&rel) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "offset {offset} out of range for time index based at {}",
                    self.base_offset
                ),
            ));
        }
        if let Some(&Raw(last_ts, last_rel)) = self.file.entries().last() {
            if (rel as u32) < last_rel {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("time index offset {offset} below the last entry's"),
                ));
            }
            if timestamp <= last_ts {
                return Ok(false);
            }
        }
        if !skip_full_check && self.is_full() {
            return Err(io::Error::other(format!(
                "time index {} is full",
                self.path().display()
            )));
        }
        self.file.push(Raw(timestamp, rel as u32))?;
        Ok(true)
    }

    /// Largest entry with timestamp <= `target`, or `(-1, base_offset)`.
    pub fn lookup(&self, target: i64) -> TimeEntry {
        let entries = self.file.entries();
        let n = entries.partition_point(|e| e.0 <= target);
        if n == 0 {
            TimeEntry {
                timestamp: -1,
                offset: self.base_offset,
            }
        } else {
            self.to_entry(entries[n - 1])
        }
    }

    /// Removes entries with offset >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let base = self.base_offset;
        let keep = self
            .file
            .entries()
            .partition_point(|e| base + (e.1 as i64) < offset);
        self.file.truncate(keep)
    }

    pub fn reset(&mut self) -> io::Result<()> {
        self.file.reset()
    }

    /// Timestamps strictly increasing, offsets non-decreasing and below
    /// `next_offset` (the segment's next offset).
    pub fn sanity_check(&self, next_offset: i64) -> Result<(), String> {
        self.file.check_order(|a, b| b.0 > a.0 && b.1 >= a.1)?;
        if let Some(e) = self.last_entry()
            && e.offset >= next_offset
        {
            return Err(format!(
                "{}: entry offset {} not below the segment's next offset {next_offset}",
                self.path().display(),
                e.offset
            ));
        }
        Ok(())
    }

    pub fn flush(&self) -> io::Result<()> {
        self.file.flush()
    }

    /// Whether the file exists (it is made on the first entry written or on request).
    pub fn on_disk(&self) -> bool {
        self.file.on_disk()
    }

    /// Creates the file if it does not exist yet.
    pub fn ensure_on_disk(&self) -> io::Result<()> {
        self.file.ensure_on_disk()
    }

    pub fn delete(self) -> io::Result<()> {
        self.file.delete()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_lookup_truncate_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000050.timeindex");
        let mut idx = TimeIndex::open(&path, 50, 1200).unwrap();
        assert_eq!(
            idx.lookup(5),
            TimeEntry {
                timestamp: -1,
                offset: 50
            }
        );
        assert!(idx.maybe_append(100, 55, false).unwrap());
        assert!(
            !idx.maybe_append(100, 56, false).unwrap(),
            "equal timestamp not added"
        );
        assert!(!idx.maybe_append(90, 57, false).unwrap());
        assert!(idx.maybe_append(200, 60, false).unwrap());
        assert!(idx.maybe_append(300, 60, false).unwrap());
        assert!(
            idx.maybe_append(400, 59, false).is_err(),
            "offset going back"
        );
        assert_eq!(
            idx.lookup(99),
            TimeEntry {
                timestamp: -1,
                offset: 50
            }
        );
        assert_eq!(
            idx.lookup(100),
            TimeEntry {
                timestamp: 100,
                offset: 55
            }
        );
        assert_eq!(
            idx.lookup(250),
            TimeEntry {
                timestamp: 200,
                offset: 60
            }
        );
        assert_eq!(
            idx.lookup(i64::MAX),
            TimeEntry {
                timestamp: 300,
                offset: 60
            }
        );
        assert!(idx.sanity_check(61).is_ok());
        assert!(idx.sanity_check(60).is_err());
        idx.flush().unwrap();

        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &[9; 5]))
            .unwrap();
        let mut idx = TimeIndex::open(&path, 50, 1200).unwrap();
        assert_eq!(idx.len(), 3);
        idx.truncate_to(60).unwrap();
        assert_eq!(
            idx.last_entry(),
            Some(TimeEntry {
                timestamp: 100,
                offset: 55
            })
        );
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 12);
    }

    #[test]
    fn full() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = TimeIndex::open(&dir.path().join("t"), 0, 24).unwrap();
        idx.maybe_append(1, 1, false).unwrap();
        idx.maybe_append(2, 2, false).unwrap();
        assert!(idx.is_full());
        assert!(idx.maybe_append(3, 3, false).is_err());
        assert!(idx.maybe_append(3, 3, true).unwrap());
    }
}
