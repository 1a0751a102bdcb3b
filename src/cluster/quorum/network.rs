//! Sluice-to-Sluice transport: TCP, one length-delimited frame (tokio-util's
//! `LengthDelimitedCodec`, 4-byte big-endian length, bounded by `max_frame`) per postcard
//! message.
//!
//! A connection starts with the opener's [`Hello`] (its cluster id once known, its node id,
//! the node it means to reach) and the listener's [`Welcome`]. A node whose cluster id differs,
//! or that meant another node id, is refused and the refusal is logged on both sides. A node
//! that knows no cluster id yet adopts the peer's (persisted in `quorum-state` before it
//! answers), which is how nodes started from empty directories all learn the id the
//! bootstrapping voter chose.
//!
//! After the handshake the opener sends requests, each with an id, and the listener answers
//! them as they complete, in any order, so one connection per peer carries votes, appends,
//! snapshots and controller calls concurrently. Connections are kept and reused; a broken one
//! fails the requests in flight and the next request reconnects, with an exponential backoff
//! after failed attempts. A frame that is too long or does not decode closes that connection
//! and nothing else.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};
use tokio_util::sync::CancellationToken;

use super::store::StateFile;
use super::types::{
    DISCOVER, Envelope, Hello, LeaderReply, NodeId, Raft, Request, Response, Welcome, decode,
    encode,
};
use super::{ControllerService, ServiceError};
use crate::net::gate::Gate;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(2);
/// Requests one connection may have in service at once on the listening side.
const MAX_IN_SERVICE: usize = 64;

/// Why a request to a peer got no answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallFailure {
    #[error("node {0} unreachable: {1}")]
    Unreachable(NodeId, String),
    #[error("node {0} refused the connection: {1}")]
    Refused(NodeId, String),
    #[error("connection to node {0} lost: {1}")]
    Lost(NodeId, String),
    #[error("node {0} did not answer within {1:?}")]
    Timeout(NodeId, Duration),
    #[error("request of {0} bytes exceeds the frame limit")]
    TooLarge(usize),
}

/// Per peer, when the leader last heard an append acknowledged and when an acknowledgement
/// last covered the whole leader log as of sending (Kafka's last fetch / last caught-up time).
#[derive(Clone, Copy, Debug, Default)]
pub struct AckTimes {
    pub last_ack_ms: Option<u64>,
    pub last_caught_up_ms: Option<u64>,
}

pub fn now_ms() -> u64 {
    crate::clock::now_ms() as u64
}

fn codec(max_frame: usize) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .max_frame_length(max_frame)
        .new_codec()
}

/// The node's side of the network: its listener, its connections to peers, its cluster id.
pub struct Transport {
    pub id: NodeId,
    pub max_frame: usize,
    state: Arc<StateFile>,
    raft: OnceLock<Raft>,
    service: RwLock<Option<Arc<dyn ControllerService>>>,
    peers: Mutex<HashMap<NodeId, Arc<Peer>>>,
    pub cancel: CancellationToken,
    acks: Mutex<HashMap<NodeId, AckTimes>>,
    refused: AtomicU64,
    /// The configured voters, told to nodes that ask ([`DISCOVER`]).
    voters: BTreeMap<NodeId, String>,
    /// This node's directory id, and each peer's as its last handshake told it.
    directory_id: [u8; 16],
    directories: Mutex<HashMap<NodeId, [u8; 16]>>,
    /// The nodes this one may talk to; a connection with a node it closes to ends.
    gate: Gate,
}

impl Transport {
    pub fn new(
        id: NodeId,
        max_frame: usize,
        state: Arc<StateFile>,
        voters: BTreeMap<NodeId, String>,
        directory_id: [u8; 16],
        gate: Gate,
    ) -> Arc<Transport> {
        Arc::new(Transport {
            gate,
            id,
            voters,
            directory_id,
            directories: Mutex::new(HashMap::new()),
            max_frame,
            state,
            raft: OnceLock::new(),
            service: RwLock::new(None),
            peers: Mutex::new(HashMap::new()),
            cancel: CancellationToken::new(),
            acks: Mutex::new(HashMap::new()),
            refused: AtomicU64::new(0),
        })
    }

    pub fn set_raft(&self, raft: Raft) {
        let _ = self.raft.set(raft);
    }

    pub fn raft(&self) -> Option<&Raft> {
        self.raft.get()
    }

    pub fn set_service(&self, service: Arc<dyn ControllerService>) {
        *self.service.write().unwrap() = Some(service);
    }

    pub fn clear_service(&self) {
        self.service.write().unwrap().take();
    }

