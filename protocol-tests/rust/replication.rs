//! The broker side of replication on one node, over the wire: fetches from a replica id,
//! acks=all with min.insync.replicas, OffsetForLeaderEpoch, and the log dirs' high watermark
//! and recovery point checkpoint files across SIGTERM and kill -9.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{Client, TestBroker, record_batch};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::EpochEndOffset;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, CreateTopicsResponse, FetchRequest,
    FetchResponse, MetadataRequest, MetadataResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const UNKNOWN_LEADER_EPOCH: i16 = 75;
const FENCED_LEADER_EPOCH: i16 = 74;
const OFFSET_OUT_OF_RANGE: i16 = 1;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// Creates a topic; returns its id.
fn create(c: &mut Client, topic: &str, partitions: i32, configs: &[(&str, &str)]) -> uuid::Uuid {
    let r = common::create_topic_request(topic, partitions, 1, configs);
    let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &r);
    assert_eq!(resp.topics[0].error_code, 0, "{:?}", resp.topics[0]);
    resp.topics[0].topic_id
}

/// Produces one batch to `topic`-`partition`; returns (error, base offset).
fn produce(
    c: &mut Client,
    topic: &str,
    partition: i32,
    acks: i16,
    timeout_ms: i32,
    batch: Bytes,
) -> (i16, i64) {
    let mut pd = PartitionProduceData::default();
    pd.index = partition;
    pd.records = Some(batch);
    let mut td = TopicProduceData::default();
    td.name = name(topic);
    td.partition_data = vec![pd];
    let mut r = ProduceRequest::default();
    r.acks = acks;
    r.timeout_ms = timeout_ms;
    r.topic_data = vec![td];
    let resp: ProduceResponse = c.call(ApiKey::Produce, 9, &r);
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// What a Fetch asks of partition 0 of `topic`.
struct Ask {
    version: i16,
    /// Names the topic from v13.
    topic_id: uuid::Uuid,
    replica: i32,
    offset: i64,
    current_leader_epoch: i32,
    last_fetched_epoch: i32,
}

fn fetch(c: &mut Client, topic: &str, a: &Ask) -> PartitionData {
    let mut fp = FetchPartition::default();
    fp.partition = 0;
    fp.fetch_offset = a.offset;
    fp.partition_max_bytes = 1 << 20;
    fp.current_leader_epoch = a.current_leader_epoch;
    if a.version >= 12 {
        fp.last_fetched_epoch = a.last_fetched_epoch;
    }
    let mut ft = FetchTopic::default();
    if a.version >= 13 {
        ft.topic_id = a.topic_id;
    } else {
        ft.topic = name(topic);
    }
    ft.partitions = vec![fp];
    let mut r = FetchRequest::default();
    r.max_wait_ms = 0;
    r.min_bytes = 0;
    r.max_bytes = 1 << 20;
    r.topics = vec![ft];
    if a.version >= 15 {
        let mut rs = ReplicaState::default();
        rs.replica_id = BrokerId(a.replica);
        rs.replica_epoch = if a.replica >= 0 { 1 } else { -1 };
        r.replica_state = rs;
    } else {
        r.replica_id = BrokerId(a.replica);
    }
    let resp: FetchResponse = c.call(ApiKey::Fetch, a.version, &r);
    assert_eq!(resp.error_code, 0);
    resp.responses[0].partitions[0].clone()
}

fn latest(c: &mut Client, topic: &str, partition: i32) -> i64 {
    let (error, offset) = common::list_offset(c, topic, partition, -1);
    assert_eq!(error, 0);
    offset
}

#[test]
fn fetches_from_replica_ids_that_are_not_followers_are_refused() {
    let b = TestBroker::start(&["node.id=1"]);
    let mut c = b.connect();
    let topic_id = create(&mut c, "rf", 1, &[]);
    for i in 0..3 {
        assert_eq!(
            produce(&mut c, "rf", 0, -1, 5000, record_batch(&[b"v"], i)),
            (0, i)
        );
    }
    let ask = |version, replica, current_leader_epoch| Ask {
        version,
        topic_id,
        replica,
        offset: 0,
        current_leader_epoch,
        last_fetched_epoch: -1,
    };
    for v in [4, 9, 12, 14, 15, 16, 17] {
        // Broker 2 is no replica of rf-0, nor is this broker its own follower. Without a
        // leader epoch in the fetch (or before v9): NOT_LEADER_OR_FOLLOWER.
        for replica in [2, 1] {
            let p = fetch(&mut c, "rf", &ask(v, replica, -1));
            assert_eq!(
                p.error_code, NOT_LEADER_OR_FOLLOWER,
                "v{v} replica {replica}"
            );
            assert_eq!(p.high_watermark, -1);
            assert!(p.records.as_ref().is_none_or(|r| r.is_empty()));
        }
        if v >= 9 {
            let p = fetch(&mut c, "rf", &ask(v, 2, 0));
            assert_eq!(p.error_code, UNKNOWN_LEADER_EPOCH, "v{v}");
        }
        // The consumer's fetch is unchanged: everything below the high watermark.
        let p = fetch(&mut c, "rf", &ask(v, -1, if v >= 9 { 0 } else { -1 }));
        assert_eq!(p.error_code, 0, "v{v}");
        assert_eq!(p.high_watermark, 3);
        assert!(p.records.as_ref().is_some_and(|r| !r.is_empty()));
    }
}

#[test]
fn fetches_naming_their_last_epoch_get_the_divergence() {
    let b = TestBroker::start(&[]);
    let mut c = b.connect();
    create(&mut c, "div", 1, &[]);
    for i in 0..4 {
        produce(&mut c, "div", 0, 1, 5000, record_batch(&[b"v"], i));
    }
    let ask = |offset, last_fetched_epoch| Ask {
        version: 12,
        topic_id: uuid::Uuid::nil(),
        replica: -1,
        offset,
        current_leader_epoch: 0,
        last_fetched_epoch,
    };
    // A fetcher whose log ended in epoch 0 at offset 2 agrees with this log.
    let p = fetch(&mut c, "div", &ask(2, 0));
    assert_eq!((p.error_code, p.diverging_epoch.epoch), (0, -1));
    assert!(p.records.as_ref().is_some_and(|r| !r.is_empty()));
    // One whose epoch 0 went on past offset 4 must truncate to 4: no records, no error.
    let p = fetch(&mut c, "div", &ask(9, 0));
    assert_eq!(p.error_code, 0);
    assert_eq!(
        (p.diverging_epoch.epoch, p.diverging_epoch.end_offset),
        (0, 4)
    );
    assert!(p.records.as_ref().is_none_or(|r| r.is_empty()));
    // An epoch this log never had: OFFSET_OUT_OF_RANGE, as Kafka answers.
    let p = fetch(&mut c, "div", &ask(2, 7));
    assert_eq!(p.error_code, OFFSET_OUT_OF_RANGE);
}

#[test]
fn acks_all_with_min_insync_above_the_replication_factor() {
    let b = TestBroker::start(&["min.insync.replicas=3"]);
    let mut c = b.connect();
    // The topic's min.insync.replicas=2 and the broker default 3 are both capped at the
    // replication factor of 1, as in Kafka: acks=all is answered at once.
    create(&mut c, "misr", 1, &[("min.insync.replicas", "2")]);
    create(&mut c, "misr-default", 1, &[]);
    for topic in ["misr", "misr-default"] {
        assert_eq!(
            produce(&mut c, topic, 0, -1, 5000, record_batch(&[b"a"], 1)),
            (0, 0)
        );
        assert_eq!(
            produce(&mut c, topic, 0, 1, 5000, record_batch(&[b"b"], 2)),
            (0, 1)
        );
        // A zero timeout still gets the answer: the high watermark passed at the append.
        assert_eq!(
            produce(&mut c, topic, 0, -1, 0, record_batch(&[b"c"], 3)),
            (0, 2)
        );
        assert_eq!(latest(&mut c, topic, 0), 3);
    }
}

fn epoch_query(
    c: &mut Client,
    version: i16,
    topic: &str,
    partition: i32,
    current: i32,
    epoch: i32,
) -> EpochEndOffset {
    let mut p = OffsetForLeaderPartition::default();
    p.partition = partition;
    p.current_leader_epoch = current;
    p.leader_epoch = epoch;
    let mut t = OffsetForLeaderTopic::default();
    t.topic = name(topic);
    t.partitions = vec![p];
    let mut r = OffsetForLeaderEpochRequest::default();
    if version >= 3 {
        r.replica_id = BrokerId(-1);
    }
    r.topics = vec![t];
    let resp: OffsetForLeaderEpochResponse = c.call(ApiKey::OffsetForLeaderEpoch, version, &r);
    assert_eq!(resp.topics.len(), 1);
    assert_eq!(resp.topics[0].topic.0.as_str(), topic);
    let got = resp.topics[0].partitions[0].clone();
    assert_eq!(got.partition, partition);
    got
}

fn answer(e: &EpochEndOffset) -> (i16, i32, i64) {
    (e.error_code, e.leader_epoch, e.end_offset)
}

/// The leader epoch of `topic`-`partition` as Metadata v12 reports it, as a client learns it.
fn leader_epoch(c: &mut Client, topic: &str, partition: i32) -> i32 {
    let mut t = kafka_protocol::messages::metadata_request::MetadataRequestTopic::default();
    t.name = Some(name(topic));
    let mut r = MetadataRequest::default();
    r.topics = Some(vec![t]);
    let md: MetadataResponse = c.call(ApiKey::Metadata, 12, &r);
    assert_eq!(md.topics[0].error_code, 0);
    let p = md.topics[0]
        .partitions
        .iter()
        .find(|p| p.partition_index == partition)
        .expect("the partition in Metadata");
    assert_eq!(p.error_code, 0);
    p.leader_epoch
}

/// After a restart: the epoch-0 answer again, asked at the partition's current leader epoch
/// (a one-voter node fences its replicas and elects them again at start-up, as KRaft does,
/// so the epoch may have moved on; a query naming an older one is then fenced).
fn epoch_zero_after_restart(c: &mut Client) {
    let current = leader_epoch(c, "ofle", 0);
    assert!(current >= 0, "leader epoch {current}");
    assert_eq!(answer(&epoch_query(c, 4, "ofle", 0, current, 0)), (0, 0, 5));
    if current > 0 {
        assert_eq!(
            answer(&epoch_query(c, 4, "ofle", 0, 0, 0)),
            (FENCED_LEADER_EPOCH, -1, -1)
        );
    }
}

#[test]
fn offset_for_leader_epoch_answers_from_the_epoch_cache() {
    let mut b = TestBroker::start(&[]);
    let mut c = b.connect();
    let v: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    let k = v
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::OffsetForLeaderEpoch as i16)
        .expect("OffsetForLeaderEpoch advertised");
    assert_eq!((k.min_version, k.max_version), (2, 4));
    create(&mut c, "ofle", 2, &[]);
    for version in 2..=4 {
        // An empty partition: its leader's epoch starts at 0.
        assert_eq!(
            answer(&epoch_query(&mut c, version, "ofle", 1, -1, 0)),
            (0, 0, 0)
        );
    }
    for i in 0..5 {
        produce(&mut c, "ofle", 0, -1, 5000, record_batch(&[b"x"], i));
    }
    for version in 2..=4 {
        let q = |c: &mut Client, p, current, epoch| {
            answer(&epoch_query(c, version, "ofle", p, current, epoch))
        };
        assert_eq!(q(&mut c, 0, -1, 0), (0, 0, 5));
        assert_eq!(q(&mut c, 0, 0, 0), (0, 0, 5));
        // An epoch above every epoch of the log: UNDEFINED, no error.
        assert_eq!(q(&mut c, 0, -1, 3), (0, -1, -1));
        assert_eq!(q(&mut c, 0, -1, -1), (0, -1, -1));
        // The caller knows a later leader epoch than this broker.
        assert_eq!(q(&mut c, 0, 1, 0), (UNKNOWN_LEADER_EPOCH, -1, -1));
        assert_eq!(q(&mut c, 2, -1, 0), (UNKNOWN_TOPIC_OR_PARTITION, -1, -1));
        assert_eq!(q(&mut c, -1, -1, 0), (UNKNOWN_TOPIC_OR_PARTITION, -1, -1));
        let unknown = answer(&epoch_query(&mut c, version, "no-such", 0, -1, 0));
        assert_eq!(unknown, (UNKNOWN_TOPIC_OR_PARTITION, -1, -1));
    }
    // The answers survive a clean restart and a kill -9.
    drop(c);
    assert_eq!(b.terminate(), Some(0));
    b.launch();
    let mut c = b.connect();
    epoch_zero_after_restart(&mut c);
    drop(c);
    b.kill9();
    b.launch();
    let mut c = b.connect();
    epoch_zero_after_restart(&mut c);
    let current = leader_epoch(&mut c, "ofle", 1);
    assert_eq!(
        answer(&epoch_query(&mut c, 4, "ofle", 1, current, 0)),
        (0, 0, 0)
    );
}

