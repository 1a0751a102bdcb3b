//! ApiVersions (key 18), versions 0-4.
//!
//! The list of API keys and version ranges is built from [`super::APIS`], the one list of
//! served APIs. A request above our highest version is answered in v0 with
//! UNSUPPORTED_VERSION and the full list, so the client can pick a version it shares with us.
//!
//! v3+ also carry the features (KIP-584, `cluster::features`): the supported levels of every
//! feature Kafka 4.4 knows and the finalized ones (a new cluster's, as Kafka 4.4 finalizes
//! them where Sluice supports them, e.g. `transaction.version` 2: EndTxn v5, the epoch bump
//! per transaction, partitions added by the produce itself, KIP-890 part 2; changed by
//! UpdateFeatures; `share.version` 1: share groups, KIP-932, where Kafka 4.4 finalizes 2, whose
//! additions (ShareFetch/ShareAcknowledge v2, the renew acknowledgement) kafka-protocol 0.18
//! cannot decode). A supported range starting at 0 is only listed from v4 (KIP-1022: older
//! clients cannot parse it), as Kafka lists it.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{APIS, ApiSpec, RequestCtx};
use crate::cluster::features::FEATURES;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::ApiVersions,
    min: 0,
    max: 4,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

fn api_list() -> Vec<ApiVersion> {
    let mut keys: Vec<ApiVersion> = APIS
        .iter()
        .map(|s| {
            let mut v = ApiVersion::default();
            v.api_key = s.key as i16;
            v.min_version = s.min;
            v.max_version = s.max;
            v
        })
        .collect();
    keys.sort_by_key(|k| k.api_key);
    keys
}

fn add_features(b: &Base, version: i16, resp: &mut ApiVersionsResponse) {
    if version < 3 {
        return;
    }
    for &(name, min, max, _) in FEATURES {
        if min > 0 || version >= 4 {
            let mut f = SupportedFeatureKey::default();
            f.name = StrBytes::from_static_str(name);
            f.min_version = min;
            f.max_version = max;
            resp.supported_features.push(f);
        }
    }
    let img = b.node().image();
    let (levels, epoch) = (img.feature_levels(), img.offset as i64);
    for (name, level) in levels {
        let mut f = FinalizedFeatureKey::default();
        f.name = StrBytes::from_string(name);
        f.min_version_level = level;
        f.max_version_level = level;
        resp.finalized_features.push(f);
    }
    // Clients adopt the features of the highest epoch they have seen (-1 before any).
    resp.finalized_features_epoch = epoch;
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let _req: ApiVersionsRequest = super::decode(&ctx, body)?;
    let mut resp = ApiVersionsResponse::default();
    resp.api_keys = api_list();
    add_features(&b, ctx.version, &mut resp);
    super::respond(&ctx, &resp)
}

/// The v0 answer to an ApiVersions request at a version we do not serve.
pub fn unsupported_version(correlation_id: i32) -> Response {
    let ctx = RequestCtx::synthetic(ApiKey::ApiVersions, 0, correlation_id);
    let mut resp = ApiVersionsResponse::default();
    resp.error_code = ResponseError::UnsupportedVersion.code();
    resp.api_keys = api_list();
    super::respond(&ctx, &resp)
        .expect("v0 ApiVersions response encodes")
        .expect("a response")
}
