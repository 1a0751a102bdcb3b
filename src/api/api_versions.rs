//! ApiVersions (key 18), versions 0-4.
//!
//! The list of API keys and version ranges is built from [`super::APIS`], the one list of
//! served APIs. A request above our highest version is answered in v0 with
//! UNSUPPORTED_VERSION and the full list, so the client can pick a version it shares with us.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use super::{APIS, ApiSpec, RequestCtx};
use crate::broker::Broker;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::ApiVersions,
    min: 0,
    max: 4,
    handle: |b, ctx, body| Box::pin(handle(b, ctx, body)),
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

async fn handle(_b: Arc<Broker>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let _req: ApiVersionsRequest = super::decode(&ctx, body)?;
    let mut resp = ApiVersionsResponse::default();
    resp.api_keys = api_list();
    super::respond(&ctx, &resp)
}

/// The v0 answer to an ApiVersions request at a version we do not serve.
pub fn unsupported_version(correlation_id: i32) -> Response {
    let ctx = RequestCtx {
        api_key: ApiKey::ApiVersions,
        version: 0,
        correlation_id,
        client_id: None,
        peer: None,
    };
    let mut resp = ApiVersionsResponse::default();
    resp.error_code = ResponseError::UnsupportedVersion.code();
    resp.api_keys = api_list();
    super::respond(&ctx, &resp)
        .expect("v0 ApiVersions response encodes")
        .expect("a response")
}
