//! The metadata quorum, in process: several nodes on 127.0.0.1 with ports this test binds,
//! each in its own tokio runtime with its own directory. A crash drops the node's runtime
//! without a clean shutdown (every task stops at its next await, nothing is flushed beyond
//! what the node already made durable), then the node restarts from its directory.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice::cluster::quorum::{
    BoxFuture, CallError, ControllerService, ProposeError, Quorum, QuorumConfig, Role,
    ServiceError, StateMachine,
};
use tokio::runtime::Runtime;

const WAIT: Duration = Duration::from_secs(30);

type Applied = Arc<Mutex<Vec<(u64, Vec<u8>)>>>;

/// Records every applied record; its snapshot is the whole list.
struct Recorder {
    applied: Applied,
    restores: Arc<AtomicU64>,
}

impl StateMachine for Recorder {
    fn apply(&mut self, index: u64, record: &[u8]) {
        let mut a = self.applied.lock().unwrap();
        assert!(a.last().is_none_or(|(i, _)| *i < index), "indexes grow");
        a.push((index, record.to_vec()));
    }

    fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, r) in self.applied.lock().unwrap().iter() {
            out.extend_from_slice(&i.to_be_bytes());
            out.extend_from_slice(&(r.len() as u32).to_be_bytes());
            out.extend_from_slice(r);
        }
        out
    }

    fn restore(&mut self, _index: u64, mut snapshot: &[u8]) -> anyhow::Result<()> {
        let mut list = Vec::new();
        while !snapshot.is_empty() {
            anyhow::ensure!(snapshot.len() >= 12, "short snapshot");
            let i = u64::from_be_bytes(snapshot[..8].try_into()?);
            let n = u32::from_be_bytes(snapshot[8..12].try_into()?) as usize;
            anyhow::ensure!(snapshot.len() >= 12 + n, "short snapshot");
            list.push((i, snapshot[12..12 + n].to_vec()));
            snapshot = &snapshot[12 + n..];
        }
        *self.applied.lock().unwrap() = list;
        self.restores.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Answers a controller request by proposing it as a record and returning the index.
struct ProposeService {
    quorum: Quorum,
}

impl ControllerService for ProposeService {
    fn handle(&self, request: Vec<u8>) -> BoxFuture<'_, Result<Vec<u8>, ServiceError>> {
        Box::pin(async move {
            match self.quorum.propose(request).await {
                Ok(index) => Ok(format!("{}:{index}", self.quorum.node_id()).into_bytes()),
                Err(ProposeError::NotLeader { .. }) => Err(ServiceError::NotLeader),
                Err(e) => Err(ServiceError::Failed(e.to_string())),
            }
        })
    }
}

#[derive(Clone)]
struct Tuning {
    snapshot_every: u64,
    keep_after_snapshot: u64,
    cluster_id: Option<String>,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            snapshot_every: 10_000,
            keep_after_snapshot: 1000,
            cluster_id: None,
        }
    }
}

struct Node {
    id: u64,
    addr: SocketAddr,
    dir: PathBuf,
    voters: BTreeMap<u64, String>,
    tuning: Tuning,
    running: Option<(Runtime, Quorum)>,
    applied: Applied,
    restores: Arc<AtomicU64>,
}

impl Node {
    fn new(
        id: u64,
        listener: TcpListener,
        root: &std::path::Path,
        voters: &BTreeMap<u64, String>,
        tuning: Tuning,
    ) -> Node {
        let addr = listener.local_addr().unwrap();
        let mut n = Node {
            id,
            addr,
            dir: root.join(format!("node-{id}")),
            voters: voters.clone(),
            tuning,
            running: None,
            applied: Arc::default(),
            restores: Arc::default(),
        };
        n.start(Some(listener));
        n
    }

    fn config(&self) -> QuorumConfig {
        let mut c = QuorumConfig::new(self.id, self.voters.clone(), &self.dir, self.addr);
        c.election_timeout = Duration::from_millis(300);
        c.fetch_timeout = Duration::from_millis(600);
        c.request_timeout = Duration::from_secs(10);
        c.snapshot_every = self.tuning.snapshot_every;
        c.keep_after_snapshot = self.tuning.keep_after_snapshot;
        c.cluster_id = self.tuning.cluster_id.clone();
        c.segment_bytes = 4096;
        c
    }

