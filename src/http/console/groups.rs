//! The groups page (every group with its type and state) and one group: its members with
//! client id, host and assignment, and per partition the committed offset, the log end
//! offset (high watermark) and the lag. A KIP-848 consumer group is described with
//! ConsumerGroupDescribe, a classic group with DescribeGroups (its consumer-protocol
//! assignments decoded).

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use bytes::{Buf, Bytes};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
    ConsumerProtocolAssignment, DescribeGroupsRequest, DescribeGroupsResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, GroupId, ListGroupsRequest,
    ListGroupsResponse, OffsetFetchRequest, OffsetFetchResponse,
    list_groups_response::ListedGroup,
    offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics},
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use serde_json::{Value, json};

use super::cluster::{list_offsets, metadata};
use super::wire::{call, call_at, denied, error_name, forward, is_peer, may, not_coordinator};
use super::{Answer, Ctx, Failure, admit, answer, query};
use crate::http::HttpState;
use crate::security::acl::model::CLUSTER_NAME;
use crate::security::acl::{AclOperation as Op, ResourceType};

pub(super) async fn list(State(s): State<HttpState>, headers: HeaderMap) -> Response {
    answer(list_answer(&s, &headers).await)
}

async fn list_answer(s: &HttpState, headers: &HeaderMap) -> Answer {
    let ctx = admit(s, headers)?;
    let groups: Vec<Value> = list_groups(&ctx)
        .await?
        .iter()
        .map(|g| {
            json!({
                "group_id": g.group_id.0.to_string(),
                "type": g.group_type.to_string(),
                "state": g.group_state.to_string(),
                "protocol_type": g.protocol_type.to_string(),
            })
        })
        .collect();
    Ok(json!({ "groups": groups }))
}

/// Every group the user may describe (ListGroups v5), by group id. On a cluster each broker
/// lists the groups it coordinates: the others are asked too, and what they list is kept
/// when this user may describe it, as each broker's ListGroups would for them.
pub(in crate::http) async fn list_groups(ctx: &Ctx) -> Result<Vec<ListedGroup>, Failure> {
    let req = ListGroupsRequest::default();
    let key = (ApiKey::ListGroups, 5);
    let resp: ListGroupsResponse = call(&ctx.broker, &ctx.session, key.0, key.1, &req).await?;
    if resp.error_code != 0 {
        return Err(Failure::from_kafka("ListGroups", resp.error_code));
    }
    let mut listed = resp.groups;
    let md = metadata(ctx, Some(&[])).await?;
    let all = may(
        &ctx.broker,
        &ctx.session,
        Op::Describe,
        ResourceType::Cluster,
        CLUSTER_NAME,
    );
    for node in md
        .brokers
        .iter()
        .map(|b| b.node_id.0)
        .filter(|n| is_peer(&ctx.broker, *n))
    {
        match forward::<_, ListGroupsResponse>(&ctx.broker, node, key, &req).await {
            Ok(r) if r.error_code == 0 => listed.extend(r.groups.into_iter().filter(|g| {
                all || may(
                    &ctx.broker,
                    &ctx.session,
                    Op::Describe,
                    ResourceType::Group,
                    &g.group_id,
                )
            })),
            Ok(r) => tracing::debug!(
                "console: ListGroups on broker {node}: error {}",
                r.error_code
            ),
            Err(e) => tracing::debug!("console: no groups from broker {node}: {e:#}"),
        }
    }
    listed.sort_by(|a, b| a.group_id.0.cmp(&b.group_id.0));
    listed.dedup_by(|a, b| a.group_id == b.group_id);
    Ok(listed)
}

/// The broker coordinating group `id` (FindCoordinator v4), or -1 when it is not known:
/// the requests about the group are then answered here.
pub(in crate::http) async fn coordinator(ctx: &Ctx, id: &str) -> Result<i32, Failure> {
    let mut req = FindCoordinatorRequest::default();
    req.key_type = 0;
    req.coordinator_keys = vec![StrBytes::from_string(id.to_string())];
    let resp: FindCoordinatorResponse =
        call(&ctx.broker, &ctx.session, ApiKey::FindCoordinator, 4, &req).await?;
    Ok(resp
        .coordinators
        .first()
        .filter(|c| c.error_code == 0)
        .map_or(-1, |c| c.node_id.0))
}

