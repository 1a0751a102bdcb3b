//! In a replicated cluster a group's coordinator is the leader of its `__consumer_offsets`
//! partition, as in Kafka: when this broker becomes a partition's leader it loads the
//! partition's groups, and when it stops leading it (or no longer holds it) it drops them.
//!
//! Loading waits until the high watermark has reached the log end the new leader started
//! with (everything in its log is then committed: no group is built from records a later
//! leader might not have), replays the partition from its log start to the high watermark on
//! the blocking pool, and installs the groups. Meanwhile their requests get
//! COORDINATOR_LOAD_IN_PROGRESS; no write can come in between, since the coordinator refuses
//! them while loading. A load overtaken by an unload or a newer epoch is dropped.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tracing::warn;

use super::Coordinator;
use super::{replay, store};
use crate::cluster::Partition;

/// How often a load waiting for the high watermark checks whether it is still wanted.
const RECHECK: Duration = Duration::from_millis(500);

/// This broker leads `p`, a partition of `__consumer_offsets` with `count` partitions.
pub fn became_leader(coordinator: &Arc<Coordinator>, p: Arc<Partition>, count: i32) {
    let epoch = p.leader_epoch();
    if !coordinator.begin_load(p.index, epoch, count) {
        return;
    }
    let coordinator = coordinator.clone();
    tokio::spawn(async move {
        let target = p.log_end_offset();
        loop {
            let waiter = Arc::new(Notify::new());
            p.add_waiter(&waiter);
            if !coordinator.is_loading(p.index, epoch) {
                return;
            }
            if p.high_watermark() >= target {
                break;
            }
            let _ = tokio::time::timeout(RECHECK, waiter.notified()).await;
        }
        let (index, p2) = (p.index, p.clone());
        match tokio::task::spawn_blocking(move || replay::load_partition(&p2)).await {
            Ok(Ok(loaded)) => {
                coordinator.finish_load(index, epoch, loaded);
            }
            // As Kafka's runtime does with a failed load: the partition is not coordinated
            // here (NOT_COORDINATOR) until leadership changes again.
            Ok(Err(e)) => {
                warn!(
                    partition = index,
                    "cannot load {}-{index}: {e:#}",
                    store::TOPIC
                );
                coordinator.unload(index);
            }
            Err(e) => {
                warn!(
                    partition = index,
                    "loading {}-{index} failed: {e}",
                    store::TOPIC
                );
                coordinator.unload(index);
            }
        }
    });
}

/// This broker no longer leads partition `index` of `__consumer_offsets`.
pub fn stopped_leading(coordinator: &Coordinator, index: i32) {
    coordinator.unload(index);
}
