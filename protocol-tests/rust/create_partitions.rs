//! CreatePartitions against the real binary, raw protocol over TCP: Kafka's errors (same or
//! lower count, unknown topic, duplicate names, manual assignments, the per-request cap),
//! validate_only, the new partitions in Metadata, produce and fetch on them (an idempotent
//! producer across the change included), the count kept across a clean restart and a kill -9,
//! and committed offsets kept when `__consumer_offsets` itself grows.

mod common;

use bytes::Bytes;
use common::{
    Client, TestBroker, coordinator, create_topic_request, record_batch, record_batch_from,
};
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
    CreateTopicsResponse, InitProducerIdRequest, InitProducerIdResponse, MetadataRequest,
    MetadataResponse, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

const INVALID_PARTITIONS: i16 = 37;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
const INVALID_REQUEST: i16 = 42;
const POLICY_VIOLATION: i16 = 44;
const UNKNOWN_TOPIC: i16 = 3;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn create_topic(c: &mut Client, topic: &str, partitions: i32) {
    let mut t = CreatableTopic::default();
    t.name = name(topic);
    t.num_partitions = partitions;
    t.replication_factor = 1;
    let mut r = CreateTopicsRequest::default();
    r.topics = vec![t];
    r.timeout_ms = 5000;
    let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &r);
    assert_eq!(resp.topics[0].error_code, 0);
}

/// One topic of a CreatePartitions request: `count` in all, optional manual assignments.
fn grow(topic: &str, count: i32, assignments: Option<Vec<Vec<i32>>>) -> CreatePartitionsTopic {
    let mut t = CreatePartitionsTopic::default();
    t.name = name(topic);
    t.count = count;
    t.assignments = assignments.map(|a| {
        a.into_iter()
            .map(|ids| {
                let mut x = CreatePartitionsAssignment::default();
                x.broker_ids = ids.into_iter().map(BrokerId).collect();
                x
            })
            .collect()
    });
    t
}

/// Sends CreatePartitions; answers (name, error code, message) per result in order.
fn create_partitions(
    c: &mut Client,
    version: i16,
    topics: Vec<CreatePartitionsTopic>,
    validate_only: bool,
) -> Vec<(String, i16, Option<String>)> {
    let mut r = CreatePartitionsRequest::default();
    r.topics = topics;
    r.timeout_ms = 5000;
    r.validate_only = validate_only;
    let resp: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, version, &r);
    resp.results
        .into_iter()
        .map(|r| {
            (
                r.name.0.to_string(),
                r.error_code,
                r.error_message.map(|m| m.to_string()),
            )
        })
        .collect()
}

fn one(
    c: &mut Client,
    topic: &str,
    count: i32,
    assignments: Option<Vec<Vec<i32>>>,
    validate_only: bool,
) -> (i16, Option<String>) {
    let mut r = create_partitions(c, 3, vec![grow(topic, count, assignments)], validate_only);
    assert_eq!(r.len(), 1);
    let (n, code, msg) = r.remove(0);
    assert_eq!(n, topic);
    (code, msg)
}

/// (node id of the broker, [(partition, leader)] of `topic`) from Metadata v12.
fn metadata(c: &mut Client, topic: &str) -> (i32, Vec<(i32, i32)>) {
    let mut t = MetadataRequestTopic::default();
    t.name = Some(name(topic));
    let mut m = MetadataRequest::default();
    m.topics = Some(vec![t]);
    let md: MetadataResponse = c.call(ApiKey::Metadata, 12, &m);
    assert_eq!(md.topics[0].error_code, 0);
    let mut parts: Vec<(i32, i32)> = md.topics[0]
        .partitions
        .iter()
        .map(|p| {
            assert_eq!(p.error_code, 0);
            (p.partition_index, p.leader_id.0)
        })
        .collect();
    parts.sort();
    (md.brokers[0].node_id.0, parts)
}

fn partition_count(c: &mut Client, topic: &str) -> usize {
    metadata(c, topic).1.len()
}

/// Produces one batch to `partition` (acks=all); answers (error code, base offset).
fn produce(c: &mut Client, topic: &str, partition: i32, batch: Bytes) -> (i16, i64) {
    let p = common::produce_one(c, topic, partition, batch);
    (p.error_code, p.base_offset)
}

