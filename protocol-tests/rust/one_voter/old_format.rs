//! A data dir as an earlier release's single node left it after a clean stop, written byte by
//! byte by this test: the node kept its metadata in `sluice-metadata` (one record a line,
//! tab-separated) and its producer-id block in `sluice-producer-ids`, beside Kafka's own layout
//! (`meta.properties`, the offset checkpoints, and a `<topic>-<partition>` dir with
//! `partition.metadata` and a segment for every partition).

use std::fs;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use uuid::Uuid;

pub const NODE_ID: i32 = 1;
pub const CLUSTER_ID: &str = "hC6rQtQ0SKurIWU-twQxOw";
pub const TIMESTAMP: i64 = 1_700_000_000_000;
/// `sluice-producer-ids`: every id below this one was handed out.
pub const NEXT_PRODUCER_ID_BLOCK: i64 = 1000;
/// The transactional producer whose last transaction committed: (id, producer id, epoch).
pub const TXN: (&str, i64, i16) = ("t1", 7, 3);
/// The group with a committed offset: (group, topic, partition 0's offset).
pub const COMMITTED: (&str, &str, i64) = ("readers", "kept", 2);
/// The records of `kept`-0.
pub const RECORDS: [&[u8]; 3] = [b"one", b"two", b"three"];

