//! Share groups (KIP-932, "queues for Kafka"): members of a share group consume the same
//! partitions together, each record delivered to one member at a time under an acquisition
//! lock and acknowledged one by one.
//!
//! The decisions are pure: `group.rs` (membership, epochs, the target assignment),
//! `assignor.rs` (Kafka's `simple` assignor), `partition.rs` (a share partition's in-flight
//! records: acquisition, locks, delivery counts, acknowledgements, SPSO/SPEO) and `session.rs`
//! (share session epochs). [`Coordinator`] owns them all behind one lock and runs the timers
//! (member sessions, acquisition locks); the log reads are in `fetch.rs`.
//!
//! Each share partition's state is persisted through the share coordinator (`state/`, the
//! internal topic `__share_group_state`, in Kafka's records): its start offset and the
//! records delivered at least once with their states and delivery counts. Acknowledgements
//! are persisted before they are answered; other changes (released locks, expired members)
//! within 100 ms. After a restart acknowledged and archived records stay done, released ones
//! keep their delivery counts, and records that were acquired come back available, as in
//! Kafka. Members and epochs are not kept (members rejoin). In a cluster a share partition's
//! state is persisted only while this broker also coordinates its `__share_group_state`
//! partition.

pub mod assignor;
pub mod fetch;
pub mod group;
pub mod partition;
pub mod session;
pub mod state;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use anyhow::{Result, bail};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::clock::now_ms;
use crate::cluster::group_config::GroupConfigs;
use crate::config::BrokerConfig;
use group::{Answer, Heartbeat, Refusal, Settings, ShareGroup};
use partition::{AckError, Acquired, Limits, SharePartition};
use session::{Opened, Sessions, TopicPartition};

/// The broker settings share groups act under (`group.share.*`), checked as Kafka checks
/// them at start-up (each within its min/max bounds), and the dynamic group configs
/// (`share.*`) that override them per group.
#[derive(Debug, Clone)]
pub struct ShareConfig {
    pub session_timeout_ms: i64,
    pub heartbeat_interval_ms: i32,
    pub record_lock_duration_ms: i64,
    pub delivery_count_limit: i16,
    pub partition_max_record_locks: i64,
    pub max_size: usize,
    pub max_share_sessions: usize,
    pub per_group: Arc<GroupConfigs>,
}

/// Where a share partition starts when first fetched (`share.auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reset {
    Earliest,
    Latest,
    /// The first offset at or after now minus this many milliseconds.
    ByDuration(i64),
}

impl ShareConfig {
    pub fn from_broker(c: &BrokerConfig) -> Result<ShareConfig> {
        let num = |k: &str| -> Result<i64> {
            let v = c
                .raw
                .get(k)
                .map(String::as_str)
                .or_else(|| crate::config::keys::default_of(k))
                .unwrap_or("0");
            v.trim()
                .parse::<i64>()
                .map_err(|_| anyhow::anyhow!("{k}: invalid value {v:?}"))
        };
        let bounded = |k: &str, min: &str, max: &str| -> Result<i64> {
            let (v, lo, hi) = (num(k)?, num(min)?, num(max)?);
            if v < lo {
                bail!("{k} must be greater than or equal to {min}");
            }
            if v > hi {
                bail!("{k} must be less than or equal to {max}");
            }
            Ok(v)
        };
        let session_timeout_ms = bounded(
            "group.share.session.timeout.ms",
            "group.share.min.session.timeout.ms",
            "group.share.max.session.timeout.ms",
        )?;
        let heartbeat_interval_ms = bounded(
            "group.share.heartbeat.interval.ms",
            "group.share.min.heartbeat.interval.ms",
            "group.share.max.heartbeat.interval.ms",
        )?;
        if heartbeat_interval_ms >= session_timeout_ms {
            bail!(
                "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms"
            );
        }
        Ok(ShareConfig {
            session_timeout_ms,
            heartbeat_interval_ms: heartbeat_interval_ms as i32,
            record_lock_duration_ms: bounded(
                "group.share.record.lock.duration.ms",
                "group.share.min.record.lock.duration.ms",
                "group.share.max.record.lock.duration.ms",
            )?,
            delivery_count_limit: bounded(
                "group.share.delivery.count.limit",
                "group.share.min.delivery.count.limit",
                "group.share.max.delivery.count.limit",
            )? as i16,
            partition_max_record_locks: bounded(
                "group.share.partition.max.record.locks",
                "group.share.min.partition.max.record.locks",
                "group.share.max.partition.max.record.locks",
            )?,
            max_size: num("group.share.max.size")?.max(1) as usize,
            max_share_sessions: num("group.share.max.share.sessions")?.max(1) as usize,
            per_group: Arc::default(),
        })
    }

