//! Injected faults (`crate::faults`) applied where each request enters the handlers: which
//! topics and partitions a request names (for faults limited to one), and the response a
//! request gets when a fault answers it with an error code.
//!
//! An error response has the request's shape, as Kafka's `AbstractRequest.getErrorResponse`
//! builds it: the code in every partition (Produce, Fetch, ListOffsets, OffsetCommit,
//! TxnOffsetCommit, OffsetForLeaderEpoch, AddPartitionsToTxn before v4, DeleteRecords), in
//! every topic (Metadata, CreateTopics, DeleteTopics, CreatePartitions), in every group
//! (DescribeGroups, DeleteGroups, OffsetFetch v8+), in every key (FindCoordinator v4+), or at
//! the top (the group, producer and transaction calls). Fetch carries a session-level error
//! (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR,
//! UNKNOWN_SERVER_ERROR) at the top, and any other error in each partition it names, where a
//! client acts on it (an OFFSET_OUT_OF_RANGE resets that partition's position).

use anyhow::{Result, anyhow};
use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::RequestCtx;
use crate::faults::{Action, When};
use crate::net::response::Response;

/// The API keys an `error` fault can answer.
pub const ERROR_KEYS: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::SyncGroup,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::DeleteRecords,
    ApiKey::InitProducerId,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::AddPartitionsToTxn,
    ApiKey::AddOffsetsToTxn,
    ApiKey::EndTxn,
    ApiKey::TxnOffsetCommit,
    ApiKey::CreatePartitions,
    ApiKey::DeleteGroups,
    ApiKey::ConsumerGroupHeartbeat,
];

/// The API keys whose requests name topics (a fault may be limited to one).
pub const TOPIC_KEYS: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::DeleteRecords,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::AddPartitionsToTxn,
    ApiKey::TxnOffsetCommit,
    ApiKey::CreatePartitions,
];

