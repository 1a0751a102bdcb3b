//! This broker's replicas and log dirs: the topics it holds replicas of, as the metadata
//! image installs them (`install_topic`, `remove_topic`), each partition's log opened and
//! recovered from the log dirs' checkpoints, `meta.properties` in each log dir, and the clean
//! shutdown marker. Metadata is decided by the metadata quorum (`cluster::control`), on a single
//! node too; `metadata_file` only reads the `sluice-metadata` file an earlier release's single
//! node kept, for its import into the quorum (`cluster::node::import`).
//!
//! Readers take a cheap snapshot: a topic is an immutable `TopicInfo` behind an `Arc`, replaced
//! whole when it changes.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use anyhow::{Context, Result};
use tracing::{info, warn};
use uuid::Uuid;

mod meta_files;
pub mod metadata_file;

pub use meta_files::{claim_controller_dirs, format_dirs, stored_cluster_id};
use meta_files::{load_meta_properties, write_partition_metadata};

use super::checkpoints::LogDirCheckpoints;
use super::log_cleaner::LogCleaner;
use super::partition::{Partition, ReplicaState};
use super::topic_config::{self, BrokerDefaults, EffectiveTopicConfig};
use crate::cluster::group_config::GroupConfigs;
use crate::config::BrokerConfig;
use crate::config::dynamic::DynamicConfigs;
use crate::log::{DirLock, Log};

/// Most partitions one topic may have. One request must not be able to make the broker
/// create partition directories without bound (found by fuzzing).
pub const MAX_PARTITIONS_PER_TOPIC: i32 = 100_000;
const CLEAN_SHUTDOWN: &str = ".kafka_cleanshutdown";

pub struct TopicInfo {
    pub name: Arc<str>,
    pub id: Uuid,
    /// The replicas of this topic's partitions that this broker holds, by partition index: on
    /// one node all of them (`partitions[i].index == i`); in a cluster, those it is assigned.
    pub partitions: Vec<Arc<Partition>>,
    /// How many partitions the topic has (in a cluster, including those held elsewhere).
    pub partition_count: usize,
    pub configs: BTreeMap<String, String>,
    pub effective: EffectiveTopicConfig,
    pub internal: bool,
}

impl TopicInfo {
    /// This broker's replica of partition `index`, if it holds one.
    pub fn partition(&self, index: i32) -> Option<&Arc<Partition>> {
        let i = usize::try_from(index).ok()?;
        match self.partitions.get(i) {
            Some(p) if p.index == index => Some(p),
            _ => self
                .partitions
                .binary_search_by_key(&index, |p| p.index)
                .ok()
                .map(|at| &self.partitions[at]),
        }
    }

    /// Whether the topic has partition `index` (held here or not).
    pub fn has_partition(&self, index: i32) -> bool {
        usize::try_from(index).is_ok_and(|i| i < self.partition_count)
    }
}

/// Why a topic operation failed; the API layer maps these to Kafka error codes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TopicError {
    AlreadyExists(String),
    InvalidTopic(String),
    InvalidPartitions(String),
    InvalidReplicationFactor(String),
    InvalidConfig(String),
    InvalidReplicaAssignment(String),
    PolicyViolation(String),
    UnknownTopic,
    Storage(String),
    /// The active controller did not answer in time (REQUEST_TIMED_OUT).
    Timeout(String),
}

#[derive(Default)]
struct Image {
    by_name: HashMap<Arc<str>, Arc<TopicInfo>>,
    by_id: HashMap<Uuid, Arc<TopicInfo>>,
}

pub struct Controller {
    config: Arc<BrokerConfig>,
    /// The static configuration with the dynamic broker configs laid over it: what topics
    /// without an override of their own follow. Replaced whole when a dynamic config changes.
    defaults: RwLock<Arc<BrokerDefaults>>,
    image: RwLock<Image>,
    pub cluster_id: String,
    /// `.lock` of every log dir, held while this controller (the broker) lives.
    _dir_locks: Vec<DirLock>,
    /// The log dirs' high watermark and recovery point checkpoints.
    pub checkpoints: LogDirCheckpoints,
    /// The last shutdown was not clean: logs opened later (cluster mode) are recovered too.
    unclean_start: bool,
    /// The log cleaner of this broker's log dirs: it forgets a partition's cleaning
    /// checkpoint when the replica is deleted here.
    pub cleaner: Arc<LogCleaner>,
    /// The dynamic group configs: the image's, installed at each reconcile.
    pub group_configs: Arc<GroupConfigs>,
    /// The client quotas: the image's, installed at each reconcile.
    pub client_quotas: Arc<crate::quota::ClientQuotas>,
    /// The users' SCRAM credentials: the image's, installed at each reconcile.
    pub scram: Arc<crate::security::scram_store::ScramStore>,
    /// The ACLs: the image's, installed at each reconcile.
    pub acls: Arc<crate::security::acl::Acls>,
}

pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return Err("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > 249 {
        return Err(format!(
            "Topic name is illegal, it can't be longer than 249 characters, topic name: {name}"
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-')
    {
        return Err(format!(
            "Topic name {name} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

impl Controller {
    /// Loads the metadata and opens every partition log, recovering them after an unclean
    /// shutdown.
    ///
    /// In a cluster (`cluster_id` given: the id the metadata quorum agreed on) the topics come
    /// from the metadata image instead (`install_topic`), and `meta.properties` must name that
    /// cluster.
    pub fn open(config: Arc<BrokerConfig>, cluster_id: Option<&str>) -> Result<Controller> {
        // Before anything in the directories is read or written.
        let dir_locks = crate::log::lock_dirs(&config.log_dirs)?;
        Controller::open_locked(config, cluster_id, dir_locks)
    }

    /// [`Controller::open`] with the log dirs' locks already held (`dir_locks`, from
    /// [`crate::log::lock_dirs`]).
    pub fn open_locked(
        config: Arc<BrokerConfig>,
        cluster_id: Option<&str>,
        dir_locks: Vec<DirLock>,
    ) -> Result<Controller> {
        let mut clean = true;
        // Moves between log dirs a crash cut short are finished or undone before any
        // partition directory is looked for.
        for action in crate::log::dir_move::finish_interrupted_moves(&config.log_dirs)
            .context("finishing interrupted log dir moves")?
        {
            info!("log dir move at start-up: {action:?}");
        }
        for dir in &config.log_dirs {
            let marker = dir.join(CLEAN_SHUTDOWN);
            if marker.exists() {
                fs::remove_file(&marker)
                    .with_context(|| format!("cannot remove {}", marker.display()))?;
                sync_dir(dir)?;
            } else {
                clean = false;
            }
        }
        let cluster_id = load_meta_properties(&config, cluster_id)?;
        let ctl = Controller {
            defaults: RwLock::new(Arc::new(BrokerDefaults::new(
                config.clone(),
                DynamicConfigs::default(),
            ))),
            config: config.clone(),
            image: RwLock::new(Image::default()),
            cluster_id,
            _dir_locks: dir_locks,
            checkpoints: LogDirCheckpoints::load(&config)?,
            unclean_start: !clean,
            cleaner: Arc::new(LogCleaner::open(&config)),
            group_configs: Arc::default(),
            client_quotas: Arc::default(),
            scram: Arc::default(),
            acls: Arc::default(),
        };
        Ok(ctl)
    }

    /// The log dir holding the fewest partition directories, for a new topic's partitions.
    fn least_loaded_dir(&self) -> &Path {
        self.config
            .log_dirs
            .iter()
            .min_by_key(|d| {
                if self.config.log_dirs.len() == 1 {
                    return 0;
                }
                fs::read_dir(d)
                    .map(|r| {
                        r.filter_map(|e| e.ok())
                            .filter(|e| e.path().is_dir())
                            .count()
                    })
                    .unwrap_or(0)
            })
            .unwrap()
    }

    /// Where a partition's directory is: an existing one in any log dir, else a new one in
    /// `new_dir`.
    fn partition_dir(&self, topic: &str, index: i32, new_dir: &Path) -> PathBuf {
        let name = format!("{topic}-{index}");
        for d in &self.config.log_dirs {
            let p = d.join(&name);
            if p.is_dir() {
                return p;
            }
        }
        new_dir.join(name)
    }

    /// Opens this broker's replica of partition `index` in a cluster, as a follower of no
    /// one yet: the metadata image then gives it its role. Its log is recovered if the last
    /// shutdown was unclean.
    pub fn open_replica(
        &self,
        name: &Arc<str>,
        id: Uuid,
        index: i32,
        effective: &EffectiveTopicConfig,
    ) -> Result<Arc<Partition>> {
        let state = ReplicaState {
            leader: -1,
            leader_epoch: -1,
            replicas: Vec::new(),
            isr: Vec::new(),
        };
        let new_dir = self.least_loaded_dir().to_path_buf();
        self.open_replica_in(
            name,
            id,
            index,
            effective,
            self.unclean_start,
            &new_dir,
            state,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn open_replica_in(
        &self,
        name: &Arc<str>,
        id: Uuid,
        index: i32,
        effective: &EffectiveTopicConfig,
        needs_recovery: bool,
        new_dir: &Path,
        state: ReplicaState,
    ) -> Result<Arc<Partition>> {
        let node = self.config.node_id;
        let dir = self.partition_dir(name, index, new_dir);
        fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        write_partition_metadata(&dir, id)?;
        let recovery_point = self.checkpoints.recovery_point(&dir, name, index);
        let mut log = Log::open_from_recovery_point(
            &dir,
            effective.log.clone(),
            needs_recovery,
            Some(recovery_point),
        )
        .with_context(|| format!("cannot open log {}", dir.display()))?;
        if let Some(start) = self.checkpoints.log_start(&dir, name, index) {
            // Within the log: a tail lost in a crash cannot leave the start past the end.
            log.advance_log_start(start.min(log.log_end_offset()))
                .with_context(|| format!("cannot restore the log start of {}", dir.display()))?;
        }
        let hw = self.checkpoints.high_watermark(&dir, name, index);
        let p = Partition::new(name.clone(), index, id, node, log, state, hw);
        p.set_min_insync_replicas(effective.min_insync_replicas);
        Ok(Arc::new(p))
    }

    /// Publishes a topic as the metadata image describes it (cluster mode), replacing the
    /// one with its id.
    pub fn install_topic(&self, topic: Arc<TopicInfo>) {
        let mut image = self.image.write().unwrap();
        if let Some(old) = image.by_id.insert(topic.id, topic.clone())
            && old.name != topic.name
        {
            image.by_name.remove(&old.name);
        }
        image.by_name.insert(topic.name.clone(), topic);
    }

    /// Unpublishes a topic (cluster mode); the caller deletes its replicas.
    pub fn remove_topic(&self, id: &Uuid) -> Option<Arc<TopicInfo>> {
        let mut image = self.image.write().unwrap();
        let t = image.by_id.remove(id)?;
        image.by_name.remove(&t.name);
        Some(t)
    }

    pub fn broker_config(&self) -> &Arc<BrokerConfig> {
        &self.config
    }

    /// What topics without an override follow: the static configuration and the dynamic
    /// broker configs over it.
    pub fn defaults(&self) -> Arc<BrokerDefaults> {
        self.defaults.read().unwrap().clone()
    }

    /// Replaces the dynamic broker configs (the caller then refreshes the topics' settings).
    pub fn set_defaults(&self, dynamic: DynamicConfigs) -> Arc<BrokerDefaults> {
        let d = Arc::new(BrokerDefaults::new(self.config.clone(), dynamic));
        *self.defaults.write().unwrap() = d.clone();
        d
    }

    pub fn topic(&self, name: &str) -> Option<Arc<TopicInfo>> {
        self.image.read().unwrap().by_name.get(name).cloned()
    }

    pub fn topic_by_id(&self, id: &Uuid) -> Option<Arc<TopicInfo>> {
        self.image.read().unwrap().by_id.get(id).cloned()
    }

    /// All topics, sorted by name.
    pub fn topics(&self) -> Vec<Arc<TopicInfo>> {
        let mut v: Vec<_> = self
            .image
            .read()
            .unwrap()
            .by_name
            .values()
            .cloned()
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// Deletes a replica held here (its topic was deleted, or the replica moved away).
    pub fn delete_replica(&self, p: &Partition) -> Result<()> {
        delete_replica(&self.cleaner, p)
    }

    /// Applies retention to every partition.
    pub fn apply_retention(&self, now_ms: i64) {
        let merged = self.defaults().merged.clone();
        for t in self.topics() {
            // A compact-only topic is cut by its cleaner, never by time or size.
            if topic_config::is_compact_only(&merged, &t.configs) {
                continue;
            }
            for p in &t.partitions {
                match p.apply_retention(now_ms) {
                    Ok(0) => {}
                    Ok(n) => {
                        info!(topic = %t.name, partition = p.index, "retention deleted {n} segment(s)")
                    }
                    Err(e) => {
                        warn!(topic = %t.name, partition = p.index, "retention failed: {e:#}")
                    }
                }
            }
        }
    }

    /// Checkpoints the high watermarks, flushes and closes every log, checkpoints the
    /// recovery points (now the log ends) and log starts, then marks each log dir as cleanly
    /// shut down.
    pub fn shutdown(&self) -> Result<()> {
        let mut ok = self
            .checkpoints
            .write_high_watermarks(&self.topics())
            .is_ok();
        for t in self.topics() {
            for p in &t.partitions {
                if let Err(e) = p.close() {
                    warn!(topic = %t.name, partition = p.index, "close failed: {e:#}");
                    ok = false;
                }
            }
        }
        ok &= self
            .checkpoints
            .write_recovery_points(&self.topics())
            .is_ok();
        ok &= self.checkpoints.write_log_starts(&self.topics()).is_ok();
        if ok {
            for dir in &self.config.log_dirs {
                let marker = dir.join(CLEAN_SHUTDOWN);
                fs::File::create(&marker)
                    .and_then(|f| f.sync_all())
                    .with_context(|| format!("cannot write {}", marker.display()))?;
                sync_dir(dir)?;
            }
        }
        Ok(())
    }
}

/// Deletes a replica's directory and what the log cleaner remembers of it (so that a topic
/// created again under the name starts cleaning from its own start).
fn delete_replica(cleaner: &LogCleaner, p: &Partition) -> Result<()> {
    cleaner.forget(&p.log_dir(), &p.topic, p.index);
    p.delete()
}

/// Kafka prints ids as URL-safe base64 without padding.
pub fn kafka_base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

pub use crate::log::checkpoint::write_atomically;

pub fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync directory {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_kafka() {
        // Kafka's Uuid.toString of all-zero bytes is "AAAAAAAAAAAAAAAAAAAAAA".
        assert_eq!(kafka_base64(&[0u8; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(kafka_base64(&[0xfb, 0xff, 0xbf]), "-_-_");
    }

    #[test]
    fn topic_names() {
        assert!(validate_topic_name("ok.topic_1-x").is_ok());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("bad name").is_err());
        assert!(validate_topic_name(&"a".repeat(250)).is_err());
    }
}
