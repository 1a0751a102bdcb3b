//! How this broker connects to the other brokers of a cluster (replica fetchers, the
//! transaction coordinator's peers): through the inter-broker listener
//! (`inter.broker.listener.name`, or the listener `security.inter.broker.protocol` names),
//! with its security protocol. Over SSL and SASL_SSL the connection is TLS with that
//! listener's settings (`super::tls::client`); over SASL_PLAINTEXT and SASL_SSL the broker
//! then logs in with `sasl.mechanism.inter.broker.protocol` and the username and password of
//! the listener's JAAS entry for it, as Kafka's broker does. The SASL exchange itself is run
//! by the Kafka-protocol client that owns the connection
//! (`crate::cluster::fetcher::conn::LeaderConn`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::gate::Gate;
use crate::config::BrokerConfig;
use crate::security::sasl::client::ClientLogin;

/// A connected byte stream to another broker: plain TCP or TLS over it.
pub trait Transport: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> Transport for T {}

/// How long connecting (TCP and the TLS handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The security of this broker's connections to the other brokers.
#[derive(Clone, Default)]
pub struct InterBroker {
    tls: Option<Arc<rustls::ClientConfig>>,
    /// The SASL login, on a SASL inter-broker listener.
    pub sasl: Option<ClientLogin>,
    /// The node's connection gate: the brokers it may reach.
    pub gate: Gate,
}

impl std::fmt::Debug for InterBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterBroker")
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl)
            .field("gate", &self.gate)
            .finish()
    }
}

impl InterBroker {
    /// Plain TCP, no login (a PLAINTEXT inter-broker listener).
    pub fn plaintext() -> InterBroker {
        InterBroker::default()
    }

    /// Reads the inter-broker listener's settings (start-up: an error names the key). A
    /// broker outside a cluster, a one-voter node or a controller-only node connects to no
    /// broker: plaintext.
    pub fn load(config: &BrokerConfig) -> Result<InterBroker> {
        let Some(cc) = config
            .cluster
            .as_ref()
            .filter(|cc| cc.roles.broker && !cc.one_voter)
        else {
            return Ok(InterBroker::plaintext());
        };
        let listener = cc.inter_broker_listener.as_str();
        let protocol = config
            .security_protocol(listener)
            .unwrap_or_else(|| "PLAINTEXT".to_string());
        let tls = if super::tls::uses_tls(&protocol) {
            Some(super::tls::client::load(config, listener)?)
        } else {
            None
        };
        let sasl = match config.sasl.get(listener) {
            Some(server) if protocol.starts_with("SASL_") => {
                let get = |k: &str| {
                    config
                        .raw
                        .iter()
                        .find(|(key, _)| key.eq_ignore_ascii_case(k))
                        .map(|(_, v)| v.trim().to_string())
                        .filter(|v| !v.is_empty())
                };
                let mechanism = get("sasl.mechanism.inter.broker.protocol")
                    .unwrap_or_else(|| "GSSAPI".to_string());
                let login = ClientLogin::parse(listener, &mechanism, &server.mechanisms, &get)
                    .map_err(|(key, msg)| match config.origin(&key) {
                        Some(origin) => anyhow!("{origin}: {key}: {msg}"),
                        None => anyhow!("{key}: {msg}"),
                    })?;
                Some(login)
            }
            _ => None,
        };
        Ok(InterBroker {
            tls,
            sasl,
            gate: Gate::default(),
        })
    }

    /// Connects to broker `peer` at `addr` (`host:port`), with the TLS handshake when the
    /// listener runs over TLS; through the gate, which may refuse it or cut it later.
    pub async fn open(&self, peer: i32, addr: &str) -> Result<Box<dyn Transport>> {
        let cut = self
            .gate
            .pass(peer)
            .ok_or_else(|| anyhow!("cut off from broker {peer} (connection gate)"))?;
        let connect = async {
            let stream = TcpStream::connect(addr)
                .await
                .with_context(|| format!("connecting to {addr}"))?;
            stream.set_nodelay(true)?;
            let stream = Gate::wrap(stream, cut);
            let Some(tls) = &self.tls else {
                return Ok(Box::new(stream) as Box<dyn Transport>);
            };
            let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
            let name = super::tls::client::server_name(host)?;
            let stream = TlsConnector::from(tls.clone())
                .connect(name, stream)
                .await
                .with_context(|| format!("TLS handshake with {addr}"))?;
            Ok(Box::new(stream) as Box<dyn Transport>)
        };
        tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| anyhow!("connecting to {addr} timed out"))?
    }
}
