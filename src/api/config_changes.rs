//! What IncrementalAlterConfigs and AlterConfigs share: turning a resource's requested
//! operations into validated changes (the pure part, [`topic_changes`] and
//! [`broker_changes`]), and applying them to a topic, a group or the dynamic broker configs
//! through the metadata quorum's active controller, answered once this broker has applied the
//! metadata records (one node is a one-voter quorum: the same path).
//!
//! Kafka's errors and messages: an empty topic name, a key named twice, a null value for
//! SET/APPEND/SUBTRACT are INVALID_REQUEST; an unknown operation UNKNOWN_SERVER_ERROR; an
//! unknown topic UNKNOWN_TOPIC_OR_PARTITION; for topics an unknown key, a bad value or
//! APPEND/SUBTRACT on a non-list key INVALID_CONFIG. For brokers a read-only config ("Cannot
//! update these configs dynamically: [...]") and a bad value are INVALID_REQUEST, as Kafka
//! answers; keys Kafka does not know are custom configs, stored as given. For groups
//! (`cluster::group_config`) an empty name is INVALID_REQUEST, APPEND/SUBTRACT (for every key, as
//! Kafka's controller knows no group config types) and everything validation refuses
//! INVALID_CONFIG. A resource's changes apply all or none; `validate_only` checks without
//! applying.

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::ResponseError;

use super::Base;
use crate::cluster::TopicError;
use crate::cluster::group_config as group_configs;
use crate::cluster::metadata::ConfigResource;
use crate::cluster::node::ControllerRequest;
use crate::cluster::topic_config::{self, BrokerDefaults, config_type};
use crate::config::dynamic;
use crate::config::keys::{KafkaType, kafka_keys};

pub const TOPIC: i8 = 2;
pub const BROKER: i8 = 4;
pub const BROKER_LOGGER: i8 = 8;
pub const GROUP: i8 = 32;

pub const SET: i8 = 0;
pub const DELETE: i8 = 1;
pub const APPEND: i8 = 2;
pub const SUBTRACT: i8 = 3;

/// An error code and its message (None: null).
pub type Failure = (i16, Option<String>);

pub fn invalid_request(m: impl Into<String>) -> Failure {
    (ResponseError::InvalidRequest.code(), Some(m.into()))
}

fn invalid_config(m: impl Into<String>) -> Failure {
    (ResponseError::InvalidConfig.code(), Some(m.into()))
}

/// One requested operation.
pub struct Op {
    pub name: String,
    pub op: i8,
    pub value: Option<String>,
}

/// Set (`Some`) or delete (`None`) each key.
pub type Changes = Vec<(String, Option<String>)>;

/// The operations a request makes: as given, or (`replace`, AlterConfigs) the resource's
/// configs replaced whole: the given keys are set, the other keys set now (`current`) are
/// deleted.
pub fn requested_ops(current: &BTreeMap<String, String>, given: Vec<Op>, replace: bool) -> Vec<Op> {
    if !replace {
        return given;
    }
    let named: HashSet<String> = given.iter().map(|o| o.name.clone()).collect();
    let mut ops = given;
    ops.extend(current.keys().filter(|k| !named.contains(*k)).map(|k| Op {
        name: k.clone(),
        op: DELETE,
        value: None,
    }));
    ops
}

/// Checks that do not depend on the resource's state, in Kafka's order.
pub fn check_ops(ops: &[Op]) -> Result<(), Failure> {
    let mut seen = HashSet::new();
    if !ops.iter().all(|o| seen.insert(o.name.as_str())) {
        return Err(invalid_request("Error due to duplicate config keys"));
    }
    if ops.iter().any(|o| !(SET..=SUBTRACT).contains(&o.op)) {
        return Err((ResponseError::UnknownServerError.code(), None));
    }
    if let Some(o) = ops.iter().find(|o| o.op != DELETE && o.value.is_none()) {
        return Err(invalid_request(format!(
            "Null value not supported for : {}",
            o.name
        )));
    }
    Ok(())
}

/// The value an operation leaves: SET's, none for DELETE, or the list in force (`current`)
/// with the given items appended or removed. `Err(verb)` when the key is not a list.
fn resulting_value(o: &Op, is_list: bool, current: &str) -> Result<Option<String>, &'static str> {
    let verb = match o.op {
        DELETE => return Ok(None),
        SET => return Ok(o.value.clone()),
        APPEND => "APPEND",
        _ => "SUBTRACT",
    };
    if !is_list {
        return Err(verb);
    }
    let items = |v: &str| -> Vec<String> {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let mut list = items(current);
    let given = items(o.value.as_deref().unwrap_or_default());
    if o.op == APPEND {
        for g in given {
            if !list.contains(&g) {
                list.push(g);
            }
        }
    } else {
        list.retain(|x| !given.contains(x));
    }
    Ok(Some(list.join(",")))
}

