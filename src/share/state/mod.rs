//! The share coordinator (KIP-932's persister back end): the persisted state of share
//! partitions in the internal topic `__share_group_state`, as Kafka keeps it.
//!
//! A share partition (group, topic id, partition) belongs to the `__share_group_state`
//! partition of its coordinator key `"group:topicId:partition"` (the topic id in Kafka's
//! base64), hashed as Kafka hashes group ids. [`ShareStates`] serves the share-state APIs
//! (83-87, `api/share_state.rs`) and this broker's own share partitions (`share::Coordinator`
//! writes through it): each request is decided by the pure [`shard::Shard`], its record
//! (`records.rs`) appended to the partition and then applied, one write at a time.
//!
//! The topic is created on first use as Kafka creates it: `cleanup.policy=delete` with
//! `retention.ms=-1`, `share.coordinator.state.topic.{num.partitions, replication.factor,
//! min.isr, segment.bytes}`. On one node every partition is replayed at start-up ([`load`]);
//! in a cluster a partition is replayed when this broker becomes its leader and dropped when
//! it stops leading it (`group::loader`), and a share partition whose state partition is led
//! elsewhere is refused with NOT_COORDINATOR.

pub mod records;
pub mod shard;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use kafka_protocol::ResponseError as E;
use tracing::warn;

use crate::clock::now_ms;
use crate::cluster::internal_topic::{InternalTopic, InternalTopics};
use crate::cluster::{Partition, TopicInfo};
use crate::config::BrokerConfig;
use crate::group::replay::Entry;
use crate::group::store::Leader;
use records::{Key, Value};
pub use shard::{Refusal, State, Write};

pub const TOPIC: &str = "__share_group_state";

/// `share.coordinator.*` settings.
#[derive(Debug, Clone, Copy)]
pub struct StateConfig {
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub min_isr: i32,
    pub segment_bytes: i32,
    pub updates_per_snapshot: u32,
    pub write_timeout_ms: u64,
}

impl StateConfig {
    pub fn from_broker(c: &BrokerConfig) -> StateConfig {
        let num = |k: &str, fallback: i64| -> i64 {
            c.raw
                .get(k)
                .map(String::as_str)
                .or_else(|| crate::config::keys::default_of(k))
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(fallback)
        };
        StateConfig {
            num_partitions: num("share.coordinator.state.topic.num.partitions", 50).max(1) as i32,
            replication_factor: num("share.coordinator.state.topic.replication.factor", 3).max(1)
                as i16,
            min_isr: num("share.coordinator.state.topic.min.isr", 2).max(1) as i32,
            segment_bytes: num("share.coordinator.state.topic.segment.bytes", 104_857_600).max(1)
                as i32,
            updates_per_snapshot: num(
                "share.coordinator.snapshot.update.records.per.snapshot",
                500,
            )
            .clamp(1, u32::MAX as i64) as u32,
            write_timeout_ms: num("share.coordinator.write.timeout.ms", 5000).max(1) as u64,
        }
    }
}

/// Kafka's coordinator key of a share partition (`SharePartitionKey.asCoordinatorKey`).
pub fn coordinator_key(key: &Key) -> String {
    format!(
        "{}:{}:{}",
        key.0,
        crate::cluster::controller::kafka_base64(key.1.as_bytes()),
        key.2
    )
}

/// The `__share_group_state` partition (of `n`) holding `key`'s state.
pub fn partition_for(key: &Key, n: i32) -> i32 {
    crate::group::records::partition_for(&coordinator_key(key), n.max(1))
}

/// Where a `__share_group_state` partition stands on this broker (in a cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Load {
    Loading(i32),
    Loaded(i32),
}

/// The share coordinator of this broker.
pub struct ShareStates {
    cfg: StateConfig,
    topics: Arc<dyn InternalTopics>,
    /// The share groups rebuilt from each partition loaded (in a cluster).
    groups: OnceLock<Weak<super::Coordinator>>,
    shard: Mutex<shard::Shard>,
    /// One write at a time: a record is decided, appended and applied before the next.
    writes: tokio::sync::Mutex<()>,
    /// The partitions this broker leads, by index, with their leader epoch.
    partitions: Mutex<HashMap<i32, Load>>,
}