pub(super) async fn describe(State(s): State<HttpState>, headers: HeaderMap, uri: Uri) -> Response {
    answer(describe_answer(&s, &headers, &uri).await)
}

/// A member of a group: as the page shows it, and its fields.
pub(in crate::http) struct Member {
    pub json: Value,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub assigned: Vec<(String, i32)>,
}

/// A partition a group commits to or owns: its committed offset, the log end offset (high
/// watermark), the lag and the member that owns it (an index into the members).
pub(in crate::http) struct Offset {
    pub topic: String,
    pub partition: i32,
    pub committed: Option<i64>,
    pub end: Option<i64>,
    pub lag: Option<i64>,
    pub owner: Option<usize>,
    pub error: Option<String>,
}

/// A described group: `head` holds group_id, type (consumer or classic), state,
/// protocol_type and protocol (the assignor).
pub(in crate::http) struct Described {
    pub head: Value,
    pub coordinator: i32,
    pub members: Vec<Member>,
    pub offsets: Vec<Offset>,
}

fn group_id(id: &str) -> GroupId {
    GroupId(StrBytes::from_string(id.to_string()))
}

async fn describe_answer(s: &HttpState, headers: &HeaderMap, uri: &Uri) -> Answer {
    let ctx = admit(s, headers)?;
    let q = query(uri);
    let Some(id) = q.get("id").filter(|i| !i.is_empty()) else {
        return Err(Failure::bad_request("id is required"));
    };
    let d = describe_group(&ctx, id).await?;
    let offsets: Vec<Value> = d
        .offsets
        .iter()
        .map(|o| {
            json!({
                "topic": o.topic,
                "partition": o.partition,
                "committed": o.committed,
                "end_offset": o.end,
                "lag": o.lag,
                "owner": o.owner.map(|i| d.members[i].client_id.clone()),
                "error": o.error,
            })
        })
        .collect();
    let total_lag: i64 = d.offsets.iter().filter_map(|o| o.lag).sum();
    let members: Vec<Value> = d.members.into_iter().map(|m| m.json).collect();
    let mut out = d.head;
    out["members"] = json!(members);
    out["offsets"] = json!(offsets);
    out["total_lag"] = json!(total_lag);
    Ok(out)
}

/// Group `id` with its members, and the lag of each partition it commits to or owns.
pub(in crate::http) async fn describe_group(ctx: &Ctx, id: &str) -> Result<Described, Failure> {
    let node = coordinator(ctx, id).await?;
    let (head, members) = match consumer_group(ctx, node, id).await? {
        Some(g) => g,
        None => classic_group(ctx, node, id).await?,
    };
    let committed = committed(ctx, node, id).await?;
    let mut owner: BTreeMap<(String, i32), usize> = BTreeMap::new();
    for (i, m) in members.iter().enumerate() {
        for tp in &m.assigned {
            owner.insert(tp.clone(), i);
        }
    }
    let mut keys: Vec<(String, i32)> = committed.keys().cloned().collect();
    keys.extend(owner.keys().cloned());
    keys.sort();
    keys.dedup();
    let wanted: Vec<(String, i32, i64)> = keys.iter().map(|(t, p)| (t.clone(), *p, -1)).collect();
    let ends = if wanted.is_empty() {
        BTreeMap::new()
    } else {
        list_offsets(ctx, &wanted).await?
    };
    let offsets = keys
        .into_iter()
        .map(|k| {
            let c = committed.get(&k).copied();
            let (end, error) = match ends.get(&k) {
                Some(Ok((o, _))) => (Some(*o), None),
                Some(Err(e)) => (None, Some(e.clone())),
                None => (None, None),
            };
            let lag = match (c, end) {
                (Some(c), Some(e)) if c >= 0 => Some((e - c).max(0)),
                _ => None,
            };
            let owner = owner.get(&k).copied();
            Offset {
                topic: k.0,
                partition: k.1,
                committed: c,
                end,
                lag,
                owner,
                error,
            }
        })
        .collect();
    Ok(Described {
        head,
        coordinator: node,
        members,
        offsets,
    })
}

