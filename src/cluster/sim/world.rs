//! The simulated cluster: nodes, the network and the event loop (see the module doc).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;

use uuid::Uuid;

use crate::cluster::control::active::{AlterIsr, CreateTopic, Heartbeat};
use crate::cluster::control::{ActiveController, ControlConfig, ControlError};
use crate::cluster::metadata::{
    BrokerRegistration, MetadataImage, MetadataRecord, PartitionRecord,
};
use crate::cluster::replication::LeaderState;
use crate::log::leader_epoch::LeaderEpochCache;

pub(super) const CONTROLLER: usize = 0;
pub(super) const PRODUCER: usize = 4;
pub(super) const BROKERS: [usize; 3] = [1, 2, 3];
pub(super) const SESSION_MS: i64 = 3_000;
pub(super) const HEARTBEAT_MS: i64 = 500;
pub(super) const LAG_MAX_MS: i64 = 2_000;
pub(super) const MIN_ISR: usize = 2;
pub(super) const FETCH_RETRY_MS: i64 = 300;
pub(super) const MAX_FETCH_ENTRIES: usize = 8;

/// A tiny seeded generator (splitmix64): the whole run follows from the seed.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub(super) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub(super) fn uuid(&mut self) -> Uuid {
        Uuid::from_u64_pair(self.next(), self.next())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) offset: i64,
    pub(super) epoch: i32,
    pub(super) value: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FetchError {
    NotLeader,
    FencedLeaderEpoch,
    UnknownLeaderEpoch,
}

#[derive(Debug, Clone)]
pub(super) enum Msg {
    Register {
        from: usize,
        incarnation: Uuid,
        /// The incarnation that ran before from the broker's data directory, if known.
        previous_incarnation: Option<Uuid>,
    },
    Registered {
        incarnation: Uuid,
        epoch: u64,
    },
    Heartbeat {
        from: usize,
        epoch: u64,
        offset: u64,
    },
    Metadata(Arc<MetadataImage>),
    /// A client asks for the current metadata (any broker answers; here the controller).
    MetadataRequest {
        from: usize,
    },
    AlterIsr(AlterIsr),
    AlterIsrReply(Result<PartitionRecord, ControlError>),
    EpochQuery {
        from: usize,
        leader_epoch: i32,
        last_epoch: i32,
    },
    EpochAnswer {
        leader_epoch: i32,
        answer: Result<(i32, i64), FetchError>,
    },
    Fetch {
        from: usize,
        leader_epoch: i32,
        offset: i64,
        /// The follower's broker epoch (-1: not registered).
        broker_epoch: i64,
    },
    FetchReply {
        leader_epoch: i32,
        offset: i64,
        result: Result<(Vec<Entry>, i64), FetchError>,
    },
    Produce {
        value: u64,
    },
    ProduceReply {
        value: u64,
        result: Result<i64, ()>,
    },
}

pub(super) enum Event {
    Deliver {
        to: usize,
        generation: u64,
        msg: Msg,
    },
    Tick(usize),
    Fault,
}

pub(super) enum Role {
    None,
    Leader(Box<LeaderState>),
    Follower {
        leader: usize,
        epoch: i32,
        truncated: bool,
        request_sent_at: i64,
    },
}

pub(super) struct Broker {
    pub(super) alive: bool,
    pub(super) generation: u64,
    pub(super) incarnation: Uuid,
    /// The incarnation before this one, if it left its id in the data directory.
    pub(super) previous_incarnation: Option<Uuid>,
    pub(super) broker_epoch: Option<u64>,
    pub(super) log: Vec<Entry>,
    pub(super) epochs: LeaderEpochCache,
    pub(super) hw: i64,
    pub(super) checkpointed_hw: i64,
    pub(super) image: Arc<MetadataImage>,
    pub(super) role: Role,
    /// acks=all produces waiting: (required offset, value, offset).
    pub(super) waiting: Vec<(i64, u64, i64)>,
    /// When the ISR change in flight (if any) was last sent.
    pub(super) alter_sent_at: i64,
}

impl Broker {
    pub(super) fn leo(&self) -> i64 {
        self.log.len() as i64
    }
}

/// Which faults a run injects.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    pub crashes: bool,
    pub link_cuts: bool,
    pub controller_failover: bool,
    pub drop_percent: u64,
}

/// What a run did, for the tests to report.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub acked: usize,
    pub committed: usize,
    pub elections: usize,
    pub crashes: usize,
    pub cuts: usize,
    pub final_isr: Vec<i32>,
}

