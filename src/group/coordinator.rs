//! Kafka's classic group coordinator.
//!
//! Each group is owned by its own async mutex (`GroupCell`); the map from group id to group is
//! locked only to look up, insert or remove. Requests that must wait for a rebalance (JoinGroup
//! until the join phase completes, SyncGroup until the leader's assignment is stored) leave a
//! oneshot sender in their member and await the receiver after releasing the group lock.
//! Timers are tokio tasks (session expiry per member, the rebalance timeout and the initial
//! rebalance delay per rebalance), so they follow a paused tokio clock in tests.
//!
//! Writes to `__consumer_offsets` (group metadata when a generation's assignment is stored or a
//! group empties, offset commits, tombstones) are made under the group's lock and a request is
//! answered only after its write.

//!
//! The coordinator's work is split as Kafka splits its GroupMetadataManager and
//! OffsetMetadataManager:
//! * `membership`: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, the rebalance and session timers.
//! * `offsets`: OffsetCommit, OffsetFetch, OffsetDelete.
//! * `admin`: DescribeGroups, ListGroups, DeleteGroups, offset expiry.
//!
//! This file holds the group map and loading at start-up.

mod admin;
mod membership;
mod offsets;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::time::{Instant, sleep};

use super::records::{self, Key};
use super::state::{Committed, Group, Member, State};
use super::store::{Loaded, OffsetsLog};
use crate::broker::now_ms;

pub use admin::{Described, DescribedMember, Listed};
pub use membership::{JoinParams, SyncParams};
pub use offsets::{CommitOffset, CommitParams, FetchedOffset};

pub type GroupCell = tokio::sync::Mutex<Group>;

#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub initial_rebalance_delay_ms: u64,
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_interval_ms: u64,
    pub offset_metadata_max_bytes: usize,
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
        }
    }
}

pub struct Coordinator {
    cfg: GroupConfig,
    groups: Mutex<HashMap<String, Arc<GroupCell>>>,
    log: Arc<dyn OffsetsLog>,
}

impl Coordinator {
    pub fn new(cfg: GroupConfig, log: Arc<dyn OffsetsLog>) -> Arc<Coordinator> {
        Arc::new(Coordinator {
            cfg,
            groups: Mutex::new(HashMap::new()),
            log,
        })
    }

    pub fn config(&self) -> &GroupConfig {
        &self.cfg
    }

    fn get(&self, id: &str) -> Option<Arc<GroupCell>> {
        self.groups.lock().unwrap().get(id).cloned()
    }

    fn get_or_create(&self, id: &str) -> Arc<GroupCell> {
        self.groups
            .lock()
            .unwrap()
            .entry(id.to_string())
            .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(Group::new(id, now_ms()))))
            .clone()
    }

    fn cells(&self) -> Vec<Arc<GroupCell>> {
        self.groups.lock().unwrap().values().cloned().collect()
    }

    /// Removes a group that is now Dead from the map (the caller holds its lock).
    fn forget(&self, cell: &Arc<GroupCell>, id: &str) {
        let mut m = self.groups.lock().unwrap();
        if m.get(id).is_some_and(|c| Arc::ptr_eq(c, cell)) {
            m.remove(id);
        }
    }

    // ---- loading ---------------------------------------------------------------------------

    /// Installs the groups replayed from `__consumer_offsets`. Groups with members come back
    /// Stable (their sessions restart when [`Coordinator::start`] runs), others Empty.
    pub fn install(&self, loaded: HashMap<String, Loaded>) {
        let now = now_ms();
        let mut map = self.groups.lock().unwrap();
        for (id, l) in loaded {
            let mut g = Group::new(&id, now);
            g.offsets = l
                .offsets
                .into_iter()
                .map(|(k, v)| (k, Committed::from(v)))
                .collect();
            if let Some(v) = l.metadata {
                g.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
                g.generation = v.generation;
                g.protocol = v.protocol.clone();
                g.leader = v.leader;
                if v.state_timestamp > 0 {
                    g.state_ts = v.state_timestamp;
                }
                let deadline = Instant::now();
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
                            join_tx: None,
                            sync_tx: None,
                            deadline: deadline
                                + Duration::from_millis(m.session_timeout_ms.max(0) as u64),
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
            }
            map.insert(id, Arc::new(tokio::sync::Mutex::new(g)));
        }
    }

    /// Starts the session timers of loaded members and the periodic offset expiry.
    pub fn start(self: &Arc<Self>) {
        for cell in self.cells() {
            let me = self.clone();
            tokio::spawn(async move {
                let ids: Vec<(String, u64)> = {
                    let g = cell.lock().await;
                    g.members.values().map(|m| (m.id.clone(), m.seq)).collect()
                };
                for (id, seq) in ids {
                    me.spawn_session_timer(&cell, id, seq);
                }
            });
        }
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
}

fn session(m: &Member) -> Duration {
    Duration::from_millis(m.session_timeout_ms.max(0) as u64)
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
