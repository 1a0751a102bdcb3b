//! `sluice verify`: checks a topic against a producer's log of acknowledged records, for
//! users' own fault tests as for Sluice's. The log is VerifiableProducer's output (Kafka's
//! `org.apache.kafka.tools.VerifiableProducer`): one JSON object a line, of which the
//! `{"name":"producer_send_success","topic":..,"partition":..,"offset":..,"key":..,"value":..}`
//! lines of the topic count; other lines (start-up, errors, tool data, log noise) are skipped.
//!
//! The topic is read over Kafka's protocol from each partition's leader (Metadata,
//! ListOffsets, Fetch, read uncommitted), from the log start up to the end offset it has
//! when the reading starts; a partition whose leader moves meanwhile is read on from its new
//! leader. [`compare`] then reports lost, duplicated, moved and reordered records.

pub mod compare;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest,
    MetadataResponse, TopicName,
    list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
    metadata_request::MetadataRequestTopic,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::{Value, json};

use crate::cluster::fetcher::conn::LeaderConn;
use crate::net::client::InterBroker;
use crate::net::records::{decode, fetch_request, split_batches};
use compare::{Acked, Found, Report};

/// `sluice verify`'s arguments.
#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// Brokers to start from, host:port[,host:port...].
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap: String,
    /// The topic the producer wrote.
    #[arg(long)]
    pub topic: String,
    /// The producer's acked-records log (VerifiableProducer's JSON lines).
    #[arg(long, value_name = "FILE")]
    pub acked: PathBuf,
    /// Print the report as one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Seconds the reading may take, leader changes included.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub timeout: u64,
    /// How many of each kind of finding the text report lists.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub show: usize,
}

impl VerifyArgs {
    /// Reads the log and the topic and compares them; the report, or why it could not.
    pub fn run(&self) -> Result<Report> {
        let text = std::fs::read_to_string(&self.acked)
            .with_context(|| format!("cannot read {}", self.acked.display()))?;
        let acked = read_acked(&text, &self.topic);
        let deadline = Instant::now() + Duration::from_secs(self.timeout.max(1));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let found = rt.block_on(read_topic(&self.bootstrap, &self.topic, deadline))?;
        Ok(compare::compare(&acked, &found))
    }
}

/// The acked records of `topic` in a VerifiableProducer log, in the log's order.
pub fn read_acked(text: &str, topic: &str) -> Vec<Acked> {
    text.lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["name"] == "producer_send_success" && v["topic"] == topic)
        .filter_map(|v| {
            Some(Acked {
                partition: i32::try_from(v["partition"].as_i64()?).ok()?,
                offset: v["offset"].as_i64()?,
                value: v["value"].as_str()?.to_string(),
            })
        })
        .collect()
}

/// How long to wait before asking again after a leader change or a refused connection.
const RETRY_PAUSE: Duration = Duration::from_millis(500);
/// Bytes one Fetch asks for.
const FETCH_BYTES: i32 = 4 * 1024 * 1024;
/// The largest answer accepted.
const MAX_FRAME: usize = 64 * 1024 * 1024;
const CLIENT_ID: &str = "sluice-verify";

/// Connections to the brokers of one cluster, by node id, and where each node is.
struct Brokers {
    bootstrap: Vec<String>,
    addrs: HashMap<i32, String>,
    conns: HashMap<i32, LeaderConn>,
    security: InterBroker,
}

impl Brokers {
    async fn conn(&mut self, node: i32) -> Result<&mut LeaderConn> {
        if !self.conns.contains_key(&node) {
            let addr = self
                .addrs
                .get(&node)
                .ok_or_else(|| anyhow!("no address for broker {node}"))?
                .clone();
            let c = LeaderConn::connect(node, &addr, CLIENT_ID.into(), MAX_FRAME, &self.security)
                .await?;
            self.conns.insert(node, c);
        }
        Ok(self.conns.get_mut(&node).expect("just connected"))
    }