pub struct World {
    pub(super) rng: Rng,
    pub(super) now: i64,
    pub(super) seq: u64,
    pub(super) queue: BinaryHeap<Reverse<(i64, u64)>>,
    pub(super) events: BTreeMap<u64, Event>,
    pub(super) brokers: Vec<Broker>,
    pub(super) controller: ActiveController,
    pub(super) image: Arc<MetadataImage>,
    pub(super) cut: Vec<(usize, usize)>,
    pub(super) faults: Faults,
    pub(super) topic: Uuid,
    pub(super) producer_view: Arc<MetadataImage>,
    pub(super) next_value: u64,
    pub(super) committed: Vec<Entry>,
    pub(super) acked: Vec<(i64, u64)>,
    pub(super) leaders: BTreeMap<i32, usize>,
    pub(super) outcome: Outcome,
}

fn controller_config() -> ControlConfig {
    ControlConfig {
        session_timeout_ms: SESSION_MS,
        unclean_leader_election: false,
    }
}

impl World {
    /// A cluster of three registered, unfenced brokers with one partition replicated on all.
    pub fn new(seed: u64, faults: Faults) -> World {
        let mut w = World {
            rng: Rng(seed),
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            events: BTreeMap::new(),
            brokers: Vec::new(),
            controller: ActiveController::new(controller_config()),
            image: Arc::new(MetadataImage::default()),
            cut: Vec::new(),
            faults,
            topic: Uuid::nil(),
            producer_view: Arc::new(MetadataImage::default()),
            next_value: 1,
            committed: Vec::new(),
            acked: Vec::new(),
            leaders: BTreeMap::new(),
            outcome: Outcome::default(),
        };
        for id in 0..=BROKERS.len() {
            let incarnation = w.rng.uuid();
            w.brokers.push(Broker {
                alive: id != CONTROLLER,
                generation: 0,
                incarnation,
                previous_incarnation: None,
                broker_epoch: None,
                log: Vec::new(),
                epochs: LeaderEpochCache::default(),
                hw: 0,
                checkpointed_hw: 0,
                image: Arc::new(MetadataImage::default()),
                role: Role::None,
                waiting: Vec::new(),
                alter_sent_at: 0,
            });
        }
        // Bootstrap synchronously: register and unfence everyone, create the topic.
        for &b in &BROKERS {
            let reg = registration(b, w.brokers[b].incarnation);
            let (records, ()) = w
                .controller
                .register(&w.image, reg, None, 0)
                .expect("register");
            w.commit(records);
            let epoch = w.image.brokers[&(b as i32)].epoch;
            w.brokers[b].broker_epoch = Some(epoch);
        }
        for &b in &BROKERS {
            let hb = Heartbeat {
                broker_id: b as i32,
                broker_epoch: w.brokers[b].broker_epoch.unwrap(),
                metadata_offset: w.image.offset,
                want_fence: false,
                want_shutdown: false,
            };
            let (records, _) = w.controller.heartbeat(&w.image, &hb, 0).expect("heartbeat");
            w.commit(records);
        }
        let create = CreateTopic {
            name: "t".into(),
            num_partitions: 1,
            replication_factor: 3,
            assignments: None,
            configs: BTreeMap::new(),
        };
        let (records, id) = w
            .controller
            .create_topic(&w.image, &create, 0)
            .expect("create");
        w.topic = id;
        w.commit(records);
        for &b in &BROKERS {
            w.schedule(1 + b as i64, Event::Tick(b));
        }
        w.schedule(50, Event::Tick(PRODUCER));
        w.schedule(10, Event::Tick(CONTROLLER));
        w.schedule(1_000, Event::Fault);
        w
    }

