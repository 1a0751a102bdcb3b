//! Producers: producer id allocation and per-partition producer state (idempotence and
//! transactions).
//!
//! * `id_manager.rs` reads the producer-id blocks an earlier release's single node kept in
//!   `<first log dir>/sluice-producer-ids`, for its import into the metadata quorum (which
//!   hands out producer ids now).
//! * [`ProducerState`] (one per partition, owned by its `Partition` and only changed while the
//!   partition's log lock is held) remembers, per producer id, its epoch and its last five
//!   batches (sequence range, offsets, timestamp). It decides whether a produced batch is new,
//!   a retry of a batch already written (answered with the original offsets, not appended), or
//!   out of order / fenced, following Kafka 4's ProducerStateManager rules. It is rebuilt from
//!   the log at start-up, starting at the newest `<offset>.snapshot` file in the partition
//!   directory (written at each segment roll and at clean shutdown; `snapshot.rs`).
//!   It also tracks each producer's ongoing transaction on the partition, opened by its
//!   first transactional batch and ended by a COMMIT or ABORT marker.
//! * `txn.rs`: markers to append, completed transactions, and [`StableOffsets`], from which
//!   the partition's last stable offset is computed.
//!
//! Like `log/`, nothing here knows the wire protocol: callers map [`ProducerError`] to error
//! codes.

pub mod id_manager;
mod snapshot;
pub mod state;
pub mod txn;

pub use state::{AppendOrigin, BatchMeta, ProducerError, ProducerState};
pub use txn::{CompletedTxn, StableOffsets, TxnMarker};
