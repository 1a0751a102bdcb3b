//! One node on a thread of its own with its own tokio runtime, so that stopping it, cleanly
//! or abruptly, ends every task it spawned (connections, timers, the quorum, the replica
//! fetchers) and releases its log dirs, whatever runtime the caller runs on.

use std::net::SocketAddr;
use std::sync::{Arc, Weak};

use anyhow::{Result, anyhow};
use tokio::sync::oneshot;

use crate::config::BrokerConfig;
use crate::net::gate::Gate;

/// How a node is asked to stop.
enum Stop {
    /// `run::Running::stop`: listeners closed, state persisted, logs closed.
    Clean,
    /// Its tasks are dropped where they stand; nothing is flushed or closed beyond what the
    /// broker had done (the page cache keeps what was written, as after `kill -9`).
    Kill,
}

/// What a started node reports back.
pub(super) struct Ready {
    pub listeners: Vec<(String, SocketAddr)>,
    /// Weak: a node that stops must be free to drop its broker (and with it the dir locks).
    pub broker: Weak<crate::broker::Broker>,
}

/// A node being started: [`Starting::wait`] or [`Starting::wait_async`] until it serves.
pub(super) struct Starting {
    ready: oneshot::Receiver<Result<Ready>>,
    node: NodeThread,
}

/// A running node; dropped, it stops cleanly and waits for its thread.
pub(super) struct NodeThread {
    stop: Option<oneshot::Sender<Stop>>,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
    pub listeners: Vec<(String, SocketAddr)>,
    pub broker: Weak<crate::broker::Broker>,
}

impl NodeThread {
    /// Starts the node `config` describes on a new thread, its node-to-node connections
    /// through `gate`.
    pub fn spawn(config: BrokerConfig, gate: Gate) -> Result<Starting> {
        let (ready_tx, ready) = oneshot::channel();
        let (stop_tx, stop_rx) = oneshot::channel();
        let name = format!("sluice-node-{}", config.node_id);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(name.clone())
            .enable_all()
            .build()?;
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || run(runtime, config, gate, ready_tx, stop_rx))?;
        Ok(Starting {
            ready,
            node: NodeThread {
                stop: Some(stop_tx),
                thread: Some(thread),
                listeners: Vec::new(),
                broker: Weak::new(),
            },
        })
    }

    /// The address of the first listener, `host:port`.
    pub fn bootstrap(&self) -> String {
        self.listeners
            .first()
            .map_or_else(String::new, |(_, a)| a.to_string())
    }

    /// The broker, while the node runs.
    pub fn broker(&self) -> Option<Arc<crate::broker::Broker>> {
        self.broker.upgrade()
    }

    /// Stops the node cleanly and waits for its thread; the error of the shutdown, if any.
    pub fn stop(mut self) -> Result<()> {
        self.finish(Stop::Clean)
    }

    /// Drops the node's tasks without a shutdown and waits for its thread.
    pub fn kill(mut self) {
        let _ = self.finish(Stop::Kill);
    }

    fn finish(&mut self, how: Stop) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(how);
        }
        match self.thread.take().map(|t| t.join()) {
            None => Ok(()),
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(anyhow!("the node's thread panicked")),
        }
    }
}

impl Drop for NodeThread {
    fn drop(&mut self) {
        if let Err(e) = self.finish(Stop::Clean) {
            tracing::warn!("stopping an embedded node: {e:#}");
        }
    }
}

impl Starting {
    /// Blocks until the node serves (or failed to start). Not from async code: use
    /// [`Starting::wait_async`] there.
    pub fn wait(self) -> Result<NodeThread> {
        let Starting { ready, node } = self;
        let r = ready.blocking_recv();
        node.ready(r)
    }

    /// Waits until the node serves (or failed to start), without blocking the caller's
    /// runtime.
    pub async fn wait_async(self) -> Result<NodeThread> {
        let Starting { ready, node } = self;
        let r = ready.await;
        node.ready(r)
    }
}

impl NodeThread {
    fn ready(mut self, r: Result<Result<Ready>, oneshot::error::RecvError>) -> Result<NodeThread> {
        match r {
            Ok(Ok(ready)) => {
                self.listeners = ready.listeners;
                self.broker = ready.broker;
                Ok(self)
            }
            Ok(Err(e)) => {
                let _ = self.finish(Stop::Kill);
                Err(e)
            }
            Err(_) => Err(self
                .finish(Stop::Kill)
                .err()
                .unwrap_or_else(|| anyhow!("the node stopped while starting"))),
        }
    }
}

/// The node's thread: start, report, wait for the stop, stop; the runtime is dropped here, on
/// this thread, which ends every task left (after a kill, all of them).
fn run(
    runtime: tokio::runtime::Runtime,
    config: BrokerConfig,
    gate: Gate,
    ready: oneshot::Sender<Result<Ready>>,
    stop: oneshot::Receiver<Stop>,
) -> Result<()> {
    let result = runtime.block_on(async move {
        let node = match crate::run::start_gated(config, gate).await {
            Ok(n) => n,
            Err(e) => {
                let _ = ready.send(Err(e));
                return Ok(());
            }
        };
        node.serving().await;
        let info = Ready {
            listeners: node.listeners().to_vec(),
            broker: node.broker().map_or_else(Weak::new, Arc::downgrade),
        };
        if ready.send(Ok(info)).is_err() {
            return node.stop(false).await;
        }
        match stop.await {
            Ok(Stop::Kill) => Ok(()),
            Ok(Stop::Clean) | Err(_) => node.stop(false).await,
        }
    });
    drop(runtime);
    result
}
