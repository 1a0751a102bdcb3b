//! A share partition (KIP-932's SharePartition): which records of one topic partition a share
//! group has delivered, to whom, and what became of them. Pure: time is an argument.
//!
//! Offsets below the share-partition start offset (SPSO) are done. Offsets from the SPSO up
//! to the share-partition end offset (SPEO, the next offset never yet acquired) are in flight,
//! each in one of Kafka's states:
//! - Available: may be acquired (released, or its acquisition lock expired);
//! - Acquired by a member until a deadline (`group.share.record.lock.duration.ms`);
//! - Acknowledged (accepted) or Archived (rejected, a gap, or out of deliveries).
//!
//! Each acquisition counts one delivery. A record released or whose lock expires goes back to
//! Available, unless it has been delivered `group.share.delivery.count.limit` times: then it is
//! Archived. The SPSO moves past every leading Acknowledged/Archived record. At most
//! `group.share.partition.max.record.locks` records are in flight (SPEO - SPSO): no new record
//! is acquired beyond that until the SPSO moves.

use std::collections::BTreeMap;

use super::state::records::{ACKNOWLEDGED, ARCHIVED, AVAILABLE, Batch};

/// Kafka's acknowledge types (ShareFetch/ShareAcknowledge `AcknowledgeTypes`).
pub const GAP: i8 = 0;
pub const ACCEPT: i8 = 1;
pub const RELEASE: i8 = 2;
pub const REJECT: i8 = 3;

/// The limits a share partition acts under (the group's settings).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub lock_duration_ms: i64,
    pub delivery_count_limit: i16,
    pub max_record_locks: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Available,
    Acquired { member: u64, deadline: i64 },
    Acknowledged,
    Archived,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InFlight {
    state: State,
    delivery_count: i16,
}

/// A contiguous range of records acquired in one go, all delivered the same number of times
/// (ShareFetch's AcquiredRecords).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_count: i16,
}

/// Why an acknowledgement was refused (Kafka's INVALID_RECORD_STATE / INVALID_REQUEST).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckError {
    /// A record in the range is not acquired by this member (or not in flight).
    InvalidRecordState,
    /// A malformed batch: last < first, a types list that fits neither one type nor one per
    /// offset, an unknown type.
    InvalidRequest,
}

#[derive(Debug, Clone)]
pub struct SharePartition {
    /// SPSO: every offset below is done.
    start: i64,
    /// SPEO: the next offset never acquired.
    end: i64,
    /// The in-flight records: every offset of [start, end) that is not done.
    records: BTreeMap<i64, InFlight>,
}

impl SharePartition {
    /// A share partition starting at `start` (`share.auto.offset.reset`: the log end for
    /// latest, the log start for earliest).
    pub fn new(start: i64) -> SharePartition {
        SharePartition {
            start,
            end: start,
            records: BTreeMap::new(),
        }
    }

    pub fn start_offset(&self) -> i64 {
        self.start
    }

    pub fn end_offset(&self) -> i64 {
        self.end
    }

    /// Records in flight and not yet done (Available or Acquired).
    pub fn in_flight(&self) -> usize {
        self.records
            .values()
            .filter(|r| matches!(r.state, State::Available | State::Acquired { .. }))
            .count()
    }

    /// Moves the SPSO up to the log start offset when retention removed records below it.
    pub fn skip_to(&mut self, log_start: i64) {
        if log_start > self.start {
            self.start = log_start;
            self.end = self.end.max(log_start);
            self.records = self.records.split_off(&log_start);
        }
    }

    /// Expires acquisition locks whose deadline passed; returns how many records came back.
    pub fn expire(&mut self, now: i64, limits: &Limits) -> usize {
        let mut n = 0;
        for r in self.records.values_mut() {
            if let State::Acquired { deadline, .. } = r.state
                && deadline <= now
            {
                r.state = back_state(r.delivery_count, limits);
                n += 1;
            }
        }
        self.advance();
        n
    }

    /// The earliest acquisition lock deadline, if any record is acquired.
    pub fn next_deadline(&self) -> Option<i64> {
        self.records
            .values()
            .filter_map(|r| match r.state {
                State::Acquired { deadline, .. } => Some(deadline),
                _ => None,
            })
            .min()
    }

    /// The first offset a fetch would acquire from, if any record below `high_watermark` can be
    /// acquired now: the first Available in-flight record, else the SPEO.
    pub fn next_acquirable(&self, high_watermark: i64, limits: &Limits) -> Option<i64> {
        if let Some((&o, _)) = self
            .records
            .iter()
            .find(|(_, r)| r.state == State::Available)
        {
            return Some(o);
        }
        (self.end < high_watermark && self.end - self.start < limits.max_record_locks)
            .then_some(self.end)
    }