/// The record values of `partition` from offset 0 (Fetch v12).
fn values(c: &mut Client, topic: &str, partition: i32) -> Vec<String> {
    let f = common::fetch_one(c, 12, topic, uuid::Uuid::nil(), partition, 0);
    let p = &f.responses[0].partitions[0];
    assert_eq!(p.error_code, 0, "fetch {topic}-{partition}");
    let mut records = p.records.clone().unwrap_or_default();
    let mut out = Vec::new();
    while !records.is_empty() {
        let set = RecordBatchDecoder::decode(&mut records).expect("record batch");
        for r in set.records {
            out.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        }
    }
    out
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn msg(s: &str) -> Option<String> {
    Some(s.to_string())
}

#[test]
fn errors_as_kafka_answers_them() {
    let b = TestBroker::start(&[]);
    let mut c = b.connect();
    create_topic(&mut c, "cp", 3);
    create_topic(&mut c, "other", 2);
    let (node, _) = metadata(&mut c, "cp");

    // validate_only: accepted, nothing changes.
    assert_eq!(one(&mut c, "cp", 5, None, true), (0, None));
    assert_eq!(partition_count(&mut c, "cp"), 3);
    assert_eq!(
        one(&mut c, "cp", 3, None, false),
        (INVALID_PARTITIONS, msg("Topic already has 3 partition(s)."))
    );
    assert_eq!(
        one(&mut c, "cp", 2, None, true),
        (
            INVALID_PARTITIONS,
            msg("The topic cp currently has 3 partition(s); 2 would not be an increase.")
        )
    );
    assert_eq!(one(&mut c, "nope", 4, None, false), (UNKNOWN_TOPIC, None));

    // Manual assignments: shape checked, in Kafka's order.
    let cases: Vec<(i32, Vec<Vec<i32>>, String)> = vec![
        (
            5,
            vec![vec![node]],
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."
                .into(),
        ),
        (
            4,
            vec![],
            "Attempted to add 1 additional partition(s), but only 0 assignment(s) were specified."
                .into(),
        ),
        (
            4,
            vec![vec![node, node + 6]],
            format!(
                "The manual partition assignment includes broker {}, but no such broker is registered.",
                node + 6
            ),
        ),
        (
            4,
            vec![vec![]],
            "The manual partition assignment includes an empty replica list.".into(),
        ),
        (
            4,
            vec![vec![node, node]],
            format!("The manual partition assignment includes the broker {node} more than once."),
        ),
    ];
    for (count, a, want) in cases {
        assert_eq!(
            one(&mut c, "cp", count, Some(a.clone()), false),
            (INVALID_REPLICA_ASSIGNMENT, Some(want)),
            "{a:?}"
        );
    }
    assert_eq!(
        one(&mut c, "cp", 4, Some(vec![vec![node]]), true),
        (0, None)
    );

    // A name given twice: INVALID_REQUEST once, first; the other topics are acted on.
    let r = create_partitions(
        &mut c,
        3,
        vec![
            grow("other", 3, None),
            grow("cp", 4, None),
            grow("cp", 5, None),
        ],
        true,
    );
    assert_eq!(
        r,
        vec![
            ("cp".into(), INVALID_REQUEST, msg("Duplicate topic name.")),
            ("other".into(), 0, None),
        ]
    );

    // More than 10,000 added partitions in one request: every entry refused, nothing made.
    let too_many = "Excessively large number of additional partitions per request.";
    let r = create_partitions(
        &mut c,
        3,
        vec![
            grow("cp", 6_003, None),
            grow("nope", 3, None),
            grow("other", 4_010, None),
        ],
        false,
    );
    assert_eq!(
        r,
        vec![
            ("cp".into(), POLICY_VIOLATION, msg(too_many)),
            ("nope".into(), POLICY_VIOLATION, msg(too_many)),
            ("other".into(), POLICY_VIOLATION, msg(too_many)),
        ]
    );
    assert_eq!(partition_count(&mut c, "cp"), 3);
    assert_eq!(partition_count(&mut c, "other"), 2);

    // CreateTopics has the same bound over all its topics (Kafka's controller message).
    let mut big = create_topic_request("big-a", 6_000, 1, &[]);
    big.topics
        .extend(create_topic_request("big-b", 4_001, 1, &[]).topics);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &big);
    let got: Vec<(String, i16, Option<String>)> = r
        .topics
        .iter()
        .map(|t| {
            let m = t.error_message.as_ref().map(|m| m.to_string());
            (t.name.0.to_string(), t.error_code, m)
        })
        .collect();
    let too_many = msg("Excessively large number of partitions per request.");
    assert_eq!(
        got,
        vec![
            ("big-a".into(), POLICY_VIOLATION, too_many.clone()),
            ("big-b".into(), POLICY_VIOLATION, too_many),
        ]
    );
    let mut all = MetadataRequest::default();
    all.topics = None;
    let md: MetadataResponse = c.call(ApiKey::Metadata, 12, &all);
    assert!(
        md.topics
            .iter()
            .all(|t| t.name.as_ref().is_none_or(|n| !n.0.starts_with("big-"))),
        "nothing created"
    );

    // Every served version answers the same; the last one grows the topic.
    for v in 0..=2 {
        let r = create_partitions(&mut c, v, vec![grow("cp", 3, None)], false);
        assert_eq!(r[0].1, INVALID_PARTITIONS, "v{v}");
    }
    let r = create_partitions(&mut c, 0, vec![grow("cp", 4, None)], false);
    assert_eq!(r, vec![("cp".into(), 0, None)]);
    assert_eq!(partition_count(&mut c, "cp"), 4);
}