fn refusal(code: i16) -> Refusal {
    Refusal {
        code,
        message: String::new(),
    }
}

impl ShareStates {
    pub fn new(cfg: StateConfig, topics: Arc<dyn InternalTopics>) -> ShareStates {
        ShareStates {
            cfg,
            topics,
            groups: OnceLock::new(),
            shard: Mutex::new(shard::Shard::new(cfg.updates_per_snapshot)),
            writes: tokio::sync::Mutex::new(()),
            partitions: Mutex::new(HashMap::new()),
        }
    }

    /// The share groups and share partitions to rebuild after each load of a partition.
    pub fn rebuilds(&self, groups: &Arc<super::Coordinator>) {
        let _ = self.groups.set(Arc::downgrade(groups));
    }

    /// `__share_group_state`, created on first use as Kafka's share coordinator creates it.
    pub async fn ensure_topic(&self) -> Result<Arc<TopicInfo>, i16> {
        let configs = [
            ("cleanup.policy", "delete".to_string()),
            ("compression.type", "producer".to_string()),
            ("segment.bytes", self.cfg.segment_bytes.to_string()),
            ("min.insync.replicas", self.cfg.min_isr.to_string()),
            ("retention.ms", "-1".to_string()),
        ];
        let (n, rf) = (self.cfg.num_partitions, self.cfg.replication_factor);
        self.topics
            .ensure(InternalTopic::new(TOPIC, n, rf, &configs))
            .await
    }

    /// The state partition of `key` if this broker coordinates it, with the leader epoch it
    /// was loaded in; NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS otherwise.
    async fn coordinates(&self, key: &Key) -> Result<Leader, Refusal> {
        let topic = self.ensure_topic().await.map_err(refusal)?;
        let partition = partition_for(key, topic.partition_count as i32);
        match self.partitions.lock().unwrap().get(&partition) {
            Some(Load::Loaded(epoch)) => Ok(Leader {
                partition,
                epoch: *epoch,
            }),
            Some(Load::Loading(_)) => Err(refusal(E::CoordinatorLoadInProgress.code())),
            None => Err(refusal(E::NotCoordinator.code())),
        }
    }

    /// Appends `v` for `key` to its partition and applies it once committed.
    async fn append(&self, key: &Key, at: Leader, v: Value) -> Result<(), Refusal> {
        let (k, value) = records::encode(key, &v);
        let mut buf = crate::group::store::encode_batch(&vec![(k, value)], now_ms(), None)
            .map_err(|e| {
                warn!("cannot encode {TOPIC} records: {e:#}");
                refusal(E::UnknownServerError.code())
            })?;
        let timeout = Duration::from_millis(self.cfg.write_timeout_ms);
        crate::group::store::append_committed(&*self.topics, TOPIC, &key.0, at, &mut buf, timeout)
            .await
            .map_err(refusal)?;
        self.shard.lock().unwrap().apply(key, v);
        Ok(())
    }

    /// InitializeShareGroupState of one share partition.
    pub async fn initialize(&self, key: &Key, state_epoch: i32, start: i64) -> Result<(), Refusal> {
        let at = self.coordinates(key).await?;
        let _w = self.writes.lock().await;
        let v = self
            .shard
            .lock()
            .unwrap()
            .initialize(key, state_epoch, start, now_ms())?;
        self.append(key, at, v).await
    }

    /// WriteShareGroupState of one share partition.
    pub async fn write(&self, key: &Key, w: &Write) -> Result<(), Refusal> {
        let at = self.coordinates(key).await?;
        let _w = self.writes.lock().await;
        let v = self.shard.lock().unwrap().write(key, w, now_ms())?;
        self.append(key, at, v).await
    }

    /// ReadShareGroupState of one share partition (a newer leader epoch is recorded first).
    pub async fn read(&self, key: &Key, leader_epoch: i32) -> Result<State, Refusal> {
        let at = self.coordinates(key).await?;
        let _w = self.writes.lock().await;
        let (state, update) = {
            let shard = self.shard.lock().unwrap();
            let (s, u) = shard.read(key, leader_epoch)?;
            (s.clone(), u)
        };
        let Some(u) = update else {
            return Ok(state);
        };
        self.append(key, at, u).await?;
        Ok(self
            .shard
            .lock()
            .unwrap()
            .get(key)
            .cloned()
            .unwrap_or(state))
    }

