//! The active controller's decisions: from the current metadata image, a request (or the
//! passage of time) and the clock, the records to commit and the answer to give. Nothing here
//! does I/O; the quorum shell commits the records (all of one decision in one entry, so no
//! operation is ever half-applied) and answers after they are applied.
//!
//! The only state kept outside the image is soft: when each broker last heartbeated. A newly
//! elected controller starts every registered broker's session afresh, as Kafka does.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::super::controller::{MAX_PARTITIONS_PER_TOPIC, TopicError, validate_topic_name};
use super::super::metadata::image::apply_change;
use super::super::metadata::{
    BrokerRegistration, ConfigResource, MetadataImage, MetadataRecord, PartitionChange,
    PartitionRecord,
};
use super::super::topic_config;
use super::election::{self, ElectionRefused};
use super::new_partitions;
use super::placement::{self, Candidate};
use super::reassignment;

#[derive(Debug, Clone)]
pub struct ControlConfig {
    /// `broker.session.timeout.ms`
    pub session_timeout_ms: i64,
    /// `unclean.leader.election.enable` (broker default; topics may override)
    pub unclean_leader_election: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControlError {
    /// DUPLICATE_BROKER_REGISTRATION: another incarnation of the id is alive.
    DuplicateBrokerRegistration,
    /// STALE_BROKER_EPOCH: the broker epoch is not the registered one.
    StaleBrokerEpoch,
    UnknownTopicOrPartition,
    /// FENCED_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER for AlterPartition from an old leader.
    FencedLeaderEpoch,
    NotLeader,
    /// INVALID_UPDATE_VERSION: the partition epoch moved on since the leader read it.
    InvalidUpdateVersion,
    /// INELIGIBLE_REPLICA: the new ISR names a broker that is not registered, is fenced or
    /// shutting down, or whose broker epoch is not the registered one (a stale incarnation).
    IneligibleReplica,
    InvalidRequest(String),
    Topic(TopicError),
    Election(ElectionRefused),
    Reassign(reassignment::ReassignError),
    /// BROKER_ID_NOT_REGISTERED: UnregisterBroker of an id with no registration.
    BrokerIdNotRegistered(i32),
}

/// A broker's heartbeat (Kafka's BrokerHeartbeatRequest).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Heartbeat {
    pub broker_id: i32,
    pub broker_epoch: u64,
    /// The last metadata offset the broker has applied.
    pub metadata_offset: u64,
    pub want_fence: bool,
    pub want_shutdown: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatReply {
    pub is_fenced: bool,
    pub is_caught_up: bool,
    /// Controlled shutdown finished: the broker leads nothing and may exit.
    pub should_shut_down: bool,
}

/// An ISR change from a partition leader (Kafka's AlterPartition).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AlterIsr {
    pub broker_id: i32,
    pub broker_epoch: u64,
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
    /// The broker epoch of each member of `new_isr`, in the same order, as the leader knows it
    /// (a follower's from its fetches; -1: not known), as Kafka's `NewIsrWithEpochs`.
    pub new_isr_epochs: Vec<i64>,
}

/// Why a member of a proposed ISR may not be in it (Kafka's `IneligibleReplica` reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ineligible {
    NotRegistered,
    Fenced,
    ShuttingDown,
    /// The broker epoch the leader saw is not the registration's: another incarnation.
    StaleEpoch,
}

