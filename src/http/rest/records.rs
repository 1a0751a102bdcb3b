//! `POST /v3/clusters/{c}/topics/{t}/records`: produce records, one JSON object each, any
//! number of them concatenated in one request body (streaming mode: the body may stay open
//! and records arrive as the client writes them). Each record gets its own delivery report,
//! in order, in a response body that streams as they are written (`\r\n` after each):
//! `{"error_code":200,"partition_id","offset","timestamp",...}` or
//! `{"error_code":40301,"message":...}`. The HTTP status is 200 once the topic is known; an
//! unknown or refused topic, or an empty body, is answered before any record.
//!
//! A record: `partition_id` (else the key's partition as the Java client picks it, else one
//! picked by the clock), `headers` `[{"name","value": base64}]`, `key` and `value` as
//! `{"type": "BINARY"|"JSON"|"STRING", "data": ...}` (BINARY, the default, is base64; JSON
//! any JSON value, written as its text; STRING a string), `timestamp` (ISO-8601, else now).
//! Each goes through the Produce handler (acks=all) as the caller.

use axum::body::Body;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{Req, RestError};
use crate::http::console::Ctx;
use crate::http::console::produce::{Outgoing, Target, send};

/// The most bytes one record's JSON may take.
const MAX_RECORD: usize = 16 * 1024 * 1024;

/// Delivery reports written ahead of a reader that does not keep up.
const REPORTS_AHEAD: usize = 64;

pub(super) async fn produce(
    r: Req,
    Path((_, topic)): Path<(String, String)>,
    body: Body,
) -> Response {
    match start(r, &topic, body).await {
        Ok(resp) => resp,
        Err(e) => e.into_response(),
    }
}

/// Checks the topic and the first bytes of the body, then streams the reports.
async fn start(r: Req, topic: &str, body: Body) -> Result<Response, RestError> {
    let target = Target::of(&r.ctx, topic).await?;
    let mut input = body.into_data_stream();
    let mut buf = BytesMut::new();
    // Up to the first byte that is not white space: an empty body is refused at once.
    while buf.iter().all(|b| b.is_ascii_whitespace()) {
        match input.next().await {
            Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
            Some(Err(e)) => return Err(RestError::bad_request(format!("reading the body: {e}"))),
            None => return Err(RestError::empty_body()),
        }
    }
    let (tx, rx) = mpsc::channel::<Bytes>(REPORTS_AHEAD);
    tokio::spawn(async move {
        let mut p = Producing { r, target, tx };
        p.run(buf, input).await;
    });
    let reports = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<Bytes, std::io::Error>(b), rx))
    });
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(reports),
    )
        .into_response())
}

/// One request's records being produced.
struct Producing {
    r: Req,
    target: Target,
    tx: mpsc::Sender<Bytes>,
}

impl Producing {
    /// Reads records from `buf` and then `input` until the body ends, the client goes away
    /// or a record does not parse (nothing after it can be found again).
    async fn run(
        &mut self,
        mut buf: BytesMut,
        mut input: impl futures_util::Stream<Item = Result<Bytes, axum::Error>> + Unpin,
    ) {
        let mut ended = false;
        loop {
            // Every complete record in the buffer.
            loop {
                let mut it = serde_json::Deserializer::from_slice(&buf).into_iter::<Value>();
                match it.next() {
                    Some(Ok(v)) => {
                        let used = it.byte_offset();
                        let _ = buf.split_to(used);
                        let report = self.one(v).await;
                        if !self.report(report).await {
                            return;
                        }
                    }
                    Some(Err(e)) if e.is_eof() && !ended => break,
                    Some(Err(e)) => {
                        let _ = self
                            .report(RestError::bad_request(e.to_string()).body())
                            .await;
                        return;
                    }
                    None => {
                        buf.clear();
                        break;
                    }
                }
            }
            if ended {
                return;
            }
            if buf.len() > MAX_RECORD {
                let why = format!("a record is larger than {MAX_RECORD} bytes");
                let _ = self.report(RestError::bad_request(why).body()).await;
                return;
            }
            match input.next().await {
                Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
                Some(Err(e)) => {
                    tracing::debug!("REST produce: the request body failed: {e}");
                    return;
                }
                None => ended = true,
            }
        }
    }

