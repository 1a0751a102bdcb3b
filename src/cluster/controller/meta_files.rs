//! The files a broker keeps beside its logs: `meta.properties` in each log dir (cluster id,
//! node id, directory id) and `partition.metadata` in each partition directory (topic id).

use std::fs;
use std::path::{Path, PathBuf};

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

/// The `cluster.id` and `node.id` of the `meta.properties` at `path`, when the file can be
/// read.
fn read_meta(path: &Path) -> Result<Option<(Option<String>, Option<String>)>> {
    let Ok(text) = fs::read_to_string(path) else {
        return Ok(None);
    };
    let props = crate::config::read_pairs(&text, path)?;
    let get = |k: &str| {
        props
            .iter()
            .rev()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    Ok(Some((get("cluster.id"), get("node.id"))))
}

/// Writes a new `meta.properties` (version 1, with a new directory id).
fn write_meta(path: &Path, cluster_id: &str, node_id: i32) -> Result<()> {
    let text = format!(
        "#\n#Written by sluice\nversion=1\ncluster.id={cluster_id}\nnode.id={node_id}\ndirectory.id={}\n",
        kafka_base64(Uuid::new_v4().as_bytes())
    );
    write_atomically(path, text.as_bytes())
}

/// Reads or creates `meta.properties` in every log dir; all must name the same cluster and
/// this node. Returns the cluster id.
pub(super) fn load_meta_properties(config: &BrokerConfig, agreed: Option<&str>) -> Result<String> {
    let mut cluster_id: Option<String> = agreed.map(str::to_string);
    for dir in &config.log_dirs {
        let Some((stored, node)) = read_meta(&dir.join("meta.properties"))? else {
            continue;
        };
        if let Some(node) = node
            && node != config.node_id.to_string()
        {
            bail!(
                "node.id: {} holds data of node {node}, but node.id is {}",
                dir.display(),
                config.node_id
            );
        }
        match (stored, &cluster_id) {
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
    let cluster_id = cluster_id.unwrap_or_else(|| kafka_base64(Uuid::new_v4().as_bytes()));
    for dir in &config.log_dirs {
        let path = dir.join("meta.properties");
        if !path.exists() {
            write_meta(&path, &cluster_id, config.node_id)?;
        }
    }
    Ok(cluster_id)
}

/// The cluster id the log dirs' `meta.properties` already name, if any (read before the
/// metadata quorum starts, so a node insists on its cluster).
pub fn stored_cluster_id(config: &BrokerConfig) -> Result<Option<String>> {
    for dir in &config.log_dirs {
        if let Some((Some(c), _)) = read_meta(&dir.join("meta.properties"))? {
            return Ok(Some(c));
        }
    }
    Ok(None)
}

/// `kafka-storage format --cluster-id CLUSTER_ID`, as the apache/kafka image runs it at every
/// start: each log dir (and an explicitly set `metadata.log.dir`) is created if missing and
/// given a `meta.properties` naming `cluster_id` and this node. A dir formatted already for
/// the same cluster and node is left as it is (the image ignores "already formatted"); one
/// formatted for another cluster or node stops start-up, as Kafka's format does. Returns the
/// dirs formatted now.
pub fn format_dirs(config: &BrokerConfig, cluster_id: &str) -> Result<Vec<PathBuf>> {
    let mut dirs = config.log_dirs.clone();
    if let Some(cc) = &config.cluster
        && config
            .raw
            .get("metadata.log.dir")
            .is_some_and(|d| !d.trim().is_empty())
        && !dirs.contains(&cc.metadata_log_dir)
    {
        dirs.push(cc.metadata_log_dir.clone());
    }
    for dir in &dirs {
        let path = dir.join("meta.properties");
        match read_meta(&path)? {
            Some((Some(c), _)) if c != cluster_id => bail!(
                "Invalid cluster.id in: {}. Expected {cluster_id} (CLUSTER_ID), but read {c}",
                path.display()
            ),
            Some((_, Some(n))) if n != config.node_id.to_string() => bail!(
                "Stored node id {n} in {} doesn't match node.id {}",
                path.display(),
                config.node_id
            ),
            _ => {}
        }
    }
    let mut formatted = Vec::new();
    for dir in &dirs {
        let path = dir.join("meta.properties");
        if path.exists() {
            continue;
        }
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        write_meta(&path, cluster_id, config.node_id)?;
        formatted.push(dir.clone());
    }
    Ok(formatted)
}

/// A controller-only node's log dirs, locked (`locks`, from [`crate::log::lock_dirs`]) for
/// the node's lifetime: stamped with the cluster id the quorum agreed on in
/// `meta.properties`, as Kafka's controllers keep them.
pub fn claim_controller_dirs(
    config: &BrokerConfig,
    cluster_id: &str,
    locks: Vec<DirLock>,
) -> Result<Vec<DirLock>> {
    load_meta_properties(config, Some(cluster_id))?;
    Ok(locks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dirs: &[&Path], extra: &[(&str, String)]) -> BrokerConfig {
        let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        let mut pairs = vec![("log.dirs".to_string(), dirs.join(","))];
        pairs.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
        BrokerConfig::from_pairs(pairs).unwrap()
    }

    #[test]
    fn format_writes_the_cluster_id_once_and_refuses_another() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        let meta = tmp.path().join("meta");
        let c = config(
            &[&a, &b],
            &[
                ("process.roles", "broker,controller".into()),
                ("node.id", "3".into()),
                ("controller.quorum.voters", "3@localhost:9093".into()),
                ("controller.listener.names", "CONTROLLER".into()),
                ("listeners", "PLAINTEXT://:9092,CONTROLLER://:9093".into()),
                (
                    "listener.security.protocol.map",
                    "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT".into(),
                ),
                ("metadata.log.dir", meta.display().to_string()),
            ],
        );
        let id = "5L6g3nShT-eMCtK--X86sw";
        let done = format_dirs(&c, id).unwrap();
        assert_eq!(done, vec![a.clone(), b.clone(), meta.clone()]);
        for d in [&a, &b, &meta] {
            let (cluster, node) = read_meta(&d.join("meta.properties")).unwrap().unwrap();
            assert_eq!(cluster.as_deref(), Some(id));
            assert_eq!(node.as_deref(), Some("3"));
        }
        assert_eq!(stored_cluster_id(&c).unwrap().as_deref(), Some(id));
        // Formatted already for the same cluster: nothing to do.
        assert!(format_dirs(&c, id).unwrap().is_empty());
        // Another cluster id names the dir and both ids.
        let e = format_dirs(&c, "MkU3OEVBNTcwNTJENDM2Qk")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&a.join("meta.properties").display().to_string()),
            "{e}"
        );
        assert!(
            e.contains(
                "Expected MkU3OEVBNTcwNTJENDM2Qk (CLUSTER_ID), but read 5L6g3nShT-eMCtK--X86sw"
            ),
            "{e}"
        );
        // A dir of another node.
        let other = config(&[&a], &[("node.id", "4".into())]);
        let e = format_dirs(&other, id).unwrap_err().to_string();
        assert!(e.contains("Stored node id 3"), "{e}");
    }
}
