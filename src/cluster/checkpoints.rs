//! Kafka's per-log-dir offset checkpoints of this broker's partitions (format and atomic
//! write in `log::checkpoint`):
//!
//! - `replication-offset-checkpoint`: each partition's high watermark, written every
//!   `replica.high.watermark.checkpoint.interval.ms` (Kafka's default 5000). At start-up a
//!   partition's high watermark starts from it (kept within its log's offsets); on a leader
//!   whose ISR is itself it then moves to the log end at once.
//! - `recovery-point-offset-checkpoint`: each log's recovery point (offsets below it were
//!   flushed), written every `log.flush.offset.checkpoint.interval.ms` (default 60000). After
//!   an unclean shutdown, recovery scans each log from the segment holding its recovery point;
//!   a log the file does not name (or a dir without the file) is scanned whole, as Kafka does.
//! - `log-start-offset-checkpoint`: each log's start offset where it lies inside the log's
//!   first segment (DeleteRecords, or a follower following its leader's start; elsewhere the
//!   first segment's base offset is the start), written every
//!   `log.flush.start.offset.checkpoint.interval.ms` (default 60000) and, unlike Kafka, also
//!   before a DeleteRecords is answered, so an acknowledged deletion survives kill -9. At
//!   start-up each log's start is moved back up to it.
//!
//! All are written at clean shutdown too (high watermarks before the logs close, recovery
//! points and log starts after, so the recovery points are the log ends). The files are read once, at start-up; writers are
//! serialised per file, so the periodic tasks and the shutdown never interleave.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use tracing::warn;

use super::controller::TopicInfo;
use super::partition::Partition;
use crate::config::BrokerConfig;
use crate::log::checkpoint::{
    self, HIGH_WATERMARK_FILE, LOG_START_FILE, Offsets, RECOVERY_POINT_FILE,
};

pub const HIGH_WATERMARK_INTERVAL_KEY: &str = "replica.high.watermark.checkpoint.interval.ms";
pub const RECOVERY_POINT_INTERVAL_KEY: &str = "log.flush.offset.checkpoint.interval.ms";
pub const LOG_START_INTERVAL_KEY: &str = "log.flush.start.offset.checkpoint.interval.ms";

/// One log dir's checkpoints as read at start-up.
#[derive(Default)]
struct Restored {
    high_watermarks: Offsets,
    /// None: no file there.
    recovery_points: Option<Offsets>,
    log_starts: Offsets,
}

/// The checkpoints as read at start-up, and the writer of new ones.
pub struct LogDirCheckpoints {
    log_dirs: Vec<PathBuf>,
    restored: HashMap<PathBuf, Restored>,
    pub high_watermark_interval_ms: u64,
    pub recovery_point_interval_ms: u64,
    pub log_start_interval_ms: u64,
    write_high_watermarks: Mutex<()>,
    write_recovery_points: Mutex<()>,
    write_log_starts: Mutex<()>,
}

/// A millisecond interval from the broker's properties, or Kafka's default if unset.
fn interval_ms(config: &BrokerConfig, key: &str, default: u64) -> Result<u64> {
    let Some(v) = config.raw.get(key).filter(|v| !v.trim().is_empty()) else {
        return Ok(default);
    };
    let ms: i64 = v
        .trim()
        .parse()
        .with_context(|| format!("{key}: invalid value {v:?}"))?;
    if ms < 1 {
        bail!("{key}: value {ms} must be at least 1");
    }
    Ok(ms as u64)
}

/// Reads one checkpoint file; an unreadable one counts as absent (logged).
fn read_or_warn(path: &Path) -> Option<Offsets> {
    if !path.exists() {
        return None;
    }
    match checkpoint::read(path) {
        Ok(o) => Some(o),
        Err(e) => {
            warn!("{e:#}; ignoring it");
            None
        }
    }
}

