//! DeleteAcls (key 31), versions 1-3 (Kafka 4 dropped v0): `kafka-acls --remove`,
//! `Admin.deleteAcls`.
//!
//! Behavior, as Kafka 4.4's broker and AclControlManager answer:
//! - Without an authorizer every filter fails with SECURITY_DISABLED "No Authorizer is
//!   configured."; without ALTER on the cluster with CLUSTER_AUTHORIZATION_FAILED; a filter
//!   with an unknown code gets INVALID_REQUEST and the others still go ahead.
//! - Each filter answers the ACLs it selected and deleted (an ACL two filters select is
//!   deleted once and listed under both).
//! - One node: the controller removes them and persists `sluice-metadata` before the answer.
//!   A cluster: the active controller commits RemoveAccessControlEntry records; the answer
//!   waits until this broker no longer enforces them.
//!
//! Version notes: v1 added the pattern type filter (KIP-290), v2 is flexible.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{ApiKey, DeleteAclsRequest, DeleteAclsResponse};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;
use crate::security::acl::changes::{self, AclError};
use crate::security::acl::{AclBinding, AclOperation};

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::DeleteAcls,
    min: 1,
    max: 3,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DeleteAclsRequest = super::decode(&ctx, body)?;
    let results: Vec<Result<Vec<AclBinding>, AclError>> =
        match super::create_acls::refusal_for(&b, &ctx, AclOperation::Alter) {
            Some(e) => vec![Err(e); req.filters.len()],
            None => {
                let filters: Vec<_> = req
                    .filters
                    .iter()
                    .map(|f| {
                        changes::filter_from_wire((
                            f.resource_type_filter,
                            f.resource_name_filter.as_ref().map(|s| s.to_string()),
                            f.pattern_type_filter,
                            f.principal_filter.as_ref().map(|s| s.to_string()),
                            f.host_filter.as_ref().map(|s| s.to_string()),
                            f.operation,
                            f.permission_type,
                        ))
                    })
                    .collect();
                let n = filters.len();
                b.node()
                    .delete_acls(filters)
                    .await
                    .unwrap_or_else(|e| vec![Err(super::create_acls::controller_error(&e)); n])
            }
        };
    let mut resp = DeleteAclsResponse::default();
    resp.filter_results = results.into_iter().map(filter_result).collect();
    super::respond(&ctx, &resp)
}

fn filter_result(r: Result<Vec<AclBinding>, AclError>) -> DeleteAclsFilterResult {
    let mut out = DeleteAclsFilterResult::default();
    match r {
        Err((code, msg)) => {
            out.error_code = code;
            out.error_message = Some(StrBytes::from_string(msg));
        }
        Ok(acls) => {
            // Kafka leaves the message null on success, here and in each matching ACL.
            out.error_message = None;
            out.matching_acls = acls
                .into_iter()
                .map(|a| {
                    let mut m = DeleteAclsMatchingAcl::default();
                    m.error_message = None;
                    m.resource_type = a.pattern.resource_type.code();
                    m.resource_name = StrBytes::from_string(a.pattern.name);
                    m.pattern_type = a.pattern.pattern_type.code();
                    m.principal = StrBytes::from_string(a.entry.principal);
                    m.host = StrBytes::from_string(a.entry.host);
                    m.operation = a.entry.operation.code();
                    m.permission_type = a.entry.permission.code();
                    m
                })
                .collect();
        }
    }
    out
}
