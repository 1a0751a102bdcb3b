//! CreatePartitions (key 37), versions 0-3: grows topics to a requested partition count.
//!
//! Behaviour (Kafka 4.4's `ControllerApis.createPartitions` and
//! `ReplicationControlManager.createPartitions`):
//! * A name given more than once: INVALID_REQUEST "Duplicate topic name." once, first in the
//!   results; those entries are not acted on.
//! * A topic the principal may not ALTER: TOPIC_AUTHORIZATION_FAILED (no message), after the
//!   duplicates and before the others; it does not count towards the limit below.
//! * More than 10,000 partitions added by the whole request: every entry gets
//!   POLICY_VIOLATION and nothing changes.
//! * Per topic: unknown name UNKNOWN_TOPIC_OR_PARTITION (no message); the same or a lower count
//!   INVALID_PARTITIONS; manual assignments must number the added partitions and name
//!   distinct registered brokers, as many as the topic's replication factor
//!   (INVALID_REPLICA_ASSIGNMENT). The new partitions are placed on this node whatever the
//!   assignment says (it is the only broker an assignment can name). Internal topics are grown
//!   like any other, as Kafka does. Beyond Kafka: at most `MAX_PARTITIONS_PER_TOPIC` in all.
//! * validate_only answers as a real run would, without changing anything.
//!
//! Version notes: v1 is the same as v0; v2 is flexible (KIP-482); v3 may answer
//! THROTTLING_QUOTA_EXCEEDED (KIP-599), which never happens here (no mutation quota).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreatePartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::authz::{self, Op};
use super::{ApiSpec, RequestCtx};
use crate::cluster::TopicError;
use crate::cluster::control::new_partitions::{
    MAX_ADDITIONAL_PARTITIONS_PER_REQUEST, additional_in_request, request_too_large,
};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::CreatePartitions,
    min: 0,
    max: 3,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

fn result(name: &TopicName, code: i16, message: Option<String>) -> CreatePartitionsTopicResult {
    let mut r = CreatePartitionsTopicResult::default();
    r.name = name.clone();
    r.error_code = code;
    r.error_message = message.map(StrBytes::from_string);
    r
}

fn error(name: &TopicName, e: &TopicError) -> CreatePartitionsTopicResult {
    let message = match e {
        TopicError::UnknownTopic => None,
        e => super::errors::topic_error_message(e),
    };
    result(name, super::errors::topic_error_code(e), message)
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: CreatePartitionsRequest = super::decode(&ctx, body)?;
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for t in &req.topics {
        *seen.entry(t.name.0.as_str()).or_default() += 1;
    }
    let unique =
        |t: &&kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic| {
            seen[t.name.0.as_str()] == 1
        };
    let allowed =
        |t: &&kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic| {
            ctx.may_topic(&b, Op::Alter, t.name.0.as_str())
        };
    let mut resp = CreatePartitionsResponse::default();
    let added = additional_in_request(req.topics.iter().filter(unique).filter(allowed).map(|t| {
        let current = b.controller.topic(&t.name.0).map(|i| i.partition_count);
        (t.count, current)
    }));
    if added > MAX_ADDITIONAL_PARTITIONS_PER_REQUEST {
        let e = request_too_large();
        resp.results = req
            .topics
            .iter()
            .map(|t| match allowed(&t) {
                true => error(&t.name, &e),
                false => result(&t.name, authz::topic_denied(), None),
            })
            .collect();
        return super::respond(&ctx, &resp);
    }
    let mut reported = std::collections::HashSet::new();
    for t in req.topics.iter().filter(|t| !unique(t)) {
        if reported.insert(t.name.0.as_str()) {
            let code = ResponseError::InvalidRequest.code();
            let message = Some("Duplicate topic name.".to_string());
            resp.results.push(result(&t.name, code, message));
        }
    }
    for t in req.topics.iter().filter(unique).filter(|t| !allowed(t)) {
        resp.results
            .push(result(&t.name, authz::topic_denied(), None));
    }
    for t in req.topics.iter().filter(unique).filter(allowed) {
        let assignments: Option<Vec<Vec<i32>>> = t.assignments.as_ref().map(|a| {
            a.iter()
                .map(|p| p.broker_ids.iter().map(|id| id.0).collect())
                .collect()
        });
        let name = t.name.0.as_str();
        let done = b
            .node()
            .create_partitions(name, t.count, assignments, req.validate_only)
            .await;
        resp.results.push(match done {
            Ok(()) => result(&t.name, 0, None),
            Err(e) => error(&t.name, &e),
        });
    }
    super::respond(&ctx, &resp)
}
