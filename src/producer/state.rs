//! Per-partition producer state: for each producer id, its epoch and the sequence ranges and
//! offsets of its last [`MAX_CACHED_BATCHES`] batches.
//!
//! Rules (Kafka 4's ProducerStateManager / ProducerAppendInfo, for appends from clients):
//! * a batch with a producer id must have a base sequence >= 0;
//! * a batch whose epoch and sequence range equal a cached batch is a duplicate: nothing of
//!   the request is appended and the cached offsets are returned;
//! * an epoch below the producer's current one is fenced (`InvalidEpoch`);
//! * a new epoch of a known producer must start at sequence 0;
//! * within an epoch, the base sequence must follow the last one (wrapping after i32::MAX),
//!   otherwise `OutOfOrderSequence`;
//! * an unknown producer (never seen, or its state expired after `producer.id.expiration.ms`)
//!   is accepted at any sequence.
//!
//! A coordinator writing its own records (the group coordinator's transactional offset
//! commits, Kafka's `AppendOrigin.COORDINATOR`) is checked for the epoch only: its batches
//! carry the producer's id and epoch but no sequence of the producer's.
//!
//! Replaying the log (recovery) applies batches without these checks.
//!
//! Snapshot file `<offset, 20 digits>.snapshot` = the state after every batch below `offset`.
//! Layout (big-endian): `"SLPS"`, version u16 (1), CRC-32C u32 of everything after it,
//! producer count u32, then per producer: id i64, epoch i16, last timestamp i64, batch count u8,
//! and per batch: first seq i32, last seq i32, first offset i64, last offset i64, timestamp i64.
//! (Kafka's own snapshot keeps only the last batch per producer; this keeps all five so that
//! every in-flight retry is still recognised after a restart.)

use std::collections::{HashMap, VecDeque};
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use tracing::{info, warn};

use crate::log::{BatchHeader, Log};

/// Batches remembered per producer (the client's max.in.flight.requests.per.connection limit
/// for idempotence).
pub const MAX_CACHED_BATCHES: usize = 5;
/// Snapshot files kept per partition.
pub const SNAPSHOTS_KEPT: usize = 3;
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
const MAGIC: &[u8; 4] = b"SLPS";
const VERSION: u16 = 1;
const NO_EPOCH: i16 = -1;
const NO_SEQUENCE: i32 = -1;

/// One batch of a producer as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    /// The batch's max timestamp as stored.
    pub timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    epoch: i16,
    batches: VecDeque<BatchMeta>,
    last_timestamp: i64,
}

impl Entry {
    fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }
}

/// A producer's state as seen from outside (DescribeProducers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerSummary {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProducerError {
    /// The batch's epoch is older than the producer's current epoch.
    #[error("{0}")]
    InvalidEpoch(String),
    /// A gap (or a rewind) in the producer's sequence numbers.
    #[error("{0}")]
    OutOfOrderSequence(String),
    /// A batch with a producer id but no sequence number.
    #[error("{0}")]
    InvalidSequence(String),
}

/// Sequence `seq + delta`, wrapping to 0 after i32::MAX as the clients do.
fn add_seq(seq: i32, delta: i32) -> i32 {
    if seq > i32::MAX - delta {
        delta - (i32::MAX - seq) - 1
    } else {
        seq + delta
    }
}

fn last_seq_of(h: &BatchHeader) -> i32 {
    add_seq(h.base_sequence, h.last_offset_delta.max(0))
}

fn in_sequence(last: i32, next: i32) -> bool {
    next as i64 == last as i64 + 1 || (next == 0 && last == i32::MAX)
}

fn idempotent(h: &BatchHeader) -> bool {
    h.producer_id >= 0 && !h.is_control()
}

pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}{SNAPSHOT_SUFFIX}"))
}

/// Who appends: a producing client (every rule above) or a coordinator writing its own
/// records (the epoch rule only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendOrigin {
    Client,
    Coordinator,
}

/// [`ProducerState::check`] (or, for a coordinator, [`ProducerState::check_epochs`]) on a raw
/// record set. A record set that does not parse is left to the log's validation (`Ok(None)`).
pub fn check_append(
    state: &ProducerState,
    records: &[u8],
    origin: AppendOrigin,
) -> Result<Option<BatchMeta>, ProducerError> {
    let mut headers = Vec::new();
    for h in crate::log::batch::batches(records) {
        match h {
            Ok(h) => headers.push(h),
            Err(_) => return Ok(None),
        }
    }
    match origin {
        AppendOrigin::Client => state.check(&headers),
        AppendOrigin::Coordinator => state.check_epochs(&headers).map(|()| None),
    }
}

