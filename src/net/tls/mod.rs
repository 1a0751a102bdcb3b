//! TLS listeners (`SSL://`, and the transport of `SASL_SSL://`): the handshake, the client's
//! principal from its certificate, and a response sink that encrypts.
//!
//! The transport is chosen per listener from its security protocol ([`uses_tls`]); what runs
//! over it (Kafka requests, or SASL first and then requests) does not depend on it. A handshake
//! that fails (garbage bytes, an untrusted or missing client certificate) ends that connection
//! only, with one log line naming the client.

pub mod client;
pub mod principal;
pub mod settings;
mod sink;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Result;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn};

use super::connection::addr;
use super::dispatch::Dispatch;
use crate::config::BrokerConfig;
use crate::security::{Principal, Session};
pub use settings::ClientAuth;
use settings::TlsSettings;
use sink::TlsSink;

/// True for the security protocols that run over TLS.
pub fn uses_tls(protocol: &str) -> bool {
    protocol.eq_ignore_ascii_case("SSL") || protocol.eq_ignore_ascii_case("SASL_SSL")
}

/// A TLS listener's acceptor and principal mapping, shared by its connections.
pub struct TlsListener {
    acceptor: TlsAcceptor,
    settings: TlsSettings,
}

impl TlsListener {
    /// Loads the listener's keys and settings (start-up: errors name the key).
    pub fn load(config: &BrokerConfig, listener: &str, protocol: &str) -> Result<Arc<TlsListener>> {
        let settings = settings::load(config, listener, protocol)?;
        Ok(Arc::new(TlsListener {
            acceptor: TlsAcceptor::from(settings.server.clone()),
            settings,
        }))
    }

    pub fn client_auth(&self) -> ClientAuth {
        self.settings.client_auth
    }

    /// The principal for a client certificate chain (leaf first), or why there is none.
    fn principal(
        &self,
        certs: Option<&[rustls_pki_types::CertificateDer<'_>]>,
    ) -> Result<Principal, String> {
        let Some(leaf) = certs.and_then(|c| c.first()) else {
            return Ok(Principal::anonymous());
        };
        let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref())
            .map_err(|e| format!("cannot read the client certificate: {e}"))?;
        let subject = principal::rfc2253(cert.subject());
        self.settings.mapper.map(&subject).map(Principal::user)
    }
}

/// Serves one connection on a TLS listener: handshake, then requests as on any listener.
pub async fn serve(
    stream: TcpStream,
    tls: Arc<TlsListener>,
    front: Arc<dyn Dispatch>,
    listener: Arc<str>,
) {
    let peer = stream.peer_addr().ok();
    let _ = stream.set_nodelay(true);
    let stream = match tls.acceptor.accept(stream).await {
        Ok(s) => s,
        Err(e) => {
            log_refused(peer, &e);
            return;
        }
    };
    let principal = match tls.principal(stream.get_ref().1.peer_certificates()) {
        Ok(p) => p,
        Err(e) => {
            warn!(client = %addr(peer), "closing connection: TLS client not accepted: {e}");
            return;
        }
    };
    debug!(client = %addr(peer), %principal, "TLS connection");
    let session = Session {
        principal: Arc::new(principal),
        ..Session::anonymous(peer, &listener)
    };
    let (rd, wr) = tokio::io::split(stream);
    super::connection::run(rd, TlsSink::new(wr), session, front).await;
}

fn log_refused(peer: Option<SocketAddr>, e: &std::io::Error) {
    // A client that connects and leaves without a byte (a port probe) is not worth a warning.
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        debug!(client = %addr(peer), "closing connection: TLS handshake not finished: {e}");
    } else {
        warn!(client = %addr(peer), "closing connection: TLS handshake failed: {e}");
    }
}