/// Reads a checkpoint file: (topic, partition) -> offset; None while it does not exist.
fn checkpoint(path: &Path) -> Option<std::collections::BTreeMap<(String, i32), i64>> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("0"),
        "version line of {}",
        path.display()
    );
    let n: usize = lines.next().unwrap().parse().unwrap();
    let entries: std::collections::BTreeMap<(String, i32), i64> = lines
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 3, "{l:?}");
            (
                (f[0].to_string(), f[1].parse().unwrap()),
                f[2].parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(entries.len(), n);
    Some(entries)
}

/// Polls until `path` holds `want` for every key of `want` (bounded: 10 s).
fn wait_for_checkpoint(path: &Path, want: &[((&str, i32), i64)]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = checkpoint(path).unwrap_or_default();
        if want
            .iter()
            .all(|((t, p), o)| got.get(&(t.to_string(), *p)) == Some(o))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} never held {want:?}; it holds {got:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn checkpoints_are_written_and_bound_recovery_after_kill9() {
    let mut b = TestBroker::start(&[
        "replica.high.watermark.checkpoint.interval.ms=100",
        "log.flush.offset.checkpoint.interval.ms=100",
    ]);
    let dir = b.data_dir();
    let (hw_file, rp_file) = (
        dir.join("replication-offset-checkpoint"),
        dir.join("recovery-point-offset-checkpoint"),
    );
    let mut c = b.connect();
    // Small segments: ten batches of ~1.1 KB roll every two or three batches.
    create(&mut c, "cp", 2, &[("internal.segment.bytes", "2500")]);
    let value = vec![b'v'; 1000];
    for i in 0..10 {
        produce(&mut c, "cp", 0, -1, 5000, record_batch(&[&value], i));
    }
    produce(&mut c, "cp", 1, -1, 5000, record_batch(&[b"one"], 0));
    wait_for_checkpoint(&hw_file, &[(("cp", 0), 10), (("cp", 1), 1)]);
    // The recovery point is where the active segment starts: rolled segments are flushed.
    let part = dir.join("cp-0");
    let mut bases: Vec<i64> = std::fs::read_dir(&part)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            n.strip_suffix(".log").map(|b| b.parse().unwrap())
        })
        .collect();
    bases.sort();
    assert!(bases.len() >= 3, "segments {bases:?}");
    let active = *bases.last().unwrap();
    wait_for_checkpoint(&rp_file, &[(("cp", 0), active)]);

    // kill -9, then corrupt a byte in the middle of the first segment, below the recovery
    // point: recovery starts at the checkpointed recovery point and never reads it.
    drop(c);
    b.kill9();
    let first = part.join(format!("{:020}.log", bases[0]));
    let len = std::fs::metadata(&first).unwrap().len();
    let mut bytes = std::fs::read(&first).unwrap();
    let at = (len as usize) * 3 / 4;
    bytes[at] ^= 0xff;
    std::fs::write(&first, &bytes).unwrap();
    b.launch();
    let mut c = b.connect();
    assert_eq!(
        latest(&mut c, "cp", 0),
        10,
        "the old segment was not scanned"
    );
    assert_eq!(latest(&mut c, "cp", 1), 1);
    // A clean shutdown writes both files with every log's end.
    drop(c);
    assert_eq!(b.terminate(), Some(0));
    assert_eq!(
        checkpoint(&hw_file).unwrap(),
        [(("cp".to_string(), 0), 10), (("cp".to_string(), 1), 1)].into()
    );
    assert_eq!(checkpoint(&rp_file).unwrap(), checkpoint(&hw_file).unwrap());

    // Without the recovery point file a crash recovery scans whole logs (as Kafka's does)
    // and finds the corrupt batch: the log ends before it.
    b.launch();
    b.kill9();
    std::fs::remove_file(&rp_file).unwrap();
    b.launch();
    let mut c = b.connect();
    let end = latest(&mut c, "cp", 0);
    assert!(
        end < 10,
        "recovery from 0 truncates at the corrupt batch (end {end})"
    );
    assert_eq!(latest(&mut c, "cp", 1), 1);
    // The truncated log takes appends again, and its checkpoint follows.
    let (err, base) = produce(&mut c, "cp", 0, -1, 5000, record_batch(&[b"after"], 99));
    assert_eq!((err, base), (0, end));
    wait_for_checkpoint(&hw_file, &[(("cp", 0), end + 1)]);
}
