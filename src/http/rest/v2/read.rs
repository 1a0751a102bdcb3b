//! `GET .../records`: one read of a consumer instance, as kafka-rest's read task does it.
//! It fetches (Fetch, read uncommitted, on each partition's leader) from the position of
//! every assigned partition, the positions first resolved (the committed offset, else
//! `auto.offset.reset`; a pending seek), and keeps going until the response holds more than
//! `fetch.min.bytes` (never, by default), the next record would reach `max_bytes` (the
//! request's, at most 64 MiB), or the timeout passes (the request's `timeout`, at most the
//! instance's `consumer.request.timeout.ms`, 1 s by default), with 50 ms between rounds
//! that found nothing. A record's size is its key's and value's. Positions move past what
//! the answer holds; control batches and aborted records are skipped over.

use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::records::Record;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::instance::{Format, Instance, Mode, Pos, Reset, Tp, illegal_state};
use super::schemas::Decoder;
use crate::http::console::Ctx;
use crate::http::console::messages::fetch;
use crate::http::console::wire::denied;
use crate::http::rest::RestError;
use crate::net::records::{decode, split_batches};

/// kafka-rest's `consumer.request.max.bytes`.
const MAX_RESPONSE_BYTES: i64 = 64 * 1024 * 1024;
/// kafka-rest's `consumer.iterator.backoff.ms`.
const BACKOFF: Duration = Duration::from_millis(50);

/// The records of one read, as JSON in the instance's format.
pub(super) async fn read(
    inst: &Instance,
    ctx: &Ctx,
    timeout_ms: i64,
    max_bytes: i64,
) -> Result<Vec<Value>, RestError> {
    let _busy = inst.busy.lock().await;
    let limit = inst.settings.request_timeout_ms;
    let wait = match u64::try_from(timeout_ms) {
        Ok(t) if t > 0 => t.min(limit),
        _ => limit,
    };
    let deadline = Instant::now() + Duration::from_millis(wait);
    let mut r = Reading {
        out: Vec::new(),
        bytes: 0,
        max: if max_bytes > 0 {
            max_bytes.min(MAX_RESPONSE_BYTES)
        } else {
            MAX_RESPONSE_BYTES
        },
        min: if inst.settings.min_bytes < 0 {
            i64::MAX
        } else {
            inst.settings.min_bytes
        },
        full: false,
        enough: false,
    };
    loop {
        let assigned = {
            let st = inst.lock();
            if let Some((status, code, message)) = &st.error {
                return Err(RestError::new(*status, *code, message.clone()));
            }
            if matches!(st.mode, Mode::Nothing) {
                return Err(illegal_state(
                    "Consumer is not subscribed to any topics or assigned any partitions",
                ));
            }
            st.assigned()
        };
        let before = r.out.len();
        if !assigned.is_empty() {
            round(inst, ctx, &assigned, &mut r).await?;
        }
        if r.full || r.enough || Instant::now() >= deadline {
            break;
        }
        if r.out.len() == before {
            let left = deadline.saturating_duration_since(Instant::now());
            tokio::time::sleep(BACKOFF.min(left)).await;
        }
    }
    Ok(r.out)
}

/// A read in progress.
struct Reading {
    out: Vec<Value>,
    bytes: i64,
    max: i64,
    min: i64,
    /// The next record would reach the most bytes the answer may hold.
    full: bool,
    /// The answer holds more than `fetch.min.bytes`.
    enough: bool,
}

/// One fetch of every assigned partition from its position.
async fn round(
    inst: &Instance,
    ctx: &Ctx,
    assigned: &[Tp],
    r: &mut Reading,
) -> Result<(), RestError> {
    let positions = inst.resolve(ctx, assigned).await?;
    let mut decoder = Decoder::new(&ctx.broker.schemas);
    set_positions(inst, positions.iter().map(|(tp, o)| (tp.clone(), *o)));
    for (tp, from) in positions {
        let (records, error) = fetch(ctx, &tp.0, tp.1, from).await?;
        if let Some((code, why)) = error {
            if denied(code) {
                return Err(RestError::kafka(code, None));
            }
            if code == ResponseError::OffsetOutOfRange.code() {
                out_of_range(inst, &tp, from)?;
            } else {
                tracing::debug!(
                    "REST consumer {}: fetch {}-{}: {why}",
                    inst.name,
                    tp.0,
                    tp.1
                );
            }
            continue;
        }
        let Some(bytes) = records else { continue };
        let mut next = from;
        let format = inst.settings.format;
        let taken = take(format, &mut decoder, &tp, &bytes, &mut next, r);
        set_positions(inst, [(tp.clone(), next)]);
        taken?;
        if r.full || r.enough {
            break;
        }
    }
    Ok(())
}

/// Adds the records of `bytes` from `next` on to the answer, moving `next` past each.
fn take(
    format: Format,
    decoder: &mut Decoder<'_>,
    tp: &Tp,
    bytes: &Bytes,
    next: &mut i64,
    r: &mut Reading,
) -> Result<(), RestError> {
    for batch in split_batches(bytes) {
        if batch.next_offset <= *next {
            continue;
        }
        if !batch.control {
            let records = decode(batch.bytes).map_err(|e| {
                RestError::kafka(
                    ResponseError::CorruptMessage.code(),
                    Some(format!("batch at {}: {e}", batch.base_offset)),
                )
            })?;
            for rec in &records {
                if rec.offset < *next {
                    continue;
                }
                let size = rec.key.as_ref().map_or(0, |k| k.len()) as i64
                    + rec.value.as_ref().map_or(0, |v| v.len()) as i64;
                if r.bytes + size >= r.max {
                    r.full = true;
                    return Ok(());
                }
                r.out.push(record_json(format, decoder, tp, rec)?);
                *next = rec.offset + 1;
                r.bytes += size;
                if r.bytes > r.min {
                    r.enough = true;
                    return Ok(());
                }
            }
        }
        *next = (*next).max(batch.next_offset);
    }
    Ok(())
}

