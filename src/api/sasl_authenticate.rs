//! SaslAuthenticate (key 36), versions 0-2.
//!
//! Behavior:
//! - On a SASL listener the connection's authenticator (`security::sasl::authenticator`)
//!   takes every SaslAuthenticate of an exchange; one that reaches this handler came after
//!   authentication finished or on a listener without SASL: ILLEGAL_SASL_STATE with Kafka's
//!   message.
//!
//! Version notes: v1 adds `session_lifetime_ms` (KIP-368, re-authentication); v2 is the
//! flexible encoding.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::SaslAuthenticate,
    min: 0,
    max: 2,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(_: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let _req: SaslAuthenticateRequest = super::decode(&ctx, body)?;
    let mut resp = SaslAuthenticateResponse::default();
    resp.error_code = ResponseError::IllegalSaslState.code();
    resp.error_message = Some(StrBytes::from_static_str(
        "SaslAuthenticate request received after successful authentication",
    ));
    super::respond(&ctx, &resp)
}
