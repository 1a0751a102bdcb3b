//! DeleteRecords over a socket against the real binary: every advertised version moves the
//! log start offset, Kafka's error codes for what it refuses, what consumers see afterwards
//! (ListOffsets EARLIEST, Fetch below the start), the segment files below the start gone from
//! the data dir, and the start surviving kill -9 and a clean restart
//! (`log-start-offset-checkpoint`).

mod common;

use common::{
    Client, TestBroker, create_topic_request, fetch_one, list_offset, produce_one, record_batch,
};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "dr";

fn create(c: &mut Client, topic: &str, configs: &[(&str, &str)]) {
    let r: CreateTopicsResponse = c.call(
        ApiKey::CreateTopics,
        7,
        &create_topic_request(topic, 1, 1, configs),
    );
    assert_eq!(r.topics[0].error_code, 0, "create {topic}");
}

/// DeleteRecords of one partition with a timeout of 5 s: (error code, low watermark).
fn delete_records(
    c: &mut Client,
    version: i16,
    topic: &str,
    partition: i32,
    offset: i64,
) -> (i16, i64) {
    delete_records_within(c, version, (topic, partition, offset), 5000)
}

fn delete_records_within(
    c: &mut Client,
    version: i16,
    (topic, partition, offset): (&str, i32, i64),
    timeout_ms: i32,
) -> (i16, i64) {
    let mut p = DeleteRecordsPartition::default();
    p.partition_index = partition;
    p.offset = offset;
    let mut t = DeleteRecordsTopic::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    t.partitions = vec![p];
    let mut r = DeleteRecordsRequest::default();
    r.topics = vec![t];
    r.timeout_ms = timeout_ms;
    let resp: DeleteRecordsResponse = c.call(ApiKey::DeleteRecords, version, &r);
    assert_eq!(resp.topics.len(), 1);
    assert_eq!(resp.topics[0].name.0.as_str(), topic);
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.partition_index, partition);
    (p.error_code, p.low_watermark)
}

/// Base offsets of the partition's segment files, in order.
fn segment_bases(b: &TestBroker, topic: &str) -> Vec<i64> {
    segment_bases_in(&b.data_dir(), topic)
}

/// Base offsets of the segment files of `topic`-0 in log dir `data`, in order.
fn segment_bases_in(data: &std::path::Path, topic: &str) -> Vec<i64> {
    let dir = data.join(format!("{topic}-0"));
    let mut v: Vec<i64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".log").and_then(|n| n.parse().ok())
        })
        .collect();
    v.sort();
    v
}

fn produce_records(c: &mut Client, topic: &str, n: usize) {
    let value = [b'v'; 60];
    for _ in 0..n {
        let r = produce_one(c, topic, 0, record_batch(&[&value], 1_700_000_000_000));
        assert_eq!(r.error_code, 0);
    }
}

fn earliest(c: &mut Client, topic: &str) -> i64 {
    let (err, offset) = list_offset(c, topic, 0, -2);
    assert_eq!(err, 0);
    offset
}

fn fetch_error(c: &mut Client, topic: &str, offset: i64) -> i16 {
    fetch_one(c, 12, topic, uuid::Uuid::nil(), 0, offset).responses[0].partitions[0].error_code
}

#[test]
fn every_version_moves_the_log_start_and_it_survives_restarts() {
    let mut b = TestBroker::start(&[]);
    let mut c = b.connect();
    create(&mut c, TOPIC, &[("internal.segment.bytes", "1024")]);
    produce_records(&mut c, TOPIC, 40);
    let bases = segment_bases(&b, TOPIC);
    assert!(bases.len() >= 4, "several segments: {bases:?}");
    assert!(
        bases[2] > bases[1] + 3,
        "room for 3 starts in a segment: {bases:?}"
    );

    // Each version moves the start; inside a segment, not at a boundary.
    let mut start = 0;
    for v in 0..=2 {
        let target = bases[1] + 1 + v as i64;
        assert_eq!(
            delete_records(&mut c, v, TOPIC, 0, target),
            (0, target),
            "v{v}"
        );
        start = target;
        assert_eq!(earliest(&mut c, TOPIC), start, "v{v}");
    }
    // An offset below the start changes nothing and answers the start.
    assert_eq!(delete_records(&mut c, 2, TOPIC, 0, 1), (0, start));
    // The first segment is wholly below the start: gone. The one holding the start stays.
    assert_eq!(segment_bases(&b, TOPIC), bases[1..]);
    assert_eq!(
        fetch_error(&mut c, TOPIC, start - 1),
        ResponseError::OffsetOutOfRange.code()
    );
    assert_eq!(fetch_error(&mut c, TOPIC, start), 0);

    // kill -9: the start is in the checkpoint written before the answer.
    let checkpoint = b.data_dir().join("log-start-offset-checkpoint");
    let text = std::fs::read_to_string(&checkpoint).unwrap();
    assert_eq!(text, format!("0\n1\n{TOPIC} 0 {start}\n"));
    b.kill9();
    b.launch();
    let mut c = b.connect();
    assert_eq!(earliest(&mut c, TOPIC), start, "after kill -9");
    assert_eq!(
        fetch_error(&mut c, TOPIC, start - 1),
        ResponseError::OffsetOutOfRange.code()
    );

    // -1 is the high watermark: everything goes but the active segment.
    let (_, hw) = list_offset(&mut c, TOPIC, 0, -1);
    assert_eq!(hw, 40);
    assert_eq!(delete_records(&mut c, 2, TOPIC, 0, -1), (0, hw));
    assert_eq!(segment_bases(&b, TOPIC).len(), 1);
    assert_eq!(earliest(&mut c, TOPIC), hw);
    produce_records(&mut c, TOPIC, 1);
    drop(c);
    assert_eq!(b.terminate(), Some(0));
    b.launch();
    let mut c = b.connect();
    assert_eq!(earliest(&mut c, TOPIC), hw, "after a clean restart");
    assert_eq!(list_offset(&mut c, TOPIC, 0, -1), (0, hw + 1));
}

