//! Tests of the active controller's decisions on a metadata image built by applying them.

use super::*;
use crate::cluster::metadata::Endpoint;

const SESSION: i64 = 9_000;

struct Cluster {
    img: MetadataImage,
    ctl: ActiveController,
    now: i64,
}

impl Cluster {
    fn new(brokers: &[i32]) -> Cluster {
        let mut c = Cluster {
            img: MetadataImage::default(),
            ctl: ActiveController::new(ControlConfig {
                session_timeout_ms: SESSION,
                unclean_leader_election: false,
            }),
            now: 1_000,
        };
        for b in brokers {
            c.register(*b);
            c.heartbeat(*b, false, false);
        }
        c
    }

    fn commit(&mut self, records: Vec<MetadataRecord>) {
        for r in records {
            let next = self.img.offset + 1;
            self.img.apply(next, &r);
        }
    }

    fn register(&mut self, id: i32) {
        let reg = BrokerRegistration {
            broker_id: id,
            incarnation: Uuid::new_v4(),
            endpoints: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9000 + id as u16,
            }],
            rack: None,
        };
        let (records, ()) = self.ctl.register(&self.img, reg, None, self.now).unwrap();
        self.commit(records);
    }

    /// The registered broker epochs of `members`, as a leader that saw their fetches knows.
    fn epochs(&self, members: &[i32]) -> Vec<i64> {
        members
            .iter()
            .map(|r| self.img.brokers[r].epoch as i64)
            .collect()
    }

    /// AlterIsr from `p`'s leader for `members` with the given broker epochs.
    fn alter(&self, p: &PartitionRecord, members: &[i32], epochs: &[i64]) -> AlterIsr {
        AlterIsr {
            broker_id: p.leader,
            broker_epoch: self.img.brokers[&p.leader].epoch,
            topic_id: p.topic_id,
            partition: p.partition,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: members.to_vec(),
            new_isr_epochs: epochs.to_vec(),
        }
    }

    fn heartbeat(&mut self, id: i32, fence: bool, shutdown: bool) -> HeartbeatReply {
        let hb = Heartbeat {
            broker_id: id,
            broker_epoch: self.img.brokers[&id].epoch,
            metadata_offset: self.img.offset,
            want_fence: fence,
            want_shutdown: shutdown,
        };
        let (records, reply) = self.ctl.heartbeat(&self.img, &hb, self.now).unwrap();
        self.commit(records);
        reply
    }

    fn create(&mut self, name: &str, partitions: i32, rf: i16) -> Uuid {
        let t = CreateTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: rf,
            assignments: None,
            configs: BTreeMap::new(),
        };
        let (records, id) = self.ctl.create_topic(&self.img, &t, 0).unwrap();
        self.commit(records);
        id
    }

    fn part(&self, id: Uuid, p: i32) -> PartitionRecord {
        self.img.partition(&id, p).unwrap().clone()
    }
}

#[test]
fn brokers_unfence_after_catching_up() {
    let mut c = Cluster::new(&[]);
    c.register(1);
    assert!(!c.img.is_active(1));
    // A heartbeat from a broker behind the registration keeps it fenced.
    let hb = Heartbeat {
        broker_id: 1,
        broker_epoch: c.img.brokers[&1].epoch,
        metadata_offset: 0,
        want_fence: false,
        want_shutdown: false,
    };
    let (records, reply) = c.ctl.heartbeat(&c.img, &hb, c.now).unwrap();
    assert!(records.is_empty() && reply.is_fenced && !reply.is_caught_up);
    assert!(!c.heartbeat(1, false, false).is_fenced);
    assert!(c.img.is_active(1));
    // A stale epoch is refused.
    let stale = Heartbeat {
        broker_epoch: 999,
        ..hb
    };
    assert_eq!(
        c.ctl.heartbeat(&c.img, &stale, c.now).unwrap_err(),
        ControlError::StaleBrokerEpoch
    );
}

#[test]
fn topic_placement_over_active_brokers() {
    let mut c = Cluster::new(&[1, 2, 3]);
    let id = c.create("t", 6, 3);
    let mut leaders = BTreeMap::new();
    for i in 0..6 {
        let p = c.part(id, i);
        assert_eq!(p.isr, p.replicas);
        assert_eq!(p.leader, p.replicas[0]);
        *leaders.entry(p.leader).or_insert(0) += 1;
    }
    assert_eq!(leaders.values().copied().collect::<Vec<_>>(), vec![2, 2, 2]);
    let t = CreateTopic {
        name: "u".into(),
        num_partitions: 1,
        replication_factor: 4,
        assignments: None,
        configs: BTreeMap::new(),
    };
    assert!(matches!(
        c.ctl.create_topic(&c.img, &t, 0),
        Err(ControlError::Topic(TopicError::InvalidReplicationFactor(_)))
    ));
    let dup = CreateTopic {
        name: "t".into(),
        replication_factor: 1,
        ..t
    };
    assert!(matches!(
        c.ctl.create_topic(&c.img, &dup, 0),
        Err(ControlError::Topic(TopicError::AlreadyExists(_)))
    ));
    // Partitions added later continue the placement.
    let (records, ()) = c.ctl.create_partitions(&c.img, "t", 8, None, 0).unwrap();
    c.commit(records);
    assert_eq!(c.img.topic("t").unwrap().partitions.len(), 8);
    assert!(matches!(
        c.ctl.create_partitions(&c.img, "t", 8, None, 0),
        Err(ControlError::Topic(TopicError::InvalidPartitions(_)))
    ));
}