    /// Acquires for `member`, up to `max_records`, the acquirable records among the offsets
    /// `[from, to)` (the offsets a log read covered, capped at the high watermark): Available
    /// in-flight ones, then new ones from the SPEO while in-flight records stay within
    /// `max_record_locks`.
    pub fn acquire(
        &mut self,
        member: u64,
        from: i64,
        to: i64,
        max_records: i64,
        now: i64,
        limits: &Limits,
    ) -> Vec<Acquired> {
        let mut got: Vec<Acquired> = Vec::new();
        let mut budget = max_records.max(1);
        let deadline = now + limits.lock_duration_ms;
        let take = |offset: i64, count: i16, got: &mut Vec<Acquired>| match got.last_mut() {
            Some(a) if a.last_offset + 1 == offset && a.delivery_count == count => {
                a.last_offset = offset
            }
            _ => got.push(Acquired {
                first_offset: offset,
                last_offset: offset,
                delivery_count: count,
            }),
        };
        let from = from.max(self.start);
        let redeliver: Vec<i64> = self
            .records
            .range(from..to.min(self.end))
            .filter(|(_, r)| r.state == State::Available)
            .map(|(&o, _)| o)
            .collect();
        for o in redeliver {
            if budget == 0 {
                break;
            }
            if let Some(r) = self.records.get_mut(&o) {
                r.delivery_count = r.delivery_count.saturating_add(1);
                r.state = State::Acquired { member, deadline };
                take(o, r.delivery_count, &mut got);
                budget -= 1;
            }
        }
        while budget > 0
            && self.end < to
            && self.end >= from
            && self.end - self.start < limits.max_record_locks
        {
            let o = self.end;
            self.records.insert(
                o,
                InFlight {
                    state: State::Acquired { member, deadline },
                    delivery_count: 1,
                },
            );
            take(o, 1, &mut got);
            self.end += 1;
            budget -= 1;
        }
        got
    }

    /// Applies one acknowledgement batch of `member`: `types` holds one type for the whole
    /// range or one per offset. Nothing changes unless every offset of the range is acquired by
    /// `member`.
    pub fn acknowledge(
        &mut self,
        member: u64,
        first: i64,
        last: i64,
        types: &[i8],
        limits: &Limits,
    ) -> Result<(), AckError> {
        let Some(n) = last
            .checked_sub(first)
            .and_then(|d| d.checked_add(1))
            .filter(|n| *n > 0 && !types.is_empty())
        else {
            return Err(AckError::InvalidRequest);
        };
        if types.len() != 1 && types.len() as i64 != n {
            return Err(AckError::InvalidRequest);
        }
        if types.iter().any(|t| !(GAP..=REJECT).contains(t)) {
            return Err(AckError::InvalidRequest);
        }
        if first < self.start || last >= self.end {
            return Err(AckError::InvalidRecordState);
        }
        for o in first..=last {
            match self.records.get(&o) {
                Some(InFlight {
                    state: State::Acquired { member: m, .. },
                    ..
                }) if *m == member => {}
                _ => return Err(AckError::InvalidRecordState),
            }
        }
        for (i, o) in (first..=last).enumerate() {
            let t = if types.len() == 1 { types[0] } else { types[i] };
            if let Some(r) = self.records.get_mut(&o) {
                r.state = match t {
                    ACCEPT => State::Acknowledged,
                    RELEASE => back_state(r.delivery_count, limits),
                    _ => State::Archived,
                };
            }
        }
        self.advance();
        Ok(())
    }

    /// Releases every record `member` holds (its share session closed or it left the group).
    pub fn release_member(&mut self, member: u64, limits: &Limits) -> usize {
        let mut n = 0;
        for r in self.records.values_mut() {
            if matches!(r.state, State::Acquired { member: m, .. } if m == member) {
                r.state = back_state(r.delivery_count, limits);
                n += 1;
            }
        }
        self.advance();
        n
    }

    /// Moves the SPSO past the leading done records.
    fn advance(&mut self) {
        while let Some(entry) = self.records.first_entry() {
            if *entry.key() != self.start
                || !matches!(entry.get().state, State::Acknowledged | State::Archived)
            {
                break;
            }
            entry.remove();
            self.start += 1;
        }
    }

