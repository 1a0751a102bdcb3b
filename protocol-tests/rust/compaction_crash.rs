//! Log compaction against kill -9: a compacted topic with small segments is written in
//! rounds (200 keys each), the cleaner (backoff 20 ms) cleans it meanwhile, and the broker is
//! killed -9 at a different moment in each of several rounds. After every restart: each key
//! reads back with the last value written for it, no offset is read twice (the old and the
//! cleaned copy of a segment are never both in), a cleaning the kill cut short (`.cleaned`
//! files) was removed and a swap it cut short (`.log.swap`) completed at start-up, and in
//! the end the log was cleaned (fewer records than written).

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{Client, TestBroker, create_topic_request, produce_one, read_all, record_batch};
use kafka_protocol::messages::*;

const TOPIC: &str = "compacted";
const KEYS: usize = 200;

fn value(key: usize, round: usize) -> Vec<u8> {
    format!("k{key}:r{round}:{}", "x".repeat(40)).into_bytes()
}

fn key_of(v: &[u8]) -> usize {
    let s = std::str::from_utf8(v).unwrap();
    s[1..s.find(':').unwrap()].parse().unwrap()
}

fn produce_round(c: &mut Client, round: usize) {
    let values: Vec<Vec<u8>> = (0..KEYS).map(|k| value(k, round)).collect();
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    let r = produce_one(c, TOPIC, 0, record_batch(&refs, 1_000 + round as i64));
    assert_eq!(r.error_code, 0, "produce round {round}");
}

/// Reads the partition; checks offsets strictly increase and each key's last value is the
/// last written. Returns the number of records read.
fn check_contents(c: &mut Client, last_round: usize, when: &str) -> usize {
    let recs = read_all(c, TOPIC).unwrap_or_else(|e| panic!("{when}: {e}"));
    let mut latest: BTreeMap<usize, (i64, Vec<u8>)> = BTreeMap::new();
    let mut prev = -1;
    for (off, v) in &recs {
        assert!(
            *off > prev,
            "{when}: offset {off} after {prev} (a segment in twice?)"
        );
        prev = *off;
        latest.insert(key_of(v), (*off, v.clone()));
    }
    assert_eq!(latest.len(), KEYS, "{when}: keys read");
    for (k, (off, v)) in &latest {
        assert_eq!(
            v,
            &value(*k, last_round),
            "{when}: key {k} at {off} is not its last value"
        );
    }
    recs.len()
}

fn leftovers(b: &TestBroker) -> Vec<String> {
    std::fs::read_dir(b.data_dir().join(format!("{TOPIC}-0")))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
        .collect()
}

#[test]
fn kill9_during_cleaning_leaves_old_or_new_segments() {
    let mut b = TestBroker::start(&["log.cleaner.backoff.ms=20"]);
    let mut c = b.connect();
    let created: CreateTopicsResponse = c.call(
        ApiKey::CreateTopics,
        7,
        &create_topic_request(
            TOPIC,
            1,
            1,
            &[
                ("cleanup.policy", "compact"),
                ("internal.segment.bytes", "65536"),
                ("min.cleanable.dirty.ratio", "0.01"),
            ],
        ),
    );
    assert_eq!(created.topics[0].error_code, 0);
    let mut round = 0;
    let mut written = 0;
    let (mut interrupted_cleanings, mut interrupted_swaps) = (0, 0);
    for kill in 0..8u64 {
        // More rounds each time, and a kill a little later each time: the kills land at
        // different points of the cleaner's work (map building, writing, swapping).
        let rounds = 10 + kill as usize * 3;
        for _ in 0..rounds {
            produce_round(&mut c, round);
            written += KEYS;
            round += 1;
        }
        std::thread::sleep(Duration::from_millis(kill * 7 % 40));
        b.kill9();
        // What the kill interrupted: a cleaning being written (.cleaned), a swap (.swap).
        let left = leftovers(&b);
        let swap = left.iter().any(|n| n.ends_with(".log.swap"));
        let cleaned = left.iter().any(|n| n.ends_with(".cleaned"));
        eprintln!("kill {kill}: left {left:?}");
        interrupted_swaps += swap as usize;
        interrupted_cleanings += cleaned as usize;
        let log_before = b.log().len();
        b.launch();
        c = b.connect();
        let read = check_contents(&mut c, round - 1, &format!("after kill {kill}"));
        let recovery = b.log()[log_before..].to_string();
        if swap {
            assert!(
                recovery.contains("completing an interrupted segment swap"),
                "after kill {kill}: {left:?} but no swap completed: {recovery}"
            );
        }
        if cleaned {
            assert!(
                recovery.contains("removing an unfinished cleaning's file"),
                "after kill {kill}: {left:?} but not removed: {recovery}"
            );
        }
        assert!(read <= written);
    }
    eprintln!(
        "kills during a cleaning: {interrupted_cleanings}, during a swap: {interrupted_swaps}"
    );
    // Let the cleaner finish: the log ends far smaller than what was written.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut read;
    loop {
        read = check_contents(&mut c, round - 1, "at the end");
        if read < written / 4 || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        read < written / 4,
        "{read} of {written} records left: not cleaned"
    );
    assert!(b.log().contains("log cleaned"), "the cleaner never ran");
    assert!(!b.log().contains("panicked"), "{}", b.log());
}
