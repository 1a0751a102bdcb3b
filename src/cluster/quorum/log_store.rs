//! The Raft log on disk: segments of CRC-framed entries, with every present entry also kept in
//! memory (the metadata log is small and bounded by snapshots), so replication reads never
//! touch the disk.
//!
//! Files: `<first index, 20 digits>.log`, each a sequence of frames `[len u32 BE][crc32c u32 BE]
//! [postcard Entry]`. Entries are consecutive within and across segments. A segment is rolled
//! when it would pass `segment_bytes`.
//!
//! Guarantees:
//! - `append` writes, then `fdatasync`s the active segment (and the directory when a segment
//!   was created) before it reports the entries flushed.
//! - `truncate` cuts the segment holding the first removed entry at that entry and deletes the
//!   segments after it, synced before returning.
//! - `purge` records the purged log id in `quorum-state` first, then deletes segments whose
//!   entries are all purged; entries at or below it left in a kept segment are skipped on open.
//! - Opening reads every segment; at the first frame that is short, fails its CRC, does not
//!   decode, or breaks the index sequence, the segment is cut there and later segments are
//!   deleted (a torn tail from a crash mid-append; the lost entries were never reported flushed,
//!   or the leader sends them again).

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use anyhow::{Context, Result};
use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{LogState, RaftLogId, RaftLogReader, StorageIOError};

use super::store::{DirLock, StateFile};
use super::types::{LogId, RaftEntry, StorageError, TypeConfig, Vote};
use crate::cluster::controller::sync_dir;

const FRAME_HEADER: usize = 8;
/// No single entry frame is larger than this; a length past it is corruption.
const MAX_ENTRY_BYTES: usize = 64 << 20;

struct Cached {
    entry: RaftEntry,
    /// Base index (file name) of the segment holding the entry, and the frame's byte position.
    segment: u64,
    pos: u64,
}

type Cache = Arc<RwLock<BTreeMap<u64, Cached>>>;

/// The log store handed to openraft. One writer (openraft serializes calls); readers share
/// the in-memory cache.
pub struct LogStore {
    dir: PathBuf,
    state: Arc<StateFile>,
    cache: Cache,
    /// Base indexes of the segment files, ascending.
    segments: Vec<u64>,
    /// The last segment, open for appending, and its length.
    active: Option<(File, u64)>,
    segment_bytes: u64,
    /// Held for as long as openraft owns the store: released when the node stops, however it
    /// stops.
    _lock: Option<DirLock>,
}

/// A cheap handle reading entries for replication.
#[derive(Clone)]
pub struct LogReader {
    cache: Cache,
}

fn segment_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.log"))
}

fn io_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

fn write_error(e: io::Error) -> StorageError {
    StorageIOError::write_logs(&e).into()
}

