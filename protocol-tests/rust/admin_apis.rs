//! The cluster administration APIs on one node, over a socket, answered as a Kafka 4.4 node
//! of one answers them (the expectations were taken from such a node): DescribeQuorum,
//! DescribeCluster, ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments,
//! DescribeLogDirs and IncrementalAlterConfigs.

mod common;

use common::{Client, TestBroker, create_topic_request, produce_one, record_batch};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn tn(v: &str) -> TopicName {
    TopicName(s(v))
}

fn msg(m: &Option<StrBytes>) -> Option<&str> {
    m.as_ref().map(|m| m.as_str())
}

fn create(c: &mut Client, topic: &str, partitions: i32) {
    let r: CreateTopicsResponse = c.call(
        ApiKey::CreateTopics,
        7,
        &create_topic_request(topic, partitions, 1, &[]),
    );
    assert_eq!(r.topics[0].error_code, 0, "create {topic}");
}

fn node_id(c: &mut Client) -> i32 {
    let r: DescribeClusterResponse = c.call(
        ApiKey::DescribeCluster,
        0,
        &DescribeClusterRequest::default(),
    );
    r.controller_id.0
}

fn quorum_request(topic: &str, partition: i32) -> DescribeQuorumRequest {
    use describe_quorum_request::{PartitionData, TopicData};
    let mut p = PartitionData::default();
    p.partition_index = partition;
    let mut t = TopicData::default();
    t.topic_name = tn(topic);
    t.partitions = vec![p];
    let mut r = DescribeQuorumRequest::default();
    r.topics = vec![t];
    r
}

#[test]
fn describe_quorum_names_this_node_the_only_voter_and_leader() {
    let b = TestBroker::start(&[]);
    let mut c = b.connect();
    let me = node_id(&mut c);
    for v in 0..=2 {
        let r: DescribeQuorumResponse = c.call(
            ApiKey::DescribeQuorum,
            v,
            &quorum_request("__cluster_metadata", 0),
        );
        assert_eq!(r.error_code, 0);
        let p = &r.topics[0].partitions[0];
        assert_eq!(r.topics[0].topic_name.0.as_str(), "__cluster_metadata");
        assert_eq!((p.partition_index, p.error_code), (0, 0), "v{v}");
        assert_eq!(p.leader_id.0, me);
        assert!(p.leader_epoch >= 1);
        assert_eq!(p.current_voters.len(), 1);
        assert!(p.observers.is_empty());
        let voter = &p.current_voters[0];
        assert_eq!(voter.replica_id.0, me);
        assert_eq!(
            voter.log_end_offset, p.high_watermark,
            "the leader is caught up"
        );
        if v >= 1 {
            assert!(voter.last_fetch_timestamp > 0 && voter.last_caught_up_timestamp > 0);
        } else {
            assert_eq!(voter.last_fetch_timestamp, -1);
        }
        if v >= 2 {
            assert_eq!(r.nodes.len(), 1);
            assert_eq!(r.nodes[0].node_id.0, me);
            assert!(!r.nodes[0].listeners.is_empty());
        }
    }
    // Anything but __cluster_metadata-0: UNKNOWN_TOPIC_OR_PARTITION for what was named.
    for (topic, partition) in [("__cluster_metadata", 1), ("foo", 0)] {
        let r: DescribeQuorumResponse =
            c.call(ApiKey::DescribeQuorum, 2, &quorum_request(topic, partition));
        let p = &r.topics[0].partitions[0];
        assert_eq!(r.topics[0].topic_name.0.as_str(), topic);
        assert_eq!((p.partition_index, p.error_code), (partition, 3));
        assert_eq!(
            msg(&p.error_message),
            Some("This server does not host this topic-partition.")
        );
        assert!(p.current_voters.is_empty());
    }
}

