//! KIP-890 on the partition side: before a transactional write to a partition where the
//! producer has no transaction open, the partition's leader asks the transaction coordinator
//! whether the partition is in the transaction (part 1, verify only) or, for clients of
//! transaction version 2, adds it (part 2: such clients never send AddPartitionsToTxn). On
//! one node, or when this broker coordinates the transactional id, the coordinator is asked
//! directly; otherwise with AddPartitionsToTxn v5 to the coordinator, as Kafka's
//! AddPartitionsToTxnManager does.
//!
//! The errors are Kafka's: the coordinator's answer as AddPartitionsToTxnManager maps it
//! ([`Operation`] decides), then for a produce as ReplicaManager maps it
//! ([`produce_error`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ProduceRequest, ProducerId,
    TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use tracing::debug;

use super::Txns;
use crate::log::batch::BatchHeader;
use crate::txn::peers::Purpose;
use crate::txn::state::*;

/// What a request's version lets the broker do with a partition not yet in the transaction
/// (Kafka's TransactionSupportedOperation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Verify; the client only knows INVALID_TXN_STATE for "not in the transaction".
    DefaultError,
    /// Verify; the client handles TRANSACTION_ABORTABLE.
    GenericError,
    /// Add the partition (transaction version 2).
    AddPartition,
}

impl Operation {
    pub fn for_produce(version: i16) -> Operation {
        match version {
            12.. => Operation::AddPartition,
            11 => Operation::GenericError,
            _ => Operation::DefaultError,
        }
    }

    pub fn for_txn_offset_commit(version: i16) -> Operation {
        match version {
            5.. => Operation::AddPartition,
            4 => Operation::GenericError,
            _ => Operation::DefaultError,
        }
    }
}

/// The AddPartitionsToTxn version brokers send each other.
const VERSION: i16 = 5;

/// How long an add that meets CONCURRENT_TRANSACTIONS (the previous transaction's markers
/// are still being written) is retried before the error goes back (Kafka's
/// `add.partitions.to.txn.retry.backoff.*`).
const RETRY_BACKOFF: Duration = Duration::from_millis(20);
const RETRY_FOR: Duration = Duration::from_millis(100);

/// Verifies (or with [`Operation::AddPartition`] adds) `partitions` for `transactional_id`
/// at `producer_id`/`producer_epoch`: the partitions that failed, with their errors as
/// AddPartitionsToTxnManager maps them.
pub async fn add_or_verify(
    b: &Txns,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &BTreeSet<TopicPartition>,
    op: Operation,
) -> BTreeMap<TopicPartition, i16> {
    let deadline = tokio::time::Instant::now() + RETRY_FOR;
    loop {
        let raw = ask(
            b,
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
            op,
        )
        .await;
        let concurrent = raw.iter().any(|(_, c)| *c == CONCURRENT_TRANSACTIONS);
        if op == Operation::AddPartition
            && concurrent
            && tokio::time::Instant::now() + RETRY_BACKOFF < deadline
        {
            tokio::time::sleep(RETRY_BACKOFF).await;
            continue;
        }
        return raw
            .into_iter()
            .filter(|(_, c)| *c != NONE)
            .map(|(tp, c)| (tp, manager_error(c, op)))
            .collect();
    }
}

/// AddPartitionsToTxnManager's view of the coordinator's error.
fn manager_error(code: i16, op: Operation) -> i16 {
    match code {
        PRODUCER_FENCED => INVALID_PRODUCER_EPOCH,
        TRANSACTION_ABORTABLE if op == Operation::DefaultError => INVALID_TXN_STATE,
        c => c,
    }
}

/// ReplicaManager's translation of a verification error for the produce response: errors an
/// older client would not retry become NOT_ENOUGH_REPLICAS (retriable, no metadata refresh).
pub fn produce_error(code: i16, op: Operation) -> i16 {
    match code {
        c if c == E::NetworkException.code()
            || c == COORDINATOR_LOAD_IN_PROGRESS
            || c == COORDINATOR_NOT_AVAILABLE
            || c == NOT_COORDINATOR =>
        {
            E::NotEnoughReplicas.code()
        }
        CONCURRENT_TRANSACTIONS if op != Operation::AddPartition => E::NotEnoughReplicas.code(),
        c => c,
    }
}

