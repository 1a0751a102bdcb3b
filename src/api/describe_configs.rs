//! DescribeConfigs (key 32), versions 1-4 (Kafka 4 removed v0).
//!
//! Topics: every topic config Kafka 4.4 has, with the value in force and its source (the
//! topic's own setting, a dynamic broker config for this broker or the cluster default, a
//! broker property set in the config file or by `--override`, or the default), synonyms when
//! asked for, and types from v3. Brokers (resource name = this node id): every property the
//! broker read and every dynamic config set for it, with the same precedence (dynamic for
//! this broker, dynamic default, static, default); read-only unless Kafka lets it change at
//! run time. The cluster-wide default (empty name): the dynamic default configs. Custom keys
//! (unknown to Kafka) are sensitive with a null value, as Kafka shows them. Broker loggers
//! (name = this node id): every logger of `crate::logging` with its level, source
//! DYNAMIC_BROKER_LOGGER_CONFIG, no synonyms, type UNKNOWN. Groups (any name but the empty
//! one, whether or not the group exists, as Kafka answers): every group config
//! (`cluster::group_config`), DYNAMIC_GROUP_CONFIG where the group sets it, else DEFAULT_CONFIG; the
//! synonyms are the group's value and the broker setting the default comes from (source
//! DEFAULT_CONFIG). Other resource types (client metrics) get INVALID_REQUEST.
//! Config documentation is served for group configs only (null for the others).
//!
//! Authorization (Kafka's `ConfigHelper`): DESCRIBE_CONFIGS on the topic, the group, or the
//! cluster for brokers, their loggers and client metrics; a refused resource is TOPIC_,
//! GROUP_ or CLUSTER_AUTHORIZATION_FAILED with Kafka's message and no configs.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::authz::{self, Op};
use super::{ApiSpec, RequestCtx};
use crate::cluster::controller::validate_topic_name;
use crate::cluster::group_config as group_configs;
use crate::cluster::topic_config::{self, ConfigSource, config_type};
use crate::config::{dynamic, keys};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::DescribeConfigs,
    min: 1,
    max: 4,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const GROUP: i8 = 32;
/// Kafka's ConfigSource id of a group's own config.
const DYNAMIC_GROUP_CONFIG: i8 = 8;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

struct Entry {
    name: String,
    value: String,
    source: ConfigSource,
    config_type: i8,
    read_only: bool,
    sensitive: bool,
    synonyms: Vec<(String, String, ConfigSource)>,
    /// The source id when it is none of [`ConfigSource`]'s (group configs).
    source_id: Option<i8>,
    doc: Option<&'static str>,
}

fn encode_entry(e: Entry, synonyms: bool, documentation: bool) -> DescribeConfigsResourceResult {
    let mut r = DescribeConfigsResourceResult::default();
    r.name = s(e.name);
    r.value = (!e.sensitive).then(|| s(e.value));
    r.read_only = e.read_only;
    r.config_source = e.source_id.unwrap_or(e.source as i8);
    r.is_sensitive = e.sensitive;
    r.config_type = e.config_type;
    r.documentation = e.doc.filter(|_| documentation).map(s);
    if synonyms {
        r.synonyms = e
            .synonyms
            .into_iter()
            .map(|(n, v, src)| {
                let mut y = DescribeConfigsSynonym::default();
                y.name = s(n);
                y.value = (!e.sensitive).then(|| s(v));
                y.source = src as i8;
                y
            })
            .collect();
        if let Some(id) = e.source_id {
            let own = r.value.clone();
            let mut y = DescribeConfigsSynonym::default();
            y.name = r.name.clone();
            y.value = own;
            y.source = id;
            r.synonyms.insert(0, y);
        }
    }
    r
}

fn topic_entries(b: &Base, name: &str) -> Result<Vec<Entry>, (i16, String)> {
    if let Err(e) = validate_topic_name(name) {
        return Err((ResponseError::InvalidTopicException.code(), e));
    }
    let Some(t) = b.controller.topic(name) else {
        // Kafka answers an unknown topic with an empty message.
        return Err((ResponseError::UnknownTopicOrPartition.code(), String::new()));
    };
    Ok(topic_config::describe(&b.controller.defaults(), &t.configs)
        .into_iter()
        .map(|c| Entry {
            name: c.name.to_string(),
            value: c.value,
            source: c.source,
            config_type: c.config_type,
            read_only: false,
            sensitive: false,
            synonyms: c.synonyms,
            source_id: None,
            doc: None,
        })
        .collect())
}

