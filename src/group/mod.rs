//! Consumer groups: Kafka's classic group coordinator and the committed offsets it keeps in
//! `__consumer_offsets`.
//!
//! * `coordinator`: the coordinator (group map, one lock per group, loading); its submodules
//!   `membership` (joins, syncs, heartbeats, leaves: carries out what `group::membership`
//!   decides, with the rebalance and session timers and the writes),
//!   `consumer` (ConsumerGroupHeartbeat), `migration` (classic members in consumer groups,
//!   upgrades and downgrades), `offsets`
//!   (commit, fetch, delete) and `admin` (describe, list, delete groups, offset expiry).
//! * `configs`: dynamic group configs (resource type GROUP): keys, validation, the owner.
//! * `consumer`: KIP-848 consumer groups: assignors, reconciliation, heartbeats, classic
//!   members and the conversions between classic and consumer groups, their records in
//!   `__consumer_offsets` (pure).
//! * `membership`: the classic group's state machine (join, sync, heartbeat, leave, rebalance,
//!   what timers do when they fire) as pure decisions: inputs with the time as a value, the
//!   answer and the actions to carry out (pure).
//! * `state`: a group's data (state, members, generation, offsets).
//! * `offset_state`: a group's committed offsets and those pending in open transactions.
//! * `records`: the `__consumer_offsets` key and value schemas.
//! * `store`: the append interface and the broker's implementation over the partition log.
//! * `replay`: reading `__consumer_offsets` back into groups (start-up, partition loads),
//!   transaction markers included.
//! * `loader`: in a cluster, loading and unloading `__consumer_offsets` partitions as this
//!   broker's leaderships move.

pub mod consumer;
pub mod coordinator;
pub mod loader;
pub mod membership;
pub mod offset_state;
pub mod records;
pub mod replay;
pub mod state;
pub mod store;

#[cfg(test)]
mod cluster_tests;
#[cfg(test)]
mod consumer_tests;
#[cfg(test)]
mod migration_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod txn_tests;

pub use coordinator::{Coordinator, GroupConfig};
pub use state::State;