    /// `key` as `group` sets it, else the broker's `default`.
    fn of(&self, group: &str, key: &str, default: i64) -> i64 {
        self.per_group.num(group, key).unwrap_or(default)
    }

    fn limits(&self, group: &str) -> Limits {
        Limits {
            lock_duration_ms: self.record_lock_duration_ms(group),
            delivery_count_limit: self.of(
                group,
                "share.delivery.count.limit",
                self.delivery_count_limit as i64,
            ) as i16,
            max_record_locks: self.of(
                group,
                "share.partition.max.record.locks",
                self.partition_max_record_locks,
            ),
        }
    }

    pub fn session_timeout_ms(&self, group: &str) -> i64 {
        self.of(group, "share.session.timeout.ms", self.session_timeout_ms)
    }

    pub fn heartbeat_interval_ms(&self, group: &str) -> i32 {
        let v = self.of(
            group,
            "share.heartbeat.interval.ms",
            self.heartbeat_interval_ms as i64,
        );
        i32::try_from(v).unwrap_or(self.heartbeat_interval_ms)
    }

    pub fn record_lock_duration_ms(&self, group: &str) -> i64 {
        self.of(
            group,
            "share.record.lock.duration.ms",
            self.record_lock_duration_ms,
        )
    }

    /// `share.auto.offset.reset` of `group` (latest by default).
    pub fn reset(&self, group: &str) -> Reset {
        let v = self.per_group.value(group, "share.auto.offset.reset");
        match v.as_deref() {
            Some("earliest") => Reset::Earliest,
            Some(d) => match d.strip_prefix("by_duration:") {
                Some(d) => {
                    Reset::ByDuration(crate::cluster::group_config::duration_ms(d).unwrap_or(0))
                }
                None => Reset::Latest,
            },
            None => Reset::Latest,
        }
    }
}

/// One acknowledgement batch: first offset, last offset, its types (one, or one per offset).
pub type AckBatch = (i64, i64, Vec<i8>);

/// A share partition's key: group, topic id, partition.
type SpKey = (String, Uuid, i32);

#[derive(Default)]
struct Inner {
    groups: HashMap<String, ShareGroup>,
    partitions: HashMap<SpKey, SharePartition>,
    sessions: Sessions,
    /// (group, member id) → the small key share partitions record acquisitions under.
    member_keys: HashMap<(String, String), u64>,
    next_key: u64,
}

impl Inner {
    fn member_key(&mut self, group: &str, member: &str) -> u64 {
        let next = &mut self.next_key;
        *self
            .member_keys
            .entry((group.to_string(), member.to_string()))
            .or_insert_with(|| {
                *next += 1;
                *next
            })
    }

    /// A member is gone: its session closes and what it holds is released.
    fn forget_member(&mut self, group: &str, member: &str, limits: &Limits) -> bool {
        self.sessions.remove(group, member);
        let Some(key) = self
            .member_keys
            .remove(&(group.to_string(), member.to_string()))
        else {
            return false;
        };
        self.release(group, key, limits)
    }

    fn release(&mut self, group: &str, key: u64, limits: &Limits) -> bool {
        let mut n = 0;
        for ((g, _, _), sp) in self.partitions.iter_mut() {
            if g == group {
                n += sp.release_member(key, limits);
            }
        }
        n > 0
    }
}

