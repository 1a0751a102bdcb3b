//! ListConfigResources (key 74), versions 0-1 (v0 is KIP-714's ListClientMetricsResources;
//! KIP-1142 renamed it and added the resource types).
//!
//! Behavior, as Kafka 4.4 answers:
//! - Without DESCRIBE_CONFIGS on the cluster: CLUSTER_AUTHORIZATION_FAILED, nothing listed.
//! - v1 lists the resources whose configs DescribeConfigs can show, for the types asked (an
//!   empty list: every type), in Kafka's order: groups with configs, client metrics
//!   resources, each live broker's loggers, each live broker, every topic (internal ones
//!   included).
//! - A type that is not a config resource type (anything but 2, 4, 8, 16, 32) is
//!   UNSUPPORTED_VERSION with no resources.
//! - v0 lists client metrics resources only. Sluice has none (no KIP-714 client metrics), so
//!   that list, and the v1 client metrics list, are empty.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ApiKey, ListConfigResourcesRequest, ListConfigResourcesResponse};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::ListConfigResources,
    min: 0,
    max: 1,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

pub const TOPIC: i8 = 2;
pub const BROKER: i8 = 4;
pub const BROKER_LOGGER: i8 = 8;
pub const CLIENT_METRICS: i8 = 16;
pub const GROUP: i8 = 32;

/// The config resource types in the order Kafka lists them.
const ORDER: [i8; 5] = [GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC];

/// What the broker has, by type.
#[derive(Debug, Default)]
pub struct Resources {
    pub groups: Vec<String>,
    pub brokers: Vec<i32>,
    pub topics: Vec<String>,
}

/// The (name, type) list for `types` (empty: all), or None when a type is not one Kafka has.
pub fn list(types: &[i8], r: &Resources) -> Option<Vec<(String, i8)>> {
    if types.iter().any(|t| !ORDER.contains(t)) {
        return None;
    }
    let mut out = Vec::new();
    for t in ORDER {
        if !types.is_empty() && !types.contains(&t) {
            continue;
        }
        match t {
            GROUP => out.extend(r.groups.iter().map(|g| (g.clone(), t))),
            BROKER_LOGGER | BROKER => out.extend(r.brokers.iter().map(|b| (b.to_string(), t))),
            TOPIC => out.extend(r.topics.iter().map(|n| (n.clone(), t))),
            _ => {}
        }
    }
    Some(out)
}

fn resources(b: &Base) -> Resources {
    let groups = b.controller.group_configs.groups();
    let img = b.node().image();
    let mut topics: Vec<String> = img.topic_ids.keys().map(|t| t.to_string()).collect();
    topics.sort();
    Resources {
        groups,
        brokers: img
            .brokers
            .values()
            .filter(|s| !s.fenced)
            .map(|s| s.registration.broker_id)
            .collect(),
        topics,
    }
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: ListConfigResourcesRequest = super::decode(&ctx, body)?;
    let mut resp = ListConfigResourcesResponse::default();
    if let Some(code) = ctx.cluster_error(&b, super::authz::Op::DescribeConfigs) {
        resp.error_code = code;
        return super::respond(&ctx, &resp);
    }
    if ctx.version == 0 {
        return super::respond(&ctx, &resp);
    }
    match list(&req.resource_types, &resources(&b)) {
        None => resp.error_code = ResponseError::UnsupportedVersion.code(),
        Some(found) => {
            resp.config_resources = found
                .into_iter()
                .map(|(name, t)| {
                    let mut r = ConfigResource::default();
                    r.resource_name = StrBytes::from_string(name);
                    r.resource_type = t;
                    r
                })
                .collect();
        }
    }
    super::respond(&ctx, &resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn have() -> Resources {
        Resources {
            groups: vec!["g".into()],
            brokers: vec![1, 2],
            topics: vec!["a".into(), "b".into()],
        }
    }

    #[test]
    fn every_type_in_kafkas_order() {
        let got = list(&[], &have()).unwrap();
        let want: Vec<(String, i8)> = vec![
            ("g".into(), GROUP),
            ("1".into(), BROKER_LOGGER),
            ("2".into(), BROKER_LOGGER),
            ("1".into(), BROKER),
            ("2".into(), BROKER),
            ("a".into(), TOPIC),
            ("b".into(), TOPIC),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn filtered_by_type_and_unknown_types_refused() {
        let got = list(&[TOPIC, BROKER], &have()).unwrap();
        assert_eq!(got.iter().filter(|(_, t)| *t == BROKER).count(), 2);
        assert_eq!(got.len(), 4);
        assert_eq!(list(&[CLIENT_METRICS], &have()), Some(vec![]));
        assert_eq!(list(&[3], &have()), None);
        assert_eq!(list(&[0, TOPIC], &have()), None);
    }
}
