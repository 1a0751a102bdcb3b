//! DescribeUserScramCredentials (key 50), version 0: the SCRAM mechanisms and iteration
//! counts of users (`kafka-configs --describe --entity-type users`).
//!
//! Behavior:
//! - Answered from this broker's credentials (one node: the controller's store; a cluster:
//!   the metadata image's, installed at each reconcile), as Kafka's brokers answer from their
//!   metadata image: every user with a credential when none is named, else each named user
//!   once, RESOURCE_NOT_FOUND for a user without credentials and DUPLICATE_RESOURCE for one
//!   named twice, with Kafka's messages (`security::scram_store::describe`).
//! - Without DESCRIBE on the cluster: CLUSTER_AUTHORIZATION_FAILED at the top and in one
//!   result per named user, as Kafka's error response has it.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    ApiKey, DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;
use crate::security::scram_store;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::DescribeUserScramCredentials,
    min: 0,
    max: 0,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DescribeUserScramCredentialsRequest = super::decode(&ctx, body)?;
    let users: Option<Vec<String>> = req
        .users
        .map(|u| u.into_iter().map(|n| n.name.to_string()).collect());
    let mut resp = DescribeUserScramCredentialsResponse::default();
    if let Some(code) = ctx.cluster_error(&b, super::authz::Op::Describe) {
        // Kafka's error response: the error at the top and once per named user (unnamed).
        let msg = || {
            Some(StrBytes::from_static_str(
                super::authz::CLUSTER_DENIED_MESSAGE,
            ))
        };
        resp.error_code = code;
        resp.error_message = msg();
        for _ in users.iter().flatten() {
            let mut r = DescribeUserScramCredentialsResult::default();
            r.error_code = code;
            r.error_message = msg();
            resp.results.push(r);
        }
        return super::respond(&ctx, &resp);
    }
    let current = b.controller.scram.all();
    for (user, found) in scram_store::describe(&current, users.as_deref()) {
        let mut r = DescribeUserScramCredentialsResult::default();
        r.user = StrBytes::from_string(user);
        match found {
            Ok(infos) => {
                r.credential_infos = infos
                    .into_iter()
                    .map(|(mechanism, iterations)| {
                        let mut i = CredentialInfo::default();
                        i.mechanism = mechanism;
                        i.iterations = iterations;
                        i
                    })
                    .collect();
            }
            Err((code, msg)) => {
                r.error_code = code;
                r.error_message = Some(StrBytes::from_string(msg));
            }
        }
        resp.results.push(r);
    }
    super::respond(&ctx, &resp)
}
