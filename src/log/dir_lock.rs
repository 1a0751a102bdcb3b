//! `<log dir>/.lock`: one broker per data directory, as Kafka's `FileLock` ensures.
//!
//! The lock is an exclusive `flock` on the file, held for as long as the [`DirLock`] lives
//! (the broker's lifetime); the kernel drops it when the process dies, even by SIGKILL, so a
//! stale file never blocks a restart. After locking, the holder writes its pid into the file
//! (Kafka leaves it empty), so a broker refused the lock can name the holder; the pid is only
//! a hint, since the file may be from Kafka or from an earlier holder.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

pub const LOCK_FILE: &str = ".lock";

/// A held lock on one log directory.
#[derive(Debug)]
pub struct DirLock {
    _file: Flock<File>,
    pub dir: PathBuf,
}

impl DirLock {
    /// Takes the lock on `dir` (which must exist) without waiting. Fails with one line
    /// naming the directory (and the holder's pid, when the file has one) if another process
    /// holds it.
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(f) => f,
            Err((mut f, Errno::EWOULDBLOCK)) => {
                let mut text = String::new();
                let _ = f.read_to_string(&mut text);
                let holder = match text.trim().parse::<u32>() {
                    Ok(pid) => format!("pid {pid}"),
                    Err(_) => "pid unknown".to_string(),
                };
                bail!(
                    "{} is in use by another broker ({holder}, holding {})",
                    dir.display(),
                    path.display()
                );
            }
            Err((_, e)) => bail!("cannot lock {}: {e}", path.display()),
        };
        file.set_len(0)
            .and_then(|_| file.rewind())
            .and_then(|_| writeln!(file, "{}", std::process::id()))
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(DirLock {
            _file: file,
            dir: dir.to_path_buf(),
        })
    }
}

/// Creates each of `dirs` if missing and takes its lock: what a node does first with its log
/// dirs, before any other file under them (the metadata log's included) is opened.
pub fn lock_dirs(dirs: &[PathBuf]) -> Result<Vec<DirLock>> {
    dirs.iter()
        .map(|dir| {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("log.dirs: cannot create {}", dir.display()))?;
            DirLock::acquire(dir)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_in_one_process_is_refused_and_names_the_pid() {
        let tmp = tempfile::tempdir().unwrap();
        let held = DirLock::acquire(tmp.path()).unwrap();
        let text = std::fs::read_to_string(tmp.path().join(LOCK_FILE)).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
        // flock locks belong to the open file description, so a second open conflicts even
        // within one process.
        let e = DirLock::acquire(tmp.path()).unwrap_err().to_string();
        assert!(e.contains("in use by another broker"), "{e}");
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        drop(held);
        DirLock::acquire(tmp.path()).unwrap();
    }
}