#[test]
fn session_expiry_fences_and_moves_leadership() {
    let mut c = Cluster::new(&[1, 2, 3]);
    let id = c.create("t", 3, 3);
    c.now += SESSION / 2;
    c.heartbeat(2, false, false);
    c.heartbeat(3, false, false);
    c.now += SESSION / 2 + 1;
    // Broker 1 went silent a full session ago; 2 and 3 heartbeated half a session ago.
    let records = c.ctl.tick(&c.img, c.now);
    c.commit(records);
    assert!(!c.img.is_active(1));
    for i in 0..3 {
        let p = c.part(id, i);
        assert_ne!(p.leader, 1, "{p:?}");
        assert!(!p.isr.contains(&1));
        assert!(p.leader_epoch <= 1);
    }
    // Broker 1 comes back as a new incarnation: it registers, catches up, is unfenced, but
    // only its leader adds it back to ISRs.
    c.register(1);
    c.heartbeat(1, false, false);
    assert!(c.img.is_active(1));
    assert!(!c.part(id, 0).isr.contains(&1));
}

#[test]
fn two_sessions_expiring_at_once_leave_the_leader_in_the_isr() {
    let mut c = Cluster::new(&[1, 2, 3]);
    let id = c.create("t", 1, 3);
    assert_eq!(c.part(id, 0).leader, 1);
    c.now += SESSION / 2;
    c.heartbeat(3, false, false);
    c.now += SESSION / 2 + 1;
    // 1 (the leader) and 2 expire in the same tick: 3 leads, alone in the ISR.
    let records = c.ctl.tick(&c.img, c.now);
    c.commit(records);
    let p = c.part(id, 0);
    assert_eq!((p.leader, &p.isr), (3, &vec![3]), "{p:?}");
}

#[test]
fn a_live_broker_id_cannot_register_twice() {
    let mut c = Cluster::new(&[1]);
    let reg = BrokerRegistration {
        broker_id: 1,
        incarnation: Uuid::new_v4(),
        endpoints: vec![],
        rack: None,
    };
    assert_eq!(
        c.ctl
            .register(&c.img, reg.clone(), None, c.now)
            .unwrap_err(),
        ControlError::DuplicateBrokerRegistration
    );
    c.now += SESSION;
    assert!(c.ctl.register(&c.img, reg, None, c.now).is_ok());
}

#[test]
fn controlled_shutdown_moves_leaders_first() {
    let mut c = Cluster::new(&[1, 2, 3]);
    let id = c.create("t", 3, 2);
    let reply = c.heartbeat(2, false, true);
    assert!(reply.should_shut_down, "leaderships moved in the same step");
    for i in 0..3 {
        assert_ne!(c.part(id, i).leader, 2);
    }
    // A partition whose only replica is the stopping broker goes offline (as in Kafka) and
    // keeps that broker in its ISR, so it leads again when it returns.
    let mut c = Cluster::new(&[1]);
    let id = c.create("solo", 1, 1);
    assert!(c.heartbeat(1, false, true).should_shut_down);
    let p = c.part(id, 0);
    assert_eq!((p.leader, p.isr), (-1, vec![1]));
    c.register(1);
    c.heartbeat(1, false, false);
    assert_eq!(c.part(id, 0).leader, 1);
}

