//! Kafka requests made on behalf of a console user: encoded as a client would encode them
//! and run through the broker's own dispatch with the user's [`Session`], so the console
//! sees exactly what a client with that principal would (same checks, same errors).
//!
//! On a cluster a partition is read and written on its leader and a group is described by its
//! coordinator, which may be another broker. [`call_at`] runs the request here first, with the
//! user's session: this broker's handler checks the user's rights (the ACLs are replicated, so
//! every broker decides alike) before it says that the partition or group is not its own. Only
//! then does the request go to the broker that holds it, over the inter-broker connection
//! ([`crate::txn::peers::Peers`], [`Purpose::Console`]); answers that carry more than the user
//! may see there (groups and committed offsets of topics the user may not describe) are
//! filtered here with [`may`].

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::broker::Broker;
use crate::cluster::fetcher::conn::{decode_response, encode_request};
use crate::security::Session;
use crate::security::acl::{AclOperation, ResourceType};
use crate::txn::peers::Purpose;

/// The client id the console's requests carry (it appears in the request log and metrics).
const CLIENT_ID: &str = "sluice-console";

/// How long a request forwarded to another broker may take (a test record waits up to 15 s
/// for its replicas).
const FORWARD_TIMEOUT: Duration = Duration::from_secs(20);

/// Sends `req` as `key` v`version` to this broker and decodes the answer.
pub async fn call<Req: Encodable, Resp: Decodable>(
    broker: &Arc<Broker>,
    session: &Session,
    key: ApiKey,
    version: i16,
    req: &Req,
) -> Result<Resp> {
    call_as(broker, session, CLIENT_ID, (key, version), req).await
}

/// [`call`] with the request header's client id given (a REST consumer instance's own, so
/// group tools show it as the member's client id).
pub async fn call_as<Req: Encodable, Resp: Decodable>(
    broker: &Arc<Broker>,
    session: &Session,
    client_id: &str,
    (key, version): (ApiKey, i16),
    req: &Req,
) -> Result<Resp> {
    let client_id = StrBytes::from_string(client_id.to_string());
    let frame = encode_request(key, version, 1, &client_id, req)?;
    // The connection hands dispatch the frame without its size prefix.
    let frame = frame.slice(4..);
    let resp = broker
        .frontend
        .dispatch_from(frame, session)
        .await?
        .ok_or_else(|| anyhow!("no {key:?} response"))?;
    let bytes = resp
        .to_vec()
        .with_context(|| format!("reading the {key:?} response"))?;
    let body = bytes::Bytes::from(bytes).slice(4..);
    decode_response(key, version, 1, body)
}

/// Sends `req` to broker `node`: here first, and when `node` is another broker of the
/// cluster and `elsewhere` says this broker's answer is only that it does not hold what was
/// asked (NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR), then to `node`, whose answer is returned.
/// An answer refusing the user (an authorization error) is never forwarded.
pub async fn call_at<Req: Encodable, Resp: Decodable>(
    broker: &Arc<Broker>,
    session: &Session,
    node: i32,
    (key, version): (ApiKey, i16),
    req: &Req,
    elsewhere: impl Fn(&Resp) -> bool,
) -> Result<Resp> {
    let here: Resp = call(broker, session, key, version, req).await?;
    if !is_peer(broker, node) || !elsewhere(&here) {
        return Ok(here);
    }
    forward(broker, node, (key, version), req).await
}

/// Whether `node` is another broker of this broker's cluster.
pub fn is_peer(broker: &Broker, node: i32) -> bool {
    node >= 0 && node != broker.node_id()
}

/// Sends `req` to broker `node` over the inter-broker connection, with no check of the
/// user's rights: callers have had this broker's handler check them first.
pub async fn forward<Req: Encodable, Resp: Decodable>(
    broker: &Arc<Broker>,
    node: i32,
    (key, version): (ApiKey, i16),
    req: &Req,
) -> Result<Resp> {
    broker
        .peers
        .call(
            (node, Purpose::Console),
            (key, version),
            req,
            FORWARD_TIMEOUT,
        )
        .await
        .with_context(|| format!("{key:?} forwarded to broker {node}"))
}

/// Whether the console user may do `op` on `(rt, name)` (always, without an authorizer), as
/// this broker's handlers decide it.
pub fn may(
    broker: &Broker,
    session: &Session,
    op: AclOperation,
    rt: ResourceType,
    name: &str,
) -> bool {
    broker.authorize(
        &session.principal,
        session.peer.map(|p| p.ip()),
        op,
        rt,
        name,
    )
}

/// NOT_LEADER_OR_FOLLOWER: another broker leads the partition.
pub fn not_leader(code: i16) -> bool {
    code == ResponseError::NotLeaderOrFollower.code()
}

/// An authorization error: the user may not do what the request asks.
pub fn denied(code: i16) -> bool {
    [
        ResponseError::TopicAuthorizationFailed,
        ResponseError::GroupAuthorizationFailed,
        ResponseError::ClusterAuthorizationFailed,
        ResponseError::TransactionalIdAuthorizationFailed,
    ]
    .iter()
    .any(|e| e.code() == code)
}

/// NOT_COORDINATOR: another broker coordinates the group.
pub fn not_coordinator(code: i16) -> bool {
    code == ResponseError::NotCoordinator.code()
}

pub use crate::metrics::error_name;
