//! AlterPartitionReassignments (key 45), versions 0-1 (`kafka-reassign-partitions --execute`
//! and `--cancel`).
//!
//! Behavior, per partition, with Kafka's controller's messages:
//! - an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION ("Unable to find a topic
//!   named t." / "Unable to find partition t:p.");
//! - a target replica list is checked as a manual assignment (INVALID_REPLICA_ASSIGNMENT: an
//!   empty list, an unregistered broker, a broker listed twice); with v1's
//!   `allow_replication_factor_change` false, a target of another size than the current
//!   replica set is INVALID_REPLICATION_FACTOR;
//! - a null target cancels: NO_REASSIGNMENT_IN_PROGRESS when none is.
//!
//! Without ALTER on the cluster nothing changes: CLUSTER_AUTHORIZATION_FAILED at the top and
//! for every partition.
//!
//! In a cluster the active controller starts the reassignment (the replica set grows to the
//! union of old and new; it shrinks to the target once the new replicas are in the ISR) and
//! the answer waits until this broker's image shows the change. On one node the only valid
//! target is this node, which is where every partition already is: nothing changes.
//!
//! Version notes: v1 adds `allow_replication_factor_change` (KIP-1101), echoed in the
//! response.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey,
};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::cluster::control::active::ControlError;
use crate::cluster::control::reassignment::{self, ReassignError};
use crate::cluster::metadata::MetadataImage;
use crate::cluster::node::{ClusterNode, ControllerReply, ControllerRequest};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::AlterPartitionReassignments,
    min: 0,
    max: 1,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

/// An error code and its message (None: Kafka's default, sent as null).
type Failure = (i16, Option<String>);

fn invalid_assignment(m: String) -> Failure {
    (ResponseError::InvalidReplicaAssignment.code(), Some(m))
}

fn unknown_topic(topic: &str) -> Failure {
    (
        ResponseError::UnknownTopicOrPartition.code(),
        Some(format!("Unable to find a topic named {topic}.")),
    )
}

fn unknown_partition(topic: &str, partition: i32) -> Failure {
    (
        ResponseError::UnknownTopicOrPartition.code(),
        Some(format!("Unable to find partition {topic}:{partition}.")),
    )
}

fn none_in_progress() -> Failure {
    (ResponseError::NoReassignmentInProgress.code(), None)
}

/// A target that would change the replication factor when that is not allowed.
fn factor_change(current: usize, target: &[i32], allowed: bool) -> Result<(), Failure> {
    if allowed || target.len() == current {
        return Ok(());
    }
    Err((
        ResponseError::InvalidReplicationFactor.code(),
        Some(format!(
            "The replication factor is changed from {current} to {} but allowReplicationFactorChange is false.",
            target.len()
        )),
    ))
}

/// One item of the request.
struct Item {
    topic: String,
    partition: i32,
    target: Option<Vec<i32>>,
}

/// What the image says before the controller is asked: unknown partitions and factor
/// changes are refused here, with Kafka's messages.
fn precheck(img: &MetadataImage, item: &Item, allow_factor_change: bool) -> Result<(), Failure> {
    let Some(t) = img.topic(&item.topic) else {
        return Err(unknown_topic(&item.topic));
    };
    let Some(p) = img.partition(&t.id, item.partition) else {
        return Err(unknown_partition(&item.topic, item.partition));
    };
    match &item.target {
        Some(target) => {
            reassignment::validate_target(target, &|r| img.brokers.contains_key(&r))
                .map_err(invalid_assignment)?;
            factor_change(
                reassignment::original_replicas(p).len(),
                target,
                allow_factor_change,
            )
        }
        None => Ok(()),
    }
}

fn control_failure(img: &MetadataImage, item: &Item, e: ControlError) -> Failure {
    match e {
        ControlError::Reassign(ReassignError::Invalid(m)) => invalid_assignment(m),
        ControlError::Reassign(ReassignError::NoneInProgress) => none_in_progress(),
        ControlError::UnknownTopicOrPartition if img.topic(&item.topic).is_none() => {
            unknown_topic(&item.topic)
        }
        ControlError::UnknownTopicOrPartition => unknown_partition(&item.topic, item.partition),
        ControlError::InvalidRequest(m) => (ResponseError::InvalidRequest.code(), Some(m)),
        other => (
            ResponseError::UnknownServerError.code(),
            Some(format!("{other:?}")),
        ),
    }
}