    /// Sends one report; false once the client no longer reads them.
    async fn report(&self, v: Value) -> bool {
        let mut text = v.to_string();
        text.push_str("\r\n");
        self.tx.send(Bytes::from(text)).await.is_ok()
    }

    /// Produces one record: its delivery report or its error.
    async fn one(&self, v: Value) -> Value {
        match self.produce(v).await {
            Ok(v) => v,
            Err(e) => e.body(),
        }
    }

    async fn produce(&self, v: Value) -> Result<Value, RestError> {
        let rec: RecordIn =
            serde_json::from_value(v).map_err(|e| RestError::bad_request(e.to_string()))?;
        let key = rec.key.as_ref().map(Data::bytes).transpose()?.flatten();
        let value = rec.value.as_ref().map(Data::bytes).transpose()?.flatten();
        let mut headers = Vec::with_capacity(rec.headers.len());
        for h in &rec.headers {
            let v = match &h.value {
                None => None,
                Some(s) => Some(base64_bytes(s)?),
            };
            headers.push((h.name.clone(), v));
        }
        let timestamp = match &rec.timestamp {
            None => crate::clock::now_ms(),
            Some(t) => parse_instant(t).ok_or_else(|| {
                RestError::bad_request(format!("timestamp {t:?} is not an ISO-8601 instant"))
            })?,
        };
        if let Some(p) = rec.partition_id
            && !self.target.partitions.iter().any(|(id, _)| *id == p)
        {
            return Err(RestError::new(
                StatusCode::NOT_FOUND,
                40402,
                "Partition not found.",
            ));
        }
        let partition = self.target.partition_for(rec.partition_id, key.as_deref());
        let out = Outgoing {
            key: key.clone(),
            value: value.clone(),
            headers,
            timestamp,
        };
        let ctx: &Ctx = &self.r.ctx;
        let sent = send(ctx, &self.target, partition, &out).await?;
        let written_at = if sent.log_append_time >= 0 {
            sent.log_append_time
        } else {
            timestamp
        };
        let size = |d: &Option<Data>, b: &Option<Bytes>| {
            d.as_ref()
                .map(|d| json!({ "type": d.kind(), "size": b.as_ref().map_or(0, |b| b.len()) }))
        };
        Ok(json!({
            "error_code": 200,
            "cluster_id": self.r.cluster,
            "topic_name": self.target.topic,
            "partition_id": partition,
            "offset": sent.offset,
            "timestamp": format_instant(written_at),
            "key": size(&rec.key, &key),
            "value": size(&rec.value, &value),
        }))
    }
}

/// One record as the client sends it.
#[derive(Deserialize)]
struct RecordIn {
    partition_id: Option<i32>,
    #[serde(default)]
    headers: Vec<HeaderIn>,
    key: Option<Data>,
    value: Option<Data>,
    timestamp: Option<String>,
}

#[derive(Deserialize)]
struct HeaderIn {
    name: String,
    value: Option<String>,
}

/// A key or a value: its embedded format and its data.
#[derive(Deserialize)]
struct Data {
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    data: Value,
}

impl Data {
    fn kind(&self) -> String {
        self.kind
            .as_deref()
            .unwrap_or("BINARY")
            .to_ascii_uppercase()
    }

    /// The bytes written: None for a null `data`.
    fn bytes(&self) -> Result<Option<Bytes>, RestError> {
        if self.data.is_null() {
            return Ok(None);
        }
        match self.kind().as_str() {
            "BINARY" => match &self.data {
                Value::String(s) => base64_bytes(s).map(Some),
                other => Err(RestError::bad_request(format!(
                    "Bad Request: data={other} is not a base64 string."
                ))),
            },
            "STRING" => match &self.data {
                Value::String(s) => Ok(Some(Bytes::from(s.clone()))),
                other => Err(RestError::bad_request(format!(
                    "Bad Request: data={other} is not a string."
                ))),
            },
            "JSON" => Ok(Some(Bytes::from(self.data.to_string()))),
            "AVRO" | "JSONSCHEMA" | "PROTOBUF" => Err(RestError::bad_request(format!(
                "the {} format needs the schema registry, which this proxy does not use yet",
                self.kind()
            ))),
            other => Err(RestError::bad_request(format!(
                "type must be BINARY, JSON or STRING, not {other}"
            ))),
        }
    }
}

