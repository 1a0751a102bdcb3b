//! Loading `__transaction_state` partitions: at start-up on one node (every partition, before
//! anything is served), and in a cluster whenever this broker becomes a partition's leader,
//! as the group coordinator loads `__consumer_offsets` (`group::loader`): the load waits
//! until the high watermark reaches the log end the new leader started with, replays the
//! partition on the blocking pool and installs its ids; meanwhile they get
//! COORDINATOR_LOAD_IN_PROGRESS. Transactions found prepared are then completed.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tracing::warn;

use super::Coordinator;
use super::store::{self, TOPIC};
use crate::cluster::{Partition, TopicInfo};

/// How often a load waiting for the high watermark checks whether it is still wanted.
const RECHECK: Duration = Duration::from_millis(500);

/// One node: every partition of `topic` is led here; each is replayed and installed.
pub fn load_all(coordinator: &Arc<Coordinator>, topic: &TopicInfo) -> anyhow::Result<()> {
    let count = topic.partitions.len() as i32;
    for p in &topic.partitions {
        let epoch = p.leader_epoch();
        if coordinator.begin_load(p.index, epoch, count) {
            coordinator.finish_load(p.index, epoch, store::load_partition(p)?);
        }
    }
    Ok(())
}

/// This broker leads `p`, a partition of `__transaction_state` with `count` partitions.
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
        match tokio::task::spawn_blocking(move || store::load_partition(&p2)).await {
            Ok(Ok(loaded)) => {
                coordinator.finish_load(index, epoch, loaded);
            }
            Ok(Err(e)) => {
                warn!(partition = index, "cannot load {TOPIC}-{index}: {e:#}");
                coordinator.unload(index);
            }
            Err(e) => {
                warn!(partition = index, "loading {TOPIC}-{index} failed: {e}");
                coordinator.unload(index);
            }
        }
    });
}

/// This broker no longer leads partition `index` of `__transaction_state`.
pub fn stopped_leading(coordinator: &Coordinator, index: i32) {
    coordinator.unload(index);
}
