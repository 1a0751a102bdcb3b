//! The error codes and messages of admin answers, success and failure, as Apache Kafka 4.4
//! sends them: which ones are null, which are "" and which carry words. Clients print these
//! messages (kafka-acls, kafka-configs, the admin clients' exceptions), and some tell null
//! from "".
//!
//! Every expected value below was read from Kafka 4.4 (one combined KRaft node with
//! StandardAuthorizer and `super.users=User:ANONYMOUS`). Set `ADMIN_MESSAGES_PORT` to the port
//! of such a broker to run the same assertions against it instead of a fresh Sluice.

mod common;

use std::time::Duration;

use common::{Client, TestBroker};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn m(v: &str) -> Option<String> {
    Some(v.to_string())
}

fn msg(v: &Option<StrBytes>) -> Option<String> {
    v.as_ref().map(|s| s.to_string())
}

/// The broker the assertions run against: a fresh Sluice with an authorizer, or the one on
/// `ADMIN_MESSAGES_PORT`.
fn broker() -> (Option<TestBroker>, u16) {
    if let Ok(p) = std::env::var("ADMIN_MESSAGES_PORT") {
        return (None, p.parse().expect("ADMIN_MESSAGES_PORT is a port"));
    }
    let b = TestBroker::start(&[
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:ANONYMOUS",
    ]);
    let port = b.port;
    (Some(b), port)
}

fn create_topic(c: &mut Client, name: &str) {
    let mut req = CreateTopicsRequest::default();
    let mut t = CreatableTopic::default();
    t.name = TopicName(s(name));
    t.num_partitions = 1;
    t.replication_factor = 1;
    req.topics.push(t);
    req.timeout_ms = 10_000;
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    assert!(
        matches!(r.topics[0].error_code, 0 | 36),
        "{:?}",
        r.topics[0]
    );
}

/// Polls `f` until it holds (metadata changes reach the broker's image asynchronously on
/// Kafka), for up to 10 s.
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..100 {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn describe_configs_messages() {
    let (_b, port) = broker();
    let mut c = Client::connect(port);
    create_topic(&mut c, "msg-configs");
    let mut req = DescribeConfigsRequest::default();
    for name in ["msg-configs", "msg-nope"] {
        let mut r = describe_configs_request::DescribeConfigsResource::default();
        r.resource_type = 2;
        r.resource_name = s(name);
        r.configuration_keys = Some(vec![s("cleanup.policy")]);
        req.resources.push(r);
    }
    let r: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &req);
    let got: Vec<_> = r
        .results
        .iter()
        .map(|r| (r.error_code, msg(&r.error_message)))
        .collect();
    assert_eq!(got, vec![(0, m("")), (3, m(""))]);
}

fn acl_filter() -> DescribeAclsRequest {
    let mut f = DescribeAclsRequest::default();
    f.resource_type_filter = 2;
    f.resource_name_filter = Some(s("msg-acls"));
    f.pattern_type_filter = 3;
    f.principal_filter = None;
    f.host_filter = None;
    f.operation = 1;
    f.permission_type = 1;
    f
}

#[test]
fn acl_messages() {
    let (_b, port) = broker();
    let mut c = Client::connect(port);
    let mut req = CreateAclsRequest::default();
    let mut ok = create_acls_request::AclCreation::default();
    ok.resource_type = 2;
    ok.resource_name = s("msg-acls");
    ok.resource_pattern_type = 3;
    ok.principal = s("User:alice");
    ok.host = s("*");
    ok.operation = 3;
    ok.permission_type = 3;
    let mut bad = ok.clone();
    bad.principal = s("alice");
    req.creations = vec![ok, bad];
    let r: CreateAclsResponse = c.call(ApiKey::CreateAcls, 3, &req);
    let got: Vec<_> = r
        .results
        .iter()
        .map(|r| (r.error_code, msg(&r.error_message)))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, m("")),
            (
                42,
                m(
                    "Could not parse principal from `alice` (no colon is present separating \
                   the principal type from the principal name)"
                )
            )
        ]
    );

    let filter = acl_filter();
    assert!(
        eventually(|| {
            let r: DescribeAclsResponse = c.call(ApiKey::DescribeAcls, 3, &filter);
            assert_eq!((r.error_code, msg(&r.error_message)), (0, m("")));
            r.resources.len() == 1
        }),
        "the created ACL is never described"
    );

    let mut del = DeleteAclsRequest::default();
    let mut f = delete_acls_request::DeleteAclsFilter::default();
    f.resource_type_filter = filter.resource_type_filter;
    f.resource_name_filter = filter.resource_name_filter.clone();
    f.pattern_type_filter = filter.pattern_type_filter;
    f.principal_filter = None;
    f.host_filter = None;
    f.operation = 1;
    f.permission_type = 1;
    del.filters.push(f);
    let r: DeleteAclsResponse = c.call(ApiKey::DeleteAcls, 3, &del);
    let got: Vec<_> = r
        .filter_results
        .iter()
        .map(|f| {
            let matching: Vec<_> = f
                .matching_acls
                .iter()
                .map(|a| (a.error_code, msg(&a.error_message)))
                .collect();
            (f.error_code, msg(&f.error_message), matching)
        })
        .collect();
    assert_eq!(got, vec![(0, None, vec![(0, None)])]);
}

