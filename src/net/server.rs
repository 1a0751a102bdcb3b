//! Listener sockets: bound at start-up (a port in use stops start-up), then one task per
//! accepted connection.

use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::net::TcpListener;
use tracing::warn;

use crate::broker::Broker;
use crate::config::Listener;

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

/// Accepts connections on the listener called `name` until the task is dropped.
pub async fn accept_loop(listener: TcpListener, broker: Arc<Broker>, name: Arc<str>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(super::connection::serve(
                    stream,
                    broker.clone(),
                    name.clone(),
                ));
            }
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}
