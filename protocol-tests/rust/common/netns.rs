//! A cluster of real `sluice` processes, each in a network namespace of its own, joined by veth
//! pairs to a bridge in one more namespace (the hub) that the test talks from. The namespaces
//! are the test's own (named after its pid) and the addresses (10.213.0.0/24) exist only inside
//! them: no interface, address or route outside is touched. A node is cut off by setting its
//! bridge port down; the test can still reach it from inside its namespace.

use std::fs::File;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse};
use nix::sched::{CloneFlags, setns};

use super::Client;
use super::cluster::{node_settings, partition_state_in, segment_bytes_in};

const CLIENT_PORT: u16 = 9092;
const CONTROLLER_PORT: u16 = 9093;

pub struct NetnsCluster {
    pub dir: tempfile::TempDir,
    pub ids: Vec<i32>,
    hub: String,
    prefix: String,
    /// Namespaces created so far, deleted on drop.
    created: Vec<String>,
    children: Vec<Option<Child>>,
}

/// Runs `ip args`; its stderr on failure.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip`: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Runs `ip args` for the test's network set-up: a failure is the environment's, and fails the
/// test saying so.
fn setup_ip(args: &[&str]) {
    if let Err(e) = ip(args) {
        panic!(
            "network namespace set-up failed: `ip {}`: {e}\n(this test needs iproute2 and \
             root, or CAP_NET_ADMIN and CAP_SYS_ADMIN, to create network namespaces)",
            args.join(" ")
        );
    }
}

impl NetnsCluster {
    /// Creates the namespaces and links, starts `n` nodes (ids 1..=n) and waits until every
    /// node lists all `n` brokers. `tag` (a letter or two) tells apart the namespaces of
    /// clusters of one test process.
    pub fn start(n: usize, tag: &str) -> NetnsCluster {
        let prefix = format!("sl{}{tag}", std::process::id());
        let mut c = NetnsCluster {
            dir: tempfile::tempdir().unwrap(),
            ids: (1..=n as i32).collect(),
            hub: format!("{prefix}h"),
            prefix,
            created: Vec::new(),
            children: (0..n).map(|_| None).collect(),
        };
        let hub = c.hub.clone();
        c.add_namespace(&hub);
        setup_ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"]);
        setup_ip(&["-n", &hub, "addr", "add", "10.213.0.254/24", "dev", "br0"]);
        setup_ip(&["-n", &hub, "link", "set", "br0", "up"]);
        for i in 0..n {
            let ns = c.namespace(i);
            c.add_namespace(&ns);
            let port = c.port_name(i);
            setup_ip(&[
                "-n", &hub, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns",
                &ns,
            ]);
            setup_ip(&["-n", &hub, "link", "set", &port, "master", "br0", "up"]);
            let addr = format!("{}/24", c.addr(i));
            setup_ip(&["-n", &ns, "addr", "add", &addr, "dev", "eth0"]);
            setup_ip(&["-n", &ns, "link", "set", "eth0", "up"]);
        }
        for i in 0..n {
            c.spawn(i);
        }
        for i in 0..n {
            c.wait_for(
                Duration::from_secs(30),
                &format!("node {} up", c.ids[i]),
                |c| c.metadata(i).is_some(),
            );
        }
        c.wait_for(Duration::from_secs(30), "all brokers registered", |c| {
            (0..n).all(|i| c.metadata(i).is_some_and(|m| m.brokers.len() == n))
        });
        c
    }

    fn add_namespace(&mut self, ns: &str) {
        setup_ip(&["netns", "add", ns]);
        self.created.push(ns.to_string());
        setup_ip(&["-n", ns, "link", "set", "lo", "up"]);
    }

    fn namespace(&self, i: usize) -> String {
        format!("{}n{}", self.prefix, self.ids[i])
    }

    /// Node `i`'s port on the hub's bridge.
    fn port_name(&self, i: usize) -> String {
        format!("p{}", self.ids[i])
    }

    pub fn addr(&self, i: usize) -> String {
        format!("10.213.0.{}", self.ids[i])
    }

    pub fn index_of(&self, id: i32) -> usize {
        self.ids.iter().position(|n| *n == id).unwrap()
    }

