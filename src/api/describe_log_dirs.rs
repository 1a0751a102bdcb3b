//! DescribeLogDirs (key 35), versions 1-4 (`kafka-log-dirs --describe`).
//!
//! Behavior: one result per log dir in `log.dirs`, with the replicas this broker holds there:
//! each partition's size (its segment files, as Kafka counts it), its offset lag as Kafka computes
//! it for a current (not future) log, max(high watermark - log end offset, 0), and
//! `is_future_key` false (a move to another log dir copies under the partition's log lock, so
//! the replica is seen in its old dir until the swap, then in its new one). Null topics describes
//! every replica; otherwise the named partitions held here (unknown ones are left out, as
//! Kafka does).
//!
//! Without DESCRIBE on the cluster: no results, and CLUSTER_AUTHORIZATION_FAILED from v3.
//!
//! Version notes: v1 is the oldest Kafka 4 serves; v2 is flexible; v3 adds the top-level
//! error code; v4 the dir's total and usable bytes (KIP-827), from statvfs.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{
    ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::cluster::Partition;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::DescribeLogDirs,
    min: 1,
    max: 4,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

/// Total and usable bytes of the file system holding `dir`, as Java's FileStore reports them.
fn space(dir: &Path) -> Option<(i64, i64)> {
    let st = nix::sys::statvfs::statvfs(dir).ok()?;
    let frag = st.fragment_size() as i64;
    Some((
        st.blocks() as i64 * frag,
        st.blocks_available() as i64 * frag,
    ))
}

fn partition_entry(p: &Partition) -> DescribeLogDirsPartition {
    let mut e = DescribeLogDirsPartition::default();
    e.partition_index = p.index;
    e.partition_size = p.size_bytes() as i64;
    e.offset_lag = (p.high_watermark() - p.log_end_offset()).max(0);
    e.is_future_key = false;
    e
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DescribeLogDirsRequest = super::decode(&ctx, body)?;
    // Without DESCRIBE on the cluster Kafka answers no log dirs (and, from v3, the error).
    if let Some(code) = ctx.cluster_error(&b, super::authz::Op::Describe) {
        let mut resp = DescribeLogDirsResponse::default();
        if ctx.version >= 3 {
            resp.error_code = code;
        }
        return super::respond(&ctx, &resp);
    }
    // The replicas asked about, by topic name.
    let mut chosen: Vec<(Arc<str>, Arc<Partition>)> = Vec::new();
    match &req.topics {
        None => {
            for t in b.controller.topics() {
                chosen.extend(t.partitions.iter().map(|p| (t.name.clone(), p.clone())));
            }
        }
        Some(wanted) => {
            for w in wanted {
                let Some(t) = b.controller.topic(w.topic.0.as_str()) else {
                    continue;
                };
                for index in &w.partitions {
                    if let Some(p) = t.partition(*index) {
                        chosen.push((t.name.clone(), p.clone()));
                    }
                }
            }
        }
    }
    let mut resp = DescribeLogDirsResponse::default();
    for dir in &b.config.log_dirs {
        let mut by_topic: BTreeMap<Arc<str>, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
        for (name, p) in &chosen {
            if p.log_dir() == *dir {
                by_topic
                    .entry(name.clone())
                    .or_default()
                    .push(partition_entry(p));
            }
        }
        let mut r = DescribeLogDirsResult::default();
        r.log_dir = StrBytes::from_string(dir.display().to_string());
        r.topics = by_topic
            .into_iter()
            .map(|(name, partitions)| {
                let mut t = DescribeLogDirsTopic::default();
                t.name = TopicName(StrBytes::from_string(name.to_string()));
                t.partitions = partitions;
                t
            })
            .collect();
        if ctx.version >= 4
            && let Some((total, usable)) = space(dir)
        {
            r.total_bytes = total;
            r.usable_bytes = usable;
        }
        resp.results.push(r);
    }
    super::respond(&ctx, &resp)
}
