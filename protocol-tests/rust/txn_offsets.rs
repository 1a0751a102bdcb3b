//! Transactional offset commits against the real binary: TxnOffsetCommit (every served
//! version) with the answers Kafka 4.4 gives (checked against it with the same requests),
//! OffsetFetch with and without require_stable, the transactional batch the coordinator
//! writes to `__consumer_offsets` (read back with Fetch), pending offsets surviving kill -9,
//! and the transaction markers: written into the stopped broker's data dir by the broker code
//! itself (a node started in this process on the same data dir, `Partition::append_marker` +
//! `Coordinator::complete_txn`, what the transaction coordinator's marker path does), then
//! replayed by the binary at its next start.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::{Client, TestBroker, coordinator, create_topic_request, fetch_one};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

const TOPIC: &str = "orders";
const OFFSETS: &str = "__consumer_offsets";
const GROUP: &str = "copier";

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const OFFSET_METADATA_TOO_LARGE: i16 = 12;
const ILLEGAL_GENERATION: i16 = 22;
const INVALID_GROUP_ID: i16 = 24;
const UNKNOWN_MEMBER_ID: i16 = 25;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const FENCED_INSTANCE_ID: i16 = 82;
const UNSTABLE_OFFSET_COMMIT: i16 = 88;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A TxnOffsetCommit's fields besides the offsets.
#[derive(Clone)]
struct Txn<'a> {
    group: &'a str,
    producer: (i64, i16),
    member: &'a str,
    instance: Option<&'a str>,
    generation: i32,
    metadata: &'a str,
}

fn simple(group: &str, producer: (i64, i16)) -> Txn<'_> {
    Txn {
        group,
        producer,
        member: "",
        instance: None,
        generation: -1,
        metadata: "",
    }
}

/// Producer 300's commit as `member` (`instance`) of `group` in `generation`.
fn as_member<'a>(
    group: &'a str,
    member: &'a str,
    instance: Option<&'a str>,
    generation: i32,
) -> Txn<'a> {
    Txn {
        member,
        instance,
        generation,
        ..simple(group, (300, 0))
    }
}

/// Sends TxnOffsetCommit at `v` for `topic` partitions (index, offset); answers
/// (partition, error code) in order.
fn commit(c: &mut Client, v: i16, t: &Txn, topic: &str, parts: &[(i32, i64)]) -> Vec<(i32, i16)> {
    let mut rt = TxnOffsetCommitRequestTopic::default();
    rt.name = TopicName(s(topic));
    for &(p, o) in parts {
        let mut rp = TxnOffsetCommitRequestPartition::default();
        rp.partition_index = p;
        rp.committed_offset = o;
        rp.committed_metadata = Some(s(t.metadata));
        rt.partitions.push(rp);
    }
    let mut r = TxnOffsetCommitRequest::default();
    r.transactional_id = TransactionalId(s("txn-offsets"));
    r.group_id = GroupId(s(t.group));
    r.producer_id = ProducerId(t.producer.0);
    r.producer_epoch = t.producer.1;
    if v >= 3 {
        r.generation_id = t.generation;
        r.member_id = s(t.member);
        r.group_instance_id = t.instance.map(s);
    }
    r.topics = vec![rt];
    let resp = coordinator::call(c, coordinator::GROUP, t.group, |c| {
        let resp: TxnOffsetCommitResponse = c.call(ApiKey::TxnOffsetCommit, v, &r);
        let code = resp
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| p.error_code)
            .find(|code| coordinator::RETRIABLE.contains(code))
            .unwrap_or(0);
        (code, resp)
    });
    assert_eq!(resp.topics.len(), 1);
    assert_eq!(resp.topics[0].name.0.as_str(), topic);
    resp.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code))
        .collect()
}

