//! The transaction coordinator (Kafka's TransactionCoordinator): the state of every
//! transactional id this broker coordinates, kept in the internal compacted topic
//! `__transaction_state`, and the commit/abort markers it writes to the partitions of each
//! transaction.
//!
//! * `state`: one transactional id's state and its legal transitions (pure).
//! * `rules`: what each request does to that state (pure).
//! * `records`: the `__transaction_state` record schemas.

pub mod records;
pub mod rules;
pub mod state;
#[cfg(test)]
mod tests;
