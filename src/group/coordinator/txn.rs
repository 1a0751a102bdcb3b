//! Offsets committed inside transactions (KIP-98, fenced by member and generation as of
//! KIP-447), as Kafka's OffsetMetadataManager handles them: TxnOffsetCommit writes the offsets
//! to the group's `__consumer_offsets` partition as a transactional batch of the producer,
//! where they stay pending; the producer's transaction marker in that partition then commits
//! them ([`Coordinator::complete_txn`]) or drops them.

use std::sync::Arc;

use kafka_protocol::ResponseError as E;

use super::Coordinator;
use super::offsets::{CommitOffset, committed_at, failed, offset_records};
use crate::group::state::State;
use crate::group::store::TxnProducer;

pub struct TxnCommitParams {
    pub group_id: String,
    /// Empty, with generation -1 and no instance id, below v3 (no member fields).
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub offsets: Vec<CommitOffset>,
}

impl Coordinator {
    /// TxnOffsetCommit: one error code per offset (in order), or one for all. A group not
    /// known here is created as a simple group for generation -1 (else ILLEGAL_GENERATION);
    /// the member checks are OffsetCommit's, except that no member is needed and a group
    /// completing a rebalance is no obstacle. Answered once the batch is written; the offsets
    /// are then pending until the producer's marker.
    pub async fn commit_txn(self: &Arc<Self>, p: TxnCommitParams) -> Result<Vec<i16>, i16> {
        let cell = match self.get(&p.group_id)? {
            Some(c) => c,
            None if p.generation < 0 => self.get_or_create(&p.group_id)?,
            None => return Err(E::IllegalGeneration.code()),
        };
        let mut g = cell.lock().await;
        if g.state == State::Dead {
            return Err(E::CoordinatorNotAvailable.code());
        }
        match &g.consumer {
            Some(c) => c
                .group
                .validate_offset_commit(&p.member_id, p.generation, true, 9)?,
            None => g.validate_offset_commit(
                &p.member_id,
                p.instance_id.as_deref(),
                p.generation,
                true,
            )?,
        }
        let (codes, records, accepted) =
            offset_records(&g.id, p.offsets, self.cfg.offset_metadata_max_bytes);
        if records.is_empty() {
            return Ok(codes);
        }
        // Indexed before the write, under the group's lock: a marker arriving meanwhile
        // waits for this group's lock, then sees the offsets.
        self.groups
            .lock()
            .unwrap()
            .txns
            .entry(p.producer_id)
            .or_default()
            .insert(g.id.clone());
        let txn = TxnProducer {
            id: p.producer_id,
            epoch: p.producer_epoch,
        };
        Ok(
            match self.write_at(&cell, &g.id, Some(txn), records).await {
                Ok(at) => {
                    for (tp, c) in committed_at(accepted, at) {
                        g.offsets.add_pending(at.partition, p.producer_id, tp, c);
                    }
                    codes
                }
                Err(code) => {
                    if !g.offsets.has_producer(p.producer_id) {
                        let id = g.id.clone();
                        self.unindex_txns(&id, [p.producer_id]);
                    }
                    failed(codes, &accepted, code)
                }
            },
        )
    }

    /// The transaction marker of `producer_id` (COMMIT if `commit`, else ABORT) has been
    /// written to `__consumer_offsets` partition `offsets_partition`: the offsets the
    /// transaction committed to groups of that partition become committed (each unless a
    /// newer plain commit of its partition came after it) or are dropped. Ok also when the
    /// producer had nothing pending there. In a cluster, a partition not Active here answers
    /// COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR: the marker must be written again once
    /// it is (its replay, or this call, then ends the transaction).
    pub async fn complete_txn(
        &self,
        offsets_partition: i32,
        producer_id: i64,
        commit: bool,
    ) -> Result<(), i16> {
        let cells: Vec<(String, Option<Arc<super::GroupCell>>)> = {
            let g = self.groups.lock().unwrap();
            if let Some(o) = &g.owned {
                o.check_partition(offsets_partition)?;
            }
            let Some(ids) = g.txns.get(&producer_id) else {
                return Ok(());
            };
            ids.iter()
                .map(|id| (id.clone(), g.map.get(id).cloned()))
                .collect()
        };
        let mut done = Vec::new();
        for (id, cell) in cells {
            let Some(cell) = cell else {
                done.push(id);
                continue;
            };
            let mut g = cell.lock().await;
            let n = g.offsets.complete(offsets_partition, producer_id, commit);
            if n > 0 {
                tracing::debug!(
                    group = %id,
                    producer_id,
                    offsets = n,
                    "transactional offsets committed"
                );
            }
            if !g.offsets.has_producer(producer_id) {
                self.unindex_txns(&id, [producer_id]);
            }
        }
        if !done.is_empty() {
            // Groups gone from the map (deleted, unloaded) hold nothing for the producer.
            let mut g = self.groups.lock().unwrap();
            let super::Groups { map, txns, .. } = &mut *g;
            if let Some(groups) = txns.get_mut(&producer_id) {
                groups.retain(|id| map.contains_key(id) || !done.contains(id));
                if groups.is_empty() {
                    txns.remove(&producer_id);
                }
            }
        }
        Ok(())
    }
}
