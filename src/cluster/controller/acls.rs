//! ACLs on one node: CreateAcls and DeleteAcls are decided against the controller's
//! [`Acls`](crate::security::acl::Acls) (`security::acl::changes`), applied, and written to
//! `sluice-metadata` under the writer lock before the answer, like every other metadata
//! change.

use tracing::info;

use super::Controller;
use crate::security::acl::AclBinding;
use crate::security::acl::changes::{self, AclError};

impl Controller {
    /// Creates the valid, new ACLs; on a failed write nothing changes and every accepted
    /// creation gets UNKNOWN_SERVER_ERROR.
    pub async fn create_acls(
        &self,
        creations: &[Result<AclBinding, AclError>],
    ) -> Vec<Result<(), AclError>> {
        let _w = self.writer.lock().await;
        let before = self.acls.snapshot();
        let (added, mut results) = changes::plan_create(&before, creations);
        if added.is_empty() {
            return results;
        }
        for b in &added {
            self.acls.add(b.clone());
        }
        if let Err(e) = self.persist() {
            self.acls.replace_all((*before).clone());
            for r in results.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(storage_error(&e));
            }
            return results;
        }
        for b in &added {
            info!(acl = ?b, "ACL created");
        }
        results
    }

    /// Deletes the ACLs each filter selects; on a failed write nothing changes and every
    /// valid filter gets UNKNOWN_SERVER_ERROR.
    pub async fn delete_acls(
        &self,
        filters: &[Result<crate::security::acl::AclFilter, AclError>],
    ) -> Vec<Result<Vec<AclBinding>, AclError>> {
        let _w = self.writer.lock().await;
        let before = self.acls.snapshot();
        let (removed, mut results) = changes::plan_delete(before.iter(), filters);
        if removed.is_empty() {
            return results;
        }
        for b in &removed {
            self.acls.remove(b);
        }
        if let Err(e) = self.persist() {
            self.acls.replace_all((*before).clone());
            for r in results.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(storage_error(&e));
            }
            return results;
        }
        for b in &removed {
            info!(acl = ?b, "ACL deleted");
        }
        results
    }

    fn persist(&self) -> anyhow::Result<()> {
        let image = self.image.read().unwrap();
        self.write_metadata_file(&image)
    }
}

fn storage_error(e: &anyhow::Error) -> AclError {
    (
        kafka_protocol::ResponseError::UnknownServerError.code(),
        format!("{e:#}"),
    )
}
