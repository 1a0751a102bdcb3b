//! A replicated cluster of three real `sluice` processes on loopback: the quorum forms from
//! empty dirs, brokers register, an RF=3 topic replicates byte for byte, a leader killed with
//! -9 is replaced from the ISR without losing an acknowledged record, the restarted node
//! catches up and rejoins the ISR, and acks=all needs min.insync.replicas.

mod common;

use std::time::Duration;

use common::cluster::TestCluster;
use common::{Client, create_topic_request, produce_one, record_batch};
use kafka_protocol::messages::{ApiKey, CreateTopicsResponse};

const WAIT: Duration = Duration::from_secs(40);

fn create(c: &TestCluster, topic: &str, partitions: i32, rf: i16, configs: &[(&str, &str)]) {
    let mut client = c.connect(0);
    let req = create_topic_request(topic, partitions, rf, configs);
    let resp: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &req);
    assert_eq!(resp.topics[0].error_code, 0, "{:?}", resp.topics[0]);
}

/// The leader of `topic`-0 as a node that is up sees it, once it has `isr` members.
fn leader_with_isr(c: &TestCluster, topic: &str, isr: usize) -> (i32, i32) {
    let mut found = (-1, -1);
    c.wait_for(WAIT, &format!("{topic}-0 with an ISR of {isr}"), |c| {
        (0..c.nodes.len())
            .filter(|i| c.is_up(*i))
            .any(|i| match c.partition_state(i, topic, 0) {
                Some((leader, epoch, members)) if leader >= 0 && members.len() == isr => {
                    found = (leader, epoch);
                    true
                }
                _ => false,
            })
    });
    found
}

/// Every value of `topic`-0 from offset 0 as node `i` (the leader) serves it.
fn read_all(c: &TestCluster, i: usize, topic: &str) -> Vec<(i64, Vec<u8>)> {
    common::read_all(&mut c.connect(i), topic)
        .unwrap_or_else(|e| panic!("node {}: {e}", c.nodes[i].id))
}

fn segment_bytes(c: &TestCluster, i: usize, topic: &str) -> Vec<u8> {
    common::cluster::segment_bytes_in(&c.node_dir(i).join("data"), topic)
}

fn produce(client: &mut Client, topic: &str, value: &[u8]) -> (i16, i64) {
    let r = produce_one(client, topic, 0, record_batch(&[value], 1_700_000_000_000));
    if r.error_code != 0 {
        eprintln!("produce to {topic}: {r:?}");
    }
    (r.error_code, r.base_offset)
}

#[test]
fn replicates_and_fails_over_without_losing_acknowledged_records() {
    let mut c = TestCluster::start(3, &[]);
    create(&c, "r", 1, 3, &[("min.insync.replicas", "2")]);
    let (leader, epoch) = leader_with_isr(&c, "r", 3);
    let li = c.index_of(leader);

    // A follower answers produces with NOT_LEADER_OR_FOLLOWER.
    let follower = (li + 1) % 3;
    let (code, _) = produce(&mut c.connect(follower), "r", b"to a follower");
    assert_eq!(code, 6, "NOT_LEADER_OR_FOLLOWER");

    let mut acked: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut client = c.connect(li);
    for n in 0..20 {
        let v = format!("before-{n}").into_bytes();
        let (code, offset) = produce(&mut client, "r", &v);
        assert_eq!(code, 0);
        acked.push((offset, v));
    }
    // Followers hold the leader's batches as they came: the segment files are identical.
    c.wait_for(WAIT, "identical replicas", |c| {
        let lead = segment_bytes(c, li, "r");
        (0..3).all(|i| segment_bytes(c, i, "r") == lead)
    });

    c.kill9(li);
    let (new_leader, new_epoch) = leader_with_isr(&c, "r", 2);
    assert_ne!(new_leader, leader);
    assert!(new_epoch > epoch, "leader epoch {new_epoch} after {epoch}");
    let ni = c.index_of(new_leader);
    let mut client = c.connect(ni);
    for n in 0..10 {
        let v = format!("after-{n}").into_bytes();
        let (code, offset) = produce(&mut client, "r", &v);
        assert_eq!(code, 0, "acks=all with 2 of 3 in the ISR");
        acked.push((offset, v));
    }
    assert_eq!(
        read_all(&c, ni, "r"),
        acked,
        "every acknowledged record, in order, once"
    );

    // The old leader comes back, truncates to the new leader's log and rejoins the ISR.
    c.restart(li);
    leader_with_isr(&c, "r", 3);
    c.wait_for(WAIT, "the restarted replica caught up", |c| {
        segment_bytes(c, li, "r") == segment_bytes(c, ni, "r")
    });
}

#[test]
fn acks_all_needs_min_insync_replicas() {
    let mut c = TestCluster::start(3, &[]);
    create(&c, "m", 1, 3, &[("min.insync.replicas", "3")]);
    let (leader, _) = leader_with_isr(&c, "m", 3);
    let li = c.index_of(leader);
    let mut client = c.connect(li);
    // The ISR is full as the cluster sees it; the leader may still be applying that.
    c.wait_for(WAIT, "acks=all with the full ISR", |_| {
        produce(&mut client, "m", b"all three").0 == 0
    });
    // A follower dies (not the quorum's majority): the leader drops it from the ISR.
    let fi = (li + 1) % 3;
    c.kill9(fi);
    leader_with_isr(&c, "m", 2);
    assert_eq!(
        produce(&mut client, "m", b"two of three").0,
        19,
        "NOT_ENOUGH_REPLICAS"
    );
    let r = produce_one_acks(&mut client, "m", 1);
    assert_eq!(r, 0, "acks=1 needs only the leader");
    c.restart(fi);
    leader_with_isr(&c, "m", 3);
    c.wait_for(WAIT, "acks=all with the ISR full again", |_| {
        produce(&mut client, "m", b"three again").0 == 0
    });
}

fn produce_one_acks(client: &mut Client, topic: &str, acks: i16) -> i16 {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let mut pd = PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(record_batch(&[b"acks"], 1_700_000_000_000));
    let mut td = TopicProduceData::default();
    td.name = TopicName(StrBytes::from_string(topic.to_string()));
    td.partition_data = vec![pd];
    let mut r = ProduceRequest::default();
    r.acks = acks;
    r.timeout_ms = 5000;
    r.topic_data = vec![td];
    let resp: ProduceResponse = client.call(ApiKey::Produce, 9, &r);
    resp.responses[0].partition_responses[0].error_code
}
