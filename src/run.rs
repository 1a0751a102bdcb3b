//! One node from its configuration to a clean stop: what `main` runs between reading the
//! configuration and exiting, and what `testing` runs in-process.
//!
//! [`start`] reads the keys and certificates, binds every listener (a port in use is reported
//! before any data is touched), starts the HTTP server, locks the log dirs (before the
//! metadata log's dir), checks on a broker that the open-file limit leaves room for its
//! segments, starts in a cluster the metadata quorum (the cluster id it agrees on goes into
//! the log dirs' `meta.properties`), then opens the broker
//! and serves its listeners once it has caught up with the metadata log. A controller-only
//! node (`process.roles=controller`) stops after the quorum and runs the controller's timers.
//! [`Running::stop`] undoes it in order: the listeners close (one [`CancellationToken`] stops
//! every task `start` spawned), the share states persist, the cluster node and its quorum
//! stop, the log cleaner and the logs close and the log dir locks are released.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::broker::Broker;
use crate::cluster::controller::{claim_controller_dirs, stored_cluster_id};
use crate::cluster::node;
use crate::config::BrokerConfig;
use crate::http::HttpState;
use crate::log::DirLock;
use crate::net::gate::Gate;
use crate::net::server;

/// A started node.
pub struct Running {
    /// The broker; None on a controller-only node.
    broker: Option<Arc<Broker>>,
    /// A controller-only node's controller and the locks on its log dirs.
    controller_only: Option<(JoinHandle<()>, Vec<DirLock>)>,
    /// Stops the tasks `start` spawned: the listeners, the HTTP server, the controller.
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    http: HttpState,
    listeners: Vec<(String, SocketAddr)>,
    http_addr: Option<SocketAddr>,
}

/// Starts the node `config` describes on the current tokio runtime. An error says what
/// stopped start-up (a bad key, a port in use, a log dir another process holds).
pub async fn start(config: BrokerConfig) -> Result<Running> {
    start_gated(config, Gate::default()).await
}