#[test]
fn describe_cluster_serves_the_broker_endpoint_type_only() {
    let b = TestBroker::start(&[]);
    let mut c = b.connect();
    for v in 0..=2 {
        let mut req = DescribeClusterRequest::default();
        if v >= 2 {
            req.include_fenced_brokers = true;
        }
        let r: DescribeClusterResponse = c.call(ApiKey::DescribeCluster, v, &req);
        assert_eq!(r.error_code, 0);
        assert_eq!(r.brokers.len(), 1);
        assert_eq!(r.brokers[0].port, b.port as i32);
        assert_eq!(r.brokers[0].broker_id, r.controller_id);
        assert!(!r.brokers[0].is_fenced);
        assert!(!r.cluster_id.is_empty());
    }
    let mut req = DescribeClusterRequest::default();
    req.endpoint_type = 2;
    let r: DescribeClusterResponse = c.call(ApiKey::DescribeCluster, 1, &req);
    assert_eq!(r.error_code, 114, "MISMATCHED_ENDPOINT_TYPE");
    assert_eq!(
        msg(&r.error_message),
        Some(
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
        )
    );
    assert!(r.brokers.is_empty());
    assert_eq!(r.controller_id.0, -1);
}

fn elect(
    c: &mut Client,
    v: i16,
    election_type: i8,
    partitions: Option<Vec<(&str, Vec<i32>)>>,
) -> ElectLeadersResponse {
    use elect_leaders_request::TopicPartitions;
    let mut r = ElectLeadersRequest::default();
    r.election_type = election_type;
    r.timeout_ms = 5_000;
    r.topic_partitions = partitions.map(|ps| {
        ps.into_iter()
            .map(|(t, p)| {
                let mut tp = TopicPartitions::default();
                tp.topic = tn(t);
                tp.partitions = p;
                tp
            })
            .collect()
    });
    c.call(ApiKey::ElectLeaders, v, &r)
}

#[test]
fn elect_leaders_is_never_needed_on_one_node() {
    let b = TestBroker::start(&[]);
    let mut c = b.connect();
    create(&mut c, "el", 2);
    let not_needed = "Leader election not needed for topic partition.";
    for v in 0..=2 {
        for election_type in [0, 1] {
            if v == 0 && election_type == 1 {
                continue;
            }
            let r = elect(
                &mut c,
                v,
                election_type,
                Some(vec![("el", vec![0, 1, 7]), ("nope", vec![0])]),
            );
            assert_eq!(r.error_code, 0);
            let got: Vec<(String, i32, i16, Option<&str>)> = r
                .replica_election_results
                .iter()
                .flat_map(|t| {
                    t.partition_result.iter().map(move |p| {
                        (
                            t.topic.0.to_string(),
                            p.partition_id,
                            p.error_code,
                            msg(&p.error_message),
                        )
                    })
                })
                .collect();
            assert_eq!(
                got,
                vec![
                    ("el".to_string(), 0, 84, Some(not_needed)),
                    ("el".to_string(), 1, 84, Some(not_needed)),
                    ("el".to_string(), 7, 3, Some("No such partition as el-7")),
                    ("nope".to_string(), 0, 3, Some("No such topic as nope")),
                ],
                "v{v} type {election_type}"
            );
            // All partitions: every topic, none of its partitions (none needed an election).
            let r = elect(&mut c, v, election_type, None);
            let el: Vec<_> = r
                .replica_election_results
                .iter()
                .filter(|t| t.topic.0.as_str() == "el")
                .collect();
            assert_eq!(el.len(), 1, "v{v}: the topic is listed");
            assert!(
                r.replica_election_results
                    .iter()
                    .all(|t| t.partition_result.is_empty())
            );
        }
    }
    let r = elect(&mut c, 2, 9, Some(vec![("el", vec![0])]));
    assert_eq!(r.error_code, 42, "unknown election type");
    assert_eq!(
        r.replica_election_results[0].partition_result[0].error_code,
        42
    );
}

fn reassign(
    c: &mut Client,
    v: i16,
    allow_factor_change: bool,
    topic: &str,
    partition: i32,
    replicas: Option<Vec<i32>>,
) -> (i16, Option<String>, AlterPartitionReassignmentsResponse) {
    use alter_partition_reassignments_request::{ReassignablePartition, ReassignableTopic};
    let mut p = ReassignablePartition::default();
    p.partition_index = partition;
    p.replicas = replicas.map(|r| r.into_iter().map(BrokerId).collect());
    let mut t = ReassignableTopic::default();
    t.name = tn(topic);
    t.partitions = vec![p];
    let mut r = AlterPartitionReassignmentsRequest::default();
    r.timeout_ms = 5_000;
    r.topics = vec![t];
    if v >= 1 {
        r.allow_replication_factor_change = allow_factor_change;
    }
    let resp: AlterPartitionReassignmentsResponse =
        c.call(ApiKey::AlterPartitionReassignments, v, &r);
    let p = &resp.responses[0].partitions[0];
    assert_eq!(resp.responses[0].name.0.as_str(), topic);
    assert_eq!(p.partition_index, partition);
    (
        p.error_code,
        msg(&p.error_message).map(str::to_string),
        resp.clone(),
    )
}

