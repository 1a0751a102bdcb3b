//! Listener sockets: bound at start-up (a port in use stops start-up), then one task per
//! accepted connection.

use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::net::TcpListener;
use tracing::warn;

use super::dispatch::Dispatch;
use super::tls::{self, TlsListener};
use crate::config::{BrokerConfig, Listener};

/// Binds every configured listener; the first failure is returned naming the address.
/// Nothing is logged: the start-up line names the bound addresses once the broker is open.
pub async fn bind_all(listeners: &[Listener]) -> Result<Vec<TcpListener>> {
    let mut out = Vec::new();
    for l in listeners {
        let addr = l.bind_addr();
        let sock = TcpListener::bind(&addr)
            .await
            .with_context(|| format!("cannot listen on {addr} ({}://{addr})", l.name))?;
        out.push(sock);
    }
    Ok(out)
}

/// The TLS side of every listener whose security protocol runs over TLS, in the order of
/// `listeners` (None for the others). Keys and certificates are loaded here, at start-up.
pub fn tls_for(config: &BrokerConfig) -> Result<Vec<Option<Arc<TlsListener>>>> {
    config
        .listeners
        .iter()
        .map(|l| match config.security_protocol(&l.name) {
            Some(p) if tls::uses_tls(&p) => TlsListener::load(config, &l.name, &p).map(Some),
            _ => Ok(None),
        })
        .collect()
}

/// Accepts connections on the listener called `name` until the task is dropped; `tls` is the
/// listener's TLS side when its security protocol runs over TLS.
pub async fn accept_loop(
    listener: TcpListener,
    front: Arc<dyn Dispatch>,
    name: Arc<str>,
    tls: Option<Arc<TlsListener>>,
) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                if front.refuses_connections() {
                    tracing::debug!("down (injected fault): closed the connection of {peer}");
                    drop(stream);
                    continue;
                }
                let (front, name) = (front.clone(), name.clone());
                match &tls {
                    Some(t) => tokio::spawn(tls::serve(stream, t.clone(), front, name)),
                    None => tokio::spawn(super::connection::serve(stream, front, name)),
                };
            }
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}
