//! The files a broker keeps beside its logs: `meta.properties` in each log dir (cluster id,
//! node id, directory id) and `partition.metadata` in each partition directory (topic id).

use std::fs;
use std::path::Path;

use anyhow::{Context, Result, bail};
use uuid::Uuid;

use super::{kafka_base64, write_atomically};
use crate::config::BrokerConfig;
use crate::log::DirLock;

/// Kafka's `partition.metadata`: the topic id, so a directory is tied to one incarnation.
/// Not synced: `sluice-metadata` is the record of truth, and this file is rewritten at every
/// open if it is missing or differs (syncing it would cost two fsyncs per partition).
pub(super) fn write_partition_metadata(dir: &Path, id: Uuid) -> Result<()> {
    let path = dir.join("partition.metadata");
    let text = format!("version: 0\ntopic_id: {}\n", kafka_base64(id.as_bytes()));
    if fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
        return Ok(());
    }
    fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Reads or creates `meta.properties` in every log dir; all must name the same cluster and
/// this node. Returns the cluster id.
pub(super) fn load_meta_properties(config: &BrokerConfig, agreed: Option<&str>) -> Result<String> {
    let mut cluster_id: Option<String> = agreed.map(str::to_string);
    for dir in &config.log_dirs {
        let path = dir.join("meta.properties");
        if let Ok(text) = fs::read_to_string(&path) {
            let props = crate::config::read_pairs(&text, &path)?;
            let get = |k: &str| {
                props
                    .iter()
                    .find(|(key, _)| key == k)
                    .map(|(_, v)| v.clone())
            };
            if let Some(node) = get("node.id")
                && node != config.node_id.to_string()
            {
                bail!(
                    "node.id: {} holds data of node {node}, but node.id is {}",
                    dir.display(),
                    config.node_id
                );
            }
            match (get("cluster.id"), &cluster_id) {
                (Some(c), Some(prev)) if &c != prev => {
                    bail!(
                        "log.dirs: {} belongs to cluster {c}, not {prev}{}",
                        dir.display(),
                        if agreed.is_some() {
                            " (the metadata quorum's)"
                        } else {
                            ""
                        }
                    )
                }
                (Some(c), None) => cluster_id = Some(c),
                _ => {}
            }
        }
    }
    let cluster_id = cluster_id.unwrap_or_else(|| kafka_base64(Uuid::new_v4().as_bytes()));
    for dir in &config.log_dirs {
        let path = dir.join("meta.properties");
        if !path.exists() {
            let text = format!(
                "#\n#Written by sluice\nversion=1\ncluster.id={cluster_id}\nnode.id={}\ndirectory.id={}\n",
                config.node_id,
                kafka_base64(Uuid::new_v4().as_bytes())
            );
            write_atomically(&path, text.as_bytes())?;
        }
    }
    Ok(cluster_id)
}

/// The cluster id the log dirs' `meta.properties` already name, if any (read before the
/// metadata quorum starts, so a node insists on its cluster).
pub fn stored_cluster_id(config: &BrokerConfig) -> Result<Option<String>> {
    for dir in &config.log_dirs {
        let path = dir.join("meta.properties");
        if let Ok(text) = fs::read_to_string(&path) {
            let props = crate::config::read_pairs(&text, &path)?;
            if let Some((_, c)) = props.into_iter().find(|(k, _)| k == "cluster.id") {
                return Ok(Some(c));
            }
        }
    }
    Ok(None)
}

/// A controller-only node's log dirs: created, locked for the node's lifetime, and stamped
/// with the cluster id the quorum agreed on in `meta.properties`, as Kafka's controllers keep
/// them.
pub fn claim_controller_dirs(config: &BrokerConfig, cluster_id: &str) -> Result<Vec<DirLock>> {
    let mut locks = Vec::new();
    for dir in &config.log_dirs {
        fs::create_dir_all(dir)
            .with_context(|| format!("log.dirs: cannot create {}", dir.display()))?;
        locks.push(DirLock::acquire(dir)?);
    }
    load_meta_properties(config, Some(cluster_id))?;
    Ok(locks)
}
