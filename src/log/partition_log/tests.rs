//! Tests of the partition log: appends, rolls, index and time lookups, recovery, retention.

use super::*;
use crate::log::batch::test_support::{
    ZSTD_BATCH_TIMESTAMPS, batch_with, simple_batch, zstd_batch,
};
use crate::log::batch::{RecordInfo, batches, decode_records};
use crate::log::compression::Compression;

pub(super) const MAX: usize = 1 << 20;

pub(super) fn small_cfg() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        retention_ms: -1,
        ..LogConfig::default()
    }
}

pub(super) fn append_simple(log: &mut Log, n: usize, ts: i64, now: i64) -> AppendInfo {
    let mut b = simple_batch(n, ts, 50);
    log.append_at(&mut b, 3, None, MAX, now).unwrap()
}

/// Every record in the log, by reading it front to back.
pub(super) fn all_records(log: &Log) -> Vec<RecordInfo> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let slice = log.read(offset, 1 << 30, i64::MAX, true).unwrap();
        assert!(!slice.is_empty());
        let bytes = slice.read_to_vec().unwrap();
        for h in batches(&bytes) {
            let h = h.unwrap();
            let p = h.position as usize;
            let recs = decode_records(&bytes[p..p + h.total_size()]).unwrap();
            out.extend(recs.into_iter().filter(|r| r.offset >= offset));
            offset = h.next_offset();
        }
    }
    out
}

pub(super) fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn empty_dir_starts_at_zero_and_strays_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("topic-0");
    std::fs::create_dir(&dir).unwrap();
    for f in [
        "00000000000000000000.log.deleted",
        "x.cleaned",
        "00000000000000000007.index.swap",
        "00000000000000000009.index",
    ] {
        std::fs::write(dir.join(f), b"junk").unwrap();
    }
    std::fs::write(dir.join("partition.metadata"), b"keep").unwrap();
    let log = Log::open(&dir, LogConfig::default(), false).unwrap();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.size_bytes()
        ),
        (0, 0, 0)
    );
    assert_eq!(
        files(&dir),
        vec!["00000000000000000000.log", "partition.metadata"],
        "an unwritten log has no index files yet"
    );
    let r = log.read(0, 100, i64::MAX, true).unwrap();
    assert!(r.is_empty());
    assert!(matches!(
        log.read(1, 100, i64::MAX, true),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
}

#[test]
fn append_assigns_offsets_and_patches() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = Log::open(tmp.path(), LogConfig::default(), false).unwrap();
    let mut buf = simple_batch(3, 1000, 10);
    buf.extend(simple_batch(2, 2000, 10));
    let info = log.append_at(&mut buf, 9, None, MAX, 0).unwrap();
    assert_eq!(
        (info.first_offset, info.last_offset, info.record_count),
        (0, 4, 5)
    );
    assert_eq!(
        (
            info.max_timestamp,
            info.offset_of_max_timestamp,
            info.log_append_time
        ),
        (2000, 4, -1)
    );
    assert_eq!(info.batches[1].base_offset, 3);
    assert_eq!(log.log_end_offset(), 5);
    let mut b = simple_batch(1, 5, 10);
    let info = log.append_at(&mut b, 10, Some(777_777), MAX, 0).unwrap();
    assert_eq!(
        (info.first_offset, info.log_append_time, info.max_timestamp),
        (5, 777_777, 777_777)
    );
    let bytes = log
        .read(0, MAX, i64::MAX, true)
        .unwrap()
        .read_to_vec()
        .unwrap();
    let hs: Vec<_> = batches(&bytes).map(Result::unwrap).collect();
    assert_eq!(
        hs.iter().map(|h| h.base_offset).collect::<Vec<_>>(),
        vec![0, 3, 5]
    );
    assert_eq!(
        hs.iter()
            .map(|h| h.partition_leader_epoch)
            .collect::<Vec<_>>(),
        vec![9, 9, 10]
    );
    assert!(hs[2].is_log_append_time() && !hs[0].is_log_append_time());
    assert!(
        crate::log::validate_for_append(&bytes, MAX).is_ok(),
        "stored CRCs valid"
    );
    assert_eq!(log.max_timestamp_offset().unwrap(), Some((777_777, 5)));
    assert_eq!(log.offset_for_timestamp(1500).unwrap(), Some((2000, 3)));
    assert_eq!(log.offset_for_timestamp(777_778).unwrap(), None);

    // rejected appends change nothing
    let mut bad = simple_batch(1, 5, 10);
    let n = bad.len();
    bad[n - 1] ^= 1;
    assert!(matches!(
        log.append(&mut bad, 0, None, MAX),
        Err(AppendError::Batch(BatchError::Corrupt { .. }))
    ));
    let mut big = simple_batch(1, 5, 2000);
    assert!(matches!(
        log.append(&mut big, 0, None, 1000),
        Err(AppendError::Batch(BatchError::TooLarge { .. }))
    ));
    assert_eq!(log.log_end_offset(), 6);
}

