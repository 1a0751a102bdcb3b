//! Where group state is persisted: the internal compacted topic `__consumer_offsets`.
//!
//! The coordinator talks to an [`OffsetsLog`]: "append these records for this group, answer
//! once they are in the log". [`TopicLog`] is the broker's implementation (it creates the topic
//! on first use, encodes one v2 record batch per write, transactional for a TxnOffsetCommit,
//! and appends it through the partition as the coordinator); [`MemoryLog`] serves the unit
//! tests. `group::replay` reads the topic back.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tokio::sync::Notify;
use tracing::{info, warn};

use super::records;
use crate::clock::now_ms;
use crate::cluster::internal_topic::{InternalTopic, InternalTopics};
use crate::cluster::replication::AckStatus;
use crate::cluster::{PartitionError, TopicInfo};
use crate::config::BrokerConfig;
use crate::producer::ProducerError;

pub const TOPIC: &str = "__consumer_offsets";

/// (key, value) pairs; a `None` value is a tombstone.
pub type Records = Vec<(Bytes, Option<Bytes>)>;
pub type AppendFuture<'a> = Pin<Box<dyn Future<Output = Result<Appended, i16>> + Send + 'a>>;

/// The producer of a transactional write (TxnOffsetCommit): its records form a transactional
/// batch with this producer id and epoch, pending until the producer's transaction marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnProducer {
    pub id: i64,
    pub epoch: i16,
}

/// Where a write landed: the `__consumer_offsets` partition and its first record's offset
/// (the others follow it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    pub partition: i32,
    pub base_offset: i64,
}

/// Where a coordinator in a cluster writes a group's records: the group's partition, in the
/// leader epoch the coordinator loaded it in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leader {
    pub partition: i32,
    pub epoch: i32,
}

pub trait OffsetsLog: Send + Sync {
    /// Appends `records` to the partition of `group` (`at`, in a cluster), as one batch
    /// (transactional if `txn` is set); resolves once they are committed (on one node:
    /// written), or to the Kafka error code to answer with.
    fn append<'a>(
        &'a self,
        group: &'a str,
        at: Option<Leader>,
        txn: Option<TxnProducer>,
        records: Records,
    ) -> AppendFuture<'a>;
}

/// How `__consumer_offsets` is created and written.
#[derive(Clone, Copy, Debug)]
pub struct OffsetsTopic {
    /// `offsets.topic.num.partitions`.
    pub num_partitions: i32,
    /// `offsets.topic.replication.factor` (in a cluster).
    pub replication_factor: i16,
    /// `offsets.topic.segment.bytes`.
    pub segment_bytes: i32,
    /// `offsets.commit.timeout.ms`: how long a write in a cluster waits to be committed.
    pub commit_timeout_ms: u64,
}

impl OffsetsTopic {
    pub fn from_broker(c: &BrokerConfig) -> OffsetsTopic {
        OffsetsTopic {
            num_partitions: c.offsets_topic_num_partitions,
            replication_factor: c
                .cluster
                .as_ref()
                .map_or(1, |cc| cc.offsets_topic_replication_factor),
            segment_bytes: c
                .raw
                .get("offsets.topic.segment.bytes")
                .and_then(|v| v.trim().parse::<i32>().ok())
                .filter(|v| *v >= 1)
                .unwrap_or(104_857_600),
            commit_timeout_ms: c.offsets_commit_timeout_ms,
        }
    }
}

/// The broker's `__consumer_offsets`.
pub struct TopicLog {
    topics: Arc<dyn InternalTopics>,
    cfg: OffsetsTopic,
    /// The partition count groups are spread over, fixed at first use: partitions added to the
    /// topic later (CreatePartitions) do not move a group until the broker restarts, as in
    /// Kafka, whose coordinator reads the count once at start-up.
    spread: std::sync::OnceLock<i32>,
}

