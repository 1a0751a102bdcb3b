//! `sluice::testing`: brokers embedded in the test's process, used by a real client (kcat,
//! librdkafka's command-line tool). One broker started blocking and one on the test's tokio
//! runtime; a stopped broker has closed its listener and released its data dir, which a new
//! one then serves; a cluster of three whose leader is killed while an acks=all producer
//! writes, then restarted, with every acknowledged record read back; a leader isolated from
//! the other nodes, replaced for the clients of the others, then healed, with every
//! acknowledged record read back.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sluice::testing::{Broker, Cluster};

/// Produces `lines` to `topic` with acks=all; panics unless every one was acknowledged.
fn produce(bootstrap: &str, topic: &str, lines: &[String]) {
    let mut child = Command::new("kcat")
        .args(["-b", bootstrap, "-P", "-t", topic, "-X", "acks=all"])
        .args(["-X", "enable.idempotence=true"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat is installed");
    let mut input = child.stdin.take().unwrap();
    for l in lines {
        writeln!(input, "{l}").unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !stderr.contains("Delivery failed"),
        "kcat -P to {bootstrap} failed: {stderr}"
    );
}

/// Reads `topic` from the beginning to its end: one line per record.
fn consume(bootstrap: &str, topic: &str) -> Vec<String> {
    let out = Command::new("kcat")
        .args([
            "-b",
            bootstrap,
            "-C",
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-q",
        ])
        .output()
        .expect("kcat is installed");
    assert!(
        out.status.success(),
        "kcat -C from {bootstrap} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Reads `topic` until it holds `want` records (a topic just created may not have a leader
/// everywhere yet), at most 60 s.
fn consume_all(bootstrap: &str, topic: &str, want: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = consume(bootstrap, topic);
        if got.len() >= want || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn records(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Three nodes; topics replicated to all three, acks=all needing two.
fn replicated_cluster() -> Cluster {
    Cluster::start_with(
        3,
        &[
            ("default.replication.factor", "3"),
            ("min.insync.replicas", "2"),
        ],
    )
    .unwrap()
}

/// The client addresses of every node but `id`.
fn others(cluster: &Cluster, id: i32) -> String {
    let all: Vec<String> = cluster
        .node_ids()
        .into_iter()
        .filter(|n| *n != id)
        .map(|n| cluster.node_bootstrap(n))
        .collect();
    all.join(",")
}

#[test]
fn a_broker_serves_kcat() {
    let broker = Broker::start().unwrap();
    assert!(broker.bootstrap().starts_with("127.0.0.1:"));
    let sent = records("blocking", 100);
    produce(broker.bootstrap(), "embedded", &sent);
    assert_eq!(consume(broker.bootstrap(), "embedded"), sent);
}

#[test]
fn properties_reach_the_broker() {
    let broker = Broker::start_with(&[("num.partitions", "3")]).unwrap();
    produce(broker.bootstrap(), "three", &records("p", 10));
    let out = Command::new("kcat")
        .args(["-b", broker.bootstrap(), "-L", "-t", "three"])
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(listing.contains("with 3 partitions"), "{listing}");

    let e = Broker::start_with(&[("no.such.key", "1")])
        .err()
        .expect("an unknown key stops start-up");
    assert!(format!("{e:#}").contains("no.such.key"), "{e:#}");
}

#[tokio::test]
async fn a_broker_starts_on_the_callers_runtime() {
    let broker = Broker::start_async().await.unwrap();
    let bootstrap = broker.bootstrap().to_string();
    let sent = records("async", 50);
    let got = tokio::task::spawn_blocking(move || {
        produce(&bootstrap, "embedded-async", &sent);
        (sent, consume(&bootstrap, "embedded-async"))
    })
    .await
    .unwrap();
    assert_eq!(got.1, got.0);
    drop(broker);
}

#[test]
fn a_stopped_broker_releases_its_port_and_its_dir() {
    let dir = tempfile::tempdir().unwrap();
    let first = Broker::builder().data_dir(dir.path()).start().unwrap();
    let old = first.bootstrap().to_string();
    let sent = records("kept", 20);
    produce(&old, "kept", &sent);
    first.stop().unwrap();
    assert!(
        std::net::TcpStream::connect(&old).is_err(),
        "the listener is closed"
    );
    // The log dir lock is free: a broker starts on the same data and serves the records.
    let second = Broker::builder().data_dir(dir.path()).start().unwrap();
    assert_eq!(consume(second.bootstrap(), "kept"), sent);
    drop(second);
    assert!(dir.path().join("kept-0").is_dir(), "a given dir is kept");
}

#[test]
fn a_killed_leader_loses_nothing_acknowledged() {
    let mut cluster = replicated_cluster();
    let topic = "failover";
    let mut sent = records("before", 200);
    produce(&cluster.bootstrap(), topic, &sent);
    let leader = cluster.leader(topic, 0).expect("a leader");
    cluster.kill(leader);
    // Acknowledged by the two others while the leader is down.
    let during = records("during", 200);
    produce(&others(&cluster, leader), topic, &during);
    sent.extend(during);
    cluster.restart(leader).unwrap();
    assert_eq!(consume_all(&cluster.bootstrap(), topic, sent.len()), sent);
    // A client that knows only the restarted node finds the same records through it.
    assert_eq!(
        consume_all(&cluster.node_bootstrap(leader), topic, sent.len()),
        sent
    );
}

/// The leader of `topic`'s partition 0 in the metadata `bootstrap` answers (kcat -L).
fn leader_via(bootstrap: &str, topic: &str) -> Option<i32> {
    let out = Command::new("kcat")
        .args(["-b", bootstrap, "-L", "-t", topic, "-m", "5"])
        .output()
        .ok()?;
    let listing = String::from_utf8_lossy(&out.stdout);
    let line = listing
        .lines()
        .find(|l| l.contains("partition 0, leader "))?;
    line.split("leader ")
        .nth(1)?
        .split(',')
        .next()?
        .trim()
        .parse()
        .ok()
}

#[test]
fn an_isolated_leader_is_replaced_and_loses_nothing_acknowledged() {
    let cluster = replicated_cluster();
    let topic = "isolation";
    let mut acked = records("before", 100);
    produce(&cluster.bootstrap(), topic, &acked);
    let old = cluster.leader(topic, 0).expect("a leader");
    let others = others(&cluster, old);
    cluster.isolate(old);
    // Clients of the other nodes see a new leader once the old one's session has expired.
    let deadline = Instant::now() + Duration::from_secs(60);
    let new = loop {
        match leader_via(&others, topic) {
            Some(l) if l != old => break l,
            _ => assert!(Instant::now() < deadline, "no new leader"),
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_ne!(new, old);
    let during = records("during", 100);
    produce(&others, topic, &during);
    acked.extend(during);
    // The isolated node still answers its clients but cannot acknowledge an acks=all write.
    let mut child = Command::new("kcat")
        .args(["-b", &cluster.node_bootstrap(old), "-P", "-t", topic])
        .args(["-X", "acks=all", "-X", "message.timeout.ms=3000"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "isolated-0").unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() && !stderr.contains("Delivery failed") {
        acked.push("isolated-0".to_string());
    }
    cluster.heal();
    let after = records("after", 100);
    produce(&cluster.bootstrap(), topic, &after);
    acked.extend(after);
    let got = consume_all(&cluster.bootstrap(), topic, acked.len());
    assert_eq!(got, acked);
    // The healed node rejoins: through it alone the same records are read.
    assert_eq!(
        consume_all(&cluster.node_bootstrap(old), topic, acked.len()),
        acked
    );
}
