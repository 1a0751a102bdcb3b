//! SCRAM credentials on one node: AlterUserScramCredentials' accepted changes are applied to
//! the controller's [`ScramStore`](crate::security::scram_store::ScramStore) and written to
//! `sluice-metadata` under the writer lock, like every other metadata change.

use tracing::info;

use super::Controller;
use crate::security::scram_store::{self, Change, Deletion, Upsertion, UserResult};

impl Controller {
    /// Checks and applies the changes; on a failed write nothing changes and every accepted
    /// user gets UNKNOWN_SERVER_ERROR.
    pub async fn alter_scram(
        &self,
        deletions: &[Deletion],
        upsertions: &[Upsertion],
    ) -> Vec<UserResult> {
        let _w = self.writer.lock().await;
        let before = self.scram.all();
        let (changes, mut results) = scram_store::plan_alter(&before, deletions, upsertions);
        if changes.is_empty() {
            return results;
        }
        self.scram.apply(&changes);
        let written = {
            let image = self.image.read().unwrap();
            self.write_metadata_file(&image)
        };
        if let Err(e) = written {
            self.scram.replace_all(before);
            for r in results.iter_mut().filter(|r| r.1 == 0) {
                r.1 = kafka_protocol::ResponseError::UnknownServerError.code();
                r.2 = Some(format!("{e:#}"));
            }
            return results;
        }
        for c in &changes {
            match c {
                Change::Upsert { user, mech, .. } => {
                    info!(user, mechanism = mech.name(), "SCRAM credential set")
                }
                Change::Delete { user, mech } => {
                    info!(user, mechanism = mech.name(), "SCRAM credential deleted")
                }
            }
        }
        results
    }
}