/// A KIP-848 consumer group, or None when the group is not one.
async fn consumer_group(
    ctx: &Ctx,
    node: i32,
    id: &str,
) -> Result<Option<(Value, Vec<Member>)>, Failure> {
    let mut req = ConsumerGroupDescribeRequest::default();
    req.group_ids = vec![group_id(id)];
    let resp: ConsumerGroupDescribeResponse = call_at(
        &ctx.broker,
        &ctx.session,
        node,
        (ApiKey::ConsumerGroupDescribe, 0),
        &req,
        |r: &ConsumerGroupDescribeResponse| r.groups.iter().any(|g| not_coordinator(g.error_code)),
    )
    .await?;
    let Some(g) = resp.groups.into_iter().next().filter(|g| g.error_code == 0) else {
        return Ok(None);
    };
    let members = g
        .members
        .iter()
        .map(|m| {
            let assigned: Vec<(String, i32)> = m
                .assignment
                .topic_partitions
                .iter()
                .flat_map(|tp| tp.partitions.iter().map(|p| (tp.topic_name.0.to_string(), *p)))
                .collect();
            Member {
                json: json!({
                    "member_id": m.member_id.to_string(),
                    "instance_id": m.instance_id.as_ref().map(|i| i.to_string()),
                    "client_id": m.client_id.to_string(),
                    "host": m.client_host.to_string(),
                    "member_epoch": m.member_epoch,
                    "subscribed": m.subscribed_topic_names.iter().map(|t| t.0.to_string()).collect::<Vec<_>>(),
                    "assignment": tp_names(&assigned),
                }),
                member_id: m.member_id.to_string(),
                instance_id: m.instance_id.as_ref().map(|i| i.to_string()),
                client_id: m.client_id.to_string(),
                assigned,
            }
        })
        .collect();
    let head = json!({
        "group_id": id,
        "type": "consumer",
        "state": g.group_state.to_string(),
        "protocol_type": "consumer",
        "protocol": g.assignor_name.to_string(),
        "group_epoch": g.group_epoch,
    });
    Ok(Some((head, members)))
}

async fn classic_group(ctx: &Ctx, node: i32, id: &str) -> Result<(Value, Vec<Member>), Failure> {
    let mut req = DescribeGroupsRequest::default();
    req.groups = vec![group_id(id)];
    let resp: DescribeGroupsResponse = call_at(
        &ctx.broker,
        &ctx.session,
        node,
        (ApiKey::DescribeGroups, 5),
        &req,
        |r: &DescribeGroupsResponse| r.groups.iter().any(|g| not_coordinator(g.error_code)),
    )
    .await?;
    let Some(g) = resp.groups.into_iter().next() else {
        return Err(Failure::not_found(format!("no group {id}")));
    };
    if g.error_code != 0 {
        if denied(g.error_code) {
            return Err(Failure::from_kafka("DescribeGroups", g.error_code));
        }
        return Err(Failure::not_found(format!(
            "group {id}: {}",
            error_name(g.error_code)
        )));
    }
    if g.group_state.as_str() == "Dead" {
        return Err(Failure::not_found(format!("no group {id}")));
    }
    let consumer = g.protocol_type.as_str() == "consumer";
    let members = g
        .members
        .iter()
        .map(|m| {
            let assigned = if consumer {
                consumer_assignment(m.member_assignment.clone())
            } else {
                Vec::new()
            };
            Member {
                json: json!({
                    "member_id": m.member_id.to_string(),
                    "instance_id": m.group_instance_id.as_ref().map(|i| i.to_string()),
                    "client_id": m.client_id.to_string(),
                    "host": m.client_host.to_string(),
                    "assignment": tp_names(&assigned),
                }),
                member_id: m.member_id.to_string(),
                instance_id: m.group_instance_id.as_ref().map(|i| i.to_string()),
                client_id: m.client_id.to_string(),
                assigned,
            }
        })
        .collect();
    let head = json!({
        "group_id": id,
        "type": "classic",
        "state": g.group_state.to_string(),
        "protocol_type": g.protocol_type.to_string(),
        "protocol": g.protocol_data.to_string(),
    });
    Ok((head, members))
}

