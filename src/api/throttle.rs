//! The request quota (`request_percentage`): the time the broker spends handling a client's
//! requests, as a percentage of one thread (200: two threads' worth per second), measured and
//! enforced around every handler as Kafka's ClientRequestQuotaManager does.
//!
//! - The time counted is the time in the handler's `poll` calls (the broker's threads at work
//!   for the request), not the time it waits (a long-polling Fetch costs its reads only).
//! - A client over its quota still gets its answer, with `throttle_time_ms` raised to the
//!   throttle time where the response has that field first in its body (most APIs, found by
//!   encoding each served version once), and the connection reads no further request for that
//!   long (Kafka mutes the channel). Produce and Fetch, whose field comes later, are muted and
//!   carry their byte-rate throttle time.
//! - Followers' fetches and inter-broker requests are exempt (the handler marks the response).

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::Encodable;

use super::Base;
use super::{APIS, HandlerFuture, RequestCtx};
use crate::net::response::{Chunk, Response};
use crate::quota::QuotaKind;

/// A handler's future that adds up the time spent in its polls.
pub struct Timed {
    inner: HandlerFuture,
    spent: Duration,
}

impl Timed {
    pub fn new(inner: HandlerFuture) -> Timed {
        Timed {
            inner,
            spent: Duration::ZERO,
        }
    }
}

impl Future for Timed {
    type Output = (<HandlerFuture as Future>::Output, Duration);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let start = Instant::now();
        let r = self.inner.as_mut().poll(cx);
        self.spent += start.elapsed();
        r.map(|out| (out, self.spent))
    }
}

/// APIs only brokers send each other: never under a client's request quota.
fn inter_broker(key: ApiKey) -> bool {
    matches!(
        key,
        ApiKey::WriteTxnMarkers
            | ApiKey::InitializeShareGroupState
            | ApiKey::ReadShareGroupState
            | ApiKey::WriteShareGroupState
            | ApiKey::DeleteShareGroupState
            | ApiKey::ReadShareGroupStateSummary
    )
}

/// Records `spent` against the client's request quota and throttles `resp` when the client
/// is over it.
pub fn apply(b: &Base, ctx: &RequestCtx, spent: Duration, resp: &mut Response) {
    if resp.quota_exempt || inter_broker(ctx.api_key) {
        return;
    }
    // Kafka's unit: percent of one thread, per second of the rate's windows.
    let percent = spent.as_nanos() as f64 * 100.0 / 1e9;
    let ms = b.quotas.record(
        QuotaKind::Request,
        &ctx.principal.name,
        ctx.client_id.as_deref().unwrap_or(""),
        percent,
    );
    if ms == 0 {
        return;
    }
    if throttle_first(ctx.api_key, ctx.version) {
        raise_throttle_field(ctx, resp, ms);
    }
    resp.mute = resp.mute.max(Duration::from_millis(ms));
}

/// Where the body starts in a response frame: after the size, the correlation id and (header
/// v1) the empty tagged fields [`super::write_header`] writes.
fn body_offset(ctx: &RequestCtx) -> usize {
    let header_version = ctx.api_key.response_header_version(ctx.version);
    8 + usize::from(header_version >= 1)
}

/// Sets the response's leading `throttle_time_ms` to `ms` unless it is larger already.
fn raise_throttle_field(ctx: &RequestCtx, resp: &mut Response, ms: u64) {
    let at = body_offset(ctx);
    let Some(Chunk::Bytes(first)) = resp.chunks.first_mut() else {
        return;
    };
    let Some(old) = first.get(at..at + 4) else {
        return;
    };
    let old = i32::from_be_bytes([old[0], old[1], old[2], old[3]]);
    let ms = ms.min(i32::MAX as u64) as i32;
    if old >= ms {
        return;
    }
    let mut patched = BytesMut::from(&first[..]);
    patched[at..at + 4].copy_from_slice(&ms.to_be_bytes());
    *first = patched.freeze();
}

/// Whether `throttle_time_ms` is the first field of `key`'s response body at `version`.
pub fn throttle_first(key: ApiKey, version: i16) -> bool {
    static FIRST: LazyLock<HashSet<(i16, i16)>> = LazyLock::new(|| {
        let mut set = HashSet::new();
        for spec in APIS {
            for v in spec.min..=spec.max {
                if probe(spec.key, v) {
                    set.insert((spec.key as i16, v));
                }
            }
        }
        set
    });
    FIRST.contains(&(key as i16, version))
}

const MARK: i32 = 0x1A2B_3C4D;

/// Whether a response of `T` with only its throttle time set to [`MARK`] starts with it.
fn leads<T: Encodable>(r: &T, version: i16) -> bool {
    let mut buf = BytesMut::new();
    let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        r.encode(&mut buf, version).is_ok()
    }));
    matches!(ok, Ok(true)) && buf.len() >= 4 && buf[..4] == MARK.to_be_bytes()
}

macro_rules! probes {
    ($($key:ident => $ty:ident),* $(,)?) => {
        fn probe(key: ApiKey, version: i16) -> bool {
            use kafka_protocol::messages::*;
            match key {
                $(ApiKey::$key => {
                    let mut r = $ty::default();
                    r.throttle_time_ms = MARK;
                    leads(&r, version)
                })*
                _ => false,
            }
        }
    };
}