#[test]
fn alter_isr_checks_epochs_and_eligibility() {
    let mut c = Cluster::new(&[1, 2, 3]);
    let id = c.create("t", 1, 3);
    let p = c.part(id, 0);
    let leader = p.leader;
    let req = AlterIsr {
        broker_id: leader,
        broker_epoch: c.img.brokers[&leader].epoch,
        topic_id: id,
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: vec![leader],
        new_isr_epochs: c.epochs(&[leader]),
    };
    let (records, after) = c.ctl.alter_isr(&c.img, &req).unwrap();
    c.commit(records);
    assert_eq!(after, c.part(id, 0));
    assert_eq!(after.isr, vec![leader]);
    // The same request again: the partition epoch moved on.
    assert_eq!(
        c.ctl.alter_isr(&c.img, &req).unwrap_err(),
        ControlError::InvalidUpdateVersion
    );
    // A fenced broker may not be added back.
    let other = p.replicas.iter().copied().find(|r| *r != leader).unwrap();
    c.heartbeat(other, true, false);
    let add = AlterIsr {
        partition_epoch: after.partition_epoch,
        new_isr: vec![leader, other],
        new_isr_epochs: c.epochs(&[leader, other]),
        ..req.clone()
    };
    assert_eq!(
        c.ctl.alter_isr(&c.img, &add).unwrap_err(),
        ControlError::IneligibleReplica
    );
    let not_leader = AlterIsr {
        broker_id: other,
        broker_epoch: c.img.brokers[&other].epoch,
        ..add
    };
    assert_eq!(
        c.ctl.alter_isr(&c.img, &not_leader).unwrap_err(),
        ControlError::NotLeader
    );
}

#[test]
fn reassignment_completes_when_the_new_replica_joins_the_isr() {
    let mut c = Cluster::new(&[1, 2, 3, 4]);
    let id = c.create("t", 1, 3);
    let p = c.part(id, 0);
    let newcomer = (1..=4).find(|b| !p.replicas.contains(b)).unwrap();
    let dropped = p.replicas[2];
    let mut target = p.replicas.clone();
    target[2] = newcomer;
    let (records, ()) = c.ctl.reassign(&c.img, "t", 0, Some(&target)).unwrap();
    c.commit(records);
    let p = c.part(id, 0);
    assert_eq!(p.adding, vec![newcomer]);
    assert_eq!(p.replicas.len(), 4);
    let mut isr = p.isr.clone();
    isr.push(newcomer);
    let req = AlterIsr {
        broker_id: p.leader,
        broker_epoch: c.img.brokers[&p.leader].epoch,
        topic_id: id,
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr_epochs: c.epochs(&isr),
        new_isr: isr,
    };
    let (records, after) = c.ctl.alter_isr(&c.img, &req).unwrap();
    c.commit(records);
    assert_eq!(after.replicas, target);
    assert!(!after.isr.contains(&dropped));
    assert!(after.adding.is_empty() && after.removing.is_empty());
    assert_eq!(c.part(id, 0), after);
}

#[test]
fn offline_partition_returns_with_its_last_isr_member() {
    let mut c = Cluster::new(&[1, 2]);
    let id = c.create("t", 1, 2);
    let p = c.part(id, 0);
    let (first, second) = (p.replicas[0], p.replicas[1]);
    c.heartbeat(second, true, false);
    c.heartbeat(first, true, false);
    let p = c.part(id, 0);
    assert_eq!((p.leader, p.isr.clone()), (-1, vec![first]));
    // The out-of-sync replica comes back: still offline (unclean election is off).
    c.heartbeat(second, false, false);
    assert_eq!(c.part(id, 0).leader, -1);
    let (records, ()) = c.ctl.elect(&c.img, "t", 0, true).unwrap();
    c.commit(records);
    let p = c.part(id, 0);
    assert_eq!((p.leader, p.isr.clone()), (second, vec![second]));
}

#[test]
fn the_next_expiry_is_the_first_unfenced_brokers_deadline() {
    let mut c = Cluster::new(&[1, 2, 3]);
    let start = c.now;
    assert_eq!(c.ctl.next_expiry(&c.img), Some(start + SESSION));
    c.now += 1_000;
    c.heartbeat(1, false, false);
    c.heartbeat(2, false, false);
    // 3 is still the first to run out.
    assert_eq!(c.ctl.next_expiry(&c.img), Some(start + SESSION));
    c.now = start + SESSION;
    let records = c.ctl.tick(&c.img, c.now);
    c.commit(records);
    assert!(!c.img.is_active(3));
    // A fenced broker has no deadline; the others' come next.
    assert_eq!(c.ctl.next_expiry(&c.img), Some(start + 1_000 + SESSION));
}

