//! AddRaftVoter (key 80), version 0 (`kafka-metadata-quorum add-controller`, the admin
//! clients' addRaftVoter; KIP-853).
//!
//! Behavior, in the order Kafka 4.4's `KafkaRaftClient.handleAddVoterRequest` and
//! `AddVoterHandler` check:
//! - A cluster id that is not this cluster's: INCONSISTENT_CLUSTER_ID (a null one passes).
//! - A negative voter id or the zero directory id: INVALID_REQUEST; no listener named as the
//!   controller listener: INVALID_REQUEST.
//! - On one node there is no quorum to change (`kraft.version` 0): UNSUPPORTED_VERSION with
//!   Kafka's message.
//! - In a cluster the request goes to the active controller (the Raft leader) over the quorum,
//!   which promotes the node from learner to voter (`Quorum::change_voters`) and answers once
//!   the new membership is committed: DUPLICATE_VOTER for an id already voting;
//!   REQUEST_TIMED_OUT for a node that is not a learner of the quorum at the controller
//!   endpoint the request names (a controller removed earlier keeps following the log as a
//!   learner and can be added back), for another change still pending, or when `timeout_ms`
//!   passes first.
//! - The node must have the directory id the request names (Kafka's `ReplicaKey`): a
//!   learner with another one is not ready (REQUEST_TIMED_OUT).
//!
//! Without ALTER on the cluster nothing changes: CLUSTER_AUTHORIZATION_FAILED.
//!
//! Version notes: v1 (KIP-1186, `ack_when_committed`) is not in kafka-protocol 0.18; v0 answers
//! once the change is committed.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{AddRaftVoterRequest, AddRaftVoterResponse, ApiKey};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::cluster::node::ClusterNode;
use crate::cluster::node::requests::{ControllerReply, ControllerRequest};
use crate::cluster::quorum::{VoterChange, VoterChangeError};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::AddRaftVoter,
    min: 0,
    max: 0,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

/// An error code and Kafka's message.
pub(super) type Refusal = (ResponseError, String);

/// The checks AddRaftVoter and RemoveRaftVoter share, in Kafka's order: the cluster id
/// (INCONSISTENT_CLUSTER_ID unless null or this cluster's), the voter (`id`, `directory_id`;
/// INVALID_REQUEST for a negative id or the zero directory id), then a quorum that can change
/// (UNSUPPORTED_VERSION on one node). `what` is "Add" or "Remove".
pub(super) fn cluster_for_change<'b>(
    b: &'b Base,
    cluster_id: Option<&StrBytes>,
    id: i32,
    directory_id: &uuid::Uuid,
    what: &str,
) -> Result<&'b ClusterNode, Refusal> {
    let ours = &b.controller.cluster_id;
    if let Some(given) = cluster_id
        && given.as_str() != ours
    {
        return Err((
            ResponseError::InconsistentClusterId,
            format!(
                "The given id \"{}\" doesn't match the cluster id \"{ours}\"",
                given.as_str()
            ),
        ));
    }
    if id < 0 || directory_id.is_nil() {
        return Err((
            ResponseError::InvalidRequest,
            format!("{what} voter request didn't include a valid voter"),
        ));
    }
    Ok(b.node())
}

/// Sends `change` to the active controller and maps its answer to Kafka's error.
pub(super) async fn change_voters(
    c: &ClusterNode,
    change: VoterChange,
    timeout: Duration,
) -> Result<(), Refusal> {
    let req = ControllerRequest::ChangeVoters {
        change,
        timeout_ms: timeout.as_millis() as u64,
    };
    // The leader's own deadline runs inside this one, so its answer arrives in time.
    let bytes = req.encode();
    let reply = c
        .quorum
        .call_leader_within(bytes, timeout + Duration::from_secs(1))
        .await;
    let reply = match reply.map(|b| ControllerReply::decode(&b)) {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Err((ResponseError::UnknownServerError, e.to_string())),
        Err(e) => return Err((ResponseError::RequestTimedOut, e.to_string())),
    };
    match reply {
        ControllerReply::Voters(Ok(())) => Ok(()),
        ControllerReply::Voters(Err(e)) => Err(match e {
            VoterChangeError::Duplicate(m) => (ResponseError::DuplicateVoter, m),
            VoterChangeError::NotFound(m) => (ResponseError::VoterNotFound, m),
            VoterChangeError::Invalid(m) => (ResponseError::InvalidRequest, m),
            VoterChangeError::TimedOut(m) => (ResponseError::RequestTimedOut, m),
            VoterChangeError::NotLeader => (
                ResponseError::NotLeaderOrFollower,
                "not the leader".to_string(),
            ),
        }),
        other => Err((
            ResponseError::UnknownServerError,
            format!("unexpected controller answer {other:?}"),
        )),
    }
}

async fn add(b: &Base, req: &AddRaftVoterRequest) -> Result<(), Refusal> {
    let c = cluster_for_change(
        b,
        req.cluster_id.as_ref(),
        req.voter_id,
        &req.voter_directory_id,
        "Add",
    )?;
    let listener = c
        .config
        .controller_listener
        .as_ref()
        .map_or("CONTROLLER", |l| l.name.as_str());
    let Some(endpoint) = req.listeners.iter().find(|l| l.name.as_str() == listener) else {
        let named: Vec<String> = req
            .listeners
            .iter()
            .map(|l| format!("{}://{}:{}", l.name.as_str(), l.host.as_str(), l.port))
            .collect();
        return Err((
            ResponseError::InvalidRequest,
            format!(
                "Add voter request didn't include the endpoint ({}) for the default listener {listener}",
                named.join(", ")
            ),
        ));
    };
    let change = VoterChange::Add {
        id: req.voter_id as u64,
        directory_id: *req.voter_directory_id.as_bytes(),
        addr: format!("{}:{}", endpoint.host.as_str(), endpoint.port),
    };
    let timeout = Duration::from_millis(req.timeout_ms.max(0) as u64);
    change_voters(c, change, timeout).await
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: AddRaftVoterRequest = super::decode(&ctx, body)?;
    let mut resp = AddRaftVoterResponse::default();
    if let Some(code) = ctx.cluster_error(&b, super::authz::Op::Alter) {
        resp.error_code = code;
        resp.error_message = Some(StrBytes::from_static_str(
            super::authz::CLUSTER_DENIED_MESSAGE,
        ));
        return super::respond(&ctx, &resp);
    }
    if let Err((e, message)) = add(&b, &req).await {
        resp.error_code = e.code();
        resp.error_message = Some(StrBytes::from_string(message));
    }
    super::respond(&ctx, &resp)
}