    /// The state to persist (`__share_group_state`): the SPSO and the state batches of the
    /// in-flight records delivered at least once. An acquired record is persisted as it
    /// was before its acquisition (Available with one delivery less), so that a broker
    /// restarted from it offers the record again without counting a delivery nobody
    /// acknowledged; a record never delivered is not persisted.
    pub fn persisted(&self) -> (i64, Vec<Batch>) {
        let mut out: Vec<Batch> = Vec::new();
        for (&o, r) in &self.records {
            let (state, count) = match r.state {
                State::Available => (AVAILABLE, r.delivery_count),
                State::Acquired { .. } => (AVAILABLE, r.delivery_count - 1),
                State::Acknowledged => (ACKNOWLEDGED, r.delivery_count),
                State::Archived => (ARCHIVED, r.delivery_count),
            };
            if state == AVAILABLE && count <= 0 {
                continue;
            }
            match out.last_mut() {
                Some(b)
                    if b.last_offset + 1 == o
                        && b.delivery_state == state
                        && b.delivery_count == count =>
                {
                    b.last_offset = o
                }
                _ => out.push(Batch {
                    first_offset: o,
                    last_offset: o,
                    delivery_state: state,
                    delivery_count: count,
                }),
            }
        }
        (self.start, out)
    }

    /// A share partition as persisted: from `start`, the records of `batches` in their
    /// states (acknowledged and archived ones stay done, available ones keep their delivery
    /// counts); offsets between them were never delivered. At most `max_in_flight` offsets
    /// from the start are in flight (the record locks bound them).
    pub fn restore(start: i64, batches: &[Batch], max_in_flight: i64) -> SharePartition {
        let mut sp = SharePartition::new(start);
        let cap = start.saturating_add(max_in_flight.max(0));
        for b in batches {
            let first = b.first_offset.max(start);
            let last = b.last_offset.min(cap - 1);
            for o in first..=last {
                let state = match b.delivery_state {
                    ACKNOWLEDGED => State::Acknowledged,
                    ARCHIVED => State::Archived,
                    _ => State::Available,
                };
                let delivery_count = b.delivery_count.max(0);
                sp.records.insert(
                    o,
                    InFlight {
                        state,
                        delivery_count,
                    },
                );
            }
        }
        sp.end = sp.records.last_key_value().map_or(start, |(&o, _)| o + 1);
        for o in start..sp.end {
            sp.records.entry(o).or_insert(InFlight {
                state: State::Available,
                delivery_count: 0,
            });
        }
        sp.advance();
        sp
    }

    /// The state of one offset (tests and describe).
    pub fn state_of(&self, offset: i64) -> Option<(State, i16)> {
        self.records
            .get(&offset)
            .map(|r| (r.state, r.delivery_count))
    }
}

