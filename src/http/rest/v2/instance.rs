//! Consumer instances: the registry ([`Instances`], one per HTTP server) and one instance's
//! state: what it consumes (a topic list, a pattern, or partitions assigned by hand), its
//! membership of the group (kept by [`member`](super::member)'s task), its assignment and its
//! positions, and the offset requests it makes as the group member (commit, committed,
//! the offsets a seek or an unknown position resolves to).
//!
//! An instance belongs to the principal that created it: another principal is told it does
//! not exist. It expires once unused for `sluice.rest.consumer.instance.timeout.ms`; its
//! task then leaves the group and removes it. Every Kafka request it makes carries its
//! creator's session and the client id `rest-consumer-<instance>`, and goes to the group's
//! coordinator (forwarded there when another broker coordinates it).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use axum::http::StatusCode;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    ApiKey, GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchResponse, TopicName,
    offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
    offset_fetch_request::OffsetFetchRequestTopics,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::broker::Broker;
use crate::http::console::Ctx;
use crate::http::console::cluster::list_offsets;
use crate::http::console::groups::{coordinator, offset_fetch, offset_fetch_elsewhere};
use crate::http::console::wire::{call_as, forward, is_peer, not_coordinator};
use crate::http::rest::RestError;
use crate::security::{Principal, Session};

/// A topic partition.
pub(super) type Tp = (String, i32);

/// What an instance consumes.
pub(super) enum Mode {
    Nothing,
    Topics(Vec<String>),
    /// A pattern (matched against whole topic names) and the topics it matched last.
    Pattern(regex::Regex, Vec<String>),
    /// Partitions assigned by hand (no group membership: commits as a simple group).
    Assigned(Vec<Tp>),
}

/// Where a partition's next read starts when it has no position yet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Reset {
    Earliest,
    Latest,
    /// `auto.offset.reset=none`: a partition without a committed offset is an error.
    Fail,
}

impl Reset {
    pub fn parse(s: Option<&str>) -> Option<Reset> {
        match s.map(str::to_ascii_lowercase).as_deref() {
            None | Some("latest") | Some("largest") => Some(Reset::Latest),
            Some("earliest") | Some("smallest") => Some(Reset::Earliest),
            Some("none") => Some(Reset::Fail),
            Some(_) => None,
        }
    }
}

/// A partition's position: an offset, or a seek to its beginning or end not yet resolved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Pos {
    At(i64),
    Beginning,
    End,
}

/// The embedded format an instance's records are read in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Format {
    Binary,
    Json,
    Avro,
    JsonSchema,
    Protobuf,
}

impl Format {
    pub fn media_type(self) -> &'static str {
        match self {
            Format::Binary => "application/vnd.kafka.binary.v2+json",
            Format::Json => "application/vnd.kafka.json.v2+json",
            Format::Avro => "application/vnd.kafka.avro.v2+json",
            Format::JsonSchema => "application/vnd.kafka.jsonschema.v2+json",
            Format::Protobuf => "application/vnd.kafka.protobuf.v2+json",
        }
    }
}

/// An instance's mutable state; never held across an await.
pub(super) struct State {
    pub mode: Mode,
    /// The member id the coordinator gave (empty before the first join).
    pub member_id: String,
    pub generation: i32,
    /// The topics the current membership joined with; None while not a member.
    pub joined: Option<Vec<String>>,
    /// A rebalance or a lost membership asks for a new JoinGroup.
    pub rejoin: bool,
    /// The partitions the group assigned to this member.
    pub assignment: Vec<Tp>,
    pub positions: BTreeMap<Tp, Pos>,
    /// A group error (a refused group, a failed join) every read reports until a join
    /// succeeds or the instance subscribes, unsubscribes or is assigned partitions anew.
    pub error: Option<(StatusCode, i32, String)>,
    /// The positions last committed automatically.
    pub auto_committed: BTreeMap<Tp, i64>,
}

impl State {
    /// The partitions the instance reads: assigned by hand or by the group.
    pub fn assigned(&self) -> Vec<Tp> {
        match &self.mode {
            Mode::Assigned(tps) => tps.clone(),
            Mode::Topics(_) | Mode::Pattern(..) => self.assignment.clone(),
            Mode::Nothing => Vec::new(),
        }
    }

    /// The topics the group membership should subscribe to (None: no membership).
    pub fn wanted(&self) -> Option<Vec<String>> {
        match &self.mode {
            Mode::Topics(t) | Mode::Pattern(_, t) => Some(t.clone()),
            _ => None,
        }
    }

