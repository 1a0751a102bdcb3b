//! The segment `.log` files this process keeps open, bounded: past the limit the least
//! recently used are closed, and reopened (by path) when next read or written. A broker with
//! more segments than file descriptors then still runs; only its idle segments pay a reopen.
//!
//! One table for the process, since the descriptor limit is the process's. Each segment owns a
//! [`LogFile`]; using it stamps it with a global clock (an atomic store, no lock). The table's
//! lock is taken only when a file is opened: once more are open than the limit, the eighth
//! least recently used (by stamp) are closed in one pass, so the pass is paid once per many
//! opens. Closing drops the table's handle only: a reader that took one (a Fetch being sent
//! with `sendfile`) keeps its file open until it is done.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// The limit when none is configured: no bound (every segment stays open, as in Kafka).
pub const UNBOUNDED: usize = usize::MAX;

struct Table {
    limit: AtomicUsize,
    clock: AtomicU64,
    /// Every file opened since the last pass (some since closed or dropped).
    open: Mutex<Vec<Weak<Inner>>>,
    /// How many reopens there have been (a file closed by the bound, then used again).
    reopens: AtomicU64,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| Table {
        limit: AtomicUsize::new(UNBOUNDED),
        clock: AtomicU64::new(1),
        open: Mutex::new(Vec::new()),
        reopens: AtomicU64::new(0),
    })
}

/// Sets the most segment files kept open at once (at least 1). Set it before the logs are
/// opened: files opened while there is no bound are not tracked, and never closed.
pub fn set_limit(limit: usize) {
    table().limit.store(limit.max(1), Ordering::Relaxed);
}

/// The most segment files kept open at once.
pub fn limit() -> usize {
    table().limit.load(Ordering::Relaxed)
}

/// How many segment files are open now (held by the table).
pub fn open_count() -> usize {
    let open = table().open.lock().unwrap();
    open.iter()
        .filter_map(Weak::upgrade)
        .filter(|f| f.file.lock().unwrap().is_some())
        .count()
}

/// How many times a closed segment file was opened again.
pub fn reopens() -> u64 {
    table().reopens.load(Ordering::Relaxed)
}

struct Inner {
    path: PathBuf,
    file: Mutex<Option<Arc<File>>>,
    used: AtomicU64,
}

/// A segment's `.log` file: open while it is used, closed when the bound needs its slot.
/// Clones share the one file (the cleaner's snapshot of a segment holds one).
#[derive(Clone)]
pub struct LogFile(Arc<Inner>);

impl std::fmt::Debug for LogFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LogFile").field(&self.0.path).finish()
    }
}

impl LogFile {
    /// Takes `file`, just opened at `path`, into the table.
    pub fn new(file: File, path: PathBuf) -> LogFile {
        let inner = Arc::new(Inner {
            path,
            file: Mutex::new(Some(Arc::new(file))),
            used: AtomicU64::new(table().clock.fetch_add(1, Ordering::Relaxed)),
        });
        register(&inner);
        LogFile(inner)
    }

    pub fn path(&self) -> &Path {
        &self.0.path
    }

    /// The open file, reopened for reading and writing if the bound closed it.
    pub fn get(&self) -> io::Result<Arc<File>> {
        let t = table();
        self.0
            .used
            .store(t.clock.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        let mut slot = self.0.file.lock().unwrap();
        if let Some(f) = slot.as_ref() {
            return Ok(Arc::clone(f));
        }
        let f = Arc::new(
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(&self.0.path)?,
        );
        *slot = Some(Arc::clone(&f));
        drop(slot);
        t.reopens.fetch_add(1, Ordering::Relaxed);
        register(&self.0);
        Ok(f)
    }

    /// Whether the file is open now (tests).
    pub fn is_open(&self) -> bool {
        self.0.file.lock().unwrap().is_some()
    }
}

/// Notes `inner` as open; past the limit, closes the least recently used eighth.
fn register(inner: &Arc<Inner>) {
    let t = table();
    let limit = t.limit.load(Ordering::Relaxed);
    if limit == UNBOUNDED {
        // Nothing will be closed: keep no list (it would only gather dropped files).
        return;
    }
    let mut open = t.open.lock().unwrap();
    open.push(Arc::downgrade(inner));
    if open.len() <= limit {
        return;
    }
    // Keep what is still open; drop what was dropped or closed.
    let mut live: Vec<(u64, Arc<Inner>)> = open
        .iter()
        .filter_map(Weak::upgrade)
        .filter(|f| f.file.lock().unwrap().is_some())
        .map(|f| (f.used.load(Ordering::Relaxed), f))
        .collect();
    live.sort_by_key(|(used, f)| (*used, Arc::as_ptr(f) as usize));
    live.dedup_by(|a, b| Arc::ptr_eq(&a.1, &b.1));
    if live.len() > limit {
        let keep = limit - limit / 8;
        let close = live.len() - keep.max(1);
        for (_, f) in live.drain(..close) {
            // The file just registered is the newest, never among the closed.
            if !Arc::ptr_eq(&f, inner) {
                *f.file.lock().unwrap() = None;
            }
        }
    }
    *open = live.into_iter().map(|(_, f)| Arc::downgrade(&f)).collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    // The table is the process's: one test drives it, with a limit of its own.
    #[test]
    fn past_the_limit_the_least_recently_used_close_and_reopen_on_use() {
        let dir = tempfile::tempdir().unwrap();
        set_limit(8);
        let files: Vec<LogFile> = (0..20)
            .map(|i| {
                let p = dir.path().join(format!("{i}.log"));
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(&p)
                    .unwrap();
                f.write_all_at(format!("file {i}").as_bytes(), 0).unwrap();
                LogFile::new(f, p)
            })
            .collect();
        // (Other tests' segments share the table: a little slack for theirs being opened.)
        assert!(open_count() <= 10, "{} open", open_count());
        assert!(!files[0].is_open());
        // A reader's handle outlives the close.
        let held = files[19].get().unwrap();
        let before = reopens();
        for f in &files[..10] {
            let mut buf = [0u8; 8];
            let n = f.get().unwrap().read_at(&mut buf, 0).unwrap();
            assert!(n >= 6);
        }
        assert!(reopens() >= before + 10);
        assert!(open_count() <= 10);
        let mut buf = [0u8; 7];
        held.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"file 19");
        // A write through a reopened file lands in the same file.
        files[3].get().unwrap().write_all_at(b"FILE", 0).unwrap();
        drop(files);
        assert_eq!(std::fs::read(dir.path().join("3.log")).unwrap(), b"FILE 3");
        set_limit(UNBOUNDED);
    }
}
