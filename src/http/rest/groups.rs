//! Consumer groups: `GET .../consumer-groups`, `.../consumer-groups/{g}`, `.../consumers`,
//! `.../consumers/{c}`, `.../lags` and `.../lag-summary`, from the console's group reads
//! (ListGroups; ConsumerGroupDescribe or DescribeGroups on the coordinator; OffsetFetch and
//! ListOffsets for the lag). A group that does not exist (or is dead) is a plain 404.

use axum::extract::Path;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{Answer, Req, RestError, ok};
use crate::http::console::groups::{Described, Member, describe_group, list_groups};

/// Kafka's state name as Confluent spells it: `PreparingRebalance` is
/// `PREPARING_REBALANCE`.
fn state_name(state: &str) -> String {
    let mut out = String::with_capacity(state.len() + 4);
    for (i, ch) in state.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_uppercase());
    }
    if out.is_empty() {
        "UNKNOWN".to_string()
    } else {
        out
    }
}

/// The group type as Confluent names it.
fn type_name(kind: &str) -> &'static str {
    match kind.to_ascii_lowercase().as_str() {
        "classic" => "CLASSIC",
        "consumer" => "CONSUMER",
        "share" => "SHARE",
        _ => "UNKNOWN",
    }
}

fn group_json(r: &Req, id: &str, d: &Described) -> Value {
    let path = format!("consumer-groups/{id}");
    let text = |k: &str| d.head[k].as_str().unwrap_or_default().to_string();
    let mut v = json!({
        "kind": "KafkaConsumerGroup",
        "metadata": r.meta(&path, &format!("consumer-group={id}")),
        "cluster_id": r.cluster,
        "consumer_group_id": id,
        "is_simple": text("protocol_type").is_empty(),
        "partition_assignor": text("protocol"),
        "state": state_name(&text("state")),
        "type": type_name(&text("type")),
        "is_mixed_consumer_group": false,
        "consumers": r.related(&format!("{path}/consumers")),
        "lag_summary": r.related(&format!("{path}/lag-summary")),
    });
    if d.coordinator >= 0 {
        v["coordinator"] = r.related(&format!("brokers/{}", d.coordinator));
    }
    v
}

/// The group, or 404 when there is none.
async fn described(r: &Req, id: &str) -> Result<Described, RestError> {
    describe_group(&r.ctx, id).await.map_err(|f| {
        if f.0 == StatusCode::NOT_FOUND {
            RestError::not_found()
        } else {
            f.into()
        }
    })
}

pub(super) async fn list(r: Req) -> Answer {
    let mut data = Vec::new();
    for g in list_groups(&r.ctx).await? {
        let id = g.group_id.0.to_string();
        // A group that went away between the listing and its description is left out.
        match describe_group(&r.ctx, &id).await {
            Ok(d) => data.push(group_json(&r, &id, &d)),
            Err(f) if f.0 == StatusCode::NOT_FOUND => {}
            Err(f) => return Err(f.into()),
        }
    }
    r.list("KafkaConsumerGroupList", "consumer-groups", data)
}

pub(super) async fn get(r: Req, Path((_, id)): Path<(String, String)>) -> Answer {
    let id = id.as_str();
    let d = described(&r, id).await?;
    ok(group_json(&r, id, &d))
}

fn consumer_json(r: &Req, group: &str, m: &Member) -> Value {
    let path = format!("consumer-groups/{group}/consumers/{}", m.member_id);
    json!({
        "kind": "KafkaConsumer",
        "metadata": r.meta(&path,
            &format!("consumer-group={group}/consumer={}", m.member_id),
        ),
        "cluster_id": r.cluster,
        "consumer_group_id": group,
        "consumer_id": m.member_id,
        "instance_id": m.instance_id,
        "client_id": m.client_id,
        "assignments": r.related(&format!("{path}/assignments")),
    })
}

pub(super) async fn consumers(r: Req, Path((_, id)): Path<(String, String)>) -> Answer {
    let id = id.as_str();
    let d = described(&r, id).await?;
    let data = d.members.iter().map(|m| consumer_json(&r, id, m)).collect();
    r.list(
        "KafkaConsumerList",
        &format!("consumer-groups/{id}/consumers"),
        data,
    )
}

