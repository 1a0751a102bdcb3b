//! The metadata quorum: a Raft-replicated log of opaque records (openraft 0.9 does the
//! consensus; this module gives it storage, a network and a small API), as Kafka's KRaft
//! replicates `__cluster_metadata`. What a record means is up to the [`StateMachine`] the
//! quorum applies records to, in log order, on every node.
//!
//! # Pieces
//! - `types.rs`: openraft's type configuration (a record is `Vec<u8>`) and the wire messages.
//! - `store.rs`: the directory lock (`.lock`, exclusive `flock`) and `quorum-state` (vote,
//!   committed log id, purged log id, cluster id; rewritten atomically and synced before
//!   openraft is told it is durable).
//! - `log_store.rs`: the log, in CRC-32C framed segments, recovered after a crash at any point
//!   by cutting a torn tail.
//! - `state_machine.rs`: applies entries to the [`StateMachine`], builds and installs snapshots
//!   (`<dir>/snapshot`, written beside and renamed into place).
//! - `network.rs` + `raft_network.rs`: the TCP transport (tokio-util length-delimited frames of
//!   postcard messages, a handshake that checks the cluster id, reused connections with
//!   backoff) and openraft's network interface over it.
//! - `node.rs`: [`Quorum`]: start, bootstrap, propose, leader routing, status, shutdown.
//!
//! # Wire format
//! postcard (serde, varint integers, no schema): compact, deterministic, a stable documented
//! format, and it encodes openraft's own serde types as they are. Its one limit, no
//! self-describing formats (`deserialize_any`), does not touch openraft's types. Both ends are
//! Sluice, so no other format needs to read it.
//!
//! # Timeouts (Kafka's names)
//! `controller.quorum.fetch.timeout.ms` (default 2000) is how long a follower goes without
//! hearing from the leader before it stands for election: openraft's minimum election timeout.
//! `controller.quorum.election.timeout.ms` (default 1000) is the random spread on top of it,
//! so candidates rarely collide (Kafka backs off a random time up to it). The leader sends
//! heartbeats every quarter of the fetch timeout; that is also the append RPC timeout.
//!
//! # Forming a cluster without a format step
//! Every voter is started with the same voter list and an empty (or absent) directory. The
//! voter with the lowest id initializes the membership (all listed voters) when its own log is
//! empty, it has no vote and no snapshot, and a majority of the voters (itself included) have
//! answered a probe saying they belong to no initialized quorum, with none saying it does. It
//! then chooses the cluster id (or uses the configured one), and every other node learns it in
//! its first handshake. The others never initialize; they wait to be contacted. A restarted
//! node has a log or a vote, so it never initializes again.
//!
//! If the lowest-id voter's directory is lost, it starts empty, probes, and finds voters that
//! belong to an initialized quorum: it does not initialize, learns the cluster id, and is
//! caught up by the leader as any voter with an empty directory is. Raft itself does not make
//! that safe in every case: the lost directory may have held entries (or a vote) the quorum
//! counted on, and until it has caught up it could help a lagging voter win an election. With
//! three voters that takes a second failure at the same time; replace a voter whose disk was
//! lost while the others are healthy. If no other voter answers at all (all down), the empty
//! voter waits: it never initializes without hearing from a majority.
//!
//! # Learners
//! A node started with `voter: false` (a broker-only node, Kafka's observer) asks the leader to
//! add it as a learner until it appears in the membership; it receives every entry but never
//! votes or counts toward a commit.
//!
//! # Talking to the active controller
//! [`Quorum::call_leader`] sends opaque bytes to the current leader's registered
//! [`ControllerService`] and returns its answer, following leader hints and retrying while the
//! leadership moves, up to a deadline. A retried request may have reached an old leader that
//! served it before failing to answer, so handlers must tolerate seeing a request twice.

mod log_store;
mod network;
mod node;
mod raft_network;
mod state_machine;
mod store;
mod types;
mod voters;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

pub use network::discover_voters;
pub use node::Quorum;
pub use types::NodeId;
pub use voters::{VoterChange, VoterChangeError};

/// What the quorum replicates into. Called in log order, on every node, from one task.
pub trait StateMachine: Send + Sync + 'static {
    /// Applies the record at log `index`. Must be deterministic: every node applies the same
    /// records in the same order and must end in the same state. Indexes only grow, with gaps
    /// where the log holds entries that are not records (leader changes, membership).
    fn apply(&mut self, index: u64, record: &[u8]);
    /// The whole state, as bytes [`Self::restore`] reads back.
    fn snapshot(&self) -> Vec<u8>;
    /// Replaces the whole state with a snapshot covering the log up to `index`.
    fn restore(&mut self, index: u64, snapshot: &[u8]) -> anyhow::Result<()>;
}

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a [`ControllerService`] did not answer a request.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ServiceError {
    /// The service found this node is no longer the leader; the caller retries elsewhere.
    #[error("not the leader")]
    NotLeader,
    /// Final: returned to the caller as [`CallError::Failed`].
    #[error("{0}")]
    Failed(String),
}