    pub fn cluster_id(&self) -> Option<String> {
        self.state.get().cluster_id
    }

    /// A node's directory id (KIP-853): this node's, or a peer's as learned in the handshake
    /// of a connection with it (either way); `None` for a peer not met since start.
    pub fn directory_of(&self, id: NodeId) -> Option<[u8; 16]> {
        if id == self.id {
            return Some(self.directory_id);
        }
        self.directories.lock().unwrap().get(&id).copied()
    }

    fn met(&self, id: NodeId, directory_id: [u8; 16]) {
        self.directories.lock().unwrap().insert(id, directory_id);
    }

    /// Handshakes refused, by either side, since start.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    pub fn acks(&self) -> HashMap<NodeId, AckTimes> {
        self.acks.lock().unwrap().clone()
    }

    pub fn record_ack(&self, target: NodeId, sent_ms: u64, caught_up: bool) {
        let mut acks = self.acks.lock().unwrap();
        let a = acks.entry(target).or_default();
        a.last_ack_ms = Some(now_ms());
        if caught_up {
            a.last_caught_up_ms = Some(sent_ms);
        }
    }

    /// Takes `theirs` as this node's cluster id if it has none; an error if it has another.
    fn adopt_cluster_id(&self, theirs: &str, peer: NodeId) -> Result<(), String> {
        let mut outcome = Ok(());
        let res = self.state.update(|s| match &s.cluster_id {
            None => s.cluster_id = Some(theirs.to_string()),
            Some(ours) if ours == theirs => {}
            Some(ours) => {
                outcome = Err(format!(
                    "cluster id mismatch: this node (id {}) belongs to cluster {ours}, node {peer} to cluster {theirs}",
                    self.id
                ))
            }
        });
        if let Err(e) = res {
            return Err(format!("cannot persist cluster id: {e}"));
        }
        if outcome.is_ok() && self.state.get().cluster_id.as_deref() == Some(theirs) {
            tracing::info!(
                node = self.id,
                cluster_id = theirs,
                from = peer,
                "learned the cluster id"
            );
        }
        outcome
    }

    /// Persists `cluster_id` as this node's (it has none yet), and drops the open connections
    /// so that every peer learns the id in the handshake of the next one.
    pub fn choose_cluster_id(&self, cluster_id: &str) -> std::io::Result<()> {
        self.state.update(|s| {
            if s.cluster_id.is_none() {
                s.cluster_id = Some(cluster_id.to_string());
            }
        })?;
        for peer in self.peers.lock().unwrap().values() {
            peer.close();
        }
        Ok(())
    }

    /// The connection state for `target` at `addr` (replaced when the address changed).
    pub fn peer(&self, target: NodeId, addr: &str) -> Arc<Peer> {
        let mut peers = self.peers.lock().unwrap();
        if let Some(p) = peers.get(&target)
            && p.addr == addr
        {
            return p.clone();
        }
        let p = Arc::new(Peer {
            target,
            addr: addr.to_string(),
            conn: tokio::sync::Mutex::new(None),
            backoff: Mutex::new((Instant::now(), BACKOFF_MIN)),
        });
        if let Some(old) = peers.insert(target, p.clone()) {
            old.close();
        }
        p
    }

    /// Accepts connections until the transport is cancelled.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        loop {
            let accepted = tokio::select! {
                _ = self.cancel.cancelled() => break,
                a = listener.accept() => a,
            };
            match accepted {
                Ok((stream, from)) => {
                    let _ = stream.set_nodelay(true);
                    let me = self.clone();
                    tokio::spawn(async move {
                        let id = me.id;
                        if let Err(reason) = me.serve_connection(stream).await {
                            tracing::debug!(node = id, %from, reason, "quorum connection closed");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(node = self.id, error = %e, "quorum listener accept failed");
                    tokio::time::sleep(BACKOFF_MIN).await;
                }
            }
        }
    }

    fn check_hello(&self, hello: &Hello) -> Result<Option<String>, String> {
        if hello.to != self.id {
            return Err(format!(
                "node {} dialled node {} but reached node {}",
                hello.from, hello.to, self.id
            ));
        }
        if let Some(theirs) = &hello.cluster_id {
            self.adopt_cluster_id(theirs, hello.from)?;
        }
        Ok(self.cluster_id())
    }

    async fn serve_connection(self: Arc<Self>, stream: TcpStream) -> Result<(), String> {
        let (r, w) = stream.into_split();
        let mut reader = FramedRead::new(r, codec(self.max_frame));
        let mut writer = FramedWrite::new(w, codec(self.max_frame));
        let first = tokio::time::timeout(HANDSHAKE_TIMEOUT, reader.next())
            .await
            .map_err(|_| "no handshake".to_string())?
            .ok_or("closed before the handshake")?
            .map_err(|e| format!("bad handshake frame: {e}"))?;
        let hello: Hello = decode(&first).map_err(|e| format!("malformed handshake: {e}"))?;
        let cut = self
            .gate
            .pass(hello.from as i32)
            .ok_or_else(|| format!("cut off from node {} (connection gate)", hello.from))?;
        if hello.to == DISCOVER {
            let answer = Welcome::Voters {
                cluster_id: self.cluster_id(),
                voters: self.voters.iter().map(|(i, a)| (*i, a.clone())).collect(),
            };
            return writer
                .send(Bytes::from(encode(&answer)))
                .await
                .map_err(|e| e.to_string());
        }
        let welcome = match self.check_hello(&hello) {
            Ok(cluster_id) => {
                self.met(hello.from, hello.directory_id);
                Welcome::Accepted {
                    cluster_id,
                    directory_id: self.directory_id,
                }
            }
            Err(reason) => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                tracing::error!(
                    node = self.id,
                    peer = hello.from,
                    reason,
                    "refused a quorum connection"
                );
                Welcome::Refused { reason }
            }
        };
        let refused = matches!(welcome, Welcome::Refused { .. });
        writer
            .send(Bytes::from(encode(&welcome)))
            .await
            .map_err(|e| e.to_string())?;
        if refused {
            return Ok(());
        }

        let (tx, rx) = mpsc::channel::<Vec<u8>>(MAX_IN_SERVICE);
        let write_task = tokio::spawn(write_frames(writer, rx, self.cancel.clone()));
        let permits = Arc::new(Semaphore::new(MAX_IN_SERVICE));
        let result = loop {
            let next = tokio::select! {
                _ = self.cancel.cancelled() => break Ok(()),
                _ = cut.cancelled() => break Err(format!("cut off from node {}", hello.from)),
                n = reader.next() => n,
            };
            let frame = match next {
                None => break Ok(()),
                Some(Err(e)) => break Err(format!("bad frame from node {}: {e}", hello.from)),
                Some(Ok(f)) => f,
            };
            let (id, body) = match decode::<Envelope>(&frame) {
                Ok(Envelope::Request { id, body }) => (id, body),
                Ok(Envelope::Response { .. }) => {
                    break Err(format!("node {} sent a response as a request", hello.from));
                }
                Err(e) => break Err(format!("malformed frame from node {}: {e}", hello.from)),
            };
            let Ok(permit) = permits.clone().acquire_owned().await else {
                break Ok(());
            };
            let me = self.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                let body = me.handle(body).await;
                let _ = tx.send(encode(&Envelope::Response { id, body })).await;
                drop(permit);
            });
        };
        if let Err(reason) = &result {
            tracing::warn!(node = self.id, reason, "closing a quorum connection");
            write_task.abort();
        }
        result
    }

    /// Serves one request (also used for requests this node sends itself).
    pub async fn handle(&self, body: Request) -> Response {
        let Some(raft) = self.raft.get() else {
            return Response::Leader(LeaderReply::Unavailable("starting".into()));
        };
        match body {
            Request::Vote(r) => Response::Vote(raft.vote(r).await),
            Request::AppendEntries(r) => Response::AppendEntries(raft.append_entries(r).await),
            Request::InstallSnapshot(r) => {
                Response::InstallSnapshot(raft.install_snapshot(r).await)
            }
            Request::Controller(req) => Response::Leader(self.serve_controller(raft, req).await),
            Request::AddLearner { id, addr } => {
                Response::Leader(super::node::add_learner_here(raft, self.id, id, addr).await)
            }
            Request::Probe => Response::Probe {
                initialized: super::node::is_initialized(raft),
            },
        }
    }

    async fn serve_controller(&self, raft: &Raft, req: Vec<u8>) -> LeaderReply {
        if let Some(hint) = not_leader(raft, self.id) {
            return hint;
        }
        let service = self.service.read().unwrap().clone();
        let Some(service) = service else {
            return LeaderReply::Unavailable("no controller service registered yet".into());
        };
        match service.handle(req).await {
            Ok(resp) => LeaderReply::Ok(resp),
            Err(ServiceError::NotLeader) => not_leader(raft, self.id)
                .unwrap_or(LeaderReply::Unavailable("leadership is changing".into())),
            Err(ServiceError::Failed(msg)) => LeaderReply::Failed(msg),
        }
    }
}

