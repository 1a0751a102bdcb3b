//! Committed offsets: OffsetCommit (member and generation checked under the group lock,
//! answered after the records are written), OffsetFetch (with require_stable: not while a
//! transaction holds an offset) and OffsetDelete.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::ResponseError as E;

use super::{Coordinator, offset_key};
use crate::clock::now_ms;
use crate::group::offset_state::{Committed, TopicPartition};
use crate::group::records::{self, OffsetValue};
use crate::group::state::State;
use crate::group::store::{Appended, Records};

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
    /// UNSTABLE_OFFSET_COMMIT, or 0.
    pub error: i16,
}

/// The offsets of a commit the group accepted: index in the request, partition, value (its
/// record offset is set once written).
pub(super) type Accepted = Vec<(usize, TopicPartition, Committed)>;

/// The records of a commit (plain or transactional), one error code per offset (0, or
/// OFFSET_METADATA_TOO_LARGE for metadata over `offset.metadata.max.bytes`), and the offsets
/// the records hold, in record order.
pub(super) fn offset_records(
    group: &str,
    offsets: Vec<CommitOffset>,
    metadata_max_bytes: usize,
) -> (Vec<i16>, Records, Accepted) {
    let now = now_ms();
    let mut codes = vec![0i16; offsets.len()];
    let mut records: Records = Vec::new();
    let mut accepted = Vec::new();
    for (i, o) in offsets.into_iter().enumerate() {
        let metadata = o.metadata.unwrap_or_default();
        if metadata.len() > metadata_max_bytes {
            codes[i] = E::OffsetMetadataTooLarge.code();
            continue;
        }
        let value = OffsetValue {
            offset: o.offset,
            leader_epoch: o.leader_epoch,
            metadata,
            commit_timestamp: now,
        };
        records.push((
            offset_key(group, &o.topic, o.partition),
            Some(records::encode_offset(&value)),
        ));
        accepted.push((i, (o.topic, o.partition), Committed::from_record(value, -1)));
    }
    (codes, records, accepted)
}

/// The accepted offsets with the offsets of the records that hold them.
pub(super) fn committed_at(
    accepted: Accepted,
    at: Appended,
) -> impl Iterator<Item = (TopicPartition, Committed)> {
    accepted
        .into_iter()
        .enumerate()
        .map(move |(j, (_, tp, mut c))| {
            c.record_offset = at.base_offset + j as i64;
            (tp, c)
        })
}

/// The codes of a commit whose write failed with `code`.
pub(super) fn failed(mut codes: Vec<i16>, accepted: &Accepted, code: i16) -> Vec<i16> {
    for (i, _, _) in accepted {
        codes[*i] = code;
    }
    codes
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
        match &g.consumer {
            Some(c) => {
                c.group
                    .validate_offset_commit(&p.member_id, p.generation, false, p.version)?
            }
            None => g.validate_offset_commit(
                &p.member_id,
                p.instance_id.as_deref(),
                p.generation,
                false,
            )?,
        }
        if let Some(m) = g.members.get_mut(&p.member_id) {
            crate::group::membership::touch(m, self.now());
        }
        let (codes, records, accepted) =
            offset_records(&g.id, p.offsets, self.cfg.offset_metadata_max_bytes);
        if records.is_empty() {
            return Ok(codes);
        }
        Ok(match self.write_at(&cell, &g.id, None, records).await {
            Ok(at) => {
                for (k, c) in committed_at(accepted, at) {
                    g.offsets.commit(k, c);
                }
                codes
            }
            Err(code) => failed(codes, &accepted, code),
        })
    }

    /// Committed offsets of `topics` (None: all). An unknown group has none. With
    /// `require_stable`, a partition with an offset pending in an open transaction answers
    /// UNSTABLE_OFFSET_COMMIT instead (the client retries until the transaction ends); a
    /// partition with only a pending offset is not among "all".
    pub async fn fetch_offsets(
        &self,
        group_id: &str,
        topics: Option<Vec<(String, Vec<i32>)>>,
        require_stable: bool,
    ) -> Result<Vec<(String, Vec<FetchedOffset>)>, i16> {
        self.fetch_offsets_as(group_id, topics, require_stable, None, -1)
            .await
    }

    /// [`Coordinator::fetch_offsets`] by a member of a consumer-protocol group (OffsetFetch
    /// v9+: member id and epoch; UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH).
    pub async fn fetch_offsets_as(
        &self,
        group_id: &str,
        topics: Option<Vec<(String, Vec<i32>)>>,
        require_stable: bool,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<Vec<(String, Vec<FetchedOffset>)>, i16> {
        let cell = self.get(group_id)?;
        let g = match &cell {
            Some(c) => Some(c.lock().await),
            None => None,
        };
        if g.as_ref().is_some_and(|g| g.state == State::Dead) {
            return Err(E::GroupIdNotFound.code());
        }
        if let Some(c) = g.as_ref().and_then(|g| g.consumer.as_ref()) {
            c.group.validate_offset_fetch(member_id, member_epoch)?;
        }
        let lookup = |t: &str, p: i32| {
            let tp = (t.to_string(), p);
            let unstable = require_stable && g.as_ref().is_some_and(|g| g.offsets.has_pending(&tp));
            match g.as_ref().and_then(|g| g.offsets.get(&tp)) {
                Some(c) if !unstable => FetchedOffset {
                    partition: p,
                    offset: c.offset,
                    leader_epoch: c.leader_epoch,
                    metadata: c.metadata.clone(),
                    error: 0,
                },
                _ => FetchedOffset {
                    partition: p,
                    offset: -1,
                    leader_epoch: -1,
                    metadata: String::new(),
                    error: if unstable {
                        E::UnstableOffsetCommit.code()
                    } else {
                        0
                    },
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
                    for (t, p) in g.offsets.committed().keys() {
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
            // A tombstone also for an offset only pending in a transaction, as Kafka.
            let tp = (t, p);
            if g.offsets.get(&tp).is_some() || g.offsets.has_pending(&tp) {
                records.push((offset_key(&g.id, &tp.0, p), None));
                removed.push(tp);
            }
        }
        if !records.is_empty() {
            self.write(&cell, &g.id, records).await?;
            for k in removed {
                g.offsets.delete(&k);
            }
        }
        Ok(codes)
    }
}
