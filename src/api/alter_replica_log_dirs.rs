//! AlterReplicaLogDirs (key 34), versions 1-2 (Kafka 4.4's range; kafka-protocol decodes the
//! same). `kafka-reassign-partitions --execute` with `log_dirs` in its JSON and the admin
//! clients' `alterReplicaLogDirs` send it to the broker holding the replicas.
//!
//! Behavior, as Kafka's `ReplicaManager.alterReplicaLogDirs`, per partition (a partition named
//! twice takes the last dir asked), checked in this order:
//! - INVALID_TOPIC_EXCEPTION when `<topic>-<partition>.<32 hex>-future` would be longer than
//!   255 characters (the name of the copy in the destination);
//! - LOG_DIR_NOT_FOUND when the path is not one of this broker's `log.dirs`, compared as the
//!   absolute path DescribeLogDirs shows (Sluice has no offline log dirs, so Kafka's
//!   KAFKA_STORAGE_ERROR for one does not arise);
//! - REPLICA_NOT_AVAILABLE when this broker holds no replica of the partition (Kafka answers
//!   its NOT_LEADER_OR_FOLLOWER so for this API);
//! - NONE otherwise. A replica already in the dir stays (nothing to do); the others are moved
//!   after the answer, in the background (`Partition::move_to_log_dir`: a future copy in the
//!   destination, then the swap; `log::dir_move` has the files and the crash rules). The
//!   checkpoints (high watermarks, recovery points, log starts, the cleaner's) are then
//!   written for the partition's new dir. Leaders and followers move alike; the controller is
//!   not told (Kafka's AssignReplicasToDirs has no counterpart here).
//!
//! Differences: the copy holds the partition's log lock, so that partition's appends and
//! reads (and DescribeLogDirs) wait for it; Kafka copies while appends continue and shows the
//! copy as an `isFuture` entry meanwhile.
//!
//! Without ALTER on the cluster no replica moves: every partition is CLUSTER_AUTHORIZATION_FAILED.
//!
//! Version notes: v0 is gone in Kafka 4; v1 is v0 with throttling on the client side
//! (KIP-219); v2 is flexible (KIP-482).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, ApiKey};
use tracing::{info, warn};

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::cluster::Partition;
use crate::log::dir_move::{MAX_DIR_NAME_LEN, future_dir_name_len};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::AlterReplicaLogDirs,
    min: 1,
    max: 2,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

/// The checks before a move: the replica and the log dir it goes to, or the error code.
fn check(b: &Base, topic: &str, index: i32, path: &str) -> Result<(Arc<Partition>, PathBuf), i16> {
    if future_dir_name_len(topic, index) > MAX_DIR_NAME_LEN {
        return Err(ResponseError::InvalidTopicException.code());
    }
    let Some(dir) = b
        .config
        .log_dirs
        .iter()
        .find(|d| d.display().to_string() == path)
    else {
        return Err(ResponseError::LogDirNotFound.code());
    };
    let replica = b
        .controller
        .topic(topic)
        .and_then(|t| t.partition(index).cloned());
    match replica {
        Some(p) => Ok((p, dir.clone())),
        None => Err(ResponseError::ReplicaNotAvailable.code()),
    }
}

/// Moves `p` into `dest` off the runtime, then writes the checkpoints of its new dir.
fn start_move(b: &Arc<Base>, p: Arc<Partition>, dest: PathBuf) {
    let b = b.clone();
    tokio::spawn(async move {
        let (topic, index) = (p.topic.clone(), p.index);
        let moving = p.clone();
        let to = dest.clone();
        let moved = tokio::task::spawn_blocking(move || moving.move_to_log_dir(&to)).await;
        match moved {
            Ok(Ok(Some(from))) => {
                info!(%topic, partition = index, from = %from.display(), to = %dest.display(),
                      "replica moved to another log dir");
                b.controller
                    .cleaner
                    .move_checkpoint(&from, &dest, &topic, index);
                let topics = b.controller.topics();
                let c = &b.controller.checkpoints;
                for written in [
                    c.write_high_watermarks(&topics),
                    c.write_recovery_points(&topics),
                    c.write_log_starts(&topics),
                ] {
                    if let Err(e) = written {
                        warn!(%topic, partition = index, "checkpoint after a log dir move: {e:#}");
                    }
                }
            }
            Ok(Ok(None)) => {}
            Ok(Err(e)) => warn!(%topic, partition = index, to = %dest.display(),
                                "log dir move failed: {e:#}"),
            Err(e) => warn!(%topic, partition = index, "log dir move task failed: {e}"),
        }
    });
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: AlterReplicaLogDirsRequest = super::decode(&ctx, body)?;
    // (topic, partition) -> the path asked last, in the order first asked.
    let mut asked: Vec<((String, i32), String)> = Vec::new();
    let mut position: HashMap<(String, i32), usize> = HashMap::new();
    for d in &req.dirs {
        for t in &d.topics {
            for &index in &t.partitions {
                let key = (t.name.0.to_string(), index);
                let path = d.path.to_string();
                match position.get(&key) {
                    Some(&i) => asked[i].1 = path,
                    None => {
                        position.insert(key.clone(), asked.len());
                        asked.push((key, path));
                    }
                }
            }
        }
    }
    let mut resp = AlterReplicaLogDirsResponse::default();
    let mut topic_at: HashMap<String, usize> = HashMap::new();
    let refused = ctx.cluster_error(&b, super::authz::Op::Alter);
    for ((topic, index), path) in asked {
        let checked = match refused {
            Some(code) => Err(code),
            None => check(&b, &topic, index, &path),
        };
        let error_code = match checked {
            Ok((p, dest)) => {
                if p.log_dir() != dest {
                    start_move(&b, p, dest);
                }
                0
            }
            Err(code) => {
                warn!(%topic, partition = index, %path, code, "cannot alter the replica's log dir");
                code
            }
        };
        let mut r = AlterReplicaLogDirPartitionResult::default();
        r.partition_index = index;
        r.error_code = error_code;
        match topic_at.get(&topic) {
            Some(&i) => resp.results[i].partitions.push(r),
            None => {
                topic_at.insert(topic.clone(), resp.results.len());
                let mut t = AlterReplicaLogDirTopicResult::default();
                t.topic_name = kafka_protocol::messages::TopicName(
                    kafka_protocol::protocol::StrBytes::from_string(topic),
                );
                t.partitions.push(r);
                resp.results.push(t);
            }
        }
    }
    super::respond(&ctx, &resp)
}