fn broker_entries(b: &Base, name: &str) -> Result<Vec<Entry>, (i16, String)> {
    let defaults = b.controller.defaults();
    let dynamic = &defaults.dynamic;
    if name.is_empty() {
        return Ok(dynamic
            .cluster_default
            .iter()
            .map(|(k, v)| {
                let src = ConfigSource::DynamicDefaultBroker;
                Entry {
                    name: k.clone(),
                    value: v.clone(),
                    source: src,
                    config_type: config_type::STRING,
                    read_only: false,
                    sensitive: !dynamic::is_known(k),
                    synonyms: vec![(k.clone(), v.clone(), src)],
                    source_id: None,
                    doc: None,
                }
            })
            .collect());
    }
    if name.parse::<i32>().ok() != Some(b.node_id()) {
        return Err((
            ResponseError::InvalidRequest.code(),
            format!(
                "Unexpected broker id, expected {} or empty string, but received {name}",
                b.node_id()
            ),
        ));
    }
    let base = &defaults.base;
    let mut keys: BTreeSet<&String> = base
        .raw
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, _)| k)
        .collect();
    keys.extend(dynamic.cluster_default.keys());
    keys.extend(dynamic.this_broker.keys());
    Ok(keys
        .into_iter()
        .map(|k| {
            let mut synonyms: Vec<(String, String, ConfigSource)> = dynamic
                .values(k)
                .into_iter()
                .map(|(v, src)| (k.clone(), v.to_string(), src.into()))
                .collect();
            if let Some(v) = base.raw.get(k).filter(|v| !v.is_empty()) {
                if base.is_explicitly_set(k) {
                    synonyms.push((k.clone(), v.clone(), ConfigSource::StaticBroker));
                }
                if let Some(d) = keys::default_of(k).filter(|d| !d.is_empty()) {
                    synonyms.push((k.clone(), d.to_string(), ConfigSource::Default));
                }
            }
            let (value, source) = synonyms
                .first()
                .map(|(_, v, src)| (v.clone(), *src))
                .unwrap_or_else(|| {
                    (
                        base.raw.get(k).cloned().unwrap_or_default(),
                        ConfigSource::Default,
                    )
                });
            Entry {
                name: k.clone(),
                value,
                source,
                config_type: config_type::STRING,
                read_only: !dynamic::is_dynamic(k),
                sensitive: !dynamic::is_known(k) || keys::is_password(k),
                synonyms,
                source_id: None,
                doc: None,
            }
        })
        .collect())
}

/// This broker's loggers and their levels (`crate::logging`).
fn logger_entries(b: &Base, name: &str) -> Result<Vec<Entry>, (i16, String)> {
    super::config_changes::check_node_name(b, BROKER_LOGGER, name)
        .map_err(|(code, m)| (code, m.unwrap_or_default()))?;
    Ok(crate::logging::describe()
        .into_iter()
        .map(|(name, value)| Entry {
            name,
            value,
            source: ConfigSource::DynamicBrokerLogger,
            config_type: 0,
            read_only: false,
            sensitive: false,
            synonyms: Vec::new(),
            source_id: None,
            doc: None,
        })
        .collect())
}

/// A group's configs, for any group name but the empty one.
fn group_entries(b: &Base, name: &str) -> Result<Vec<Entry>, (i16, String)> {
    if name.is_empty() {
        return Err((
            ResponseError::InvalidRequest.code(),
            "Group name must not be empty".into(),
        ));
    }
    let set = b.controller.group_configs.of(name);
    Ok(group_configs::describe(&b.config, &set)
        .into_iter()
        .map(|d| Entry {
            name: d.name.to_string(),
            value: d.value,
            source: ConfigSource::Default,
            config_type: d.config_type,
            read_only: false,
            sensitive: false,
            synonyms: vec![(d.default_name.to_string(), d.default, ConfigSource::Default)],
            source_id: d.dynamic.then_some(DYNAMIC_GROUP_CONFIG),
            doc: Some(d.doc),
        })
        .collect())
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DescribeConfigsRequest = super::decode(&ctx, body)?;
    let mut resp = DescribeConfigsResponse::default();
    for res in req.resources {
        let name = res.resource_name.to_string();
        let refused = ctx.config_resource_error(&b, Op::DescribeConfigs, res.resource_type, &name);
        let entries = match (refused, res.resource_type) {
            (Some(code), _) => Err((code, authz::denied_message(code).to_string())),
            (None, TOPIC) => topic_entries(&b, &name),
            (None, BROKER) => broker_entries(&b, &name),
            (None, BROKER_LOGGER) => logger_entries(&b, &name),
            (None, GROUP) => group_entries(&b, &name),
            (None, t) => Err((
                ResponseError::InvalidRequest.code(),
                format!("Unsupported resource type {t}"),
            )),
        };
        let mut r = DescribeConfigsResult::default();
        r.resource_type = res.resource_type;
        r.resource_name = res.resource_name;
        match entries {
            Ok(list) => {
                r.configs = list
                    .into_iter()
                    .filter(|e| {
                        res.configuration_keys
                            .as_ref()
                            .is_none_or(|keys| keys.iter().any(|k| k.as_str() == e.name))
                    })
                    .map(|e| encode_entry(e, req.include_synonyms, req.include_documentation))
                    .collect();
            }
            Err((code, msg)) => {
                r.error_code = code;
                r.error_message = Some(s(msg));
            }
        }
        resp.results.push(r);
    }
    super::respond(&ctx, &resp)
}