#[test]
fn reassignments_on_one_node_accept_only_this_node() {
    let b = TestBroker::start(&[]);
    let mut c = b.connect();
    let me = node_id(&mut c);
    create(&mut c, "ra", 1);
    let m = |v: &str| Some(v.to_string());
    for v in 0..=1 {
        let (code, message, resp) = reassign(&mut c, v, false, "ra", 0, Some(vec![me]));
        assert_eq!((code, message), (0, None), "v{v}");
        assert_eq!(resp.error_code, 0);
        if v >= 1 {
            assert!(!resp.allow_replication_factor_change, "echoed");
        }
        let other = me + 1;
        let cases = [
            (
                "ra",
                0,
                Some(vec![other]),
                39,
                m(&format!(
                    "The manual partition assignment includes broker {other}, but no such broker is registered."
                )),
            ),
            (
                "ra",
                0,
                Some(vec![me, me]),
                39,
                m(&format!(
                    "The manual partition assignment includes the broker {me} more than once."
                )),
            ),
            (
                "ra",
                0,
                Some(vec![]),
                39,
                m("The manual partition assignment includes an empty replica list."),
            ),
            ("ra", 0, None, 85, None),
            (
                "ra",
                9,
                Some(vec![me]),
                3,
                m("Unable to find partition ra:9."),
            ),
            (
                "nope",
                0,
                Some(vec![me]),
                3,
                m("Unable to find a topic named nope."),
            ),
            ("nope", 0, None, 3, m("Unable to find a topic named nope.")),
        ];
        for (topic, partition, replicas, code, message) in cases {
            let (got, got_message, _) =
                reassign(&mut c, v, true, topic, partition, replicas.clone());
            assert_eq!(
                (got, got_message),
                (code, message),
                "v{v} {topic}-{partition} -> {replicas:?}"
            );
        }
    }
    for topics in [None, Some(vec![("ra", vec![0, 9]), ("nope", vec![0])])] {
        use list_partition_reassignments_request::ListPartitionReassignmentsTopics;
        let mut r = ListPartitionReassignmentsRequest::default();
        r.timeout_ms = 5_000;
        r.topics = topics.map(|ts| {
            ts.into_iter()
                .map(|(t, p)| {
                    let mut x = ListPartitionReassignmentsTopics::default();
                    x.name = tn(t);
                    x.partition_indexes = p;
                    x
                })
                .collect()
        });
        let resp: ListPartitionReassignmentsResponse =
            c.call(ApiKey::ListPartitionReassignments, 0, &r);
        assert_eq!(resp.error_code, 0);
        assert!(resp.topics.is_empty(), "nothing is being reassigned");
    }
}

