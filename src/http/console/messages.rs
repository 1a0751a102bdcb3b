//! The message browser: records of one partition or all, from the log start, an offset, a
//! time (ListOffsets by timestamp) or the newest N, read with Fetch (read uncommitted, up to
//! the high watermark) and decoded here batch by batch: compressed batches through the
//! log's codecs, control batches (transaction markers) left out, and a batch that does not
//! decode reported in the answer instead of failing it. Keys and values in Confluent's wire
//! format are also shown decoded through the Schema Registry's schema they name
//! (`registry::decode`), when the registry is on.

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, FetchResponse};
use kafka_protocol::records::{Record, TimestampType};
use serde_json::{Value, json};

use super::cluster::{leaders, list_offsets, metadata};
use super::render::{Browse, Partitions, Start, render};
use super::wire::{call, error_name, forward, is_peer, not_leader};
use super::{Answer, Ctx, Failure, admit, answer, query};
use crate::http::HttpState;
use crate::net::records::{decode, fetch_request, split_batches};
use crate::registry::decode::Shown;
use crate::registry::store::Store;

/// Bytes one partition's Fetch asks for.
const FETCH_BYTES: i32 = 1024 * 1024;
/// Fetches per partition for one browse, at most.
const MAX_FETCHES: usize = 16;

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
    records.sort_by_key(|(p, r)| (r.timestamp, *p, r.offset));
    let more = records.len() > b.limit;
    if let Start::Newest(_) = b.start {
        let cut = records.len().saturating_sub(b.limit);
        records.drain(..cut);
    } else {
        records.truncate(b.limit);
    }
    let records = shown(&ctx, &records);
    Ok(json!({
        "topic": b.topic,
        "partitions": partitions,
        "records": records,
        "more": more,
    }))
}

/// What was read from one partition.
struct Read {
    /// Each record with its partition.
    records: Vec<(i32, Record)>,
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
        if let Some((_, e)) = error {
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
                    for r in rs
                        .into_iter()
                        .filter(|r| r.offset >= from && r.offset < end)
                    {
                        if read.records.len() < want {
                            read.records.push((partition, r));
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

/// The records of a Fetch answer, or the error code and why.
pub(in crate::http) type Fetched = (Option<Bytes>, Option<(i16, String)>);

/// One Fetch v12 of a partition from `offset` (on its leader): its records, or the
/// partition's error code and a description.
pub(in crate::http) async fn fetch(
    ctx: &Ctx,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<Fetched, Failure> {
    let req = fetch_request(topic, partition, offset, FETCH_BYTES, 0);
    let key = (ApiKey::Fetch, 12);
    let mut resp: FetchResponse = call(&ctx.broker, &ctx.session, key.0, key.1, &req).await?;
    // Led by another broker of the cluster: read there (the user may read it: this broker
    // checked that before saying it does not lead the partition).
    if let Some(leader) = led_elsewhere(ctx, &resp, topic, partition).await? {
        resp = forward(&ctx.broker, leader, key, &req).await?;
    }
    if resp.error_code != 0 {
        return Ok((None, Some((resp.error_code, error_name(resp.error_code)))));
    }
    let p = resp
        .responses
        .into_iter()
        .flat_map(|t| t.partitions)
        .find(|p| p.partition_index == partition);
    match p {
        None => Ok((None, Some((-1, "no answer for the partition".to_string())))),
        Some(p) if p.error_code != 0 => {
            let mut why = error_name(p.error_code);
            if p.current_leader.leader_id.0 >= 0 {
                why.push_str(&format!(
                    " (broker {} leads it)",
                    p.current_leader.leader_id.0
                ));
            }
            Ok((None, Some((p.error_code, why))))
        }
        Some(p) => Ok((p.records, None)),
    }
}

/// The records as the browser shows them, keys and values decoded through the registry's
/// schemas where they name one (all in one read of the registry).
fn shown(ctx: &Ctx, records: &[(i32, Record)]) -> Vec<Value> {
    let b = &ctx.broker;
    if !b.config.schema_registry_enabled {
        return records
            .iter()
            .map(|(p, r)| record_json(*p, r, None))
            .collect();
    }
    b.schemas.read(|st| {
        let mut schemas = Shown::new();
        records
            .iter()
            .map(|(p, r)| record_json(*p, r, Some((&mut schemas, st))))
            .collect()
    })
}

fn record_json(partition: i32, r: &Record, mut schemas: Option<(&mut Shown, &Store)>) -> Value {
    let mut field = |bytes: Option<&Bytes>| {
        let mut v = render(bytes.map(|b| &b[..]));
        if let (Some(b), Some((shown, st))) = (bytes, schemas.as_mut()) {
            if let Some(s) = shown.show(st, b) {
                v["schema"] = s;
            }
        }
        v
    };
    let key = field(r.key.as_ref());
    let value = field(r.value.as_ref());
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
        "key": key,
        "value": value,
        "headers": headers,
        "transactional": r.transactional,
        "producer_id": r.producer_id,
    })
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
