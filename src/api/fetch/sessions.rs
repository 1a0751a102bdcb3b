//! Incremental fetch sessions (KIP-227), as Kafka's `FetchSession` and `FetchSessionCache`.
//!
//! A fetcher opens a session with a full fetch (session id 0, epoch 0) naming every partition;
//! the answer carries the new session's id. Later fetches name the session and its next epoch,
//! and list only the partitions whose fetch position changed (or are added), plus those to
//! forget; the answer holds only the partitions with something new: records, a changed high
//! watermark or log start offset, an error, a diverging epoch or a preferred read replica.
//!
//! The cache holds at most `max.incremental.fetch.session.cache.slots` sessions. When full, a
//! new session may take the slot of one unused for [`EVICTION_MS`]; failing that, of the least
//! valuable session that is evictable: a follower's (privileged) session may evict a
//! consumer's, and any session may evict a smaller one created over [`EVICTION_MS`] ago.
//! Without a slot the full fetch is still answered, with session id 0.
//!
//! A session keeps its partitions in fetch order with an index by partition, both kept from
//! one fetch to the next: adding, updating, forgetting and answering a partition costs a
//! lookup, not a pass over the whole session, and the one pass a fetch makes is the read.
//!
//! Everything here is pure: the handler passes the clock and carries out the plan.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kafka_protocol::ResponseError;

/// No session.
pub const INVALID_SESSION_ID: i32 = 0;
/// The epoch of a full fetch that opens a session.
pub const INITIAL_EPOCH: i32 = 0;
/// The epoch of a full fetch that wants no session (and of fetches before v7).
pub const FINAL_EPOCH: i32 = -1;
/// Kafka's `MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`: how long a session is protected.
pub const EVICTION_MS: u64 = 120_000;

/// A topic as the fetch names it: by name before v13, by id from v13.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TopicKey {
    Name(Arc<str>),
    Id(uuid::Uuid),
}

pub type PartitionKey = (TopicKey, i32);

/// What the fetcher asks of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchParams {
    pub fetch_offset: i64,
    pub max_bytes: i32,
    pub current_leader_epoch: i32,
    pub last_fetched_epoch: i32,
    pub log_start_offset: i64,
}

/// What the answer says of one partition: enough to tell whether it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answered {
    pub has_records: bool,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub error: bool,
    pub diverging: bool,
    pub preferred_read_replica: bool,
}

/// A partition of a session: the fetcher's request and what it was last told.
#[derive(Debug, Clone)]
struct Cached {
    key: PartitionKey,
    params: FetchParams,
    high_watermark: i64,
    log_start_offset: i64,
}

impl Cached {
    /// Whether an incremental answer must carry the partition; records what it carries.
    fn must_respond(&mut self, a: &Answered) -> bool {
        let mut respond = a.has_records || a.diverging || a.preferred_read_replica;
        if self.high_watermark != a.high_watermark {
            respond = true;
            self.high_watermark = a.high_watermark;
        }
        if self.log_start_offset != a.log_start_offset {
            respond = true;
            self.log_start_offset = a.log_start_offset;
        }
        if a.error {
            // Sent again once the error clears.
            self.high_watermark = -1;
            respond = true;
        }
        respond
    }
}

#[derive(Debug)]
struct Session {
    privileged: bool,
    uses_topic_ids: bool,
    /// The epoch the next incremental fetch must carry.
    epoch: i32,
    /// The partitions in fetch order, by sequence number: a partition that returned records
    /// gets a new (larger) one, so the next fetch reads the others first.
    order: BTreeMap<u64, Cached>,
    /// Each partition's sequence number in `order`.
    index: HashMap<PartitionKey, u64>,
    next_seq: u64,
    creation_ms: u64,
    last_used_ms: u64,
    /// The size and evictability recorded when the session was last used.
    cached_size: usize,
    evictable_by_all: bool,
    evictable_by_privileged: bool,
}

impl Session {
    fn new(privileged: bool, uses_topic_ids: bool, now_ms: u64) -> Session {
        Session {
            privileged,
            uses_topic_ids,
            epoch: next_epoch(INITIAL_EPOCH),
            order: BTreeMap::new(),
            index: HashMap::new(),
            next_seq: 0,
            creation_ms: now_ms,
            last_used_ms: now_ms,
            cached_size: 0,
            evictable_by_all: false,
            evictable_by_privileged: false,
        }
    }

