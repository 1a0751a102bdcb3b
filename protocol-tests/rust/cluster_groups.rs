//! The group coordinator in a real 3-node cluster: three `sluice` processes (KRaft settings,
//! each broker and controller) on loopback ports 29301-29303 (clients) and 29321-29323
//! (controllers). A group's coordinator is the leader of its `__consumer_offsets` partition;
//! the other brokers answer NOT_COORDINATOR. Offsets and group metadata written through the
//! coordinator survive SIGKILL of its process: the partition's new leader loads them.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::Client;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const NODES: [i32; 3] = [1, 2, 3];
const OFFSETS: &str = "__consumer_offsets";
const GROUP: &str = "cluster-group";
const TOPIC: &str = "orders";
const COMMITTED: [(i32, i64); 3] = [(0, 10), (1, 20), (2, 30)];
/// Every wait for the cluster (forming, electing, loading) is bounded by this.
const PATIENCE: Duration = Duration::from_secs(90);

const NOT_COORDINATOR: i16 = 16;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const MEMBER_ID_REQUIRED: i16 = 79;
const REBALANCE_IN_PROGRESS: i16 = 27;

fn client_port(id: i32) -> u16 {
    29300 + id as u16
}

fn controller_port(id: i32) -> u16 {
    29320 + id as u16
}

/// One node: its directory (config, data, metadata, log) and process.
struct Node {
    id: i32,
    dir: PathBuf,
    child: Option<Child>,
}

impl Node {
    fn start(root: &Path, id: i32) -> Node {
        let dir = root.join(format!("node-{id}"));
        std::fs::create_dir_all(&dir).unwrap();
        let voters: Vec<String> = NODES
            .iter()
            .map(|n| format!("{n}@127.0.0.1:{}", controller_port(*n)))
            .collect();
        let props = format!(
            "process.roles=broker,controller\n\
             node.id={id}\n\
             controller.quorum.voters={}\n\
             listeners=PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{}\n\
             advertised.listeners=PLAINTEXT://127.0.0.1:{}\n\
             controller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
             inter.broker.listener.name=PLAINTEXT\n\
             log.dirs={}\n\
             metadata.log.dir={}\n\
             offsets.topic.replication.factor=3\n\
             group.initial.rebalance.delay.ms=0\n\
             broker.heartbeat.interval.ms=500\n\
             broker.session.timeout.ms=4000\n\
             replica.lag.time.max.ms=10000\n",
            voters.join(","),
            client_port(id),
            controller_port(id),
            client_port(id),
            dir.join("data").display(),
            dir.join("meta").display(),
        );
        let config = dir.join("server.properties");
        std::fs::write(&config, props).unwrap();
        let log = std::fs::File::create(dir.join("broker.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start sluice");
        Node {
            id,
            dir,
            child: Some(child),
        }
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("broker.log")).unwrap_or_default()
    }
}

struct Cluster {
    nodes: Vec<Node>,
    _root: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Cluster {
        let root = tempfile::tempdir().unwrap();
        let nodes = NODES
            .iter()
            .map(|id| Node::start(root.path(), *id))
            .collect();
        Cluster { nodes, _root: root }
    }

    fn node(&mut self, id: i32) -> &mut Node {
        self.nodes.iter_mut().find(|n| n.id == id).unwrap()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            n.kill9();
        }
        if std::thread::panicking() {
            for n in &self.nodes {
                let log = n.log();
                let tail: Vec<&str> = log.lines().rev().take(60).collect();
                eprintln!("---- node {} log (last lines) ----", n.id);
                for l in tail.into_iter().rev() {
                    eprintln!("{l}");
                }
            }
        }
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A client of node `id`, once it accepts connections (bounded by PATIENCE).
fn connect(id: i32) -> Client {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Ok(stream) = std::net::TcpStream::connect(("127.0.0.1", client_port(id))) {
            drop(stream);
            return Client::connect(client_port(id));
        }
        assert!(Instant::now() < deadline, "node {id} never listened");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Repeats `f` until it gives Some (every 200 ms, bounded by PATIENCE).
fn until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn metadata(c: &mut Client) -> MetadataResponse {
    let mut r = MetadataRequest::default();
    r.topics = None;
    c.call(ApiKey::Metadata, 12, &r)
}

/// (leader, leader epoch) of partition `p` of `topic`, as `c`'s broker sees it.
fn leader_of(c: &mut Client, topic: &str, p: i32) -> Option<(i32, i32)> {
    let m = metadata(c);
    let t = m
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))?;
    let part = t.partitions.iter().find(|x| x.partition_index == p)?;
    (part.error_code == 0 && part.leader_id.0 >= 0).then_some((part.leader_id.0, part.leader_epoch))
}