#[test]
fn roll_by_size() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = Log::open(tmp.path(), small_cfg(), false).unwrap();
    for i in 0..100 {
        append_simple(&mut log, 2, 1000 + i, 0);
    }
    assert_eq!(log.log_end_offset(), 200);
    assert!(log.num_segments() > 3, "{}", log.num_segments());
    let mut expected_base = 0;
    for seg in log.segments() {
        assert!(seg.size() <= 4096);
        assert_eq!(seg.base_offset(), expected_base);
        expected_base = seg.next_offset();
        assert!(
            tmp.path()
                .join(segment::file_name(seg.base_offset(), ".log"))
                .exists()
        );
    }
    assert_eq!(
        log.size_bytes(),
        log.segments().map(Segment::size).sum::<u64>()
    );
    assert_eq!(
        log.recovery_point(),
        log.segments().last().unwrap().base_offset()
    );
    let mut huge = simple_batch(1, 0, 5000);
    assert!(matches!(
        log.append(&mut huge, 0, None, MAX),
        Err(AppendError::RecordSetTooLarge { .. })
    ));
}

#[test]
fn roll_by_time() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        roll_ms: 1000,
        ..LogConfig::default()
    };
    let mut log = Log::open(tmp.path(), cfg, false).unwrap();
    append_simple(&mut log, 1, 1, 10_000);
    append_simple(&mut log, 1, 1, 10_900);
    append_simple(&mut log, 1, 1, 11_000);
    assert_eq!(log.num_segments(), 1);
    append_simple(&mut log, 1, 1, 11_001);
    assert_eq!(log.num_segments(), 2);
    assert_eq!(log.segments().last().unwrap().base_offset(), 3);
    append_simple(&mut log, 1, 1, 11_500);
    assert_eq!(log.num_segments(), 2);
    append_simple(&mut log, 1, 1, 12_002);
    assert_eq!(log.num_segments(), 3);
}

#[test]
fn roll_when_index_full() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        index_interval_bytes: 1,
        segment_index_bytes: 8 * 3,
        ..LogConfig::default()
    };
    let mut log = Log::open(tmp.path(), cfg, false).unwrap();
    for _ in 0..10 {
        append_simple(&mut log, 1, 1, 0);
    }
    assert!(log.num_segments() >= 3);
    for seg in log.segments() {
        assert!(seg.offset_index().len() <= 3);
    }
}

#[test]
fn lookup_every_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = Log::open(tmp.path(), small_cfg(), false).unwrap();
    for i in 0..300 {
        append_simple(&mut log, 1 + (i % 4), i as i64, 0);
    }
    let leo = log.log_end_offset();
    for target in 0..leo {
        let s = log.read(target, 1, i64::MAX, true).unwrap();
        let bytes = s.read_to_vec().unwrap();
        let h = BatchHeader::parse(&bytes, 0).unwrap();
        assert_eq!(h.total_size(), s.len, "exactly one batch");
        assert_eq!(h.base_offset, s.first_batch_offset);
        assert!(
            h.base_offset <= target && target <= h.last_offset(),
            "target {target}"
        );
        assert!(s.segment_base_offset <= h.base_offset);
    }
    assert_eq!(all_records(&log).len() as i64, leo);
}

