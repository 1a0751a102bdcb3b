//! One connection's SASL state machine, as Kafka's SaslServerAuthenticator: before
//! authentication only ApiVersions and SaslHandshake are served (anything else closes the
//! connection); the handshake picks an enabled mechanism (v1: the tokens then come in
//! SaslAuthenticate requests; v0: as bare size-prefixed frames); the mechanism's exchange
//! runs until it succeeds (the connection's principal becomes `User:<authorization id>`) or
//! fails (SASL_AUTHENTICATION_FAILED with Kafka's message, then the connection closes after
//! `connection.failed.authentication.delay.ms`, which the caller waits).
//!
//! After success (KIP-368): the session lasts `connections.max.reauth.ms` (or until an OAuth
//! token expires, if sooner), told to the client as `session_lifetime_ms`; a client that sent
//! SaslAuthenticate v1+ re-authenticates on the same connection with a new SaslHandshake (same
//! mechanism, same principal); any other request after the session expired closes the
//! connection. Frames in, responses out, no I/O: the caller passes the time and the randomness.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::oauthbearer::OAuthBearerServer;
use super::scram::{ScramCredential, ScramMechanism, ScramServer};
use super::{AuthError, Mechanism, SaslListener, Step, plain};
use crate::net::request::{self, Header, RequestCtx, ServedLookup};
use crate::net::response::Response;
use crate::security::Principal;

/// Where SCRAM credentials come from (the metadata).
pub trait Credentials {
    fn scram(&self, user: &str, mech: ScramMechanism) -> Option<ScramCredential>;
}

/// What the connection does with a frame.
pub enum Outcome {
    /// Not the authenticator's: serve it as any request.
    Serve,
    /// Send this and read on.
    Reply(Response),
    /// Authenticated (or re-authenticated) as `principal`: send this and serve requests.
    Authenticated {
        reply: Response,
        principal: Principal,
    },
    /// Authentication failed: wait the failed-authentication delay, send `reply` (if any),
    /// close. `reason` is for the one log line.
    Fail {
        reply: Option<Response>,
        reason: String,
    },
    /// Close at once: a request that has no place here.
    Close(String),
}

enum Exchange {
    Plain,
    Scram(ScramServer),
    OAuth(OAuthBearerServer),
    /// A re-authentication that asked for another mechanism: its first token fails.
    WrongMechanism(String),
}

enum State {
    /// Waiting for ApiVersions or SaslHandshake (`reauth`: a new handshake on an
    /// authenticated connection).
    Handshake {
        reauth: bool,
    },
    Authenticate {
        mech: Mechanism,
        exchange: Exchange,
        /// SaslHandshake v1+: tokens are wrapped in SaslAuthenticate requests.
        headers: bool,
    },
    Complete,
}

pub struct Authenticator {
    cfg: Arc<SaslListener>,
    state: State,
    /// The mechanism and principal of the last successful authentication.
    session: Option<(Mechanism, Principal)>,
    supports_reauth: bool,
    expires_at_ms: Option<i64>,
    /// The versions served, which the SASL requests are parsed against.
    served: ServedLookup,
}

fn api_key_of(frame: &[u8]) -> Option<ApiKey> {
    let k = i16::from_be_bytes([*frame.first()?, *frame.get(1)?]);
    ApiKey::try_from(k).ok()
}

fn key_name(frame: &[u8]) -> String {
    match api_key_of(frame) {
        Some(k) => format!("{k:?}"),
        None => "unknown".into(),
    }
}

/// A raw token frame (SaslHandshake v0): size prefix and bytes.
fn raw_frame(token: &[u8]) -> Response {
    let mut b = BytesMut::with_capacity(4 + token.len());
    b.put_u32(token.len() as u32);
    b.put_slice(token);
    Response::from_frame(b.freeze())
}

/// Header and typed body of a request for `key`.
fn parse<T: kafka_protocol::protocol::Decodable>(
    frame: &Bytes,
    served: ServedLookup,
) -> Result<(RequestCtx, T), String> {
    match request::parse_header(frame.clone(), served) {
        Ok(Header::Request { ctx, body }) => {
            let req = request::decode(&ctx, body).map_err(|e| format!("{e:#}"))?;
            Ok((ctx, req))
        }
        Ok(Header::UnsupportedApiVersions { .. }) => Err("unexpected ApiVersions".into()),
        Err(e) => Err(format!("{e:#}")),
    }
}

