//! ShareFetch (key 78), version 1 (KIP-932; kafka-protocol 0.18 decodes v1 only, Kafka 4.4
//! serves 1-2, v2 adding the renew acknowledgement).
//!
//! Behaviour:
//! - a member id missing, empty or over 36 characters is INVALID_REQUEST ("Invalid member id
//!   in the request."), as Kafka's request handler answers; any other id opens a session;
//! - the share session epoch (`share::session`): 0 opens a session with the partitions named
//!   (acknowledgements are refused with INVALID_REQUEST), n > 0 carries it on (adds the named
//!   partitions, drops the forgotten ones; SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH),
//!   -1 closes it after its acknowledgements and releases what the member holds;
//! - piggy-backed acknowledgements are applied first, their outcome per partition in
//!   acknowledge_error_code (INVALID_RECORD_STATE for records the member does not hold);
//! - then every partition of the session is fetched: records acquired for the member (at most
//!   max_records in all, at most max_bytes read) come with the whole batches holding them and
//!   their AcquiredRecords ranges and delivery counts; nothing acquirable waits up to
//!   max_wait_ms for an append, a release or an expired lock;
//! - without READ on the group the request is GROUP_AUTHORIZATION_FAILED; a partition of a
//!   topic without READ is TOPIC_AUTHORIZATION_FAILED (its fetch and its acknowledgements);
//! - a full session's answer lists every partition, a carried-on one those with records,
//!   errors or acknowledgement outcomes.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ShareFetchRequest, ShareFetchResponse};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::Notify;
use uuid::Uuid;

use super::Groups;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;
use crate::share::AckBatch;
use crate::share::partition::AckError;
use crate::share::session::{Opened, TopicPartition};

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::ShareFetch,
    min: 1,
    max: 1,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

/// The most a share fetch reads, whatever it asks for.
const MAX_READ: usize = 64 << 20;

/// An acknowledgement outcome as a partition's error code and message.
pub fn ack_code(r: Result<(), AckError>) -> (i16, Option<StrBytes>) {
    match r {
        Ok(()) => (0, None),
        Err(AckError::InvalidRecordState) => (ResponseError::InvalidRecordState.code(), None),
        Err(AckError::InvalidRequest) => (ResponseError::InvalidRequest.code(), None),
    }
}

/// Whether the principal may not READ the topic with id `id` (an unknown id is not refused
/// here: it answers UNKNOWN_TOPIC_ID).
fn read_denied(b: &Groups, ctx: &RequestCtx, id: &Uuid) -> bool {
    b.controller
        .topic_by_id(id)
        .is_some_and(|t| !ctx.may_topic(b, super::authz::Op::Read, &t.name))
}

/// Acknowledgements of one partition: the member's records there, or the partition's error
/// (TOPIC_AUTHORIZATION_FAILED without READ on the topic).
pub fn acknowledge(
    b: &Groups,
    ctx: &RequestCtx,
    group: &str,
    member: &str,
    tp: TopicPartition,
    batches: Vec<AckBatch>,
) -> (i16, Option<StrBytes>) {
    let Some(t) = b.controller.topic_by_id(&tp.0) else {
        return (ResponseError::UnknownTopicId.code(), None);
    };
    if read_denied(b, ctx, &tp.0) {
        return (super::authz::topic_denied(), None);
    }
    if t.partition(tp.1).is_none_or(|p| !p.is_leader()) {
        return (ResponseError::NotLeaderOrFollower.code(), None);
    }
    ack_code(b.share.acknowledge(group, member, tp, &batches))
}

fn top_error(code: i16, message: &str) -> ShareFetchResponse {
    let mut resp = ShareFetchResponse::default();
    resp.error_code = code;
    if !message.is_empty() {
        resp.error_message = Some(StrBytes::from_string(message.to_string()));
    }
    resp
}

fn partition_data(b: &Groups, tp: TopicPartition) -> PartitionData {
    let mut pd = PartitionData::default();
    pd.partition_index = tp.1;
    let mut leader = LeaderIdAndEpoch::default();
    leader.leader_id = b.node_id();
    leader.leader_epoch = b
        .controller
        .topic_by_id(&tp.0)
        .and_then(|t| t.partition(tp.1).map(|p| p.leader_epoch()))
        .unwrap_or(-1);
    pd.current_leader = leader;
    pd.records = Some(Bytes::new());
    pd
}

