//! Valid request frames (the bytes after the size prefix) built with kafka-protocol's
//! encoders: the seed corpus of both targets. Written to fuzz/corpus/ by tests/gen_corpus.rs.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, BrokerId, CreateTopicsRequest, DeleteTopicsRequest, FetchRequest,
    ListOffsetsRequest, MetadataRequest, ProduceRequest, RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn topic(x: &str) -> TopicName {
    TopicName(s(x))
}

/// Header + body for `api` at `version`.
pub fn frame<T: Encodable>(api: ApiKey, version: i16, correlation_id: i32, body: &T) -> Vec<u8> {
    let mut buf = BytesMut::new();
    let mut h = RequestHeader::default();
    h.request_api_key = api as i16;
    h.request_api_version = version;
    h.correlation_id = correlation_id;
    h.client_id = Some(s("fuzz-seed"));
    h.encode(&mut buf, api.request_header_version(version))
        .expect("header encodes");
    body.encode(&mut buf, version).expect("body encodes");
    buf.to_vec()
}

/// A v2 record batch of `n` uncompressed records (the encoder writes the CRC-32C).
pub fn record_batch(n: usize) -> Bytes {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // Base sequence -1 (not idempotent); the encoder keeps one batch while
            // offset - sequence stays constant.
            sequence: i as i32 - 1,
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("value number {i}"))),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("record batch encodes");
    buf.freeze()
}

pub fn api_versions_v3() -> Vec<u8> {
    let mut r = ApiVersionsRequest::default();
    r.client_software_name = s("sluice-fuzz");
    r.client_software_version = s("0.0.0");
    frame(ApiKey::ApiVersions, 3, 1, &r)
}

pub fn metadata_v12() -> Vec<u8> {
    let mut t = MetadataRequestTopic::default();
    t.name = Some(topic("t"));
    let mut r = MetadataRequest::default();
    r.topics = Some(vec![t]);
    r.allow_auto_topic_creation = false;
    frame(ApiKey::Metadata, 12, 2, &r)
}

pub fn metadata_v1_all() -> Vec<u8> {
    let mut r = MetadataRequest::default();
    r.topics = None;
    frame(ApiKey::Metadata, 1, 3, &r)
}

pub fn produce_v9(partition: i32, records: usize) -> Vec<u8> {
    let mut p = PartitionProduceData::default();
    p.index = partition;
    p.records = Some(record_batch(records));
    let mut t = TopicProduceData::default();
    t.name = topic("t");
    t.partition_data = vec![p];
    let mut r = ProduceRequest::default();
    r.acks = -1;
    r.timeout_ms = 30_000;
    r.topic_data = vec![t];
    frame(ApiKey::Produce, 9, 4, &r)
}

fn fetch(version: i16, offset: i64) -> Vec<u8> {
    let partitions = (0..3)
        .map(|i| {
            let mut p = FetchPartition::default();
            p.partition = i;
            p.current_leader_epoch = -1;
            p.fetch_offset = offset;
            p.log_start_offset = -1;
            p.partition_max_bytes = 1 << 20;
            p
        })
        .collect();
    let mut t = FetchTopic::default();
    t.topic = topic("t");
    t.partitions = partitions;
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_wait_ms = 500;
    r.min_bytes = 1;
    r.max_bytes = 50 << 20;
    r.session_id = 0;
    r.session_epoch = -1;
    r.topics = vec![t];
    frame(ApiKey::Fetch, version, 5, &r)
}

pub fn fetch_v12() -> Vec<u8> {
    fetch(12, 0)
}

pub fn fetch_v4() -> Vec<u8> {
    fetch(4, 0)
}

pub fn list_offsets_v7(timestamp: i64) -> Vec<u8> {
    let partitions = (0..3)
        .map(|i| {
            let mut p = ListOffsetsPartition::default();
            p.partition_index = i;
            p.current_leader_epoch = -1;
            p.timestamp = timestamp;
            p
        })
        .collect();
    let mut t = ListOffsetsTopic::default();
    t.name = topic("t");
    t.partitions = partitions;
    let mut r = ListOffsetsRequest::default();
    r.replica_id = BrokerId(-1);
    r.topics = vec![t];
    frame(ApiKey::ListOffsets, 7, 6, &r)
}

pub fn create_topics_v7(name: &str, partitions: i32) -> Vec<u8> {
    let mut c = CreatableTopicConfig::default();
    c.name = s("retention.ms");
    c.value = Some(s("600000"));
    let mut t = CreatableTopic::default();
    t.name = topic(name);
    t.num_partitions = partitions;
    t.replication_factor = 1;
    t.configs = vec![c];
    let mut r = CreateTopicsRequest::default();
    r.topics = vec![t];
    r.timeout_ms = 30_000;
    frame(ApiKey::CreateTopics, 7, 7, &r)
}

pub fn delete_topics_v6(name: &str) -> Vec<u8> {
    let mut t = DeleteTopicState::default();
    t.name = Some(topic(name));
    let mut r = DeleteTopicsRequest::default();
    r.topics = vec![t];
    r.timeout_ms = 30_000;
    frame(ApiKey::DeleteTopics, 6, 8, &r)
}

/// Single request frames, by name.
pub fn frames() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("api_versions_v3", api_versions_v3()),
        ("metadata_v12", metadata_v12()),
        ("metadata_v1_all", metadata_v1_all()),
        ("produce_v9", produce_v9(0, 3)),
        ("fetch_v12", fetch_v12()),
        ("fetch_v4", fetch_v4()),
        ("list_offsets_v7_latest", list_offsets_v7(-1)),
        ("list_offsets_v7_earliest", list_offsets_v7(-2)),
        ("list_offsets_v7_max_ts", list_offsets_v7(-3)),
        ("create_topics_v7", create_topics_v7("u", 2)),
        ("delete_topics_v6", delete_topics_v6("u")),
    ]
}

/// Inputs of the `dispatch` target: each frame alone, plus sequences that depend on state.
pub fn dispatch_inputs() -> Vec<(&'static str, Vec<u8>)> {
    let mut out: Vec<(&'static str, Vec<u8>)> = frames()
        .into_iter()
        .map(|(n, f)| (n, crate::join_frames(&[f])))
        .collect();
    out.push((
        "seq_produce_fetch_list",
        crate::join_frames(&[
            produce_v9(0, 3),
            produce_v9(1, 1),
            fetch_v12(),
            fetch_v4(),
            list_offsets_v7(-1),
            list_offsets_v7(1_700_000_000_001),
        ]),
    ));
    out.push((
        "seq_create_metadata_delete",
        crate::join_frames(&[
            create_topics_v7("u", 2),
            metadata_v1_all(),
            delete_topics_v6("u"),
            metadata_v12(),
        ]),
    ));
    out
}