/// A produce's verification: the transactional partitions where the producer has no
/// transaction open at its epoch are verified (or added) with the coordinator, once for the
/// request. The error and message of each partition that failed, by (topic name, index).
pub async fn for_produce(
    b: &Txns,
    req: &ProduceRequest,
    version: i16,
) -> HashMap<TopicPartition, (i16, Option<String>)> {
    let mut out = HashMap::new();
    let Some(id) = req.transactional_id.as_ref().map(|t| t.0.to_string()) else {
        return out;
    };
    if !b.config.txn.verification {
        return out;
    }
    let mut producers = BTreeSet::new();
    let mut unverified = BTreeSet::new();
    for td in &req.topic_data {
        let topic = if version >= 13 {
            b.controller.topic_by_id(&td.topic_id)
        } else {
            b.controller.topic(td.name.0.as_str())
        };
        let Some(topic) = topic else { continue };
        for pd in &td.partition_data {
            let Some(h) = pd.records.as_deref().and_then(|r| BatchHeader::parse(r, 0)) else {
                continue;
            };
            if !h.is_transactional() || h.producer_id < 0 {
                continue;
            }
            producers.insert((h.producer_id, h.producer_epoch));
            // A replica that does not lead answers NOT_LEADER_OR_FOLLOWER in the request's
            // own pass.
            let Some(p) = topic.partition(pd.index).filter(|p| p.is_leader()) else {
                continue;
            };
            if !p.has_ongoing_txn(h.producer_id, h.producer_epoch) {
                unverified.insert((topic.name.to_string(), pd.index));
            }
        }
    }
    let Some(&(producer_id, producer_epoch)) = producers.first() else {
        return out;
    };
    if producers.len() > 1 {
        // Kafka refuses the request: its transactional records name several producers.
        for tp in unverified {
            out.insert(tp, (INVALID_PRODUCER_ID_MAPPING, None));
        }
        return out;
    }
    if unverified.is_empty() {
        return out;
    }
    let op = Operation::for_produce(version);
    let failed = add_or_verify(b, &id, producer_id, producer_epoch, &unverified, op).await;
    for (tp, code) in failed {
        let produce = produce_error(code, op);
        let message = if produce == INVALID_TXN_STATE {
            Some("Partition was not added to the transaction".to_string())
        } else if produce != code {
            let name = E::try_from_code(code).map_or(code.to_string(), |e| format!("{e:?}"));
            Some(format!(
                "Unable to verify the partition has been added to the transaction. \
                 Underlying error: {name}"
            ))
        } else {
            None
        };
        out.insert(tp, (produce, message));
    }
    out
}

/// A TxnOffsetCommit's verification: the group's `__consumer_offsets` partition must be in
/// the producer's transaction (v5, transaction version 2: it is added). The error to answer
/// every partition of the request with, if it is not.
pub async fn for_txn_offset_commit(
    b: &Txns,
    transactional_id: &str,
    group_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    version: i16,
) -> Option<i16> {
    if !b.config.txn.verification {
        return None;
    }
    let offsets = b.controller.topic(crate::group::store::TOPIC)?;
    let partition = crate::group::records::partition_for(group_id, offsets.partition_count as i32);
    if offsets
        .partition(partition)
        .is_some_and(|p| p.has_ongoing_txn(producer_id, producer_epoch))
    {
        return None;
    }
    let tp = (crate::group::store::TOPIC.to_string(), partition);
    let op = Operation::for_txn_offset_commit(version);
    let failed = add_or_verify(
        b,
        transactional_id,
        producer_id,
        producer_epoch,
        &BTreeSet::from([tp]),
        op,
    )
    .await;
    // As Kafka's group coordinator answers them: the group coordinator's own retriable errors.
    failed
        .into_values()
        .next()
        .map(|code| match E::try_from_code(code) {
            Some(E::NetworkException) => COORDINATOR_LOAD_IN_PROGRESS,
            Some(E::NotLeaderOrFollower) => NOT_COORDINATOR,
            _ => code,
        })
}

