//! The metadata image: what applying the metadata log up to some index gives. Every node holds
//! one; readers take an `Arc` of the current image and never lock it (a new image is published
//! after each applied batch, see `cluster::metadata::Published`).
//!
//! Applying is deterministic and never fails: a record that no longer fits (a change to a
//! topic deleted meanwhile, a fence of an old broker epoch) is skipped, so every node that
//! applies the same log holds the same image. Topics are behind their own `Arc`, so a new image
//! copies pointers, and only the topics a batch touches are copied.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::security::acl::AclBinding;
use crate::security::acl::changes::{WireAcl, binding_from_wire};
use crate::security::sasl::scram::{ScramCredential, ScramMechanism};
use crate::security::scram_store::CredentialMap;
use uuid::Uuid;

use super::records::{
    BrokerRegistration, ConfigResource, MetadataRecord, PartitionChange, PartitionRecord,
};

/// A registered broker as the image knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerState {
    pub registration: BrokerRegistration,
    /// The log index of the registration record.
    pub epoch: u64,
    pub fenced: bool,
    pub shutting_down: bool,
}

impl BrokerState {
    /// May lead partitions and join ISRs.
    pub fn is_active(&self) -> bool {
        !self.fenced && !self.shutting_down
    }

    pub fn rack(&self) -> Option<&str> {
        self.registration.rack.as_deref()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicImage {
    pub name: Arc<str>,
    pub id: Uuid,
    /// Indexed by partition number (partitions are 0..n).
    pub partitions: Vec<PartitionRecord>,
}

#[derive(Debug, Clone, Default)]
pub struct MetadataImage {
    /// Index of the last applied record (0: none).
    pub offset: u64,
    pub cluster_id: Option<String>,
    pub brokers: BTreeMap<i32, BrokerState>,
    pub topics: HashMap<Uuid, Arc<TopicImage>>,
    pub topic_ids: HashMap<Arc<str>, Uuid>,
    pub configs: BTreeMap<ConfigResource, BTreeMap<String, String>>,
    /// The first producer id not yet handed out.
    pub next_producer_id: i64,
    /// The users' SCRAM credentials.
    pub scram: CredentialMap,
    /// The ACLs, by record id.
    pub acls: BTreeMap<Uuid, AclBinding>,
}

impl MetadataImage {
    pub fn topic(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.topic_ids.get(name).and_then(|id| self.topics.get(id))
    }

    pub fn partition(&self, topic_id: &Uuid, partition: i32) -> Option<&PartitionRecord> {
        let t = self.topics.get(topic_id)?;
        usize::try_from(partition)
            .ok()
            .and_then(|i| t.partitions.get(i))
    }

    /// True if `broker` is registered, unfenced and not shutting down.
    pub fn is_active(&self, broker: i32) -> bool {
        self.brokers
            .get(&broker)
            .is_some_and(BrokerState::is_active)
    }

    /// Unfenced brokers sorted by id.
    pub fn active_brokers(&self) -> Vec<&BrokerState> {
        self.brokers.values().filter(|b| b.is_active()).collect()
    }

    /// The finalized feature levels (above 0): a new cluster's, with those UpdateFeatures set.
    pub fn feature_levels(&self) -> BTreeMap<String, i16> {
        let set = self
            .configs
            .get(&ConfigResource::Features)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.parse().ok()?)))
                    .collect()
            })
            .unwrap_or_default();
        crate::cluster::features::finalized(&set)
    }

    pub fn config(&self, resource: &ConfigResource, name: &str) -> Option<&str> {
        self.configs
            .get(resource)
            .and_then(|m| m.get(name))
            .map(String::as_str)
    }

    /// Applies one record found at log index `index`.
    pub fn apply(&mut self, index: u64, record: &MetadataRecord) {
        self.offset = index;
        match record {
            MetadataRecord::ClusterId(id) => {
                // The first one wins: a cluster's id never changes.
                if self.cluster_id.is_none() {
                    self.cluster_id = Some(id.clone());
                }
            }
            MetadataRecord::RegisterBroker(reg) => {
                self.brokers.insert(
                    reg.broker_id,
                    BrokerState {
                        registration: reg.clone(),
                        epoch: index,
                        fenced: true,
                        shutting_down: false,
                    },
                );
            }
            MetadataRecord::UnfenceBroker { broker_id, epoch } => {
                if let Some(b) = self.broker_at(*broker_id, *epoch) {
                    b.fenced = false;
                }
            }
            MetadataRecord::FenceBroker { broker_id, epoch } => {
                if let Some(b) = self.broker_at(*broker_id, *epoch) {
                    b.fenced = true;
                }
            }
            MetadataRecord::BrokerShuttingDown { broker_id, epoch } => {
                if let Some(b) = self.broker_at(*broker_id, *epoch) {
                    b.shutting_down = true;
                }
            }
            MetadataRecord::UnregisterBroker { broker_id, epoch } => {
                if self.broker_at(*broker_id, *epoch).is_some() {
                    self.brokers.remove(broker_id);
                }
            }
            MetadataRecord::Topic { name, id } => {
                if self.topics.contains_key(id) || self.topic_ids.contains_key(name.as_str()) {
                    return;
                }
                let name: Arc<str> = Arc::from(name.as_str());
                self.topic_ids.insert(name.clone(), *id);
                self.topics.insert(
                    *id,
                    Arc::new(TopicImage {
                        name,
                        id: *id,
                        partitions: Vec::new(),
                    }),
                );
            }
            MetadataRecord::Partition(p) => {
                let Some(t) = self.topics.get_mut(&p.topic_id) else {
                    return;
                };
                let t = Arc::make_mut(t);
                let i = p.partition as usize;
                if p.partition < 0 || i > t.partitions.len() {
                    return;
                }
                if i == t.partitions.len() {
                    t.partitions.push(p.clone());
                } else {
                    t.partitions[i] = p.clone();
                }
            }
            MetadataRecord::PartitionChange(c) => {
                let Some(t) = self.topics.get_mut(&c.topic_id) else {
                    return;
                };
                let t = Arc::make_mut(t);
                let Some(p) = usize::try_from(c.partition)
                    .ok()
                    .and_then(|i| t.partitions.get_mut(i))
                else {
                    return;
                };
                apply_change(p, c);
            }
            MetadataRecord::RemoveTopic { id } => {
                if let Some(t) = self.topics.remove(id) {
                    self.topic_ids.remove(&t.name);
                    self.configs
                        .remove(&ConfigResource::Topic(t.name.to_string()));
                }
            }
            MetadataRecord::Config {
                resource,
                name,
                value,
            } => match value {
                Some(v) => {
                    self.configs
                        .entry(resource.clone())
                        .or_default()
                        .insert(name.clone(), v.clone());
                }
                None => {
                    if let Some(m) = self.configs.get_mut(resource) {
                        m.remove(name);
                        if m.is_empty() {
                            self.configs.remove(resource);
                        }
                    }
                }
            },
            MetadataRecord::ProducerIds {
                next_producer_id, ..
            } => {
                self.next_producer_id = self.next_producer_id.max(*next_producer_id);
            }
            MetadataRecord::UserScramCredential {
                name,
                mechanism,
                salt,
                stored_key,
                server_key,
                iterations,
            } => {
                if let Some(m) = ScramMechanism::from_code(*mechanism) {
                    let c = ScramCredential {
                        salt: salt.clone(),
                        stored_key: stored_key.clone(),
                        server_key: server_key.clone(),
                        iterations: *iterations,
                    };
                    self.scram.insert((name.clone(), m), c);
                }
            }
            MetadataRecord::RemoveUserScramCredential { name, mechanism } => {
                if let Some(m) = ScramMechanism::from_code(*mechanism) {
                    self.scram.remove(&(name.clone(), m));
                }
            }
            MetadataRecord::AccessControlEntry {
                id,
                resource_type,
                resource_name,
                pattern_type,
                principal,
                host,
                operation,
                permission_type,
            } => {
                let wire = (
                    *resource_type,
                    resource_name.clone(),
                    *pattern_type,
                    principal.clone(),
                    host.clone(),
                    *operation,
                    *permission_type,
                );
                if let Ok(b) = binding_from_wire(wire) {
                    self.acls.insert(*id, b);
                }
            }
            MetadataRecord::RemoveAccessControlEntry { id } => {
                self.acls.remove(id);
            }
        }
    }

    /// The whole image as bytes [`MetadataImage::from_snapshot`] reads back (the metadata
    /// quorum's snapshot).
    pub fn to_snapshot(&self) -> Vec<u8> {
        let mut topics: Vec<(String, Uuid, Vec<PartitionRecord>)> = self
            .topics
            .values()
            .map(|t| (t.name.to_string(), t.id, t.partitions.clone()))
            .collect();
        topics.sort_by(|a, b| a.0.cmp(&b.0));
        let snap = Snapshot {
            offset: self.offset,
            cluster_id: self.cluster_id.clone(),
            brokers: self.brokers.values().cloned().collect(),
            topics,
            configs: self
                .configs
                .iter()
                .map(|(r, m)| (r.clone(), m.clone().into_iter().collect()))
                .collect(),
            next_producer_id: self.next_producer_id,
        };
        let mut bytes = postcard::to_stdvec(&snap).expect("images always encode");
        // The credentials follow the original snapshot fields, so a snapshot written before
        // they existed still reads (it simply ends there).
        let scram: Vec<ScramEntry> = self
            .scram
            .iter()
            .map(|((user, m), c)| ScramEntry {
                user: user.clone(),
                mechanism: m.code(),
                salt: c.salt.clone(),
                stored_key: c.stored_key.clone(),
                server_key: c.server_key.clone(),
                iterations: c.iterations,
            })
            .collect();
        bytes.extend(postcard::to_stdvec(&scram).expect("images always encode"));
        // Then the ACLs, which a snapshot written before them lacks the same way.
        let acls: Vec<(Uuid, WireAcl<String>)> = self
            .acls
            .iter()
            .map(|(id, b)| (*id, crate::security::acl::changes::binding_to_wire(b)))
            .collect();
        bytes.extend(postcard::to_stdvec(&acls).expect("images always encode"));
        bytes
    }

    pub fn from_snapshot(bytes: &[u8]) -> anyhow::Result<MetadataImage> {
        let (snap, rest): (Snapshot, &[u8]) = postcard::take_from_bytes(bytes)
            .map_err(|e| anyhow::anyhow!("bad metadata snapshot: {e}"))?;
        let (scram, rest): (Vec<ScramEntry>, &[u8]) = if rest.is_empty() {
            (Vec::new(), rest)
        } else {
            postcard::take_from_bytes(rest)
                .map_err(|e| anyhow::anyhow!("bad metadata snapshot (SCRAM credentials): {e}"))?
        };
        let acls: Vec<(Uuid, WireAcl<String>)> = if rest.is_empty() {
            Vec::new()
        } else {
            postcard::from_bytes(rest)
                .map_err(|e| anyhow::anyhow!("bad metadata snapshot (ACLs): {e}"))?
        };
        let mut img = MetadataImage {
            offset: snap.offset,
            cluster_id: snap.cluster_id,
            next_producer_id: snap.next_producer_id,
            ..MetadataImage::default()
        };
        for b in snap.brokers {
            img.brokers.insert(b.registration.broker_id, b);
        }
        for (name, id, partitions) in snap.topics {
            let name: Arc<str> = Arc::from(name.as_str());
            img.topic_ids.insert(name.clone(), id);
            img.topics.insert(
                id,
                Arc::new(TopicImage {
                    name,
                    id,
                    partitions,
                }),
            );
        }
        for (r, m) in snap.configs {
            img.configs.insert(r, m.into_iter().collect());
        }
        for e in scram {
            if let Some(m) = ScramMechanism::from_code(e.mechanism) {
                let c = ScramCredential {
                    salt: e.salt,
                    stored_key: e.stored_key,
                    server_key: e.server_key,
                    iterations: e.iterations,
                };
                img.scram.insert((e.user, m), c);
            }
        }
        for (id, wire) in acls {
            if let Ok(b) = binding_from_wire(wire) {
                img.acls.insert(id, b);
            }
        }
        Ok(img)
    }

    fn broker_at(&mut self, id: i32, epoch: u64) -> Option<&mut BrokerState> {
        self.brokers.get_mut(&id).filter(|b| b.epoch == epoch)
    }
}

