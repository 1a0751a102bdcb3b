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
    /// Replays partitions `parts` (of `count`) from their log start to their high watermark:
    /// what each installs, in the order of `parts`. They are replayed together for a
    /// coordinator whose keys move between partitions when the topic grows (the group
    /// coordinator's); the others replay each on its own.
    fn replay(parts: &[Arc<Partition>], count: i32) -> anyhow::Result<Vec<Self::Loaded>>;
}

/// This broker leads `parts`, partitions (of `count`) of the topic `coordinator` keeps its
/// state in, all at once (at start-up, every partition; after a leadership change, those it
/// moved here): they are loaded together in the background, each once its high watermark
/// has reached the log end it had when this broker became leader ([`committed`]).
pub fn became_leader<C: PartitionLoads>(
    coordinator: &Arc<C>,
    parts: Vec<Arc<Partition>>,
    count: i32,
) {
    let parts: Vec<(Arc<Partition>, i32)> = parts
        .into_iter()
        .map(|p| {
            let epoch = p.leader_epoch();
            (p, epoch)
        })
        .filter(|(p, epoch)| coordinator.begin_load(p.index, *epoch, count))
        .collect();
    if parts.is_empty() {
        return;
    }
    let coordinator = coordinator.clone();
    tokio::spawn(async move {
        let mut ready = Vec::with_capacity(parts.len());
        for (p, epoch) in parts {
            let wanted = || coordinator.is_loading(p.index, epoch);
            if committed(&p, wanted).await {
                ready.push((p, epoch));
            }
        }
        if ready.is_empty() {
            return;
        }
        let ps: Vec<Arc<Partition>> = ready.iter().map(|(p, _)| p.clone()).collect();
        let replayed = tokio::task::spawn_blocking(move || C::replay(&ps, count))
            .await
            .unwrap_or_else(|e| Err(anyhow::anyhow!("the load task failed: {e}")));
        match replayed {
            Ok(loaded) => {
                for ((p, epoch), l) in ready.into_iter().zip(loaded) {
                    coordinator.finish_load(p.index, epoch, l);
                }
            }
            // As Kafka's runtime does with a failed load: the partitions are not coordinated
            // here (NOT_COORDINATOR) until leadership changes again.
            Err(e) => {
                let indexes: Vec<i32> = ready.iter().map(|(p, _)| p.index).collect();
                warn!(partitions = ?indexes, "cannot load {}: {e:#}", C::TOPIC);
                for i in indexes {
                    coordinator.unload(i);
                }
            }
        }
    });
}

/// Waits until the high watermark of `p`, which this broker has just become the leader of,
/// reaches the log end the leader started with (everything in its log is then committed).
/// False if the load stopped being `wanted` meanwhile (checked at every change of the
/// partition, and every [`RECHECK`]).
pub async fn committed(p: &Partition, wanted: impl Fn() -> bool) -> bool {
    let target = p.log_end_offset();
    loop {
        let waiter = Arc::new(Notify::new());
        p.add_waiter(&waiter);
        if !wanted() {
            return false;
        }
        if p.high_watermark() >= target {
            return true;
        }
        let _ = tokio::time::timeout(RECHECK, waiter.notified()).await;
    }
}

/// This broker no longer leads partition `index` of `__consumer_offsets`.
pub fn stopped_leading(coordinator: &Coordinator, index: i32) {
    coordinator.unload(index);
}
