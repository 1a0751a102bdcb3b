//! Framing and connection behaviour of the real binary: pipelined requests answered in order,
//! acks=0 unanswered, frames cut anywhere across reads, bad frames close only their
//! connection, ApiVersions fallback, clean shutdown on SIGTERM.

mod common;

use std::io::Write;

use bytes::BufMut;
use common::{Client, TestBroker, record_batch};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

fn produce_req(topic: &str, acks: i16, values: &[&[u8]]) -> ProduceRequest {
    let mut pd = PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(record_batch(values, 1_700_000_000_000));
    let mut td = TopicProduceData::default();
    td.name = TopicName(StrBytes::from_string(topic.to_string()));
    td.partition_data = vec![pd];
    let mut r = ProduceRequest::default();
    r.acks = acks;
    r.timeout_ms = 5000;
    r.topic_data = vec![td];
    r
}

fn metadata_for(topic: &str) -> MetadataRequest {
    let mut t = MetadataRequestTopic::default();
    t.name = Some(TopicName(StrBytes::from_string(topic.to_string())));
    let mut m = MetadataRequest::default();
    m.topics = Some(vec![t]);
    m.allow_auto_topic_creation = true;
    m
}

#[test]
fn pipelined_requests_are_answered_in_order_and_acks0_gets_no_response() {
    let b = TestBroker::start(&[]);
    let mut c = b.connect();
    let md: MetadataResponse = c.call(ApiKey::Metadata, 12, &metadata_for("pipe"));
    assert_eq!(md.topics[0].error_code, 0);

    // Send many requests without reading: ApiVersions, acks=0 produce, acks=1 produce, ...
    let mut expected = Vec::new();
    for i in 0..50 {
        let corr = c.send(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        expected.push((corr, ApiKey::ApiVersions, 3));
        let _silent = c.send(ApiKey::Produce, 9, &produce_req("pipe", 0, &[b"zero"]));
        let v = format!("v{i}");
        let corr = c.send(ApiKey::Produce, 9, &produce_req("pipe", 1, &[v.as_bytes()]));
        expected.push((corr, ApiKey::Produce, 9));
    }
    let mut last_offset = -1;
    for (corr, key, version) in expected {
        let (got, mut body) = c.recv_frame(key, version).unwrap();
        assert_eq!(
            got, corr,
            "responses must come in request order, acks=0 skipped"
        );
        if key == ApiKey::Produce {
            use kafka_protocol::protocol::Decodable;
            let r = ProduceResponse::decode(&mut body, version).unwrap();
            let p = &r.responses[0].partition_responses[0];
            assert_eq!(p.error_code, 0);
            // Each acks=1 produce follows one acks=0 produce: offsets advance by 2.
            assert_eq!(p.base_offset, last_offset + 2);
            last_offset = p.base_offset;
        }
    }
}

#[test]
fn frames_split_anywhere_across_reads_are_reassembled() {
    let b = TestBroker::start(&[]);
    let mut c = b.connect();
    let md: MetadataResponse = c.call(ApiKey::Metadata, 12, &metadata_for("split"));
    assert_eq!(md.topics[0].error_code, 0);
    // A produce of a few KiB (larger than what an idle connection first reads) followed by
    // an ApiVersions, sent as one byte stream cut at every boundary that matters: inside the
    // size prefix, just past it, inside the body, and where the second frame starts.
    let value = vec![b'x'; 3000];
    let produce = Client::frame(
        ApiKey::Produce,
        9,
        7,
        &produce_req("split", 1, &[value.as_slice()]),
    );
    let versions = Client::frame(ApiKey::ApiVersions, 3, 8, &ApiVersionsRequest::default());
    let stream: Vec<u8> = [&produce[..], &versions[..]].concat();
    for cuts in [
        vec![1, 2, 3],
        vec![4],
        vec![5, 600, 2000],
        vec![produce.len() - 1, produce.len() + 2],
        vec![produce.len()],
    ] {
        let mut at = 0;
        for cut in cuts.into_iter().chain([stream.len()]) {
            c.send_raw(&stream[at..cut]).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
            at = cut;
        }
        let (corr, mut body) = c.recv_frame(ApiKey::Produce, 9).unwrap();
        assert_eq!(corr, 7);
        use kafka_protocol::protocol::Decodable;
        let r = ProduceResponse::decode(&mut body, 9).unwrap();
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
        let (corr, mut body) = c.recv_frame(ApiKey::ApiVersions, 3).unwrap();
        assert_eq!(corr, 8);
        let r = ApiVersionsResponse::decode(&mut body, 3).unwrap();
        assert_eq!(r.error_code, 0);
    }
}

#[test]
fn bad_frames_close_only_their_connection() {
    let b = TestBroker::start(&[]);
    // Frame shorter than a request header.
    let mut c = b.connect();
    c.send_raw(&[0, 0, 0, 2, 0, 18]).unwrap();
    assert!(c.is_closed());
    // Size over socket.request.max.bytes, and negative.
    for size in [0x7fff_ffffu32, 0xffff_ffff, 104_857_601] {
        let mut c = b.connect();
        c.send_raw(&size.to_be_bytes()).unwrap();
        assert!(c.is_closed(), "size {size:#x}");
    }
    // Unknown API key with a valid header.
    let mut c = b.connect();
    let mut f = bytes::BytesMut::new();
    f.put_i32(10);
    f.put_i16(9999);
    f.put_i16(0);
    f.put_i32(1);
    f.put_i16(-1);
    c.send_raw(&f).unwrap();
    assert!(c.is_closed());
    // Metadata v1 claiming 0x7fffffff topics in an 18-byte frame.
    let mut c = b.connect();
    let mut f = bytes::BytesMut::new();
    f.put_i32(14);
    f.put_i16(3);
    f.put_i16(1);
    f.put_i32(7);
    f.put_i16(-1);
    f.put_i32(0x7fff_ffff);
    assert_eq!(f.len(), 18);
    c.send_raw(&f).unwrap();
    assert!(c.is_closed());
    // Truncated body: Metadata v1 with a topic name cut short.
    let mut c = b.connect();
    let mut f = bytes::BytesMut::new();
    f.put_i32(0);
    f.put_i16(3);
    f.put_i16(1);
    f.put_i32(8);
    f.put_i16(-1);
    f.put_i32(1);
    f.put_i16(20);
    f.put_slice(b"abc");
    let n = (f.len() - 4) as i32;
    f[..4].copy_from_slice(&n.to_be_bytes());
    c.send_raw(&f).unwrap();
    assert!(c.is_closed());

    // The broker is alive and serves a good client.
    let mut c = b.connect();
    let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(r.error_code, 0);
}

/// A request frame with a v1 header (key, version, correlation id 9, client id) and `body`.
fn raw_frame(key: i16, version: i16, client_id: &str, body: &[u8]) -> Vec<u8> {
    let mut f = bytes::BytesMut::new();
    f.put_i32(0);
    f.put_i16(key);
    f.put_i16(version);
    f.put_i32(9);
    f.put_i16(client_id.len() as i16);
    f.put_slice(client_id.as_bytes());
    f.put_slice(body);
    let n = (f.len() - 4) as i32;
    f[..4].copy_from_slice(&n.to_be_bytes());
    f.to_vec()
}

/// The broker's log lines about the connection from `c` (found by its local port).
fn log_lines_for(b: &TestBroker, c: &Client) -> Vec<String> {
    let client = format!("client=127.0.0.1:{}", c.stream.local_addr().unwrap().port());
    b.log()
        .lines()
        .filter(|l| l.split_whitespace().any(|w| w == client))
        .map(str::to_string)
        .collect()
}

#[test]
fn unserved_requests_are_logged_at_warn_once_per_connection() {
    let b = TestBroker::start(&[]);
    // (frame, the fields its WARN line must carry besides the client address)
    let cases: Vec<(Vec<u8>, Vec<&str>)> = vec![
        (
            raw_frame(9999, 0, "unknown-key", &[]),
            vec![
                r#"client_id="unknown-key""#,
                "api_key=9999",
                "api=unknown",
                "version=0",
            ],
        ),
        (
            raw_frame(3, 99, "too-new", &[0, 0, 0, 0]),
            vec![
                r#"client_id="too-new""#,
                "api_key=3",
                "api=Metadata",
                "version=99",
            ],
        ),
        (
            // Metadata v1 claiming 0x7fffffff topics in a 4-byte body.
            raw_frame(3, 1, "undecodable", &[0x7f, 0xff, 0xff, 0xff]),
            vec![
                r#"client_id="undecodable""#,
                "api_key=3",
                "api=Metadata",
                "version=1",
            ],
        ),
        (
            // Produce v0: advertised, not served (acks=1, timeout, no topics).
            raw_frame(0, 0, "produce-v0", &[0, 1, 0, 0, 0x13, 0x88, 0, 0, 0, 0]),
            vec![
                r#"client_id="produce-v0""#,
                "api_key=0",
                "api=Produce",
                "version=0",
            ],
        ),
    ];
    for (frame, fields) in cases {
        let mut c = b.connect();
        // The bad request, then more bad frames behind it in the same write: one line only.
        let mut bytes = frame.clone();
        bytes.extend_from_slice(&frame);
        bytes.extend_from_slice(&raw_frame(9999, 1, "second", &[]));
        c.send_raw(&bytes).unwrap();
        assert!(c.is_closed());
        let lines = log_lines_for(&b, &c);
        assert_eq!(lines.len(), 1, "one line per connection: {lines:#?}");
        let line = &lines[0];
        assert!(line.contains(" WARN "), "{line}");
        assert!(line.contains("closing connection"), "{line}");
        for f in fields {
            assert!(
                line.split_whitespace().any(|w| w == f),
                "{f} missing: {line}"
            );
        }
    }

    // A frame size over socket.request.max.bytes: no header was read, the address is logged.
    let mut c = b.connect();
    c.send_raw(&0x7fff_ffffu32.to_be_bytes()).unwrap();
    assert!(c.is_closed());
    let lines = log_lines_for(&b, &c);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains(" WARN ") && lines[0].contains("frame size 2147483647"));

    // Nothing else was warned about.
    assert_eq!(b.log().matches(" WARN ").count(), 5, "{}", b.log());
}

