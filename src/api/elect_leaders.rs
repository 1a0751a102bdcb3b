//! ElectLeaders (key 43), versions 0-2 (`kafka-leader-election`).
//!
//! Behavior:
//! - PREFERRED (0) moves leadership to the first replica if it is in the ISR and live;
//!   UNCLEAN (1) elects a live replica outside the ISR for a partition without a leader.
//!   Other election types are INVALID_REQUEST.
//! - Per partition, as Kafka's controller: ELECTION_NOT_NEEDED when the wanted leader
//!   already leads (PREFERRED) or a leader exists (UNCLEAN), PREFERRED_LEADER_NOT_AVAILABLE,
//!   ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION ("No such topic as t" /
//!   "No such partition as t-p"); the other errors carry Kafka's default messages.
//! - Null topics (`--all-topic-partitions`): every topic is listed, with only the partitions
//!   for which an election was needed (those elected, and those that failed otherwise).
//! - In a cluster the active controller decides and commits; the answer waits until this
//!   broker's image shows the new leaders. On one node the only replica always leads, so
//!   every known partition is ELECTION_NOT_NEEDED, as on a Kafka node of one.
//!
//! - Without ALTER on the cluster nothing is elected: CLUSTER_AUTHORIZATION_FAILED at the top
//!   (v1+) and for every named partition.
//!
//! Version notes: v1 adds the election type (KIP-460) and the top-level error code; v2 is
//! flexible.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ApiKey, ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::cluster::control::active::ControlError;
use crate::cluster::control::election::ElectionRefused;
use crate::cluster::metadata::MetadataImage;
use crate::cluster::node::{ClusterNode, ControllerReply, ControllerRequest};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::ElectLeaders,
    min: 0,
    max: 2,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

const PREFERRED: i8 = 0;
const UNCLEAN: i8 = 1;

/// One partition's outcome: `None` elected, else the error code and message.
type Outcome = Option<(i16, String)>;

fn refused(e: ResponseError) -> Outcome {
    Some((e.code(), super::errors::default_message(e)))
}

fn unknown_topic(topic: &str) -> Outcome {
    Some((
        ResponseError::UnknownTopicOrPartition.code(),
        format!("No such topic as {topic}"),
    ))
}

fn unknown_partition(topic: &str, partition: i32) -> Outcome {
    Some((
        ResponseError::UnknownTopicOrPartition.code(),
        format!("No such partition as {topic}-{partition}"),
    ))
}

fn encode(results: Vec<(String, Vec<(i32, Outcome)>)>) -> Vec<ReplicaElectionResult> {
    results
        .into_iter()
        .map(|(topic, parts)| {
            let mut t = ReplicaElectionResult::default();
            t.topic = TopicName(StrBytes::from_string(topic));
            t.partition_result = parts
                .into_iter()
                .map(|(p, outcome)| {
                    let mut r = PartitionResult::default();
                    r.partition_id = p;
                    r.error_message = None;
                    if let Some((code, message)) = outcome {
                        r.error_code = code;
                        r.error_message = Some(StrBytes::from_string(message));
                    }
                    r
                })
                .collect();
            t
        })
        .collect()
}

/// Every requested partition failed with `code` and `message`.
fn all_failed(
    wanted: Option<Vec<(String, Vec<i32>)>>,
    code: i16,
    message: &str,
) -> Vec<ReplicaElectionResult> {
    let failed = wanted
        .unwrap_or_default()
        .into_iter()
        .map(|(t, ps)| {
            let outcomes = ps
                .into_iter()
                .map(|p| (p, Some((code, message.to_string()))))
                .collect();
            (t, outcomes)
        })
        .collect();
    encode(failed)
}

/// The requested partitions grouped by topic, in request order (`None`: all).
fn wanted(req: &ElectLeadersRequest) -> Option<Vec<(String, Vec<i32>)>> {
    req.topic_partitions.as_ref().map(|tps| {
        tps.iter()
            .map(|tp| (tp.topic.0.to_string(), tp.partitions.clone()))
            .collect()
    })
}