/// Owns every share group and share partition of this broker.
pub struct Coordinator {
    cfg: ShareConfig,
    inner: Mutex<Inner>,
    /// Share fetches waiting for records to become acquirable without an append (released,
    /// lock expired, member gone).
    waiters: Mutex<Vec<Weak<Notify>>>,
    /// The share coordinator persisting share-partition states (None: nowhere, for tests).
    states: Option<Arc<state::ShareStates>>,
    /// Share partitions whose state changed since it was last persisted.
    pending: Mutex<HashMap<SpKey, Pending>>,
    /// One persist at a time, so that a share partition's states are written in the order
    /// they were taken.
    persisting: tokio::sync::Mutex<()>,
}

/// What a share partition's next persist does besides writing its state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Pending {
    /// Its persisted state goes first (DeleteGroups, DeleteShareGroupOffsets).
    delete: bool,
    /// It starts again at a new state epoch (AlterShareGroupOffsets).
    reset: bool,
}

/// A share group as ShareGroupDescribe shows it.
pub type Described = ShareGroup;

impl Coordinator {
    /// The coordinator, persisting through `states`.
    pub fn open(cfg: ShareConfig, states: Option<Arc<state::ShareStates>>) -> Arc<Coordinator> {
        Arc::new(Coordinator {
            cfg,
            inner: Mutex::new(Inner::default()),
            waiters: Mutex::new(Vec::new()),
            states,
            pending: Mutex::new(HashMap::new()),
            persisting: tokio::sync::Mutex::new(()),
        })
    }

    /// Rebuilds the share groups and share partitions of the persisted states (start-up; in
    /// a cluster, each load of a `__share_group_state` partition). A share partition already
    /// held here keeps its live state.
    pub fn restore(&self) {
        let Some(states) = &self.states else { return };
        let mut inner = self.inner.lock().unwrap();
        for ((group, topic, partition), st) in states.all() {
            inner.groups.entry(group.clone()).or_default();
            let max_locks = self.cfg.partition_max_record_locks;
            inner
                .partitions
                .entry((group, topic, partition))
                .or_insert_with(|| {
                    SharePartition::restore(st.start_offset, &st.batches, max_locks)
                });
        }
    }

    fn touched(&self, key: &SpKey) {
        self.pending.lock().unwrap().entry(key.clone()).or_default();
    }

    fn touched_all(&self, keys: impl IntoIterator<Item = SpKey>, p: Pending) {
        let mut pending = self.pending.lock().unwrap();
        for k in keys {
            let e = pending.entry(k).or_default();
            e.delete |= p.delete;
            e.reset |= p.reset;
        }
    }

    /// Persists every share partition changed since the last call, through the share
    /// coordinator: a deleted one's state is deleted, a reset one starts at the next state
    /// epoch, and each one still here writes its start offset and state batches. A change
    /// the coordinator cannot take yet (not available, loading) is tried again at the next
    /// call; one it refuses for good (another broker coordinates it) is dropped.
    pub async fn persist(&self) {
        let Some(states) = &self.states else { return };
        let _one = self.persisting.lock().await;
        let pending: Vec<(SpKey, Pending)> = self.pending.lock().unwrap().drain().collect();
        for (key, p) in pending {
            if let Err(r) = self.persist_one(states, &key, p).await {
                let retry = r.code == kafka_protocol::ResponseError::CoordinatorNotAvailable.code()
                    || r.code == kafka_protocol::ResponseError::CoordinatorLoadInProgress.code();
                tracing::debug!(
                    group = key.0,
                    partition = key.2,
                    code = r.code,
                    "share state not persisted: {}",
                    r.message
                );
                if retry {
                    self.touched_all([key], p);
                }
            }
        }
    }