pub(super) async fn consumer(
    r: Req,
    Path((_, id, member)): Path<(String, String, String)>,
) -> Answer {
    let id = id.as_str();
    let d = described(&r, id).await?;
    match d.members.iter().find(|m| m.member_id == member) {
        Some(m) => ok(consumer_json(&r, id, m)),
        None => Err(RestError::not_found()),
    }
}

/// A partition with a committed offset and a known log end offset.
struct LagRow<'a> {
    topic: &'a str,
    partition: i32,
    committed: i64,
    end: i64,
    lag: i64,
    owner: Option<&'a Member>,
}

fn lag_rows(d: &Described) -> Vec<LagRow<'_>> {
    d.offsets
        .iter()
        .filter_map(|o| {
            Some(LagRow {
                topic: o.topic.as_str(),
                partition: o.partition,
                committed: o.committed?,
                end: o.end?,
                lag: o.lag?,
                owner: o.owner.map(|i| &d.members[i]),
            })
        })
        .collect()
}

pub(super) async fn lags(r: Req, Path((_, id)): Path<(String, String)>) -> Answer {
    let id = id.as_str();
    let d = described(&r, id).await?;
    let data = lag_rows(&d)
        .into_iter()
        .map(|row| {
            let (topic, p, owner) = (row.topic, row.partition, row.owner);
            let path = format!("consumer-groups/{id}/lags/{topic}/partitions/{p}");
            json!({
                "kind": "KafkaConsumerLag",
                "metadata": r.meta(&path,
                    &format!("consumer-group={id}/lag={topic}/partition={p}"),
                ),
                "cluster_id": r.cluster,
                "consumer_group_id": id,
                "topic_name": topic,
                "partition_id": p,
                "current_offset": row.committed,
                "log_end_offset": row.end,
                "lag": row.lag,
                "consumer_id": owner.map_or("", |m| m.member_id.as_str()),
                "instance_id": owner.and_then(|m| m.instance_id.clone()),
                "client_id": owner.map_or("", |m| m.client_id.as_str()),
            })
        })
        .collect();
    r.list(
        "KafkaConsumerLagList",
        &format!("consumer-groups/{id}/lags"),
        data,
    )
}

pub(super) async fn lag_summary(r: Req, Path((_, id)): Path<(String, String)>) -> Answer {
    let id = id.as_str();
    let d = described(&r, id).await?;
    let rows = lag_rows(&d);
    let total: i64 = rows.iter().map(|row| row.lag).sum();
    // The first partition with the largest lag.
    let max = rows
        .iter()
        .fold(None, |best: Option<&LagRow>, row| match best {
            Some(b) if b.lag >= row.lag => Some(b),
            _ => Some(row),
        });
    let path = format!("consumer-groups/{id}/lag-summary");
    let mut v = json!({
        "kind": "KafkaConsumerGroupLagSummary",
        "metadata": r.meta(&path, &format!("consumer-group={id}/lag-summary")),
        "cluster_id": r.cluster,
        "consumer_group_id": id,
        "max_lag_consumer_id": "",
        "max_lag_instance_id": null,
        "max_lag_client_id": "",
        "max_lag_topic_name": "",
        "max_lag_partition_id": 0,
        "max_lag": 0,
        "total_lag": total,
    });
    if let Some(&LagRow {
        topic,
        partition: p,
        lag,
        owner,
        ..
    }) = max
    {
        let consumer = owner.map_or("", |m| m.member_id.as_str());
        v["max_lag_consumer_id"] = json!(consumer);
        v["max_lag_instance_id"] = json!(owner.and_then(|m| m.instance_id.clone()));
        v["max_lag_client_id"] = json!(owner.map_or("", |m| m.client_id.as_str()));
        v["max_lag_topic_name"] = json!(topic);
        v["max_lag_partition_id"] = json!(p);
        v["max_lag"] = json!(lag);
        v["max_lag_consumer"] = r.related(&format!("consumer-groups/{id}/consumers/{consumer}"));
        v["max_lag_partition"] = r.related(&format!("topics/{topic}/partitions/{p}"));
    }
    ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_spelled_as_confluent_spells_them() {
        assert_eq!(state_name("PreparingRebalance"), "PREPARING_REBALANCE");
        assert_eq!(state_name("Stable"), "STABLE");
        assert_eq!(state_name(""), "UNKNOWN");
        assert_eq!(type_name("consumer"), "CONSUMER");
        assert_eq!(type_name("classic"), "CLASSIC");
    }
}