fn tp_names(tps: &[(String, i32)]) -> Vec<String> {
    tps.iter().map(|(t, p)| format!("{t}-{p}")).collect()
}

/// A classic consumer's embedded protocol message (ConsumerProtocolSubscription or
/// ConsumerProtocolAssignment): a version, then the body read as that version (at most 3);
/// None when it does not decode.
pub(in crate::http) fn consumer_protocol<T: Decodable>(mut b: Bytes) -> Option<T> {
    if b.len() < 2 {
        return None;
    }
    let version = b.get_i16();
    let decoded =
        std::panic::catch_unwind(AssertUnwindSafe(|| T::decode(&mut b, version.clamp(0, 3))));
    decoded.ok()?.ok()
}

/// The partitions of a classic consumer's assignment; nothing when it does not decode.
pub(in crate::http) fn consumer_assignment(b: Bytes) -> Vec<(String, i32)> {
    consumer_protocol::<ConsumerProtocolAssignment>(b).map_or_else(Vec::new, |a| {
        a.assigned_partitions
            .iter()
            .flat_map(|tp| tp.partitions.iter().map(|p| (tp.topic.0.to_string(), *p)))
            .collect()
    })
}

/// An OffsetFetch (v8) of one group: of `topics`, or of all (None).
pub(in crate::http) fn offset_fetch(
    id: &str,
    topics: Option<Vec<OffsetFetchRequestTopics>>,
) -> OffsetFetchRequest {
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = group_id(id);
    g.topics = topics;
    g.member_epoch = -1;
    let mut req = OffsetFetchRequest::default();
    req.groups = vec![g];
    req
}

/// Whether an OffsetFetch answer says another broker coordinates the group.
pub(in crate::http) fn offset_fetch_elsewhere(r: &OffsetFetchResponse) -> bool {
    r.groups.iter().any(|g| not_coordinator(g.error_code))
}

/// The group's committed offsets (OffsetFetch v8, all topics), of the topics the user may
/// describe.
async fn committed(
    ctx: &Ctx,
    node: i32,
    id: &str,
) -> Result<BTreeMap<(String, i32), i64>, Failure> {
    let req = offset_fetch(id, None);
    let resp: OffsetFetchResponse = call_at(
        &ctx.broker,
        &ctx.session,
        node,
        (ApiKey::OffsetFetch, 8),
        &req,
        offset_fetch_elsewhere,
    )
    .await?;
    let mut out = BTreeMap::new();
    for g in resp.groups {
        if g.error_code != 0 {
            return Err(Failure::from_kafka("OffsetFetch", g.error_code));
        }
        let visible = |t: &str| {
            may(
                &ctx.broker,
                &ctx.session,
                Op::Describe,
                ResourceType::Topic,
                t,
            )
        };
        for t in g.topics.into_iter().filter(|t| visible(&t.name)) {
            for p in t.partitions.iter().filter(|p| p.error_code == 0) {
                out.insert(
                    (t.name.0.to_string(), p.partition_index),
                    p.committed_offset,
                );
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn classic_assignments_decode() {
        let mut tp = TopicPartition::default();
        tp.topic = TopicName(StrBytes::from_static_str("t"));
        tp.partitions = vec![0, 2];
        let mut a = ConsumerProtocolAssignment::default();
        a.assigned_partitions = vec![tp];
        let mut buf = bytes::BytesMut::new();
        bytes::BufMut::put_i16(&mut buf, 1);
        a.encode(&mut buf, 1).unwrap();
        let got = consumer_assignment(buf.freeze());
        assert_eq!(got, [("t".to_string(), 0), ("t".to_string(), 2)]);
        assert!(consumer_assignment(Bytes::from_static(&[0, 1, 0xff])).is_empty());
        assert!(consumer_assignment(Bytes::new()).is_empty());
    }
}
