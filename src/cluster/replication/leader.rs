//! What a partition leader decides about its followers, as Kafka's `Partition` does: each
//! follower's log end offset and last caught-up time (learnt from its fetches), the ISR changes
//! to ask the controller for, the high watermark, and when an acks=all produce may be answered.
//!
//! - A follower is caught up at the time of a fetch if it fetched from the leader's log end
//!   offset, or from the log end offset the leader had at its previous fetch (then it was
//!   caught up at that previous fetch).
//! - An ISR member not caught up for `replica.lag.time.max.ms` is dropped; a follower outside
//!   the ISR whose log end offset reaches the high watermark and the start of the current
//!   leader epoch is added. One change is in flight at a time; the high watermark is computed
//!   over the committed ISR plus the members of the change in flight (the "maximal" ISR), so
//!   it never counts on a replica the controller might still hold in the ISR.
//! - high watermark = min log end offset over the maximal ISR; it never goes back, and it
//!   does not move while the committed ISR is smaller than the effective min.insync.replicas
//!   (Kafka 4's rule: an under-min-ISR partition accepts acks=1 writes but exposes none).
//! - The effective min.insync.replicas is the configured one, but never more than the replicas
//!   assigned (Kafka's `effectiveMinIsr`): a topic with a replication factor of 1 and
//!   min.insync.replicas=2 takes acks=all writes.
//!
//! Pure: the partition feeds it events with the time and carries out what it returns.

use std::collections::BTreeMap;

use super::super::metadata::PartitionRecord;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub log_end_offset: i64,
    pub last_caught_up_ms: i64,
    pub last_fetch_ms: i64,
    /// The leader's log end offset when this follower last fetched.
    last_fetch_leader_leo: i64,
    /// The follower's log start offset, as its last fetch said (-1: not known yet).
    pub log_start_offset: i64,
    /// The broker epoch its last fetch carried: its registration's (-1: not known yet, or
    /// a process whose registration the controller has not accepted).
    pub broker_epoch: i64,
}

impl Progress {
    /// A follower not heard from, caught up at `last_caught_up_ms` (-1: never).
    fn unknown(last_caught_up_ms: i64) -> Progress {
        Progress {
            log_end_offset: -1,
            last_caught_up_ms,
            last_fetch_ms: -1,
            last_fetch_leader_leo: -1,
            log_start_offset: -1,
            broker_epoch: -1,
        }
    }
}

/// When an acks=all produce whose last offset is `required - 1` may be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckStatus {
    Waiting,
    Done,
    /// The batch reached every ISR member, but the ISR shrank below min.insync.replicas.
    NotEnoughReplicasAfterAppend,
}

#[derive(Debug, Clone)]
pub struct LeaderState {
    pub local: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    /// The ISR as committed in the metadata.
    pub isr: Vec<i32>,
    /// An ISR change sent to the controller and not yet committed or refused.
    pending: Option<Vec<i32>>,
    /// First offset of the current leader epoch.
    epoch_start_offset: i64,
    followers: BTreeMap<i32, Progress>,
    high_watermark: i64,
    /// min.insync.replicas as configured (1 until set).
    min_isr: usize,
}

impl LeaderState {
    /// Becoming leader at `p`'s epoch with the local log ending at `leo`, and the high
    /// watermark last known `hw`. ISR members count as caught up now (they were, as far as
    /// the controller knows), others not.
    pub fn new(local: i32, p: &PartitionRecord, leo: i64, hw: i64, now: i64) -> LeaderState {
        let followers = p
            .replicas
            .iter()
            .filter(|r| **r != local)
            .map(|r| {
                let caught_up = if p.isr.contains(r) { now } else { -1 };
                (*r, Progress::unknown(caught_up))
            })
            .collect();
        LeaderState {
            local,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            replicas: p.replicas.clone(),
            isr: p.isr.clone(),
            pending: None,
            epoch_start_offset: leo,
            followers,
            high_watermark: hw.min(leo),
            min_isr: 1,
        }
    }

    /// Sets min.insync.replicas (the topic's, or the broker default).
    pub fn set_min_insync_replicas(&mut self, n: usize) {
        self.min_isr = n.max(1);
    }

    /// min.insync.replicas, capped at the number of assigned replicas.
    pub fn effective_min_isr(&self) -> usize {
        self.min_isr.min(self.replicas.len()).max(1)
    }

    /// The committed ISR is smaller than the effective min.insync.replicas.
    pub fn is_under_min_isr(&self) -> bool {
        self.isr.len() < self.effective_min_isr()
    }