pub struct ProducerState {
    dir: PathBuf,
    producers: HashMap<i64, Entry>,
}

impl ProducerState {
    /// Empty state for the partition directory `dir` (no files touched).
    pub fn new(dir: &Path) -> ProducerState {
        ProducerState {
            dir: dir.to_path_buf(),
            producers: HashMap::new(),
        }
    }

    /// Forgets every producer and deletes every snapshot in `dir`: the log there was emptied
    /// and restarts past everything it held (a follower behind its leader's log start).
    pub fn reset(dir: &Path) -> io::Result<ProducerState> {
        for off in list_snapshots(dir)? {
            remove_if_exists(&snapshot_path(dir, off))?;
        }
        Ok(ProducerState::new(dir))
    }

    /// Rebuilds the state of `log`: the newest readable snapshot at or below the log end
    /// offset (newer ones are stale after a truncation and are deleted), then every batch
    /// from there to the log end. Writes a snapshot at the log end if anything was replayed.
    pub fn load(log: &Log) -> io::Result<ProducerState> {
        let dir = log.dir();
        let leo = log.log_end_offset();
        let mut st = ProducerState::new(dir);
        let mut from = log.log_start_offset();
        let mut found = None;
        for off in list_snapshots(dir)?.into_iter().rev() {
            let path = snapshot_path(dir, off);
            if off > leo {
                info!(file = %path.display(), "removing snapshot beyond the log end");
                remove_if_exists(&path)?;
                continue;
            }
            if found.is_some() {
                continue;
            }
            match read_snapshot(&path) {
                Ok(producers) => {
                    st.producers = producers;
                    from = from.max(off);
                    found = Some(off);
                }
                Err(e) => {
                    warn!(file = %path.display(), "unreadable producer snapshot ({e}); removing it");
                    remove_if_exists(&path)?;
                }
            }
        }
        let mut replayed = 0u64;
        if from < leo {
            log.scan_headers_from(from, |h| {
                if h.base_offset >= from {
                    st.apply(h);
                    replayed += 1;
                }
            })?;
        }
        if found != Some(leo) && (replayed > 0 || !st.producers.is_empty()) {
            st.take_snapshot(leo)?;
        }
        if replayed > 0 {
            info!(dir = %dir.display(), snapshot = ?found, replayed, producers = st.producers.len(), "rebuilt producer state");
        }
        Ok(st)
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Checks the batches of one client append (headers as received). `Ok(Some(meta))`: the
    /// request repeats the cached batch `meta` and must not be appended. `Ok(None)`: append.
    pub fn check(&self, batches: &[BatchHeader]) -> Result<Option<BatchMeta>, ProducerError> {
        // What this request's earlier batches did to each producer: (epoch, last sequence).
        let mut pending: Vec<(i64, i16, i32)> = Vec::new();
        for h in batches.iter().filter(|h| idempotent(h)) {
            let pid = h.producer_id;
            if h.base_sequence < 0 {
                return Err(ProducerError::InvalidSequence(format!(
                    "Invalid sequence number {} in record batch with producerId {pid}",
                    h.base_sequence
                )));
            }
            let last_seq = last_seq_of(h);
            let entry = self.producers.get(&pid);
            if let Some(e) = entry
                && e.epoch == h.producer_epoch
                && let Some(b) = e
                    .batches
                    .iter()
                    .find(|b| b.first_seq == h.base_sequence && b.last_seq == last_seq)
            {
                return Ok(Some(*b));
            }
            let (cur_epoch, cur_last) = match pending.iter().rev().find(|p| p.0 == pid) {
                Some(&(_, e, s)) => (e, s),
                None => entry.map_or((NO_EPOCH, NO_SEQUENCE), |e| (e.epoch, e.last_seq())),
            };
            if h.producer_epoch < cur_epoch {
                return Err(ProducerError::InvalidEpoch(format!(
                    "Epoch of producer {pid} is {}, which is smaller than the last seen epoch {cur_epoch}",
                    h.producer_epoch
                )));
            }
            if h.producer_epoch != cur_epoch {
                if h.base_sequence != 0 && cur_epoch != NO_EPOCH {
                    return Err(ProducerError::OutOfOrderSequence(format!(
                        "Invalid sequence number for new epoch of producer {pid}: {} (request epoch), {} (seq. number), {cur_epoch} (current producer epoch)",
                        h.producer_epoch, h.base_sequence
                    )));
                }
            } else if cur_epoch != NO_EPOCH && !in_sequence(cur_last, h.base_sequence) {
                return Err(ProducerError::OutOfOrderSequence(format!(
                    "Out of order sequence number for producer {pid}: {} (incoming seq. number), {cur_last} (current end sequence number)",
                    h.base_sequence
                )));
            }
            pending.push((pid, h.producer_epoch, last_seq));
        }
        Ok(None)
    }

    /// Checks a coordinator's batches: only that no producer's epoch goes back.
    pub fn check_epochs(&self, batches: &[BatchHeader]) -> Result<(), ProducerError> {
        for h in batches.iter().filter(|h| idempotent(h)) {
            let pid = h.producer_id;
            if let Some(e) = self.producers.get(&pid)
                && h.producer_epoch < e.epoch
            {
                return Err(ProducerError::InvalidEpoch(format!(
                    "Epoch of producer {pid} is {}, which is smaller than the last seen epoch {}",
                    h.producer_epoch, e.epoch
                )));
            }
        }
        Ok(())
    }

    /// Records appended batches (headers with their final offsets and timestamps).
    pub fn update(&mut self, batches: &[BatchHeader]) {
        for h in batches {
            self.apply(h);
        }
    }

    fn apply(&mut self, h: &BatchHeader) {
        if !idempotent(h) {
            return;
        }
        let e = self
            .producers
            .entry(h.producer_id)
            .or_insert_with(|| Entry {
                epoch: h.producer_epoch,
                batches: VecDeque::with_capacity(MAX_CACHED_BATCHES),
                last_timestamp: -1,
            });
        if e.epoch != h.producer_epoch {
            e.epoch = h.producer_epoch;
            e.batches.clear();
        }
        if e.batches.len() == MAX_CACHED_BATCHES {
            e.batches.pop_front();
        }
        e.batches.push_back(BatchMeta {
            first_seq: h.base_sequence,
            last_seq: last_seq_of(h),
            first_offset: h.base_offset,
            last_offset: h.last_offset(),
            timestamp: h.max_timestamp,
        });
        e.last_timestamp = h.max_timestamp;
    }

    /// Forgets producers whose last batch timestamp is `expiration_ms` or more before `now_ms`
    /// (`producer.id.expiration.ms`). Returns how many went.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers
            .retain(|_, e| now_ms.saturating_sub(e.last_timestamp) < expiration_ms);
        before - self.producers.len()
    }