/// OffsetFetch at `v` of `TOPIC` partitions 0 and 1 (None: all of the group's); answers
/// (partition, offset, error) per partition.
fn fetch(c: &mut Client, v: i16, group: &str, all: bool, stable: bool) -> Vec<(i32, i64, i16)> {
    let mut r = OffsetFetchRequest::default();
    if v >= 8 {
        let mut g = OffsetFetchRequestGroup::default();
        g.group_id = GroupId(s(group));
        g.topics = (!all).then(|| {
            let mut t = OffsetFetchRequestTopics::default();
            t.name = TopicName(s(TOPIC));
            t.partition_indexes = vec![0, 1];
            vec![t]
        });
        r.groups = vec![g];
    } else {
        r.group_id = GroupId(s(group));
        r.topics = (!all).then(|| {
            let mut t = OffsetFetchRequestTopic::default();
            t.name = TopicName(s(TOPIC));
            t.partition_indexes = vec![0, 1];
            vec![t]
        });
    }
    if v >= 7 {
        r.require_stable = stable;
    }
    let resp = coordinator::call(c, coordinator::GROUP, group, |c| {
        let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, v, &r);
        let code = match resp.groups.first() {
            Some(g) if v >= 8 => g.error_code,
            _ => resp.error_code,
        };
        (code, resp)
    });
    if v >= 8 {
        let g = &resp.groups[0];
        assert_eq!(g.error_code, 0);
        g.topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| (p.partition_index, p.committed_offset, p.error_code))
            .collect()
    } else {
        assert_eq!(resp.error_code, 0);
        resp.topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| (p.partition_index, p.committed_offset, p.error_code))
            .collect()
    }
}

/// A consumer joins `group` (JoinGroup v7, with the member id round trip) and syncs:
/// (member id, generation).
fn join(c: &mut Client, group: &str, instance: Option<&str>) -> (String, i32) {
    let mut p = JoinGroupRequestProtocol::default();
    p.name = s("range");
    p.metadata = Bytes::from_static(b"\0\x01\0\0\0\x01\0\x06orders\0\0\0\0");
    let mut r = JoinGroupRequest::default();
    r.group_id = GroupId(s(group));
    r.session_timeout_ms = 30_000;
    r.rebalance_timeout_ms = 30_000;
    r.protocol_type = s("consumer");
    r.protocols = vec![p];
    r.group_instance_id = instance.map(s);
    let mut resp = coordinator::call(c, coordinator::GROUP, group, |c| {
        let resp: JoinGroupResponse = c.call(ApiKey::JoinGroup, 7, &r);
        (resp.error_code, resp)
    });
    if resp.error_code == 79 {
        r.member_id = resp.member_id.clone();
        resp = c.call(ApiKey::JoinGroup, 7, &r);
    }
    assert_eq!(resp.error_code, 0, "JoinGroup");
    let (member, generation) = (resp.member_id.to_string(), resp.generation_id);
    let mut a = SyncGroupRequestAssignment::default();
    a.member_id = s(&member);
    let mut r = SyncGroupRequest::default();
    r.group_id = GroupId(s(group));
    r.generation_id = generation;
    r.member_id = s(&member);
    r.group_instance_id = instance.map(s);
    r.protocol_type = Some(s("consumer"));
    r.protocol_name = Some(s("range"));
    r.assignments = vec![a];
    let resp: SyncGroupResponse = c.call(ApiKey::SyncGroup, 5, &r);
    assert_eq!(resp.error_code, 0, "SyncGroup");
    (member, generation)
}

/// The batches of `__consumer_offsets`-`partition` as a consumer fetches them.
fn offsets_batches(c: &mut Client, partition: i32) -> Vec<kafka_protocol::records::RecordSet> {
    let resp = fetch_one(c, 12, OFFSETS, uuid::Uuid::nil(), partition, 0);
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let mut bytes = p.records.clone().unwrap_or_default();
    let mut out = Vec::new();
    while !bytes.is_empty() {
        out.push(RecordBatchDecoder::decode(&mut bytes).unwrap());
    }
    out
}

/// With the binary stopped: starts a node on its data dir in this process (its one-voter
/// metadata quorum included), appends the markers (producer, commit) to the group's
/// `__consumer_offsets` partition once the node leads it and has loaded its groups, and tells
/// the group coordinator, as the transaction coordinator's marker path does; answers what
/// OffsetFetch with require_stable then gives in process ((partition, offset, error) for
/// partitions 0 and 1), and stops the node cleanly.
fn write_markers(dir: &std::path::Path, markers: &[((i64, i16), bool)]) -> Vec<(i32, i64, i16)> {
    let cfg = sluice::config::BrokerConfig::from_pairs([
        ("log.dirs".to_string(), dir.display().to_string()),
        (
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        ),
    ])
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let node = sluice::run::start(cfg).await.unwrap();
        node.serving().await;
        let broker = Arc::clone(node.broker().expect("a broker"));
        let wanted = Some(vec![(TOPIC.to_string(), vec![0, 1])]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let (partition, p) = loop {
            let led = broker.controller.topic(OFFSETS).and_then(|offsets| {
                let n = offsets.partition_count as i32;
                let partition = sluice::group::records::partition_for(GROUP, n);
                let p = Arc::clone(offsets.partition(partition)?);
                p.is_leader().then_some((partition, p))
            });
            if let Some(led) = led
                && broker
                    .groups
                    .fetch_offsets(GROUP, wanted.clone(), false)
                    .await
                    .is_ok()
            {
                break led;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the group's __consumer_offsets partition was not loaded"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        for &(producer, commit) in markers {
            p.append_marker(producer.0, producer.1, 0, commit, None)
                .unwrap();
            broker
                .groups
                .complete_txn(partition, producer.0, commit)
                .await
                .unwrap();
        }
        let found = broker
            .groups
            .fetch_offsets(GROUP, wanted, true)
            .await
            .unwrap();
        let found = found[0]
            .1
            .iter()
            .map(|o| (o.partition, o.offset, o.error))
            .collect();
        drop(p);
        drop(broker);
        node.stop(false).await.unwrap();
        found
    })
}

