//! [`Broker`]: one embedded node, serving PLAINTEXT on an ephemeral port of 127.0.0.1.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::node::{NodeThread, Starting};
use super::{DataDir, LocalBroker, load_config};

/// A single-node broker for tests, in this process: PLAINTEXT on an ephemeral port of
/// 127.0.0.1, its data in a temporary directory. Dropping it stops it cleanly (the listener
/// closed, its tasks ended, its logs closed and the log dir lock released) and deletes the
/// directory.
///
/// The broker runs on a thread and a tokio runtime of its own, whatever the caller runs on:
/// [`Broker::start`] blocks until it serves, [`Broker::start_async`] awaits the same without
/// blocking the caller's runtime.
///
/// ```
/// use std::time::Duration;
/// use sluice::testing::Broker;
///
/// let broker = Broker::start()?;
/// // Any Kafka client connects to `bootstrap()`; here one ApiVersions round trip.
/// let (_, apis) = sluice::health::check(broker.bootstrap(), Duration::from_secs(5))
///     .map_err(anyhow::Error::msg)?;
/// assert!(apis > 50);
///
/// // Broker properties as in server.properties:
/// let small = Broker::start_with(&[("num.partitions", "3"), ("log.segment.bytes", "1048576")])?;
/// assert_ne!(small.bootstrap(), broker.bootstrap());
/// # Ok::<(), anyhow::Error>(())
/// ```
pub struct Broker {
    node: Option<NodeThread>,
    bootstrap: String,
    dir: DataDir,
}

/// Settings for a [`Broker`] before it starts ([`Broker::builder`]).
#[derive(Default)]
pub struct BrokerBuilder {
    properties: Vec<(String, String)>,
    dir: Option<PathBuf>,
}

impl Broker {
    /// Starts a broker with the defaults and blocks until it serves. Not from async code
    /// (tokio refuses to block a runtime thread): use [`Broker::start_async`] there.
    pub fn start() -> Result<Broker> {
        Broker::builder().start()
    }

    /// Starts a broker with broker properties (Kafka's names, as in server.properties, over
    /// the defaults) and blocks until it serves.
    pub fn start_with(properties: &[(&str, &str)]) -> Result<Broker> {
        properties
            .iter()
            .fold(Broker::builder(), |b, (k, v)| b.property(k, v))
            .start()
    }

    /// Starts a broker with the defaults and waits until it serves.
    pub async fn start_async() -> Result<Broker> {
        Broker::builder().start_async().await
    }

    pub fn builder() -> BrokerBuilder {
        BrokerBuilder::default()
    }

    /// The address clients bootstrap from, `127.0.0.1:PORT`.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// The data directory (`log.dirs` unless a property names another).
    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Stops the broker cleanly and returns what went wrong, if anything, where dropping it
    /// would only log it. The directory is deleted unless it was given to the builder.
    pub fn stop(mut self) -> Result<()> {
        self.node.take().map_or(Ok(()), NodeThread::stop)
    }

    /// Stops the broker abruptly: its tasks are dropped where they stand, its connections and
    /// listeners close, nothing is flushed or closed beyond what it had done (the page cache
    /// keeps what it wrote, as after `kill -9`). The directory is deleted unless it was given
    /// to the builder.
    pub fn kill(mut self) {
        if let Some(node) = self.node.take() {
            node.kill();
        }
    }

    /// The broker itself (its partitions, coordinators and handlers' target), for tests of
    /// Sluice's own internals; None once it has stopped.
    pub fn broker(&self) -> Option<std::sync::Arc<crate::broker::Broker>> {
        self.node.as_ref()?.broker()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        // The node stops before the directory is deleted.
        self.node.take();
    }
}

impl BrokerBuilder {
    /// Sets a broker property (Kafka's name, as in server.properties); later settings win.
    pub fn property(mut self, key: &str, value: &str) -> BrokerBuilder {
        self.properties.push((key.to_string(), value.to_string()));
        self
    }

    /// Keeps the data in `dir` (created if missing), which is not deleted on drop: a broker
    /// started again on it finds its topics and records.
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> BrokerBuilder {
        self.dir = Some(dir.into());
        self
    }

    /// Starts the broker and blocks until it serves (not from async code).
    pub fn start(self) -> Result<Broker> {
        let (starting, dir) = self.spawn()?;
        Broker::started(starting.wait()?, dir)
    }

    /// Starts the broker and waits until it serves.
    pub async fn start_async(self) -> Result<Broker> {
        let (starting, dir) = self.spawn()?;
        Broker::started(starting.wait_async().await?, dir)
    }

    /// Starts the broker on `runtime`, a current-thread runtime the caller drives
    /// ([`LocalBroker`]), and drives it until it serves.
    pub fn start_on(self, runtime: tokio::runtime::Runtime) -> Result<LocalBroker> {
        let (settings, dir) = self.settings()?;
        LocalBroker::start(runtime, &settings, dir)
    }

    fn spawn(self) -> Result<(Starting, DataDir)> {
        let (settings, dir) = self.settings()?;
        Ok((
            NodeThread::spawn(load_config(&settings)?, Default::default())?,
            dir,
        ))
    }

    /// The data dir and the settings: the defaults below, then the builder's properties.
    fn settings(self) -> Result<(Vec<(String, String)>, DataDir)> {
        let dir = DataDir::new(self.dir)?;
        let mut settings = vec![
            (
                "listeners".to_string(),
                "PLAINTEXT://127.0.0.1:0".to_string(),
            ),
            ("log.dirs".to_string(), dir.path().display().to_string()),
            // As Kafka's own development configuration: a group's first member need not
            // wait 3 s for others.
            (
                "group.initial.rebalance.delay.ms".to_string(),
                "0".to_string(),
            ),
        ];
        settings.extend(self.properties);
        Ok((settings, dir))
    }
}

impl Broker {
    fn started(node: NodeThread, dir: DataDir) -> Result<Broker> {
        Ok(Broker {
            bootstrap: node.bootstrap(),
            node: Some(node),
            dir,
        })
    }
}
