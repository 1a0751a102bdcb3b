//! Named listeners as compose files use them: every answer that names brokers (Metadata,
//! FindCoordinator, DescribeCluster, a produce's leader hints) gives their addresses on the
//! listener the request arrived on; a broker that does not advertise that listener is left
//! out, and partitions it leads get LISTENER_NOT_FOUND. Real binary, real sockets.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster::TestCluster;
use common::{Client, answers_api_versions, free_port, record_batch};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsResponse, DescribeClusterRequest, DescribeClusterResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest, MetadataResponse,
};
use kafka_protocol::protocol::StrBytes;

/// A single node started with these overrides (besides log.dirs); stopped on drop.
struct Node {
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Node {
    fn start(ready_port: u16, settings: &[String]) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.arg("--override")
            .arg(format!("log.dirs={}", dir.path().display()));
        for s in settings {
            cmd.arg("--override").arg(s);
        }
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let child = cmd.spawn().expect("start sluice");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !answers_api_versions(ready_port) {
            assert!(Instant::now() < deadline, "broker did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Node { child, _dir: dir }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn metadata(c: &mut Client) -> MetadataResponse {
    c.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(None),
    )
}

fn brokers(m: &MetadataResponse) -> Vec<(i32, String, i32)> {
    let mut out: Vec<(i32, String, i32)> = m
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string(), b.port))
        .collect();
    out.sort();
    out
}

fn coordinator(c: &mut Client, group: &str) -> (i16, String, i32) {
    let mut r = FindCoordinatorRequest::default();
    r.key = StrBytes::from_string(group.to_string());
    let resp: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 3, &r);
    (resp.error_code, resp.host.to_string(), resp.port)
}

fn described(c: &mut Client) -> Vec<(i32, String, i32)> {
    let resp: DescribeClusterResponse = c.call(
        ApiKey::DescribeCluster,
        1,
        &DescribeClusterRequest::default(),
    );
    let mut out: Vec<(i32, String, i32)> = resp
        .brokers
        .iter()
        .map(|b| (b.broker_id.0, b.host.to_string(), b.port))
        .collect();
    out.sort();
    out
}

fn create(c: &mut Client, topic: &str, partitions: i32, rf: i16) {
    let r = common::create_topic_request(topic, partitions, rf, &[]);
    let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 5, &r);
    assert_eq!(resp.topics[0].error_code, 0, "{:?}", resp.topics[0]);
}

#[test]
fn each_listener_answers_with_its_own_advertised_address() {
    let (internal, host) = (free_port(), free_port());
    let _b = Node::start(
        internal,
        &[
            format!("listeners=PLAINTEXT://127.0.0.1:{internal},PLAINTEXT_HOST://127.0.0.1:{host}"),
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT"
                .to_string(),
            format!(
                "advertised.listeners=PLAINTEXT://127.0.0.1:{internal},\
                 PLAINTEXT_HOST://localhost:{host}"
            ),
        ],
    );
    let mut on_internal = Client::connect(internal);
    let mut on_host = Client::connect(host);
    create(&mut on_host, "orders", 2, 1);

    assert_eq!(
        brokers(&metadata(&mut on_internal)),
        [(1, "127.0.0.1".to_string(), internal as i32)]
    );
    let m = metadata(&mut on_host);
    assert_eq!(brokers(&m), [(1, "localhost".to_string(), host as i32)]);
    let t = m
        .topics
        .iter()
        .find(|t| t.name.as_ref().unwrap().0.as_str() == "orders");
    assert!(
        t.unwrap()
            .partitions
            .iter()
            .all(|p| p.error_code == 0 && p.leader_id.0 == 1)
    );

    assert_eq!(
        coordinator(&mut on_internal, "g"),
        (0, "127.0.0.1".to_string(), internal as i32)
    );
    assert_eq!(
        coordinator(&mut on_host, "g"),
        (0, "localhost".to_string(), host as i32)
    );
    assert_eq!(
        described(&mut on_internal),
        [(1, "127.0.0.1".to_string(), internal as i32)]
    );
    assert_eq!(
        described(&mut on_host),
        [(1, "localhost".to_string(), host as i32)]
    );
}