#[test]
fn transactional_offsets_are_pending_until_their_markers_across_restarts() {
    // These producers never ask the transaction coordinator for an id: without KIP-890
    // verification (on by default) Kafka, as Sluice, takes their commits as they come (with
    // it, each would be INVALID_PRODUCER_ID_MAPPING).
    let mut b = TestBroker::start(&[
        "group.initial.rebalance.delay.ms=0",
        "transaction.partition.verification.enable=false",
    ]);
    let mut c = b.connect();
    let created: CreateTopicsResponse = c.call(
        ApiKey::CreateTopics,
        7,
        &create_topic_request(TOPIC, 2, 1, &[]),
    );
    assert_eq!(created.topics[0].error_code, 0);

    // Producer 100 commits both partitions in its transaction; producer 200 partition 0.
    let (p100, p200) = ((100, 0), (200, 3));
    assert_eq!(
        commit(&mut c, 3, &simple(GROUP, p100), TOPIC, &[(0, 7), (1, 8)]),
        vec![(0, 0), (1, 0)]
    );
    assert_eq!(
        commit(&mut c, 5, &simple(GROUP, p200), TOPIC, &[(0, 50)]),
        vec![(0, 0)]
    );
    // Unstable with require_stable (v7+), not yet committed without it.
    let unstable = vec![
        (0, -1, UNSTABLE_OFFSET_COMMIT),
        (1, -1, UNSTABLE_OFFSET_COMMIT),
    ];
    let none = vec![(0, -1, 0), (1, -1, 0)];
    for v in [7, 8, 9] {
        assert_eq!(fetch(&mut c, v, GROUP, false, true), unstable, "v{v}");
        assert_eq!(fetch(&mut c, v, GROUP, false, false), none, "v{v}");
    }
    assert_eq!(fetch(&mut c, 6, GROUP, false, false), none);
    // The group's offsets are all pending: "all offsets" lists none.
    assert_eq!(fetch(&mut c, 8, GROUP, true, true), vec![]);

    // The coordinator wrote one transactional batch per commit, with the producer's id and
    // epoch at sequence 0, as Kafka's does.
    let offsets_partition = sluice::group::records::partition_for(GROUP, 50);
    let batches = offsets_batches(&mut c, offsets_partition);
    let txn: Vec<(i64, i16, i32, usize)> = batches
        .iter()
        .filter(|set| set.records.iter().all(|r| r.transactional && !r.control))
        .map(|set| {
            let r = &set.records[0];
            (
                r.producer_id,
                r.producer_epoch,
                r.sequence,
                set.records.len(),
            )
        })
        .collect();
    assert_eq!(txn, vec![(100, 0, 0, 2), (200, 3, 0, 1)]);

    // Every served version commits (a group of its own each: the answers only).
    for v in 0..=5 {
        let group = format!("versions-{v}");
        assert_eq!(
            commit(&mut c, v, &simple(&group, (300, 0)), TOPIC, &[(1, 1)]),
            vec![(1, 0)],
            "v{v}"
        );
    }
    // Refusals, as Kafka 4.4 answers them.
    let p300 = (300, 0);
    assert_eq!(
        commit(&mut c, 3, &simple(GROUP, p300), "no-such-topic", &[(0, 1)]),
        vec![(0, UNKNOWN_TOPIC_OR_PARTITION)]
    );
    assert_eq!(
        commit(&mut c, 3, &simple(GROUP, p300), TOPIC, &[(9, 1)]),
        vec![(9, UNKNOWN_TOPIC_OR_PARTITION)]
    );
    assert_eq!(
        commit(&mut c, 3, &simple("", p300), TOPIC, &[(0, 1)]),
        vec![(0, INVALID_GROUP_ID)]
    );
    let big = "x".repeat(5000);
    let too_large = Txn {
        metadata: &big,
        ..simple("other", p300)
    };
    assert_eq!(
        commit(&mut c, 3, &too_large, TOPIC, &[(0, 1)]),
        vec![(0, OFFSET_METADATA_TOO_LARGE)]
    );
    let unknown_group = Txn {
        generation: 5,
        ..simple("unknown", p300)
    };
    assert_eq!(
        commit(&mut c, 3, &unknown_group, TOPIC, &[(0, 1)]),
        vec![(0, ILLEGAL_GENERATION)]
    );
    // KIP-447: a live group's member, generation and static instance are checked.
    let mut member_conn = b.connect();
    let (m, generation) = join(&mut member_conn, "live", None);
    for (t, want) in [
        (
            as_member("live", "bogus", None, generation),
            UNKNOWN_MEMBER_ID,
        ),
        (
            as_member("live", &m, None, generation + 1),
            ILLEGAL_GENERATION,
        ),
        (as_member("live", &m, None, -1), ILLEGAL_GENERATION),
        (as_member("live", "", None, -1), 0),
        (as_member("live", &m, None, generation), 0),
    ] {
        assert_eq!(commit(&mut c, 3, &t, TOPIC, &[(0, 1)]), vec![(0, want)]);
    }
    // Below v3 there are no member fields: accepted.
    let no_member = as_member("live", "", None, -1);
    assert_eq!(
        commit(&mut c, 2, &no_member, TOPIC, &[(0, 1)]),
        vec![(0, 0)]
    );
    let (sm, sgen) = join(&mut member_conn, "static", Some("i1"));
    for (t, want) in [
        (
            as_member("static", "other", Some("i1"), sgen),
            FENCED_INSTANCE_ID,
        ),
        (
            as_member("static", &sm, Some("i2"), sgen),
            UNKNOWN_MEMBER_ID,
        ),
        (as_member("static", &sm, Some("i1"), sgen), 0),
    ] {
        assert_eq!(commit(&mut c, 3, &t, TOPIC, &[(0, 1)]), vec![(0, want)]);
    }

    // The open transactions survive kill -9: replayed pending, still unstable.
    b.kill9();
    b.launch();
    let mut c = b.connect();
    assert_eq!(fetch(&mut c, 8, GROUP, false, true), unstable);
    assert_eq!(fetch(&mut c, 8, GROUP, false, false), none);

    // The markers: producer 100 commits; producer 200's transaction is aborted with its
    // epoch bumped (as when a new instance of its transactional id fences it).
    b.kill9();
    let p200_bumped = (200, 4);
    let live_view = write_markers(&b.data_dir(), &[(p100, true), (p200_bumped, false)]);
    assert_eq!(live_view, vec![(0, 7, 0), (1, 8, 0)]);
    // The binary replays the markers from the log: the same offsets, stable.
    b.launch();
    let mut c = b.connect();
    let committed = vec![(0, 7, 0), (1, 8, 0)];
    assert_eq!(fetch(&mut c, 8, GROUP, false, true), committed);
    assert_eq!(fetch(&mut c, 7, GROUP, false, true), committed);
    assert_eq!(fetch(&mut c, 8, GROUP, true, true), committed);
    let markers: Vec<bool> = offsets_batches(&mut c, offsets_partition)
        .iter()
        .filter(|set| set.records.iter().all(|r| r.control))
        .map(|set| set.records[0].key.as_deref() == Some(&[0, 0, 0, 1][..]))
        .collect();
    assert_eq!(markers, vec![true, false]);
    // The fenced epoch can no longer commit offsets; the new one can.
    assert_eq!(
        commit(&mut c, 3, &simple(GROUP, p200), TOPIC, &[(0, 60)]),
        vec![(0, INVALID_PRODUCER_EPOCH)]
    );
    assert_eq!(
        commit(&mut c, 3, &simple(GROUP, p200_bumped), TOPIC, &[(0, 61)]),
        vec![(0, 0)]
    );
    assert_eq!(
        fetch(&mut c, 8, GROUP, false, true),
        vec![(0, -1, UNSTABLE_OFFSET_COMMIT), (1, 8, 0)]
    );
    assert!(b.terminate().is_some());
}
