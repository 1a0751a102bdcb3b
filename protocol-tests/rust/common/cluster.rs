//! A cluster of real `sluice` processes on loopback, each with its own data dirs under one
//! temporary directory: combined nodes (`process.roles=broker,controller`) by default, or any
//! mix of controller-only, broker-only and combined nodes.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse};

use super::{Client, answers_api_versions, free_port};

pub struct Node {
    pub id: i32,
    pub port: u16,
    pub controller_port: u16,
    /// A third free port, for a setting in `extra` that names `{host_port}`.
    pub host_port: u16,
    /// `process.roles`, with `:bootstrap` after `broker` for a broker-only node that finds the
    /// controllers through `controller.quorum.bootstrap.servers` rather than the voter list.
    pub roles: &'static str,
    child: Option<Child>,
}

impl Node {
    pub fn is_broker(&self) -> bool {
        self.roles.contains("broker")
    }

    pub fn is_controller(&self) -> bool {
        self.roles.contains("controller")
    }

    fn process_roles(&self) -> &str {
        self.roles.split(':').next().unwrap_or_default()
    }
}

pub struct TestCluster {
    pub dir: tempfile::TempDir,
    pub nodes: Vec<Node>,
    extra: Vec<String>,
}

impl TestCluster {
    /// Starts `n` combined nodes (ids 1..=n) and waits until every node lists all `n`
    /// brokers.
    pub fn start(n: usize, extra: &[&str]) -> TestCluster {
        Self::start_with_roles(&vec!["broker,controller"; n], extra)
    }