type FrameWriter = FramedWrite<tokio::net::tcp::OwnedWriteHalf, LengthDelimitedCodec>;

/// Writes the frames queued on `rx`, in order, until the queue closes, a write fails or
/// `stop` is cancelled.
async fn write_frames(
    mut writer: FrameWriter,
    mut rx: mpsc::Receiver<Vec<u8>>,
    stop: CancellationToken,
) {
    loop {
        let frame = tokio::select! {
            _ = stop.cancelled() => break,
            f = rx.recv() => f,
        };
        let Some(frame) = frame else { break };
        if writer.send(Bytes::from(frame)).await.is_err() {
            break;
        }
    }
}

/// `None` when `me` leads; otherwise the reply pointing at the leader this node knows of.
pub fn not_leader(raft: &Raft, me: NodeId) -> Option<LeaderReply> {
    let m = raft.metrics().borrow().clone();
    if m.current_leader == Some(me) && m.state.is_leader() {
        return None;
    }
    let leader = m.current_leader.and_then(|l| {
        m.membership_config
            .membership()
            .get_node(&l)
            .map(|n| (l, n.addr.clone()))
    });
    Some(LeaderReply::NotLeader { leader })
}

struct Conn {
    tx: mpsc::Sender<Vec<u8>>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Response>>>,
    next_id: AtomicU64,
    closed: CancellationToken,
}

