//! What brokers ask the active controller, and its answers: Sluice-to-Sluice messages carried
//! by [`Quorum::call_leader`](crate::cluster::quorum::Quorum::call_leader) as postcard bytes.
//! They stand for Kafka's BrokerRegistration, BrokerHeartbeat, AlterPartition,
//! AllocateProducerIds and the admin requests a broker forwards to the controller.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cluster::control::active::{
    AlterIsr, ControlError, CreateTopic, Heartbeat, HeartbeatReply,
};
use crate::cluster::metadata::{BrokerRegistration, PartitionRecord};
use crate::cluster::quorum::{QuorumStatus, ReplicaStatus, Role, VoterChange, VoterChangeError};
use crate::security::acl::changes::AclError;
use crate::security::acl::{AclBinding, AclFilter};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ControllerRequest {
    /// `previous_incarnation`: the incarnation that last ran from this broker's data
    /// directory, if it left a record of itself there.
    Register {
        registration: BrokerRegistration,
        previous_incarnation: Option<Uuid>,
    },
    Heartbeat(Heartbeat),
    /// One answer per topic, in order; `validate_only` commits nothing.
    CreateTopics {
        topics: Vec<CreateTopic>,
        validate_only: bool,
    },
    DeleteTopics(Vec<String>),
    CreatePartitions {
        topics: Vec<NewPartitions>,
        validate_only: bool,
    },
    AlterIsr(AlterIsr),
    /// `None`: every partition (Kafka's ElectLeaders with null topics).
    ElectLeaders {
        unclean: bool,
        partitions: Option<Vec<(String, i32)>>,
    },
    /// (topic, partition, target replicas; `None` cancels)
    Reassign(Vec<(String, i32, Option<Vec<i32>>)>),
    AllocateProducerIds {
        broker_id: i32,
        broker_epoch: u64,
    },
    /// Topic config changes: (topic, name, value; `None` deletes).
    AlterTopicConfigs(Vec<(String, String, Option<String>)>),
    /// Dynamic broker config changes: (broker id, `None` = the cluster default; name; value,
    /// `None` deletes), validated by the broker that took the request.
    AlterBrokerConfigs(Vec<(Option<i32>, String, Option<String>)>),
    /// UnregisterBroker: the broker id (answered `Done` with one result).
    UnregisterBroker(i32),
    /// UpdateFeatures: (feature, level, upgrade type), all or nothing.
    UpdateFeatures {
        updates: Vec<(String, i16, i8)>,
        validate_only: bool,
    },
    /// The quorum as the Raft leader sees it (Kafka's DescribeQuorum, which brokers forward
    /// to the active controller): answered only by the leader.
    DescribeQuorum,
    /// Dynamic group config changes: (group, name, value; `None` deletes), validated by the
    /// broker that took the request.
    AlterGroupConfigs(Vec<(String, String, Option<String>)>),
    /// Client quota changes: (entity as (type, name) pairs, quota key, value as a decimal
    /// number; `None` deletes), validated by the broker that took the request.
    AlterClientQuotas(Vec<ClientQuotaChange>),
    /// AddRaftVoter / RemoveRaftVoter: a change to the quorum's voters, carried out by the
    /// Raft leader within `timeout_ms`.
    ChangeVoters {
        change: VoterChange,
        timeout_ms: u64,
    },
    /// AlterUserScramCredentials: deletions (user, mechanism) and upsertions (user,
    /// mechanism, iterations, salt, salted password).
    AlterScramCredentials {
        deletions: Vec<(String, i8)>,
        upsertions: Vec<ScramUpsertion>,
    },
    /// CreateAcls: each creation as the broker read it (an invalid one is its error).
    CreateAcls(Vec<Result<AclBinding, AclError>>),
    /// DeleteAcls: each filter as the broker read it (an invalid one is its error).
    DeleteAcls(Vec<Result<AclFilter, AclError>>),
}

