//! A transaction's COMMIT or ABORT markers, as the coordinator hands them to a
//! [`MarkerWriter`]: the broker's writer (`api::txn_markers`) sends each partition's marker
//! to that partition's leader, as Kafka's TransactionMarkerChannelManager does. Every marker
//! is written with acks=all (the markers must survive the loss of a broker as the data they
//! settle does).
//!
//! [`classify`] is Kafka's TransactionMarkerRequestCompletionHandler's judgement of each
//! partition's answer: written (or the partition is gone), retry (the leader moved, too few
//! replicas, a timeout), or give up (a newer producer epoch or coordinator has taken over).

use std::future::Future;
use std::pin::Pin;

use kafka_protocol::ResponseError as E;

use super::state::TopicPartition;
use crate::producer::TxnMarker;

/// The WriteTxnMarkers version brokers send each other (the one kafka-protocol has).
pub const WRITE_TXN_MARKERS_VERSION: i16 = 1;

/// One transaction's markers, for the partitions still without one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerRequest {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    pub commit: bool,
    pub transaction_version: i16,
    pub partitions: Vec<TopicPartition>,
}

impl MarkerRequest {
    pub fn marker(&self) -> TxnMarker {
        TxnMarker {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            coordinator_epoch: self.coordinator_epoch,
            commit: self.commit,
            transaction_version: self.transaction_version,
        }
    }
}

/// What became of one partition's marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The leader's answer (0: written).
    Code(i16),
    /// The partition no longer exists (its topic was deleted): nothing to write.
    Gone,
}

pub type MarkerFuture<'a> =
    Pin<Box<dyn Future<Output = Vec<(TopicPartition, Written)>> + Send + 'a>>;

pub trait MarkerWriter: Send + Sync {
    fn write<'a>(&'a self, m: &'a MarkerRequest) -> MarkerFuture<'a>;
}

/// What the coordinator does with a partition's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The partition needs no marker any more.
    Done,
    /// Send it again (to the partition's leader then).
    Retry,
    /// Stop completing this transaction: the producer or coordinator epoch has moved on.
    Abandon,
}

pub fn classify(w: Written) -> Outcome {
    let Written::Code(code) = w else {
        return Outcome::Done;
    };
    match E::try_from_code(code) {
        None => Outcome::Done,
        Some(E::InvalidProducerEpoch | E::TransactionCoordinatorFenced) => Outcome::Abandon,
        // The producer could not have written to such a partition: nothing to settle.
        Some(E::UnsupportedForMessageFormat | E::UnsupportedVersion) => Outcome::Done,
        // Retriable (leader moved, too few replicas, timeouts, storage) and anything
        // unexpected: tried again, with a backoff.
        Some(_) => Outcome::Retry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_judged_as_kafka_judges_them() {
        assert_eq!(classify(Written::Code(0)), Outcome::Done);
        assert_eq!(classify(Written::Gone), Outcome::Done);
        for e in [
            E::UnknownTopicOrPartition,
            E::NotLeaderOrFollower,
            E::NotEnoughReplicas,
            E::NotEnoughReplicasAfterAppend,
            E::RequestTimedOut,
            E::KafkaStorageError,
            E::NetworkException,
        ] {
            assert_eq!(classify(Written::Code(e.code())), Outcome::Retry, "{e:?}");
        }
        for e in [E::InvalidProducerEpoch, E::TransactionCoordinatorFenced] {
            assert_eq!(classify(Written::Code(e.code())), Outcome::Abandon, "{e:?}");
        }
        assert_eq!(
            classify(Written::Code(E::UnsupportedForMessageFormat.code())),
            Outcome::Done
        );
    }
}
