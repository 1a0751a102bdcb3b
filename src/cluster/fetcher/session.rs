//! One leader's fetcher task: its connection, and the rounds it runs over it.
//!
//! A round sends, for the partitions ready for each, one OffsetForLeaderEpoch request (the
//! partitions that must truncate before fetching), one ListOffsets request (the partitions
//! whose fetch was out of range: where does the leader's log start?) and one Fetch request
//! (the rest), and carries out what `state` decides for each partition of each answer. Any
//! connection or decoding failure drops the connection and retries after the backoff, with
//! every partition keeping its phase.
//!
//! The set of partitions changes only between rounds, from the `watch` the manager writes;
//! an answer that arrives after a change is applied to the partitions still followed as they
//! were when it was asked (the same replica, leader epoch and fetch offset), and to no other.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use anyhow::Result;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::watch;
use tokio::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::conn::LeaderConn;
use super::incremental::{self, Handler};
use super::state::{
    EpochAction, FetchAction, FetchState, LogStartAction, Phase, after_out_of_range_truncation,
    on_epoch_end_offset, on_fetch_partition, on_leader_log_start, whole_batches_len,
};
use super::{Assignment, FetcherConfig, FollowTarget};
use crate::cluster::PartitionError;
use crate::cluster::partition::FollowerPosition;
use crate::log::now_ms;

/// Fetch v13+ names topics by id; v15+ carries the replica in `replica_state`; v18 is the
/// newest that kafka-protocol 0.18 encodes and Sluice serves.
const FETCH_VERSION: i16 = 18;
const OFFSET_FOR_LEADER_EPOCH_VERSION: i16 = 4;
const LIST_OFFSETS_VERSION: i16 = 10;
/// ListOffsets' timestamp asking for the log start offset.
const EARLIEST_TIMESTAMP: i64 = -2;
/// replica.socket.timeout.ms at Kafka's default: how long an answer may take beyond the
/// fetch's max_wait_ms.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(30);
/// How much a response frame may exceed the fetch's byte limit: the first batch of a
/// response is sent whole even when it is larger (KIP-74), plus headers.
const FRAME_SLACK: usize = 256 << 20;

/// A partition by topic id and index.
type Key = (Uuid, i32);

/// A partition this task follows.
struct Followed {
    target: FollowTarget,
    state: FetchState,
    /// Distinguishes this following from an earlier one of the same partition (an answer
    /// to a request made for that one must not apply to this one).
    generation: u64,
}

/// What a request asked of one partition.
#[derive(Clone, Copy)]
struct Asked {
    key: Key,
    generation: u64,
    /// The local log end when asked.
    log_end: i64,
    last_fetched_epoch: i32,
}

pub struct Session {
    leader: i32,
    cfg: Arc<FetcherConfig>,
    broker_epoch: Arc<AtomicI64>,
    assignment: watch::Receiver<Arc<Assignment>>,
    cancel: CancellationToken,
    addr: String,
    parts: BTreeMap<Key, Followed>,
    next_generation: u64,
    conn: Option<LeaderConn>,
    /// The fetch session with the leader (KIP-227).
    fetch_session: Handler<Key>,
    /// Consecutive failed rounds (the first failure after a success is logged at info).
    failures: u32,
}

impl Session {
    pub fn new(
        leader: i32,
        cfg: Arc<FetcherConfig>,
        broker_epoch: Arc<AtomicI64>,
        assignment: watch::Receiver<Arc<Assignment>>,
        cancel: CancellationToken,
    ) -> Session {
        Session {
            leader,
            cfg,
            broker_epoch,
            assignment,
            cancel,
            addr: String::new(),
            parts: BTreeMap::new(),
            next_generation: 0,
            conn: None,
            fetch_session: Handler::default(),
            failures: 0,
        }
    }

    fn backoff(&self) -> Duration {
        Duration::from_millis(self.cfg.backoff_ms)
    }