impl LogDirCheckpoints {
    /// Reads the checkpoint files of every log dir and the checkpoint intervals.
    pub fn load(config: &BrokerConfig) -> Result<LogDirCheckpoints> {
        let mut restored = HashMap::new();
        for dir in &config.log_dirs {
            let r = Restored {
                high_watermarks: read_or_warn(&dir.join(HIGH_WATERMARK_FILE)).unwrap_or_default(),
                recovery_points: read_or_warn(&dir.join(RECOVERY_POINT_FILE)),
                log_starts: read_or_warn(&dir.join(LOG_START_FILE)).unwrap_or_default(),
            };
            restored.insert(dir.clone(), r);
        }
        Ok(LogDirCheckpoints {
            log_dirs: config.log_dirs.clone(),
            restored,
            high_watermark_interval_ms: interval_ms(config, HIGH_WATERMARK_INTERVAL_KEY, 5000)?,
            recovery_point_interval_ms: interval_ms(config, RECOVERY_POINT_INTERVAL_KEY, 60_000)?,
            log_start_interval_ms: interval_ms(config, LOG_START_INTERVAL_KEY, 60_000)?,
            write_high_watermarks: Mutex::new(()),
            write_recovery_points: Mutex::new(()),
            write_log_starts: Mutex::new(()),
        })
    }

    fn restored(&self, partition_dir: &Path) -> Option<&Restored> {
        self.restored.get(partition_dir.parent()?)
    }

    /// The checkpointed high watermark of the partition in `partition_dir` (0 if none).
    pub fn high_watermark(&self, partition_dir: &Path, topic: &str, partition: i32) -> i64 {
        self.restored(partition_dir)
            .and_then(|r| {
                r.high_watermarks
                    .get(&(topic.to_string(), partition))
                    .copied()
            })
            .unwrap_or(0)
    }

    /// Where recovery of the log in `partition_dir` starts after an unclean shutdown: its
    /// checkpointed recovery point, or 0 (the whole log) if none.
    pub fn recovery_point(&self, partition_dir: &Path, topic: &str, partition: i32) -> i64 {
        self.restored(partition_dir)
            .and_then(|r| r.recovery_points.as_ref())
            .and_then(|rp| rp.get(&(topic.to_string(), partition)).copied())
            .unwrap_or(0)
    }

    /// The checkpointed log start offset of the log in `partition_dir`, if one is recorded.
    pub fn log_start(&self, partition_dir: &Path, topic: &str, partition: i32) -> Option<i64> {
        self.restored(partition_dir)
            .and_then(|r| r.log_starts.get(&(topic.to_string(), partition)).copied())
    }

    /// Writes `replication-offset-checkpoint` in every log dir.
    pub fn write_high_watermarks(&self, topics: &[Arc<TopicInfo>]) -> Result<()> {
        let _w = self.write_high_watermarks.lock().unwrap();
        self.write(HIGH_WATERMARK_FILE, topics, |p| Some(p.high_watermark()))
    }

    /// Writes `recovery-point-offset-checkpoint` in every log dir.
    pub fn write_recovery_points(&self, topics: &[Arc<TopicInfo>]) -> Result<()> {
        let _w = self.write_recovery_points.lock().unwrap();
        self.write(RECOVERY_POINT_FILE, topics, |p| Some(p.recovery_point()))
    }

    /// Writes `log-start-offset-checkpoint` in every log dir.
    pub fn write_log_starts(&self, topics: &[Arc<TopicInfo>]) -> Result<()> {
        let _w = self.write_log_starts.lock().unwrap();
        self.write(LOG_START_FILE, topics, Partition::log_start_to_checkpoint)
    }

