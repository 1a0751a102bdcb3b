//! The replica fetcher: the follower side of replication, as Kafka's `ReplicaFetcherManager`
//! and `ReplicaFetcherThread` are.
//!
//! [`ReplicaFetchers`] keeps one task per leader broker this broker follows partitions of.
//! Each task (`session.rs`) holds one TCP connection to its leader and, for every partition
//! it was given: first truncates the local log to where it agrees with the leader's
//! (OffsetForLeaderEpoch, KIP-101/279), then fetches from the local log end with Fetch
//! requests naming this broker as the replica, and appends the batches that come back as they
//! are (offsets, leader epochs and timestamps kept), taking the leader's high watermark. Its
//! fetches run in an incremental fetch session with the leader (`incremental.rs`): after the
//! first, each lists only the partitions whose position moved, and the answer only those
//! with something new, so idle partitions cost nothing per fetch. The
//! leader's answers decide, per partition, what happens next (`state.rs`, free of I/O); the
//! wire (Kafka framing, request headers, kafka-protocol encoding) is in `conn.rs`.
//!
//! The metadata listener owns the decision of what to follow: it makes each partition a
//! follower (`Partition::become_follower`) and then calls [`ReplicaFetchers::update`] with the
//! complete set. A partition whose leader or leader epoch changed starts afresh (truncation
//! first); one that moved to another leader moves to that leader's task; a leader no longer
//! followed at all has its task ended. Any connection or protocol failure drops the
//! connection and reconnects after `backoff_ms`; a failure of one partition delays or stops
//! only that partition.

pub mod conn;
#[cfg(test)]
mod fake_leader;
mod incremental;
mod session;
mod state;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};

use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::Partition;

/// The replica fetchers' settings, Kafka's names in the comments.
#[derive(Debug, Clone)]
pub struct FetcherConfig {
    /// This broker's node id: the replica id of every fetch.
    pub local_id: i32,
    /// replica.fetch.response.max.bytes: the bytes one fetch response may carry.
    pub max_bytes: i32,
    /// replica.fetch.max.bytes: the bytes of one partition in one fetch response.
    pub partition_max_bytes: i32,
    /// replica.fetch.min.bytes: the leader waits for this many bytes before answering...
    pub min_bytes: i32,
    /// replica.fetch.wait.max.ms: ...or this long.
    pub max_wait_ms: i32,
    /// replica.fetch.backoff.ms: the wait after a failed connection or a partition error.
    pub backoff_ms: u64,
    /// How connections to leaders are made (the inter-broker listener's security).
    pub security: crate::net::client::InterBroker,
}

impl FetcherConfig {
    /// Kafka's defaults, for node `local_id`.
    pub fn with_defaults(local_id: i32) -> FetcherConfig {
        FetcherConfig {
            local_id,
            max_bytes: 10 * 1024 * 1024,
            partition_max_bytes: 1024 * 1024,
            min_bytes: 1,
            max_wait_ms: 500,
            backoff_ms: 1000,
            security: crate::net::client::InterBroker::plaintext(),
        }
    }
}

/// A partition to follow: its local replica (already a follower of `leader` at
/// `leader_epoch`), the leader's node id and the leader epoch.
#[derive(Clone)]
pub struct FollowTarget {
    pub partition: Arc<Partition>,
    pub leader: i32,
    pub leader_epoch: i32,
}

impl std::fmt::Debug for FollowTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}-{} (leader {} epoch {})",
            self.partition.topic, self.partition.index, self.leader, self.leader_epoch
        )
    }
}

/// What one leader's task fetches, and where the leader listens.
struct Assignment {
    addr: String,
    targets: Vec<FollowTarget>,
}

impl Assignment {
    /// Whether `self` and `other` name the same address and the same replicas at the same
    /// leader epochs (then the task has nothing to change).
    fn same_as(&self, other: &Assignment) -> bool {
        self.addr == other.addr
            && self.targets.len() == other.targets.len()
            && self.targets.iter().zip(&other.targets).all(|(a, b)| {
                Arc::ptr_eq(&a.partition, &b.partition) && a.leader_epoch == b.leader_epoch
            })
    }
}

/// One leader's task.
struct LeaderTask {
    assignment: watch::Sender<Arc<Assignment>>,
    cancel: CancellationToken,
    handle: JoinHandle<()>,
}

