//! The brokers' side of the simulated cluster: a partition replica as leader (fetches
//! served, ISR changes asked for, acks=all answered) and as follower (truncation, fetching).

use std::sync::Arc;

use super::world::*;
use crate::cluster::control::ControlError;
use crate::cluster::control::active::AlterIsr;
use crate::cluster::metadata::{MetadataImage, PartitionRecord};
use crate::cluster::replication::follower::truncation_offset;
use crate::cluster::replication::{AckStatus, LeaderState};

impl World {
    pub(super) fn broker_tick(&mut self, b: usize) {
        let now = self.now;
        let br = &mut self.brokers[b];
        br.checkpointed_hw = br.hw;
        if br.broker_epoch.is_none() {
            let (incarnation, previous_incarnation) = (br.incarnation, br.previous_incarnation);
            self.send(
                b,
                CONTROLLER,
                Msg::Register {
                    from: b,
                    incarnation,
                    previous_incarnation,
                },
            );
        }
        let br = &mut self.brokers[b];
        if let Some(epoch) = br.broker_epoch
            && now % HEARTBEAT_MS < HEARTBEAT_MS / 5
        {
            let offset = br.image.offset;
            self.send(
                b,
                CONTROLLER,
                Msg::Heartbeat {
                    from: b,
                    epoch,
                    offset,
                },
            );
        }
        let br = &mut self.brokers[b];
        match &mut br.role {
            Role::Leader(ls) => {
                // One ISR change at a time; a change whose answer was lost is sent again.
                let resend = ls
                    .pending_isr()
                    .filter(|_| now - br.alter_sent_at >= FETCH_RETRY_MS)
                    .map(<[i32]>::to_vec);
                if let Some(isr) = resend.or_else(|| ls.check_lagging(now, LAG_MAX_MS)) {
                    self.send_alter_isr(b, isr);
                }
            }
            Role::Follower {
                request_sent_at, ..
            } => {
                if now - *request_sent_at >= FETCH_RETRY_MS {
                    self.send_follower_request(b);
                }
            }
            Role::None => {}
        }
    }

    pub(super) fn send_alter_isr(&mut self, b: usize, isr: Vec<i32>) {
        let br = &mut self.brokers[b];
        let (Role::Leader(ls), Some(broker_epoch)) = (&br.role, br.broker_epoch) else {
            return;
        };
        let req = AlterIsr {
            broker_id: b as i32,
            broker_epoch,
            topic_id: self.topic,
            partition: 0,
            leader_epoch: ls.leader_epoch,
            partition_epoch: ls.partition_epoch,
            new_isr_epochs: ls.member_epochs(&isr, broker_epoch as i64),
            new_isr: isr,
        };
        br.alter_sent_at = self.now;
        self.send(b, CONTROLLER, Msg::AlterIsr(req));
    }

    pub(super) fn send_follower_request(&mut self, b: usize) {
        let now = self.now;
        let br = &mut self.brokers[b];
        let Role::Follower {
            leader,
            epoch,
            truncated,
            request_sent_at,
        } = &mut br.role
        else {
            return;
        };
        *request_sent_at = now;
        let (leader, leader_epoch) = (*leader, *epoch);
        let msg = if *truncated {
            Msg::Fetch {
                from: b,
                leader_epoch,
                offset: br.leo(),
                broker_epoch: br.broker_epoch.map_or(-1, |e| e as i64),
            }
        } else {
            Msg::EpochQuery {
                from: b,
                leader_epoch,
                last_epoch: br.epochs.latest_epoch().unwrap_or(-1),
            }
        };
        self.send(b, leader, msg);
    }

    pub(super) fn check_leader(&self, b: usize, leader_epoch: i32) -> Result<(), FetchError> {
        match &self.brokers[b].role {
            Role::Leader(ls) if ls.leader_epoch == leader_epoch => Ok(()),
            Role::Leader(ls) if ls.leader_epoch > leader_epoch => {
                Err(FetchError::FencedLeaderEpoch)
            }
            Role::Leader(_) => Err(FetchError::UnknownLeaderEpoch),
            _ => Err(FetchError::NotLeader),
        }
    }

