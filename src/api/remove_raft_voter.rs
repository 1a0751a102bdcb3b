//! RemoveRaftVoter (key 81), version 0 (`kafka-metadata-quorum remove-controller`, the admin
//! clients' removeRaftVoter; KIP-853).
//!
//! Behavior, in the order Kafka 4.4's `KafkaRaftClient.handleRemoveVoterRequest` and
//! `RemoveVoterHandler` check:
//! - A cluster id that is not this cluster's: INCONSISTENT_CLUSTER_ID (a null one passes).
//! - A negative voter id or the zero directory id: INVALID_REQUEST.
//! - On one node there is no quorum to change (`kraft.version` 0): UNSUPPORTED_VERSION with
//!   Kafka's message.
//! - In a cluster the request goes to the active controller (the Raft leader), which removes
//!   the voter (`Quorum::change_voters`) and answers once the new membership is committed.
//!   The removed node stays a learner: as a broker it keeps serving, as Kafka's observers do,
//!   and AddRaftVoter can make it a voter again. A removed leader hands the leadership to
//!   the remaining voters. VOTER_NOT_FOUND for an id that is not a voter, or a directory id
//!   other than the voter's (`voters.rs`); INVALID_REQUEST for the last voter; REQUEST_TIMED_OUT while another change is pending or when the change does not
//!   commit within `controller.quorum.request.timeout.ms`.
//!
//! Without ALTER on the cluster nothing changes: CLUSTER_AUTHORIZATION_FAILED.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RemoveRaftVoterRequest, RemoveRaftVoterResponse};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::add_raft_voter::{Refusal, change_voters, cluster_for_change};
use super::{ApiSpec, RequestCtx};
use crate::cluster::quorum::VoterChange;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::RemoveRaftVoter,
    min: 0,
    max: 0,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn remove(b: &Base, req: &RemoveRaftVoterRequest) -> Result<(), Refusal> {
    let c = cluster_for_change(
        b,
        req.cluster_id.as_ref(),
        req.voter_id,
        &req.voter_directory_id,
        "Remove",
    )?;
    let change = VoterChange::Remove {
        id: req.voter_id as u64,
        directory_id: *req.voter_directory_id.as_bytes(),
    };
    let timeout = std::time::Duration::from_millis(c.config.quorum_request_timeout_ms);
    change_voters(c, change, timeout).await
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: RemoveRaftVoterRequest = super::decode(&ctx, body)?;
    let mut resp = RemoveRaftVoterResponse::default();
    if let Some(code) = ctx.cluster_error(&b, super::authz::Op::Alter) {
        resp.error_code = code;
        resp.error_message = Some(StrBytes::from_static_str(
            super::authz::CLUSTER_DENIED_MESSAGE,
        ));
        return super::respond(&ctx, &resp);
    }
    if let Err((e, message)) = remove(&b, &req).await {
        resp.error_code = e.code();
        resp.error_message = Some(StrBytes::from_string(message));
    }
    super::respond(&ctx, &resp)
}
