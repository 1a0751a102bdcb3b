//! Sparse time index (`.timeindex`): 12-byte entries of
//! `[timestamp i64 BE][relative offset u32 BE]`.
//!
//! An entry `(t, o)` means: the largest timestamp among batches up to and
//! including the batch holding offset `o` is `t`, and it first appeared at `o`.
//! Timestamps are strictly increasing, offsets non-decreasing.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub const TIME_ENTRY_SIZE: usize = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeEntry {
    pub timestamp: i64,
    pub offset: i64,
}

pub struct TimeIndex {
    path: PathBuf,
    /// Opened on the first write: an index that is only read holds no file descriptor
    /// (a broker with 10,000 idle partitions would otherwise need 30,000).
    file: Option<File>,
    base_offset: i64,
    /// (timestamp, relative offset)
    entries: Vec<(i64, u32)>,
    max_entries: usize,
}

impl TimeIndex {
    /// Opens (creating if missing) and loads a time index; a partial trailing
    /// entry is ignored and cut off the file.
    pub fn open(path: &Path, base_offset: i64, max_index_bytes: usize) -> io::Result<TimeIndex> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let data = std::fs::read(path)?;
        let whole = data.len() / TIME_ENTRY_SIZE * TIME_ENTRY_SIZE;
        if whole != data.len() {
            file.set_len(whole as u64)?;
        }
        drop(file);
        let entries = data[..whole]
            .chunks_exact(TIME_ENTRY_SIZE)
            .map(|c| {
                (
                    i64::from_be_bytes(c[0..8].try_into().unwrap()),
                    u32::from_be_bytes(c[8..12].try_into().unwrap()),
                )
            })
            .collect();
        Ok(TimeIndex {
            path: path.to_path_buf(),
            file: None,
            base_offset,
            entries,
            max_entries: (max_index_bytes / TIME_ENTRY_SIZE).max(1),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    fn to_entry(&self, e: (i64, u32)) -> TimeEntry {
        TimeEntry {
            timestamp: e.0,
            offset: self.base_offset + e.1 as i64,
        }
    }

    pub fn entry(&self, i: usize) -> TimeEntry {
        self.to_entry(self.entries[i])
    }

    pub fn last_entry(&self) -> Option<TimeEntry> {
        self.entries.last().map(|&e| self.to_entry(e))
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
        if let Some(&(last_ts, last_rel)) = self.entries.last() {
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
                self.path.display()
            )));
        }
        let mut buf = [0u8; TIME_ENTRY_SIZE];
        buf[0..8].copy_from_slice(&timestamp.to_be_bytes());
        buf[8..12].copy_from_slice(&(rel as u32).to_be_bytes());
        let at = (self.entries.len() * TIME_ENTRY_SIZE) as u64;
        self.file()?.write_all_at(&buf, at)?;
        self.entries.push((timestamp, rel as u32));
        Ok(true)
    }

    /// Largest entry with timestamp <= `target`, or `(-1, base_offset)`.
    pub fn lookup(&self, target: i64) -> TimeEntry {
        let n = self.entries.partition_point(|e| e.0 <= target);
        if n == 0 {
            TimeEntry {
                timestamp: -1,
                offset: self.base_offset,
            }
        } else {
            self.to_entry(self.entries[n - 1])
        }
    }

    /// Removes entries with offset >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let base = self.base_offset;
        let keep = self
            .entries
            .partition_point(|e| base + (e.1 as i64) < offset);
        if keep < self.entries.len() {
            self.file()?.set_len((keep * TIME_ENTRY_SIZE) as u64)?;
            self.entries.truncate(keep);
        }
        Ok(())
    }

    pub fn reset(&mut self) -> io::Result<()> {
        self.entries.clear();
        self.file()?.set_len(0)
    }

    /// Timestamps strictly increasing, offsets non-decreasing and below
    /// `next_offset` (the segment's next offset).
    pub fn sanity_check(&self, next_offset: i64) -> Result<(), String> {
        for w in self.entries.windows(2) {
            if w[1].0 <= w[0].0 || w[1].1 < w[0].1 {
                return Err(format!(
                    "{}: entries not increasing: {:?} then {:?}",
                    self.path.display(),
                    w[0],
                    w[1]
                ));
            }
        }
        if let Some(e) = self.last_entry()
            && e.offset >= next_offset
        {
            return Err(format!(
                "{}: entry offset {} not below the segment's next offset {next_offset}",
                self.path.display(),
                e.offset
            ));
        }
        Ok(())
    }

    /// fdatasync of what this process wrote (an index never written since it was opened has
    /// nothing of ours to sync).
    pub fn flush(&self) -> io::Result<()> {
        match &self.file {
            Some(f) => f.sync_data(),
            None => Ok(()),
        }
    }

    fn file(&mut self) -> io::Result<&File> {
        if self.file.is_none() {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&self.path)?;
            self.file = Some(f);
        }
        Ok(self.file.as_ref().expect("just opened"))
    }

    pub fn delete(self) -> io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            r => r,
        }
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
