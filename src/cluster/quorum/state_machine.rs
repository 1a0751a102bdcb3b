//! The bridge from openraft's state machine interface to Sluice's [`StateMachine`], and the
//! snapshot file.
//!
//! The state machine lives in memory; durability comes from the log plus the newest snapshot.
//! At start-up the snapshot (if any) is restored, then openraft re-applies the log from there
//! up to the persisted committed index, so a node serves its state before any leader exists.
//!
//! `<dir>/snapshot`: `SLQS`, CRC-32C (big endian) of everything after it, the length of the
//! metadata (u32 big endian), the postcard [`SnapshotMeta`] (last applied log id and
//! membership), then the state machine's own bytes. It is written beside and renamed into
//! place with a directory sync; a snapshot is only ever replaced by a newer one.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, RaftSnapshotBuilder, Snapshot, StorageIOError, StoredMembership};

use super::StateMachine;
use super::types::{LogId, Membership, RaftEntry, SnapshotMeta, StorageError, TypeConfig};
use crate::cluster::controller::write_atomically;

const SNAPSHOT_FILE: &str = "snapshot";
const SNAPSHOT_MAGIC: &[u8; 4] = b"SLQS";

/// The current snapshot, shared by the state machine and the (spawned) snapshot builders.
struct SnapshotSlot {
    path: PathBuf,
    current: Mutex<Option<(SnapshotMeta, Arc<Vec<u8>>)>>,
}

impl SnapshotSlot {
    /// Persists `data` as the current snapshot unless one at least as new is already there
    /// (a build that raced with an installed snapshot).
    fn store(&self, meta: &SnapshotMeta, data: Arc<Vec<u8>>) -> Result<()> {
        let mut current = self.current.lock().unwrap();
        if let Some((have, _)) = current.as_ref()
            && have.last_log_id >= meta.last_log_id
        {
            return Ok(());
        }
        write_atomically(&self.path, &encode_snapshot(meta, &data))?;
        *current = Some((meta.clone(), data));
        Ok(())
    }

    fn get(&self) -> Option<Snapshot<TypeConfig>> {
        let current = self.current.lock().unwrap();
        current.as_ref().map(|(meta, data)| Snapshot {
            meta: meta.clone(),
            snapshot: Box::new(Cursor::new(data.as_ref().clone())),
        })
    }
}

