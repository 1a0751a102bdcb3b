//! The KRaft settings: with `process.roles` set, a node is part of a replicated cluster (a
//! metadata quorum of the `controller.quorum.voters`, brokers replicating partitions between
//! them). Without it, Sluice is one broker and its own controller: with
//! `sluice.metadata.quorum=raft` (the default) it runs the cluster's quorum and controller with
//! itself as the only voter (KRaft combined mode) on a loopback port of its own; with `file`
//! it keeps the metadata in a `sluice-metadata` file, as earlier releases did.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Result;

use super::{Listener, Props};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roles {
    pub broker: bool,
    pub controller: bool,
}

#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub roles: Roles,
    /// `controller.quorum.voters`: id → `host:port` of its CONTROLLER listener. Empty on a
    /// broker-only node given `controller.quorum.bootstrap.servers` instead: it asks them.
    pub voters: BTreeMap<i32, String>,
    /// `controller.quorum.bootstrap.servers` (`host:port` of controllers), when `voters` is
    /// empty.
    pub bootstrap_servers: Vec<String>,
    /// The CONTROLLER listener this node binds (controllers only).
    pub controller_listener: Option<Listener>,
    /// `metadata.log.dir`, else the first log dir's `__cluster_metadata-0` (as Kafka).
    pub metadata_log_dir: PathBuf,
    /// `inter.broker.listener.name`: the listener followers fetch through.
    pub inter_broker_listener: String,
    pub rack: Option<String>,
    pub session_timeout_ms: i64,
    pub heartbeat_interval_ms: u64,
    pub replica_lag_time_max_ms: i64,
    pub replica_fetch_max_bytes: i32,
    pub replica_fetch_response_max_bytes: i32,
    pub replica_fetch_wait_max_ms: i32,
    pub replica_fetch_min_bytes: i32,
    pub replica_fetch_backoff_ms: u64,
    pub unclean_leader_election: bool,
    pub controlled_shutdown: bool,
    pub auto_leader_rebalance: bool,
    pub leader_imbalance_check_interval_ms: u64,
    pub offsets_topic_replication_factor: i16,
    pub quorum_election_timeout_ms: u64,
    pub quorum_fetch_timeout_ms: u64,
    pub quorum_request_timeout_ms: u64,
    /// `replica.selector.class` is Kafka's RackAwareReplicaSelector: consumers with a
    /// `client.rack` may fetch from a follower in their rack (KIP-392).
    pub rack_aware_selector: bool,
    /// A single node (no `process.roles`): the only voter, its controller listener on an
    /// ephemeral loopback port, no other broker to log in to.
    pub one_voter: bool,
}

/// `sluice.metadata.quorum`: where a node without `process.roles` keeps its metadata.
const METADATA_QUORUM: &str = "sluice.metadata.quorum";

/// The controller listener of a one-voter node: loopback, the port chosen when it is bound.
pub const ONE_VOTER_LISTENER: &str = "CONTROLLER";

/// Checks `sluice.metadata.quorum`: `raft`, the only value. An earlier release's `file` (its
/// single node's `sluice-metadata`) is refused naming the key: such a data dir is imported into
/// the one-voter quorum at start-up without it.
fn check_metadata_quorum(p: &Props) -> Result<()> {
    match p.get(METADATA_QUORUM).trim().to_ascii_lowercase().as_str() {
        "raft" => Ok(()),
        "file" => Err(p.err(
            METADATA_QUORUM,
            "\"file\" is no longer supported: a single node runs a one-voter Raft quorum, and \
             imports an earlier release's sluice-metadata at start-up; remove the setting",
        )),
        other => Err(p.err(METADATA_QUORUM, format!("unknown value {other:?} (raft)"))),
    }
}

/// Kafka's rack-aware selector, the only one Sluice knows besides the default (leader).
pub const RACK_AWARE_SELECTOR: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";

/// `id@host:port,...` as Kafka writes `controller.quorum.voters`.
fn parse_voters(p: &Props) -> Result<BTreeMap<i32, String>> {
    let key = "controller.quorum.voters";
    let mut voters = BTreeMap::new();
    for item in p
        .get(key)
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let (id, addr) = item
            .split_once('@')
            .ok_or_else(|| p.err(key, format!("{item:?} is not of the form id@host:port")))?;
        let id: i32 = id
            .trim()
            .parse()
            .ok()
            .filter(|i| *i >= 0)
            .ok_or_else(|| p.err(key, format!("{item:?} has an invalid id")))?;
        let addr = addr.trim();
        let port_ok = addr
            .rsplit_once(':')
            .is_some_and(|(h, port)| !h.is_empty() && port.parse::<u16>().is_ok());
        if !port_ok {
            return Err(p.err(key, format!("{item:?} has no valid host:port")));
        }
        if voters.insert(id, addr.to_string()).is_some() {
            return Err(p.err(key, format!("voter id {id} is listed twice")));
        }
    }
    Ok(voters)
}

