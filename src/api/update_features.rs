//! UpdateFeatures (key 57), versions 0-2 (`kafka-features upgrade / downgrade / disable`, the
//! admin clients' updateFeatures).
//!
//! Behavior, as Kafka 4.4's controller decides (`cluster::features::decide`): all updates or
//! none; an unknown feature, a level outside what Sluice supports, a downgrade without a
//! downgrade type, an upgrade with one, or an unknown upgrade type is INVALID_UPDATE_VERSION
//! with Kafka's message behind "The update failed for all features since the following feature
//! had an error: ". `validate_only` decides and records nothing. The levels are a Config record
//! (the Features resource) through the metadata quorum's active controller (one node is a
//! one-voter quorum), answered once this broker has applied it. ApiVersions shows the new
//! finalized levels with a higher epoch.
//!
//! Without ALTER on the cluster nothing changes: CLUSTER_AUTHORIZATION_FAILED.
//!
//! Version notes: v0 has `allow_downgrade` (a safe downgrade when set); v1 the upgrade type
//! (KIP-778) and `validate_only`; v2 answers without per-feature results.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{ApiKey, UpdateFeaturesRequest, UpdateFeaturesResponse};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::cluster::features::{FeatureUpdate, SAFE_DOWNGRADE, UPGRADE};
use crate::cluster::node::requests::{ControllerReply, ControllerRequest};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::UpdateFeatures,
    min: 0,
    max: 2,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

/// The requested updates, one per feature (a later one replaces an earlier one, as Kafka's
/// map of updates does).
fn updates(req: &UpdateFeaturesRequest, version: i16) -> Vec<FeatureUpdate> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out: Vec<FeatureUpdate> = Vec::new();
    for u in &req.feature_updates {
        let upgrade_type = if version == 0 {
            if u.allow_downgrade {
                SAFE_DOWNGRADE
            } else {
                UPGRADE
            }
        } else {
            u.upgrade_type
        };
        let update = FeatureUpdate {
            feature: u.feature.to_string(),
            level: u.max_version_level,
            upgrade_type,
        };
        match seen.get(&update.feature) {
            Some(&i) => out[i] = update,
            None => {
                seen.insert(update.feature.clone(), out.len());
                out.push(update);
            }
        }
    }
    out
}

/// Why an update failed: refused (Kafka's message for the first refused update), or not
/// carried out (the error code and message).
enum Failure {
    Refused(String),
    Failed(i16, String),
}

/// Decides and records the updates.
async fn update(b: &Base, ups: Vec<FeatureUpdate>, validate_only: bool) -> Result<(), Failure> {
    let c = b.node();
    let req = ControllerRequest::UpdateFeatures {
        updates: ups
            .iter()
            .map(|u| (u.feature.clone(), u.level, u.upgrade_type))
            .collect(),
        validate_only,
    };
    match c.call(req).await {
        Ok(ControllerReply::Features(Ok(()))) => {
            if !validate_only {
                let want: Vec<(String, i16)> =
                    ups.iter().map(|u| (u.feature.clone(), u.level)).collect();
                c.wait_applied(|c| {
                    let now = c.image().feature_levels();
                    want.iter()
                        .all(|(f, l)| now.get(f).copied().unwrap_or(0) == *l)
                })
                .await;
            }
            Ok(())
        }
        Ok(ControllerReply::Features(Err(e))) => Err(Failure::Refused(e)),
        Ok(other) => Err(Failure::Failed(
            ResponseError::UnknownServerError.code(),
            format!("unexpected controller answer {other:?}"),
        )),
        Err(e) => Err(Failure::Failed(
            ResponseError::RequestTimedOut.code(),
            format!("{e}"),
        )),
    }
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: UpdateFeaturesRequest = super::decode(&ctx, body)?;
    let v = ctx.version;
    let ups = updates(&req, v);
    let validate_only = v >= 1 && req.validate_only;
    let mut resp = UpdateFeaturesResponse::default();
    // Kafka's top-level message is null on success; a feature's result carries the error's
    // name ("NONE"), as Kafka's ApiError fallback message does.
    resp.error_message = None;
    if let Some(code) = ctx.cluster_error(&b, super::authz::Op::Alter) {
        resp.error_code = code;
        resp.error_message = Some(StrBytes::from_static_str(
            super::authz::CLUSTER_DENIED_MESSAGE,
        ));
        return super::respond(&ctx, &resp);
    }
    match update(&b, ups.clone(), validate_only).await {
        Err(Failure::Refused(e)) => {
            resp.error_code = ResponseError::InvalidUpdateVersion.code();
            resp.error_message = Some(StrBytes::from_string(format!(
                "The update failed for all features since the following feature had an error: {e}"
            )));
        }
        Err(Failure::Failed(code, message)) => {
            resp.error_code = code;
            resp.error_message = Some(StrBytes::from_string(message));
        }
        Ok(()) if v <= 1 => {
            resp.results = ups
                .into_iter()
                .map(|u| {
                    let mut r = UpdatableFeatureResult::default();
                    r.feature = StrBytes::from_string(u.feature);
                    r.error_message = Some(StrBytes::from_static_str("NONE"));
                    r
                })
                .collect();
        }
        Ok(()) => {}
    }
    super::respond(&ctx, &resp)
}