impl TopicLog {
    pub fn new(topics: Arc<dyn InternalTopics>, cfg: OffsetsTopic) -> TopicLog {
        TopicLog {
            topics,
            cfg,
            spread: std::sync::OnceLock::new(),
        }
    }
}

/// `__consumer_offsets`, created on first use: compacted, `offsets.topic.segment.bytes`
/// segments, `offsets.topic.num.partitions` partitions, and in a cluster
/// `offsets.topic.replication.factor` replicas (until that many brokers are up,
/// COORDINATOR_NOT_AVAILABLE, as Kafka).
pub async fn offsets_topic(
    topics: &dyn InternalTopics,
    cfg: &OffsetsTopic,
) -> Result<Arc<TopicInfo>, i16> {
    let configs = [
        ("cleanup.policy", "compact".to_string()),
        ("segment.bytes", cfg.segment_bytes.to_string()),
    ];
    let (n, rf) = (cfg.num_partitions, cfg.replication_factor);
    topics
        .ensure(InternalTopic::new(TOPIC, n, rf, &configs))
        .await
}

/// Encodes `records` as one uncompressed v2 batch: without a producer (base sequence -1), or
/// transactional with the producer's id and epoch at base sequence 0, as Kafka's coordinator
/// writes them.
pub fn encode_batch(
    records: &Records,
    timestamp: i64,
    txn: Option<TxnProducer>,
) -> anyhow::Result<BytesMut> {
    let (producer_id, producer_epoch, base_sequence) = match txn {
        Some(t) => (t.id, t.epoch, 0i32),
        None => (-1, -1, -1),
    };
    let recs: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional: txn.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder keeps records in one batch while offset - sequence stays the same.
            sequence: base_sequence.wrapping_add(i as i32),
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
    fn append<'a>(
        &'a self,
        group: &'a str,
        at: Option<Leader>,
        txn: Option<TxnProducer>,
        records: Records,
    ) -> AppendFuture<'a> {
        Box::pin(async move {
            let mut buf = encode_batch(&records, now_ms(), txn).map_err(|e| {
                warn!("cannot encode {TOPIC} records: {e:#}");
                ResponseError::UnknownServerError.code()
            })?;
            if let Some(at) = at {
                let timeout = Duration::from_millis(self.cfg.commit_timeout_ms);
                return append_committed(&*self.topics, TOPIC, group, at, &mut buf, timeout).await;
            }
            let topic = offsets_topic(&*self.topics, &self.cfg).await?;
            let len = topic.partition_count as i32;
            let n = (*self.spread.get_or_init(|| len)).min(len);
            let partition = records::partition_for(group, n);
            let Some(p) = topic.partition(partition) else {
                return Err(ResponseError::NotCoordinator.code());
            };
            match p.append_as_coordinator(&mut buf, i32::MAX as usize, 1) {
                Ok(a) => Ok(Appended {
                    partition,
                    base_offset: a.info.first_offset,
                }),
                Err(e) => Err(refused(TOPIC, group, partition, e)),
            }
        })
    }
}

/// The answer to a write the partition refused: the producer checks of a transactional
/// write as they are (INVALID_PRODUCER_EPOCH for a fenced epoch, INVALID_TXN_STATE), the rest
/// as Kafka's coordinator maps append errors (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR once
/// not the leader).
pub(crate) fn refused(topic: &str, group: &str, partition: i32, e: PartitionError) -> i16 {
    match e {
        PartitionError::NotLeader => ResponseError::NotCoordinator.code(),
        PartitionError::Producer(ProducerError::InvalidEpoch(m)) => {
            info!(group, partition, "{topic} write fenced: {m}");
            ResponseError::InvalidProducerEpoch.code()
        }
        PartitionError::Producer(ProducerError::InvalidTxnState(m)) => {
            info!(group, partition, "{topic} write refused: {m}");
            ResponseError::InvalidTxnState.code()
        }
        e @ PartitionError::NotEnoughReplicas { .. } => {
            info!(group, partition, "{topic} write refused: {e:?}");
            ResponseError::CoordinatorNotAvailable.code()
        }
        e => {
            warn!(group, partition, "append to {topic} failed: {e:?}");
            ResponseError::CoordinatorNotAvailable.code()
        }
    }
}