    /// Runs rounds until cancelled.
    pub async fn run(mut self) {
        let cancel = self.cancel.clone();
        self.apply_assignment();
        loop {
            if cancel.is_cancelled() {
                break;
            }
            if self.assignment.has_changed().unwrap_or(false) {
                self.apply_assignment();
            }
            let now = Instant::now();
            if !self
                .parts
                .values()
                .any(|f| f.state.ready_in(|p| !matches!(p, Phase::Stopped), now))
            {
                // Nothing to ask now: wait for an update, the next delayed partition, or
                // the end.
                let next = self
                    .parts
                    .values()
                    .filter(|f| f.state.phase != Phase::Stopped)
                    .filter_map(|f| f.state.delayed_until)
                    .min();
                tokio::select! {
                    biased;
                    _ = cancel.cancelled() => break,
                    changed = self.assignment.changed() => {
                        if changed.is_err() {
                            break;
                        }
                        // `changed` marked the new value seen: take it now.
                        self.apply_assignment();
                    }
                    _ = sleep_until(next) => {}
                }
                continue;
            }
            let result = tokio::select! {
                biased;
                _ = cancel.cancelled() => break,
                r = self.round() => r,
            };
            match result {
                Ok(()) => self.failures = 0,
                Err(e) => {
                    if self.failures == 0 {
                        tracing::info!(leader = self.leader, addr = %self.addr, "replica fetch failed, reconnecting after backoff: {e:#}");
                    } else {
                        tracing::debug!(leader = self.leader, addr = %self.addr, "replica fetch failed again: {e:#}");
                    }
                    self.failures = self.failures.saturating_add(1);
                    self.conn = None;
                    tokio::select! {
                        biased;
                        _ = cancel.cancelled() => break,
                        _ = tokio::time::sleep(self.backoff()) => {}
                    }
                }
            }
        }
        for f in self.parts.values() {
            tracing::info!(topic = %f.target.partition.topic, partition = f.target.partition.index, leader = self.leader, "stops fetching (fetcher ends)");
        }
        tracing::info!(leader = self.leader, "replica fetcher ended");
    }

    /// Takes the latest assignment: new partitions (or new leader epochs) start afresh,
    /// those no longer listed stop.
    fn apply_assignment(&mut self) {
        let a = self.assignment.borrow_and_update().clone();
        if a.addr != self.addr {
            if self.conn.take().is_some() {
                tracing::info!(leader = self.leader, old = %self.addr, new = %a.addr, "leader address changed");
            }
            self.addr = a.addr.clone();
        }
        let mut old = std::mem::take(&mut self.parts);
        for t in &a.targets {
            let key = (t.partition.topic_id, t.partition.index);
            match old.remove(&key) {
                Some(f)
                    if Arc::ptr_eq(&f.target.partition, &t.partition)
                        && f.target.leader_epoch == t.leader_epoch =>
                {
                    self.parts.insert(key, f);
                }
                _ => {
                    let generation = self.next_generation;
                    self.next_generation += 1;
                    let state = FetchState::new(start_phase(t));
                    self.parts.insert(
                        key,
                        Followed {
                            target: t.clone(),
                            state,
                            generation,
                        },
                    );
                }
            }
        }
        for f in old.values() {
            tracing::info!(topic = %f.target.partition.topic, partition = f.target.partition.index, leader = self.leader, epoch = f.target.leader_epoch, "stops fetching");
        }
    }

    /// One round: truncations, then log start look-ups, then a fetch.
    async fn round(&mut self) -> Result<()> {
        if self.conn.is_none() {
            let client_id = format!("broker-{}-fetcher-{}", self.cfg.local_id, self.leader);
            let limit = self.cfg.max_bytes.max(self.cfg.partition_max_bytes).max(0) as usize;
            let conn = LeaderConn::connect(
                self.leader,
                &self.addr,
                client_id,
                limit + FRAME_SLACK,
                &self.cfg.security,
            )
            .await?;
            tracing::debug!(leader = self.leader, addr = %self.addr, "connected to leader");
            self.conn = Some(conn);
        }
        let truncating = self.ready(|p| matches!(p, Phase::Truncate { .. }));
        if !truncating.is_empty() {
            self.truncate(&truncating).await?;
        }
        let finding = self.ready(|p| *p == Phase::FindLogStart);
        if !finding.is_empty() {
            self.find_log_start(&finding).await?;
        }
        let fetching = self.ready(|p| *p == Phase::Fetch);
        if !fetching.is_empty() {
            self.fetch(&fetching).await?;
        }
        Ok(())
    }