#[test]
fn quota_messages() {
    let (_b, port) = broker();
    let mut c = Client::connect(port);
    let mut req = AlterClientQuotasRequest::default();
    for (user, key) in [
        ("msg-alice", "producer_byte_rate"),
        ("msg-bob", "bogus_key"),
    ] {
        let mut e = alter_client_quotas_request::EntryData::default();
        let mut ent = alter_client_quotas_request::EntityData::default();
        ent.entity_type = s("user");
        ent.entity_name = Some(s(user));
        e.entity.push(ent);
        let mut op = alter_client_quotas_request::OpData::default();
        op.key = s(key);
        op.value = 1000.0;
        e.ops.push(op);
        req.entries.push(e);
    }
    let r: AlterClientQuotasResponse = c.call(ApiKey::AlterClientQuotas, 1, &req);
    // Kafka answers the entries in its own (hash) order.
    let mut got: Vec<_> = r
        .entries
        .iter()
        .map(|e| (e.error_code, msg(&e.error_message)))
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![(0, None), (42, m("Invalid configuration key bogus_key"))]
    );

    let mut req = DescribeClientQuotasRequest::default();
    let mut comp = describe_client_quotas_request::ComponentData::default();
    comp.entity_type = s("user");
    comp.match_type = 0;
    comp._match = Some(s("msg-alice"));
    req.components.push(comp);
    let mut last = None;
    assert!(
        eventually(|| {
            let r: DescribeClientQuotasResponse = c.call(ApiKey::DescribeClientQuotas, 1, &req);
            let n = r.entries.as_ref().map(|e| e.len());
            last = Some((r.error_code, msg(&r.error_message), n));
            last == Some((0, m(""), Some(1)))
        }),
        "DescribeClientQuotas answered {last:?}"
    );

    let mut bad = DescribeClientQuotasRequest::default();
    let mut comp = describe_client_quotas_request::ComponentData::default();
    comp.entity_type = s("bogus");
    comp.match_type = 2;
    comp._match = None;
    bad.components.push(comp);
    let r: DescribeClientQuotasResponse = c.call(ApiKey::DescribeClientQuotas, 1, &bad);
    assert_eq!(
        (r.error_code, msg(&r.error_message), r.entries.is_none()),
        (35, m("Unsupported entity type bogus"), true)
    );
}

