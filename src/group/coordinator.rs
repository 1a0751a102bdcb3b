//! Kafka's classic group coordinator.
//!
//! Each group is owned by its own async mutex (`GroupCell`); the map from group id to group is
//! locked only to look up, insert or remove. The classic group's rules are decided by the pure
//! `group::membership`; this coordinator carries out what they decide. Requests that must wait
//! for a rebalance (JoinGroup until the join phase completes, SyncGroup until the leader's
//! assignment is stored) leave a oneshot sender in the group's [`Slot`] and await the receiver
//! after releasing the group lock. Timers are tokio tasks (session expiry per member, the
//! rebalance timeout and the initial rebalance delay per rebalance), so they follow a paused
//! tokio clock in tests.
//!
//! Writes to `__consumer_offsets` (group metadata when a generation's assignment is stored or a
//! group empties, offset commits, tombstones) are made under the group's lock and a request is
//! answered only after its write.

//!
//! The coordinator's work is split as Kafka splits its GroupMetadataManager and
//! OffsetMetadataManager:
//! * `membership`: JoinGroup, SyncGroup, Heartbeat, LeaveGroup: feeds them and the timers to
//!   `group::membership` and carries out its actions (answers, timers, writes).
//! * `offsets`: OffsetCommit, OffsetFetch, OffsetDelete.
//! * `admin`: DescribeGroups, ListGroups, DeleteGroups, offset expiry.
//! * `txn`: TxnOffsetCommit and the end of transactions (`complete_txn`).
//! * `consumer`, `consumer_log`: ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848),
//!   the members' timers, and the consumer group's records in `__consumer_offsets`;
//!   `migration`: classic members of consumer groups and the conversions between classic and
//!   consumer groups.
//!
//! * `ownership`: in a cluster, which `__consumer_offsets` partitions (and so which groups)
//!   this broker coordinates.
//!
//! This file holds the group map, loading at start-up, and in a cluster the loading and
//! unloading of partitions as this broker's leaderships move (`group::loader` drives them).

mod admin;
mod consumer;
mod consumer_log;
mod membership;
mod migration;
mod offsets;
pub mod ownership;
mod txn;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;
use tokio::time::{Instant, sleep};

use kafka_protocol::ResponseError as E;
use tracing::info;

use super::records::{self, Key};
use super::replay::Loaded;
use super::state::{Group, JoinResult, Member, State, SyncResult};
use super::store::{Appended, Leader, OffsetsLog, Records, TxnProducer};
use crate::clock::now_ms;
use crate::cluster::Partition;
use crate::group::loader::PartitionLoads;
use ownership::Ownership;

pub use crate::group::state::{JoinParams, SyncParams};
pub use admin::{Described, DescribedMember, Listed};
pub use consumer::HeartbeatAnswer;
pub use offsets::{CommitOffset, CommitParams, FetchedOffset};
pub use txn::TxnCommitParams;

pub type GroupCell = tokio::sync::Mutex<Slot>;

/// A group and the requests waiting on it: JoinGroups and SyncGroups by member id.
pub struct Slot {
    pub group: Group,
    joins: HashMap<String, oneshot::Sender<JoinResult>>,
    syncs: HashMap<String, oneshot::Sender<SyncResult>>,
}

impl Slot {
    fn new(group: Group) -> Slot {
        Slot {
            group,
            joins: HashMap::new(),
            syncs: HashMap::new(),
        }
    }

    /// Every waiting JoinGroup and SyncGroup is answered with `code`.
    fn fail_waiters(&mut self, code: i16) {
        for (id, tx) in self.joins.drain() {
            let _ = tx.send(JoinResult::error(code, &id));
        }
        for (_, tx) in self.syncs.drain() {
            let _ = tx.send(SyncResult::error(code));
        }
        for m in self.group.members.values_mut() {
            m.awaiting_join = false;
            m.awaiting_sync = false;
        }
    }
}

impl std::ops::Deref for Slot {
    type Target = Group;
    fn deref(&self) -> &Group {
        &self.group
    }
}

impl std::ops::DerefMut for Slot {
    fn deref_mut(&mut self) -> &mut Group {
        &mut self.group
    }
}

