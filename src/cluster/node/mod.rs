//! A node of a replicated cluster (`process.roles` set): the shell that carries out what the
//! metadata quorum decides.
//!
//! - `metadata_log.rs`: the quorum's state machine; each entry is one controller decision
//!   applied to the [`MetadataImage`], published to every reader after each entry.
//! - `service.rs`: the active controller (the Raft leader) serving brokers' requests with
//!   `cluster::control` deciding, and its timers (session expiry, leader rebalance).
//! - `requests.rs`: the broker-to-controller messages.
//! - `lifecycle.rs`: registration, heartbeats and controlled shutdown.
//! - `replicas.rs`: every new image reconciled with the local replicas (open, lead, follow,
//!   delete) and ISR changes sent as AlterIsr.
//!
//! A broker's partitions are owned by the [`Controller`] as on one node; this module only
//! changes their roles, and the replica fetchers (`cluster::fetcher`) drive the followers.

pub mod admin;
pub mod import;
mod lifecycle;
pub mod metadata_log;
pub mod replicas;
pub mod requests;
mod service;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};
use uuid::Uuid;

use crate::clock::now_ms;
use crate::cluster::control::active::{AlterIsr, ControlConfig, ineligible_members};
use crate::cluster::fetcher::{FetcherConfig, FollowTarget, ReplicaFetchers};
use crate::cluster::metadata::{Endpoint, MetadataImage};
use crate::cluster::quorum::{CallError, Quorum, QuorumConfig};
use crate::cluster::{Controller, Partition};
use crate::config::{BrokerConfig, ClusterConfig};

pub use lifecycle::registered_endpoints;
pub use replicas::{Followed, Reconciled};
pub use requests::{ControllerReply, ControllerRequest};

/// What a cluster node needs of the broker it serves: the local replicas the metadata image
/// is reconciled with, and who to tell when this broker starts or stops leading partitions
/// (the coordinators of the internal topics). The broker implements it; the node holds it
/// weakly, so a node outliving its broker stops following images.
pub trait ReplicaHost: Send + Sync {
    /// The local replicas (topics and partitions this broker holds).
    fn replicas(&self) -> &Controller;
    /// The image `img` was reconciled with the local replicas: `r` says what changed.
    fn on_replicas_changed(&self, img: &MetadataImage, r: Reconciled);
}

/// The quorum part of a cluster node, started before the broker opens its logs (the cluster
/// id must be known first).
pub struct QuorumHandle {
    pub quorum: Quorum,
    pub image: watch::Receiver<Arc<MetadataImage>>,
    service: Arc<service::Service>,
}

/// Binds the controller listener (voters) or an ephemeral port on the inter-broker host
/// (brokers only: the leader pushes the metadata log to learners) and starts the quorum,
/// its connections with the other nodes through `gate`.
pub async fn start_quorum(
    config: &BrokerConfig,
    cluster_id: Option<String>,
    gate: crate::net::gate::Gate,
) -> Result<QuorumHandle> {
    let cc = config.cluster.as_ref().expect("cluster mode");
    let listen: SocketAddr = match &cc.controller_listener {
        Some(l) => resolve(&l.bind_addr())?,
        None => {
            let host = config
                .listeners
                .iter()
                .find(|l| l.name == cc.inter_broker_listener)
                .map_or("127.0.0.1".to_string(), |l| l.bind_addr());
            let host = host
                .rsplit_once(':')
                .map_or(host.clone(), |(h, _)| h.to_string());
            resolve(&format!("{host}:0"))?
        }
    };
    let listener = std::net::TcpListener::bind(listen)
        .with_context(|| format!("cannot listen on {listen} (the controller listener)"))?;
    let bound = listener.local_addr()?;
    let voters: BTreeMap<u64, String> = if cc.voters.is_empty() {
        discover_voters(&cc.bootstrap_servers, config.node_id as u64).await
    } else if cc.one_voter {
        // The only voter is reached at the port just bound.
        BTreeMap::from([(config.node_id as u64, bound.to_string())])
    } else {
        cc.voters
            .iter()
            .map(|(id, a)| (*id as u64, a.clone()))
            .collect()
    };
    let mut qc = QuorumConfig::new(config.node_id as u64, voters, &cc.metadata_log_dir, bound);
    if cc.controller_listener.is_none() {
        // A broker-only node follows the quorum on a port of its own, reached at the host it
        // advertises on the inter-broker listener (its bind address may be 0.0.0.0).
        let host = config
            .advertised_endpoints()
            .into_iter()
            .find(|l| l.name == cc.inter_broker_listener)
            .map(|l| l.host)
            .filter(|h| !h.is_empty() && h != "0.0.0.0" && h != "::");
        qc.advertised = Some(match host {
            Some(h) if h.contains(':') => format!("[{h}]:{}", bound.port()),
            Some(h) => format!("{h}:{}", bound.port()),
            None => bound.to_string(),
        });
    }
    qc.cluster_id = cluster_id;
    qc.gate = gate;
    qc.election_timeout = Duration::from_millis(cc.quorum_election_timeout_ms);
    qc.fetch_timeout = Duration::from_millis(cc.quorum_fetch_timeout_ms);
    qc.request_timeout = Duration::from_millis(cc.quorum_request_timeout_ms);
    let (sm, image) = metadata_log::MetadataLog::new();
    let quorum = Quorum::start_on(qc, listener, sm).await?;
    let service = service::Service::new(
        quorum.clone(),
        image.clone(),
        ControlConfig {
            session_timeout_ms: cc.session_timeout_ms,
            unclean_leader_election: cc.unclean_leader_election,
        },
    );
    quorum.set_controller_service(service.clone());
    Ok(QuorumHandle {
        quorum,
        image,
        service,
    })
}

