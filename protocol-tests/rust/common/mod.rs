//! Shared helpers for integration tests: run the real `sluice` binary on a free port with a
//! temporary data directory (its stderr, the broker log, kept in a file beside it), and talk to
//! it with raw Kafka requests over TCP.

#![allow(dead_code)]

pub mod cluster;
pub mod coordinator;
pub mod netns;
pub mod txn;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

pub struct TestBroker {
    pub port: u16,
    pub dir: tempfile::TempDir,
    /// The broker's stderr (its log), appended to across restarts.
    log: tempfile::NamedTempFile,
    child: Option<Child>,
    extra: Vec<String>,
}

/// A free port below the kernel's ephemeral range: a port from that range can be taken by
/// this process's own outgoing connections, and the start-up probe's connect loop could then
/// connect to itself (TCP simultaneous open) before the broker binds it.
pub fn free_port() -> u16 {
    let ephemeral_low: u32 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(32768);
    let (lo, hi) = (15_000u32, ephemeral_low.saturating_sub(2).max(16_000));
    let mut seed = std::process::id() as u64 ^ Instant::now().elapsed().as_nanos() as u64;
    seed ^= std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    for _ in 0..1000 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let port = (lo + ((seed >> 33) as u32) % (hi - lo)) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {lo}..{hi}");
}

impl TestBroker {
    pub fn start(extra: &[&str]) -> TestBroker {
        TestBroker::start_on(|_| {}, extra)
    }

