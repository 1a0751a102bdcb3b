//! Cluster state: the controller (which topics and partitions exist, who leads them at which
//! epoch, persisted across restarts) and the partition replicas it hands out. One broker is a
//! cluster of one: it is the controller, every partition's leader, and the whole ISR.

pub mod controller;
pub mod partition;
pub mod quorum;
pub mod topic_config;

pub use controller::{Controller, TopicError, TopicInfo};
pub use partition::{Partition, PartitionError};