#[test]
fn a_listener_not_advertised_names_no_broker() {
    let (shown, hidden) = (free_port(), free_port());
    let _b = Node::start(
        shown,
        &[
            format!("listeners=PLAINTEXT://127.0.0.1:{shown},HIDDEN://127.0.0.1:{hidden}"),
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,HIDDEN:PLAINTEXT".to_string(),
            format!("advertised.listeners=PLAINTEXT://127.0.0.1:{shown}"),
        ],
    );
    let mut on_shown = Client::connect(shown);
    create(&mut on_shown, "t", 1, 1);
    let mut on_hidden = Client::connect(hidden);
    let m = metadata(&mut on_hidden);
    assert!(m.brokers.is_empty(), "{:?}", m.brokers);
    let t = m
        .topics
        .iter()
        .find(|t| t.name.as_ref().unwrap().0.as_str() == "t");
    let p = &t.expect("topic t listed").partitions[0];
    assert_eq!(p.error_code, ResponseError::ListenerNotFound.code());
    assert_eq!(p.leader_id.0, -1);
    assert_eq!(
        coordinator(&mut on_hidden, "g").0,
        ResponseError::CoordinatorNotAvailable.code()
    );
    // The advertised listener itself is unaffected.
    let m = metadata(&mut on_shown);
    assert_eq!(brokers(&m), [(1, "127.0.0.1".to_string(), shown as i32)]);
}

#[test]
fn binding_every_address_advertises_the_given_host() {
    let port = free_port();
    let _b = Node::start(
        port,
        &[
            format!("listeners=PLAINTEXT://0.0.0.0:{port}"),
            format!("advertised.listeners=PLAINTEXT://broker.example:{port}"),
        ],
    );
    let mut c = Client::connect(port);
    assert_eq!(
        brokers(&metadata(&mut c)),
        [(1, "broker.example".to_string(), port as i32)]
    );
}

#[test]
fn two_listeners_on_one_port_stop_start_up_naming_the_key() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("--override")
        .arg(format!("log.dirs={}", dir.path().display()))
        .arg("--override")
        .arg(format!(
            "listeners=PLAINTEXT://:{port},OTHER://127.0.0.1:{port}"
        ))
        .arg("--override")
        .arg("listener.security.protocol.map=PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--override: listeners: each listener must have a different port"),
        "{err}"
    );
}

/// A 3-node cluster replicating over its internal listener while clients use a host
/// listener: the internal listener never shows host addresses, and the host one shows every
/// broker at its host address; acks=all produce through the host listener works.
#[test]
fn a_cluster_shows_each_listener_its_own_addresses() {
    let c = TestCluster::start(
        3,
        &[
            "listeners=PLAINTEXT://127.0.0.1:{port},HOST://127.0.0.1:{host_port},\
             CONTROLLER://127.0.0.1:{controller_port}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,HOST:PLAINTEXT,\
             CONTROLLER:PLAINTEXT",
            "advertised.listeners=PLAINTEXT://127.0.0.1:{port},HOST://localhost:{host_port}",
            "inter.broker.listener.name=PLAINTEXT",
        ],
    );
    let internal: Vec<(i32, String, i32)> = c
        .nodes
        .iter()
        .map(|n| (n.id, "127.0.0.1".to_string(), n.port as i32))
        .collect();
    let host: Vec<(i32, String, i32)> = c
        .nodes
        .iter()
        .map(|n| (n.id, "localhost".to_string(), n.host_port as i32))
        .collect();
    let mut on_host = Client::connect(c.nodes[0].host_port);
    create(&mut on_host, "replicated", 3, 3);
    for n in &c.nodes {
        let mut i = Client::connect(n.port);
        assert_eq!(brokers(&metadata(&mut i)), internal);
        assert_eq!(described(&mut i), internal);
        let mut h = Client::connect(n.host_port);
        assert_eq!(brokers(&metadata(&mut h)), host);
        assert_eq!(described(&mut h), host);
        // The first lookups may find __consumer_offsets still being created.
        let deadline = Instant::now() + Duration::from_secs(30);
        let (chost, cport) = loop {
            match coordinator(&mut h, "g") {
                (0, chost, cport) => break (chost, cport),
                (err, ..) => assert!(Instant::now() < deadline, "FindCoordinator: {err}"),
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(host.iter().any(|(_, hh, p)| *hh == chost && *p == cport));
        let mut i = Client::connect(n.port);
        let (err, ihost, iport) = coordinator(&mut i, "g");
        assert_eq!(err, 0);
        assert!(
            internal
                .iter()
                .any(|(_, hh, p)| *hh == ihost && *p == iport)
        );
    }
    // Every partition accepts an acks=all write through its leader's host listener.
    let deadline = Instant::now() + Duration::from_secs(30);
    for p in 0..3 {
        loop {
            let m = metadata(&mut on_host);
            let t = m
                .topics
                .iter()
                .find(|t| t.name.as_ref().unwrap().0.as_str() == "replicated")
                .unwrap();
            let part = &t.partitions[p as usize];
            let leader = part.leader_id.0;
            let isr_full = part.isr_nodes.len() == 3;
            if leader > 0 && isr_full {
                let port = c.nodes[c.index_of(leader)].host_port;
                let mut l = Client::connect(port);
                let r = common::produce_one(&mut l, "replicated", p, record_batch(&[b"v"], 0));
                if r.error_code == 0 {
                    break;
                }
            }
            assert!(
                Instant::now() < deadline,
                "partition {p} never took a write"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