    fn start(&mut self, listener: Option<TcpListener>) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        // A fresh state machine: whatever survives comes from the directory.
        self.applied = Arc::default();
        self.restores = Arc::default();
        let deadline = Instant::now() + WAIT;
        let mut listener = listener;
        let quorum = loop {
            let l = match listener.take() {
                Some(l) => l,
                None => match TcpListener::bind(self.addr) {
                    Ok(l) => l,
                    Err(e) if Instant::now() < deadline => {
                        eprintln!("node {}: rebinding {}: {e}", self.id, self.addr);
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                    Err(e) => panic!("cannot rebind {}: {e}", self.addr),
                },
            };
            let sm = Recorder {
                applied: self.applied.clone(),
                restores: self.restores.clone(),
            };
            match rt.block_on(Quorum::start_on(self.config(), l, sm)) {
                Ok(q) => break q,
                // The crashed runtime may still be releasing the directory lock.
                Err(e) if e.to_string().contains("in use") && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("node {} failed to start: {e:#}", self.id),
            }
        };
        quorum.set_controller_service(Arc::new(ProposeService {
            quorum: quorum.clone(),
        }));
        self.running = Some((rt, quorum));
    }

    /// Stops the node abruptly: its runtime is dropped with every task in it.
    fn crash(&mut self) {
        let (rt, quorum) = self.running.take().expect("running");
        drop(quorum);
        rt.shutdown_background();
    }

    fn restart(&mut self) {
        self.start(None);
    }

    fn q(&self) -> &Quorum {
        &self.running.as_ref().expect("running").1
    }

    fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.running.as_ref().expect("running").0.block_on(f)
    }

    fn is_up(&self) -> bool {
        self.running.is_some()
    }

    fn applied(&self) -> Vec<(u64, Vec<u8>)> {
        self.applied.lock().unwrap().clone()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some((rt, q)) = self.running.take() {
            rt.block_on(q.shutdown());
            rt.shutdown_background();
        }
    }
}