    /// ReadShareGroupStateSummary of one share partition.
    pub async fn summary(&self, key: &Key) -> Result<State, Refusal> {
        self.coordinates(key).await?;
        self.shard.lock().unwrap().summary(key).cloned()
    }

    /// DeleteShareGroupState of one share partition.
    pub async fn delete(&self, key: &Key) -> Result<(), Refusal> {
        let at = self.coordinates(key).await?;
        let _w = self.writes.lock().await;
        let v = self.shard.lock().unwrap().delete(key)?;
        match v {
            Some(v) => self.append(key, at, v).await,
            None => Ok(()),
        }
    }

    /// The state this broker holds of a share partition, if any.
    pub fn get(&self, key: &Key) -> Option<State> {
        self.shard.lock().unwrap().get(key).cloned()
    }

    /// Every share partition state this broker holds.
    pub fn all(&self) -> Vec<(Key, State)> {
        let shard = self.shard.lock().unwrap();
        let mut out: Vec<(Key, State)> =
            shard.iter().map(|(k, s)| (k.clone(), s.clone())).collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

/// The records of one `__share_group_state` partition, in log order.
pub fn replay_partition(p: &Partition) -> anyhow::Result<Vec<(Key, Value)>> {
    let mut out = Vec::new();
    crate::group::replay::replay_partition(p, |e| {
        let Entry::Record { key, value, .. } = e else {
            return;
        };
        match records::decode_key(&key) {
            Ok(Some((kind, k))) => match records::decode_value(kind, value.as_deref()) {
                Ok(v) => out.push((k, v)),
                Err(e) => warn!("{TOPIC}-{}: unreadable value: {e}", p.index),
            },
            Ok(None) => {}
            Err(e) => warn!("{TOPIC}-{}: unreadable key: {e}", p.index),
        }
    })?;
    Ok(out)
}

impl crate::group::loader::PartitionLoads for ShareStates {
    type Loaded = Vec<(Key, Value)>;
    const TOPIC: &'static str = TOPIC;

    fn begin_load(&self, partition: i32, epoch: i32, _count: i32) -> bool {
        let mut parts = self.partitions.lock().unwrap();
        match parts.get(&partition) {
            Some(Load::Loading(e)) | Some(Load::Loaded(e)) if *e == epoch => false,
            _ => {
                parts.insert(partition, Load::Loading(epoch));
                true
            }
        }
    }

    fn is_loading(&self, partition: i32, epoch: i32) -> bool {
        self.partitions.lock().unwrap().get(&partition) == Some(&Load::Loading(epoch))
    }

    fn finish_load(self: &Arc<Self>, partition: i32, epoch: i32, loaded: Self::Loaded) -> bool {
        let mut parts = self.partitions.lock().unwrap();
        if parts.get(&partition) != Some(&Load::Loading(epoch)) {
            return false;
        }
        let count = self
            .topics
            .topic(TOPIC)
            .map_or(self.cfg.num_partitions, |t| t.partition_count as i32);
        let mut shard = self.shard.lock().unwrap();
        shard.retain(|k| partition_for(k, count) != partition);
        for (k, v) in loaded {
            shard.apply(&k, v);
        }
        parts.insert(partition, Load::Loaded(epoch));
        drop(shard);
        drop(parts);
        // The share groups and share partitions of the states just loaded (after a restart,
        // or a leadership moved here) are rebuilt as on one node at start-up.
        if let Some(groups) = self.groups.get().and_then(Weak::upgrade) {
            groups.restore();
        }
        true
    }

    fn unload(&self, partition: i32) {
        let mut parts = self.partitions.lock().unwrap();
        parts.remove(&partition);
        let count = self
            .topics
            .topic(TOPIC)
            .map_or(self.cfg.num_partitions, |t| t.partition_count as i32);
        self.shard
            .lock()
            .unwrap()
            .retain(|k| partition_for(k, count) != partition);
    }

    fn replay(parts: &[Arc<Partition>], _count: i32) -> anyhow::Result<Vec<Self::Loaded>> {
        parts.iter().map(|p| replay_partition(p)).collect()
    }
}