/// Which members of a proposed ISR may not be in it: every member must be registered,
/// unfenced and not shutting down, and its broker epoch must be the registration's. A member
/// already in the ISR whose epoch the leader does not know yet (-1) is not checked for its
/// epoch, as in Kafka; a member being added must name the epoch it fetched with, so a
/// follower whose new incarnation has no accepted registration (it fetches with -1) stays
/// out. `epochs`: the broker epoch of each of `new_isr`, in order.
pub fn ineligible_members(
    img: &MetadataImage,
    current_isr: &[i32],
    new_isr: &[i32],
    epochs: &[i64],
) -> Vec<(i32, Ineligible)> {
    let mut out = Vec::new();
    for (&r, &epoch) in new_isr.iter().zip(epochs) {
        let why = match img.brokers.get(&r) {
            None => Some(Ineligible::NotRegistered),
            Some(b) if b.shutting_down => Some(Ineligible::ShuttingDown),
            Some(b) if b.fenced => Some(Ineligible::Fenced),
            Some(_) if epoch == -1 && current_isr.contains(&r) => None,
            Some(b) if epoch != b.epoch as i64 => Some(Ineligible::StaleEpoch),
            Some(_) => None,
        };
        if let Some(w) = why {
            out.push((r, w));
        }
    }
    out
}

/// What a topic creation asks for, defaults resolved.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateTopic {
    pub name: String,
    pub num_partitions: i32,
    pub replication_factor: i16,
    /// Explicit replica lists (partition i = assignments[i]) instead of placement.
    pub assignments: Option<Vec<Vec<i32>>>,
    pub configs: BTreeMap<String, String>,
}

pub struct ActiveController {
    cfg: ControlConfig,
    last_contact: HashMap<i32, i64>,
}

type Decision<T> = Result<(Vec<MetadataRecord>, T), ControlError>;

impl ActiveController {
    pub fn new(cfg: ControlConfig) -> ActiveController {
        ActiveController {
            cfg,
            last_contact: HashMap::new(),
        }
    }

    fn session_alive(&self, broker: i32, now: i64) -> bool {
        self.last_contact
            .get(&broker)
            .is_some_and(|t| now - t < self.cfg.session_timeout_ms)
    }

    fn unclean_allowed(&self, img: &MetadataImage, topic: &str) -> bool {
        match img.config(
            &ConfigResource::Topic(topic.to_string()),
            "unclean.leader.election.enable",
        ) {
            Some(v) => v.eq_ignore_ascii_case("true"),
            None => self.cfg.unclean_leader_election,
        }
    }

    /// A broker (re)registers. A new incarnation of a live broker id is refused until the
    /// old one's session expires (one that shut down cleanly may return at once), as Kafka
    /// refuses it (DUPLICATE_BROKER_REGISTRATION), unless the new incarnation proves that
    /// the old one is gone: `previous_incarnation` is the incarnation that last ran from the
    /// new one's data directory, which its lock lets only one process use at a time, so
    /// the registered incarnation, if it is that one, has exited. The old incarnation's
    /// leaderships move away and it leaves the ISRs; the new one starts fenced.
    pub fn register(
        &mut self,
        img: &MetadataImage,
        reg: BrokerRegistration,
        previous_incarnation: Option<Uuid>,
        now: i64,
    ) -> Decision<()> {
        if let Some(old) = img.brokers.get(&reg.broker_id)
            && old.registration.incarnation != reg.incarnation
            && old.is_active()
            && self.session_alive(reg.broker_id, now)
            && previous_incarnation != Some(old.registration.incarnation)
        {
            return Err(ControlError::DuplicateBrokerRegistration);
        }
        let id = reg.broker_id;
        let mut records = Vec::new();
        if img.brokers.contains_key(&id) {
            records.extend(self.elections_after(img, id, false));
        }
        records.push(MetadataRecord::RegisterBroker(reg));
        self.last_contact.insert(id, now);
        Ok((records, ()))
    }