#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub initial_rebalance_delay_ms: u64,
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_interval_ms: u64,
    pub offset_metadata_max_bytes: usize,
    pub consumer: ConsumerConfig,
}

/// The consumer group protocol's settings (`group.consumer.*`).
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub assignors: Vec<String>,
    pub max_size: usize,
    pub migration: crate::group::consumer::classic::MigrationPolicy,
    /// The dynamic group configs (`consumer.session.timeout.ms`,
    /// `consumer.heartbeat.interval.ms` over the two above).
    pub per_group: Arc<crate::cluster::group_config::GroupConfigs>,
}

impl ConsumerConfig {
    pub fn settings(&self) -> crate::group::consumer::heartbeat::Settings {
        crate::group::consumer::heartbeat::Settings {
            assignors: self.assignors.clone(),
            max_size: self.max_size,
            migration: self.migration,
        }
    }
}

impl Default for ConsumerConfig {
    /// Kafka's defaults.
    fn default() -> ConsumerConfig {
        ConsumerConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            assignors: vec!["uniform".to_string(), "range".to_string()],
            max_size: i32::MAX as usize,
            migration: crate::group::consumer::classic::MigrationPolicy::Bidirectional,
            per_group: Arc::default(),
        }
    }
}

impl GroupConfig {
    pub fn from_broker(c: &crate::config::BrokerConfig) -> GroupConfig {
        GroupConfig {
            min_session_timeout_ms: c.group_min_session_timeout_ms,
            max_session_timeout_ms: c.group_max_session_timeout_ms,
            initial_rebalance_delay_ms: c.group_initial_rebalance_delay_ms,
            offsets_retention_ms: c.offsets_retention_minutes * 60_000,
            offsets_retention_check_interval_ms: c.offsets_retention_check_interval_ms,
            offset_metadata_max_bytes: c.offset_metadata_max_bytes,
            consumer: ConsumerConfig {
                session_timeout_ms: c.group_consumer.session_timeout_ms,
                heartbeat_interval_ms: c.group_consumer.heartbeat_interval_ms,
                assignors: c.group_consumer.assignors.clone(),
                max_size: c.group_consumer.max_size,
                migration: c.group_consumer.migration,
                per_group: Arc::default(),
            },
        }
    }
}

/// Where the coordinator reads the cluster's topics (consumer groups' assignments).
pub type TopicsSource = Box<dyn Fn() -> crate::group::consumer::Topics + Send + Sync>;

pub struct Coordinator {
    cfg: GroupConfig,
    groups: Mutex<Groups>,
    log: Arc<dyn OffsetsLog>,
    /// Set once by the broker; without it (unit tests) there are no topics.
    topics: std::sync::OnceLock<TopicsSource>,
    /// The origin of the timer clock the membership rules see (tokio's, paused in tests).
    clock_base: Instant,
}

/// The group map and, in a cluster, the partitions it covers: one lock, so a group is in the
/// map exactly while its partition is Active here.
struct Groups {
    map: HashMap<String, Arc<GroupCell>>,
    /// None on one node, which coordinates every group.
    owned: Option<Ownership>,
    /// Producer id → the groups that may hold offsets of its open transactions (a superset:
    /// the groups' own state says which do). A group's entries change under its lock, or
    /// while it is not in the map (being installed or unloaded).
    txns: HashMap<i64, HashSet<String>>,
}

impl Groups {
    /// Records the open transactions of a group being installed.
    fn index_txns(&mut self, group: &str, l: &Loaded) {
        for (_, producer_id) in l.offsets.open_txns() {
            self.txns
                .entry(producer_id)
                .or_default()
                .insert(group.to_string());
        }
    }

    /// Where a write for `group` goes (None on one node), or the error to answer with.
    fn check(&self, group: &str) -> Result<Option<Leader>, i16> {
        let Some(o) = &self.owned else {
            return Ok(None);
        };
        let epoch = o.check(group)?;
        Ok(o.partition_of(group)
            .map(|partition| Leader { partition, epoch }))
    }
}

impl Coordinator {
    /// A coordinator that serves every group, with no partition to load first: the unit
    /// tests' coordinator over an in-memory log (a broker's is [`Coordinator::clustered`]).
    #[cfg(test)]
    pub fn new(cfg: GroupConfig, log: Arc<dyn OffsetsLog>) -> Arc<Coordinator> {
        Self::with_ownership(cfg, log, None)
    }