    /// Active producers, by id.
    pub fn summaries(&self) -> Vec<ProducerSummary> {
        let mut v: Vec<ProducerSummary> = self
            .producers
            .iter()
            .map(|(id, e)| ProducerSummary {
                producer_id: *id,
                epoch: e.epoch,
                last_sequence: e.last_seq(),
                last_timestamp: e.last_timestamp,
            })
            .collect();
        v.sort_by_key(|s| s.producer_id);
        v
    }

    /// Writes `<offset>.snapshot` (the state must be that after every batch below `offset`)
    /// beside and renamed into place, then keeps only the newest [`SNAPSHOTS_KEPT`].
    pub fn take_snapshot(&self, offset: i64) -> io::Result<()> {
        let path = snapshot_path(&self.dir, offset);
        let tmp = path.with_extension("snapshot.tmp");
        {
            let mut f = File::create(&tmp)?;
            f.write_all(&self.encode())?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &path)?;
        let all = list_snapshots(&self.dir)?;
        if all.len() > SNAPSHOTS_KEPT {
            for off in &all[..all.len() - SNAPSHOTS_KEPT] {
                remove_if_exists(&snapshot_path(&self.dir, *off))?;
            }
        }
        File::open(&self.dir)?.sync_all()
    }

    fn encode(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(4 + self.producers.len() * 64);
        body.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        let mut ids: Vec<&i64> = self.producers.keys().collect();
        ids.sort();
        for id in ids {
            let e = &self.producers[id];
            body.extend_from_slice(&id.to_be_bytes());
            body.extend_from_slice(&e.epoch.to_be_bytes());
            body.extend_from_slice(&e.last_timestamp.to_be_bytes());
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
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Offsets of the snapshot files in `dir`, ascending; leftover temporary files are removed.
fn list_snapshots(dir: &Path) -> io::Result<Vec<i64>> {
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

fn read_snapshot(path: &Path) -> Result<HashMap<i64, Entry>, String> {
    let bytes = fs::read(path).map_err(|e| e.to_string())?;
    if bytes.len() < 10 || &bytes[..4] != MAGIC {
        return Err("not a Sluice producer snapshot".into());
    }
    let version = u16::from_be_bytes([bytes[4], bytes[5]]);
    if version != VERSION {
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
            },
        );
    }
    if r.pos != body.len() {
        return Err("trailing bytes".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::LogConfig;
    use crate::log::batch::test_support::simple_batch;

    use crate::log::batch::test_support::idempotent_batch as idem_batch;

    fn header(b: &[u8]) -> BatchHeader {
        BatchHeader::parse(b, 0).unwrap()
    }

    /// Checks and, if new, appends: Ok(first offset) / the duplicate's offset.
    fn produce(
        log: &mut Log,
        st: &mut ProducerState,
        mut b: Vec<u8>,
    ) -> Result<(i64, bool), ProducerError> {
        if let Some(d) = st.check(&[header(&b)])? {
            return Ok((d.first_offset, true));
        }
        let info = log.append(&mut b, 0, None, 1 << 20).unwrap();
        st.update(&info.batches);
        Ok((info.first_offset, false))
    }

    fn cfg() -> LogConfig {
        LogConfig {
            segment_bytes: 1024,
            ..LogConfig::default()
        }
    }

    #[test]
    fn coordinator_appends_are_checked_for_the_epoch_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), cfg(), false).unwrap();
        let mut st = ProducerState::new(dir.path());
        let coordinator = |st: &ProducerState, b: &[u8]| {
            check_append(st, b, AppendOrigin::Coordinator).map(|d| d.is_none())
        };
        // The coordinator writes every batch at sequence 0: the same sequences again are
        // neither a duplicate nor out of order for it, where a client's retry would be.
        for _ in 0..3 {
            let mut b = idem_batch(1, 7, 2, 0);
            assert_eq!(coordinator(&st, &b), Ok(true));
            let info = log.append(&mut b, 0, None, 1 << 20).unwrap();
            st.update(&info.batches);
        }
        let again = idem_batch(1, 7, 2, 0);
        assert!(matches!(
            check_append(&st, &again, AppendOrigin::Client),
            Ok(Some(_))
        ));
        // A newer epoch is taken, an older one is fenced.
        assert_eq!(coordinator(&st, &idem_batch(1, 7, 3, 0)), Ok(true));
        assert!(matches!(
            coordinator(&st, &idem_batch(1, 7, 1, 0)),
            Err(ProducerError::InvalidEpoch(_))
        ));
        // A producer never seen is taken at any epoch.
        assert_eq!(coordinator(&st, &idem_batch(1, 8, 0, 0)), Ok(true));
    }

    #[test]
    fn sequence_rules() {
        let tmp = tempfile::tempdir().unwrap();
        let mut log = Log::open(tmp.path(), cfg(), false).unwrap();
        let mut st = ProducerState::load(&log).unwrap();
        // unknown producer: any first sequence is accepted
        assert_eq!(
            produce(&mut log, &mut st, idem_batch(3, 7, 0, 5)),
            Ok((0, false))
        );
        assert_eq!(
            produce(&mut log, &mut st, idem_batch(2, 7, 0, 8)),
            Ok((3, false))
        );
        // retry of either cached batch: original offsets, nothing appended
        assert_eq!(
            produce(&mut log, &mut st, idem_batch(3, 7, 0, 5)),
            Ok((0, true))
        );
        assert_eq!(
            produce(&mut log, &mut st, idem_batch(2, 7, 0, 8)),
            Ok((3, true))
        );
        assert_eq!(log.log_end_offset(), 5);
        // gap, rewind, and a different range overlapping a cached one
        for seq in [11, 9, 6] {
            assert!(matches!(
                produce(&mut log, &mut st, idem_batch(1, 7, 0, seq)),
                Err(ProducerError::OutOfOrderSequence(_))
            ));
        }
        // new epoch must start at 0; old epoch is fenced
        assert!(matches!(
            produce(&mut log, &mut st, idem_batch(1, 7, 1, 10)),
            Err(ProducerError::OutOfOrderSequence(_))
        ));
        assert_eq!(
            produce(&mut log, &mut st, idem_batch(1, 7, 1, 0)),
            Ok((5, false))
        );
        assert!(matches!(
            produce(&mut log, &mut st, idem_batch(1, 7, 0, 10)),
            Err(ProducerError::InvalidEpoch(_))
        ));
        assert!(matches!(
            produce(&mut log, &mut st, idem_batch(1, 8, 0, -1)),
            Err(ProducerError::InvalidSequence(_))
        ));
        // only the last five batches are remembered
        for i in 1..=5 {
            produce(&mut log, &mut st, idem_batch(1, 7, 1, i)).unwrap();
        }
        assert!(matches!(
            produce(&mut log, &mut st, idem_batch(1, 7, 1, 0)),
            Err(ProducerError::OutOfOrderSequence(_))
        ));
        assert_eq!(
            produce(&mut log, &mut st, idem_batch(1, 7, 1, 1)),
            Ok((6, true))
        );
        // sequence wrap-around
        let b = idem_batch(2, 9, 0, i32::MAX - 1);
        assert_eq!(last_seq_of(&header(&b)), i32::MAX);
        produce(&mut log, &mut st, b).unwrap();
        assert!(
            !produce(&mut log, &mut st, idem_batch(1, 9, 0, 0))
                .unwrap()
                .1
        );
        // non-idempotent batches are never checked
        assert!(
            st.check(&[header(&simple_batch(1, 1, 1))])
                .unwrap()
                .is_none()
        );
        // expiry makes the producer unknown again: any sequence accepted
        assert_eq!(st.remove_expired(1_000 + 10, 10), 2);
        assert!(
            !produce(&mut log, &mut st, idem_batch(1, 7, 0, 42))
                .unwrap()
                .1
        );
    }

    #[test]
    fn snapshot_and_replay() {
        let tmp = tempfile::tempdir().unwrap();
        let mut log = Log::open(tmp.path(), cfg(), false).unwrap();
        let mut st = ProducerState::load(&log).unwrap();
        let mut offsets = Vec::new();
        for i in 0..60 {
            let b = idem_batch(2, 3, 0, i * 2);
            let mut bytes = b.clone();
            st.check(&[header(&b)]).unwrap();
            let info = log.append(&mut bytes, 0, None, 1 << 20).unwrap();
            if let Some(at) = info.rolled_at {
                st.take_snapshot(at).unwrap();
            }
            st.update(&info.batches);
            offsets.push(info.first_offset);
        }
        assert!(log.num_segments() > 3);
        let snaps = list_snapshots(tmp.path()).unwrap();
        assert_eq!(snaps.len(), SNAPSHOTS_KEPT);
        // reload from the newest snapshot plus the active segment
        let st2 = ProducerState::load(&log).unwrap();
        assert_eq!(st2.producers, st.producers);
        // no snapshots at all: full replay gives the same
        assert!(snapshot_path(tmp.path(), log.log_end_offset()).exists());
        for f in list_snapshots(tmp.path()).unwrap() {
            fs::remove_file(snapshot_path(tmp.path(), f)).unwrap();
        }
        let st3 = ProducerState::load(&log).unwrap();
        assert_eq!(st3.producers, st.producers);
        // a corrupt newest snapshot is skipped
        let leo = log.log_end_offset();
        fs::write(snapshot_path(tmp.path(), leo), b"SLPS\0\x01garbage").unwrap();
        let st4 = ProducerState::load(&log).unwrap();
        assert_eq!(st4.producers, st.producers);
        // a snapshot beyond the log end (after truncation) is dropped
        st.take_snapshot(leo + 100).unwrap();
        log.truncate_to(offsets[58]).unwrap();
        let st5 = ProducerState::load(&log).unwrap();
        assert!(!snapshot_path(tmp.path(), leo + 100).exists());
        let e = &st5.producers[&3];
        assert_eq!(e.last_seq(), 58 * 2 - 1);
        assert_eq!(e.batches.back().unwrap().first_offset, offsets[57]);
        assert_eq!(
            st5.check(&[header(&idem_batch(2, 3, 0, 116))]).unwrap(),
            None,
            "the truncated batch may be sent again"
        );
    }
}
