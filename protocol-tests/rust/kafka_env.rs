//! `sluice --kafka-env`: the apache/kafka image's environment read by the real binary. A KRaft
//! node configured by `KAFKA_*` variables answers Metadata and DescribeCluster with the
//! advertised address and `CLUSTER_ID`, and refuses to start on its dirs with another cluster
//! id; a variable that names no property stops start-up naming it (and means nothing without
//! the flag); a SASL_PLAINTEXT listener takes its PLAIN users from the JAAS file named in
//! `KAFKA_OPTS`.

mod common;

use std::path::Path;
use std::process::Child;

use bytes::Bytes;
use common::{Client, answers_api_versions, free_port, sluice_command, wait_exit, wait_ready};
use kafka_protocol::messages::{
    ApiKey, DescribeClusterRequest, DescribeClusterResponse, MetadataRequest, MetadataResponse,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

/// Runs sluice with `args` in an environment holding only `env`, stderr to `log`.
fn spawn(args: &[&str], env: &[(&str, String)], log: &Path) -> Child {
    let mut cmd = sluice_command(log);
    cmd.args(args).env_clear().envs(env.iter().cloned());
    cmd.spawn().expect("start sluice")
}

/// Waits until the broker answers ApiVersions on `port`.
fn wait_serving(child: &mut Child, port: u16, log: &Path) {
    wait_ready(child, log, || answers_api_versions(port));
}

fn stop(mut child: Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(wait_exit(&mut child), Some(0));
}

fn metadata(c: &mut Client) -> MetadataResponse {
    let mut r = MetadataRequest::default();
    r.topics = None;
    c.call(ApiKey::Metadata, 12, &r)
}

/// The variables of a combined broker and controller with its quorum on `controller`, as a
/// compose file for the apache/kafka image sets them (the listeners are the caller's).
fn kraft_env(controller: u16, data: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("KAFKA_NODE_ID", "1".into()),
        ("KAFKA_PROCESS_ROLES", "broker,controller".into()),
        (
            "KAFKA_CONTROLLER_QUORUM_VOTERS",
            format!("1@127.0.0.1:{controller}"),
        ),
        ("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER".into()),
        ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "1".into()),
        ("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0".into()),
        ("KAFKA_LOG_DIRS", data.display().to_string()),
        // The JVM's and JMX's variables are not properties.
        ("KAFKA_HEAP_OPTS", "-Xmx1G -Xms1G".into()),
        ("KAFKA_JMX_PORT", "9101".into()),
    ]
}

#[test]
fn variables_configure_the_node_and_cluster_id_formats_its_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let log = tmp.path().join("sluice.log");
    let (port, controller) = (free_port(), free_port());
    let mut env = kraft_env(controller, &data);
    env.extend([
        (
            "KAFKA_LISTENERS",
            format!("PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}"),
        ),
        (
            "KAFKA_ADVERTISED_LISTENERS",
            format!("PLAINTEXT://broker.example:{port}"),
        ),
        (
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT".into(),
        ),
        ("CLUSTER_ID", "MkU3OEVBNTcwNTJENDM2Qk".into()),
    ]);
    let mut child = spawn(&["--kafka-env"], &env, &log);
    wait_serving(&mut child, port, &log);
    let m = metadata(&mut Client::connect(port));
    assert_eq!(m.cluster_id.as_deref(), Some("MkU3OEVBNTcwNTJENDM2Qk"));
    assert_eq!(m.brokers.len(), 1);
    assert_eq!(m.brokers[0].node_id.0, 1);
    assert_eq!(m.brokers[0].host.as_str(), "broker.example");
    assert_eq!(m.brokers[0].port, port as i32);
    let d: DescribeClusterResponse = Client::connect(port).call(
        ApiKey::DescribeCluster,
        0,
        &DescribeClusterRequest::default(),
    );
    assert_eq!(d.error_code, 0);
    assert_eq!(d.cluster_id.as_str(), "MkU3OEVBNTcwNTJENDM2Qk");
    assert_eq!(d.brokers[0].host.as_str(), "broker.example");
    let meta = std::fs::read_to_string(data.join("meta.properties")).unwrap();
    assert!(
        meta.contains("cluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"),
        "{meta}"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("skipped: KAFKA_JMX_PORT"), "{text}");
    stop(child);

    // The same dirs under another CLUSTER_ID: start-up stops, naming both ids.
    env.retain(|(k, _)| *k != "CLUSTER_ID");
    env.push(("CLUSTER_ID", "5L6g3nShT-eMCtK--X86sw".into()));
    let mut child = spawn(&["--kafka-env"], &env, &log);
    assert_eq!(wait_exit(&mut child), Some(1));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains(
            "Expected 5L6g3nShT-eMCtK--X86sw (CLUSTER_ID), but read MkU3OEVBNTcwNTJENDM2Qk"
        ),
        "{text}"
    );
}

