//! Replication decisions, apart from the I/O that carries them out: a partition leader's view
//! of its followers (`leader`: ISR changes, high watermark, acks=all) and a follower's
//! truncation point when it follows a new leader (`follower`).

pub mod follower;
pub mod leader;

pub use leader::{AckStatus, LeaderState};
