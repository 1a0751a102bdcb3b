//! [`Quorum`]: one running node. Owns the openraft instance, the transport and the background
//! tasks (listener, leader watch, bootstrap or learner join); everything it exposes is read
//! from openraft's metrics or forwarded to openraft.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers, Config, ServerState, SnapshotPolicy};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::log_store::LogStore;
use super::network::{CallFailure, Transport, not_leader, now_ms};
use super::raft_network::NetworkFactory;
use super::state_machine::SmStore;
use super::store::{DirLock, StateFile};
use super::types::{LeaderReply, NodeId, Raft, Record, Request, Response};
use super::{
    CallError, ControllerService, ProposeError, QuorumConfig, QuorumStatus, ReplicaStatus, Role,
    StateMachine,
};

const RETRY_MIN: Duration = Duration::from_millis(20);
const RETRY_MAX: Duration = Duration::from_millis(500);

/// A running quorum node. Cheap to clone; every clone drives the same node.
#[derive(Clone)]
pub struct Quorum {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) id: NodeId,
    config: QuorumConfig,
    pub(super) raft: Raft,
    pub(super) transport: Arc<Transport>,
    leader: watch::Receiver<(Option<NodeId>, u64)>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

fn raft_config(c: &QuorumConfig) -> Result<Config> {
    let fetch = c.fetch_timeout.as_millis().max(4) as u64;
    let spread = c.election_timeout.as_millis().max(1) as u64;
    let config = Config {
        cluster_name: "sluice-metadata".into(),
        election_timeout_min: fetch,
        election_timeout_max: fetch + spread,
        heartbeat_interval: fetch / 4,
        install_snapshot_timeout: fetch * 2,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(c.snapshot_every.max(1)),
        max_in_snapshot_log_to_keep: c.keep_after_snapshot,
        snapshot_max_chunk_size: (c.max_frame_bytes / 4) as u64,
        ..Default::default()
    };
    Ok(config.validate()?)
}

impl Quorum {
    /// Opens `config.dir` and starts the node, listening on `config.listen`.
    pub async fn start<S: StateMachine>(config: QuorumConfig, state_machine: S) -> Result<Quorum> {
        let listener = std::net::TcpListener::bind(config.listen)
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        Self::start_on(config, listener, state_machine).await
    }