/// Stores positions of partitions that are still assigned.
fn set_positions(inst: &Instance, positions: impl IntoIterator<Item = (Tp, i64)>) {
    let mut st = inst.lock();
    let assigned = st.assigned();
    for (tp, o) in positions {
        if assigned.contains(&tp) {
            st.positions.insert(tp, Pos::At(o));
        }
    }
}

/// A position the log no longer (or not yet) has: reset by `auto.offset.reset`.
fn out_of_range(inst: &Instance, tp: &Tp, from: i64) -> Result<(), RestError> {
    let pos = match inst.settings.reset {
        Reset::Earliest => Pos::Beginning,
        Reset::Latest => Pos::End,
        Reset::Fail => {
            return Err(RestError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                50002,
                format!(
                    "Kafka error: Fetch position FetchPosition{{offset={from}}} is out of range \
                     for partition {}-{}",
                    tp.0, tp.1
                ),
            ));
        }
    };
    inst.lock().positions.insert(tp.clone(), pos);
    Ok(())
}

/// A record as v2 answers it: `topic`, `key`, `value`, `partition`, `offset`; key and value
/// in base64 (binary), as the JSON they hold (json), or in Avro's JSON encoding, decoded
/// from Confluent's wire format through the schema its id names (avro). One that does not
/// decode fails the read with 40801, as kafka-rest's deserializer fails.
fn record_json(
    format: Format,
    decoder: &mut Decoder<'_>,
    tp: &Tp,
    rec: &Record,
) -> Result<Value, RestError> {
    let undecodable = |what: &str, why: String| {
        RestError::new(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            40801,
            format!(
                "Error deserializing {what} of {}-{} at offset {}: {why}",
                tp.0, tp.1, rec.offset
            ),
        )
    };
    let mut conv = |b: &Option<Bytes>| -> Result<Value, RestError> {
        let Some(b) = b else { return Ok(Value::Null) };
        match format {
            Format::Binary => Ok(Value::String(
                base64::engine::general_purpose::STANDARD.encode(b),
            )),
            Format::Json => {
                serde_json::from_slice(b).map_err(|e| undecodable("JSON", e.to_string()))
            }
            Format::Avro => decoder.avro(b).map_err(|why| undecodable("Avro", why)),
            Format::JsonSchema => {
                super::jsonschema::decode(b).map_err(|why| undecodable("JSON Schema", why))
            }
            Format::Protobuf => decoder
                .protobuf(b)
                .map_err(|why| undecodable("Protobuf", why)),
        }
    };
    Ok(json!({
        "topic": tp.0,
        "key": conv(&rec.key)?,
        "value": conv(&rec.value)?,
        "partition": tp.1,
        "offset": rec.offset,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::avro_json::AvroSchema;
    use kafka_protocol::records::TimestampType;

    fn rec(offset: i64, key: Option<&'static [u8]>, value: &'static [u8]) -> Record {
        Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset,
            sequence: -1,
            timestamp: 0,
            key: key.map(Bytes::from_static),
            value: Some(Bytes::from_static(value)),
            headers: Default::default(),
        }
    }

    #[test]
    fn records_answer_in_the_instance_format() {
        let tp = ("t".to_string(), 2);
        let mut none = Decoder::with(|id| Err(format!("no schema {id}")));
        let b = record_json(
            Format::Binary,
            &mut none,
            &tp,
            &rec(7, Some(b"k"), b"\x00v"),
        );
        assert_eq!(
            b.unwrap(),
            json!({"topic": "t", "key": "aw==", "value": "AHY=", "partition": 2, "offset": 7})
        );
        let j = record_json(Format::Json, &mut none, &tp, &rec(8, None, br#"{"a":[1]}"#));
        let j = j.unwrap();
        assert_eq!(j["value"], json!({"a": [1]}));
        assert_eq!(j["key"], Value::Null);
        let e = record_json(Format::Json, &mut none, &tp, &rec(9, None, b"not json"));
        let e = e.unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (408, 40801));
        // avro: framed with schema id 7 (a long), 21 zig-zag encoded as 42
        let mut long = Decoder::with(|id| match id {
            7 => AvroSchema::parse(r#""long""#, &[]),
            _ => Err(format!("no schema {id}")),
        });
        let framed = b"\x00\x00\x00\x00\x07\x2a";
        let a = record_json(Format::Avro, &mut long, &tp, &rec(10, None, framed));
        assert_eq!(a.unwrap()["value"], json!(21));
        for bad in [
            &b"\x00\x00\x00\x00\x08\x2a"[..],
            b"\x01\x00\x00\x00\x07\x2a",
            b"xy",
        ] {
            let e = record_json(Format::Avro, &mut long, &tp, &rec(11, None, bad)).unwrap_err();
            assert_eq!(e.code, 40801, "{}", e.message);
        }
    }
}
