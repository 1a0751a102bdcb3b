//! WriteTxnMarkers (key 27), version 1 (Kafka 4.4 serves 1-2; kafka-protocol 0.18 has 1).
//!
//! Sent by a transaction coordinator to a partition's leader: for each marker, a COMMIT or
//! ABORT control batch is appended to each listed partition as its leader with acks=all,
//! answered once the in-sync replicas have it (or REQUEST_TIMED_OUT after Kafka's request
//! timeout). Per partition: UNKNOWN_TOPIC_OR_PARTITION for an unknown one,
//! NOT_LEADER_OR_FOLLOWER where this broker does not lead, INVALID_PRODUCER_EPOCH for a
//! marker older than the producer's epoch, TRANSACTION_COORDINATOR_FENCED for an older
//! coordinator epoch, NOT_ENOUGH_REPLICAS while the ISR is below min.insync.replicas.
//! Without CLUSTER_ACTION (or ALTER) on the cluster every partition is
//! CLUSTER_AUTHORIZATION_FAILED and nothing is written.
//!
//! Version notes: v1 flexible (v0 is no longer served by Kafka 4); v2 (not served) adds the
//! transaction version: v1 markers follow the rules of versions 0-1 (a marker's epoch may
//! equal the producer's).

use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::join_all;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{ApiKey, WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use super::Txns;
use super::authz::Op;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;
use crate::producer::TxnMarker;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::WriteTxnMarkers,
    min: 1,
    max: 1,
    handle: super::Handler::Txns(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Txns>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: WriteTxnMarkersRequest = super::decode(&ctx, body)?;
    let mut resp = WriteTxnMarkersResponse::default();
    // ALTER on the cluster is accepted in place of CLUSTER_ACTION, as Kafka does.
    let refused = (!ctx.authorize_cluster(&b, Op::Alter))
        .then(|| ctx.cluster_error(&b, Op::ClusterAction))
        .flatten();
    for m in req.markers {
        let marker = TxnMarker {
            producer_id: m.producer_id.0,
            producer_epoch: m.producer_epoch,
            coordinator_epoch: m.coordinator_epoch,
            commit: m.transaction_result,
            transaction_version: 0,
        };
        let mut r = WritableTxnMarkerResult::default();
        r.producer_id = m.producer_id;
        for t in m.topics {
            let writes = t.partition_indexes.iter().map(|&p| {
                let (b, marker, topic) = (&b, &marker, t.name.0.as_str());
                async move {
                    let mut pr = WritableTxnMarkerPartitionResult::default();
                    pr.partition_index = p;
                    pr.error_code = match refused {
                        Some(code) => code,
                        None => {
                            let timeout = crate::txn::REQUEST_TIMEOUT;
                            b.markers.write_local(marker, topic, p, timeout).await
                        }
                    };
                    pr
                }
            });
            let mut tr = WritableTxnMarkerTopicResult::default();
            tr.partitions = join_all(writes).await;
            tr.name = t.name;
            r.topics.push(tr);
        }
        resp.markers.push(r);
    }
    super::respond(&ctx, &resp)
}
