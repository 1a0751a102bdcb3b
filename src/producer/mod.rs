//! Producers: producer id allocation and per-partition producer state (idempotence).
//! Transactions will live here too.
//!
//! * [`ProducerIdManager`] (owned by the broker) hands out producer ids from blocks reserved in
//!   `<first log dir>/sluice-producer-ids`, so ids stay unique across restarts.
//! * [`ProducerState`] (one per partition, owned by its `Partition` and only changed while the
//!   partition's log lock is held) remembers, per producer id, its epoch and its last five
//!   batches (sequence range, offsets, timestamp). It decides whether a produced batch is new,
//!   a retry of a batch already written (answered with the original offsets, not appended), or
//!   out of order / fenced, following Kafka 4's ProducerStateManager rules. It is rebuilt from
//!   the log at start-up, starting at the newest `<offset>.snapshot` file in the partition
//!   directory (written at each segment roll and at clean shutdown).
//!
//! Like `log/`, nothing here knows the wire protocol: callers map [`ProducerError`] to error
//! codes.

pub mod id_manager;
pub mod state;

pub use id_manager::ProducerIdManager;
pub use state::{BatchMeta, ProducerError, ProducerState};
