//! `<first log dir>/sluice-share-state`: each share partition's start offset (SPSO), so that a
//! restarted broker resumes every share group where its acknowledgements left it rather than
//! at `share.auto.offset.reset`. Written whole (temporary file, fsync, rename) by the share
//! coordinator's timer when something changed and at shutdown; read once at start-up.
//!
//! Only the SPSO is kept: in-flight records (acquired, released, acknowledged above the SPSO)
//! and delivery counts are not, so after a restart every record from the SPSO on is delivered
//! again with a delivery count starting at 1 (at least once: nothing acknowledged before the
//! last write is redelivered, an acknowledgement newer than it may be). Kafka keeps the whole
//! state in `__share_group_state`.
//!
//! Format: "SLSH" + version u8 (1) + count u32, then per entry group length u16, group bytes,
//! topic id (16 bytes), partition i32, start offset i64; then the CRC-32C of all before it.

use std::io::Write;
use std::path::Path;

use anyhow::{Result, bail};
use uuid::Uuid;

pub const FILE: &str = "sluice-share-state";
const MAGIC: &[u8; 4] = b"SLSH";

/// One share partition's persisted state: group, topic id, partition, SPSO.
pub type Entry = (String, Uuid, i32, i64);

pub fn encode(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.push(1);
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for (g, t, p, o) in entries {
        let g = &g.as_bytes()[..g.len().min(u16::MAX as usize)];
        out.extend_from_slice(&(g.len() as u16).to_be_bytes());
        out.extend_from_slice(g);
        out.extend_from_slice(t.as_bytes());
        out.extend_from_slice(&p.to_be_bytes());
        out.extend_from_slice(&o.to_be_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

pub fn decode(data: &[u8]) -> Result<Vec<Entry>> {
    if data.len() < 13 || &data[..4] != MAGIC || data[4] != 1 {
        bail!("not a version 1 share state file");
    }
    let (body, crc) = data.split_at(data.len() - 4);
    if crc32c::crc32c(body) != u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]) {
        bail!("CRC mismatch");
    }
    let mut at = 9usize;
    let mut take = |n: usize| -> Result<&[u8]> {
        let s = body
            .get(at..at + n)
            .ok_or_else(|| anyhow::anyhow!("truncated"))?;
        at += n;
        Ok(s)
    };
    let count = u32::from_be_bytes(body[5..9].try_into()?);
    let mut out = Vec::new();
    for _ in 0..count {
        let len = u16::from_be_bytes(take(2)?.try_into()?) as usize;
        let group = String::from_utf8(take(len)?.to_vec())?;
        let topic = Uuid::from_slice(take(16)?)?;
        let partition = i32::from_be_bytes(take(4)?.try_into()?);
        let start = i64::from_be_bytes(take(8)?.try_into()?);
        out.push((group, topic, partition, start));
    }
    Ok(out)
}

/// The entries in `dir`, none when there is no file yet.
pub fn read(dir: &Path) -> Result<Vec<Entry>> {
    match std::fs::read(dir.join(FILE)) {
        Ok(data) => decode(&data).map_err(|e| anyhow::anyhow!("{}: {e}", dir.join(FILE).display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// Replaces the file in `dir` with `entries`, durably.
pub fn write(dir: &Path, entries: &[Entry]) -> Result<()> {
    let tmp = dir.join(format!("{FILE}.tmp"));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&encode(entries))?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(FILE))?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let e = vec![
            ("g".to_string(), Uuid::from_u128(3), 0, 42),
            ("é-group".to_string(), Uuid::from_u128(4), 7, 0),
        ];
        let data = encode(&e);
        assert_eq!(decode(&data).unwrap(), e);
        let mut bad = data.clone();
        bad[12] ^= 1;
        assert!(decode(&bad).is_err());
        assert!(decode(&data[..data.len() - 1]).is_err());
        assert_eq!(decode(&encode(&[])).unwrap(), vec![]);
    }

    #[test]
    fn files_are_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).unwrap().is_empty());
        write(dir.path(), &[("g".into(), Uuid::from_u128(1), 0, 5)]).unwrap();
        write(dir.path(), &[("g".into(), Uuid::from_u128(1), 0, 9)]).unwrap();
        assert_eq!(
            read(dir.path()).unwrap(),
            vec![("g".into(), Uuid::from_u128(1), 0, 9)]
        );
    }
}