fn find_coordinator(c: &mut Client) -> FindCoordinatorResponse {
    let mut r = FindCoordinatorRequest::default();
    r.key = s(GROUP);
    r.key_type = 0;
    c.call(ApiKey::FindCoordinator, 3, &r)
}

fn join(c: &mut Client, member_id: &str) -> JoinGroupResponse {
    let mut p = JoinGroupRequestProtocol::default();
    p.name = s("range");
    p.metadata = Bytes::from_static(b"\x00\x01\x00\x00\x00\x01\x00\x06orders\x00\x00\x00\x00");
    let mut r = JoinGroupRequest::default();
    r.group_id = GroupId(s(GROUP));
    r.session_timeout_ms = 120_000;
    r.rebalance_timeout_ms = 30_000;
    r.member_id = s(member_id);
    r.protocol_type = s("consumer");
    r.protocols = vec![p];
    c.call(ApiKey::JoinGroup, 5, &r)
}

fn sync(c: &mut Client, member_id: &str, generation: i32) -> SyncGroupResponse {
    let mut a = SyncGroupRequestAssignment::default();
    a.member_id = s(member_id);
    a.assignment = Bytes::from_static(b"assigned");
    let mut r = SyncGroupRequest::default();
    r.group_id = GroupId(s(GROUP));
    r.generation_id = generation;
    r.member_id = s(member_id);
    r.assignments = vec![a];
    c.call(ApiKey::SyncGroup, 3, &r)
}

/// OffsetCommit v8 of COMMITTED; the error of each partition.
fn commit(c: &mut Client, member_id: &str, generation: i32) -> Vec<i16> {
    let mut t = OffsetCommitRequestTopic::default();
    t.name = TopicName(s(TOPIC));
    t.partitions = COMMITTED
        .iter()
        .map(|(p, o)| {
            let mut x = OffsetCommitRequestPartition::default();
            x.partition_index = *p;
            x.committed_offset = *o;
            x.committed_leader_epoch = -1;
            x.committed_metadata = Some(s("meta"));
            x
        })
        .collect();
    let mut r = OffsetCommitRequest::default();
    r.group_id = GroupId(s(GROUP));
    r.generation_id_or_member_epoch = generation;
    r.member_id = s(member_id);
    r.topics = vec![t];
    let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &r);
    resp.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect()
}

/// OffsetFetch v8 of TOPIC's partitions: (group error, [(partition, offset, error)]).
fn fetch_offsets(c: &mut Client) -> (i16, Vec<(i32, i64, i16)>) {
    let mut t = OffsetFetchRequestTopics::default();
    t.name = TopicName(s(TOPIC));
    t.partition_indexes = COMMITTED.iter().map(|(p, _)| *p).collect();
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = GroupId(s(GROUP));
    g.topics = Some(vec![t]);
    let mut r = OffsetFetchRequest::default();
    r.groups = vec![g];
    let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 8, &r);
    let g = &resp.groups[0];
    let parts = g
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.partition_index, p.committed_offset, p.error_code))
        .collect();
    (g.error_code, parts)
}

fn describe(c: &mut Client) -> describe_groups_response::DescribedGroup {
    let mut r = DescribeGroupsRequest::default();
    r.groups = vec![GroupId(s(GROUP))];
    let mut resp: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, 5, &r);
    resp.groups.remove(0)
}

fn retriable(code: i16) -> bool {
    code == COORDINATOR_LOAD_IN_PROGRESS || code == COORDINATOR_NOT_AVAILABLE
}

/// The coordinator FindCoordinator names through `c`, once it names one.
fn coordinator(c: &mut Client) -> i32 {
    until("FindCoordinator names a coordinator", || {
        let r = find_coordinator(c);
        (r.error_code == 0).then_some(r.node_id.0)
    })
}