probes!(
    AddOffsetsToTxn => AddOffsetsToTxnResponse,
    AddPartitionsToTxn => AddPartitionsToTxnResponse,
    AddRaftVoter => AddRaftVoterResponse,
    AlterClientQuotas => AlterClientQuotasResponse,
    AlterConfigs => AlterConfigsResponse,
    AlterPartitionReassignments => AlterPartitionReassignmentsResponse,
    AlterReplicaLogDirs => AlterReplicaLogDirsResponse,
    AlterShareGroupOffsets => AlterShareGroupOffsetsResponse,
    AlterUserScramCredentials => AlterUserScramCredentialsResponse,
    ApiVersions => ApiVersionsResponse,
    ConsumerGroupDescribe => ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeat => ConsumerGroupHeartbeatResponse,
    CreateAcls => CreateAclsResponse,
    CreatePartitions => CreatePartitionsResponse,
    CreateTopics => CreateTopicsResponse,
    DeleteAcls => DeleteAclsResponse,
    DeleteGroups => DeleteGroupsResponse,
    DeleteRecords => DeleteRecordsResponse,
    DeleteShareGroupOffsets => DeleteShareGroupOffsetsResponse,
    DeleteTopics => DeleteTopicsResponse,
    DescribeAcls => DescribeAclsResponse,
    DescribeClientQuotas => DescribeClientQuotasResponse,
    DescribeCluster => DescribeClusterResponse,
    DescribeConfigs => DescribeConfigsResponse,
    DescribeGroups => DescribeGroupsResponse,
    DescribeLogDirs => DescribeLogDirsResponse,
    DescribeProducers => DescribeProducersResponse,
    DescribeShareGroupOffsets => DescribeShareGroupOffsetsResponse,
    DescribeTopicPartitions => DescribeTopicPartitionsResponse,
    DescribeTransactions => DescribeTransactionsResponse,
    DescribeUserScramCredentials => DescribeUserScramCredentialsResponse,
    ElectLeaders => ElectLeadersResponse,
    EndTxn => EndTxnResponse,
    FindCoordinator => FindCoordinatorResponse,
    Heartbeat => HeartbeatResponse,
    IncrementalAlterConfigs => IncrementalAlterConfigsResponse,
    InitProducerId => InitProducerIdResponse,
    JoinGroup => JoinGroupResponse,
    LeaveGroup => LeaveGroupResponse,
    ListConfigResources => ListConfigResourcesResponse,
    ListGroups => ListGroupsResponse,
    ListOffsets => ListOffsetsResponse,
    ListPartitionReassignments => ListPartitionReassignmentsResponse,
    ListTransactions => ListTransactionsResponse,
    Metadata => MetadataResponse,
    OffsetCommit => OffsetCommitResponse,
    OffsetDelete => OffsetDeleteResponse,
    OffsetFetch => OffsetFetchResponse,
    OffsetForLeaderEpoch => OffsetForLeaderEpochResponse,
    RemoveRaftVoter => RemoveRaftVoterResponse,
    ShareAcknowledge => ShareAcknowledgeResponse,
    ShareFetch => ShareFetchResponse,
    ShareGroupDescribe => ShareGroupDescribeResponse,
    ShareGroupHeartbeat => ShareGroupHeartbeatResponse,
    SyncGroup => SyncGroupResponse,
    TxnOffsetCommit => TxnOffsetCommitResponse,
    UnregisterBroker => UnregisterBrokerResponse,
    UpdateFeatures => UpdateFeaturesResponse,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leading_throttle_field_is_found_per_version() {
        // Metadata has throttle_time_ms first from v3, Fetch from v1; Produce has it last.
        for v in 3..=12 {
            assert!(throttle_first(ApiKey::Metadata, v), "Metadata v{v}");
        }
        assert!(!throttle_first(ApiKey::Produce, 9));
        assert!(throttle_first(ApiKey::JoinGroup, 5));
        assert!(!throttle_first(ApiKey::JoinGroup, 0));
        // ApiVersions puts its error code first.
        assert!(!throttle_first(ApiKey::ApiVersions, 3));
    }

    #[test]
    fn a_raised_throttle_time_lands_after_the_header() {
        let ctx = RequestCtx::synthetic(ApiKey::Metadata, 12, 7);
        let r = kafka_protocol::messages::MetadataResponse::default();
        let mut resp = super::super::respond(&ctx, &r).unwrap().unwrap();
        raise_throttle_field(&ctx, &mut resp, 1234);
        let bytes = resp.to_vec().unwrap();
        let mut body = bytes::Bytes::copy_from_slice(&bytes[4..]);
        use kafka_protocol::protocol::Decodable;
        let h = kafka_protocol::messages::ResponseHeader::decode(&mut body, 1).unwrap();
        assert_eq!(h.correlation_id, 7);
        let m = kafka_protocol::messages::MetadataResponse::decode(&mut body, 12).unwrap();
        assert_eq!(m.throttle_time_ms, 1234);
        // a smaller throttle time leaves the larger one
        raise_throttle_field(&ctx, &mut resp, 5);
        let bytes = resp.to_vec().unwrap();
        assert_eq!(&bytes[9..13], &1234i32.to_be_bytes());
    }
}