/// Whether `img` shows the change `item` asked for: a target is the replica set (done) or
/// its head (in progress, the removed replicas follow); a cancel leaves nothing in progress.
fn applied(img: &MetadataImage, item: &Item) -> bool {
    let Some(p) = img
        .topic(&item.topic)
        .and_then(|t| img.partition(&t.id, item.partition))
    else {
        return false;
    };
    match &item.target {
        Some(target) => p.replicas.starts_with(target),
        None => p.adding.is_empty() && p.removing.is_empty(),
    }
}

async fn cluster(
    c: &ClusterNode,
    items: &[Item],
    allow_factor_change: bool,
) -> Vec<Result<(), Failure>> {
    let img = c.image();
    let mut out: Vec<Result<(), Failure>> = items
        .iter()
        .map(|i| precheck(&img, i, allow_factor_change))
        .collect();
    let asked: Vec<usize> = (0..items.len()).filter(|i| out[*i].is_ok()).collect();
    if asked.is_empty() {
        return out;
    }
    let req = ControllerRequest::Reassign(
        asked
            .iter()
            .map(|&i| {
                (
                    items[i].topic.clone(),
                    items[i].partition,
                    items[i].target.clone(),
                )
            })
            .collect(),
    );
    let results = match c.call(req).await {
        Ok(ControllerReply::Done(r)) if r.len() == asked.len() => r,
        other => {
            let message = match other {
                Ok(r) => format!("unexpected controller answer {r:?}"),
                Err(e) => format!("the controller did not answer: {e}"),
            };
            for &i in &asked {
                out[i] = Err((ResponseError::RequestTimedOut.code(), Some(message.clone())));
            }
            return out;
        }
    };
    let img = c.image();
    for (&i, r) in asked.iter().zip(results) {
        out[i] = r.map_err(|e| control_failure(&img, &items[i], e));
    }
    let done: Vec<&Item> = asked
        .iter()
        .filter(|&&i| out[i].is_ok())
        .map(|&i| &items[i])
        .collect();
    if !done.is_empty() {
        c.wait_applied(|c| {
            let img = c.image();
            done.iter().all(|i| applied(&img, i))
        })
        .await;
    }
    out
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: AlterPartitionReassignmentsRequest = super::decode(&ctx, body)?;
    let allow = ctx.version < 1 || req.allow_replication_factor_change;
    let items: Vec<Item> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| Item {
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                target: p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect()),
            })
        })
        .collect();
    let refused = ctx.cluster_error(&b, super::authz::Op::Alter);
    let results = match refused {
        Some(code) => {
            let msg = super::authz::CLUSTER_DENIED_MESSAGE.to_string();
            let failure: Failure = (code, Some(msg));
            items.iter().map(|_| Err(failure.clone())).collect()
        }
        None => cluster(b.node(), &items, allow).await,
    };
    let mut resp = AlterPartitionReassignmentsResponse::default();
    resp.error_message = None;
    if let Some(code) = refused {
        resp.error_code = code;
        resp.error_message = Some(StrBytes::from_static_str(
            super::authz::CLUSTER_DENIED_MESSAGE,
        ));
    }
    if ctx.version >= 1 {
        resp.allow_replication_factor_change = req.allow_replication_factor_change;
    }
    let mut results = results.into_iter();
    for t in &req.topics {
        let mut tr = ReassignableTopicResponse::default();
        tr.name = t.name.clone();
        for p in &t.partitions {
            let mut pr = ReassignablePartitionResponse::default();
            pr.partition_index = p.partition_index;
            pr.error_message = None;
            if let Some(Err((code, message))) = results.next() {
                pr.error_code = code;
                pr.error_message = message.map(StrBytes::from_string);
            }
            tr.partitions.push(pr);
        }
        resp.responses.push(tr);
    }
    super::respond(&ctx, &resp)
}