    pub fn node_dir(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("node-{}", self.ids[i]))
    }

    pub fn log_path(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("node-{}.log", self.ids[i]))
    }

    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.log_path(i)).unwrap_or_default()
    }

    fn spawn(&mut self, i: usize) {
        let voters: Vec<String> = (0..self.ids.len())
            .map(|j| format!("{}@{}:{CONTROLLER_PORT}", self.ids[j], self.addr(j)))
            .collect();
        let addr = self.addr(i);
        let settings = node_settings(
            self.ids[i],
            &voters,
            (&addr, CLIENT_PORT, CONTROLLER_PORT),
            &self.node_dir(i),
        );
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.namespace(i)])
            .arg(env!("CARGO_BIN_EXE_sluice"));
        for s in settings {
            cmd.arg("--override").arg(s);
        }
        let log = File::create(self.log_path(i)).unwrap();
        cmd.stdout(Stdio::null()).stderr(log);
        // `ip netns exec` execs the broker: the child is the broker process itself.
        self.children[i] = Some(cmd.spawn().expect("start sluice in its namespace"));
    }

    /// Runs `f` on this thread inside namespace `ns` (sockets it opens stay in `ns`).
    fn in_namespace<T>(&self, ns: &str, f: impl FnOnce() -> T) -> T {
        let home = File::open("/proc/thread-self/ns/net").expect("this thread's namespace");
        let target = File::open(format!("/var/run/netns/{ns}"))
            .unwrap_or_else(|e| panic!("network namespace {ns}: {e}"));
        setns(&target, CloneFlags::CLONE_NEWNET).unwrap_or_else(|e| panic!("setns into {ns}: {e}"));
        let out = f();
        setns(&home, CloneFlags::CLONE_NEWNET).expect("setns back");
        out
    }

    fn connect_in(&self, ns: &str, i: usize) -> std::io::Result<Client> {
        let to: SocketAddr = format!("{}:{CLIENT_PORT}", self.addr(i)).parse().unwrap();
        let s = self.in_namespace(ns, || {
            TcpStream::connect_timeout(&to, Duration::from_secs(2))
        })?;
        Ok(Client::from_stream(s))
    }

    /// A client of node `i` from the bridge side.
    pub fn connect(&self, i: usize) -> std::io::Result<Client> {
        self.connect_in(&self.hub.clone(), i)
    }

    /// A client of node `i` from inside its own namespace, which works while it is cut off.
    pub fn connect_inside(&self, i: usize) -> std::io::Result<Client> {
        self.connect_in(&self.namespace(i), i)
    }

    /// Cuts node `i` off the bridge (its link loses carrier; the broker keeps running).
    pub fn cut(&self, i: usize) {
        setup_ip(&["-n", &self.hub, "link", "set", &self.port_name(i), "down"]);
    }

    pub fn heal(&self, i: usize) {
        setup_ip(&["-n", &self.hub, "link", "set", &self.port_name(i), "up"]);
    }

    /// Metadata of every topic as node `i` (reached through `client`) sees it.
    pub fn metadata_from(client: &mut Client) -> Option<MetadataResponse> {
        let mut req = MetadataRequest::default();
        req.topics = None;
        client.try_call(ApiKey::Metadata, 12, &req).ok()
    }

    /// Metadata of every topic as node `i` sees it, asked from the bridge side.
    pub fn metadata(&self, i: usize) -> Option<MetadataResponse> {
        Self::metadata_from(&mut self.connect(i).ok()?)
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

    /// The bytes of node `i`'s segment files of `topic`-0, in order.
    pub fn segment_bytes(&self, i: usize, topic: &str) -> Vec<u8> {
        segment_bytes_in(&self.node_dir(i).join("data"), topic)
    }

    /// The last `n` lines of every node's log.
    pub fn log_tails(&self, n: usize) -> String {
        (0..self.ids.len())
            .map(|i| {
                let log = self.log(i);
                let lines: Vec<&str> = log.lines().collect();
                let from = lines.len().saturating_sub(n);
                format!("--- node {}\n{}", self.ids[i], lines[from..].join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits (bounded) until `cond` holds; panics naming `what` and the node logs' tails.
    pub fn wait_for(&self, limit: Duration, what: &str, mut cond: impl FnMut(&Self) -> bool) {
        let deadline = Instant::now() + limit;
        while !cond(self) {
            if Instant::now() >= deadline {
                panic!("timed out waiting for {what}\n{}", self.log_tails(25));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for NetnsCluster {
    fn drop(&mut self) {
        for c in self.children.iter_mut() {
            if let Some(mut c) = c.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        // Deleting a namespace deletes the veth ends in it, and with them their peers.
        for ns in self.created.iter().rev() {
            if let Err(e) = ip(&["netns", "del", ns]) {
                eprintln!("cleanup: ip netns del {ns}: {e}");
            }
        }
    }
}
