//! The internal topics the coordinators keep their state in (`__consumer_offsets`,
//! `__transaction_state`, `__share_group_state`), seen through [`InternalTopics`]: find one,
//! or create it on first use as Kafka's coordinators do (on one node by the controller, in a
//! cluster through the active controller: COORDINATOR_NOT_AVAILABLE until enough brokers are
//! up for its replication factor). The coordinators append to and replay the partitions it
//! hands them themselves; the broker implements it (`broker::BrokerTopics`).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::cluster::TopicInfo;

/// What an internal topic is created with.
pub struct InternalTopic<'a> {
    pub name: &'a str,
    pub num_partitions: i32,
    /// In a cluster; one on one node.
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
}

impl<'a> InternalTopic<'a> {
    /// `name` with `num_partitions`, `replication_factor` and the configs of (name, value)
    /// `pairs`.
    pub fn new(
        name: &'a str,
        num_partitions: i32,
        replication_factor: i16,
        pairs: &[(&str, String)],
    ) -> InternalTopic<'a> {
        let configs = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        InternalTopic {
            name,
            num_partitions,
            replication_factor,
            configs,
        }
    }
}

pub type EnsureFuture<'a> = Pin<Box<dyn Future<Output = Result<Arc<TopicInfo>, i16>> + Send + 'a>>;

/// The internal topics of this broker, as a coordinator needs them.
pub trait InternalTopics: Send + Sync {
    /// The topic `name` if it exists (this broker's replicas of its partitions).
    fn topic(&self, name: &str) -> Option<Arc<TopicInfo>>;

    /// The topic, created if it does not exist yet; else the Kafka error code to answer
    /// with (COORDINATOR_NOT_AVAILABLE).
    fn ensure<'a>(&'a self, t: InternalTopic<'a>) -> EnsureFuture<'a>;
}