    /// A heartbeat: renews the session, unfences a broker that has caught up with the
    /// metadata, and runs controlled shutdown.
    pub fn heartbeat(
        &mut self,
        img: &MetadataImage,
        hb: &Heartbeat,
        now: i64,
    ) -> Decision<HeartbeatReply> {
        let Some(b) = img.brokers.get(&hb.broker_id) else {
            return Err(ControlError::StaleBrokerEpoch);
        };
        if b.epoch != hb.broker_epoch {
            return Err(ControlError::StaleBrokerEpoch);
        }
        self.last_contact.insert(hb.broker_id, now);
        let caught_up = hb.metadata_offset >= b.epoch;
        let (id, epoch) = (hb.broker_id, b.epoch);
        let mut records = Vec::new();
        let mut fenced = b.fenced;
        if hb.want_shutdown && !b.shutting_down {
            records.extend(self.elections_after(img, id, false));
            records.push(MetadataRecord::BrokerShuttingDown {
                broker_id: id,
                epoch,
            });
        } else if b.fenced && caught_up && !hb.want_fence && !b.shutting_down {
            records.push(MetadataRecord::UnfenceBroker {
                broker_id: id,
                epoch,
            });
            fenced = false;
            records.extend(self.elections_after(img, id, true));
        } else if !b.fenced && hb.want_fence {
            records.push(MetadataRecord::FenceBroker {
                broker_id: id,
                epoch,
            });
            fenced = true;
            records.extend(self.elections_after(img, id, false));
        }
        let shutting_down = hb.want_shutdown || b.shutting_down;
        let should_shut_down = shutting_down && {
            let mut after = img.clone();
            for r in &records {
                after.apply(after.offset, r);
            }
            !leads_anything(&after, id)
        };
        Ok((
            records,
            HeartbeatReply {
                is_fenced: fenced || shutting_down,
                is_caught_up: caught_up,
                should_shut_down,
            },
        ))
    }

    /// UnregisterBroker, as Kafka's controller does it: the broker's leaderships move away as
    /// when it is fenced, it leaves the ISRs, and its registration goes (alive or not; a live
    /// broker registers again).
    pub fn unregister(&mut self, img: &MetadataImage, id: i32) -> Decision<()> {
        let Some(b) = img.brokers.get(&id) else {
            return Err(ControlError::BrokerIdNotRegistered(id));
        };
        let mut records = self.elections_after(img, id, false);
        records.push(MetadataRecord::UnregisterBroker {
            broker_id: id,
            epoch: b.epoch,
        });
        self.last_contact.remove(&id);
        Ok((records, ()))
    }

    /// Time passed: brokers whose session expired are fenced and their leaderships move. Each
    /// broker's changes are decided on the image as the previous one's leave it, so that two
    /// brokers expiring at once make consistent changes.
    pub fn tick(&mut self, img: &MetadataImage, now: i64) -> Vec<MetadataRecord> {
        let expired: Vec<(i32, u64)> = img
            .brokers
            .iter()
            .filter(|(_, b)| !b.fenced)
            .filter(|(id, _)| {
                // A broker this controller has not heard from yet gets a full session from now.
                let last = *self.last_contact.entry(**id).or_insert(now);
                now - last >= self.cfg.session_timeout_ms
            })
            .map(|(id, b)| (*id, b.epoch))
            .collect();
        let mut records = Vec::new();
        let mut view: Option<MetadataImage> = None;
        for (id, epoch) in expired {
            let current = view.as_ref().unwrap_or(img);
            let mut these = self.elections_after(current, id, false);
            these.push(MetadataRecord::FenceBroker {
                broker_id: id,
                epoch,
            });
            let v = view.get_or_insert_with(|| img.clone());
            for r in &these {
                v.apply(v.offset, r);
            }
            records.extend(these);
        }
        records
    }

    /// When the first unfenced broker's session runs out (ms since the epoch), if this
    /// controller has heard from any: the timer wakes then, so a dead broker is fenced at its
    /// deadline rather than at the next coarse tick.
    pub fn next_expiry(&self, img: &MetadataImage) -> Option<i64> {
        img.brokers
            .iter()
            .filter(|(_, b)| !b.fenced)
            .filter_map(|(id, _)| self.last_contact.get(id))
            .map(|t| t + self.cfg.session_timeout_ms)
            .min()
    }

