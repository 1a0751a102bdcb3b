//! A single node runs the cluster's Raft quorum and controller with itself as the only voter.
//! Topics, topic configs, ACLs and SCRAM users made through real requests, and produced
//! records, are all there again after a kill -9 and a restart; a data dir an earlier release's
//! single node wrote (its `sluice-metadata`) is imported whole; a `sluice.metadata.quorum`
//! other than `raft` stops start-up naming the key.

mod common;
#[path = "one_voter/old_format.rs"]
mod old_format;

use std::path::Path;
use std::process::Stdio;

use common::{Client, TestBroker, create_topic_request, produce_one, read_all, record_batch};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const RAFT: &str = "sluice.metadata.quorum=raft";
/// ACLs are served with an authorizer only; the test's own requests (User:ANONYMOUS) are a
/// super user's.
const AUTHORIZER: [&str; 2] = [
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users=User:ANONYMOUS",
];

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// The topic's value of `key` (DescribeConfigs v4).
fn topic_config(c: &mut Client, topic: &str, key: &str) -> Option<String> {
    use describe_configs_request::DescribeConfigsResource;
    let mut res = DescribeConfigsResource::default();
    res.resource_type = 2;
    res.resource_name = s(topic);
    res.configuration_keys = Some(vec![s(key)]);
    let mut r = DescribeConfigsRequest::default();
    r.resources = vec![res];
    let resp: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &r);
    assert_eq!(resp.results[0].error_code, 0, "describe configs of {topic}");
    resp.results[0]
        .configs
        .iter()
        .find(|e| e.name.as_str() == key)
        .and_then(|e| e.value.as_ref().map(|v| v.to_string()))
}

/// Every ACL as (resource name, principal, operation, permission), DescribeAcls v3.
fn acls(c: &mut Client) -> Vec<(String, String, i8, i8)> {
    let mut r = DescribeAclsRequest::default();
    r.resource_type_filter = 1; // ANY
    r.pattern_type_filter = 1; // ANY
    r.operation = 1; // ANY
    r.permission_type = 1; // ANY
    r.resource_name_filter = None;
    r.principal_filter = None;
    r.host_filter = None;
    let resp: DescribeAclsResponse = c.call(ApiKey::DescribeAcls, 3, &r);
    assert_eq!(resp.error_code, 0, "describe acls");
    let mut out = Vec::new();
    for res in &resp.resources {
        for a in &res.acls {
            out.push((
                res.resource_name.to_string(),
                a.principal.to_string(),
                a.operation,
                a.permission_type,
            ));
        }
    }
    out.sort();
    out
}

/// Every SCRAM user with its (mechanism, iterations), DescribeUserScramCredentials v0.
fn scram_users(c: &mut Client) -> Vec<(String, Vec<(i8, i32)>)> {
    let resp: DescribeUserScramCredentialsResponse = c.call(
        ApiKey::DescribeUserScramCredentials,
        0,
        &DescribeUserScramCredentialsRequest::default(),
    );
    assert_eq!(resp.error_code, 0, "describe scram users");
    let mut out: Vec<(String, Vec<(i8, i32)>)> = resp
        .results
        .iter()
        .map(|u| {
            let infos = u
                .credential_infos
                .iter()
                .map(|i| (i.mechanism, i.iterations))
                .collect();
            (u.user.to_string(), infos)
        })
        .collect();
    out.sort();
    out
}

/// An ACL letting User:alice read topic `kept` (CreateAcls v3).
fn allow_alice_to_read_kept(c: &mut Client) {
    let mut acl = create_acls_request::AclCreation::default();
    acl.resource_type = 2; // TOPIC
    acl.resource_name = s("kept");
    acl.resource_pattern_type = 3; // LITERAL
    acl.principal = s("User:alice");
    acl.host = s("*");
    acl.operation = 3; // READ
    acl.permission_type = 3; // ALLOW
    let mut r = CreateAclsRequest::default();
    r.creations = vec![acl];
    let resp: CreateAclsResponse = c.call(ApiKey::CreateAcls, 3, &r);
    assert_eq!(resp.results[0].error_code, 0, "create acl");
}