    /// The partitions ready in a phase, with their positions; a partition whose replica no
    /// longer follows this leader at the target's epoch stops.
    fn ready(&mut self, phase: fn(&Phase) -> bool) -> Vec<(Asked, FollowerPosition)> {
        let now = Instant::now();
        let mut out = Vec::new();
        for (key, f) in self.parts.iter_mut() {
            if !f.state.ready_in(phase, now) {
                continue;
            }
            match position(&f.target) {
                Some(pos) => out.push((
                    Asked {
                        key: *key,
                        generation: f.generation,
                        log_end: pos.fetch_offset,
                        last_fetched_epoch: pos.last_fetched_epoch,
                    },
                    pos,
                )),
                None => stop(
                    f,
                    self.leader,
                    "the replica no longer follows at this epoch",
                ),
            }
        }
        out
    }

    /// The partition `asked` was about, if still followed as it was then and in `phase`.
    fn answered(&mut self, asked: &Asked, phase: fn(&Phase) -> bool) -> Option<&mut Followed> {
        self.parts
            .get_mut(&asked.key)
            .filter(|f| f.generation == asked.generation && phase(&f.state.phase))
    }

    /// Partitions asked about that got no answer are asked again after the backoff.
    fn delay_unanswered<'a>(
        &mut self,
        asked: impl Iterator<Item = &'a Asked>,
        phase: fn(&Phase) -> bool,
        now: Instant,
    ) {
        let backoff = self.backoff();
        for a in asked {
            if let Some(f) = self.answered(a, phase) {
                f.state.delay(now, backoff);
            }
        }
    }

    async fn call<Req, Resp>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp>
    where
        Req: kafka_protocol::protocol::Encodable,
        Resp: kafka_protocol::protocol::Decodable,
    {
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("not connected"))?;
        let resp = conn.call(key, version, req, timeout).await?;
        // Answers apply to the partitions still followed.
        if self.assignment.has_changed().unwrap_or(false) {
            self.apply_assignment();
        }
        Ok(resp)
    }

    /// OffsetForLeaderEpoch for the latest local epoch of each partition, then truncation to
    /// where the logs agree.
    async fn truncate(&mut self, ready: &[(Asked, FollowerPosition)]) -> Result<()> {
        let mut req = OffsetForLeaderEpochRequest::default();
        req.replica_id = BrokerId(self.cfg.local_id);
        let mut by_name: HashMap<(Arc<str>, i32), Asked> = HashMap::new();
        let mut topics: BTreeMap<Arc<str>, Vec<OffsetForLeaderPartition>> = BTreeMap::new();
        for (asked, pos) in ready {
            let f = &self.parts[&asked.key];
            if pos.last_fetched_epoch < 0 {
                // An empty log has nothing to truncate.
                self.parts
                    .get_mut(&asked.key)
                    .unwrap()
                    .state
                    .go(Phase::Fetch);
                continue;
            }
            let mut p = OffsetForLeaderPartition::default();
            p.partition = asked.key.1;
            p.current_leader_epoch = f.target.leader_epoch;
            p.leader_epoch = pos.last_fetched_epoch;
            let name = f.target.partition.topic.clone();
            topics.entry(name.clone()).or_default().push(p);
            by_name.insert((name, asked.key.1), *asked);
        }
        if by_name.is_empty() {
            return Ok(());
        }
        for (name, partitions) in topics {
            let mut t = OffsetForLeaderTopic::default();
            t.topic = TopicName(StrBytes::from_string(name.to_string()));
            t.partitions = partitions;
            req.topics.push(t);
        }
        let resp: OffsetForLeaderEpochResponse = self
            .call(
                ApiKey::OffsetForLeaderEpoch,
                OFFSET_FOR_LEADER_EPOCH_VERSION,
                &req,
                SOCKET_TIMEOUT,
            )
            .await?;
        let now = Instant::now();
        let backoff = self.backoff();
        for t in resp.topics {
            let name: Arc<str> = Arc::from(t.topic.0.as_str());
            for p in t.partitions {
                let Some(asked) = by_name.remove(&(name.clone(), p.partition)) else {
                    tracing::debug!(leader = self.leader, topic = %name, partition = p.partition, "OffsetForLeaderEpoch answer for a partition not asked about");
                    continue;
                };
                let leader = self.leader;
                let Some(f) = self.answered(&asked, |p| matches!(p, Phase::Truncate { .. })) else {
                    continue;
                };
                match on_epoch_end_offset(p.error_code, p.leader_epoch, p.end_offset) {
                    EpochAction::Truncate { epoch, end_offset } => {
                        truncate_by_epoch(f, leader, &asked, epoch, end_offset, now, backoff)
                    }
                    EpochAction::Stop => stop(f, leader, error_name(p.error_code)),
                    EpochAction::Retry => retry(f, leader, p.error_code, now, backoff),
                }
            }
        }
        self.delay_unanswered(
            by_name.values(),
            |p| matches!(p, Phase::Truncate { .. }),
            now,
        );
        Ok(())
    }

    /// ListOffsets for the leader's log start of each partition whose fetch was out of
    /// range; the log then restarts there, or is truncated by epoch.
    async fn find_log_start(&mut self, ready: &[(Asked, FollowerPosition)]) -> Result<()> {
        let mut req = ListOffsetsRequest::default();
        req.replica_id = BrokerId(self.cfg.local_id);
        req.timeout_ms = SOCKET_TIMEOUT.as_millis() as i32;
        let mut by_name: HashMap<(Arc<str>, i32), Asked> = HashMap::new();
        let mut topics: BTreeMap<Arc<str>, Vec<ListOffsetsPartition>> = BTreeMap::new();
        for (asked, _) in ready {
            let f = &self.parts[&asked.key];
            let mut p = ListOffsetsPartition::default();
            p.partition_index = asked.key.1;
            p.current_leader_epoch = f.target.leader_epoch;
            p.timestamp = EARLIEST_TIMESTAMP;
            let name = f.target.partition.topic.clone();
            topics.entry(name.clone()).or_default().push(p);
            by_name.insert((name, asked.key.1), *asked);
        }
        for (name, partitions) in topics {
            let mut t = ListOffsetsTopic::default();
            t.name = TopicName(StrBytes::from_string(name.to_string()));
            t.partitions = partitions;
            req.topics.push(t);
        }
        let resp: ListOffsetsResponse = self
            .call(
                ApiKey::ListOffsets,
                LIST_OFFSETS_VERSION,
                &req,
                SOCKET_TIMEOUT,
            )
            .await?;
        let now = Instant::now();
        let backoff = self.backoff();
        for t in resp.topics {
            let name: Arc<str> = Arc::from(t.name.0.as_str());
            for p in t.partitions {
                let Some(asked) = by_name.remove(&(name.clone(), p.partition_index)) else {
                    continue;
                };
                let leader = self.leader;
                let Some(f) = self.answered(&asked, |p| *p == Phase::FindLogStart) else {
                    continue;
                };
                let action = on_leader_log_start(
                    p.error_code,
                    p.offset,
                    asked.log_end,
                    asked.last_fetched_epoch,
                );
                match action {
                    LogStartAction::StartAt(offset) => start_at(f, leader, offset, now, backoff),
                    LogStartAction::Truncate => f.state.go(Phase::Truncate {
                        out_of_range: Some(p.offset),
                    }),
                    LogStartAction::Stop => stop(f, leader, error_name(p.error_code)),
                    LogStartAction::Retry => retry(f, leader, p.error_code, now, backoff),
                }
            }
        }
        self.delay_unanswered(by_name.values(), |p| *p == Phase::FindLogStart, now);
        Ok(())
    }

    /// One fetch of every partition ready for it, and the appends.
    async fn fetch(&mut self, ready: &[(Asked, FollowerPosition)]) -> Result<()> {
        let mut req = FetchRequest::default();
        req.replica_state.replica_id = BrokerId(self.cfg.local_id);
        req.replica_state.replica_epoch = self.broker_epoch.load(Ordering::Acquire);
        req.max_wait_ms = self.cfg.max_wait_ms;
        req.min_bytes = self.cfg.min_bytes;
        req.max_bytes = self.cfg.max_bytes;
        let wanted: Vec<(Key, incremental::Params)> = ready
            .iter()
            .map(|(asked, pos)| {
                let params = incremental::Params {
                    fetch_offset: pos.fetch_offset,
                    log_start_offset: pos.log_start_offset,
                    last_fetched_epoch: pos.last_fetched_epoch,
                    current_leader_epoch: self.parts[&asked.key].target.leader_epoch,
                    max_bytes: self.cfg.partition_max_bytes,
                };
                (asked.key, params)
            })
            .collect();
        // In a session only the partitions added or moved are listed; the leader answers
        // only those with something new. Every ready partition is still asked for.
        let built = self.fetch_session.build(&wanted);
        req.session_id = built.session_id;
        req.session_epoch = built.epoch;
        let mut asked_for: HashMap<Key, Asked> = HashMap::with_capacity(ready.len());
        let mut listed: HashMap<Key, FetchPartition> = HashMap::with_capacity(ready.len());
        for ((asked, pos), (_, params)) in ready.iter().zip(&wanted) {
            asked_for.insert(asked.key, *asked);
            let mut p = FetchPartition::default();
            p.partition = asked.key.1;
            p.current_leader_epoch = params.current_leader_epoch;
            p.fetch_offset = params.fetch_offset;
            p.last_fetched_epoch = params.last_fetched_epoch;
            p.log_start_offset = params.log_start_offset;
            p.partition_max_bytes = params.max_bytes;
            p.high_watermark = pos.high_watermark;
            listed.insert(asked.key, p);
        }
        let mut topics: BTreeMap<Uuid, Vec<FetchPartition>> = BTreeMap::new();
        for key in &built.send {
            if let Some(p) = listed.remove(key) {
                topics.entry(key.0).or_default().push(p);
            }
        }
        for (id, partitions) in topics {
            let mut t = FetchTopic::default();
            t.topic_id = id;
            t.partitions = partitions;
            req.topics.push(t);
        }
        let mut forgotten: BTreeMap<Uuid, Vec<i32>> = BTreeMap::new();
        for (id, index) in &built.forget {
            forgotten.entry(*id).or_default().push(*index);
        }
        for (id, partitions) in forgotten {
            let mut t = ForgottenTopic::default();
            t.topic_id = id;
            t.partitions = partitions;
            req.forgotten_topics_data.push(t);
        }
        let timeout = Duration::from_millis(self.cfg.max_wait_ms.max(0) as u64) + SOCKET_TIMEOUT;
        let resp: FetchResponse = match self.call(ApiKey::Fetch, FETCH_VERSION, &req, timeout).await
        {
            Ok(resp) => resp,
            Err(e) => {
                self.fetch_session.on_failure();
                return Err(e);
            }
        };
        let before = self.fetch_session.session_id();
        self.fetch_session
            .on_answer(resp.error_code, resp.session_id);
        if self.fetch_session.session_id() != before {
            tracing::debug!(
                leader = self.leader,
                session = self.fetch_session.session_id(),
                "fetch session"
            );
        }
        let now = Instant::now();
        let backoff = self.backoff();
        if resp.error_code != 0 {
            tracing::debug!(
                leader = self.leader,
                error = resp.error_code,
                "fetch failed as a whole"
            );
            self.delay_unanswered(asked_for.values(), |p| *p == Phase::Fetch, now);
            return Ok(());
        }
        let leader = self.leader;
        for t in resp.responses {
            for p in t.partitions {
                let key = (t.topic_id, p.partition_index);
                let Some(asked) = asked_for.remove(&key) else {
                    tracing::debug!(leader, topic_id = %key.0, partition = key.1, "fetch answer for a partition not asked for");
                    continue;
                };
                let Some(f) = self.answered(&asked, |p| *p == Phase::Fetch) else {
                    continue;
                };
                let records = p.records.as_ref().map_or(0, |r| r.len());
                let diverging = (p.diverging_epoch.epoch, p.diverging_epoch.end_offset);
                match on_fetch_partition(p.error_code, diverging, records) {
                    FetchAction::Append => {
                        let records = p.records.as_ref().expect("records present");
                        append(f, leader, &asked, records, p.high_watermark, now, backoff);
                        follow_log_start(f, leader, p.log_start_offset);
                    }
                    FetchAction::HighWatermark => {
                        if still_at(f, &asked) {
                            f.target
                                .partition
                                .on_leader_high_watermark(p.high_watermark);
                            follow_log_start(f, leader, p.log_start_offset);
                        }
                    }
                    FetchAction::Diverged { epoch, end_offset } => {
                        tracing::info!(topic = %f.target.partition.topic, partition = key.1, leader, epoch, end_offset, "the local log diverges from the leader's");
                        truncate_by_epoch(f, leader, &asked, epoch, end_offset, now, backoff);
                    }
                    FetchAction::OutOfRange => {
                        tracing::info!(topic = %f.target.partition.topic, partition = key.1, leader, fetch_offset = asked.log_end, "fetch offset out of the leader's range");
                        f.state.go(Phase::FindLogStart);
                    }
                    FetchAction::Stop => stop(f, leader, error_name(p.error_code)),
                    FetchAction::Retry => retry(f, leader, p.error_code, now, backoff),
                }
            }
        }
        Ok(())
    }
}

