//! A network partition of a three-node cluster, each `sluice` in a network namespace of its
//! own: the leader of an RF=3 topic (min.insync.replicas=2) is cut off the bridge. Alone it
//! still takes acks=1 writes but acknowledges no acks=all write; the majority elects a new
//! leader at a higher epoch and acknowledges acks=all writes. Once the link is back, the old
//! leader follows the new one, drops the tail it wrote alone and rejoins the ISR, and every
//! replica holds every acknowledged record exactly once at its acknowledged offset.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::netns::NetnsCluster;
use common::{Client, create_topic_request, read_all, record_batch};
use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "part";
const WAIT: Duration = Duration::from_secs(40);

/// Produces one record with `acks` (Produce v9, `timeout_ms` 3 s): (error code, base offset),
/// or the I/O error (no answer within the client's read timeout).
fn produce(client: &mut Client, acks: i16, value: &[u8]) -> std::io::Result<(i16, i64)> {
    let mut pd = PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(record_batch(&[value], 1_700_000_000_000));
    let mut td = TopicProduceData::default();
    td.name = TopicName(StrBytes::from_string(TOPIC.to_string()));
    td.partition_data = vec![pd];
    let mut r = ProduceRequest::default();
    r.acks = acks;
    r.timeout_ms = 3000;
    r.topic_data = vec![td];
    let resp: ProduceResponse = client.try_call(ApiKey::Produce, 9, &r)?;
    let p = &resp.responses[0].partition_responses[0];
    Ok((p.error_code, p.base_offset))
}

/// Produces `value` with acks=all to node `i` from the bridge side until it is acknowledged
/// (a leader may still be applying the metadata that makes it one): the value acknowledged
/// (`value` and the attempt, so that an attempt that timed out but was written later is told
/// apart) and its offset.
fn produce_acked(c: &NetnsCluster, i: usize, value: &str) -> (i64, Vec<u8>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for attempt in 0.. {
        let v = format!("{value}.{attempt}").into_bytes();
        let got = c
            .connect(i)
            .and_then(|mut client| produce(&mut client, -1, &v));
        match got {
            Ok((0, offset)) => return (offset, v),
            other => {
                assert!(
                    Instant::now() < deadline,
                    "acks=all produce to node {} never acknowledged: {other:?}\n{}",
                    c.ids[i],
                    c.log_tails(25)
                );
                eprintln!("acks=all to node {}: {other:?}; retrying", c.ids[i]);
                std::thread::sleep(Duration::from_millis(300));
            }
        }
    }
    unreachable!()
}

/// The leader, its epoch and the ISR of the topic as node `i` sees it, once `ok` holds.
fn wait_state(
    c: &NetnsCluster,
    i: usize,
    what: &str,
    ok: impl Fn(i32, i32, &[i32]) -> bool,
) -> (i32, i32, Vec<i32>) {
    let mut found = None;
    c.wait_for(WAIT, what, |c| {
        found = c
            .partition_state(i, TOPIC, 0)
            .filter(|(l, e, isr)| ok(*l, *e, isr));
        found.is_some()
    });
    found.unwrap()
}

#[test]
fn a_cut_off_leader_drops_its_unacknowledged_tail_and_rejoins() {
    cut_off_leader("a", false);
}

/// The cut-off leader is also the active controller: the majority elects a new controller
/// too before it can move the partition's leadership.
#[test]
fn a_cut_off_leader_and_controller_drops_its_tail_and_rejoins() {
    cut_off_leader("b", true);
}

