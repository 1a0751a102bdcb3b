//! Loading `__transaction_state` partitions: at start-up on one node (every partition, before
//! anything is served), and in a cluster whenever this broker becomes a partition's leader,
//! as the group coordinator loads `__consumer_offsets` (`group::loader::became_leader`, through
//! [`PartitionLoads`]: once the high watermark reaches the log end the new leader started
//! with, the partition is replayed on the blocking pool) and installs its ids; meanwhile they get
//! COORDINATOR_LOAD_IN_PROGRESS. Transactions found prepared are then completed.

use std::collections::HashMap;
use std::sync::Arc;

use super::Coordinator;
use super::state::Transit;
use super::store::{self, TOPIC};
use crate::cluster::{Partition, TopicInfo};
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

impl PartitionLoads for Coordinator {
    type Loaded = HashMap<String, Transit>;
    const TOPIC: &'static str = TOPIC;
    fn begin_load(&self, partition: i32, epoch: i32, count: i32) -> bool {
        Coordinator::begin_load(self, partition, epoch, count)
    }
    fn is_loading(&self, partition: i32, epoch: i32) -> bool {
        Coordinator::is_loading(self, partition, epoch)
    }
    fn finish_load(self: &Arc<Self>, partition: i32, epoch: i32, loaded: Self::Loaded) {
        Coordinator::finish_load(self, partition, epoch, loaded);
    }
    fn unload(&self, partition: i32) {
        Coordinator::unload(self, partition)
    }
    fn replay(p: &Partition) -> anyhow::Result<Self::Loaded> {
        store::load_partition(p)
    }
}

/// This broker no longer leads partition `index` of `__transaction_state`.
pub fn stopped_leading(coordinator: &Coordinator, index: i32) {
    coordinator.unload(index);
}
