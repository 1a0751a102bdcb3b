//! Writes the seed corpus: `cargo test --test gen_corpus` in fuzz/ fills
//! fuzz/corpus/decode_request/ and fuzz/corpus/dispatch/ (git-ignored) with valid requests.

use std::path::PathBuf;

use sluice_fuzz::seeds;

#[test]
fn produce_batch_has_valid_crc32c() {
    let b = seeds::record_batch(3);
    // v2 batch: baseOffset(8) batchLength(4) partitionLeaderEpoch(4) magic(1) crc(4) attributes...
    assert_eq!(b[16], 2, "magic");
    let len = i32::from_be_bytes(b[8..12].try_into().unwrap()) as usize;
    assert_eq!(len + 12, b.len(), "batch length");
    let crc = u32::from_be_bytes(b[17..21].try_into().unwrap());
    assert_eq!(crc, crc32c::crc32c(&b[21..]), "CRC-32C over attributes..end");
}

#[test]
fn seeds_decode() {
    for (name, f) in seeds::frames() {
        assert!(sluice_fuzz::decode_one(&f), "seed {name} does not decode");
    }
}

#[test]
fn write_corpus() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let dec = root.join("decode_request");
    let dis = root.join("dispatch");
    std::fs::create_dir_all(&dec).unwrap();
    std::fs::create_dir_all(&dis).unwrap();
    for (name, f) in seeds::frames() {
        std::fs::write(dec.join(format!("seed_{name}")), f).unwrap();
    }
    for (name, f) in seeds::dispatch_inputs() {
        std::fs::write(dis.join(format!("seed_{name}")), f).unwrap();
    }
}

/// The seeds do what they say on a real broker: produce appends, fetch returns the records,
/// create/delete succeed (so the fuzzer starts from requests that reach deep code).
#[test]
fn seeds_succeed_on_broker() {
    use bytes::Bytes;
    use kafka_protocol::messages::{CreateTopicsResponse, FetchResponse, ProduceResponse};
    use kafka_protocol::protocol::Decodable;
    let h = sluice_fuzz::Harness::new();
    let body = |f: Vec<u8>, header_len: usize| -> (Bytes, i16) {
        let v = i16::from_be_bytes([f[2], f[3]]);
        let resp = h
            .block_on(h.broker.dispatch(Bytes::from(f.clone())))
            .unwrap()
            .unwrap();
        sluice_fuzz::check_response(&f, &resp);
        (Bytes::from(sluice_fuzz::flatten(&resp)).slice(4 + header_len..), v)
    };
    let (mut b, v) = body(seeds::produce_v9(0, 3), 5);
    let p = ProduceResponse::decode(&mut b, v).unwrap();
    assert_eq!(p.responses[0].partition_responses[0].error_code, 0);
    let (mut b, v) = body(seeds::fetch_v12(), 5);
    let f = FetchResponse::decode(&mut b, v).unwrap();
    let part0 = &f.responses[0].partitions[0];
    assert_eq!(part0.error_code, 0);
    assert!(part0.records.as_ref().is_some_and(|r| !r.is_empty()));
    let (mut b, v) = body(seeds::create_topics_v7("u", 2), 5);
    let c = CreateTopicsResponse::decode(&mut b, v).unwrap();
    assert_eq!(c.topics[0].error_code, 0, "{:?}", c.topics[0].error_message);
    assert!(h.broker.controller.topic("u").is_some());
    h.reset();
    assert!(h.broker.controller.topic("u").is_none());
    let dir = h.dir.clone();
    drop(h);
    let _ = std::fs::remove_dir_all(&dir);
}