    /// Whether `replica` is one of this partition's followers (an assigned replica, not us).
    pub fn is_follower(&self, replica: i32) -> bool {
        self.followers.contains_key(&replica)
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    pub fn pending_isr(&self) -> Option<&[i32]> {
        self.pending.as_deref()
    }

    pub fn progress(&self, follower: i32) -> Option<&Progress> {
        self.followers.get(&follower)
    }

    fn maximal_isr(&self) -> Vec<i32> {
        let mut m = self.isr.clone();
        if let Some(p) = &self.pending {
            for r in p {
                if !m.contains(r) {
                    m.push(*r);
                }
            }
        }
        m
    }

    /// Recomputes the high watermark; true if it advanced.
    fn update_high_watermark(&mut self, leader_leo: i64) -> bool {
        if self.is_under_min_isr() {
            return false;
        }
        let hw = self
            .maximal_isr()
            .iter()
            .map(|r| {
                if *r == self.local {
                    leader_leo
                } else {
                    self.followers.get(r).map_or(-1, |p| p.log_end_offset)
                }
            })
            .min()
            .unwrap_or(leader_leo);
        if hw > self.high_watermark {
            self.high_watermark = hw;
            true
        } else {
            false
        }
    }

    /// The local log grew (or was written): true if the high watermark advanced.
    pub fn on_local_append(&mut self, leader_leo: i64) -> bool {
        self.update_high_watermark(leader_leo)
    }

    /// A follower fetched from `fetch_offset`, so its log ends there, with `broker_epoch`
    /// (its registration's; -1 before the controller accepted one). Returns whether the high
    /// watermark advanced and an ISR change to propose, if any: an expansion once it caught up
    /// (only with a known broker epoch: the controller checks it is the registered one), or,
    /// for a member whose broker epoch changed, a shrink without it, since that is a new
    /// process whose log may have lost what the old one had. Fetches from replicas that are
    /// not assigned here are ignored.
    pub fn on_follower_fetch(
        &mut self,
        follower: i32,
        fetch_offset: i64,
        broker_epoch: i64,
        leader_leo: i64,
        now: i64,
    ) -> (bool, Option<Vec<i32>>) {
        let Some(p) = self.followers.get_mut(&follower) else {
            return (false, None);
        };
        let restarted = p.broker_epoch >= 0 && p.broker_epoch != broker_epoch;
        if restarted {
            // Caught up as of now only by what this process fetches from here on.
            p.last_caught_up_ms = -1;
            p.last_fetch_ms = -1;
        }
        p.broker_epoch = broker_epoch;
        if fetch_offset >= leader_leo {
            p.last_caught_up_ms = p.last_caught_up_ms.max(now);
        } else if fetch_offset >= p.last_fetch_leader_leo && p.last_fetch_ms >= 0 {
            p.last_caught_up_ms = p.last_caught_up_ms.max(p.last_fetch_ms);
        }
        p.log_end_offset = fetch_offset.min(leader_leo);
        p.last_fetch_leader_leo = leader_leo;
        p.last_fetch_ms = now;
        let leo = p.log_end_offset;
        let advanced = self.update_high_watermark(leader_leo);
        if self.pending.is_some() {
            return (advanced, None);
        }
        let change = if self.isr.contains(&follower) {
            restarted.then(|| {
                self.isr
                    .iter()
                    .copied()
                    .filter(|r| *r != follower)
                    .collect::<Vec<i32>>()
            })
        } else {
            (broker_epoch >= 0 && leo >= self.high_watermark && leo >= self.epoch_start_offset)
                .then(|| {
                    let mut isr = self.isr.clone();
                    isr.push(follower);
                    isr
                })
        };
        if let Some(isr) = &change {
            self.pending = Some(isr.clone());
        }
        (advanced, change)
    }

    /// The broker epoch of each of `members` as this leader knows it (`local_epoch` for
    /// itself; -1 for a follower not heard from), in order: what AlterPartition carries.
    pub fn member_epochs(&self, members: &[i32], local_epoch: i64) -> Vec<i64> {
        members
            .iter()
            .map(|r| {
                if *r == self.local {
                    local_epoch
                } else {
                    self.followers.get(r).map_or(-1, |p| p.broker_epoch)
                }
            })
            .collect()
    }

    /// A follower's fetch carried its log start offset (negative: not sent). Returns whether
    /// it moved, which may move the low watermark.
    pub fn on_follower_log_start(&mut self, follower: i32, log_start_offset: i64) -> bool {
        match self.followers.get_mut(&follower) {
            Some(p) if log_start_offset >= 0 && p.log_start_offset != log_start_offset => {
                p.log_start_offset = log_start_offset;
                true
            }
            _ => false,
        }
    }

    /// The low watermark (Kafka's `lowWatermarkIfLeader`): the smallest log start offset over
    /// this leader (`leader_log_start`) and the followers of the maximal ISR, the replicas
    /// the leader knows to be alive; a member not heard from yet counts as -1. A DeleteRecords
    /// is complete once it reaches the requested offset. (Kafka counts every replica on a live
    /// broker; a follower out of the ISR learns the new start when it catches up.)
    pub fn low_watermark(&self, leader_log_start: i64) -> i64 {
        self.maximal_isr()
            .iter()
            .filter(|r| **r != self.local)
            .map(|r| self.followers.get(r).map_or(-1, |p| p.log_start_offset))
            .fold(leader_log_start, i64::min)
    }

    /// Time passed: the ISR shrink to propose, if members fell behind for `lag_max_ms`.
    pub fn check_lagging(&mut self, now: i64, lag_max_ms: i64) -> Option<Vec<i32>> {
        if self.pending.is_some() {
            return None;
        }
        let lagging: Vec<i32> = self
            .isr
            .iter()
            .copied()
            .filter(|r| *r != self.local)
            .filter(|r| {
                self.followers
                    .get(r)
                    .is_none_or(|p| now - p.last_caught_up_ms > lag_max_ms)
            })
            .collect();
        if lagging.is_empty() {
            return None;
        }
        let isr: Vec<i32> = self
            .isr
            .iter()
            .copied()
            .filter(|r| !lagging.contains(r))
            .collect();
        self.pending = Some(isr.clone());
        Some(isr)
    }

    /// The controller committed a change to this partition (ours or its own) while we still
    /// lead at the same leader epoch.
    pub fn on_committed(&mut self, p: &PartitionRecord, leader_leo: i64) -> bool {
        self.partition_epoch = p.partition_epoch;
        self.isr = p.isr.clone();
        for r in &p.replicas {
            if *r != self.local && !self.followers.contains_key(r) {
                self.followers.insert(*r, Progress::unknown(-1));
            }
        }
        self.followers.retain(|r, _| p.replicas.contains(r));
        self.replicas = p.replicas.clone();
        self.pending = None;
        self.update_high_watermark(leader_leo)
    }

    /// The controller refused the change in flight (a stale epoch, an ineligible replica).
    pub fn on_refused(&mut self) {
        self.pending = None;
    }

    /// Before an acks=all append: may it be written at all? (NOT_ENOUGH_REPLICAS if not.)
    pub fn enough_replicas(&self) -> bool {
        !self.is_under_min_isr()
    }

    /// Whether an acks=all produce ending before offset `required` may be answered.
    pub fn ack_status(&self, required: i64) -> AckStatus {
        if self.high_watermark < required {
            AckStatus::Waiting
        } else if self.maximal_isr().len() >= self.effective_min_isr() {
            AckStatus::Done
        } else {
            AckStatus::NotEnoughReplicasAfterAppend
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The broker epoch the followers of these tests fetch with.
    const FOLLOWER_EPOCH: i64 = 5;

    fn part(replicas: &[i32], isr: &[i32]) -> PartitionRecord {
        PartitionRecord {
            leader_epoch: 3,
            partition_epoch: 10,
            ..PartitionRecord::for_test(replicas, isr, 1)
        }
    }

    #[test]
    fn low_watermark_is_min_log_start_over_leader_and_isr() {
        let mut l = LeaderState::new(1, &part(&[1, 2, 3], &[1, 2]), 0, 0, 0);
        // Follower 2 is in the ISR and not heard from yet.
        assert_eq!(l.low_watermark(50), -1);
        assert!(l.on_follower_log_start(2, 20));
        assert!(!l.on_follower_log_start(2, 20));
        assert!(!l.on_follower_log_start(2, -1), "not sent");
        assert_eq!(l.low_watermark(50), 20);
        // Follower 3 is out of the ISR: not counted.
        l.on_follower_log_start(3, 0);
        assert_eq!(l.low_watermark(50), 20);
        l.on_follower_log_start(2, 50);
        assert_eq!(l.low_watermark(50), 50);
        assert_eq!(l.low_watermark(40), 40);
        // Alone in its ISR the leader's own start is the low watermark.
        let alone = LeaderState::new(1, &part(&[1], &[1]), 0, 0, 0);
        assert_eq!(alone.low_watermark(7), 7);
    }

    #[test]
    fn high_watermark_is_min_over_isr_and_never_goes_back() {
        let mut l = LeaderState::new(1, &part(&[1, 2, 3], &[1, 2, 3]), 0, 0, 0);
        assert!(!l.on_local_append(10));
        assert_eq!(
            l.on_follower_fetch(2, 10, FOLLOWER_EPOCH, 10, 1),
            (false, None)
        );
        assert_eq!(l.high_watermark(), 0);
        assert_eq!(
            l.on_follower_fetch(3, 6, FOLLOWER_EPOCH, 10, 1),
            (true, None)
        );
        assert_eq!(l.high_watermark(), 6);
        // A follower that truncated and fetches from lower does not move it back.
        l.on_follower_fetch(3, 2, FOLLOWER_EPOCH, 10, 2);
        assert_eq!(l.high_watermark(), 6);
        l.set_min_insync_replicas(2);
        assert_eq!(l.ack_status(7), AckStatus::Waiting);
        assert_eq!(l.ack_status(6), AckStatus::Done);
        // Both followers drop out of the ISR after the batch reached them: answered, but
        // NOT_ENOUGH_REPLICAS_AFTER_APPEND.
        let mut shrunk = part(&[1, 2, 3], &[1]);
        shrunk.partition_epoch = 11;
        l.on_committed(&shrunk, 10);
        assert_eq!(l.ack_status(6), AckStatus::NotEnoughReplicasAfterAppend);
        assert!(!l.enough_replicas());
    }

    #[test]
    fn min_isr_is_capped_at_the_replication_factor() {
        let mut l = LeaderState::new(1, &part(&[1], &[1]), 0, 0, 0);
        l.set_min_insync_replicas(2);
        assert_eq!(l.effective_min_isr(), 1);
        assert!(l.enough_replicas());
        assert!(l.on_local_append(5));
        assert_eq!(l.ack_status(5), AckStatus::Done);
    }

    #[test]
    fn under_min_isr_the_high_watermark_stays() {
        let mut l = LeaderState::new(1, &part(&[1, 2], &[1]), 4, 4, 0);
        l.set_min_insync_replicas(2);
        assert!(!l.enough_replicas());
        assert!(!l.on_local_append(10), "acks=1 writes are not exposed");
        assert_eq!(l.high_watermark(), 4);
        // 2 catches up and is proposed; the high watermark waits for the commit.
        let (advanced, expand) = l.on_follower_fetch(2, 10, FOLLOWER_EPOCH, 10, 1);
        assert!(!advanced);
        assert_eq!(expand, Some(vec![1, 2]));
        let mut grown = part(&[1, 2], &[1, 2]);
        grown.partition_epoch = 11;
        assert!(l.on_committed(&grown, 10));
        assert_eq!(l.high_watermark(), 10);
        assert!(l.enough_replicas());
    }

    #[test]
    fn only_assigned_followers_count() {
        let mut l = LeaderState::new(1, &part(&[1, 2], &[1, 2]), 0, 0, 0);
        assert!(l.is_follower(2));
        assert!(!l.is_follower(1), "the leader is not its own follower");
        assert!(!l.is_follower(7));
        assert_eq!(
            l.on_follower_fetch(7, 0, FOLLOWER_EPOCH, 0, 1),
            (false, None)
        );
        assert_eq!(l.progress(7), None);
    }

    #[test]
    fn lagging_follower_is_dropped_and_rejoins_when_caught_up() {
        let mut l = LeaderState::new(1, &part(&[1, 2, 3], &[1, 2, 3]), 100, 100, 0);
        l.on_local_append(200);
        // 2 keeps up, 3 does not fetch at all.
        for t in [1000, 20_000, 29_000] {
            l.on_follower_fetch(2, 200, FOLLOWER_EPOCH, 200, t);
        }
        assert_eq!(l.check_lagging(29_000, 30_000), None);
        let shrink = l.check_lagging(30_001, 30_000).unwrap();
        assert_eq!(shrink, vec![1, 2]);
        // While the change is in flight, 3 still counts for the high watermark.
        assert_eq!(l.high_watermark(), 100);
        assert_eq!(
            l.check_lagging(40_000, 30_000),
            None,
            "one change at a time"
        );
        let mut committed = part(&[1, 2, 3], &[1, 2]);
        committed.partition_epoch = 11;
        assert!(l.on_committed(&committed, 200));
        assert_eq!(l.high_watermark(), 200);
        // 3 comes back behind the high watermark: not yet.
        assert_eq!(
            l.on_follower_fetch(3, 150, FOLLOWER_EPOCH, 200, 41_000).1,
            None
        );
        let (_, expand) = l.on_follower_fetch(3, 200, FOLLOWER_EPOCH, 200, 41_500);
        assert_eq!(expand, Some(vec![1, 2, 3]));
        assert_eq!(l.pending_isr(), Some(&[1, 2, 3][..]));
        l.on_refused();
        assert_eq!(l.pending_isr(), None);
    }

    #[test]
    fn caught_up_at_the_previous_fetch() {
        let mut l = LeaderState::new(1, &part(&[1, 2], &[1]), 0, 0, 0);
        l.on_local_append(50);
        l.on_follower_fetch(2, 0, FOLLOWER_EPOCH, 50, 1_000);
        assert_eq!(l.progress(2).unwrap().last_caught_up_ms, -1);
        // Fetches from where the leader ended at the previous fetch, while the leader grew:
        // caught up as of that previous fetch.
        l.on_follower_fetch(2, 50, FOLLOWER_EPOCH, 80, 2_000);
        assert_eq!(l.progress(2).unwrap().last_caught_up_ms, 1_000);
    }

    #[test]
    fn new_followers_must_reach_the_epoch_start() {
        // Leader elected with its log at 100 and the high watermark at 40: a follower at 60
        // is past the high watermark but not at the epoch start.
        let mut l = LeaderState::new(1, &part(&[1, 2], &[1]), 100, 40, 0);
        assert_eq!(l.on_follower_fetch(2, 60, FOLLOWER_EPOCH, 100, 1).1, None);
        assert_eq!(
            l.on_follower_fetch(2, 100, FOLLOWER_EPOCH, 100, 2).1,
            Some(vec![1, 2])
        );
    }

    #[test]
    fn an_unregistered_follower_is_not_proposed() {
        // Caught up, but fetching with broker epoch -1: its process has no accepted
        // registration, so the controller would refuse it.
        let mut l = LeaderState::new(1, &part(&[1, 2], &[1]), 10, 10, 0);
        assert_eq!(l.on_follower_fetch(2, 10, -1, 10, 1).1, None);
        assert_eq!(l.member_epochs(&[1, 2], 4), vec![4, -1]);
        // Registered: proposed, with the epoch it fetched with.
        assert_eq!(
            l.on_follower_fetch(2, 10, FOLLOWER_EPOCH, 10, 2).1,
            Some(vec![1, 2])
        );
        assert_eq!(l.member_epochs(&[1, 2], 4), vec![4, FOLLOWER_EPOCH]);
    }

    #[test]
    fn a_member_fetching_as_a_new_incarnation_is_dropped() {
        let mut l = LeaderState::new(1, &part(&[1, 2, 3], &[1, 2, 3]), 10, 10, 0);
        assert_eq!(l.on_follower_fetch(3, 10, FOLLOWER_EPOCH, 10, 1).1, None);
        // 3 was killed and restarted: its fetches carry -1 (not registered yet), then its new
        // epoch. Either way it is another process: it leaves the ISR.
        assert_eq!(l.on_follower_fetch(3, 10, -1, 10, 2).1, Some(vec![1, 2]));
        assert_eq!(l.progress(3).unwrap().broker_epoch, -1);
        l.on_refused();
        // Out of the ISR after the commit, it stays out while unregistered, however caught up.
        let mut shrunk = part(&[1, 2, 3], &[1, 2]);
        shrunk.partition_epoch = 11;
        l.on_committed(&shrunk, 10);
        assert_eq!(l.on_follower_fetch(3, 10, -1, 10, 3).1, None);
        assert_eq!(
            l.on_follower_fetch(3, 10, FOLLOWER_EPOCH + 1, 10, 4).1,
            Some(vec![1, 2, 3])
        );
        assert_eq!(
            l.member_epochs(&[1, 2, 3], 7),
            vec![7, -1, FOLLOWER_EPOCH + 1]
        );
    }

    #[test]
    fn a_member_with_a_new_epoch_is_dropped_even_when_registered() {
        let mut l = LeaderState::new(1, &part(&[1, 2], &[1, 2]), 10, 10, 0);
        l.on_follower_fetch(2, 10, FOLLOWER_EPOCH, 10, 1);
        assert_eq!(
            l.on_follower_fetch(2, 10, FOLLOWER_EPOCH + 3, 10, 2).1,
            Some(vec![1])
        );
    }
}
