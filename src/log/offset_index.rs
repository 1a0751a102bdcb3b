//! Sparse offset index (`.index`): 8-byte entries of
//! `[relative offset u32 BE][file position u32 BE]`, strictly increasing in both.
//!
//! Each entry maps the *last offset* of a batch to the position where that
//! batch starts, so a lookup for any offset yields a position at or before
//! the batch holding it. Entries live in memory and every append is written
//! through to the file at once (no preallocation; the file is exactly sized).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub const OFFSET_ENTRY_SIZE: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetEntry {
    pub offset: i64,
    pub position: u32,
}

pub struct OffsetIndex {
    path: PathBuf,
    /// Opened on the first write: an index that is only read holds no file descriptor
    /// (a broker with 10,000 idle partitions would otherwise need 30,000).
    file: Option<File>,
    base_offset: i64,
    /// (relative offset, position)
    entries: Vec<(u32, u32)>,
    max_entries: usize,
}

impl OffsetIndex {
    /// Opens (creating if missing) and loads an index. A partial trailing entry
    /// is ignored and cut off the file. `max_index_bytes` bounds its size.
    pub fn open(path: &Path, base_offset: i64, max_index_bytes: usize) -> io::Result<OffsetIndex> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let data = std::fs::read(path)?;
        let whole = data.len() / OFFSET_ENTRY_SIZE * OFFSET_ENTRY_SIZE;
        if whole != data.len() {
            file.set_len(whole as u64)?;
        }
        drop(file);
        let entries = data[..whole]
            .chunks_exact(OFFSET_ENTRY_SIZE)
            .map(|c| {
                (
                    u32::from_be_bytes(c[0..4].try_into().unwrap()),
                    u32::from_be_bytes(c[4..8].try_into().unwrap()),
                )
            })
            .collect();
        Ok(OffsetIndex {
            path: path.to_path_buf(),
            file: None,
            base_offset,
            entries,
            max_entries: (max_index_bytes / OFFSET_ENTRY_SIZE).max(1),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
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

    fn to_entry(&self, e: (u32, u32)) -> OffsetEntry {
        OffsetEntry {
            offset: self.base_offset + e.0 as i64,
            position: e.1,
        }
    }

    pub fn entry(&self, i: usize) -> OffsetEntry {
        self.to_entry(self.entries[i])
    }

    pub fn last_entry(&self) -> Option<OffsetEntry> {
        self.entries.last().map(|&e| self.to_entry(e))
    }

    /// Appends an entry; `offset` must be above the last entry's, and both it
    /// and `position` above/at the previous values.
    pub fn append(&mut self, offset: i64, position: u32) -> io::Result<()> {
        let rel = offset - self.base_offset;
        if !(0..=u32::MAX as i64).contains(&rel) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "offset {offset} out of range for index based at {}",
                    self.base_offset
                ),
            ));
        }
        if let Some(&(last_rel, last_pos)) = self.entries.last()
            && (rel as u32 <= last_rel || position <= last_pos)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("index entry ({offset}, {position}) is not after the last entry"),
            ));
        }
        if self.is_full() {
            return Err(io::Error::other(format!(
                "index {} is full",
                self.path.display()
            )));
        }
        let mut buf = [0u8; OFFSET_ENTRY_SIZE];
        buf[0..4].copy_from_slice(&(rel as u32).to_be_bytes());
        buf[4..8].copy_from_slice(&position.to_be_bytes());
        let at = (self.entries.len() * OFFSET_ENTRY_SIZE) as u64;
        self.file()?.write_all_at(&buf, at)?;
        self.entries.push((rel as u32, position));
        Ok(())
    }

    /// Largest entry whose offset is <= `target`, or `(base_offset, 0)`.
    pub fn lookup(&self, target: i64) -> OffsetEntry {
        let rel = target - self.base_offset;
        if rel < 0 {
            return OffsetEntry {
                offset: self.base_offset,
                position: 0,
            };
        }
        let rel = rel.min(u32::MAX as i64) as u32;
        let n = self.entries.partition_point(|e| e.0 <= rel);
        if n == 0 {
            OffsetEntry {
                offset: self.base_offset,
                position: 0,
            }
        } else {
            self.to_entry(self.entries[n - 1])
        }
    }

    /// Last entry with `position <= max_position` and `offset < max_offset_exclusive`.
    /// Since each entry marks a batch start, everything before it is whole batches.
    pub fn last_entry_within(
        &self,
        max_position: u64,
        max_offset_exclusive: i64,
    ) -> Option<OffsetEntry> {
        let base = self.base_offset;
        let n = self.entries.partition_point(|&(rel, pos)| {
            (pos as u64) <= max_position && base + (rel as i64) < max_offset_exclusive
        });
        (n > 0).then(|| self.to_entry(self.entries[n - 1]))
    }

    fn truncate_entries(&mut self, keep: usize) -> io::Result<()> {
        if keep < self.entries.len() {
            self.file()?.set_len((keep * OFFSET_ENTRY_SIZE) as u64)?;
            self.entries.truncate(keep);
        }
        Ok(())
    }

    /// Removes entries with offset >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let base = self.base_offset;
        let keep = self
            .entries
            .partition_point(|e| base + (e.0 as i64) < offset);
        self.truncate_entries(keep)
    }

    /// Removes entries with position >= `position`.
    pub fn truncate_to_position(&mut self, position: u64) -> io::Result<()> {
        let keep = self.entries.partition_point(|e| (e.1 as u64) < position);
        self.truncate_entries(keep)
    }

    /// Removes every entry.
    pub fn reset(&mut self) -> io::Result<()> {
        self.entries.clear();
        self.file()?.set_len(0)
    }

    /// Checks the invariants: offsets and positions strictly increasing,
    /// offsets not below the base, positions inside a log of `log_size` bytes.
    pub fn sanity_check(&self, log_size: u64) -> Result<(), String> {
        for w in self.entries.windows(2) {
            if w[1].0 <= w[0].0 || w[1].1 <= w[0].1 {
                return Err(format!(
                    "{}: entries not increasing: {:?} then {:?}",
                    self.path.display(),
                    w[0],
                    w[1]
                ));
            }
        }
        if let Some(&(rel, pos)) = self.entries.last() {
            if rel > i32::MAX as u32 {
                return Err(format!(
                    "{}: relative offset {rel} overflows",
                    self.path.display()
                ));
            }
            if pos as u64 >= log_size {
                return Err(format!(
                    "{}: position {pos} beyond log size {log_size}",
                    self.path.display()
                ));
            }
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

    /// Removes the file.
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
    fn append_lookup_reload_truncate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.index");
        let mut idx = OffsetIndex::open(&path, 100, 1024).unwrap();
        assert_eq!(
            idx.lookup(150),
            OffsetEntry {
                offset: 100,
                position: 0
            }
        );
        for i in 1..=10 {
            idx.append(100 + i * 10, (i * 1000) as u32).unwrap();
        }
        assert!(idx.append(200, 20_000).is_err(), "offset not increasing");
        assert!(idx.append(300, 10_000).is_err(), "position not increasing");
        assert_eq!(
            idx.lookup(99),
            OffsetEntry {
                offset: 100,
                position: 0
            }
        );
        assert_eq!(
            idx.lookup(109),
            OffsetEntry {
                offset: 100,
                position: 0
            }
        );
        assert_eq!(
            idx.lookup(110),
            OffsetEntry {
                offset: 110,
                position: 1000
            }
        );
        assert_eq!(
            idx.lookup(155),
            OffsetEntry {
                offset: 150,
                position: 5000
            }
        );
        assert_eq!(
            idx.lookup(10_000),
            OffsetEntry {
                offset: 200,
                position: 10_000
            }
        );
        assert_eq!(
            idx.last_entry_within(5500, i64::MAX),
            Some(OffsetEntry {
                offset: 150,
                position: 5000
            })
        );
        assert_eq!(
            idx.last_entry_within(5500, 140),
            Some(OffsetEntry {
                offset: 130,
                position: 3000
            })
        );
        assert_eq!(idx.last_entry_within(500, i64::MAX), None);
        assert!(idx.sanity_check(10_001).is_ok());
        assert!(idx.sanity_check(10_000).is_err());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 80);

        // partial trailing entry is ignored and cut off
        drop(idx);
        let f = OpenOptions::new().append(true).open(&path).unwrap();
        std::io::Write::write_all(&mut &f, &[1, 2, 3]).unwrap();
        let mut idx = OffsetIndex::open(&path, 100, 1024).unwrap();
        assert_eq!(idx.len(), 10);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 80);

        idx.truncate_to(150).unwrap();
        assert_eq!(
            idx.last_entry(),
            Some(OffsetEntry {
                offset: 140,
                position: 4000
            })
        );
        idx.truncate_to_position(3000).unwrap();
        assert_eq!(
            idx.last_entry(),
            Some(OffsetEntry {
                offset: 120,
                position: 2000
            })
        );
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 16);
        idx.append(125, 2500).unwrap();
        let idx2 = OffsetIndex::open(&path, 100, 1024).unwrap();
        assert_eq!(idx2.len(), 3);
        assert_eq!(
            idx2.entry(2),
            OffsetEntry {
                offset: 125,
                position: 2500
            }
        );
    }

    #[test]
    fn full_and_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.index");
        let mut idx = OffsetIndex::open(&path, 0, 16).unwrap();
        idx.append(1, 1).unwrap();
        idx.append(2, 2).unwrap();
        assert!(idx.is_full());
        assert!(idx.append(3, 3).is_err());
        std::fs::write(&path, [0xab; 37]).unwrap();
        let idx = OffsetIndex::open(&path, 0, 1024).unwrap();
        assert_eq!(idx.len(), 4);
        assert!(idx.sanity_check(u64::MAX).is_err());
    }
}