fn not_a_list(verb: &str, key: &str) -> String {
    format!("Can't {verb} to key {key} because its type is not LIST.")
}

/// The changes `ops` make to a topic whose own configs are `current`, validated. APPEND and
/// SUBTRACT work on the value in force, the topic's own or the broker's.
pub fn topic_changes(
    defaults: &BrokerDefaults,
    current: &BTreeMap<String, String>,
    ops: &[Op],
) -> Result<Changes, Failure> {
    let described = topic_config::describe(defaults, current);
    let mut out = Vec::with_capacity(ops.len());
    for o in ops {
        if !topic_config::is_topic_config(&o.name) {
            return Err(invalid_config(format!(
                "Unknown topic config name: {}",
                o.name
            )));
        }
        let d = described.iter().find(|d| d.name == o.name);
        let is_list = d.is_some_and(|d| d.config_type == config_type::LIST);
        let now = d.map_or("", |d| d.value.as_str());
        let value =
            resulting_value(o, is_list, now).map_err(|v| invalid_config(not_a_list(v, &o.name)))?;
        if let Some(v) = &value {
            topic_config::validate(&o.name, v).map_err(invalid_config)?;
        }
        out.push((o.name.clone(), value));
    }
    Ok(out)
}

/// The changes `ops` make to a broker resource's dynamic configs (`current`; the static
/// value of a key is the start of an APPEND or SUBTRACT when nothing dynamic is set),
/// validated.
pub fn broker_changes(
    defaults: &BrokerDefaults,
    current: &BTreeMap<String, String>,
    ops: &[Op],
) -> Result<Changes, Failure> {
    dynamic::check_updatable(
        ops.iter()
            .filter(|o| o.op != DELETE)
            .map(|o| o.name.as_str()),
    )
    .map_err(invalid_request)?;
    let mut out = Vec::with_capacity(ops.len());
    for o in ops {
        // The metadata file is line- and tab-separated.
        if o.name.is_empty() || o.name.contains(['\n', '\t', '\r']) {
            return Err(invalid_request(format!(
                "Invalid config name: {:?}",
                o.name
            )));
        }
        let is_list = kafka_keys()
            .get(o.name.as_str())
            .is_some_and(|k| k.ty == KafkaType::List);
        let now = current
            .get(&o.name)
            .or_else(|| defaults.base.raw.get(&o.name))
            .map_or("", String::as_str);
        let value = resulting_value(o, is_list, now)
            .map_err(|v| invalid_request(not_a_list(v, &o.name)))?;
        if let Some(v) = &value {
            if v.contains(['\n', '\t', '\r']) {
                return Err(invalid_request(format!(
                    "Invalid value for configuration {}",
                    o.name
                )));
            }
            dynamic::validate(&o.name, v).map_err(invalid_request)?;
        }
        out.push((o.name.clone(), value));
    }
    Ok(out)
}

fn topic_failure(e: &TopicError, topic: &str) -> Failure {
    match e {
        TopicError::UnknownTopic => (
            ResponseError::UnknownTopicOrPartition.code(),
            Some(format!("The topic '{topic}' does not exist.")),
        ),
        e => (
            super::errors::topic_error_code(e),
            super::errors::topic_error_message(e),
        ),
    }
}

/// A topic's own configs now; `None` if it does not exist.
pub fn topic_configs(b: &Base, name: &str) -> Option<BTreeMap<String, String>> {
    let img = b.node().image();
    img.topic(name)?;
    Some(
        img.configs
            .get(&ConfigResource::Topic(name.to_string()))
            .cloned()
            .unwrap_or_default(),
    )
}

/// A topic or group resource must be named (`empty`: the refusal otherwise); then
/// [`check_ops`].
fn check_named(name: &str, empty: &str, ops: &[Op]) -> Result<(), Failure> {
    if name.is_empty() {
        return Err(invalid_request(empty));
    }
    check_ops(ops)
}

