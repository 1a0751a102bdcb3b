//! Cluster state: the controller (which topics and partitions exist, who leads them at which
//! epoch, persisted across restarts) and the partition replicas it hands out. One broker is a
//! cluster of one: it is the controller, every partition's leader, and the whole ISR.
//!
//! The replicated cluster is built from parts that decide without doing I/O: `metadata` (the
//! records of the metadata log and the image they give), `control` (the active controller's
//! decisions) and `replication` (a partition leader's ISR and high watermark, a follower's
//! truncation point). `fetcher` is the follower's I/O: one task per leader broker that
//! truncates and fetches over Kafka's wire protocol.

pub mod checkpoints;
pub mod control;
pub mod controller;
pub mod errors;
pub mod features;
pub mod fetcher;
pub mod group_config;
pub mod internal_topic;
pub mod log_cleaner;
pub mod metadata;
pub mod node;
pub mod partition;
pub mod quorum;
pub mod replication;
#[cfg(test)]
mod sim;
pub mod topic_config;

pub use controller::{Controller, TopicError, TopicInfo};
pub use partition::{Partition, PartitionError};