#[test]
fn a_variable_naming_no_property_stops_start_up() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("sluice.log");
    let port = free_port();
    let env = [
        ("KAFKA_LISTENERS", format!("PLAINTEXT://127.0.0.1:{port}")),
        (
            "KAFKA_LOG_DIRS",
            tmp.path().join("data").display().to_string(),
        ),
        ("KAFKA_NO_SUCH_KEY", "1".to_string()),
    ];
    let mut child = spawn(&["--kafka-env"], &env, &log);
    assert_eq!(wait_exit(&mut child), Some(1));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("environment variable KAFKA_NO_SUCH_KEY: unknown key \"no.such.key\""),
        "{text}"
    );
    assert!(!tmp.path().join("data").exists(), "nothing is formatted");

    // Without --kafka-env the variables mean nothing.
    let data = tmp.path().join("plain");
    let args = [
        "--override".to_string(),
        format!("listeners=PLAINTEXT://127.0.0.1:{port}"),
        "--override".to_string(),
        format!("log.dirs={}", data.display()),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env = [
        ("KAFKA_NO_SUCH_KEY", "1".to_string()),
        ("KAFKA_HOME", "/opt/kafka".to_string()),
        ("KAFKA_LISTENERS", "PLAINTEXT://127.0.0.1:1".to_string()),
    ];
    let mut child = spawn(&args, &env, &log);
    wait_serving(&mut child, port, &log);
    stop(child);
}

/// SaslHandshake (PLAIN) and SaslAuthenticate on a new connection; the authentication's
/// error code.
fn plain_login(port: u16, user: &str, password: &str) -> (Client, i16) {
    let mut c = Client::connect(port);
    let mut h = SaslHandshakeRequest::default();
    h.mechanism = StrBytes::from_static_str("PLAIN");
    let r: SaslHandshakeResponse = c.call(ApiKey::SaslHandshake, 1, &h);
    assert_eq!(r.error_code, 0);
    let mut a = SaslAuthenticateRequest::default();
    a.auth_bytes = Bytes::from(format!("\0{user}\0{password}"));
    let r: SaslAuthenticateResponse = c.call(ApiKey::SaslAuthenticate, 2, &a);
    (c, r.error_code)
}

#[test]
fn plain_users_come_from_the_jaas_file_in_kafka_opts() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("sluice.log");
    let jaas = tmp.path().join("broker_jaas.conf");
    std::fs::write(
        &jaas,
        "// The broker's users.\n\
         KafkaServer {\n\
         \x20   org.apache.kafka.common.security.plain.PlainLoginModule required\n\
         \x20   username=\"admin\"\n\
         \x20   password=\"admin-secret\"\n\
         \x20   user_admin=\"admin-secret\"\n\
         \x20   user_alice=\"alice-secret\";\n\
         };\n",
    )
    .unwrap();
    let (port, controller) = (free_port(), free_port());
    let mut env = kraft_env(controller, &tmp.path().join("data"));
    env.extend([
        (
            "KAFKA_LISTENERS",
            format!("CONTROLLER://127.0.0.1:{controller},SASL_PLAINTEXT://127.0.0.1:{port}"),
        ),
        (
            "KAFKA_ADVERTISED_LISTENERS",
            format!("SASL_PLAINTEXT://127.0.0.1:{port}"),
        ),
        (
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
            "CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT".into(),
        ),
        ("KAFKA_INTER_BROKER_LISTENER_NAME", "SASL_PLAINTEXT".into()),
        ("KAFKA_SASL_ENABLED_MECHANISMS", "PLAIN".into()),
        ("KAFKA_SASL_MECHANISM_INTER_BROKER_PROTOCOL", "PLAIN".into()),
        (
            "KAFKA_OPTS",
            format!(
                "-Dsun.net.inetaddr.ttl=30 -Djava.security.auth.login.config={} -XX:+UseG1GC",
                jaas.display()
            ),
        ),
    ]);
    let mut child = spawn(&["--kafka-env"], &env, &log);
    wait_serving(&mut child, port, &log);
    let (mut c, code) = plain_login(port, "alice", "alice-secret");
    assert_eq!(code, 0);
    let m = metadata(&mut c);
    assert_eq!(m.brokers[0].port, port as i32);
    let (_, code) = plain_login(port, "alice", "wrong");
    assert_eq!(code, 58, "SASL_AUTHENTICATION_FAILED");
    let (_, code) = plain_login(port, "mallory", "alice-secret");
    assert_eq!(code, 58, "SASL_AUTHENTICATION_FAILED");
    stop(child);
}
