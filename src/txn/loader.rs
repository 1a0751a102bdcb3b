//! Loading `__transaction_state` partitions whenever this broker becomes a partition's leader,
//! as the group coordinator loads `__consumer_offsets` (`group::loader::became_leader`, through
//! [`PartitionLoads`]: once the high watermark reaches the log end the new leader started
//! with, the partition is replayed on the blocking pool) and installs its ids; meanwhile they get
//! COORDINATOR_LOAD_IN_PROGRESS. Transactions found prepared are then completed.

use super::Coordinator;
use crate::group::loader::PartitionLoads;

/// This broker no longer leads partition `index` of `__transaction_state`.
pub fn stopped_leading(coordinator: &Coordinator, index: i32) {
    coordinator.unload(index);
}
