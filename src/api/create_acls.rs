//! CreateAcls (key 30), versions 1-3 (Kafka 4 dropped v0): `kafka-acls --add`,
//! `Admin.createAcls`.
//!
//! Behavior, as Kafka 4.4's broker and AclControlManager answer:
//! - Without an authorizer every creation fails with SECURITY_DISABLED "No Authorizer is
//!   configured."; without ALTER on the cluster with CLUSTER_AUTHORIZATION_FAILED.
//! - Each creation is checked alone (`AclBinding::invalid`, unknown codes): a bad one gets
//!   INVALID_REQUEST with Kafka's message and the others still go ahead.
//! - Creating an ACL that exists succeeds and changes nothing.
//! - One node: the controller adds the ACLs and persists them in `sluice-metadata` before the
//!   answer. A cluster: the active controller commits AccessControlEntry records; the answer
//!   waits until this broker enforces them.
//!
//! Version notes: v1 added the resource pattern type (KIP-290), v2 is flexible.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{ApiKey, CreateAclsRequest, CreateAclsResponse};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;
use crate::security::acl::AclOperation;
use crate::security::acl::changes::{self, AclError};

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::CreateAcls,
    min: 1,
    max: 3,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: CreateAclsRequest = super::decode(&ctx, body)?;
    let results: Vec<Result<(), AclError>> = match refusal(&b, &ctx) {
        Some(e) => vec![Err(e); req.creations.len()],
        None => {
            let creations: Vec<_> = req
                .creations
                .iter()
                .map(|c| {
                    changes::binding_from_wire((
                        c.resource_type,
                        c.resource_name.to_string(),
                        c.resource_pattern_type,
                        c.principal.to_string(),
                        c.host.to_string(),
                        c.operation,
                        c.permission_type,
                    ))
                })
                .collect();
            let n = creations.len();
            b.node()
                .create_acls(creations)
                .await
                .unwrap_or_else(|e| vec![Err(controller_error(&e)); n])
        }
    };
    let mut resp = CreateAclsResponse::default();
    resp.results = results
        .into_iter()
        .map(|r| {
            let mut out = AclCreationResult::default();
            if let Err((code, msg)) = r {
                out.error_code = code;
                out.error_message = Some(StrBytes::from_string(msg));
            }
            out
        })
        .collect();
    super::respond(&ctx, &resp)
}

/// Why the whole request is refused, if it is: no authorizer, or no `op` on the cluster
/// (shared by the three ACL APIs).
pub(super) fn refusal_for(b: &Base, ctx: &RequestCtx, op: AclOperation) -> Option<AclError> {
    if b.authorizer.is_none() {
        return Some((
            ResponseError::SecurityDisabled.code(),
            "No Authorizer is configured.".into(),
        ));
    }
    if !ctx.authorize_cluster(b, op) {
        return Some((
            ResponseError::ClusterAuthorizationFailed.code(),
            "Cluster authorization failed.".into(),
        ));
    }
    None
}

/// A failed trip to the active controller as the error of each item.
pub(super) fn controller_error(e: &crate::cluster::TopicError) -> AclError {
    (
        super::errors::topic_error_code(e),
        super::errors::topic_error_message(e).unwrap_or_default(),
    )
}

fn refusal(b: &Base, ctx: &RequestCtx) -> Option<AclError> {
    refusal_for(b, ctx, AclOperation::Alter)
}
