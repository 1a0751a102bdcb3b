//! Sparse offset index (`.index`): 8-byte entries of
//! `[relative offset u32 BE][file position u32 BE]`, strictly increasing in both.
//!
//! Each entry maps the *last offset* of a batch to the position where that
//! batch starts, so a lookup for any offset yields a position at or before
//! the batch holding it. Entries live in memory and every append is written
//! through to the file at once (no preallocation; the file is exactly sized).

use std::io;
use std::path::Path;

use super::index_file::{IndexEntry, IndexFile};

pub const OFFSET_ENTRY_SIZE: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetEntry {
    pub offset: i64,
    pub position: u32,
}

/// (relative offset, position) as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Raw(u32, u32);

impl IndexEntry for Raw {
    const SIZE: usize = OFFSET_ENTRY_SIZE;
    fn decode(c: &[u8]) -> Raw {
        Raw(
            u32::from_be_bytes(c[0..4].try_into().unwrap()),
            u32::from_be_bytes(c[4..8].try_into().unwrap()),
        )
    }
    fn encode(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&self.0.to_be_bytes());
        out[4..8].copy_from_slice(&self.1.to_be_bytes());
    }
}

pub struct OffsetIndex {
    file: IndexFile<Raw>,
    base_offset: i64,
}

impl OffsetIndex {
    /// Loads an index (none if the file is missing; it is made on the first entry
    /// written). A partial trailing entry is ignored and cut off the file.
    /// `max_index_bytes` bounds its size.
    pub fn open(path: &Path, base_offset: i64, max_index_bytes: usize) -> io::Result<OffsetIndex> {
        Ok(OffsetIndex {
            file: IndexFile::open(path, max_index_bytes)?,
            base_offset,
        })
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
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

    fn to_entry(&self, e: Raw) -> OffsetEntry {
        OffsetEntry {
            offset: self.base_offset + e.0 as i64,
            position: e.1,
        }
    }

    pub fn entry(&self, i: usize) -> OffsetEntry {
        self.to_entry(self.file.entries()[i])
    }

    pub fn last_entry(&self) -> Option<OffsetEntry> {
        self.file.entries().last().map(|&e| self.to_entry(e))
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
        if let Some(&Raw(last_rel, last_pos)) = self.file.entries().last()
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
                self.path().display()
            )));
        }
        self.file.push(Raw(rel as u32, position))
    }

    /// Largest entry whose offset is <= `target`, or `(base_offset, 0)`.
    pub fn lookup(&self, target: i64) -> OffsetEntry {
        let none = OffsetEntry {
            offset: self.base_offset,
            position: 0,
        };
        let rel = target - self.base_offset;
        if rel < 0 {
            return none;
        }
        let rel = rel.min(u32::MAX as i64) as u32;
        let entries = self.file.entries();
        let n = entries.partition_point(|e| e.0 <= rel);
        if n == 0 {
            none
        } else {
            self.to_entry(entries[n - 1])
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
        let entries = self.file.entries();
        let n = entries.partition_point(|&Raw(rel, pos)| {
            (pos as u64) <= max_position && base + (rel as i64) < max_offset_exclusive
        });
        (n > 0).then(|| self.to_entry(entries[n - 1]))
    }

    /// Removes entries with offset >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let base = self.base_offset;
        let keep = self
            .file
            .entries()
            .partition_point(|e| base + (e.0 as i64) < offset);
        self.file.truncate(keep)
    }

    /// Removes entries with position >= `position`.
    pub fn truncate_to_position(&mut self, position: u64) -> io::Result<()> {
        let keep = self
            .file
            .entries()
            .partition_point(|e| (e.1 as u64) < position);
        self.file.truncate(keep)
    }

    /// Removes every entry.
    pub fn reset(&mut self) -> io::Result<()> {
        self.file.reset()
    }

    /// Checks the invariants: offsets and positions strictly increasing,
    /// offsets not below the base, positions inside a log of `log_size` bytes.
    pub fn sanity_check(&self, log_size: u64) -> Result<(), String> {
        self.file.check_order(|a, b| b.0 > a.0 && b.1 > a.1)?;
        if let Some(&Raw(rel, pos)) = self.file.entries().last() {
            if rel > i32::MAX as u32 {
                return Err(format!(
                    "{}: relative offset {rel} overflows",
                    self.path().display()
                ));
            }
            if pos as u64 >= log_size {
                return Err(format!(
                    "{}: position {pos} beyond log size {log_size}",
                    self.path().display()
                ));
            }
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

    /// Removes the file.
    pub fn delete(self) -> io::Result<()> {
        self.file.delete()
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
        idx.flush().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 80);

        // partial trailing entry is ignored and cut off
        drop(idx);
        let f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
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
        // Appends reach the file in groups, and at the latest on flush.
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 16);
        idx.flush().unwrap();
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