    /// The resolved positions of the assigned partitions.
    pub fn consumed(&self) -> Vec<(Tp, i64)> {
        let assigned = self.assigned();
        self.positions
            .iter()
            .filter(|(tp, _)| assigned.contains(tp))
            .filter_map(|(tp, p)| match p {
                Pos::At(o) => Some((tp.clone(), *o)),
                _ => None,
            })
            .collect()
    }

    /// Whether the instance commits as a group member (generation and member id).
    fn member(&self) -> Option<(i32, String)> {
        self.joined
            .as_ref()
            .map(|_| (self.generation, self.member_id.clone()))
    }
}

/// How a consumer instance was created.
pub(super) struct Settings {
    pub format: Format,
    pub reset: Reset,
    pub auto_commit: bool,
    /// `fetch.min.bytes`: a read answers once it holds more bytes (-1: only at its timeout).
    pub min_bytes: i64,
    /// `consumer.request.timeout.ms`: the longest a read waits.
    pub request_timeout_ms: u64,
}

pub(super) struct Instance {
    pub group: String,
    pub name: String,
    pub settings: Settings,
    pub client_id: String,
    broker: Weak<Broker>,
    session: Session,
    pub state: Mutex<State>,
    /// Reads, commits and seeks of the instance happen one at a time.
    pub busy: tokio::sync::Mutex<()>,
    last_used_ms: AtomicI64,
    timeout_ms: i64,
    /// Wakes the member task (a new subscription).
    pub wake: Notify,
    /// Cancelled when the instance is deleted or expires.
    pub closed: CancellationToken,
    pub task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Instance {
    pub fn new(ctx: &Ctx, group: &str, name: &str, settings: Settings) -> Instance {
        Instance {
            group: group.to_string(),
            name: name.to_string(),
            settings,
            client_id: format!("rest-consumer-{name}"),
            broker: Arc::downgrade(&ctx.broker),
            session: ctx.session.clone(),
            state: Mutex::new(State {
                mode: Mode::Nothing,
                member_id: String::new(),
                generation: -1,
                joined: None,
                rejoin: false,
                assignment: Vec::new(),
                positions: BTreeMap::new(),
                error: None,
                auto_committed: BTreeMap::new(),
            }),
            busy: tokio::sync::Mutex::new(()),
            last_used_ms: AtomicI64::new(crate::clock::now_ms()),
            timeout_ms: i64::try_from(ctx.broker.config.rest_consumer_instance_timeout_ms)
                .unwrap_or(i64::MAX),
            wake: Notify::new(),
            closed: CancellationToken::new(),
            task: Mutex::new(None),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The context the instance's requests run in, while the broker is open.
    pub fn ctx(&self) -> Option<Ctx> {
        Some(Ctx {
            broker: self.broker.upgrade()?,
            session: self.session.clone(),
        })
    }

    fn touch(&self) {
        self.last_used_ms
            .store(crate::clock::now_ms(), Ordering::Relaxed);
    }

    pub fn expired(&self, now_ms: i64) -> bool {
        now_ms.saturating_sub(self.last_used_ms.load(Ordering::Relaxed)) >= self.timeout_ms
    }

    fn owner(&self) -> &Principal {
        &self.session.principal
    }

    /// Sends a request about the group to its coordinator as this instance: here first,
    /// and to the coordinating broker when this one answers NOT_COORDINATOR.
    pub async fn to_coordinator<Req: Encodable, Resp: Decodable>(
        &self,
        ctx: &Ctx,
        key: (ApiKey, i16),
        req: &Req,
        elsewhere: impl Fn(&Resp) -> bool,
    ) -> Result<Resp, RestError> {
        let here: Resp = call_as(&ctx.broker, &ctx.session, &self.client_id, key, req).await?;
        if !elsewhere(&here) {
            return Ok(here);
        }
        let node = coordinator(ctx, &self.group).await?;
        if !is_peer(&ctx.broker, node) {
            return Ok(here);
        }
        Ok(forward(&ctx.broker, node, key, req).await?)
    }

    /// Commits `offsets` (the next offset to read of each partition, with metadata) as the
    /// group member, or as a simple consumer of the group when not a member.
    pub async fn commit(
        &self,
        ctx: &Ctx,
        offsets: &[(Tp, i64, Option<String>)],
    ) -> Result<(), RestError> {
        if offsets.is_empty() {
            return Ok(());
        }
        let (generation, member_id) = self.lock().member().unwrap_or((-1, String::new()));
        let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for ((t, p), o, meta) in offsets {
            let mut cp = OffsetCommitRequestPartition::default();
            cp.partition_index = *p;
            cp.committed_offset = *o;
            cp.committed_leader_epoch = -1;
            cp.committed_metadata = Some(StrBytes::from_string(meta.clone().unwrap_or_default()));
            by_topic.entry(t).or_default().push(cp);
        }
        let mut req = OffsetCommitRequest::default();
        req.group_id = GroupId(StrBytes::from_string(self.group.clone()));
        req.generation_id_or_member_epoch = generation;
        req.member_id = StrBytes::from_string(member_id);
        req.topics = by_topic
            .into_iter()
            .map(|(t, ps)| {
                let mut ct = OffsetCommitRequestTopic::default();
                ct.name = TopicName(StrBytes::from_string(t.to_string()));
                ct.partitions = ps;
                ct
            })
            .collect();
        let resp: OffsetCommitResponse = self
            .to_coordinator(
                ctx,
                (ApiKey::OffsetCommit, 8),
                &req,
                |r: &OffsetCommitResponse| {
                    r.topics
                        .iter()
                        .flat_map(|t| t.partitions.iter())
                        .any(|p| not_coordinator(p.error_code))
                },
            )
            .await?;
        let code = resp
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| p.error_code)
            .find(|c| *c != 0);
        match code {
            None => Ok(()),
            Some(c) if rebalanced(c) => {
                self.lock().rejoin = true;
                Err(RestError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    50002,
                    "Kafka error: Commit cannot be completed since the group has already \
                     rebalanced and assigned the partitions to another member.",
                ))
            }
            Some(c) => Err(RestError::kafka(c, None)),
        }
    }

    /// The group's committed offsets of `tps` (with their metadata); partitions without one
    /// are left out.
    pub async fn committed(
        &self,
        ctx: &Ctx,
        tps: &[Tp],
    ) -> Result<BTreeMap<Tp, (i64, String)>, RestError> {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (t, p) in tps {
            by_topic.entry(t).or_default().push(*p);
        }
        let topics = by_topic
            .into_iter()
            .map(|(t, ps)| {
                let mut ft = OffsetFetchRequestTopics::default();
                ft.name = TopicName(StrBytes::from_string(t.to_string()));
                ft.partition_indexes = ps;
                ft
            })
            .collect();
        let req = offset_fetch(&self.group, Some(topics));
        let resp: OffsetFetchResponse = self
            .to_coordinator(ctx, (ApiKey::OffsetFetch, 8), &req, offset_fetch_elsewhere)
            .await?;
        let mut out = BTreeMap::new();
        for g in resp.groups {
            if g.error_code != 0 {
                return Err(RestError::kafka(g.error_code, None));
            }
            for t in g.topics {
                for p in t.partitions {
                    if p.error_code != 0 {
                        return Err(RestError::kafka(p.error_code, None));
                    }
                    if p.committed_offset >= 0 {
                        let meta = p.metadata.map(|m| m.to_string()).unwrap_or_default();
                        out.insert(
                            (t.name.0.to_string(), p.partition_index),
                            (p.committed_offset, meta),
                        );
                    }
                }
            }
        }
        Ok(out)
    }

    /// The positions of `tps` that have none, or a seek to resolve: the committed offset,
    /// else `auto.offset.reset`; and the offsets a seek to the beginning or end names.
    pub async fn resolve(&self, ctx: &Ctx, tps: &[Tp]) -> Result<BTreeMap<Tp, i64>, RestError> {
        let known: BTreeMap<Tp, Pos> = {
            let st = self.lock();
            tps.iter()
                .filter_map(|tp| st.positions.get(tp).map(|p| (tp.clone(), *p)))
                .collect()
        };
        let mut out = BTreeMap::new();
        let mut ends: Vec<(String, i32, i64)> = Vec::new();
        let unknown: Vec<Tp> = tps
            .iter()
            .filter(|tp| !known.contains_key(*tp))
            .cloned()
            .collect();
        let committed = if unknown.is_empty() {
            BTreeMap::new()
        } else {
            self.committed(ctx, &unknown).await?
        };
        for tp in tps {
            let at = match known.get(tp) {
                Some(Pos::At(o)) => Some(*o),
                Some(Pos::Beginning) => None,
                Some(Pos::End) => {
                    ends.push((tp.0.clone(), tp.1, -1));
                    continue;
                }
                None => match committed.get(tp) {
                    Some((o, _)) => Some(*o),
                    None => match self.settings.reset {
                        Reset::Latest => {
                            ends.push((tp.0.clone(), tp.1, -1));
                            continue;
                        }
                        Reset::Earliest => None,
                        Reset::Fail => {
                            return Err(RestError::new(
                                StatusCode::INTERNAL_SERVER_ERROR,
                                50002,
                                format!(
                                    "Kafka error: Undefined offset with no reset policy for \
                                     partitions: [{}-{}]",
                                    tp.0, tp.1
                                ),
                            ));
                        }
                    },
                },
            };
            match at {
                Some(o) => {
                    out.insert(tp.clone(), o);
                }
                None => ends.push((tp.0.clone(), tp.1, -2)),
            }
        }
        if !ends.is_empty() {
            for (k, v) in list_offsets(ctx, &ends).await? {
                match v {
                    Ok((o, _)) => {
                        out.insert(k, o);
                    }
                    Err(why) => {
                        return Err(RestError::new(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            50002,
                            format!("Kafka error: {why}"),
                        ));
                    }
                }
            }
        }
        Ok(out)
    }
}

/// An OffsetCommit or Heartbeat error that means the member's generation is over.
pub(super) fn rebalanced(code: i16) -> bool {
    [
        ResponseError::IllegalGeneration,
        ResponseError::UnknownMemberId,
        ResponseError::RebalanceInProgress,
        ResponseError::FencedInstanceId,
    ]
    .iter()
    .any(|e| e.code() == code)
}

/// Every consumer instance of the HTTP server, by group and name.
#[derive(Default)]
pub struct Instances {
    map: Mutex<HashMap<(String, String), Arc<Instance>>>,
}

impl Instances {
    fn lock(&self) -> MutexGuard<'_, HashMap<(String, String), Arc<Instance>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a new instance (409 40902 when its group already has one of that name) and
    /// starts its member task.
    pub(super) fn add(self: &Arc<Self>, inst: Instance) -> Result<Arc<Instance>, RestError> {
        let key = (inst.group.clone(), inst.name.clone());
        let inst = Arc::new(inst);
        {
            let mut map = self.lock();
            if map.contains_key(&key) {
                return Err(RestError::new(
                    StatusCode::CONFLICT,
                    40902,
                    "Consumer with specified consumer ID already exists in the specified \
                     consumer group.",
                ));
            }
            map.insert(key, inst.clone());
        }
        let task = tokio::spawn(super::member::run(inst.clone(), Arc::downgrade(self)));
        *inst.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        Ok(inst)
    }

