//! A broker with two log dirs: AlterReplicaLogDirs moves a partition from one to the other
//! (DescribeLogDirs shows it there, the files moved, records and producers carry over), its
//! errors, kill -9 after a move, and the start-up rules for a move a crash cut short
//! (`-future` and `-delete` directories left behind).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{TestBroker, produce_one, read_all, record_batch};
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, ApiKey, CreateTopicsResponse,
    DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "moving";
const LOG_DIR_NOT_FOUND: i16 = 57;
const REPLICA_NOT_AVAILABLE: i16 = 9;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const ID: &str = "0123456789abcdef0123456789abcdef";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// (log dir as the broker names it, topic, partition, is_future) of every replica.
fn describe(c: &mut common::Client) -> Vec<(String, String, i32, bool)> {
    let resp: DescribeLogDirsResponse = c.call(ApiKey::DescribeLogDirs, 4, &all_replicas());
    let mut out = Vec::new();
    for d in &resp.results {
        assert_eq!(d.error_code, 0);
        for t in &d.topics {
            for p in &t.partitions {
                out.push((
                    d.log_dir.to_string(),
                    t.name.0.to_string(),
                    p.partition_index,
                    p.is_future_key,
                ));
            }
        }
    }
    out
}

fn dirs_of(c: &mut common::Client, partition: i32) -> Vec<String> {
    describe(c)
        .into_iter()
        .filter(|(_, t, p, _)| t == TOPIC && *p == partition)
        .map(|(d, ..)| d)
        .collect()
}

/// AlterReplicaLogDirs of `(dir, topic, partitions)`; answers (topic, partition, error) sorted.
fn alter(
    c: &mut common::Client,
    version: i16,
    moves: &[(&str, &str, &[i32])],
) -> Vec<(String, i32, i16)> {
    let mut r = AlterReplicaLogDirsRequest::default();
    for (dir, topic, partitions) in moves {
        let mut t = AlterReplicaLogDirTopic::default();
        t.name = TopicName(s(topic));
        t.partitions = partitions.to_vec();
        let mut d = AlterReplicaLogDir::default();
        d.path = s(dir);
        d.topics = vec![t];
        r.dirs.push(d);
    }
    let resp: AlterReplicaLogDirsResponse = c.call(ApiKey::AlterReplicaLogDirs, version, &r);
    let mut out: Vec<_> = resp
        .results
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.topic_name.0.to_string(), p.partition_index, p.error_code))
        })
        .collect();
    out.sort();
    out
}

