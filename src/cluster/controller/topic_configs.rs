//! Changing configs on one node (IncrementalAlterConfigs, AlterConfigs): a topic's
//! `TopicInfo` is replaced by one with the new configs, or the dynamic broker configs are
//! replaced and every topic's settings recomputed, and the metadata file rewritten, under the
//! controller's writer lock. The partitions take the new settings at once (their logs roll,
//! flush and apply retention by them from the next append or retention pass).

use std::collections::BTreeMap;
use std::sync::Arc;

use tracing::info;

use super::{Controller, TopicError, TopicInfo};
use crate::cluster::topic_config::{self, EffectiveTopicConfig};
use crate::config::dynamic;

impl TopicInfo {
    /// This topic with other configs and settings, the same partitions.
    fn with_settings(
        &self,
        configs: BTreeMap<String, String>,
        effective: EffectiveTopicConfig,
    ) -> TopicInfo {
        TopicInfo {
            name: self.name.clone(),
            id: self.id,
            partitions: self.partitions.clone(),
            partition_count: self.partition_count,
            configs,
            effective,
            internal: self.internal,
        }
    }

    /// Gives every partition held here the topic's settings.
    pub fn apply_settings(&self) {
        for p in &self.partitions {
            p.apply_topic_config(&self.effective);
        }
    }
}

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
            if let Some(v) = value {
                topic_config::validate(key, v).map_err(TopicError::InvalidConfig)?;
            }
        }
        dynamic::apply_changes(&mut configs, changes);
        let effective = topic_config::effective(&self.defaults().merged, &configs);
        let topic = Arc::new(old.with_settings(configs, effective));
        self.replace_topic(&old, topic.clone())
            .map_err(|e| TopicError::Storage(format!("{e:#}")))?;
        topic.apply_settings();
        info!(topic = %topic.name, ?changes, "altered topic configs");
        Ok(())
    }

    /// Sets (`Some`) or deletes (`None`) dynamic broker configs of this broker (`broker` =
    /// its id) or the cluster-wide defaults (`None`); the caller validated them. Topics
    /// without an override of their own follow at once.
    pub async fn alter_broker_configs(
        &self,
        broker: Option<i32>,
        changes: &[(String, Option<String>)],
    ) -> Result<(), TopicError> {
        let _w = self.writer.lock().await;
        let old = self.defaults();
        let mut configs = old.dynamic.clone();
        dynamic::apply_changes(configs.map_mut(broker), changes);
        self.set_defaults(configs);
        let written = {
            let image = self.image.read().unwrap();
            self.write_metadata_file(&image)
        };
        if let Err(e) = written {
            self.set_defaults(old.dynamic.clone());
            return Err(TopicError::Storage(format!("{e:#}")));
        }
        self.refresh_settings();
        info!(?broker, ?changes, "altered dynamic broker configs");
        Ok(())
    }

    /// Recomputes every topic's settings from its configs and the broker defaults now in
    /// force, publishing and applying those that changed.
    pub fn refresh_settings(&self) {
        let merged = self.defaults().merged.clone();
        for t in self.topics() {
            let effective = topic_config::effective(&merged, &t.configs);
            if effective == t.effective {
                continue;
            }
            let topic = Arc::new(t.with_settings(t.configs.clone(), effective));
            self.install_topic(topic.clone());
            topic.apply_settings();
        }
    }
}