    fn write(
        &self,
        file: &str,
        topics: &[Arc<TopicInfo>],
        value: impl Fn(&Partition) -> Option<i64>,
    ) -> Result<()> {
        let mut per_dir: HashMap<&Path, Offsets> = self
            .log_dirs
            .iter()
            .map(|d| (d.as_path(), Offsets::new()))
            .collect();
        for t in topics {
            for p in &t.partitions {
                if let Some(offsets) = per_dir.get_mut(p.log_dir().as_path())
                    && let Some(v) = value(p)
                {
                    offsets.insert((t.name.to_string(), p.index), v);
                }
            }
        }
        let mut failed = None;
        for (dir, offsets) in per_dir {
            if let Err(e) = checkpoint::write(&dir.join(file), &offsets) {
                warn!("cannot write {file} in {}: {e:#}", dir.display());
                failed = Some(e);
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &Path, extra: &[(&str, &str)]) -> Result<BrokerConfig> {
        let mut pairs = vec![("log.dirs".to_string(), dir.display().to_string())];
        pairs.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        BrokerConfig::from_pairs(pairs)
    }

    #[test]
    fn restored_values_and_defaults() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut hw = Offsets::new();
        hw.insert(("t".into(), 0), 42);
        checkpoint::write(&dir.join(HIGH_WATERMARK_FILE), &hw).unwrap();
        let c = LogDirCheckpoints::load(&config(dir, &[]).unwrap()).unwrap();
        assert_eq!(c.high_watermark_interval_ms, 5000);
        assert_eq!(c.recovery_point_interval_ms, 60_000);
        assert_eq!(c.high_watermark(&dir.join("t-0"), "t", 0), 42);
        assert_eq!(c.high_watermark(&dir.join("t-1"), "t", 1), 0);
        // No recovery-point file: whole logs are recovered.
        assert_eq!(c.recovery_point(&dir.join("t-0"), "t", 0), 0);

        let mut rp = Offsets::new();
        rp.insert(("t".into(), 0), 17);
        checkpoint::write(&dir.join(RECOVERY_POINT_FILE), &rp).unwrap();
        // An unreadable high watermark file counts as absent.
        std::fs::write(dir.join(HIGH_WATERMARK_FILE), "0\n9\nt 0 1\n").unwrap();
        let c = LogDirCheckpoints::load(&config(dir, &[]).unwrap()).unwrap();
        assert_eq!(c.recovery_point(&dir.join("t-0"), "t", 0), 17);
        assert_eq!(c.recovery_point(&dir.join("u-0"), "u", 0), 0);
        assert_eq!(c.high_watermark(&dir.join("t-0"), "t", 0), 0);
        assert_eq!(c.log_start(&dir.join("t-0"), "t", 0), None);

        let mut ls = Offsets::new();
        ls.insert(("t".into(), 0), 123);
        checkpoint::write(&dir.join(LOG_START_FILE), &ls).unwrap();
        let c = LogDirCheckpoints::load(&config(dir, &[]).unwrap()).unwrap();
        assert_eq!(c.log_start_interval_ms, 60_000);
        assert_eq!(c.log_start(&dir.join("t-0"), "t", 0), Some(123));
        assert_eq!(c.log_start(&dir.join("t-1"), "t", 1), None);
    }

    #[test]
    fn intervals_are_read_and_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let c = LogDirCheckpoints::load(
            &config(
                tmp.path(),
                &[
                    (HIGH_WATERMARK_INTERVAL_KEY, "100"),
                    (RECOVERY_POINT_INTERVAL_KEY, "250"),
                ],
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(c.high_watermark_interval_ms, 100);
        assert_eq!(c.recovery_point_interval_ms, 250);
        for bad in ["0", "-5", "soon"] {
            // The broker config type-checks Kafka's keys; what parses is range-checked here.
            let e = match config(tmp.path(), &[(HIGH_WATERMARK_INTERVAL_KEY, bad)]) {
                Err(e) => format!("{e:#}"),
                Ok(cfg) => LogDirCheckpoints::load(&cfg).err().unwrap().to_string(),
            };
            assert!(e.contains(HIGH_WATERMARK_INTERVAL_KEY), "{e}");
        }
    }
}