/// The phase a newly followed partition starts in: truncation first, unless its log is
/// empty; stopped when the replica does not follow the target's leader at its epoch.
fn start_phase(t: &FollowTarget) -> Phase {
    let p = &t.partition;
    match position(t) {
        Some(pos) => {
            tracing::info!(topic = %p.topic, partition = p.index, leader = t.leader, epoch = t.leader_epoch, fetch_offset = pos.fetch_offset, last_fetched_epoch = pos.last_fetched_epoch, "starts fetching");
            if pos.last_fetched_epoch < 0 {
                Phase::Fetch
            } else {
                Phase::Truncate { out_of_range: None }
            }
        }
        None => {
            tracing::info!(topic = %p.topic, partition = p.index, leader = t.leader, epoch = t.leader_epoch, state = ?p.replica_state(), "not fetched: the replica does not follow this leader at this epoch");
            Phase::Stopped
        }
    }
}

/// The replica's position, if it follows the target's leader at the target's epoch.
fn position(t: &FollowTarget) -> Option<FollowerPosition> {
    t.partition
        .follower_position()
        .filter(|pos| pos.leader == t.leader && pos.leader_epoch == t.leader_epoch)
}

/// Whether the replica still follows at the target's epoch with the log end it had when
/// `asked` was sent (else the answer is stale).
fn still_at(f: &Followed, asked: &Asked) -> bool {
    position(&f.target).is_some_and(|pos| pos.fetch_offset == asked.log_end)
}