/// A coordinator's write in a cluster, as Kafka's coordinator writes: acks=all under the
/// partition's min.insync.replicas, answered once the high watermark passes it (within
/// `offsets.commit.timeout.ms`), so what a client is told is committed survives the loss of
/// any broker. Only in the leader epoch the coordinator holds: after a change of leadership
/// the group is someone else's (NOT_COORDINATOR). Too few in-sync replicas, or the timeout:
/// COORDINATOR_NOT_AVAILABLE (the client retries), as Kafka maps them.
pub(crate) async fn append_committed(
    topics: &dyn InternalTopics,
    topic: &str,
    group: &str,
    at: Leader,
    batch: &mut [u8],
    timeout: Duration,
) -> Result<Appended, i16> {
    let not_coordinator = ResponseError::NotCoordinator.code();
    let unavailable = ResponseError::CoordinatorNotAvailable.code();
    let p = topics
        .topic(topic)
        .and_then(|t| t.partition(at.partition).cloned())
        .ok_or(not_coordinator)?;
    if !p.is_leader() || p.leader_epoch() != at.epoch {
        return Err(not_coordinator);
    }
    let appended = p
        .append_as_coordinator(batch, i32::MAX as usize, -1)
        .map_err(|e| refused(topic, group, at.partition, e))?;
    if appended.leader_epoch != at.epoch {
        // Led again in a newer epoch since the check: this coordinator's state is stale.
        return Err(not_coordinator);
    }
    let required = appended.info.last_offset + 1;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let waiter = Arc::new(Notify::new());
        p.add_waiter(&waiter);
        match p.ack_status(required, at.epoch) {
            Ok(AckStatus::Done) => {
                return Ok(Appended {
                    partition: at.partition,
                    base_offset: appended.info.first_offset,
                });
            }
            Ok(AckStatus::Waiting) => {}
            Ok(AckStatus::NotEnoughReplicasAfterAppend) => return Err(unavailable),
            Err(_) => return Err(not_coordinator),
        }
        if tokio::time::Instant::now() >= deadline {
            info!(
                group,
                partition = at.partition,
                "{topic} write not committed within the coordinator's write timeout"
            );
            return Err(unavailable);
        }
        let _ = tokio::time::timeout_at(deadline, waiter.notified()).await;
    }
}

/// An in-memory log for tests: keeps every record appended (and the producer of each
/// transactional one) and where a clustered coordinator aimed each write; `fail` makes
/// appends fail. Writes land in partition 0 on one node; a record's offset is its index.
#[derive(Default)]
pub struct MemoryLog {
    pub appended: Mutex<Vec<(String, Bytes, Option<Bytes>)>>,
    pub targets: Mutex<Vec<Option<Leader>>>,
    pub producers: Mutex<Vec<Option<TxnProducer>>>,
    pub fail: std::sync::atomic::AtomicBool,
}

impl OffsetsLog for MemoryLog {
    fn append<'a>(
        &'a self,
        group: &'a str,
        at: Option<Leader>,
        txn: Option<TxnProducer>,
        records: Records,
    ) -> AppendFuture<'a> {
        Box::pin(async move {
            if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(ResponseError::CoordinatorNotAvailable.code());
            }
            self.targets.lock().unwrap().push(at);
            let mut a = self.appended.lock().unwrap();
            let mut producers = self.producers.lock().unwrap();
            let base_offset = a.len() as i64;
            for (k, v) in records {
                a.push((group.to_string(), k, v));
                producers.push(txn);
            }
            Ok(Appended {
                partition: at.map_or(0, |l| l.partition),
                base_offset,
            })
        })
    }
}
