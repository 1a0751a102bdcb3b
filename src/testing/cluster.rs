//! [`Cluster`]: combined controller and broker nodes in this process, configured as a
//! replicated cluster of `sluice` processes is (`process.roles=broker,controller`, every node
//! a voter), each on 127.0.0.1 ports of its own.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use super::node::{NodeThread, Starting};
use super::{DataDir, load_config};
use crate::net::gate::Gate;

/// How long [`Cluster::start`] and [`Cluster::restart`] wait for the nodes to serve and to
/// see each other.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A replicated cluster for tests: `n` nodes with ids 1..=n, each a controller (a voter of
/// the metadata quorum) and a broker, their data in one temporary directory deleted on drop.
/// A test may [`kill`](Cluster::kill) a node (its tasks stop where they stand, as with
/// `kill -9`), [`restart`](Cluster::restart) it on its data and ports, and
/// [`isolate`](Cluster::isolate) it from the other nodes while clients still reach it, until
/// [`heal`](Cluster::heal).
///
/// ```no_run
/// use sluice::testing::Cluster;
///
/// let mut cluster = Cluster::start(3)?;
/// let bootstrap = cluster.bootstrap(); // "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
/// cluster.kill(2);
/// cluster.restart(2)?;
/// cluster.isolate(3);
/// cluster.heal();
/// # Ok::<(), anyhow::Error>(())
/// ```
pub struct Cluster {
    nodes: Vec<Slot>,
    properties: Vec<(String, String)>,
    dir: DataDir,
}

struct Slot {
    id: i32,
    port: u16,
    controller_port: u16,
    node: Option<NodeThread>,
    /// The node's connection gate; it outlives restarts.
    gate: Gate,
}

impl Cluster {
    /// Starts `n` nodes and blocks until every one serves and lists all `n` brokers.
    pub fn start(n: usize) -> Result<Cluster> {
        Cluster::start_with(n, &[])
    }

    /// [`Cluster::start`] with broker properties (Kafka's names) set on every node, over the
    /// cluster's own.
    pub fn start_with(n: usize, properties: &[(&str, &str)]) -> Result<Cluster> {
        if n == 0 {
            bail!("a cluster needs at least one node");
        }
        let ports = free_ports(2 * n)?;
        let mut cluster = Cluster {
            nodes: (0..n)
                .map(|i| Slot {
                    id: i as i32 + 1,
                    port: ports[2 * i],
                    controller_port: ports[2 * i + 1],
                    node: None,
                    gate: Gate::default(),
                })
                .collect(),
            properties: properties
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            dir: DataDir::new(None)?,
        };
        // Every node starts before any is waited for: the quorum forms once a majority runs.
        let starting: Vec<Starting> = (0..n).map(|i| cluster.spawn(i)).collect::<Result<_>>()?;
        for (i, s) in starting.into_iter().enumerate() {
            cluster.nodes[i].node = Some(s.wait()?);
        }
        cluster.wait_registered()?;
        Ok(cluster)
    }

    /// Every node's client address, comma-separated (a client's `bootstrap.servers`).
    pub fn bootstrap(&self) -> String {
        let all: Vec<String> = self.nodes.iter().map(|s| addr(s.port)).collect();
        all.join(",")
    }

    /// Node `id`'s client address, `127.0.0.1:PORT` (the same across restarts).
    pub fn node_bootstrap(&self, id: i32) -> String {
        addr(self.slot(id).port)
    }

    /// The node ids, 1..=n.
    pub fn node_ids(&self) -> Vec<i32> {
        self.nodes.iter().map(|s| s.id).collect()
    }

    /// Whether node `id` runs (it was not killed, or was restarted since).
    pub fn is_running(&self, id: i32) -> bool {
        self.slot(id).node.is_some()
    }