    /// A broker's coordinator: it serves the groups of the `__consumer_offsets` partitions
    /// loaded with [`Coordinator::begin_load`] / [`Coordinator::finish_load`].
    pub fn clustered(cfg: GroupConfig, log: Arc<dyn OffsetsLog>) -> Arc<Coordinator> {
        Self::with_ownership(cfg, log, Some(Ownership::default()))
    }

    fn with_ownership(
        cfg: GroupConfig,
        log: Arc<dyn OffsetsLog>,
        owned: Option<Ownership>,
    ) -> Arc<Coordinator> {
        Arc::new(Coordinator {
            cfg,
            groups: Mutex::new(Groups {
                map: HashMap::new(),
                owned,
                txns: HashMap::new(),
            }),
            log,
            topics: std::sync::OnceLock::new(),
            clock_base: Instant::now(),
        })
    }

    /// Tells the coordinator where the cluster's topics are read.
    pub fn set_topics_source(&self, source: TopicsSource) {
        let _ = self.topics.set(source);
    }

    /// The cluster's topics as consumer groups see them.
    fn topics(&self) -> crate::group::consumer::Topics {
        self.topics.get().map(|f| f()).unwrap_or_default()
    }

    pub fn config(&self) -> &GroupConfig {
        &self.cfg
    }

    /// Whether `group` is coordinated here: NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS
    /// otherwise.
    pub fn serves(&self, group: &str) -> Result<(), i16> {
        self.groups.lock().unwrap().check(group).map(|_| ())
    }

    fn get(&self, id: &str) -> Result<Option<Arc<GroupCell>>, i16> {
        let g = self.groups.lock().unwrap();
        g.check(id)?;
        Ok(g.map.get(id).cloned())
    }

    fn get_or_create(&self, id: &str) -> Result<Arc<GroupCell>, i16> {
        let mut g = self.groups.lock().unwrap();
        g.check(id)?;
        Ok(g.map
            .entry(id.to_string())
            .or_insert_with(|| {
                Arc::new(tokio::sync::Mutex::new(Slot::new(Group::new(id, now_ms()))))
            })
            .clone())
    }

    fn cells(&self) -> Vec<Arc<GroupCell>> {
        self.groups.lock().unwrap().map.values().cloned().collect()
    }

    /// `group` (whose lock the caller holds) no longer has open transactions of `producers`.
    fn unindex_txns(&self, group: &str, producers: impl IntoIterator<Item = i64>) {
        let mut g = self.groups.lock().unwrap();
        for p in producers {
            if let Some(groups) = g.txns.get_mut(&p) {
                groups.remove(group);
                if groups.is_empty() {
                    g.txns.remove(&p);
                }
            }
        }
    }

    /// Removes a group that is now Dead from the map (the caller holds its lock).
    fn forget(&self, cell: &Arc<GroupCell>, id: &str) {
        let mut g = self.groups.lock().unwrap();
        if g.map.get(id).is_some_and(|c| Arc::ptr_eq(c, cell)) {
            g.map.remove(id);
        }
    }

    /// Writes `records` for the group in `cell` (whose lock the caller holds). In a cluster
    /// the group must still be the one coordinated here: a group unloaded while a request
    /// held it gets NOT_COORDINATOR, and the write goes to its partition in the leader epoch
    /// the coordinator holds.
    async fn write(&self, cell: &Arc<GroupCell>, group: &str, records: Records) -> Result<(), i16> {
        self.write_at(cell, group, None, records).await.map(|_| ())
    }

    /// [`Coordinator::write`], transactional for `txn`; answers where the records landed.
    async fn write_at(
        &self,
        cell: &Arc<GroupCell>,
        group: &str,
        txn: Option<TxnProducer>,
        records: Records,
    ) -> Result<Appended, i16> {
        let at = {
            let g = self.groups.lock().unwrap();
            let at = g.check(group)?;
            if at.is_some() && !g.map.get(group).is_some_and(|c| Arc::ptr_eq(c, cell)) {
                return Err(E::NotCoordinator.code());
            }
            at
        };
        self.log.append(group, at, txn, records).await
    }

    // ---- loading ---------------------------------------------------------------------------

