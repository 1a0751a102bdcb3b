//! The follower's side of fetch sessions (KIP-227), as Kafka's `FetchSessionHandler`.
//!
//! The first fetch to a leader is full (session id 0, epoch 0) and lists every partition; if
//! the leader opens a session, later fetches carry its id and the next epoch, and list only
//! the partitions added or whose fetch position changed, plus the ones to forget (no longer
//! ready to fetch). The leader reads the others from what it remembers of them, and answers
//! only the partitions with something new. A fetch error that concerns the session, or a
//! failed connection, makes the next fetch a full one that closes the old session.
//!
//! Pure: the fetcher task builds each request from [`Handler::build`] and reports how it
//! went with [`Handler::on_answer`] or [`Handler::on_failure`].

use std::collections::HashMap;
use std::hash::Hash;

/// The session ids and epochs of KIP-227.
const NO_SESSION: i32 = 0;
const INITIAL_EPOCH: i32 = 0;

/// What one partition's fetch asks: compared to tell whether the leader must be told again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    pub fetch_offset: i64,
    pub log_start_offset: i64,
    pub last_fetched_epoch: i32,
    pub current_leader_epoch: i32,
    pub max_bytes: i32,
}

/// One request to send: the session header, the partitions to list and those to forget.
#[derive(Debug, PartialEq, Eq)]
pub struct Built<K> {
    pub session_id: i32,
    pub epoch: i32,
    pub send: Vec<K>,
    pub forget: Vec<K>,
}

#[derive(Debug)]
pub struct Handler<K> {
    /// The leader's session (0: none).
    session_id: i32,
    /// The epoch of the next fetch (0: a full fetch).
    epoch: i32,
    /// What the leader was last told of each partition of the session.
    told: HashMap<K, Params>,
    /// The request in flight: its epoch and what it told.
    pending: Option<(i32, HashMap<K, Params>, Vec<K>)>,
}

impl<K: Clone + Eq + Hash + Ord> Default for Handler<K> {
    fn default() -> Self {
        Handler {
            session_id: NO_SESSION,
            epoch: INITIAL_EPOCH,
            told: HashMap::new(),
            pending: None,
        }
    }
}

impl<K: Clone + Eq + Hash + Ord> Handler<K> {
    /// The session id the leader gave (0: none).
    pub fn session_id(&self) -> i32 {
        self.session_id
    }

    /// The request for the partitions ready to fetch, with what each asks.
    pub fn build(&mut self, wanted: &[(K, Params)]) -> Built<K> {
        let full = self.epoch == INITIAL_EPOCH;
        let mut send = Vec::new();
        let mut told = HashMap::with_capacity(wanted.len());
        for (k, p) in wanted {
            if full || self.told.get(k) != Some(p) {
                send.push(k.clone());
            }
            told.insert(k.clone(), *p);
        }
        let mut forget: Vec<K> = if full {
            Vec::new()
        } else {
            self.told
                .keys()
                .filter(|k| !told.contains_key(*k))
                .cloned()
                .collect()
        };
        forget.sort();
        self.pending = Some((self.epoch, told, forget.clone()));
        Built {
            session_id: self.session_id,
            epoch: self.epoch,
            send,
            forget,
        }
    }

    /// The answer to the last built request: its top-level error and session id.
    pub fn on_answer(&mut self, error_code: i16, session_id: i32) {
        let Some((epoch, told, _)) = self.pending.take() else {
            return;
        };
        if error_code != 0 {
            // FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH or any other: start over
            // with a full fetch that closes whatever the leader still holds.
            self.restart();
            return;
        }
        if epoch == INITIAL_EPOCH {
            if session_id == NO_SESSION {
                // The leader keeps no session: every fetch stays full.
                self.session_id = NO_SESSION;
                self.told.clear();
                return;
            }
            self.session_id = session_id;
            self.epoch = 1;
            self.told = told;
            return;
        }
        self.epoch = next_epoch(self.epoch);
        self.told = told;
    }

    /// The request failed or its answer was lost: the leader's session may be at either
    /// epoch, so the next fetch is a full one that closes it.
    pub fn on_failure(&mut self) {
        self.pending = None;
        self.restart();
    }

    fn restart(&mut self) {
        self.epoch = INITIAL_EPOCH;
        self.told.clear();
    }
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX { 1 } else { epoch + 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(offset: i64) -> Params {
        Params {
            fetch_offset: offset,
            log_start_offset: 0,
            last_fetched_epoch: 0,
            current_leader_epoch: 1,
            max_bytes: 1 << 20,
        }
    }

    #[test]
    fn full_then_incremental_lists_only_changes_and_forgets() {
        let mut h = Handler::<i32>::default();
        let b = h.build(&[(0, at(0)), (1, at(0)), (2, at(0))]);
        assert_eq!((b.session_id, b.epoch), (0, 0));
        assert_eq!(b.send, vec![0, 1, 2]);
        h.on_answer(0, 42);
        assert_eq!(h.session_id(), 42);

        // Only partition 1 moved; partition 2 is not ready (forgotten).
        let b = h.build(&[(0, at(0)), (1, at(5))]);
        assert_eq!((b.session_id, b.epoch), (42, 1));
        assert_eq!(b.send, vec![1]);
        assert_eq!(b.forget, vec![2]);
        h.on_answer(0, 42);

        // Nothing changed: an empty request at the next epoch; 2 comes back as added.
        let b = h.build(&[(0, at(0)), (1, at(5))]);
        assert_eq!((b.epoch, b.send.len(), b.forget.len()), (2, 0, 0));
        h.on_answer(0, 42);
        let b = h.build(&[(0, at(0)), (1, at(5)), (2, at(0))]);
        assert_eq!((b.epoch, b.send.clone()), (3, vec![2]));
    }

    #[test]
    fn a_session_error_or_failure_goes_back_to_a_full_fetch_closing_the_session() {
        let mut h = Handler::<i32>::default();
        h.build(&[(0, at(0))]);
        h.on_answer(0, 7);
        h.build(&[(0, at(3))]);
        h.on_answer(71, 0);
        let b = h.build(&[(0, at(3))]);
        assert_eq!((b.session_id, b.epoch, b.send.clone()), (7, 0, vec![0]));
        h.on_answer(0, 8);
        let b = h.build(&[(0, at(4))]);
        assert_eq!((b.session_id, b.epoch), (8, 1));
        h.on_failure();
        let b = h.build(&[(0, at(4))]);
        assert_eq!((b.session_id, b.epoch, b.send.clone()), (8, 0, vec![0]));
    }

    #[test]
    fn a_leader_without_sessions_gets_full_fetches() {
        let mut h = Handler::<i32>::default();
        h.build(&[(0, at(0))]);
        h.on_answer(0, 0);
        let b = h.build(&[(0, at(0))]);
        assert_eq!((b.session_id, b.epoch, b.send.clone()), (0, 0, vec![0]));
    }
}
