//! Committed offsets: OffsetCommit (member and generation checked under the group lock,
//! answered after the records are written), OffsetFetch and OffsetDelete.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::ResponseError as E;
use tokio::time::Instant;

use super::{Coordinator, offset_key, session};
use crate::broker::now_ms;
use crate::group::records::{self, Key, OffsetValue};
use crate::group::state::{Committed, State};
use crate::group::store::Records;

pub struct CommitOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

pub struct CommitParams {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    /// OffsetCommit v9+ answers GROUP_ID_NOT_FOUND rather than ILLEGAL_GENERATION.
    pub version: i16,
    pub offsets: Vec<CommitOffset>,
}

/// One partition's committed offset as OffsetFetch reports it.
pub struct FetchedOffset {
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
}

impl Coordinator {
    /// Commits offsets; answers one error code per offset (in order), or one for all.
    pub async fn commit(self: &Arc<Self>, p: CommitParams) -> Result<Vec<i16>, i16> {
        let cell = match self.get(&p.group_id)? {
            Some(c) => c,
            None if p.generation < 0 => self.get_or_create(&p.group_id)?,
            None if p.version >= 9 => return Err(E::GroupIdNotFound.code()),
            None => return Err(E::IllegalGeneration.code()),
        };
        let mut g = cell.lock().await;
        if g.state == State::Dead {
            return Err(E::CoordinatorNotAvailable.code());
        }
        let simple = p.generation < 0 && g.state == State::Empty;
        if !simple {
            if p.generation >= 0 || !p.member_id.is_empty() || p.instance_id.is_some() {
                if g.is_static_fenced(p.instance_id.as_deref(), &p.member_id) {
                    return Err(E::FencedInstanceId.code());
                }
                if p.instance_id
                    .as_ref()
                    .is_some_and(|i| !g.statics.contains_key(i))
                    || !g.members.contains_key(&p.member_id)
                {
                    return Err(E::UnknownMemberId.code());
                }
                if p.generation != g.generation {
                    return Err(E::IllegalGeneration.code());
                }
            } else if g.state != State::Empty {
                return Err(E::UnknownMemberId.code());
            }
            if g.state == State::CompletingRebalance {
                return Err(E::RebalanceInProgress.code());
            }
            if let Some(m) = g.members.get_mut(&p.member_id) {
                m.deadline = Instant::now() + session(m);
            }
        }
        let now = now_ms();
        let mut codes = vec![0i16; p.offsets.len()];
        let mut records: Records = Vec::new();
        let mut accepted = Vec::new();
        for (i, o) in p.offsets.into_iter().enumerate() {
            let metadata = o.metadata.unwrap_or_default();
            if metadata.len() > self.cfg.offset_metadata_max_bytes {
                codes[i] = E::OffsetMetadataTooLarge.code();
                continue;
            }
            let value = OffsetValue {
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata,
                commit_timestamp: now,
            };
            let key = Key::Offset {
                group: g.id.clone(),
                topic: o.topic.clone(),
                partition: o.partition,
            };
            records.push((
                records::encode_key(&key),
                Some(records::encode_offset(&value)),
            ));
            accepted.push((i, (o.topic, o.partition), Committed::from(value)));
        }
        if records.is_empty() {
            return Ok(codes);
        }
        match self.write(&cell, &g.id, records).await {
            Ok(()) => {
                for (_, k, c) in accepted {
                    g.offsets.insert(k, c);
                }
            }
            Err(code) => {
                for (i, _, _) in accepted {
                    codes[i] = code;
                }
            }
        }
        Ok(codes)
    }

    /// Committed offsets of `topics` (None: all). An unknown group has none.
    pub async fn fetch_offsets(
        &self,
        group_id: &str,
        topics: Option<Vec<(String, Vec<i32>)>>,
    ) -> Result<Vec<(String, Vec<FetchedOffset>)>, i16> {
        let cell = self.get(group_id)?;
        let g = match &cell {
            Some(c) => Some(c.lock().await),
            None => None,
        };
        if g.as_ref().is_some_and(|g| g.state == State::Dead) {
            return Err(E::GroupIdNotFound.code());
        }
        let lookup = |t: &str, p: i32| {
            let c = g.as_ref().and_then(|g| g.offsets.get(&(t.to_string(), p)));
            match c {
                Some(c) => FetchedOffset {
                    partition: p,
                    offset: c.offset,
                    leader_epoch: c.leader_epoch,
                    metadata: c.metadata.clone(),
                },
                None => FetchedOffset {
                    partition: p,
                    offset: -1,
                    leader_epoch: -1,
                    metadata: String::new(),
                },
            }
        };
        Ok(match topics {
            Some(ts) => ts
                .into_iter()
                .map(|(t, ps)| {
                    let v = ps.into_iter().map(|p| lookup(&t, p)).collect();
                    (t, v)
                })
                .collect(),
            None => {
                let mut by_topic: HashMap<String, Vec<i32>> = HashMap::new();
                if let Some(g) = &g {
                    for (t, p) in g.offsets.keys() {
                        by_topic.entry(t.clone()).or_default().push(*p);
                    }
                }
                let mut v: Vec<(String, Vec<FetchedOffset>)> = by_topic
                    .into_iter()
                    .map(|(t, mut ps)| {
                        ps.sort();
                        let o = ps.into_iter().map(|p| lookup(&t, p)).collect();
                        (t, o)
                    })
                    .collect();
                v.sort_by(|a, b| a.0.cmp(&b.0));
                v
            }
        })
    }

    /// OffsetDelete: per (topic, partition) an error code; or one error for the group.
    pub async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: Vec<(String, i32)>,
    ) -> Result<Vec<i16>, i16> {
        let Some(cell) = self.get(group_id)? else {
            return Err(E::GroupIdNotFound.code());
        };
        let mut g = cell.lock().await;
        match g.state {
            State::Dead => return Err(E::GroupIdNotFound.code()),
            State::Empty => {}
            _ if g.protocol_type.as_deref() != Some("consumer") => {
                return Err(E::NonEmptyGroup.code());
            }
            _ => {}
        }
        let mut codes = Vec::new();
        let mut records: Records = Vec::new();
        let mut removed = Vec::new();
        for (t, p) in partitions {
            if g.state != State::Empty && g.is_subscribed_to(&t) {
                codes.push(E::GroupSubscribedToTopic.code());
                continue;
            }
            codes.push(0);
            if g.offsets.contains_key(&(t.clone(), p)) {
                records.push((offset_key(&g.id, &t, p), None));
                removed.push((t, p));
            }
        }
        if !records.is_empty() {
            self.write(&cell, &g.id, records).await?;
            for k in removed {
                g.offsets.remove(&k);
            }
        }
        Ok(codes)
    }
}
