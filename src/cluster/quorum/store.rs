//! The small durable pieces of a quorum directory: its `.lock` and its `quorum-state` file.
//!
//! `quorum-state` holds what Raft must never forget and that is not in the log: the vote (term
//! and whom this node voted for), the committed log id, the last purged log id, and the
//! cluster id. It is rewritten whole on every change (written beside, synced, renamed into
//! place, directory synced) before the caller is told the change is durable, so a crash leaves
//! the old or the new contents. Format: `SLQ1`, CRC-32C of the rest (big endian), then the
//! postcard encoding of [`Persisted`].

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result, bail};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use super::types::{LogId, Vote};
use crate::cluster::controller::write_atomically;

const STATE_FILE: &str = "quorum-state";
const STATE_MAGIC: &[u8; 4] = b"SLQ1";

/// An exclusive `flock` on `<dir>/.lock`, held for as long as the value lives, so two processes
/// (or two nodes in one process) never open the same quorum directory.
pub struct DirLock {
    _lock: Flock<File>,
}

impl DirLock {
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        let path = dir.join(".lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => Ok(DirLock { _lock: lock }),
            Err((_, errno)) => bail!(
                "metadata log dir {} is in use by another process ({}): {errno}",
                dir.display(),
                path.display()
            ),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Persisted {
    pub cluster_id: Option<String>,
    pub vote: Option<Vote>,
    pub committed: Option<LogId>,
    pub purged: Option<LogId>,
}

/// The one owner of `quorum-state`. Shared by the log store (vote, committed, purged) and the
/// transport (cluster id); each setter returns once the new contents are on disk.
pub struct StateFile {
    path: PathBuf,
    current: Mutex<Persisted>,
}

impl StateFile {
    pub fn open(dir: &Path) -> Result<StateFile> {
        let path = dir.join(STATE_FILE);
        let current = match std::fs::read(&path) {
            Ok(bytes) => {
                decode_state(&bytes).with_context(|| format!("{} is corrupt", path.display()))?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Persisted::default(),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        Ok(StateFile {
            path,
            current: Mutex::new(current),
        })
    }

    pub fn get(&self) -> Persisted {
        self.current.lock().unwrap().clone()
    }

    /// Applies `change` and persists the result; on a write error the in-memory copy is left
    /// as it was, so what `get` reports is always what is on disk.
    pub fn update(&self, change: impl FnOnce(&mut Persisted)) -> std::io::Result<()> {
        let mut current = self.current.lock().unwrap();
        let mut next = current.clone();
        change(&mut next);
        if next == *current {
            return Ok(());
        }
        write_atomically(&self.path, &encode_state(&next)).map_err(std::io::Error::other)?;
        *current = next;
        Ok(())
    }
}

fn encode_state(state: &Persisted) -> Vec<u8> {
    let body = postcard::to_stdvec(state).expect("postcard encoding of an in-memory value");
    let mut out = Vec::with_capacity(8 + body.len());
    out.extend_from_slice(STATE_MAGIC);
    out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

fn decode_state(bytes: &[u8]) -> Result<Persisted> {
    if bytes.len() < 8 || &bytes[..4] != STATE_MAGIC {
        bail!("bad header");
    }
    let crc = u32::from_be_bytes(bytes[4..8].try_into().unwrap());
    let body = &bytes[8..];
    if crc32c::crc32c(body) != crc {
        bail!("CRC mismatch");
    }
    Ok(postcard::from_bytes(body)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_survives_reopen_and_rejects_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateFile::open(dir.path()).unwrap();
        assert_eq!(state.get(), Persisted::default());
        state
            .update(|s| {
                s.cluster_id = Some("abc".into());
                s.vote = Some(Vote::new(3, 2));
            })
            .unwrap();
        drop(state);
        let state = StateFile::open(dir.path()).unwrap();
        assert_eq!(state.get().cluster_id.as_deref(), Some("abc"));
        assert_eq!(state.get().vote, Some(Vote::new(3, 2)));

        let path = dir.path().join(STATE_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(&path, bytes).unwrap();
        assert!(StateFile::open(dir.path()).is_err());
    }

    #[test]
    fn second_lock_on_a_dir_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(dir.path()).unwrap();
        let err = DirLock::acquire(dir.path()).err().unwrap();
        assert!(err.to_string().contains("in use"), "{err}");
        drop(first);
        DirLock::acquire(dir.path()).unwrap();
    }
}