impl LogStore {
    pub fn open(
        dir: &Path,
        state: Arc<StateFile>,
        segment_bytes: u64,
        lock: Option<DirLock>,
    ) -> Result<LogStore> {
        let mut bases: Vec<u64> = Vec::new();
        for item in fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
            let name = item?.file_name();
            let name = name.to_string_lossy();
            if let Some(stem) = name.strip_suffix(".log")
                && let Ok(base) = stem.parse::<u64>()
            {
                bases.push(base);
            }
        }
        bases.sort_unstable();
        let purged = state.get().purged.map(|p| p.index);
        let mut cache = BTreeMap::new();
        let mut segments = Vec::new();
        let mut next: Option<u64> = None;
        let mut cut = false;
        for (i, &base) in bases.iter().enumerate() {
            let path = segment_path(dir, base);
            if cut {
                tracing::warn!(segment = %path.display(), "deleting metadata log segment after a torn or corrupt entry");
                fs::remove_file(&path)?;
                continue;
            }
            // A segment is named by the index of its first entry, so it must continue the log
            // (or start right after the purged prefix, when the log was purged past its end).
            let expected = next.map(|n| purged.map_or(n, |p| n.max(p + 1)));
            if expected.is_some_and(|n| n != base) {
                tracing::warn!(segment = %path.display(), expected = next, "metadata log segment does not continue the log; deleting it and later ones");
                fs::remove_file(&path)?;
                cut = true;
                continue;
            }
            let bytes =
                fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let (good, entries) = scan_frames(&bytes, base);
            for (pos, entry) in entries {
                let index = entry.log_id.index;
                next = Some(index + 1);
                if purged.is_some_and(|p| index <= p) {
                    continue;
                }
                cache.insert(
                    index,
                    Cached {
                        entry,
                        segment: base,
                        pos,
                    },
                );
            }
            if next.is_none() {
                next = Some(base);
            }
            if good < bytes.len() {
                tracing::warn!(
                    segment = %path.display(),
                    valid_bytes = good,
                    file_bytes = bytes.len(),
                    "truncating torn or corrupt tail of the metadata log"
                );
                let f = OpenOptions::new().write(true).open(&path)?;
                f.set_len(good as u64)?;
                f.sync_all()?;
                cut = i + 1 < bases.len();
            }
            segments.push(base);
        }
        if let (Some(p), Some((&first, _))) = (purged, cache.first_key_value())
            && first > p + 1
        {
            anyhow::bail!(
                "metadata log in {} starts at {first} but only entries up to {p} were purged",
                dir.display()
            );
        }
        sync_dir(dir)?;
        let active = match segments.last() {
            Some(&base) => {
                let path = segment_path(dir, base);
                let f = OpenOptions::new().append(true).open(&path)?;
                let len = f.metadata()?.len();
                Some((f, len))
            }
            None => None,
        };
        Ok(LogStore {
            dir: dir.to_path_buf(),
            state,
            cache: Arc::new(RwLock::new(cache)),
            segments,
            active,
            segment_bytes,
            _lock: lock,
        })
    }

    fn last_log_id(&self) -> Option<LogId> {
        let cache = self.cache.read().unwrap();
        match cache.last_key_value() {
            Some((_, c)) => Some(c.entry.log_id),
            None => self.state.get().purged,
        }
    }

    /// Writes one frame, rolling to a new segment first when the active one is full (or there
    /// is none). Returns whether a segment file was created.
    fn write_frame(&mut self, index: u64, frame: &[u8]) -> io::Result<(u64, u64, bool)> {
        let mut created = false;
        let needs_roll = match &self.active {
            None => true,
            Some((_, len)) => *len > 0 && *len + frame.len() as u64 > self.segment_bytes,
        };
        if needs_roll {
            if let Some((f, _)) = &self.active {
                f.sync_data()?;
            }
            let path = segment_path(&self.dir, index);
            let f = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .open(&path)?;
            self.segments.push(index);
            self.active = Some((f, 0));
            created = true;
        }
        let segment = *self.segments.last().unwrap();
        let (f, len) = self.active.as_mut().unwrap();
        let pos = *len;
        f.write_all(frame)?;
        *len += frame.len() as u64;
        Ok((segment, pos, created))
    }

    fn append_entries(&mut self, entries: Vec<RaftEntry>) -> io::Result<()> {
        let mut created = false;
        for entry in entries {
            let index = entry.log_id.index;
            let frame = encode_frame(&entry);
            let (segment, pos, new_segment) = self.write_frame(index, &frame)?;
            created |= new_segment;
            self.cache.write().unwrap().insert(
                index,
                Cached {
                    entry,
                    segment,
                    pos,
                },
            );
        }
        if let Some((f, _)) = &self.active {
            f.sync_data()?;
        }
        if created {
            sync_dir(&self.dir).map_err(io_err)?;
        }
        Ok(())
    }

    fn truncate_from(&mut self, index: u64) -> io::Result<()> {
        let found = {
            let mut cache = self.cache.write().unwrap();
            let at = cache.get(&index).map(|c| (c.segment, c.pos));
            cache.split_off(&index);
            at
        };
        let Some((segment, pos)) = found else {
            return Ok(());
        };
        while let Some(&last) = self.segments.last() {
            if last <= segment {
                break;
            }
            self.segments.pop();
            fs::remove_file(segment_path(&self.dir, last))?;
        }
        let path = segment_path(&self.dir, segment);
        let f = OpenOptions::new().append(true).open(&path)?;
        f.set_len(pos)?;
        f.sync_all()?;
        self.active = Some((f, pos));
        sync_dir(&self.dir).map_err(io_err)?;
        Ok(())
    }

    fn purge_upto(&mut self, log_id: LogId) -> io::Result<()> {
        self.state.update(|s| {
            if s.purged.is_none_or(|p| p.index < log_id.index) {
                s.purged = Some(log_id);
            }
        })?;
        let last_index = {
            let mut cache = self.cache.write().unwrap();
            let kept = cache.split_off(&(log_id.index + 1));
            *cache = kept;
            cache.last_key_value().map(|(&i, _)| i)
        };
        // A segment's entries end where the next segment starts; the last one's end at the log
        // end (all purged when nothing is left in the cache).
        let mut removed = false;
        while let Some(&first) = self.segments.first() {
            let all_purged = match self.segments.get(1) {
                Some(&next) => next <= log_id.index + 1,
                None => last_index.is_none(),
            };
            if !all_purged {
                break;
            }
            self.segments.remove(0);
            if self.segments.is_empty() {
                self.active = None;
            }
            fs::remove_file(segment_path(&self.dir, first))?;
            removed = true;
        }
        if removed {
            sync_dir(&self.dir).map_err(io_err)?;
        }
        Ok(())
    }
}

