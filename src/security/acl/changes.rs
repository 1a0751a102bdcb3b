//! What CreateAcls and DeleteAcls change, decided against the ACLs in force as Kafka's
//! AclControlManager decides: pure functions shared by the one-node controller (which then
//! writes `sluice-metadata`) and the active controller of a cluster (which then commits ACL
//! records). Requests arrive as wire codes; an unknown code is an error of that item only.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;

use super::model::{
    AccessControlEntry, AclBinding, AclFilter, AclOperation, PatternType, Permission,
    ResourcePattern, ResourceType,
};

/// An error of one creation or one filter: (error code, message).
pub type AclError = (i16, String);

/// One ACL or filter as the wire carries it: (resource type, resource name, pattern type,
/// principal, host, operation, permission type); the name, principal and host of a filter
/// may be null.
pub type WireAcl<S> = (i8, S, i8, S, S, i8, i8);

fn invalid(msg: impl Into<String>) -> AclError {
    (ResponseError::InvalidRequest.code(), msg.into())
}

/// The ACL a CreateAcls creation asks for; unknown codes are INVALID_REQUEST.
pub fn binding_from_wire(w: WireAcl<String>) -> Result<AclBinding, AclError> {
    let (rt, name, pt, principal, host, op, perm) = w;
    let resource_type =
        ResourceType::from_code(rt).ok_or_else(|| invalid("Invalid resource type: UNKNOWN"))?;
    let pattern_type =
        PatternType::from_code(pt).ok_or_else(|| invalid("Invalid pattern type: UNKNOWN"))?;
    let operation =
        AclOperation::from_code(op).ok_or_else(|| invalid("Invalid operation: UNKNOWN"))?;
    let permission =
        Permission::from_code(perm).ok_or_else(|| invalid("Invalid permission type: UNKNOWN"))?;
    let b = AclBinding {
        pattern: ResourcePattern {
            resource_type,
            name,
            pattern_type,
        },
        entry: AccessControlEntry {
            principal,
            host,
            operation,
            permission,
        },
    };
    match b.invalid() {
        Some(msg) => Err(invalid(msg)),
        None => Ok(b),
    }
}

/// The filter a DescribeAcls or DeleteAcls request carries; unknown codes are
/// INVALID_REQUEST with Kafka's messages.
pub fn filter_from_wire(w: WireAcl<Option<String>>) -> Result<AclFilter, AclError> {
    let (rt, name, pt, principal, host, op, perm) = w;
    let (Some(resource_type), Some(pattern_type)) =
        (ResourceType::from_code(rt), PatternType::from_code(pt))
    else {
        return Err(invalid("Unknown patternFilter."));
    };
    let (Some(operation), Some(permission)) =
        (AclOperation::from_code(op), Permission::from_code(perm))
    else {
        return Err(invalid("Unknown entryFilter."));
    };
    Ok(AclFilter {
        resource_type,
        name,
        pattern_type,
        principal,
        host,
        operation,
        permission,
    })
}

/// The ACL as wire codes (the inverse of [`binding_from_wire`] for valid ACLs).
pub fn binding_to_wire(b: &AclBinding) -> WireAcl<String> {
    (
        b.pattern.resource_type.code(),
        b.pattern.name.clone(),
        b.pattern.pattern_type.code(),
        b.entry.principal.clone(),
        b.entry.host.clone(),
        b.entry.operation.code(),
        b.entry.permission.code(),
    )
}

/// CreateAcls against `existing`: the ACLs to add (each once, none already there) and one
/// result per creation, in order. Creating an ACL that exists succeeds without a change.
pub fn plan_create(
    existing: &BTreeSet<AclBinding>,
    creations: &[Result<AclBinding, AclError>],
) -> (Vec<AclBinding>, Vec<Result<(), AclError>>) {
    let mut added: Vec<AclBinding> = Vec::new();
    let results = creations
        .iter()
        .map(|c| {
            let b = c.as_ref().map_err(Clone::clone)?;
            if !existing.contains(b) && !added.contains(b) {
                added.push(b.clone());
            }
            Ok(())
        })
        .collect();
    (added, results)
}

/// DeleteAcls against `existing`: the ACLs to remove (each once, though several filters may
/// select it) and, per filter in order, the ACLs it selected or its error.
pub fn plan_delete<'a>(
    existing: impl IntoIterator<Item = &'a AclBinding> + Clone,
    filters: &[Result<AclFilter, AclError>],
) -> (Vec<AclBinding>, Vec<Result<Vec<AclBinding>, AclError>>) {
    let mut removed: BTreeSet<AclBinding> = BTreeSet::new();
    let results = filters
        .iter()
        .map(|f| {
            let f = f.as_ref().map_err(Clone::clone)?;
            let hit: Vec<AclBinding> = existing
                .clone()
                .into_iter()
                .filter(|b| f.matches(b))
                .cloned()
                .collect();
            removed.extend(hit.iter().cloned());
            Ok(hit)
        })
        .collect();
    (removed.into_iter().collect(), results)
}

/// DescribeAcls' answer: the ACLs `matching` selected, grouped by resource pattern.
pub fn group_by_pattern(
    matching: impl IntoIterator<Item = AclBinding>,
) -> Vec<(ResourcePattern, Vec<AccessControlEntry>)> {
    let mut out: std::collections::BTreeMap<ResourcePattern, Vec<AccessControlEntry>> =
        Default::default();
    for b in matching {
        out.entry(b.pattern).or_default().push(b.entry);
    }
    out.into_iter().collect()
}