/// The connection to one peer, opened on first use and reopened after it breaks.
pub struct Peer {
    pub target: NodeId,
    pub addr: String,
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
    /// Earliest next connection attempt, and the delay to wait after the next failure.
    backoff: Mutex<(Instant, Duration)>,
}

impl Peer {
    fn close(&self) {
        if let Ok(conn) = self.conn.try_lock()
            && let Some(c) = conn.as_ref()
        {
            c.closed.cancel();
        }
    }

    fn failed_attempt(&self) {
        let mut b = self.backoff.lock().unwrap();
        b.0 = Instant::now() + b.1;
        b.1 = (b.1 * 2).min(BACKOFF_MAX);
    }

    /// Sends `body` and waits up to `timeout` for the answer.
    pub async fn request(
        &self,
        transport: &Arc<Transport>,
        body: Request,
        timeout: Duration,
    ) -> Result<Response, CallFailure> {
        let deadline = tokio::time::Instant::now() + timeout;
        let conn = tokio::time::timeout_at(deadline, self.connection(transport))
            .await
            .map_err(|_| CallFailure::Timeout(self.target, timeout))??;
        let id = conn.next_id.fetch_add(1, Ordering::Relaxed);
        let frame = encode(&Envelope::Request { id, body });
        if frame.len() > transport.max_frame {
            return Err(CallFailure::TooLarge(frame.len()));
        }
        let (tx, rx) = oneshot::channel();
        conn.pending.lock().unwrap().insert(id, tx);
        let lost = || CallFailure::Lost(self.target, "connection closed".into());
        if conn.tx.send(frame).await.is_err() {
            conn.pending.lock().unwrap().remove(&id);
            return Err(lost());
        }
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(_)) => Err(lost()),
            Err(_) => {
                conn.pending.lock().unwrap().remove(&id);
                Err(CallFailure::Timeout(self.target, timeout))
            }
        }
    }

    async fn connection(&self, transport: &Arc<Transport>) -> Result<Arc<Conn>, CallFailure> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref()
            && !c.closed.is_cancelled()
        {
            return Ok(c.clone());
        }
        *slot = None;
        let not_before = self.backoff.lock().unwrap().0;
        if Instant::now() < not_before {
            return Err(CallFailure::Unreachable(
                self.target,
                "backing off after a failed attempt".into(),
            ));
        }
        match self.connect(transport).await {
            Ok(c) => {
                *self.backoff.lock().unwrap() = (Instant::now(), BACKOFF_MIN);
                *slot = Some(c.clone());
                Ok(c)
            }
            Err(e) => {
                self.failed_attempt();
                Err(e)
            }
        }
    }

    async fn connect(&self, transport: &Arc<Transport>) -> Result<Arc<Conn>, CallFailure> {
        let unreachable = |e: String| CallFailure::Unreachable(self.target, e);
        let cut = transport
            .gate
            .pass(self.target as i32)
            .ok_or_else(|| unreachable("cut off (connection gate)".into()))?;
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&self.addr))
            .await
            .map_err(|_| unreachable(format!("connect to {} timed out", self.addr)))?
            .map_err(|e| unreachable(format!("connect to {}: {e}", self.addr)))?;
        let _ = stream.set_nodelay(true);
        let (r, w) = stream.into_split();
        let mut reader = FramedRead::new(r, codec(transport.max_frame));
        let mut writer = FramedWrite::new(w, codec(transport.max_frame));
        let hello = Hello {
            cluster_id: transport.cluster_id(),
            from: transport.id,
            to: self.target,
            directory_id: transport.directory_id,
        };
        writer
            .send(Bytes::from(encode(&hello)))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let answer = tokio::time::timeout(HANDSHAKE_TIMEOUT, reader.next())
            .await
            .map_err(|_| unreachable("no handshake answer".into()))?
            .ok_or_else(|| unreachable("closed during the handshake".into()))?
            .map_err(|e| unreachable(e.to_string()))?;
        let refuse = |reason: String| {
            transport.refused.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                node = transport.id,
                peer = self.target,
                addr = self.addr,
                reason,
                "quorum connection refused"
            );
            CallFailure::Refused(self.target, reason)
        };
        match decode::<Welcome>(&answer) {
            Ok(Welcome::Accepted {
                cluster_id,
                directory_id,
            }) => {
                if let Some(theirs) = cluster_id {
                    transport
                        .adopt_cluster_id(&theirs, self.target)
                        .map_err(refuse)?;
                }
                transport.met(self.target, directory_id);
            }
            Ok(Welcome::Refused { reason }) => return Err(refuse(reason)),
            Ok(Welcome::Voters { .. }) => {
                return Err(unreachable("answered as to a discovery".into()));
            }
            Err(e) => return Err(unreachable(format!("malformed handshake answer: {e}"))),
        }

        let (tx, rx) = mpsc::channel::<Vec<u8>>(MAX_IN_SERVICE);
        let conn = Arc::new(Conn {
            tx,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: transport.cancel.child_token(),
        });
        let closed = conn.closed.clone();
        tokio::spawn(async move {
            write_frames(writer, rx, closed.clone()).await;
            closed.cancel();
        });
        let c = conn.clone();
        let target = self.target;
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    _ = c.closed.cancelled() => break,
                    _ = cut.cancelled() => break,
                    n = reader.next() => n,
                };
                let frame = match next {
                    Some(Ok(f)) => f,
                    Some(Err(e)) => {
                        tracing::warn!(peer = target, error = %e, "bad frame; closing the quorum connection");
                        break;
                    }
                    None => break,
                };
                match decode::<Envelope>(&frame) {
                    Ok(Envelope::Response { id, body }) => {
                        if let Some(waiter) = c.pending.lock().unwrap().remove(&id) {
                            let _ = waiter.send(body);
                        }
                    }
                    _ => {
                        tracing::warn!(
                            peer = target,
                            "malformed frame; closing the quorum connection"
                        );
                        break;
                    }
                }
            }
            c.closed.cancel();
            c.pending.lock().unwrap().clear();
        });
        Ok(conn)
    }
}