#[test]
fn refusals_have_kafkas_error_codes() {
    let b = TestBroker::start(&[]);
    let mut c = b.connect();
    create(&mut c, TOPIC, &[]);
    create(&mut c, "compacted", &[("cleanup.policy", "compact")]);
    create(&mut c, "both", &[("cleanup.policy", "compact,delete")]);
    produce_records(&mut c, TOPIC, 3);
    for v in 0..=2 {
        let out_of_range = ResponseError::OffsetOutOfRange.code();
        assert_eq!(delete_records(&mut c, v, TOPIC, 0, 4), (out_of_range, -1));
        assert_eq!(delete_records(&mut c, v, TOPIC, 0, -2), (out_of_range, -1));
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        assert_eq!(delete_records(&mut c, v, "nope", 0, 0), (unknown, -1));
        assert_eq!(delete_records(&mut c, v, TOPIC, 1, 0), (unknown, -1));
        let policy = ResponseError::PolicyViolation.code();
        assert_eq!(delete_records(&mut c, v, "compacted", 0, 0), (policy, -1));
        assert_eq!(delete_records(&mut c, v, "both", 0, 0), (0, 0));
    }
    // Up to the high watermark exactly is allowed.
    assert_eq!(delete_records(&mut c, 2, TOPIC, 0, 3), (0, 3));
    assert_eq!(earliest(&mut c, TOPIC), 3);
}

/// In a cluster of three: the answer comes once every in-sync follower took the new start
/// (their segment files below it are gone by then), and a follower that stopped fetching
/// holds the low watermark back until the timeout (REQUEST_TIMED_OUT).
#[test]
fn in_a_cluster_the_answer_waits_for_the_followers() {
    use common::cluster::TestCluster;
    use std::time::Duration;
    let wait = Duration::from_secs(40);
    let mut c = TestCluster::start(3, &[]);
    let mut admin = c.connect(0);
    let req = create_topic_request(TOPIC, 1, 3, &[("internal.segment.bytes", "1024")]);
    let resp: CreateTopicsResponse = admin.call(ApiKey::CreateTopics, 7, &req);
    assert_eq!(resp.topics[0].error_code, 0, "{:?}", resp.topics[0]);
    let mut leader = -1;
    c.wait_for(wait, "an ISR of 3", |c| {
        (0..3).any(|i| match c.partition_state(i, TOPIC, 0) {
            Some((l, _, isr)) if l >= 0 && isr.len() == 3 => {
                leader = l;
                true
            }
            _ => false,
        })
    });
    let li = c.index_of(leader);
    let mut client = c.connect(li);
    c.wait_for(wait, "the leader serving", |_| {
        produce_one(&mut client, TOPIC, 0, record_batch(&[b"first"], 1)).error_code == 0
    });
    produce_records(&mut client, TOPIC, 40);
    let bases_on = |c: &TestCluster, i: usize| segment_bases_in(&c.node_dir(i).join("data"), TOPIC);
    c.wait_for(wait, "the followers hold every segment", |c| {
        (0..3).all(|i| bases_on(c, i) == bases_on(c, li))
    });
    let bases = bases_on(&c, li);
    let start = bases[1] + 1;
    assert_eq!(delete_records(&mut client, 2, TOPIC, 0, start), (0, start));
    // Answered: every follower's start reached it, so its segments below are gone already.
    for i in 0..3 {
        assert_eq!(bases_on(&c, i), bases[1..], "node {}", c.nodes[i].id);
    }

    // A follower killed stays in the ISR (replica.lag.time.max.ms, 30 s) and never reports.
    let fi = (li + 1) % 3;
    c.kill9(fi);
    let timed_out = ResponseError::RequestTimedOut.code();
    assert_eq!(
        delete_records_within(&mut client, 2, (TOPIC, 0, start + 1), 300),
        (timed_out, start)
    );
    // The leader moved anyway: consumers start at the new offset.
    assert_eq!(earliest(&mut client, TOPIC), start + 1);
}