/// The image as a metadata snapshot holds it.
#[derive(Serialize, Deserialize)]
struct Snapshot {
    offset: u64,
    cluster_id: Option<String>,
    brokers: Vec<BrokerState>,
    topics: Vec<(String, Uuid, Vec<PartitionRecord>)>,
    configs: Vec<(ConfigResource, Vec<(String, String)>)>,
    next_producer_id: i64,
}

/// A SCRAM credential in a snapshot.
#[derive(Serialize, Deserialize)]
struct ScramEntry {
    user: String,
    mechanism: i8,
    salt: Vec<u8>,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
    iterations: i32,
}

/// Applies a change to a partition: the partition epoch always moves; the leader epoch moves
/// when the leader changes or a replica leaves the replica set.
pub fn apply_change(p: &mut PartitionRecord, c: &PartitionChange) {
    let mut bump_leader_epoch = false;
    if let Some(l) = c.leader
        && l != p.leader
    {
        p.leader = l;
        bump_leader_epoch = true;
    }
    if let Some(r) = &c.replicas {
        if p.replicas.iter().any(|old| !r.contains(old)) {
            bump_leader_epoch = true;
        }
        p.replicas = r.clone();
    }
    if let Some(isr) = &c.isr {
        p.isr = isr.clone();
    }
    if let Some(a) = &c.adding {
        p.adding = a.clone();
    }
    if let Some(r) = &c.removing {
        p.removing = r.clone();
    }
    if bump_leader_epoch {
        p.leader_epoch += 1;
    }
    p.partition_epoch += 1;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::metadata::records::Endpoint;

    fn reg(id: i32) -> MetadataRecord {
        MetadataRecord::RegisterBroker(BrokerRegistration {
            broker_id: id,
            incarnation: Uuid::new_v4(),
            endpoints: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "h".into(),
                port: 1,
            }],
            rack: None,
        })
    }

    #[test]
    fn brokers_register_fenced_and_stale_epochs_are_ignored() {
        let mut img = MetadataImage::default();
        img.apply(1, &reg(1));
        assert!(!img.is_active(1));
        img.apply(
            2,
            &MetadataRecord::UnfenceBroker {
                broker_id: 1,
                epoch: 1,
            },
        );
        assert!(img.is_active(1));
        // A new incarnation registers at index 3; a fence of epoch 1 no longer applies.
        img.apply(3, &reg(1));
        img.apply(
            4,
            &MetadataRecord::UnfenceBroker {
                broker_id: 1,
                epoch: 3,
            },
        );
        img.apply(
            5,
            &MetadataRecord::FenceBroker {
                broker_id: 1,
                epoch: 1,
            },
        );
        assert!(img.is_active(1));
        assert_eq!(img.offset, 5);
    }

    #[test]
    fn partition_changes_bump_epochs() {
        let mut img = MetadataImage::default();
        let id = Uuid::new_v4();
        img.apply(
            1,
            &MetadataRecord::Topic {
                name: "t".into(),
                id,
            },
        );
        img.apply(
            2,
            &MetadataRecord::Partition(PartitionRecord {
                topic_id: id,
                partition: 0,
                replicas: vec![1, 2, 3],
                isr: vec![1, 2, 3],
                adding: vec![],
                removing: vec![],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
            }),
        );
        let before = img.clone();
        img.apply(
            3,
            &MetadataRecord::PartitionChange(PartitionChange {
                isr: Some(vec![1, 2]),
                ..PartitionChange::new(id, 0)
            }),
        );
        let p = img.partition(&id, 0).unwrap();
        assert_eq!((p.leader_epoch, p.partition_epoch), (0, 1));
        img.apply(
            4,
            &MetadataRecord::PartitionChange(PartitionChange {
                leader: Some(2),
                isr: Some(vec![2]),
                ..PartitionChange::new(id, 0)
            }),
        );
        let p = img.partition(&id, 0).unwrap();
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 1, 2));
        // The earlier image is untouched (topics are copied on write).
        assert_eq!(before.partition(&id, 0).unwrap().isr, vec![1, 2, 3]);
        // A change to an unknown partition or topic is skipped.
        img.apply(
            5,
            &MetadataRecord::PartitionChange(PartitionChange::new(id, 7)),
        );
        img.apply(6, &MetadataRecord::RemoveTopic { id });
        img.apply(
            7,
            &MetadataRecord::PartitionChange(PartitionChange::new(id, 0)),
        );
        assert!(img.topic("t").is_none());
    }

    #[test]
    fn scram_records_apply_and_snapshots_keep_them() {
        let mut img = MetadataImage::default();
        img.apply(
            1,
            &MetadataRecord::UserScramCredential {
                name: "alice".into(),
                mechanism: 1,
                salt: vec![1],
                stored_key: vec![2],
                server_key: vec![3],
                iterations: 4096,
            },
        );
        // Unknown mechanisms are skipped.
        img.apply(
            2,
            &MetadataRecord::UserScramCredential {
                name: "bob".into(),
                mechanism: 9,
                salt: vec![],
                stored_key: vec![],
                server_key: vec![],
                iterations: 4096,
            },
        );
        assert_eq!(img.scram.len(), 1);
        let back = MetadataImage::from_snapshot(&img.to_snapshot()).unwrap();
        assert_eq!(back.scram, img.scram);
        // A snapshot written before credentials existed ends after its original fields.
        let old = Snapshot {
            offset: 2,
            cluster_id: None,
            brokers: vec![],
            topics: vec![],
            configs: vec![],
            next_producer_id: 0,
        };
        let old = MetadataImage::from_snapshot(&postcard::to_stdvec(&old).unwrap()).unwrap();
        assert!(old.scram.is_empty());
        img.apply(
            3,
            &MetadataRecord::RemoveUserScramCredential {
                name: "alice".into(),
                mechanism: 1,
            },
        );
        assert!(img.scram.is_empty());
    }

    #[test]
    fn acl_records_apply_and_snapshots_keep_them() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let entry = |id, name: &str, op| MetadataRecord::AccessControlEntry {
            id,
            resource_type: 2,
            resource_name: name.into(),
            pattern_type: 3,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: op,
            permission_type: 3,
        };
        let mut img = MetadataImage::default();
        img.apply(1, &entry(a, "orders", 3));
        img.apply(2, &entry(b, "orders", 4));
        // A record with an unknown code is skipped.
        img.apply(3, &entry(Uuid::new_v4(), "orders", 99));
        assert_eq!(img.acls.len(), 2);
        let back = MetadataImage::from_snapshot(&img.to_snapshot()).unwrap();
        assert_eq!(back.acls, img.acls);
        assert_eq!(back.scram, img.scram);
        // A snapshot written before ACLs existed ends after the SCRAM credentials.
        let old = Snapshot {
            offset: 2,
            cluster_id: None,
            brokers: vec![],
            topics: vec![],
            configs: vec![],
            next_producer_id: 0,
        };
        let mut bytes = postcard::to_stdvec(&old).unwrap();
        bytes.extend(postcard::to_stdvec(&Vec::<ScramEntry>::new()).unwrap());
        assert!(
            MetadataImage::from_snapshot(&bytes)
                .unwrap()
                .acls
                .is_empty()
        );
        img.apply(4, &MetadataRecord::RemoveAccessControlEntry { id: a });
        assert_eq!(img.acls.keys().collect::<Vec<_>>(), vec![&b]);
    }
}