    pub(super) fn apply_metadata(&mut self, b: usize, img: Arc<MetadataImage>) {
        let br = &mut self.brokers[b];
        if img.offset <= br.image.offset {
            return;
        }
        br.image = img.clone();
        if let Some(reg) = img.brokers.get(&(b as i32))
            && reg.registration.incarnation == br.incarnation
        {
            br.broker_epoch = Some(reg.epoch);
        }
        // Until it has seen its own registration, a restarted broker leads nothing; as
        // Sluice's brokers do, it follows meanwhile, fetching with broker epoch -1.
        let registered = br.broker_epoch.is_some_and(|e| img.offset >= e);
        let Some(p) = img.partition(&self.topic, 0).cloned() else {
            return;
        };
        let me = b as i32;
        let current_epoch = match &br.role {
            Role::Leader(ls) => Some(ls.leader_epoch),
            Role::Follower { epoch, .. } => Some(*epoch),
            Role::None => None,
        };
        if current_epoch.is_some_and(|e| p.leader_epoch < e) {
            return;
        }
        if current_epoch == Some(p.leader_epoch) {
            let leo = br.leo();
            if let Role::Leader(ls) = &mut br.role
                && p.partition_epoch > ls.partition_epoch
            {
                ls.on_committed(&p, leo);
                self.after_leader_progress(b);
            }
            return;
        }
        // A new leader epoch.
        let br = &mut self.brokers[b];
        for (_, value, _) in std::mem::take(&mut br.waiting) {
            self.send(
                b,
                PRODUCER,
                Msg::ProduceReply {
                    value,
                    result: Err(()),
                },
            );
        }
        let br = &mut self.brokers[b];
        if p.leader == me {
            if registered {
                self.become_leader(b, &p);
            } else {
                br.role = Role::None;
            }
        } else if p.leader > 0 && p.replicas.contains(&me) {
            br.role = Role::Follower {
                leader: p.leader as usize,
                epoch: p.leader_epoch,
                truncated: false,
                request_sent_at: self.now,
            };
            self.send_follower_request(b);
        } else {
            br.role = Role::None;
        }
    }

    pub(super) fn become_leader(&mut self, b: usize, p: &PartitionRecord) {
        if let Some(prev) = self.leaders.insert(p.leader_epoch, b) {
            assert_eq!(prev, b, "two leaders in leader epoch {}", p.leader_epoch);
        }
        self.outcome.elections += 1;
        let br = &mut self.brokers[b];
        // A clean election: the new leader holds everything committed.
        for c in &self.committed {
            assert_eq!(
                br.log.get(c.offset as usize),
                Some(c),
                "broker {b} leads epoch {} without committed offset {}",
                p.leader_epoch,
                c.offset
            );
        }
        let leo = br.leo();
        br.epochs.assign(p.leader_epoch, leo);
        let mut ls = LeaderState::new(b as i32, p, leo, br.hw, self.now);
        ls.set_min_insync_replicas(MIN_ISR);
        br.role = Role::Leader(Box::new(ls));
        self.after_leader_progress(b);
    }

    pub(super) fn on_alter_reply(
        &mut self,
        b: usize,
        result: Result<PartitionRecord, ControlError>,
    ) {
        let br = &mut self.brokers[b];
        let leo = br.leo();
        let Role::Leader(ls) = &mut br.role else {
            return;
        };
        match result {
            Ok(p) if p.leader == b as i32 && p.leader_epoch == ls.leader_epoch => {
                if p.partition_epoch > ls.partition_epoch {
                    ls.on_committed(&p, leo);
                }
            }
            Ok(_) => {}
            Err(_) => ls.on_refused(),
        }
        self.after_leader_progress(b);
    }

    pub(super) fn on_epoch_answer(
        &mut self,
        b: usize,
        leader_epoch: i32,
        answer: Result<(i32, i64), FetchError>,
    ) {
        let br = &mut self.brokers[b];
        let leo = br.leo();
        let Role::Follower {
            epoch, truncated, ..
        } = &mut br.role
        else {
            return;
        };
        if *epoch != leader_epoch || *truncated {
            return;
        }
        let Ok((e, end)) = answer else { return };
        let to = truncation_offset(&br.epochs, leo, br.hw, e, end);
        assert!(
            to >= br.hw,
            "broker {b} truncates to {to}, below its high watermark {}",
            br.hw
        );
        br.log.truncate(to as usize);
        br.epochs.truncate_from_end(to);
        *truncated = true;
        self.send_follower_request(b);
    }