    /// Partition changes when `broker` becomes active (`true`) or inactive.
    fn elections_after(
        &self,
        img: &MetadataImage,
        broker: i32,
        becomes_active: bool,
    ) -> Vec<MetadataRecord> {
        let active = |r: i32| {
            if r == broker {
                becomes_active
            } else {
                img.is_active(r)
            }
        };
        let mut out = Vec::new();
        let mut topics: Vec<_> = img.topics.values().collect();
        topics.sort_by_key(|t| t.name.clone());
        for t in topics {
            let unclean = self.unclean_allowed(img, &t.name);
            for p in &t.partitions {
                let change = if becomes_active {
                    election::on_broker_active(p, &active, unclean)
                } else {
                    election::on_broker_inactive(p, broker, &active, unclean)
                };
                if let Some(c) = change {
                    out.push(MetadataRecord::PartitionChange(c));
                }
            }
        }
        out
    }

    /// Creates a topic: validates, places replicas over the active brokers, and returns the
    /// topic, partition and config records with the new topic id.
    pub fn create_topic(
        &self,
        img: &MetadataImage,
        t: &CreateTopic,
        start: usize,
    ) -> Decision<Uuid> {
        validate_topic_name(&t.name)
            .map_err(|m| ControlError::Topic(TopicError::InvalidTopic(m)))?;
        if img.topic(&t.name).is_some() {
            return Err(ControlError::Topic(TopicError::AlreadyExists(format!(
                "Topic '{}' already exists.",
                t.name
            ))));
        }
        let key = t.name.replace('.', "_");
        if let Some(other) = img.topic_ids.keys().find(|n| n.replace('.', "_") == key) {
            return Err(ControlError::Topic(TopicError::InvalidTopic(format!(
                "Topic '{}' collides with existing topic: {other}",
                t.name
            ))));
        }
        for (k, v) in &t.configs {
            topic_config::validate(k, v)
                .map_err(|m| ControlError::Topic(TopicError::InvalidConfig(m)))?;
        }
        let assignments = match &t.assignments {
            Some(a) => {
                self.validate_assignments(img, a)?;
                a.clone()
            }
            None => self.place(img, 0, t.num_partitions, t.replication_factor, start)?,
        };
        let id = new_topic_id(img);
        let mut records = vec![MetadataRecord::Topic {
            name: t.name.clone(),
            id,
        }];
        for (k, v) in &t.configs {
            records.push(MetadataRecord::Config {
                resource: ConfigResource::Topic(t.name.clone()),
                name: k.clone(),
                value: Some(v.clone()),
            });
        }
        records.extend(partition_records(img, id, 0, assignments));
        Ok((records, id))
    }

    fn place(
        &self,
        img: &MetadataImage,
        first: i32,
        count: i32,
        rf: i16,
        start: usize,
    ) -> Result<Vec<Vec<i32>>, ControlError> {
        if count < 1 {
            return Err(ControlError::Topic(TopicError::InvalidPartitions(
                "Number of partitions must be larger than 0.".into(),
            )));
        }
        if first.saturating_add(count) > MAX_PARTITIONS_PER_TOPIC {
            return Err(ControlError::Topic(TopicError::InvalidPartitions(format!(
                "Number of partitions {} exceeds the maximum of {MAX_PARTITIONS_PER_TOPIC} per topic.",
                first.saturating_add(count)
            ))));
        }
        let candidates: Vec<Candidate> = img
            .active_brokers()
            .into_iter()
            .map(|b| Candidate {
                id: b.registration.broker_id,
                rack: b.registration.rack.clone(),
            })
            .collect();
        placement::place(&candidates, first, count, rf.max(0) as usize, start)
            .map_err(|e| ControlError::Topic(TopicError::InvalidReplicationFactor(e.to_string())))
    }

