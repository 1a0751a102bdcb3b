//! Where transaction state is persisted: the internal compacted topic `__transaction_state`.
//!
//! The coordinator talks to a [`TxnLog`]: "write this record to this partition in the
//! leader epoch I coordinate it at, and answer once it is committed". [`TopicLog`] is the
//! broker's implementation: one uncompressed v2 batch per record, appended with acks=all
//! (on one node the ISR is this broker, so the write is committed at once) and answered
//! once the high watermark passes it, errors mapped as Kafka's TransactionStateManager maps
//! them. [`MemoryLog`] serves the unit tests. [`load_partition`] replays one partition.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError as E;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tracing::{info, warn};

use super::records;
use super::state::Transit;
use crate::clock::now_ms;
use crate::cluster::internal_topic::{InternalTopic, InternalTopics};
use crate::cluster::partition::AckOutcome;
use crate::cluster::{Partition, PartitionError, TopicInfo};
use crate::config::TxnSettings;
use crate::group::replay::Entry;

pub const TOPIC: &str = "__transaction_state";

pub type AppendFuture<'a> = Pin<Box<dyn Future<Output = Result<(), i16>> + Send + 'a>>;

pub trait TxnLog: Send + Sync {
    /// Appends (key, value) (None: a tombstone) to `partition` as its leader at `epoch`;
    /// resolves once committed, or to the coordinator error to answer with.
    fn append<'a>(
        &'a self,
        partition: i32,
        epoch: i32,
        key: Bytes,
        value: Option<Bytes>,
        timeout: Duration,
    ) -> AppendFuture<'a>;
}

/// The broker's `__transaction_state`.
pub struct TopicLog {
    topics: Arc<dyn InternalTopics>,
}

impl TopicLog {
    pub fn new(topics: Arc<dyn InternalTopics>) -> TopicLog {
        TopicLog { topics }
    }
}

impl TxnLog for TopicLog {
    fn append<'a>(
        &'a self,
        partition: i32,
        epoch: i32,
        key: Bytes,
        value: Option<Bytes>,
        timeout: Duration,
    ) -> AppendFuture<'a> {
        Box::pin(async move {
            let p = self
                .topics
                .topic(TOPIC)
                .and_then(|t| t.partition(partition).cloned())
                .ok_or(E::NotCoordinator.code())?;
            append_committed(&p, epoch, key, value, timeout).await
        })
    }
}

/// Kafka's mapping of a write's error to the coordinator's: too few replicas or a timeout
/// is COORDINATOR_NOT_AVAILABLE (the client retries), a lost leadership NOT_COORDINATOR
/// (it looks for the new coordinator), a storage error NOT_COORDINATOR.
fn coordinator_error(e: &PartitionError) -> i16 {
    match e {
        PartitionError::NotEnoughReplicas { .. } => E::CoordinatorNotAvailable.code(),
        PartitionError::NotLeader
        | PartitionError::FencedLeaderEpoch
        | PartitionError::UnknownLeaderEpoch
        | PartitionError::Storage(_)
        | PartitionError::Read(_) => E::NotCoordinator.code(),
        PartitionError::Append(_) | PartitionError::Producer(_) => E::UnknownServerError.code(),
    }
}

/// One record written to `p` as its leader at `epoch`, answered once committed.
async fn append_committed(
    p: &Partition,
    epoch: i32,
    key: Bytes,
    value: Option<Bytes>,
    timeout: Duration,
) -> Result<(), i16> {
    let mut batch = encode_record(key, value, now_ms()).map_err(|e| {
        warn!("cannot encode a {TOPIC} record: {e:#}");
        E::UnknownServerError.code()
    })?;
    let appended = p
        .append_with_acks(&mut batch, None, usize::MAX, -1)
        .map_err(|e| {
            info!(partition = p.index, "{TOPIC} write refused: {e:?}");
            coordinator_error(&e)
        })?;
    if appended.leader_epoch != epoch {
        // Led again in another epoch since this coordinator loaded the partition.
        return Err(E::NotCoordinator.code());
    }
    match p
        .wait_for_ack(appended.info.last_offset + 1, epoch, timeout)
        .await
    {
        AckOutcome::Acked => Ok(()),
        AckOutcome::NotLeader => Err(E::NotCoordinator.code()),
        AckOutcome::NotEnoughReplicasAfterAppend | AckOutcome::TimedOut => {
            Err(E::CoordinatorNotAvailable.code())
        }
    }
}

