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

use crate::broker::Broker;
use crate::cluster::fetcher::conn::LeaderConn;

/// What a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Purpose {
    Markers,
    Verify,
    Console,
}

type Conn = Arc<tokio::sync::Mutex<Option<LeaderConn>>>;

#[derive(Default)]
pub struct Peers {
    conns: std::sync::Mutex<HashMap<(i32, Purpose), Conn>>,
}

impl Peers {
    /// The inter-broker listener address of broker `id`, from the metadata image.
    pub fn address(b: &Broker, id: i32) -> Option<String> {
        let c = b.cluster()?;
        let img = c.image();
        crate::cluster::node::replicas::addresses(&img, &c.config.inter_broker_listener).remove(&id)
    }

    /// Sends `req` (`api`: its key and version) to broker `id` and reads its response
    /// (within `timeout`).
    pub async fn call<Req: Encodable, Resp: Decodable>(
        &self,
        b: &Broker,
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
        let r = Self::call_on(b, &mut conn, (id, purpose), (key, version), req, timeout).await;
        if r.is_err() && reused && started.elapsed() < timeout {
            return Self::call_on(b, &mut conn, (id, purpose), (key, version), req, timeout).await;
        }
        r
    }

    async fn call_on<Req: Encodable, Resp: Decodable>(
        b: &Broker,
        conn: &mut Option<LeaderConn>,
        (id, purpose): (i32, Purpose),
        (key, version): (ApiKey, i16),
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp> {
        if conn.is_none() {
            let addr = Self::address(b, id).ok_or_else(|| anyhow!("no address for broker {id}"))?;
            let client_id = match purpose {
                Purpose::Console => format!("sluice-console-{}", b.node_id()),
                Purpose::Markers | Purpose::Verify => format!("sluice-txn-{}", b.node_id()),
            };
            *conn = Some(
                LeaderConn::connect(
                    id,
                    &addr,
                    client_id,
                    b.config.socket_request_max_bytes,
                    &b.inter_broker,
                )
                .await?,
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
