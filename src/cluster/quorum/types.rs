//! The openraft type configuration and the messages Sluice nodes exchange.
//!
//! An entry's payload is opaque bytes ([`Record`]); what the bytes mean is the state machine's
//! business. Every message is one postcard value inside one length-delimited frame (see
//! `network.rs`). The first frame a connection carries is a [`Hello`]; after the server's
//! [`Welcome`] both sides send [`Envelope`]s, each request tagged with an id its response echoes,
//! so one connection carries many requests at once.

use std::io::Cursor;

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Entry, TokioRuntime};
use serde::{Deserialize, Serialize};

/// Node ids are Kafka's `node.id`.
pub type NodeId = u64;

/// [`Hello::to`] of a node that does not know whom it dials: a broker-only node given
/// `controller.quorum.bootstrap.servers` asks for the voters ([`Welcome::Voters`]).
pub const DISCOVER: NodeId = NodeId::MAX;

/// One replicated record: opaque bytes handed to [`super::StateMachine::apply`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record(pub Vec<u8>);

impl std::fmt::Display for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "record({} bytes)", self.0.len())
    }
}

openraft::declare_raft_types!(
    /// Sluice's Raft types: opaque records, `u64` ids, nodes known by `host:port`.
    pub TypeConfig:
        D = Record,
        R = (),
        NodeId = NodeId,
        Node = BasicNode,
        Entry = Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = TokioRuntime,
);

pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type RaftEntry = Entry<TypeConfig>;
pub type Membership = openraft::StoredMembership<NodeId, BasicNode>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, BasicNode>;
pub type Raft = openraft::Raft<TypeConfig>;
pub type StorageError = openraft::StorageError<NodeId>;

/// First frame of a connection, from the side that opened it.
#[derive(Debug, Serialize, Deserialize)]
pub struct Hello {
    /// The sender's cluster id, once it knows one.
    pub cluster_id: Option<String>,
    /// The sender's node id.
    pub from: NodeId,
    /// The node the sender believes it is talking to.
    pub to: NodeId,
    /// The sender's directory id (see [`super::network::Transport::directory_of`]).
    pub directory_id: [u8; 16],
}

/// The answer to a [`Hello`].
#[derive(Debug, Serialize, Deserialize)]
pub enum Welcome {
    /// Accepted; carries the receiver's cluster id so a node that has none yet learns it.
    /// With the receiver's directory id.
    Accepted {
        cluster_id: Option<String>,
        directory_id: [u8; 16],
    },
    /// Refused (another cluster, or not the node the sender meant); the connection is closed.
    Refused { reason: String },
    /// The answer to a [`DISCOVER`] hello: the voters this node knows (id, `host:port`) and its
    /// cluster id; the connection is closed.
    Voters {
        cluster_id: Option<String>,
        voters: Vec<(NodeId, String)>,
    },
}

/// Every frame after the handshake.
#[derive(Debug, Serialize, Deserialize)]
pub enum Envelope {
    Request { id: u64, body: Request },
    Response { id: u64, body: Response },
}

#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    Vote(VoteRequest<NodeId>),
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// An application request for the active controller (the Raft leader).
    Controller(Vec<u8>),
    /// Ask the leader to add a non-voting member (a broker-only node joining).
    AddLearner {
        id: NodeId,
        addr: String,
    },
    /// Whether the receiver already belongs to an initialized quorum (asked before
    /// bootstrapping).
    Probe,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum Response {
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    /// The answer to `Controller` or `AddLearner`.
    Leader(LeaderReply),
    Probe {
        initialized: bool,
    },
}

/// What the leader (or a node that is not the leader) answers to a request meant for the leader.
#[derive(Debug, Serialize, Deserialize)]
pub enum LeaderReply {
    Ok(Vec<u8>),
    /// This node does not lead; `leader` is who it believes does, with that node's address.
    NotLeader {
        leader: Option<(NodeId, String)>,
    },
    /// This node leads but cannot serve the request yet (worth retrying).
    Unavailable(String),
    /// The leader took the request but could not serve it.
    Failed(String),
}

/// Encodes a message as one frame's payload.
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    // Serializing plain data structures into a Vec cannot fail.
    postcard::to_stdvec(msg).expect("postcard encoding of an in-memory value")
}

/// Decodes one frame's payload; any error means a malformed frame.
pub fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, postcard::Error> {
    postcard::from_bytes(bytes)
}
