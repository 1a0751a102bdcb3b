//! The file plumbing shared by the offset and time indexes: fixed-size big-endian entries
//! held in memory and appended to an exactly sized file.
//!
//! No file descriptor is held: entries are written in groups (every [`WRITE_EVERY`] entries,
//! and on flush, which runs at segment roll and close), so a broker with many partitions
//! holds one descriptor per segment (its `.log`), not three. After a crash the file may lack
//! the newest entries; a sparse index with fewer entries is still correct (lookups scan a
//! little further), and recovery rebuilds the indexes of the segments it checks.
//!
//! The file itself is made only when there is something to put in it, or when the segment
//! asks for it ([`IndexFile::ensure_on_disk`], at a flush of a segment that holds data): a
//! partition that is created and never written costs no index inodes. A missing file reads
//! as an index without entries.

use std::cell::Cell;
use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// One fixed-size index entry.
pub trait IndexEntry: Copy + std::fmt::Debug {
    const SIZE: usize;
    fn decode(bytes: &[u8]) -> Self;
    fn encode(&self, out: &mut [u8]);
}

/// Pending entries are written once this many have gathered.
pub const WRITE_EVERY: usize = 64;

pub struct IndexFile<E> {
    path: PathBuf,
    entries: Vec<E>,
    /// How many of `entries` are in the file.
    written: Cell<usize>,
    /// Whether the file exists.
    on_disk: Cell<bool>,
    max_entries: usize,
}

impl<E: IndexEntry> IndexFile<E> {
    /// Loads the entries of the file at `path` (none if it does not exist; it is not created
    /// here); a partial trailing entry is cut off. `max_index_bytes` bounds the number of
    /// entries.
    pub fn open(path: &Path, max_index_bytes: usize) -> io::Result<IndexFile<E>> {
        let (data, on_disk) = match std::fs::read(path) {
            Ok(d) => (d, true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => (Vec::new(), false),
            Err(e) => return Err(e),
        };
        let whole = data.len() / E::SIZE * E::SIZE;
        if whole != data.len() {
            OpenOptions::new()
                .write(true)
                .open(path)?
                .set_len(whole as u64)?;
        }
        let entries: Vec<E> = data[..whole].chunks_exact(E::SIZE).map(E::decode).collect();
        Ok(IndexFile {
            path: path.to_path_buf(),
            written: Cell::new(entries.len()),
            on_disk: Cell::new(on_disk),
            entries,
            max_entries: (max_index_bytes / E::SIZE).max(1),
        })
    }

    /// Whether the file exists.
    pub fn on_disk(&self) -> bool {
        self.on_disk.get()
    }

    /// Creates the file (with the entries so far) if it does not exist yet.
    pub fn ensure_on_disk(&self) -> io::Result<()> {
        if !self.on_disk.get() {
            self.open_for_write()?;
            self.write_pending()?;
        }
        Ok(())
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

    fn open_for_write(&self) -> io::Result<std::fs::File> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.path)?;
        self.on_disk.set(true);
        Ok(file)
    }

    /// Adds `e` after the last entry.
    pub fn push(&mut self, e: E) -> io::Result<()> {
        self.entries.push(e);
        if self.entries.len() - self.written.get() >= WRITE_EVERY {
            self.write_pending()?;
        }
        Ok(())
    }

    /// Appends the entries not yet in the file; returns whether anything was written.
    fn write_pending(&self) -> io::Result<bool> {
        let from = self.written.get();
        if from >= self.entries.len() {
            return Ok(false);
        }
        let mut buf = vec![0u8; (self.entries.len() - from) * E::SIZE];
        for (e, out) in self.entries[from..]
            .iter()
            .zip(buf.chunks_exact_mut(E::SIZE))
        {
            e.encode(out);
        }
        self.open_for_write()?
            .write_all_at(&buf, (from * E::SIZE) as u64)?;
        self.written.set(self.entries.len());
        Ok(true)
    }

    /// Keeps the first `keep` entries.
    pub fn truncate(&mut self, keep: usize) -> io::Result<()> {
        if keep < self.written.get() {
            self.open_for_write()?.set_len((keep * E::SIZE) as u64)?;
            self.written.set(keep);
        }
        self.entries.truncate(keep);
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

    /// Writes pending entries and syncs the file (when there is one).
    pub fn flush(&self) -> io::Result<()> {
        self.write_pending()?;
        if !self.on_disk.get() {
            return Ok(());
        }
        self.open_for_write()?.sync_data()
    }

    /// Removes the file.
    pub fn delete(self) -> io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            r => r,
        }
    }
}