#[test]
fn api_versions_above_range_answers_v0_with_full_list() {
    let b = TestBroker::start(&[]);
    let mut c = b.connect();
    let mut f = bytes::BytesMut::new();
    f.put_i32(0);
    f.put_i16(18);
    f.put_i16(99);
    f.put_i32(42);
    f.put_i16(-1);
    f.put_u8(0); // tagged fields of a v2 header; ignored
    let n = (f.len() - 4) as i32;
    f[..4].copy_from_slice(&n.to_be_bytes());
    c.stream.write_all(&f).unwrap();
    let (corr, r): (i32, ApiVersionsResponse) = c.recv(ApiKey::ApiVersions, 0);
    assert_eq!(corr, 42);
    assert_eq!(r.error_code, 35);
    let keys: Vec<i16> = r.api_keys.iter().map(|k| k.api_key).collect();
    for k in [0, 1, 2, 3, 18, 19, 20, 60] {
        assert!(keys.contains(&k), "key {k} listed");
    }
    let produce = r.api_keys.iter().find(|k| k.api_key == 0).unwrap();
    assert_eq!((produce.min_version, produce.max_version), (0, 13));
}

#[test]
fn sigterm_shuts_down_cleanly() {
    let mut b = TestBroker::start(&[]);
    let mut c = b.connect();
    let _: MetadataResponse = c.call(ApiKey::Metadata, 12, &metadata_for("t"));
    let _: ProduceResponse = c.call(ApiKey::Produce, 9, &produce_req("t", 1, &[b"x"]));
    let code = b.terminate();
    assert_eq!(code, Some(0));
    assert!(b.data_dir().join(".kafka_cleanshutdown").exists());
    // Restart: the data is there and the marker is consumed. (The listener is bound before
    // the logs are opened, so only an answered request shows the restart has finished.)
    b.launch();
    let mut c = b.connect();
    let md: MetadataResponse = c.call(ApiKey::Metadata, 12, &metadata_for("t"));
    assert_eq!(md.topics[0].partitions.len(), 1);
    assert!(!b.data_dir().join(".kafka_cleanshutdown").exists());
    let r: ProduceResponse = c.call(ApiKey::Produce, 9, &produce_req("t", 1, &[b"y"]));
    assert_eq!(r.responses[0].partition_responses[0].base_offset, 1);
}

