//! Every version the broker advertises is one it decodes and answers. ApiVersions is read from
//! the running binary over its socket; then, for every listed key and every version in its
//! range, a request of that version is built with kafka-protocol and sent, and the answer must
//! come back on the same open connection, with the same correlation id, decoding as that key's
//! response at that version (header version included) with no bytes left over.
//!
//! The advertised list must also be `sluice::api::APIS` exactly, and within what kafka-protocol
//! can decode (the request and response types' `Message::VERSIONS`; `ApiKey::valid_versions`
//! is not used: in 0.18 it claims OffsetCommit and OffsetFetch v10, which their request types
//! refuse). A key with no request builder below fails the test: add one when adding an API.

mod common;

use bytes::{Buf, Bytes};
use common::{Client, TestBroker, record_batch};
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::alter_configs_request;
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::alter_user_scram_credentials_request;
use kafka_protocol::messages::create_acls_request;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_acls_request;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::describe_quorum_request::{
    PartitionData as QuorumPartition, TopicData as QuorumTopic,
};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions as ElectTopicPartitions;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Message, StrBytes, VersionRange};

const TOPIC: &str = "matrix";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn topic_name(v: &str) -> TopicName {
    TopicName(s(v))
}

fn txn_id(v: &str) -> TransactionalId {
    TransactionalId(s(v))
}

fn group(v: &str) -> GroupId {
    GroupId(s(v))
}

/// Creates `name` with one partition.
fn create_topic(name: &str) -> CreateTopicsRequest {
    let mut t = CreatableTopic::default();
    t.name = topic_name(name);
    t.num_partitions = 1;
    t.replication_factor = 1;
    let mut r = CreateTopicsRequest::default();
    r.topics = vec![t];
    r.timeout_ms = 5000;
    r
}

/// What the requests refer to: a topic that exists (one partition) and its id.
struct Fixture {
    topic_id: uuid::Uuid,
}

/// A request ready to send, and the versions kafka-protocol encodes and decodes for its key.
struct Built {
    request: RequestKind,
    request_versions: VersionRange,
    response_versions: VersionRange,
}

fn built<Q: Message + Into<RequestKind>, R: Message>(q: Q) -> Built {
    Built {
        request: q.into(),
        request_versions: Q::VERSIONS,
        response_versions: R::VERSIONS,
    }
}

