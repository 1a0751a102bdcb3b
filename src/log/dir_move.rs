//! Moving a partition directory to another log dir, crash-safely, in Kafka's naming.
//!
//! A move copies `<dir>/<topic>-<partition>` into `<dest>/<topic>-<partition>.<id>-future`
//! (`<id>`: 32 hex digits, as Kafka's random UUID without dashes), fsyncs every file and the
//! directories, then swaps: the current directory is renamed to
//! `<topic>-<partition>.<id>-delete` (in its own log dir), the future one to
//! `<dest>/<topic>-<partition>`, and the `-delete` one is removed.
//!
//! A kill -9 at any point leaves a state [`plan_startup`] resolves:
//! - a `-delete` directory is garbage (the swap began, so the future copy is complete) and is
//!   removed;
//! - a `-future` directory whose final name still exists in some log dir is an unfinished copy
//!   and is removed;
//! - a `-future` directory with no final directory anywhere is a complete copy whose swap was
//!   cut after the first rename, and is renamed to its final name.
//!
//! The caller holds whatever keeps the source from changing during [`copy_to_future`] (the
//! partition's log lock).

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

const FUTURE_SUFFIX: &str = "-future";
const DELETE_SUFFIX: &str = "-delete";

/// Kafka's limit on a file name, which a future directory's name must respect.
pub const MAX_DIR_NAME_LEN: usize = 255;

fn unique_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The length of a future directory's name for `topic`-`partition` (Kafka refuses a move
/// whose future name would exceed [`MAX_DIR_NAME_LEN`]).
pub fn future_dir_name_len(topic: &str, partition: i32) -> usize {
    format!("{topic}-{partition}").len() + 1 + 32 + FUTURE_SUFFIX.len()
}

/// What a name in a log dir is, for the start-up rules.
#[derive(Debug, PartialEq, Eq)]
enum Kind<'a> {
    /// `<name>.<id>-future`, with `<name>`.
    Future(&'a str),
    /// `<name>.<id>-delete`.
    Delete,
    Other,
}

fn kind(name: &str) -> Kind<'_> {
    let split = |suffix: &str| {
        let stem = name.strip_suffix(suffix)?;
        let (base, id) = stem.rsplit_once('.')?;
        (id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) && !base.is_empty())
            .then_some(base)
    };
    if let Some(base) = split(FUTURE_SUFFIX) {
        Kind::Future(base)
    } else if split(DELETE_SUFFIX).is_some() {
        Kind::Delete
    } else {
        Kind::Other
    }
}

/// One start-up action on a log dir's entry.
#[derive(Debug, PartialEq, Eq)]
pub enum StartupAction {
    /// Remove this directory (a `-delete` one, or an unfinished `-future` copy).
    Remove(PathBuf),
    /// Rename a complete `-future` copy to its final name.
    Promote { from: PathBuf, to: PathBuf },
}

/// The actions that finish or undo the moves a crash interrupted, given the directory names
/// in each log dir. Pure.
pub fn plan_startup(log_dirs: &[(PathBuf, Vec<String>)]) -> Vec<StartupAction> {
    let finals: HashSet<&str> = log_dirs
        .iter()
        .flat_map(|(_, names)| names.iter())
        .filter(|n| kind(n) == Kind::Other)
        .map(String::as_str)
        .collect();
    let mut promoted = HashSet::new();
    let mut actions = Vec::new();
    for (dir, names) in log_dirs {
        for name in names {
            match kind(name) {
                Kind::Delete => actions.push(StartupAction::Remove(dir.join(name))),
                // Two complete copies of one partition cannot both be promoted; the second
                // is removed.
                Kind::Future(base) if !finals.contains(base) && promoted.insert(base) => actions
                    .push(StartupAction::Promote {
                        from: dir.join(name),
                        to: dir.join(base),
                    }),
                Kind::Future(_) => actions.push(StartupAction::Remove(dir.join(name))),
                Kind::Other => {}
            }
        }
    }
    actions
}

/// Applies [`plan_startup`] to the log dirs (each already locked by this broker). Returns the
/// actions taken.
pub fn finish_interrupted_moves(log_dirs: &[PathBuf]) -> io::Result<Vec<StartupAction>> {
    let mut listing = Vec::new();
    for dir in log_dirs {
        let mut names = Vec::new();
        if dir.is_dir() {
            for e in fs::read_dir(dir)? {
                let e = e?;
                if e.file_type()?.is_dir()
                    && let Some(n) = e.file_name().to_str()
                {
                    names.push(n.to_string());
                }
            }
        }
        names.sort();
        listing.push((dir.clone(), names));
    }
    let actions = plan_startup(&listing);
    for a in &actions {
        match a {
            StartupAction::Remove(p) => remove_dir(p)?,
            StartupAction::Promote { from, to } => {
                fs::rename(from, to)?;
                sync_parent(to)?;
            }
        }
    }
    Ok(actions)
}