#[test]
fn isr_expansion_needs_the_current_unfenced_registration() {
    let mut c = Cluster::new(&[1, 2, 3]);
    let id = c.create("t", 1, 3);
    let p = c.part(id, 0);
    let leader = p.leader;
    let others: Vec<i32> = p
        .replicas
        .iter()
        .copied()
        .filter(|r| *r != leader)
        .collect();
    let (x, y) = (others[0], others[1]);
    // Shrink to the leader and y; y's epoch is not known to the leader yet (-1), which is
    // accepted for a member already in the ISR.
    let le = c.img.brokers[&leader].epoch as i64;
    let (records, _) = c
        .ctl
        .alter_isr(&c.img, &c.alter(&p, &[leader, y], &[le, -1]))
        .unwrap();
    c.commit(records);
    let p = c.part(id, 0);
    assert_eq!(p.isr, vec![leader, y]);
    let xe = c.img.brokers[&x].epoch as i64;
    let refused = |c: &Cluster, p: &PartitionRecord, epochs: &[i64]| {
        c.ctl
            .alter_isr(&c.img, &c.alter(p, &[leader, y, x], epochs))
            .unwrap_err()
    };
    // A follower that has no accepted registration fetches with -1: not added.
    assert_eq!(
        refused(&c, &p, &[le, -1, -1]),
        ControlError::IneligibleReplica
    );
    // An epoch that is not the registered one: another incarnation.
    assert_eq!(
        refused(&c, &p, &[le, -1, xe - 1]),
        ControlError::IneligibleReplica
    );
    assert_eq!(
        refused(&c, &p, &[le, -1, xe + 1]),
        ControlError::IneligibleReplica
    );
    // Length mismatch.
    assert!(matches!(
        refused(&c, &p, &[le, xe]),
        ControlError::InvalidRequest(_)
    ));
    // The current registration, unfenced: added.
    let (records, after) = c
        .ctl
        .alter_isr(&c.img, &c.alter(&p, &[leader, y, x], &[le, -1, xe]))
        .unwrap();
    assert_eq!(after.isr, vec![leader, y, x]);
    // Not committed: try the same with x fenced, then shutting down, then unregistered.
    let _ = records;
    c.heartbeat(x, true, false);
    let p = c.part(id, 0);
    assert_eq!(
        refused(&c, &p, &[le, -1, xe]),
        ControlError::IneligibleReplica
    );
    c.heartbeat(x, false, false);
    c.heartbeat(x, false, true);
    let p = c.part(id, 0);
    assert!(!c.img.is_active(x));
    assert_eq!(
        refused(&c, &p, &[le, -1, xe]),
        ControlError::IneligibleReplica
    );
    let (records, ()) = c.ctl.unregister(&c.img, x).unwrap();
    c.commit(records);
    let p = c.part(id, 0);
    assert!(!c.img.brokers.contains_key(&x));
    assert_eq!(
        refused(&c, &p, &[le, -1, xe]),
        ControlError::IneligibleReplica
    );
    // The pure check names each ineligible member and why.
    assert_eq!(
        ineligible_members(&c.img, &p.isr, &[leader, x, y], &[le, xe, 12345]),
        vec![(x, Ineligible::NotRegistered), (y, Ineligible::StaleEpoch)]
    );
}

#[test]
fn a_restarted_broker_naming_its_previous_incarnation_replaces_it_at_once() {
    let mut c = Cluster::new(&[1, 2, 3]);
    let id = c.create("t", 3, 3);
    let old = c.img.brokers[&3].clone();
    assert!((0..3).any(|i| c.part(id, i).leader == 3));
    let reg = |incarnation| BrokerRegistration {
        broker_id: 3,
        incarnation,
        endpoints: vec![],
        rack: None,
    };
    // The session of the old incarnation is alive: a new incarnation that cannot name it (or
    // names another) is refused, as Kafka refuses it.
    c.now += SESSION / 2;
    for previous in [None, Some(Uuid::new_v4())] {
        assert_eq!(
            c.ctl
                .register(&c.img, reg(Uuid::new_v4()), previous, c.now)
                .unwrap_err(),
            ControlError::DuplicateBrokerRegistration
        );
    }
    // Naming the registered incarnation proves it exited: replaced now, without waiting.
    let (records, ()) = c
        .ctl
        .register(
            &c.img,
            reg(Uuid::new_v4()),
            Some(old.registration.incarnation),
            c.now,
        )
        .unwrap();
    c.commit(records);
    let new = &c.img.brokers[&3];
    assert!(new.fenced && new.epoch > old.epoch);
    for i in 0..3 {
        let p = c.part(id, i);
        assert_ne!(p.leader, 3, "partition {i}: {p:?}");
        assert!(!p.isr.contains(&3), "partition {i}: {p:?}");
        // Neither incarnation may be added back while the new one is fenced.
        let mut isr = p.isr.clone();
        isr.push(3);
        let mut epochs = c.epochs(&p.isr);
        for e in [old.epoch as i64, new.epoch as i64] {
            epochs.push(e);
            assert_eq!(
                c.ctl
                    .alter_isr(&c.img, &c.alter(&p, &isr, &epochs))
                    .unwrap_err(),
                ControlError::IneligibleReplica
            );
            epochs.pop();
        }
    }
    // Once it has caught up it is unfenced, and its new epoch may join the ISRs.
    c.heartbeat(3, false, false);
    assert!(c.img.is_active(3));
    let p = c.part(id, 0);
    let mut isr = p.isr.clone();
    isr.push(3);
    let (records, after) = c
        .ctl
        .alter_isr(&c.img, &c.alter(&p, &isr, &c.epochs(&isr)))
        .unwrap();
    c.commit(records);
    assert!(after.isr.contains(&3));
}