fn stop(f: &mut Followed, leader: i32, why: &str) {
    let p = &f.target.partition;
    tracing::info!(topic = %p.topic, partition = p.index, leader, epoch = f.target.leader_epoch, "stops fetching until a new leader epoch: {why}");
    f.state.go(Phase::Stopped);
}

/// The wait before asking again after `error_code`. A leader that does not know its new epoch
/// yet (UNKNOWN_LEADER_EPOCH), or does not lead yet (NOT_LEADER_OR_FOLLOWER), is usually a
/// few milliseconds behind this broker in applying the same metadata: it is asked again soon,
/// so that acks=all on a new leader does not wait a whole replica.fetch.backoff.ms for its
/// followers.
fn retry_delay(error_code: i16, backoff: Duration) -> Duration {
    use kafka_protocol::ResponseError as E;
    const SOON: Duration = Duration::from_millis(20);
    if error_code == E::UnknownLeaderEpoch.code() || error_code == E::NotLeaderOrFollower.code() {
        backoff.min(SOON)
    } else {
        backoff
    }
}

fn retry(f: &mut Followed, leader: i32, error_code: i16, now: Instant, backoff: Duration) {
    let p = &f.target.partition;
    let delay = retry_delay(error_code, backoff);
    tracing::debug!(topic = %p.topic, partition = p.index, leader, "{}: retrying in {delay:?}", error_name(error_code));
    f.state.delay(now, delay);
}

