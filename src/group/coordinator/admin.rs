//! Administration: DescribeGroups, ListGroups, DeleteGroups, and the periodic expiry of
//! offsets (which deletes empty groups left without offsets).

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use tracing::info;

use super::{Coordinator, group_tombstones, offset_key};
use crate::clock::now_ms;
use crate::group::offset_state::Committed;
use crate::group::state::{Member, State};
use crate::group::store::Records;

pub struct DescribedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

pub struct Described {
    pub state: State,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<DescribedMember>,
}

pub struct Listed {
    pub group_id: String,
    pub protocol_type: String,
    pub state: State,
    /// "classic" or "consumer".
    pub group_type: &'static str,
    /// The state as Kafka names it for this type of group.
    pub state_name: &'static str,
}

impl Coordinator {
    /// The group, None if unknown here; the error if it is not coordinated here.
    pub async fn describe(&self, group_id: &str) -> Result<Option<Described>, i16> {
        let Some(cell) = self.get(group_id)? else {
            return Ok(None);
        };
        let g = cell.lock().await;
        if g.consumer.is_some() {
            return Err(E::GroupIdNotFound.code());
        }
        let stable = g.state == State::Stable;
        let protocol = if stable {
            g.protocol.clone().unwrap_or_default()
        } else {
            String::new()
        };
        let mut ms: Vec<&Member> = g.members.values().collect();
        ms.sort_by_key(|m| m.seq);
        Ok(Some(Described {
            state: g.state,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            members: ms
                .into_iter()
                .map(|m| DescribedMember {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(&protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
            protocol,
        }))
    }

    pub async fn list(&self) -> Vec<Listed> {
        let mut out = Vec::new();
        for cell in self.cells() {
            let g = cell.lock().await;
            if g.state == State::Dead {
                continue;
            }
            let (group_type, state_name) = match &g.consumer {
                Some(c) => ("consumer", c.group.state().name()),
                None => ("classic", g.state.name()),
            };
            out.push(Listed {
                group_id: g.id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state,
                group_type,
                state_name,
            });
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// DeleteGroups for one group: tombstones for its offsets and metadata.
    pub async fn delete_group(&self, group_id: &str) -> i16 {
        let cell = match self.get(group_id) {
            Ok(Some(c)) => c,
            Ok(None) => return E::GroupIdNotFound.code(),
            Err(code) => return code,
        };
        let mut g = cell.lock().await;
        match g.state {
            State::Dead => return E::GroupIdNotFound.code(),
            State::Empty => {}
            _ => return E::NonEmptyGroup.code(),
        }
        // Tombstones for the committed offsets and for those only pending in transactions
        // (the transactions stay open; their markers find nothing), as Kafka.
        let mut records: Records = g
            .offsets
            .partitions()
            .iter()
            .map(|(t, p)| (offset_key(&g.id, t, *p), None))
            .collect();
        records.extend(group_tombstones(&g));
        if let Err(e) = self.write(&cell, &g.id, records).await {
            return e;
        }
        let producers: Vec<i64> = g.offsets.open_txns().map(|(_, p)| p).collect();
        g.offsets.clear();
        g.transition(State::Dead, now_ms());
        self.unindex_txns(group_id, producers);
        self.forget(&cell, group_id);
        info!(group = group_id, "group deleted");
        0
    }

    /// Expires offsets per `offsets.retention.minutes` (Kafka's rules: an empty group's
    /// offsets once it has been empty that long, a simple group's once not committed that
    /// long; never one with an offset pending in an open transaction) and deletes empty
    /// groups left without offsets and without open transactions.
    pub async fn expire_offsets(&self, now: i64) {
        let retention = self.cfg.offsets_retention_ms;
        for cell in self.cells() {
            let mut g = cell.lock().await;
            // The time an offset's retention counts from: the moment an empty group became
            // empty (else its commit time); a simple group's commit time. None: kept.
            let since: Option<i64> = match &g.protocol_type {
                Some(_) if g.state == State::Empty => Some(g.state_ts),
                Some(_) => continue,
                None => None,
            };
            let base = |c: &Committed| since.filter(|t| *t > 0).unwrap_or(c.commit_timestamp);
            let expired: Vec<(String, i32)> = g
                .offsets
                .committed()
                .iter()
                .filter(|(k, c)| now - base(c) >= retention && !g.offsets.has_pending(k))
                .map(|(k, _)| k.clone())
                .collect();
            let mut records: Records = expired
                .iter()
                .map(|(t, p)| (offset_key(&g.id, t, *p), None))
                .collect();
            let dead = g.state == State::Empty
                && g.offsets.committed().len() == expired.len()
                && !g.offsets.has_open_txns();
            if dead {
                records.extend(group_tombstones(&g));
            }
            if records.is_empty() || self.write(&cell, &g.id, records).await.is_err() {
                continue;
            }
            for k in &expired {
                g.offsets.delete(k);
            }
            if !expired.is_empty() {
                info!(group = %g.id, count = expired.len(), "expired offsets");
            }
            if dead {
                g.transition(State::Dead, now);
                let id = g.id.clone();
                self.forget(&cell, &id);
            }
        }
    }
}
