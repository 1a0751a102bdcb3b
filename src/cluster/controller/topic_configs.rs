//! Changing a topic's configs on one node (IncrementalAlterConfigs): the topic's `TopicInfo`
//! is replaced by one with the new configs and the metadata file rewritten, under the
//! controller's writer lock. Its partitions are kept as they are; the settings their logs
//! were opened with (segment size, retention, ...) apply from the next start, while
//! min.insync.replicas applies at once.

use std::collections::BTreeMap;
use std::sync::Arc;

use tracing::info;

use super::{Controller, TopicError, TopicInfo};
use crate::cluster::topic_config;

impl Controller {
    /// Sets (`Some`) or deletes (`None`) configs of topic `name`; the values are validated.
    pub async fn alter_topic_configs(
        &self,
        name: &str,
        changes: &[(String, Option<String>)],
    ) -> Result<(), TopicError> {
        let _w = self.writer.lock().await;
        let old = self.topic(name).ok_or(TopicError::UnknownTopic)?;
        let mut configs: BTreeMap<String, String> = old.configs.clone();
        for (key, value) in changes {
            match value {
                Some(v) => {
                    topic_config::validate(key, v).map_err(TopicError::InvalidConfig)?;
                    configs.insert(key.clone(), v.clone());
                }
                None => {
                    configs.remove(key);
                }
            }
        }
        let effective = topic_config::effective(&self.config, &configs);
        for p in &old.partitions {
            p.set_min_insync_replicas(effective.min_insync_replicas);
        }
        let topic = Arc::new(TopicInfo {
            name: old.name.clone(),
            id: old.id,
            partitions: old.partitions.clone(),
            partition_count: old.partition_count,
            configs,
            effective,
            internal: old.internal,
        });
        if let Err(e) = self.replace_topic(&old, topic.clone()) {
            for p in &old.partitions {
                p.set_min_insync_replicas(old.effective.min_insync_replicas);
            }
            return Err(TopicError::Storage(format!("{e:#}")));
        }
        info!(topic = %topic.name, ?changes, "altered topic configs");
        Ok(())
    }
}
