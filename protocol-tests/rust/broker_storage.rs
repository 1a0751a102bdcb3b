//! The broker's storage behaviour seen through the wire: LogAppendTime, segment roll and
//! size retention on disk, fetch errors, topic admin errors, and recovery of a torn tail
//! after kill -9.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{TestBroker, record_batch};
use kafka_protocol::messages::{ApiKey, CreateTopicsResponse, FetchResponse};

fn create(
    c: &mut common::Client,
    topic: &str,
    partitions: i32,
    rf: i16,
    configs: &[(&str, &str)],
    validate_only: bool,
) -> CreateTopicsResponse {
    let mut r = common::create_topic_request(topic, partitions, rf, configs);
    r.validate_only = validate_only;
    c.call(ApiKey::CreateTopics, 7, &r)
}

fn produce(c: &mut common::Client, topic: &str, batch: Bytes) -> (i16, i64, i64) {
    let p = common::produce_one(c, topic, 0, batch);
    (p.error_code, p.base_offset, p.log_append_time_ms)
}

fn fetch(
    c: &mut common::Client,
    version: i16,
    topic: &str,
    id: uuid::Uuid,
    offset: i64,
) -> FetchResponse {
    common::fetch_one(c, version, topic, id, 0, offset)
}

fn earliest(c: &mut common::Client, topic: &str) -> i64 {
    common::list_offset(c, topic, 0, -2).1
}

#[test]
fn log_append_time_topic_stamps_batches() {
    let b = TestBroker::start(&[]);
    let mut c = b.connect();
    let r = create(
        &mut c,
        "lat",
        1,
        1,
        &[("message.timestamp.type", "LogAppendTime")],
        false,
    );
    assert_eq!(r.topics[0].error_code, 0);
    // Success carries a null message, as Kafka's.
    assert_eq!(r.topics[0].error_message, None);
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let (err, base, append_time) = produce(&mut c, "lat", record_batch(&[b"a", b"b"], 1000));
    assert_eq!((err, base), (0, 0));
    assert!(append_time >= before, "log_append_time_ms {append_time}");
    let f = fetch(&mut c, 12, "lat", uuid::Uuid::nil(), 0);
    let recs = f.responses[0].partitions[0].records.clone().unwrap();
    // attributes bit 3 = LogAppendTime; maxTimestamp = the append time; CRC still valid.
    let attributes = i16::from_be_bytes([recs[21], recs[22]]);
    assert_ne!(attributes & 0x08, 0);
    let max_ts = i64::from_be_bytes(recs[35..43].try_into().unwrap());
    assert_eq!(max_ts, append_time);
    let crc = u32::from_be_bytes(recs[17..21].try_into().unwrap());
    let end = 12 + i32::from_be_bytes(recs[8..12].try_into().unwrap()) as usize;
    assert_eq!(crc, crc32c::crc32c(&recs[21..end]));
}

