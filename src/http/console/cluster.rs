//! The brokers page (each broker with the partitions it leads and holds), the topics page
//! (partitions, replication, size on disk) and one topic (its partitions with leader,
//! replicas, ISR and offsets, and its configs).

use std::collections::{BTreeMap, BTreeSet};

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeConfigsRequest, DescribeConfigsResponse, DescribeLogDirsRequest,
    DescribeLogDirsResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest,
    MetadataResponse, TopicName,
    describe_configs_request::DescribeConfigsResource,
    describe_configs_response::DescribeConfigsResult,
    list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
    metadata_request::MetadataRequestTopic,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::{Value, json};

use super::wire::{call, error_name, forward, is_peer, not_leader};
use super::{Answer, Ctx, Failure, admit, answer, query};
use crate::http::HttpState;

/// Metadata v12 for all topics (None) or the named ones.
pub(in crate::http) async fn metadata(
    ctx: &Ctx,
    topics: Option<&[String]>,
) -> anyhow::Result<MetadataResponse> {
    let mut req = MetadataRequest::default();
    req.topics = topics.map(|ts| {
        ts.iter()
            .map(|t| {
                let mut mt = MetadataRequestTopic::default();
                mt.name = Some(TopicName(StrBytes::from_string(t.clone())));
                mt
            })
            .collect()
    });
    req.allow_auto_topic_creation = false;
    call(&ctx.broker, &ctx.session, ApiKey::Metadata, 12, &req).await
}

fn ids(v: &[BrokerId]) -> Vec<i32> {
    v.iter().map(|b| b.0).collect()
}

pub(super) async fn brokers(State(s): State<HttpState>, headers: HeaderMap) -> Response {
    answer(brokers_answer(&s, &headers).await)
}

async fn brokers_answer(s: &HttpState, headers: &HeaderMap) -> Answer {
    let ctx = admit(s, headers)?;
    let md = metadata(&ctx, None).await?;
    let mut leads: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    let mut holds: BTreeMap<i32, usize> = BTreeMap::new();
    let mut partitions = 0;
    for t in &md.topics {
        let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
        for p in &t.partitions {
            partitions += 1;
            leads
                .entry(p.leader_id.0)
                .or_default()
                .push(format!("{name}-{}", p.partition_index));
            for r in &p.replica_nodes {
                *holds.entry(r.0).or_default() += 1;
            }
        }
    }
    let brokers: Vec<Value> = md
        .brokers
        .iter()
        .map(|b| {
            let id = b.node_id.0;
            let led = leads.get(&id).cloned().unwrap_or_default();
            json!({
                "id": id,
                "host": b.host.to_string(),
                "port": b.port,
                "rack": b.rack.as_ref().map(|r| r.to_string()),
                "controller": id == md.controller_id.0,
                "this": id == ctx.broker.node_id(),
                "leader_count": led.len(),
                "replica_count": holds.get(&id).copied().unwrap_or(0),
                "leads": led,
            })
        })
        .collect();
    Ok(json!({
        "cluster_id": md.cluster_id.as_ref().map(|c| c.to_string()),
        "controller_id": md.controller_id.0,
        "node_id": ctx.broker.node_id(),
        "principal": ctx.session.principal.to_string(),
        "read_only": ctx.broker.config.console_read_only,
        "topic_count": md.topics.len(),
        "partition_count": partitions,
        "brokers": brokers,
    }))
}

/// Bytes on disk of each (topic, partition) replica, by broker: DescribeLogDirs v4 here (only
/// the replicas this broker holds) and, on a cluster, on each of `brokers` (a broker that
/// does not answer is left out).
async fn sizes(ctx: &Ctx, brokers: &[i32]) -> anyhow::Result<Sizes> {
    let mut req = DescribeLogDirsRequest::default();
    req.topics = None;
    let key = (ApiKey::DescribeLogDirs, 4);
    let here: DescribeLogDirsResponse = call(&ctx.broker, &ctx.session, key.0, key.1, &req).await?;
    let mut out = Sizes::default();
    let refused = here.error_code != 0;
    add_sizes(&mut out, ctx.broker.node_id(), here);
    if refused {
        return Ok(out);
    }
    for &node in brokers.iter().filter(|n| is_peer(&ctx.broker, **n)) {
        match forward(&ctx.broker, node, key, &req).await {
            Ok(resp) => add_sizes(&mut out, node, resp),
            Err(e) => tracing::debug!("console: no log dir sizes from broker {node}: {e:#}"),
        }
    }
    Ok(out)
}

