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

use crate::cluster::Partition;

/// How often a load waiting for the high watermark checks whether it is still wanted.
const RECHECK: Duration = Duration::from_millis(500);

/// A coordinator whose state is replayed from the partitions of an internal topic it
/// coordinates while this broker leads them (the group coordinator, the transaction one).
pub trait PartitionLoads: Send + Sync + 'static {
    /// What a partition's replay produces.
    type Loaded: Send + 'static;
    /// The internal topic, for messages.
    const TOPIC: &'static str;
    /// Whether a load of `partition` (of `count`) at `epoch` must start now.
    fn begin_load(&self, partition: i32, epoch: i32, count: i32) -> bool;
    /// Whether the load begun at `epoch` is still wanted.
    fn is_loading(&self, partition: i32, epoch: i32) -> bool;
    /// Installs a replay unless the load became stale meanwhile (then false).
    fn finish_load(self: &Arc<Self>, partition: i32, epoch: i32, loaded: Self::Loaded) -> bool;
    /// Stops coordinating `partition`.
    fn unload(&self, partition: i32);
    /// Replays a partition from its log start to its high watermark.
    fn replay(p: &Partition) -> anyhow::Result<Self::Loaded>;
}

/// This broker leads `p`, a partition (of `count`) of the topic `coordinator` keeps its
/// state in: the partition is loaded in the background ([`load_when_committed`]).
pub fn became_leader<C: PartitionLoads>(coordinator: &Arc<C>, p: Arc<Partition>, count: i32) {
    let epoch = p.leader_epoch();
    if !coordinator.begin_load(p.index, epoch, count) {
        return;
    }
    let coordinator = coordinator.clone();
    tokio::spawn(async move {
        let index = p.index;
        let wanted = || coordinator.is_loading(index, epoch);
        match load_when_committed(p, wanted, C::replay).await {
            None => {}
            Some(Ok(loaded)) => {
                coordinator.finish_load(index, epoch, loaded);
            }
            // As Kafka's runtime does with a failed load: the partition is not coordinated
            // here (NOT_COORDINATOR) until leadership changes again.
            Some(Err(e)) => {
                warn!(partition = index, "cannot load {}-{index}: {e:#}", C::TOPIC);
                coordinator.unload(index);
            }
        }
    });
}

/// A coordinator's load of `p`, which this broker has just become the leader of: waits
/// until the high watermark reaches the log end the leader started with (everything in its
/// log is then committed), then runs `replay` on the blocking pool. None if the load stopped
/// being `wanted` meanwhile (checked at every change of the partition, and every
/// [`RECHECK`]).
pub async fn load_when_committed<T: Send + 'static>(
    p: Arc<Partition>,
    wanted: impl Fn() -> bool,
    replay: fn(&Partition) -> anyhow::Result<T>,
) -> Option<anyhow::Result<T>> {
    let target = p.log_end_offset();
    loop {
        let waiter = Arc::new(Notify::new());
        p.add_waiter(&waiter);
        if !wanted() {
            return None;
        }
        if p.high_watermark() >= target {
            break;
        }
        let _ = tokio::time::timeout(RECHECK, waiter.notified()).await;
    }
    Some(
        tokio::task::spawn_blocking(move || replay(&p))
            .await
            .unwrap_or_else(|e| Err(anyhow::anyhow!("the load task failed: {e}"))),
    )
}

/// This broker no longer leads partition `index` of `__consumer_offsets`.
pub fn stopped_leading(coordinator: &Coordinator, index: i32) {
    coordinator.unload(index);
}