/// The coordinator's raw answer for each partition.
async fn ask(
    b: &Txns,
    id: &str,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &BTreeSet<TopicPartition>,
    op: Operation,
) -> Vec<(TopicPartition, i16)> {
    let all = |code: i16| partitions.iter().map(|tp| (tp.clone(), code)).collect();
    let coordinator = match coordinator_of(b, id) {
        Ok(c) => c,
        Err(code) => return all(code),
    };
    if coordinator == b.node_id() {
        return if op == Operation::AddPartition {
            all(b
                .txns
                .add_partitions(id, producer_id, producer_epoch, partitions, 2)
                .await)
        } else {
            b.txns.verify(id, producer_id, producer_epoch, partitions)
        };
    }
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in partitions {
        topics.entry(t).or_default().push(*p);
    }
    let mut txn = AddPartitionsToTxnTransaction::default();
    txn.transactional_id = TransactionalId(StrBytes::from_string(id.to_string()));
    txn.producer_id = ProducerId(producer_id);
    txn.producer_epoch = producer_epoch;
    txn.verify_only = op != Operation::AddPartition;
    txn.topics = topics
        .into_iter()
        .map(|(t, ps)| {
            let mut at = AddPartitionsToTxnTopic::default();
            at.name = TopicName(StrBytes::from_string(t.to_string()));
            at.partitions = ps;
            at
        })
        .collect();
    let mut req = AddPartitionsToTxnRequest::default();
    req.transactions = vec![txn];
    let resp: AddPartitionsToTxnResponse = match b
        .peers
        .call(
            (coordinator, Purpose::Verify),
            (ApiKey::AddPartitionsToTxn, VERSION),
            &req,
            crate::txn::REQUEST_TIMEOUT,
        )
        .await
    {
        Ok(r) => r,
        Err(e) => {
            debug!(broker = coordinator, "AddPartitionsToTxn failed: {e:#}");
            return all(E::NetworkException.code());
        }
    };
    if resp.error_code != NONE {
        return all(resp.error_code);
    }
    let mut codes = BTreeMap::new();
    for r in resp
        .results_by_transaction
        .iter()
        .filter(|r| r.transactional_id.0.as_str() == id)
    {
        for t in &r.topic_results {
            for p in &t.results_by_partition {
                codes.insert(
                    (t.name.0.to_string(), p.partition_index),
                    p.partition_error_code,
                );
            }
        }
    }
    partitions
        .iter()
        .map(|tp| {
            (
                tp.clone(),
                *codes.get(tp).unwrap_or(&E::UnknownServerError.code()),
            )
        })
        .collect()
}

/// The broker coordinating `id`: the live leader of its `__transaction_state` partition.
pub fn coordinator_of(b: &Txns, id: &str) -> Result<i32, i16> {
    let img = b.node().image();
    let t = img
        .topic(crate::txn::store::TOPIC)
        .ok_or(COORDINATOR_NOT_AVAILABLE)?;
    let n = t.partitions.len() as i32;
    if n == 0 {
        return Err(COORDINATOR_NOT_AVAILABLE);
    }
    let leader = t.partitions[crate::txn::records::partition_for(id, n) as usize].leader;
    if leader >= 0 && img.brokers.get(&leader).is_some_and(|s| !s.fenced) {
        Ok(leader)
    } else {
        Err(COORDINATOR_NOT_AVAILABLE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_map_to_operations_as_kafka() {
        assert_eq!(Operation::for_produce(10), Operation::DefaultError);
        assert_eq!(Operation::for_produce(11), Operation::GenericError);
        assert_eq!(Operation::for_produce(12), Operation::AddPartition);
        assert_eq!(Operation::for_txn_offset_commit(3), Operation::DefaultError);
        assert_eq!(Operation::for_txn_offset_commit(4), Operation::GenericError);
        assert_eq!(Operation::for_txn_offset_commit(5), Operation::AddPartition);
    }

    #[test]
    fn errors_map_as_kafka() {
        use Operation::*;
        assert_eq!(
            manager_error(PRODUCER_FENCED, AddPartition),
            INVALID_PRODUCER_EPOCH
        );
        assert_eq!(
            manager_error(TRANSACTION_ABORTABLE, DefaultError),
            INVALID_TXN_STATE
        );
        assert_eq!(
            manager_error(TRANSACTION_ABORTABLE, GenericError),
            TRANSACTION_ABORTABLE
        );
        let nes = E::NotEnoughReplicas.code();
        for c in [
            NOT_COORDINATOR,
            COORDINATOR_NOT_AVAILABLE,
            COORDINATOR_LOAD_IN_PROGRESS,
        ] {
            assert_eq!(produce_error(c, AddPartition), nes);
        }
        assert_eq!(produce_error(E::NetworkException.code(), DefaultError), nes);
        assert_eq!(produce_error(CONCURRENT_TRANSACTIONS, DefaultError), nes);
        assert_eq!(
            produce_error(CONCURRENT_TRANSACTIONS, AddPartition),
            CONCURRENT_TRANSACTIONS
        );
        assert_eq!(
            produce_error(INVALID_TXN_STATE, DefaultError),
            INVALID_TXN_STATE
        );
    }
}
