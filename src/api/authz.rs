//! The authorization checks the handlers share, one per resource kind, over
//! [`RequestCtx::authorize`] (which allows everything when no authorizer is configured).
//! Error codes are Kafka's: TOPIC_, GROUP_, CLUSTER_ and TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

use kafka_protocol::ResponseError;

use super::Base;
use super::RequestCtx;
pub use crate::security::acl::AclOperation as Op;
use crate::security::acl::ResourceType;

/// Kafka's message for CLUSTER_AUTHORIZATION_FAILED when a whole request is refused.
pub const CLUSTER_DENIED_MESSAGE: &str = "Cluster authorization failed.";

/// The authorized-operations value of a request that did not ask for them.
pub const OPS_NOT_REQUESTED: i32 = i32::MIN;

pub fn topic_denied() -> i16 {
    ResponseError::TopicAuthorizationFailed.code()
}

pub fn group_denied() -> i16 {
    ResponseError::GroupAuthorizationFailed.code()
}

pub fn cluster_denied() -> i16 {
    ResponseError::ClusterAuthorizationFailed.code()
}

pub fn txn_denied() -> i16 {
    ResponseError::TransactionalIdAuthorizationFailed.code()
}

impl RequestCtx {
    /// Whether the principal may do `op` on topic `name`.
    pub fn may_topic(&self, b: &Base, op: Op, name: &str) -> bool {
        self.authorize(b, op, ResourceType::Topic, name)
    }

    /// Whether the principal may do `op` on group `name`.
    pub fn may_group(&self, b: &Base, op: Op, name: &str) -> bool {
        self.authorize(b, op, ResourceType::Group, name)
    }

    /// Whether the principal may do `op` on transactional id `id`.
    pub fn may_txn(&self, b: &Base, op: Op, id: &str) -> bool {
        self.authorize(b, op, ResourceType::TransactionalId, id)
    }

    /// None when the principal may do `op` on topic `name`, else TOPIC_AUTHORIZATION_FAILED.
    pub fn topic_error(&self, b: &Base, op: Op, name: &str) -> Option<i16> {
        (!self.may_topic(b, op, name)).then(topic_denied)
    }

    /// None when the principal may do `op` on group `name`, else GROUP_AUTHORIZATION_FAILED.
    pub fn group_error(&self, b: &Base, op: Op, name: &str) -> Option<i16> {
        (!self.may_group(b, op, name)).then(group_denied)
    }

    /// None when the principal may do `op` on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
    pub fn cluster_error(&self, b: &Base, op: Op) -> Option<i16> {
        (!self.authorize_cluster(b, op)).then(cluster_denied)
    }

    /// None when the principal may do `op` on transactional id `id`, else
    /// TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
    pub fn txn_error(&self, b: &Base, op: Op, id: &str) -> Option<i16> {
        (!self.may_txn(b, op, id)).then(txn_denied)
    }

    /// The authorized operations of `(rt, name)` when `requested`, else Kafka's "not
    /// requested" value.
    pub fn ops_if(&self, b: &Base, requested: bool, rt: ResourceType, name: &str) -> i32 {
        if requested {
            self.authorized_operations(b, rt, name)
        } else {
            OPS_NOT_REQUESTED
        }
    }

    /// Whether the principal may create topic `name`: CREATE on the cluster or on the topic.
    pub fn may_create_topic(&self, b: &Base, name: &str) -> bool {
        self.authorize_cluster(b, Op::Create) || self.may_topic(b, Op::Create, name)
    }
}

/// DeleteTopics' refusal of one topic, if any, as Kafka's `ControllerApis.deleteTopics`
/// decides it from whether it was named by id, whether it exists, and whether the principal
/// may DESCRIBE and DELETE it (both true with DELETE on the cluster). A name the principal may
/// not describe is refused before its existence is told; an id is resolved first (an unknown
/// id is the handler's UNKNOWN_TOPIC_ID). The flag says whether an id's resolved name may be
/// returned (only when the principal may describe the topic).
pub fn delete_topic_refusal(
    by_id: bool,
    exists: bool,
    may_describe: bool,
    may_delete: bool,
) -> Option<(i16, bool)> {
    if by_id {
        return (exists && !may_delete).then(|| (topic_denied(), may_describe));
    }
    if !may_describe || (exists && !may_delete) {
        return Some((topic_denied(), true));
    }
    None
}

/// Kafka's message for an authorization error code (`Errors.message()`), empty for others.
pub fn denied_message(code: i16) -> &'static str {
    match ResponseError::try_from_code(code) {
        Some(ResponseError::TopicAuthorizationFailed) => "Topic authorization failed.",
        Some(ResponseError::GroupAuthorizationFailed) => "Group authorization failed.",
        Some(ResponseError::ClusterAuthorizationFailed) => "Cluster authorization failed.",
        Some(ResponseError::TransactionalIdAuthorizationFailed) => {
            "Transactional Id authorization failed."
        }
        _ => "",
    }
}

impl RequestCtx {
    /// None when the principal may do `op` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on the config
    /// resource `(resource_type, name)`, else the kind's error: topics (2) and groups (32) are
    /// checked by name, brokers (4), broker loggers (8) and client metrics (16) on the
    /// cluster. Other types are left to the handler's own validation.
    pub fn config_resource_error(
        &self,
        b: &Base,
        op: Op,
        resource_type: i8,
        name: &str,
    ) -> Option<i16> {
        match resource_type {
            2 => self.topic_error(b, op, name),
            4 | 8 | 16 => self.cluster_error(b, op),
            32 => self.group_error(b, op, name),
            _ => None,
        }
    }
}

#[cfg(test)]
mod data_plane_tests {
    use super::*;

    #[test]
    fn delete_topics_by_name_hides_existence_without_describe() {
        let denied = Some((topic_denied(), true));
        // (exists, may_describe, may_delete)
        assert_eq!(delete_topic_refusal(false, true, false, false), denied);
        assert_eq!(delete_topic_refusal(false, false, false, false), denied);
        assert_eq!(delete_topic_refusal(false, false, false, true), denied);
        assert_eq!(delete_topic_refusal(false, true, true, false), denied);
        // Describable but unknown: the handler's UNKNOWN_TOPIC_OR_PARTITION.
        assert_eq!(delete_topic_refusal(false, false, true, false), None);
        assert_eq!(delete_topic_refusal(false, true, true, true), None);
    }

    #[test]
    fn delete_topics_by_id_withholds_the_name_without_describe() {
        assert_eq!(
            delete_topic_refusal(true, true, false, false),
            Some((topic_denied(), false))
        );
        assert_eq!(
            delete_topic_refusal(true, true, true, false),
            Some((topic_denied(), true))
        );
        // An unknown id is the handler's UNKNOWN_TOPIC_ID, whatever the ACLs.
        assert_eq!(delete_topic_refusal(true, false, false, false), None);
        assert_eq!(delete_topic_refusal(true, true, false, true), None);
    }

    #[test]
    fn denied_messages_are_kafkas() {
        assert_eq!(
            denied_message(topic_denied()),
            "Topic authorization failed."
        );
        assert_eq!(
            denied_message(group_denied()),
            "Group authorization failed."
        );
        assert_eq!(
            denied_message(cluster_denied()),
            "Cluster authorization failed."
        );
        assert_eq!(denied_message(0), "");
    }
}
