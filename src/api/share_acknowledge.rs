//! ShareAcknowledge (key 79), version 1 (KIP-932; kafka-protocol 0.18 decodes v1 only):
//! acknowledgements outside a fetch, in the member's share session. The epoch must be the
//! one the session expects (INVALID_SHARE_SESSION_EPOCH; 0 cannot acknowledge), or -1 to
//! close the session after the acknowledgements, releasing what the member still holds.
//! Each partition answers its outcome (INVALID_RECORD_STATE for records the member does
//! not hold). Without READ on the group the request is GROUP_AUTHORIZATION_FAILED; a
//! partition of a topic without READ is TOPIC_AUTHORIZATION_FAILED.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch, PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ShareAcknowledgeRequest, ShareAcknowledgeResponse};

use super::Groups;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::ShareAcknowledge,
    min: 1,
    max: 1,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: ShareAcknowledgeRequest = super::decode(&ctx, body)?;
    let mut resp = ShareAcknowledgeResponse::default();
    let (group, member) = match super::share_fetch::session_ids(
        &b,
        &ctx,
        req.group_id.as_ref(),
        req.member_id.as_ref(),
    ) {
        Ok(ids) => ids,
        Err((code, message)) => {
            resp.error_code = code;
            if !message.is_empty() {
                resp.error_message = Some(message.to_string().into());
            }
            return super::respond(&ctx, &resp);
        }
    };
    let closed = match b
        .share
        .acknowledge_session(&group, &member, req.share_session_epoch)
    {
        Ok(c) => c,
        Err(code) => {
            resp.error_code = code;
            return super::respond(&ctx, &resp);
        }
    };
    for t in req.topics {
        let mut out = ShareAcknowledgeTopicResponse::default();
        out.topic_id = t.topic_id;
        for p in t.partitions {
            let batches = p
                .acknowledgement_batches
                .into_iter()
                .map(|a| (a.first_offset, a.last_offset, a.acknowledge_types))
                .collect();
            let tp = (t.topic_id, p.partition_index);
            let (code, message) =
                super::share_fetch::acknowledge(&b, &ctx, &group, &member, tp, batches);
            let mut pd = PartitionData::default();
            pd.partition_index = p.partition_index;
            pd.error_code = code;
            pd.error_message = message;
            let mut leader = LeaderIdAndEpoch::default();
            leader.leader_id = b.node_id();
            leader.leader_epoch = b
                .controller
                .topic_by_id(&t.topic_id)
                .and_then(|ti| ti.partition(p.partition_index).map(|x| x.leader_epoch()))
                .unwrap_or(-1);
            pd.current_leader = leader;
            out.partitions.push(pd);
        }
        resp.responses.push(out);
    }
    if closed {
        b.share.close_session(&group, &member);
    }
    // Acknowledgements are persisted before they are answered.
    b.share.persist().await;
    super::respond(&ctx, &resp)
}
