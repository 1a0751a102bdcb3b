//! Where group state is persisted: the internal compacted topic `__consumer_offsets`.
//!
//! The coordinator talks to an [`OffsetsLog`]: "append these records for this group, answer
//! once they are in the log". [`TopicLog`] is the broker's implementation (it creates the topic
//! on first use, encodes a v2 record batch and appends it through the partition like any
//! produce); [`MemoryLog`] serves the unit tests. [`load`] replays the topic at start-up.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, Weak};

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tracing::{info, warn};

use super::records::{self, GroupValue, Key, OffsetValue};
use crate::broker::{Broker, now_ms};
use crate::cluster::controller::NewTopic;
use crate::cluster::{Controller, TopicError, TopicInfo};

pub const TOPIC: &str = "__consumer_offsets";

/// (key, value) pairs; a `None` value is a tombstone.
pub type Records = Vec<(Bytes, Option<Bytes>)>;
pub type AppendFuture<'a> = Pin<Box<dyn Future<Output = Result<(), i16>> + Send + 'a>>;

pub trait OffsetsLog: Send + Sync {
    /// Appends `records` to the partition of `group`; resolves once they are written, or to
    /// the Kafka error code to answer with.
    fn append<'a>(&'a self, group: &'a str, records: Records) -> AppendFuture<'a>;
}

/// The broker's `__consumer_offsets`.
pub struct TopicLog {
    broker: Weak<Broker>,
    /// The partition count groups are spread over, fixed at first use: partitions added to the
    /// topic later (CreatePartitions) do not move a group until the broker restarts, as in
    /// Kafka, whose coordinator reads the count once at start-up.
    spread: std::sync::OnceLock<i32>,
}

impl TopicLog {
    pub fn new(broker: Weak<Broker>) -> TopicLog {
        TopicLog {
            broker,
            spread: std::sync::OnceLock::new(),
        }
    }

    async fn topic(&self, b: &Broker) -> Result<std::sync::Arc<TopicInfo>, i16> {
        offsets_topic(b).await
    }
}

/// `__consumer_offsets`, created on first use: compacted, `offsets.topic.num.partitions`
/// partitions, and in a cluster `offsets.topic.replication.factor` replicas (until that many
/// brokers are up, COORDINATOR_NOT_AVAILABLE, as Kafka).
pub async fn offsets_topic(b: &Broker) -> Result<std::sync::Arc<TopicInfo>, i16> {
    {
        if let Some(t) = b.controller.topic(TOPIC) {
            return Ok(t);
        }
        let mut configs = std::collections::BTreeMap::new();
        configs.insert("cleanup.policy".to_string(), "compact".to_string());
        configs.insert("segment.bytes".to_string(), "104857600".to_string());
        if let (Some(c), Some(cc)) = (b.cluster(), b.config.cluster.as_ref()) {
            let t = crate::cluster::control::active::CreateTopic {
                name: TOPIC.to_string(),
                num_partitions: b.config.offsets_topic_num_partitions,
                replication_factor: cc.offsets_topic_replication_factor,
                assignments: None,
                configs,
            };
            return match c.create_topics(vec![t], false).await.pop() {
                Some(Ok(_)) | Some(Err(TopicError::AlreadyExists(_))) => b
                    .controller
                    .topic(TOPIC)
                    .ok_or(ResponseError::CoordinatorNotAvailable.code()),
                other => {
                    info!("cannot create {TOPIC} yet: {other:?}");
                    Err(ResponseError::CoordinatorNotAvailable.code())
                }
            };
        }
        let created = b
            .controller
            .create_topic(NewTopic {
                name: TOPIC.to_string(),
                num_partitions: b.config.offsets_topic_num_partitions,
                replication_factor: 1,
                configs,
            })
            .await;
        match created {
            Ok(t) => Ok(t),
            Err(TopicError::AlreadyExists(_)) => b
                .controller
                .topic(TOPIC)
                .ok_or(ResponseError::CoordinatorNotAvailable.code()),
            Err(e) => {
                warn!("cannot create {TOPIC}: {e:?}");
                Err(ResponseError::CoordinatorNotAvailable.code())
            }
        }
    }
}

/// Encodes `records` as one uncompressed v2 batch.
pub fn encode_batch(records: &Records, timestamp: i64) -> anyhow::Result<BytesMut> {
    let recs: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: -1,
            timestamp,
            key: Some(k.clone()),
            value: v.clone(),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &recs,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )?;
    Ok(buf)
}

impl OffsetsLog for TopicLog {
    fn append<'a>(&'a self, group: &'a str, records: Records) -> AppendFuture<'a> {
        Box::pin(async move {
            let Some(b) = self.broker.upgrade() else {
                return Err(ResponseError::CoordinatorNotAvailable.code());
            };
            let topic = self.topic(&b).await?;
            let len = topic.partition_count as i32;
            let n = (*self.spread.get_or_init(|| len)).min(len);
            let Some(p) = topic.partition(records::partition_for(group, n)) else {
                return Err(ResponseError::NotCoordinator.code());
            };
            let mut buf = encode_batch(&records, now_ms()).map_err(|e| {
                warn!("cannot encode {TOPIC} records: {e:#}");
                ResponseError::UnknownServerError.code()
            })?;
            p.append_as_leader(&mut buf, None, i32::MAX as usize)
                .map(|_| ())
                .map_err(|e| {
                    warn!(group, "append to {TOPIC} failed: {e:?}");
                    ResponseError::CoordinatorNotAvailable.code()
                })
        })
    }
}