/// Kafka's refusal of a share request whose member id is missing, empty or longer than 36
/// characters (checked before anything else, as Kafka's request handler does).
pub const INVALID_MEMBER_ID: &str = "Invalid member id in the request.";

/// The group and member a share request names: INVALID_REQUEST ("Invalid member id in the
/// request.") for a member id missing, empty or over 36 characters, GROUP_AUTHORIZATION_FAILED
/// without READ on the group, INVALID_GROUP_ID without a group.
pub fn session_ids(
    b: &Groups,
    ctx: &RequestCtx,
    group: Option<&kafka_protocol::messages::GroupId>,
    member: Option<&StrBytes>,
) -> Result<(String, String), (i16, &'static str)> {
    let group = group.map(|g| g.0.to_string()).unwrap_or_default();
    let member = member.map(|m| m.to_string()).unwrap_or_default();
    if member.is_empty() || member.chars().count() > 36 {
        return Err((ResponseError::InvalidRequest.code(), INVALID_MEMBER_ID));
    }
    if let Some(code) = ctx.group_error(b, super::authz::Op::Read, &group) {
        return Err((code, ""));
    }
    if group.is_empty() {
        return Err((ResponseError::InvalidGroupId.code(), ""));
    }
    Ok((group, member))
}

async fn answer(b: &Groups, ctx: &RequestCtx, req: ShareFetchRequest) -> ShareFetchResponse {
    let ids = session_ids(b, ctx, req.group_id.as_ref(), req.member_id.as_ref());
    let (group, member) = match ids {
        Ok(ids) => ids,
        Err((code, message)) => return top_error(code, message),
    };
    let epoch = req.share_session_epoch;
    let mut added: Vec<TopicPartition> = Vec::new();
    let mut acks: Vec<(TopicPartition, Vec<AckBatch>)> = Vec::new();
    for t in &req.topics {
        for p in &t.partitions {
            added.push((t.topic_id, p.partition_index));
            if !p.acknowledgement_batches.is_empty() {
                let batches = p
                    .acknowledgement_batches
                    .iter()
                    .map(|a| (a.first_offset, a.last_offset, a.acknowledge_types.clone()))
                    .collect();
                acks.push(((t.topic_id, p.partition_index), batches));
            }
        }
    }
    if epoch == 0 && !acks.is_empty() {
        return top_error(
            ResponseError::InvalidRequest.code(),
            "Acknowledge data present on initial share fetch request",
        );
    }
    let forgotten: Vec<TopicPartition> = req
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
        .collect();
    let opened = match b
        .share
        .open_session(&group, &member, epoch, &added, &forgotten)
    {
        Ok(o) => o,
        Err(code) => return top_error(code, ""),
    };
    let mut out: BTreeMap<Uuid, BTreeMap<i32, PartitionData>> = BTreeMap::new();
    for (tp, batches) in acks {
        let (code, message) = acknowledge(b, ctx, &group, &member, tp, batches);
        let pd = out
            .entry(tp.0)
            .or_default()
            .entry(tp.1)
            .or_insert_with(|| partition_data(b, tp));
        pd.acknowledge_error_code = code;
        pd.acknowledge_error_message = message;
    }
    // Piggy-backed acknowledgements are persisted before the answer.
    b.share.persist().await;
    let (partitions, full) = match opened {
        Opened::Closed => {
            b.share.close_session(&group, &member);
            (Vec::new(), false)
        }
        Opened::Full(ps) => (ps, true),
        Opened::Incremental(ps) => (ps, false),
    };
    if full {
        for &tp in &partitions {
            out.entry(tp.0)
                .or_default()
                .entry(tp.1)
                .or_insert_with(|| partition_data(b, tp));
        }
    }
    fetch(b, ctx, &group, &member, &req, &partitions, &mut out).await;
    let mut resp = ShareFetchResponse::default();
    resp.acquisition_lock_timeout_ms = b.share.config().record_lock_duration_ms(&group) as i32;
    for (topic_id, parts) in out {
        let mut t = ShareFetchableTopicResponse::default();
        t.topic_id = topic_id;
        t.partitions = parts.into_values().collect();
        resp.responses.push(t);
    }
    resp
}