    async fn persist_one(
        &self,
        states: &state::ShareStates,
        key: &SpKey,
        p: Pending,
    ) -> Result<(), state::Refusal> {
        if p.delete {
            states.delete(key).await?;
        }
        let view = {
            let inner = self.inner.lock().unwrap();
            inner.partitions.get(key).map(|sp| sp.persisted())
        };
        let Some((start, batches)) = view else {
            return Ok(());
        };
        let current = states.get(key).map(|s| s.state_epoch);
        let state_epoch = match current {
            Some(e) if p.reset => {
                let next = e.saturating_add(1);
                states.initialize(key, next, start).await?;
                next
            }
            Some(e) => e,
            None => {
                states.initialize(key, 0, start).await?;
                0
            }
        };
        let w = state::Write {
            state_epoch,
            leader_epoch: -1,
            start_offset: start,
            batches,
        };
        states.write(key, &w).await
    }

    pub fn config(&self) -> &ShareConfig {
        &self.cfg
    }

    /// Registers a waiting share fetch, woken once at the next release or lock expiry.
    pub fn add_waiter(&self, w: &Arc<Notify>) {
        let mut waiters = self.waiters.lock().unwrap();
        if waiters.len() >= 64 {
            waiters.retain(|w| w.strong_count() > 0);
        }
        waiters.push(Arc::downgrade(w));
    }

    fn wake(&self) {
        for w in std::mem::take(&mut *self.waiters.lock().unwrap()) {
            if let Some(w) = w.upgrade() {
                w.notify_one();
            }
        }
    }

    /// Applies a ShareGroupHeartbeat.
    pub fn heartbeat(
        &self,
        group_id: &str,
        hb: Heartbeat,
        lookup: &dyn Fn(&str) -> Option<assignor::TopicMeta>,
    ) -> Result<Answer, Refusal> {
        let settings = Settings {
            session_timeout_ms: self.cfg.session_timeout_ms(group_id),
            max_size: self.cfg.max_size,
        };
        let mut inner = self.inner.lock().unwrap();
        let leaving = hb.member_epoch == -1;
        let member = hb.member_id.clone();
        let g = inner.groups.entry(group_id.to_string()).or_default();
        let answer = g.heartbeat(group_id, hb, now_ms(), &settings, lookup);
        if g.members.is_empty() && g.group_epoch == 0 {
            inner.groups.remove(group_id);
        }
        if leaving
            && answer.is_ok()
            && inner.forget_member(group_id, &member, &self.cfg.limits(group_id))
        {
            let keys: Vec<SpKey> = inner
                .partitions
                .keys()
                .filter(|k| k.0 == group_id)
                .cloned()
                .collect();
            drop(inner);
            self.touched_all(keys, Pending::default());
            self.wake();
        }
        answer
    }

    /// Whether `group_id` is a share group here.
    pub fn exists(&self, group_id: &str) -> bool {
        self.inner.lock().unwrap().groups.contains_key(group_id)
    }

    pub fn describe(&self, group_id: &str) -> Option<Described> {
        self.inner.lock().unwrap().groups.get(group_id).cloned()
    }

