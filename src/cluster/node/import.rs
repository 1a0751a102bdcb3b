//! A single node's `sluice-metadata` (the metadata of a node that ran without the Raft quorum)
//! carried into the metadata log: the records that give the one-voter quorum the same topics
//! (with their ids), configs, feature levels, group configs, SCRAM users, client quotas, ACLs
//! and producer ids. Written once, as the log's first entry after the cluster id, when the
//! log holds no topic yet; the file is then renamed so it is never read again.

use std::path::{Path, PathBuf};

use crate::cluster::controller::metadata_file::{self, FileMetadata};
use crate::cluster::metadata::{ConfigResource, MetadataRecord, PartitionRecord};
use anyhow::{Context, Result};

/// What `sluice-metadata` is renamed to once its contents are in the metadata log.
const IMPORTED: &str = "sluice-metadata.imported";

/// The file to import from `first_log_dir`, if there is one.
pub fn pending(first_log_dir: &Path) -> Option<PathBuf> {
    let path = metadata_file::path_in(first_log_dir);
    path.exists().then_some(path)
}

/// Reads the file.
pub fn read(first_log_dir: &Path, node_id: i32) -> Result<FileMetadata> {
    metadata_file::read(&metadata_file::path_in(first_log_dir), node_id)
}

/// Marks the file imported (renamed beside itself).
pub fn done(first_log_dir: &Path) -> Result<()> {
    let from = metadata_file::path_in(first_log_dir);
    let to = first_log_dir.join(IMPORTED);
    std::fs::rename(&from, &to)
        .with_context(|| format!("cannot rename {} to {}", from.display(), to.display()))
}

/// The records that recreate `m` on node `node_id`: each partition has this node as its
/// only replica, in its ISR and leading at epoch 0, as the single node served it; producer
/// ids resume at `next_producer_id`.
pub fn records(m: &FileMetadata, node_id: i32, next_producer_id: i64) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    let config = |resource: ConfigResource, name: &str, value: String| MetadataRecord::Config {
        resource,
        name: name.to_string(),
        value: Some(value),
    };
    for (name, id, partitions, configs) in &m.topics {
        out.push(MetadataRecord::Topic {
            name: name.clone(),
            id: *id,
        });
        for p in 0..*partitions {
            out.push(MetadataRecord::Partition(PartitionRecord {
                topic_id: *id,
                partition: p,
                replicas: vec![node_id],
                isr: vec![node_id],
                adding: vec![],
                removing: vec![],
                leader: node_id,
                leader_epoch: 0,
                partition_epoch: 0,
            }));
        }
        for (k, v) in configs {
            out.push(config(ConfigResource::Topic(name.clone()), k, v.clone()));
        }
    }
    for (k, v) in &m.dynamic.cluster_default {
        out.push(config(ConfigResource::Broker(None), k, v.clone()));
    }
    for (k, v) in &m.dynamic.this_broker {
        out.push(config(ConfigResource::Broker(Some(node_id)), k, v.clone()));
    }
    for (name, level) in &m.features.overrides {
        out.push(config(ConfigResource::Features, name, level.to_string()));
    }
    for (group, set) in &m.groups {
        for (k, v) in set {
            out.push(config(ConfigResource::Group(group.clone()), k, v.clone()));
        }
    }
    for (entity, set) in &m.quotas {
        let resource = ConfigResource::ClientQuota(
            entity
                .0
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        );
        for (k, v) in set {
            out.push(config(resource.clone(), k, v.to_string()));
        }
    }
    for ((user, mech), c) in &m.scram {
        out.push(MetadataRecord::UserScramCredential {
            name: user.clone(),
            mechanism: mech.code(),
            salt: c.salt.clone(),
            stored_key: c.stored_key.clone(),
            server_key: c.server_key.clone(),
            iterations: c.iterations,
        });
    }
    out.extend(m.acls.iter().map(super::service::acl_record));
    if next_producer_id > 0 {
        out.push(MetadataRecord::ProducerIds {
            broker_id: node_id,
            broker_epoch: 0,
            next_producer_id,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::metadata::MetadataImage;
    use uuid::Uuid;

    #[test]
    fn the_records_rebuild_the_single_nodes_metadata_in_an_image() {
        let id = Uuid::new_v4();
        let mut m = FileMetadata::default();
        m.topics.push((
            "t".into(),
            id,
            2,
            [("retention.ms".to_string(), "5".to_string())].into(),
        ));
        m.dynamic
            .cluster_default
            .insert("log.retention.ms".into(), "9".into());
        m.groups
            .entry("g".into())
            .or_default()
            .insert("consumer.session.timeout.ms".into(), "45000".into());
        let mut img = MetadataImage::default();
        for r in records(&m, 7, 3000) {
            img.apply(img.offset + 1, &r);
        }
        let t = img.topic("t").expect("topic imported");
        assert_eq!(t.id, id);
        assert_eq!(t.partitions.len(), 2);
        for p in &t.partitions {
            assert_eq!((p.leader, &p.replicas, &p.isr), (7, &vec![7], &vec![7]));
        }
        let cfg = |r: ConfigResource, k: &str| img.configs.get(&r)?.get(k).cloned();
        assert_eq!(
            cfg(ConfigResource::Topic("t".into()), "retention.ms").as_deref(),
            Some("5")
        );
        assert_eq!(
            cfg(ConfigResource::Broker(None), "log.retention.ms").as_deref(),
            Some("9")
        );
        assert_eq!(
            cfg(
                ConfigResource::Group("g".into()),
                "consumer.session.timeout.ms"
            )
            .as_deref(),
            Some("45000")
        );
        assert_eq!(img.next_producer_id, 3000);
    }
}
