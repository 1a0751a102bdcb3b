//! Microbenchmarks of Sluice's hot paths (criterion), so that a regression shows here before the
//! whole-system run of `scripts/bench`:
//!
//! * `append`: batch validation (CRC-32C + record walk) and `Log::append` into a real segment
//! * `lookup`: offset lookup (`Log::read`: segment map, sparse index, batch-header scan) and
//!   time lookup (`Log::offset_for_timestamp`)
//! * `request`: frame header parsing + request decode (Produce, Fetch, Metadata), and response
//!   encode (Produce, Metadata)
//! * `fetch`: hand-encoded Fetch response assembly around file regions
//! * `handler`: a whole Produce and Fetch through `Broker::dispatch` on a broker with a temp dir
//!
//! `cargo bench --bench hot_paths` runs them; `cargo bench --no-run` only builds them (they never
//! run under `cargo test`). Filter with `cargo bench --bench hot_paths -- append`.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, MetadataRequest, MetadataResponse, ProduceRequest,
    ProduceResponse, RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};

use sluice::api::{self, RequestCtx};
use sluice::broker::Broker;
use sluice::log::{Log, LogConfig, batch};

// --- building real v2 record batches --------------------------------------------------------

fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// An uncompressed v2 batch of `count` records with `value_len`-byte values, as a producer
/// sends it (base offset 0, CRC-32C over attributes..end).
fn make_batch(count: usize, value_len: usize, base_ts: i64) -> Vec<u8> {
    let value = vec![b'x'; value_len];
    let mut records = Vec::with_capacity(count * (value_len + 16));
    let mut body = Vec::with_capacity(value_len + 16);
    for i in 0..count {
        body.clear();
        body.push(0); // attributes
        put_varint(&mut body, i as i64); // timestamp delta
        put_varint(&mut body, i as i64); // offset delta
        put_varint(&mut body, -1); // null key
        put_varint(&mut body, value_len as i64);
        body.extend_from_slice(&value);
        put_varint(&mut body, 0); // no headers
        put_varint(&mut records, body.len() as i64);
        records.extend_from_slice(&body);
    }
    let mut b = Vec::with_capacity(61 + records.len());
    b.extend_from_slice(&0i64.to_be_bytes()); // base offset
    b.extend_from_slice(&((49 + records.len()) as i32).to_be_bytes()); // batch length
    b.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    b.push(2); // magic
    b.extend_from_slice(&0u32.to_be_bytes()); // crc, below
    b.extend_from_slice(&0i16.to_be_bytes()); // attributes
    b.extend_from_slice(&(count as i32 - 1).to_be_bytes()); // last offset delta
    b.extend_from_slice(&base_ts.to_be_bytes());
    b.extend_from_slice(&(base_ts + count as i64 - 1).to_be_bytes()); // max timestamp
    b.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    b.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    b.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    b.extend_from_slice(&(count as i32).to_be_bytes());
    b.extend_from_slice(&records);
    let crc = batch::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// The batch shapes of the system benchmark: Kafka's Java producer (batch.size 16 KiB) with
/// 100 B and 1 KiB records, and one 16 KiB record per batch.
const SHAPES: &[(&str, usize, usize)] = &[
    ("100B_x160", 160, 100),
    ("1KiB_x15", 15, 1024),
    ("16KiB_x1", 1, 16384),
];

fn temp_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("sluice-bench-{tag}-"))
        .tempdir()
        .expect("temp dir")
}

// --- append ---------------------------------------------------------------------------------

fn bench_append(c: &mut Criterion) {
    let mut g = c.benchmark_group("append");
    for &(name, count, size) in SHAPES {
        let batch = make_batch(count, size, 1_700_000_000_000);
        g.throughput(Throughput::Bytes(batch.len() as u64));
        g.bench_function(format!("validate/{name}"), |b| {
            b.iter(|| batch::validate_for_append(black_box(&batch), 1 << 20).unwrap())
        });
        // Log::append of one batch (validate, patch offsets, pwrite into the page cache, index).
        // A fresh log every 4,000 appends keeps the files small; creating it is not timed.
        g.bench_function(format!("log_append/{name}"), |b| {
            b.iter_custom(|iters| {
                let dir = temp_dir("append");
                let mut total = Duration::ZERO;
                let mut done = 0u64;
                let mut buf = batch.clone();
                while done < iters {
                    let sub = dir.path().join(format!("p-{done}"));
                    let mut log = Log::open(&sub, LogConfig::default(), false).unwrap();
                    let n = (iters - done).min(4_000);
                    let t = Instant::now();
                    for _ in 0..n {
                        buf.copy_from_slice(&batch);
                        black_box(log.append(&mut buf, 0, None, 1 << 20).unwrap());
                    }
                    total += t.elapsed();
                    done += n;
                    drop(log);
                    let _ = std::fs::remove_dir_all(&sub);
                }
                total
            })
        });
    }
    g.finish();
}

// --- offset and time lookup -----------------------------------------------------------------

