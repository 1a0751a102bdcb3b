//! Which `__consumer_offsets` partitions a coordinator serves in a replicated cluster, as
//! Kafka's CoordinatorRuntime tracks them: a partition this broker leads is Loading (its
//! groups are being replayed; their requests get COORDINATOR_LOAD_IN_PROGRESS) and then
//! Active; any other partition's groups get NOT_COORDINATOR. Each state carries the leader
//! epoch it was entered in, so a stale load or write is told apart from the current one.
//!
//! Pure bookkeeping, no I/O: the coordinator keeps one `Ownership` beside its group map (under
//! the same lock), and the loader drives it.

use std::collections::HashMap;

use kafka_protocol::ResponseError as E;

use crate::group::records;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    Loading { epoch: i32 },
    Active { epoch: i32 },
}

impl Load {
    fn epoch(self) -> i32 {
        match self {
            Load::Loading { epoch } | Load::Active { epoch } => epoch,
        }
    }
}

/// The partitions this broker coordinates, and how groups map onto them.
#[derive(Debug, Default)]
pub struct Ownership {
    /// `__consumer_offsets`'s partition count, fixed by the first partition loaded (as Kafka
    /// fixes it when the coordinator starts).
    count: Option<i32>,
    partitions: HashMap<i32, Load>,
}

impl Ownership {
    /// The partition `group` belongs to, once the partition count is known.
    pub fn partition_of(&self, group: &str) -> Option<i32> {
        self.count.map(|n| records::partition_for(group, n))
    }

    /// This broker became leader of `partition` at `epoch`. Returns true when the partition
    /// must be loaded now: it was not owned (or its load had not finished, and this is a newer
    /// epoch: the load restarts). An Active partition at an older epoch stays Active (its log
    /// was led here all along) and takes the new epoch; an epoch not newer is ignored.
    pub fn begin_load(&mut self, partition: i32, epoch: i32, count: i32) -> bool {
        if count < 1 || partition < 0 || partition >= *self.count.get_or_insert(count) {
            return false;
        }
        match self.partitions.get_mut(&partition) {
            Some(l) if l.epoch() >= epoch => false,
            Some(Load::Active { epoch: e }) => {
                *e = epoch;
                false
            }
            _ => {
                self.partitions.insert(partition, Load::Loading { epoch });
                true
            }
        }
    }

    /// The load of `partition` started at `epoch` finished. False if it is stale (the
    /// partition was unloaded or reloaded meanwhile): its groups must not be installed.
    pub fn finish_load(&mut self, partition: i32, epoch: i32) -> bool {
        match self.partitions.get_mut(&partition) {
            Some(l) if *l == Load::Loading { epoch } => {
                *l = Load::Active { epoch };
                true
            }
            _ => false,
        }
    }

    /// Whether the load of `partition` started at `epoch` is still wanted.
    pub fn is_loading(&self, partition: i32, epoch: i32) -> bool {
        self.partitions.get(&partition) == Some(&Load::Loading { epoch })
    }

    /// This broker stopped leading `partition` (or no longer holds it). Returns whether it
    /// was owned.
    pub fn unload(&mut self, partition: i32) -> bool {
        self.partitions.remove(&partition).is_some()
    }

    /// Whether requests for `group` may be served here: the leader epoch of its partition,
    /// or the error to answer with.
    pub fn check(&self, group: &str) -> Result<i32, i16> {
        let Some(p) = self.partition_of(group) else {
            return Err(E::NotCoordinator.code());
        };
        self.check_partition(p)
    }

    /// Whether `partition` is Active here: its leader epoch, or the error to answer with.
    pub fn check_partition(&self, partition: i32) -> Result<i32, i16> {
        match self.partitions.get(&partition) {
            Some(Load::Active { epoch }) => Ok(*epoch),
            Some(Load::Loading { .. }) => Err(E::CoordinatorLoadInProgress.code()),
            None => Err(E::NotCoordinator.code()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group id that lands in `partition` of `n`.
    fn group_in(partition: i32, n: i32) -> String {
        (0..)
            .map(|i| format!("g{i}"))
            .find(|g| records::partition_for(g, n) == partition)
            .unwrap()
    }

    #[test]
    fn nothing_is_coordinated_before_a_load() {
        let o = Ownership::default();
        assert_eq!(o.check("g"), Err(E::NotCoordinator.code()));
        assert_eq!(o.partition_of("g"), None);
    }

    #[test]
    fn a_partition_is_loading_then_active() {
        let mut o = Ownership::default();
        let (g, other) = (group_in(3, 50), group_in(4, 50));
        assert!(o.begin_load(3, 7, 50));
        assert_eq!(o.check(&g), Err(E::CoordinatorLoadInProgress.code()));
        assert_eq!(o.check(&other), Err(E::NotCoordinator.code()));
        assert_eq!(
            o.check_partition(3),
            Err(E::CoordinatorLoadInProgress.code())
        );
        assert_eq!(o.check_partition(4), Err(E::NotCoordinator.code()));
        assert!(o.is_loading(3, 7));
        assert!(o.finish_load(3, 7));
        assert_eq!(o.check(&g), Ok(7));
        assert_eq!(o.check_partition(3), Ok(7));
        assert!(!o.is_loading(3, 7));
    }

    #[test]
    fn unloading_makes_groups_not_coordinated_and_a_late_load_stale() {
        let mut o = Ownership::default();
        let g = group_in(1, 50);
        assert!(o.begin_load(1, 2, 50));
        assert!(o.unload(1));
        assert!(!o.finish_load(1, 2));
        assert_eq!(o.check(&g), Err(E::NotCoordinator.code()));
        assert!(!o.unload(1));
    }

    #[test]
    fn a_newer_epoch_restarts_a_load_but_not_an_active_partition() {
        let mut o = Ownership::default();
        let g = group_in(0, 50);
        assert!(o.begin_load(0, 1, 50));
        assert!(o.begin_load(0, 2, 50));
        assert!(!o.finish_load(0, 1), "the first load is superseded");
        assert!(o.finish_load(0, 2));
        assert!(!o.begin_load(0, 3, 50), "already active: no reload");
        assert_eq!(o.check(&g), Ok(3));
        assert!(!o.begin_load(0, 3, 50));
        assert!(!o.begin_load(0, 2, 50), "an older epoch is ignored");
        assert_eq!(o.check(&g), Ok(3));
    }

    #[test]
    fn the_partition_count_is_fixed_by_the_first_load() {
        let mut o = Ownership::default();
        assert!(!o.begin_load(0, 0, 0), "no partitions: nothing to load");
        assert_eq!(o.partition_of("g"), None);
        o.begin_load(0, 0, 50);
        o.begin_load(1, 0, 60);
        assert!(
            !o.begin_load(55, 0, 60),
            "beyond the count groups are spread over"
        );
        assert_eq!(o.partition_of("g"), Some(records::partition_for("g", 50)));
    }
}
