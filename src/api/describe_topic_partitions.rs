//! DescribeTopicPartitions (key 75), version 0 (KIP-966; the Java admin client's describeTopics
//! from 3.8 on, so `kafka-topics --describe`).
//!
//! Behavior, as Kafka 4.4's handler and KRaft metadata cache answer:
//! - An empty topic list describes every topic; otherwise the named ones (duplicates once).
//!   Either way only topics at or after the cursor's topic (by name) are considered, in name
//!   order, and a request that names topics must name the cursor's topic too.
//! - A cursor with a negative partition index, or a named list missing the cursor topic, is
//!   INVALID_REQUEST for every requested topic (Kafka's error response for the request).
//! - Partitions are given from the cursor's partition index for the cursor topic and from 0
//!   for the others, at most `max(min(max.request.partition.size.limit,
//!   response_partition_limit), 1)` in all. When a topic's partitions do not all fit, it is
//!   returned with those that did and `next_cursor` points at the first missing one; when the
//!   limit was used up exactly before a topic, `next_cursor` points at that topic's partition 0.
//! - A named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION
//!   for an invalid name) and uses none of the limit.
//! - Partition entries carry no error: the leader is -1 when it is not a registered broker,
//!   the replicas and ISR are as recorded, the offline replicas are those on fenced or unknown
//!   brokers; eligible leader replicas (KIP-966) are always empty lists, as Sluice has none.
//! - `topic_authorized_operations` is every operation on a topic (no authorizer).

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::cluster::controller::validate_topic_name;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::DescribeTopicPartitions,
    min: 0,
    max: 0,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

/// READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: the
/// operations Kafka supports on a topic, as the bit field it answers without an authorizer.
pub const TOPIC_OPERATIONS: i32 =
    (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11);

/// The topics Kafka counts as internal (`Topic.isInternal`).
pub fn is_internal(name: &str) -> bool {
    matches!(
        name,
        "__consumer_offsets" | "__transaction_state" | "__share_group_state"
    )
}

/// One partition as the metadata has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    pub index: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub offline: Vec<i32>,
}

/// One topic as the metadata has it: its id and its partitions in index order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicView {
    pub id: Uuid,
    pub partitions: Vec<PartitionView>,
}

/// What the request asks for, after the checks Kafka makes before reading the metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The topics to describe, in name order.
    pub topics: Vec<String>,
    /// Every topic (an empty list asked): unknown ones cannot occur, errors are not listed.
    pub all: bool,
    /// The cursor's topic and first partition index.
    pub cursor: Option<(String, i32)>,
    /// The most partitions the answer holds (at least 1).
    pub limit: usize,
}

/// The topics and cursor of a request, or the INVALID_REQUEST message Kafka gives.
pub fn query(
    req: &DescribeTopicPartitionsRequest,
    all_topics: impl FnOnce() -> Vec<String>,
    broker_limit: i32,
) -> Result<Query, String> {
    let cursor = req
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index));
    let from = cursor.as_ref().map_or("", |(t, _)| t.as_str());
    let all = req.topics.is_empty();
    let names: BTreeSet<String> = if all {
        all_topics()
            .into_iter()
            .filter(|t| t.as_str() >= from)
            .collect()
    } else {
        req.topics
            .iter()
            .map(|t| t.name.0.to_string())
            .filter(|t| t.as_str() >= from)
            .collect()
    };
    if let Some((topic, partition)) = &cursor {
        if !all && !names.contains(topic) {
            return Err(format!(
                "DescribeTopicPartitionsRequest topic list should contain the cursor topic: {topic}"
            ));
        }
        if *partition < 0 {
            return Err(format!(
                "DescribeTopicPartitionsRequest cursor partition must be valid: \
                 Cursor(topicName='{topic}', partitionIndex={partition})"
            ));
        }
    }
    let limit = broker_limit.min(req.response_partition_limit).max(1) as usize;
    Ok(Query {
        topics: names.into_iter().collect(),
        all,
        cursor,
        limit,
    })
}

