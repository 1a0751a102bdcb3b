//! CreateTopics (key 19), versions 2-7.
//!
//! num_partitions / replication_factor of -1 take num.partitions / default.replication.factor;
//! a replication factor above the live broker count gives INVALID_REPLICATION_FACTOR; topic
//! configs are validated (INVALID_CONFIG); validate_only checks without creating. From v5 the
//! result carries the partition count, replication factor and the topic's configs; from v7
//! the topic id.

use crate::cluster::control::active::CreateTopic;
use crate::cluster::control::new_partitions::MAX_ADDITIONAL_PARTITIONS_PER_REQUEST;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::cluster::TopicError;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::CreateTopics,
    min: 2,
    max: 7,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

/// Config source codes of DescribeConfigs / CreateTopics.
const SOURCE_TOPIC: i8 = 1;
const SOURCE_DEFAULT: i8 = 5;

fn config_entries(b: &Base, set: &BTreeMap<String, String>) -> Vec<CreatableTopicConfigs> {
    let eff = crate::cluster::topic_config::effective(&b.controller.defaults().merged, set);
    let defaults: [(&str, String); 8] = [
        ("cleanup.policy", "delete".to_string()),
        ("max.message.bytes", eff.max_message_bytes.to_string()),
        (
            "message.timestamp.type",
            if eff.log_append_time {
                "LogAppendTime"
            } else {
                "CreateTime"
            }
            .to_string(),
        ),
        ("min.insync.replicas", eff.min_insync_replicas.to_string()),
        ("retention.bytes", eff.log.retention_bytes.to_string()),
        ("retention.ms", eff.log.retention_ms.to_string()),
        ("segment.bytes", eff.log.segment_bytes.to_string()),
        ("segment.ms", eff.log.roll_ms.to_string()),
    ];
    let mut out: Vec<CreatableTopicConfigs> = Vec::new();
    let mut push = |name: &str, value: &str, source: i8| {
        let mut c = CreatableTopicConfigs::default();
        c.name = StrBytes::from_string(name.to_string());
        c.value = Some(StrBytes::from_string(value.to_string()));
        c.config_source = source;
        out.push(c);
    };
    for (k, v) in set {
        push(k, v, SOURCE_TOPIC);
    }
    for (k, v) in defaults.iter() {
        if !set.contains_key(*k) {
            push(k, v, SOURCE_DEFAULT);
        }
    }
    out.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
    out
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: CreateTopicsRequest = super::decode(&ctx, body)?;
    let v = ctx.version;
    let mut counts: HashMap<String, usize> = HashMap::new();
    for t in &req.topics {
        *counts.entry(t.name.0.to_string()).or_default() += 1;
    }
    // Kafka's controller refuses a request whose topics (those not refused already as
    // duplicates or unauthorised) would add more than 10,000 partitions in all, every one of
    // them with POLICY_VIOLATION: one metadata operation stays bounded.
    let requested: i64 = req
        .topics
        .iter()
        .filter(|t| counts[t.name.0.as_str()] == 1 && ctx.may_create_topic(&b, &t.name.0))
        .map(|t| match (t.assignments.len(), t.num_partitions) {
            (0, -1) => b.config.num_partitions.max(0) as i64,
            (0, n) => n.max(0) as i64,
            (n, _) => n as i64,
        })
        .sum();
    let too_large = requested > MAX_ADDITIONAL_PARTITIONS_PER_REQUEST;
    let mut resp = CreateTopicsResponse::default();
    for t in req.topics {
        let name = t.name.0.to_string();
        let mut r = CreatableTopicResult::default();
        r.name = t.name.clone();
        r.num_partitions = -1;
        r.replication_factor = -1;
        // Null unless an error sets one, as Kafka (the crate's default is "").
        r.error_message = None;
        // After the duplicate check: CREATE on the cluster or the topic.
        if counts[&name] == 1 && !ctx.may_create_topic(&b, &name) {
            r.error_code = super::authz::topic_denied();
            r.error_message = Some(StrBytes::from_static_str("Authorization failed."));
            resp.topics.push(r);
            continue;
        }
        let request: Result<(i32, i16, BTreeMap<String, String>), TopicError> = (|| {
            if counts[&name] > 1 {
                return Err(TopicError::InvalidTopic(format!(
                    "Create topics request from client contains multiple entries for topic {name}"
                )));
            }
            if too_large {
                return Err(TopicError::PolicyViolation(
                    "Excessively large number of partitions per request.".into(),
                ));
            }
            let mut configs = BTreeMap::new();
            for c in &t.configs {
                match &c.value {
                    Some(val) => {
                        configs.insert(c.name.to_string(), val.to_string());
                    }
                    None => {
                        return Err(TopicError::InvalidConfig(format!(
                            "Null value not supported for topic configs: {}",
                            c.name.as_str()
                        )));
                    }
                }
            }
            let (partitions, rf) = if !t.assignments.is_empty() {
                if t.num_partitions != -1 || t.replication_factor != -1 {
                    return Err(TopicError::InvalidTopic(
                        "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.".into(),
                    ));
                }
                for (i, a) in t.assignments.iter().enumerate() {
                    if a.partition_index != i as i32 {
                        return Err(TopicError::InvalidPartitions(
                            "Unexpected partition indices in replica assignment".into(),
                        ));
                    }
                }
                (
                    t.assignments.len() as i32,
                    t.assignments[0].broker_ids.len() as i16,
                )
            } else {
                (
                    if t.num_partitions == -1 {
                        b.config.num_partitions
                    } else {
                        t.num_partitions
                    },
                    if t.replication_factor == -1 {
                        b.config.default_replication_factor
                    } else {
                        t.replication_factor
                    },
                )
            };
            Ok((partitions, rf, configs))
        })();
        let result = match request {
            Ok((partitions, rf, configs)) => {
                let assignments = (!t.assignments.is_empty()).then(|| {
                    t.assignments
                        .iter()
                        .map(|a| a.broker_ids.iter().map(|id| id.0).collect())
                        .collect()
                });
                let ct = CreateTopic {
                    name: name.clone(),
                    num_partitions: partitions,
                    replication_factor: rf,
                    assignments,
                    configs: configs.clone(),
                };
                match b
                    .node()
                    .create_topics(vec![ct], req.validate_only)
                    .await
                    .pop()
                {
                    Some(r) => r.map(|id| (id, partitions, rf, configs)),
                    None => Err(TopicError::UnknownTopic),
                }
            }
            Err(e) => Err(e),
        };
        match result {
            Ok((id, partitions, rf, configs)) => {
                if v >= 7 {
                    r.topic_id = id;
                }
                if v >= 5 && !ctx.may_topic(&b, super::authz::Op::DescribeConfigs, &name) {
                    r.topic_config_error_code = super::authz::topic_denied();
                    r.configs = Some(Vec::new());
                } else if v >= 5 {
                    r.num_partitions = partitions;
                    r.replication_factor = rf;
                    r.configs = Some(config_entries(&b, &configs));
                }
            }
            Err(e) => {
                r.error_code = if matches!(&e, TopicError::InvalidTopic(m) if m.contains("multiple entries"))
                {
                    ResponseError::InvalidRequest.code()
                } else {
                    super::errors::topic_error_code(&e)
                };
                r.error_message = super::errors::topic_error_message(&e).map(StrBytes::from_string);
            }
        }
        resp.topics.push(r);
    }
    super::respond(&ctx, &resp)
}