/// Why this broker cannot apply `spec`, if it cannot: an error for a key it builds no error
/// response for, a topic filter on a key whose requests name no topic, or a key it does not
/// serve.
pub fn unsupported(spec: &crate::faults::Spec) -> Option<String> {
    let key = ApiKey::try_from(spec.api_key).ok()?;
    if super::lookup(spec.api_key).is_none() {
        return Some(format!("{key:?} is not served by this broker"));
    }
    let names = |keys: &[ApiKey]| {
        keys.iter()
            .map(|k| format!("{k:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if matches!(spec.action, Action::Error(_)) && !ERROR_KEYS.contains(&key) {
        return Some(format!(
            "an error fault cannot answer {key:?} (it can answer {})",
            names(ERROR_KEYS)
        ));
    }
    if spec.filter.topic.is_some() && !TOPIC_KEYS.contains(&key) {
        return Some(format!(
            "{key:?} requests name no topic (topic filters apply to {})",
            names(TOPIC_KEYS)
        ));
    }
    None
}

/// Runs a request through the faults it fires: `handle` applies it and builds its
/// response. A delay holds the response back; an error answers without applying; a close
/// ends the connection before or after applying (an error return closes the connection).
pub async fn apply<F>(
    faults: &crate::faults::Registry,
    b: &Base,
    ctx: RequestCtx,
    body: Bytes,
    handle: F,
) -> Result<Option<Response>>
where
    F: AsyncFnOnce(RequestCtx, Bytes) -> Result<Option<Response>>,
{
    let mut decoded: Option<Option<RequestKind>> = None;
    let mut decode = |ctx: &RequestCtx, body: &Bytes| -> Option<RequestKind> {
        decoded
            .get_or_insert_with(|| super::decode_any(ctx, body.clone()).ok())
            .clone()
    };
    let fired = faults.fire(
        ctx.api_key as i16,
        ctx.client_id.as_deref(),
        &mut |topic, partition| {
            decode(&ctx, &body).is_some_and(|req| {
                topics_of(b, &req)
                    .iter()
                    .any(|(t, ps)| t == topic && partition.is_none_or(|p| ps.contains(&p)))
            })
        },
    );
    let delay = fired.delay;
    if fired.delay.is_some() || fired.outcome.is_some() {
        tracing::info!(
            api = ?ctx.api_key,
            client_id = ctx.client_id.as_deref().unwrap_or("-"),
            "injected fault: {:?} (delay {:?})",
            fired.outcome,
            delay,
        );
    }
    let out = match fired.outcome {
        None => handle(ctx, body).await,
        Some(Action::Error(code)) => {
            let req = decode(&ctx, &body)
                .ok_or_else(|| anyhow!("malformed {:?} request", ctx.api_key))?;
            error_response(&ctx, &req, code)
        }
        Some(Action::Close(When::BeforeApply)) => Err(anyhow!(
            "injected fault: closed before the request was applied"
        )),
        Some(Action::Close(When::AfterApply)) => {
            handle(ctx, body).await?;
            Err(anyhow!(
                "injected fault: closed after the request was applied"
            ))
        }
        // Delays and node faults are never outcomes of a request.
        Some(Action::Delay(_) | Action::MoveLeader(_) | Action::Isolate) => handle(ctx, body).await,
    };
    if let Some(d) = delay {
        tokio::time::sleep(d).await;
    }
    out
}

/// Whether a request comes from another broker of the cluster: a follower's Fetch (a
/// replica id) or a transaction coordinator's WriteTxnMarkers. While the node is isolated
/// (`Gate::isolated`) these close their connection, as if the node could not be reached.
pub fn from_peer(ctx: &RequestCtx, body: &Bytes) -> bool {
    match ctx.api_key {
        ApiKey::WriteTxnMarkers => true,
        ApiKey::Fetch => match super::decode_any(ctx, body.clone()) {
            Ok(RequestKind::Fetch(r)) if ctx.version >= 15 => r.replica_state.replica_id.0 >= 0,
            Ok(RequestKind::Fetch(r)) => r.replica_id.0 >= 0,
            _ => false,
        },
        _ => false,
    }
}

fn name_by_id(b: &Base, id: &uuid::Uuid) -> String {
    b.controller
        .topic_by_id(id)
        .map(|t| t.name.to_string())
        .unwrap_or_default()
}

/// The topics a request names, each with the partitions it names (empty: the whole topic).
pub fn topics_of(b: &Base, req: &RequestKind) -> Vec<(String, Vec<i32>)> {
    let named = |name: &TopicName, id: &uuid::Uuid| -> String {
        if name.is_empty() {
            name_by_id(b, id)
        } else {
            name.to_string()
        }
    };
    match req {
        RequestKind::Produce(r) => r
            .topic_data
            .iter()
            .map(|t| {
                let ps = t.partition_data.iter().map(|p| p.index).collect();
                (named(&t.name, &t.topic_id), ps)
            })
            .collect(),
        RequestKind::Fetch(r) => r
            .topics
            .iter()
            .map(|t| {
                let ps = t.partitions.iter().map(|p| p.partition).collect();
                (named(&t.topic, &t.topic_id), ps)
            })
            .collect(),
        RequestKind::ListOffsets(r) => r
            .topics
            .iter()
            .map(|t| {
                let ps = t.partitions.iter().map(|p| p.partition_index).collect();
                (t.name.to_string(), ps)
            })
            .collect(),
        RequestKind::Metadata(r) => r
            .topics
            .iter()
            .flatten()
            .map(|t| {
                let name = match &t.name {
                    Some(n) => n.to_string(),
                    None => name_by_id(b, &t.topic_id),
                };
                (name, vec![])
            })
            .collect(),
        RequestKind::OffsetCommit(r) => r
            .topics
            .iter()
            .map(|t| {
                let ps = t.partitions.iter().map(|p| p.partition_index).collect();
                (named(&t.name, &t.topic_id), ps)
            })
            .collect(),
        RequestKind::OffsetFetch(r) => {
            let mut out: Vec<(String, Vec<i32>)> = r
                .topics
                .iter()
                .flatten()
                .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
                .collect();
            for g in &r.groups {
                for t in g.topics.iter().flatten() {
                    out.push((named(&t.name, &t.topic_id), t.partition_indexes.clone()));
                }
            }
            out
        }
        RequestKind::CreateTopics(r) => r
            .topics
            .iter()
            .map(|t| (t.name.to_string(), vec![]))
            .collect(),
        RequestKind::DeleteTopics(r) => {
            let mut out: Vec<_> = r
                .topic_names
                .iter()
                .map(|t| (t.to_string(), vec![]))
                .collect();
            for t in &r.topics {
                let name = match &t.name {
                    Some(n) => n.to_string(),
                    None => name_by_id(b, &t.topic_id),
                };
                out.push((name, vec![]));
            }
            out
        }
        RequestKind::DeleteRecords(r) => r
            .topics
            .iter()
            .map(|t| {
                let ps = t.partitions.iter().map(|p| p.partition_index).collect();
                (t.name.to_string(), ps)
            })
            .collect(),
        RequestKind::OffsetForLeaderEpoch(r) => r
            .topics
            .iter()
            .map(|t| {
                let ps = t.partitions.iter().map(|p| p.partition).collect();
                (t.topic.to_string(), ps)
            })
            .collect(),
        RequestKind::AddPartitionsToTxn(r) => r
            .v3_and_below_topics
            .iter()
            .chain(r.transactions.iter().flat_map(|x| &x.topics))
            .map(|t| (t.name.to_string(), t.partitions.clone()))
            .collect(),
        RequestKind::TxnOffsetCommit(r) => r
            .topics
            .iter()
            .map(|t| {
                let ps = t.partitions.iter().map(|p| p.partition_index).collect();
                (t.name.to_string(), ps)
            })
            .collect(),
        RequestKind::CreatePartitions(r) => r
            .topics
            .iter()
            .map(|t| (t.name.to_string(), vec![]))
            .collect(),
        _ => vec![],
    }
}

/// Fetch errors that concern the whole request (the session), not a partition.
const FETCH_TOP_LEVEL: &[i16] = &[
    E::FetchSessionIdNotFound.code(),
    E::InvalidFetchSessionEpoch.code(),
    E::FetchSessionTopicIdError.code(),
    E::UnknownServerError.code(),
];

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// The response `req` gets when answered with `code`, nothing applied.
pub fn error_response(ctx: &RequestCtx, req: &RequestKind, code: i16) -> Result<Option<Response>> {
    let v = ctx.version;
    match req {
        RequestKind::Produce(r) => {
            if r.acks == 0 {
                return Ok(None);
            }
            super::respond(ctx, &super::produce::refused(r, v, code))
        }
        RequestKind::Fetch(r) => {
            let top = FETCH_TOP_LEVEL.contains(&code);
            let topics: Vec<super::fetch::TopicOut> = if top && v >= 13 {
                vec![]
            } else {
                r.topics
                    .iter()
                    .map(|t| super::fetch::TopicOut {
                        name: t.topic.to_string(),
                        id: t.topic_id,
                        partitions: t
                            .partitions
                            .iter()
                            .map(|p| super::fetch::PartitionOut::empty(p.partition, code))
                            .collect(),
                    })
                    .collect()
            };
            // The request's session id is echoed, as Kafka's error response does; the
            // session itself did not see this fetch, so its epoch is where it was.
            let top_code = if top { code } else { 0 };
            Ok(Some(super::fetch::encode_response(
                ctx,
                top_code,
                r.session_id,
                &topics,
                &[],
            )?))
        }
        RequestKind::ListOffsets(r) => {
            use list_offsets_response::*;
            let resp = ListOffsetsResponse::default().with_topics(nested(
                &r.topics,
                |t| &t.partitions,
                |t, ps| {
                    ListOffsetsTopicResponse::default()
                        .with_name(t.name.clone())
                        .with_partitions(ps)
                },
                |p| {
                    ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                        .with_timestamp(-1)
                        .with_offset(-1)
                        .with_leader_epoch(-1)
                },
            ));
            super::respond(ctx, &resp)
        }
        RequestKind::Metadata(r) => {
            let mut resp = MetadataResponse::default();
            resp.controller_id = BrokerId(-1);
            for t in r.topics.iter().flatten() {
                let mut tr = metadata_response::MetadataResponseTopic::default();
                tr.error_code = code;
                tr.name = t.name.clone();
                if v >= 10 {
                    tr.topic_id = t.topic_id;
                }
                resp.topics.push(tr);
            }
            super::respond(ctx, &resp)
        }
        RequestKind::OffsetCommit(r) => {
            use offset_commit_response::*;
            let resp = OffsetCommitResponse::default().with_topics(nested(
                &r.topics,
                |t| &t.partitions,
                |t, ps| {
                    OffsetCommitResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_topic_id(t.topic_id)
                        .with_partitions(ps)
                },
                |p| {
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                },
            ));
            super::respond(ctx, &resp)
        }
        RequestKind::OffsetFetch(r) => super::respond(ctx, &offset_fetch_error(r, v, code)),
        RequestKind::FindCoordinator(r) => {
            let mut resp = FindCoordinatorResponse::default();
            if v >= 4 {
                for k in &r.coordinator_keys {
                    let mut c = find_coordinator_response::Coordinator::default();
                    c.key = k.clone();
                    c.node_id = BrokerId(-1);
                    c.port = -1;
                    c.error_code = code;
                    resp.coordinators.push(c);
                }
            } else {
                resp.error_code = code;
                resp.node_id = BrokerId(-1);
                resp.port = -1;
            }
            super::respond(ctx, &resp)
        }
        RequestKind::JoinGroup(_) => {
            let mut resp = JoinGroupResponse::default();
            resp.error_code = code;
            resp.generation_id = -1;
            resp.protocol_name = if v >= 7 { None } else { Some(text("")) };
            super::respond(ctx, &resp)
        }
        RequestKind::Heartbeat(_) => {
            super::respond(ctx, &HeartbeatResponse::default().with_error_code(code))
        }
        RequestKind::LeaveGroup(_) => {
            super::respond(ctx, &LeaveGroupResponse::default().with_error_code(code))
        }
        RequestKind::SyncGroup(_) => {
            super::respond(ctx, &SyncGroupResponse::default().with_error_code(code))
        }
        RequestKind::DescribeGroups(r) => {
            let mut resp = DescribeGroupsResponse::default();
            for g in &r.groups {
                let mut d = describe_groups_response::DescribedGroup::default();
                d.group_id = g.clone();
                d.error_code = code;
                resp.groups.push(d);
            }
            super::respond(ctx, &resp)
        }
        RequestKind::ListGroups(_) => {
            super::respond(ctx, &ListGroupsResponse::default().with_error_code(code))
        }
        RequestKind::CreateTopics(r) => {
            let mut resp = CreateTopicsResponse::default();
            for t in &r.topics {
                let mut tr = create_topics_response::CreatableTopicResult::default();
                tr.name = t.name.clone();
                tr.error_code = code;
                tr.num_partitions = -1;
                tr.replication_factor = -1;
                resp.topics.push(tr);
            }
            super::respond(ctx, &resp)
        }
        RequestKind::DeleteTopics(r) => {
            let mut resp = DeleteTopicsResponse::default();
            for n in &r.topic_names {
                let mut d = delete_topics_response::DeletableTopicResult::default();
                d.name = Some(n.clone());
                d.error_code = code;
                resp.responses.push(d);
            }
            for t in &r.topics {
                let mut d = delete_topics_response::DeletableTopicResult::default();
                d.name = t.name.clone();
                d.topic_id = t.topic_id;
                d.error_code = code;
                resp.responses.push(d);
            }
            super::respond(ctx, &resp)
        }
        RequestKind::DeleteRecords(r) => {
            use delete_records_response::*;
            let resp = DeleteRecordsResponse::default().with_topics(nested(
                &r.topics,
                |t| &t.partitions,
                |t, ps| {
                    DeleteRecordsTopicResult::default()
                        .with_name(t.name.clone())
                        .with_partitions(ps)
                },
                |p| {
                    DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1)
                        .with_error_code(code)
                },
            ));
            super::respond(ctx, &resp)
        }
        RequestKind::InitProducerId(_) => {
            let mut resp = InitProducerIdResponse::default();
            resp.error_code = code;
            resp.producer_id = ProducerId(-1);
            resp.producer_epoch = -1;
            resp.ongoing_txn_producer_id = ProducerId(-1);
            resp.ongoing_txn_producer_epoch = -1;
            super::respond(ctx, &resp)
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            use offset_for_leader_epoch_response::*;
            let resp = OffsetForLeaderEpochResponse::default().with_topics(nested(
                &r.topics,
                |t| &t.partitions,
                |t, ps| {
                    OffsetForLeaderTopicResult::default()
                        .with_topic(t.topic.clone())
                        .with_partitions(ps)
                },
                |p| {
                    EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_error_code(code)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1)
                },
            ));
            super::respond(ctx, &resp)
        }
        RequestKind::AddPartitionsToTxn(r) => {
            use add_partitions_to_txn_response::*;
            let mut resp = AddPartitionsToTxnResponse::default();
            if v >= 4 {
                resp.error_code = code;
            } else {
                resp.results_by_topic_v3_and_below = nested(
                    &r.v3_and_below_topics,
                    |t| &t.partitions,
                    |t, ps| {
                        AddPartitionsToTxnTopicResult::default()
                            .with_name(t.name.clone())
                            .with_results_by_partition(ps)
                    },
                    |&p| {
                        AddPartitionsToTxnPartitionResult::default()
                            .with_partition_index(p)
                            .with_partition_error_code(code)
                    },
                );
            }
            super::respond(ctx, &resp)
        }
        RequestKind::AddOffsetsToTxn(_) => super::respond(
            ctx,
            &AddOffsetsToTxnResponse::default().with_error_code(code),
        ),
        RequestKind::EndTxn(_) => {
            let mut resp = EndTxnResponse::default();
            resp.error_code = code;
            resp.producer_id = ProducerId(-1);
            resp.producer_epoch = -1;
            super::respond(ctx, &resp)
        }
        RequestKind::TxnOffsetCommit(r) => {
            use txn_offset_commit_response::*;
            let resp = TxnOffsetCommitResponse::default().with_topics(nested(
                &r.topics,
                |t| &t.partitions,
                |t, ps| {
                    TxnOffsetCommitResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(ps)
                },
                |p| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                },
            ));
            super::respond(ctx, &resp)
        }
        RequestKind::CreatePartitions(r) => {
            let mut resp = CreatePartitionsResponse::default();
            for t in &r.topics {
                let mut tr = create_partitions_response::CreatePartitionsTopicResult::default();
                tr.name = t.name.clone();
                tr.error_code = code;
                resp.results.push(tr);
            }
            super::respond(ctx, &resp)
        }
        RequestKind::DeleteGroups(r) => {
            let mut resp = DeleteGroupsResponse::default();
            for g in &r.groups_names {
                let mut d = delete_groups_response::DeletableGroupResult::default();
                d.group_id = g.clone();
                d.error_code = code;
                resp.results.push(d);
            }
            super::respond(ctx, &resp)
        }
        RequestKind::ConsumerGroupHeartbeat(_) => super::respond(
            ctx,
            &ConsumerGroupHeartbeatResponse::default().with_error_code(code),
        ),
        _ => Err(anyhow!("no error response for {:?}", ctx.api_key)),
    }
}

