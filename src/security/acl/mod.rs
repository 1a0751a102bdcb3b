//! Authorization: the ACLs (owned by the controller, which alone changes them: from
//! `sluice-metadata` on one node, from the metadata log's ACL records in a cluster) and the
//! broker's [`Authorizer`], which judges each request's actions against them when
//! `authorizer.class.name` names Kafka's StandardAuthorizer. The decisions themselves are the
//! pure functions of [`authorizer`].

pub mod authorizer;
pub mod changes;
pub mod model;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::{Arc, RwLock};

pub use authorizer::{AuthorizerConfig, Caller};
pub use model::{
    AccessControlEntry, AclBinding, AclFilter, AclOperation, PatternType, Permission,
    ResourcePattern, ResourceType,
};

use crate::security::Principal;

/// The one `authorizer.class.name` Sluice serves: Kafka's KRaft authorizer, whose semantics
/// [`authorizer`] follows (ZooKeeper's AclAuthorizer left Kafka in 4.0).
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// The ACLs in force. The controller is the one writer; readers take a snapshot per decision.
#[derive(Debug, Default)]
pub struct Acls {
    set: RwLock<Arc<BTreeSet<AclBinding>>>,
}

impl Acls {
    /// The ACLs now (a cheap shared snapshot).
    pub fn snapshot(&self) -> Arc<BTreeSet<AclBinding>> {
        self.set.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces every ACL (start-up, a metadata image); whether anything changed.
    pub fn replace_all(&self, acls: BTreeSet<AclBinding>) -> bool {
        let mut g = self.set.write().unwrap_or_else(|e| e.into_inner());
        if **g == acls {
            return false;
        }
        *g = Arc::new(acls);
        true
    }

    /// Adds `b`; false if it was there already.
    pub fn add(&self, b: AclBinding) -> bool {
        let mut g = self.set.write().unwrap_or_else(|e| e.into_inner());
        if g.contains(&b) {
            return false;
        }
        Arc::make_mut(&mut g).insert(b);
        true
    }

    /// Removes `b`; false if it was not there.
    pub fn remove(&self, b: &AclBinding) -> bool {
        let mut g = self.set.write().unwrap_or_else(|e| e.into_inner());
        if !g.contains(b) {
            return false;
        }
        Arc::make_mut(&mut g).remove(b);
        true
    }

    /// The ACLs `f` selects, in order.
    pub fn matching(&self, f: &AclFilter) -> Vec<AclBinding> {
        self.snapshot()
            .iter()
            .filter(|b| f.matches(b))
            .cloned()
            .collect()
    }
}

/// The broker's authorizer: its configuration and a handle on the controller's ACLs.
#[derive(Debug)]
pub struct Authorizer {
    pub config: AuthorizerConfig,
    pub acls: Arc<Acls>,
}

impl Authorizer {
    pub fn new(config: AuthorizerConfig, acls: Arc<Acls>) -> Authorizer {
        Authorizer { config, acls }
    }

    /// Whether `principal` connecting from `host` may do `op` on `(rt, name)`.
    pub fn authorize(
        &self,
        principal: &Principal,
        host: Option<IpAddr>,
        op: AclOperation,
        rt: ResourceType,
        name: &str,
    ) -> bool {
        let acls = self.acls.snapshot();
        let caller = Caller { principal, host };
        authorizer::authorize(acls.iter(), &self.config, caller, op, rt, name)
    }

    /// Whether `principal` may do `op` on some resource of type `rt`.
    pub fn authorize_by_type(
        &self,
        principal: &Principal,
        host: Option<IpAddr>,
        op: AclOperation,
        rt: ResourceType,
    ) -> bool {
        let acls = self.acls.snapshot();
        let caller = Caller { principal, host };
        authorizer::authorize_by_type(acls.iter(), &self.config, caller, op, rt)
    }

    /// The authorized-operations bit field of `(rt, name)` for `principal`.
    pub fn authorized_operations(
        &self,
        principal: &Principal,
        host: Option<IpAddr>,
        rt: ResourceType,
        name: &str,
    ) -> i32 {
        let acls = self.acls.snapshot();
        let caller = Caller { principal, host };
        authorizer::authorized_operations(acls.iter(), &self.config, caller, rt, name)
    }
}