    /// One request to `node`; a failed connection is dropped (the next call reconnects).
    async fn call<Req, Resp>(&mut self, node: i32, key: ApiKey, v: i16, req: &Req) -> Result<Resp>
    where
        Req: kafka_protocol::protocol::Encodable,
        Resp: kafka_protocol::protocol::Decodable,
    {
        let r = self
            .conn(node)
            .await?
            .call(key, v, req, Duration::from_secs(10))
            .await;
        if r.is_err() {
            self.conns.remove(&node);
        }
        r
    }

    /// The topic's partitions with their leaders (-1: none), from the first broker that
    /// answers (bootstrap addresses first).
    async fn leaders(&mut self, topic: &str) -> Result<Vec<(i32, i32)>> {
        let mut req = MetadataRequest::default();
        let mut t = MetadataRequestTopic::default();
        t.name = Some(TopicName(StrBytes::from_string(topic.to_string())));
        req.topics = Some(vec![t]);
        req.allow_auto_topic_creation = false;
        let mut errors = Vec::new();
        let mut tried: Vec<i32> = Vec::new();
        for (i, addr) in self.bootstrap.clone().iter().enumerate() {
            // Bootstrap addresses are dialled under ids no broker has.
            let id = -1000 - i as i32;
            self.addrs.insert(id, addr.clone());
            tried.push(id);
        }
        tried.extend(self.addrs.keys().copied().filter(|&n| n >= 0));
        for node in tried {
            match self
                .call::<_, MetadataResponse>(node, ApiKey::Metadata, 12, &req)
                .await
            {
                Ok(md) => {
                    for b in &md.brokers {
                        self.addrs
                            .insert(b.node_id.0, format!("{}:{}", b.host, b.port));
                    }
                    let t = md
                        .topics
                        .first()
                        .ok_or_else(|| anyhow!("Metadata names no topic"))?;
                    if t.error_code != 0 {
                        bail!(
                            "topic {topic}: {}",
                            crate::metrics::error_name(t.error_code)
                        );
                    }
                    let mut ps: Vec<(i32, i32)> = t
                        .partitions
                        .iter()
                        .map(|p| (p.partition_index, p.leader_id.0))
                        .collect();
                    ps.sort();
                    return Ok(ps);
                }
                Err(e) => errors.push(format!("{e:#}")),
            }
        }
        bail!("no broker answered Metadata: {}", errors.join("; "))
    }

    /// The partition's offset for `timestamp` (-2 earliest, -1 latest) at `leader`.
    async fn offset(&mut self, leader: i32, topic: &str, p: i32, timestamp: i64) -> Result<i64> {
        let mut lp = ListOffsetsPartition::default();
        lp.partition_index = p;
        lp.current_leader_epoch = -1;
        lp.timestamp = timestamp;
        let mut lt = ListOffsetsTopic::default();
        lt.name = TopicName(StrBytes::from_string(topic.to_string()));
        lt.partitions = vec![lp];
        let mut req = ListOffsetsRequest::default();
        req.replica_id = BrokerId(-1);
        req.topics = vec![lt];
        let resp: ListOffsetsResponse = self.call(leader, ApiKey::ListOffsets, 7, &req).await?;
        let p = resp
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .find(|x| x.partition_index == p)
            .ok_or_else(|| anyhow!("ListOffsets did not answer for partition {p}"))?;
        if p.error_code != 0 {
            bail!("ListOffsets: {}", crate::metrics::error_name(p.error_code));
        }
        Ok(p.offset)
    }

