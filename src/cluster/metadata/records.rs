//! The records of the cluster metadata log, as Kafka's KRaft keeps them in
//! `__cluster_metadata`: every change to topics, partitions, brokers, configs and producer id
//! blocks is one record, and the metadata image is what applying them in log order gives.
//!
//! The controller decides (see `cluster::control`) and emits records; the quorum replicates
//! them as opaque bytes; every node applies them to its image. Records are encoded with
//! postcard (serde): compact, self-delimiting, and with no schema registry to keep in step
//! since only Sluice nodes read this log. A record variant is never changed once released;
//! new fields come as new variants.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A broker listener as registered: what clients of that listener connect to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// The endpoint name a broker's HTTP listener (`sluice.http.server.listeners`) registers
/// under, beside its Kafka listeners, so the other nodes can forward Schema Registry writes
/// to it. Lower case: Kafka listener names are upper-cased when configured, so no listener
/// ever has this name, and the Kafka answers that name brokers (Metadata, DescribeCluster,
/// FindCoordinator, the KIP-951 leader hints), which pick the endpoint of the listener a
/// request came in on, never include it.
pub const HTTP_ENDPOINT: &str = "http";

/// A broker's registration (Kafka's RegisterBrokerRecord). A new incarnation (process start)
/// registers again; its broker epoch is the log index of its registration record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    pub broker_id: i32,
    pub incarnation: Uuid,
    /// The Kafka listeners, then the HTTP listener ([`HTTP_ENDPOINT`]) if the node has one.
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
}

impl BrokerRegistration {
    /// The broker's HTTP listener as `host:port`, if it registered one.
    pub fn http_address(&self) -> Option<String> {
        self.endpoints
            .iter()
            .find(|e| e.name == HTTP_ENDPOINT)
            .map(|e| crate::config::format_host_port(&e.host, e.port))
    }
}

/// A partition's full state (Kafka's PartitionRecord).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRecord {
    pub topic_id: Uuid,
    pub partition: i32,
    /// In preference order: the first is the preferred leader.
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// Replicas being added by a reassignment (they are in `replicas` too).
    pub adding: Vec<i32>,
    /// Replicas being removed by a reassignment (they are in `replicas` too).
    pub removing: Vec<i32>,
    /// -1: no leader (offline).
    pub leader: i32,
    pub leader_epoch: i32,
    /// Bumped by every change; an ISR change proposed against an older one is refused.
    pub partition_epoch: i32,
}

impl PartitionRecord {
    pub fn has_leader(&self) -> bool {
        self.leader >= 0
    }

    /// Partition 0 of the nil topic id at leader epoch 0 and partition epoch 0.
    #[cfg(test)]
    pub fn for_test(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionRecord {
        PartitionRecord {
            topic_id: Uuid::nil(),
            partition: 0,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            adding: vec![],
            removing: vec![],
            leader,
            leader_epoch: 0,
            partition_epoch: 0,
        }
    }
}

/// A change to one partition (Kafka's PartitionChangeRecord): `None` fields stay as they are.
/// Applying it bumps the partition epoch, and the leader epoch when the leader changes or a
/// replica is removed (so a removed replica's fetches are fenced).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionChange {
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader: Option<i32>,
    pub isr: Option<Vec<i32>>,
    pub replicas: Option<Vec<i32>>,
    pub adding: Option<Vec<i32>>,
    pub removing: Option<Vec<i32>>,
}

