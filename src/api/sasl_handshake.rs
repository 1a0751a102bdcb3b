//! SaslHandshake (key 17), versions 0-1.
//!
//! Behavior:
//! - On a SASL listener the connection's authenticator (`security::sasl::authenticator`)
//!   answers the handshake before authentication and at re-authentication; this handler only
//!   sees the ones that reach the broker otherwise: on a listener without SASL, or from a
//!   client that cannot re-authenticate (it sent SaslAuthenticate v0). Kafka answers those
//!   ILLEGAL_SASL_STATE, with no mechanisms.
//!
//! Version notes: v1 (KIP-152) moves the tokens into SaslAuthenticate requests; v0 sends them
//! as bare frames.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{ApiKey, SaslHandshakeRequest, SaslHandshakeResponse};

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::SaslHandshake,
    min: 0,
    max: 1,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(_: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let _req: SaslHandshakeRequest = super::decode(&ctx, body)?;
    let mut resp = SaslHandshakeResponse::default();
    resp.error_code = ResponseError::IllegalSaslState.code();
    super::respond(&ctx, &resp)
}