    /// Records of the partition from `from` at `leader`: the records and the offset after the
    /// last batch read.
    async fn fetch(
        &mut self,
        leader: i32,
        topic: &str,
        p: i32,
        from: i64,
    ) -> Result<(Vec<Found>, i64)> {
        let req = fetch_request(topic, p, from, FETCH_BYTES, 100);
        let resp: FetchResponse = self.call(leader, ApiKey::Fetch, 12, &req).await?;
        if resp.error_code != 0 {
            bail!("Fetch: {}", crate::metrics::error_name(resp.error_code));
        }
        let part = resp
            .responses
            .into_iter()
            .flat_map(|t| t.partitions)
            .find(|x| x.partition_index == p)
            .ok_or_else(|| anyhow!("Fetch did not answer for partition {p}"))?;
        if part.error_code != 0 {
            bail!("Fetch: {}", crate::metrics::error_name(part.error_code));
        }
        let mut out = Vec::new();
        let mut next = from;
        for batch in split_batches(&part.records.unwrap_or_default()) {
            next = next.max(batch.next_offset);
            if batch.control {
                continue;
            }
            let records = decode(batch.bytes).map_err(|e| {
                anyhow!(
                    "partition {p}: a batch at {} does not decode: {e}",
                    batch.base_offset
                )
            })?;
            out.extend(
                records
                    .into_iter()
                    .filter(|r| r.offset >= from)
                    .map(|r| Found {
                        partition: p,
                        offset: r.offset,
                        value: r.value.map(|v| String::from_utf8_lossy(&v).into_owned()),
                    }),
            );
        }
        Ok((out, next))
    }
}

/// Every record of `topic`, partition by partition, up to each partition's end offset when
/// its reading starts.
pub async fn read_topic(bootstrap: &str, topic: &str, deadline: Instant) -> Result<Vec<Found>> {
    let mut brokers = Brokers {
        bootstrap: bootstrap
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        addrs: HashMap::new(),
        conns: HashMap::new(),
        security: InterBroker::plaintext(),
    };
    if brokers.bootstrap.is_empty() {
        bail!("--bootstrap names no broker");
    }
    let partitions = loop {
        match brokers.leaders(topic).await {
            Ok(ps) => break ps,
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(RETRY_PAUSE).await,
        }
    };
    let mut found = Vec::new();
    for (p, _) in partitions {
        // (start, end) once known, then the next offset to read.
        let mut range: Option<(i64, i64)> = None;
        let mut next = 0;
        loop {
            let step = read_step(&mut brokers, topic, p, &mut range, &mut next, &mut found).await;
            match step {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) if Instant::now() >= deadline => {
                    bail!("reading {topic}-{p} did not finish in time: {e:#}")
                }
                Err(_) => tokio::time::sleep(RETRY_PAUSE).await,
            }
        }
    }
    Ok(found)
}

/// One step of reading a partition at its current leader: finds its range first, then
/// fetches once. True when the partition is read to its end.
async fn read_step(
    b: &mut Brokers,
    topic: &str,
    p: i32,
    range: &mut Option<(i64, i64)>,
    next: &mut i64,
    found: &mut Vec<Found>,
) -> Result<bool> {
    let leader = b
        .leaders(topic)
        .await?
        .into_iter()
        .find(|(q, _)| *q == p)
        .map(|(_, l)| l)
        .filter(|l| *l >= 0)
        .ok_or_else(|| anyhow!("{topic}-{p} has no leader"))?;
    let (_, end) = match *range {
        Some(r) => r,
        None => {
            let start = b.offset(leader, topic, p, -2).await?;
            let end = b.offset(leader, topic, p, -1).await?;
            *range = Some((start, end));
            *next = start;
            (start, end)
        }
    };
    while *next < end {
        let (records, after) = b.fetch(leader, topic, p, *next).await?;
        if after <= *next {
            bail!("{topic}-{p}: no records at offset {next} below the end {end}");
        }
        found.extend(records.into_iter().filter(|r| r.offset < end));
        *next = after;
    }
    Ok(true)
}

