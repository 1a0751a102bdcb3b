//! `sluice-producer-ids`, the producer-id blocks an earlier release's single node reserved in
//! its first log dir (`version=1`, `next.block.start=<n>`): read once, when that node's data
//! dir is imported into the metadata quorum, so the quorum's blocks start above every id the
//! node handed out. Producer ids now come from the controller's blocks.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result, bail};

const FILE_NAME: &str = "sluice-producer-ids";

/// The id above every id an earlier release's single node handed out from `dir` (0 when it
/// never ran there).
pub fn next_unused(dir: &Path) -> Result<i64> {
    let path = dir.join(FILE_NAME);
    match fs::read_to_string(&path) {
        Ok(text) => parse(&text).with_context(|| format!("{} is unreadable", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn parse(text: &str) -> Result<i64> {
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("next.block.start=") {
            let n: i64 = v.trim().parse()?;
            if n < 0 {
                bail!("negative next.block.start");
            }
            return Ok(n);
        }
    }
    bail!("no next.block.start line")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_next_block_start() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(
            next_unused(tmp.path()).unwrap(),
            0,
            "no file: nothing handed out"
        );
        let path = tmp.path().join(FILE_NAME);
        std::fs::write(&path, "version=1\nnext.block.start=3000\n").unwrap();
        assert_eq!(next_unused(tmp.path()).unwrap(), 3000);
        for bad in ["garbage", "next.block.start=-1", "next.block.start=x"] {
            std::fs::write(&path, bad).unwrap();
            assert!(next_unused(tmp.path()).is_err(), "{bad}");
        }
    }
}
