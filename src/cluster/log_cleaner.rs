//! The log cleaner's threads (`log.cleaner.threads`, Kafka's `LogCleaner`): each pass takes
//! every compacted replica on this broker, asks `log::cleaner::decide::choose` for the
//! dirtiest one not being cleaned by another thread, cleans it without its lock, swaps the
//! result in, and records the new first dirty offset in its log dir's
//! `cleaner-offset-checkpoint`. A thread that finds nothing sleeps `log.cleaner.backoff.ms`.
//! Topic configs and the dynamic `log.cleaner.*` broker configs are read at each pass, so
//! changes apply at the next one.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::{info, warn};

use super::Controller;
use super::partition::Partition;
use super::topic_config;
use crate::config::BrokerConfig;
use crate::log::checkpoint::{self, CLEANER_OFFSET_FILE, Offsets};
use crate::log::cleaner::throttle::{self, Throttle};
use crate::log::cleaner::{Candidate, clean, decide};

type Key = (String, i32);

/// The cleaner's broker settings (read at each pass; the thread count at start).
#[derive(Debug, Clone, PartialEq)]
pub struct CleanerSettings {
    pub enable: bool,
    pub threads: usize,
    pub dedupe_buffer_bytes: u64,
    pub load_factor: f64,
    pub backoff_ms: u64,
    /// `log.cleaner.io.max.bytes.per.second` (none: unlimited).
    pub io_limit: Option<f64>,
}

impl CleanerSettings {
    pub fn from_broker(c: &BrokerConfig) -> CleanerSettings {
        let raw = |k: &str| c.raw.get(k).map(|v| v.trim().to_string());
        CleanerSettings {
            enable: raw("log.cleaner.enable").is_none_or(|v| !v.eq_ignore_ascii_case("false")),
            threads: raw("log.cleaner.threads")
                .and_then(|v| v.parse().ok())
                .unwrap_or(1usize)
                .max(1),
            dedupe_buffer_bytes: raw("log.cleaner.dedupe.buffer.size")
                .and_then(|v| v.parse().ok())
                .unwrap_or(134_217_728),
            load_factor: raw("log.cleaner.io.buffer.load.factor")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.9),
            backoff_ms: raw("log.cleaner.backoff.ms")
                .and_then(|v| v.parse().ok())
                .unwrap_or(15_000),
            io_limit: throttle::limit_of(raw("log.cleaner.io.max.bytes.per.second").as_deref()),
        }
    }
}

#[derive(Default)]
struct State {
    /// Per log dir, the first dirty offset of each log cleaned there.
    checkpoints: HashMap<PathBuf, Offsets>,
    in_progress: HashSet<Key>,
    /// Delete horizons a cleaning left pending, per log.
    horizons: HashMap<Key, i64>,
}

/// The cleaner threads' way to the controller: runs the pass given with it and answers true,
/// or answers false once the broker is gone.
pub type WithController = Arc<dyn Fn(&mut dyn FnMut(&Controller)) -> bool + Send + Sync>;

pub struct LogCleaner {
    state: Mutex<State>,
    stopped: AtomicBool,
    throttle: Arc<Throttle>,
}

impl LogCleaner {
    /// Reads each log dir's `cleaner-offset-checkpoint` (an unreadable one counts as empty:
    /// the logs are cleaned again from their start).
    pub fn open(config: &BrokerConfig) -> LogCleaner {
        let mut state = State::default();
        for dir in &config.log_dirs {
            let path = dir.join(CLEANER_OFFSET_FILE);
            let offsets = checkpoint::read(&path).unwrap_or_else(|e| {
                warn!("{e:#}; cleaning every compacted log there from its start");
                Offsets::new()
            });
            state.checkpoints.insert(dir.clone(), offsets);
        }
        LogCleaner {
            state: Mutex::new(state),
            stopped: AtomicBool::new(false),
            throttle: Arc::default(),
        }
    }