#[test]
fn read_limits() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = Log::open(tmp.path(), LogConfig::default(), false).unwrap();
    let mut sizes = Vec::new();
    for _ in 0..10 {
        let info = append_simple(&mut log, 5, 1, 0);
        sizes.push(info.size_bytes);
    }
    let sz = sizes[0];
    assert!(sizes.iter().all(|&s| s == sz));
    // max_bytes covers 3.5 batches -> 3 batches
    let s = log.read(0, sz * 7 / 2, i64::MAX, false).unwrap();
    assert_eq!(s.len, 3 * sz);
    // exact fit
    assert_eq!(log.read(0, sz * 3, i64::MAX, false).unwrap().len, 3 * sz);
    // mid-batch offset starts at the batch
    let s = log.read(12, sz * 2, i64::MAX, false).unwrap();
    assert_eq!(
        (s.first_batch_offset, s.position as usize, s.len),
        (10, 2 * sz, 2 * sz)
    );
    // too small: nothing unless min_one_batch
    assert_eq!(log.read(0, sz - 1, i64::MAX, false).unwrap().len, 0);
    assert_eq!(log.read(0, 0, i64::MAX, true).unwrap().len, sz);
    assert_eq!(log.read(0, sz + 1, i64::MAX, true).unwrap().len, sz);
    // high watermark: batches with last offset >= hw excluded
    assert_eq!(log.read(0, MAX, 20, true).unwrap().len, 4 * sz);
    assert_eq!(log.read(0, MAX, 19, true).unwrap().len, 3 * sz);
    assert_eq!(
        log.read(17, MAX, 19, true).unwrap().len,
        0,
        "hw bound beats min_one_batch"
    );
    assert_eq!(log.read(0, MAX, i64::MAX, true).unwrap().len, 10 * sz);
    // end and out of range
    let s = log.read(50, MAX, i64::MAX, true).unwrap();
    assert!(s.is_empty());
    assert_eq!(s.first_batch_offset, 50);
    assert!(matches!(
        log.read(51, MAX, i64::MAX, true),
        Err(ReadError::OffsetOutOfRange {
            offset: 51,
            log_start_offset: 0,
            log_end_offset: 50
        })
    ));
    assert!(matches!(
        log.read(-1, MAX, i64::MAX, true),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
}

#[test]
fn read_jumps_with_index_and_stays_in_one_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_bytes: 64 * 1024,
        index_interval_bytes: 512,
        ..LogConfig::default()
    };
    let mut log = Log::open(tmp.path(), cfg, false).unwrap();
    for i in 0..2000 {
        append_simple(&mut log, 1 + i % 3, 1, 0);
    }
    assert!(log.num_segments() > 2);
    // Compare against a brute force walk for many (start, max_bytes, hw).
    let mut seed = 12345u64;
    let mut rnd = |m: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % m
    };
    let leo = log.log_end_offset() as u64;
    for _ in 0..300 {
        let start = rnd(leo) as i64;
        let max_bytes = rnd(20_000) as usize;
        let hw = start + rnd(3000) as i64;
        let min_one = rnd(2) == 1;
        let s = log.read(start, max_bytes, hw, min_one).unwrap();
        let seg = log
            .segments()
            .find(|g| g.base_offset() == s.segment_base_offset)
            .unwrap();
        let whole = {
            let mut v = vec![0u8; (seg.size() - s.position) as usize];
            seg.file()
                .unwrap()
                .read_exact_at(&mut v, s.position)
                .unwrap();
            v
        };
        let mut expect = 0usize;
        for h in batches(&whole) {
            let h = h.unwrap();
            if h.last_offset() >= hw {
                break;
            }
            if expect + h.total_size() > max_bytes && !(min_one && expect == 0) {
                break;
            }
            expect += h.total_size();
        }
        assert_eq!(
            s.len, expect,
            "start {start} max {max_bytes} hw {hw} min_one {min_one}"
        );
    }
}

