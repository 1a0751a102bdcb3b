//! [`LocalBroker`]: one node on a current-thread tokio runtime the caller owns and drives.
//!
//! The node runs the same start-up and shutdown as the `sluice` binary (`crate::run`: a
//! one-voter metadata quorum and its controller, the listeners on ephemeral ports of
//! 127.0.0.1), but its tasks advance only while the caller runs something on the runtime
//! ([`LocalBroker::block_on`]). That is what harnesses calling the handlers directly need: a
//! fuzzer or a benchmark dispatching frames, a unit test driving one handler. Built on a
//! runtime whose clock is paused, every timer of the node (the quorum's, the coordinators',
//! a Fetch's `max_wait_ms`) runs in that runtime's virtual time.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, anyhow};

use super::DataDir;
use crate::cluster::TopicInfo;
use crate::cluster::control::active::CreateTopic;
use crate::cluster::node::ClusterNode;
use crate::run::Running;

/// A single node driven by the caller's runtime (see the module doc). Dropping it stops the
/// node cleanly on that runtime, then deletes its directory unless the builder was given one.
pub struct LocalBroker {
    running: Option<Running>,
    broker: Arc<crate::broker::Broker>,
    // Dropped in this order once `drop` has stopped the node: the broker (and with it the
    // log dir locks), the runtime (every task left), then the directory.
    runtime: tokio::runtime::Runtime,
    dir: DataDir,
}

impl LocalBroker {
    /// Starts the node on `runtime` with `settings` (already the builder's, as `key=value`
    /// pairs) and drives it until it serves.
    pub(super) fn start(
        runtime: tokio::runtime::Runtime,
        settings: &[(String, String)],
        dir: DataDir,
    ) -> Result<LocalBroker> {
        let config = super::load_config(settings)?;
        let running = runtime.block_on(async {
            let running = crate::run::start(config).await?;
            running.serving().await;
            Ok::<_, anyhow::Error>(running)
        })?;
        let broker = running
            .broker()
            .cloned()
            .ok_or_else(|| anyhow!("the node runs no broker"))?;
        Ok(LocalBroker {
            running: Some(running),
            broker,
            runtime,
            dir,
        })
    }

    /// The broker: its handlers' target (`Broker::dispatch`), its partitions and coordinators.
    pub fn broker(&self) -> &Arc<crate::broker::Broker> {
        &self.broker
    }

    /// The address of the first listener, `127.0.0.1:PORT` (it serves only while the caller
    /// drives the runtime).
    pub fn bootstrap(&self) -> String {
        self.running
            .as_ref()
            .and_then(|r| r.listeners().first())
            .map_or_else(String::new, |(_, a)| a.to_string())
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `f` on the node's runtime, which drives the node meanwhile.
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }

    fn node(&self) -> Result<&Arc<ClusterNode>> {
        self.broker
            .cluster()
            .ok_or_else(|| anyhow!("the broker has no metadata quorum"))
    }

    /// Creates a topic of `partitions` partitions through the metadata quorum, as
    /// CreateTopics does; returns once this broker holds its partitions.
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicInfo>> {
        let create = CreateTopic {
            name: name.to_string(),
            num_partitions: partitions,
            replication_factor: 1,
            assignments: None,
            configs,
        };
        let created = self.node()?.create_topics(vec![create], false).await;
        match created.into_iter().next() {
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(anyhow!("cannot create {name}: {e:?}")),
            None => return Err(anyhow!("cannot create {name}: no answer")),
        }
        self.broker
            .controller
            .topic(name)
            .ok_or_else(|| anyhow!("{name} was created but is not held here"))
    }

    /// Deletes a topic through the metadata quorum, as DeleteTopics does; returns once this
    /// broker no longer holds it.
    pub async fn delete_topic(&self, name: &str) -> Result<()> {
        self.node()?
            .delete_topic(name)
            .await
            .map_err(|e| anyhow!("cannot delete {name}: {e:?}"))
    }
}

impl Drop for LocalBroker {
    fn drop(&mut self) {
        if let Some(running) = self.running.take()
            && let Err(e) = self.runtime.block_on(running.stop(false))
        {
            tracing::warn!("stopping a local broker: {e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// On a paused clock the node starts, changes topics through the quorum, and still does
    /// so after ten minutes of virtual time in which only its own timers ran.
    #[test]
    fn a_node_on_a_paused_clock_serves_topic_changes() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        let node = crate::testing::Broker::builder().start_on(rt).unwrap();
        let topic = node
            .block_on(node.create_topic("a", 2, BTreeMap::new()))
            .unwrap();
        assert_eq!(topic.partitions.len(), 2);
        node.block_on(async { tokio::time::sleep(Duration::from_secs(600)).await });
        node.block_on(node.delete_topic("a")).unwrap();
        assert!(node.broker().controller.topic("a").is_none());
        node.block_on(node.create_topic("b", 1, BTreeMap::new()))
            .unwrap();
        assert!(node.broker().controller.topic("b").is_some());
        assert!(node.bootstrap().starts_with("127.0.0.1:"));
    }
}
