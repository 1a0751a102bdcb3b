//! The message browser: records of one partition or all, from the log start, an offset, a
//! time (ListOffsets by timestamp) or the newest N, read with Fetch (read uncommitted, up to
//! the high watermark) and decoded here batch by batch: compressed batches through the
//! log's codecs, control batches (transaction markers) left out, and a batch that does not
//! decode reported in the answer instead of failing it.

use std::panic::AssertUnwindSafe;

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName,
    fetch_request::{FetchPartition, FetchTopic},
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder, TimestampType};
use serde_json::{Value, json};

use super::cluster::{leaders, list_offsets, metadata};
use super::render::{Browse, Partitions, Start, render};
use super::wire::{call, error_name, forward, is_peer, not_leader};
use super::{Answer, Ctx, Failure, admit, answer, query};
use crate::http::HttpState;

/// Bytes one partition's Fetch asks for.
const FETCH_BYTES: i32 = 1024 * 1024;
/// Fetches per partition for one browse, at most.
const MAX_FETCHES: usize = 16;
/// A compressed batch decompresses to at most this.
const MAX_DECOMPRESSED: usize = 64 * 1024 * 1024;

pub(super) async fn browse(State(s): State<HttpState>, headers: HeaderMap, uri: Uri) -> Response {
    answer(browse_answer(&s, &headers, &uri).await)
}

async fn browse_answer(s: &HttpState, headers: &HeaderMap, uri: &Uri) -> Answer {
    let ctx = admit(s, headers)?;
    let b = Browse::from_query(&query(uri)).map_err(Failure::bad_request)?;
    let md = metadata(&ctx, Some(std::slice::from_ref(&b.topic))).await?;
    let Some(t) = md.topics.first().filter(|t| t.error_code == 0) else {
        return Err(Failure::not_found(format!("no topic {}", b.topic)));
    };
    let mut parts: Vec<(i32, i32)> = t
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0))
        .filter(|(p, _)| b.partitions == Partitions::All || b.partitions == Partitions::One(*p))
        .collect();
    parts.sort();
    if parts.is_empty() {
        return Err(Failure::not_found(format!(
            "{} has no such partition",
            b.topic
        )));
    }
    let wanted = |ts: i64| -> Vec<(String, i32, i64)> {
        parts
            .iter()
            .map(|(p, _)| (b.topic.clone(), *p, ts))
            .collect()
    };
    let starts = list_offsets(&ctx, &wanted(-2)).await?;
    let ends = list_offsets(&ctx, &wanted(-1)).await?;
    let at_time = match b.start {
        Start::Timestamp(ts) => Some(list_offsets(&ctx, &wanted(ts)).await?),
        _ => None,
    };
    let mut records = Vec::new();
    let mut partitions = Vec::new();
    for (p, leader) in &parts {
        let k = (b.topic.clone(), *p);
        let (start, end) = match (starts.get(&k), ends.get(&k)) {
            (Some(Ok((s, _))), Some(Ok((e, _)))) => (*s, *e),
            (Some(Err(e)), _) | (_, Some(Err(e))) => {
                partitions.push(json!({ "partition": p, "leader": leader, "error": e }));
                continue;
            }
            _ => continue,
        };
        let from = match b.start {
            Start::Earliest => start,
            Start::Offset(o) => o.max(start).min(end),
            Start::Newest(n) => end.saturating_sub(n).max(start),
            Start::Timestamp(_) => match at_time.as_ref().and_then(|m| m.get(&k)) {
                Some(Ok((o, _))) if *o >= 0 => (*o).max(start).min(end),
                _ => end,
            },
        };
        let want = match b.start {
            Start::Newest(n) => (n as usize).min(b.limit),
            _ => b.limit,
        };
        let read = read_partition(&ctx, &b.topic, *p, from, end, want).await?;
        partitions.push(json!({
            "partition": p,
            "leader": leader,
            "start_offset": start,
            "end_offset": end,
            "from": from,
            "error": read.error,
            "undecodable": read.undecodable,
        }));
        records.extend(read.records);
    }
    // Across partitions: the earliest first; for the newest N, the last N of them.
    let key = |r: &Value| {
        (
            r["timestamp"].as_i64().unwrap_or(0),
            r["partition"].as_i64().unwrap_or(0),
            r["offset"].as_i64().unwrap_or(0),
        )
    };
    records.sort_by_key(key);
    let more = records.len() > b.limit;
    if let Start::Newest(_) = b.start {
        let cut = records.len().saturating_sub(b.limit);
        records.drain(..cut);
    } else {
        records.truncate(b.limit);
    }
    Ok(json!({
        "topic": b.topic,
        "partitions": partitions,
        "records": records,
        "more": more,
    }))
}

/// What was read from one partition.
struct Read {
    records: Vec<Value>,
    /// Why reading stopped early (a Fetch error, e.g. another broker leads).
    error: Option<String>,
    /// Batches that did not decode, each with why.
    undecodable: Vec<String>,
}

