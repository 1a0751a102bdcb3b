//! Moving the log start offset forward on request (a client deleting records on the leader, a
//! follower taking its leader's log start, the start restored from `log-start-offset-checkpoint`
//! at start-up), as Kafka's `UnifiedLog.maybeIncrementLogStartOffset`, and deleting the
//! segments wholly below it (Kafka's `deleteLogStartOffsetBreachedSegments`).
//!
//! The start may lie anywhere in a segment, even inside a batch: reads from below it are out
//! of range, a read from it returns the batch holding it (the reader skips the records before
//! the offset it asked for), and lookups by timestamp never answer below it.

use std::io;

use tracing::info;

use super::{Log, ReadError, sync_dir};

impl Log {
    /// Moves the log start offset up to `offset`; an offset at or below the current start
    /// changes nothing (the start never goes back). Every segment all of whose offsets are
    /// below the new start (the next segment begins at or below it) is deleted; the active
    /// segment and the segment holding the start are kept. The leader epoch cache forgets
    /// what lies below the start. An offset past the log end is OFFSET_OUT_OF_RANGE (callers
    /// bound it by the high watermark first). Returns whether the start moved.
    pub fn advance_log_start(&mut self, offset: i64) -> Result<bool, ReadError> {
        if offset > self.log_end_offset {
            return Err(ReadError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        if offset <= self.log_start_offset {
            return Ok(false);
        }
        self.log_start_offset = offset;
        self.delete_segments_below_start()?;
        self.epochs.cache.truncate_from_start(offset);
        self.epochs_dirty = true;
        self.save_epochs()?;
        info!(dir = %self.dir.display(), offset, "log start offset advanced");
        Ok(true)
    }

    /// Deletes the segments whose successor starts at or below the log start offset.
    /// Returns how many went.
    fn delete_segments_below_start(&mut self) -> io::Result<usize> {
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        let doomed: Vec<i64> = bases
            .windows(2)
            .take_while(|w| w[1] <= self.log_start_offset)
            .map(|w| w[0])
            .collect();
        for base in &doomed {
            let seg = self.segments.remove(base).expect("segment present");
            self.size_bytes -= seg.size();
            info!(dir = %self.dir.display(), base, log_start_offset = self.log_start_offset, "deleting segment below the log start offset");
            seg.delete()?;
        }
        if !doomed.is_empty() {
            sync_dir(&self.dir)?;
        }
        Ok(doomed.len())
    }

    /// The base offset of the oldest segment: the log start offset unless the start was moved
    /// inside that segment (then only `log-start-offset-checkpoint` remembers it).
    pub fn first_segment_base(&self) -> i64 {
        *self
            .segments
            .keys()
            .next()
            .expect("a log always has a segment")
    }
}