    /// Starts a node with `process.roles=roles[i]` for each entry (ids 1..=n; the nodes with
    /// the controller role are the voters) and waits until every broker lists every broker.
    pub fn start_with_roles(roles: &[&'static str], extra: &[&str]) -> TestCluster {
        let n = roles.len();
        let mut ports = Vec::new();
        while ports.len() < 3 * n {
            let p = free_port();
            if !ports.contains(&p) {
                ports.push(p);
            }
        }
        let nodes = (0..n)
            .map(|i| Node {
                id: i as i32 + 1,
                port: ports[3 * i],
                controller_port: ports[3 * i + 1],
                host_port: ports[3 * i + 2],
                roles: roles[i],
                child: None,
            })
            .collect();
        let mut c = TestCluster {
            dir: tempfile::tempdir().unwrap(),
            nodes,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        for i in 0..n {
            c.spawn(i);
        }
        for i in 0..n {
            c.wait_ready(i);
        }
        let brokers = c.nodes.iter().filter(|n| n.is_broker()).count();
        c.wait_for(Duration::from_secs(30), "all brokers registered", |c| {
            (0..n)
                .filter(|i| c.nodes[*i].is_broker())
                .all(|i| c.metadata(i).is_some_and(|m| m.brokers.len() == brokers))
        });
        c
    }

    pub fn node_dir(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("node-{}", self.nodes[i].id))
    }

    pub fn log_path(&self, i: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("node-{}.log", self.nodes[i].id))
    }

    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.log_path(i)).unwrap_or_default()
    }

    fn spawn(&mut self, i: usize) {
        let voters: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| n.is_controller())
            .map(|n| format!("{}@127.0.0.1:{}", n.id, n.controller_port))
            .collect();
        let node = &self.nodes[i];
        let mut settings = node_settings(
            node.id,
            &voters,
            ("127.0.0.1", node.port, node.controller_port),
            &self.node_dir(i),
        );
        // A node without both roles has only its role's listener.
        let listeners = match (node.is_broker(), node.is_controller()) {
            (true, false) => Some(format!("listeners=PLAINTEXT://127.0.0.1:{}", node.port)),
            (false, true) => Some(format!(
                "listeners=CONTROLLER://127.0.0.1:{}",
                node.controller_port
            )),
            _ => None,
        };
        let bootstrap: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| n.is_controller())
            .map(|n| format!("127.0.0.1:{}", n.controller_port))
            .collect();
        for s in settings.iter_mut() {
            if s.starts_with("controller.quorum.voters=") && node.roles.ends_with(":bootstrap") {
                *s = format!(
                    "controller.quorum.bootstrap.servers={}",
                    bootstrap.join(",")
                );
            } else if s.starts_with("process.roles=") {
                *s = format!("process.roles={}", node.process_roles());
            } else if let Some(l) = listeners.as_ref().filter(|_| s.starts_with("listeners=")) {
                *s = l.clone();
            }
        }
        // `{id}` in an extra setting is the node's id (e.g. `broker.rack=r{id}`), `{port}`,
        // `{controller_port}` and `{host_port}` its ports.
        let fill = |s: &str| {
            s.replace("{id}", &node.id.to_string())
                .replace("{port}", &node.port.to_string())
                .replace("{controller_port}", &node.controller_port.to_string())
                .replace("{host_port}", &node.host_port.to_string())
        };
        settings.extend(self.extra.iter().map(|s| fill(s)));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        for s in settings {
            cmd.arg("--override").arg(s);
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(i))
            .unwrap();
        cmd.stdout(Stdio::null()).stderr(log);
        self.nodes[i].child = Some(cmd.spawn().expect("start sluice"));
    }

    fn wait_ready(&self, i: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let node = &self.nodes[i];
        let ready = || {
            if node.is_broker() {
                answers_api_versions(node.port)
            } else {
                std::net::TcpStream::connect(("127.0.0.1", node.controller_port)).is_ok()
            }
        };
        while !ready() {
            assert!(
                Instant::now() < deadline,
                "node {} did not start:\n{}",
                self.nodes[i].id,
                self.log(i)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Restarts node `i` (stopped or killed) with its data.
    pub fn restart(&mut self, i: usize) {
        self.spawn(i);
        self.wait_ready(i);
    }

    pub fn kill9(&mut self, i: usize) {
        if let Some(mut c) = self.nodes[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM node `i` and wait for it to exit; its exit code.
    pub fn terminate(&mut self, i: usize) -> Option<i32> {
        let mut c = self.nodes[i].child.take()?;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(c.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        c.wait().ok().and_then(|s| s.code())
    }

    pub fn is_up(&self, i: usize) -> bool {
        self.nodes[i].child.is_some()
    }

    pub fn connect(&self, i: usize) -> Client {
        Client::connect(self.nodes[i].port)
    }

    /// The index of the node with broker id `id`.
    pub fn index_of(&self, id: i32) -> usize {
        self.nodes.iter().position(|n| n.id == id).unwrap()
    }

    /// Metadata of every topic as node `i` sees it; `None` if it does not answer.
    pub fn metadata(&self, i: usize) -> Option<MetadataResponse> {
        if !self.is_up(i) || !self.nodes[i].is_broker() {
            return None;
        }
        let mut c = std::panic::catch_unwind(|| self.connect(i)).ok()?;
        let mut req = MetadataRequest::default();
        req.topics = None;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            c.call::<_, MetadataResponse>(ApiKey::Metadata, 12, &req)
        }))
        .ok()
    }

    /// (leader, leader epoch, ISR) of `topic`-`partition` as node `i` sees it.
    pub fn partition_state(
        &self,
        i: usize,
        topic: &str,
        partition: i32,
    ) -> Option<(i32, i32, Vec<i32>)> {
        partition_state_in(&self.metadata(i)?, topic, partition)
    }

    /// Waits (bounded) until `cond` holds; panics naming `what` and the node logs' tails.
    pub fn wait_for(
        &self,
        limit: Duration,
        what: &str,
        mut cond: impl FnMut(&TestCluster) -> bool,
    ) {
        let deadline = Instant::now() + limit;
        while !cond(self) {
            if Instant::now() >= deadline {
                let tails: Vec<String> = (0..self.nodes.len())
                    .map(|i| {
                        let log = self.log(i);
                        let lines: Vec<&str> = log.lines().collect();
                        let from = lines.len().saturating_sub(15);
                        format!(
                            "--- node {}\n{}",
                            self.nodes[i].id,
                            lines[from..].join("\n")
                        )
                    })
                    .collect();
                panic!("timed out waiting for {what}\n{}", tails.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// (leader, leader epoch, sorted ISR) of `topic`-`partition` in a Metadata response.
pub fn partition_state_in(
    m: &MetadataResponse,
    topic: &str,
    partition: i32,
) -> Option<(i32, i32, Vec<i32>)> {
    let t = m
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))?;
    let p = t
        .partitions
        .iter()
        .find(|p| p.partition_index == partition)?;
    let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
    isr.sort();
    Some((p.leader_id.0, p.leader_epoch, isr))
}

/// The bytes of the segment files of `topic`-0 under a node's `data` dir, in order.
pub fn segment_bytes_in(data: &std::path::Path, topic: &str) -> Vec<u8> {
    let dir = data.join(format!("{topic}-0"));
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|r| r.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "log"));
    files.sort();
    files
        .iter()
        .flat_map(|p| std::fs::read(p).unwrap_or_default())
        .collect()
}

/// The settings of node `id` (broker and controller) listening on `(host, client port,
/// controller port)`, its data under `dir`; `voters` as `id@host:port`.
pub fn node_settings(
    id: i32,
    voters: &[String],
    (host, port, controller_port): (&str, u16, u16),
    dir: &std::path::Path,
) -> Vec<String> {
    vec![
        "process.roles=broker,controller".to_string(),
        format!("node.id={id}"),
        format!("controller.quorum.voters={}", voters.join(",")),
        format!("listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}"),
        "controller.listener.names=CONTROLLER".to_string(),
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT".to_string(),
        format!("log.dirs={}", dir.join("data").display()),
        format!("metadata.log.dir={}", dir.join("meta").display()),
        // Short enough for quick fail-over, long enough for a loaded 2-core machine.
        "broker.session.timeout.ms=6000".to_string(),
        "broker.heartbeat.interval.ms=1000".to_string(),
        "replica.lag.time.max.ms=6000".to_string(),
    ]
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill9(i);
        }
    }
}