/// A topic of the fixture: (name, id, partitions, configs).
pub type Topic = (&'static str, Uuid, i32, Vec<(&'static str, &'static str)>);

/// Every topic the fixture holds.
pub fn topics() -> Vec<Topic> {
    let compact = vec![
        ("cleanup.policy", "compact"),
        ("segment.bytes", "104857600"),
    ];
    vec![
        (
            "__consumer_offsets",
            Uuid::from_u128(0x5a1c_0001),
            50,
            compact.clone(),
        ),
        (
            "__transaction_state",
            Uuid::from_u128(0x5a1c_0002),
            50,
            [
                compact,
                vec![
                    ("min.insync.replicas", "1"),
                    ("unclean.leader.election.enable", "false"),
                ],
            ]
            .concat(),
        ),
        (
            "kept",
            Uuid::from_u128(0x5a1c_0003),
            2,
            vec![("retention.ms", "123456789"), ("segment.ms", "7200000")],
        ),
        ("other", Uuid::from_u128(0x5a1c_0004), 2, vec![]),
    ]
}

/// The partition of an internal topic of `n` partitions that holds `key`'s records, as Kafka
/// picks it: the key's Java `hashCode`, made non-negative, modulo `n`.
pub fn partition_for(key: &str, n: i32) -> i32 {
    let mut h: i32 = 0;
    for unit in key.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    (if h == i32::MIN { 0 } else { h.abs() }) % n
}

/// Writes the whole dir into `dir` (empty).
pub fn write(dir: &Path) {
    let put = |name: &str, text: &[u8]| fs::write(dir.join(name), text).unwrap();
    put(
        "meta.properties",
        format!(
            "#\n#Written by sluice\nversion=1\ncluster.id={CLUSTER_ID}\nnode.id={NODE_ID}\n\
             directory.id=1iRHVi5zSJCiE4XZcjynJA\n"
        )
        .as_bytes(),
    );
    put(
        "sluice-producer-ids",
        format!("version=1\nnext.block.start={NEXT_PRODUCER_ID_BLOCK}\n").as_bytes(),
    );

    let mut meta = String::new();
    for (name, id, parts, configs) in topics() {
        meta.push_str(&format!("topic\t{name}\t{id}\t{parts}\n"));
        for (k, v) in configs {
            meta.push_str(&format!("config\t{k}\t{v}\n"));
        }
    }
    // alice's SCRAM-SHA-512 credential for the password "alice-secret", 4096 iterations.
    meta.push_str(
        "scram-credential\talice\tSCRAM-SHA-512\t4096\t\
         +n29nGDm25wx/Il82zfOT3eruh7elEDDAknGfuVyS0sxQ+321UW1hO0Xt5+M1PPJsOlgsXBbax1/xOA7dHfxbA==\t\
         udKUMWUpN+ebhYAMAqZBvlPJ5JkymD4LnHR787+vWlmsYyivhz0JiT09SSUzIpAEztO4Dg00vJlCwmAABzWe9Q==\t\
         guHDWNDnH2BG64o2UQXUblLpHm8tliGzPMPawDdkEHTom/0AmVo8WM3W+mSy1c865vt56wl+uR/9XWQqoidIeQ==\n",
    );
    meta.push_str("client-quota\tuser=alice\tproducer_byte_rate\t1024\n");
    meta.push_str("acl\tTOPIC\tkept\tLITERAL\tUser:alice\t*\tREAD\tALLOW\n");
    put("sluice-metadata", meta.as_bytes());

    // The logs: `kept`-0 holds three records, the group's and the transactional id's
    // partitions one record each; every other partition an empty segment.
    let (group, topic, offset) = COMMITTED;
    let (txn_id, pid, epoch) = TXN;
    let mut filled: Vec<(String, i32, Bytes, i64)> = vec![
        (
            "kept".into(),
            0,
            batch(&RECORDS.map(|v| (None, v.to_vec()))),
            3,
        ),
        (
            "__consumer_offsets".into(),
            partition_for(group, 50),
            batch(&[(Some(offset_key(group, topic, 0)), offset_value(offset))]),
            1,
        ),
        (
            "__transaction_state".into(),
            partition_for(txn_id, 50),
            batch(&[(Some(txn_key(txn_id)), txn_value(pid, epoch))]),
            1,
        ),
    ];
    let mut checkpoint = Vec::new();
    for (name, id, parts, _) in topics() {
        for p in 0..parts {
            let pdir = dir.join(format!("{name}-{p}"));
            fs::create_dir(&pdir).unwrap();
            fs::write(
                pdir.join("partition.metadata"),
                format!(
                    "version: 0\ntopic_id: {}\n",
                    URL_SAFE_NO_PAD.encode(id.as_bytes())
                ),
            )
            .unwrap();
            let seg = pdir.join("00000000000000000000");
            let at = filled.iter().position(|(t, q, ..)| t == name && *q == p);
            let (log, end) = match at.map(|i| filled.swap_remove(i)) {
                Some((.., bytes, end)) => (bytes, end),
                None => (Bytes::new(), 0),
            };
            fs::write(seg.with_extension("log"), &log).unwrap();
            if end > 0 {
                fs::write(seg.with_extension("index"), b"").unwrap();
                let mut ti = BytesMut::new();
                ti.put_i64(TIMESTAMP + end - 1);
                ti.put_i32(end as i32 - 1);
                fs::write(seg.with_extension("timeindex"), &ti).unwrap();
                fs::write(pdir.join("leader-epoch-checkpoint"), b"0\n1\n0 0\n").unwrap();
            }
            checkpoint.push(format!("{name} {p} {end}"));
        }
    }
    assert!(filled.is_empty(), "every record has a partition");
    let text = format!("0\n{}\n{}\n", checkpoint.len(), checkpoint.join("\n"));
    put("recovery-point-offset-checkpoint", text.as_bytes());
    put("replication-offset-checkpoint", text.as_bytes());
    put("log-start-offset-checkpoint", b"0\n0\n");
}

/// One batch at offset 0, leader epoch 0, of (key, value) records.
fn batch(records: &[(Option<Vec<u8>>, Vec<u8>)]) -> Bytes {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: -1,
            timestamp: TIMESTAMP + i as i64,
            key: k.clone().map(Bytes::from),
            value: Some(Bytes::from(v.clone())),
            headers: Default::default(),
        })
        .collect();
    let mut out = BytesMut::new();
    let opts = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut out, &records, &opts).unwrap();
    out.freeze()
}

fn put_str(b: &mut BytesMut, s: &str) {
    b.put_i16(s.len() as i16);
    b.put_slice(s.as_bytes());
}

/// Kafka's OffsetCommitKey, version 1.
fn offset_key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_i16(1);
    put_str(&mut b, group);
    put_str(&mut b, topic);
    b.put_i32(partition);
    b.to_vec()
}

/// Kafka's OffsetCommitValue, version 3: offset, no leader epoch, empty metadata.
fn offset_value(offset: i64) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_i16(3);
    b.put_i64(offset);
    b.put_i32(-1);
    put_str(&mut b, "");
    b.put_i64(TIMESTAMP);
    b.to_vec()
}

/// Kafka's TransactionLogKey, version 0.
fn txn_key(id: &str) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_i16(0);
    put_str(&mut b, id);
    b.to_vec()
}

/// Kafka's TransactionLogValue, version 0: the transaction completed its commit
/// (CompleteCommit, status 4), no partition left in it.
fn txn_value(pid: i64, epoch: i16) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i64(pid);
    b.put_i16(epoch);
    b.put_i32(60_000);
    b.put_i8(4);
    b.put_i32(0);
    b.put_i64(TIMESTAMP);
    b.put_i64(TIMESTAMP);
    b.to_vec()
}