    /// Installs groups replayed from `__consumer_offsets` into a [`Coordinator::new`] (unit
    /// tests). Groups with members come back Stable (their sessions restart when
    /// [`Coordinator::start`] runs), others Empty.
    #[cfg(test)]
    pub fn install(&self, loaded: HashMap<String, Loaded>) {
        let now = now_ms();
        let mut g = self.groups.lock().unwrap();
        for (id, l) in loaded {
            g.index_txns(&id, &l);
            let cell = Arc::new(tokio::sync::Mutex::new(Slot::new(restored(&id, l, now))));
            g.map.insert(id, cell);
        }
    }

    /// Starts the session timers of loaded members and the periodic offset expiry.
    pub fn start(self: &Arc<Self>) {
        self.start_sessions(self.cells());
        let me = Arc::downgrade(self);
        let every = Duration::from_millis(self.cfg.offsets_retention_check_interval_ms.max(1));
        tokio::spawn(async move {
            loop {
                sleep(every).await;
                let Some(c) = me.upgrade() else { return };
                c.expire_offsets(now_ms()).await;
            }
        });
    }

    fn start_sessions(self: &Arc<Self>, cells: Vec<Arc<GroupCell>>) {
        for cell in cells {
            let me = self.clone();
            tokio::spawn(async move {
                let ids: Vec<(String, u64)> = {
                    let mut g = cell.lock().await;
                    let now = me.now();
                    g.members
                        .values_mut()
                        .map(|m| {
                            crate::group::membership::touch(m, now);
                            (m.id.clone(), m.seq)
                        })
                        .collect()
                };
                for (id, seq) in ids {
                    me.spawn_session_timer(&cell, id, seq);
                }
                let mut g = cell.lock().await;
                me.start_consumer_sessions(&cell, &mut g);
            });
        }
    }
}

impl PartitionLoads for Coordinator {
    type Loaded = HashMap<String, Loaded>;
    const TOPIC: &'static str = super::store::TOPIC;

    /// In a cluster: this broker leads `__consumer_offsets` partition `partition` (of `count`)
    /// at `epoch`. Returns whether the caller must load it now (then finish with
    /// [`Coordinator::finish_load`]); until then its groups get COORDINATOR_LOAD_IN_PROGRESS.
    fn begin_load(&self, partition: i32, epoch: i32, count: i32) -> bool {
        let mut g = self.groups.lock().unwrap();
        g.owned
            .as_mut()
            .is_some_and(|o| o.begin_load(partition, epoch, count))
    }

    /// Whether the load of `partition` begun at `epoch` is still wanted.
    fn is_loading(&self, partition: i32, epoch: i32) -> bool {
        let g = self.groups.lock().unwrap();
        g.owned
            .as_ref()
            .is_some_and(|o| o.is_loading(partition, epoch))
    }

    /// The groups replayed from `partition` (loaded at `epoch`) are installed and served from
    /// now on, unless the load is stale (the partition was unloaded or reloaded meanwhile).
    /// Records of groups that belong to another partition are left to that one's coordinator.
    fn finish_load(
        self: &Arc<Self>,
        partition: i32,
        epoch: i32,
        loaded: HashMap<String, Loaded>,
    ) -> bool {
        let now = now_ms();
        let mut cells = Vec::new();
        {
            let mut g = self.groups.lock().unwrap();
            let Some(o) = g.owned.as_mut() else {
                return false;
            };
            if !o.finish_load(partition, epoch) {
                return false;
            }
            let home: Vec<(String, Loaded)> = loaded
                .into_iter()
                .filter(|(id, _)| o.partition_of(id) == Some(partition))
                .collect();
            for (id, l) in home {
                g.index_txns(&id, &l);
                let cell = Arc::new(tokio::sync::Mutex::new(Slot::new(restored(&id, l, now))));
                g.map.insert(id, cell.clone());
                cells.push(cell);
            }
        }
        // Fifty partitions load at once when the topic is created: only those with groups
        // are worth a line at the default level.
        if cells.is_empty() {
            tracing::debug!(
                partition,
                epoch,
                "coordinating {}-{partition}",
                super::store::TOPIC
            );
        } else {
            info!(
                partition,
                epoch,
                groups = cells.len(),
                "coordinating the groups of {}-{partition}",
                super::store::TOPIC
            );
        }
        self.start_sessions(cells);
        true
    }