fn control_outcome(img: &MetadataImage, topic: &str, partition: i32, e: ControlError) -> Outcome {
    match e {
        ControlError::Election(ElectionRefused::NotNeeded) => {
            refused(ResponseError::ElectionNotNeeded)
        }
        ControlError::Election(ElectionRefused::PreferredNotAvailable) => {
            refused(ResponseError::PreferredLeaderNotAvailable)
        }
        ControlError::Election(ElectionRefused::EligibleNotAvailable) => {
            refused(ResponseError::EligibleLeadersNotAvailable)
        }
        ControlError::UnknownTopicOrPartition if img.topic(topic).is_none() => unknown_topic(topic),
        ControlError::UnknownTopicOrPartition => unknown_partition(topic, partition),
        ControlError::InvalidRequest(m) => Some((ResponseError::InvalidRequest.code(), m)),
        other => Some((
            ResponseError::UnknownServerError.code(),
            format!("{other:?}"),
        )),
    }
}

async fn cluster(
    c: &ClusterNode,
    unclean: bool,
    wanted: Option<Vec<(String, Vec<i32>)>>,
) -> Vec<ReplicaElectionResult> {
    let all = wanted.is_none();
    let partitions: Option<Vec<(String, i32)>> = wanted.as_ref().map(|w| {
        w.iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
            .collect()
    });
    let reply = c
        .call(ControllerRequest::ElectLeaders {
            unclean,
            partitions: partitions.clone(),
        })
        .await;
    let elections = match reply {
        Ok(ControllerReply::Elections(e)) => e,
        other => {
            let message = match other {
                Ok(r) => format!("unexpected controller answer {r:?}"),
                Err(e) => format!("the controller did not answer: {e}"),
            };
            return all_failed(wanted, ResponseError::RequestTimedOut.code(), &message);
        }
    };
    // Wait until this broker's image shows every elected leader.
    let elected: Vec<(String, i32)> = elections
        .iter()
        .filter(|(_, _, r)| r.is_ok())
        .map(|(t, p, _)| (t.clone(), *p))
        .collect();
    if !elected.is_empty() {
        c.wait_applied(|c| {
            let img = c.image();
            elected.iter().all(|(t, p)| {
                img.topic(t)
                    .and_then(|ti| img.partition(&ti.id, *p))
                    .is_some_and(|rec| {
                        if unclean {
                            rec.has_leader()
                        } else {
                            rec.replicas.first() == Some(&rec.leader)
                        }
                    })
            })
        })
        .await;
    }
    let img = c.image();
    let mut by_topic: BTreeMap<String, Vec<(i32, Outcome)>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for (t, p, r) in elections {
        let outcome = match r {
            Ok(()) => None,
            Err(e) => control_outcome(&img, &t, p, e),
        };
        if !by_topic.contains_key(&t) {
            order.push(t.clone());
        }
        let parts = by_topic.entry(t).or_default();
        let not_needed =
            matches!(&outcome, Some((code, _)) if *code == ResponseError::ElectionNotNeeded.code());
        if !(all && not_needed) {
            parts.push((p, outcome));
        }
    }
    encode(
        order
            .into_iter()
            .map(|t| {
                let parts = by_topic.remove(&t).unwrap_or_default();
                (t, parts)
            })
            .collect(),
    )
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: ElectLeadersRequest = super::decode(&ctx, body)?;
    let mut resp = ElectLeadersResponse::default();
    let election_type = if ctx.version >= 1 {
        req.election_type
    } else {
        PREFERRED
    };
    let wanted = wanted(&req);
    if let Some(code) = ctx.cluster_error(&b, super::authz::Op::Alter) {
        if ctx.version >= 1 {
            resp.error_code = code;
        }
        let message = super::authz::CLUSTER_DENIED_MESSAGE;
        resp.replica_election_results = all_failed(wanted, code, message);
        return super::respond(&ctx, &resp);
    }
    if election_type != PREFERRED && election_type != UNCLEAN {
        let message = format!("Unknown election type {election_type}");
        let code = ResponseError::InvalidRequest.code();
        resp.error_code = code;
        resp.replica_election_results = all_failed(wanted, code, &message);
        return super::respond(&ctx, &resp);
    }
    resp.replica_election_results = cluster(b.node(), election_type == UNCLEAN, wanted).await;
    super::respond(&ctx, &resp)
}
