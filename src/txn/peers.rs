//! Connections from this broker to the other brokers of a cluster for the transaction
//! coordinator's requests (WriteTxnMarkers to partition leaders, AddPartitionsToTxn from
//! partition leaders to coordinators) and for the web console's reads and test records of
//! partitions and groups another broker holds. One connection per (broker, purpose), made on
//! first use and dropped after an error (a kept connection that fails at once is retried on a new one:
//! the peer may have restarted since), so markers waiting for their replicas never hold up a
//! verification. Requests on one connection go one at a time, in order.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, anyhow};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::cluster::fetcher::conn::LeaderConn;
use crate::net::client::InterBroker;

/// What a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Purpose {
    Markers,
    Verify,
    Console,
}

type Conn = Arc<tokio::sync::Mutex<Option<LeaderConn>>>;

/// Where the other brokers are: a broker id's inter-broker listener address, from the
/// metadata image (None on one node, or for a broker not registered).
pub type Addresses = Box<dyn Fn(i32) -> Option<String> + Send + Sync>;

pub struct Peers {
    conns: std::sync::Mutex<HashMap<(i32, Purpose), Conn>>,
    node_id: i32,
    /// The largest response frame read (`socket.request.max.bytes`).
    max_frame: usize,
    /// The inter-broker listener's security, as a client.
    security: InterBroker,
    addresses: Addresses,
}

impl Peers {
    pub fn new(
        node_id: i32,
        max_frame: usize,
        security: InterBroker,
        addresses: Addresses,
    ) -> Peers {
        Peers {
            conns: Default::default(),
            node_id,
            max_frame,
            security,
            addresses,
        }
    }

    /// Sends `req` (`api`: its key and version) to broker `id` and reads its response
    /// (within `timeout`).
    pub async fn call<Req: Encodable, Resp: Decodable>(
        &self,
        (id, purpose): (i32, Purpose),
        (key, version): (ApiKey, i16),
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp> {
        let conn = self
            .conns
            .lock()
            .unwrap()
            .entry((id, purpose))
            .or_default()
            .clone();
        let mut conn = conn.lock().await;
        // A kept connection may be dead without our knowing (the peer restarted since its
        // last use): a failure on it other than the timeout is retried once on a fresh
        // connection. The requests sent here (verification, markers, the console's reads)
        // may be repeated; a console's test record (Produce) is not, lest it be written twice.
        let reused = conn.is_some() && key != ApiKey::Produce;
        let started = std::time::Instant::now();
        let r = self
            .call_on(&mut conn, (id, purpose), (key, version), req, timeout)
            .await;
        if r.is_err() && reused && started.elapsed() < timeout {
            return self
                .call_on(&mut conn, (id, purpose), (key, version), req, timeout)
                .await;
        }
        r
    }

    async fn call_on<Req: Encodable, Resp: Decodable>(
        &self,
        conn: &mut Option<LeaderConn>,
        (id, purpose): (i32, Purpose),
        (key, version): (ApiKey, i16),
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp> {
        if conn.is_none() {
            let addr = (self.addresses)(id).ok_or_else(|| anyhow!("no address for broker {id}"))?;
            let client_id = match purpose {
                Purpose::Console => format!("sluice-console-{}", self.node_id),
                Purpose::Markers | Purpose::Verify => format!("sluice-txn-{}", self.node_id),
            };
            *conn = Some(
                LeaderConn::connect(id, &addr, client_id, self.max_frame, &self.security).await?,
            );
        }
        let Some(c) = conn.as_mut() else {
            return Err(anyhow!("no connection to broker {id}"));
        };
        let r = c.call(key, version, req, timeout).await;
        if r.is_err() {
            *conn = None;
        }
        r
    }
}