/// [`start`], the node's connections with the other nodes of its cluster (the quorum's, the
/// inter-broker client's) through `gate`, which its owner may close to cut them.
pub async fn start_gated(mut config: BrokerConfig, gate: Gate) -> Result<Running> {
    // Keys and certificates are read before anything else: a bad one stops start-up at once.
    let tls = server::tls_for(&config)?;
    let sockets = server::bind_all(&config.listeners).await?;
    adopt_bound_ports(&mut config, &sockets);
    let cancel = CancellationToken::new();
    let mut tasks = Vec::new();
    let http = HttpState::default();
    let http_addr = match &config.http_listener {
        Some(l) => {
            let sock = crate::http::bind(l).await?;
            let addr = sock.local_addr().ok();
            let serve = crate::http::serve(sock, http.clone());
            let cancel = cancel.clone();
            tasks.push(tokio::spawn(async move {
                cancel.run_until_cancelled(serve).await;
            }));
            addr
        }
        None => None,
    };
    let listeners: Vec<(String, SocketAddr)> = config
        .listeners
        .iter()
        .zip(&sockets)
        .filter_map(|(l, s)| Some((l.name.clone(), s.local_addr().ok()?)))
        .collect();
    // The log dirs are locked first, as Kafka locks them (the metadata log's dir after them),
    // so a second broker on the same data dir is refused naming it.
    let dir_locks = crate::log::lock_dirs(&config.log_dirs)?;
    let broker_role = config.cluster.as_ref().is_none_or(|cc| cc.roles.broker);
    if broker_role {
        // Before the quorum starts: an open-file limit too low for the segments stops start-up
        // at once, whichever mode then opens them.
        crate::log::probe_segment_files(&config.log_dirs).map_err(|e| {
            let e = anyhow::Error::from(e).context("cannot open the log segments");
            anyhow!("{e:#}{}", fd_limit_hint(&e, &config.log_dirs))
        })?;
    }
    let quorum = match &config.cluster {
        None => None,
        Some(_) => {
            let stored = stored_cluster_id(&config)?;
            Some(node::start_quorum(&config, stored, gate.clone()).await?)
        }
    };
    let cluster_id = match &quorum {
        Some(q) => Some(node::wait_for_cluster_id(q).await),
        None => None,
    };
    if let Some(q) = quorum
        .as_ref()
        .filter(|_| config.cluster.as_ref().is_some_and(|cc| cc.one_voter))
    {
        // A single node's metadata file, if the dir has one, goes into the quorum's log with
        // the producer ids it handed out.
        let next_pid = crate::producer::id_manager::next_unused(&config.log_dirs[0])?;
        node::import_single_node_metadata(q, &config, next_pid).await?;
    }
    let mut running = Running {
        broker: None,
        controller_only: None,
        cancel,
        tasks,
        http,
        listeners,
        http_addr,
    };
    if let Some(cc) = config.cluster.as_ref().filter(|cc| !cc.roles.broker) {
        let q = quorum.expect("a cluster node has a quorum");
        let id = cluster_id.expect("the quorum agreed on a cluster id");
        let locks = claim_controller_dirs(&config, &id, dir_locks)?;
        info!(
            "sluice {} started as a controller: node id {}, cluster id {id}, metadata log {}, listener {}",
            env!("CARGO_PKG_VERSION"),
            config.node_id,
            cc.metadata_log_dir.display(),
            cc.controller_listener
                .as_ref()
                .map_or(String::new(), |l| l.to_string()),
        );
        let run = tokio::spawn(node::run_controller_only(
            q,
            cc.clone(),
            running.cancel.clone(),
        ));
        running.controller_only = Some((run, locks));
        running.http.serving.store(true, Ordering::Release);
        return Ok(running);
    }
    let log_dirs = config.log_dirs.clone();
    let broker = Broker::open_gated(config, cluster_id.as_deref(), gate, dir_locks)
        .map_err(|e| anyhow!("{e:#}{}", fd_limit_hint(&e, &log_dirs)))?;
    if let Some(q) = quorum {
        let host: std::sync::Weak<dyn node::ReplicaHost> =
            Arc::downgrade(&broker.coordinators) as _;
        let inter_broker = broker.config.cluster.as_ref();
        let http = broker.config.http_listener.as_ref().zip(running.http_addr);
        let endpoints = node::registered_endpoints(
            &broker.advertised,
            inter_broker.map_or("", |cc| cc.inter_broker_listener.as_str()),
            http.map(|(l, bound)| (l.host.as_str(), bound.port())),
        );
        let node = node::ClusterNode::start(
            q,
            &broker.config,
            endpoints,
            broker.inter_broker.clone(),
            host,
        );
        let _ = broker.cluster.set(node);
    }
    broker.spawn_background();
    let _ = running.http.broker.set(broker.clone());
    {
        // Ready once the listeners accept: in a cluster, after catching up (as they wait).
        let (broker, serving) = (broker.clone(), running.http.serving.clone());
        running.tasks.push(tokio::spawn(async move {
            if let Some(node) = broker.cluster.get() {
                node.caught_up().await;
            }
            serving.store(true, Ordering::Release);
        }));
    }
    for ((l, conf), tls) in sockets.into_iter().zip(&broker.config.listeners).zip(tls) {
        let broker = broker.clone();
        let name: Arc<str> = Arc::from(conf.name.as_str());
        let cancel = running.cancel.clone();
        running.tasks.push(tokio::spawn(async move {
            cancel
                .run_until_cancelled(async move {
                    // A cluster node serves once it has caught up with the metadata log.
                    if let Some(node) = broker.cluster.get() {
                        node.caught_up().await;
                    }
                    server::accept_loop(l, broker.frontend.clone(), name, tls).await
                })
                .await;
        }));
    }
    running.log_started(&broker);
    running.broker = Some(broker);
    Ok(running)
}

impl Running {
    /// The broker; None on a controller-only node.
    pub fn broker(&self) -> Option<&Arc<Broker>> {
        self.broker.as_ref()
    }

    /// Each Kafka listener's name and bound address.
    pub fn listeners(&self) -> &[(String, SocketAddr)] {
        &self.listeners
    }