impl PartitionChange {
    pub fn new(topic_id: Uuid, partition: i32) -> PartitionChange {
        PartitionChange {
            topic_id,
            partition,
            ..PartitionChange::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.leader.is_none()
            && self.isr.is_none()
            && self.replicas.is_none()
            && self.adding.is_none()
            && self.removing.is_none()
    }
}

/// What a config record applies to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ConfigResource {
    Topic(String),
    /// A broker's dynamic config; `None` is the cluster-wide default.
    Broker(Option<i32>),
    /// The feature levels UpdateFeatures set: feature name → level (a decimal number).
    Features,
    /// A group's dynamic configs (config resource type GROUP).
    Group(String),
    /// The quotas of a client quota entity: (entity type, name; `None` is the default
    /// entity), sorted by type; the values are the quotas as decimal numbers.
    ClientQuota(Vec<(String, Option<String>)>),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetadataRecord {
    /// The first record of a cluster's log: the id every node writes to `meta.properties`.
    ClusterId(String),
    /// A broker registered (fenced until it has caught up with the metadata log).
    RegisterBroker(BrokerRegistration),
    /// The broker with this epoch may lead and be in ISRs.
    UnfenceBroker {
        broker_id: i32,
        epoch: u64,
    },
    /// The broker with this epoch missed its session (or died): it leads nothing.
    FenceBroker {
        broker_id: i32,
        epoch: u64,
    },
    /// The broker with this epoch is shutting down cleanly: no new leaderships, and its
    /// leaderships move away.
    BrokerShuttingDown {
        broker_id: i32,
        epoch: u64,
    },
    /// The broker with this epoch left the cluster (its shutdown finished).
    UnregisterBroker {
        broker_id: i32,
        epoch: u64,
    },
    Topic {
        name: String,
        id: Uuid,
    },
    Partition(PartitionRecord),
    PartitionChange(PartitionChange),
    RemoveTopic {
        id: Uuid,
    },
    /// Sets (`Some`) or deletes (`None`) one config of a resource.
    Config {
        resource: ConfigResource,
        name: String,
        value: Option<String>,
    },
    /// A block of producer ids handed to a broker: ids below `next_producer_id` are taken.
    ProducerIds {
        broker_id: i32,
        broker_epoch: u64,
        next_producer_id: i64,
    },
    /// A user's SCRAM credential for one mechanism, set or replaced (Kafka's
    /// UserScramCredentialRecord; mechanism 1 is SCRAM-SHA-256, 2 SCRAM-SHA-512).
    UserScramCredential {
        name: String,
        mechanism: i8,
        salt: Vec<u8>,
        stored_key: Vec<u8>,
        server_key: Vec<u8>,
        iterations: i32,
    },
    /// A user's SCRAM credential for one mechanism removed (Kafka's
    /// RemoveUserScramCredentialRecord).
    RemoveUserScramCredential {
        name: String,
        mechanism: i8,
    },
    /// An ACL (Kafka's AccessControlEntryRecord): its id and the binding with Kafka's codes.
    AccessControlEntry {
        id: Uuid,
        resource_type: i8,
        resource_name: String,
        pattern_type: i8,
        principal: String,
        host: String,
        operation: i8,
        permission_type: i8,
    },
    /// An ACL removed by id (Kafka's RemoveAccessControlEntryRecord).
    RemoveAccessControlEntry {
        id: Uuid,
    },
}

impl MetadataRecord {
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_stdvec(self).expect("metadata records always encode")
    }

    pub fn decode(bytes: &[u8]) -> anyhow::Result<MetadataRecord> {
        postcard::from_bytes(bytes).map_err(|e| anyhow::anyhow!("bad metadata record: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let id = Uuid::new_v4();
        let records = vec![
            MetadataRecord::ClusterId("abc".into()),
            MetadataRecord::RegisterBroker(BrokerRegistration {
                broker_id: 3,
                incarnation: Uuid::new_v4(),
                endpoints: vec![Endpoint {
                    name: "PLAINTEXT".into(),
                    host: "127.0.0.1".into(),
                    port: 9092,
                }],
                rack: Some("r1".into()),
            }),
            MetadataRecord::Topic {
                name: "t".into(),
                id,
            },
            MetadataRecord::Partition(PartitionRecord {
                topic_id: id,
                partition: 0,
                replicas: vec![1, 2, 3],
                isr: vec![1, 2],
                adding: vec![],
                removing: vec![],
                leader: 1,
                leader_epoch: 4,
                partition_epoch: 9,
            }),
            MetadataRecord::PartitionChange(PartitionChange {
                isr: Some(vec![1]),
                ..PartitionChange::new(id, 0)
            }),
            MetadataRecord::Config {
                resource: ConfigResource::Broker(None),
                name: "log.retention.ms".into(),
                value: None,
            },
            MetadataRecord::UserScramCredential {
                name: "alice".into(),
                mechanism: 2,
                salt: vec![1, 2],
                stored_key: vec![3],
                server_key: vec![4],
                iterations: 4096,
            },
            MetadataRecord::RemoveUserScramCredential {
                name: "alice".into(),
                mechanism: 2,
            },
            MetadataRecord::AccessControlEntry {
                id,
                resource_type: 2,
                resource_name: "orders".into(),
                pattern_type: 4,
                principal: "User:alice".into(),
                host: "*".into(),
                operation: 3,
                permission_type: 3,
            },
            MetadataRecord::RemoveAccessControlEntry { id },
        ];
        for r in records {
            assert_eq!(MetadataRecord::decode(&r.encode()).unwrap(), r);
        }
        assert!(MetadataRecord::decode(&[0xff, 0xff]).is_err());
    }
}