/// One record as an uncompressed v2 batch without a producer (Kafka's coordinator writes
/// its records so).
fn encode_record(key: Bytes, value: Option<Bytes>, timestamp: i64) -> anyhow::Result<BytesMut> {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp,
        key: Some(key),
        value,
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, std::slice::from_ref(&record), &options)?;
    Ok(buf)
}

/// `__transaction_state`, created on first use: compacted, `transaction.state.log.*`
/// partitions, segment size and min.insync.replicas, unclean election off, and in a
/// cluster `transaction.state.log.replication.factor` replicas (COORDINATOR_NOT_AVAILABLE
/// until that many brokers are up, as Kafka).
pub async fn ensure_topic(
    topics: &dyn InternalTopics,
    s: &TxnSettings,
) -> Result<Arc<TopicInfo>, i16> {
    let configs = [
        ("cleanup.policy", "compact".to_string()),
        ("min.insync.replicas", s.min_isr.to_string()),
        ("segment.bytes", s.segment_bytes.to_string()),
        ("unclean.leader.election.enable", "false".to_string()),
    ];
    let (n, rf) = (s.num_partitions, s.replication_factor);
    topics
        .ensure(InternalTopic::new(TOPIC, n, rf, &configs))
        .await
}

/// One write: (partition, epoch, key, value).
pub type Written = (i32, i32, Bytes, Option<Bytes>);

/// An in-memory log for tests: keeps every append; `fail` makes appends fail with it.
#[derive(Default)]
pub struct MemoryLog {
    pub appended: Mutex<Vec<Written>>,
    pub fail: Mutex<Option<i16>>,
}

impl TxnLog for MemoryLog {
    fn append<'a>(
        &'a self,
        partition: i32,
        epoch: i32,
        key: Bytes,
        value: Option<Bytes>,
        _timeout: Duration,
    ) -> AppendFuture<'a> {
        Box::pin(async move {
            if let Some(code) = *self.fail.lock().unwrap() {
                return Err(code);
            }
            self.appended
                .lock()
                .unwrap()
                .push((partition, epoch, key, value));
            Ok(())
        })
    }
}

/// The transactional ids of one partition, from its log start to its high watermark: each
/// id's last written transition (a tombstone removes the id).
pub fn load_partition(p: &Partition) -> anyhow::Result<HashMap<String, Transit>> {
    let mut txns = HashMap::new();
    let mut count = 0usize;
    crate::group::replay::replay_partition(p, |e| {
        if let Entry::Record { key, value, .. } = e {
            count += 1;
            apply(&mut txns, key, value);
        }
    })?;
    tracing::debug!(
        partition = p.index,
        records = count,
        transactional_ids = txns.len(),
        "replayed {TOPIC}-{}",
        p.index
    );
    Ok(txns)
}

/// Applies one record to the replayed state (later records win).
pub fn apply(txns: &mut HashMap<String, Transit>, key: Bytes, value: Option<Bytes>) {
    let id = match records::decode_key(key) {
        Ok(Some(id)) => id,
        Ok(None) => return,
        Err(e) => {
            warn!("{TOPIC}: unreadable key: {e}");
            return;
        }
    };
    match value.map(records::decode_value) {
        None => {
            txns.remove(&id);
        }
        Some(Ok(t)) => {
            txns.insert(id, t);
        }
        Some(Err(e)) => warn!(transactional_id = id, "{TOPIC}: unreadable value: {e}"),
    }
}