/// Waits (bounded) until DescribeLogDirs shows partition 0 in `dir` only.
fn wait_in(c: &mut common::Client, dir: &str) {
    for _ in 0..400 {
        if dirs_of(c, 0) == vec![dir.to_string()] {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("partition 0 never showed in {dir}: {:?}", describe(c));
}

fn values(c: &mut common::Client) -> Vec<(i64, Vec<u8>)> {
    read_all(c, TOPIC).unwrap()
}

fn produce(c: &mut common::Client, v: &[u8]) -> i64 {
    let p = produce_one(c, TOPIC, 0, record_batch(&[v], 1_700_000_000_000));
    assert_eq!(p.error_code, 0);
    p.base_offset
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn a_partition_moves_between_log_dirs_and_survives_kill9() {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let mut broker = TestBroker::start(&[&format!("log.dirs={},{}", a.display(), b.display())]);
    let mut c = broker.connect();
    let created: CreateTopicsResponse = c.call(
        ApiKey::CreateTopics,
        7,
        &common::create_topic_request(TOPIC, 2, 1, &[]),
    );
    assert_eq!(created.topics[0].error_code, 0);
    for i in 0..20 {
        assert_eq!(produce(&mut c, format!("v{i}").as_bytes()), i);
    }
    let before = values(&mut c);
    assert_eq!(before.len(), 20);

    let from = dirs_of(&mut c, 0)
        .pop()
        .unwrap_or_else(|| panic!("partition 0 in no log dir: {:?}", describe(&mut c)));
    let logdirs: Vec<String> = describe_dirs(&mut c);
    assert_eq!(logdirs.len(), 2, "{logdirs:?}");
    let to = logdirs.iter().find(|d| **d != from).unwrap().clone();
    let (from_path, to_path) = (PathBuf::from(&from), PathBuf::from(&to));
    assert!(from_path.join(format!("{TOPIC}-0")).is_dir());

    // Errors, each with Kafka's code, and nothing moves.
    let long = "x".repeat(240);
    for v in 1..=2 {
        assert_eq!(
            alter(
                &mut c,
                v,
                &[
                    ("/no/such/dir", TOPIC, &[0]),
                    (&to, TOPIC, &[7]),
                    (&to, "nope", &[0]),
                    ("/no/such/dir", &long, &[0]),
                ]
            ),
            vec![
                (TOPIC.to_string(), 0, LOG_DIR_NOT_FOUND),
                (TOPIC.to_string(), 7, REPLICA_NOT_AVAILABLE),
                ("nope".to_string(), 0, REPLICA_NOT_AVAILABLE),
                (long.clone(), 0, INVALID_TOPIC_EXCEPTION),
            ],
            "v{v}"
        );
    }
    assert_eq!(dirs_of(&mut c, 0), vec![from.clone()]);

    // Into the dir it is in: nothing to do. Into the other: it moves.
    assert_eq!(
        alter(&mut c, 2, &[(&from, TOPIC, &[0])]),
        vec![(TOPIC.to_string(), 0, 0)]
    );
    assert_eq!(
        alter(&mut c, 1, &[(&to, TOPIC, &[0])]),
        vec![(TOPIC.to_string(), 0, 0)]
    );
    wait_in(&mut c, &to);
    assert!(!from_path.join(format!("{TOPIC}-0")).exists());
    assert!(
        to_path
            .join(format!("{TOPIC}-0"))
            .join("00000000000000000000.log")
            .is_file()
    );
    for d in [&from_path, &to_path] {
        assert!(
            names_in(d)
                .iter()
                .all(|n| !n.ends_with("-future") && !n.ends_with("-delete")),
            "{:?}",
            names_in(d)
        );
    }
    assert_eq!(values(&mut c), before);
    assert_eq!(produce(&mut c, b"after the move"), 20);
    assert_eq!(values(&mut c).len(), 21);

    // kill -9: the partition is in its new dir with every record, and takes more.
    broker.kill9();
    broker.launch();
    let mut c = broker.connect();
    assert_eq!(dirs_of(&mut c, 0), vec![to.clone()]);
    let after = values(&mut c);
    assert_eq!(after.len(), 21);
    assert_eq!(after[..20], before[..]);
    assert_eq!(produce(&mut c, b"after the restart"), 21);

    // A crash during a copy back: the unfinished `-future` copy is removed at start-up.
    broker.kill9();
    let partial = from_path.join(format!("{TOPIC}-0.{ID}-future"));
    std::fs::create_dir(&partial).unwrap();
    std::fs::write(partial.join("00000000000000000000.log"), b"torn").unwrap();
    broker.launch();
    let mut c = broker.connect();
    assert!(!partial.exists());
    assert_eq!(dirs_of(&mut c, 0), vec![to.clone()]);
    assert_eq!(values(&mut c).len(), 22);

    // A crash between the two renames of the swap: the old directory is a `-delete` one, the
    // complete copy is a `-future` one with no final directory anywhere: it is promoted.
    broker.kill9();
    let complete = from_path.join(format!("{TOPIC}-0.{ID}-future"));
    let doomed = to_path.join(format!("{TOPIC}-0.{ID}-delete"));
    copy_dir(&to_path.join(format!("{TOPIC}-0")), &complete);
    std::fs::rename(to_path.join(format!("{TOPIC}-0")), &doomed).unwrap();
    broker.launch();
    let mut c = broker.connect();
    assert!(!doomed.exists() && !complete.exists());
    assert_eq!(dirs_of(&mut c, 0), vec![from.clone()]);
    let last = values(&mut c);
    assert_eq!(last.len(), 22);
    assert_eq!(last[..20], before[..]);
    assert_eq!(produce(&mut c, b"after the promotion"), 22);
    assert!(broker.log().contains("log dir move at start-up"));
}

/// DescribeLogDirs of every replica (null topics).
fn all_replicas() -> DescribeLogDirsRequest {
    let mut r = DescribeLogDirsRequest::default();
    r.topics = None;
    r
}

/// The log dirs DescribeLogDirs names.
fn describe_dirs(c: &mut common::Client) -> Vec<String> {
    let resp: DescribeLogDirsResponse = c.call(ApiKey::DescribeLogDirs, 4, &all_replicas());
    resp.results.iter().map(|d| d.log_dir.to_string()).collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}
