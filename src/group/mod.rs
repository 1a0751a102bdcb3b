//! Consumer groups: Kafka's classic group coordinator and the committed offsets it keeps in
//! `__consumer_offsets`.
//!
//! * `coordinator`: the coordinator (group map, one lock per group, loading); its submodules
//!   `membership` (joins, syncs, heartbeats, leaves, rebalance and session timers), `offsets`
//!   (commit, fetch, delete) and `admin` (describe, list, delete groups, offset expiry).
//! * `state`: a group's data (state, members, generation, offsets).
//! * `records`: the `__consumer_offsets` key and value schemas.
//! * `store`: the append interface, the broker's implementation over the partition log, and
//!   loading at start-up.

pub mod coordinator;
pub mod records;
pub mod state;
pub mod store;

#[cfg(test)]
mod tests;

pub use coordinator::{Coordinator, GroupConfig};
pub use state::State;