    pub(super) fn schedule(&mut self, at: i64, e: Event) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq)));
        self.events.insert(self.seq, e);
    }

    pub(super) fn linked(&self, a: usize, b: usize) -> bool {
        !self.cut.contains(&(a.min(b), a.max(b)))
    }

    pub(super) fn send(&mut self, from: usize, to: usize, msg: Msg) {
        if !self.linked(from, to) || self.rng.chance(self.faults.drop_percent) {
            return;
        }
        let delay = 1 + self.rng.below(15) as i64;
        let generation = self.brokers.get(to).map_or(0, |b| b.generation);
        self.schedule(
            self.now + delay,
            Event::Deliver {
                to,
                generation,
                msg,
            },
        );
    }

    /// Commits records to the metadata log and tells every node.
    pub(super) fn commit(&mut self, records: Vec<MetadataRecord>) {
        if records.is_empty() {
            return;
        }
        let mut img = (*self.image).clone();
        for r in &records {
            let next = img.offset + 1;
            img.apply(next, r);
        }
        let img = Arc::new(img);
        self.image = img.clone();
        for to in BROKERS.iter().copied().chain([PRODUCER]) {
            self.send(CONTROLLER, to, Msg::Metadata(img.clone()));
        }
    }

    pub(super) fn partition<'a>(&self, img: &'a MetadataImage) -> Option<&'a PartitionRecord> {
        img.partition(&self.topic, 0)
    }

    /// Runs until `until` (ms of simulated time); panics with the seed's story on a violation.
    pub fn run(&mut self, until: i64) {
        while let Some(Reverse((at, seq))) = self.queue.pop() {
            if at > until {
                self.queue.push(Reverse((at, seq)));
                break;
            }
            self.now = at;
            let e = self.events.remove(&seq).expect("scheduled event");
            match e {
                Event::Deliver {
                    to,
                    generation,
                    msg,
                } => {
                    if to == CONTROLLER || to == PRODUCER || {
                        let b = &self.brokers[to];
                        b.alive && b.generation == generation
                    } {
                        self.deliver(to, msg);
                    }
                }
                Event::Tick(n) => self.tick(n),
                Event::Fault => self.fault(),
            }
        }
        self.now = until;
    }

    /// Ends the faults: every link healed, every broker running; then runs quietly.
    pub fn heal_and_settle(&mut self, quiet_ms: i64) -> Outcome {
        self.faults = Faults {
            crashes: false,
            link_cuts: false,
            controller_failover: false,
            drop_percent: 0,
        };
        self.cut.clear();
        for b in BROKERS {
            if !self.brokers[b].alive {
                self.restart(b);
            }
        }
        let until = self.now + quiet_ms;
        self.run(until);
        let mut o = self.outcome.clone();
        o.acked = self.acked.len();
        o.committed = self.committed.len();
        o.final_isr = self
            .partition(&self.image)
            .map(|p| p.isr.clone())
            .unwrap_or_default();
        o
    }

    pub(super) fn fault(&mut self) {
        let next = self.now + 500 + self.rng.below(2_000) as i64;
        self.schedule(next, Event::Fault);
        let down: Vec<usize> = BROKERS
            .iter()
            .copied()
            .filter(|b| !self.brokers[*b].alive)
            .collect();
        match self.rng.below(6) {
            0 | 1 if self.faults.crashes => {
                if let Some(&b) = down.first() {
                    self.restart(b);
                } else {
                    let b = BROKERS[self.rng.below(3) as usize];
                    self.crash(b);
                }
            }
            2 | 3 if self.faults.link_cuts => {
                if self.cut.is_empty() || self.rng.chance(60) {
                    let a = self.rng.below(4) as usize;
                    let b = 1 + (a + self.rng.below(3) as usize) % 3;
                    if a != b {
                        self.cut.push((a.min(b), a.max(b)));
                        self.outcome.cuts += 1;
                    }
                } else {
                    self.cut.clear();
                }
            }
            4 if self.faults.controller_failover => {
                // A new active controller: same committed log, no session state.
                self.controller = ActiveController::new(controller_config());
            }
            _ => {}
        }
    }

    pub(super) fn crash(&mut self, b: usize) {
        self.outcome.crashes += 1;
        let br = &mut self.brokers[b];
        br.alive = false;
        br.generation += 1;
        br.role = Role::None;
        br.waiting.clear();
        br.image = Arc::new(MetadataImage::default());
        br.broker_epoch = None;
        // The log survives (page cache); the high watermark is what was last checkpointed.
        br.hw = br.checkpointed_hw;
    }

    /// Restarts a crashed broker as a new incarnation which, half the time, knows the one
    /// before it (its id survived in the data directory).
    pub(super) fn restart(&mut self, b: usize) {
        let proof = self.rng.chance(50);
        self.restart_with(b, proof);
    }

    /// Restarts a crashed broker; `proof`: it registers naming the incarnation before it.
    pub(super) fn restart_with(&mut self, b: usize, proof: bool) {
        let incarnation = self.rng.uuid();
        let br = &mut self.brokers[b];
        br.alive = true;
        br.generation += 1;
        br.previous_incarnation = proof.then_some(br.incarnation);
        br.incarnation = incarnation;
        self.schedule(self.now + 1, Event::Tick(b));
    }

    pub(super) fn tick(&mut self, n: usize) {
        match n {
            CONTROLLER => {
                self.schedule(self.now + 100, Event::Tick(CONTROLLER));
                let records = self.controller.tick(&self.image, self.now);
                self.commit(records);
            }
            PRODUCER => {
                self.schedule(self.now + 20, Event::Tick(PRODUCER));
                if self.now % 500 < 20 {
                    self.send(
                        PRODUCER,
                        CONTROLLER,
                        Msg::MetadataRequest { from: PRODUCER },
                    );
                }
                if let Some(p) = self.partition(&self.producer_view)
                    && p.leader > 0
                {
                    let value = self.next_value;
                    self.next_value += 1;
                    self.send(PRODUCER, p.leader as usize, Msg::Produce { value });
                }
            }
            b => {
                if !self.brokers[b].alive {
                    return;
                }
                self.schedule(self.now + HEARTBEAT_MS / 5, Event::Tick(b));
                self.broker_tick(b);
            }
        }
    }

    pub(super) fn deliver(&mut self, to: usize, msg: Msg) {
        if std::env::var("SLUICE_SIM_TRACE").is_ok() {
            eprintln!("{:>6} -> {to}: {msg:?}", self.now);
        }
        match msg {
            Msg::Register {
                from,
                incarnation,
                previous_incarnation,
            } => {
                let reg = registration(from, incarnation);
                if let Ok((records, ())) =
                    self.controller
                        .register(&self.image, reg, previous_incarnation, self.now)
                {
                    self.commit(records);
                    let epoch = self.image.brokers[&(from as i32)].epoch;
                    self.send(CONTROLLER, from, Msg::Registered { incarnation, epoch });
                }
            }
            Msg::Registered { incarnation, epoch } => {
                let br = &mut self.brokers[to];
                if br.incarnation == incarnation {
                    br.broker_epoch = br.broker_epoch.max(Some(epoch));
                }
            }
            Msg::Heartbeat {
                from,
                epoch,
                offset,
            } => {
                let hb = Heartbeat {
                    broker_id: from as i32,
                    broker_epoch: epoch,
                    metadata_offset: offset,
                    want_fence: false,
                    want_shutdown: false,
                };
                if let Ok((records, _)) = self.controller.heartbeat(&self.image, &hb, self.now) {
                    self.commit(records);
                }
                // The heartbeat answer carries the metadata the broker lacks.
                let img = self.image.clone();
                self.send(CONTROLLER, from, Msg::Metadata(img));
            }
            Msg::MetadataRequest { from } => {
                let img = self.image.clone();
                self.send(CONTROLLER, from, Msg::Metadata(img));
            }
            Msg::Metadata(img) => {
                if to == PRODUCER {
                    if img.offset > self.producer_view.offset {
                        self.producer_view = img;
                    }
                } else {
                    self.apply_metadata(to, img);
                }
            }
            Msg::AlterIsr(req) => {
                let from = req.broker_id as usize;
                let result =
                    self.controller
                        .alter_isr(&self.image, &req)
                        .map(|(records, after)| {
                            self.commit(records);
                            after
                        });
                self.send(CONTROLLER, from, Msg::AlterIsrReply(result));
            }
            Msg::AlterIsrReply(result) => self.on_alter_reply(to, result),
            Msg::EpochQuery {
                from,
                leader_epoch,
                last_epoch,
            } => {
                let answer = self.check_leader(to, leader_epoch).map(|()| {
                    let br = &self.brokers[to];
                    br.epochs.end_offset_for(last_epoch, br.leo())
                });
                self.send(
                    to,
                    from,
                    Msg::EpochAnswer {
                        leader_epoch,
                        answer,
                    },
                );
            }
            Msg::EpochAnswer {
                leader_epoch,
                answer,
            } => self.on_epoch_answer(to, leader_epoch, answer),
            Msg::Fetch {
                from,
                leader_epoch,
                offset,
                broker_epoch,
            } => self.on_fetch(to, from, leader_epoch, (offset, broker_epoch)),
            Msg::FetchReply {
                leader_epoch,
                offset,
                result,
            } => self.on_fetch_reply(to, leader_epoch, offset, result),
            Msg::Produce { value } => self.on_produce(to, value),
            Msg::ProduceReply { value, result } => {
                if let Ok(offset) = result {
                    let c = self.committed.get(offset as usize);
                    assert_eq!(
                        c.map(|e| e.value),
                        Some(value),
                        "acked record {value} at offset {offset} is not committed there"
                    );
                    self.acked.push((offset, value));
                }
            }
        }
    }
}

fn registration(b: usize, incarnation: Uuid) -> BrokerRegistration {
    BrokerRegistration {
        broker_id: b as i32,
        incarnation,
        endpoints: Vec::new(),
        rack: None,
    }
}
