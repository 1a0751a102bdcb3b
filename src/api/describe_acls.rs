//! DescribeAcls (key 29), versions 1-3 (Kafka 4 dropped v0): `kafka-acls --list`,
//! `Admin.describeAcls`.
//!
//! Behavior, as Kafka 4.4 answers:
//! - Without an authorizer SECURITY_DISABLED "No Authorizer is configured on the broker"; without
//!   DESCRIBE on the cluster CLUSTER_AUTHORIZATION_FAILED; a filter with an unknown code
//!   INVALID_REQUEST.
//! - The ACLs the filter selects (`AclFilter::matches`: ANY, MATCH, LITERAL, PREFIXED),
//!   grouped by resource pattern. The ACLs are this broker's (the metadata it applied).
//!
//! Version notes: v1 added the pattern type filter (KIP-290), v2 is flexible.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{ApiKey, DescribeAclsRequest, DescribeAclsResponse};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;
use crate::security::acl::AclOperation;
use crate::security::acl::changes;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::DescribeAcls,
    min: 1,
    max: 3,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DescribeAclsRequest = super::decode(&ctx, body)?;
    let mut resp = DescribeAclsResponse::default();
    let filter = match super::create_acls::refusal_for(&b, &ctx, AclOperation::Describe) {
        // Kafka words this one refusal differently from CreateAcls' and DeleteAcls'.
        Some((code, _)) if b.authorizer.is_none() => {
            Err((code, "No Authorizer is configured on the broker".into()))
        }
        Some(e) => Err(e),
        None => changes::filter_from_wire((
            req.resource_type_filter,
            req.resource_name_filter.as_ref().map(|s| s.to_string()),
            req.pattern_type_filter,
            req.principal_filter.as_ref().map(|s| s.to_string()),
            req.host_filter.as_ref().map(|s| s.to_string()),
            req.operation,
            req.permission_type,
        )),
    };
    match filter {
        Err((code, msg)) => {
            resp.error_code = code;
            resp.error_message = Some(StrBytes::from_string(msg));
        }
        Ok(f) => {
            let found = b.controller.acls.matching(&f);
            resp.resources = changes::group_by_pattern(found)
                .into_iter()
                .map(|(p, entries)| {
                    let mut r = DescribeAclsResource::default();
                    r.resource_type = p.resource_type.code();
                    r.resource_name = StrBytes::from_string(p.name);
                    r.pattern_type = p.pattern_type.code();
                    r.acls = entries
                        .into_iter()
                        .map(|e| {
                            let mut d = AclDescription::default();
                            d.principal = StrBytes::from_string(e.principal);
                            d.host = StrBytes::from_string(e.host);
                            d.operation = e.operation.code();
                            d.permission_type = e.permission.code();
                            d
                        })
                        .collect();
                    r
                })
                .collect();
        }
    }
    super::respond(&ctx, &resp)
}