    /// Puts `c` last in fetch order.
    fn push_back(&mut self, c: Cached) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.index.insert(c.key.clone(), seq);
        self.order.insert(seq, c);
    }

    /// Adds or updates the requested partitions, then drops the forgotten ones.
    fn update(&mut self, requested: Vec<(PartitionKey, FetchParams)>, forgotten: &[PartitionKey]) {
        for (key, params) in requested {
            match self.index.get(&key).and_then(|s| self.order.get_mut(s)) {
                Some(c) => c.params = params,
                // Never told anything: the next answer carries it.
                None => self.push_back(Cached {
                    key,
                    params,
                    high_watermark: -1,
                    log_start_offset: -1,
                }),
            }
        }
        for key in forgotten {
            if let Some(seq) = self.index.remove(key) {
                self.order.remove(&seq);
            }
        }
    }

    fn len(&self) -> usize {
        self.index.len()
    }

    /// Kafka's `EvictableKey` ordering: (privileged, size, id); the smallest goes first.
    fn evictable_key(&self, id: i32) -> (bool, usize, i32) {
        (self.privileged, self.cached_size, id)
    }
}

/// What to do with one fetch request.
#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// Answer with this error and session id 0, reading nothing.
    Error(i16),
    /// Read the requested partitions; the answer has session id 0.
    Sessionless(Vec<(PartitionKey, FetchParams)>),
    /// Read the requested partitions, then open a session from the answer ([`SessionCache::create`]).
    Full(Vec<(PartitionKey, FetchParams)>),
    /// Read the session's partitions, then keep those [`SessionCache::respond`] selects.
    Incremental {
        id: i32,
        partitions: Vec<(PartitionKey, FetchParams)>,
    },
}

/// The broker's fetch sessions.
#[derive(Debug)]
pub struct SessionCache {
    max_entries: usize,
    sessions: HashMap<i32, Session>,
    evictions: u64,
    rng: u64,
}

/// The epoch after `epoch`: FINAL stays FINAL, and the epoch wraps to 1.
pub fn next_epoch(epoch: i32) -> i32 {
    match epoch {
        e if e < 0 => FINAL_EPOCH,
        i32::MAX => 1,
        e => e + 1,
    }
}

impl SessionCache {
    pub fn new(max_entries: usize) -> SessionCache {
        let seed = u64::from_le_bytes(uuid::Uuid::new_v4().as_bytes()[..8].try_into().unwrap());
        SessionCache {
            max_entries,
            sessions: HashMap::new(),
            evictions: 0,
            rng: seed | 1,
        }
    }

    /// Sessions held (`NumIncrementalFetchSessions`).
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Partitions held by all sessions (`NumIncrementalFetchPartitionsCached`).
    pub fn partitions_cached(&self) -> usize {
        self.sessions.values().map(|s| s.cached_size).sum()
    }