fn topic_entry(name: &str, error: i16, id: Uuid) -> DescribeTopicPartitionsResponseTopic {
    let mut t = DescribeTopicPartitionsResponseTopic::default();
    t.error_code = error;
    t.name = Some(TopicName(StrBytes::from_string(name.to_string())));
    t.topic_id = id;
    t.is_internal = is_internal(name);
    t
}

fn partition_entry(p: &PartitionView) -> DescribeTopicPartitionsResponsePartition {
    let mut e = DescribeTopicPartitionsResponsePartition::default();
    e.partition_index = p.index;
    e.leader_id = BrokerId(p.leader);
    e.leader_epoch = p.leader_epoch;
    e.replica_nodes = p.replicas.iter().map(|r| BrokerId(*r)).collect();
    e.isr_nodes = p.isr.iter().map(|r| BrokerId(*r)).collect();
    e.offline_replicas = p.offline.iter().map(|r| BrokerId(*r)).collect();
    e.eligible_leader_replicas = Some(Vec::new());
    e.last_known_elr = Some(Vec::new());
    e
}

/// The answer to `q` for the caller: topics it may not describe are left out of a listing of
/// every topic and answered TOPIC_AUTHORIZATION_FAILED when named (without a look at whether
/// they exist); the others carry the caller's authorized operations.
fn authorized(
    b: &Base,
    ctx: &RequestCtx,
    mut q: Query,
    topic: impl Fn(&str) -> Option<TopicView>,
) -> DescribeTopicPartitionsResponse {
    use super::authz::Op;
    let (allowed, denied): (Vec<String>, Vec<String>) = std::mem::take(&mut q.topics)
        .into_iter()
        .partition(|t| ctx.may_topic(b, Op::Describe, t));
    q.topics = allowed;
    let mut resp = answer(&q, topic);
    for t in resp.topics.iter_mut().filter(|t| t.error_code == 0) {
        if let Some(name) = &t.name {
            t.topic_authorized_operations = ctx.authorized_operations(
                b,
                crate::security::acl::ResourceType::Topic,
                name.0.as_str(),
            );
        }
    }
    if !q.all && !denied.is_empty() {
        for name in &denied {
            resp.topics
                .push(topic_entry(name, super::authz::topic_denied(), Uuid::nil()));
        }
        resp.topics.sort_by(|x, y| x.name.cmp(&y.name));
    }
    resp
}

/// The answer to `q`, reading each topic through `topic` (None: it does not exist).
pub fn answer(
    q: &Query,
    topic: impl Fn(&str) -> Option<TopicView>,
) -> DescribeTopicPartitionsResponse {
    let mut resp = DescribeTopicPartitionsResponse::default();
    let mut remaining = q.limit;
    for name in &q.topics {
        if remaining == 0 {
            resp.next_cursor = Some(cursor(name, 0));
            break;
        }
        let Some(view) = topic(name) else {
            if !q.all {
                let code = if validate_topic_name(name).is_ok() {
                    ResponseError::UnknownTopicOrPartition.code()
                } else {
                    ResponseError::InvalidTopicException.code()
                };
                resp.topics.push(topic_entry(name, code, Uuid::nil()));
            }
            continue;
        };
        let start = match &q.cursor {
            Some((t, p)) if t == name => *p as usize,
            _ => 0,
        };
        let count = view.partitions.len();
        let end = count.min(start.saturating_add(remaining));
        let mut entry = topic_entry(name, 0, view.id);
        entry.topic_authorized_operations = TOPIC_OPERATIONS;
        entry.partitions = view
            .partitions
            .iter()
            .filter(|p| (start..end).contains(&(p.index as usize)))
            .map(partition_entry)
            .collect();
        let given = entry.partitions.len();
        resp.topics.push(entry);
        if end < count {
            resp.next_cursor = Some(cursor(name, end as i32));
            break;
        }
        remaining -= given.min(remaining);
    }
    resp
}

fn cursor(topic: &str, partition: i32) -> Cursor {
    let mut c = Cursor::default();
    c.topic_name = TopicName(StrBytes::from_string(topic.to_string()));
    c.partition_index = partition;
    c
}