/// Bytes per (topic, partition) per broker.
#[derive(Default)]
struct Sizes(BTreeMap<(String, i32), BTreeMap<i32, i64>>);

impl Sizes {
    /// The partition's size: its leader's replica, or the largest one when the leader's is
    /// not known.
    fn of(&self, topic: &str, partition: i32, leader: i32) -> Option<i64> {
        let replicas = self.0.get(&(topic.to_string(), partition))?;
        replicas
            .get(&leader)
            .or_else(|| replicas.values().max())
            .copied()
    }
}

fn add_sizes(out: &mut Sizes, node: i32, resp: DescribeLogDirsResponse) {
    for dir in resp.results.iter().filter(|d| d.error_code == 0) {
        for t in &dir.topics {
            for p in t.partitions.iter().filter(|p| !p.is_future_key) {
                *out.0
                    .entry((t.name.0.to_string(), p.partition_index))
                    .or_default()
                    .entry(node)
                    .or_default() += p.partition_size;
            }
        }
    }
}

/// The ids of the brokers in `md`.
fn broker_ids(md: &MetadataResponse) -> Vec<i32> {
    md.brokers.iter().map(|b| b.node_id.0).collect()
}

pub(super) async fn topics(State(s): State<HttpState>, headers: HeaderMap) -> Response {
    answer(topics_answer(&s, &headers).await)
}

async fn topics_answer(s: &HttpState, headers: &HeaderMap) -> Answer {
    let ctx = admit(s, headers)?;
    let md = metadata(&ctx, None).await?;
    let sizes = sizes(&ctx, &broker_ids(&md)).await?;
    let mut topics: Vec<Value> = md
        .topics
        .iter()
        .filter(|t| t.error_code == 0)
        .map(|t| {
            let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
            let under = t
                .partitions
                .iter()
                .filter(|p| p.isr_nodes.len() < p.replica_nodes.len())
                .count();
            let rf = t
                .partitions
                .iter()
                .map(|p| p.replica_nodes.len())
                .max()
                .unwrap_or(0);
            let size: i64 = t
                .partitions
                .iter()
                .filter_map(|p| sizes.of(&name, p.partition_index, p.leader_id.0))
                .sum();
            json!({
                "name": name,
                "id": t.topic_id.to_string(),
                "internal": t.is_internal,
                "partitions": t.partitions.len(),
                "replication_factor": rf,
                "under_replicated": under,
                "size": size,
            })
        })
        .collect();
    topics.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Ok(json!({ "topics": topics }))
}