fn remove_dir(p: &Path) -> io::Result<()> {
    match fs::remove_dir_all(p) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => sync_parent(p),
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

fn sync_parent(p: &Path) -> io::Result<()> {
    match p.parent() {
        Some(parent) => sync_dir(parent),
        None => Ok(()),
    }
}

/// Copies the regular files of partition directory `src` into a new future directory in
/// `dest_log_dir`, every file and the directory fsynced. Returns the future directory. A
/// failed copy removes what it wrote.
pub fn copy_to_future(src: &Path, dest_log_dir: &Path) -> io::Result<PathBuf> {
    let name = dir_name(src)?;
    let future = dest_log_dir.join(format!("{name}.{}{FUTURE_SUFFIX}", unique_id()));
    let copied = (|| {
        fs::create_dir(&future)?;
        for e in fs::read_dir(src)? {
            let e = e?;
            if !e.file_type()?.is_file() {
                continue;
            }
            let to = future.join(e.file_name());
            fs::copy(e.path(), &to)?;
            fs::File::open(&to)?.sync_all()?;
        }
        sync_dir(&future)?;
        sync_parent(&future)
    })();
    if let Err(e) = copied {
        let _ = fs::remove_dir_all(&future);
        return Err(e);
    }
    Ok(future)
}

fn dir_name(p: &Path) -> io::Result<&str> {
    p.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a partition directory: {}", p.display()),
        )
    })
}

/// Replaces partition directory `current` with the complete copy `future`: `current` becomes
/// a `-delete` directory, `future` takes the partition's name in its log dir, and the
/// `-delete` directory is removed. Returns the partition's new directory.
pub fn swap_in_future(current: &Path, future: &Path) -> io::Result<PathBuf> {
    let name = dir_name(current)?;
    let (Some(src_log_dir), Some(dest_log_dir)) = (current.parent(), future.parent()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "partition directories need a parent",
        ));
    };
    let doomed = src_log_dir.join(format!("{name}.{}{DELETE_SUFFIX}", unique_id()));
    fs::rename(current, &doomed)?;
    sync_dir(src_log_dir)?;
    let target = dest_log_dir.join(name);
    fs::rename(future, &target)?;
    sync_dir(dest_log_dir)?;
    remove_dir(&doomed)?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef0123456789abcdef";

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn names_are_kafkas() {
        assert_eq!(kind(&format!("t-0.{ID}-future")), Kind::Future("t-0"));
        assert_eq!(kind(&format!("my.topic-3.{ID}-delete")), Kind::Delete);
        assert_eq!(kind("my.topic-3"), Kind::Other);
        assert_eq!(kind("t-0.abc-future"), Kind::Other);
        assert_eq!(kind(&format!(".{ID}-future")), Kind::Other);
        assert_eq!(
            future_dir_name_len("t", 0),
            format!("t-0.{ID}-future").len()
        );
    }

    #[test]
    fn startup_rules() {
        let a = PathBuf::from("/a");
        let b = PathBuf::from("/b");
        let plan = plan_startup(&[
            (
                a.clone(),
                names(&[
                    "t-0",
                    &format!("t-1.{ID}-delete"),
                    &format!("u-0.{ID}-delete"),
                ]),
            ),
            (
                b.clone(),
                names(&[
                    &format!("t-0.{ID}-future"),
                    &format!("u-0.{ID}-future"),
                    "v-0",
                ]),
            ),
        ]);
        assert_eq!(
            plan,
            vec![
                StartupAction::Remove(a.join(format!("t-1.{ID}-delete"))),
                StartupAction::Remove(a.join(format!("u-0.{ID}-delete"))),
                // t-0 is still in /a: the copy never finished.
                StartupAction::Remove(b.join(format!("t-0.{ID}-future"))),
                // u-0 is nowhere else: the copy was complete.
                StartupAction::Promote {
                    from: b.join(format!("u-0.{ID}-future")),
                    to: b.join("u-0"),
                },
            ]
        );
    }

    fn write(dir: &Path, file: &str, body: &str) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join(file), body).unwrap();
    }

    #[test]
    fn move_then_every_crash_point_resolves() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        fs::create_dir_all(&b).unwrap();
        write(&a.join("t-0"), "00000000000000000000.log", "records");
        write(&a.join("t-0"), "leader-epoch-checkpoint", "0\n0\n");

        // Cut during the copy: the future copy goes, the partition stays where it was.
        let future = copy_to_future(&a.join("t-0"), &b).unwrap();
        let dirs = [a.clone(), b.clone()];
        finish_interrupted_moves(&dirs).unwrap();
        assert!(!future.exists());
        assert!(a.join("t-0/00000000000000000000.log").exists());

        // Cut after the first rename of the swap: the complete copy is promoted.
        let future = copy_to_future(&a.join("t-0"), &b).unwrap();
        let doomed = a.join(format!("t-0.{ID}-delete"));
        fs::rename(a.join("t-0"), &doomed).unwrap();
        let done = finish_interrupted_moves(&dirs).unwrap();
        assert_eq!(done.len(), 2, "{done:?}");
        assert!(!doomed.exists() && !future.exists());
        assert_eq!(
            fs::read_to_string(b.join("t-0/00000000000000000000.log")).unwrap(),
            "records"
        );

        // A whole move back, then a restart with nothing left to do.
        let future = copy_to_future(&b.join("t-0"), &a).unwrap();
        let moved = swap_in_future(&b.join("t-0"), &future).unwrap();
        assert_eq!(moved, a.join("t-0"));
        assert!(!b.join("t-0").exists());
        assert_eq!(
            fs::read_to_string(a.join("t-0/leader-epoch-checkpoint")).unwrap(),
            "0\n0\n"
        );
        assert!(finish_interrupted_moves(&dirs).unwrap().is_empty());
        assert_eq!(fs::read_dir(&b).unwrap().count(), 0);
    }
}