/// The replica fetcher tasks of this broker, one per leader followed.
pub struct ReplicaFetchers {
    cfg: Arc<FetcherConfig>,
    broker_epoch: Arc<AtomicI64>,
    cancel: CancellationToken,
    /// The runtime the tasks run on (the one `new` was called in, if any).
    runtime: Option<Handle>,
    tasks: Mutex<Tasks>,
}

#[derive(Default)]
struct Tasks {
    by_leader: HashMap<i32, LeaderTask>,
    /// Tasks told to end, awaited by `shutdown` so that none outlives it.
    ending: Vec<JoinHandle<()>>,
}

impl ReplicaFetchers {
    /// Fetchers for this broker; `broker_epoch` is its registration's epoch (sent in every
    /// fetch), `cancel` ends every task. Call within a tokio runtime: tasks are spawned on it.
    pub fn new(
        cfg: FetcherConfig,
        broker_epoch: Arc<AtomicI64>,
        cancel: CancellationToken,
    ) -> ReplicaFetchers {
        ReplicaFetchers {
            cfg: Arc::new(cfg),
            broker_epoch,
            cancel,
            runtime: Handle::try_current().ok(),
            tasks: Mutex::new(Tasks::default()),
        }
    }

    /// Follows exactly `targets` from now on (replacing the previous set), reaching each
    /// leader at its `addresses` entry (`host:port`). A target whose leader is this broker
    /// or has no address is not followed (logged).
    pub fn update(&self, targets: Vec<FollowTarget>, addresses: &HashMap<i32, String>) {
        let mut by_leader: HashMap<i32, Vec<FollowTarget>> = HashMap::new();
        for t in targets {
            if t.leader == self.cfg.local_id || t.leader < 0 {
                tracing::warn!(target = ?t, "not followed: the leader is this broker or none");
                continue;
            }
            if !addresses.contains_key(&t.leader) {
                tracing::warn!(target = ?t, "not followed: no address known for the leader");
                continue;
            }
            by_leader.entry(t.leader).or_default().push(t);
        }
        let mut tasks = self.tasks.lock().unwrap();
        tasks.ending.retain(|h| !h.is_finished());
        let gone: Vec<i32> = tasks
            .by_leader
            .keys()
            .filter(|l| !by_leader.contains_key(l))
            .copied()
            .collect();
        for leader in gone {
            let task = tasks.by_leader.remove(&leader).expect("listed");
            tracing::info!(
                leader,
                "no partition follows this leader any more: its fetcher ends"
            );
            task.cancel.cancel();
            tasks.ending.push(task.handle);
        }
        for (leader, mut targets) in by_leader {
            targets.sort_by_key(|t| (t.partition.topic_id, t.partition.index));
            let assignment = Assignment {
                addr: addresses[&leader].clone(),
                targets,
            };
            if let Some(task) = tasks.by_leader.get(&leader) {
                task.assignment.send_if_modified(|current| {
                    let changed = !current.same_as(&assignment);
                    if changed {
                        *current = Arc::new(assignment);
                    }
                    changed
                });
                continue;
            }
            let Some(runtime) = self.runtime.clone().or_else(|| Handle::try_current().ok()) else {
                tracing::error!(leader, "no tokio runtime to run the replica fetcher on");
                continue;
            };
            let (tx, rx) = watch::channel(Arc::new(assignment));
            let cancel = self.cancel.child_token();
            let session = session::Session::new(
                leader,
                self.cfg.clone(),
                self.broker_epoch.clone(),
                rx,
                cancel.clone(),
            );
            tracing::info!(leader, "starting a replica fetcher");
            let handle = runtime.spawn(session.run());
            tasks.by_leader.insert(
                leader,
                LeaderTask {
                    assignment: tx,
                    cancel,
                    handle,
                },
            );
        }
    }

    /// Ends every fetcher task and waits for them: nothing is appended after this returns.
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        let handles: Vec<JoinHandle<()>> = {
            let mut tasks = self.tasks.lock().unwrap();
            let mut all: Vec<JoinHandle<()>> = std::mem::take(&mut tasks.ending);
            all.extend(tasks.by_leader.drain().map(|(_, t)| t.handle));
            all
        };
        for h in handles {
            if let Err(e) = h.await {
                tracing::error!("replica fetcher task failed: {e}");
            }
        }
    }

    /// The leaders that have a fetcher task now.
    pub fn leaders(&self) -> Vec<i32> {
        let mut l: Vec<i32> = self
            .tasks
            .lock()
            .unwrap()
            .by_leader
            .keys()
            .copied()
            .collect();
        l.sort_unstable();
        l
    }
}
