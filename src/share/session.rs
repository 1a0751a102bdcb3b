//! Share sessions (KIP-932, Kafka's ShareSessionCache): a member's ShareFetch requests to this
//! broker form a session so that later requests only name the partitions that changed.
//! Epoch 0 opens a session (replacing the member's previous one) with the partitions named;
//! each later request carries the epoch the session expects (then one more, wrapping to 1),
//! adds the partitions named and drops the forgotten ones; epoch -1 closes the session
//! (only acknowledgements, no fetch). Pure.

use std::collections::{BTreeSet, HashMap};

use kafka_protocol::ResponseError;
use uuid::Uuid;

pub type TopicPartition = (Uuid, i32);

#[derive(Debug, Clone, Default)]
pub struct Session {
    /// The epoch the next request must carry.
    pub next_epoch: i32,
    pub partitions: BTreeSet<TopicPartition>,
}

/// What a request's epoch made of its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    /// A new session (epoch 0): fetch these partitions, answer every one.
    Full(Vec<TopicPartition>),
    /// A session carried on: fetch all of its partitions, answer those with news.
    Incremental(Vec<TopicPartition>),
    /// The session is closed (epoch -1).
    Closed,
}

#[derive(Debug, Default)]
pub struct Sessions {
    by_member: HashMap<(String, String), Session>,
}

pub const INITIAL_EPOCH: i32 = 0;
pub const FINAL_EPOCH: i32 = -1;

impl Sessions {
    pub fn len(&self) -> usize {
        self.by_member.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_member.is_empty()
    }

    /// Applies a request's epoch, added and forgotten partitions. Errors are Kafka's codes.
    pub fn open(
        &mut self,
        group: &str,
        member: &str,
        epoch: i32,
        added: &[TopicPartition],
        forgotten: &[TopicPartition],
        max_sessions: usize,
    ) -> Result<Opened, i16> {
        let key = (group.to_string(), member.to_string());
        if epoch == INITIAL_EPOCH {
            if !self.by_member.contains_key(&key) && self.by_member.len() >= max_sessions {
                return Err(ResponseError::ShareSessionLimitReached.code());
            }
            let partitions: BTreeSet<TopicPartition> = added.iter().copied().collect();
            let list = partitions.iter().copied().collect();
            self.by_member.insert(
                key,
                Session {
                    next_epoch: 1,
                    partitions,
                },
            );
            return Ok(Opened::Full(list));
        }
        let Some(s) = self.by_member.get_mut(&key) else {
            return Err(ResponseError::ShareSessionNotFound.code());
        };
        if epoch == FINAL_EPOCH {
            self.by_member.remove(&key);
            return Ok(Opened::Closed);
        }
        if epoch != s.next_epoch {
            return Err(ResponseError::InvalidShareSessionEpoch.code());
        }
        s.next_epoch = if epoch == i32::MAX { 1 } else { epoch + 1 };
        for tp in forgotten {
            s.partitions.remove(tp);
        }
        s.partitions.extend(added.iter().copied());
        Ok(Opened::Incremental(s.partitions.iter().copied().collect()))
    }

    /// Checks a ShareAcknowledge's epoch against the member's session and moves it on; -1
    /// closes the session. An epoch of 0 cannot acknowledge (INVALID_SHARE_SESSION_EPOCH).
    pub fn acknowledge(&mut self, group: &str, member: &str, epoch: i32) -> Result<bool, i16> {
        if epoch == INITIAL_EPOCH {
            return Err(ResponseError::InvalidShareSessionEpoch.code());
        }
        match self.open(group, member, epoch, &[], &[], usize::MAX)? {
            Opened::Closed => Ok(true),
            _ => Ok(false),
        }
    }

    /// Drops a member's session (it left its group).
    pub fn remove(&mut self, group: &str, member: &str) {
        self.by_member
            .remove(&(group.to_string(), member.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        (Uuid::from_u128(1), p)
    }

    #[test]
    fn epochs_follow_each_other() {
        let mut s = Sessions::default();
        assert_eq!(
            s.open("g", "m", 0, &[tp(0)], &[], 10),
            Ok(Opened::Full(vec![tp(0)]))
        );
        assert_eq!(
            s.open("g", "m", 2, &[], &[], 10),
            Err(ResponseError::InvalidShareSessionEpoch.code())
        );
        assert_eq!(
            s.open("g", "m", 1, &[tp(1)], &[tp(0)], 10),
            Ok(Opened::Incremental(vec![tp(1)]))
        );
        assert_eq!(s.acknowledge("g", "m", 2), Ok(false));
        assert_eq!(s.acknowledge("g", "m", -1), Ok(true));
        assert_eq!(
            s.open("g", "m", 3, &[], &[], 10),
            Err(ResponseError::ShareSessionNotFound.code())
        );
    }

    #[test]
    fn the_session_limit_holds() {
        let mut s = Sessions::default();
        s.open("g", "a", 0, &[], &[], 1).unwrap();
        assert_eq!(
            s.open("g", "b", 0, &[], &[], 1),
            Err(ResponseError::ShareSessionLimitReached.code())
        );
        assert!(s.open("g", "a", 0, &[], &[], 1).is_ok());
        assert_eq!(
            s.acknowledge("g", "a", 0),
            Err(ResponseError::InvalidShareSessionEpoch.code())
        );
    }
}