/// Applies `ops` to topic `name` (the ops come either from IncrementalAlterConfigs or, as a
/// full replacement, from AlterConfigs: `replace`).
pub async fn alter_topic(
    b: &Base,
    name: &str,
    ops: Vec<Op>,
    replace: bool,
    validate_only: bool,
) -> Result<(), Failure> {
    check_named(name, "Default topic resources are not allowed.", &ops)?;
    let current =
        topic_configs(b, name).ok_or_else(|| topic_failure(&TopicError::UnknownTopic, name))?;
    let ops = requested_ops(&current, ops, replace);
    let changes = topic_changes(&b.controller.defaults(), &current, &ops)?;
    if validate_only || changes.is_empty() {
        return Ok(());
    }
    let c = b.node();
    let req = ControllerRequest::AlterTopicConfigs(
        changes
            .iter()
            .map(|(k, v)| (name.to_string(), k.clone(), v.clone()))
            .collect(),
    );
    let applied = |c: &crate::cluster::node::ClusterNode| {
        c.host()
            .and_then(|b| b.replicas().topic(name))
            .is_some_and(|t| changes.iter().all(|(k, v)| t.configs.get(k) == v.as_ref()))
    };
    let results = c.simple(req, changes.len(), applied).await;
    match results.into_iter().find_map(Result::err) {
        Some(e) => Err(topic_failure(&e, name)),
        None => Ok(()),
    }
}

/// A BROKER or BROKER_LOGGER resource name must be this node's id (or, for BROKER, empty:
/// the cluster-wide default). Returns the broker id named (`None`: the default).
pub fn check_node_name(b: &Base, resource_type: i8, name: &str) -> Result<Option<i32>, Failure> {
    if resource_type == BROKER && name.is_empty() {
        return Ok(None);
    }
    let id: i32 = name
        .parse()
        .map_err(|_| invalid_request(format!("Node id must be an integer, but it is: {name}")))?;
    if id != b.node_id() {
        return Err(invalid_request(format!(
            "Unexpected broker id, expected {}, but received {name}",
            b.node_id()
        )));
    }
    Ok(Some(id))
}

/// Applies `ops` to the dynamic configs of this broker or the cluster default (`name`).
pub async fn alter_broker(
    b: &Base,
    name: &str,
    ops: Vec<Op>,
    replace: bool,
    validate_only: bool,
) -> Result<(), Failure> {
    let broker = check_node_name(b, BROKER, name)?;
    check_ops(&ops)?;
    let defaults = b.controller.defaults();
    let current = defaults.dynamic.map(broker).clone();
    let ops = requested_ops(&current, ops, replace);
    let changes = broker_changes(&defaults, &current, &ops)?;
    if validate_only || changes.is_empty() {
        return Ok(());
    }
    let failure = |e: TopicError| match e {
        TopicError::InvalidConfig(m) => invalid_request(m),
        e => (
            super::errors::topic_error_code(&e),
            super::errors::topic_error_message(&e),
        ),
    };
    let c = b.node();
    let req = ControllerRequest::AlterBrokerConfigs(
        changes
            .iter()
            .map(|(k, v)| (broker, k.clone(), v.clone()))
            .collect(),
    );
    let applied = |c: &crate::cluster::node::ClusterNode| {
        c.host().is_some_and(|b| {
            let d = b.replicas().defaults();
            let map = d.dynamic.map(broker);
            changes.iter().all(|(k, v)| map.get(k) == v.as_ref())
        })
    };
    let results = c.simple(req, changes.len(), applied).await;
    match results.into_iter().find_map(Result::err) {
        Some(e) => Err(failure(e)),
        None => Ok(()),
    }
}

/// The configs `ops` leave a group with (`current`: what it sets now), validated and as they
/// are stored.
pub fn group_changes(
    c: &crate::config::BrokerConfig,
    current: &BTreeMap<String, String>,
    ops: &[Op],
) -> Result<BTreeMap<String, String>, Failure> {
    let mut after = current.clone();
    for o in ops {
        match resulting_value(o, false, "") {
            Err(verb) => return Err(invalid_config(not_a_list(verb, &o.name))),
            Ok(None) => after.remove(&o.name),
            Ok(Some(v)) => after.insert(o.name.clone(), v),
        };
    }
    group_configs::validate(c, &after).map_err(invalid_config)
}