#[test]
fn timestamp_lookup_record_level_all_codecs() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = Log::open(tmp.path(), small_cfg(), false).unwrap();
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
    ];
    let mut t = 10_000i64;
    for round in 0..12 {
        let codec = codecs[round % codecs.len()];
        // out of order timestamps inside the batch
        let ts = [t + 30, t + 10, t + 50, t + 20, t + 40];
        let mut b = batch_with(codec, &ts, 40);
        log.append_at(&mut b, 0, None, MAX, 0).unwrap();
        if round == 5 {
            let mut z = zstd_batch();
            log.append_at(&mut z, 0, None, MAX, 0).unwrap();
        }
        t += 100;
    }
    let recs = all_records(&log);
    assert_eq!(recs.len() as i64, log.log_end_offset());
    assert!(recs.iter().any(|r| r.timestamp == ZSTD_BATCH_TIMESTAMPS[1]));
    let brute = |target: i64| {
        recs.iter()
            .filter(|r| r.timestamp >= target)
            .min_by_key(|r| r.offset)
            .map(|r| (r.timestamp, r.offset))
    };
    let mut targets: Vec<i64> = recs
        .iter()
        .flat_map(|r| [r.timestamp - 1, r.timestamp, r.timestamp + 1])
        .collect();
    targets.extend([i64::MIN, 0, 999, 1000, 1200, 1301, 1500, 1501, i64::MAX]);
    for target in targets {
        assert_eq!(
            log.offset_for_timestamp(target).unwrap(),
            brute(target),
            "target {target}"
        );
    }
    // max timestamp: the earliest record with the largest timestamp
    let max = recs.iter().map(|r| r.timestamp).max().unwrap();
    let first = recs.iter().find(|r| r.timestamp == max).unwrap();
    assert_eq!(
        log.max_timestamp_offset().unwrap(),
        Some((max, first.offset))
    );
    // survives reopen
    log.close().unwrap();
    drop(log);
    let log = Log::open(tmp.path(), small_cfg(), false).unwrap();
    assert_eq!(
        log.max_timestamp_offset().unwrap(),
        Some((max, first.offset))
    );
    assert_eq!(log.offset_for_timestamp(10_535).unwrap(), brute(10_535));
}

#[test]
fn max_timestamp_ties_pick_earliest() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = Log::open(tmp.path(), LogConfig::default(), false).unwrap();
    let mut b = batch_with(Compression::None, &[5, 9, 7, 9], 5);
    log.append(&mut b, 0, None, MAX).unwrap();
    let mut b = batch_with(Compression::Lz4, &[9, 9], 5);
    log.append(&mut b, 0, None, MAX).unwrap();
    assert_eq!(log.max_timestamp_offset().unwrap(), Some((9, 1)));
    assert_eq!(log.offset_for_timestamp(8).unwrap(), Some((9, 1)));
    assert_eq!(log.offset_for_timestamp(6).unwrap(), Some((9, 1)));
}

#[test]
fn retention_by_time() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        retention_ms: 1000,
        ..small_cfg()
    };
    let mut log = Log::open(tmp.path(), cfg, false).unwrap();
    for i in 0..100 {
        append_simple(&mut log, 2, 10_000 + i * 10, 0);
    }
    let nseg = log.num_segments();
    assert!(nseg > 3);
    let second = log.segments().nth(1).unwrap();
    let (second_base, first_max) = (
        second.base_offset(),
        log.segments().next().unwrap().max_timestamp(),
    );
    // keep a reader on the first segment
    let held = log.read(0, 100, i64::MAX, true).unwrap();
    assert_eq!(log.apply_retention(first_max + 1000).unwrap(), 0);
    assert_eq!(log.apply_retention(first_max + 1001).unwrap(), 1);
    assert_eq!(log.log_start_offset(), second_base);
    assert!(
        !held.read_to_vec().unwrap().is_empty(),
        "deleted segment still readable"
    );
    assert!(matches!(
        log.read(0, 100, i64::MAX, true),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
    assert_eq!(
        log.read(second_base, 100, i64::MAX, true)
            .unwrap()
            .first_batch_offset,
        second_base
    );
    // everything expired: active is rolled, all data segments deleted
    let leo = log.log_end_offset();
    let n = log.apply_retention(10_000_000).unwrap();
    assert_eq!(n, nseg - 1);
    assert_eq!(log.num_segments(), 1);
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.size_bytes()
        ),
        (leo, leo, 0)
    );
    assert_eq!(
        log.apply_retention(10_000_000).unwrap(),
        0,
        "empty active never deleted"
    );
    assert!(log.read(leo, 100, i64::MAX, true).unwrap().is_empty());
    let info = append_simple(&mut log, 1, 1, 0);
    assert_eq!(info.first_offset, leo);
    assert_eq!(info.log_start_offset, leo);
    drop(log);
    let log = Log::open(tmp.path(), small_cfg(), false).unwrap();
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (leo, leo + 1)
    );
}