/// Kafka's error response: every requested topic with the error and nothing else.
fn error_response(
    req: &DescribeTopicPartitionsRequest,
    code: i16,
) -> DescribeTopicPartitionsResponse {
    let mut resp = DescribeTopicPartitionsResponse::default();
    for t in &req.topics {
        let mut e = DescribeTopicPartitionsResponseTopic::default();
        e.error_code = code;
        e.name = Some(t.name.clone());
        resp.topics.push(e);
    }
    resp
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DescribeTopicPartitionsRequest = super::decode(&ctx, body)?;
    let limit = b.config.max_request_partition_size_limit;
    let img = b.node().image();
    let all = || img.topic_ids.keys().map(|t| t.to_string()).collect();
    let resp = match query(&req, all, limit) {
        Err(_) => error_response(&req, ResponseError::InvalidRequest.code()),
        Ok(q) => authorized(&b, &ctx, q, |name| {
            let t = img.topic(name)?;
            let partitions = t
                .partitions
                .iter()
                .map(|p| PartitionView {
                    index: p.partition,
                    leader: if img.brokers.contains_key(&p.leader) {
                        p.leader
                    } else {
                        -1
                    },
                    leader_epoch: p.leader_epoch,
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                    offline: p
                        .replicas
                        .iter()
                        .copied()
                        .filter(|r| img.brokers.get(r).is_none_or(|s| s.fenced))
                        .collect(),
                })
                .collect();
            Some(TopicView {
                id: t.id,
                partitions,
            })
        }),
    };
    super::respond(&ctx, &resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::describe_topic_partitions_request::{
        Cursor as ReqCursor, TopicRequest,
    };

    fn request(
        topics: &[&str],
        limit: i32,
        cursor: Option<(&str, i32)>,
    ) -> DescribeTopicPartitionsRequest {
        let mut r = DescribeTopicPartitionsRequest::default();
        r.topics = topics
            .iter()
            .map(|t| {
                let mut tr = TopicRequest::default();
                tr.name = TopicName(StrBytes::from_string(t.to_string()));
                tr
            })
            .collect();
        r.response_partition_limit = limit;
        r.cursor = cursor.map(|(t, p)| {
            let mut c = ReqCursor::default();
            c.topic_name = TopicName(StrBytes::from_string(t.to_string()));
            c.partition_index = p;
            c
        });
        r
    }

    /// Topics "a" (3 partitions), "b" (2), "c" (1).
    fn topics(name: &str) -> Option<TopicView> {
        let n = match name {
            "a" => 3,
            "b" => 2,
            "c" => 1,
            _ => return None,
        };
        Some(TopicView {
            id: Uuid::from_u128(name.as_bytes()[0] as u128),
            partitions: (0..n)
                .map(|i| PartitionView {
                    index: i,
                    leader: 1,
                    leader_epoch: 0,
                    replicas: vec![1],
                    isr: vec![1],
                    offline: vec![],
                })
                .collect(),
        })
    }

    fn all() -> Vec<String> {
        vec!["c".into(), "a".into(), "b".into()]
    }

    /// (topic, partitions given, error)
    type Seen = (String, Vec<i32>, i16);

    /// What each topic got, and the next cursor.
    fn run(
        req: DescribeTopicPartitionsRequest,
        broker_limit: i32,
    ) -> (Vec<Seen>, Option<(String, i32)>) {
        let q = query(&req, all, broker_limit).expect("valid");
        let r = answer(&q, topics);
        (
            r.topics
                .iter()
                .map(|t| {
                    (
                        t.name.as_ref().unwrap().0.to_string(),
                        t.partitions.iter().map(|p| p.partition_index).collect(),
                        t.error_code,
                    )
                })
                .collect(),
            r.next_cursor
                .map(|c| (c.topic_name.0.to_string(), c.partition_index)),
        )
    }

    fn t(name: &str, parts: &[i32], err: i16) -> (String, Vec<i32>, i16) {
        (name.to_string(), parts.to_vec(), err)
    }

    #[test]
    fn pages_through_every_topic_by_the_limit() {
        let (ts, next) = run(request(&[], 2, None), 2000);
        assert_eq!(ts, vec![t("a", &[0, 1], 0)]);
        assert_eq!(next, Some(("a".into(), 2)));
        let (ts, next) = run(request(&[], 2, Some(("a", 2))), 2000);
        assert_eq!(ts, vec![t("a", &[2], 0), t("b", &[0], 0)]);
        assert_eq!(next, Some(("b".into(), 1)));
        let (ts, next) = run(request(&[], 3, Some(("b", 1))), 2000);
        assert_eq!(ts, vec![t("b", &[1], 0), t("c", &[0], 0)]);
        assert_eq!(next, None);
    }

    #[test]
    fn a_limit_used_up_exactly_points_at_the_next_topic() {
        let (ts, next) = run(request(&[], 3, None), 2000);
        assert_eq!(ts, vec![t("a", &[0, 1, 2], 0)]);
        assert_eq!(next, Some(("b".into(), 0)));
    }

    #[test]
    fn the_broker_limit_caps_and_the_limit_is_at_least_one() {
        let (ts, next) = run(request(&[], 2000, None), 1);
        assert_eq!(ts, vec![t("a", &[0], 0)]);
        assert_eq!(next, Some(("a".into(), 1)));
        let (ts, _) = run(request(&[], 0, None), 2000);
        assert_eq!(ts, vec![t("a", &[0], 0)]);
        let (ts, _) = run(request(&[], -5, None), 2000);
        assert_eq!(ts, vec![t("a", &[0], 0)]);
    }

    #[test]
    fn named_topics_sorted_once_unknown_ones_with_errors_and_free() {
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        let invalid = ResponseError::InvalidTopicException.code();
        let (ts, next) = run(request(&["c", "zz", "a", "c", "b?"], 5, None), 2000);
        assert_eq!(
            ts,
            vec![
                t("a", &[0, 1, 2], 0),
                t("b?", &[], invalid),
                t("c", &[0], 0),
                t("zz", &[], unknown)
            ]
        );
        assert_eq!(next, None);
        // A limit used up just before an unknown topic points the cursor at it, as Kafka does.
        let (ts, next) = run(request(&["c", "zz", "a"], 4, None), 2000);
        assert_eq!(ts, vec![t("a", &[0, 1, 2], 0), t("c", &[0], 0)]);
        assert_eq!(next, Some(("zz".into(), 0)));
    }

    #[test]
    fn a_cursor_past_the_last_partition_gives_none_of_it() {
        let (ts, next) = run(request(&["a", "b"], 10, Some(("a", 7))), 2000);
        assert_eq!(ts, vec![t("a", &[], 0), t("b", &[0, 1], 0)]);
        assert_eq!(next, None);
    }

    #[test]
    fn invalid_cursors_are_refused_as_kafka_refuses_them() {
        assert_eq!(
            query(&request(&["b"], 10, Some(("a", 0))), all, 2000),
            Err(
                "DescribeTopicPartitionsRequest topic list should contain the cursor topic: a"
                    .into()
            )
        );
        assert!(query(&request(&[], 10, Some(("a", -1))), all, 2000).is_err());
        assert!(query(&request(&["a"], 10, Some(("a", -1))), all, 2000).is_err());
        let e = error_response(&request(&["b", "x"], 10, None), 42);
        assert_eq!(e.topics.len(), 2);
        assert!(
            e.topics
                .iter()
                .all(|t| t.error_code == 42 && t.partitions.is_empty())
        );
    }

    #[test]
    fn entries_carry_ids_internal_flag_and_operations() {
        let q = query(&request(&["a"], 10, None), all, 2000).unwrap();
        let r = answer(&q, topics);
        assert_eq!(r.topics[0].topic_id, Uuid::from_u128(b'a' as u128));
        assert_eq!(r.topics[0].topic_authorized_operations, 3576);
        assert!(!r.topics[0].is_internal);
        assert!(is_internal("__consumer_offsets") && !is_internal("__other"));
        assert_eq!(
            r.topics[0].partitions[0].eligible_leader_replicas,
            Some(vec![])
        );
    }
}
