//! The log's side of compaction: what the cleaner reads (the inactive segments), the swap of
//! a cleaned group in for the segments it replaces, and at start-up the completion or
//! removal of a swap a crash interrupted (Kafka's `replaceSegments` and the `.swap` handling
//! of `LogLoader`).
//!
//! A cleaned group is written as `<base>.*.cleaned` and flushed. The swap then renames the
//! indexes to `.swap` and last the `.log` (the commit point), syncs the directory, deletes
//! the replaced segments, syncs, and renames the `.swap` files to their final names. At
//! start-up a `<base>.log.swap` means the cleaned copy is complete: the segments it covers
//! ([base, its next offset)) are deleted and the swap files renamed; `.cleaned` files and
//! index `.swap` files without their `.log.swap` are removed. A kill at any point leaves the
//! old segments or the new one.

use std::io;
use std::path::Path;

use tracing::{info, warn};

use super::{Log, sync_dir};
use crate::log::cleaner::clean::{
    CLEANED_SUFFIX, CleanedSegment, SEGMENT_SUFFIXES, SWAP_SUFFIX, SegmentSnapshot,
};
use crate::log::cleaner::decide::SegmentInfo;
use crate::log::remove_if_exists;
use crate::log::segment::{self, LOG_SUFFIX, Segment};

fn suffixed(dir: &Path, base: i64, suffix: &str, extra: &str) -> std::path::PathBuf {
    dir.join(format!("{}{extra}", segment::file_name(base, suffix)))
}

fn rename_if_exists(from: &Path, to: &Path) -> io::Result<()> {
    match std::fs::rename(from, to) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

/// The offset after the last whole batch of a `.log` file (its base if none).
fn next_offset_of(path: &Path, base: i64) -> io::Result<i64> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let mut pos = 0u64;
    let mut next = base;
    let mut head = [0u8; crate::log::batch::HEADER_SIZE];
    while pos + head.len() as u64 <= len {
        f.read_exact_at(&mut head, pos)?;
        let Ok(h) = crate::log::batch::parse_header_checked(&head, pos, len - pos) else {
            break;
        };
        next = h.next_offset();
        pos += h.total_size() as u64;
    }
    Ok(next)
}

/// Completes every swap a crash interrupted in `dir` and removes cleaning leftovers
/// (`.cleaned` files, index `.swap` files whose `.log.swap` never came). Returns whether
/// the directory changed.
pub(super) fn recover_swaps(dir: &Path) -> io::Result<bool> {
    let mut swapped_logs = Vec::new();
    let mut leftovers = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if name.ends_with(CLEANED_SUFFIX) {
            leftovers.push(entry.path());
        } else if let Some(stem) = name.strip_suffix(SWAP_SUFFIX)
            && let Some((base, suffix)) = segment::parse_file_name(stem)
            && suffix == LOG_SUFFIX
        {
            swapped_logs.push(base);
        }
    }
    let mut changed = !leftovers.is_empty();
    for p in leftovers {
        info!(file = %p.display(), "removing an unfinished cleaning's file");
        remove_if_exists(&p)?;
    }
    swapped_logs.sort_unstable();
    for &base in &swapped_logs {
        let swap = suffixed(dir, base, LOG_SUFFIX, SWAP_SUFFIX);
        let next = next_offset_of(&swap, base)?;
        info!(dir = %dir.display(), base, next, "completing an interrupted segment swap");
        for entry in std::fs::read_dir(dir)? {
            let name = entry?.file_name();
            let Some((b, s)) = name.to_str().and_then(segment::parse_file_name) else {
                continue;
            };
            if s == LOG_SUFFIX && b >= base && b < next.max(base + 1) {
                for suffix in SEGMENT_SUFFIXES {
                    remove_if_exists(&dir.join(segment::file_name(b, suffix)))?;
                }
            }
        }
        sync_dir(dir)?;
        for suffix in SEGMENT_SUFFIXES {
            rename_if_exists(
                &suffixed(dir, base, suffix, SWAP_SUFFIX),
                &dir.join(segment::file_name(base, suffix)),
            )?;
        }
        changed = true;
    }
    // Index swap files whose `.log` never reached `.swap`: the old segment is intact.
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.ends_with(SWAP_SUFFIX))
        {
            info!(file = %entry.path().display(), "removing an unfinished swap's index");
            remove_if_exists(&entry.path())?;
            changed = true;
        }
    }
    if changed {
        sync_dir(dir)?;
    }
    Ok(changed)
}

impl Log {
    /// The inactive segments, as the cleaner reads them.
    pub fn cleaner_segments(&self) -> Vec<SegmentSnapshot> {
        let n = self.segments.len();
        self.segments
            .values()
            .take(n.saturating_sub(1))
            .map(|s| SegmentSnapshot {
                info: SegmentInfo {
                    base_offset: s.base_offset(),
                    next_offset: s.next_offset(),
                    size: s.size(),
                    index_entries: s.offset_index().len() as u64,
                    time_index_entries: s.time_index().len() as u64,
                    largest_timestamp: s.largest_timestamp(),
                    first_batch_timestamp: s.roll_base_ms().unwrap_or(-1),
                },
                file: s.log_file().clone(),
            })
            .collect()
    }

    /// Base offset of the active segment: nothing at or above it is cleaned.
    pub fn active_base_offset(&self) -> i64 {
        self.active().base_offset()
    }

    /// Swaps the cleaned group `c` (its `.cleaned` files written and flushed) in for the
    /// segments it replaces. If those are no longer the log's inactive segments as they were
    /// read (retention, truncation or a roll changed them), the cleaned files are removed
    /// and false returned.
    pub fn swap_cleaned(&mut self, c: &CleanedSegment) -> io::Result<bool> {
        let dir = self.dir.clone();
        let active = self.active().base_offset();
        let unchanged = !self.deleted
            && c.replaces.iter().all(|(base, size)| {
                *base < active && self.segments.get(base).is_some_and(|s| s.size() == *size)
            });
        if !unchanged {
            crate::log::cleaner::clean::remove_cleaned(&dir, c.base_offset);
            return Ok(false);
        }
        let base = c.base_offset;
        for suffix in SEGMENT_SUFFIXES {
            rename_if_exists(
                &suffixed(&dir, base, suffix, CLEANED_SUFFIX),
                &suffixed(&dir, base, suffix, SWAP_SUFFIX),
            )?;
        }
        sync_dir(&dir)?;
        for (b, _) in &c.replaces {
            if let Some(old) = self.segments.remove(b) {
                self.size_bytes -= old.size();
                old.delete()?;
            }
        }
        sync_dir(&dir)?;
        for suffix in SEGMENT_SUFFIXES {
            rename_if_exists(
                &suffixed(&dir, base, suffix, SWAP_SUFFIX),
                &dir.join(segment::file_name(base, suffix)),
            )?;
        }
        sync_dir(&dir)?;
        let (mut seg, missing) = Segment::open(&dir, base, &self.config)?;
        if missing {
            seg.recover()?;
        } else if let Err(e) = seg.load_state() {
            warn!(dir = %dir.display(), base, "{e}; rebuilding the cleaned segment's indexes");
            seg.recover()?;
        }
        self.size_bytes += seg.size();
        self.segments.insert(base, seg);
        Ok(true)
    }
}