#[test]
fn coordinator_is_the_offsets_partition_leader_and_offsets_survive_its_kill() {
    let mut cluster = Cluster::start();
    let mut clients: Vec<(i32, Client)> = NODES.iter().map(|id| (*id, connect(*id))).collect();
    until("all three brokers are registered", || {
        (metadata(&mut clients[0].1).brokers.len() == 3).then_some(())
    });
    let r: CreateTopicsResponse = clients[0].1.call(
        ApiKey::CreateTopics,
        5,
        &common::create_topic_request(TOPIC, 3, 3, &[]),
    );
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);

    // The coordinator is the leader of the group's __consumer_offsets partition.
    let coord = coordinator(&mut clients[0].1);
    let partitions = until("__consumer_offsets is in the metadata", || {
        let m = metadata(&mut clients[0].1);
        m.topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == OFFSETS))
            .map(|t| t.partitions.len() as i32)
            .filter(|n| *n > 0)
    });
    let home = sluice::group::records::partition_for(GROUP, partitions);
    let (leader, epoch) = until("the group's offsets partition has a leader", || {
        leader_of(&mut clients[0].1, OFFSETS, home)
    });
    assert_eq!(coord, leader, "the coordinator leads {OFFSETS}-{home}");
    for (id, c) in &mut clients {
        assert_eq!(
            coordinator(c),
            coord,
            "node {id} names the same coordinator"
        );
    }

    // The other two brokers do not coordinate the group.
    for (id, c) in clients.iter_mut().filter(|(id, _)| *id != coord) {
        let j = join(c, "");
        assert_eq!(j.error_code, NOT_COORDINATOR, "JoinGroup on node {id}");
        let codes = until("the topic is known on every broker", || {
            let codes = commit(c, "", -1);
            (!codes.contains(&3)).then_some(codes)
        });
        assert_eq!(codes, vec![NOT_COORDINATOR; 3], "OffsetCommit on node {id}");
        let (err, _) = fetch_offsets(c);
        assert_eq!(err, NOT_COORDINATOR, "OffsetFetch on node {id}");
    }

    // A member joins through the coordinator, syncs, and commits: each answer comes once
    // the write is committed on the partition's in-sync replicas.
    let c = &mut clients.iter_mut().find(|(id, _)| *id == coord).unwrap().1;
    let first = until("the coordinator has loaded the group's partition", || {
        let j = join(c, "");
        (!retriable(j.error_code)).then_some(j)
    });
    assert_eq!(first.error_code, MEMBER_ID_REQUIRED);
    let member = first.member_id.to_string();
    // As a consumer does: a SyncGroup whose write could not be committed in time
    // (COORDINATOR_NOT_AVAILABLE) or a rebalance it started means join again.
    let (joined, synced) = until("the group is stable", || {
        let joined = join(c, &member);
        if joined.error_code == REBALANCE_IN_PROGRESS || retriable(joined.error_code) {
            return None;
        }
        assert_eq!(joined.error_code, 0);
        let synced = sync(c, &member, joined.generation_id);
        if synced.error_code == REBALANCE_IN_PROGRESS || retriable(synced.error_code) {
            return None;
        }
        Some((joined, synced))
    });
    assert_eq!(joined.leader.as_str(), member);
    assert_eq!(synced.error_code, 0);
    assert_eq!(&synced.assignment[..], b"assigned");
    let codes = until("the offset commit is committed", || {
        let codes = commit(c, &member, joined.generation_id);
        (!codes.iter().any(|e| retriable(*e))).then_some(codes)
    });
    assert_eq!(codes, vec![0; 3]);
    let (err, got) = fetch_offsets(c);
    assert_eq!(err, 0);
    let want: Vec<(i32, i64, i16)> = COMMITTED.iter().map(|(p, o)| (*p, *o, 0)).collect();
    assert_eq!(got, want);

    // SIGKILL the coordinator; another replica of the partition takes over.
    cluster.node(coord).kill9();
    clients.retain(|(id, _)| *id != coord);
    let (new_leader, new_epoch) = until("a new leader of the group's offsets partition", || {
        leader_of(&mut clients[0].1, OFFSETS, home).filter(|(l, _)| *l != coord)
    });
    assert!(new_epoch > epoch, "a new leader epoch");
    let new_coord = until("FindCoordinator names a live broker", || {
        let id = coordinator(&mut clients[0].1);
        (id != coord).then_some(id)
    });
    assert_eq!(new_coord, new_leader);

    // The new coordinator has the committed offsets and the group.
    let c = &mut clients
        .iter_mut()
        .find(|(id, _)| *id == new_coord)
        .unwrap()
        .1;
    let (err, got) = until("the new coordinator has loaded the group", || {
        let (err, got) = fetch_offsets(c);
        (!retriable(err) && err != NOT_COORDINATOR).then_some((err, got))
    });
    assert_eq!(err, 0);
    assert_eq!(
        got, want,
        "the committed offsets survived the coordinator's kill"
    );
    let g = describe(c);
    assert_eq!(g.error_code, 0);
    assert_eq!(g.group_state.as_str(), "Stable");
    assert_eq!(g.members.len(), 1);
    assert_eq!(g.members[0].member_id.as_str(), member);
    assert_eq!(&g.members[0].member_assignment[..], b"assigned");
    // The survivor that is not the coordinator still answers NOT_COORDINATOR.
    for (id, c) in clients.iter_mut().filter(|(id, _)| *id != new_coord) {
        assert_eq!(
            join(c, "").error_code,
            NOT_COORDINATOR,
            "JoinGroup on node {id}"
        );
    }
}
