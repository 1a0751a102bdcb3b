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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::BrokerConfig;
    use crate::security::acl::changes::{binding_from_wire, filter_from_wire};

    fn open(dir: &std::path::Path) -> Controller {
        let cfg = BrokerConfig::from_pairs([
            ("log.dirs".to_string(), dir.to_string_lossy().into_owned()),
            ("sluice.metadata.quorum".to_string(), "file".to_string()),
        ])
        .unwrap();
        Controller::open(Arc::new(cfg), None).unwrap()
    }

    #[tokio::test]
    async fn acls_are_written_to_sluice_metadata_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let ctl = open(dir.path());
        let wire = |name: &str, pt: i8, principal: &str, host: &str| {
            binding_from_wire((
                2,
                name.to_string(),
                pt,
                principal.to_string(),
                host.to_string(),
                3,
                3,
            ))
        };
        let creations = vec![
            wire("orders", 3, "User:alice", "*"),
            wire("in\tvoices", 4, "User:b\\ob", "10.0.0.1"),
            wire("", 3, "User:alice", "*"),
        ];
        let results = ctl.create_acls(&creations).await;
        assert!(results[0].is_ok() && results[1].is_ok() && results[2].is_err());
        let before = ctl.acls.snapshot();
        assert_eq!(before.len(), 2);
        drop(ctl);

        let ctl = open(dir.path());
        assert_eq!(ctl.acls.snapshot(), before);
        let deleted = ctl
            .delete_acls(&[filter_from_wire((2, None, 4, None, None, 1, 1))])
            .await;
        assert_eq!(deleted[0].as_ref().unwrap().len(), 1);
        drop(ctl);
        let ctl = open(dir.path());
        let left: Vec<_> = ctl.acls.snapshot().iter().cloned().collect();
        assert_eq!(left, vec![creations[0].clone().unwrap()]);
    }
}