    /// In a cluster: this broker no longer leads `partition`. Its groups leave the map at
    /// once (their requests get NOT_COORDINATOR from now on); then each is marked Dead and
    /// its waiting JoinGroup and SyncGroup requests are answered NOT_COORDINATOR.
    fn unload(&self, partition: i32) {
        let gone: Vec<Arc<GroupCell>> = {
            let mut g = self.groups.lock().unwrap();
            let Groups { map, owned, txns } = &mut *g;
            let Some(o) = owned.as_mut() else {
                return;
            };
            if !o.unload(partition) {
                return;
            }
            let ids: HashSet<String> = map
                .keys()
                .filter(|id| o.partition_of(id) == Some(partition))
                .cloned()
                .collect();
            txns.retain(|_, groups| {
                groups.retain(|id| !ids.contains(id));
                !groups.is_empty()
            });
            ids.iter().filter_map(|id| map.remove(id)).collect()
        };
        if !gone.is_empty() {
            info!(
                partition,
                groups = gone.len(),
                "no longer coordinating the groups of {}-{partition}",
                super::store::TOPIC
            );
        }
        tokio::spawn(async move {
            for cell in gone {
                let mut g = cell.lock().await;
                unloaded(&mut g);
            }
        });
    }

    fn replay(parts: &[Arc<Partition>], count: i32) -> anyhow::Result<Vec<Self::Loaded>> {
        super::replay::load_partitions(parts, count)
    }
}

/// A group as replayed from the log.
fn restored(id: &str, l: Loaded, now: i64) -> Group {
    let mut g = Group::new(id, now);
    g.offsets = l.offsets;
    if let Some(c) = l.consumer {
        consumer_log::restore(&mut g, c);
        return g;
    }
    let Some(v) = l.metadata else {
        return g;
    };
    g.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
    g.generation = v.generation;
    g.protocol = v.protocol.clone();
    g.leader = v.leader;
    if v.state_timestamp > 0 {
        g.state_ts = v.state_timestamp;
    }
    for (i, m) in v.members.into_iter().enumerate() {
        let mut protocols = Vec::new();
        if let Some(p) = &v.protocol {
            protocols.push((p.clone(), m.subscription));
        }
        if let Some(inst) = &m.instance_id {
            g.statics.insert(inst.clone(), m.member_id.clone());
        }
        g.members.insert(
            m.member_id.clone(),
            Member {
                id: m.member_id,
                instance_id: m.instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocols,
                assignment: m.assignment,
                awaiting_join: false,
                awaiting_sync: false,
                // Set when the session timers start.
                deadline: 0,
                is_new: false,
                seq: i as u64,
            },
        );
    }
    g.next_seq = g.members.len() as u64;
    if !g.members.is_empty() && g.protocol.is_some() {
        g.state = State::Stable;
    } else {
        g.members.clear();
        g.statics.clear();
        g.leader = None;
    }
    g
}

/// A group whose partition left this broker: waiting requests are told to find the new
/// coordinator, and the group is Dead here (its timers end when they next look at it).
fn unloaded(g: &mut Slot) {
    g.fail_waiters(E::NotCoordinator.code());
    g.members.clear();
    g.statics.clear();
    g.pending.clear();
    g.transition(State::Dead, now_ms());
}

/// The tombstones that delete a group's metadata: a consumer group's records, or a classic
/// group's GroupMetadata.
fn group_tombstones(g: &Group) -> Records {
    match &g.consumer {
        Some(c) => crate::group::consumer::persist::tombstones(&g.id, &c.group),
        None => vec![(
            records::encode_key(&Key::Group {
                group: g.id.clone(),
            }),
            None,
        )],
    }
}

/// The GroupMetadata record of the group's current generation.
fn group_record(g: &Group) -> (Bytes, Option<Bytes>) {
    (
        records::encode_key(&Key::Group {
            group: g.id.clone(),
        }),
        Some(records::encode_group(&g.to_value())),
    )
}

fn offset_key(group: &str, topic: &str, partition: i32) -> Bytes {
    records::encode_key(&Key::Offset {
        group: group.to_string(),
        topic: topic.to_string(),
        partition,
    })
}
