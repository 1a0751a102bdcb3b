//! DescribeTransactions and ListTransactions over the transactional ids coordinated here.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

/// DescribeTransactions' view of one id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    pub state: TxnState,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub start_ms: i64,
    pub topics: BTreeMap<String, Vec<i32>>,
}

/// ListTransactions' view of one id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub transactional_id: String,
    pub producer_id: i64,
    pub state: TxnState,
}

/// ListTransactions' filters (empty: no filter).
#[derive(Debug)]
pub struct ListFilter {
    pub states: Vec<String>,
    pub producer_ids: Vec<i64>,
    /// Only transactions running longer than this (-1: any).
    pub min_duration_ms: i64,
    /// A full match on the transactional id.
    pub pattern: Option<regex::Regex>,
}

impl Default for ListFilter {
    fn default() -> Self {
        ListFilter {
            states: Vec::new(),
            producer_ids: Vec::new(),
            min_duration_ms: -1,
            pattern: None,
        }
    }
}

impl Coordinator {
    /// DescribeTransactions for one id.
    pub fn describe(&self, id: &str) -> Result<Described, i16> {
        if id.is_empty() {
            return Err(INVALID_REQUEST);
        }
        let entry = self.lookup(id)?.1.ok_or(TRANSACTIONAL_ID_NOT_FOUND)?;
        let md = entry.lock().unwrap();
        if md.state == TxnState::Dead {
            return Err(TRANSACTIONAL_ID_NOT_FOUND);
        }
        let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for (t, p) in &md.partitions {
            topics.entry(t.clone()).or_default().push(*p);
        }
        Ok(Described {
            state: md.state,
            producer_id: md.producer_id,
            producer_epoch: md.producer_epoch,
            timeout_ms: md.timeout_ms,
            start_ms: md.start_ms,
            topics,
        })
    }

    /// ListTransactions over the ids coordinated here: the matching ones and the state
    /// filters that name no state; COORDINATOR_LOAD_IN_PROGRESS while a partition loads.
    pub fn list(&self, f: &ListFilter, now: i64) -> Result<(Vec<Listed>, Vec<String>), i16> {
        let entries: Vec<Entry> = {
            let g = self.inner.lock().unwrap();
            if g.owned.any_loading() {
                return Err(COORDINATOR_LOAD_IN_PROGRESS);
            }
            g.txns
                .iter()
                .filter(|(id, _)| g.owned.check(id).is_ok())
                .map(|(_, e)| e.clone())
                .collect()
        };
        let mut states = BTreeSet::new();
        let mut unknown = Vec::new();
        for s in &f.states {
            match TxnState::from_name(s) {
                Some(st) => {
                    states.insert(st);
                }
                None => unknown.push(s.clone()),
            }
        }
        let mut out = Vec::new();
        for e in entries {
            let md = e.lock().unwrap();
            let keep = md.state != TxnState::Dead
                && (f.producer_ids.is_empty() || f.producer_ids.contains(&md.producer_id))
                && (f.states.is_empty() || states.contains(&md.state))
                && (f.min_duration_ms < 0 || now - md.start_ms > f.min_duration_ms)
                && f.pattern
                    .as_ref()
                    .is_none_or(|r| r.is_match(&md.transactional_id));
            if keep {
                out.push(Listed {
                    transactional_id: md.transactional_id.clone(),
                    producer_id: md.producer_id,
                    state: md.state,
                });
            }
        }
        out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok((out, unknown))
    }
}
