//! The controller's decisions, as pure functions of the metadata image: where replicas go
//! (`placement`), how many partitions a topic may gain (`new_partitions`), who leads
//! (`election`), how a replica set moves (`reassignment`), and the
//! active controller's answers to brokers and admin requests (`active`). The quorum shell
//! commits what they return.

pub mod active;
pub mod election;
pub mod new_partitions;
pub mod placement;
pub mod reassignment;

pub use active::{ActiveController, ControlConfig, ControlError};