/// Applies `ops` to the dynamic configs of group `name`.
pub async fn alter_group(
    b: &Base,
    name: &str,
    ops: Vec<Op>,
    replace: bool,
    validate_only: bool,
) -> Result<(), Failure> {
    check_named(name, "Group name must not be empty", &ops)?;
    let owner = &b.controller.group_configs;
    let current = owner.of(name);
    let ops = requested_ops(&current, ops, replace);
    let after = group_changes(&b.config, &current, &ops)?;
    if validate_only || after == current {
        return Ok(());
    }
    let failure = |e: TopicError| {
        (
            super::errors::topic_error_code(&e),
            super::errors::topic_error_message(&e),
        )
    };
    let c = b.node();
    let mut changes: Vec<(String, String, Option<String>)> = current
        .keys()
        .filter(|k| !after.contains_key(*k))
        .map(|k| (name.to_string(), k.clone(), None))
        .collect();
    changes.extend(
        after
            .iter()
            .filter(|(k, v)| current.get(*k) != Some(*v))
            .map(|(k, v)| (name.to_string(), k.clone(), Some(v.clone()))),
    );
    let n = changes.len();
    let applied = |c: &crate::cluster::node::ClusterNode| {
        c.host()
            .is_some_and(|b| b.replicas().group_configs.of(name) == after)
    };
    let results = c
        .simple(ControllerRequest::AlterGroupConfigs(changes), n, applied)
        .await;
    match results.into_iter().find_map(Result::err) {
        Some(e) => Err(failure(e)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::config::BrokerConfig;
    use crate::config::dynamic::DynamicConfigs;

    fn op(name: &str, op: i8, value: Option<&str>) -> Op {
        Op {
            name: name.into(),
            op,
            value: value.map(str::to_string),
        }
    }

    fn defaults(dynamic: DynamicConfigs) -> BrokerDefaults {
        let base =
            BrokerConfig::from_pairs([("log.cleanup.policy".to_string(), "delete".to_string())])
                .unwrap();
        BrokerDefaults::new(Arc::new(base), dynamic)
    }

    #[test]
    fn replacement_deletes_what_is_not_given() {
        let current = BTreeMap::from([
            ("retention.ms".to_string(), "1".to_string()),
            ("segment.ms".to_string(), "2".to_string()),
        ]);
        let ops = requested_ops(&current, vec![op("segment.ms", SET, Some("5"))], true);
        let d = defaults(DynamicConfigs::default());
        assert_eq!(
            topic_changes(&d, &current, &ops).unwrap(),
            vec![
                ("segment.ms".to_string(), Some("5".to_string())),
                ("retention.ms".to_string(), None)
            ]
        );
    }

    #[test]
    fn topic_append_starts_from_the_dynamic_broker_default() {
        let mut dynamic = DynamicConfigs::default();
        dynamic
            .cluster_default
            .insert("log.cleanup.policy".into(), "compact".into());
        let d = defaults(dynamic);
        let ops = [op("cleanup.policy", APPEND, Some("delete"))];
        assert_eq!(
            topic_changes(&d, &BTreeMap::new(), &ops).unwrap(),
            vec![("cleanup.policy".to_string(), Some("compact,delete".into()))]
        );
        let bad = [op("retention.ms", SET, Some("abc"))];
        assert_eq!(
            topic_changes(&d, &BTreeMap::new(), &bad).unwrap_err(),
            (
                ResponseError::InvalidConfig.code(),
                Some(
                    "Invalid value abc for configuration retention.ms: Not a number of type LONG"
                        .into()
                )
            )
        );
        let not_list = [op("retention.ms", APPEND, Some("1"))];
        assert!(topic_changes(&d, &BTreeMap::new(), &not_list).is_err());
    }

    #[test]
    fn broker_changes_refuse_read_only_keys_and_bad_values_as_invalid_request() {
        let d = defaults(DynamicConfigs::default());
        let none = BTreeMap::new();
        let ro = [
            op("log.retention.ms", SET, Some("1000")),
            op("log.dirs", SET, Some("/x")),
        ];
        assert_eq!(
            broker_changes(&d, &none, &ro).unwrap_err(),
            invalid_request("Cannot update these configs dynamically: [log.dirs]")
        );
        // Deleting a read-only key is not an update.
        assert!(broker_changes(&d, &none, &[op("log.dirs", DELETE, None)]).is_ok());
        assert_eq!(
            broker_changes(&d, &none, &[op("log.segment.bytes", SET, Some("x"))]).unwrap_err(),
            invalid_request(
                "Invalid value x for configuration log.segment.bytes: Not a number of type INT"
            )
        );
        assert_eq!(
            broker_changes(
                &d,
                &none,
                &[
                    op("log.retention.ms", SET, Some("1000")),
                    op("my.custom", SET, Some("v")),
                    op("min.insync.replicas", DELETE, None),
                ]
            )
            .unwrap(),
            vec![
                ("log.retention.ms".to_string(), Some("1000".into())),
                ("my.custom".to_string(), Some("v".into())),
                ("min.insync.replicas".to_string(), None),
            ]
        );
        assert!(broker_changes(&d, &none, &[op("a\tb", SET, Some("v"))]).is_err());
    }
}
