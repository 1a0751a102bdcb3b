//! Creating an internal topic on first use (`__transaction_state`, `__share_group_state`), as
//! Kafka's coordinators do: on one node by the controller, in a cluster through the active
//! controller (COORDINATOR_NOT_AVAILABLE until enough brokers are up for its replication
//! factor).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::ResponseError as E;
use tracing::info;

use crate::broker::Broker;
use crate::cluster::controller::NewTopic;
use crate::cluster::{TopicError, TopicInfo};

/// What an internal topic is created with.
pub struct InternalTopic<'a> {
    pub name: &'a str,
    pub num_partitions: i32,
    /// In a cluster; one on one node.
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
}

/// Topic configs from (name, value) pairs.
pub fn configs(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// The topic, created if it does not exist yet.
pub async fn ensure(b: &Broker, t: InternalTopic<'_>) -> Result<Arc<TopicInfo>, i16> {
    if let Some(topic) = b.controller.topic(t.name) {
        return Ok(topic);
    }
    let created = match b.cluster() {
        Some(c) => {
            let create = crate::cluster::control::active::CreateTopic {
                name: t.name.to_string(),
                num_partitions: t.num_partitions,
                replication_factor: t.replication_factor,
                assignments: None,
                configs: t.configs,
            };
            c.create_topics(vec![create], false)
                .await
                .pop()
                .unwrap_or(Err(TopicError::UnknownTopic))
                .map(|_| ())
        }
        None => b
            .controller
            .create_topic(NewTopic {
                name: t.name.to_string(),
                num_partitions: t.num_partitions,
                replication_factor: 1,
                configs: t.configs,
            })
            .await
            .map(|_| ()),
    };
    match created {
        Ok(()) | Err(TopicError::AlreadyExists(_)) => {}
        Err(e) => info!("cannot create {} yet: {e:?}", t.name),
    }
    b.controller
        .topic(t.name)
        .ok_or(E::CoordinatorNotAvailable.code())
}