/// The inter-broker listener's name when one is given, with the key that gives it: as Kafka,
/// `inter.broker.listener.name` or `security.inter.broker.protocol` (which names the listener
/// called after the protocol), at most one of the two.
fn named_inter_broker_listener(p: &Props) -> Result<Option<(&'static str, String)>> {
    let key = match (
        p.is_set("inter.broker.listener.name"),
        p.given("security.inter.broker.protocol"),
    ) {
        (false, false) => return Ok(None),
        (true, true) => {
            return Err(p.err(
                "security.inter.broker.protocol",
                "only one of inter.broker.listener.name and security.inter.broker.protocol \
                 may be set",
            ));
        }
        (true, false) => "inter.broker.listener.name",
        (false, true) => "security.inter.broker.protocol",
    };
    Ok(Some((key, p.get(key).trim().to_ascii_uppercase())))
}

/// Reads the KRaft settings: those of `process.roles`, or without it a single node's
/// one-voter quorum. `listeners` loses the controller listener, which it returns in the config.
pub(super) fn parse(
    p: &Props,
    node_id: i32,
    listeners: &mut Vec<Listener>,
    log_dirs: &[PathBuf],
) -> Result<Option<ClusterConfig>> {
    check_metadata_quorum(p)?;
    if !p.is_set("process.roles") {
        if listeners.is_empty() {
            return Err(p.err("listeners", "a broker needs a listener"));
        }
        // Checked against the advertised listeners later, as on a single node.
        let inter_broker_listener =
            named_inter_broker_listener(p)?.map_or_else(|| listeners[0].name.clone(), |(_, n)| n);
        let controller_listener = Listener {
            name: ONE_VOTER_LISTENER.to_string(),
            host: "127.0.0.1".to_string(),
            port: 0,
        };
        let both = Roles {
            broker: true,
            controller: true,
        };
        let voters = BTreeMap::from([(node_id, controller_listener.bind_addr())]);
        return settings(
            p,
            Placement {
                roles: both,
                voters,
                bootstrap_servers: Vec::new(),
                controller_listener: Some(controller_listener),
                inter_broker_listener,
                one_voter: true,
            },
            log_dirs,
        )
        .map(Some);
    }
    let mut roles = Roles {
        broker: false,
        controller: false,
    };
    for r in p.get("process.roles").split(',').map(str::trim) {
        match r {
            "broker" => roles.broker = true,
            "controller" => roles.controller = true,
            "" => {}
            other => {
                return Err(p.err(
                    "process.roles",
                    format!("unknown role {other:?} (broker, controller)"),
                ));
            }
        }
    }
    if !roles.broker && !roles.controller {
        return Err(p.err("process.roles", "no role given (broker, controller)"));
    }
    let bootstrap_key = "controller.quorum.bootstrap.servers";
    let bootstrap_servers: Vec<String> = p
        .get(bootstrap_key)
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    for b in &bootstrap_servers {
        if !b
            .rsplit_once(':')
            .is_some_and(|(h, port)| !h.is_empty() && port.parse::<u16>().is_ok())
        {
            return Err(p.err(bootstrap_key, format!("{b:?} is not host:port")));
        }
    }
    let voters = parse_voters(p)?;
    if voters.is_empty() && !bootstrap_servers.is_empty() && roles.controller {
        return Err(p.err(
            bootstrap_key,
            "a dynamic quorum (controllers found through bootstrap servers): not supported by \
             Sluice yet; list the voters with controller.quorum.voters=id@host:port,... (a \
             broker-only node may use controller.quorum.bootstrap.servers)",
        ));
    }
    if voters.is_empty() && bootstrap_servers.is_empty() {
        return Err(p.err(
            "controller.quorum.voters",
            "with process.roles set, controller.quorum.voters must list the controllers \
             (id@host:port,...), or on a broker-only node \
             controller.quorum.bootstrap.servers (host:port,...)",
        ));
    }
    if roles.controller != voters.contains_key(&node_id) {
        return Err(p.err(
            "controller.quorum.voters",
            if roles.controller {
                format!("node.id {node_id} has the controller role but is not a voter")
            } else {
                format!("node.id {node_id} is a voter but process.roles has no controller")
            },
        ));
    }
    let names: Vec<String> = p
        .get("controller.listener.names")
        .split(',')
        .map(|s| s.trim().to_ascii_uppercase())
        .filter(|s| !s.is_empty())
        .collect();
    if names.is_empty() {
        return Err(p.err(
            "controller.listener.names",
            "must be set when process.roles is set",
        ));
    }
    let controller_listener = match listeners.iter().position(|l| names.contains(&l.name)) {
        Some(i) => Some(listeners.remove(i)),
        None if roles.controller => {
            return Err(p.err(
                "listeners",
                format!(
                    "a controller must listen on its controller listener ({})",
                    names.join(",")
                ),
            ));
        }
        None => None,
    };
    if let Some(l) = &controller_listener {
        let mine = &voters[&node_id];
        let port_matches = mine
            .rsplit_once(':')
            .is_some_and(|(_, port)| port == l.port.to_string());
        if !port_matches {
            return Err(p.err(
                "controller.quorum.voters",
                format!("node {node_id} is listed at {mine}, but its controller listener is {l}"),
            ));
        }
    }
    if roles.broker && listeners.is_empty() {
        return Err(p.err(
            "listeners",
            "a broker needs a listener besides the controller's",
        ));
    }
    if !roles.broker && !listeners.is_empty() {
        return Err(p.err(
            "listeners",
            format!(
                "a controller-only node listens on its controller listener ({}) only",
                names.join(",")
            ),
        ));
    }
    let inter_broker_listener = match named_inter_broker_listener(p)? {
        _ if !roles.broker => String::new(),
        None => listeners[0].name.clone(),
        Some((key, n)) => {
            if !listeners.iter().any(|l| l.name == n) {
                return Err(p.err(key, format!("{n} is not one of the broker's listeners")));
            }
            n
        }
    };
    settings(
        p,
        Placement {
            roles,
            voters,
            bootstrap_servers,
            controller_listener,
            inter_broker_listener,
            one_voter: false,
        },
        log_dirs,
    )
    .map(Some)
}

