//! The share coordinator's decisions, as Kafka's `ShareCoordinatorShard` makes them: the
//! persisted state of every share partition whose `__share_group_state` partition this broker
//! leads, and for each share-state request the record to append (or the refusal). Pure: the
//! shell appends the record and only then [`Shard::apply`]s it, so the state is always what
//! the log says (replay applies the same records).
//!
//! A share partition's state: snapshot epoch, state epoch (bumped when its offsets are
//! reset), leader epoch (of the topic partition's leader that last wrote), start offset, and
//! state batches (offset ranges with a delivery state and count). A write is appended as a
//! ShareUpdate (its batches combined into the state on apply) unless
//! `share.coordinator.snapshot.update.records.per.snapshot` updates followed the last
//! ShareSnapshot: then the whole state goes into a new ShareSnapshot.

use std::collections::HashMap;

use kafka_protocol::ResponseError as E;

use super::records::{Batch, Key, Snapshot, Update, Value};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    pub snapshot_epoch: i32,
    pub state_epoch: i32,
    pub leader_epoch: i32,
    pub start_offset: i64,
    pub create_timestamp: i64,
    pub write_timestamp: i64,
    pub batches: Vec<Batch>,
    /// ShareUpdate records applied since the last ShareSnapshot.
    pub updates: u32,
}

/// A refused request: Kafka's error code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: i16,
    pub message: String,
}

fn refuse(e: E, message: &str) -> Refusal {
    Refusal {
        code: e.code(),
        message: message.to_string(),
    }
}

/// A WriteShareGroupState partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub state_epoch: i32,
    pub leader_epoch: i32,
    /// -1: unchanged.
    pub start_offset: i64,
    pub batches: Vec<Batch>,
}

#[derive(Debug)]
pub struct Shard {
    states: HashMap<Key, State>,
    updates_per_snapshot: u32,
}

impl Shard {
    pub fn new(updates_per_snapshot: u32) -> Shard {
        Shard {
            states: HashMap::new(),
            updates_per_snapshot: updates_per_snapshot.max(1),
        }
    }

    pub fn get(&self, key: &Key) -> Option<&State> {
        self.states.get(key)
    }

