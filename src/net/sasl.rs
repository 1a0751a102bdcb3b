//! The SASL step of a connection on a `SASL_PLAINTEXT` or `SASL_SSL` listener: each frame goes through the
//! connection's [`Authenticator`] first, which answers the SASL requests itself and lets the
//! others through once the connection is authenticated. A failed authentication is logged
//! once with the client's address and answered after `connection.failed.authentication.delay.ms`,
//! then the connection closes. Independent of the byte transport.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tracing::{info, warn};

use super::dispatch::Dispatch;
use super::response::Response;
use crate::security::sasl::authenticator::Credentials;
use crate::security::sasl::{Authenticator, Outcome, SaslListener};
use crate::security::{Principal, Session};

/// What the connection does with a frame after the SASL step.
pub enum Gate {
    Serve,
    Reply(Response),
    /// Send the reply, if any, and close.
    Close(Option<Response>),
}

/// The largest frame the reader accepts: `sasl.server.max.receive.size` until the connection
/// is authenticated (on a SASL listener), `socket.request.max.bytes` after.
pub struct FrameLimit {
    max: usize,
    before_auth: Option<usize>,
    authenticated: AtomicBool,
}

impl FrameLimit {
    pub fn new(max: usize, before_auth: Option<usize>) -> FrameLimit {
        FrameLimit {
            max,
            before_auth,
            authenticated: AtomicBool::new(false),
        }
    }

    /// The bound now and the setting it comes from.
    pub fn current(&self) -> (usize, &'static str) {
        match self.before_auth {
            Some(n) if !self.authenticated.load(Ordering::Relaxed) => {
                (n, "sasl.server.max.receive.size")
            }
            _ => (self.max, "socket.request.max.bytes"),
        }
    }
}

pub struct SaslGate {
    auth: Authenticator,
    cfg: Arc<SaslListener>,
    credentials: Arc<dyn Credentials + Send + Sync>,
    peer: Option<SocketAddr>,
    limit: Arc<FrameLimit>,
}

use crate::clock::now_ms;

fn nonce() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl SaslGate {
    pub fn new(
        cfg: Arc<SaslListener>,
        front: &dyn Dispatch,
        peer: Option<SocketAddr>,
        limit: Arc<FrameLimit>,
    ) -> SaslGate {
        SaslGate {
            auth: Authenticator::new(cfg.clone(), front.served()),
            cfg,
            credentials: front.credentials(),
            peer,
            limit,
        }
    }

    pub async fn check(&mut self, frame: &Bytes, session: &mut Session) -> Gate {
        let outcome = self
            .auth
            .on_frame(frame, now_ms(), &*self.credentials, &mut || nonce());
        let client = self
            .peer
            .map_or_else(|| "-".to_string(), |a| a.ip().to_string());
        match outcome {
            Outcome::Serve => Gate::Serve,
            Outcome::Reply(r) => Gate::Reply(r),
            Outcome::Authenticated { reply, principal } => {
                if *session.principal != principal {
                    session.principal = Arc::new(principal);
                }
                self.limit.authenticated.store(true, Ordering::Relaxed);
                Gate::Reply(reply)
            }
            Outcome::Fail { reply, reason } => {
                info!(
                    listener = %self.cfg.listener,
                    "Failed authentication with /{client} ({reason})"
                );
                tokio::time::sleep(Duration::from_millis(self.cfg.failed_auth_delay_ms)).await;
                Gate::Close(reply)
            }
            Outcome::Close(reason) => {
                warn!(
                    client = %self.peer.map_or_else(|| "-".to_string(), |a| a.to_string()),
                    principal = %Principal::clone(&session.principal),
                    "closing connection: {reason}"
                );
                Gate::Close(None)
            }
        }
    }
}