    /// Like [`Quorum::start`], on a listener the caller has bound.
    pub async fn start_on<S: StateMachine>(
        config: QuorumConfig,
        listener: std::net::TcpListener,
        state_machine: S,
    ) -> Result<Quorum> {
        let id = config.node_id;
        if config.voter != config.voters.contains_key(&id) {
            bail!(
                "node {id} is {} but the voter list {:?} {} it",
                if config.voter { "a voter" } else { "a learner" },
                config.voters.keys().collect::<Vec<_>>(),
                if config.voter {
                    "does not name"
                } else {
                    "names"
                }
            );
        }
        if config.voters.is_empty() {
            bail!("the voter list is empty");
        }
        std::fs::create_dir_all(&config.dir)
            .with_context(|| format!("cannot create {}", config.dir.display()))?;
        let lock = DirLock::acquire(&config.dir)?;
        let state = Arc::new(StateFile::open(&config.dir)?);
        if let Some(want) = &config.cluster_id {
            match state.get().cluster_id {
                Some(have) if &have != want => bail!(
                    "{} belongs to cluster {have}, not the configured {want}",
                    config.dir.display()
                ),
                Some(_) => {}
                None => state.update(|s| s.cluster_id = Some(want.clone()))?,
            }
        }
        let log = LogStore::open(&config.dir, state.clone(), config.segment_bytes, Some(lock))?;
        let sm = SmStore::open(&config.dir, state_machine)?;
        let max_frame = config.max_frame_bytes.max(config.max_record_bytes * 2);
        let directory_id = super::voters::directory_id(&config.dir)?;
        let transport = Transport::new(
            id,
            max_frame,
            state.clone(),
            config.voters.clone(),
            directory_id,
            config.gate.clone(),
        );
        let network = NetworkFactory {
            transport: transport.clone(),
        };
        let raft = Raft::new(id, Arc::new(raft_config(&config)?), network, log, sm)
            .await
            .context("cannot start the Raft node")?;
        transport.set_raft(raft.clone());

        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let mut tasks = vec![tokio::spawn(transport.clone().serve(listener))];

        let (leader_tx, leader_rx) = watch::channel((None, 0));
        let mut metrics = raft.metrics();
        let cancel = transport.cancel.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let now = {
                    let m = metrics.borrow_and_update();
                    (m.current_leader, m.current_term)
                };
                leader_tx.send_if_modified(|v| std::mem::replace(v, now) != now);
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    r = metrics.changed() => if r.is_err() { break },
                }
            }
        }));

        let quorum = Quorum {
            inner: Arc::new(Inner {
                id,
                config,
                raft,
                transport,
                leader: leader_rx,
                tasks: Mutex::new(Vec::new()),
            }),
        };
        let lowest = *quorum.inner.config.voters.keys().next().unwrap();
        if quorum.inner.config.voter {
            if id == lowest && quorum.never_initialized().await? {
                let q = quorum.clone();
                tasks.push(tokio::spawn(async move { q.bootstrap().await }));
            } else if quorum.inner.config.voters.len() == 1 {
                // The only voter needs no one's vote: it elects itself at once rather than
                // after an election timeout.
                quorum.inner.raft.trigger().elect().await?;
            }
        } else {
            let q = quorum.clone();
            tasks.push(tokio::spawn(async move { q.join_as_learner().await }));
        }
        quorum.inner.tasks.lock().unwrap().extend(tasks);
        Ok(quorum)
    }

    pub fn node_id(&self) -> NodeId {
        self.inner.id
    }

    /// Registers the handler for [`Quorum::call_leader`] requests (used while this node leads).
    pub fn set_controller_service(&self, service: Arc<dyn ControllerService>) {
        self.inner.transport.set_service(service);
    }

    /// The cluster id, once chosen (here) or learned (from a peer).
    pub fn cluster_id(&self) -> Option<String> {
        self.inner.transport.cluster_id()
    }

    pub fn leader(&self) -> Option<NodeId> {
        self.inner.leader.borrow().0
    }

    /// (leader, term), updated as elections happen.
    pub fn leader_watch(&self) -> watch::Receiver<(Option<NodeId>, u64)> {
        self.inner.leader.clone()
    }

    /// Index of the last entry applied to the state machine here.
    pub fn applied(&self) -> Option<u64> {
        self.inner
            .raft
            .metrics()
            .borrow()
            .last_applied
            .map(|l| l.index)
    }

    /// Waits until this node has applied `index`; false if `timeout` passed first.
    pub async fn wait_applied(&self, index: u64, timeout: Duration) -> bool {
        let mut m = self.inner.raft.metrics();
        let wait = m.wait_for(|m| m.last_applied.is_some_and(|l| l.index >= index));
        matches!(tokio::time::timeout(timeout, wait).await, Ok(Ok(_)))
    }

    /// Appends `record` to the replicated log. Returns its index once it is committed and
    /// applied here. Only the leader accepts proposals. After `NotLeader` from a leader that
    /// lost its leadership mid-way, the record may or may not end up committed.
    pub async fn propose(&self, record: Vec<u8>) -> Result<u64, ProposeError> {
        let max = self.inner.config.max_record_bytes;
        if record.len() > max {
            return Err(ProposeError::TooLarge {
                size: record.len(),
                max,
            });
        }
        match self.inner.raft.client_write(Record(record)).await {
            Ok(resp) => Ok(resp.log_id.index),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                Err(ProposeError::NotLeader {
                    leader: f.leader_id,
                })
            }
            Err(RaftError::APIError(e)) => Err(ProposeError::Shutdown(e.to_string())),
            Err(RaftError::Fatal(f)) => Err(ProposeError::Shutdown(f.to_string())),
        }
    }

    /// Waits until this node, as leader, has applied every entry committed before the call
    /// (openraft's linearizable read), so a decision taken on its state sees them all.
    pub async fn linearize(&self) -> Result<(), ProposeError> {
        match self.inner.raft.ensure_linearizable().await {
            Ok(_) => Ok(()),
            Err(RaftError::APIError(e)) => Err(ProposeError::NotLeader {
                leader: match e {
                    openraft::error::CheckIsLeaderError::ForwardToLeader(f) => f.leader_id,
                    _ => None,
                },
            }),
            Err(RaftError::Fatal(f)) => Err(ProposeError::Shutdown(f.to_string())),
        }
    }

    /// Sends `request` to the leader's [`ControllerService`] and returns its answer, retrying
    /// across leader changes for up to the configured request timeout.
    pub async fn call_leader(&self, request: Vec<u8>) -> Result<Vec<u8>, CallError> {
        let timeout = self.inner.config.request_timeout;
        self.call_leader_within(request, timeout).await
    }

    pub async fn call_leader_within(
        &self,
        request: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, CallError> {
        self.route(|| Request::Controller(request.clone()), timeout)
            .await
    }

    /// Adds a non-voting member (a broker-only node) at `addr`; forwarded to the leader when
    /// this node does not lead. Returns once the membership change is committed.
    pub async fn add_learner(&self, id: NodeId, addr: String) -> Result<(), CallError> {
        let timeout = self.inner.config.request_timeout;
        self.route(
            || Request::AddLearner {
                id,
                addr: addr.clone(),
            },
            timeout,
        )
        .await
        .map(|_| ())
    }

    /// DescribeQuorum's view from this node.
    pub async fn status(&self) -> QuorumStatus {
        let raft = &self.inner.raft;
        let m = raft.metrics().borrow().clone();
        let committed = raft
            .with_raft_state(|s| s.committed.map(|c| c.index))
            .await
            .ok()
            .flatten();
        let leading = m.current_leader == Some(self.inner.id) && m.state.is_leader();
        let acks = self.inner.transport.acks();
        let membership = m.membership_config.membership();
        let now = now_ms();
        let replica = |id: NodeId| {
            if !leading {
                let own = (id == self.inner.id).then(|| m.last_log_index.map_or(0, |i| i + 1));
                return ReplicaStatus {
                    node_id: id,
                    directory_id: self.inner.transport.directory_of(id),
                    log_end_offset: own,
                    last_fetch_ms: None,
                    last_caught_up_ms: None,
                };
            }
            if id == self.inner.id {
                return ReplicaStatus {
                    node_id: id,
                    directory_id: self.inner.transport.directory_of(id),
                    log_end_offset: Some(m.last_log_index.map_or(0, |i| i + 1)),
                    last_fetch_ms: Some(now),
                    last_caught_up_ms: Some(now),
                };
            }
            let matched = m
                .replication
                .as_ref()
                .and_then(|r| r.get(&id).cloned().flatten());
            let a = acks.get(&id).copied().unwrap_or_default();
            ReplicaStatus {
                node_id: id,
                directory_id: self.inner.transport.directory_of(id),
                log_end_offset: matched.map(|l| l.index + 1),
                last_fetch_ms: a.last_ack_ms,
                last_caught_up_ms: a.last_caught_up_ms,
            }
        };
        QuorumStatus {
            node_id: self.inner.id,
            role: match m.state {
                ServerState::Leader => Role::Leader,
                ServerState::Candidate => Role::Candidate,
                ServerState::Follower => Role::Follower,
                ServerState::Learner => Role::Learner,
                ServerState::Shutdown => Role::Shutdown,
            },
            cluster_id: self.cluster_id(),
            leader: m.current_leader,
            term: m.current_term,
            high_watermark: committed.map_or(0, |c| c + 1),
            applied: m.last_applied.map(|l| l.index),
            voters: membership.voter_ids().map(replica).collect(),
            observers: membership.learner_ids().map(replica).collect(),
            handshakes_refused: self.inner.transport.refused(),
        }
    }

    /// Stops the node: no more RPCs in or out, openraft shut down (which closes the log and
    /// unlocks the directory).
    pub async fn shutdown(&self) {
        self.inner.transport.cancel.cancel();
        let tasks: Vec<_> = std::mem::take(&mut *self.inner.tasks.lock().unwrap());
        for t in &tasks {
            t.abort();
        }
        if let Err(e) = self.inner.raft.shutdown().await {
            tracing::warn!(node = self.inner.id, error = %e, "Raft core did not stop cleanly");
        }
        for t in tasks {
            let _ = t.await;
        }
        // The service usually holds a handle to this quorum: let go of it.
        self.inner.transport.clear_service();
    }

    async fn never_initialized(&self) -> Result<bool> {
        let raft = &self.inner.raft;
        let initialized = raft.is_initialized().await?;
        Ok(!initialized && !is_initialized(raft))
    }

    /// The lowest-id voter's start on an empty directory (see the module doc).
    async fn bootstrap(self) {
        let voters = self.inner.config.voters.clone();
        let majority = voters.len() / 2 + 1;
        let mut delay = RETRY_MIN;
        loop {
            let mut empty = 1;
            let mut joined = None;
            for (&id, addr) in voters.iter().filter(|(id, _)| **id != self.inner.id) {
                let peer = self.inner.transport.peer(id, addr);
                match peer
                    .request(&self.inner.transport, Request::Probe, RETRY_MAX * 2)
                    .await
                {
                    Ok(Response::Probe { initialized: false }) => empty += 1,
                    Ok(Response::Probe { initialized: true }) => joined = Some(id),
                    Ok(_) | Err(_) => {}
                }
            }
            if let Some(peer) = joined {
                tracing::warn!(
                    node = self.inner.id,
                    peer,
                    "this voter's metadata log dir is empty but voter {peer} belongs to an initialized quorum: not initializing; waiting to be caught up"
                );
                return;
            }
            if empty >= majority {
                break;
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(RETRY_MAX);
        }
        let state_cluster = self.cluster_id();
        let cluster_id = match state_cluster {
            Some(c) => c,
            None => {
                let c = crate::cluster::controller::kafka_base64(uuid::Uuid::new_v4().as_bytes());
                if let Err(e) = self.inner.transport.choose_cluster_id(&c) {
                    tracing::error!(node = self.inner.id, error = %e, "cannot persist the cluster id");
                    return;
                }
                c
            }
        };
        let members: BTreeMap<NodeId, BasicNode> = voters
            .iter()
            .map(|(&id, addr)| (id, BasicNode::new(addr)))
            .collect();
        match self.inner.raft.initialize(members).await {
            Ok(()) => {
                tracing::info!(node = self.inner.id, cluster_id, voters = ?voters.keys().collect::<Vec<_>>(), "initialized the metadata quorum")
            }
            Err(e) => {
                tracing::warn!(node = self.inner.id, error = %e, "did not initialize the metadata quorum")
            }
        }
    }

    /// A learner asks the leader to add it until the membership names it.
    async fn join_as_learner(self) {
        let addr = self
            .inner
            .config
            .advertised
            .clone()
            .unwrap_or_else(|| self.inner.config.listen.to_string());
        let mut delay = RETRY_MIN;
        loop {
            let known = {
                let m = self.inner.raft.metrics();
                let m = m.borrow();
                m.membership_config
                    .membership()
                    .get_node(&self.inner.id)
                    .map(|n| n.addr.clone())
            };
            if known.as_deref() == Some(addr.as_str()) {
                return;
            }
            match self.add_learner(self.inner.id, addr.clone()).await {
                Ok(()) => tracing::info!(
                    node = self.inner.id,
                    addr,
                    "joined the metadata quorum as a learner"
                ),
                Err(e) => {
                    tracing::debug!(node = self.inner.id, error = %e, "joining the metadata quorum")
                }
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(RETRY_MAX);
        }
    }

    /// The leader as this node knows it, with its address.
    fn known_leader(&self) -> Option<(NodeId, String)> {
        let m = self.inner.raft.metrics();
        let m = m.borrow();
        let l = m.current_leader?;
        let addr = m
            .membership_config
            .membership()
            .get_node(&l)
            .map(|n| n.addr.clone());
        addr.or_else(|| self.inner.config.voters.get(&l).cloned())
            .map(|a| (l, a))
    }

    /// Sends a leader-only request to the leader, following hints, until `timeout`.
    async fn route(
        &self,
        make: impl Fn() -> Request,
        timeout: Duration,
    ) -> Result<Vec<u8>, CallError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let voters: Vec<(NodeId, String)> = self
            .inner
            .config
            .voters
            .iter()
            .map(|(&i, a)| (i, a.clone()))
            .collect();
        let mut rotate = 0usize;
        let mut hint: Option<(NodeId, String)> = None;
        let mut last = "no attempt".to_string();
        let mut delay = RETRY_MIN;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Err(CallError::Timeout(timeout, last));
            }
            if self.inner.transport.cancel.is_cancelled() {
                return Err(CallError::Shutdown);
            }
            let target = hint
                .take()
                .or_else(|| self.known_leader())
                .unwrap_or_else(|| {
                    rotate += 1;
                    voters[rotate % voters.len()].clone()
                });
            let reply = if target.0 == self.inner.id {
                Ok(self.inner.transport.handle(make()).await)
            } else {
                let peer = self.inner.transport.peer(target.0, &target.1);
                peer.request(&self.inner.transport, make(), left).await
            };
            match reply {
                Ok(Response::Leader(LeaderReply::Ok(bytes))) => return Ok(bytes),
                Ok(Response::Leader(LeaderReply::Failed(msg))) => {
                    return Err(CallError::Failed(msg));
                }
                Ok(Response::Leader(LeaderReply::NotLeader { leader: Some(l) }))
                    if l.0 != target.0 =>
                {
                    last = format!("node {} is not the leader; it points at {}", target.0, l.0);
                    hint = Some(l);
                    continue;
                }
                Ok(Response::Leader(LeaderReply::NotLeader { .. })) => {
                    last = format!("node {} knows no leader", target.0);
                }
                Ok(Response::Leader(LeaderReply::Unavailable(why))) => {
                    last = format!("node {}: {why}", target.0);
                }
                Ok(other) => last = format!("unexpected answer {other:?}"),
                Err(CallFailure::Refused(_, reason)) => return Err(CallError::Refused(reason)),
                Err(CallFailure::TooLarge(n)) => return Err(CallError::TooLarge(n)),
                Err(e) => {
                    last = e.to_string();
                    // The leader this node knows may be gone; ask the voters in turn.
                    rotate += 1;
                    hint = Some(voters[rotate % voters.len()].clone());
                }
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            tokio::time::sleep(delay.min(left)).await;
            delay = (delay * 2).min(RETRY_MAX);
        }
    }
}