/// What makes a node's place in the quorum, read by [`parse`] from `process.roles` and the
/// voters, or implied by the one-voter mode.
struct Placement {
    roles: Roles,
    voters: BTreeMap<i32, String>,
    bootstrap_servers: Vec<String>,
    controller_listener: Option<Listener>,
    inter_broker_listener: String,
    one_voter: bool,
}

/// The rest of the KRaft settings, the same for every node.
fn settings(p: &Props, at: Placement, log_dirs: &[PathBuf]) -> Result<ClusterConfig> {
    let metadata_log_dir = if p.is_set("metadata.log.dir") {
        let d = p.get("metadata.log.dir").trim();
        std::path::absolute(d).map_err(|e| p.err("metadata.log.dir", format!("{d}: {e}")))?
    } else {
        log_dirs[0].join("__cluster_metadata-0")
    };
    let selector = p.get("replica.selector.class").trim();
    let rack_aware_selector = match selector {
        "" => false,
        RACK_AWARE_SELECTOR => true,
        other => {
            return Err(p.err(
                "replica.selector.class",
                format!("{other}: only {RACK_AWARE_SELECTOR} is known to Sluice"),
            ));
        }
    };
    Ok(ClusterConfig {
        roles: at.roles,
        voters: at.voters,
        bootstrap_servers: at.bootstrap_servers,
        controller_listener: at.controller_listener,
        metadata_log_dir,
        inter_broker_listener: at.inter_broker_listener,
        rack: Some(p.get("broker.rack").trim().to_string()).filter(|r| !r.is_empty()),
        session_timeout_ms: p.num_at_least("broker.session.timeout.ms", 1)?,
        heartbeat_interval_ms: p.num_at_least("broker.heartbeat.interval.ms", 1)?,
        replica_lag_time_max_ms: p.num_at_least("replica.lag.time.max.ms", 1)?,
        replica_fetch_max_bytes: p.num_at_least("replica.fetch.max.bytes", 0)?,
        replica_fetch_response_max_bytes: p.num_at_least("replica.fetch.response.max.bytes", 0)?,
        replica_fetch_wait_max_ms: p.num_at_least("replica.fetch.wait.max.ms", 0)?,
        replica_fetch_min_bytes: p.num_at_least("replica.fetch.min.bytes", 0)?,
        replica_fetch_backoff_ms: p.num_at_least("replica.fetch.backoff.ms", 0)?,
        unclean_leader_election: p.boolean("unclean.leader.election.enable")?,
        controlled_shutdown: p.boolean("controlled.shutdown.enable")?,
        auto_leader_rebalance: p.boolean("auto.leader.rebalance.enable")?,
        leader_imbalance_check_interval_ms: p
            .num_at_least::<u64>("leader.imbalance.check.interval.seconds", 1)?
            .saturating_mul(1000),
        offsets_topic_replication_factor: p.num_at_least("offsets.topic.replication.factor", 1)?,
        quorum_election_timeout_ms: p.num_at_least("controller.quorum.election.timeout.ms", 1)?,
        quorum_fetch_timeout_ms: p.num_at_least("controller.quorum.fetch.timeout.ms", 4)?,
        quorum_request_timeout_ms: p.num_at_least("controller.quorum.request.timeout.ms", 1)?,
        rack_aware_selector,
        one_voter: at.one_voter,
    })
}
