//! ListOffsets (key 2), versions 1-10.
//!
//! Timestamps: -1 latest (the high watermark; with isolation_level 1, read_committed, v2+: the
//! last stable offset), -2 earliest (log start), -3 max timestamp (v7+), -4 earliest local
//! (v8+, the log start: all data is local), -5 latest tiered (v9+, none: -1); any other value
//! finds the first record whose timestamp is at or after it through the time index. As
//! Kafka's `fetchOffsetForTimestamp`, a record found for -3 or a timestamp at or past the last
//! fetchable offset (the high watermark, or the LSO for read_committed) is not answered.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse};

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::cluster::{Partition, PartitionError};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::ListOffsets,
    min: 1,
    max: 10,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

fn lookup(
    p: &Partition,
    ts: i64,
    epoch_check: i32,
    read_committed: bool,
) -> Result<(i64, i64, i32), PartitionError> {
    p.check_epoch(epoch_check)?;
    let epoch = p.replica_state().leader_epoch;
    let last_fetchable = if read_committed {
        p.last_stable_offset()
    } else {
        p.high_watermark()
    };
    let fetchable = |found: Option<(i64, i64)>| found.filter(|(_, o)| *o < last_fetchable);
    let found = match ts {
        -1 => Some((-1, last_fetchable)),
        -2 | -4 => Some((-1, p.log_start_offset())),
        -3 => fetchable(p.max_timestamp()?),
        -5 => None,
        ts => fetchable(p.offset_for_timestamp(ts)?),
    };
    Ok(match found {
        Some((t, o)) => (t, o, epoch),
        None => (-1, -1, -1),
    })
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: ListOffsetsRequest = super::decode(&ctx, body)?;
    let v = ctx.version;
    let read_committed = v >= 2 && req.isolation_level == 1;
    let mut resp = ListOffsetsResponse::default();
    for rt in req.topics {
        let refused = ctx.topic_error(&b, super::authz::Op::Describe, rt.name.0.as_str());
        let topic = b.controller.topic(rt.name.0.as_str());
        let mut tr = ListOffsetsTopicResponse::default();
        tr.name = rt.name.clone();
        for rp in rt.partitions {
            let mut pr = ListOffsetsPartitionResponse::default();
            pr.partition_index = rp.partition_index;
            pr.timestamp = -1;
            pr.offset = -1;
            let valid_ts = rp.timestamp >= 0
                || rp.timestamp == -1
                || rp.timestamp == -2
                || (rp.timestamp == -3 && v >= 7)
                || (rp.timestamp == -4 && v >= 8)
                || (rp.timestamp == -5 && v >= 9);
            let found = match (refused, &topic) {
                (Some(code), _) => Err(code),
                (None, Some(t)) => super::local_partition(t, rp.partition_index),
                (None, None) => Err(ResponseError::UnknownTopicOrPartition.code()),
            };
            match found {
                Err(code) => pr.error_code = code,
                Ok(_) if !valid_ts => pr.error_code = ResponseError::UnsupportedVersion.code(),
                Ok(p) => match lookup(
                    p,
                    rp.timestamp,
                    if v >= 4 { rp.current_leader_epoch } else { -1 },
                    read_committed,
                ) {
                    Ok((t, o, e)) => {
                        pr.timestamp = t;
                        pr.offset = o;
                        if v >= 4 {
                            pr.leader_epoch = e;
                        }
                    }
                    Err(e) => pr.error_code = super::errors::partition_error_code(&e),
                },
            }
            tr.partitions.push(pr);
        }
        resp.topics.push(tr);
    }
    super::respond(&ctx, &resp)
}
