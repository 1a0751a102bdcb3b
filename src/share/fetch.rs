//! The log side of a share fetch: read whole batches of a partition from the first acquirable
//! offset, find which offsets they cover, acquire those for the member and keep the batches
//! that hold acquired records.
//!
//! The records are read into memory (not sent as file regions like Fetch): what is acquired
//! depends on the batches read, and the response is built once the acquisition is decided.

use std::os::unix::fs::FileExt;

use bytes::Bytes;

use super::partition::Acquired;
use super::session::TopicPartition;
use super::{Coordinator, Reset};
use crate::cluster::partition::Partition;

/// What one partition gave a share fetch.
#[derive(Debug, Default)]
pub struct Got {
    pub records: Bytes,
    pub acquired: Vec<Acquired>,
}

/// `(base offset, last offset, size)` of each whole batch at the front of `data`.
pub fn batches(data: &[u8]) -> Vec<(i64, i64, usize)> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while data.len() - at >= 61 {
        let h = &data[at..];
        let base = i64::from_be_bytes(h[0..8].try_into().unwrap_or([0; 8]));
        let len = i32::from_be_bytes(h[8..12].try_into().unwrap_or([0; 4]));
        let delta = i32::from_be_bytes(h[23..27].try_into().unwrap_or([0; 4]));
        let Ok(len) = usize::try_from(len) else {
            break;
        };
        let size = len + 12;
        if len < 49 || size > data.len() - at {
            break;
        }
        out.push((base, base + delta.max(0) as i64, size));
        at += size;
    }
    out
}

/// Acquires records of `p` for `member`, reading at most `max_bytes` (at least one batch) and
/// acquiring at most `max_records`. Nothing acquirable: an empty `Got` and the earliest lock
/// deadline, when one would make records acquirable.
pub fn acquire(
    share: &Coordinator,
    group: &str,
    member: &str,
    tp: TopicPartition,
    p: &Partition,
    max_bytes: usize,
    max_records: i64,
) -> std::io::Result<(Got, Option<i64>)> {
    let hw = p.high_watermark();
    let log_start = p.log_start_offset();
    let start = |reset: Reset| match reset {
        Reset::Earliest => log_start,
        Reset::Latest => hw,
        Reset::ByDuration(ms) => p
            .offset_for_timestamp(crate::clock::now_ms() - ms)
            .ok()
            .flatten()
            .map_or(hw, |(_, offset)| offset),
    };
    let (from, deadline) = share.next_acquirable(group, tp, log_start, hw, &start);
    let Some(from) = from else {
        return Ok((Got::default(), deadline));
    };
    let slice = match p.read(from, max_bytes, true) {
        Ok(s) => s,
        Err(_) => return Ok((Got::default(), deadline)),
    };
    let Some(file) = slice.file.filter(|_| slice.len > 0) else {
        return Ok((Got::default(), deadline));
    };
    let mut data = vec![0u8; slice.len];
    file.read_exact_at(&mut data, slice.position)?;
    let found = batches(&data);
    let Some(&(_, last, _)) = found.last() else {
        return Ok((Got::default(), deadline));
    };
    let acquired = share.acquire(group, member, tp, from, (last + 1).min(hw), max_records);
    let Some(last_acquired) = acquired.iter().map(|a| a.last_offset).max() else {
        return Ok((Got::default(), deadline));
    };
    let keep: usize = found
        .iter()
        .take_while(|(base, _, _)| *base <= last_acquired)
        .map(|(_, _, size)| size)
        .sum();
    data.truncate(keep);
    Ok((
        Got {
            records: Bytes::from(data),
            acquired,
        },
        deadline,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, records: i32) -> Vec<u8> {
        let mut b = vec![0u8; 61];
        b[0..8].copy_from_slice(&base.to_be_bytes());
        b[8..12].copy_from_slice(&49i32.to_be_bytes());
        b[23..27].copy_from_slice(&(records - 1).to_be_bytes());
        b
    }

    #[test]
    fn whole_batches_only() {
        let mut d = batch(5, 3);
        d.extend(batch(8, 1));
        d.extend(&batch(9, 2)[..30]);
        assert_eq!(batches(&d), vec![(5, 7, 61), (8, 8, 61)]);
        let mut bad = batch(0, 1);
        bad[8..12].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(batches(&bad), vec![]);
    }
}