async fn read_partition(
    ctx: &Ctx,
    topic: &str,
    partition: i32,
    from: i64,
    end: i64,
    want: usize,
) -> Result<Read, Failure> {
    let mut read = Read {
        records: Vec::new(),
        error: None,
        undecodable: Vec::new(),
    };
    let mut offset = from;
    for _ in 0..MAX_FETCHES {
        if offset >= end || read.records.len() >= want {
            break;
        }
        let (records, error) = fetch(ctx, topic, partition, offset).await?;
        if let Some(e) = error {
            read.error = Some(e);
            break;
        }
        let Some(bytes) = records else { break };
        let mut next = offset;
        for batch in split_batches(&bytes) {
            next = next.max(batch.next_offset);
            if batch.control {
                continue;
            }
            match decode(batch.bytes) {
                Ok(rs) => {
                    for r in rs.iter().filter(|r| r.offset >= from && r.offset < end) {
                        if read.records.len() < want {
                            read.records.push(record_json(partition, r));
                        }
                    }
                }
                Err(e) => read
                    .undecodable
                    .push(format!("batch at {}: {e}", batch.base_offset)),
            }
        }
        if next <= offset {
            break;
        }
        offset = next;
    }
    Ok(read)
}

/// One Fetch v12 of a partition from `offset`: its records, or the partition's error.
async fn fetch(
    ctx: &Ctx,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<(Option<Bytes>, Option<String>), Failure> {
    let mut fp = FetchPartition::default();
    fp.partition = partition;
    fp.current_leader_epoch = -1;
    fp.fetch_offset = offset;
    fp.last_fetched_epoch = -1;
    fp.log_start_offset = -1;
    fp.partition_max_bytes = FETCH_BYTES;
    let mut ft = FetchTopic::default();
    ft.topic = TopicName(StrBytes::from_string(topic.to_string()));
    ft.partitions = vec![fp];
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = 0;
    req.min_bytes = 0;
    req.max_bytes = FETCH_BYTES;
    req.isolation_level = 0;
    req.session_id = 0;
    req.session_epoch = -1;
    req.topics = vec![ft];
    let key = (ApiKey::Fetch, 12);
    let mut resp: FetchResponse = call(&ctx.broker, &ctx.session, key.0, key.1, &req).await?;
    // Led by another broker of the cluster: read there (the user may read it: this broker
    // checked that before saying it does not lead the partition).
    if let Some(leader) = led_elsewhere(ctx, &resp, topic, partition).await? {
        resp = forward(&ctx.broker, leader, key, &req).await?;
    }
    if resp.error_code != 0 {
        return Ok((None, Some(error_name(resp.error_code))));
    }
    let p = resp
        .responses
        .into_iter()
        .flat_map(|t| t.partitions)
        .find(|p| p.partition_index == partition);
    match p {
        None => Ok((None, Some("no answer for the partition".to_string()))),
        Some(p) if p.error_code != 0 => {
            let mut why = error_name(p.error_code);
            if p.current_leader.leader_id.0 >= 0 {
                why.push_str(&format!(
                    " (broker {} leads it)",
                    p.current_leader.leader_id.0
                ));
            }
            Ok((None, Some(why)))
        }
        Some(p) => Ok((p.records, None)),
    }
}

/// One whole batch of a Fetch answer's records.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct RawBatch {
    pub base_offset: i64,
    /// The offset after the batch's last.
    pub next_offset: i64,
    pub control: bool,
    pub bytes: Bytes,
}

/// The batch header's size up to and including the record count (magic 2).
const BATCH_HEADER: usize = 61;

/// Splits records into whole v2 batches; a cut-off last batch (a Fetch may end inside one)
/// and anything after a batch whose length makes no sense are left out.
pub(super) fn split_batches(b: &Bytes) -> Vec<RawBatch> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while b.len() - at >= BATCH_HEADER {
        let h = &b[at..];
        let base_offset = i64::from_be_bytes(h[0..8].try_into().unwrap_or_default());
        let len = i32::from_be_bytes(h[8..12].try_into().unwrap_or_default());
        let Ok(len) = usize::try_from(len) else { break };
        let total = 12 + len;
        if total < BATCH_HEADER || total > b.len() - at {
            break;
        }
        let magic = h[16];
        let attributes = i16::from_be_bytes([h[21], h[22]]);
        let last_delta = i32::from_be_bytes(h[23..27].try_into().unwrap_or_default());
        out.push(RawBatch {
            base_offset,
            next_offset: base_offset
                .saturating_add(i64::from(last_delta))
                .saturating_add(1),
            control: magic != 2 || attributes & 0x20 != 0,
            bytes: b.slice(at..at + total),
        });
        at += total;
    }
    out
}