#[test]
fn new_partitions_serve_and_survive_restarts() {
    let mut b = TestBroker::start(&[]);
    let mut c = b.connect();
    create_topic(&mut c, "grow", 2);
    let now = now_ms();
    assert_eq!(
        produce(&mut c, "grow", 0, record_batch(&[b"old-0"], now)).0,
        0
    );
    let (node, _) = metadata(&mut c, "grow");

    // Explicit assignments are accepted; the partitions are this node's.
    assert_eq!(
        one(&mut c, "grow", 4, Some(vec![vec![node], vec![node]]), false),
        (0, None)
    );
    let (_, parts) = metadata(&mut c, "grow");
    assert_eq!(parts, vec![(0, node), (1, node), (2, node), (3, node)]);
    assert_eq!(
        produce(&mut c, "grow", 3, record_batch(&[b"new-3"], now)),
        (0, 0)
    );
    assert_eq!(
        produce(&mut c, "grow", 0, record_batch(&[b"old-0b"], now)),
        (0, 1)
    );
    assert_eq!(values(&mut c, "grow", 3), vec!["new-3"]);
    assert_eq!(values(&mut c, "grow", 0), vec!["old-0", "old-0b"]);

    // Clean restart: the count and the records are kept.
    assert_eq!(b.terminate(), Some(0));
    b.launch();
    let mut c = b.connect();
    assert_eq!(partition_count(&mut c, "grow"), 4);
    assert_eq!(values(&mut c, "grow", 3), vec!["new-3"]);

    // kill -9 right after growing again and writing to a new partition.
    assert_eq!(one(&mut c, "grow", 6, None, false), (0, None));
    assert_eq!(
        produce(&mut c, "grow", 5, record_batch(&[b"new-5"], now)),
        (0, 0)
    );
    b.kill9();
    b.launch();
    let mut c = b.connect();
    assert_eq!(partition_count(&mut c, "grow"), 6);
    assert_eq!(values(&mut c, "grow", 5), vec!["new-5"]);
    assert_eq!(values(&mut c, "grow", 0), vec!["old-0", "old-0b"]);
    assert_eq!(
        one(&mut c, "grow", 5, None, false),
        (
            INVALID_PARTITIONS,
            msg("The topic grow currently has 6 partition(s); 5 would not be an increase.")
        )
    );
}