fn encode<T: kafka_protocol::protocol::Encodable>(
    ctx: &RequestCtx,
    body: &T,
) -> Result<Response, String> {
    match request::respond(ctx, body) {
        Ok(Some(r)) => Ok(r),
        Ok(None) => Err("no response".into()),
        Err(e) => Err(format!("{e:#}")),
    }
}

impl Authenticator {
    pub fn new(cfg: Arc<SaslListener>, served: ServedLookup) -> Authenticator {
        Authenticator {
            cfg,
            state: State::Handshake { reauth: false },
            session: None,
            supports_reauth: false,
            expires_at_ms: None,
            served,
        }
    }

    /// True until the first authentication succeeds, and during a re-authentication.
    pub fn authenticating(&self) -> bool {
        !matches!(self.state, State::Complete)
    }

    pub fn on_frame(
        &mut self,
        frame: &Bytes,
        now_ms: i64,
        creds: &dyn Credentials,
        nonce: &mut dyn FnMut() -> String,
    ) -> Outcome {
        match self.state {
            State::Complete => {
                if api_key_of(frame) == Some(ApiKey::SaslHandshake) && self.supports_reauth {
                    self.state = State::Handshake { reauth: true };
                    return self.handshake(frame, true);
                }
                if let Some(at) = self.expires_at_ms
                    && now_ms >= at
                {
                    return Outcome::Close(format!(
                        "{} request after the SASL session expired (connections.max.reauth.ms)",
                        key_name(frame)
                    ));
                }
                Outcome::Serve
            }
            State::Handshake { reauth } => self.handshake(frame, reauth),
            State::Authenticate { .. } => self.authenticate(frame, now_ms, creds, nonce),
        }
    }

    fn handshake(&mut self, frame: &Bytes, reauth: bool) -> Outcome {
        match api_key_of(frame) {
            Some(ApiKey::ApiVersions) if !reauth => return Outcome::Serve,
            Some(ApiKey::SaslHandshake) => {}
            _ if self.session.is_none() && frame.len() >= 2 && api_key_of(frame).is_none() => {
                return Outcome::Close(
                    "Invalid request, potential reasons: kafka client configured with the wrong \
                     security protocol, it does not support KIP-43 or it is not a kafka client."
                        .into(),
                );
            }
            _ => {
                return Outcome::Close(format!(
                    "Unexpected Kafka request of type {} during SASL handshake.",
                    key_name(frame)
                ));
            }
        }
        let (ctx, req) = match parse::<SaslHandshakeRequest>(frame, self.served) {
            Ok(r) => r,
            Err(e) => return Outcome::Close(e),
        };
        let mut resp = SaslHandshakeResponse::default();
        resp.mechanisms = self
            .cfg
            .mechanisms
            .iter()
            .map(|m| StrBytes::from_static_str(m.name()))
            .collect();
        let wanted = req.mechanism.as_str();
        let Some(mech) = Mechanism::from_name(wanted).filter(|m| self.cfg.enabled(*m)) else {
            resp.error_code = ResponseError::UnsupportedSaslMechanism.code();
            return Outcome::Fail {
                reply: encode(&ctx, &resp).ok(),
                reason: format!("Unsupported SASL mechanism {wanted}"),
            };
        };
        let exchange = match &self.session {
            Some((previous, _)) if reauth && *previous != mech => {
                Exchange::WrongMechanism(format!(
                    "SASL mechanism '{}' requested by client is not supported for re-authentication of mechanism '{}'",
                    mech.name(),
                    previous.name()
                ))
            }
            _ => match mech {
                Mechanism::Plain => Exchange::Plain,
                Mechanism::Scram(m) => Exchange::Scram(ScramServer::new(m)),
                Mechanism::OAuthBearer => Exchange::OAuth(OAuthBearerServer::default()),
            },
        };
        let reply = match encode(&ctx, &resp) {
            Ok(r) => r,
            Err(e) => return Outcome::Close(e),
        };
        self.state = State::Authenticate {
            mech,
            exchange,
            headers: ctx.version >= 1,
        };
        Outcome::Reply(reply)
    }