/// Offsets of each (topic, partition) at `timestamp` (-2 earliest, -1 latest, or a time):
/// `Ok((offset, timestamp))` or the partition's error name. ListOffsets v7, read
/// uncommitted: the latest is the high watermark. Asked here first; on a cluster the
/// partitions this broker does not lead are then asked of their leaders.
pub(in crate::http) async fn list_offsets(
    ctx: &Ctx,
    wanted: &[(String, i32, i64)],
) -> anyhow::Result<BTreeMap<(String, i32), Result<(i64, i64), String>>> {
    let key = (ApiKey::ListOffsets, 7);
    let here: ListOffsetsResponse = call(
        &ctx.broker,
        &ctx.session,
        key.0,
        key.1,
        &list_offsets_request(wanted),
    )
    .await?;
    let mut out = BTreeMap::new();
    let mut elsewhere = Vec::new();
    add_offsets(&mut out, here, &mut elsewhere);
    if elsewhere.is_empty() {
        return Ok(out);
    }
    let topics: Vec<String> = elsewhere
        .iter()
        .map(|(t, _)| t.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let leaders = leaders(&metadata(ctx, Some(&topics)).await?);
    let mut by_leader: BTreeMap<i32, Vec<(String, i32, i64)>> = BTreeMap::new();
    for w in wanted {
        let k = (w.0.clone(), w.1);
        if let Some(&l) = leaders.get(&k).filter(|l| is_peer(&ctx.broker, **l))
            && elsewhere.contains(&k)
        {
            by_leader.entry(l).or_default().push(w.clone());
        }
    }
    for (leader, wanted) in by_leader {
        let resp: ListOffsetsResponse =
            forward(&ctx.broker, leader, key, &list_offsets_request(&wanted)).await?;
        add_offsets(&mut out, resp, &mut Vec::new());
    }
    Ok(out)
}

fn list_offsets_request(wanted: &[(String, i32, i64)]) -> ListOffsetsRequest {
    let mut by_topic: BTreeMap<&str, Vec<ListOffsetsPartition>> = BTreeMap::new();
    for (t, p, ts) in wanted {
        let mut lp = ListOffsetsPartition::default();
        lp.partition_index = *p;
        lp.current_leader_epoch = -1;
        lp.timestamp = *ts;
        by_topic.entry(t).or_default().push(lp);
    }
    let mut req = ListOffsetsRequest::default();
    req.replica_id = BrokerId(-1);
    req.isolation_level = 0;
    req.topics = by_topic
        .into_iter()
        .map(|(t, ps)| {
            let mut lt = ListOffsetsTopic::default();
            lt.name = TopicName(StrBytes::from_string(t.to_string()));
            lt.partitions = ps;
            lt
        })
        .collect();
    req
}

/// The answer's offsets into `out`; the partitions answered NOT_LEADER_OR_FOLLOWER also
/// into `elsewhere`.
fn add_offsets(
    out: &mut BTreeMap<(String, i32), Result<(i64, i64), String>>,
    resp: ListOffsetsResponse,
    elsewhere: &mut Vec<(String, i32)>,
) {
    for t in resp.topics {
        for p in t.partitions {
            let k = (t.name.0.to_string(), p.partition_index);
            let v = if p.error_code == 0 {
                Ok((p.offset, p.timestamp))
            } else {
                if not_leader(p.error_code) {
                    elsewhere.push(k.clone());
                }
                Err(error_name(p.error_code))
            };
            out.insert(k, v);
        }
    }
}

/// The leader of each (topic, partition) in `md`.
pub(in crate::http) fn leaders(md: &MetadataResponse) -> BTreeMap<(String, i32), i32> {
    let mut out = BTreeMap::new();
    for t in &md.topics {
        let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
        for p in &t.partitions {
            out.insert((name.clone(), p.partition_index), p.leader_id.0);
        }
    }
    out
}

pub(super) async fn topic(State(s): State<HttpState>, headers: HeaderMap, uri: Uri) -> Response {
    answer(topic_answer(&s, &headers, &uri).await)
}

async fn topic_answer(s: &HttpState, headers: &HeaderMap, uri: &Uri) -> Answer {
    let ctx = admit(s, headers)?;
    let q = query(uri);
    let Some(name) = q.get("name").filter(|n| !n.is_empty()) else {
        return Err(Failure::bad_request("name is required"));
    };
    let md = metadata(&ctx, Some(std::slice::from_ref(name))).await?;
    let Some(t) = md.topics.first() else {
        return Err(Failure::not_found(format!("no topic {name}")));
    };
    if t.error_code != 0 {
        let why = format!("topic {name}: {}", error_name(t.error_code));
        return Err(Failure::not_found(why));
    }
    let sizes = sizes(&ctx, &broker_ids(&md)).await?;
    let mut wanted = Vec::new();
    for p in &t.partitions {
        wanted.push((name.clone(), p.partition_index, -2));
    }
    let starts = list_offsets(&ctx, &wanted).await?;
    for w in &mut wanted {
        w.2 = -1;
    }
    let ends = list_offsets(&ctx, &wanted).await?;
    let mut partitions: Vec<Value> = t
        .partitions
        .iter()
        .map(|p| {
            let k = (name.clone(), p.partition_index);
            let off = |m: &BTreeMap<_, Result<(i64, i64), String>>| match m.get(&k) {
                Some(Ok((o, _))) => json!(o),
                Some(Err(e)) => json!(e),
                None => Value::Null,
            };
            json!({
                "partition": p.partition_index,
                "leader": p.leader_id.0,
                "leader_epoch": p.leader_epoch,
                "replicas": ids(&p.replica_nodes),
                "isr": ids(&p.isr_nodes),
                "offline": ids(&p.offline_replicas),
                "local": ctx.broker.node_id() == p.leader_id.0,
                "start_offset": off(&starts),
                "end_offset": off(&ends),
                "size": sizes.of(name, p.partition_index, p.leader_id.0),
                "error": (p.error_code != 0).then(|| error_name(p.error_code)),
            })
        })
        .collect();
    partitions.sort_by_key(|p| p["partition"].as_i64());
    let configs = topic_configs(&ctx, name).await?;
    Ok(json!({
        "name": name,
        "id": t.topic_id.to_string(),
        "internal": t.is_internal,
        "node_id": ctx.broker.node_id(),
        "partitions": partitions,
        "configs": configs,
    }))
}

/// Kafka's ConfigSource names, by code.
pub(in crate::http) fn source_name(code: i8) -> &'static str {
    match code {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "CLIENT_METRICS_CONFIG",
        8 => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

/// DescribeConfigs v4 of topic `name` (every config, or the named `keys`), with synonyms.
pub(in crate::http) async fn describe_topic_configs(
    ctx: &Ctx,
    name: &str,
    keys: Option<Vec<String>>,
) -> anyhow::Result<DescribeConfigsResult> {
    let mut res = DescribeConfigsResource::default();
    res.resource_type = 2;
    res.resource_name = StrBytes::from_string(name.to_string());
    res.configuration_keys = keys.map(|ks| ks.into_iter().map(StrBytes::from_string).collect());
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![res];
    req.include_synonyms = true;
    let resp: DescribeConfigsResponse =
        call(&ctx.broker, &ctx.session, ApiKey::DescribeConfigs, 4, &req).await?;
    resp.results
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("no DescribeConfigs answer for topic {name}"))
}

async fn topic_configs(ctx: &Ctx, name: &str) -> Result<Vec<Value>, Failure> {
    let r = describe_topic_configs(ctx, name, None).await?;
    if r.error_code != 0 {
        let msg = r
            .error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default();
        return Err(Failure::internal(format!(
            "DescribeConfigs: {} {msg}",
            error_name(r.error_code)
        )));
    }
    let mut configs: Vec<Value> = r
        .configs
        .iter()
        .map(|c| {
            json!({
                "name": c.name.to_string(),
                "value": if c.is_sensitive { None } else { c.value.as_ref().map(|v| v.to_string()) },
                "source": source_name(c.config_source),
                "default": c.config_source == 5,
                "sensitive": c.is_sensitive,
                "read_only": c.read_only,
            })
        })
        .collect();
    configs.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Ok(configs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_size_is_its_leaders_replica() {
        let mut s = Sizes::default();
        let k = ("t".to_string(), 0);
        s.0.entry(k.clone()).or_default().insert(1, 100);
        s.0.entry(k.clone()).or_default().insert(2, 250);
        assert_eq!(s.of("t", 0, 1), Some(100));
        assert_eq!(s.of("t", 0, 2), Some(250));
        // The leader's replica is not known here: the largest one.
        assert_eq!(s.of("t", 0, 3), Some(250));
        assert_eq!(s.of("t", 0, -1), Some(250));
        assert_eq!(s.of("t", 1, 1), None);
    }
}