#[test]
fn idempotent_producer_across_the_change() {
    let b = TestBroker::start(&[]);
    let mut c = b.connect();
    create_topic(&mut c, "idem-grow", 1);
    let mut r = InitProducerIdRequest::default();
    r.transactional_id = None;
    r.transaction_timeout_ms = 60_000;
    r.producer_id = ProducerId(-1);
    r.producer_epoch = -1;
    let resp: InitProducerIdResponse = c.call(ApiKey::InitProducerId, 4, &r);
    assert_eq!(resp.error_code, 0);
    let pid = resp.producer_id.0;
    let now = now_ms();
    let batch = |v: &[u8], seq: i32| record_batch_from(&[v], now, Some((pid, 0, seq)));

    let first = batch(b"p0-s0", 0);
    assert_eq!(produce(&mut c, "idem-grow", 0, first.clone()), (0, 0));
    assert_eq!(one(&mut c, "idem-grow", 3, None, false), (0, None));
    // The old partition keeps the producer's sequence (a retry is still recognised); the new
    // ones start it at 0.
    assert_eq!(produce(&mut c, "idem-grow", 0, first), (0, 0), "retry");
    assert_eq!(produce(&mut c, "idem-grow", 0, batch(b"p0-s1", 1)), (0, 1));
    assert_eq!(produce(&mut c, "idem-grow", 2, batch(b"p2-s0", 0)), (0, 0));
    assert_eq!(produce(&mut c, "idem-grow", 2, batch(b"p2-s1", 1)), (0, 1));
    assert_eq!(
        produce(&mut c, "idem-grow", 2, batch(b"p2-s3", 3)).0,
        kafka_protocol::ResponseError::OutOfOrderSequenceNumber.code(),
        "a gap on a new partition"
    );
    assert_eq!(values(&mut c, "idem-grow", 0), vec!["p0-s0", "p0-s1"]);
    assert_eq!(values(&mut c, "idem-grow", 2), vec!["p2-s0", "p2-s1"]);
}

/// Java's `String.hashCode` of an ASCII name, as Kafka spreads groups with it.
fn java_hash(s: &str) -> i32 {
    s.bytes()
        .fold(0i32, |h, b| h.wrapping_mul(31).wrapping_add(b as i32))
}

fn commit(c: &mut Client, group: &str, offset: i64) {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{GroupId, OffsetCommitRequest, OffsetCommitResponse};
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = offset;
    p.committed_leader_epoch = -1;
    let mut t = OffsetCommitRequestTopic::default();
    t.name = name("t");
    t.partitions = vec![p];
    let mut r = OffsetCommitRequest::default();
    r.group_id = GroupId(StrBytes::from_string(group.to_string()));
    r.generation_id_or_member_epoch = -1;
    r.topics = vec![t];
    let code = coordinator::call(c, coordinator::GROUP, group, |c| {
        let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &r);
        let code = resp.topics[0].partitions[0].error_code;
        (code, code)
    });
    assert_eq!(code, 0);
}

fn committed(c: &mut Client, group: &str) -> i64 {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse};
    let mut t = OffsetFetchRequestTopic::default();
    t.name = name("t");
    t.partition_indexes = vec![0];
    let mut r = OffsetFetchRequest::default();
    r.group_id = GroupId(StrBytes::from_string(group.to_string()));
    r.topics = Some(vec![t]);
    let resp = coordinator::call(c, coordinator::GROUP, group, |c| {
        let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 7, &r);
        (resp.error_code, resp)
    });
    assert_eq!(resp.error_code, 0);
    resp.topics[0].partitions[0].committed_offset
}

#[test]
fn growing_consumer_offsets_keeps_commits() {
    // A group that lives in partition 1 of 2 and would live in partition 0 of 3.
    let group = (0..)
        .map(|i| format!("g{i}"))
        .find(|g| {
            let h = java_hash(g);
            let abs = if h == i32::MIN { 0 } else { h.abs() };
            abs % 2 == 1 && abs % 3 == 0
        })
        .unwrap();
    // At start-up the node leads every partition of __consumer_offsets and replays them
    // together, so a moved group's older records in its former partition are applied before
    // those in its new one.
    let mut b = TestBroker::start(&["offsets.topic.num.partitions=2"]);
    let mut c = b.connect();
    create_topic(&mut c, "t", 1);
    commit(&mut c, &group, 5);
    assert_eq!(partition_count(&mut c, "__consumer_offsets"), 2);
    assert_eq!(one(&mut c, "__consumer_offsets", 3, None, false), (0, None));
    // Until a restart the group stays where it was.
    commit(&mut c, &group, 6);
    assert_eq!(committed(&mut c, &group), 6);
    assert_eq!(b.terminate(), Some(0));
    b.launch();
    let mut c = b.connect();
    assert_eq!(committed(&mut c, &group), 6);
    // Now it writes to partition 0; its older records in partition 1 must not win at the next
    // start.
    commit(&mut c, &group, 9);
    b.kill9();
    b.launch();
    let mut c = b.connect();
    assert_eq!(committed(&mut c, &group), 9);
}
