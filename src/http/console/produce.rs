//! Producing a test record from the console: refused (403) while the console is read-only
//! (`sluice.console.read.only`, true by default). The record goes through the broker's
//! Produce handler (v9, acks=all) like any client's: a keyed record to the partition the
//! Java client's default partitioner would pick, an unkeyed one to a partition picked by
//! the clock unless the request names one.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
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
use super::{Answer, Ctx, Failure, admit, answer};
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

    fn outgoing(&self) -> Outgoing {
        Outgoing {
            key: self.key.clone().map(Bytes::from),
            value: self.value.clone().map(Bytes::from),
            headers: self
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), Some(Bytes::from(v.clone()))))
                .collect(),
            timestamp: crate::clock::now_ms(),
        }
    }
}

/// One record to produce (a console test record, a REST proxy record).
pub(in crate::http) struct Outgoing {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Its create time (ms since the epoch).
    pub timestamp: i64,
}

impl Outgoing {
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
            timestamp: self.timestamp,
            key: self.key.clone(),
            value: self.value.clone(),
            headers: self
                .headers
                .iter()
                .map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone()))
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

/// Why a record was not written: the Kafka error its request got (with the message, when
/// the broker gave one), or another failure.
pub(in crate::http) enum Refusal {
    Kafka(i16, Option<String>),
    Http(Failure),
}

impl From<anyhow::Error> for Refusal {
    fn from(e: anyhow::Error) -> Refusal {
        Refusal::Http(e.into())
    }
}

impl From<Failure> for Refusal {
    fn from(f: Failure) -> Refusal {
        Refusal::Http(f)
    }
}

/// A topic's partitions and their leaders, as Metadata gives them.
pub(in crate::http) struct Target {
    pub topic: String,
    pub partitions: Vec<(i32, i32)>,
}

impl Target {
    /// The topic's partitions, or the topic's Metadata error (e.g. UNKNOWN_TOPIC_OR_PARTITION,
    /// TOPIC_AUTHORIZATION_FAILED).
    pub async fn of(ctx: &Ctx, topic: &str) -> Result<Target, Refusal> {
        let md = metadata(ctx, Some(&[topic.to_string()])).await?;
        let Some(t) = md.topics.first() else {
            return Err(Refusal::Kafka(
                ResponseError::UnknownTopicOrPartition.code(),
                None,
            ));
        };
        if t.error_code != 0 {
            return Err(Refusal::Kafka(t.error_code, None));
        }
        Ok(Target {
            topic: topic.to_string(),
            partitions: t
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.leader_id.0))
                .collect(),
        })
    }

    /// The partition a record goes to: the one named, else the one the Java client's
    /// default partitioner picks for its key, else one picked by the clock.
    pub fn partition_for(&self, named: Option<i32>, key: Option<&[u8]>) -> i32 {
        let count = self.partitions.len() as i32;
        match (named, key) {
            (Some(p), _) => p,
            (None, Some(k)) => partition_for_key(k, count),
            (None, None) => (crate::clock::now_ms() % i64::from(count.max(1))) as i32,
        }
    }
}

/// What the broker answered for a written record.
pub(in crate::http) struct Sent {
    pub offset: i64,
    /// The broker's append time when the topic uses LogAppendTime, else -1.
    pub log_append_time: i64,
}

/// Writes `rec` to `partition` of `target` through the Produce handler (v9, acks=all): on a
/// cluster on the partition's leader, after this broker checked that the user may write.
pub(in crate::http) async fn send(
    ctx: &Ctx,
    target: &Target,
    partition: i32,
    rec: &Outgoing,
) -> Result<Sent, Refusal> {
    let mut pd = PartitionProduceData::default();
    pd.index = partition;
    pd.records = Some(rec.batch()?);
    let mut td = TopicProduceData::default();
    td.name = TopicName(StrBytes::from_string(target.topic.clone()));
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 15_000;
    req.topic_data = vec![td];
    let leader = target
        .partitions
        .iter()
        .find(|p| p.0 == partition)
        .map_or(-1, |p| p.1);
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
        let msg = p.error_message.as_ref().map(|m| m.to_string());
        return Err(Refusal::Kafka(p.error_code, msg));
    }
    Ok(Sent {
        offset: p.base_offset,
        log_append_time: p.log_append_time_ms,
    })
}

async fn produce_answer(s: &HttpState, headers: &HeaderMap, body: Bytes) -> Answer {
    let ctx = admit(s, headers)?;
    if ctx.broker.config.console_read_only {
        let why = "the console is read-only: set sluice.console.read.only=false to produce \
                   test records";
        return Err(Failure(StatusCode::FORBIDDEN, why.to_string()));
    }
    let rec = TestRecord::parse(&body).map_err(Failure::bad_request)?;
    let target = match Target::of(&ctx, &rec.topic).await {
        Ok(t) => t,
        Err(Refusal::Kafka(..)) => {
            return Err(Failure::not_found(format!("no topic {}", rec.topic)));
        }
        Err(Refusal::Http(f)) => return Err(f),
    };
    let partition = target.partition_for(rec.partition, rec.key.as_ref().map(|k| k.as_bytes()));
    match send(&ctx, &target, partition, &rec.outgoing()).await {
        Ok(sent) => Ok(json!({
            "topic": rec.topic,
            "partition": partition,
            "offset": sent.offset,
        })),
        Err(Refusal::Kafka(code, msg)) => {
            let msg = msg.map(|m| format!(": {m}")).unwrap_or_default();
            let why = format!("{}{msg}", error_name(code));
            Err(Failure(StatusCode::BAD_GATEWAY, why))
        }
        Err(Refusal::Http(f)) => Err(f),
    }
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