/// The records of one batch; never panics on odd data.
pub(super) fn decode(batch: Bytes) -> Result<Vec<Record>, String> {
    let decompress = |data: &mut Bytes, c: Compression| -> anyhow::Result<Bytes> {
        let codec = crate::log::Compression::from_id(c as u8)
            .ok_or_else(|| anyhow::anyhow!("unknown codec {}", c as u8))?;
        let out = crate::log::compression::decompress(codec, data, MAX_DECOMPRESSED)?;
        Ok(Bytes::from(out))
    };
    let mut b = batch;
    let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
        RecordBatchDecoder::decode_with_custom_compression(&mut b, Some(decompress))
    }));
    match r {
        Ok(Ok(set)) => Ok(set.records),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(_) => Err("the decoder panicked".to_string()),
    }
}

fn record_json(partition: i32, r: &Record) -> Value {
    let headers: Vec<Value> = r
        .headers
        .iter()
        .map(|(k, v)| json!({ "key": k.to_string(), "value": render(v.as_deref()) }))
        .collect();
    json!({
        "partition": partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "timestamp_type": match r.timestamp_type {
            TimestampType::Creation => "CreateTime",
            TimestampType::LogAppend => "LogAppendTime",
        },
        "key": render(r.key.as_deref()),
        "value": render(r.value.as_deref()),
        "headers": headers,
        "transactional": r.transactional,
        "producer_id": r.producer_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::{RecordBatchEncoder, RecordEncodeOptions};

    fn batch(base: i64, values: &[&str], compression: Compression) -> Bytes {
        let records: Vec<Record> = values
            .iter()
            .enumerate()
            .map(|(i, v)| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: base + i as i64,
                // The encoder keeps records in one batch while offset - sequence is constant.
                sequence: i as i32 - 1,
                timestamp: 1000 + i as i64,
                key: None,
                value: Some(Bytes::from(v.to_string())),
                headers: Default::default(),
            })
            .collect();
        let mut buf = bytes::BytesMut::new();
        let opts = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        if compression == Compression::None {
            RecordBatchEncoder::encode(&mut buf, &records, &opts).unwrap();
        } else {
            let codec = crate::log::Compression::from_id(compression as u8).unwrap();
            RecordBatchEncoder::encode_with_custom_compression(
                &mut buf,
                &records,
                &RecordEncodeOptions {
                    version: 2,
                    compression,
                },
                Some(
                    |input: &mut bytes::BytesMut, out: &mut bytes::BytesMut, _c| {
                        out.extend_from_slice(&crate::log::compression::compress(codec, input));
                        Ok(())
                    },
                ),
            )
            .unwrap();
        }
        buf.freeze()
    }

    #[test]
    fn batches_split_and_decode_compressed_or_not() {
        let mut all = bytes::BytesMut::new();
        all.extend_from_slice(&batch(0, &["a", "b"], Compression::None));
        all.extend_from_slice(&batch(2, &["c"], Compression::Gzip));
        all.extend_from_slice(&batch(3, &["d", "e", "f"], Compression::Zstd));
        let whole = all.len();
        // A Fetch may end inside a batch: the cut one is left out.
        all.extend_from_slice(&batch(6, &["g"], Compression::None)[..30]);
        let all = all.freeze();
        let batches = split_batches(&all);
        assert_eq!(batches.len(), 3);
        assert_eq!(batches.iter().map(|b| b.bytes.len()).sum::<usize>(), whole);
        assert_eq!(batches[2].next_offset, 6);
        let values: Vec<String> = batches
            .into_iter()
            .flat_map(|b| decode(b.bytes).unwrap())
            .map(|r| String::from_utf8(r.value.unwrap().to_vec()).unwrap())
            .collect();
        assert_eq!(values, ["a", "b", "c", "d", "e", "f"]);
    }

    #[test]
    fn odd_batches_are_errors_not_panics() {
        let mut b = batch(0, &["x"], Compression::None).to_vec();
        let n = b.len();
        b[n - 3] ^= 0xff;
        // Whatever a flipped byte makes of the batch, decoding returns.
        let _ = decode(Bytes::from(b));
        let mut junk = vec![0u8; 80];
        junk[11] = 68;
        junk[16] = 2;
        for b in split_batches(&Bytes::from(junk)) {
            assert!(decode(b.bytes).is_err());
        }
        assert!(split_batches(&Bytes::from_static(&[0xff; 100])).is_empty());
    }
}

/// The other broker that leads `partition`, when this broker answered the fetch with
/// NOT_LEADER_OR_FOLLOWER: from the answer's leader hint, or else the metadata.
async fn led_elsewhere(
    ctx: &Ctx,
    resp: &FetchResponse,
    topic: &str,
    partition: i32,
) -> Result<Option<i32>, Failure> {
    let Some(p) = resp
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == partition)
        .filter(|p| not_leader(p.error_code))
    else {
        return Ok(None);
    };
    let mut leader = p.current_leader.leader_id.0;
    if leader < 0 {
        let md = metadata(ctx, Some(&[topic.to_string()])).await?;
        leader = leaders(&md)
            .get(&(topic.to_string(), partition))
            .copied()
            .unwrap_or(-1);
    }
    Ok(is_peer(&ctx.broker, leader).then_some(leader))
}
