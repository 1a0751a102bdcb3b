//! The file plumbing shared by the offset and time indexes: fixed-size big-endian entries
//! held in memory and written through to an exactly sized, append-only file.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// One fixed-size index entry.
pub trait IndexEntry: Copy + std::fmt::Debug {
    const SIZE: usize;
    fn decode(bytes: &[u8]) -> Self;
    fn encode(&self, out: &mut [u8]);
}

pub struct IndexFile<E> {
    path: PathBuf,
    file: File,
    entries: Vec<E>,
    max_entries: usize,
}

impl<E: IndexEntry> IndexFile<E> {
    /// Opens (creating if missing) and loads the entries; a partial trailing entry is cut off.
    /// `max_index_bytes` bounds the number of entries.
    pub fn open(path: &Path, max_index_bytes: usize) -> io::Result<IndexFile<E>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let data = std::fs::read(path)?;
        let whole = data.len() / E::SIZE * E::SIZE;
        if whole != data.len() {
            file.set_len(whole as u64)?;
        }
        let entries = data[..whole].chunks_exact(E::SIZE).map(E::decode).collect();
        Ok(IndexFile {
            path: path.to_path_buf(),
            file,
            entries,
            max_entries: (max_index_bytes / E::SIZE).max(1),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn entries(&self) -> &[E] {
        &self.entries
    }

    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    /// Writes `e` after the last entry.
    pub fn push(&mut self, e: E) -> io::Result<()> {
        let mut buf = [0u8; 16];
        e.encode(&mut buf[..E::SIZE]);
        self.file
            .write_all_at(&buf[..E::SIZE], (self.entries.len() * E::SIZE) as u64)?;
        self.entries.push(e);
        Ok(())
    }

    /// Keeps the first `keep` entries.
    pub fn truncate(&mut self, keep: usize) -> io::Result<()> {
        if keep < self.entries.len() {
            self.file.set_len((keep * E::SIZE) as u64)?;
            self.entries.truncate(keep);
        }
        Ok(())
    }

    pub fn reset(&mut self) -> io::Result<()> {
        self.truncate(0)
    }

    /// Checks that consecutive entries satisfy `ordered`.
    pub fn check_order(&self, ordered: impl Fn(&E, &E) -> bool) -> Result<(), String> {
        for w in self.entries.windows(2) {
            if !ordered(&w[0], &w[1]) {
                return Err(format!(
                    "{}: entries not increasing: {:?} then {:?}",
                    self.path.display(),
                    w[0],
                    w[1]
                ));
            }
        }
        Ok(())
    }

    pub fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Removes the file.
    pub fn delete(self) -> io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            r => r,
        }
    }
}