/// The report as text: one summary line, then up to `show` lines of each finding.
pub fn render_text(topic: &str, r: &Report, show: usize) -> String {
    let mut out = format!(
        "sluice verify: {topic}: {} acked, {} read ({} never acked): {} lost, {} duplicated, {} moved, {} reordered: {}\n",
        r.acked,
        r.read,
        r.unacked,
        r.lost.len(),
        r.duplicated.len(),
        r.moved.len(),
        r.reordered.len(),
        if r.ok() { "OK" } else { "FAILED" },
    );
    for l in r.lost.iter().take(show) {
        out.push_str(&format!(
            "lost: value {:?} acked at partition {} offset {}\n",
            l.value, l.partition, l.offset
        ));
    }
    for d in r.duplicated.iter().take(show) {
        let at: Vec<String> = d.at.iter().map(|(p, o)| format!("{p}:{o}")).collect();
        out.push_str(&format!(
            "duplicated: value {:?} at partition:offset {}\n",
            d.value,
            at.join(", ")
        ));
    }
    for m in r.moved.iter().take(show) {
        out.push_str(&format!(
            "moved: value {:?} acked at {}:{}, found at {}:{}\n",
            m.value, m.acked.0, m.acked.1, m.found.0, m.found.1
        ));
    }
    for o in r.reordered.iter().take(show) {
        out.push_str(&format!(
            "reordered: partition {}: value {:?} at offset {} comes before {:?} (acked earlier) at {}\n",
            o.partition, o.value, o.offset, o.after, o.after_offset
        ));
    }
    out
}

/// The report as JSON.
pub fn render_json(topic: &str, r: &Report) -> Value {
    json!({
        "topic": topic,
        "ok": r.ok(),
        "acked": r.acked,
        "read": r.read,
        "unacked": r.unacked,
        "lost": r.lost.iter().map(|l| json!({"partition": l.partition, "offset": l.offset, "value": l.value})).collect::<Vec<_>>(),
        "duplicated": r.duplicated.iter().map(|d| json!({"value": d.value, "at": d.at})).collect::<Vec<_>>(),
        "moved": r.moved.iter().map(|m| json!({"value": m.value, "acked": m.acked, "found": m.found})).collect::<Vec<_>>(),
        "reordered": r.reordered.iter().map(|o| json!({"partition": o.partition, "value": o.value, "offset": o.offset, "after": o.after, "after_offset": o.after_offset})).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_topics_acks_are_read() {
        let log = r#"{"timestamp":1,"name":"startup_complete"}
[2026-12-06 23:50:00,000] WARN something
{"timestamp":2,"name":"producer_send_success","key":null,"value":"0","offset":0,"topic":"t","partition":1}
{"timestamp":3,"name":"producer_send_error","exception":"x","message":"y","topic":"t","key":null,"value":"1"}
{"timestamp":4,"name":"producer_send_success","key":"k","value":"2","offset":5,"topic":"other","partition":0}
{"timestamp":5,"name":"producer_send_success","key":null,"value":"3","offset":1,"topic":"t","partition":1}
{"timestamp":6,"name":"producer_send_success","value":"4","topic":"t","partit"#;
        assert_eq!(
            read_acked(log, "t"),
            vec![
                Acked {
                    partition: 1,
                    offset: 0,
                    value: "0".into()
                },
                Acked {
                    partition: 1,
                    offset: 1,
                    value: "3".into()
                },
            ]
        );
    }

    #[test]
    fn the_text_report_leads_with_one_summary_line() {
        let r = compare::compare(
            &[
                Acked {
                    partition: 0,
                    offset: 0,
                    value: "0".into(),
                },
                Acked {
                    partition: 0,
                    offset: 9,
                    value: "1".into(),
                },
            ],
            &[Found {
                partition: 0,
                offset: 0,
                value: Some("0".into()),
            }],
        );
        let text = render_text("t", &r, 20);
        let mut lines = text.lines();
        assert_eq!(
            lines.next().unwrap(),
            "sluice verify: t: 2 acked, 1 read (0 never acked): 1 lost, 0 duplicated, 0 moved, 0 reordered: FAILED"
        );
        assert_eq!(
            lines.next().unwrap(),
            "lost: value \"1\" acked at partition 0 offset 9"
        );
        assert_eq!(render_json("t", &r)["lost"][0]["offset"], 9);
    }
}