#[test]
fn retention_by_size() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = Log::open(tmp.path(), small_cfg(), false).unwrap();
    for i in 0..100 {
        append_simple(&mut log, 2, i, 0);
    }
    let sizes: Vec<u64> = log.segments().map(Segment::size).collect();
    let total = log.size_bytes();
    // excess smaller than the first segment: nothing
    log.config.retention_bytes = (total - sizes[0] + 1) as i64;
    assert_eq!(log.apply_retention(0).unwrap(), 0);
    // excess of exactly two segments
    log.config.retention_bytes = (total - sizes[0] - sizes[1]) as i64;
    assert_eq!(log.apply_retention(0).unwrap(), 2);
    assert_eq!(log.size_bytes(), total - sizes[0] - sizes[1]);
    assert_eq!(
        log.log_start_offset(),
        log.segments().next().unwrap().base_offset()
    );
    assert!(log.log_start_offset() > 0);
    log.config.retention_bytes = -1;
    assert_eq!(log.apply_retention(0).unwrap(), 0);
    log.config.retention_bytes = 0;
    let leo = log.log_end_offset();
    assert!(log.apply_retention(0).unwrap() > 0);
    assert_eq!((log.log_start_offset(), log.size_bytes()), (leo, 0));
}

#[test]
fn read_skips_gap_at_segment_end() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    {
        let mut log = Log::open(d, LogConfig::default(), false).unwrap();
        append_simple(&mut log, 5, 1, 0);
        log.close().unwrap();
    }
    // A second segment starting at 20, as compaction could leave it.
    let mut b = simple_batch(2, 7, 10);
    batch::set_base_offset(&mut b, 20);
    std::fs::write(d.join(segment::file_name(20, ".log")), &b).unwrap();
    let log = Log::open(d, LogConfig::default(), true).unwrap();
    assert_eq!((log.num_segments(), log.log_end_offset()), (2, 22));
    let s = log.read(7, MAX, i64::MAX, true).unwrap();
    assert_eq!(
        (s.first_batch_offset, s.segment_base_offset, s.len),
        (20, 20, b.len())
    );
    let s = log.read(3, MAX, i64::MAX, true).unwrap();
    assert_eq!(s.first_batch_offset, 0);
    assert_eq!(log.offset_for_timestamp(7).unwrap(), Some((7, 20)));
}

#[test]
fn truncate_to() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = Log::open(tmp.path(), small_cfg(), false).unwrap();
    for i in 0..100 {
        append_simple(&mut log, 2, i, 0);
    }
    let nseg = log.num_segments();
    log.truncate_to(101).unwrap(); // mid-batch: the batch [100, 101] goes
    assert_eq!(log.log_end_offset(), 100);
    assert!(log.num_segments() < nseg);
    assert_eq!(all_records(&log).len(), 100);
    assert_eq!(log.max_timestamp_offset().unwrap(), Some((49, 98)));
    let info = append_simple(&mut log, 1, 500, 0);
    assert_eq!(info.first_offset, 100);
    log.truncate_to(0).unwrap();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.num_segments()
        ),
        (0, 0, 1)
    );
}

