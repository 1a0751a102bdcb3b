//! The transaction coordinator (Kafka's TransactionCoordinator): the state of every
//! transactional id this broker coordinates, kept in the internal compacted topic
//! `__transaction_state`, and the commit/abort markers it writes to the partitions of each
//! transaction.
//!
//! * `state`: one transactional id's state and its legal transitions (pure).
//! * `rules`: what each request does to that state (pure).
//! * `records`: the `__transaction_state` record schemas.
//! * `store`: the topic (created on first use), its writes and its replay.
//! * `coordinator`: the owner of the states, the shell around `rules`.
//! * `markers`: writing a transaction's markers to its partitions' leaders.
//! * `loader`: loading partitions at start-up (one node) or on becoming their leader.
//!
//! A transactional id's coordinator is the leader of its `__transaction_state` partition
//! (abs(Java hashCode) mod `transaction.state.log.num.partitions`); on one node, this broker.

pub mod coordinator;
#[cfg(test)]
mod coordinator_tests;
pub mod loader;
pub mod markers;
pub mod peers;
pub mod records;
pub mod rules;
pub mod state;
pub mod store;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub use coordinator::{Coordinator, TxnConfig};

use crate::cluster::internal_topic::InternalTopics;
use crate::config::TxnSettings;

/// How long a marker or a `__transaction_state` write waits for the in-sync replicas (Kafka's
/// `request.timeout.ms` default).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Makes `__transaction_state` exist (created on first use). Its partitions' leaders load
/// them (`group::loader::became_leader`).
pub async fn ensure_ready(topics: &dyn InternalTopics, settings: &TxnSettings) -> Result<(), i16> {
    store::ensure_topic(topics, settings).await.map(|_| ())
}
