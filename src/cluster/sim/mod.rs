//! A deterministic simulator of one replicated partition: three brokers, the controller and a
//! producer exchange messages over a simulated network with seeded delays, drops, link cuts,
//! broker crashes (kill -9: the log survives, memory does not) and controller fail-overs. It
//! drives the real decision code — `control::ActiveController`, `replication::LeaderState`,
//! the follower's truncation point and the leader epoch cache — and checks, after every
//! step, the invariants replication must keep:
//!
//! - at most one leader per leader epoch;
//! - every broker's high watermark only grows (within one incarnation) and no truncation
//!   cuts below it;
//! - every broker's log below its high watermark agrees with one committed sequence, so no
//!   replica serves a record below the high watermark that another does not hold;
//! - every record the producer saw acknowledged is in that committed sequence at its offset,
//!   and every newly elected leader holds the whole committed sequence.
//!
//! The controller quorum is modelled as one linearizable log (that is what Raft provides);
//! its fail-over loses the active controller's soft state (broker sessions).

mod replica;
mod world;

#[cfg(test)]
mod tests;

pub use world::{Faults, Outcome, World};