#[test]
fn describe_log_dirs_lists_every_replica_with_its_size() {
    let b = TestBroker::start(&[]);
    let mut c = b.connect();
    create(&mut c, "ld", 2);
    let produced = produce_one(
        &mut c,
        "ld",
        1,
        record_batch(&[b"one", b"two"], 1_700_000_000_000),
    );
    assert_eq!(produced.error_code, 0);
    let dir = std::fs::canonicalize(b.data_dir()).unwrap();
    for v in 1..=4 {
        for topics in [None, Some(vec![("ld", vec![1, 9]), ("nope", vec![0])])] {
            use describe_log_dirs_request::DescribableLogDirTopic;
            let filtered = topics.is_some();
            let mut r = DescribeLogDirsRequest::default();
            r.topics = topics.map(|ts| {
                ts.into_iter()
                    .map(|(t, p)| {
                        let mut x = DescribableLogDirTopic::default();
                        x.topic = tn(t);
                        x.partitions = p;
                        x
                    })
                    .collect()
            });
            let resp: DescribeLogDirsResponse = c.call(ApiKey::DescribeLogDirs, v, &r);
            assert_eq!(resp.error_code, 0);
            assert_eq!(resp.results.len(), 1);
            let d = &resp.results[0];
            assert_eq!(d.error_code, 0);
            assert_eq!(
                std::fs::canonicalize(d.log_dir.as_str()).unwrap(),
                dir,
                "v{v}"
            );
            if v >= 4 {
                assert!(d.total_bytes > 0 && d.usable_bytes > 0);
                assert!(d.usable_bytes <= d.total_bytes);
            } else {
                assert_eq!((d.total_bytes, d.usable_bytes), (-1, -1));
            }
            let ld: Vec<_> = d
                .topics
                .iter()
                .filter(|t| t.name.0.as_str() == "ld")
                .collect();
            assert_eq!(ld.len(), 1);
            let mut parts: Vec<(i32, bool)> = ld[0]
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.partition_size > 0))
                .collect();
            parts.sort();
            if filtered {
                assert_eq!(parts, vec![(1, true)], "v{v}");
                assert_eq!(d.topics.len(), 1, "unknown topics are left out");
            } else {
                assert_eq!(parts, vec![(0, false), (1, true)], "v{v}");
            }
            for p in &ld[0].partitions {
                assert_eq!(p.offset_lag, 0);
                assert!(!p.is_future_key);
            }
        }
    }
}

fn alter_configs(
    c: &mut Client,
    v: i16,
    resource_type: i8,
    name: &str,
    configs: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> (i16, Option<String>) {
    use incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let mut res = AlterConfigsResource::default();
    res.resource_type = resource_type;
    res.resource_name = s(name);
    res.configs = configs
        .iter()
        .map(|(n, op, val)| {
            let mut a = AlterableConfig::default();
            a.name = s(n);
            a.config_operation = *op;
            a.value = val.map(s);
            a
        })
        .collect();
    let mut r = IncrementalAlterConfigsRequest::default();
    r.resources = vec![res];
    r.validate_only = validate_only;
    let resp: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, v, &r);
    let r = &resp.responses[0];
    assert_eq!(
        (r.resource_type, r.resource_name.as_str()),
        (resource_type, name)
    );
    (r.error_code, msg(&r.error_message).map(str::to_string))
}

/// A resource (type, name), its changes, and the error they get.
type Refusal<'a> = (
    i8,
    &'a str,
    Vec<(&'a str, i8, Option<&'a str>)>,
    (i16, Option<String>),
);

/// The topic's values of `keys` as DescribeConfigs v4 reports them.
fn topic_configs(c: &mut Client, topic: &str, keys: &[&str]) -> Vec<(String, String)> {
    use describe_configs_request::DescribeConfigsResource;
    let mut res = DescribeConfigsResource::default();
    res.resource_type = 2;
    res.resource_name = s(topic);
    res.configuration_keys = Some(keys.iter().map(|k| s(k)).collect());
    let mut r = DescribeConfigsRequest::default();
    r.resources = vec![res];
    let resp: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &r);
    assert_eq!(resp.results[0].error_code, 0);
    let mut out: Vec<(String, String)> = resp.results[0]
        .configs
        .iter()
        .map(|e| (e.name.to_string(), msg(&e.value).unwrap_or("").to_string()))
        .collect();
    out.sort();
    out
}