/// A valid request for `key` at version `v`: Default plus what that version needs to encode
/// and to be answered (Produce with acks=1, since acks=0 gets no response).
fn build(key: ApiKey, v: i16, fx: &Fixture) -> Built {
    match key {
        ApiKey::Produce => {
            let mut pd = PartitionProduceData::default();
            pd.index = 0;
            pd.records = Some(record_batch(&[b"matrix"], 1_700_000_000_000));
            let mut td = TopicProduceData::default();
            if v >= 13 {
                td.topic_id = fx.topic_id;
            } else {
                td.name = topic_name(TOPIC);
            }
            td.partition_data = vec![pd];
            let mut r = ProduceRequest::default();
            r.acks = 1;
            r.timeout_ms = 5000;
            r.topic_data = vec![td];
            built::<_, ProduceResponse>(r)
        }
        ApiKey::Fetch => {
            let mut p = FetchPartition::default();
            p.partition = 0;
            p.fetch_offset = 0;
            p.partition_max_bytes = 1 << 20;
            let mut t = FetchTopic::default();
            if v >= 13 {
                t.topic_id = fx.topic_id;
            } else {
                t.topic = topic_name(TOPIC);
            }
            t.partitions = vec![p];
            let mut r = FetchRequest::default();
            r.max_wait_ms = 0;
            r.min_bytes = 0;
            r.max_bytes = 1 << 20;
            r.topics = vec![t];
            built::<_, FetchResponse>(r)
        }
        ApiKey::ListOffsets => {
            let mut p = ListOffsetsPartition::default();
            p.partition_index = 0;
            p.timestamp = -1;
            let mut t = ListOffsetsTopic::default();
            t.name = topic_name(TOPIC);
            t.partitions = vec![p];
            let mut r = ListOffsetsRequest::default();
            r.replica_id = BrokerId(-1);
            r.topics = vec![t];
            built::<_, ListOffsetsResponse>(r)
        }
        ApiKey::Metadata => {
            let mut t = MetadataRequestTopic::default();
            t.name = Some(topic_name(TOPIC));
            let mut r = MetadataRequest::default();
            r.topics = Some(vec![t]);
            built::<_, MetadataResponse>(r)
        }
        ApiKey::OffsetCommit => {
            let mut p = OffsetCommitRequestPartition::default();
            p.partition_index = 0;
            p.committed_offset = 1;
            let mut t = OffsetCommitRequestTopic::default();
            t.name = topic_name(TOPIC);
            t.partitions = vec![p];
            // A simple consumer's commit: no member, generation -1.
            let mut r = OffsetCommitRequest::default();
            r.group_id = group("matrix-commit");
            r.generation_id_or_member_epoch = -1;
            r.topics = vec![t];
            built::<_, OffsetCommitResponse>(r)
        }
        ApiKey::OffsetFetch => {
            let mut r = OffsetFetchRequest::default();
            if v >= 8 {
                let mut t = OffsetFetchRequestTopics::default();
                t.name = topic_name(TOPIC);
                t.partition_indexes = vec![0];
                let mut g = OffsetFetchRequestGroup::default();
                g.group_id = group("matrix-commit");
                g.topics = Some(vec![t]);
                if v >= 9 {
                    g.member_epoch = -1;
                }
                r.groups = vec![g];
            } else {
                let mut t = OffsetFetchRequestTopic::default();
                t.name = topic_name(TOPIC);
                t.partition_indexes = vec![0];
                r.group_id = group("matrix-commit");
                r.topics = Some(vec![t]);
            }
            built::<_, OffsetFetchResponse>(r)
        }
        ApiKey::FindCoordinator => {
            let mut r = FindCoordinatorRequest::default();
            if v >= 4 {
                r.coordinator_keys = vec![s("matrix-commit")];
            } else {
                r.key = s("matrix-commit");
            }
            built::<_, FindCoordinatorResponse>(r)
        }
        ApiKey::JoinGroup => {
            let mut p = JoinGroupRequestProtocol::default();
            p.name = s("range");
            p.metadata = Bytes::from_static(b"\0\x01\0\0\0\0\0\0\0\0");
            // A group of its own per version: v0-3 join at once (the broker runs with no
            // initial rebalance delay), v4+ get MEMBER_ID_REQUIRED.
            let mut r = JoinGroupRequest::default();
            r.group_id = group(&format!("matrix-join-v{v}"));
            r.session_timeout_ms = 30_000;
            r.rebalance_timeout_ms = 30_000;
            r.protocol_type = s("consumer");
            r.protocols = vec![p];
            built::<_, JoinGroupResponse>(r)
        }
        ApiKey::Heartbeat => {
            let mut r = HeartbeatRequest::default();
            r.group_id = group("matrix-none");
            r.generation_id = 1;
            r.member_id = s("nobody");
            built::<_, HeartbeatResponse>(r)
        }
        ApiKey::LeaveGroup => {
            let mut r = LeaveGroupRequest::default();
            r.group_id = group("matrix-none");
            if v >= 3 {
                let mut m = MemberIdentity::default();
                m.member_id = s("nobody");
                r.members = vec![m];
            } else {
                r.member_id = s("nobody");
            }
            built::<_, LeaveGroupResponse>(r)
        }
        ApiKey::SyncGroup => {
            let mut r = SyncGroupRequest::default();
            r.group_id = group("matrix-none");
            r.generation_id = 1;
            r.member_id = s("nobody");
            if v >= 5 {
                r.protocol_type = Some(s("consumer"));
                r.protocol_name = Some(s("range"));
            }
            built::<_, SyncGroupResponse>(r)
        }
        ApiKey::DescribeGroups => {
            let mut r = DescribeGroupsRequest::default();
            r.groups = vec![group("matrix-commit"), group("matrix-none")];
            built::<_, DescribeGroupsResponse>(r)
        }
        ApiKey::ListGroups => built::<_, ListGroupsResponse>(ListGroupsRequest::default()),
        ApiKey::ConsumerGroupHeartbeat => {
            // A join (epoch 0) of a KIP-848 consumer group; v1 needs the member id.
            let mut r = ConsumerGroupHeartbeatRequest::default();
            r.group_id = group(&format!("matrix-cg-{v}"));
            r.member_id = s(&format!("matrix-member-{v}"));
            r.member_epoch = 0;
            r.rebalance_timeout_ms = 30_000;
            r.subscribed_topic_names = Some(vec![topic_name(TOPIC)]);
            r.topic_partitions = Some(vec![]);
            built::<_, ConsumerGroupHeartbeatResponse>(r)
        }
        ApiKey::ConsumerGroupDescribe => {
            let mut r = ConsumerGroupDescribeRequest::default();
            r.group_ids = vec![group("matrix-cg-1"), group("matrix-commit")];
            built::<_, ConsumerGroupDescribeResponse>(r)
        }
        ApiKey::ApiVersions => {
            let mut r = ApiVersionsRequest::default();
            if v >= 3 {
                r.client_software_name = s("sluice-matrix");
                r.client_software_version = s("1");
            }
            built::<_, ApiVersionsResponse>(r)
        }
        ApiKey::CreateTopics => {
            built::<_, CreateTopicsResponse>(create_topic(&format!("matrix-create-v{v}")))
        }
        ApiKey::DeleteTopics => {
            // CreateTopics (sent before, key 19 < 20) made matrix-create-v2..v7.
            let name = topic_name(&format!("matrix-create-v{}", v + 1));
            let mut r = DeleteTopicsRequest::default();
            if v >= 6 {
                let mut t = DeleteTopicState::default();
                t.name = Some(name);
                r.topics = vec![t];
            } else {
                r.topic_names = vec![name];
            }
            r.timeout_ms = 5000;
            built::<_, DeleteTopicsResponse>(r)
        }
        ApiKey::DeleteRecords => {
            // Offset 0 is never above the high watermark: the log start stays where it is.
            let mut p = delete_records_request::DeleteRecordsPartition::default();
            p.partition_index = 0;
            p.offset = 0;
            let mut t = delete_records_request::DeleteRecordsTopic::default();
            t.name = topic_name(TOPIC);
            t.partitions = vec![p];
            let mut r = DeleteRecordsRequest::default();
            r.topics = vec![t];
            r.timeout_ms = 5000;
            built::<_, DeleteRecordsResponse>(r)
        }
        ApiKey::InitProducerId => {
            let mut r = InitProducerIdRequest::default();
            r.transaction_timeout_ms = 60_000;
            built::<_, InitProducerIdResponse>(r)
        }
        ApiKey::DescribeConfigs => {
            let mut res = DescribeConfigsResource::default();
            res.resource_type = 2; // topic
            res.resource_name = s(TOPIC);
            let mut r = DescribeConfigsRequest::default();
            r.resources = vec![res];
            built::<_, DescribeConfigsResponse>(r)
        }
        ApiKey::DescribeCluster => {
            built::<_, DescribeClusterResponse>(DescribeClusterRequest::default())
        }
        ApiKey::DescribeClientQuotas => {
            // No filter, not strict: every configured quota (none).
            built::<_, kafka_protocol::messages::DescribeClientQuotasResponse>(
                kafka_protocol::messages::DescribeClientQuotasRequest::default(),
            )
        }
        ApiKey::AlterClientQuotas => {
            // A client id's produce quota, validate_only: checked and not applied.
            use kafka_protocol::messages::alter_client_quotas_request::{
                EntityData, EntryData, OpData,
            };
            let mut e = EntityData::default();
            e.entity_type = s("client-id");
            e.entity_name = Some(s("matrix"));
            let mut op = OpData::default();
            op.key = s("producer_byte_rate");
            op.value = 1048576.0;
            let mut entry = EntryData::default();
            entry.entity = vec![e];
            entry.ops = vec![op];
            let mut r = kafka_protocol::messages::AlterClientQuotasRequest::default();
            r.entries = vec![entry];
            r.validate_only = true;
            built::<_, kafka_protocol::messages::AlterClientQuotasResponse>(r)
        }
        // On a PLAINTEXT listener: ILLEGAL_SASL_STATE, as Kafka answers (the SASL suite sends
        // them to a SASL listener).
        ApiKey::SaslHandshake => {
            let mut r = SaslHandshakeRequest::default();
            r.mechanism = s("PLAIN");
            built::<_, SaslHandshakeResponse>(r)
        }
        ApiKey::SaslAuthenticate => {
            let mut r = SaslAuthenticateRequest::default();
            r.auth_bytes = Bytes::from_static(b"\0u\0p");
            built::<_, SaslAuthenticateResponse>(r)
        }
        ApiKey::DescribeUserScramCredentials => built::<_, DescribeUserScramCredentialsResponse>(
            DescribeUserScramCredentialsRequest::default(),
        ),
        ApiKey::AlterUserScramCredentials => {
            // A deletion of a credential no user has: RESOURCE_NOT_FOUND.
            let mut d = alter_user_scram_credentials_request::ScramCredentialDeletion::default();
            d.name = s("nobody");
            d.mechanism = 1;
            let mut r = AlterUserScramCredentialsRequest::default();
            r.deletions = vec![d];
            built::<_, AlterUserScramCredentialsResponse>(r)
        }
        ApiKey::DescribeAcls => {
            // Every ACL (the test broker has no authorizer: SECURITY_DISABLED).
            let mut r = DescribeAclsRequest::default();
            (r.resource_type_filter, r.pattern_type_filter) = (1, 1);
            (r.operation, r.permission_type) = (1, 1);
            built::<_, DescribeAclsResponse>(r)
        }
        ApiKey::CreateAcls => {
            let mut c = create_acls_request::AclCreation::default();
            (c.resource_type, c.resource_pattern_type) = (2, 3);
            c.resource_name = s(TOPIC);
            c.principal = s("User:alice");
            c.host = s("*");
            (c.operation, c.permission_type) = (3, 3);
            let mut r = CreateAclsRequest::default();
            r.creations = vec![c];
            built::<_, CreateAclsResponse>(r)
        }
        ApiKey::DeleteAcls => {
            let mut f = delete_acls_request::DeleteAclsFilter::default();
            (f.resource_type_filter, f.pattern_type_filter) = (1, 1);
            (f.operation, f.permission_type) = (1, 1);
            let mut r = DeleteAclsRequest::default();
            r.filters = vec![f];
            built::<_, DeleteAclsResponse>(r)
        }
        ApiKey::UnregisterBroker => {
            // An id no broker has: BROKER_ID_NOT_REGISTERED.
            let mut r = UnregisterBrokerRequest::default();
            r.broker_id = BrokerId(4242);
            built::<_, UnregisterBrokerResponse>(r)
        }
        ApiKey::UpdateFeatures => {
            // No updates: accepted and changes nothing.
            built::<_, UpdateFeaturesResponse>(UpdateFeaturesRequest::default())
        }
        ApiKey::ListConfigResources => {
            built::<_, ListConfigResourcesResponse>(ListConfigResourcesRequest::default())
        }
        ApiKey::DescribeTopicPartitions => {
            let mut t = describe_topic_partitions_request::TopicRequest::default();
            t.name = topic_name(TOPIC);
            let mut r = DescribeTopicPartitionsRequest::default();
            r.topics = vec![t];
            built::<_, DescribeTopicPartitionsResponse>(r)
        }
        ApiKey::DeleteGroups => {
            let mut r = DeleteGroupsRequest::default();
            r.groups_names = vec![group("matrix-none")];
            built::<_, DeleteGroupsResponse>(r)
        }
        ApiKey::OffsetDelete => {
            let mut p = OffsetDeleteRequestPartition::default();
            p.partition_index = 0;
            let mut t = OffsetDeleteRequestTopic::default();
            t.name = topic_name(TOPIC);
            t.partitions = vec![p];
            let mut r = OffsetDeleteRequest::default();
            r.group_id = group("matrix-none");
            r.topics = vec![t];
            built::<_, OffsetDeleteResponse>(r)
        }
        ApiKey::OffsetForLeaderEpoch => {
            let mut p = OffsetForLeaderPartition::default();
            p.partition = 0;
            p.current_leader_epoch = -1;
            p.leader_epoch = 0;
            let mut t = OffsetForLeaderTopic::default();
            t.topic = topic_name(TOPIC);
            t.partitions = vec![p];
            let mut r = OffsetForLeaderEpochRequest::default();
            r.replica_id = BrokerId(-1);
            r.topics = vec![t];
            built::<_, OffsetForLeaderEpochResponse>(r)
        }
        ApiKey::CreatePartitions => {
            let mut t = CreatePartitionsTopic::default();
            t.name = topic_name(TOPIC);
            t.count = 8;
            let mut r = CreatePartitionsRequest::default();
            r.topics = vec![t];
            r.timeout_ms = 5_000;
            r.validate_only = true;
            built::<_, CreatePartitionsResponse>(r)
        }
        ApiKey::AlterReplicaLogDirs => {
            // A dir that is not a log dir: LOG_DIR_NOT_FOUND, nothing moves.
            let mut t = AlterReplicaLogDirTopic::default();
            t.name = topic_name(TOPIC);
            t.partitions = vec![0];
            let mut d = AlterReplicaLogDir::default();
            d.path = s("/no/such/log/dir");
            d.topics = vec![t];
            let mut r = AlterReplicaLogDirsRequest::default();
            r.dirs = vec![d];
            built::<_, AlterReplicaLogDirsResponse>(r)
        }
        ApiKey::DescribeLogDirs => {
            let mut t = DescribableLogDirTopic::default();
            t.topic = topic_name(TOPIC);
            t.partitions = vec![0];
            let mut r = DescribeLogDirsRequest::default();
            r.topics = Some(vec![t]);
            built::<_, DescribeLogDirsResponse>(r)
        }
        ApiKey::DescribeProducers => {
            let mut t = describe_producers_request::TopicRequest::default();
            t.name = topic_name(TOPIC);
            t.partition_indexes = vec![0];
            let mut r = DescribeProducersRequest::default();
            r.topics = vec![t];
            built::<_, DescribeProducersResponse>(r)
        }
        ApiKey::ElectLeaders => {
            let mut t = ElectTopicPartitions::default();
            t.topic = topic_name(TOPIC);
            t.partitions = vec![0];
            let mut r = ElectLeadersRequest::default();
            r.topic_partitions = Some(vec![t]);
            r.timeout_ms = 5_000;
            built::<_, ElectLeadersResponse>(r)
        }
        ApiKey::IncrementalAlterConfigs => {
            let mut c = AlterableConfig::default();
            c.name = s("retention.ms");
            c.config_operation = 0;
            c.value = Some(s("604800000"));
            let mut res = AlterConfigsResource::default();
            res.resource_type = 2;
            res.resource_name = s(TOPIC);
            res.configs = vec![c];
            let mut r = IncrementalAlterConfigsRequest::default();
            r.resources = vec![res];
            r.validate_only = true;
            built::<_, IncrementalAlterConfigsResponse>(r)
        }
        ApiKey::AlterConfigs => {
            // validate_only: the topic's configs replaced by the same (none), nothing changes.
            let mut res = alter_configs_request::AlterConfigsResource::default();
            res.resource_type = 2;
            res.resource_name = s(TOPIC);
            let mut r = AlterConfigsRequest::default();
            r.resources = vec![res];
            r.validate_only = true;
            built::<_, AlterConfigsResponse>(r)
        }
        ApiKey::AlterPartitionReassignments => {
            // A cancel with nothing in progress: NO_REASSIGNMENT_IN_PROGRESS, no change.
            let mut p = ReassignablePartition::default();
            p.partition_index = 0;
            p.replicas = None;
            let mut t = ReassignableTopic::default();
            t.name = topic_name(TOPIC);
            t.partitions = vec![p];
            let mut r = AlterPartitionReassignmentsRequest::default();
            r.timeout_ms = 5_000;
            r.topics = vec![t];
            built::<_, AlterPartitionReassignmentsResponse>(r)
        }
        ApiKey::ListPartitionReassignments => {
            let mut r = ListPartitionReassignmentsRequest::default();
            r.timeout_ms = 5_000;
            built::<_, ListPartitionReassignmentsResponse>(r)
        }
        ApiKey::DescribeQuorum => {
            let mut p = QuorumPartition::default();
            p.partition_index = 0;
            let mut t = QuorumTopic::default();
            t.topic_name = topic_name("__cluster_metadata");
            t.partitions = vec![p];
            let mut r = DescribeQuorumRequest::default();
            r.topics = vec![t];
            built::<_, DescribeQuorumResponse>(r)
        }
        ApiKey::AddRaftVoter => {
            // One node has no quorum to change: UNSUPPORTED_VERSION, an answer all the same.
            let mut l = kafka_protocol::messages::add_raft_voter_request::Listener::default();
            l.name = s("CONTROLLER");
            l.host = s("127.0.0.1");
            l.port = 1;
            let mut r = AddRaftVoterRequest::default();
            r.voter_id = 2;
            r.voter_directory_id = uuid::Uuid::from_bytes([7; 16]);
            r.timeout_ms = 1000;
            r.listeners = vec![l];
            built::<_, AddRaftVoterResponse>(r)
        }
        ApiKey::RemoveRaftVoter => {
            let mut r = RemoveRaftVoterRequest::default();
            r.voter_id = 2;
            r.voter_directory_id = uuid::Uuid::from_bytes([7; 16]);
            built::<_, RemoveRaftVoterResponse>(r)
        }
        ApiKey::AddPartitionsToTxn => {
            let mut t = AddPartitionsToTxnTopic::default();
            t.name = topic_name(TOPIC);
            t.partitions = vec![0];
            let mut r = AddPartitionsToTxnRequest::default();
            if v < 4 {
                r.v3_and_below_transactional_id = txn_id("matrix-txn");
                r.v3_and_below_producer_id = ProducerId(1);
                r.v3_and_below_topics = vec![t];
            } else {
                let mut tx = AddPartitionsToTxnTransaction::default();
                tx.transactional_id = txn_id("matrix-txn");
                tx.producer_id = ProducerId(1);
                tx.verify_only = true;
                tx.topics = vec![t];
                r.transactions = vec![tx];
            }
            built::<_, AddPartitionsToTxnResponse>(r)
        }
        ApiKey::AddOffsetsToTxn => {
            let mut r = AddOffsetsToTxnRequest::default();
            r.transactional_id = txn_id("matrix-txn");
            r.producer_id = ProducerId(1);
            r.group_id = group("matrix-group");
            built::<_, AddOffsetsToTxnResponse>(r)
        }
        ApiKey::EndTxn => {
            let mut r = EndTxnRequest::default();
            r.transactional_id = txn_id("matrix-txn");
            r.producer_id = ProducerId(1);
            built::<_, EndTxnResponse>(r)
        }
        ApiKey::WriteTxnMarkers => {
            let mut t = WritableTxnMarkerTopic::default();
            t.name = topic_name(TOPIC);
            t.partition_indexes = vec![0];
            let mut m = WritableTxnMarker::default();
            m.producer_id = ProducerId(999_999);
            m.topics = vec![t];
            let mut r = WriteTxnMarkersRequest::default();
            r.markers = vec![m];
            built::<_, WriteTxnMarkersResponse>(r)
        }
        ApiKey::DescribeTransactions => {
            let mut r = DescribeTransactionsRequest::default();
            r.transactional_ids = vec![txn_id("matrix-txn")];
            built::<_, DescribeTransactionsResponse>(r)
        }
        ApiKey::ListTransactions => {
            built::<_, ListTransactionsResponse>(ListTransactionsRequest::default())
        }
        ApiKey::TxnOffsetCommit => {
            let mut p = TxnOffsetCommitRequestPartition::default();
            p.partition_index = 0;
            p.committed_offset = 1;
            let mut t = TxnOffsetCommitRequestTopic::default();
            t.name = topic_name(TOPIC);
            t.partitions = vec![p];
            // A simple group's transactional commit (generation -1, no member).
            let mut r = TxnOffsetCommitRequest::default();
            r.transactional_id = TransactionalId(s("matrix-txn"));
            r.group_id = group("matrix-txn");
            r.producer_id = ProducerId(5000);
            r.producer_epoch = 0;
            r.topics = vec![t];
            built::<_, TxnOffsetCommitResponse>(r)
        }
        ApiKey::ShareGroupHeartbeat => {
            let mut r = ShareGroupHeartbeatRequest::default();
            r.group_id = group("matrix-share");
            r.member_id = s("matrix-share-member");
            r.member_epoch = 0;
            r.subscribed_topic_names = Some(vec![topic_name(TOPIC)]);
            built::<_, ShareGroupHeartbeatResponse>(r)
        }
        ApiKey::ShareGroupDescribe => {
            let mut r = ShareGroupDescribeRequest::default();
            r.group_ids = vec![group("matrix-share"), group("matrix-share-none")];
            built::<_, ShareGroupDescribeResponse>(r)
        }
        ApiKey::ShareFetch => {
            let mut p = kafka_protocol::messages::share_fetch_request::FetchPartition::default();
            p.partition_index = 0;
            p.partition_max_bytes = 1 << 20;
            let mut t = kafka_protocol::messages::share_fetch_request::FetchTopic::default();
            t.topic_id = fx.topic_id;
            t.partitions = vec![p];
            let mut r = ShareFetchRequest::default();
            r.group_id = Some(group("matrix-share"));
            r.member_id = Some(s("matrix-share-member"));
            r.share_session_epoch = 0;
            r.max_wait_ms = 0;
            r.max_bytes = 1 << 20;
            r.max_records = 10;
            r.topics = vec![t];
            built::<_, ShareFetchResponse>(r)
        }
        ApiKey::ShareAcknowledge => {
            // Epoch 1 after the ShareFetch above opened the session (or
            // SHARE_SESSION_NOT_FOUND): an answer either way.
            let mut r = ShareAcknowledgeRequest::default();
            r.group_id = Some(group("matrix-share"));
            r.member_id = Some(s("matrix-share-member"));
            r.share_session_epoch = 1;
            built::<_, ShareAcknowledgeResponse>(r)
        }
        ApiKey::DescribeShareGroupOffsets => {
            let mut g =
                kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default();
            g.group_id = group("matrix-share");
            let mut r = DescribeShareGroupOffsetsRequest::default();
            r.groups = vec![g];
            built::<_, DescribeShareGroupOffsetsResponse>(r)
        }
        ApiKey::AlterShareGroupOffsets => {
            let mut r = AlterShareGroupOffsetsRequest::default();
            r.group_id = group("matrix-share-none");
            built::<_, AlterShareGroupOffsetsResponse>(r)
        }
        ApiKey::DeleteShareGroupOffsets => {
            let mut r = DeleteShareGroupOffsetsRequest::default();
            r.group_id = group("matrix-share-none");
            built::<_, DeleteShareGroupOffsetsResponse>(r)
        }
        // The share-state APIs on the matrix topic's partition 0 of a group of their own:
        // initialized first (the keys are sent in order), then read, written, summarized and
        // deleted.
        ApiKey::InitializeShareGroupState => {
            use kafka_protocol::messages::initialize_share_group_state_request as m;
            let mut p = m::PartitionData::default();
            p.partition = 0;
            p.start_offset = 0;
            let mut t = m::InitializeStateData::default();
            t.topic_id = fx.topic_id;
            t.partitions = vec![p];
            let mut r = kafka_protocol::messages::InitializeShareGroupStateRequest::default();
            r.group_id = s("matrix-share-state");
            r.topics = vec![t];
            built::<_, kafka_protocol::messages::InitializeShareGroupStateResponse>(r)
        }
        ApiKey::ReadShareGroupState => {
            use kafka_protocol::messages::read_share_group_state_request as m;
            let mut p = m::PartitionData::default();
            p.partition = 0;
            p.leader_epoch = 0;
            let mut t = m::ReadStateData::default();
            t.topic_id = fx.topic_id;
            t.partitions = vec![p];
            let mut r = kafka_protocol::messages::ReadShareGroupStateRequest::default();
            r.group_id = s("matrix-share-state");
            r.topics = vec![t];
            built::<_, kafka_protocol::messages::ReadShareGroupStateResponse>(r)
        }
        ApiKey::WriteShareGroupState => {
            use kafka_protocol::messages::write_share_group_state_request as m;
            let mut sb = m::StateBatch::default();
            sb.first_offset = 0;
            sb.last_offset = 0;
            sb.delivery_state = 2;
            sb.delivery_count = 1;
            let mut p = m::PartitionData::default();
            p.partition = 0;
            p.leader_epoch = 0;
            p.start_offset = -1;
            p.state_batches = vec![sb];
            let mut t = m::WriteStateData::default();
            t.topic_id = fx.topic_id;
            t.partitions = vec![p];
            let mut r = kafka_protocol::messages::WriteShareGroupStateRequest::default();
            r.group_id = s("matrix-share-state");
            r.topics = vec![t];
            built::<_, kafka_protocol::messages::WriteShareGroupStateResponse>(r)
        }
        ApiKey::DeleteShareGroupState => {
            use kafka_protocol::messages::delete_share_group_state_request as m;
            let mut p = m::PartitionData::default();
            p.partition = 0;
            let mut t = m::DeleteStateData::default();
            t.topic_id = fx.topic_id;
            t.partitions = vec![p];
            let mut r = kafka_protocol::messages::DeleteShareGroupStateRequest::default();
            r.group_id = s("matrix-share-state-deleted");
            r.topics = vec![t];
            built::<_, kafka_protocol::messages::DeleteShareGroupStateResponse>(r)
        }
        ApiKey::ReadShareGroupStateSummary => {
            use kafka_protocol::messages::read_share_group_state_summary_request as m;
            let mut p = m::PartitionData::default();
            p.partition = 0;
            p.leader_epoch = 0;
            let mut t = m::ReadStateSummaryData::default();
            t.topic_id = fx.topic_id;
            t.partitions = vec![p];
            let mut r = kafka_protocol::messages::ReadShareGroupStateSummaryRequest::default();
            r.group_id = s("matrix-share-state");
            r.topics = vec![t];
            built::<_, kafka_protocol::messages::ReadShareGroupStateSummaryResponse>(r)
        }
        other => panic!(
            "{other:?} is advertised but api_versions_matrix.rs has no request builder for it: \
             add one to build()"
        ),
    }
}

