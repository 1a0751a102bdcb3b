//! The replica's side of log compaction: what the cleaner reads, taken under the log and
//! producer locks, and the swap of what it wrote. Leaders and followers clean alike, each
//! its own log.

use std::sync::atomic::Ordering;

use super::Partition;
use crate::log::cleaner::{Candidate, CleanInput, CleanedSegment, CompactionConfig};

/// A replica's log as the cleaner sees it at one moment.
pub struct CleanerView {
    pub candidate: Candidate,
    pub input: CleanInput,
}

impl Partition {
    /// The inactive segments, the aborted transactions, each producer's last record and the
    /// first offset that may not be cleaned: the active segment's base, the high watermark
    /// and the last stable offset, whichever is lowest.
    pub fn cleaner_view(
        &self,
        config: CompactionConfig,
        checkpoint: Option<i64>,
        pending_delete_horizon: Option<i64>,
        (map_buffer_bytes, map_load_factor): (u64, f64),
        now_ms: i64,
    ) -> CleanerView {
        let log = self.log.lock().unwrap();
        let last_records = self.producers.lock().unwrap().last_records();
        let first_uncleanable = log
            .active_base_offset()
            .min(self.high_watermark())
            .min(self.last_stable_offset());
        let segments = log.cleaner_segments();
        let aborted = log.collect_aborted_txns(log.log_start_offset(), log.log_end_offset());
        let cfg = log.config().clone();
        let candidate = Candidate {
            segments: segments.iter().map(|s| s.info).collect(),
            log_start_offset: log.log_start_offset(),
            checkpoint,
            first_uncleanable,
            config: config.clone(),
            pending_delete_horizon,
        };
        CleanerView {
            candidate,
            input: CleanInput {
                dir: log.dir().to_path_buf(),
                segments,
                aborted,
                last_records,
                first_dirty_offset: 0,
                end_offset: first_uncleanable,
                delete_retention_ms: config.delete_retention_ms,
                map_buffer_bytes,
                map_load_factor,
                segment_bytes: cfg.segment_bytes,
                segment_index_bytes: cfg.segment_index_bytes,
                index_interval_bytes: cfg.index_interval_bytes as u64,
                now_ms,
                throttle: None,
            },
        }
    }

    /// Swaps each cleaned group in (see `Log::swap_cleaned`). Returns how many were; a group
    /// whose segments changed meanwhile is dropped.
    pub fn swap_cleaned(&self, cleaned: &[CleanedSegment]) -> std::io::Result<usize> {
        let mut log = self.log.lock().unwrap();
        let mut n = 0;
        for (i, c) in cleaned.iter().enumerate() {
            match log.swap_cleaned(c) {
                Ok(true) => n += 1,
                Ok(false) => {}
                Err(e) => {
                    for rest in &cleaned[i + 1..] {
                        crate::log::cleaner::clean::remove_cleaned(log.dir(), rest.base_offset);
                    }
                    return Err(e);
                }
            }
        }
        self.log_start
            .store(log.log_start_offset(), Ordering::Release);
        Ok(n)
    }
}