    fn validate_assignments(
        &self,
        img: &MetadataImage,
        a: &[Vec<i32>],
    ) -> Result<(), ControlError> {
        let brokers: Vec<i32> = img.brokers.keys().copied().collect();
        let rf = a.first().map_or(0, Vec::len);
        for r in a {
            new_partitions::check_manual_assignment(r, rf, &brokers)
                .map_err(ControlError::Topic)?;
        }
        Ok(())
    }

    /// Deletes a topic: its records and configs go with one RemoveTopic.
    pub fn delete_topic(&self, img: &MetadataImage, name: &str) -> Decision<Uuid> {
        let t = img
            .topic(name)
            .ok_or(ControlError::Topic(TopicError::UnknownTopic))?;
        Ok((vec![MetadataRecord::RemoveTopic { id: t.id }], t.id))
    }

    /// Adds partitions to a topic, placed like a new topic's, continuing its sequence.
    pub fn create_partitions(
        &self,
        img: &MetadataImage,
        name: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        start: usize,
    ) -> Decision<()> {
        let t = img
            .topic(name)
            .ok_or(ControlError::Topic(TopicError::UnknownTopic))?;
        let have = t.partitions.len() as i32;
        let rf = t.partitions.first().map_or(1, |p| p.replicas.len());
        let brokers: Vec<i32> = img.brokers.keys().copied().collect();
        new_partitions::plan_increase(name, have as usize, rf, count, assignments, &brokers)
            .map_err(ControlError::Topic)?;
        let new = match assignments {
            Some(a) => a.to_vec(),
            None => self.place(img, have, count - have, rf as i16, start)?,
        };
        Ok((partition_records(img, t.id, have, new).collect(), ()))
    }

    /// An ISR change from a partition's leader, checked as Kafka checks AlterPartition.
    /// Returns the partition as it will be once the records apply.
    pub fn alter_isr(&self, img: &MetadataImage, req: &AlterIsr) -> Decision<PartitionRecord> {
        match img.brokers.get(&req.broker_id) {
            Some(b) if b.epoch == req.broker_epoch => {}
            _ => return Err(ControlError::StaleBrokerEpoch),
        }
        let p = img
            .partition(&req.topic_id, req.partition)
            .ok_or(ControlError::UnknownTopicOrPartition)?;
        if p.leader != req.broker_id {
            return Err(ControlError::NotLeader);
        }
        if req.leader_epoch != p.leader_epoch {
            return Err(ControlError::FencedLeaderEpoch);
        }
        if req.partition_epoch != p.partition_epoch {
            return Err(ControlError::InvalidUpdateVersion);
        }
        if !req.new_isr.contains(&p.leader) || req.new_isr.iter().any(|r| !p.replicas.contains(r)) {
            return Err(ControlError::InvalidRequest(format!(
                "ISR {:?} must contain the leader {} and only replicas of {:?}",
                req.new_isr, p.leader, p.replicas
            )));
        }
        if req.new_isr_epochs.len() != req.new_isr.len() {
            return Err(ControlError::InvalidRequest(format!(
                "{} broker epochs for the ISR {:?}",
                req.new_isr_epochs.len(),
                req.new_isr
            )));
        }
        if !ineligible_members(img, &p.isr, &req.new_isr, &req.new_isr_epochs).is_empty() {
            return Err(ControlError::IneligibleReplica);
        }
        let mut change = PartitionChange::new(p.topic_id, p.partition);
        change.isr = Some(req.new_isr.clone());
        let mut after = p.clone();
        apply_change(&mut after, &change);
        let mut records = vec![MetadataRecord::PartitionChange(change)];
        if let Some(done) = reassignment::complete(&after, &|r| img.is_active(r)) {
            apply_change(&mut after, &done);
            records.push(MetadataRecord::PartitionChange(done));
        }
        Ok((records, after))
    }

