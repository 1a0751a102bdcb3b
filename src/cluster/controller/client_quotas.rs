//! Client quotas on one node: AlterClientQuotas' validated changes are applied to the
//! controller's [`ClientQuotas`](crate::quota::ClientQuotas) and written to `sluice-metadata`
//! under the writer lock, like every other metadata change.

use std::collections::BTreeMap;

use tracing::info;

use super::{Controller, TopicError};
use crate::quota::QuotaEntity;

impl Controller {
    /// Applies `changes` (key → value, `None` removes the key) to each entity and persists
    /// them; on a failed write the old quotas stay.
    pub async fn alter_client_quotas(
        &self,
        changes: Vec<(QuotaEntity, BTreeMap<String, Option<f64>>)>,
    ) -> Result<(), TopicError> {
        let _w = self.writer.lock().await;
        let old = self.client_quotas.all();
        for (entity, set) in &changes {
            self.client_quotas.apply(entity, set);
        }
        let written = {
            let image = self.image.read().unwrap();
            self.write_metadata_file(&image)
        };
        if let Err(e) = written {
            self.client_quotas.replace_all(old);
            return Err(TopicError::Storage(format!("{e:#}")));
        }
        for (entity, set) in &changes {
            info!(%entity, changes = ?set, "altered client quotas");
        }
        Ok(())
    }
}