/// Produce v0-v2 are advertised, as Kafka 4 does (librdkafka enables compression only when it
/// sees Produce v0 listed), but neither Kafka 4.4 nor Sluice serves them: both close the
/// connection. kafka-protocol cannot encode them, so this frame (acks=1, timeout, no topics:
/// the v0-v2 layout, header v1) is written by hand.
fn produce_below_v3_closes(b: &TestBroker, v: i16) -> Result<(), String> {
    let mut f = Vec::new();
    let client_id = b"sluice-test";
    let body_len = 2 + 2 + 4 + 2 + client_id.len() + 2 + 4 + 4;
    f.extend_from_slice(&(body_len as i32).to_be_bytes());
    f.extend_from_slice(&0i16.to_be_bytes());
    f.extend_from_slice(&v.to_be_bytes());
    f.extend_from_slice(&7i32.to_be_bytes());
    f.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    f.extend_from_slice(client_id);
    f.extend_from_slice(&1i16.to_be_bytes());
    f.extend_from_slice(&5000i32.to_be_bytes());
    f.extend_from_slice(&0i32.to_be_bytes());
    assert_eq!(f.len(), 4 + body_len);
    let mut c = b.connect();
    c.send_raw(&f).map_err(|e| format!("send: {e}"))?;
    if c.is_closed() {
        Ok(())
    } else {
        Err("answered, where Kafka 4.4 closes the connection".into())
    }
}

