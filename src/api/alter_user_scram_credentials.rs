//! AlterUserScramCredentials (key 51), version 0: adds, replaces and deletes users' SCRAM
//! credentials (`kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=...]'
//! --entity-type users`; the client sends the salt and the salted password, never the
//! password).
//!
//! Behavior:
//! - Kafka's controller checks (`security::scram_store::plan_alter`): a user at most once per
//!   request, deletions of existing credentials only, 4096..=16384 iterations, known
//!   mechanisms; the accepted changes are applied together.
//! - One node: the controller applies them and persists them in `sluice-metadata` before the
//!   answer. A cluster: the changes are decided by the active controller against the metadata
//!   image and committed as UserScramCredential / RemoveUserScramCredential records, so every
//!   broker authenticates with them once it applies the entry; the answer waits until this
//!   broker has.
//! - Without ALTER on the cluster nothing changes: each named user once, sorted, with
//!   CLUSTER_AUTHORIZATION_FAILED (Kafka's error response).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey,
};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;
use crate::security::scram_store::{Deletion, Upsertion, UserResult};

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::AlterUserScramCredentials,
    min: 0,
    max: 0,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: AlterUserScramCredentialsRequest = super::decode(&ctx, body)?;
    let deletions: Vec<Deletion> = req
        .deletions
        .iter()
        .map(|d| Deletion {
            user: d.name.to_string(),
            mechanism: d.mechanism,
        })
        .collect();
    let upsertions: Vec<Upsertion> = req
        .upsertions
        .iter()
        .map(|u| Upsertion {
            user: u.name.to_string(),
            mechanism: u.mechanism,
            iterations: u.iterations,
            salt: u.salt.to_vec(),
            salted_password: u.salted_password.to_vec(),
        })
        .collect();
    let refused = ctx.cluster_error(&b, super::authz::Op::Alter);
    let results: Vec<UserResult> = match refused {
        // Kafka's error response: each user named once, sorted.
        Some(code) => deletions
            .iter()
            .map(|d| d.user.clone())
            .chain(upsertions.iter().map(|u| u.user.clone()))
            .collect::<std::collections::BTreeSet<String>>()
            .into_iter()
            .map(|u| {
                let msg = super::authz::CLUSTER_DENIED_MESSAGE.to_string();
                (u, code, Some(msg))
            })
            .collect(),
        None => {
            let users: Vec<String> = deletions
                .iter()
                .map(|d| d.user.clone())
                .chain(upsertions.iter().map(|u| u.user.clone()))
                .collect();
            match b.node().alter_scram(deletions, upsertions).await {
                Ok(r) => r,
                Err(e) => {
                    let (code, msg) = (
                        super::errors::topic_error_code(&e),
                        super::errors::topic_error_message(&e),
                    );
                    let mut seen = Vec::new();
                    users
                        .into_iter()
                        .filter(|u| {
                            let new = !seen.contains(u);
                            seen.push(u.clone());
                            new
                        })
                        .map(|u| (u, code, msg.clone()))
                        .collect()
                }
            }
        }
    };
    let mut resp = AlterUserScramCredentialsResponse::default();
    for (user, code, msg) in results {
        let mut r = AlterUserScramCredentialsResult::default();
        r.user = StrBytes::from_string(user);
        r.error_code = code;
        r.error_message = msg.map(StrBytes::from_string);
        resp.results.push(r);
    }
    super::respond(&ctx, &resp)
}
