//! The transaction coordinator in a real cluster of `sluice` processes on loopback: a
//! transactional id's coordinator is the leader of its `__transaction_state` partition
//! (replicated: transaction.state.log.replication.factor=3, min.isr=2); partition leaders
//! verify transactional produces with it over AddPartitionsToTxn (KIP-890; for transaction
//! version 2 they add the partition); its markers reach the other leaders as
//! WriteTxnMarkers. A commit prepared by a coordinator killed with -9 before its markers could
//! be written is completed by the partition's next leader once it has loaded it.

mod common;

use std::time::Duration;

use common::cluster::TestCluster;
use common::txn::*;
use common::{Client, create_topic_request};
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
use kafka_protocol::messages::*;

const WAIT: Duration = Duration::from_secs(90);

/// Creates `topic` through node `i` (retried while the cluster settles).
fn create(
    c: &TestCluster,
    i: usize,
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
    replicas: Option<&[i32]>,
) {
    let mut req = create_topic_request(topic, partitions, 3, configs);
    if let Some(r) = replicas {
        let mut a = CreatableReplicaAssignment::default();
        a.partition_index = 0;
        a.broker_ids = r.iter().map(|b| BrokerId(*b)).collect();
        req.topics[0].assignments = vec![a];
        req.topics[0].num_partitions = -1;
        req.topics[0].replication_factor = -1;
    }
    c.wait_for(WAIT, "the topic created", |c| {
        let resp: CreateTopicsResponse = c.connect(i).call(ApiKey::CreateTopics, 7, &req);
        let code = resp.topics[0].error_code;
        code == 0 || code == E::TopicAlreadyExists.code()
    });
}

/// Waits until every partition of `topic` has a leader with all `isr` in sync, as node `i`
/// sees it; the leaders by partition.
fn leaders_with_isr(
    c: &TestCluster,
    i: usize,
    topic: &str,
    partitions: i32,
    isr: usize,
) -> Vec<i32> {
    let mut leaders = Vec::new();
    c.wait_for(WAIT, "leaders with a full ISR", |c| {
        leaders = (0..partitions)
            .filter_map(|p| c.partition_state(i, topic, p))
            .filter(|(l, _, s)| *l >= 0 && s.len() == isr)
            .map(|(l, _, _)| l)
            .collect();
        leaders.len() == partitions as usize
    });
    leaders
}

/// The coordinator of `id` as node `i` answers it, once it has one.
fn coordinator(c: &TestCluster, i: usize, id: &str) -> i32 {
    let mut found = -1;
    c.wait_for(WAIT, "a transaction coordinator", |c| {
        let (code, node) = find_coordinator(&mut c.connect(i), id);
        found = node;
        code == 0
    });
    found
}

/// A client of the coordinator of `id`, once it serves `id`.
fn coordinator_client(c: &TestCluster, id: &str) -> (i32, Client) {
    let node = coordinator(c, 0, id);
    (node, c.connect(c.index_of(node)))
}

#[test]
fn markers_and_verification_cross_brokers() {
    let c = TestCluster::start(
        3,
        &[
            "transaction.state.log.replication.factor=3",
            "transaction.state.log.min.isr=2",
        ],
    );
    create(&c, 0, "cdata", 3, &[], None);
    create(&c, 0, "cother", 1, &[], None);
    let leaders = leaders_with_isr(&c, 0, "cdata", 3, 3);
    let other_leader = leaders_with_isr(&c, 0, "cother", 1, 3)[0];

    // A client of transaction version 0: AddPartitionsToTxn, then produces verified by each
    // partition's leader with the coordinator.
    let (coord, mut cc) = coordinator_client(&c, "ctx");
    let (pid, epoch) = init_retrying(&mut cc, "ctx", 60_000);
    let parts: Vec<(&str, i32)> = (0..3).map(|p| ("cdata", p)).collect();
    assert_eq!(
        add_partitions(&mut cc, "ctx", pid, epoch, &parts),
        vec![0, 0, 0]
    );
    for (p, leader) in leaders.iter().enumerate() {
        let mut lc = c.connect(c.index_of(*leader));
        let v = format!("v{p}");
        let (code, _) = produce(
            &mut lc,
            9,
            "ctx",
            "cdata",
            p as i32,
            txn_batch(&[&v], pid, epoch, 0),
        );
        assert_eq!(
            code, 0,
            "partition {p} led by {leader} (coordinator {coord})"
        );
    }
    // A partition never added is refused by its leader.
    let mut oc = c.connect(c.index_of(other_leader));
    let (code, _) = produce(
        &mut oc,
        9,
        "ctx",
        "cother",
        0,
        txn_batch(&["x"], pid, epoch, 0),
    );
    assert_eq!(code, E::InvalidTxnState.code());
    assert_eq!(end_txn(&mut cc, 3, "ctx", pid, epoch, true).error_code, 0);
    wait_state(&mut cc, "ctx", "CompleteCommit");
    for (p, leader) in leaders.iter().enumerate() {
        let seen = batches(&mut c.connect(c.index_of(*leader)), "cdata", p as i32);
        let v = format!("v{p}");
        assert_eq!(
            seen,
            vec![
                Seen::data(pid, epoch, &[v.as_str()]),
                Seen::marker(pid, epoch, true)
            ],
            "partition {p} led by {leader} (coordinator {coord})"
        );
    }

    // Transaction version 2: each leader adds its partition; the markers carry the bumped
    // epoch.
    let (coord2, mut cc2) = coordinator_client(&c, "ctx2");
    let (code, pid2, e2) = init(&mut cc2, "ctx2", 60_000, 5);
    assert_eq!(code, 0);
    for (p, leader) in leaders.iter().enumerate() {
        let mut lc = c.connect(c.index_of(*leader));
        let (code, _) = produce(
            &mut lc,
            12,
            "ctx2",
            "cdata",
            p as i32,
            txn_batch(&["w"], pid2, e2, 0),
        );
        assert_eq!(
            code, 0,
            "partition {p} led by {leader} (coordinator {coord2})"
        );
    }
    assert_eq!(
        describe(&mut cc2, "ctx2").topics[0].partitions,
        vec![0, 1, 2]
    );
    let resp = end_txn(&mut cc2, 5, "ctx2", pid2, e2, false);
    assert_eq!((resp.error_code, resp.producer_epoch), (0, e2 + 1));
    wait_state(&mut cc2, "ctx2", "CompleteAbort");
    for (p, leader) in leaders.iter().enumerate() {
        let seen = batches(&mut c.connect(c.index_of(*leader)), "cdata", p as i32);
        assert_eq!(
            seen.last(),
            Some(&Seen::marker(pid2, e2 + 1, false)),
            "partition {p}"
        );
    }
    // Other brokers are not the coordinator.
    for i in 0..3 {
        if c.nodes[i].id != coord2 {
            let d = describe(&mut c.connect(i), "ctx2");
            assert_eq!(
                d.error_code,
                E::NotCoordinator.code(),
                "node {}",
                c.nodes[i].id
            );
        }
    }
}