    /// Every share group with its state, sorted by id.
    pub fn list(&self) -> Vec<(String, &'static str)> {
        let inner = self.inner.lock().unwrap();
        let mut out: Vec<(String, &'static str)> = inner
            .groups
            .iter()
            .map(|(id, g)| (id.clone(), g.state()))
            .collect();
        out.sort();
        out
    }

    /// Applies a ShareFetch's session epoch (see `session.rs`).
    pub fn open_session(
        &self,
        group: &str,
        member: &str,
        epoch: i32,
        added: &[TopicPartition],
        forgotten: &[TopicPartition],
    ) -> Result<Opened, i16> {
        let mut inner = self.inner.lock().unwrap();
        inner.sessions.open(
            group,
            member,
            epoch,
            added,
            forgotten,
            self.cfg.max_share_sessions,
        )
    }

    /// Applies a ShareAcknowledge's session epoch; true when it closed the session.
    pub fn acknowledge_session(&self, group: &str, member: &str, epoch: i32) -> Result<bool, i16> {
        self.inner
            .lock()
            .unwrap()
            .sessions
            .acknowledge(group, member, epoch)
    }

    /// A closed session releases what its member holds.
    pub fn close_session(&self, group: &str, member: &str) {
        let mut inner = self.inner.lock().unwrap();
        let key = inner.member_key(group, member);
        if inner.release(group, key, &self.cfg.limits(group)) {
            let keys: Vec<SpKey> = inner
                .partitions
                .keys()
                .filter(|k| k.0 == group)
                .cloned()
                .collect();
            drop(inner);
            self.touched_all(keys, Pending::default());
            self.wake();
        }
    }

    /// Acknowledgement batches of `member` for one partition; the first refusal, if any.
    pub fn acknowledge(
        &self,
        group: &str,
        member: &str,
        tp: TopicPartition,
        batches: &[AckBatch],
    ) -> Result<(), AckError> {
        let limits = self.cfg.limits(group);
        let mut inner = self.inner.lock().unwrap();
        let key = inner.member_key(group, member);
        let Some(sp) = inner.partitions.get_mut(&(group.to_string(), tp.0, tp.1)) else {
            return Err(AckError::InvalidRecordState);
        };
        sp.expire(now_ms(), &limits);
        let mut result = Ok(());
        let mut released = false;
        for (first, last, types) in batches {
            match sp.acknowledge(key, *first, *last, types, &limits) {
                Ok(()) => released |= types.contains(&partition::RELEASE),
                Err(e) => result = result.and(Err(e)),
            }
        }
        drop(inner);
        self.touched(&(group.to_string(), tp.0, tp.1));
        if released {
            self.wake();
        }
        result
    }

    /// Where a fetch of `member` would read from in this share partition (created, when first
    /// fetched, at the offset `start` gives for the group's `share.auto.offset.reset`), if
    /// anything is acquirable; the earliest lock deadline otherwise.
    pub fn next_acquirable(
        &self,
        group: &str,
        tp: TopicPartition,
        log_start: i64,
        high_watermark: i64,
        start: &dyn Fn(Reset) -> i64,
    ) -> (Option<i64>, Option<i64>) {
        let limits = self.cfg.limits(group);
        let mut inner = self.inner.lock().unwrap();
        let key = (group.to_string(), tp.0, tp.1);
        if !inner.partitions.contains_key(&key) {
            self.touched(&key);
        }
        let persisted = self.states.as_ref().and_then(|s| s.get(&key));
        let max_locks = self.cfg.partition_max_record_locks;
        let sp = inner
            .partitions
            .entry(key.clone())
            .or_insert_with(|| match persisted {
                Some(st) => SharePartition::restore(st.start_offset, &st.batches, max_locks),
                None => SharePartition::new(start(self.cfg.reset(group))),
            });
        let before = sp.start_offset();
        sp.skip_to(log_start);
        sp.expire(now_ms(), &limits);
        let out = (
            sp.next_acquirable(high_watermark, &limits),
            sp.next_deadline(),
        );
        if sp.start_offset() != before {
            self.touched(&key);
        }
        out
    }

    /// Acquires for `member` what is acquirable among `[from, to)` (the offsets a log read
    /// covered), at most `max_records`.
    pub fn acquire(
        &self,
        group: &str,
        member: &str,
        tp: TopicPartition,
        from: i64,
        to: i64,
        max_records: i64,
    ) -> Vec<Acquired> {
        let limits = self.cfg.limits(group);
        let mut inner = self.inner.lock().unwrap();
        let key = inner.member_key(group, member);
        match inner.partitions.get_mut(&(group.to_string(), tp.0, tp.1)) {
            Some(sp) => sp.acquire(key, from, to, max_records, now_ms(), &limits),
            None => Vec::new(),
        }
    }

    /// The SPSO and in-flight count of a share partition, if it has been fetched.
    pub fn partition_offsets(&self, group: &str, tp: TopicPartition) -> Option<(i64, usize)> {
        let inner = self.inner.lock().unwrap();
        inner
            .partitions
            .get(&(group.to_string(), tp.0, tp.1))
            .map(|sp| (sp.start_offset(), sp.in_flight()))
    }

    /// DeleteGroups of a share group: None when `group_id` is no share group here;
    /// NON_EMPTY_GROUP while it has members; otherwise it goes with its share partitions.
    pub fn delete_group(&self, group_id: &str) -> Option<i16> {
        let mut inner = self.inner.lock().unwrap();
        let g = inner.groups.get(group_id)?;
        if !g.members.is_empty() {
            return Some(kafka_protocol::ResponseError::NonEmptyGroup.code());
        }
        inner.groups.remove(group_id);
        let gone: Vec<SpKey> = inner
            .partitions
            .keys()
            .filter(|k| k.0 == group_id)
            .cloned()
            .collect();
        inner.partitions.retain(|(g, _, _), _| g != group_id);
        self.touched_all(
            gone,
            Pending {
                delete: true,
                reset: false,
            },
        );
        inner.member_keys.retain(|(g, _), _| g != group_id);
        Some(0)
    }

    /// Every share partition of `group_id` with its SPSO, sorted; None for no share group.
    pub fn start_offsets(&self, group_id: &str) -> Option<Vec<(Uuid, i32, i64)>> {
        let inner = self.inner.lock().unwrap();
        inner.groups.get(group_id)?;
        let mut out: Vec<(Uuid, i32, i64)> = inner
            .partitions
            .iter()
            .filter(|((g, _, _), _)| g == group_id)
            .map(|((_, t, p), sp)| (*t, *p, sp.start_offset()))
            .collect();
        out.sort();
        Some(out)
    }

    /// AlterShareGroupOffsets / DeleteShareGroupOffsets of one partition of an empty share
    /// group: the share partition starts again at `start` (Some), or is forgotten (None:
    /// the next fetch starts it at `share.auto.offset.reset`). GROUP_ID_NOT_FOUND for no
    /// share group, NON_EMPTY_GROUP while it has members.
    pub fn reset(&self, group_id: &str, tp: TopicPartition, start: Option<i64>) -> i16 {
        let mut inner = self.inner.lock().unwrap();
        match inner.groups.get(group_id) {
            None => return kafka_protocol::ResponseError::GroupIdNotFound.code(),
            Some(g) if !g.members.is_empty() => {
                return kafka_protocol::ResponseError::NonEmptyGroup.code();
            }
            Some(_) => {}
        }
        let key = (group_id.to_string(), tp.0, tp.1);
        match start {
            Some(o) => {
                inner.partitions.insert(key.clone(), SharePartition::new(o));
                self.touched_all(
                    [key],
                    Pending {
                        delete: false,
                        reset: true,
                    },
                );
            }
            None => {
                inner.partitions.remove(&key);
                self.touched_all(
                    [key],
                    Pending {
                        delete: true,
                        reset: false,
                    },
                );
            }
        }
        0
    }

    /// Member sessions and acquisition locks, checked every 100 ms: expired members leave
    /// their groups (and release what they hold); expired locks make records acquirable.
    pub fn start(self: &Arc<Self>) {
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tick.tick().await;
                if me.expire(now_ms()) {
                    me.wake();
                }
                me.persist().await;
            }
        });
    }

    fn expire(&self, now: i64) -> bool {
        let mut inner = self.inner.lock().unwrap();
        let mut gone = Vec::new();
        for (id, g) in inner.groups.iter_mut() {
            for m in g.expire(now) {
                gone.push((id.clone(), m));
            }
        }
        let mut changed: Vec<SpKey> = Vec::new();
        for (g, m) in gone {
            if inner.forget_member(&g, &m, &self.cfg.limits(&g)) {
                changed.extend(inner.partitions.keys().filter(|k| k.0 == g).cloned());
            }
        }
        for (k, sp) in inner.partitions.iter_mut() {
            if sp.expire(now, &self.cfg.limits(&k.0)) > 0 {
                changed.push(k.clone());
            }
        }
        drop(inner);
        let any = !changed.is_empty();
        self.touched_all(changed, Pending::default());
        any
    }
}