    fn authenticate(
        &mut self,
        frame: &Bytes,
        now_ms: i64,
        creds: &dyn Credentials,
        nonce: &mut dyn FnMut() -> String,
    ) -> Outcome {
        let State::Authenticate {
            mech,
            exchange,
            headers,
        } = &mut self.state
        else {
            return Outcome::Close("not authenticating".into());
        };
        let (mech, headers) = (*mech, *headers);
        let wrapped = if headers {
            if api_key_of(frame) != Some(ApiKey::SaslAuthenticate) {
                return Outcome::Close(format!(
                    "Unexpected Kafka request of type {} during SASL authentication.",
                    key_name(frame)
                ));
            }
            match parse::<SaslAuthenticateRequest>(frame, self.served) {
                Ok(r) => Some(r),
                Err(e) => return Outcome::Close(e),
            }
        } else {
            None
        };
        let token: &[u8] = match &wrapped {
            Some((_, req)) => &req.auth_bytes,
            None => frame,
        };
        let cfg = &self.cfg;
        let step = match exchange {
            Exchange::Plain => plain::authenticate(token, &cfg.plain_users),
            Exchange::Scram(s) => {
                let m = match mech {
                    Mechanism::Scram(m) => m,
                    _ => ScramMechanism::Sha256,
                };
                s.step(token, &|u| creds.scram(u, m), &nonce())
            }
            Exchange::OAuth(o) => o.step(token, &cfg.oauth, now_ms),
            Exchange::WrongMechanism(m) => Step::Failure(AuthError::Client(m.clone())),
        };
        if let Some((ctx, _)) = &wrapped
            && ctx.version > 0
        {
            self.supports_reauth = true;
        }
        let text = if self.session.is_some() {
            "re-authentication"
        } else {
            "authentication"
        };
        let reply = |error: Option<String>, bytes: Vec<u8>, lifetime: i64| -> Option<Response> {
            match &wrapped {
                Some((ctx, _)) => {
                    let mut r = SaslAuthenticateResponse::default();
                    if let Some(m) = error {
                        r.error_code = ResponseError::SaslAuthenticationFailed.code();
                        r.error_message = Some(StrBytes::from_string(m));
                    }
                    r.auth_bytes = Bytes::from(bytes);
                    if ctx.version >= 1 {
                        r.session_lifetime_ms = lifetime;
                    }
                    encode(ctx, &r).ok()
                }
                None if error.is_none() => Some(raw_frame(&bytes)),
                None => None,
            }
        };
        match step {
            Step::Challenge(bytes) => match reply(None, bytes, 0) {
                Some(r) => Outcome::Reply(r),
                None => Outcome::Close("cannot encode a SaslAuthenticate response".into()),
            },
            Step::Failure(AuthError::Client(m)) => Outcome::Fail {
                reply: reply(Some(m.clone()), Vec::new(), 0),
                reason: m,
            },
            Step::Failure(AuthError::Credentials(detail)) => {
                let m = format!(
                    "Authentication failed during {text} due to invalid credentials with SASL mechanism {}",
                    mech.name()
                );
                Outcome::Fail {
                    reply: reply(Some(m.clone()), Vec::new(), 0),
                    reason: format!("{m}: {detail}"),
                }
            }
            Step::Success {
                response,
                authorization_id,
                credential_expiry_ms,
            } => {
                let principal = Principal::user(authorization_id);
                if let Some((_, before)) = &self.session
                    && *before != principal
                {
                    let m = format!(
                        "Cannot change principals during re-authentication from {}.{}: {}.{}",
                        before.principal_type,
                        before.name,
                        principal.principal_type,
                        principal.name
                    );
                    return Outcome::Fail {
                        reply: reply(Some(m.clone()), Vec::new(), 0),
                        reason: m,
                    };
                }
                let max = cfg.max_reauth_ms;
                let lifetime = match (credential_expiry_ms, max > 0) {
                    (None, false) => None,
                    (None, true) => Some(max),
                    (Some(e), false) => Some((e - now_ms).max(0)),
                    (Some(e), true) => Some((e - now_ms).min(max).max(0)),
                };
                let Some(r) = reply(None, response, lifetime.unwrap_or(0)) else {
                    return Outcome::Close("cannot encode a SaslAuthenticate response".into());
                };
                self.expires_at_ms = lifetime.map(|l| now_ms.saturating_add(l));
                self.session = Some((mech, principal.clone()));
                self.state = State::Complete;
                Outcome::Authenticated {
                    reply: r,
                    principal,
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "authenticator_tests.rs"]
mod tests;