/// Where a record goes when its lock ends without an acknowledgement, or it is released.
fn back_state(delivery_count: i16, limits: &Limits) -> State {
    if delivery_count >= limits.delivery_count_limit {
        State::Archived
    } else {
        State::Available
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: Limits = Limits {
        lock_duration_ms: 1000,
        delivery_count_limit: 3,
        max_record_locks: 10,
    };

    fn acq(first: i64, last: i64, count: i16) -> Acquired {
        Acquired {
            first_offset: first,
            last_offset: last,
            delivery_count: count,
        }
    }

    #[test]
    fn members_get_disjoint_records_and_accepts_move_the_start() {
        let mut sp = SharePartition::new(0);
        assert_eq!(sp.acquire(1, 0, 5, 3, 0, &L), vec![acq(0, 2, 1)]);
        assert_eq!(sp.acquire(2, 0, 5, 10, 0, &L), vec![acq(3, 4, 1)]);
        assert_eq!(sp.acquire(3, 0, 5, 10, 0, &L), vec![]);
        assert_eq!(
            sp.acknowledge(2, 0, 0, &[ACCEPT], &L),
            Err(AckError::InvalidRecordState)
        );
        sp.acknowledge(1, 0, 2, &[ACCEPT], &L).unwrap();
        assert_eq!(sp.start_offset(), 3);
        sp.acknowledge(2, 3, 4, &[ACCEPT, REJECT], &L).unwrap();
        assert_eq!(sp.start_offset(), 5);
        assert_eq!(sp.in_flight(), 0);
    }

    #[test]
    fn released_records_come_back_until_the_delivery_limit() {
        let mut sp = SharePartition::new(10);
        for round in 1..=3 {
            assert_eq!(sp.acquire(1, 10, 11, 5, 0, &L), vec![acq(10, 10, round)]);
            sp.acknowledge(1, 10, 10, &[RELEASE], &L).unwrap();
        }
        assert_eq!(sp.next_acquirable(11, &L), None);
        assert_eq!(sp.start_offset(), 11);
    }

    #[test]
    fn expired_locks_make_records_available_again() {
        let mut sp = SharePartition::new(0);
        sp.acquire(1, 0, 4, 10, 0, &L);
        assert_eq!(sp.next_deadline(), Some(1000));
        assert_eq!(sp.expire(999, &L), 0);
        assert_eq!(sp.expire(1000, &L), 4);
        assert_eq!(sp.next_acquirable(4, &L), Some(0));
        assert_eq!(sp.acquire(2, 0, 4, 10, 1000, &L), vec![acq(0, 3, 2)]);
        assert_eq!(
            sp.acknowledge(1, 0, 3, &[ACCEPT], &L),
            Err(AckError::InvalidRecordState)
        );
    }

    #[test]
    fn in_flight_records_are_capped_by_the_record_locks() {
        let mut sp = SharePartition::new(0);
        assert_eq!(sp.acquire(1, 0, 100, 100, 0, &L), vec![acq(0, 9, 1)]);
        assert_eq!(sp.next_acquirable(100, &L), None);
        sp.acknowledge(1, 0, 4, &[ACCEPT], &L).unwrap();
        assert_eq!(sp.acquire(2, 0, 100, 100, 0, &L), vec![acq(10, 14, 1)]);
    }

    #[test]
    fn malformed_acknowledgements_change_nothing() {
        let mut sp = SharePartition::new(0);
        sp.acquire(1, 0, 3, 10, 0, &L);
        assert_eq!(
            sp.acknowledge(1, 2, 1, &[ACCEPT], &L),
            Err(AckError::InvalidRequest)
        );
        assert_eq!(
            sp.acknowledge(1, 0, 2, &[ACCEPT, ACCEPT], &L),
            Err(AckError::InvalidRequest)
        );
        assert_eq!(
            sp.acknowledge(1, 0, 2, &[9], &L),
            Err(AckError::InvalidRequest)
        );
        assert_eq!(
            sp.acknowledge(1, 0, 5, &[ACCEPT], &L),
            Err(AckError::InvalidRecordState)
        );
        assert_eq!(
            sp.acknowledge(1, i64::MIN, i64::MAX, &[ACCEPT], &L),
            Err(AckError::InvalidRequest)
        );
        assert_eq!(
            sp.acknowledge(1, -5, 1, &[ACCEPT], &L),
            Err(AckError::InvalidRecordState)
        );
        assert_eq!(sp.in_flight(), 3);
    }

    #[test]
    fn a_leaving_member_releases_what_it_holds() {
        let mut sp = SharePartition::new(0);
        sp.acquire(1, 0, 2, 10, 0, &L);
        sp.acquire(2, 0, 4, 10, 0, &L);
        assert_eq!(sp.release_member(1, &L), 2);
        assert_eq!(sp.acquire(3, 0, 4, 10, 0, &L), vec![acq(0, 1, 2)]);
        assert_eq!(sp.state_of(2).map(|s| s.1), Some(1));
    }

    #[test]
    fn what_is_persisted_comes_back_as_it_was() {
        let mut sp = SharePartition::new(0);
        sp.acquire(1, 0, 6, 10, 0, &L);
        sp.acknowledge(1, 1, 1, &[ACCEPT], &L).unwrap();
        sp.acknowledge(1, 2, 2, &[REJECT], &L).unwrap();
        sp.acknowledge(1, 3, 3, &[RELEASE], &L).unwrap();
        let (start, batches) = sp.persisted();
        assert_eq!(start, 0);
        let b = |f, l, s, c| Batch {
            first_offset: f,
            last_offset: l,
            delivery_state: s,
            delivery_count: c,
        };
        assert_eq!(
            batches,
            vec![
                b(1, 1, ACKNOWLEDGED, 1),
                b(2, 2, ARCHIVED, 1),
                b(3, 3, AVAILABLE, 1)
            ]
        );
        let mut back = SharePartition::restore(start, &batches, 10);
        assert_eq!(back.end_offset(), 4);
        assert_eq!(back.state_of(0), Some((State::Available, 0)));
        assert_eq!(
            back.acquire(2, 0, 6, 10, 0, &L),
            vec![acq(0, 0, 1), acq(3, 3, 2), acq(4, 5, 1)]
        );
        back.acknowledge(2, 0, 0, &[ACCEPT], &L).unwrap();
        assert_eq!(back.start_offset(), 3);
        let done = SharePartition::restore(5, &[b(0, 6, ARCHIVED, 1)], 10);
        assert_eq!((done.start_offset(), done.in_flight()), (7, 0));
        let capped = SharePartition::restore(0, &[b(5, i64::MAX, AVAILABLE, 1)], 10);
        assert_eq!(capped.end_offset(), 10);
    }

    #[test]
    fn retention_moves_the_start() {
        let mut sp = SharePartition::new(0);
        sp.acquire(1, 0, 4, 10, 0, &L);
        sp.skip_to(2);
        assert_eq!(sp.start_offset(), 2);
        assert_eq!(sp.in_flight(), 2);
    }
}
