use std::path::{Path, PathBuf};

use super::*;

fn cfg(pairs: &[(&str, &str)]) -> Result<BrokerConfig> {
    BrokerConfig::from_pairs(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
}

fn file(text: &str) -> Result<BrokerConfig> {
    BrokerConfig::from_settings(parse_properties(text, Path::new("conf/s.properties"))?)
}

fn err(r: Result<BrokerConfig>) -> String {
    format!("{:#}", r.unwrap_err())
}

#[test]
fn defaults_match_kafka_or_the_single_node_file() {
    let c = cfg(&[]).unwrap();
    assert_eq!(c.listeners[0].to_string(), "PLAINTEXT://localhost:9092");
    assert_eq!(c.node_id, 1);
    assert_eq!(
        c.log_dirs,
        vec![std::env::current_dir().unwrap().join("data")]
    );
    assert_eq!(c.message_max_bytes, 1048588);
    assert_eq!(c.socket_request_max_bytes, 104857600);
    assert_eq!(c.log_retention_ms, 168 * 3_600_000);
    assert_eq!(c.log_roll_ms, 168 * 3_600_000);
    assert_eq!(c.log_segment_bytes, 1 << 30);
    assert_eq!(c.group_initial_rebalance_delay_ms, 3000);
    assert_eq!(c.offsets_retention_check_interval_ms, 600_000);
    assert!(c.delete_topic_enable);
    assert!(c.no_effect.is_empty());
    assert_eq!(c.raw["offsets.topic.replication.factor"], "1");
    assert!(!c.is_explicitly_set("num.partitions"));
}

#[test]
fn unknown_keys_name_file_and_line_or_override() {
    let e = err(file("num.partitions=2\n\n# c\nno.such.key=1\n"));
    assert_eq!(e, r#"conf/s.properties:4: unknown key "no.such.key""#);
    let e = err(cfg(&[("zookeeper.connect", "localhost:2181")]));
    assert_eq!(e, r#"--override: unknown key "zookeeper.connect""#);
}

#[test]
fn value_errors_name_file_and_line() {
    let e = err(file("a.b=1\n"));
    assert!(e.starts_with("conf/s.properties:1: unknown key"), "{e}");
    // A key with no effect is still type-checked as Kafka would.
    let e = err(file("\nnum.network.threads=three\n"));
    assert!(
        e.starts_with("conf/s.properties:2: num.network.threads: invalid value \"three\""),
        "{e}"
    );
    let e = err(file("num.partitions=0\n"));
    assert_eq!(
        e,
        "conf/s.properties:1: num.partitions: value 0 must be at least 1"
    );
    let e = err(cfg(&[("listeners", "PLAINTEXT://:notaport")]));
    assert!(e.starts_with("--override: listeners: "), "{e}");
    // The later setting is the one named.
    let e = err(file("log.segment.bytes=1\nlog.segment.bytes=2\n"));
    assert!(
        e.starts_with("conf/s.properties:2: log.segment.bytes"),
        "{e}"
    );
}

#[test]
fn keys_without_effect_are_accepted_and_listed() {
    let c = file(
        "num.io.threads=8\nsocket.send.buffer.bytes=102400\nmetric.reporters=\n\
         num.network.threads=3\nnum.partitions=3\n\
         listener.name.plaintext.ssl.keymanager.algorithm=PKIX\n",
    )
    .unwrap();
    assert_eq!(
        c.no_effect,
        [
            "listener.name.plaintext.ssl.keymanager.algorithm",
            "metric.reporters",
            "num.io.threads",
            "num.network.threads",
            "socket.send.buffer.bytes"
        ]
    );
    assert_eq!(c.num_partitions, 3);
    // ssl.* settings are accepted while no listener uses SSL, as in Kafka.
    file("ssl.keystore.location=/k.jks\nsasl.enabled.mechanisms=PLAIN\n").unwrap();
}

#[test]
fn missing_features_stop_start_up_and_say_which() {
    let e = err(file("num.partitions=1\nprocess.roles=,\n"));
    assert!(
        e.starts_with("conf/s.properties:2: process.roles: no role given"),
        "{e}"
    );
    // SSL listeners are read; their keys are loaded when the broker starts (net::tls).
    file("listeners=SSL://:9093\n").unwrap();
    // SASL_PLAINTEXT listeners are read too; Kafka's default mechanism (GSSAPI) is not served.
    let e = err(file("listeners=SASL_PLAINTEXT://:9093\n"));
    assert!(e.contains("GSSAPI is not supported"), "{e}");
    // SASL_SSL listeners: the SASL settings are read from the listener's prefixed keys.
    let c = file(
        "listeners=CLIENT://:9093\nlistener.security.protocol.map=CLIENT:SASL_SSL\n\
         sasl.enabled.mechanisms=SCRAM-SHA-512\n",
    )
    .unwrap();
    assert_eq!(c.security_protocol("CLIENT").as_deref(), Some("SASL_SSL"));
    assert!(c.sasl.contains_key("CLIENT"));
    let e = err(file(
        "listeners=CLIENT://:9093\nlistener.security.protocol.map=CLIENT:SASL_SSL\n",
    ));
    assert!(e.contains("GSSAPI is not supported"), "{e}");
    let e = err(cfg(&[(
        "authorizer.class.name",
        "kafka.security.authorizer.AclAuthorizer",
    )]));
    assert!(e.contains("StandardAuthorizer only"), "{e}");
    let e = err(cfg(&[
        (
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        ),
        ("super.users", "User:admin;bob"),
    ]));
    assert!(e.contains("super.users") && e.contains("\"bob\""), "{e}");
    let a = cfg(&[
        (
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        ),
        ("super.users", "User:admin; User:ops"),
        ("allow.everyone.if.no.acl.found", "true"),
    ])
    .unwrap()
    .authorizer
    .unwrap();
    assert_eq!(a.super_users.len(), 2);
    assert!(a.allow_everyone_if_no_acl_found);
    let e = err(cfg(&[("remote.log.storage.system.enable", "true")]));
    assert!(e.contains("tiered storage"), "{e}");
    cfg(&[("remote.log.storage.system.enable", "false")]).unwrap();
}

/// Two client listeners, as compose files have them: an internal one and one for the host.
const TWO_LISTENERS: (&str, &str) = (
    "listeners",
    "PLAINTEXT://:19092,PLAINTEXT_HOST://0.0.0.0:9092",
);
const TWO_PROTOCOLS: (&str, &str) = (
    "listener.security.protocol.map",
    "PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT",
);

#[test]
fn many_listeners_each_advertised() {
    let c = cfg(&[
        TWO_LISTENERS,
        TWO_PROTOCOLS,
        (
            "advertised.listeners",
            "PLAINTEXT://kafka-1:19092,PLAINTEXT_HOST://localhost:9092",
        ),
    ])
    .unwrap();
    assert_eq!(c.listeners.len(), 2);
    assert_eq!(c.listeners[0].bind_addr(), "0.0.0.0:19092");
    assert_eq!(c.listeners[1].bind_addr(), "0.0.0.0:9092");
    let adv: Vec<String> = c
        .advertised_endpoints()
        .iter()
        .map(|l| l.to_string())
        .collect();
    assert_eq!(
        adv,
        [
            "PLAINTEXT://kafka-1:19092",
            "PLAINTEXT_HOST://localhost:9092"
        ]
    );
    // Unset, the listeners themselves are advertised (an empty host as this machine's name).
    let c = cfg(&[TWO_LISTENERS, TWO_PROTOCOLS]).unwrap();
    assert_eq!(c.advertised_listeners, c.listeners);
    assert!(c.advertised_endpoints().iter().all(|l| !l.host.is_empty()));
    // A listener may be left unadvertised.
    let c = cfg(&[
        TWO_LISTENERS,
        TWO_PROTOCOLS,
        ("advertised.listeners", "PLAINTEXT_HOST://localhost:9092"),
    ])
    .unwrap();
    assert_eq!(c.advertised_listeners.len(), 1);
}

#[test]
fn invalid_listener_combinations_name_the_key() {
    let e = err(cfg(&[
        ("listeners", "PLAINTEXT://:9092,OTHER://127.0.0.1:9092"),
        (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
        ),
    ]));
    assert!(e.starts_with("--override: listeners: "), "{e}");
    assert!(
        e.contains("each listener must have a different port"),
        "{e}"
    );
    // One IPv4 and one IPv6 address may share a port (KIP-797).
    cfg(&[
        ("listeners", "PLAINTEXT://127.0.0.1:9092,OTHER://[::1]:9092"),
        (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
        ),
    ])
    .unwrap();
    let e = err(cfg(&[
        ("listeners", "PLAINTEXT://:9092,OTHER://:9093"),
        ("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT"),
    ]));
    assert!(e.starts_with("--override: listeners: "), "{e}");
    assert!(e.contains("no security protocol for listener OTHER"), "{e}");
    let e = err(cfg(&[
        TWO_LISTENERS,
        TWO_PROTOCOLS,
        (
            "advertised.listeners",
            "PLAINTEXT://h:19092,INTERNAL://h:29092",
        ),
    ]));
    assert!(e.starts_with("--override: advertised.listeners: "), "{e}");
    assert!(
        e.contains("listener INTERNAL is not one of the listeners"),
        "{e}"
    );
    let e = err(cfg(&[
        TWO_LISTENERS,
        TWO_PROTOCOLS,
        ("inter.broker.listener.name", "INTERNAL"),
    ]));
    assert!(
        e.starts_with("--override: inter.broker.listener.name: "),
        "{e}"
    );
    assert!(
        e.contains("INTERNAL must be a listener defined in advertised.listeners"),
        "{e}"
    );
    let e = err(cfg(&[
        TWO_LISTENERS,
        TWO_PROTOCOLS,
        ("advertised.listeners", "PLAINTEXT_HOST://localhost:9092"),
        ("inter.broker.listener.name", "PLAINTEXT"),
    ]));
    assert!(
        e.contains("PLAINTEXT must be a listener defined in advertised.listeners"),
        "{e}"
    );
    cfg(&[
        TWO_LISTENERS,
        TWO_PROTOCOLS,
        ("inter.broker.listener.name", "PLAINTEXT"),
    ])
    .unwrap();
}

#[test]
fn listener_names_map_to_protocols() {
    let c = cfg(&[
        ("listeners", "CLIENT://127.0.0.1:9094"),
        ("listener.security.protocol.map", "CLIENT:PLAINTEXT"),
        ("advertised.listeners", "CLIENT://broker.example:19094"),
    ])
    .unwrap();
    assert_eq!(c.advertised(), ("broker.example".to_string(), 19094));
    let e = err(cfg(&[("listeners", "CLIENT://:9094")]));
    assert!(
        e.contains("no security protocol for listener CLIENT"),
        "{e}"
    );
    let e = err(cfg(&[("advertised.listeners", "OTHER://h:1")]));
    assert!(
        e.contains("listener OTHER is not one of the listeners"),
        "{e}"
    );
    // In a cluster, the controller listener is not advertised to clients.
    let c = cluster_node(&[(
        "advertised.listeners",
        "PLAINTEXT://broker-2:9202,CONTROLLER://broker-2:9302",
    )])
    .unwrap();
    let adv: Vec<String> = c
        .advertised_listeners
        .iter()
        .map(|l| l.to_string())
        .collect();
    assert_eq!(adv, ["PLAINTEXT://broker-2:9202"]);
    let e = err(cfg(&[
        ("listeners", "PLAINTEXT://0.0.0.0:9092"),
        ("advertised.listeners", "PLAINTEXT://0.0.0.0:9092"),
    ]));
    assert!(e.contains("non-routable"), "{e}");
}

#[test]
fn node_id_and_broker_id() {
    assert_eq!(cfg(&[("broker.id", "7")]).unwrap().node_id, 7);
    assert_eq!(
        cfg(&[("broker.id", "7"), ("node.id", "7")])
            .unwrap()
            .node_id,
        7
    );
    let e = err(file("node.id=2\nbroker.id=3\n"));
    assert!(
        e.starts_with(
            "conf/s.properties:2: broker.id: must equal node.id (2, at conf/s.properties:1)"
        ),
        "{e}"
    );
    assert!(err(cfg(&[("broker.id", "-1")])).contains("at least 0"));
}

#[test]
fn retention_precedence() {
    let c = cfg(&[("log.retention.minutes", "2")]).unwrap();
    assert_eq!(c.log_retention_ms, 120_000);
    let c = cfg(&[("log.retention.ms", "5"), ("log.retention.minutes", "2")]).unwrap();
    assert_eq!(c.log_retention_ms, 5);
    let c = cfg(&[("log.retention.ms", "-1")]).unwrap();
    assert_eq!(c.log_retention_ms, -1);
    assert!(c.is_explicitly_set("log.retention.ms"));
}

fn shipped_file() -> (PathBuf, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/server.properties");
    let text = std::fs::read_to_string(&path).unwrap();
    (path, text)
}

#[test]
fn shipped_config_is_the_zero_config() {
    let (path, text) = shipped_file();
    let c = BrokerConfig::from_settings(parse_properties(&text, &path).unwrap()).unwrap();
    let zero = cfg(&[]).unwrap();
    assert!(c.no_effect.is_empty(), "{:?}", c.no_effect);
    // The one difference: the shipped file turns the HTTP server on.
    assert_eq!(zero.http_listener, None);
    let http = c
        .http_listener
        .clone()
        .expect("the shipped file turns the HTTP server on");
    assert_eq!(http.bind_addr(), "localhost:8090");
    for k in keys::ACTED {
        assert_eq!(c.raw.get(*k), zero.raw.get(*k), "{k}");
        assert!(!c.is_explicitly_set(k), "{k} differs from the default");
    }
}

/// config/server.properties documents every key Sluice acts on, each with Kafka's default
/// (the nearest "Kafka default `X`" above the key's line, `none` for null or required).
#[test]
fn shipped_config_lists_every_acted_key_with_kafkas_default() {
    let (_, text) = shipped_file();
    let lines: Vec<&str> = text.lines().collect();
    for key in keys::ACTED {
        let at = lines
            .iter()
            .position(|l| {
                l.strip_prefix('#')
                    .unwrap_or(l)
                    .strip_prefix(key)
                    .is_some_and(|r| r.starts_with('='))
            })
            .unwrap_or_else(|| panic!("config/server.properties does not list {key}"));
        let stated = lines[..at]
            .iter()
            .rev()
            .take_while(|l| l.starts_with('#'))
            .find_map(|l| {
                l.split_once("Kafka default `")
                    .and_then(|(_, r)| r.split_once('`'))
            })
            .map(|(v, _)| v)
            .unwrap_or_else(|| panic!("{key}: no \"Kafka default `...`\" comment above it"));
        let kafka = keys::kafka_keys()[key].default.unwrap_or("none");
        assert_eq!(
            stated, kafka,
            "{key}: config/server.properties states a wrong Kafka default"
        );
    }
}

fn cluster_node(extra: &[(&str, &str)]) -> anyhow::Result<BrokerConfig> {
    let mut pairs = vec![
        ("process.roles", "broker,controller"),
        ("node.id", "2"),
        (
            "controller.quorum.voters",
            "1@127.0.0.1:9301,2@127.0.0.1:9302,3@127.0.0.1:9303",
        ),
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:9202,CONTROLLER://127.0.0.1:9302",
        ),
        ("controller.listener.names", "CONTROLLER"),
        (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        ),
        ("log.dirs", "/tmp/sluice-cfg-test"),
    ];
    pairs.extend_from_slice(extra);
    cfg(&pairs)
}

#[test]
fn kraft_settings_make_a_cluster_node() {
    let c = cluster_node(&[("broker.rack", "r2"), ("replica.lag.time.max.ms", "500")]).unwrap();
    let cc = c.cluster.as_ref().unwrap();
    assert!(cc.roles.broker && cc.roles.controller);
    assert_eq!(cc.voters.len(), 3);
    assert_eq!(cc.voters[&3], "127.0.0.1:9303");
    assert_eq!(cc.controller_listener.as_ref().unwrap().port, 9302);
    // The controller listener is not a client listener.
    assert_eq!(c.listeners.len(), 1);
    assert_eq!(c.listeners[0].name, "PLAINTEXT");
    assert_eq!(cc.inter_broker_listener, "PLAINTEXT");
    assert_eq!(cc.rack.as_deref(), Some("r2"));
    assert_eq!(cc.replica_lag_time_max_ms, 500);
    assert_eq!(cc.session_timeout_ms, 9000);
    assert!(cc.metadata_log_dir.ends_with("__cluster_metadata-0"));
    // Without process.roles: a one-voter quorum of its own.
    assert!(cfg(&[]).unwrap().cluster.is_some_and(|c| c.one_voter));
}

#[test]
fn kraft_settings_that_cannot_work_stop_start_up() {
    let e = err(cluster_node(&[(
        "controller.quorum.voters",
        "1@127.0.0.1:9301",
    )]));
    assert!(
        e.contains("node.id 2 has the controller role but is not a voter"),
        "{e}"
    );
    let e = err(cluster_node(&[(
        "listeners",
        "PLAINTEXT://127.0.0.1:9202,CONTROLLER://127.0.0.1:9999",
    )]));
    assert!(e.contains("node 2 is listed at 127.0.0.1:9302"), "{e}");
    let e = err(cluster_node(&[("controller.quorum.voters", "x@1:2")]));
    assert!(e.contains("has an invalid id"), "{e}");
    let e = err(cluster_node(&[("inter.broker.listener.name", "OTHER")]));
    assert!(
        e.contains("OTHER is not one of the broker's listeners"),
        "{e}"
    );
    let e = err(cluster_node(&[("listeners", "PLAINTEXT://127.0.0.1:9202")]));
    assert!(
        e.contains("a controller must listen on its controller listener"),
        "{e}"
    );
    let e = err(cluster_node(&[("replica.selector.class", "x.Y")]));
    assert!(
        e.contains("only org.apache.kafka.common.replica.RackAwareReplicaSelector"),
        "{e}"
    );
}

#[test]
fn the_inter_broker_listener_may_be_secured_the_controller_listener_not() {
    let sasl_ssl = [
        (
            "listeners",
            "SASL_SSL://127.0.0.1:9202,CONTROLLER://127.0.0.1:9302",
        ),
        (
            "listener.security.protocol.map",
            "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        ),
        ("sasl.enabled.mechanisms", "SCRAM-SHA-512"),
    ];
    let c = cluster_node(&sasl_ssl).unwrap();
    assert_eq!(c.cluster.unwrap().inter_broker_listener, "SASL_SSL");
    assert!(c.sasl.contains_key("SASL_SSL"));
    // security.inter.broker.protocol names the listener called after the protocol.
    let mut named = sasl_ssl.to_vec();
    named.push(("security.inter.broker.protocol", "SASL_SSL"));
    let c = cluster_node(&named).unwrap();
    assert_eq!(c.cluster.unwrap().inter_broker_listener, "SASL_SSL");
    named.push(("inter.broker.listener.name", "SASL_SSL"));
    let e = err(cluster_node(&named));
    assert!(e.contains("only one of inter.broker.listener.name"), "{e}");
    let e = err(cluster_node(&[(
        "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
    )]));
    assert!(
        e.contains("the controller listener CONTROLLER uses SSL"),
        "{e}"
    );
}

#[test]
fn a_controller_only_node_listens_on_its_controller_listener_alone() {
    let c = cluster_node(&[
        ("process.roles", "controller"),
        ("listeners", "CONTROLLER://127.0.0.1:9302"),
    ])
    .unwrap();
    let cc = c.cluster.as_ref().unwrap();
    assert!(cc.roles.controller && !cc.roles.broker);
    assert!(c.listeners.is_empty());
    assert_eq!(cc.controller_listener.as_ref().unwrap().port, 9302);
    let e = err(cluster_node(&[("process.roles", "controller")]));
    assert!(
        e.contains("a controller-only node listens on its controller listener (CONTROLLER) only"),
        "{e}"
    );
    // A broker-only node is no voter and needs no controller listener.
    let c = cluster_node(&[
        ("process.roles", "broker"),
        ("node.id", "4"),
        ("listeners", "PLAINTEXT://127.0.0.1:9204"),
    ])
    .unwrap();
    let cc = c.cluster.as_ref().unwrap();
    assert!(cc.roles.broker && !cc.roles.controller);
    assert!(cc.controller_listener.is_none());
}

#[test]
fn a_broker_only_node_may_find_the_controllers_through_bootstrap_servers() {
    let broker = [
        ("process.roles", "broker"),
        ("node.id", "4"),
        ("listeners", "PLAINTEXT://127.0.0.1:9204"),
        ("controller.quorum.voters", ""),
        (
            "controller.quorum.bootstrap.servers",
            "127.0.0.1:9301, 127.0.0.1:9302",
        ),
    ];
    let c = cluster_node(&broker).unwrap();
    let cc = c.cluster.as_ref().unwrap();
    assert!(cc.voters.is_empty());
    assert_eq!(cc.bootstrap_servers, ["127.0.0.1:9301", "127.0.0.1:9302"]);
    // A controller cannot: that is a dynamic quorum.
    let e = err(cluster_node(&[
        ("controller.quorum.voters", ""),
        ("controller.quorum.bootstrap.servers", "127.0.0.1:9301"),
    ]));
    assert!(e.contains("a dynamic quorum"), "{e}");
    let mut bad = broker;
    bad[4].1 = "nohost";
    let e = err(cluster_node(&bad));
    assert!(e.contains("\"nohost\" is not host:port"), "{e}");
}

#[test]
fn http_server_listener_is_off_by_default_and_parsed() {
    assert_eq!(cfg(&[]).unwrap().http_listener, None);
    let c = cfg(&[("sluice.http.server.listeners", "http://127.0.0.1:8090")]).unwrap();
    let l = c.http_listener.unwrap();
    assert_eq!((l.host.as_str(), l.port), ("127.0.0.1", 8090));
    assert_eq!(l.bind_addr(), "127.0.0.1:8090");
    let c = cfg(&[("sluice.http.server.listeners", "http://[::1]:1")]).unwrap();
    assert_eq!(c.http_listener.unwrap().bind_addr(), "[::1]:1");
    assert!(c.no_effect.is_empty());
    for bad in [
        "127.0.0.1:8090",
        "http://h",
        "http://h:x",
        "http://a:1,http://b:2",
    ] {
        let e = err(cfg(&[("sluice.http.server.listeners", bad)]));
        assert!(
            e.starts_with("--override: sluice.http.server.listeners: "),
            "{e}"
        );
    }
}

#[test]
fn controller_listeners_default_to_plaintext_when_no_map_is_given() {
    // apache/kafka's isolated example: a controller-only node sets no protocol map.
    let c = cfg(&[
        ("process.roles", "controller"),
        ("node.id", "1"),
        ("controller.quorum.voters", "1@127.0.0.1:9301"),
        ("controller.listener.names", "CONTROLLER"),
        ("listeners", "CONTROLLER://:9301"),
        ("log.dirs", "/tmp/sluice-cfg-test"),
    ])
    .unwrap();
    assert_eq!(
        c.security_protocol("CONTROLLER").as_deref(),
        Some("PLAINTEXT")
    );
    // A map that is given is taken as it is.
    let e = err(cfg(&[
        ("process.roles", "controller"),
        ("node.id", "1"),
        ("controller.quorum.voters", "1@127.0.0.1:9301"),
        ("controller.listener.names", "CONTROLLER"),
        ("listeners", "CONTROLLER://:9301"),
        ("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT"),
        ("log.dirs", "/tmp/sluice-cfg-test"),
    ]));
    assert!(
        e.contains("no security protocol for listener CONTROLLER"),
        "{e}"
    );
}

#[test]
fn faults_are_off_unless_asked_for() {
    assert!(!cfg(&[]).unwrap().faults_enabled);
    assert!(
        cfg(&[("sluice.faults.enable", "true")])
            .unwrap()
            .faults_enabled
    );
}