    /// ElectLeaders for one partition: preferred (`unclean` false) or unclean.
    pub fn elect(
        &self,
        img: &MetadataImage,
        topic: &str,
        partition: i32,
        unclean: bool,
    ) -> Decision<()> {
        let p = lookup(img, topic, partition)?;
        let active = |r: i32| img.is_active(r);
        let c = if unclean {
            election::elect_unclean(p, &active)
        } else {
            election::elect_preferred(p, &active)
        }
        .map_err(ControlError::Election)?;
        Ok((vec![MetadataRecord::PartitionChange(c)], ()))
    }

    /// Preferred elections for every partition whose preferred replica could lead but does not
    /// (`auto.leader.rebalance.enable`).
    pub fn rebalance_leaders(&self, img: &MetadataImage) -> Vec<MetadataRecord> {
        let active = |r: i32| img.is_active(r);
        let mut out = Vec::new();
        for t in img.topics.values() {
            for p in &t.partitions {
                if let Ok(c) = election::elect_preferred(p, &active) {
                    out.push(MetadataRecord::PartitionChange(c));
                }
            }
        }
        out
    }

    /// AlterPartitionReassignments for one partition: `None` cancels.
    pub fn reassign(
        &self,
        img: &MetadataImage,
        topic: &str,
        partition: i32,
        target: Option<&[i32]>,
    ) -> Decision<()> {
        let p = lookup(img, topic, partition)?;
        let active = |r: i32| img.is_active(r);
        let change = match target {
            Some(target) => reassignment::start(p, target, &|b| img.brokers.contains_key(&b))
                .map_err(ControlError::Reassign)?,
            None => Some(reassignment::cancel(p, &active).map_err(ControlError::Reassign)?),
        };
        let mut records = Vec::new();
        if let Some(c) = change {
            let mut after = p.clone();
            apply_change(&mut after, &c);
            records.push(MetadataRecord::PartitionChange(c));
            // Nothing to add (a pure shrink): finish at once.
            if let Some(done) = reassignment::complete(&after, &active) {
                records.push(MetadataRecord::PartitionChange(done));
            }
        }
        Ok((records, ()))
    }
}

fn lookup<'a>(
    img: &'a MetadataImage,
    topic: &str,
    partition: i32,
) -> Result<&'a PartitionRecord, ControlError> {
    img.topic(topic)
        .and_then(|t| {
            usize::try_from(partition)
                .ok()
                .and_then(|i| t.partitions.get(i))
        })
        .ok_or(ControlError::UnknownTopicOrPartition)
}

fn leads_anything(img: &MetadataImage, broker: i32) -> bool {
    img.topics
        .values()
        .any(|t| t.partitions.iter().any(|p| p.leader == broker))
}

/// New partitions: every replica in the ISR, the first active one leading.
fn partition_records<'a>(
    img: &'a MetadataImage,
    topic_id: Uuid,
    first: i32,
    assignments: Vec<Vec<i32>>,
) -> impl Iterator<Item = MetadataRecord> + 'a {
    assignments
        .into_iter()
        .enumerate()
        .map(move |(i, replicas)| {
            MetadataRecord::Partition(PartitionRecord {
                topic_id,
                partition: first + i as i32,
                leader: replicas
                    .iter()
                    .copied()
                    .find(|r| img.is_active(*r))
                    .unwrap_or(-1),
                isr: replicas.clone(),
                replicas,
                adding: Vec::new(),
                removing: Vec::new(),
                leader_epoch: 0,
                partition_epoch: 0,
            })
        })
}

/// A fresh topic id: not nil, not one whose base64 starts with '-' (Kafka reserves both), not
/// in use.
fn new_topic_id(img: &MetadataImage) -> Uuid {
    loop {
        let id = Uuid::new_v4();
        if !id.is_nil() && id.as_bytes()[0] & 0xfc != 0xf8 && !img.topics.contains_key(&id) {
            return id;
        }
    }
}

#[cfg(test)]
#[path = "active_tests.rs"]
mod tests;
