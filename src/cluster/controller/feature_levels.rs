//! Feature levels on one node: UpdateFeatures' levels are kept by the controller and written
//! to `sluice-metadata` under its writer lock, like every other metadata change.

use std::collections::BTreeMap;

use tracing::info;

use super::{Controller, TopicError};
use crate::cluster::features;

impl Controller {
    /// The finalized feature levels (those above 0) and the finalized features epoch.
    pub fn feature_levels(&self) -> (BTreeMap<String, i16>, i64) {
        let f = self.features.read().unwrap();
        (features::finalized(&f.overrides), 1 + f.changes)
    }

    /// Records `levels` (decided by `features::decide`) and persists them.
    pub async fn set_feature_levels(&self, levels: &[(String, i16)]) -> Result<(), TopicError> {
        let _w = self.writer.lock().await;
        let old = self.features.read().unwrap().clone();
        {
            let mut f = self.features.write().unwrap();
            for (name, level) in levels {
                f.overrides.insert(name.clone(), *level);
            }
            f.changes += 1;
        }
        let written = {
            let image = self.image.read().unwrap();
            self.write_metadata_file(&image)
        };
        if let Err(e) = written {
            *self.features.write().unwrap() = old;
            return Err(TopicError::Storage(format!("{e:#}")));
        }
        info!(?levels, "updated feature levels");
        Ok(())
    }
}