#[test]
fn incremental_alter_configs_changes_topic_configs_as_kafka_does() {
    const SET: i8 = 0;
    const DELETE: i8 = 1;
    const APPEND: i8 = 2;
    const SUBTRACT: i8 = 3;
    let mut b = TestBroker::start(&[]);
    let mut c = b.connect();
    let me = node_id(&mut c);
    create(&mut c, "cfg", 1);
    let keys = ["cleanup.policy", "retention.ms"];
    let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
    let defaults = vec![
        pair("cleanup.policy", "delete"),
        pair("retention.ms", "604800000"),
    ];
    assert_eq!(topic_configs(&mut c, "cfg", &keys), defaults);

    // validate_only changes nothing.
    let ok = (0, None);
    let change: &[(&str, i8, Option<&str>)] = &[
        ("retention.ms", SET, Some("1000")),
        ("cleanup.policy", APPEND, Some("compact")),
    ];
    assert_eq!(alter_configs(&mut c, 1, 2, "cfg", change, true), ok);
    assert_eq!(topic_configs(&mut c, "cfg", &keys), defaults);
    assert_eq!(alter_configs(&mut c, 1, 2, "cfg", change, false), ok);
    let changed = vec![
        pair("cleanup.policy", "delete,compact"),
        pair("retention.ms", "1000"),
    ];
    assert_eq!(topic_configs(&mut c, "cfg", &keys), changed);

    let m = |v: &str| Some(v.to_string());
    let refused: Vec<Refusal> = vec![
        (
            2,
            "cfg",
            vec![("retention.ms", APPEND, Some("5"))],
            (
                40,
                m("Can't APPEND to key retention.ms because its type is not LIST."),
            ),
        ),
        (
            2,
            "cfg",
            vec![("no.such.config", SET, Some("1"))],
            (40, m("Unknown topic config name: no.such.config")),
        ),
        (
            2,
            "cfg",
            vec![
                ("retention.ms", SET, Some("1")),
                ("retention.ms", DELETE, None),
            ],
            (42, m("Error due to duplicate config keys")),
        ),
        (2, "cfg", vec![("retention.ms", 7, Some("1"))], (-1, None)),
        (
            2,
            "cfg",
            vec![("retention.ms", SET, None)],
            (42, m("Null value not supported for : retention.ms")),
        ),
        (
            2,
            "nope",
            vec![("retention.ms", SET, Some("1"))],
            (3, m("The topic 'nope' does not exist.")),
        ),
        (
            2,
            "",
            vec![("retention.ms", SET, Some("1"))],
            (42, m("Default topic resources are not allowed.")),
        ),
        (
            4,
            "7",
            vec![("log.retention.ms", SET, Some("2"))],
            (
                42,
                m(&format!(
                    "Unexpected broker id, expected {me}, but received 7"
                )),
            ),
        ),
        (
            8,
            "x",
            vec![("log.retention.ms", SET, Some("2"))],
            (42, m("Node id must be an integer, but it is: x")),
        ),
    ];
    for v in 0..=1 {
        for (resource_type, name, configs, want) in &refused {
            let got = alter_configs(&mut c, v, *resource_type, name, configs, false);
            assert_eq!(&got, want, "v{v} {resource_type}/{name} {configs:?}");
        }
    }
    // Broker configs: deleting throttles that are not set succeeds (as
    // kafka-reassign-partitions clears them), a read-only config is refused as Kafka does.
    let throttles: &[(&str, i8, Option<&str>)] = &[
        ("leader.replication.throttled.rate", DELETE, None),
        ("follower.replication.throttled.rate", DELETE, None),
    ];
    assert_eq!(
        alter_configs(&mut c, 1, 4, &me.to_string(), throttles, false),
        ok
    );
    let set: &[(&str, i8, Option<&str>)] = &[("log.dirs", SET, Some("/x"))];
    assert_eq!(
        alter_configs(&mut c, 1, 4, "", set, false),
        (42, m("Cannot update these configs dynamically: [log.dirs]"))
    );

    // A refused resource changed nothing (also not the valid half of a request).
    let half: &[(&str, i8, Option<&str>)] = &[
        ("retention.ms", SET, Some("5")),
        ("cleanup.policy", APPEND, Some("bogus")),
    ];
    assert_eq!(alter_configs(&mut c, 1, 2, "cfg", half, false).0, 40);
    assert_eq!(topic_configs(&mut c, "cfg", &keys), changed);

    // The change survives a restart.
    drop(c);
    assert_eq!(b.terminate(), Some(0));
    b.launch();
    let mut c = b.connect();
    assert_eq!(topic_configs(&mut c, "cfg", &keys), changed);

    let undo: &[(&str, i8, Option<&str>)] = &[
        ("retention.ms", DELETE, None),
        ("cleanup.policy", SUBTRACT, Some("compact")),
    ];
    assert_eq!(alter_configs(&mut c, 0, 2, "cfg", undo, false), ok);
    assert_eq!(topic_configs(&mut c, "cfg", &keys), defaults);
}
