//! DeleteTopics (key 20), versions 1-6: by name (v1-5) or by name or id (v6); the partition
//! directories are removed. With `delete.topic.enable=false` every topic is answered as Kafka
//! does: TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3), and nothing is deleted.
//!
//! Authorization (Kafka's `ControllerApis.deleteTopics`): DELETE on the cluster allows every
//! topic, else each topic needs DELETE on it; see [`authz::delete_topic_refusal`] for which
//! refusals come before the topic's existence is told and when the name is withheld.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::authz::{self, Op};
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::DeleteTopics,
    min: 1,
    max: 6,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DeleteTopicsRequest = super::decode(&ctx, body)?;
    let v = ctx.version;
    let wanted: Vec<(Option<String>, uuid::Uuid)> = if v >= 6 {
        req.topics
            .into_iter()
            .map(|t| (t.name.map(|n| n.0.to_string()), t.topic_id))
            .collect()
    } else {
        req.topic_names
            .into_iter()
            .map(|n| (Some(n.0.to_string()), uuid::Uuid::nil()))
            .collect()
    };
    let mut resp = DeleteTopicsResponse::default();
    for (name, id) in wanted {
        let mut r = DeletableTopicResult::default();
        let by_id = name.is_none();
        let topic = match &name {
            Some(n) => b.controller.topic(n),
            None => b.controller.topic_by_id(&id),
        };
        r.name = name.clone().map(|n| TopicName(StrBytes::from_string(n)));
        if v >= 6 {
            r.topic_id = id;
        }
        if !b.config.delete_topic_enable {
            let e = if v >= 3 {
                ResponseError::TopicDeletionDisabled
            } else {
                ResponseError::InvalidRequest
            };
            r.error_code = e.code();
            if v >= 5 {
                r.error_message = Some(StrBytes::from_static_str("Topic deletion is disabled."));
            }
            resp.responses.push(r);
            continue;
        }
        let known_name = match &topic {
            Some(t) => t.name.to_string(),
            None => name.clone().unwrap_or_default(),
        };
        let cluster_delete = ctx.authorize_cluster(&b, Op::Delete);
        let may = |op| cluster_delete || ctx.may_topic(&b, op, &known_name);
        let refused =
            authz::delete_topic_refusal(by_id, topic.is_some(), may(Op::Describe), may(Op::Delete));
        if let Some((code, show_name)) = refused {
            r.error_code = code;
            if by_id && show_name {
                r.name = Some(TopicName(StrBytes::from_string(known_name)));
            }
            resp.responses.push(r);
            continue;
        }
        match topic {
            None => {
                r.error_code = if by_id {
                    ResponseError::UnknownTopicId.code()
                } else {
                    ResponseError::UnknownTopicOrPartition.code()
                };
            }
            Some(t) => {
                if v >= 6 {
                    r.topic_id = t.id;
                    r.name = Some(TopicName(StrBytes::from_string(t.name.to_string())));
                }
                let deleted = b.node().delete_topic(&t.name).await;
                if let Err(e) = deleted {
                    r.error_code = super::errors::topic_error_code(&e);
                    if v >= 5 {
                        r.error_message =
                            super::errors::topic_error_message(&e).map(StrBytes::from_string);
                    }
                }
            }
        }
        resp.responses.push(r);
    }
    super::respond(&ctx, &resp)
}
