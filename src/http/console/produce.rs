//! Producing a test record from the console: refused (403) while the console is read-only
//! (`sluice.console.read.only`, true by default). The record goes through the broker's
//! Produce handler (v9, acks=all) like any client's: a keyed record to the partition the
//! Java client's default partitioner would pick, an unkeyed one to a partition picked by
//! the clock unless the request names one.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ProduceRequest, ProduceResponse, TopicName,
    produce_request::{PartitionProduceData, TopicProduceData},
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use serde_json::{Value, json};

use super::cluster::metadata;
use super::render::partition_for_key;
use super::wire::{call_at, error_name, not_leader};
use super::{Answer, Failure, admit, answer};
use crate::http::HttpState;

pub(super) async fn produce(
    State(s): State<HttpState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(produce_answer(&s, &headers, body).await)
}

/// A test record as the form sends it.
#[derive(Debug, PartialEq)]
pub(super) struct TestRecord {
    pub topic: String,
    pub partition: Option<i32>,
    pub key: Option<String>,
    pub value: Option<String>,
    pub headers: Vec<(String, String)>,
}

impl TestRecord {
    /// `{"topic", "partition"?, "key"?, "value"?, "headers"?: [{"key", "value"}]}`; an empty
    /// key is no key.
    pub fn parse(body: &[u8]) -> Result<TestRecord, String> {
        let v: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
        let text = |name: &str| -> Result<Option<String>, String> {
            match &v[name] {
                Value::Null => Ok(None),
                Value::String(s) => Ok(Some(s.clone())),
                _ => Err(format!("{name} must be a string")),
            }
        };
        let topic = text("topic")?
            .filter(|t| !t.trim().is_empty())
            .ok_or("topic is required")?;
        let partition = match &v["partition"] {
            Value::Null => None,
            Value::String(s) if s.trim().is_empty() => None,
            Value::Number(n) => Some(
                n.as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .filter(|n| *n >= 0),
            ),
            Value::String(s) => Some(s.trim().parse::<i32>().ok().filter(|n| *n >= 0)),
            _ => Some(None),
        };
        let partition = match partition {
            None => None,
            Some(Some(p)) => Some(p),
            Some(None) => return Err("partition must be a partition number".to_string()),
        };
        let mut headers = Vec::new();
        match &v["headers"] {
            Value::Null => {}
            Value::Array(hs) => {
                for h in hs {
                    match (&h["key"], &h["value"]) {
                        (Value::String(k), Value::String(v)) if !k.is_empty() => {
                            headers.push((k.clone(), v.clone()))
                        }
                        (Value::String(k), _) if k.is_empty() => {}
                        _ => {
                            return Err("each header needs a key and a value (strings)".to_string());
                        }
                    }
                }
            }
            _ => return Err("headers must be a list of {key, value}".to_string()),
        }
        Ok(TestRecord {
            topic,
            partition,
            key: text("key")?.filter(|k| !k.is_empty()),
            value: text("value")?,
            headers,
        })
    }

    fn batch(&self) -> anyhow::Result<Bytes> {
        let record = Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: -1,
            timestamp: crate::clock::now_ms(),
            key: self.key.clone().map(Bytes::from),
            value: self.value.clone().map(Bytes::from),
            headers: self
                .headers
                .iter()
                .map(|(k, v)| {
                    (
                        StrBytes::from_string(k.clone()),
                        Some(Bytes::from(v.clone())),
                    )
                })
                .collect(),
        };
        let mut buf = BytesMut::new();
        let opts = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, std::slice::from_ref(&record), &opts)?;
        Ok(buf.freeze())
    }
}

async fn produce_answer(s: &HttpState, headers: &HeaderMap, body: Bytes) -> Answer {
    let ctx = admit(s, headers)?;
    if ctx.broker.config.console_read_only {
        let why = "the console is read-only: set sluice.console.read.only=false to produce \
                   test records";
        return Err(Failure(StatusCode::FORBIDDEN, why.to_string()));
    }
    let rec = TestRecord::parse(&body).map_err(Failure::bad_request)?;
    let md = metadata(&ctx, Some(std::slice::from_ref(&rec.topic))).await?;
    let Some(t) = md.topics.first().filter(|t| t.error_code == 0) else {
        return Err(Failure::not_found(format!("no topic {}", rec.topic)));
    };
    let count = t.partitions.len() as i32;
    let partition = match (rec.partition, &rec.key) {
        (Some(p), _) => p,
        (None, Some(k)) => partition_for_key(k.as_bytes(), count),
        (None, None) => (crate::clock::now_ms() % i64::from(count.max(1))) as i32,
    };
    let mut pd = PartitionProduceData::default();
    pd.index = partition;
    pd.records = Some(rec.batch()?);
    let mut td = TopicProduceData::default();
    td.name = TopicName(StrBytes::from_string(rec.topic.clone()));
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 15_000;
    req.topic_data = vec![td];
    // On a cluster the record goes to the partition's leader; this broker first checks that
    // the user may write to the topic.
    let leader = t
        .partitions
        .iter()
        .find(|p| p.partition_index == partition)
        .map_or(-1, |p| p.leader_id.0);
    let resp: ProduceResponse = call_at(
        &ctx.broker,
        &ctx.session,
        leader,
        (ApiKey::Produce, 9),
        &req,
        |r: &ProduceResponse| {
            r.responses
                .iter()
                .flat_map(|t| t.partition_responses.iter())
                .any(|p| not_leader(p.error_code))
        },
    )
    .await?;
    let p = resp
        .responses
        .iter()
        .flat_map(|t| t.partition_responses.iter())
        .next()
        .ok_or_else(|| Failure::internal("no Produce answer for the partition"))?;
    if p.error_code != 0 {
        let msg = p
            .error_message
            .as_ref()
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        let why = format!("{}{msg}", error_name(p.error_code));
        return Err(Failure(StatusCode::BAD_GATEWAY, why));
    }
    Ok(json!({
        "topic": rec.topic,
        "partition": partition,
        "offset": p.base_offset,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_records_are_read_from_the_form() {
        let r = TestRecord::parse(
            br#"{"topic":"t","partition":"2","key":"","value":"v","headers":[{"key":"h","value":"x"},{"key":"","value":""}]}"#,
        )
        .unwrap();
        assert_eq!(
            r,
            TestRecord {
                topic: "t".into(),
                partition: Some(2),
                key: None,
                value: Some("v".into()),
                headers: vec![("h".into(), "x".into())],
            }
        );
        assert_eq!(
            TestRecord::parse(br#"{"topic":"t","partition":""}"#)
                .unwrap()
                .partition,
            None
        );
        assert!(TestRecord::parse(br#"{"value":"v"}"#).is_err());
        assert!(TestRecord::parse(br#"{"topic":"t","partition":-1}"#).is_err());
        assert!(TestRecord::parse(br#"{"topic":"t","headers":{}}"#).is_err());
        assert!(TestRecord::parse(b"nope").is_err());
    }
}
