//! The decisions of Kafka's StandardAuthorizer over a set of ACLs: pure functions of the ACLs,
//! the configuration, the principal, its host and the action, so that they can be tested
//! without a broker.
//!
//! - `super.users` may do anything.
//! - The ACLs of a resource are its literal ones, the literal wildcard `*` of its type and the
//!   prefixed ones whose prefix starts its name; those whose principal is the caller's or
//!   `User:*` and whose host is the caller's address or `*` apply.
//! - A DENY for the operation (or ALL) wins over any ALLOW. An ALLOW for the operation (or ALL)
//!   allows; READ, WRITE, DELETE and ALTER imply DESCRIBE, and ALTER_CONFIGS implies
//!   DESCRIBE_CONFIGS, for ALLOW only.
//! - With no ACL at all on the resource (whoever it names), `allow.everyone.if.no.acl.found`
//!   decides; otherwise the answer is no.

use std::collections::BTreeSet;
use std::net::IpAddr;

use super::model::{
    AclBinding, AclOperation, PatternType, Permission, ResourceType, WILDCARD, WILDCARD_PRINCIPAL,
};
use crate::security::Principal;

/// `super.users` and `allow.everyone.if.no.acl.found`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// Principals as `type:name`.
    pub super_users: BTreeSet<String>,
    pub allow_everyone_if_no_acl_found: bool,
}

/// Who asks, from where.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    pub principal: &'a Principal,
    /// None for requests that did not come from a socket (they match only host `*`).
    pub host: Option<IpAddr>,
}

impl Caller<'_> {
    fn principal_matches(&self, acl_principal: &str, me: &str) -> bool {
        acl_principal == WILDCARD_PRINCIPAL || acl_principal == me
    }

    fn host_matches(&self, acl_host: &str) -> bool {
        if acl_host == WILDCARD {
            return true;
        }
        match self.host {
            None => false,
            Some(ip) => match acl_host.parse::<IpAddr>() {
                Ok(a) => a == ip,
                Err(_) => false,
            },
        }
    }
}

/// Whether `b`'s pattern covers the resource `(rt, name)`.
fn covers(b: &AclBinding, rt: ResourceType, name: &str) -> bool {
    let p = &b.pattern;
    p.resource_type == rt
        && match p.pattern_type {
            PatternType::Literal => p.name == name || p.name == WILDCARD,
            PatternType::Prefixed => name.starts_with(p.name.as_str()),
            _ => false,
        }
}

/// Whether an ACL of operation `acl_op` and permission `perm` speaks of `op`.
fn operation_matches(acl_op: AclOperation, perm: Permission, op: AclOperation) -> bool {
    use AclOperation::*;
    if acl_op == All || acl_op == op {
        return true;
    }
    if perm != Permission::Allow {
        return false;
    }
    match op {
        Describe => matches!(acl_op, Read | Write | Delete | Alter),
        DescribeConfigs => acl_op == AlterConfigs,
        _ => false,
    }
}

/// Whether `caller` may do `op` on the resource `(rt, name)`.
pub fn authorize<'a>(
    acls: impl IntoIterator<Item = &'a AclBinding>,
    cfg: &AuthorizerConfig,
    caller: Caller<'_>,
    op: AclOperation,
    rt: ResourceType,
    name: &str,
) -> bool {
    let me = caller.principal.to_string();
    if cfg.super_users.contains(&me) {
        return true;
    }
    let mut any_for_resource = false;
    let mut allowed = false;
    for b in acls {
        if !covers(b, rt, name) {
            continue;
        }
        any_for_resource = true;
        let e = &b.entry;
        if !caller.principal_matches(&e.principal, &me) || !caller.host_matches(&e.host) {
            continue;
        }
        if !operation_matches(e.operation, e.permission, op) {
            continue;
        }
        match e.permission {
            Permission::Deny => return false,
            Permission::Allow => allowed = true,
            Permission::Any => {}
        }
    }
    allowed || (!any_for_resource && cfg.allow_everyone_if_no_acl_found)
}

/// Whether `caller` may do `op` on at least one resource of type `rt`
/// (`Authorizer.authorizeByResourceType`): what InitProducerId without a transactional id and
/// a few other requests ask. A super user, or a caller allowed on a resource nobody named,
/// may; otherwise some ALLOW ACL for exactly `op` (or ALL) must name a literal or prefix that
/// no DENY of the same caller covers, and no DENY may name the literal wildcard.
pub fn authorize_by_type<'a>(
    acls: impl IntoIterator<Item = &'a AclBinding> + Clone,
    cfg: &AuthorizerConfig,
    caller: Caller<'_>,
    op: AclOperation,
    rt: ResourceType,
) -> bool {
    // A name no ACL can have been written for by accident; Kafka probes with "hardcode".
    if authorize(acls.clone(), cfg, caller, op, rt, "hardcode") {
        return true;
    }
    let me = caller.principal.to_string();
    let mut deny_literal = BTreeSet::new();
    let mut deny_prefix = BTreeSet::new();
    let mut allow_literal = BTreeSet::new();
    let mut allow_prefix = BTreeSet::new();
    for b in acls {
        let (p, e) = (&b.pattern, &b.entry);
        if p.resource_type != rt
            || !caller.principal_matches(&e.principal, &me)
            || !caller.host_matches(&e.host)
            || (e.operation != op && e.operation != AclOperation::All)
        {
            continue;
        }
        let set = match (e.permission, p.pattern_type) {
            (Permission::Deny, PatternType::Literal) => &mut deny_literal,
            (Permission::Deny, PatternType::Prefixed) => &mut deny_prefix,
            (Permission::Allow, PatternType::Literal) => &mut allow_literal,
            (Permission::Allow, PatternType::Prefixed) => &mut allow_prefix,
            _ => continue,
        };
        set.insert(p.name.as_str());
    }
    if deny_literal.contains(WILDCARD) {
        return false;
    }
    let denied_by_prefix = |name: &str| deny_prefix.iter().any(|d: &&str| name.starts_with(*d));
    allow_prefix.iter().any(|a| !denied_by_prefix(a))
        || allow_literal
            .iter()
            .any(|a| *a == WILDCARD || (!deny_literal.contains(a) && !denied_by_prefix(a)))
}

/// The operations `caller` may do on `(rt, name)` among those Kafka reports for `rt`, as the
/// bit field of the authorized-operations fields (bit `code` per operation).
pub fn authorized_operations<'a>(
    acls: impl IntoIterator<Item = &'a AclBinding> + Clone,
    cfg: &AuthorizerConfig,
    caller: Caller<'_>,
    rt: ResourceType,
    name: &str,
) -> i32 {
    rt.supported_operations()
        .iter()
        .filter(|op| authorize(acls.clone(), cfg, caller, **op, rt, name))
        .fold(0, |bits, op| bits | (1 << op.code()))
}

/// Every operation Kafka reports for `rt` (what a broker without an authorizer answers).
pub fn all_operations(rt: ResourceType) -> i32 {
    rt.supported_operations()
        .iter()
        .fold(0, |bits, op| bits | (1 << op.code()))
}