/// (entity as (type, name) pairs, quota key, value; `None` deletes)
pub type ClientQuotaChange = (Vec<(String, Option<String>)>, String, Option<String>);
/// A SCRAM credential to set: (user, mechanism, iterations, salt, salted password).
pub type ScramUpsertion = (String, i8, i32, Vec<u8>, Vec<u8>);

/// (topic, new total count, manual assignments of the new partitions)
pub type NewPartitions = (String, i32, Option<Vec<Vec<i32>>>);

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ControllerReply {
    /// The broker epoch of the registration.
    Registered(Result<u64, ControlError>),
    Heartbeat(Result<HeartbeatReply, ControlError>),
    Topics(Vec<Result<Uuid, ControlError>>),
    /// One per request item, in order.
    Done(Vec<Result<(), ControlError>>),
    Isr(Result<PartitionRecord, ControlError>),
    /// Elections: (topic, partition, result) for each partition considered.
    Elections(Vec<(String, i32, Result<(), ControlError>)>),
    /// First id of a block of [`PRODUCER_ID_BLOCK`] ids.
    ProducerIds(Result<i64, ControlError>),
    /// The request could not be decoded (a node of another version).
    Invalid(String),
    Quorum(QuorumView),
    /// UpdateFeatures: Kafka's error message for the first update refused.
    Features(Result<(), String>),
    Voters(Result<(), VoterChangeError>),
    /// AlterUserScramCredentials: (user, error code, message) per user.
    Scram(Vec<(String, i16, Option<String>)>),
    /// CreateAcls: one result per creation.
    AclsCreated(Vec<Result<(), AclError>>),
    /// DeleteAcls: per filter, the ACLs deleted or its error.
    AclsDeleted(Vec<Result<Vec<AclBinding>, AclError>>),
}

/// The metadata quorum as its leader sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumView {
    pub leader: i32,
    /// The Raft term: Kafka's leader epoch.
    pub term: u64,
    /// One past the committed index.
    pub high_watermark: u64,
    pub voters: Vec<ReplicaView>,
    /// Learners (Kafka's observers).
    pub observers: Vec<ReplicaView>,
}

/// One replica of the metadata log (see [`ReplicaStatus`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaView {
    pub node_id: i32,
    pub directory_id: Option<[u8; 16]>,
    pub log_end_offset: Option<u64>,
    pub last_fetch_ms: Option<u64>,
    pub last_caught_up_ms: Option<u64>,
}

impl QuorumView {
    /// The view of a leader's status; `None` unless `s` is the leader's.
    pub fn of_leader(s: &QuorumStatus) -> Option<QuorumView> {
        if s.role != Role::Leader {
            return None;
        }
        let replica = |r: &ReplicaStatus| ReplicaView {
            node_id: r.node_id as i32,
            directory_id: r.directory_id,
            log_end_offset: r.log_end_offset,
            last_fetch_ms: r.last_fetch_ms,
            last_caught_up_ms: r.last_caught_up_ms,
        };
        Some(QuorumView {
            leader: s.node_id as i32,
            term: s.term,
            high_watermark: s.high_watermark,
            voters: s.voters.iter().map(replica).collect(),
            observers: s.observers.iter().map(replica).collect(),
        })
    }
}

/// Producer ids handed to a broker at a time (Kafka's block size).
pub const PRODUCER_ID_BLOCK: i64 = 1000;

impl ControllerRequest {
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_stdvec(self).expect("requests always encode")
    }

    pub fn decode(bytes: &[u8]) -> anyhow::Result<ControllerRequest> {
        postcard::from_bytes(bytes).map_err(|e| anyhow::anyhow!("bad controller request: {e}"))
    }
}

impl ControllerReply {
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_stdvec(self).expect("replies always encode")
    }

    pub fn decode(bytes: &[u8]) -> anyhow::Result<ControllerReply> {
        postcard::from_bytes(bytes).map_err(|e| anyhow::anyhow!("bad controller reply: {e}"))
    }
}
