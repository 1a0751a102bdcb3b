//! KIP-848 consumer groups over a socket against the real binary: ConsumerGroupHeartbeat's
//! epochs and incremental assignment (a partition reaches its new owner only after the old
//! owner's heartbeat shows it revoked), Kafka's errors and messages, OffsetCommit/OffsetFetch
//! v9 member checks, ConsumerGroupDescribe, ListGroups' type filter, DescribeGroups of a
//! consumer group, leaving, and session expiry.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{Client, TestBroker, coordinator, create_topic_request};
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "cg";
const GROUP: &str = "cg-group";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn join(member: &str) -> ConsumerGroupHeartbeatRequest {
    let mut r = ConsumerGroupHeartbeatRequest::default();
    r.group_id = GroupId(s(GROUP));
    r.member_id = s(member);
    r.member_epoch = 0;
    r.rebalance_timeout_ms = 30_000;
    r.subscribed_topic_names = Some(vec![TopicName(s(TOPIC))]);
    r.topic_partitions = Some(vec![]);
    r
}

fn beat(
    member: &str,
    epoch: i32,
    topic: uuid::Uuid,
    owned: &BTreeSet<i32>,
) -> ConsumerGroupHeartbeatRequest {
    let mut r = ConsumerGroupHeartbeatRequest::default();
    r.group_id = GroupId(s(GROUP));
    r.member_id = s(member);
    r.member_epoch = epoch;
    r.rebalance_timeout_ms = -1;
    let mut tp = TopicPartitions::default();
    tp.topic_id = topic;
    tp.partitions = owned.iter().copied().collect();
    r.topic_partitions = Some(vec![tp]);
    r
}

/// A heartbeat sent as a client sends it, through the coordinator's loading.
fn hb(c: &mut Client, r: &ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse {
    coordinator::call(c, coordinator::GROUP, GROUP, |c| {
        let resp: ConsumerGroupHeartbeatResponse = c.call(ApiKey::ConsumerGroupHeartbeat, 1, r);
        (resp.error_code, resp)
    })
}

fn assigned(r: &ConsumerGroupHeartbeatResponse) -> Option<BTreeSet<i32>> {
    r.assignment.as_ref().map(|a| {
        a.topic_partitions
            .iter()
            .flat_map(|t| t.partitions.iter().copied())
            .collect()
    })
}

fn commit(c: &mut Client, version: i16, member: &str, epoch: i32) -> i16 {
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = 0;
    let mut t = OffsetCommitRequestTopic::default();
    t.name = TopicName(s(TOPIC));
    t.partitions = vec![p];
    let mut r = OffsetCommitRequest::default();
    r.group_id = GroupId(s(GROUP));
    r.member_id = s(member);
    r.generation_id_or_member_epoch = epoch;
    r.topics = vec![t];
    coordinator::call(c, coordinator::GROUP, GROUP, |c| {
        let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, version, &r);
        let code = resp.topics[0].partitions[0].error_code;
        (code, code)
    })
}

fn describe(c: &mut Client) -> consumer_group_describe_response::DescribedGroup {
    let mut r = ConsumerGroupDescribeRequest::default();
    r.group_ids = vec![GroupId(s(GROUP))];
    coordinator::call(c, coordinator::GROUP, GROUP, |c| {
        let mut resp: ConsumerGroupDescribeResponse = c.call(ApiKey::ConsumerGroupDescribe, 1, &r);
        let g = resp.groups.remove(0);
        (g.error_code, g)
    })
}