/// A SCRAM credential for user alice (AlterUserScramCredentials v0).
fn upsert_alice(c: &mut Client, mechanism: i8, iterations: i32) {
    let mut up = alter_user_scram_credentials_request::ScramCredentialUpsertion::default();
    up.name = s("alice");
    up.mechanism = mechanism;
    up.iterations = iterations;
    up.salt = bytes::Bytes::from_static(b"a salt of sixteen");
    up.salted_password = bytes::Bytes::from(vec![7u8; 64]);
    let mut r = AlterUserScramCredentialsRequest::default();
    r.upsertions = vec![up];
    let resp: AlterUserScramCredentialsResponse = c.call(ApiKey::AlterUserScramCredentials, 0, &r);
    assert_eq!(resp.results[0].error_code, 0, "upsert alice");
}

/// A fourth record into `kept`-0, which must land at offset 3.
fn produce_fourth(c: &mut Client, when: &str) {
    let p = produce_one(c, "kept", 0, record_batch(&[b"four"], 1_700_000_000_000));
    assert_eq!((p.error_code, p.base_offset), (0, 3), "{when}");
}

fn topic_names(c: &mut Client) -> Vec<String> {
    let mut all = MetadataRequest::default();
    all.topics = None;
    let resp: MetadataResponse = c.call(ApiKey::Metadata, 12, &all);
    let mut names: Vec<String> = resp
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .collect();
    names.sort();
    names
}

/// The number of partitions of `topic` (Metadata v12).
fn partition_count(c: &mut Client, topic: &str) -> i32 {
    let mut all = MetadataRequest::default();
    all.topics = None;
    let resp: MetadataResponse = c.call(ApiKey::Metadata, 12, &all);
    let t = resp
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == topic));
    t.map_or(0, |t| t.partitions.len() as i32)
}

/// What the broker must hold: topics, configs, ACLs, SCRAM users and records.
type Held = (
    Vec<String>,
    Option<String>,
    Option<String>,
    Vec<(String, String, i8, i8)>,
    Vec<(String, Vec<(i8, i32)>)>,
    Vec<(i64, Vec<u8>)>,
);

fn held(c: &mut Client) -> Held {
    (
        topic_names(c),
        topic_config(c, "kept", "retention.ms"),
        topic_config(c, "kept", "segment.ms"),
        acls(c),
        scram_users(c),
        read_all(c, "kept").expect("read kept"),
    )
}

#[test]
fn metadata_made_through_requests_survives_kill9_and_restart() {
    let mut b = TestBroker::start(&[RAFT, AUTHORIZER[0], AUTHORIZER[1]]);
    let mut c = b.connect();
    for (name, configs) in [
        ("kept", &[("retention.ms", "123456789")][..]),
        ("other", &[][..]),
    ] {
        let r: CreateTopicsResponse = c.call(
            ApiKey::CreateTopics,
            7,
            &create_topic_request(name, 2, 1, configs),
        );
        assert_eq!(r.topics[0].error_code, 0, "create {name}");
    }

    use incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let mut set = AlterableConfig::default();
    set.name = s("segment.ms");
    set.value = Some(s("7200000"));
    let mut res = AlterConfigsResource::default();
    res.resource_type = 2;
    res.resource_name = s("kept");
    res.configs = vec![set];
    let mut r = IncrementalAlterConfigsRequest::default();
    r.resources = vec![res];
    let resp: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, 1, &r);
    assert_eq!(resp.responses[0].error_code, 0, "alter segment.ms");

    allow_alice_to_read_kept(&mut c);

    upsert_alice(&mut c, 1, 8192); // SCRAM-SHA-256

    for v in [&b"one"[..], b"two", b"three"] {
        let p = produce_one(&mut c, "kept", 0, record_batch(&[v], 1_700_000_000_000));
        assert_eq!(p.error_code, 0, "produce");
    }

    let before = held(&mut c);
    assert_eq!(before.0, ["kept", "other"]);
    assert_eq!(before.1.as_deref(), Some("123456789"));
    assert_eq!(before.2.as_deref(), Some("7200000"));
    assert_eq!(
        before.3,
        [("kept".to_string(), "User:alice".to_string(), 3, 3)]
    );
    assert_eq!(before.4, [("alice".to_string(), vec![(1, 8192)])]);
    let values: Vec<&[u8]> = before.5.iter().map(|(_, v)| v.as_slice()).collect();
    assert_eq!(values, [&b"one"[..], b"two", b"three"]);

    drop(c);
    b.kill9();
    b.launch();
    let mut c = b.connect();
    assert_eq!(held(&mut c), before, "after kill -9 and restart");
    // The metadata is the quorum's: the Raft log, not the one-node metadata file.
    assert!(b.data_dir().join("__cluster_metadata-0").is_dir());
    assert!(!b.data_dir().join("sluice-metadata").exists());
    produce_fourth(&mut c, "produce after restart");
    assert_eq!(
        b.log().matches("initialized the metadata quorum").count(),
        1,
        "the quorum is formed once, on the empty directory"
    );
}

