//! Topic configs: `GET .../topics/{t}/configs`, `GET|PUT|DELETE .../configs/{name}` and
//! `POST .../configs:alter` (a batch of SET and DELETE). Read with DescribeConfigs v4
//! (with synonyms), changed with IncrementalAlterConfigs v1; changes answer 204.

use axum::extract::Path;
use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult},
    incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig},
};
use kafka_protocol::protocol::StrBytes;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Answer, Reply, Req, RestError, ok, parse_body};
use crate::http::console::cluster::{describe_topic_configs, source_name};
use crate::http::console::wire::call;

/// The topic's configs (or the named ones), or the topic's error as Confluent's.
async fn described(
    r: &Req,
    topic: &str,
    keys: Option<Vec<String>>,
) -> Result<DescribeConfigsResult, RestError> {
    let res = describe_topic_configs(&r.ctx, topic, keys).await?;
    if res.error_code != 0 {
        let msg = res.error_message.as_ref().map(|m| m.to_string());
        return Err(RestError::kafka(res.error_code, msg));
    }
    Ok(res)
}

fn config_json(r: &Req, topic: &str, c: &DescribeConfigsResourceResult) -> Value {
    let name = c.name.to_string();
    let secret = |v: &Option<StrBytes>| {
        if c.is_sensitive {
            None
        } else {
            v.as_ref().map(|v| v.to_string())
        }
    };
    let synonyms: Vec<Value> = c
        .synonyms
        .iter()
        .map(|s| {
            json!({
                "name": s.name.to_string(),
                "value": secret(&s.value),
                "source": source_name(s.source),
            })
        })
        .collect();
    json!({
        "kind": "KafkaTopicConfig",
        "metadata": r.meta(
            &format!("topics/{topic}/configs/{name}"),
            &format!("topic={topic}/config={name}"),
        ),
        "cluster_id": r.cluster,
        "topic_name": topic,
        "name": name,
        "value": secret(&c.value),
        "is_default": c.config_source == 5,
        "is_read_only": c.read_only,
        "is_sensitive": c.is_sensitive,
        "source": source_name(c.config_source),
        "synonyms": synonyms,
    })
}

pub(super) async fn list(r: Req, Path((_, topic)): Path<(String, String)>) -> Answer {
    let res = described(&r, &topic, None).await?;
    let mut configs: Vec<&DescribeConfigsResourceResult> = res.configs.iter().collect();
    configs.sort_by(|a, b| a.name.cmp(&b.name));
    let data = configs
        .into_iter()
        .map(|c| config_json(&r, &topic, c))
        .collect();
    r.list(
        "KafkaTopicConfigList",
        &format!("topics/{topic}/configs"),
        data,
    )
}

pub(super) async fn get(r: Req, Path((_, topic, name)): Path<(String, String, String)>) -> Answer {
    let res = described(&r, &topic, Some(vec![name.clone()])).await?;
    match res.configs.iter().find(|c| c.name.as_str() == name) {
        Some(c) => ok(config_json(&r, &topic, c)),
        None => Err(RestError::not_found()),
    }
}

/// One change: SET (0) to a value, or DELETE (1), back to the default.
struct Change {
    name: String,
    op: i8,
    value: Option<String>,
}

/// Sends the changes to the topic's configs with IncrementalAlterConfigs v1.
async fn alter(r: &Req, topic: &str, changes: Vec<Change>, validate_only: bool) -> Answer {
    let mut res = AlterConfigsResource::default();
    res.resource_type = 2;
    res.resource_name = StrBytes::from_string(topic.to_string());
    res.configs = changes
        .into_iter()
        .map(|c| {
            let mut a = AlterableConfig::default();
            a.name = StrBytes::from_string(c.name);
            a.config_operation = c.op;
            a.value = c.value.map(StrBytes::from_string);
            a
        })
        .collect();
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![res];
    req.validate_only = validate_only;
    let key = ApiKey::IncrementalAlterConfigs;
    let resp: IncrementalAlterConfigsResponse =
        call(&r.ctx.broker, &r.ctx.session, key, 1, &req).await?;
    match resp.responses.into_iter().next() {
        Some(a) if a.error_code != 0 => Err(RestError::kafka(
            a.error_code,
            a.error_message.map(|m| m.to_string()),
        )),
        Some(_) => Ok(Reply::NoContent),
        None => Err(RestError::kafka(
            -1,
            Some("no IncrementalAlterConfigs answer".into()),
        )),
    }
}

/// The body of `PUT .../configs/{name}`.
#[derive(Deserialize)]
struct SetConfig {
    value: Option<String>,
}

pub(super) async fn set(
    r: Req,
    Path((_, topic, name)): Path<(String, String, String)>,
    body: Bytes,
) -> Answer {
    let want: SetConfig = parse_body(&body)?;
    let change = Change {
        name,
        op: 0,
        value: want.value,
    };
    alter(&r, &topic, vec![change], false).await
}

pub(super) async fn reset(
    r: Req,
    Path((_, topic, name)): Path<(String, String, String)>,
) -> Answer {
    let change = Change {
        name,
        op: 1,
        value: None,
    };
    alter(&r, &topic, vec![change], false).await
}

/// The body of `POST .../configs:alter`.
#[derive(Deserialize)]
struct AlterBatch {
    data: Vec<BatchEntry>,
    #[serde(default)]
    validate_only: bool,
}

#[derive(Deserialize)]
struct BatchEntry {
    name: String,
    value: Option<String>,
    operation: Option<String>,
}

pub(super) async fn alter_batch(
    r: Req,
    Path((_, topic)): Path<(String, String)>,
    body: Bytes,
) -> Answer {
    let want: AlterBatch = parse_body(&body)?;
    let mut changes = Vec::with_capacity(want.data.len());
    for e in want.data {
        let op = match e
            .operation
            .as_deref()
            .map(str::to_ascii_uppercase)
            .as_deref()
        {
            None | Some("SET") => 0,
            Some("DELETE") => 1,
            Some(other) => {
                return Err(RestError::bad_request(format!(
                    "operation must be SET or DELETE, not {other}"
                )));
            }
        };
        changes.push(Change {
            name: e.name,
            op,
            value: if op == 0 { e.value } else { None },
        });
    }
    alter(&r, &topic, changes, want.validate_only).await
}