    /// Sessions evicted to make room for others (`IncrementalFetchSessionEvictionsPerSec`).
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Decides how to serve a fetch naming `session_id` and `epoch`; an incremental fetch
    /// updates its session and moves it to the next epoch here.
    pub fn plan(
        &mut self,
        session_id: i32,
        epoch: i32,
        uses_topic_ids: bool,
        requested: Vec<(PartitionKey, FetchParams)>,
        forgotten: &[PartitionKey],
        now_ms: u64,
    ) -> Plan {
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            // A full fetch closes the session it names.
            if session_id != INVALID_SESSION_ID {
                self.sessions.remove(&session_id);
            }
            return if epoch == FINAL_EPOCH {
                Plan::Sessionless(requested)
            } else {
                Plan::Full(requested)
            };
        }
        let Some(session) = self.sessions.get_mut(&session_id) else {
            return Plan::Error(ResponseError::FetchSessionIdNotFound.code());
        };
        if session.epoch != epoch {
            return Plan::Error(ResponseError::InvalidFetchSessionEpoch.code());
        }
        if session.uses_topic_ids != uses_topic_ids {
            return Plan::Error(ResponseError::FetchSessionTopicIdError.code());
        }
        session.update(requested.clone(), forgotten);
        if session.len() == 0 {
            self.sessions.remove(&session_id);
            return Plan::Sessionless(requested);
        }
        session.epoch = next_epoch(session.epoch);
        let partitions = session
            .order
            .values()
            .map(|c| (c.key.clone(), c.params))
            .collect();
        self.touch(session_id, now_ms);
        Plan::Incremental {
            id: session_id,
            partitions,
        }
    }

    /// Opens a session holding a full fetch's partitions and what its answer told of each;
    /// returns its id, or 0 when no slot is free or can be freed.
    pub fn create(
        &mut self,
        now_ms: u64,
        privileged: bool,
        uses_topic_ids: bool,
        answered: Vec<(PartitionKey, FetchParams, Answered)>,
    ) -> i32 {
        if self.sessions.len() >= self.max_entries
            && !self.try_evict(privileged, answered.len(), now_ms)
        {
            return INVALID_SESSION_ID;
        }
        let id = self.new_id();
        let mut session = Session::new(privileged, uses_topic_ids, now_ms);
        for (key, params, a) in answered {
            // A partition named twice keeps its first place and its last parameters.
            match session
                .index
                .get(&key)
                .and_then(|s| session.order.get_mut(s))
            {
                Some(c) => c.params = params,
                None => session.push_back(Cached {
                    key,
                    params,
                    high_watermark: a.high_watermark,
                    log_start_offset: a.log_start_offset,
                }),
            }
        }
        self.sessions.insert(id, session);
        self.touch(id, now_ms);
        id
    }

    /// Records an incremental answer: for each partition read, whether the answer carries it.
    /// Partitions that returned records move to the end of the session, so that the next
    /// fetch reads the others first. An answer for a session evicted meanwhile keeps them all.
    pub fn respond(&mut self, id: i32, answered: &[(PartitionKey, Answered)]) -> Vec<bool> {
        let Some(session) = self.sessions.get_mut(&id) else {
            return vec![true; answered.len()];
        };
        let mut keep = Vec::with_capacity(answered.len());
        let mut rotate = Vec::new();
        // The answer lists the session's partitions in the order `plan` gave them, which is
        // the session's own: walked side by side, each is found without a lookup. One that
        // is not where expected (a fetch served meanwhile changed the session) is looked up.
        let mut order = session.order.iter_mut();
        let mut lookups = Vec::new();
        for (i, (key, a)) in answered.iter().enumerate() {
            match order.next().filter(|(_, c)| c.key == *key) {
                Some((seq, c)) => {
                    keep.push(c.must_respond(a));
                    if a.has_records {
                        rotate.push(*seq);
                    }
                }
                None => {
                    keep.push(true);
                    lookups.push(i);
                }
            }
        }
        for i in lookups {
            let (key, a) = &answered[i];
            let seq = session.index.get(key).copied();
            // Forgotten by a fetch served meanwhile: sent as read.
            if let Some((seq, c)) = seq.and_then(|s| Some((s, session.order.get_mut(&s)?))) {
                keep[i] = c.must_respond(a);
                if a.has_records {
                    rotate.push(seq);
                }
            }
        }
        // The moved partitions keep their order among themselves.
        rotate.sort_unstable();
        rotate.dedup();
        for seq in rotate {
            if let Some(c) = session.order.remove(&seq) {
                session.push_back(c);
            }
        }
        keep
    }

    /// Marks a session used now and records its size and evictability.
    fn touch(&mut self, id: i32, now_ms: u64) {
        if let Some(s) = self.sessions.get_mut(&id) {
            s.last_used_ms = now_ms;
            s.cached_size = s.len();
            let old = now_ms.saturating_sub(s.creation_ms) > EVICTION_MS;
            s.evictable_by_all = old;
            s.evictable_by_privileged = !s.privileged || old;
        }
    }

    /// Frees a slot for a new session of `size` partitions, as Kafka's `tryEvict`.
    fn try_evict(&mut self, privileged: bool, size: usize, now_ms: u64) -> bool {
        let stale = self
            .sessions
            .iter()
            .min_by_key(|(id, s)| (s.last_used_ms, **id))
            .filter(|(_, s)| now_ms.saturating_sub(s.last_used_ms) > EVICTION_MS)
            .map(|(id, _)| *id);
        let victim = stale.or_else(|| {
            let least = self
                .sessions
                .iter()
                .filter(|(_, s)| {
                    if privileged {
                        s.evictable_by_privileged
                    } else {
                        s.evictable_by_all
                    }
                })
                .map(|(id, s)| s.evictable_key(*id))
                .min()?;
            // The new session (id 0 in the ordering) must be at least as valuable.
            ((privileged, size, 0) >= least).then_some(least.2)
        });
        match victim {
            Some(id) => {
                self.sessions.remove(&id);
                self.evictions += 1;
                true
            }
            None => false,
        }
    }

    fn new_id(&mut self) -> i32 {
        loop {
            // xorshift64*
            self.rng ^= self.rng >> 12;
            self.rng ^= self.rng << 25;
            self.rng ^= self.rng >> 27;
            let id = (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as i32;
            if id > 0 && !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(t: &str, p: i32) -> PartitionKey {
        (TopicKey::Name(t.into()), p)
    }

    fn params(offset: i64) -> FetchParams {
        FetchParams {
            fetch_offset: offset,
            max_bytes: 1 << 20,
            current_leader_epoch: 0,
            last_fetched_epoch: -1,
            log_start_offset: -1,
        }
    }

    fn quiet(hw: i64) -> Answered {
        Answered {
            has_records: false,
            high_watermark: hw,
            log_start_offset: 0,
            error: false,
            diverging: false,
            preferred_read_replica: false,
        }
    }

    /// A session over `n` partitions of topic "t", all at high watermark 10.
    fn open(c: &mut SessionCache, n: i32, privileged: bool, now: u64) -> i32 {
        let parts = (0..n)
            .map(|p| (key("t", p), params(0), quiet(10)))
            .collect();
        c.create(now, privileged, false, parts)
    }

    fn incremental(c: &mut SessionCache, id: i32, epoch: i32, now: u64) -> Plan {
        c.plan(id, epoch, false, vec![], &[], now)
    }

    #[test]
    fn full_fetch_opens_a_session_at_epoch_one() {
        let mut c = SessionCache::new(10);
        let req = vec![(key("t", 0), params(5))];
        assert_eq!(
            c.plan(0, INITIAL_EPOCH, false, req.clone(), &[], 0),
            Plan::Full(req)
        );
        let id = open(&mut c, 2, false, 0);
        assert!(id > 0);
        assert_eq!((c.len(), c.partitions_cached()), (1, 2));
        match incremental(&mut c, id, 1, 10) {
            Plan::Incremental {
                id: got,
                partitions,
            } => {
                assert_eq!(got, id);
                assert_eq!(partitions.len(), 2);
            }
            other => panic!("{other:?}"),
        }
        // The epoch moved on: 1 again is refused, 2 is served.
        assert_eq!(
            incremental(&mut c, id, 1, 20),
            Plan::Error(ResponseError::InvalidFetchSessionEpoch.code())
        );
        assert!(matches!(
            incremental(&mut c, id, 2, 30),
            Plan::Incremental { .. }
        ));
    }

    #[test]
    fn session_errors_are_kafkas() {
        let mut c = SessionCache::new(10);
        assert_eq!(
            incremental(&mut c, 1234, 1, 0),
            Plan::Error(ResponseError::FetchSessionIdNotFound.code())
        );
        let id = open(&mut c, 1, false, 0);
        // A wrong epoch is reported before a change between names and ids.
        assert_eq!(
            c.plan(id, 7, true, vec![], &[], 0),
            Plan::Error(ResponseError::InvalidFetchSessionEpoch.code())
        );
        assert_eq!(
            c.plan(id, 1, true, vec![], &[], 0),
            Plan::Error(ResponseError::FetchSessionTopicIdError.code())
        );
        // Errors leave the session as it was.
        assert!(matches!(
            incremental(&mut c, id, 1, 0),
            Plan::Incremental { .. }
        ));
    }

    #[test]
    fn full_fetch_naming_a_session_closes_it() {
        let mut c = SessionCache::new(10);
        let id = open(&mut c, 1, false, 0);
        assert_eq!(
            c.plan(id, INITIAL_EPOCH, false, vec![], &[], 0),
            Plan::Full(vec![])
        );
        assert!(c.is_empty());
        let id = open(&mut c, 1, false, 0);
        let req = vec![(key("t", 0), params(1))];
        assert_eq!(
            c.plan(id, FINAL_EPOCH, false, req.clone(), &[], 0),
            Plan::Sessionless(req)
        );
        assert!(c.is_empty());
    }

    #[test]
    fn incremental_answers_carry_only_what_changed() {
        let mut c = SessionCache::new(10);
        let id = open(&mut c, 3, false, 0);
        let Plan::Incremental { partitions, .. } = incremental(&mut c, id, 1, 0) else {
            panic!()
        };
        let keys: Vec<_> = partitions.into_iter().map(|(k, _)| k).collect();
        let mut moved = quiet(10);
        moved.high_watermark = 11;
        let mut failed = quiet(10);
        failed.error = true;
        let answers = vec![
            (keys[0].clone(), quiet(10)),
            (keys[1].clone(), moved),
            (keys[2].clone(), failed),
        ];
        assert_eq!(c.respond(id, &answers), vec![false, true, true]);
        // Unchanged since: only the failed partition, now healthy, is sent again.
        let answers: Vec<_> = keys.iter().map(|k| (k.clone(), quiet(10))).collect();
        let mut answers = answers;
        answers[1].1.high_watermark = 11;
        assert_eq!(c.respond(id, &answers), vec![false, false, true]);
        assert_eq!(c.respond(id, &answers), vec![false, false, false]);
    }

    #[test]
    fn an_answer_out_of_the_sessions_order_is_matched_by_key() {
        let mut c = SessionCache::new(10);
        let id = open(&mut c, 3, false, 0);
        let mut moved = quiet(10);
        moved.high_watermark = 11;
        // In another order than the session's (a fetch served meanwhile moved partitions),
        // and naming a partition the session no longer holds (sent as read).
        let answers = vec![
            (key("t", 2), moved),
            (key("t", 1), quiet(10)),
            (key("t", 0), quiet(10)),
            (key("t", 9), quiet(10)),
        ];
        assert_eq!(c.respond(id, &answers), vec![true, false, false, true]);
        // What each was told is recorded: the same answer again carries nothing new.
        assert_eq!(c.respond(id, &answers), vec![false, false, false, true]);
    }

    #[test]
    fn partitions_with_records_move_to_the_end() {
        let mut c = SessionCache::new(10);
        let id = open(&mut c, 3, false, 0);
        let mut data = quiet(10);
        data.has_records = true;
        let answers = vec![
            (key("t", 0), data),
            (key("t", 1), quiet(10)),
            (key("t", 2), quiet(10)),
        ];
        assert_eq!(c.respond(id, &answers), vec![true, false, false]);
        let Plan::Incremental { partitions, .. } = incremental(&mut c, id, 1, 0) else {
            panic!()
        };
        let order: Vec<i32> = partitions.iter().map(|(k, _)| k.1).collect();
        assert_eq!(order, vec![1, 2, 0]);
    }

    #[test]
    fn incremental_fetch_adds_updates_and_forgets() {
        let mut c = SessionCache::new(10);
        let id = open(&mut c, 2, false, 0);
        let req = vec![(key("t", 1), params(7)), (key("u", 0), params(3))];
        let Plan::Incremental { partitions, .. } = c.plan(id, 1, false, req, &[key("t", 0)], 5)
        else {
            panic!()
        };
        assert_eq!(
            partitions,
            vec![(key("t", 1), params(7)), (key("u", 0), params(3))]
        );
        assert_eq!(c.partitions_cached(), 2);
        // The added partition was never answered: it is sent whatever it holds.
        let answers = vec![(key("t", 1), quiet(10)), (key("u", 0), quiet(0))];
        assert_eq!(c.respond(id, &answers), vec![false, true]);
        // Forgetting every partition ends the session.
        let forget = [key("t", 1), key("u", 0)];
        assert_eq!(
            c.plan(id, 2, false, vec![], &forget, 6),
            Plan::Sessionless(vec![])
        );
        assert!(c.is_empty());
    }

    #[test]
    fn a_full_cache_evicts_as_kafka() {
        let mut c = SessionCache::new(1);
        let first = open(&mut c, 5, false, 0);
        // Fresh sessions are protected from consumers, whatever their size.
        assert_eq!(open(&mut c, 50, false, 1_000), INVALID_SESSION_ID);
        // A follower's session takes a consumer's slot at once.
        let follower = open(&mut c, 1, true, 2_000);
        assert!(follower > 0);
        assert_eq!(c.evictions(), 1);
        assert_eq!(
            incremental(&mut c, first, 1, 2_000),
            Plan::Error(ResponseError::FetchSessionIdNotFound.code())
        );
        // ...but not another follower's while it is fresh.
        assert_eq!(open(&mut c, 9, true, 3_000), INVALID_SESSION_ID);
        // Unused for two minutes, any session gives way.
        let late = 2_000 + EVICTION_MS + 1;
        let consumer = open(&mut c, 1, false, late);
        assert!(consumer > 0);
        assert_eq!((c.len(), c.evictions()), (1, 2));
    }

    #[test]
    fn an_old_session_gives_way_only_to_a_larger_one() {
        let mut c = SessionCache::new(1);
        let id = open(&mut c, 5, false, 0);
        // Used after two minutes: evictable, but not stale.
        let t = EVICTION_MS + 10;
        assert!(matches!(
            incremental(&mut c, id, 1, t),
            Plan::Incremental { .. }
        ));
        assert_eq!(open(&mut c, 5, false, t + 1), INVALID_SESSION_ID);
        assert_eq!(open(&mut c, 4, false, t + 1), INVALID_SESSION_ID);
        assert!(open(&mut c, 6, false, t + 1) > 0);
        assert_eq!(c.partitions_cached(), 6);
    }

    #[test]
    fn no_slots_no_sessions() {
        let mut c = SessionCache::new(0);
        assert_eq!(open(&mut c, 3, true, 0), INVALID_SESSION_ID);
        assert!(c.is_empty());
    }

    #[test]
    fn epochs_wrap_to_one() {
        assert_eq!(next_epoch(0), 1);
        assert_eq!(next_epoch(41), 42);
        assert_eq!(next_epoch(i32::MAX), 1);
        assert_eq!(next_epoch(FINAL_EPOCH), FINAL_EPOCH);
    }

    /// Seeded random fetches against a session and against a plain list that follows the
    /// rules one pass at a time (update in place, append new, drop forgotten; answered
    /// partitions with records move to the end in their order): the plans and the partitions
    /// each answer carries agree at every step.
    #[test]
    fn the_index_keeps_the_order_a_list_would() {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut c = SessionCache::new(4);
        let id = open(&mut c, 20, false, 0);
        // (partition, fetch offset, high watermark told)
        let mut model: Vec<(i32, i64, i64)> = (0..20).map(|p| (p, 0, 10)).collect();
        let mut epoch = 1;
        for step in 0..2_000 {
            let mut requested = Vec::new();
            for _ in 0..next(4) {
                let p = next(30) as i32;
                requested.push((key("t", p), params(step)));
                match model.iter_mut().find(|m| m.0 == p) {
                    Some(m) => m.1 = step as i64,
                    None => model.push((p, step as i64, -1)),
                }
            }
            let mut forgotten = Vec::new();
            if next(3) == 0 && model.len() > 1 {
                let p = model[next(model.len() as u64) as usize].0;
                forgotten.push(key("t", p));
                model.retain(|m| m.0 != p);
            }
            let plan = c.plan(id, epoch, false, requested, &forgotten, 0);
            epoch = next_epoch(epoch);
            let Plan::Incremental { partitions, .. } = plan else {
                panic!("step {step}: {plan:?}")
            };
            let got: Vec<(i32, i64)> = partitions
                .iter()
                .map(|(k, p)| (k.1, p.fetch_offset))
                .collect();
            let want: Vec<(i32, i64)> = model.iter().map(|m| (m.0, m.1)).collect();
            assert_eq!(got, want, "plan at step {step}");
            let mut answered = Vec::new();
            let mut want_keep = Vec::new();
            let mut moved = Vec::new();
            for m in model.iter_mut() {
                let records = next(4) == 0;
                let hw = 10 + next(2) as i64;
                answered.push((
                    key("t", m.0),
                    Answered {
                        has_records: records,
                        ..quiet(hw)
                    },
                ));
                want_keep.push(records || m.2 != hw);
                m.2 = hw;
                moved.push(records);
            }
            assert_eq!(c.respond(id, &answered), want_keep, "answer at step {step}");
            let (back, front): (Vec<_>, Vec<_>) = model.iter().zip(&moved).partition(|(_, r)| **r);
            model = front.into_iter().chain(back).map(|(m, _)| *m).collect();
        }
    }
}
