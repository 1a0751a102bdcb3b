//! Moving a replica to another log dir (AlterReplicaLogDirs).
//!
//! The copy runs under the partition's `log` lock: appends, reads and role changes of this
//! partition wait for it, so the copy is of a log nobody changes and there is nothing to catch
//! up afterwards (Kafka's alter-log-dirs thread instead copies while appends go on and catches
//! up before the swap). The caller runs it off the async runtime. The files and their crash
//! rules are `log::dir_move`'s.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::{Partition, load_producer_state};
use crate::log::{Log, dir_move};

impl Partition {
    /// Moves this replica's directory into log dir `dest`, then reopens its log and
    /// producer state there. Returns the log dir it left, or None if it was already in
    /// `dest`.
    pub fn move_to_log_dir(&self, dest: &Path) -> anyhow::Result<Option<PathBuf>> {
        let mut log = self.log.lock().unwrap();
        let from = self.log_dir();
        if from == dest {
            return Ok(None);
        }
        let current = log.dir().to_path_buf();
        // Everything on disk: the final time index entry, the leader epochs, the producers.
        log.close()?;
        self.producers
            .lock()
            .unwrap()
            .take_snapshot(log.log_end_offset())?;
        let future = dir_move::copy_to_future(&current, dest)
            .with_context(|| format!("copying {} to {}", current.display(), dest.display()))?;
        let moved_dir = dir_move::swap_in_future(&current, &future)
            .with_context(|| format!("swapping in {}", future.display()))?;
        *self.log_dir.lock().unwrap() = dest.to_path_buf();
        let start = log.log_start_offset();
        let mut moved = Log::open(&moved_dir, log.config().clone(), false)
            .with_context(|| format!("reopening {}", moved_dir.display()))?;
        moved
            .advance_log_start(start.min(moved.log_end_offset()))
            .map_err(|e| {
                anyhow::anyhow!("restoring the log start of {}: {e:?}", moved_dir.display())
            })?;
        let producers = load_producer_state(&mut moved)
            .with_context(|| format!("reloading producer state in {}", moved_dir.display()))?;
        *log = moved;
        *self.producers.lock().unwrap() = producers;
        Ok(Some(from))
    }
}