    /// Every share partition with its state.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &State)> {
        self.states.iter()
    }

    /// InitializeShareGroupState: a new ShareSnapshot at `state_epoch` from `start_offset`
    /// with no batches; FENCED_STATE_EPOCH below the state epoch recorded.
    pub fn initialize(
        &self,
        key: &Key,
        state_epoch: i32,
        start_offset: i64,
        now: i64,
    ) -> Result<Value, Refusal> {
        check_ids(key, &WRITE_MESSAGES)?;
        if state_epoch < 0 {
            return Err(refuse(E::InvalidRequest, WRITE_MESSAGES.state_epoch));
        }
        let current = self.states.get(key);
        if let Some(c) = current
            && c.state_epoch > state_epoch
        {
            return Err(refuse(E::FencedStateEpoch, FENCED_STATE_EPOCH));
        }
        Ok(Value::Snapshot(Snapshot {
            snapshot_epoch: current.map_or(0, |c| c.snapshot_epoch.wrapping_add(1)),
            state_epoch,
            leader_epoch: -1,
            start_offset,
            delivery_complete_count: -1,
            create_timestamp: now,
            write_timestamp: now,
            batches: Vec::new(),
        }))
    }

    /// WriteShareGroupState: refused for an uninitialized share partition (INVALID_REQUEST),
    /// an older leader epoch (FENCED_LEADER_EPOCH) or state epoch (FENCED_STATE_EPOCH).
    pub fn write(&self, key: &Key, w: &Write, now: i64) -> Result<Value, Refusal> {
        check_ids(key, &WRITE_MESSAGES)?;
        if w.leader_epoch < -1 {
            return Err(refuse(E::InvalidRequest, WRITE_MESSAGES.leader_epoch));
        }
        if w.state_epoch < 0 {
            return Err(refuse(E::InvalidRequest, WRITE_MESSAGES.state_epoch));
        }
        let Some(c) = self.states.get(key) else {
            return Err(refuse(
                E::InvalidRequest,
                "Write operation on uninitialized share partition not allowed.",
            ));
        };
        if w.leader_epoch != -1 && c.leader_epoch > w.leader_epoch {
            return Err(refuse(E::FencedLeaderEpoch, FENCED_LEADER_EPOCH));
        }
        if c.state_epoch > w.state_epoch {
            return Err(refuse(E::FencedStateEpoch, FENCED_STATE_EPOCH));
        }
        let leader_epoch = if w.leader_epoch == -1 {
            c.leader_epoch
        } else {
            w.leader_epoch
        };
        if c.updates + 1 >= self.updates_per_snapshot {
            let start_offset = if w.start_offset == -1 {
                c.start_offset
            } else {
                w.start_offset
            };
            return Ok(Value::Snapshot(Snapshot {
                snapshot_epoch: c.snapshot_epoch.wrapping_add(1),
                state_epoch: c.state_epoch,
                leader_epoch,
                start_offset,
                delivery_complete_count: -1,
                create_timestamp: c.create_timestamp,
                write_timestamp: now,
                batches: combine(&c.batches, &w.batches, start_offset),
            }));
        }
        Ok(Value::Update(Update {
            snapshot_epoch: c.snapshot_epoch,
            leader_epoch,
            start_offset: w.start_offset,
            delivery_complete_count: -1,
            batches: w.batches.clone(),
        }))
    }

    /// ReadShareGroupState: the state, and a ShareUpdate recording a newer `leader_epoch`
    /// (-1: none given). INVALID_REQUEST for an uninitialized share partition,
    /// FENCED_LEADER_EPOCH for an older leader epoch.
    pub fn read(&self, key: &Key, leader_epoch: i32) -> Result<(&State, Option<Value>), Refusal> {
        check_ids(key, &READ_MESSAGES)?;
        if leader_epoch < -1 {
            return Err(refuse(E::InvalidRequest, READ_MESSAGES.leader_epoch));
        }
        let Some(c) = self.states.get(key) else {
            return Err(refuse(
                E::InvalidRequest,
                "Read operation on uninitialized share partition not allowed.",
            ));
        };
        if leader_epoch != -1 && c.leader_epoch > leader_epoch {
            return Err(refuse(E::FencedLeaderEpoch, FENCED_LEADER_EPOCH));
        }
        let update = (leader_epoch != -1 && leader_epoch != c.leader_epoch).then(|| {
            Value::Update(Update {
                snapshot_epoch: c.snapshot_epoch,
                leader_epoch,
                start_offset: -1,
                delivery_complete_count: -1,
                batches: Vec::new(),
            })
        });
        Ok((c, update))
    }

    /// ReadShareGroupStateSummary: the state without its batches.
    pub fn summary(&self, key: &Key) -> Result<&State, Refusal> {
        check_ids(key, &READ_MESSAGES)?;
        self.states.get(key).ok_or_else(|| {
            refuse(
                E::UnknownServerError,
                &format!(
                    "Data not found for topic {}, partition {} for group {}, in the in-memory state of share coordinator",
                    key.1, key.2, key.0
                ),
            )
        })
    }

    /// DeleteShareGroupState: a tombstone, or nothing to write when there is no state.
    pub fn delete(&self, key: &Key) -> Result<Option<Value>, Refusal> {
        check_ids(key, &WRITE_MESSAGES)?;
        Ok(self.states.contains_key(key).then_some(Value::Tombstone))
    }

    /// Applies a record of `key` (appended, or replayed from the log).
    pub fn apply(&mut self, key: &Key, v: Value) {
        match v {
            Value::Tombstone => {
                self.states.remove(key);
            }
            Value::Snapshot(s) => {
                self.states.insert(
                    key.clone(),
                    State {
                        snapshot_epoch: s.snapshot_epoch,
                        state_epoch: s.state_epoch,
                        leader_epoch: s.leader_epoch,
                        start_offset: s.start_offset,
                        create_timestamp: s.create_timestamp,
                        write_timestamp: s.write_timestamp,
                        batches: s.batches,
                        updates: 0,
                    },
                );
            }
            Value::Update(u) => {
                let c = self.states.entry(key.clone()).or_insert_with(|| State {
                    snapshot_epoch: u.snapshot_epoch,
                    state_epoch: 0,
                    leader_epoch: -1,
                    start_offset: u.start_offset.max(0),
                    create_timestamp: -1,
                    write_timestamp: -1,
                    batches: Vec::new(),
                    updates: 0,
                });
                if u.start_offset != -1 {
                    c.start_offset = u.start_offset;
                }
                if u.leader_epoch != -1 {
                    c.leader_epoch = u.leader_epoch;
                }
                c.batches = combine(&c.batches, &u.batches, c.start_offset);
                c.updates = c.updates.saturating_add(1);
            }
        }
    }

    /// Every share partition of `partition` is someone else's now.
    pub fn retain(&mut self, keep: impl Fn(&Key) -> bool) {
        self.states.retain(|k, _| keep(k));
    }
}

