//! Kafka's error codes and messages for the handlers: the domain errors' mapping
//! (`cluster::errors`) and the default messages.

use kafka_protocol::ResponseError as E;

pub use crate::cluster::errors::{partition_error_code, topic_error_code, topic_error_message};

/// Kafka's default message for an error (`Errors.message()`), for the errors sent with one.
pub fn default_message(e: E) -> String {
    match e {
        E::UnknownTopicOrPartition => "This server does not host this topic-partition.",
        E::NotLeaderOrFollower => {
            "For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition."
        }
        E::ElectionNotNeeded => "Leader election not needed for topic partition.",
        E::PreferredLeaderNotAvailable => "The preferred leader was not available.",
        E::EligibleLeadersNotAvailable => "Eligible topic partition leaders are not available.",
        other => return format!("{other}"),
    }
    .to_string()
}