/// The voters, asked of `controller.quorum.bootstrap.servers` in turn until one answers (a
/// broker-only node; every controller knows the voter list).
async fn discover_voters(bootstrap: &[String], me: u64) -> BTreeMap<u64, String> {
    let started = tokio::time::Instant::now();
    let mut next_note = Duration::from_secs(5);
    loop {
        for addr in bootstrap {
            match crate::cluster::quorum::discover_voters(addr, me).await {
                Ok((voters, _)) => {
                    info!(bootstrap = addr, voters = ?voters, "found the controllers");
                    return voters;
                }
                Err(e) => tracing::debug!("controller.quorum.bootstrap.servers: {e}"),
            }
        }
        if started.elapsed() >= next_note {
            info!(
                "waiting for a controller of controller.quorum.bootstrap.servers ({}) to answer ({}s)",
                bootstrap.join(","),
                next_note.as_secs()
            );
            next_note += Duration::from_secs(10);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn resolve(addr: &str) -> Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    addr.to_socket_addrs()
        .with_context(|| format!("cannot resolve {addr}"))?
        .next()
        .with_context(|| format!("{addr} resolves to no address"))
}

/// A one-voter node whose first log dir holds a single node's `sluice-metadata` carries it
/// into the metadata log (see [`import`]) before the broker opens its logs, then renames the
/// file. `next_producer_id` is above every producer id the single node handed out. Waits (up
/// to a minute) for this node to lead its quorum.
pub async fn import_single_node_metadata(
    q: &QuorumHandle,
    config: &BrokerConfig,
    next_pid: i64,
) -> Result<()> {
    let dir = &config.log_dirs[0];
    let Some(path) = import::pending(dir) else {
        return Ok(());
    };
    let m = import::read(dir, config.node_id)?;
    let records = import::records(&m, config.node_id, next_pid);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let imported = loop {
        match q.service.import(records.clone()).await {
            Ok(imported) => break imported,
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::debug!("importing {}: {e}", path.display());
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => anyhow::bail!("cannot import {}: {e}", path.display()),
        }
    };
    if imported {
        info!(
            topics = m.topics.len(),
            records = records.len(),
            "imported {} into the metadata log",
            path.display()
        );
    } else {
        info!(
            "the metadata log already holds topics: {} was imported before",
            path.display()
        );
    }
    import::done(dir)
}

/// Waits until the quorum has a cluster id (formed here, or learned from a peer), logging
/// while it waits.
pub async fn wait_for_cluster_id(q: &QuorumHandle) -> String {
    let started = tokio::time::Instant::now();
    let mut next_note = Duration::from_secs(5);
    loop {
        if let Some(id) = q.quorum.cluster_id() {
            return id;
        }
        if started.elapsed() >= next_note {
            info!(
                "waiting for the metadata quorum to form ({}s): a majority of controller.quorum.voters must be up",
                next_note.as_secs()
            );
            next_note += Duration::from_secs(10);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A controller-only node (`process.roles=controller`): a voter of the metadata quorum that
/// runs the active controller's timers while it leads, and serves no clients. Returns once
/// `stop` is cancelled and the quorum has shut down.
pub async fn run_controller_only(q: QuorumHandle, cc: ClusterConfig, stop: CancellationToken) {
    let rebalance = cc
        .auto_leader_rebalance
        .then(|| Duration::from_millis(cc.leader_imbalance_check_interval_ms));
    let timers = tokio::spawn(q.service.clone().run_timers(
        cc.session_timeout_ms,
        rebalance,
        stop.clone(),
    ));
    stop.cancelled().await;
    let _ = timers.await;
    q.quorum.shutdown().await;
}

/// A running cluster node: the quorum, this broker's registration, its replicas' roles.
/// Where this node's [`ClusterNode`] is found once started: the broker and the narrow handles
/// it wires into its services (internal topics, producer ids, markers, peers) share one cell,
/// set before any listener accepts a connection.
pub type NodeCell = Arc<std::sync::OnceLock<Arc<ClusterNode>>>;

pub struct ClusterNode {
    pub config: ClusterConfig,
    pub node_id: i32,
    pub quorum: Quorum,
    image: watch::Receiver<Arc<MetadataImage>>,
    /// The broker epoch of the current registration; -1 until registered.
    pub broker_epoch: Arc<AtomicI64>,
    pub incarnation: Uuid,
    /// The incarnation that ran from this node's metadata log directory before this one.
    previous_incarnation: Option<Uuid>,
    isr_tx: mpsc::UnboundedSender<Arc<Partition>>,
    shutting_down: AtomicBool,
    /// The replica fetchers: one task per leader this broker follows partitions of.
    fetchers: ReplicaFetchers,
    /// The producer id block from the controller: (next, end).
    producer_ids: tokio::sync::Mutex<(i64, i64)>,
    pub cancel: CancellationToken,
    host: Weak<dyn ReplicaHost>,
    /// The endpoints it registers: its advertised listeners, and its HTTP listener
    /// ([`crate::cluster::metadata::HTTP_ENDPOINT`]) if it has one.
    endpoints: Vec<Endpoint>,
    /// Whether the controller has unfenced this broker since it started (its metadata had
    /// caught up with its registration).
    unfenced: watch::Sender<bool>,
    /// The offset of the last image reconciled with the local replicas.
    reconciled: watch::Sender<u64>,
}

impl ClusterNode {
    /// Starts the broker's side: reconciling images with the local replicas, registration and
    /// heartbeats, ISR proposals, and the controller's timers.
    pub fn start(
        q: QuorumHandle,
        config: &BrokerConfig,
        endpoints: Vec<Endpoint>,
        inter_broker: crate::net::client::InterBroker,
        host: Weak<dyn ReplicaHost>,
    ) -> Arc<ClusterNode> {
        let cc = config.cluster.clone().expect("cluster mode");
        let (isr_tx, isr_rx) = mpsc::unbounded_channel();
        let broker_epoch = Arc::new(AtomicI64::new(-1));
        let cancel = CancellationToken::new();
        let incarnation = Uuid::new_v4();
        let previous_incarnation = lifecycle::swap_incarnation(&cc.metadata_log_dir, incarnation);
        let node = Arc::new(ClusterNode {
            node_id: config.node_id,
            quorum: q.quorum.clone(),
            image: q.image.clone(),
            broker_epoch: broker_epoch.clone(),
            incarnation,
            previous_incarnation,
            isr_tx,
            shutting_down: AtomicBool::new(false),
            producer_ids: tokio::sync::Mutex::new((0, 0)),
            fetchers: ReplicaFetchers::new(
                FetcherConfig {
                    local_id: config.node_id,
                    max_bytes: cc.replica_fetch_response_max_bytes,
                    partition_max_bytes: cc.replica_fetch_max_bytes,
                    min_bytes: cc.replica_fetch_min_bytes,
                    max_wait_ms: cc.replica_fetch_wait_max_ms,
                    backoff_ms: cc.replica_fetch_backoff_ms,
                    security: inter_broker,
                },
                broker_epoch.clone(),
                cancel.child_token(),
            ),
            cancel: cancel.clone(),
            host,
            endpoints,
            config: cc.clone(),
            unfenced: watch::Sender::new(false),
            reconciled: watch::Sender::new(0),
        });
        let rebalance = cc
            .auto_leader_rebalance
            .then(|| Duration::from_millis(cc.leader_imbalance_check_interval_ms));
        tokio::spawn(
            q.service
                .clone()
                .run_timers(cc.session_timeout_ms, rebalance, cancel),
        );
        tokio::spawn(node.clone().follow_images(q.image.clone()));
        tokio::spawn(node.clone().send_isr_changes(isr_rx));
        tokio::spawn(node.clone().check_lagging());
        tokio::spawn(node.clone().heartbeats());
        node
    }

    /// The newest metadata image applied here.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.borrow().clone()
    }

    pub fn image_watch(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.image.clone()
    }

    /// Sends a request to the active controller.
    pub async fn call(&self, req: ControllerRequest) -> Result<ControllerReply, CallError> {
        let bytes = self.quorum.call_leader(req.encode()).await?;
        ControllerReply::decode(&bytes).map_err(|e| CallError::Failed(e.to_string()))
    }

    /// The active controller's id (the Raft leader), if known.
    pub fn controller_id(&self) -> Option<i32> {
        self.quorum.leader().map(|l| l as i32)
    }

    /// A producer id no broker of the cluster has handed out: from a block the controller
    /// allocated to this broker (a new block when it is used up).
    pub async fn allocate_producer_id(&self) -> Result<i64> {
        let mut ids = self.producer_ids.lock().await;
        if ids.0 >= ids.1 {
            let epoch = self.broker_epoch.load(Ordering::Acquire);
            if epoch < 0 {
                anyhow::bail!("not registered with the controller yet");
            }
            let req = ControllerRequest::AllocateProducerIds {
                broker_id: self.node_id,
                broker_epoch: epoch as u64,
            };
            let first = expect_reply(self.call(req).await, |r| match r {
                ControllerReply::ProducerIds(Ok(first)) => Some(first),
                _ => None,
            })?;
            *ids = (first, first + requests::PRODUCER_ID_BLOCK);
        }
        let id = ids.0;
        ids.0 += 1;
        Ok(id)
    }

    /// A leader's partition has an ISR change to propose (a follower caught up).
    pub fn propose_isr(&self, p: &Arc<Partition>) {
        let _ = self.isr_tx.send(p.clone());
    }

    /// The broker this node serves, while it lives.
    pub fn host(&self) -> Option<Arc<dyn ReplicaHost>> {
        self.host.upgrade()
    }

    /// Resolves once this broker may serve requests: the controller has unfenced it (its
    /// metadata caught up with its registration) and the image it then had is reconciled with
    /// the local replicas. Until then the replicas' roles may come from an image an earlier
    /// run left on disk (a restarted leader would still think it leads), so the listeners
    /// accept nothing, as Kafka's brokers enable request processing only after catching up.
    pub async fn caught_up(&self) {
        let mut unfenced = self.unfenced.subscribe();
        if unfenced.wait_for(|u| *u).await.is_err() {
            return;
        }
        let target = self.image().offset;
        let mut reconciled = self.reconciled.subscribe();
        let _ = reconciled.wait_for(|o| *o >= target).await;
    }

    /// Reconciles every new image with the local replicas, then hands the followed ones to
    /// the fetchers.
    async fn follow_images(self: Arc<Self>, mut images: watch::Receiver<Arc<MetadataImage>>) {
        loop {
            let img = images.borrow_and_update().clone();
            let Some(host) = self.host() else {
                return;
            };
            let me = self.node_id;
            let h = host.clone();
            let img2 = img.clone();
            let done =
                tokio::task::spawn_blocking(move || replicas::reconcile(h.replicas(), &img2, me))
                    .await;
            match done {
                Ok(mut r) => {
                    self.follow(&img, std::mem::take(&mut r.followed));
                    host.on_replicas_changed(&img, r);
                }
                Err(e) => warn!("reconciling the metadata image failed: {e}"),
            }
            self.reconciled.send_replace(img.offset);
            drop(host);
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                r = images.changed() => if r.is_err() { return },
            }
        }
    }

    /// AlterIsr for each partition sent here, one at a time; the answer (or the image that
    /// follows) settles the partition's change in flight.
    async fn send_isr_changes(self: Arc<Self>, mut rx: mpsc::UnboundedReceiver<Arc<Partition>>) {
        loop {
            let p = tokio::select! {
                _ = self.cancel.cancelled() => return,
                p = rx.recv() => match p { Some(p) => p, None => return },
            };
            let epoch = self.broker_epoch.load(Ordering::Acquire);
            if epoch < 0 {
                p.on_refused();
                continue;
            }
            let Some(prop) = p.isr_proposal(epoch) else {
                continue;
            };
            // As Kafka's leader does (Partition.isReplicaIsrEligible), ask only for members
            // the metadata shows registered, unfenced and with the epoch they fetched with:
            // the controller would refuse the others.
            let ineligible = ineligible_members(
                &self.image(),
                &prop.current_isr,
                &prop.new_isr,
                &prop.new_isr_epochs,
            );
            if !ineligible.is_empty() {
                tracing::debug!(topic = %p.topic, partition = p.index, isr = ?prop.new_isr,
                    ?ineligible, "ISR change not sent: ineligible members");
                p.on_refused();
                continue;
            }
            let new_isr = prop.new_isr.clone();
            let req = ControllerRequest::AlterIsr(AlterIsr {
                broker_id: self.node_id,
                broker_epoch: epoch as u64,
                topic_id: p.topic_id,
                partition: p.index,
                leader_epoch: prop.leader_epoch,
                partition_epoch: prop.partition_epoch,
                new_isr: prop.new_isr,
                new_isr_epochs: prop.new_isr_epochs,
            });
            match self.call(req).await {
                Ok(ControllerReply::Isr(Ok(rec))) => {
                    info!(topic = %p.topic, partition = p.index, isr = ?rec.isr, "ISR changed");
                    p.on_committed(&rec);
                }
                Ok(ControllerReply::Isr(Err(e))) => {
                    info!(topic = %p.topic, partition = p.index, isr = ?new_isr, "ISR change refused: {e:?}");
                    p.on_refused();
                }
                Ok(other) => {
                    warn!("unexpected answer to AlterIsr: {other:?}");
                    p.on_refused();
                }
                Err(e) => {
                    warn!(topic = %p.topic, partition = p.index, "AlterIsr failed: {e}");
                    p.on_refused();
                }
            }
        }
    }

    /// Every half `replica.lag.time.max.ms`, leaders drop followers that fell behind.
    async fn check_lagging(self: Arc<Self>) {
        let lag = self.config.replica_lag_time_max_ms;
        let mut tick = tokio::time::interval(Duration::from_millis((lag as u64 / 2).max(10)));
        loop {
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            let Some(host) = self.host() else {
                return;
            };
            let now = now_ms();
            for t in host.replicas().topics() {
                for p in &t.partitions {
                    if p.check_lagging(now, lag).is_some() {
                        self.propose_isr(p);
                    }
                }
            }
        }
    }

    /// Controlled shutdown: asks the controller to move this broker's leaderships away, and
    /// waits until it says the broker leads nothing (bounded by `deadline`).
    pub async fn controlled_shutdown(&self, deadline: Duration) {
        self.shutting_down.store(true, Ordering::Release);
        let until = tokio::time::Instant::now() + deadline;
        while tokio::time::Instant::now() < until {
            match self.heartbeat_once().await {
                Ok(reply) if reply.should_shut_down => {
                    info!("controlled shutdown: this broker leads no partition");
                    return;
                }
                Ok(_) => {}
                Err(e) => warn!("controlled shutdown heartbeat: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        warn!("controlled shutdown did not finish within {deadline:?}; stopping anyway");
    }

    /// Stops the node's tasks and the quorum.
    pub async fn stop(&self) {
        self.cancel.cancel();
        self.fetchers.shutdown().await;
        self.quorum.shutdown().await;
    }
}

impl ClusterNode {
    /// The fetchers follow the partitions of a reconciled image.
    fn follow(&self, img: &MetadataImage, followed: Vec<Followed>) {
        let addresses = replicas::addresses(img, &self.config.inter_broker_listener);
        let targets = followed
            .into_iter()
            .map(|f| FollowTarget {
                partition: f.partition,
                leader: f.leader,
                leader_epoch: f.leader_epoch,
            })
            .collect();
        self.fetchers.update(targets, &addresses);
    }
}

/// The reply a request expects (`f` picks it out), or an error naming what came instead.
pub fn expect_reply<T>(
    r: Result<ControllerReply, CallError>,
    f: impl FnOnce(ControllerReply) -> Option<T>,
) -> Result<T> {
    match r {
        Ok(reply) => {
            let text = format!("{reply:?}");
            match f(reply) {
                Some(t) => Ok(t),
                None => bail!("unexpected controller reply {text}"),
            }
        }
        Err(e) => Err(anyhow::anyhow!("{e}")),
    }
}
