//! Seeded schedules of joins, syncs, heartbeats, leaves, failed writes and timers over a few
//! members (some static), checking the group's invariants after every step.
//! `SLUICE_SIM_SEEDS=N` runs N schedules (default 300); `SLUICE_SIM_SEED=S` runs only seed S,
//! to reproduce a failure.

use std::collections::{HashMap, HashSet, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};

use bytes::Bytes;
use kafka_protocol::ResponseError as E;

use super::*;
use crate::group::state::{Group, JoinParams, JoinResult, State, SyncParams, SyncResult};

fn seeds() -> Vec<u64> {
    if let Ok(s) = std::env::var("SLUICE_SIM_SEED") {
        return vec![s.parse().expect("SLUICE_SIM_SEED is a number")];
    }
    let n: u64 = std::env::var("SLUICE_SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    (1..=n).collect()
}

/// xorshift64*: the whole schedule follows from the seed.
struct Dice(u64);

impl Dice {
    fn new(seed: u64) -> Dice {
        Dice(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1)
    }
    fn roll(&mut self, sides: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % sides.max(1)
    }
    fn odds(&mut self, percent: u64) -> bool {
        self.roll(100) < percent
    }
}

const SESSION_MS: i32 = 10_000;
const WRITE_FAILED: i16 = 16; // NOT_COORDINATOR, as a lost leadership of the partition gives

/// A consumer as the group sees it: what it was last told.
#[derive(Default)]
struct Client {
    instance: Option<String>,
    member_id: String,
    generation: i32,
    /// Member ids the leader was given in its JoinGroup answer.
    members: Vec<String>,
    joining: bool,
    syncing: bool,
    old_protocols: bool,
}

#[derive(Debug)]
enum Timer {
    Session(String, u64),
    Pending(String),
    Rebalance(u64),
    Initial(u64),
}

struct World {
    dice: Dice,
    g: Group,
    rules: Rules,
    mono: i64,
    clients: Vec<Client>,
    /// Member id → the client whose JoinGroup (SyncGroup) waits on it.
    joins: HashMap<String, usize>,
    syncs: HashMap<String, usize>,
    timers: Vec<(i64, Timer)>,
    /// The generation each member id was last told in a successful JoinGroup answer.
    told: HashMap<String, i32>,
    generation: i32,
    ids: u64,
}

const JOIN_CODES: &[E] = &[
    E::MemberIdRequired,
    E::UnknownMemberId,
    E::FencedInstanceId,
    E::InconsistentGroupProtocol,
];
const SYNC_CODES: &[E] = &[
    E::UnknownMemberId,
    E::IllegalGeneration,
    E::RebalanceInProgress,
    E::FencedInstanceId,
    E::InconsistentGroupProtocol,
];
const HEARTBEAT_CODES: &[E] = &[
    E::UnknownMemberId,
    E::IllegalGeneration,
    E::RebalanceInProgress,
    E::FencedInstanceId,
];

fn allowed(code: i16, codes: &[E]) -> bool {
    code == 0 || code == WRITE_FAILED || codes.iter().any(|e| e.code() == code)
}

impl World {
    fn new(seed: u64) -> World {
        let mut dice = Dice::new(seed);
        let n = 2 + dice.roll(3) as usize;
        let clients = (0..n)
            .map(|i| Client {
                instance: dice.odds(40).then(|| format!("instance-{i}")),
                ..Default::default()
            })
            .collect();
        let delay = [0, 100, 3000][dice.roll(3) as usize];
        World {
            dice,
            g: Group::new("g", 0),
            rules: Rules {
                initial_rebalance_delay_ms: delay,
            },
            mono: 0,
            clients,
            joins: HashMap::new(),
            syncs: HashMap::new(),
            timers: Vec::new(),
            told: HashMap::new(),
            generation: 0,
            ids: 0,
        }
    }

    fn now(&self) -> Now {
        Now {
            mono_ms: self.mono,
            wall_ms: 1_000_000 + self.mono,
        }
    }

    fn protocols(&self, c: usize) -> Vec<(String, Bytes)> {
        let names: &[&str] = if self.clients[c].old_protocols {
            &["range"]
        } else {
            &["cooperative-sticky", "range"]
        };
        names
            .iter()
            .map(|n| (n.to_string(), Bytes::from(format!("{n}-{c}"))))
            .collect()
    }

    fn run(&mut self, steps: usize) {
        for _ in 0..steps {
            let c = self.dice.roll(self.clients.len() as u64) as usize;
            match self.dice.roll(100) {
                0..=29 => self.join(c),
                30..=49 => self.sync(c),
                50..=64 => self.heartbeat(c),
                65..=71 => self.leave(c),
                72..=74 => self.clients[c].old_protocols ^= true,
                _ => {
                    let ms = [10, 500, 2_000, 6_000, 12_000][self.dice.roll(5) as usize];
                    self.advance(ms);
                }
            }
            self.check();
        }
        // Quiet: every timer runs out; nobody heartbeats, so every member goes.
        for _ in 0..10_000 {
            let Some(at) = self.timers.iter().map(|(at, _)| *at).min() else {
                break;
            };
            self.advance(at - self.mono);
            self.check();
        }
        assert!(self.timers.is_empty(), "timers never ran out");
        assert!(
            self.g.members.is_empty(),
            "members left after every timer fired"
        );
        assert!(self.g.pending.is_empty());
        assert_eq!(self.g.state, State::Empty);
        assert!(
            self.joins.is_empty() && self.syncs.is_empty(),
            "a request waits forever"
        );
    }

    fn join(&mut self, c: usize) {
        if self.clients[c].joining {
            return;
        }
        self.ids += 1;
        let new_id = format!("m{}", self.ids);
        let cl = &self.clients[c];
        let p = JoinParams {
            group_id: "g".into(),
            member_id: cl.member_id.clone(),
            instance_id: cl.instance.clone(),
            client_id: format!("client-{c}"),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: SESSION_MS,
            rebalance_timeout_ms: [5_000, 20_000][c % 2],
            protocol_type: "consumer".into(),
            protocols: self.protocols(c),
            require_known_member_id: cl.instance.is_none() && c % 2 == 0,
            supports_skip_assignment: c % 3 == 0,
        };
        let old_static = cl
            .instance
            .as_ref()
            .filter(|_| cl.member_id.is_empty())
            .and_then(|i| self.g.statics.get(i).cloned().map(|id| (i.clone(), id)));
        let mut out = Vec::new();
        let rules = self.rules;
        let now = self.now();
        let reply = join(&mut self.g, &rules, p, new_id, now, &mut out);
        match reply {
            Reply::Now(r) => self.joined(c, r),
            Reply::Wait(id) => {
                self.clients[c].joining = true;
                if let Some(other) = self.joins.insert(id.clone(), c) {
                    assert_eq!(other, c, "{id}: two clients wait on one member id");
                }
            }
            Reply::Persist(r) => {
                let stored = if self.dice.odds(15) {
                    Err(WRITE_FAILED)
                } else {
                    Ok(())
                };
                let r = static_replacement_stored(&mut self.g, *r, stored);
                self.joined(c, r);
            }
        }
        self.carry_out(out);
        if let Some((inst, old_id)) = old_static
            && self.g.statics.get(&inst) != Some(&old_id)
        {
            // Replaced: the old instance is fenced.
            let now = self.now();
            let hb = heartbeat(&mut self.g, &old_id, Some(&inst), self.generation, now);
            assert_eq!(
                hb,
                E::FencedInstanceId.code(),
                "old static member {old_id} not fenced"
            );
        }
    }

    fn joined(&mut self, c: usize, r: JoinResult) {
        assert!(
            allowed(r.error, JOIN_CODES),
            "JoinGroup answered {}",
            r.error
        );
        let cl = &mut self.clients[c];
        cl.joining = false;
        if r.error == 0 {
            cl.member_id = r.member_id.clone();
            cl.generation = r.generation;
            cl.members = r.members.iter().map(|(id, _, _)| id.clone()).collect();
            self.told.insert(r.member_id.clone(), r.generation);
            assert!(r.generation <= self.g.generation);
        } else if r.error == E::MemberIdRequired.code() {
            cl.member_id = r.member_id;
        } else if r.error != WRITE_FAILED {
            cl.member_id.clear();
            cl.generation = -1;
        }
    }

    fn sync(&mut self, c: usize) {
        let cl = &self.clients[c];
        if cl.syncing || cl.joining || cl.member_id.is_empty() {
            return;
        }
        let assignments = cl
            .members
            .iter()
            .map(|m| (m.clone(), Bytes::from(format!("for-{m}"))))
            .collect();
        let p = SyncParams {
            group_id: "g".into(),
            member_id: cl.member_id.clone(),
            instance_id: cl.instance.clone(),
            generation: cl.generation,
            protocol_type: Some("consumer".into()),
            protocol_name: None,
            assignments,
        };
        let mut out = Vec::new();
        let now = self.now();
        match sync(&mut self.g, p, now, &mut out) {
            Reply::Now(r) => self.synced(c, r),
            Reply::Wait(id) => {
                self.clients[c].syncing = true;
                self.syncs.insert(id, c);
            }
            Reply::Persist(_) => panic!("a SyncGroup persisted a static replacement"),
        }
        self.carry_out(out);
    }

    fn synced(&mut self, c: usize, r: SyncResult) {
        assert!(
            allowed(r.error, SYNC_CODES),
            "SyncGroup answered {}",
            r.error
        );
        let cl = &mut self.clients[c];
        cl.syncing = false;
        if r.error == E::UnknownMemberId.code() || r.error == E::FencedInstanceId.code() {
            cl.member_id.clear();
        }
    }

    fn heartbeat(&mut self, c: usize) {
        let cl = &self.clients[c];
        if cl.member_id.is_empty() {
            return;
        }
        let (id, inst, generation) = (cl.member_id.clone(), cl.instance.clone(), cl.generation);
        let now = self.now();
        let code = heartbeat(&mut self.g, &id, inst.as_deref(), generation, now);
        assert!(allowed(code, HEARTBEAT_CODES), "Heartbeat answered {code}");
        if code == E::UnknownMemberId.code() || code == E::FencedInstanceId.code() {
            self.clients[c].member_id.clear();
        }
    }

    fn leave(&mut self, c: usize) {
        let cl = &self.clients[c];
        if cl.member_id.is_empty() && cl.instance.is_none() {
            return;
        }
        let leaving = vec![(cl.member_id.clone(), cl.instance.clone())];
        let mut out = Vec::new();
        let rules = self.rules;
        let now = self.now();
        let codes = leave(&mut self.g, &rules, &leaving, now, &mut out);
        assert_eq!(codes.len(), 1);
        assert!(
            allowed(codes[0], &[E::UnknownMemberId, E::FencedInstanceId]),
            "LeaveGroup answered {codes:?}"
        );
        if codes[0] == 0 {
            self.clients[c].member_id.clear();
        }
        self.carry_out(out);
    }

    /// Time passes by `ms`: the timers due fire in order.
    fn advance(&mut self, ms: i64) {
        let until = self.mono + ms.max(0);
        loop {
            let due = self
                .timers
                .iter()
                .enumerate()
                .filter(|(_, (at, _))| *at <= until)
                .min_by_key(|(i, (at, _))| (*at, *i))
                .map(|(i, _)| i);
            let Some(i) = due else { break };
            let (at, timer) = self.timers.remove(i);
            self.mono = self.mono.max(at);
            self.fire(timer);
            self.check();
        }
        self.mono = until;
    }

    fn fire(&mut self, timer: Timer) {
        let rules = self.rules;
        let now = self.now();
        let out = match timer {
            Timer::Pending(id) => pending_expired(&mut self.g, &id, now),
            Timer::Rebalance(epoch) => rebalance_timer_fired(&mut self.g, epoch, now),
            Timer::Initial(epoch) => initial_delay_fired(&mut self.g, &rules, epoch, now),
            Timer::Session(id, seq) => match session_fired(&mut self.g, &rules, &id, seq, now) {
                Expiry::Gone => Vec::new(),
                Expiry::Alive => {
                    self.watch(id, seq);
                    Vec::new()
                }
                Expiry::Expired(out) => {
                    assert!(!self.g.members.contains_key(&id));
                    for a in &out {
                        if let Action::Join(to, r) = a
                            && *to == id
                        {
                            assert_eq!(r.error, E::UnknownMemberId.code());
                        }
                        if let Action::Sync(to, r) = a
                            && *to == id
                        {
                            assert_eq!(r.error, E::UnknownMemberId.code());
                        }
                    }
                    let code = heartbeat(&mut self.g, &id, None, self.generation, now);
                    assert_eq!(code, E::UnknownMemberId.code(), "{id} timed out");
                    out
                }
            },
        };
        self.carry_out(out);
    }

    fn watch(&mut self, id: String, seq: u64) {
        if let Some(at) = session_wake(&self.g, &id, seq, self.now()) {
            assert!(at >= self.mono);
            self.timers.push((at, Timer::Session(id, seq)));
        }
    }

    /// As the coordinator does: answers, timers, writes (some fail).
    fn carry_out(&mut self, out: Vec<Action>) {
        let mut queue: VecDeque<Action> = out.into();
        while let Some(a) = queue.pop_front() {
            match a {
                Action::Join(id, r) => {
                    if let Some(c) = self.joins.remove(&id) {
                        self.joined(c, r);
                    }
                }
                Action::Sync(id, r) => {
                    if let Some(c) = self.syncs.remove(&id) {
                        self.synced(c, r);
                    }
                }
                Action::SessionTimer { member, seq } => self.watch(member, seq),
                Action::PendingTimer { member, at } => {
                    self.timers.push((at, Timer::Pending(member)))
                }
                Action::RebalanceTimer { epoch, at } => {
                    self.timers.push((at, Timer::Rebalance(epoch)))
                }
                Action::InitialDelay { epoch, at } => self.timers.push((at, Timer::Initial(epoch))),
                Action::Persist => {}
                Action::PersistAssignment { generation } => {
                    let stored = if self.dice.odds(10) {
                        Err(WRITE_FAILED)
                    } else {
                        Ok(())
                    };
                    let rules = self.rules;
                    let now = self.now();
                    let more = assignment_stored(&mut self.g, &rules, generation, stored, now);
                    for a in &more {
                        if let Action::Sync(id, r) = a
                            && r.error == 0
                        {
                            assert!(self.g.members.contains_key(id), "assignment to {id}");
                            assert_eq!(self.g.state, State::Stable);
                        }
                    }
                    for a in more.into_iter().rev() {
                        queue.push_front(a);
                    }
                }
            }
        }
        // A request whose member no longer waits sees its channel closed.
        let dropped: Vec<(String, usize)> = self
            .joins
            .iter()
            .filter(|(id, _)| !self.g.members.get(*id).is_some_and(|m| m.awaiting_join))
            .map(|(id, c)| (id.clone(), *c))
            .collect();
        for (id, c) in dropped {
            self.joins.remove(&id);
            self.joined(c, JoinResult::error(E::UnknownMemberId.code(), ""));
        }
        let dropped: Vec<(String, usize)> = self
            .syncs
            .iter()
            .filter(|(id, _)| !self.g.members.get(*id).is_some_and(|m| m.awaiting_sync))
            .map(|(id, c)| (id.clone(), *c))
            .collect();
        for (id, c) in dropped {
            self.syncs.remove(&id);
            self.synced(c, SyncResult::error(E::UnknownMemberId.code()));
        }
    }

    fn check(&mut self) {
        let g = &self.g;
        assert!(g.generation >= self.generation, "the generation went back");
        self.generation = g.generation;
        match &g.leader {
            Some(l) => assert!(g.members.contains_key(l), "leader {l} is not a member"),
            None => assert!(g.members.is_empty(), "members without a leader"),
        }
        for (inst, id) in &g.statics {
            let m = &g.members[id];
            assert_eq!(m.instance_id.as_deref(), Some(inst.as_str()));
        }
        let instances: HashSet<&String> = g
            .members
            .values()
            .filter_map(|m| m.instance_id.as_ref())
            .collect();
        assert_eq!(
            instances.len(),
            g.statics.len(),
            "a static member without its instance"
        );
        match g.state {
            State::Empty => assert!(g.members.is_empty(), "an Empty group has members"),
            State::Stable | State::CompletingRebalance => {
                for m in g.members.values() {
                    assert!(!m.awaiting_join, "{} waits to join in {:?}", m.id, g.state);
                    assert_eq!(
                        self.told.get(&m.id),
                        Some(&g.generation),
                        "{} is not in generation {} of the {:?} group",
                        m.id,
                        g.generation,
                        g.state
                    );
                }
                if g.state == State::Stable {
                    assert!(g.members.values().all(|m| !m.awaiting_sync));
                }
            }
            State::PreparingRebalance => {}
            State::Dead => panic!("the group died"),
        }
    }
}

#[test]
fn seeded_schedules_keep_the_group_invariants() {
    for seed in seeds() {
        let r = catch_unwind(AssertUnwindSafe(|| {
            let mut w = World::new(seed);
            w.run(400);
        }));
        if let Err(e) = r {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("seed {seed} (SLUICE_SIM_SEED={seed} to replay): {msg}");
        }
    }
}