    /// Starts the threads; each pass reaches the controller through `controller`, and they
    /// end once it answers that the broker is gone, or at [`LogCleaner::stop`].
    pub fn start(self: &Arc<Self>, controller: WithController, config: &BrokerConfig) {
        let settings = CleanerSettings::from_broker(config);
        if !settings.enable {
            info!("log cleaner disabled (log.cleaner.enable=false)");
            return;
        }
        for i in 0..settings.threads {
            let me = self.clone();
            let controller = controller.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("log-cleaner-{i}"))
                .spawn(move || me.run(&controller));
            if let Err(e) = spawned {
                warn!("cannot start a log cleaner thread: {e}");
            }
        }
    }

    /// Stops the threads after their current cleaning (a cleaning cut short by the process
    /// ending is safe too: its swap completes or is discarded at start-up).
    /// Waits (at most 30 s) for cleanings under way to end.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        for _ in 0..300 {
            if self.state.lock().unwrap().in_progress.is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn run(&self, controller: &WithController) {
        while !self.stopped.load(Ordering::Acquire) {
            let (mut cleaned, mut backoff_ms) = (false, 0);
            let alive = controller(&mut |c| {
                let settings = CleanerSettings::from_broker(&c.defaults().merged);
                cleaned = self.clean_one(c, &settings, crate::log::now_ms());
                backoff_ms = settings.backoff_ms;
            });
            if !alive {
                return;
            }
            if !cleaned {
                let mut left = backoff_ms;
                while left > 0 && !self.stopped.load(Ordering::Acquire) {
                    let step = left.min(200);
                    std::thread::sleep(Duration::from_millis(step));
                    left -= step;
                }
            }
        }
    }

    /// One pass: cleans the dirtiest compacted log, if one is due. Returns whether one was.
    pub fn clean_one(&self, c: &Controller, settings: &CleanerSettings, now_ms: i64) -> bool {
        let merged = c.defaults().merged.clone();
        let threads = settings.threads.max(1) as u64;
        let map_bytes = settings.dedupe_buffer_bytes / threads;
        let mut replicas: Vec<(Key, Arc<Partition>)> = Vec::new();
        let mut candidates: Vec<Candidate> = Vec::new();
        let mut views = Vec::new();
        {
            let st = self.state.lock().unwrap();
            for t in c.topics() {
                let cfg = topic_config::compaction(&merged, &t.configs);
                if !cfg.compact {
                    continue;
                }
                for p in &t.partitions {
                    let key = (t.name.to_string(), p.index);
                    if st.in_progress.contains(&key) {
                        continue;
                    }
                    let cp = st
                        .checkpoints
                        .get(&p.log_dir())
                        .and_then(|o| o.get(&key))
                        .copied();
                    let horizon = st.horizons.get(&key).copied();
                    let view = p.cleaner_view(
                        cfg.clone(),
                        cp,
                        horizon,
                        (map_bytes, settings.load_factor),
                        now_ms,
                    );
                    candidates.push(view.candidate.clone());
                    views.push(view);
                    replicas.push((key, p.clone()));
                }
            }
        }
        let Some((i, cl)) = decide::choose(&candidates, now_ms) else {
            return false;
        };
        let (key, p) = replicas.swap_remove(i);
        let mut view = views.swap_remove(i);
        if !self.state.lock().unwrap().in_progress.insert(key.clone()) {
            return false;
        }
        view.input.first_dirty_offset = cl.first_dirty_offset;
        view.input.end_offset = cl.end_offset;
        self.throttle.set_limit(settings.io_limit);
        view.input.throttle = Some(self.throttle.clone());
        let result = clean::clean(&view.input).and_then(|out| {
            let swapped = p.swap_cleaned(&out.cleaned)?;
            Ok((out, swapped))
        });
        let mut st = self.state.lock().unwrap();
        st.in_progress.remove(&key);
        match result {
            Ok((out, swapped)) => {
                info!(
                    topic = %key.0, partition = key.1,
                    from = cl.first_dirty_offset, to = out.next_dirty_offset,
                    read = out.bytes_read, written = out.bytes_written,
                    dropped = out.records_dropped, segments = swapped,
                    "log cleaned"
                );
                if swapped == out.cleaned.len() {
                    match out.pending_delete_horizon {
                        Some(h) => st.horizons.insert(key.clone(), h),
                        None => st.horizons.remove(&key),
                    };
                    let dir = p.log_dir();
                    let offsets = st.checkpoints.entry(dir.clone()).or_default();
                    offsets.insert(key, out.next_dirty_offset);
                    write_checkpoint(&dir, offsets);
                }
                true
            }
            Err(e) => {
                warn!(topic = %key.0, partition = key.1, "cleaning failed: {e}");
                false
            }
        }
    }

    /// Carries a partition's cleaner checkpoint from log dir `from` to `to`, after the
    /// partition moved there (Kafka's `alterCheckpointDir`).
    pub fn move_checkpoint(&self, from: &Path, to: &Path, topic: &str, partition: i32) {
        let mut st = self.state.lock().unwrap();
        let key = (topic.to_string(), partition);
        let Some(offset) = st.checkpoints.get_mut(from).and_then(|o| o.remove(&key)) else {
            return;
        };
        let dest = st.checkpoints.entry(to.to_path_buf()).or_default();
        dest.insert(key, offset);
        write_checkpoint(to, dest);
        if let Some(o) = st.checkpoints.get(from) {
            write_checkpoint(from, o);
        }
    }

    /// Forgets a deleted partition's checkpoint.
    pub fn forget(&self, log_dir: &Path, topic: &str, partition: i32) {
        let mut st = self.state.lock().unwrap();
        let key = (topic.to_string(), partition);
        st.horizons.remove(&key);
        if let Some(o) = st.checkpoints.get_mut(log_dir)
            && o.remove(&key).is_some()
        {
            write_checkpoint(log_dir, o);
        }
    }
}

fn write_checkpoint(dir: &Path, offsets: &Offsets) {
    if let Err(e) = checkpoint::write(&dir.join(CLEANER_OFFSET_FILE), offsets) {
        warn!(dir = %dir.display(), "cannot write {CLEANER_OFFSET_FILE}: {e:#}");
    }
}
