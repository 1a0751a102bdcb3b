//! The transaction coordinator's marker writer over this broker: each partition's COMMIT or
//! ABORT marker goes to that partition's leader, through `Partition::append_marker_with_acks`
//! when this broker leads it ([`BrokerMarkers::write_local`], also what WriteTxnMarkers does)
//! and as a
//! WriteTxnMarkers request to the leader otherwise, as Kafka's
//! TransactionMarkerChannelManager does. The coordinator judges the answers
//! (`txn::markers::classify`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ApiKey, ProducerId, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::StrBytes;
use tracing::debug;

use crate::cluster::Controller;
use crate::cluster::node::NodeCell;
use crate::cluster::partition::AckOutcome;
use crate::group::Coordinator as GroupCoordinator;
use crate::producer::TxnMarker;
use crate::txn::markers::{
    MarkerFuture, MarkerRequest, MarkerWriter, WRITE_TXN_MARKERS_VERSION, Written,
};
use crate::txn::peers::{Peers, Purpose};
use crate::txn::state::TopicPartition;

/// The broker's marker writer: what it needs of the broker, wired by `Broker::open_gated`.
pub struct BrokerMarkers {
    pub node_id: i32,
    /// The partitions this broker holds (markers to those it leads are written here).
    pub replicas: Arc<Controller>,
    /// The metadata image: who leads each partition.
    pub node: NodeCell,
    /// Settles the group offsets a transaction committed in `__consumer_offsets`.
    pub groups: Arc<GroupCoordinator>,
    /// WriteTxnMarkers to the other leaders.
    pub peers: Arc<Peers>,
}

/// Where a partition's marker goes.
enum Leader {
    Local,
    Remote(i32),
    /// Known partition, no live leader right now.
    Unknown,
    Gone,
}

fn leader_of(node: &NodeCell, me: i32, topic: &str, partition: i32) -> Leader {
    let Some(node) = node.get() else {
        return Leader::Unknown;
    };
    let img = node.image();
    let Some(t) = img.topic(topic) else {
        return Leader::Gone;
    };
    let Some(p) = usize::try_from(partition)
        .ok()
        .and_then(|i| t.partitions.get(i))
    else {
        return Leader::Gone;
    };
    if p.leader == me {
        Leader::Local
    } else if p.leader >= 0 && img.brokers.get(&p.leader).is_some_and(|s| !s.fenced) {
        Leader::Remote(p.leader)
    } else {
        Leader::Unknown
    }
}

impl MarkerWriter for BrokerMarkers {
    fn write<'a>(&'a self, m: &'a MarkerRequest) -> MarkerFuture<'a> {
        Box::pin(async move {
            let timeout = crate::txn::REQUEST_TIMEOUT;
            let mut out = Vec::new();
            let mut remote: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
            for tp in &m.partitions {
                match leader_of(&self.node, self.node_id, &tp.0, tp.1) {
                    Leader::Local => {
                        let code = self.write_local(&m.marker(), &tp.0, tp.1, timeout).await;
                        out.push((tp.clone(), Written::Code(code)));
                    }
                    Leader::Remote(id) => remote.entry(id).or_default().push(tp.clone()),
                    Leader::Unknown => {
                        out.push((tp.clone(), Written::Code(E::NotLeaderOrFollower.code())))
                    }
                    Leader::Gone => out.push((tp.clone(), Written::Gone)),
                }
            }
            for (id, tps) in remote {
                let codes = send(&self.peers, id, m, &tps, timeout).await;
                out.extend(
                    tps.into_iter()
                        .zip(codes)
                        .map(|(tp, c)| (tp, Written::Code(c))),
                );
            }
            out
        })
    }
}

/// WriteTxnMarkers to broker `id` for `tps`: each partition's error code (all
/// NETWORK_EXCEPTION, a retriable one, when the broker cannot be reached).
async fn send(
    peers: &Peers,
    id: i32,
    m: &MarkerRequest,
    tps: &[TopicPartition],
    timeout: Duration,
) -> Vec<i16> {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in tps {
        topics.entry(t).or_default().push(*p);
    }
    let mut marker = WritableTxnMarker::default();
    marker.producer_id = ProducerId(m.producer_id);
    marker.producer_epoch = m.producer_epoch;
    marker.transaction_result = m.commit;
    marker.coordinator_epoch = m.coordinator_epoch;
    marker.topics = topics
        .into_iter()
        .map(|(t, ps)| {
            let mut wt = WritableTxnMarkerTopic::default();
            wt.name = TopicName(StrBytes::from_string(t.to_string()));
            wt.partition_indexes = ps;
            wt
        })
        .collect();
    let mut req = WriteTxnMarkersRequest::default();
    req.markers = vec![marker];
    let call = peers.call::<_, WriteTxnMarkersResponse>(
        (id, Purpose::Markers),
        (ApiKey::WriteTxnMarkers, WRITE_TXN_MARKERS_VERSION),
        &req,
        timeout + Duration::from_secs(5),
    );
    match call.await {
        Ok(resp) => {
            let mut codes: HashMap<(String, i32), i16> = HashMap::new();
            for r in resp
                .markers
                .iter()
                .filter(|r| r.producer_id.0 == m.producer_id)
            {
                for t in &r.topics {
                    for p in &t.partitions {
                        codes.insert((t.name.0.to_string(), p.partition_index), p.error_code);
                    }
                }
            }
            tps.iter()
                .map(|tp| *codes.get(tp).unwrap_or(&E::UnknownServerError.code()))
                .collect()
        }
        Err(e) => {
            debug!(broker = id, "WriteTxnMarkers failed: {e:#}");
            vec![E::NetworkException.code(); tps.len()]
        }
    }
}

impl BrokerMarkers {
    /// Writes `marker` to this broker's replica of `topic`-`partition` as its leader, with
    /// acks=all (waiting up to `timeout` for the in-sync replicas): the error code to answer
    /// with (0: written). A marker in `__consumer_offsets` then settles the group offsets the
    /// transaction committed (`group::Coordinator::complete_txn`). Used for this broker's own
    /// transactions and for WriteTxnMarkers.
    pub async fn write_local(
        &self,
        marker: &TxnMarker,
        topic: &str,
        partition: i32,
        timeout: Duration,
    ) -> i16 {
        let Some(t) = self.replicas.topic(topic) else {
            return E::UnknownTopicOrPartition.code();
        };
        let p = match super::local_partition(&t, partition) {
            Ok(p) => p.clone(),
            Err(code) => return code,
        };
        let appended = match p.append_marker_with_acks(marker, None, -1) {
            Ok(a) => a,
            Err(e) => return crate::cluster::errors::partition_error_code(&e),
        };
        let required = appended.info.last_offset + 1;
        let code = match p
            .wait_for_ack(required, appended.leader_epoch, timeout)
            .await
        {
            AckOutcome::Acked => 0,
            AckOutcome::NotLeader => E::NotLeaderOrFollower.code(),
            AckOutcome::NotEnoughReplicasAfterAppend => E::NotEnoughReplicasAfterAppend.code(),
            AckOutcome::TimedOut => E::RequestTimedOut.code(),
        };
        if code != 0 || topic != crate::group::store::TOPIC {
            return code;
        }
        // The group coordinator settles the offsets the transaction committed there. If it does
        // not serve the partition (yet), the marker is retried, as Kafka's coordinator answers.
        match self
            .groups
            .complete_txn(partition, marker.producer_id, marker.commit)
            .await
        {
            Ok(()) => 0,
            Err(_) => E::NotLeaderOrFollower.code(),
        }
    }
}