#[test]
fn a_metadata_quorum_other_than_raft_is_refused_naming_the_key() {
    // `file` was an earlier release's single-node mode; its data dirs are imported instead.
    for value in ["zookeeper", "file"] {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["--override", &format!("sluice.metadata.quorum={value}")])
            .args(["--override", &format!("log.dirs={}", dir.path().display())])
            .stdin(Stdio::null())
            .output()
            .expect("run sluice");
        assert_eq!(out.status.code(), Some(1), "{value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("sluice.metadata.quorum") && err.contains(value),
            "{err}"
        );
        assert!(!Path::new(&dir.path().join("meta.properties")).exists());
    }
}

/// The group's committed offset of `topic`-0 (OffsetFetch v8).
fn committed(c: &mut Client, group: &str, topic: &str) -> i64 {
    use offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics};
    let mut t = OffsetFetchRequestTopics::default();
    t.name = s(topic).into();
    t.partition_indexes = vec![0];
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = s(group).into();
    g.topics = Some(vec![t]);
    let mut r = OffsetFetchRequest::default();
    r.groups = vec![g];
    let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 8, &r);
    let p = &resp.groups[0].topics[0].partitions[0];
    assert_eq!(p.error_code, 0, "offset fetch");
    p.committed_offset
}

/// A new idempotent producer's id (InitProducerId v4).
fn new_producer_id(c: &mut Client) -> i64 {
    let mut r = InitProducerIdRequest::default();
    r.transactional_id = None;
    r.transaction_timeout_ms = 60_000;
    r.producer_id = (-1).into();
    r.producer_epoch = -1;
    let resp: InitProducerIdResponse = c.call(ApiKey::InitProducerId, 4, &r);
    assert_eq!(resp.error_code, 0, "init producer id");
    resp.producer_id.0
}

/// Every client quota as (entity, key, value), DescribeClientQuotas v1.
fn quotas(c: &mut Client) -> Vec<(String, String, String)> {
    let mut r = DescribeClientQuotasRequest::default();
    let mut comp = describe_client_quotas_request::ComponentData::default();
    comp.entity_type = s("user");
    comp.match_type = 2; // any specified name
    comp._match = None;
    r.components = vec![comp];
    let resp: DescribeClientQuotasResponse = c.call(ApiKey::DescribeClientQuotas, 1, &r);
    assert_eq!(resp.error_code, 0, "describe client quotas");
    let mut out = Vec::new();
    for e in resp.entries.unwrap_or_default() {
        let entity: Vec<String> = e
            .entity
            .iter()
            .map(|d| format!("{}={:?}", d.entity_type, d.entity_name))
            .collect();
        for v in e.values {
            out.push((entity.join(","), v.key.to_string(), v.value.to_string()));
        }
    }
    out.sort();
    out
}