#[test]
fn scram_messages() {
    let (_b, port) = broker();
    let mut c = Client::connect(port);
    let mut req = AlterUserScramCredentialsRequest::default();
    for (user, iterations) in [("msg-alice", 4096), ("msg-bob", 10)] {
        let mut up = alter_user_scram_credentials_request::ScramCredentialUpsertion::default();
        up.name = s(user);
        up.mechanism = 1;
        up.iterations = iterations;
        up.salt = bytes::Bytes::from_static(b"0123456789abcdef");
        up.salted_password = bytes::Bytes::from(vec![7u8; 32]);
        req.upsertions.push(up);
    }
    let r: AlterUserScramCredentialsResponse = c.call(ApiKey::AlterUserScramCredentials, 0, &req);
    let got: Vec<_> = r
        .results
        .iter()
        .map(|r| (r.user.to_string(), r.error_code, msg(&r.error_message)))
        .collect();
    assert_eq!(
        got,
        vec![
            ("msg-alice".to_string(), 0, None),
            ("msg-bob".to_string(), 93, m("Too few iterations"))
        ]
    );

    let mut req = DescribeUserScramCredentialsRequest::default();
    let mut alice = describe_user_scram_credentials_request::UserName::default();
    alice.name = s("msg-alice");
    let mut nobody = alice.clone();
    nobody.name = s("msg-nobody");
    req.users = Some(vec![alice, nobody]);
    let mut last = None;
    assert!(
        eventually(|| {
            let r: DescribeUserScramCredentialsResponse =
                c.call(ApiKey::DescribeUserScramCredentials, 0, &req);
            let got: Vec<_> = r
                .results
                .iter()
                .map(|r| (r.user.to_string(), r.error_code, msg(&r.error_message)))
                .collect();
            let done = (r.error_code, msg(&r.error_message)) == (0, m(""))
                && got
                    == vec![
                        ("msg-alice".to_string(), 0, m("")),
                        (
                            "msg-nobody".to_string(),
                            91,
                            m(
                                "Attempt to describe a user credential that does not exist: \
                               msg-nobody",
                            ),
                        ),
                    ];
            last = Some(got);
            done
        }),
        "DescribeUserScramCredentials answered {last:?}"
    );
}

#[test]
fn quorum_feature_and_membership_messages() {
    let (_b, port) = broker();
    let mut c = Client::connect(port);
    let mut req = DescribeQuorumRequest::default();
    let mut t = describe_quorum_request::TopicData::default();
    t.topic_name = TopicName(s("__cluster_metadata"));
    t.partitions
        .push(describe_quorum_request::PartitionData::default());
    req.topics.push(t);
    let r: DescribeQuorumResponse = c.call(ApiKey::DescribeQuorum, 2, &req);
    let parts: Vec<_> = r
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.error_code, msg(&p.error_message)))
        .collect();
    assert_eq!(
        (r.error_code, msg(&r.error_message), parts),
        (0, m(""), vec![(0, m(""))])
    );

    let features = |c: &mut Client, feature: &str, level: i16, validate_only: bool| {
        let mut req = UpdateFeaturesRequest::default();
        req.timeout_ms = 10_000;
        req.validate_only = validate_only;
        if !feature.is_empty() {
            let mut k = update_features_request::FeatureUpdateKey::default();
            k.feature = s(feature);
            k.max_version_level = level;
            k.upgrade_type = 1;
            req.feature_updates.push(k);
        }
        let r: UpdateFeaturesResponse = c.call(ApiKey::UpdateFeatures, 1, &req);
        let results: Vec<_> = r
            .results
            .iter()
            .map(|r| (r.feature.to_string(), r.error_code, msg(&r.error_message)))
            .collect();
        (r.error_code, msg(&r.error_message), results)
    };
    assert_eq!(features(&mut c, "", 0, false), (0, None, vec![]));
    // group.version 1 is the level both brokers start at: a change to the same level.
    for validate_only in [true, false] {
        assert_eq!(
            features(&mut c, "group.version", 1, validate_only),
            (0, None, vec![("group.version".to_string(), 0, m("NONE"))])
        );
    }
    assert_eq!(
        features(&mut c, "bogus.version", 1, false),
        (
            95,
            m(
                "The update failed for all features since the following feature had an error: \
               Invalid update version 1 for feature bogus.version. Local controller 1 does not \
               support this feature."
            ),
            vec![]
        )
    );

    let mut req = UnregisterBrokerRequest::default();
    req.broker_id = BrokerId(99);
    let r: UnregisterBrokerResponse = c.call(ApiKey::UnregisterBroker, 0, &req);
    assert_eq!(
        (r.error_code, msg(&r.error_message)),
        (102, m("Broker ID 99 is not currently registered"))
    );

    let mut req = RemoveRaftVoterRequest::default();
    req.cluster_id = None;
    req.voter_id = 99;
    let r: RemoveRaftVoterResponse = c.call(ApiKey::RemoveRaftVoter, 0, &req);
    assert_eq!(
        (r.error_code, msg(&r.error_message)),
        (42, m("Remove voter request didn't include a valid voter"))
    );
}
