//! Producer state snapshot files: `<offset, 20 digits>.snapshot` in the partition directory
//! holds the state after every batch below `offset`.
//!
//! Layout (big-endian): `"SLPS"`, version u16, CRC-32C u32 of everything after it, producer
//! count u32, then per producer: id i64, epoch i16, last timestamp i64, [version 2: coordinator
//! epoch i32, first offset of the ongoing transaction i64 (-1: none)], batch count u8, and per
//! batch: first seq i32, last seq i32, first offset i64, last offset i64, timestamp i64.
//! Version 2 is written; version 1 (no transactions) is still read.
//! (Kafka's own snapshot keeps only the last batch per producer; this keeps all five so that
//! every in-flight retry is still recognised after a restart.)

use std::collections::{HashMap, VecDeque};
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::state::{BatchMeta, Entry, MAX_CACHED_BATCHES};

pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
/// Snapshot files kept per partition.
pub const SNAPSHOTS_KEPT: usize = 3;
const MAGIC: &[u8; 4] = b"SLPS";
const VERSION: u16 = 2;

pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}{SNAPSHOT_SUFFIX}"))
}

pub(crate) fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Offsets of the snapshot files in `dir`, ascending; leftover temporary files are removed.
pub(crate) fn list_snapshots(dir: &Path) -> io::Result<Vec<i64>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if name.ends_with(".snapshot.tmp") {
            remove_if_exists(&entry.path())?;
        } else if let Some(stem) = name.strip_suffix(SNAPSHOT_SUFFIX)
            && stem.len() == 20
            && stem.bytes().all(|b| b.is_ascii_digit())
            && let Ok(off) = stem.parse()
        {
            out.push(off);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Writes `<offset>.snapshot` of `producers` beside and renamed into place, then keeps only
/// the newest [`SNAPSHOTS_KEPT`].
pub(crate) fn write(dir: &Path, offset: i64, producers: &HashMap<i64, Entry>) -> io::Result<()> {
    let path = snapshot_path(dir, offset);
    let tmp = path.with_extension("snapshot.tmp");
    {
        let mut f = File::create(&tmp)?;
        f.write_all(&encode(producers))?;
        f.sync_all()?;
    }
    fs::rename(&tmp, &path)?;
    let all = list_snapshots(dir)?;
    if all.len() > SNAPSHOTS_KEPT {
        for off in &all[..all.len() - SNAPSHOTS_KEPT] {
            remove_if_exists(&snapshot_path(dir, *off))?;
        }
    }
    File::open(dir)?.sync_all()
}

pub(crate) fn encode(producers: &HashMap<i64, Entry>) -> Vec<u8> {
    let mut body = Vec::with_capacity(4 + producers.len() * 76);
    body.extend_from_slice(&(producers.len() as u32).to_be_bytes());
    let mut ids: Vec<&i64> = producers.keys().collect();
    ids.sort();
    for id in ids {
        let e = &producers[id];
        body.extend_from_slice(&id.to_be_bytes());
        body.extend_from_slice(&e.epoch.to_be_bytes());
        body.extend_from_slice(&e.last_timestamp.to_be_bytes());
        body.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        body.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
        body.push(e.batches.len() as u8);
        for b in &e.batches {
            body.extend_from_slice(&b.first_seq.to_be_bytes());
            body.extend_from_slice(&b.last_seq.to_be_bytes());
            body.extend_from_slice(&b.first_offset.to_be_bytes());
            body.extend_from_slice(&b.last_offset.to_be_bytes());
            body.extend_from_slice(&b.timestamp.to_be_bytes());
        }
    }
    let mut out = Vec::with_capacity(10 + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let end = self.pos + N;
        let s = self.buf.get(self.pos..end).ok_or("truncated")?;
        self.pos = end;
        Ok(s.try_into().unwrap())
    }
    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_be_bytes(self.take()?))
    }
    fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(self.take()?))
    }
    fn i16(&mut self) -> Result<i16, String> {
        Ok(i16::from_be_bytes(self.take()?))
    }
}

pub(crate) fn read(path: &Path) -> Result<HashMap<i64, Entry>, String> {
    decode(&fs::read(path).map_err(|e| e.to_string())?)
}

pub(crate) fn decode(bytes: &[u8]) -> Result<HashMap<i64, Entry>, String> {
    if bytes.len() < 10 || &bytes[..4] != MAGIC {
        return Err("not a Sluice producer snapshot".into());
    }
    let version = u16::from_be_bytes([bytes[4], bytes[5]]);
    if !(1..=VERSION).contains(&version) {
        return Err(format!("unknown snapshot version {version}"));
    }
    let crc = u32::from_be_bytes(bytes[6..10].try_into().unwrap());
    let body = &bytes[10..];
    if crc32c::crc32c(body) != crc {
        return Err("CRC mismatch".into());
    }
    let mut r = Reader { buf: body, pos: 0 };
    let count = u32::from_be_bytes(r.take()?) as usize;
    let mut out = HashMap::with_capacity(count.min(body.len() / 19));
    for _ in 0..count {
        let id = r.i64()?;
        let epoch = r.i16()?;
        let last_timestamp = r.i64()?;
        let (coordinator_epoch, txn_first) = if version >= 2 {
            (r.i32()?, r.i64()?)
        } else {
            (-1, -1)
        };
        let [n] = r.take::<1>()?;
        let mut batches = VecDeque::with_capacity(MAX_CACHED_BATCHES);
        for _ in 0..n {
            batches.push_back(BatchMeta {
                first_seq: r.i32()?,
                last_seq: r.i32()?,
                first_offset: r.i64()?,
                last_offset: r.i64()?,
                timestamp: r.i64()?,
            });
        }
        out.insert(
            id,
            Entry {
                epoch,
                batches,
                last_timestamp,
                coordinator_epoch,
                current_txn_first_offset: (txn_first >= 0).then_some(txn_first),
            },
        );
    }
    if r.pos != body.len() {
        return Err("trailing bytes".into());
    }
    Ok(out)
}