const FENCED_STATE_EPOCH: &str =
    "The coordinator rejected the request because the state epoch did not match.";
const FENCED_LEADER_EPOCH: &str =
    "The leader epoch in the request is older than the epoch on the broker.";

struct Messages {
    topic: &'static str,
    partition: &'static str,
    leader_epoch: &'static str,
    state_epoch: &'static str,
}

const WRITE_MESSAGES: Messages = Messages {
    topic: "The topic id cannot be null.",
    partition: "The partition id cannot be a negative number.",
    leader_epoch: "The leader epoch cannot be a negative number.",
    state_epoch: "The state epoch cannot be a negative number.",
};

const READ_MESSAGES: Messages = Messages {
    topic: "Request topic id is null.",
    partition: "Request partition id is negative.",
    leader_epoch: "Request leader epoch is negative.",
    state_epoch: "",
};

fn check_ids(key: &Key, m: &Messages) -> Result<(), Refusal> {
    if key.1.is_nil() {
        return Err(refuse(E::InvalidRequest, m.topic));
    }
    if key.2 < 0 {
        return Err(refuse(E::InvalidRequest, m.partition));
    }
    Ok(())
}

/// The state batches after `new` is applied over `old` (Kafka's PersisterStateBatchCombiner):
/// where they overlap `new` wins, nothing below `start` is kept, and neighbours with the same
/// state and count are one batch.
pub fn combine(old: &[Batch], new: &[Batch], start: i64) -> Vec<Batch> {
    let mut out: Vec<Batch> = old.to_vec();
    for n in new.iter().filter(|n| n.last_offset >= n.first_offset) {
        let mut next = Vec::with_capacity(out.len() + 2);
        for o in out {
            if o.last_offset < n.first_offset || o.first_offset > n.last_offset {
                next.push(o);
                continue;
            }
            if o.first_offset < n.first_offset {
                next.push(Batch {
                    last_offset: n.first_offset - 1,
                    ..o
                });
            }
            if o.last_offset > n.last_offset {
                next.push(Batch {
                    first_offset: n.last_offset + 1,
                    ..o
                });
            }
        }
        next.push(*n);
        out = next;
    }
    out.retain(|b| b.last_offset >= start);
    for b in out.iter_mut() {
        b.first_offset = b.first_offset.max(start);
    }
    out.sort();
    let mut merged: Vec<Batch> = Vec::with_capacity(out.len());
    for b in out {
        match merged.last_mut() {
            Some(m)
                if m.last_offset.checked_add(1) == Some(b.first_offset)
                    && m.delivery_state == b.delivery_state
                    && m.delivery_count == b.delivery_count =>
            {
                m.last_offset = b.last_offset
            }
            _ => merged.push(b),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::super::records::{ACKNOWLEDGED, ARCHIVED, AVAILABLE};
    use super::*;
    use uuid::Uuid;

    fn key() -> Key {
        ("g".to_string(), Uuid::from_u128(1), 0)
    }

    fn b(first: i64, last: i64, state: i8, count: i16) -> Batch {
        Batch {
            first_offset: first,
            last_offset: last,
            delivery_state: state,
            delivery_count: count,
        }
    }

    fn write(state_epoch: i32, leader_epoch: i32, start: i64, batches: Vec<Batch>) -> Write {
        Write {
            state_epoch,
            leader_epoch,
            start_offset: start,
            batches,
        }
    }

    #[test]
    fn newer_batches_win_and_the_start_prunes() {
        let old = vec![b(0, 9, AVAILABLE, 1)];
        let new = vec![b(3, 4, ACKNOWLEDGED, 1), b(8, 12, ARCHIVED, 2)];
        assert_eq!(
            combine(&old, &new, 2),
            vec![
                b(2, 2, AVAILABLE, 1),
                b(3, 4, ACKNOWLEDGED, 1),
                b(5, 7, AVAILABLE, 1),
                b(8, 12, ARCHIVED, 2)
            ]
        );
        assert_eq!(
            combine(&[b(0, 1, ARCHIVED, 1)], &[b(2, 3, ARCHIVED, 1)], 0),
            vec![b(0, 3, ARCHIVED, 1)]
        );
    }

    #[test]
    fn writes_need_an_initialized_partition_and_current_epochs() {
        let mut s = Shard::new(500);
        let k = key();
        assert_eq!(
            s.write(&k, &write(0, 0, 0, vec![]), 0).unwrap_err().code,
            E::InvalidRequest.code()
        );
        let init = s.initialize(&k, 0, 5, 1).unwrap();
        s.apply(&k, init);
        let w = s
            .write(&k, &write(0, 3, 7, vec![b(7, 8, ACKNOWLEDGED, 1)]), 2)
            .unwrap();
        assert!(matches!(w, Value::Update(_)));
        s.apply(&k, w);
        let st = s.get(&k).unwrap();
        assert_eq!((st.start_offset, st.leader_epoch), (7, 3));
        assert_eq!(
            s.write(&k, &write(0, 2, 7, vec![]), 3).unwrap_err().code,
            E::FencedLeaderEpoch.code()
        );
        let again = s.initialize(&k, 1, 0, 4).unwrap();
        s.apply(&k, again);
        assert_eq!(
            s.write(&k, &write(0, 3, 0, vec![]), 5).unwrap_err().code,
            E::FencedStateEpoch.code()
        );
        assert_eq!(
            s.initialize(&k, 0, 0, 6).unwrap_err().code,
            E::FencedStateEpoch.code()
        );
        assert_eq!(s.get(&k).unwrap().snapshot_epoch, 1);
    }

    #[test]
    fn every_nth_write_is_a_snapshot() {
        let mut s = Shard::new(3);
        let k = key();
        let init = s.initialize(&k, 0, 0, 0).unwrap();
        s.apply(&k, init);
        let mut kinds = Vec::new();
        for i in 0..4 {
            let v = s
                .write(&k, &write(0, -1, -1, vec![b(i, i, ARCHIVED, 1)]), i)
                .unwrap();
            kinds.push(matches!(v, Value::Snapshot(_)));
            s.apply(&k, v);
        }
        assert_eq!(kinds, vec![false, false, true, false]);
        assert_eq!(s.get(&k).unwrap().batches, vec![b(0, 3, ARCHIVED, 1)]);
        assert_eq!(s.get(&k).unwrap().snapshot_epoch, 1);
    }

    #[test]
    fn reads_record_a_newer_leader_epoch_and_tombstones_delete() {
        let mut s = Shard::new(500);
        let k = key();
        assert!(s.read(&k, 0).is_err());
        assert_eq!(s.delete(&k).unwrap(), None);
        let init = s.initialize(&k, 0, 0, 0).unwrap();
        s.apply(&k, init);
        let (_, up) = s.read(&k, 4).unwrap();
        s.apply(&k, up.unwrap());
        assert_eq!(s.read(&k, 4).unwrap().1, None);
        assert_eq!(s.read(&k, 3).unwrap_err().code, E::FencedLeaderEpoch.code());
        let t = s.delete(&k).unwrap().unwrap();
        s.apply(&k, t);
        assert!(s.summary(&k).is_err());
        let bad = ("g".to_string(), Uuid::nil(), 0);
        assert_eq!(
            s.read(&bad, 0).unwrap_err().message,
            "Request topic id is null."
        );
    }
}