#[test]
fn segments_roll_and_size_retention_advances_log_start() {
    let b = TestBroker::start(&["log.retention.check.interval.ms=100"]);
    let mut c = b.connect();
    let r = create(
        &mut c,
        "roll",
        1,
        1,
        &[
            ("internal.segment.bytes", "2000"),
            ("retention.bytes", "4000"),
        ],
        false,
    );
    assert_eq!(r.topics[0].error_code, 0);
    let value = [7u8; 400];
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for i in 0..40 {
        let (err, base, _) = produce(&mut c, "roll", record_batch(&[&value], now + i));
        assert_eq!((err, base), (0, i));
    }
    let dir = b.data_dir().join("roll-0");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let start = earliest(&mut c, "roll");
        if start > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "retention never deleted a segment"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let start = earliest(&mut c, "roll");
    let mut logs: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".log"))
        .collect();
    logs.sort();
    assert!(logs.len() >= 2, "{logs:?}");
    // Kafka's naming: 20-digit base offset; the first remaining segment starts at log start.
    assert_eq!(logs[0], format!("{start:020}.log"));
    for l in &logs {
        let stem = l.trim_end_matches(".log");
        assert!(dir.join(format!("{stem}.index")).exists());
        assert!(dir.join(format!("{stem}.timeindex")).exists());
    }
    // Below log start: OFFSET_OUT_OF_RANGE; at log start: data.
    let f = fetch(&mut c, 12, "roll", uuid::Uuid::nil(), 0);
    assert_eq!(f.responses[0].partitions[0].error_code, 1);
    let f = fetch(&mut c, 12, "roll", uuid::Uuid::nil(), start);
    assert_eq!(f.responses[0].partitions[0].error_code, 0);
    assert_eq!(f.responses[0].partitions[0].log_start_offset, start);
    assert!(
        !f.responses[0].partitions[0]
            .records
            .clone()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn fetch_errors_and_topic_ids() {
    let b = TestBroker::start(&[]);
    let mut c = b.connect();
    let r = create(&mut c, "ids", 1, 1, &[], false);
    let id = r.topics[0].topic_id;
    assert!(!id.is_nil());
    produce(&mut c, "ids", record_batch(&[b"x"], 5));
    let f = fetch(&mut c, 13, "", id, 0);
    assert_eq!(f.responses[0].partitions[0].error_code, 0);
    assert_eq!(f.responses[0].partitions[0].high_watermark, 1);
    let f = fetch(&mut c, 13, "", uuid::Uuid::new_v4(), 0);
    assert_eq!(
        f.responses[0].partitions[0].error_code, 100,
        "UNKNOWN_TOPIC_ID"
    );
    let f = fetch(&mut c, 12, "ids", uuid::Uuid::nil(), 2);
    assert_eq!(
        f.responses[0].partitions[0].error_code, 1,
        "OFFSET_OUT_OF_RANGE"
    );
    let f = fetch(&mut c, 12, "nope", uuid::Uuid::nil(), 0);
    assert_eq!(
        f.responses[0].partitions[0].error_code, 3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
}

#[test]
fn create_topics_errors() {
    let b = TestBroker::start(&["num.partitions=4"]);
    let mut c = b.connect();
    let r = create(&mut c, "rf3", 1, 3, &[], false);
    assert_eq!(r.topics[0].error_code, 38, "INVALID_REPLICATION_FACTOR");
    let r = create(&mut c, "bad cfg", 1, 1, &[], false);
    assert_eq!(r.topics[0].error_code, 17, "INVALID_TOPIC_EXCEPTION");
    let r = create(&mut c, "cfg", 1, 1, &[("no.such.config", "1")], false);
    assert_eq!(r.topics[0].error_code, 40, "INVALID_CONFIG");
    let r = create(&mut c, "dflt", -1, -1, &[], true);
    assert_eq!((r.topics[0].error_code, r.topics[0].num_partitions), (0, 4));
    assert!(
        !b.data_dir().join("dflt-0").exists(),
        "validate_only creates nothing"
    );
    let r = create(&mut c, "dflt", -1, -1, &[], false);
    assert_eq!((r.topics[0].error_code, r.topics[0].num_partitions), (0, 4));
    let r = create(&mut c, "dflt", 1, 1, &[], false);
    assert_eq!(r.topics[0].error_code, 36, "TOPIC_ALREADY_EXISTS");
}

#[test]
fn torn_tail_is_truncated_after_kill9() {
    let mut b = TestBroker::start(&[]);
    let mut c = b.connect();
    create(&mut c, "torn", 1, 1, &[], false);
    for i in 0..10 {
        assert_eq!(
            produce(&mut c, "torn", record_batch(&[b"value-value-value"], i)).1,
            i
        );
    }
    drop(c);
    b.kill9();
    // Tear the last batch in half, as a crash in the middle of a write would.
    let log = b.data_dir().join("torn-0").join("00000000000000000000.log");
    let len = std::fs::metadata(&log).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    f.set_len(len - 20).unwrap();
    drop(f);
    b.launch();
    let mut c = b.connect();
    let f = fetch(&mut c, 12, "torn", uuid::Uuid::nil(), 0);
    let p = &f.responses[0].partitions[0];
    assert_eq!(p.high_watermark, 9, "the torn 10th batch is gone");
    // The next produce continues at the truncated end.
    assert_eq!(produce(&mut c, "torn", record_batch(&[b"after"], 99)).1, 9);
}