/// Acquires records of `partitions` for the member, waiting up to max_wait_ms for some.
async fn fetch(
    b: &Groups,
    ctx: &RequestCtx,
    group: &str,
    member: &str,
    req: &ShareFetchRequest,
    partitions: &[TopicPartition],
    out: &mut BTreeMap<Uuid, BTreeMap<i32, PartitionData>>,
) {
    if partitions.is_empty() {
        return;
    }
    let max_wait = std::time::Duration::from_millis(req.max_wait_ms.clamp(0, 60_000) as u64);
    let deadline = tokio::time::Instant::now() + max_wait;
    let max_bytes = (req.max_bytes.max(1) as usize).min(MAX_READ);
    let max_records = if req.max_records > 0 {
        req.max_records as i64
    } else {
        500
    };
    loop {
        let waiter = Arc::new(Notify::new());
        b.share.add_waiter(&waiter);
        let mut got_any = false;
        let mut next_lock: Option<i64> = None;
        let mut bytes_left = max_bytes;
        let mut records_left = max_records;
        for &tp in partitions {
            let part = b
                .controller
                .topic_by_id(&tp.0)
                .map(|t| t.partition(tp.1).cloned());
            let error = match &part {
                None => Some(ResponseError::UnknownTopicId.code()),
                Some(None) => Some(ResponseError::UnknownTopicOrPartition.code()),
                Some(Some(_)) if read_denied(b, ctx, &tp.0) => Some(super::authz::topic_denied()),
                Some(Some(p)) if !p.is_leader() => Some(ResponseError::NotLeaderOrFollower.code()),
                _ => None,
            };
            if let Some(code) = error {
                let pd = out
                    .entry(tp.0)
                    .or_default()
                    .entry(tp.1)
                    .or_insert_with(|| partition_data(b, tp));
                pd.error_code = code;
                got_any = true;
                continue;
            }
            let Some(Some(p)) = part else { continue };
            p.add_waiter(&waiter);
            if records_left <= 0 || bytes_left == 0 {
                continue;
            }
            let read = crate::share::fetch::acquire(
                &b.share,
                group,
                member,
                tp,
                &p,
                bytes_left,
                records_left,
            );
            let (got, lock) = match read {
                Ok(r) => r,
                Err(_) => {
                    let pd = out
                        .entry(tp.0)
                        .or_default()
                        .entry(tp.1)
                        .or_insert_with(|| partition_data(b, tp));
                    pd.error_code = ResponseError::KafkaStorageError.code();
                    continue;
                }
            };
            next_lock = match (next_lock, lock) {
                (Some(a), Some(l)) => Some(a.min(l)),
                (a, l) => a.or(l),
            };
            if got.acquired.is_empty() {
                continue;
            }
            got_any = true;
            bytes_left = bytes_left.saturating_sub(got.records.len());
            records_left -= got
                .acquired
                .iter()
                .map(|a| a.last_offset - a.first_offset + 1)
                .sum::<i64>();
            let pd = out
                .entry(tp.0)
                .or_default()
                .entry(tp.1)
                .or_insert_with(|| partition_data(b, tp));
            pd.records = Some(got.records);
            pd.acquired_records = got
                .acquired
                .iter()
                .map(|a| {
                    let mut r = AcquiredRecords::default();
                    r.first_offset = a.first_offset;
                    r.last_offset = a.last_offset;
                    r.delivery_count = a.delivery_count;
                    r
                })
                .collect();
        }
        if got_any || tokio::time::Instant::now() >= deadline {
            return;
        }
        let mut until = deadline;
        if let Some(l) = next_lock {
            let wait = (l - crate::clock::now_ms()).max(1) as u64;
            until = until.min(tokio::time::Instant::now() + std::time::Duration::from_millis(wait));
        }
        let _ = tokio::time::timeout_at(until, waiter.notified()).await;
    }
}

async fn handle(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: ShareFetchRequest = super::decode(&ctx, body)?;
    let resp = answer(&b, &ctx, req).await;
    super::respond(&ctx, &resp)
}