/// Sends `built` at `v` and checks the answer; then proves the connection is still open with
/// an ApiVersions v0 round trip.
fn check(c: &mut Client, key: ApiKey, v: i16, built: &Built) -> Result<(), String> {
    let corr = c.send_kind(key, v, &built.request);
    let mut frame = c
        .recv_raw()
        .map_err(|e| format!("no response (connection closed or timed out): {e}"))?;
    let header_version = key.response_header_version(v);
    let header = ResponseHeader::decode(&mut frame, header_version)
        .map_err(|e| format!("response header v{header_version} does not decode: {e}"))?;
    if header.correlation_id != corr {
        return Err(format!(
            "correlation id {} in the response, {corr} sent",
            header.correlation_id
        ));
    }
    ResponseKind::decode(key, &mut frame, v)
        .map_err(|e| format!("response does not decode at v{v}: {e}"))?;
    if frame.remaining() != 0 {
        return Err(format!(
            "{} bytes left after the v{v} response (wrong header version?)",
            frame.remaining()
        ));
    }
    let corr = c.send(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
    match c.recv_frame(ApiKey::ApiVersions, 0) {
        Ok((got, _)) if got == corr => Ok(()),
        Ok((got, _)) => Err(format!("next request: correlation id {got}, {corr} sent")),
        Err(e) => Err(format!("connection unusable after the response: {e}")),
    }
}

#[test]
fn every_advertised_version_is_answered() {
    let b = TestBroker::start(&["group.initial.rebalance.delay.ms=0"]);
    let mut c = b.connect();

    let created: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &create_topic(TOPIC));
    assert_eq!(created.topics[0].error_code, 0);
    let fx = Fixture {
        topic_id: created.topics[0].topic_id,
    };

    let mut req = ApiVersionsRequest::default();
    req.client_software_name = s("sluice-matrix");
    req.client_software_version = s("1");
    let av: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &req);
    assert_eq!(av.error_code, 0);

    // The list is APIS, key for key and range for range.
    let mut advertised: Vec<(i16, i16, i16)> = av
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version, k.max_version))
        .collect();
    advertised.sort();
    let mut served: Vec<(i16, i16, i16)> = sluice::api::APIS
        .iter()
        .map(|s| (s.key as i16, s.min, s.max))
        .collect();
    served.sort();
    assert_eq!(
        advertised, served,
        "ApiVersions must list sluice::api::APIS"
    );

    let mut failures = Vec::new();
    let mut answered = 0;
    for &(key_id, min, max) in &advertised {
        let key = ApiKey::try_from(key_id)
            .unwrap_or_else(|_| panic!("advertised API key {key_id} unknown to kafka-protocol"));
        let sample = build(key, max, &fx);
        let (req_v, resp_v) = (sample.request_versions, sample.response_versions);
        assert!(
            max <= req_v.max && max <= resp_v.max,
            "{key:?} advertised up to v{max}; kafka-protocol decodes requests up to v{} and \
             encodes responses up to v{}",
            req_v.max,
            resp_v.max
        );
        for v in min..=max {
            let result = if v < req_v.min || v < resp_v.min {
                assert!(
                    key == ApiKey::Produce && v < 3,
                    "{key:?} v{v} is advertised but kafka-protocol serves only v{}-v{}",
                    req_v.min.max(resp_v.min),
                    req_v.max.min(resp_v.max)
                );
                produce_below_v3_closes(&b, v)
            } else {
                let r = check(&mut c, key, v, &build(key, v, &fx));
                if r.is_err() {
                    c = b.connect();
                } else {
                    answered += 1;
                }
                r
            };
            if let Err(e) = result {
                failures.push(format!("{key:?} v{v}: {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} advertised versions fail:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
    // Every listed key was exercised: the sum of the ranges, less Produce v0-v2.
    let expected: i32 = advertised
        .iter()
        .map(|&(_, min, max)| (max - min + 1) as i32)
        .sum::<i32>()
        - 3;
    assert_eq!(answered, expected);
}