/// Topic name → topic id, Metadata v12.
fn topic_ids(c: &mut Client) -> Vec<(String, String)> {
    let mut all = MetadataRequest::default();
    all.topics = None;
    let resp: MetadataResponse = c.call(ApiKey::Metadata, 12, &all);
    let mut ids: Vec<(String, String)> = resp
        .topics
        .iter()
        .filter_map(|t| Some((t.name.as_ref()?.to_string(), t.topic_id.to_string())))
        .collect();
    ids.sort();
    ids
}

#[test]
fn a_single_nodes_metadata_file_is_carried_into_the_quorum_on_upgrade() {
    use old_format::{COMMITTED, NEXT_PRODUCER_ID_BLOCK, RECORDS, TXN};
    // The fixture: a data dir a single node of an earlier release left after a clean stop.
    let mut b = TestBroker::start_on(old_format::write, &[RAFT, AUTHORIZER[0], AUTHORIZER[1]]);
    let mut c = b.connect();

    let mut ids: Vec<(String, String)> = old_format::topics()
        .into_iter()
        .map(|(name, id, ..)| (name.to_string(), id.to_string()))
        .collect();
    ids.sort();
    assert_eq!(topic_ids(&mut c), ids, "every topic, with its id");
    for (name, _, parts, configs) in old_format::topics() {
        assert_eq!(partition_count(&mut c, name), parts, "{name}'s partitions");
        for (k, v) in configs {
            assert_eq!(
                topic_config(&mut c, name, k).as_deref(),
                Some(v),
                "{name} {k}"
            );
        }
    }
    let before = held(&mut c);
    assert_eq!(
        before.3,
        [("kept".to_string(), "User:alice".to_string(), 3, 3)],
        "the ACL"
    );
    assert_eq!(before.4, [("alice".to_string(), vec![(2, 4096)])], "SCRAM");
    let values: Vec<&[u8]> = before.5.iter().map(|(_, v)| v.as_slice()).collect();
    assert_eq!(values, RECORDS, "kept-0's records");
    let q = quotas(&mut c);
    assert!(
        matches!(q.as_slice(), [(entity, key, value)]
            if entity.starts_with("user=") && entity.contains("alice")
                && key == "producer_byte_rate" && value == "1024"),
        "the client quota: {q:?}"
    );
    let (group, topic, offset) = COMMITTED;
    assert_eq!(committed(&mut c, group, topic), offset, "committed offset");
    let (txn, pid, epoch) = TXN;
    assert_eq!(
        common::txn::init_retrying(&mut c, txn, 60_000),
        (pid, epoch + 1),
        "the transactional id's producer, fenced up one epoch"
    );
    let fresh = new_producer_id(&mut c);
    assert!(
        fresh >= NEXT_PRODUCER_ID_BLOCK,
        "producer ids resume at or above {NEXT_PRODUCER_ID_BLOCK}, got {fresh}"
    );
    produce_fourth(&mut c, "produce after upgrade");
    assert!(!b.data_dir().join("sluice-metadata").exists());
    assert!(b.data_dir().join("sluice-metadata.imported").is_file());
    assert!(b.data_dir().join("__cluster_metadata-0").is_dir());

    // Imported once: after a kill -9 the quorum's log alone holds it.
    drop(c);
    b.kill9();
    b.launch();
    let mut c = b.connect();
    assert_eq!(topic_ids(&mut c), ids, "topic ids after kill -9");
    assert_eq!(held(&mut c).3, before.3, "ACLs after kill -9");
    assert_eq!(read_all(&mut c, "kept").expect("read kept").len(), 4);
    assert_eq!(
        committed(&mut c, group, topic),
        offset,
        "committed offset after kill -9"
    );
    assert_eq!(
        b.log().matches("into the metadata log").count(),
        1,
        "{}",
        b.log()
    );
}
