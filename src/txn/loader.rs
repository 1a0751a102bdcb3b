//! Loading `__transaction_state` partitions: at start-up on one node (every partition, before
//! anything is served), and in a cluster whenever this broker becomes a partition's leader,
//! as the group coordinator loads `__consumer_offsets` (`group::loader::became_leader`, through
//! [`PartitionLoads`]: once the high watermark reaches the log end the new leader started
//! with, the partition is replayed on the blocking pool) and installs its ids; meanwhile they get
//! COORDINATOR_LOAD_IN_PROGRESS. Transactions found prepared are then completed.

use std::sync::Arc;

use super::Coordinator;
use super::store;
use crate::cluster::TopicInfo;
use crate::group::loader::PartitionLoads;

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

/// This broker no longer leads partition `index` of `__transaction_state`.
pub fn stopped_leading(coordinator: &Coordinator, index: i32) {
    coordinator.unload(index);
}