struct Cluster {
    _root: tempfile::TempDir,
    nodes: Vec<Node>,
}

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// `voters` voters (ids 1..) and `learners` learners after them.
fn cluster(voters: u64, learners: u64, tuning: Tuning) -> Cluster {
    init_tracing();
    let root = tempfile::tempdir().unwrap();
    let listeners: Vec<TcpListener> = (0..voters + learners)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let voter_map: BTreeMap<u64, String> = (1..=voters)
        .map(|id| {
            (
                id,
                listeners[id as usize - 1].local_addr().unwrap().to_string(),
            )
        })
        .collect();
    let nodes = listeners
        .into_iter()
        .enumerate()
        .map(|(i, l)| Node::new(i as u64 + 1, l, root.path(), &voter_map, tuning.clone()))
        .collect();
    Cluster { _root: root, nodes }
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Cluster {
    fn node(&self, id: u64) -> &Node {
        &self.nodes[id as usize - 1]
    }

    fn node_mut(&mut self, id: u64) -> &mut Node {
        &mut self.nodes[id as usize - 1]
    }

    /// The leader that every running voter agrees on.
    fn leader(&self) -> u64 {
        let mut found = 0;
        wait_until("one leader all running nodes agree on", || {
            let views: Vec<Option<u64>> = self
                .nodes
                .iter()
                .filter(|n| n.is_up())
                .map(|n| n.q().leader())
                .collect();
            match views[0] {
                Some(l) if views.iter().all(|v| *v == Some(l)) && self.node(l).is_up() => {
                    let st = self.node(l).block_on(self.node(l).q().status());
                    found = l;
                    st.role == Role::Leader
                }
                _ => false,
            }
        });
        found
    }

    /// Proposes on the leader, retrying through leader changes; returns the index.
    fn propose(&self, record: &str) -> u64 {
        let deadline = Instant::now() + WAIT;
        loop {
            let l = self.leader();
            match self
                .node(l)
                .block_on(self.node(l).q().propose(record.as_bytes().to_vec()))
            {
                Ok(i) => return i,
                Err(ProposeError::NotLeader { .. }) if Instant::now() < deadline => continue,
                Err(e) => panic!("propose {record}: {e}"),
            }
        }
    }

    fn wait_applied_everywhere(&self, index: u64) {
        for n in self.nodes.iter().filter(|n| n.is_up()) {
            assert!(
                n.block_on(n.q().wait_applied(index, WAIT)),
                "node {} did not apply {index}",
                n.id
            );
        }
    }

    fn records(node: &Node) -> Vec<String> {
        node.applied()
            .into_iter()
            .map(|(_, r)| String::from_utf8(r).unwrap())
            .collect()
    }
}

#[test]
fn three_voters_elect_one_leader_and_apply_in_order() {
    let c = cluster(3, 0, Tuning::default());
    let leader = c.leader();
    let want: Vec<String> = (0..20).map(|i| format!("r{i}")).collect();
    let mut last = 0;
    for r in &want {
        let i = c.propose(r);
        assert!(i > last, "indexes grow");
        last = i;
    }
    c.wait_applied_everywhere(last);
    for n in &c.nodes {
        assert_eq!(Cluster::records(n), want, "node {}", n.id);
        assert_eq!(
            n.applied(),
            c.node(leader).applied(),
            "node {} applied the same indexes",
            n.id
        );
    }
    let ids: Vec<_> = c.nodes.iter().map(|n| n.q().cluster_id()).collect();
    assert!(
        ids[0].is_some() && ids.iter().all(|i| *i == ids[0]),
        "one cluster id: {ids:?}"
    );

    let st = c.node(leader).block_on(c.node(leader).q().status());
    assert_eq!(st.leader, Some(leader));
    assert!(st.term >= 1);
    assert!(
        st.high_watermark > last,
        "hw {} after {last}",
        st.high_watermark
    );
    assert_eq!(
        st.voters.iter().map(|v| v.node_id).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert!(st.observers.is_empty());
    for v in &st.voters {
        assert!(v.log_end_offset.is_some(), "{v:?}");
    }
    let follower = if leader == 1 { 2 } else { 1 };
    let fst = c.node(follower).block_on(c.node(follower).q().status());
    assert_eq!(fst.role, Role::Follower);
    assert_eq!(fst.leader, Some(leader));
}

#[test]
fn leader_crash_elects_a_new_leader_and_loses_nothing() {
    let mut c = cluster(3, 0, Tuning::default());
    let mut want = Vec::new();
    for i in 0..10 {
        want.push(format!("a{i}"));
        c.propose(&want[i]);
    }
    let old = c.leader();
    c.node_mut(old).crash();
    let new = c.leader();
    assert_ne!(new, old);
    let mut last = 0;
    for i in 0..10 {
        want.push(format!("b{i}"));
        last = c.propose(want.last().unwrap());
    }
    c.wait_applied_everywhere(last);
    for n in c.nodes.iter().filter(|n| n.is_up()) {
        assert_eq!(Cluster::records(n), want, "node {}", n.id);
    }
    c.node_mut(old).restart();
    c.wait_applied_everywhere(last);
    assert_eq!(
        Cluster::records(c.node(old)),
        want,
        "the restarted node caught up"
    );
    assert_eq!(c.node(old).applied(), c.node(new).applied());
}

#[test]
fn restarted_follower_catches_up_through_a_snapshot_after_purge() {
    let mut c = cluster(
        3,
        0,
        Tuning {
            snapshot_every: 5,
            keep_after_snapshot: 0,
            ..Tuning::default()
        },
    );
    c.propose("first");
    let leader = c.leader();
    let follower = (1..=3).find(|&i| i != leader).unwrap();
    c.node_mut(follower).crash();
    let mut last = 0;
    for i in 0..40 {
        last = c.propose(&format!("s{i}"));
    }
    c.wait_applied_everywhere(last);
    c.node_mut(follower).restart();
    c.wait_applied_everywhere(last);
    let f = c.node(follower);
    assert!(
        f.restores.load(Ordering::Relaxed) >= 1,
        "the follower was sent a snapshot (its log position was purged on the leader)"
    );
    assert!(f.dir.join("snapshot").exists());
    assert_eq!(f.applied(), c.node(leader).applied());
    assert_eq!(Cluster::records(f).len(), 41);

    // And it survives another crash, restoring its own snapshot.
    c.node_mut(follower).crash();
    c.node_mut(follower).restart();
    let f = c.node(follower);
    assert!(f.block_on(f.q().wait_applied(last, WAIT)));
    assert_eq!(f.applied(), c.node(leader).applied());
}

#[test]
fn learner_follows_without_voting() {
    let c = cluster(3, 1, Tuning::default());
    let leader = c.leader();
    wait_until("the learner in the membership", || {
        let st = c.node(leader).block_on(c.node(leader).q().status());
        st.observers.iter().any(|o| o.node_id == 4)
    });
    let mut last = 0;
    for i in 0..10 {
        last = c.propose(&format!("l{i}"));
    }
    c.wait_applied_everywhere(last);
    assert_eq!(Cluster::records(c.node(4)).len(), 10);
    assert_eq!(c.node(4).applied(), c.node(leader).applied());
    let st = c.node(leader).block_on(c.node(leader).q().status());
    assert_eq!(
        st.voters.iter().map(|v| v.node_id).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(
        st.observers.iter().map(|v| v.node_id).collect::<Vec<_>>(),
        vec![4]
    );
    wait_until("the leader's view of the learner's log end", || {
        let st = c.node(leader).block_on(c.node(leader).q().status());
        st.observers[0].log_end_offset > Some(last) && st.observers[0].last_fetch_ms.is_some()
    });
    let lst = c.node(4).block_on(c.node(4).q().status());
    assert_eq!(lst.role, Role::Learner);
    assert_eq!(lst.leader, Some(leader));
}

#[test]
fn call_leader_reaches_the_leader_from_a_follower_and_a_learner() {
    let mut c = cluster(3, 1, Tuning::default());
    let leader = c.leader();
    let follower = (1..=3).find(|&i| i != leader).unwrap();
    for from in [follower, 4] {
        let n = c.node(from);
        let answer = n
            .block_on(n.q().call_leader(format!("from-{from}").into_bytes()))
            .unwrap_or_else(|e| panic!("call from {from}: {e}"));
        let answer = String::from_utf8(answer).unwrap();
        let (who, index) = answer.split_once(':').unwrap();
        assert_eq!(who, leader.to_string(), "answered by the leader");
        let index: u64 = index.parse().unwrap();
        assert!(n.block_on(n.q().wait_applied(index, WAIT)));
        assert!(Cluster::records(n).contains(&format!("from-{from}")));
    }

    // Across a leader crash, the call finds the new leader.
    c.node_mut(leader).crash();
    let n = c.node(4);
    let answer = n
        .block_on(n.q().call_leader_within(b"after-crash".to_vec(), WAIT))
        .expect("call after the leader crashed");
    let who: u64 = String::from_utf8(answer)
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(who, leader);
    assert_eq!(Some(who), Some(c.leader()));
}

#[test]
fn a_node_of_another_cluster_is_refused() {
    init_tracing();
    let c = cluster(3, 0, Tuning::default());
    let leader = c.leader();
    c.propose("x");
    let theirs = c.node(1).q().cluster_id().unwrap();

    // A broker-only node configured for another cluster id.
    let root = tempfile::tempdir().unwrap();
    let voters = c.node(1).voters.clone();
    let stranger = Node::new(
        9,
        TcpListener::bind("127.0.0.1:0").unwrap(),
        root.path(),
        &voters,
        Tuning {
            cluster_id: Some("another-cluster-id".into()),
            ..Tuning::default()
        },
    );
    let err = stranger
        .block_on(stranger.q().call_leader_within(b"hello".to_vec(), WAIT))
        .expect_err("refused");
    match &err {
        CallError::Refused(reason) => {
            assert!(reason.contains("cluster id mismatch"), "{reason}");
            assert!(
                reason.contains(&theirs) && reason.contains("another-cluster-id"),
                "{reason}"
            );
        }
        other => panic!("expected a refusal, got {other}"),
    }
    wait_until("the refusal counted on a voter", || {
        c.nodes
            .iter()
            .any(|n| n.block_on(n.q().status()).handshakes_refused > 0)
    });
    assert!(stranger.block_on(stranger.q().status()).handshakes_refused > 0);
    let st = c.node(leader).block_on(c.node(leader).q().status());
    assert!(st.observers.is_empty(), "the stranger never joined");
    assert_eq!(
        stranger.q().cluster_id().as_deref(),
        Some("another-cluster-id")
    );
}

/// A small deterministic generator (the test must not depend on a random crate's stream).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn random_crashes_keep_applied_sequences_identical_prefixes() {
    let mut c = cluster(
        3,
        0,
        Tuning {
            snapshot_every: 7,
            keep_after_snapshot: 2,
            ..Tuning::default()
        },
    );
    let mut rng = Lcg(0x5eed);
    let mut acked: Vec<(u64, String)> = Vec::new();
    for round in 0..15 {
        let leader = c.leader();
        for k in 0..1 + rng.below(6) {
            let r = format!("round{round}-{k}");
            let l = c.node(leader);
            match l.block_on(l.q().propose(r.as_bytes().to_vec())) {
                Ok(i) => acked.push((i, r)),
                Err(ProposeError::NotLeader { .. }) => break,
                Err(e) => panic!("{e}"),
            }
        }
        // Mostly the leader, sometimes a follower.
        let victim = if rng.below(4) == 0 {
            (1..=3).find(|&i| i != leader).unwrap()
        } else {
            leader
        };
        c.node_mut(victim).crash();
        let l = c.leader();
        let r = format!("round{round}-during");
        let n = c.node(l);
        if let Ok(i) = n.block_on(n.q().propose(r.as_bytes().to_vec())) {
            acked.push((i, r));
        }
        c.node_mut(victim).restart();
    }
    let last = acked.iter().map(|(i, _)| *i).max().unwrap();
    c.wait_applied_everywhere(last);
    let seqs: Vec<_> = c.nodes.iter().map(|n| n.applied()).collect();
    for (a, b) in seqs.iter().zip(seqs.iter().skip(1)) {
        let n = a.len().min(b.len());
        assert_eq!(
            a[..n],
            b[..n],
            "applied sequences are prefixes of one another"
        );
    }
    for s in &seqs {
        for (i, r) in &acked {
            assert!(
                s.iter().any(|(j, rr)| j == i && rr == r.as_bytes()),
                "acknowledged {r} at {i} is applied everywhere"
            );
        }
    }
}

/// Reads until the peer closes the connection; false if it stays open for `WAIT`.
fn closed_by_peer(s: &mut std::net::TcpStream) -> bool {
    use std::io::Read;
    s.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn malformed_frames_close_only_that_connection() {
    use std::io::{Read, Write};
    let c = cluster(3, 0, Tuning::default());
    let leader = c.leader();
    let addr = c.node(leader).addr;

    // Garbage instead of a handshake.
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(&[0, 0, 0, 3, 0xff, 0xff, 0xff]).unwrap();
    assert!(
        closed_by_peer(&mut s),
        "a malformed handshake closes the connection"
    );

    // A length past the frame limit.
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(&[0xff, 0xff, 0xff, 0xf0, 1, 2, 3]).unwrap();
    assert!(
        closed_by_peer(&mut s),
        "an oversized frame closes the connection"
    );

    // A valid handshake (postcard: no cluster id, from node 9, to the leader, a 16-byte
    // directory id), then garbage.
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut hello = vec![0, 0, 0, 19, 0, 9, leader as u8];
    hello.extend_from_slice(&[7u8; 16]);
    s.write_all(&hello).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut welcome = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut welcome).unwrap();
    assert_eq!(welcome[0], 0, "accepted");
    s.write_all(&[0, 0, 0, 4, 0x07, 0xff, 0xff, 0xff]).unwrap();
    assert!(
        closed_by_peer(&mut s),
        "a malformed request closes the connection"
    );

    // The node and the cluster carry on.
    let i = c.propose("still-working");
    c.wait_applied_everywhere(i);
    assert!(Cluster::records(c.node(leader)).contains(&"still-working".to_string()));
}

#[test]
fn lowest_voter_with_a_lost_dir_rejoins_instead_of_forming_a_new_cluster() {
    let mut c = cluster(3, 0, Tuning::default());
    let mut last = 0;
    for i in 0..5 {
        last = c.propose(&format!("before-{i}"));
    }
    c.wait_applied_everywhere(last);
    let cluster_id = c.node(2).q().cluster_id();
    c.node_mut(1).crash();
    let dir = c.node(1).dir.clone();
    wait_until("node 1's directory removed", || {
        std::fs::remove_dir_all(&dir).is_ok()
    });
    c.node_mut(1).restart();
    for i in 0..5 {
        last = c.propose(&format!("after-{i}"));
    }
    c.wait_applied_everywhere(last);
    assert_eq!(
        c.node(1).q().cluster_id(),
        cluster_id,
        "it learned the existing cluster id"
    );
    assert_eq!(Cluster::records(c.node(1)), Cluster::records(c.node(2)));
    assert_eq!(Cluster::records(c.node(1)).len(), 10);
}