    pub(super) fn on_fetch(
        &mut self,
        leader: usize,
        from: usize,
        leader_epoch: i32,
        (offset, broker_epoch): (i64, i64),
    ) {
        if let Err(e) = self.check_leader(leader, leader_epoch) {
            self.send(
                leader,
                from,
                Msg::FetchReply {
                    leader_epoch,
                    offset,
                    result: Err(e),
                },
            );
            return;
        }
        let now = self.now;
        let br = &mut self.brokers[leader];
        let leo = br.leo();
        let offset_in_range = offset.clamp(0, leo);
        let Role::Leader(ls) = &mut br.role else {
            return;
        };
        let (_, expand) =
            ls.on_follower_fetch(from as i32, offset_in_range, broker_epoch, leo, now);
        let entries: Vec<Entry> = br
            .log
            .iter()
            .skip(offset_in_range as usize)
            .take(MAX_FETCH_ENTRIES)
            .copied()
            .collect();
        self.after_leader_progress(leader);
        let hw = self.brokers[leader].hw;
        self.send(
            leader,
            from,
            Msg::FetchReply {
                leader_epoch,
                offset,
                result: Ok((entries, hw)),
            },
        );
        if let Some(isr) = expand {
            self.send_alter_isr(leader, isr);
        }
    }

    pub(super) fn on_fetch_reply(
        &mut self,
        b: usize,
        leader_epoch: i32,
        offset: i64,
        result: Result<(Vec<Entry>, i64), FetchError>,
    ) {
        let br = &mut self.brokers[b];
        let Role::Follower {
            epoch, truncated, ..
        } = &br.role
        else {
            return;
        };
        if *epoch != leader_epoch || !*truncated || offset != br.leo() {
            return;
        }
        let Ok((entries, leader_hw)) = result else {
            return;
        };
        for e in entries {
            assert_eq!(e.offset, br.leo(), "fetched entries follow the log end");
            br.epochs.assign(e.epoch, e.offset);
            br.log.push(e);
        }
        let hw = leader_hw.min(br.leo()).max(br.hw);
        let caught_up = br.leo() == offset;
        self.raise_hw(b, hw);
        if caught_up {
            // Nothing new: the next fetch goes out on a later tick (a long poll's wait).
            if let Role::Follower {
                request_sent_at, ..
            } = &mut self.brokers[b].role
            {
                *request_sent_at = self.now - FETCH_RETRY_MS + 50;
            }
        } else {
            self.send_follower_request(b);
        }
    }

    pub(super) fn on_produce(&mut self, b: usize, value: u64) {
        let br = &mut self.brokers[b];
        let epoch = match &br.role {
            Role::Leader(ls) if ls.enough_replicas() => ls.leader_epoch,
            _ => {
                self.send(
                    b,
                    PRODUCER,
                    Msg::ProduceReply {
                        value,
                        result: Err(()),
                    },
                );
                return;
            }
        };
        let offset = br.leo();
        br.log.push(Entry {
            offset,
            epoch,
            value,
        });
        br.waiting.push((offset + 1, value, offset));
        if let Role::Leader(ls) = &mut br.role {
            ls.on_local_append(offset + 1);
        }
        self.after_leader_progress(b);
    }

    /// After a leader's state moved: publish its high watermark, answer acks=all produces.
    pub(super) fn after_leader_progress(&mut self, b: usize) {
        let br = &mut self.brokers[b];
        let leo = br.leo();
        let Role::Leader(ls) = &mut br.role else {
            return;
        };
        ls.on_local_append(leo);
        let hw = ls.high_watermark();
        let mut replies = Vec::new();
        br.waiting
            .retain(|&(required, value, offset)| match ls.ack_status(required) {
                AckStatus::Waiting => true,
                AckStatus::Done => {
                    replies.push((value, Ok(offset)));
                    false
                }
                AckStatus::NotEnoughReplicasAfterAppend => {
                    replies.push((value, Err(())));
                    false
                }
            });
        self.raise_hw(b, hw);
        for (value, result) in replies {
            self.send(b, PRODUCER, Msg::ProduceReply { value, result });
        }
    }

    /// Sets a broker's high watermark (never lower) and checks its log below it against the
    /// committed sequence, extending that sequence.
    pub(super) fn raise_hw(&mut self, b: usize, hw: i64) {
        let br = &mut self.brokers[b];
        if hw <= br.hw {
            return;
        }
        br.hw = hw;
        for o in 0..hw as usize {
            let mine = br.log[o];
            match self.committed.get(o) {
                Some(c) => assert_eq!(
                    *c, mine,
                    "broker {b} disagrees below its high watermark at {o}"
                ),
                None => self.committed.push(mine),
            }
        }
    }
}