/// The active controller's request handler, registered on every node with
/// [`Quorum::set_controller_service`] and called only while that node is the leader.
pub trait ControllerService: Send + Sync + 'static {
    fn handle(&self, request: Vec<u8>) -> BoxFuture<'_, Result<Vec<u8>, ServiceError>>;
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    #[error("not the leader (leader: {leader:?})")]
    NotLeader { leader: Option<NodeId> },
    #[error("record of {size} bytes exceeds the limit of {max}")]
    TooLarge { size: usize, max: usize },
    #[error("quorum is shut down: {0}")]
    Shutdown(String),
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    #[error("no leader answered within {0:?} (last: {1})")]
    Timeout(Duration, String),
    /// A peer refused the connection (another cluster); retrying would not help.
    #[error("{0}")]
    Refused(String),
    /// The leader's service answered with a final error.
    #[error("controller failed: {0}")]
    Failed(String),
    #[error("request of {0} bytes exceeds the frame limit")]
    TooLarge(usize),
    #[error("quorum is shut down")]
    Shutdown,
}

/// How to run one quorum node.
#[derive(Debug, Clone)]
pub struct QuorumConfig {
    /// Kafka's `node.id`.
    pub node_id: NodeId,
    /// Every voter's id and `host:port` (Kafka's `controller.quorum.voters`); the same list on
    /// every node. Used to form the cluster and to find a leader; once formed, the replicated
    /// membership is what counts.
    pub voters: BTreeMap<NodeId, String>,
    /// Whether this node is one of `voters`; `false` makes it a learner (broker-only node).
    pub voter: bool,
    /// `metadata.log.dir`.
    pub dir: PathBuf,
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Address other nodes reach this one at; defaults to `listen`.
    pub advertised: Option<String>,
    /// Cluster id to form the cluster with (or insist on); chosen at bootstrap when `None`.
    pub cluster_id: Option<String>,
    /// `controller.quorum.election.timeout.ms`.
    pub election_timeout: Duration,
    /// `controller.quorum.fetch.timeout.ms`.
    pub fetch_timeout: Duration,
    /// Entries applied between snapshots.
    pub snapshot_every: u64,
    /// Entries already in a snapshot kept in the log (for followers slightly behind).
    pub keep_after_snapshot: u64,
    /// Log segment size before rolling.
    pub segment_bytes: u64,
    /// Largest record [`Quorum::propose`] accepts.
    pub max_record_bytes: usize,
    /// Largest frame on the wire.
    pub max_frame_bytes: usize,
    /// Default deadline for [`Quorum::call_leader`] (Kafka's `controller.quorum.request.timeout.ms`).
    pub request_timeout: Duration,
    /// The node's connection gate: the nodes its transport may talk to.
    pub gate: crate::net::gate::Gate,
}

impl QuorumConfig {
    /// Kafka's defaults for everything not given.
    pub fn new(
        node_id: NodeId,
        voters: BTreeMap<NodeId, String>,
        dir: impl Into<PathBuf>,
        listen: SocketAddr,
    ) -> QuorumConfig {
        QuorumConfig {
            voter: voters.contains_key(&node_id),
            node_id,
            voters,
            dir: dir.into(),
            listen,
            advertised: None,
            cluster_id: None,
            election_timeout: Duration::from_millis(1000),
            fetch_timeout: Duration::from_millis(2000),
            snapshot_every: 20_000,
            keep_after_snapshot: 1000,
            segment_bytes: 16 << 20,
            max_record_bytes: 1 << 20,
            max_frame_bytes: 16 << 20,
            request_timeout: Duration::from_millis(2000),
            gate: Default::default(),
        }
    }
}

/// One replica as Kafka's DescribeQuorum reports it. Offsets are Kafka's: the log end offset
/// is one past the last index known to be in that replica's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaStatus {
    pub node_id: NodeId,
    /// Its directory id, where known (see `Transport::directory_of`).
    pub directory_id: Option<[u8; 16]>,
    pub log_end_offset: Option<u64>,
    /// Milliseconds since the epoch at which the leader last heard from the replica.
    pub last_fetch_ms: Option<u64>,
    /// Milliseconds since the epoch of the last fetch that reached the leader's log end.
    pub last_caught_up_ms: Option<u64>,
}

/// This node's part in the quorum right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
    Candidate,
    Follower,
    /// A non-voting member (or a node not yet in the membership).
    Learner,
    Shutdown,
}

/// What this node knows of the quorum; the per-replica fields are the leader's view and are
/// `None` on other nodes (Kafka answers DescribeQuorum only on the leader).
#[derive(Debug, Clone)]
pub struct QuorumStatus {
    pub node_id: NodeId,
    pub role: Role,
    pub cluster_id: Option<String>,
    pub leader: Option<NodeId>,
    /// The Raft term: Kafka's leader epoch.
    pub term: u64,
    /// One past the committed index.
    pub high_watermark: u64,
    /// Index of the last entry applied here.
    pub applied: Option<u64>,
    pub voters: Vec<ReplicaStatus>,
    /// Learners (Kafka's observers).
    pub observers: Vec<ReplicaStatus>,
    /// Handshakes refused by or to this node since it started (another cluster's node).
    pub handshakes_refused: u64,
}