/// Whether `raft` has any state: a membership, a log entry or a vote beyond the initial one.
pub fn is_initialized(raft: &Raft) -> bool {
    let m = raft.metrics();
    let m = m.borrow();
    m.membership_config.log_id().is_some()
        || m.last_log_index.is_some()
        || m.vote.leader_id.term > 0
}

/// The leader's side of [`Quorum::add_learner`].
pub async fn add_learner_here(raft: &Raft, me: NodeId, id: NodeId, addr: String) -> LeaderReply {
    if let Some(reply) = not_leader(raft, me) {
        return reply;
    }
    let membership = raft
        .metrics()
        .borrow()
        .membership_config
        .membership()
        .clone();
    if membership.voter_ids().any(|v| v == id) {
        return LeaderReply::Failed(format!("node {id} is a voter, not a learner"));
    }
    let change = match membership.get_node(&id) {
        Some(n) if n.addr == addr => return LeaderReply::Ok(Vec::new()),
        // A learner that moved: replacing a non-voter's address is safe.
        Some(_) => ChangeMembers::SetNodes(BTreeMap::from([(id, BasicNode::new(&addr))])),
        None => ChangeMembers::AddNodes(BTreeMap::from([(id, BasicNode::new(&addr))])),
    };
    match raft.change_membership(change, true).await {
        Ok(_) => {
            tracing::info!(learner = id, addr, "added a learner to the metadata quorum");
            LeaderReply::Ok(Vec::new())
        }
        Err(e) => match e.forward_to_leader::<BasicNode>() {
            Some(_) => not_leader(raft, me).unwrap_or(LeaderReply::Unavailable(e.to_string())),
            None => LeaderReply::Unavailable(e.to_string()),
        },
    }
}