fn encode_frame(entry: &RaftEntry) -> Vec<u8> {
    let body = postcard::to_stdvec(entry).expect("postcard encoding of an in-memory value");
    let mut frame = Vec::with_capacity(FRAME_HEADER + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    frame.extend_from_slice(&body);
    frame
}

/// Decodes the frames of one segment whose first entry must have index `base`. Returns the
/// length of the valid prefix and the entries in it with their positions.
fn scan_frames(bytes: &[u8], base: u64) -> (usize, Vec<(u64, RaftEntry)>) {
    let mut pos = 0;
    let mut out = Vec::new();
    let mut expected = base;
    while bytes.len() - pos >= FRAME_HEADER {
        let len = u32::from_be_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        let crc = u32::from_be_bytes(bytes[pos + 4..pos + 8].try_into().unwrap());
        let start = pos + FRAME_HEADER;
        if len > MAX_ENTRY_BYTES || bytes.len() - start < len {
            break;
        }
        let body = &bytes[start..start + len];
        if crc32c::crc32c(body) != crc {
            break;
        }
        let Ok(entry) = postcard::from_bytes::<RaftEntry>(body) else {
            break;
        };
        if entry.log_id.index != expected {
            break;
        }
        expected += 1;
        out.push((pos as u64, entry));
        pos = start + len;
    }
    (pos, out)
}

fn read_range(cache: &Cache, range: impl RangeBounds<u64>) -> Vec<RaftEntry> {
    let cache = cache.read().unwrap();
    cache.range(range).map(|(_, c)| c.entry.clone()).collect()
}

impl RaftLogReader<TypeConfig> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + std::fmt::Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<RaftEntry>, StorageError> {
        Ok(read_range(&self.cache, range))
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + std::fmt::Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<RaftEntry>, StorageError> {
        Ok(read_range(&self.cache, range))
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        Ok(LogState {
            last_purged_log_id: self.state.get().purged,
            last_log_id: self.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> LogReader {
        LogReader {
            cache: self.cache.clone(),
        }
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        self.state
            .update(|s| s.vote = Some(*vote))
            .map_err(|e| StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.state.get().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.state
            .update(|s| s.committed = committed)
            .map_err(|e| StorageIOError::write(&e).into())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.state.get().committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = RaftEntry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<RaftEntry> = entries.into_iter().collect();
        match self.append_entries(entries) {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(io::Error::new(e.kind(), e.to_string())));
                Err(write_error(e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.truncate_from(log_id.get_log_id().index)
            .map_err(write_error)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.purge_upto(log_id).map_err(write_error)
    }
}

#[cfg(test)]
#[path = "log_store_tests.rs"]
mod tests;
