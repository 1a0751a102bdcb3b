//! Mapping of domain errors (controller, partition, log store) to Kafka error codes.

use kafka_protocol::ResponseError as E;

use crate::cluster::{PartitionError, TopicError};
use crate::log::{AppendError, BatchError, ReadError};
use crate::producer::ProducerError;

pub fn topic_error_code(e: &TopicError) -> i16 {
    match e {
        TopicError::AlreadyExists(_) => E::TopicAlreadyExists.code(),
        TopicError::InvalidTopic(_) => E::InvalidTopicException.code(),
        TopicError::InvalidPartitions(_) => E::InvalidPartitions.code(),
        TopicError::InvalidReplicationFactor(_) => E::InvalidReplicationFactor.code(),
        TopicError::InvalidConfig(_) => E::InvalidConfig.code(),
        TopicError::InvalidReplicaAssignment(_) => E::InvalidReplicaAssignment.code(),
        TopicError::PolicyViolation(_) => E::PolicyViolation.code(),
        TopicError::UnknownTopic => E::UnknownTopicOrPartition.code(),
        TopicError::Storage(_) => E::KafkaStorageError.code(),
        TopicError::Timeout(_) => E::RequestTimedOut.code(),
    }
}

pub fn topic_error_message(e: &TopicError) -> Option<String> {
    match e {
        TopicError::AlreadyExists(m)
        | TopicError::InvalidTopic(m)
        | TopicError::InvalidPartitions(m)
        | TopicError::InvalidReplicationFactor(m)
        | TopicError::InvalidConfig(m)
        | TopicError::InvalidReplicaAssignment(m)
        | TopicError::PolicyViolation(m)
        | TopicError::Storage(m)
        | TopicError::Timeout(m) => Some(m.clone()),
        TopicError::UnknownTopic => Some("This server does not host this topic-partition.".into()),
    }
}

pub fn partition_error_code(e: &PartitionError) -> i16 {
    match e {
        PartitionError::NotLeader => E::NotLeaderOrFollower.code(),
        PartitionError::FencedLeaderEpoch => E::FencedLeaderEpoch.code(),
        PartitionError::UnknownLeaderEpoch => E::UnknownLeaderEpoch.code(),
        PartitionError::NotEnoughReplicas { .. } => E::NotEnoughReplicas.code(),
        PartitionError::Append(a) => append_error_code(a),
        PartitionError::Producer(p) => producer_error_code(p),
        PartitionError::Read(ReadError::OffsetOutOfRange { .. }) => E::OffsetOutOfRange.code(),
        PartitionError::Read(_) => E::KafkaStorageError.code(),
        PartitionError::Storage(_) => E::KafkaStorageError.code(),
    }
}

fn append_error_code(e: &AppendError) -> i16 {
    match e {
        AppendError::Batch(b) => match b {
            BatchError::Corrupt { .. } => E::CorruptMessage.code(),
            BatchError::TooLarge { .. } => E::MessageTooLarge.code(),
            BatchError::UnsupportedMagic { .. } => E::UnsupportedForMessageFormat.code(),
            BatchError::InvalidRecord { .. } => E::InvalidRecord.code(),
        },
        AppendError::RecordSetTooLarge { .. } => E::RecordListTooLarge.code(),
        _ => E::KafkaStorageError.code(),
    }
}

fn producer_error_code(e: &ProducerError) -> i16 {
    match e {
        ProducerError::InvalidEpoch(_) => E::InvalidProducerEpoch.code(),
        ProducerError::OutOfOrderSequence(_) => E::OutOfOrderSequenceNumber.code(),
        ProducerError::InvalidSequence(_) | ProducerError::InvalidRecord(_) => {
            E::InvalidRecord.code()
        }
        ProducerError::InvalidTxnState(_) => E::InvalidTxnState.code(),
        ProducerError::CoordinatorFenced(_) => E::TransactionCoordinatorFenced.code(),
    }
}