fn base64_bytes(s: &str) -> Result<Bytes, RestError> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map(Bytes::from)
        .map_err(|_| {
            RestError::bad_request(format!("Bad Request: data={s} is not a base64 string."))
        })
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Milliseconds since the epoch of an ISO-8601 instant, `2021-02-05T19:14:42[.123]Z` or
/// with an offset (`+01:00`).
pub(super) fn parse_instant(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = s.get(from..from + len)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (h, mi, sec) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut millis = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 3 {
                millis = millis * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        for _ in (i - start)..3 {
            millis *= 10;
        }
    }
    let offset_min = match &s[i..] {
        "Z" | "z" => 0,
        rest if rest.len() == 6 && matches!(rest.as_bytes()[0], b'+' | b'-') => {
            if rest.as_bytes()[3] != b':' {
                return None;
            }
            let oh = num(i + 1, 2)?;
            let om = num(i + 4, 2)?;
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            sign * (oh * 60 + om)
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_min * 60;
    Some(secs * 1000 + millis)
}

/// An instant as Java's `DateTimeFormatter.ISO_INSTANT` writes it: UTC, with the
/// milliseconds only when there are any.
fn format_instant(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let day_secs = secs.rem_euclid(86_400);
    let (h, mi, s) = (day_secs / 3600, day_secs % 3600 / 60, day_secs % 60);
    if millis == 0 {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
    } else {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{millis:03}Z")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_read_and_write_as_iso_8601() {
        assert_eq!(parse_instant("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_instant("2021-02-05T19:14:42Z"),
            Some(1_612_552_482_000)
        );
        assert_eq!(
            parse_instant("2021-02-05T19:14:42.5Z"),
            Some(1_612_552_482_500)
        );
        assert_eq!(
            parse_instant("2021-02-05T20:14:42.123+01:00"),
            Some(1_612_552_482_123)
        );
        assert_eq!(parse_instant("2021-02-05 19:14:42Z"), None);
        assert_eq!(parse_instant("2021-13-05T19:14:42Z"), None);
        assert_eq!(parse_instant("yesterday"), None);
        assert_eq!(parse_instant("2021-02-05T19:14:42.Z"), None);
        assert_eq!(format_instant(1_612_552_482_000), "2021-02-05T19:14:42Z");
        assert_eq!(
            format_instant(1_612_552_482_123),
            "2021-02-05T19:14:42.123Z"
        );
        assert_eq!(format_instant(0), "1970-01-01T00:00:00Z");
        for ms in [0, 951_782_400_000, 4_102_444_800_999, 1_700_000_000_007] {
            assert_eq!(parse_instant(&format_instant(ms)), Some(ms));
        }
    }

    #[test]
    fn keys_and_values_encode_by_type() {
        let d = |v: Value| serde_json::from_value::<Data>(v).unwrap();
        let b = d(json!({"type": "BINARY", "data": "aGVsbG8="}))
            .bytes()
            .unwrap();
        assert_eq!(b.as_deref(), Some(&b"hello"[..]));
        let b = d(json!({"data": "aGk="})).bytes().unwrap();
        assert_eq!(b.as_deref(), Some(&b"hi"[..]));
        let b = d(json!({"type": "JSON", "data": {"a": [1, 2]}}))
            .bytes()
            .unwrap();
        assert_eq!(b.as_deref(), Some(&br#"{"a":[1,2]}"#[..]));
        let b = d(json!({"type": "STRING", "data": "plain"}))
            .bytes()
            .unwrap();
        assert_eq!(b.as_deref(), Some(&b"plain"[..]));
        assert_eq!(
            d(json!({"type": "JSON", "data": null})).bytes().unwrap(),
            None
        );
        assert_eq!(
            d(json!({"type": "BINARY", "data": "!!"}))
                .bytes()
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            d(json!({"type": "STRING", "data": 1}))
                .bytes()
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            d(json!({"type": "AVRO", "data": 1}))
                .bytes()
                .unwrap_err()
                .code,
            400
        );
    }
}
