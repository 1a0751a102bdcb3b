//! Log compaction, as Kafka's log cleaner does it: for a log with `cleanup.policy=compact`
//! only the latest record of each key is kept, tombstones (null values) until their delete
//! horizon, transaction markers until nothing of their transaction is left, aborted
//! transactions' records not at all, and each producer's last batch (even emptied) so its
//! state survives.
//!
//! * [`decide`]: the pure decisions: which log (dirtiest past min.cleanable.dirty.ratio, or
//!   due by max.compaction.lag.ms, or with a passed delete horizon), its cleanable section
//!   (from the `cleaner-offset-checkpoint` to the first uncleanable offset: the active
//!   segment, the last stable offset, min.compaction.lag.ms), segment groups, and what each
//!   batch and record keeps.
//! * [`offset_map`]: the bounded key → latest offset map (`log.cleaner.dedupe.buffer.size`):
//!   a cleaning covers as much of the dirty section as its map holds.
//! * [`records`]: records of a batch, and batches rebuilt from what is kept.
//! * [`throttle`]: the cleaners' shared I/O limit (`log.cleaner.io.max.bytes.per.second`).
//! * [`clean`]: one cleaning's I/O, writing `.cleaned` segments without the log's lock; the
//!   log swaps them in (`Log::swap_cleaned`, crash-safe through `.swap` files).
//!
//! Cleaned segments keep the records' offsets (the log has gaps); batches with nothing
//! dropped are copied byte for byte.

pub mod clean;
pub mod decide;
pub mod offset_map;
pub mod records;
pub mod throttle;

pub use clean::{CleanInput, CleanOutcome, CleanedSegment, SegmentSnapshot};
pub use decide::{Candidate, CompactionConfig, LastRecord};