fn encode_snapshot(meta: &SnapshotMeta, data: &[u8]) -> Vec<u8> {
    let meta = postcard::to_stdvec(meta).expect("postcard encoding of an in-memory value");
    let mut body = Vec::with_capacity(4 + meta.len() + data.len());
    body.extend_from_slice(&(meta.len() as u32).to_be_bytes());
    body.extend_from_slice(&meta);
    body.extend_from_slice(data);
    let mut out = Vec::with_capacity(8 + body.len());
    out.extend_from_slice(SNAPSHOT_MAGIC);
    out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

fn decode_snapshot(bytes: &[u8]) -> Result<(SnapshotMeta, Vec<u8>)> {
    if bytes.len() < 12 || &bytes[..4] != SNAPSHOT_MAGIC {
        bail!("bad header");
    }
    let crc = u32::from_be_bytes(bytes[4..8].try_into().unwrap());
    let body = &bytes[8..];
    if crc32c::crc32c(body) != crc {
        bail!("CRC mismatch");
    }
    let meta_len = u32::from_be_bytes(body[..4].try_into().unwrap()) as usize;
    if body.len() - 4 < meta_len {
        bail!("metadata length {meta_len} past the end");
    }
    let meta = postcard::from_bytes(&body[4..4 + meta_len])?;
    Ok((meta, body[4 + meta_len..].to_vec()))
}

fn any(e: anyhow::Error) -> openraft::AnyError {
    openraft::AnyError::error(format!("{e:#}"))
}

/// What openraft drives: the application's state machine plus the Raft bookkeeping around it.
pub struct SmStore<S: StateMachine> {
    sm: S,
    applied: Option<LogId>,
    membership: Membership,
    slot: Arc<SnapshotSlot>,
    builds: u64,
}

impl<S: StateMachine> SmStore<S> {
    /// Restores `sm` from `<dir>/snapshot` when there is one.
    pub fn open(dir: &Path, mut sm: S) -> Result<SmStore<S>> {
        let path = dir.join(SNAPSHOT_FILE);
        let mut applied = None;
        let mut membership = Membership::default();
        let mut current = None;
        match std::fs::read(&path) {
            Ok(bytes) => {
                let (meta, data) = decode_snapshot(&bytes)
                    .with_context(|| format!("snapshot {} is corrupt", path.display()))?;
                let index = meta.last_log_id.map_or(0, |l| l.index);
                sm.restore(index, &data)
                    .with_context(|| format!("cannot restore snapshot {}", path.display()))?;
                applied = meta.last_log_id;
                membership = meta.last_membership.clone();
                current = Some((meta, Arc::new(data)));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
        Ok(SmStore {
            sm,
            applied,
            membership,
            slot: Arc::new(SnapshotSlot {
                path,
                current: Mutex::new(current),
            }),
            builds: 0,
        })
    }
}

/// Builds a snapshot from a copy of the state taken when the build was asked for.
pub struct SnapshotBuilder {
    meta: SnapshotMeta,
    data: Arc<Vec<u8>>,
    slot: Arc<SnapshotSlot>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        self.slot
            .store(&self.meta, self.data.clone())
            .map_err(|e| StorageIOError::write_snapshot(Some(self.meta.signature()), any(e)))?;
        Ok(Snapshot {
            meta: self.meta.clone(),
            snapshot: Box::new(Cursor::new(self.data.as_ref().clone())),
        })
    }
}

impl<S: StateMachine> RaftStateMachine<TypeConfig> for SmStore<S> {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, Membership), StorageError> {
        Ok((self.applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, StorageError>
    where
        I: IntoIterator<Item = RaftEntry> + Send,
        I::IntoIter: Send,
    {
        let mut out = Vec::new();
        for entry in entries {
            self.applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(record) => self.sm.apply(entry.log_id.index, &record.0),
                EntryPayload::Membership(m) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), m);
                }
            }
            out.push(());
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        self.builds += 1;
        let (term, index) = self.applied.map_or((0, 0), |l| (l.leader_id.term, l.index));
        SnapshotBuilder {
            meta: SnapshotMeta {
                last_log_id: self.applied,
                last_membership: self.membership.clone(),
                snapshot_id: format!("{term}-{index}-{}", self.builds),
            },
            data: Arc::new(self.sm.snapshot()),
            slot: self.slot.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let index = meta.last_log_id.map_or(0, |l| l.index);
        let signature = Some(meta.signature());
        self.sm
            .restore(index, &data)
            .map_err(|e| StorageIOError::write_snapshot(signature.clone(), any(e)))?;
        self.applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        self.slot
            .store(meta, Arc::new(data))
            .map_err(|e| StorageIOError::write_snapshot(signature, any(e)))?;
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        Ok(self.slot.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_file_round_trips_and_detects_corruption() {
        let meta = SnapshotMeta {
            last_log_id: Some(LogId::new(openraft::CommittedLeaderId::new(2, 1), 7)),
            last_membership: Membership::default(),
            snapshot_id: "2-7-1".into(),
        };
        let bytes = encode_snapshot(&meta, b"state bytes");
        let (m, d) = decode_snapshot(&bytes).unwrap();
        assert_eq!(m, meta);
        assert_eq!(d, b"state bytes");
        for i in [3, 9, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[i] ^= 1;
            assert!(decode_snapshot(&bad).is_err(), "flip at {i}");
        }
        assert!(decode_snapshot(&bytes[..bytes.len() - 2]).is_err());
    }
}
