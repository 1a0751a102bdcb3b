//! Brokers for tests, embedded in the test's process: [`Broker`] (one node) and [`Cluster`]
//! (combined controller and broker nodes, which a test can kill, restart and cut off from
//! each other). They run the same start-up and shutdown as the `sluice` binary
//! (`crate::run`), each node on a thread and a tokio runtime of its own, and listen on
//! 127.0.0.1, so any Kafka client in any language can connect to them. [`LocalBroker`] is
//! one node on a runtime the caller drives, for harnesses that call the handlers directly.

mod broker;
mod cluster;
mod local;
mod node;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub use broker::{Broker, BrokerBuilder};
pub use cluster::Cluster;
pub use local::LocalBroker;

use crate::config::BrokerConfig;

/// The configuration from `key=value` settings, later ones winning.
fn load_config(settings: &[(String, String)]) -> Result<BrokerConfig> {
    let overrides: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
    BrokerConfig::load(None, &overrides)
}

/// A node's data: a temporary directory deleted on drop, or one the test named and keeps.
enum DataDir {
    Temporary(tempfile::TempDir),
    Kept(PathBuf),
}

impl DataDir {
    fn new(kept: Option<PathBuf>) -> Result<DataDir> {
        Ok(match kept {
            Some(dir) => {
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                DataDir::Kept(dir)
            }
            None => DataDir::Temporary(
                tempfile::Builder::new()
                    .prefix("sluice-test-")
                    .tempdir()
                    .context("cannot create a temporary directory")?,
            ),
        })
    }

    fn path(&self) -> &Path {
        match self {
            DataDir::Temporary(t) => t.path(),
            DataDir::Kept(p) => p,
        }
    }
}