    /// [`start`](Self::start) on a data dir `fill` writes first (a fixture in an earlier
    /// release's format).
    pub fn start_on(fill: impl FnOnce(&Path), extra: &[&str]) -> TestBroker {
        let mut b = TestBroker {
            port: free_port(),
            dir: tempfile::tempdir().unwrap(),
            log: tempfile::NamedTempFile::new().unwrap(),
            child: None,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        fill(b.dir.path());
        b.launch();
        b
    }

    /// The `--override`s of the next [`launch`](Self::launch), in place of the current ones.
    pub fn set_extra(&mut self, extra: &[&str]) {
        self.extra = extra.iter().map(|s| s.to_string()).collect();
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    pub fn launch(&mut self) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.arg("--override")
            .arg(format!("listeners=PLAINTEXT://127.0.0.1:{}", self.port))
            .arg("--override")
            .arg(format!("log.dirs={}", self.dir.path().display()));
        for e in &self.extra {
            cmd.arg("--override").arg(e);
        }
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.log.path())
            .unwrap();
        cmd.stdout(Stdio::null()).stderr(log);
        self.child = Some(cmd.spawn().expect("start sluice"));
        // Ready = an ApiVersions request is answered: the listener is bound before the logs
        // are opened, so an accepted connection alone does not mean the broker has started.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !answers_api_versions(self.port) {
            assert!(Instant::now() < deadline, "broker did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Everything the broker has logged so far (all its runs).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap()
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait; returns the exit status code.
    pub fn terminate(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(c.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        c.wait().ok().and_then(|s| s.code())
    }

    /// The broker process's pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(c) => c.try_wait().unwrap().is_none(),
            None => false,
        }
    }

    pub fn connect(&self) -> Client {
        Client::connect(self.port)
    }
}

/// The `sluice` binary with no input or output but its stderr (its log) written to `log`.
pub fn sluice_command(log: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    cmd
}

/// Waits (up to 30 s) until `ready`; panics with the log if the process exits first.
pub fn wait_ready(child: &mut Child, log: &std::path::Path, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready() {
        if let Some(s) = child.try_wait().unwrap() {
            panic!(
                "sluice exited ({s}): {}",
                std::fs::read_to_string(log).unwrap()
            );
        }
        assert!(Instant::now() < deadline, "broker did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (up to 20 s) for the process to exit; its exit code.
pub fn wait_exit(child: &mut Child) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("sluice did not exit within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends ApiVersions v0 and waits (up to 2 s) for the start of an answer.
pub fn answers_api_versions(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    // size 10: api key 18, version 0, correlation id 1, client id null
    let frame = [0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff];
    let mut size = [0u8; 4];
    s.write_all(&frame).is_ok() && s.read_exact(&mut size).is_ok()
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub struct Client {
    pub stream: TcpStream,
    next_corr: i32,
}

impl Client {
    pub fn connect(port: u16) -> Client {
        Client::from_stream(TcpStream::connect(("127.0.0.1", port)).unwrap())
    }

    /// A client on a connected stream (reads time out after 10 s).
    pub fn from_stream(stream: TcpStream) -> Client {
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Client {
            stream,
            next_corr: 1,
        }
    }

    /// Encodes a request frame (size + header + body) with correlation id `corr`.
    pub fn frame<T: Encodable>(key: ApiKey, version: i16, corr: i32, body: &T) -> Bytes {
        Self::frame_with(key, version, corr, |buf| body.encode(buf, version))
    }

    fn frame_with(
        key: ApiKey,
        version: i16,
        corr: i32,
        encode_body: impl FnOnce(&mut BytesMut) -> anyhow::Result<()>,
    ) -> Bytes {
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        let mut h = RequestHeader::default();
        h.request_api_key = key as i16;
        h.request_api_version = version;
        h.correlation_id = corr;
        h.client_id = Some(StrBytes::from_static_str("sluice-test"));
        h.encode(&mut buf, key.request_header_version(version))
            .unwrap();
        encode_body(&mut buf).unwrap();
        let n = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&n.to_be_bytes());
        buf.freeze()
    }

    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Sends a request; returns its correlation id.
    pub fn send<T: Encodable>(&mut self, key: ApiKey, version: i16, body: &T) -> i32 {
        let corr = self.next_corr;
        self.next_corr += 1;
        let f = Self::frame(key, version, corr, body);
        self.stream.write_all(&f).unwrap();
        corr
    }

    /// Sends a request of any kind at `version` (the caller picks the key that matches it);
    /// returns its correlation id.
    pub fn send_kind(&mut self, key: ApiKey, version: i16, body: &RequestKind) -> i32 {
        let corr = self.next_corr;
        self.next_corr += 1;
        let f = Self::frame_with(key, version, corr, |buf| body.encode(buf, version));
        self.stream.write_all(&f).unwrap();
        corr
    }

    /// Reads one response frame (header and body, without the size).
    pub fn recv_raw(&mut self) -> std::io::Result<Bytes> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        let n = i32::from_be_bytes(len) as usize;
        let mut buf = vec![0u8; n];
        self.stream.read_exact(&mut buf)?;
        Ok(Bytes::from(buf))
    }

    /// Reads one response frame; returns (correlation id, body after the header).
    pub fn recv_frame(&mut self, key: ApiKey, version: i16) -> std::io::Result<(i32, Bytes)> {
        let mut b = self.recv_raw()?;
        let h = ResponseHeader::decode(&mut b, key.response_header_version(version)).unwrap();
        Ok((h.correlation_id, b))
    }

    pub fn recv<R: Decodable>(&mut self, key: ApiKey, version: i16) -> (i32, R) {
        let (corr, mut b) = self.recv_frame(key, version).expect("response");
        let r = R::decode(&mut b, version).expect("decode response");
        assert_eq!(
            b.remaining(),
            0,
            "trailing bytes in {key:?} v{version} response"
        );
        (corr, r)
    }

    pub fn call<T: Encodable, R: Decodable>(&mut self, key: ApiKey, version: i16, body: &T) -> R {
        let corr = self.send(key, version, body);
        let (got, r) = self.recv(key, version);
        assert_eq!(got, corr);
        r
    }

    /// [`Client::call`] that answers an I/O error (a closed connection, a read timed out)
    /// or an undecodable answer instead of panicking.
    pub fn try_call<T: Encodable, R: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        body: &T,
    ) -> std::io::Result<R> {
        let corr = self.next_corr;
        self.next_corr += 1;
        self.stream
            .write_all(&Self::frame(key, version, corr, body))?;
        let (got, mut b) = self.recv_frame(key, version)?;
        let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
        if got != corr {
            return Err(bad(format!("correlation id {got}, sent {corr}")));
        }
        R::decode(&mut b, version).map_err(|e| bad(format!("{key:?} v{version}: {e}")))
    }

    /// True if the peer closed the connection (read returns EOF or reset) within the timeout.
    pub fn is_closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.stream.read(&mut b), Ok(0) | Err(_))
    }
}

/// Builds an uncompressed v2 record batch of `values` (keys "k<i>") with a correct CRC-32C.
pub fn record_batch(values: &[&[u8]], base_timestamp: i64) -> Bytes {
    record_batch_from(values, base_timestamp, None)
}

/// [`record_batch`] from an idempotent producer: `(producer id, epoch, base sequence)`.
pub fn record_batch_from(
    values: &[&[u8]],
    base_timestamp: i64,
    producer: Option<(i64, i16, i32)>,
) -> Bytes {
    let (producer_id, producer_epoch, base_sequence) = producer.unwrap_or((-1, -1, -1));
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: if base_sequence < 0 {
                -1
            } else {
                base_sequence + i as i32
            },
            timestamp: base_timestamp + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::copy_from_slice(v)),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

/// Produces one batch to `topic`-`partition` with acks=all (Produce v9); answers the
/// partition's response.
pub fn produce_one(
    c: &mut Client,
    topic: &str,
    partition: i32,
    batch: Bytes,
) -> kafka_protocol::messages::produce_response::PartitionProduceResponse {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
    let mut pd = PartitionProduceData::default();
    pd.index = partition;
    pd.records = Some(batch);
    let mut td = TopicProduceData::default();
    td.name = TopicName(StrBytes::from_string(topic.to_string()));
    td.partition_data = vec![pd];
    let mut r = ProduceRequest::default();
    r.acks = -1;
    r.timeout_ms = 5000;
    r.topic_data = vec![td];
    let mut resp: ProduceResponse = c.call(ApiKey::Produce, 9, &r);
    resp.responses.remove(0).partition_responses.remove(0)
}

/// A Fetch of one partition from `offset` (max_wait 0, 1 MiB), by name, or by topic id from
/// v13.
pub fn fetch_one(
    c: &mut Client,
    version: i16,
    topic: &str,
    id: uuid::Uuid,
    partition: i32,
    offset: i64,
) -> kafka_protocol::messages::FetchResponse {
    let r = fetch_request(version, topic, id, partition, offset);
    c.call(ApiKey::Fetch, version, &r)
}

/// The request [`fetch_one`] sends.
pub fn fetch_request(
    version: i16,
    topic: &str,
    id: uuid::Uuid,
    partition: i32,
    offset: i64,
) -> kafka_protocol::messages::FetchRequest {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
    let mut fp = FetchPartition::default();
    fp.partition = partition;
    fp.fetch_offset = offset;
    fp.partition_max_bytes = 1 << 20;
    let mut ft = FetchTopic::default();
    if version >= 13 {
        ft.topic_id = id;
    } else {
        ft.topic = TopicName(StrBytes::from_string(topic.to_string()));
    }
    ft.partitions = vec![fp];
    let mut r = FetchRequest::default();
    r.max_wait_ms = 0;
    r.min_bytes = 0;
    r.max_bytes = 1 << 20;
    r.topics = vec![ft];
    r.replica_id = BrokerId(-1);
    r
}

/// A CreateTopics request for one topic with these configs.
pub fn create_topic_request(
    topic: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(&str, &str)],
) -> kafka_protocol::messages::CreateTopicsRequest {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    let mut t = CreatableTopic::default();
    t.name = kafka_protocol::messages::TopicName(StrBytes::from_string(topic.to_string()));
    t.num_partitions = partitions;
    t.replication_factor = replication_factor;
    t.configs = configs
        .iter()
        .map(|(k, v)| {
            let mut c = CreatableTopicConfig::default();
            c.name = StrBytes::from_string(k.to_string());
            c.value = Some(StrBytes::from_string(v.to_string()));
            c
        })
        .collect();
    let mut r = kafka_protocol::messages::CreateTopicsRequest::default();
    r.topics = vec![t];
    r.timeout_ms = 5000;
    r
}