fn error_name(code: i16) -> &'static str {
    use kafka_protocol::ResponseError as E;
    match code {
        c if c == E::NotLeaderOrFollower.code() => "NOT_LEADER_OR_FOLLOWER",
        c if c == E::FencedLeaderEpoch.code() => "FENCED_LEADER_EPOCH",
        c if c == E::UnknownLeaderEpoch.code() => "UNKNOWN_LEADER_EPOCH",
        c if c == E::UnknownTopicId.code() => "UNKNOWN_TOPIC_ID",
        c if c == E::UnknownTopicOrPartition.code() => "UNKNOWN_TOPIC_OR_PARTITION",
        c if c == E::OffsetOutOfRange.code() => "OFFSET_OUT_OF_RANGE",
        _ => "leader error",
    }
}

/// A local failure of the replica: it became leader (stop), or its storage failed (retry).
fn local_failure(
    f: &mut Followed,
    leader: i32,
    e: PartitionError,
    now: Instant,
    backoff: Duration,
) {
    let p = &f.target.partition;
    match e {
        PartitionError::NotLeader => stop(f, leader, "the replica is no longer a follower"),
        e => {
            tracing::warn!(topic = %p.topic, partition = p.index, leader, "replica fetch: {e:?}; retrying after backoff");
            f.state.delay(now, backoff);
        }
    }
}