/// A log of `n` 16 KiB-ish batches (15 x 1 KiB records), timestamps increasing by 1 ms/record.
fn filled_log(dir: &Path, n: usize) -> (Log, i64) {
    let mut log = Log::open(dir, LogConfig::default(), false).unwrap();
    let ts0 = 1_700_000_000_000i64;
    for i in 0..n {
        let mut b = make_batch(15, 1024, ts0 + (i as i64) * 15);
        log.append(&mut b, 0, None, 1 << 20).unwrap();
    }
    (log, ts0)
}

fn bench_lookup(c: &mut Criterion) {
    let mut g = c.benchmark_group("lookup");
    let dir = temp_dir("lookup");
    let (log, ts0) = filled_log(dir.path(), 20_000); // ~300 MB, 300k offsets
    let end = log.log_end_offset();
    let mut k = 0u64;
    let mut next = move |m: i64| {
        // a cheap deterministic scatter over [0, m)
        k = k
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((k >> 33) % m as u64) as i64
    };
    g.bench_function("offset/read_1MiB_slice", |b| {
        b.iter_batched(
            || next(end),
            |off| black_box(log.read(off, 1 << 20, end, true).unwrap()),
            BatchSize::SmallInput,
        )
    });
    g.bench_function("offset/read_at_end", |b| {
        b.iter(|| black_box(log.read(end, 1 << 20, end, true).unwrap()))
    });
    g.bench_function("time/offset_for_timestamp", |b| {
        b.iter_batched(
            || ts0 + next(end),
            |ts| black_box(log.offset_for_timestamp(ts).unwrap()),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

// --- request decode / response encode -------------------------------------------------------

fn frame(key: ApiKey, version: i16, body: &impl Encodable) -> Bytes {
    let mut buf = BytesMut::new();
    let mut h = RequestHeader::default();
    h.request_api_key = key as i16;
    h.request_api_version = version;
    h.correlation_id = 7;
    h.client_id = Some(StrBytes::from_static_str("bench"));
    h.encode(&mut buf, key.request_header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    buf.freeze()
}

fn produce_request(topic: &str, records: Vec<u8>) -> ProduceRequest {
    let mut p = PartitionProduceData::default();
    p.index = 0;
    p.records = Some(Bytes::from(records));
    let mut t = TopicProduceData::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    t.partition_data = vec![p];
    let mut r = ProduceRequest::default();
    r.acks = 1;
    r.timeout_ms = 30_000;
    r.topic_data = vec![t];
    r
}

fn fetch_request(topic: &str, partitions: i32, offset: i64) -> FetchRequest {
    let mut t = FetchTopic::default();
    t.topic = TopicName(StrBytes::from_string(topic.to_string()));
    t.partitions = (0..partitions)
        .map(|i| {
            let mut p = FetchPartition::default();
            p.partition = i;
            p.fetch_offset = offset;
            p.partition_max_bytes = 1 << 20;
            p.current_leader_epoch = -1;
            p
        })
        .collect();
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_wait_ms = 0;
    r.min_bytes = 1;
    r.max_bytes = 50 << 20;
    r.topics = vec![t];
    r
}

fn parse(frame: Bytes) -> (RequestCtx, Bytes) {
    match api::parse_frame(frame).unwrap() {
        api::Parsed::Request { ctx, body, .. } => (ctx, body),
        _ => unreachable!(),
    }
}

fn bench_request(c: &mut Criterion) {
    let mut g = c.benchmark_group("request");
    let produce = frame(
        ApiKey::Produce,
        9,
        &produce_request("bench", make_batch(15, 1024, 0)),
    );
    g.bench_function("decode/produce_v9_16KiB", |b| {
        b.iter(|| {
            let (ctx, body) = parse(produce.clone());
            black_box(api::decode::<ProduceRequest>(&ctx, body).unwrap())
        })
    });
    let fetch = frame(ApiKey::Fetch, 12, &fetch_request("bench", 1, 0));
    g.bench_function("decode/fetch_v12_1p", |b| {
        b.iter(|| {
            let (ctx, body) = parse(fetch.clone());
            black_box(api::decode::<FetchRequest>(&ctx, body).unwrap())
        })
    });
    let fetch100 = frame(ApiKey::Fetch, 12, &fetch_request("bench", 100, 0));
    g.bench_function("decode/fetch_v12_100p", |b| {
        b.iter(|| {
            let (ctx, body) = parse(fetch100.clone());
            black_box(api::decode::<FetchRequest>(&ctx, body).unwrap())
        })
    });
    let metadata = frame(ApiKey::Metadata, 12, &MetadataRequest::default());
    g.bench_function("decode/metadata_v12", |b| {
        b.iter(|| {
            let (ctx, body) = parse(metadata.clone());
            black_box(api::decode::<MetadataRequest>(&ctx, body).unwrap())
        })
    });

    let ctx = |key: ApiKey, version: i16| RequestCtx::synthetic(key, version, 7);
    let mut pr = PartitionProduceResponse::default();
    pr.base_offset = 12345;
    pr.log_append_time_ms = -1;
    let mut tr = TopicProduceResponse::default();
    tr.name = TopicName(StrBytes::from_static_str("bench"));
    tr.partition_responses = vec![pr];
    let mut produce_resp = ProduceResponse::default();
    produce_resp.responses = vec![tr];
    let pctx = ctx(ApiKey::Produce, 9);
    g.bench_function("encode/produce_v9", |b| {
        b.iter(|| black_box(api::respond(&pctx, &produce_resp).unwrap()))
    });

    let mut md = MetadataResponse::default();
    let mut broker = MetadataResponseBroker::default();
    broker.node_id = BrokerId(1);
    broker.host = StrBytes::from_static_str("127.0.0.1");
    broker.port = 9092;
    md.brokers = vec![broker];
    md.topics = (0..10)
        .map(|i| {
            let mut t = MetadataResponseTopic::default();
            t.name = Some(TopicName(StrBytes::from_string(format!("topic-{i}"))));
            t.partitions = (0..10)
                .map(|p| {
                    let mut mp = MetadataResponsePartition::default();
                    mp.partition_index = p;
                    mp.leader_id = BrokerId(1);
                    mp.replica_nodes = vec![BrokerId(1)];
                    mp.isr_nodes = vec![BrokerId(1)];
                    mp
                })
                .collect();
            t
        })
        .collect();
    let mctx = ctx(ApiKey::Metadata, 12);
    g.bench_function("encode/metadata_v12_10x10", |b| {
        b.iter(|| black_box(api::respond(&mctx, &md).unwrap()))
    });
    g.finish();
}

// --- fetch response assembly ----------------------------------------------------------------

fn bench_fetch(c: &mut Criterion) {
    use sluice::api::fetch::{PartitionOut, TopicOut, encode_response};
    let mut g = c.benchmark_group("fetch");
    let dir = temp_dir("fetch");
    let path = dir.path().join("segment");
    std::fs::write(&path, vec![0u8; 1 << 20]).unwrap();
    let file = Arc::new(std::fs::File::open(&path).unwrap());
    for parts in [1, 100] {
        let topics = vec![TopicOut {
            name: "bench".into(),
            id: uuid::Uuid::nil(),
            partitions: (0..parts)
                .map(|i| PartitionOut {
                    index: i,
                    error_code: 0,
                    high_watermark: 1_000_000,
                    last_stable_offset: 1_000_000,
                    log_start_offset: 0,
                    records: Some((file.clone(), 4096, 8192)),
                    aborted_transactions: None,
                    diverging_epoch: None,
                    current_leader: None,
                    preferred_read_replica: -1,
                })
                .collect(),
        }];
        for v in [11i16, 12] {
            let ctx = RequestCtx::synthetic(ApiKey::Fetch, v, 7);
            g.bench_function(format!("encode_response/v{v}_{parts}p"), |b| {
                b.iter(|| black_box(encode_response(&ctx, 0, 0, &topics, &[]).unwrap()))
            });
        }
    }
    g.finish();
}

// --- whole handlers -------------------------------------------------------------------------

fn bench_handler(c: &mut Criterion) {
    let mut g = c.benchmark_group("handler");
    // A one-voter node (the binary's start-up) on this current-thread runtime: it runs only
    // while a request does, so its own timers stay out of the measurements.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let node = sluice::testing::Broker::builder().start_on(rt).unwrap();
    node.block_on(node.create_topic("bench", 1, Default::default()))
        .unwrap();
    let broker: Arc<Broker> = node.broker().clone();
    let response_len = |req: &Bytes| {
        let resp = node.block_on(broker.dispatch(req.clone())).unwrap();
        resp.map_or(0, |r| r.len())
    };
    for &(name, count, size) in SHAPES {
        let batch = make_batch(count, size, 1_700_000_000_000);
        g.throughput(Throughput::Bytes(batch.len() as u64));
        let req = frame(ApiKey::Produce, 9, &produce_request("bench", batch));
        let before = broker.controller.topic("bench").unwrap().partitions[0].log_end_offset();
        response_len(&req);
        let after = broker.controller.topic("bench").unwrap().partitions[0].log_end_offset();
        assert_eq!(
            after - before,
            count as i64,
            "the produce request must append"
        );
        g.bench_function(format!("produce_v9/{name}"), |b| {
            b.iter(|| black_box(node.block_on(broker.dispatch(req.clone())).unwrap()))
        });
    }
    let fetch = frame(ApiKey::Fetch, 12, &fetch_request("bench", 1, 100));
    assert!(
        response_len(&fetch) > 1 << 19,
        "the fetch must return records"
    );
    g.throughput(Throughput::Elements(1));
    g.bench_function("fetch_v12/1MiB", |b| {
        b.iter(|| black_box(node.block_on(broker.dispatch(fetch.clone())).unwrap()))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = bench_append, bench_lookup, bench_request, bench_fetch, bench_handler
}
criterion_main!(benches);