#[test]
fn consumer_group_protocol() {
    let b = TestBroker::start(&[
        "group.consumer.min.session.timeout.ms=1000",
        "group.consumer.session.timeout.ms=2000",
        "group.consumer.min.heartbeat.interval.ms=100",
        "group.consumer.heartbeat.interval.ms=500",
    ]);
    let mut c = b.connect();
    let created: CreateTopicsResponse = c.call(
        ApiKey::CreateTopics,
        7,
        &create_topic_request(TOPIC, 4, 1, &[]),
    );
    let tid = created.topics[0].topic_id;

    // Invalid requests: Kafka's messages.
    let mut bad = join("x");
    bad.subscribed_topic_names = Some(vec![]);
    let r = hb(&mut c, &bad);
    assert_eq!(r.error_code, E::InvalidRequest.code());
    assert_eq!(
        r.error_message.as_deref(),
        Some("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    );
    let mut bad = join("x");
    bad.server_assignor = Some(s("sticky"));
    let r = hb(&mut c, &bad);
    assert_eq!(r.error_code, E::UnsupportedAssignor.code());
    let r = hb(&mut c, &join(""));
    assert_eq!(
        r.error_code,
        E::InvalidRequest.code(),
        "v1 needs a member id"
    );

    // a joins alone: every partition at epoch 1.
    let r = hb(&mut c, &join("a"));
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    assert_eq!(r.heartbeat_interval_ms, 500);
    let a_all = assigned(&r).unwrap();
    assert_eq!(a_all.len(), 4);

    // b joins: epoch 2 but nothing yet (a still owns everything).
    let r = hb(&mut c, &join("b"));
    assert_eq!((r.error_code, r.member_epoch), (0, 2));
    assert_eq!(assigned(&r).unwrap_or_default().len(), 0);

    // a must revoke two: it stays at epoch 1 with the two it keeps.
    let r = hb(&mut c, &beat("a", 1, tid, &a_all));
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    let a_kept = assigned(&r).unwrap();
    assert_eq!(a_kept.len(), 2);
    assert_eq!(describe(&mut c).group_state.as_str(), "Reconciling");

    // A greater epoch is fenced.
    let r = hb(&mut c, &beat("a", 7, tid, &a_kept));
    assert_eq!(r.error_code, E::FencedMemberEpoch.code());
    // An unknown member.
    let r = hb(&mut c, &beat("z", 1, tid, &BTreeSet::new()));
    assert_eq!(r.error_code, E::UnknownMemberId.code());
    assert_eq!(
        r.error_message.as_deref(),
        Some("Member z is not a member of group cg-group.")
    );

    // b still waits for them.
    let r = hb(&mut c, &beat("b", 2, tid, &BTreeSet::new()));
    assert_eq!(assigned(&r).unwrap_or_default().len(), 0);
    // a revoked them: epoch 2; then b gets them.
    let r = hb(&mut c, &beat("a", 1, tid, &a_kept));
    assert_eq!(r.member_epoch, 2);
    let r = hb(&mut c, &beat("b", 2, tid, &BTreeSet::new()));
    let b_parts = assigned(&r).unwrap();
    assert_eq!(b_parts.len(), 2);
    assert!(b_parts.is_disjoint(&a_kept));
    let d = describe(&mut c);
    assert_eq!(d.error_code, 0);
    assert_eq!(d.group_state.as_str(), "Stable");
    assert_eq!((d.group_epoch, d.assignment_epoch), (2, 2));
    assert_eq!(d.assignor_name.as_str(), "uniform");
    assert_eq!(d.members.len(), 2);

    // OffsetCommit v9: the member's epoch; older versions are refused for such members.
    assert_eq!(commit(&mut c, 9, "b", 1), E::StaleMemberEpoch.code());
    assert_eq!(commit(&mut c, 9, "b", 2), 0);
    assert_eq!(commit(&mut c, 9, "nobody", 2), E::UnknownMemberId.code());
    assert_eq!(commit(&mut c, 8, "b", 2), E::UnsupportedVersion.code());

    // ListGroups v5 by type; DescribeGroups of a consumer group.
    let mut lr = ListGroupsRequest::default();
    lr.types_filter = vec![s("consumer")];
    let l: ListGroupsResponse = c.call(ApiKey::ListGroups, 5, &lr);
    assert_eq!(l.groups.len(), 1);
    assert_eq!(l.groups[0].group_type.as_str(), "consumer");
    assert_eq!(l.groups[0].group_state.as_str(), "Stable");
    lr.types_filter = vec![s("classic")];
    let l: ListGroupsResponse = c.call(ApiKey::ListGroups, 5, &lr);
    assert!(l.groups.is_empty());
    let mut dr = DescribeGroupsRequest::default();
    dr.groups = vec![GroupId(s(GROUP))];
    let d: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, 6, &dr);
    assert_eq!(d.groups[0].error_code, E::GroupIdNotFound.code());
    assert_eq!(
        d.groups[0].error_message.as_deref(),
        Some("Group cg-group is not a classic group.")
    );

    // b leaves; a's session then expires (no more heartbeats) and the group is empty.
    let mut leave = beat("b", -1, tid, &b_parts);
    leave.topic_partitions = None;
    let r = hb(&mut c, &leave);
    assert_eq!((r.error_code, r.member_epoch), (0, -1));
    assert_eq!(describe(&mut c).members.len(), 1);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !describe(&mut c).members.is_empty() {
        assert!(Instant::now() < deadline, "a's session did not expire");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(describe(&mut c).group_state.as_str(), "Empty");
}