    /// The HTTP server's bound address, when it has one.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Returns once the node serves: its listeners accept clients (in a cluster, once the
    /// broker has caught up with the metadata log).
    pub async fn serving(&self) {
        if let Some(node) = self.broker.as_ref().and_then(|b| b.cluster.get()) {
            node.caught_up().await;
        }
    }

    fn log_started(&self, broker: &Broker) {
        let bound: Vec<String> = self
            .listeners
            .iter()
            .map(|(name, a)| format!("{name}://{a}"))
            .collect();
        let advertised: Vec<String> = broker.advertised.iter().map(|l| l.to_string()).collect();
        let dirs: Vec<String> = broker
            .config
            .log_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        let http_line = self
            .http_addr
            .map_or_else(String::new, |a| format!(", http server http://{a}"));
        info!(
            "sluice {} started: node id {}, cluster id {}, data dirs {}, listeners {}, advertised listeners {}{http_line}",
            env!("CARGO_PKG_VERSION"),
            broker.node_id(),
            broker.controller.cluster_id,
            dirs.join(","),
            bound.join(","),
            advertised.join(","),
        );
    }

    /// Stops the node cleanly. `controlled`: a cluster broker first moves its leaderships
    /// away (Kafka's controlled shutdown, on SIGTERM) when `controlled.shutdown.enable` is on.
    pub async fn stop(mut self, controlled: bool) -> Result<()> {
        if let Some(c) = self.broker.as_ref().and_then(|b| b.cluster())
            && controlled
            && c.config.controlled_shutdown
        {
            c.controlled_shutdown(Duration::from_millis(
                c.config.session_timeout_ms.max(1000) as u64 * 2,
            ))
            .await;
        }
        self.cancel.cancel();
        for t in self.tasks.drain(..) {
            t.abort();
            let _ = t.await;
        }
        if let Some((run, locks)) = self.controller_only.take() {
            let _ = run.await;
            drop(locks);
            return Ok(());
        }
        let Some(broker) = self.broker.take() else {
            return Ok(());
        };
        broker.share.persist().await;
        if let Some(c) = broker.cluster() {
            c.stop().await;
        }
        tokio::task::spawn_blocking(move || {
            broker.cleaner.stop();
            broker.controller.shutdown()
        })
        .await
        .context("shutdown")?
        .context("shutdown")
    }
}

/// A listener configured with port 0 listens on the port the system chose, and is advertised
/// on it (when advertised with port 0 too), as Kafka's broker does.
fn adopt_bound_ports(config: &mut BrokerConfig, sockets: &[tokio::net::TcpListener]) {
    for (l, sock) in config.listeners.iter_mut().zip(sockets) {
        let Ok(bound) = sock.local_addr() else {
            continue;
        };
        if l.port != 0 {
            continue;
        }
        l.port = bound.port();
        for a in config.advertised_listeners.iter_mut() {
            if a.name == l.name && a.port == 0 {
                a.port = bound.port();
            }
        }
    }
}

/// When opening the logs ran out of file descriptors: how many the log dirs need against
/// the limit, and how to raise it (empty for any other error).
fn fd_limit_hint(e: &anyhow::Error, log_dirs: &[std::path::PathBuf]) -> String {
    use nix::sys::resource::{Resource, getrlimit};
    let emfile = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(nix::libc::EMFILE))
            || c.downcast_ref::<nix::Error>() == Some(&nix::Error::EMFILE)
    });
    if !emfile {
        return String::new();
    }
    let segments = crate::log::count_segments(log_dirs);
    let limit = getrlimit(Resource::RLIMIT_NOFILE).map_or(0, |(soft, _)| soft);
    let open = crate::log::open_files::limit().min(segments);
    format!(
        ". The log dirs hold {segments} segments, of which the broker keeps up to {open} open \
         (sluice.log.open.segments.max), but the open-file limit (RLIMIT_NOFILE) is {limit}: \
         raise it to at least {} (`ulimit -n`, or LimitNOFILE= in a systemd unit), as Kafka's \
         documentation advises for brokers with many partitions, or lower \
         sluice.log.open.segments.max",
        open + 1024
    )
}