/// Truncation after the leader said where `epoch` ends in its log (`end_offset`); then
/// fetching resumes. After OFFSET_OUT_OF_RANGE a truncation that cut nothing restarts the
/// log at the leader's log start.
fn truncate_by_epoch(
    f: &mut Followed,
    leader: i32,
    asked: &Asked,
    epoch: i32,
    end_offset: i64,
    now: Instant,
    backoff: Duration,
) {
    if !still_at(f, asked) {
        // The log moved since the question; ask again.
        return;
    }
    let p = f.target.partition.clone();
    match p.truncate_for_leader_epoch(epoch, end_offset) {
        Ok(leo) => {
            tracing::info!(topic = %p.topic, partition = p.index, leader, epoch, end_offset, from = asked.log_end, to = leo, "truncated for the leader's epoch");
            if let Phase::Truncate {
                out_of_range: Some(leader_start),
            } = f.state.phase
                && let Some(at) = after_out_of_range_truncation(asked.log_end, leo, leader_start)
            {
                start_at(f, leader, at, now, backoff);
                return;
            }
            f.state.go(Phase::Fetch);
        }
        Err(e) => local_failure(f, leader, e, now, backoff),
    }
}

/// Empties the log and restarts it at the leader's log start `offset`; then fetching.
fn start_at(f: &mut Followed, leader: i32, offset: i64, now: Instant, backoff: Duration) {
    let p = f.target.partition.clone();
    match p.truncate_fully_and_start_at(offset) {
        Ok(_) => {
            tracing::info!(topic = %p.topic, partition = p.index, leader, offset, "log emptied: restarts at the leader's log start");
            f.state.go(Phase::Fetch);
        }
        Err(e) => local_failure(f, leader, e, now, backoff),
    }
}

/// Appends the whole batches of a fetch answer as they are, with the leader's high
/// watermark.
fn append(
    f: &mut Followed,
    leader: i32,
    asked: &Asked,
    records: &[u8],
    leader_hw: i64,
    now: Instant,
    backoff: Duration,
) {
    if !still_at(f, asked) {
        return;
    }
    let p = f.target.partition.clone();
    let whole = whole_batches_len(records);
    if whole == 0 {
        // Not even one whole batch: larger than partition_max_bytes from a leader that cuts
        // batches, or garbage.
        tracing::warn!(topic = %p.topic, partition = p.index, leader, bytes = records.len(), "fetch answer holds no whole batch; retrying after backoff");
        f.state.delay(now, backoff);
        return;
    }
    match p.append_as_follower(&records[..whole], leader_hw, now_ms()) {
        Ok(info) => {
            tracing::debug!(topic = %p.topic, partition = p.index, leader, first = info.first_offset, last = info.last_offset, "appended as follower")
        }
        Err(e) => local_failure(f, leader, e, now, backoff),
    }
}

/// The leader's log start offset from a fetch answer: the follower's moves up to it (Kafka's
/// `maybeIncrementLogStartOffset` on the follower), deleting the segments below.
fn follow_log_start(f: &Followed, leader: i32, leader_log_start: i64) {
    let p = &f.target.partition;
    if leader_log_start > p.log_start_offset()
        && let Err(e) = p.on_leader_log_start(leader_log_start)
    {
        tracing::warn!(topic = %p.topic, partition = p.index, leader, leader_log_start, "cannot follow the leader's log start: {e:?}");
    }
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
