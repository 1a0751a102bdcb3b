//! `<base>.txnindex`: the aborted transactions whose ABORT markers are in one segment
//! (Kafka's TransactionIndex), for read_committed fetches to tell consumers which records to
//! drop.
//!
//! Entries are 34 bytes, big-endian: version i16 (0), producer id i64, first offset i64,
//! last offset i64 (the marker's), last stable offset i64 (the LSO once that transaction was
//! done). They are in marker order, so last offsets increase. A transaction may start in an
//! earlier segment than its marker. The file exists only once an entry is written, as in
//! Kafka; entries are also kept in memory (the file is read once, at open).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use tracing::warn;

use super::remove_if_exists;

pub const TXN_INDEX_SUFFIX: &str = ".txnindex";
pub const ENTRY_SIZE: usize = 34;
const VERSION: i16 = 0;

/// One aborted transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    fn encode(&self) -> [u8; ENTRY_SIZE] {
        let mut b = [0u8; ENTRY_SIZE];
        b[0..2].copy_from_slice(&VERSION.to_be_bytes());
        b[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        b[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        b[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        b[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<AbortedTxn> {
        let at = |i: usize| i64::from_be_bytes(b[i..i + 8].try_into().unwrap());
        (i16::from_be_bytes([b[0], b[1]]) == VERSION).then(|| AbortedTxn {
            producer_id: at(2),
            first_offset: at(10),
            last_offset: at(18),
            last_stable_offset: at(26),
        })
    }
}

/// The transaction index of one segment.
pub struct TxnIndex {
    path: PathBuf,
    file: Option<File>,
    entries: Vec<AbortedTxn>,
}

impl TxnIndex {
    /// The index at `path`, read if the file exists. A torn last entry, or entries from an
    /// unknown version on, are cut off (with a warning).
    pub fn open(path: PathBuf) -> io::Result<TxnIndex> {
        let mut idx = TxnIndex {
            path,
            file: None,
            entries: Vec::new(),
        };
        let bytes = match std::fs::read(&idx.path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(idx),
            Err(e) => return Err(e),
        };
        for chunk in bytes.chunks_exact(ENTRY_SIZE) {
            match AbortedTxn::decode(chunk) {
                Some(t)
                    if idx
                        .entries
                        .last()
                        .is_none_or(|l| l.last_offset < t.last_offset) =>
                {
                    idx.entries.push(t)
                }
                _ => break,
            }
        }
        let valid = (idx.entries.len() * ENTRY_SIZE) as u64;
        let file = OpenOptions::new().read(true).write(true).open(&idx.path)?;
        if valid != bytes.len() as u64 {
            warn!(file = %idx.path.display(), valid, len = bytes.len(), "cutting an invalid transaction index tail");
            file.set_len(valid)?;
        }
        idx.file = Some(file);
        Ok(idx)
    }

    /// An index for a new segment: a stale file of the same name is removed.
    pub fn create(path: PathBuf) -> io::Result<TxnIndex> {
        remove_if_exists(&path)?;
        Ok(TxnIndex {
            path,
            file: None,
            entries: Vec::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The last entry's marker offset.
    pub fn last_offset(&self) -> Option<i64> {
        self.entries.last().map(|t| t.last_offset)
    }

    /// Appends `txn`, whose marker must come after the last entry's (else an error).
    pub fn append(&mut self, txn: AbortedTxn) -> io::Result<()> {
        if let Some(last) = self.last_offset()
            && last >= txn.last_offset
        {
            return Err(io::Error::other(format!(
                "aborted transaction ending at {} does not follow the last one, at {last}, in {}",
                txn.last_offset,
                self.path.display()
            )));
        }
        if self.file.is_none() {
            self.file = Some(
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&self.path)?,
            );
        }
        let file = self.file.as_ref().expect("opened above");
        let pos = (self.entries.len() * ENTRY_SIZE) as u64;
        if let Err(e) = file.write_all_at(&txn.encode(), pos) {
            let _ = file.set_len(pos);
            return Err(e);
        }
        self.entries.push(txn);
        Ok(())
    }

    /// Removes the entries whose markers are at or after `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let keep = self
            .entries
            .iter()
            .take_while(|t| t.last_offset < offset)
            .count();
        if keep == self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(keep);
        if let Some(f) = &self.file {
            f.set_len((keep * ENTRY_SIZE) as u64)?;
        }
        Ok(())
    }

    /// Kafka's `collectAbortedTxns`: the entries overlapping [`fetch_offset`,
    /// `upper_bound`), and whether the search is complete (an entry's last stable offset
    /// reached `upper_bound`: no later marker can belong to a transaction begun below it).
    pub fn collect(&self, fetch_offset: i64, upper_bound: i64) -> (Vec<AbortedTxn>, bool) {
        let mut out = Vec::new();
        for t in &self.entries {
            if t.last_offset >= fetch_offset && t.first_offset < upper_bound {
                out.push(*t);
            }
            if t.last_stable_offset >= upper_bound {
                return (out, true);
            }
        }
        (out, false)
    }

    pub fn flush(&self) -> io::Result<()> {
        match &self.file {
            Some(f) => f.sync_data(),
            None => Ok(()),
        }
    }

    pub fn delete(self) -> io::Result<()> {
        remove_if_exists(&self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        }
    }

    #[test]
    fn file_round_trip_truncation_and_collect() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.txnindex");
        let mut idx = TxnIndex::create(path.clone()).unwrap();
        assert!(!path.exists(), "created at the first entry only");
        idx.append(t(1, 90, 105, 106)).unwrap();
        idx.append(t(2, 100, 110, 95)).unwrap();
        idx.append(t(3, 112, 120, 121)).unwrap();
        assert!(
            idx.append(t(4, 113, 120, 121)).is_err(),
            "markers must increase"
        );
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 3 * ENTRY_SIZE);
        // Kafka's layout: version 0, then the four offsets.
        assert_eq!(&bytes[..10], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(&bytes[26..34], &106i64.to_be_bytes());
        let idx2 = TxnIndex::open(path.clone()).unwrap();
        assert_eq!(idx2.entries(), idx.entries());

        // Overlap with [fetch, upper): markers at or after the fetch offset, starts before the
        // upper bound; stop once an entry's LSO reaches the upper bound.
        let (found, complete) = idx.collect(106, 111);
        assert_eq!(found, vec![t(2, 100, 110, 95)]);
        assert!(complete);
        let (found, complete) = idx.collect(100, 200);
        assert_eq!(found.len(), 3);
        assert!(!complete);
        let (found, complete) = idx.collect(0, 100);
        assert_eq!(found, vec![t(1, 90, 105, 106)]);
        assert!(complete);

        // A torn tail (a crash mid-write) is cut at open.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all_at(&[0; 7], bytes.len() as u64)
            .unwrap();
        let mut idx3 = TxnIndex::open(path.clone()).unwrap();
        assert_eq!(idx3.entries().len(), 3);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), bytes.len() as u64);
        idx3.truncate_to(110).unwrap();
        assert_eq!(idx3.last_offset(), Some(105));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), ENTRY_SIZE as u64);
        idx3.append(t(5, 107, 108, 109)).unwrap();
        assert_eq!(TxnIndex::open(path.clone()).unwrap().entries().len(), 2);
        idx3.delete().unwrap();
        assert!(!path.exists());
    }
}