#[test]
fn start_up_errors_name_the_key_or_address() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let dir = tempfile::tempdir().unwrap();
    let logdirs = format!("log.dirs={}", dir.path().display());
    let e = run(&["--override", &logdirs, "--override", "no.such.setting=1"]);
    assert!(e.contains("no.such.setting"), "{e}");
    let e = run(&["--override", &logdirs, "--override", "num.partitions=abc"]);
    assert!(e.contains("num.partitions"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let e = run(&[
        "--override",
        &logdirs,
        "--override",
        &format!("listeners=PLAINTEXT://127.0.0.1:{port}"),
    ]);
    assert!(e.contains(&format!("127.0.0.1:{port}")), "{e}");
}

#[test]
fn describe_cluster_names_this_node_as_broker_and_controller() {
    use kafka_protocol::messages::{DescribeClusterRequest, DescribeClusterResponse};
    let b = TestBroker::start(&["node.id=7"]);
    let mut c = b.connect();
    let md: MetadataResponse = c.call(ApiKey::Metadata, 12, &MetadataRequest::default());
    for v in 0..=2 {
        let r: DescribeClusterResponse = c.call(
            ApiKey::DescribeCluster,
            v,
            &DescribeClusterRequest::default(),
        );
        assert_eq!(r.error_code, 0);
        assert_eq!(r.controller_id.0, 7);
        assert_eq!(r.brokers.len(), 1);
        assert_eq!(r.brokers[0].broker_id.0, 7);
        assert_eq!(r.brokers[0].host.as_str(), "127.0.0.1");
        assert_eq!(r.brokers[0].port, b.port as i32);
        assert_eq!(Some(r.cluster_id.clone()), md.cluster_id);
    }
}

#[test]
fn client_is_usable_after_reconnects() {
    let b = TestBroker::start(&[]);
    for _ in 0..20 {
        let mut c = Client::connect(b.port);
        let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
        assert_eq!(r.error_code, 0);
    }
}