    /// The leader of `topic`'s `partition` in the metadata of the lowest-id running node
    /// (None if no node runs or the partition has no leader there).
    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        self.leader_seen_by(self.running().next()?, topic, partition)
    }

    /// The leader of `topic`'s `partition` in node `id`'s metadata.
    pub fn leader_seen_by(&self, id: i32, topic: &str, partition: i32) -> Option<i32> {
        let broker = self.slot(id).node.as_ref()?.broker()?;
        let image = broker.cluster()?.image();
        let leader = image
            .topic(topic)?
            .partitions
            .get(partition as usize)?
            .leader;
        (leader >= 0).then_some(leader)
    }

    /// Stops node `id` abruptly: its tasks are dropped where they stand, its connections and
    /// listeners close, nothing is flushed beyond what it had done (the page cache keeps what
    /// it wrote, as after `kill -9`). A node not running is left as it is.
    pub fn kill(&mut self, id: i32) {
        if let Some(node) = self.slot_mut(id).node.take() {
            node.kill();
        }
    }

    /// Starts node `id` again on its data and ports (it must have been killed) and blocks
    /// until it serves.
    pub fn restart(&mut self, id: i32) -> Result<()> {
        let i = self.index(id);
        if self.nodes[i].node.is_some() {
            bail!("node {id} is running");
        }
        let node = self.spawn(i)?.wait()?;
        self.nodes[i].node = Some(node);
        Ok(())
    }

    /// Cuts node `id` off from the other nodes, both ways: the quorum's RPCs (votes, metadata
    /// log appends, requests to the active controller) and the inter-broker client's
    /// connections (replica fetches, the transaction coordinator's requests) end at once and
    /// are refused until [`Cluster::heal`]. Clients still reach every node. Applies to a
    /// killed node once restarted.
    pub fn isolate(&self, id: i32) {
        for s in &self.nodes {
            if s.id != id {
                s.gate.close(id);
                self.slot(id).gate.close(s.id);
            }
        }
    }

    /// Ends every isolation: all nodes may talk to each other again.
    pub fn heal(&self) {
        for s in &self.nodes {
            s.gate.open_all();
        }
    }

    fn running(&self) -> impl Iterator<Item = i32> + '_ {
        self.nodes.iter().filter(|s| s.node.is_some()).map(|s| s.id)
    }

    fn index(&self, id: i32) -> usize {
        self.nodes
            .iter()
            .position(|s| s.id == id)
            .unwrap_or_else(|| panic!("no node {id} (the nodes are 1..={})", self.nodes.len()))
    }

    fn slot(&self, id: i32) -> &Slot {
        &self.nodes[self.index(id)]
    }

    fn slot_mut(&mut self, id: i32) -> &mut Slot {
        let i = self.index(id);
        &mut self.nodes[i]
    }

    /// Node `i`'s settings, as a process of a cluster has them, then the test's.
    fn spawn(&self, i: usize) -> Result<Starting> {
        let n = self.nodes.len();
        let node = &self.nodes[i];
        let voters: Vec<String> = self
            .nodes
            .iter()
            .map(|s| format!("{}@127.0.0.1:{}", s.id, s.controller_port))
            .collect();
        let dir = self.dir.path().join(format!("node-{}", node.id));
        let replicas = n.min(3).to_string();
        let min_isr = n.min(2).to_string();
        let mut settings: Vec<(String, String)> = [
            ("process.roles", "broker,controller".to_string()),
            ("node.id", node.id.to_string()),
            ("controller.quorum.voters", voters.join(",")),
            (
                "listeners",
                format!(
                    "PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{}",
                    node.port, node.controller_port
                ),
            ),
            ("controller.listener.names", "CONTROLLER".to_string()),
            (
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT".to_string(),
            ),
            ("log.dirs", dir.join("data").display().to_string()),
            ("metadata.log.dir", dir.join("meta").display().to_string()),
            // Fail-over within seconds, still not set off by a loaded machine.
            ("broker.session.timeout.ms", "6000".to_string()),
            ("broker.heartbeat.interval.ms", "1000".to_string()),
            ("replica.lag.time.max.ms", "6000".to_string()),
            ("group.initial.rebalance.delay.ms", "0".to_string()),
            // Internal topics fit a cluster of fewer than 3 nodes.
            ("offsets.topic.replication.factor", replicas.clone()),
            ("transaction.state.log.replication.factor", replicas),
            ("transaction.state.log.min.isr", min_isr),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        settings.extend(self.properties.iter().cloned());
        NodeThread::spawn(load_config(&settings)?, node.gate.clone())
    }

    /// Waits until every running node lists every running node as an unfenced broker.
    fn wait_registered(&self) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        let want: Vec<i32> = self.running().collect();
        loop {
            let all = self.nodes.iter().filter_map(|s| s.node.as_ref()).all(|n| {
                n.broker()
                    .and_then(|b| b.cluster().map(|c| c.image()))
                    .is_some_and(|img| {
                        want.iter()
                            .all(|id| img.brokers.get(id).is_some_and(|b| !b.fenced))
                    })
            });
            if all {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the nodes did not all register within {START_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // The data goes with the cluster: no clean shutdown is needed before it is deleted.
        for s in &mut self.nodes {
            if let Some(node) = s.node.take() {
                node.kill();
            }
        }
    }
}

fn addr(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// `n` distinct ports free on 127.0.0.1 (held together while chosen, so they differ).
fn free_ports(n: usize) -> Result<Vec<u16>> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<_>>()?;
    Ok(held
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<std::io::Result<_>>()?)
}