#[test]
fn flush_policy() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        flush_interval_messages: 3,
        ..LogConfig::default()
    };
    let mut log = Log::open(tmp.path(), cfg, false).unwrap();
    append_simple(&mut log, 2, 1, 0);
    assert_eq!(log.recovery_point(), 0);
    append_simple(&mut log, 1, 1, 0);
    assert_eq!(log.recovery_point(), 3);
    log.config.flush_interval_ms = 100;
    let now = now_ms();
    append_simple(&mut log, 1, 1, now);
    assert_eq!(log.recovery_point(), 3);
    assert!(!log.maybe_flush(now + 50).unwrap());
    assert!(log.maybe_flush(now + 100_000).unwrap());
    assert_eq!(log.recovery_point(), 4);
}

#[test]
fn ten_thousand_batches_random_lookups() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_bytes: 256 * 1024,
        ..LogConfig::default()
    };
    let mut log = Log::open(tmp.path(), cfg.clone(), false).unwrap();
    let mut seed = 7u64;
    let mut rnd = move |m: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % m
    };
    let mut bases = Vec::with_capacity(10_000);
    for i in 0..10_000 {
        let n = 1 + rnd(5) as usize;
        let mut b = simple_batch(n, 1_000_000 + i, 20 + rnd(100) as usize);
        bases.push(log.append_at(&mut b, 1, None, MAX, 0).unwrap().first_offset);
    }
    let leo = log.log_end_offset();
    let check = |log: &Log, rnd: &mut dyn FnMut(u64) -> u64| {
        for _ in 0..2000 {
            let target = rnd(leo as u64) as i64;
            let s = log.read(target, 1, i64::MAX, true).unwrap();
            let expect = bases[bases.partition_point(|&b| b <= target) - 1];
            assert_eq!(s.first_batch_offset, expect, "target {target}");
            let ts = 1_000_000 + rnd(10_000) as i64;
            let (t, off) = log.offset_for_timestamp(ts).unwrap().unwrap();
            assert_eq!((off, t), (bases[(ts - 1_000_000) as usize], ts));
        }
    };
    check(&log, &mut rnd);
    assert!(log.num_segments() > 5);
    log.close().unwrap();
    drop(log);
    let log = Log::open(tmp.path(), cfg, true).unwrap();
    assert_eq!(log.log_end_offset(), leo);
    check(&log, &mut rnd);
    let mut log = log;
    let held = log.read(0, 100, i64::MAX, true).unwrap();
    log.delete_dir().unwrap();
    assert!(!tmp.path().exists());
    assert!(!held.read_to_vec().unwrap().is_empty());
    let mut b = simple_batch(1, 1, 1);
    assert!(matches!(
        log.append(&mut b, 0, None, MAX),
        Err(AppendError::Io(_))
    ));
    log.close().unwrap();
}

#[test]
fn new_settings_govern_the_next_roll_and_retention_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_bytes: 1 << 20,
        ..small_cfg()
    };
    let mut log = Log::open(tmp.path(), cfg.clone(), false).unwrap();
    for i in 0..20 {
        append_simple(&mut log, 2, 10_000 + i, 0);
    }
    assert_eq!(log.num_segments(), 1);
    log.set_config(LogConfig {
        segment_bytes: 4096,
        ..cfg.clone()
    });
    for i in 0..100 {
        append_simple(&mut log, 2, 20_000 + i, 0);
    }
    let sizes: Vec<u64> = log.segments().map(Segment::size).collect();
    assert!(sizes.len() > 3, "no rolls after segment_bytes shrank");
    assert!(sizes[1..].iter().all(|s| *s <= 4096), "{sizes:?}");
    // Retention off: nothing goes; then on: every segment (all past retention) goes.
    assert_eq!(log.apply_retention(1_000_000).unwrap(), 0);
    log.set_config(LogConfig {
        segment_bytes: 4096,
        retention_ms: 1000,
        ..cfg
    });
    assert_eq!(log.apply_retention(1_000_000).unwrap(), sizes.len());
    assert_eq!(log.log_start_offset(), log.log_end_offset());
    // Out-of-range sizes are clamped, not taken as they are.
    log.set_config(LogConfig {
        segment_bytes: 1,
        segment_index_bytes: 0,
        ..LogConfig::default()
    });
    assert!(log.config().segment_bytes >= HEADER_SIZE as u64);
    assert_eq!(log.config().segment_index_bytes, 12);
}
