//! Dynamic group configs on one node: a group's validated configs replace its old ones in
//! the controller's [`GroupConfigs`](crate::group::configs::GroupConfigs) and are written to
//! `sluice-metadata` under the writer lock, like every other metadata change.

use std::collections::BTreeMap;

use tracing::info;

use super::{Controller, TopicError};

impl Controller {
    /// Makes `set` the configs of `group` (empty: none) and persists them; on a failed write
    /// the old ones stay.
    pub async fn set_group_configs(
        &self,
        group: &str,
        set: BTreeMap<String, String>,
    ) -> Result<(), TopicError> {
        let _w = self.writer.lock().await;
        let old = self.group_configs.of(group);
        self.group_configs.replace(group, set.clone());
        let written = {
            let image = self.image.read().unwrap();
            self.write_metadata_file(&image)
        };
        if let Err(e) = written {
            self.group_configs.replace(group, old);
            return Err(TopicError::Storage(format!("{e:#}")));
        }
        info!(group, configs = ?set, "altered group configs");
        Ok(())
    }
}