fn cut_off_leader(tag: &str, on_controller: bool) {
    let c = NetnsCluster::start(3, tag);
    let mut admin = c.connect(0).expect("connect to node 1");
    let mut req = create_topic_request(TOPIC, 1, 3, &[("min.insync.replicas", "2")]);
    // The preferred (first) replica becomes the leader: place it on, or off, the controller.
    let mut controller = -1;
    c.wait_for(WAIT, "an active controller", |c| {
        controller = c.metadata(0).map_or(-1, |m| m.controller_id.0);
        controller >= 0
    });
    let first = if on_controller {
        controller
    } else {
        c.ids.iter().copied().find(|id| *id != controller).unwrap()
    };
    let mut replicas = vec![first];
    replicas.extend(c.ids.iter().copied().filter(|id| *id != first));
    let mut a = CreatableReplicaAssignment::default();
    a.partition_index = 0;
    a.broker_ids = replicas.into_iter().map(BrokerId).collect();
    req.topics[0].assignments = vec![a];
    req.topics[0].num_partitions = -1;
    req.topics[0].replication_factor = -1;
    let resp: CreateTopicsResponse = admin.call(ApiKey::CreateTopics, 7, &req);
    assert_eq!(resp.topics[0].error_code, 0, "{:?}", resp.topics[0]);

    // 1. The full ISR, a leader L, acknowledged records.
    let (leader, epoch, _) = wait_state(&c, 0, "an ISR of 3", |l, _, isr| l >= 0 && isr.len() == 3);
    let li = c.index_of(leader);
    assert_eq!(leader, first, "the preferred replica leads");
    eprintln!("leader {leader} at epoch {epoch}; active controller {controller}");
    let mut acked: Vec<(i64, Vec<u8>)> = Vec::new();
    for n in 0..10 {
        acked.push(produce_acked(&c, li, &format!("before-{n}")));
    }

    // 2. L loses its link to the other two.
    c.cut(li);

    // 3. Alone, L still leads as far as it knows: acks=1 succeeds, acks=all does not.
    let mut alone = c
        .connect_inside(li)
        .expect("connect to L from inside its namespace");
    let mut divergent: Vec<Vec<u8>> = Vec::new();
    for n in 0..3 {
        let v = format!("alone-acks1-{n}").into_bytes();
        let got = produce(&mut alone, 1, &v);
        assert!(
            matches!(got, Ok((0, _))),
            "acks=1 produce to the cut-off leader: {got:?}\n{}",
            c.log_tails(25)
        );
        divergent.push(v);
    }
    let v = b"alone-acks-all".to_vec();
    let got = produce(&mut alone, -1, &v);
    eprintln!("acks=all to the cut-off leader: {got:?}");
    assert!(
        !matches!(got, Ok((0, _))),
        "the cut-off leader acknowledged an acks=all write it cannot replicate: {got:?}"
    );
    divergent.push(v);

    // 4. The majority elects a new leader at a higher epoch and acknowledges acks=all.
    let majority = (li + 1) % 3;
    let (new_leader, new_epoch, isr) = wait_state(
        &c,
        majority,
        "a new leader on the majority side",
        |l, e, _| l >= 0 && l != leader && e > epoch,
    );
    eprintln!("new leader {new_leader} at epoch {new_epoch}, ISR {isr:?}");
    let ni = c.index_of(new_leader);
    for n in 0..10 {
        acked.push(produce_acked(&c, ni, &format!("majority-{n}")));
    }

    // 5. The link is back: L follows the leader and rejoins the ISR.
    c.heal(li);
    let (current, _, _) = wait_state(&c, majority, "L back in the ISR", |l, _, isr| {
        l >= 0 && isr.len() == 3
    });
    wait_state(&c, li, "L knowing the leader", |l, e, _| {
        l == current && e >= new_epoch
    });
    let ci = c.index_of(current);
    for n in 0..5 {
        acked.push(produce_acked(&c, ci, &format!("healed-{n}")));
    }

    // 6. Every replica serves the same records: each acknowledged one exactly once at its
    // acknowledged offset, none that L wrote alone; the segment files are identical.
    let mut served = Vec::new();
    c.wait_for(WAIT, "every replica serving the same records", |c| {
        served = (0..3)
            .map(|i| {
                c.connect(i)
                    .map_err(|e| e.to_string())
                    .and_then(|mut client| read_all(&mut client, TOPIC))
                    .unwrap_or_default()
            })
            .collect();
        served[0].len() >= acked.len() && served.iter().all(|r| *r == served[0])
    });
    for (i, records) in served.iter().enumerate() {
        let name = format!("node {}", c.ids[i]);
        for (offset, value) in &acked {
            let at: Vec<i64> = records
                .iter()
                .filter(|(_, v)| v == value)
                .map(|(o, _)| *o)
                .collect();
            assert_eq!(
                at,
                vec![*offset],
                "{name}: acknowledged {:?} at offsets {at:?}, acknowledged at {offset}",
                String::from_utf8_lossy(value)
            );
        }
        let offsets: HashSet<i64> = records.iter().map(|(o, _)| *o).collect();
        assert_eq!(offsets.len(), records.len(), "{name}: an offset twice");
        for (_, v) in records {
            assert!(
                !divergent.contains(v),
                "{name} serves {:?}, written to L alone",
                String::from_utf8_lossy(v)
            );
        }
    }
    c.wait_for(WAIT, "identical segment files on all three nodes", |c| {
        let lead = c.segment_bytes(ci, TOPIC);
        (0..3).all(|i| c.segment_bytes(i, TOPIC) == lead)
    });
}