/// OffsetFetch answered with `code`: per group (v8+), else at the top (v2+) and in every
/// partition asked for.
fn offset_fetch_error(r: &OffsetFetchRequest, v: i16, code: i16) -> OffsetFetchResponse {
    let mut resp = OffsetFetchResponse::default();
    if v >= 8 {
        for g in &r.groups {
            let mut gr = offset_fetch_response::OffsetFetchResponseGroup::default();
            gr.group_id = g.group_id.clone();
            gr.error_code = code;
            resp.groups.push(gr);
        }
        return resp;
    }
    if v >= 2 {
        resp.error_code = code;
    }
    let topics = r.topics.as_deref().unwrap_or_default();
    resp.topics = nested(
        topics,
        |t| &t.partition_indexes,
        |t, ps| {
            offset_fetch_response::OffsetFetchResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(ps)
        },
        |&p| {
            offset_fetch_response::OffsetFetchResponsePartition::default()
                .with_partition_index(p)
                .with_committed_offset(-1)
                .with_committed_leader_epoch(-1)
                .with_metadata(Some(text("")))
                .with_error_code(code)
        },
    );
    resp
}

/// Each topic of a request answered by `topic`, holding `partition`'s answer for each of
/// its partitions.
fn nested<T, P, TR, PR>(
    topics: &[T],
    partitions: impl Fn(&T) -> &Vec<P>,
    topic: impl Fn(&T, Vec<PR>) -> TR,
    partition: impl Fn(&P) -> PR,
) -> Vec<TR> {
    topics
        .iter()
        .map(|t| topic(t, partitions(t).iter().map(&partition).collect()))
        .collect()
}
