//! Kafka's per-log-dir offset checkpoint files: `replication-offset-checkpoint` (high
//! watermarks), `recovery-point-offset-checkpoint` (offsets below which the log is known
//! flushed), `log-start-offset-checkpoint` and `cleaner-offset-checkpoint` (where each
//! compacted log's dirty section starts). One format for all four:
//!
//! ```text
//! 0                 version
//! 2                 number of entries
//! orders 0 1500     topic partition offset
//! orders 1 1433
//! ```
//!
//! Written beside and renamed into place, so a crash leaves the old or the new file.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result, bail};

pub const HIGH_WATERMARK_FILE: &str = "replication-offset-checkpoint";
pub const RECOVERY_POINT_FILE: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_FILE: &str = "log-start-offset-checkpoint";
pub const CLEANER_OFFSET_FILE: &str = "cleaner-offset-checkpoint";

/// (topic, partition) → offset.
pub type Offsets = BTreeMap<(String, i32), i64>;

pub fn to_text(offsets: &Offsets) -> String {
    let mut s = format!("0\n{}\n", offsets.len());
    for ((t, p), o) in offsets {
        s.push_str(&format!("{t} {p} {o}\n"));
    }
    s
}

/// Reads the "version 0, entry count" header Kafka's checkpoint files share; the entry lines
/// follow in `lines`.
pub fn parse_header<'a>(lines: &mut impl Iterator<Item = &'a str>) -> Result<usize> {
    let version = lines.next().unwrap_or("").trim();
    if version != "0" {
        bail!("unsupported version {version:?}");
    }
    lines
        .next()
        .unwrap_or("")
        .trim()
        .parse()
        .context("bad entry count")
}

pub fn parse(text: &str) -> Result<Offsets> {
    let mut lines = text.lines();
    let count = parse_header(&mut lines)?;
    let mut out = Offsets::new();
    for (i, line) in lines.by_ref().take(count).enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [t, p, o] = f.as_slice() else {
            bail!(
                "entry {}: expected \"topic partition offset\", got {line:?}",
                i + 1
            );
        };
        let p: i32 = p
            .parse()
            .with_context(|| format!("entry {}: bad partition", i + 1))?;
        let o: i64 = o
            .parse()
            .with_context(|| format!("entry {}: bad offset", i + 1))?;
        out.insert((t.to_string(), p), o);
    }
    if out.len() != count {
        bail!("{count} entries announced, {} present", out.len());
    }
    Ok(out)
}

/// Reads a checkpoint file; a missing one is empty.
pub fn read(path: &Path) -> Result<Offsets> {
    match fs::read_to_string(path) {
        Ok(t) => parse(&t).with_context(|| format!("{}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Offsets::new()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Writes a checkpoint file beside and renames it into place, fsynced.
pub fn write(path: &Path, offsets: &Offsets) -> Result<()> {
    write_atomically(path, to_text(offsets).as_bytes())
}

/// Writes `path` by writing a temporary file beside it, syncing it, renaming it into place and
/// syncing the directory, so a crash leaves either the old or the new contents.
pub fn write_atomically(path: &Path, data: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f =
            fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        f.write_all(data)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path).with_context(|| format!("cannot rename to {}", path.display()))?;
    if let Some(dir) = path.parent() {
        fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("cannot sync directory {}", dir.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(HIGH_WATERMARK_FILE);
        assert!(read(&path).unwrap().is_empty());
        let mut o = Offsets::new();
        o.insert(("orders".into(), 1), 1433);
        o.insert(("orders".into(), 0), 1500);
        write(&path, &o).unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "0\n2\norders 0 1500\norders 1 1433\n"
        );
        assert_eq!(read(&path).unwrap(), o);
        for bad in ["1\n0\n", "0\n2\na 0 1\n", "0\n1\na x 1\n", "0\n1\na 0\n"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