/// ListOffsets v7 of one partition at `timestamp` (-1 latest, -2 earliest): (error, offset).
pub fn list_offset(c: &mut Client, topic: &str, partition: i32, timestamp: i64) -> (i16, i64) {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, TopicName};
    let mut p = ListOffsetsPartition::default();
    p.partition_index = partition;
    p.timestamp = timestamp;
    let mut t = ListOffsetsTopic::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    t.partitions = vec![p];
    let mut r = ListOffsetsRequest::default();
    r.topics = vec![t];
    let resp: ListOffsetsResponse = c.call(ApiKey::ListOffsets, 7, &r);
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.offset)
}

/// Every (offset, value) of `topic`-0 from offset 0 as this node serves it to a consumer
/// (Fetch v12, which may read from a follower); what went wrong otherwise.
pub fn read_all(client: &mut Client, topic: &str) -> Result<Vec<(i64, Vec<u8>)>, String> {
    use kafka_protocol::messages::FetchResponse;
    let mut out: Vec<(i64, Vec<u8>)> = Vec::new();
    loop {
        let from = out.last().map_or(0, |(o, _)| o + 1);
        let req = fetch_request(12, topic, uuid::Uuid::nil(), 0, from);
        let resp: FetchResponse = client
            .try_call(ApiKey::Fetch, 12, &req)
            .map_err(|e| format!("fetch of {topic}-0 from {from}: {e}"))?;
        let p = &resp.responses[0].partitions[0];
        if p.error_code != 0 {
            return Err(format!(
                "fetch of {topic}-0 from {from}: error {}",
                p.error_code
            ));
        }
        let mut bytes = p.records.clone().unwrap_or_default();
        if bytes.is_empty() {
            return Ok(out);
        }
        let batches = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut bytes)
            .map_err(|e| format!("records of {topic}-0 from {from}: {e}"))?;
        for b in batches {
            for r in b.records {
                out.push((r.offset, r.value.map(|v| v.to_vec()).unwrap_or_default()));
            }
        }
    }
}

/// The body of an HTTP/1.0 GET to `port`, if it answers 200.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.contains(" 200 ").then(|| body.to_string())
}