/// An in-memory log for tests: keeps every append; `fail` makes appends fail.
#[derive(Default)]
pub struct MemoryLog {
    pub appended: Mutex<Vec<(String, Bytes, Option<Bytes>)>>,
    pub fail: std::sync::atomic::AtomicBool,
}

impl OffsetsLog for MemoryLog {
    fn append<'a>(&'a self, group: &'a str, records: Records) -> AppendFuture<'a> {
        Box::pin(async move {
            if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(ResponseError::CoordinatorNotAvailable.code());
            }
            let mut a = self.appended.lock().unwrap();
            for (k, v) in records {
                a.push((group.to_string(), k, v));
            }
            Ok(())
        })
    }
}

/// What the log says about one group after replay.
#[derive(Default, Debug)]
pub struct Loaded {
    pub metadata: Option<GroupValue>,
    pub offsets: HashMap<(String, i32), OffsetValue>,
}

/// Applies one record to the replayed state (later records win; tombstones delete).
pub fn apply(state: &mut HashMap<String, Loaded>, key: Bytes, value: Option<Bytes>) {
    let key = match records::decode_key(key) {
        Ok(Some(k)) => k,
        Ok(None) => return,
        Err(e) => {
            warn!("{TOPIC}: unreadable key: {e}");
            return;
        }
    };
    match (key, value) {
        (
            Key::Offset {
                group,
                topic,
                partition,
            },
            v,
        ) => match v.map(records::decode_offset) {
            Some(Ok(v)) => {
                state
                    .entry(group)
                    .or_default()
                    .offsets
                    .insert((topic, partition), v);
            }
            Some(Err(e)) => warn!(group, "{TOPIC}: unreadable offset value: {e}"),
            None => {
                if let Some(g) = state.get_mut(&group) {
                    g.offsets.remove(&(topic, partition));
                }
            }
        },
        (Key::Group { group }, v) => match v.map(records::decode_group) {
            Some(Ok(v)) => state.entry(group).or_default().metadata = Some(v),
            Some(Err(e)) => warn!(group, "{TOPIC}: unreadable group value: {e}"),
            None => {
                // A group tombstone deletes the group; its offsets were tombstoned before it.
                if let Some(g) = state.get_mut(&group) {
                    g.metadata = None;
                }
            }
        },
    }
}

/// Reads every partition of `__consumer_offsets` from its start to its high watermark.
///
/// A group's records are normally all in its own partition. If the topic was grown since they
/// were written, older ones sit in another partition; then those are applied first and the
/// group's own partition (where it writes now) last, so the newest state wins.
pub fn load(controller: &Controller) -> anyhow::Result<HashMap<String, Loaded>> {
    let mut state: HashMap<String, Loaded> = HashMap::new();
    let Some(topic) = controller.topic(TOPIC) else {
        return Ok(state);
    };
    let n = topic.partitions.len() as i32;
    let home = |key: &Bytes| match records::decode_key(key.clone()) {
        Ok(Some(k)) => Some(records::partition_for(k.group(), n)),
        _ => None,
    };
    let mut count = 0usize;
    let mut moved = false;
    replay(&topic, |p, k, v| {
        moved |= home(&k).is_some_and(|h| h != p);
        apply(&mut state, k, v);
        count += 1;
    })?;
    if moved {
        info!("{TOPIC}: groups with records outside their partition: replaying them first");
        state.clear();
        replay(&topic, |p, k, v| {
            if home(&k).is_some_and(|h| h != p) {
                apply(&mut state, k, v)
            }
        })?;
        replay(&topic, |p, k, v| {
            if home(&k).is_none_or(|h| h == p) {
                apply(&mut state, k, v)
            }
        })?;
    }
    state.retain(|_, g| g.metadata.is_some() || !g.offsets.is_empty());
    info!(
        records = count,
        groups = state.len(),
        "loaded group metadata and offsets"
    );
    Ok(state)
}

/// Calls `f(partition, key, value)` for every record of `topic` with a key, in offset order
/// within each partition, partitions in index order.
fn replay(topic: &TopicInfo, mut f: impl FnMut(i32, Bytes, Option<Bytes>)) -> anyhow::Result<()> {
    for p in &topic.partitions {
        let mut offset = p.log_start_offset();
        let end = p.high_watermark();
        while offset < end {
            let slice = p
                .read(offset, 1 << 20, true)
                .map_err(|e| anyhow::anyhow!("reading {TOPIC}-{}: {e:?}", p.index))?;
            if slice.len == 0 {
                break;
            }
            let Some(file) = slice.file else { break };
            let mut buf = vec![0u8; slice.len];
            std::os::unix::fs::FileExt::read_exact_at(&*file, &mut buf, slice.position)?;
            let buf = Bytes::from(buf);
            let mut pos = 0usize;
            for h in crate::log::batch::batches(&buf) {
                let h = h.map_err(|e| anyhow::anyhow!("{TOPIC}-{}: {e}", p.index))?;
                let whole = buf.slice(pos..pos + h.total_size());
                pos += h.total_size();
                offset = h.next_offset();
                if h.is_control() || h.next_offset() <= p.log_start_offset() {
                    continue;
                }
                if h.compression() != Some(crate::log::Compression::None) {
                    warn!("{TOPIC}-{}: skipping a compressed batch", p.index);
                    continue;
                }
                let mut b = whole;
                match RecordBatchDecoder::decode(&mut b) {
                    Ok(set) => {
                        for r in set.records {
                            if let Some(k) = r.key {
                                f(p.index, k, r.value);
                            }
                        }
                    }
                    Err(e) => warn!("{TOPIC}-{}: unreadable batch: {e}", p.index),
                }
            }
        }
    }
    Ok(())
}
