//! Producer id allocation. Ids are handed out from blocks of [`BLOCK_SIZE`]; before the first id
//! of a block is used, the start of the *next* block is persisted (written beside and renamed
//! into place), so after any restart, clean or not, allocation resumes above every id ever
//! handed out. A crash wastes at most the rest of one block.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result, bail};

const FILE_NAME: &str = "sluice-producer-ids";
pub const BLOCK_SIZE: i64 = 1000;

struct Block {
    next: i64,
    end: i64,
}

pub struct ProducerIdManager {
    path: PathBuf,
    block: Mutex<Block>,
}

impl ProducerIdManager {
    /// Opens the allocator whose state lives in `dir` (the first log dir).
    pub fn open(dir: &Path) -> Result<ProducerIdManager> {
        let path = dir.join(FILE_NAME);
        let next = next_unused(dir)?;
        // Nothing of the block starting at `next` has been handed out yet: the first
        // allocation reserves it.
        Ok(ProducerIdManager {
            path,
            block: Mutex::new(Block { next, end: next }),
        })
    }

    /// A producer id never returned before by this broker.
    pub fn allocate(&self) -> Result<i64> {
        let mut b = self.block.lock().unwrap();
        if b.next >= b.end {
            let end = b.next.checked_add(BLOCK_SIZE).filter(|e| *e > 0);
            let Some(end) = end else {
                bail!("producer ids exhausted");
            };
            persist(&self.path, end)?;
            b.end = end;
        }
        let id = b.next;
        b.next += 1;
        Ok(id)
    }
}

/// The id above every id this allocator ever handed out from `dir` (0 when it never ran
/// there): what a new allocator for the same producers must start at.
pub fn next_unused(dir: &Path) -> Result<i64> {
    let path = dir.join(FILE_NAME);
    match fs::read_to_string(&path) {
        Ok(text) => parse(&text).with_context(|| format!("{} is unreadable", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn parse(text: &str) -> Result<i64> {
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("next.block.start=") {
            let n: i64 = v.trim().parse()?;
            if n < 0 {
                bail!("negative next.block.start");
            }
            return Ok(n);
        }
    }
    bail!("no next.block.start line")
}

fn persist(path: &Path, next_block_start: i64) -> Result<()> {
    let text = format!("version=1\nnext.block.start={next_block_start}\n");
    crate::log::checkpoint::write_atomically(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_across_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        let m = ProducerIdManager::open(tmp.path()).unwrap();
        let a: Vec<i64> = (0..3).map(|_| m.allocate().unwrap()).collect();
        assert_eq!(a, vec![0, 1, 2]);
        drop(m);
        // as after kill -9: the rest of the block is skipped
        let m = ProducerIdManager::open(tmp.path()).unwrap();
        assert_eq!(m.allocate().unwrap(), BLOCK_SIZE);
        for _ in 0..BLOCK_SIZE {
            m.allocate().unwrap();
        }
        let m2 = ProducerIdManager::open(tmp.path()).unwrap();
        assert_eq!(m2.allocate().unwrap(), 3 * BLOCK_SIZE);
        std::fs::write(tmp.path().join(FILE_NAME), "garbage").unwrap();
        assert!(ProducerIdManager::open(tmp.path()).is_err());
    }
}