#[test]
fn a_new_coordinator_completes_a_prepared_commit() {
    // Three voters and a broker-only node 4, which the data partition needs in its ISR.
    let mut c = TestCluster::start_with_roles(
        &[
            "broker,controller",
            "broker,controller",
            "broker,controller",
            "broker",
        ],
        &[
            "transaction.state.log.replication.factor=3",
            "transaction.state.log.min.isr=2",
            "replica.lag.time.max.ms=2000",
        ],
    );
    // A transactional id whose __transaction_state replicas are the voters (node 4 is to go
    // down, and with two of its three replicas lost a partition would be below min.isr).
    coordinator(&c, 0, "probe");
    let mut picked = None;
    c.wait_for(WAIT, "__transaction_state placed", |c| {
        let Some(m) = c.metadata(0) else { return false };
        let Some(t) = m.topics.iter().find(|t| {
            t.name
                .as_ref()
                .is_some_and(|n| n.0.as_str() == "__transaction_state")
        }) else {
            return false;
        };
        picked = (0..200).map(|k| format!("held-txn-{k}")).find(|id| {
            let p = sluice::group::records::partition_for(id, t.partitions.len() as i32);
            t.partitions.iter().any(|x| {
                x.partition_index == p
                    && x.isr_nodes.len() == 3
                    && x.replica_nodes.iter().all(|r| r.0 != 4)
            })
        });
        picked.is_some()
    });
    let id = picked.as_deref().unwrap();
    let coord = coordinator(&c, 0, id);
    assert!((1..=3).contains(&coord));
    let others: Vec<i32> = (1..=3).filter(|n| *n != coord).collect();
    // The data partition: led by one of the other voters, node 4 required in sync.
    let replicas = [others[0], others[1], 4];
    create(
        &c,
        c.index_of(others[0]),
        "held",
        1,
        &[("min.insync.replicas", "3")],
        Some(&replicas),
    );
    let leader = leaders_with_isr(&c, c.index_of(others[0]), "held", 1, 3)[0];
    assert_ne!(leader, coord);

    let mut cc = c.connect(c.index_of(coord));
    let (pid, epoch) = init_retrying(&mut cc, id, 60_000);
    assert_eq!(
        add_partitions(&mut cc, id, pid, epoch, &[("held", 0)]),
        vec![0]
    );
    let mut lc = c.connect(c.index_of(leader));
    assert_eq!(
        produce(
            &mut lc,
            9,
            id,
            "held",
            0,
            txn_batch(&["kept"], pid, epoch, 0)
        )
        .0,
        0
    );

    // Without node 4 the marker cannot be written (min.insync.replicas=3): the commit stays
    // prepared on the coordinator, which is then killed.
    c.kill9(c.index_of(4));
    assert_eq!(end_txn(&mut cc, 3, id, pid, epoch, true).error_code, 0);
    assert_eq!(
        describe(&mut cc, id).transaction_state.as_str(),
        "PrepareCommit"
    );
    c.kill9(c.index_of(coord));

    // The partition's next leader loads it and resumes the markers.
    let survivor = c.index_of(others[0]);
    let mut next = coord;
    c.wait_for(WAIT, "another coordinator", |c| {
        let (code, node) = find_coordinator(&mut c.connect(survivor), id);
        next = node;
        code == 0 && node != coord
    });
    let mut nc = c.connect(c.index_of(next));
    let mut state = String::new();
    c.wait_for(WAIT, "the new coordinator to load the transaction", |_| {
        let d = describe(&mut nc, id);
        state = d.transaction_state.to_string();
        d.error_code == 0
    });
    assert_eq!(state, "PrepareCommit");

    // Node 4 back in sync: the markers go through and the commit completes.
    c.restart(c.index_of(4));
    let d = wait_state(&mut nc, id, "CompleteCommit");
    assert_eq!((d.producer_id.0, d.producer_epoch), (pid, epoch));
    let seen = batches(&mut c.connect(c.index_of(leader)), "held", 0);
    assert_eq!(seen[0], Seen::data(pid, epoch, &["kept"]));
    assert_eq!(
        seen.last(),
        Some(&Seen::marker(pid, epoch, true)),
        "{seen:?}"
    );
    // The next instance of the producer carries on from the new coordinator.
    let (pid2, epoch2) = init_retrying(&mut nc, id, 60_000);
    assert_eq!((pid2, epoch2), (pid, epoch + 1));
    c.restart(c.index_of(coord));
}