    /// The caller's instance `name` of `group` (40403 when there is none), marked used.
    pub(super) fn get(
        &self,
        group: &str,
        name: &str,
        caller: &Principal,
    ) -> Result<Arc<Instance>, RestError> {
        let map = self.lock();
        match map.get(&(group.to_string(), name.to_string())) {
            Some(i) if i.owner() == caller && !i.expired(crate::clock::now_ms()) => {
                i.touch();
                Ok(i.clone())
            }
            _ => Err(instance_not_found()),
        }
    }

    /// Drops `inst` from the registry (when it is still the one registered).
    pub(super) fn forget(&self, inst: &Arc<Instance>) {
        let mut map = self.lock();
        let key = (inst.group.clone(), inst.name.clone());
        if map.get(&key).is_some_and(|i| Arc::ptr_eq(i, inst)) {
            map.remove(&key);
        }
    }
}

pub(super) fn instance_not_found() -> RestError {
    RestError::new(StatusCode::NOT_FOUND, 40403, "Consumer instance not found.")
}

/// A refusal of an operation the instance's state does not allow (409 40903, as the Java
/// consumer's IllegalStateException is answered).
pub(super) fn illegal_state(why: &str) -> RestError {
    RestError::new(StatusCode::CONFLICT, 40903, format!("Illegal state: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resets_read_as_the_java_consumer_reads_them() {
        assert_eq!(Reset::parse(None), Some(Reset::Latest));
        assert_eq!(Reset::parse(Some("EARLIEST")), Some(Reset::Earliest));
        assert_eq!(Reset::parse(Some("smallest")), Some(Reset::Earliest));
        assert_eq!(Reset::parse(Some("none")), Some(Reset::Fail));
        assert_eq!(Reset::parse(Some("sometimes")), None);
        assert!(rebalanced(ResponseError::IllegalGeneration.code()));
        assert!(!rebalanced(ResponseError::GroupAuthorizationFailed.code()));
    }
}