/// Asks the node at `addr` which voters it knows (a broker-only node started with
/// `controller.quorum.bootstrap.servers` instead of `controller.quorum.voters`): (voters, the
/// node's cluster id).
pub async fn discover_voters(
    addr: &str,
    from: NodeId,
) -> Result<(BTreeMap<NodeId, String>, Option<String>), String> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| format!("connect to {addr} timed out"))?
        .map_err(|e| format!("connect to {addr}: {e}"))?;
    let (r, w) = stream.into_split();
    let mut reader = FramedRead::new(r, codec(1 << 20));
    let mut writer = FramedWrite::new(w, codec(1 << 20));
    let hello = Hello {
        cluster_id: None,
        from,
        to: DISCOVER,
        directory_id: [0; 16],
    };
    writer
        .send(Bytes::from(encode(&hello)))
        .await
        .map_err(|e| e.to_string())?;
    let answer = tokio::time::timeout(HANDSHAKE_TIMEOUT, reader.next())
        .await
        .map_err(|_| format!("{addr}: no answer"))?
        .ok_or_else(|| format!("{addr}: closed"))?
        .map_err(|e| e.to_string())?;
    match decode::<Welcome>(&answer) {
        Ok(Welcome::Voters { cluster_id, voters }) if !voters.is_empty() => {
            Ok((voters.into_iter().collect(), cluster_id))
        }
        Ok(Welcome::Voters { .. }) => Err(format!("{addr} knows no voters")),
        Ok(_) => Err(format!("{addr}: not a discovery answer")),
        Err(e) => Err(format!("{addr}: malformed answer: {e}")),
    }
}
