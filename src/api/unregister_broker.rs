//! UnregisterBroker (key 64), version 0 (the admin clients' unregisterBroker: decommissioning a
//! broker that left for good).
//!
//! Behavior, as Kafka 4.4's controller answers: in a cluster the active controller moves the
//! broker's leaderships away and removes its registration (whether it is alive or not; a live
//! broker registers again with its next heartbeat); an id with no registration is
//! BROKER_ID_NOT_REGISTERED "Broker ID <id> is not currently registered". The answer comes
//! once this broker has applied the change. On one node the only registered broker is this
//! one: unregistering it succeeds (it is registered again at once, as Kafka's combined node
//! re-registers), any other id is BROKER_ID_NOT_REGISTERED.
//!
//! Without ALTER on the cluster nothing changes: CLUSTER_AUTHORIZATION_FAILED.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{ApiKey, UnregisterBrokerRequest, UnregisterBrokerResponse};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::cluster::control::active::ControlError;
use crate::cluster::node::requests::{ControllerReply, ControllerRequest};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::UnregisterBroker,
    min: 0,
    max: 0,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

fn not_registered(id: i32) -> (i16, String) {
    (
        ResponseError::BrokerIdNotRegistered.code(),
        format!("Broker ID {id} is not currently registered"),
    )
}

async fn unregister(b: &Base, id: i32) -> Result<(), (i16, String)> {
    let c = b.node();
    let epoch = |c: &crate::cluster::node::ClusterNode| c.image().brokers.get(&id).map(|s| s.epoch);
    let before = epoch(c);
    match c.call(ControllerRequest::UnregisterBroker(id)).await {
        Ok(ControllerReply::Done(r)) => match r.into_iter().next() {
            Some(Ok(())) => {
                c.wait_applied(|c| before.is_none() || epoch(c) != before)
                    .await;
                Ok(())
            }
            Some(Err(ControlError::BrokerIdNotRegistered(id))) => Err(not_registered(id)),
            Some(Err(e)) => Err((ResponseError::UnknownServerError.code(), format!("{e:?}"))),
            None => Err((
                ResponseError::UnknownServerError.code(),
                "no answer from the controller".to_string(),
            )),
        },
        Ok(other) => Err((
            ResponseError::UnknownServerError.code(),
            format!("unexpected controller answer {other:?}"),
        )),
        Err(e) => Err((ResponseError::RequestTimedOut.code(), format!("{e}"))),
    }
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: UnregisterBrokerRequest = super::decode(&ctx, body)?;
    let mut resp = UnregisterBrokerResponse::default();
    if let Some(code) = ctx.cluster_error(&b, super::authz::Op::Alter) {
        resp.error_code = code;
        resp.error_message = Some(StrBytes::from_static_str(
            super::authz::CLUSTER_DENIED_MESSAGE,
        ));
        return super::respond(&ctx, &resp);
    }
    if let Err((code, message)) = unregister(&b, req.broker_id.0).await {
        resp.error_code = code;
        resp.error_message = Some(StrBytes::from_string(message));
    }
    super::respond(&ctx, &resp)
}
