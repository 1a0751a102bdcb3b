//! The authorization checks the handlers share, one per resource kind, over
//! [`RequestCtx::authorize`] (which allows everything when no authorizer is configured).
//! Error codes are Kafka's: TOPIC_, GROUP_, CLUSTER_ and TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

use kafka_protocol::ResponseError;

use super::RequestCtx;
use crate::broker::Broker;
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
    pub fn may_topic(&self, b: &Broker, op: Op, name: &str) -> bool {
        self.authorize(b, op, ResourceType::Topic, name)
    }

    /// Whether the principal may do `op` on group `name`.
    pub fn may_group(&self, b: &Broker, op: Op, name: &str) -> bool {
        self.authorize(b, op, ResourceType::Group, name)
    }

    /// Whether the principal may do `op` on transactional id `id`.
    pub fn may_txn(&self, b: &Broker, op: Op, id: &str) -> bool {
        self.authorize(b, op, ResourceType::TransactionalId, id)
    }

    /// None when the principal may do `op` on topic `name`, else TOPIC_AUTHORIZATION_FAILED.
    pub fn topic_error(&self, b: &Broker, op: Op, name: &str) -> Option<i16> {
        (!self.may_topic(b, op, name)).then(topic_denied)
    }

    /// None when the principal may do `op` on group `name`, else GROUP_AUTHORIZATION_FAILED.
    pub fn group_error(&self, b: &Broker, op: Op, name: &str) -> Option<i16> {
        (!self.may_group(b, op, name)).then(group_denied)
    }

    /// None when the principal may do `op` on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
    pub fn cluster_error(&self, b: &Broker, op: Op) -> Option<i16> {
        (!self.authorize_cluster(b, op)).then(cluster_denied)
    }

    /// None when the principal may do `op` on transactional id `id`, else
    /// TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
    pub fn txn_error(&self, b: &Broker, op: Op, id: &str) -> Option<i16> {
        (!self.may_txn(b, op, id)).then(txn_denied)
    }

    /// The authorized operations of `(rt, name)` when `requested`, else Kafka's "not
    /// requested" value.
    pub fn ops_if(&self, b: &Broker, requested: bool, rt: ResourceType, name: &str) -> i32 {
        if requested {
            self.authorized_operations(b, rt, name)
        } else {
            OPS_NOT_REQUESTED
        }
    }

    /// Whether the principal may create topic `name`: CREATE on the cluster or on the topic.
    pub fn may_create_topic(&self, b: &Broker, name: &str) -> bool {
        self.authorize_cluster(b, Op::Create) || self.may_topic(b, Op::Create, name)
    }
}
