//! One scrape of `/metrics`: the counters read from their atomics, the gauges computed from
//! the owners' state (controller topics and partitions, the metadata image, the group
//! coordinator), all encoded by prometheus-client in the Prometheus text format.
//!
//! Names follow the Prometheus JMX exporter's Kafka rules (lower-cased): a Yammer meter
//! `kafka.<domain>:type=<T>,name=<N>PerSec,<k>=<v>` is the counter `kafka_<domain>_<t>_<n>_total{k=v}`,
//! a gauge `...name=<N>` is `kafka_<domain>_<t>_<n>`. Request latency is a histogram
//! (`kafka_network_requestmetrics_totaltimems_bucket/_sum/_count{request}`) where the exporter
//! gives quantile gauges and `_count`. Consumer lag is named as kafka_exporter names it
//! (`kafka_consumergroup_lag{consumergroup,topic,partition}`), which Kafka's brokers do not
//! export. Kafka metrics (not Yammer) are named as the exporter's rules in the suite name
//! them: `kafka_server_<type>_<attribute>` with `-` as `_`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use kafka_protocol::messages::ApiKey;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::{LATENCY_BUCKETS_MS, MAX_CODES, MAX_KEYS, MAX_VERSIONS, Metrics};
use crate::broker::Broker;
use crate::quota::QuotaKind;

/// A latency histogram as read: (upper bound ms, count) per bucket, not cumulative (the
/// encoder accumulates), the last bound +Inf.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    pub sum_ms: f64,
    pub count: u64,
    pub buckets: Vec<(f64, u64)>,
}

/// The counters of [`Metrics`] that moved, read once.
#[derive(Debug, Default)]
pub struct CounterSnapshot {
    /// (key, version, requests).
    pub requests: Vec<(i16, i16, u64)>,
    /// (key, error code, responses' partitions with it).
    pub errors: Vec<(i16, i16, u64)>,
    pub latency: Vec<(i16, HistogramSnapshot)>,
}

impl Metrics {
    pub fn snapshot(&self) -> CounterSnapshot {
        let mut s = CounterSnapshot::default();
        for k in 0..MAX_KEYS {
            for v in 0..MAX_VERSIONS {
                let n = self.requests[k * MAX_VERSIONS + v].load(Ordering::Relaxed);
                if n > 0 {
                    s.requests.push((k as i16, v as i16, n));
                }
            }
            for c in 0..MAX_CODES {
                let n = self.errors[k * MAX_CODES + c].load(Ordering::Relaxed);
                if n > 0 {
                    s.errors.push((k as i16, c as i16 - 1, n));
                }
            }
            let l = &self.latency[k];
            let count = l.count.load(Ordering::Relaxed);
            // Every served API has its histogram from the start, as Kafka registers one per
            // request type.
            if count > 0 || crate::api::lookup(k as i16).is_some() {
                let buckets = LATENCY_BUCKETS_MS
                    .iter()
                    .chain(&[f64::INFINITY])
                    .zip(&l.buckets)
                    .map(|(le, n)| (*le, n.load(Ordering::Relaxed)))
                    .collect();
                s.latency.push((
                    k as i16,
                    HistogramSnapshot {
                        sum_ms: l.sum_us.load(Ordering::Relaxed) as f64 / 1000.0,
                        count,
                        buckets,
                    },
                ));
            }
        }
        s
    }
}

/// One local partition replica as a scrape sees it.
#[derive(Debug)]
struct PartitionRow {
    topic: Arc<str>,
    partition: i32,
    size: u64,
    segments: u64,
    log_start: i64,
    log_end: i64,
    leader: bool,
    under_replicated: bool,
}

/// One topic's client traffic, summed over its local partitions.
#[derive(Debug)]
struct TopicRow {
    topic: Arc<str>,
    bytes_in: u64,
    messages_in: u64,
    bytes_out: u64,
}

/// A committed offset of a group and the lag behind its partition's high watermark.
#[derive(Debug)]
struct LagRow {
    group: String,
    topic: String,
    partition: i32,
    committed: i64,
    lag: i64,
}

/// Everything one scrape encodes.
#[derive(Debug)]
struct Scrape {
    counters: CounterSnapshot,
    bytes_in: u64,
    messages_in: u64,
    bytes_out: u64,
    topics: Vec<TopicRow>,
    partitions: Vec<PartitionRow>,
    active_controller: bool,
    offline_partitions: u64,
    global_topics: u64,
    global_partitions: u64,
    isr_shrinks: u64,
    isr_expands: u64,
    /// Fetch sessions held, the partitions they hold, and sessions evicted.
    fetch_sessions: (usize, usize, u64),
    /// (group type: "classic" or "consumer", Kafka's name of its state) of every group
    /// coordinated here.
    groups: Vec<(&'static str, &'static str)>,
    lag: Vec<LagRow>,
    /// (listener, open connections, connections accepted).
    connections: Vec<(Arc<str>, i64, u64)>,
    /// Clients under a quota with their average throttle time.
    throttle: Vec<crate::quota::manager::ThrottleTime>,
}

/// Reads the broker's state and encodes it in the Prometheus text format.
pub async fn render(b: &Arc<Broker>) -> String {
    let scrape = gather(b).await;
    let mut registry = Registry::default();
    registry.register_collector(Box::new(scrape));
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry);
    out
}

async fn gather(b: &Arc<Broker>) -> Scrape {
    let m = &b.metrics;
    let mut topics = Vec::new();
    let mut partitions = Vec::new();
    for t in b.controller.topics() {
        let mut row = TopicRow {
            topic: t.name.clone(),
            bytes_in: 0,
            messages_in: 0,
            bytes_out: 0,
        };
        for p in &t.partitions {
            row.bytes_in += p.stats.bytes_in.load(Ordering::Relaxed);
            row.messages_in += p.stats.messages_in.load(Ordering::Relaxed);
            row.bytes_out += p.stats.bytes_out.load(Ordering::Relaxed);
            let state = p.replica_state();
            let leader = state.leader == b.node_id();
            let (size, segments) = p.size_and_segments();
            partitions.push(PartitionRow {
                topic: t.name.clone(),
                partition: p.index,
                size,
                segments: segments as u64,
                log_start: p.log_start_offset(),
                log_end: p.log_end_offset(),
                leader,
                under_replicated: leader && state.isr.len() < state.replicas.len(),
            });
        }
        if !t.internal {
            topics.push(row);
        }
    }
    let (active_controller, offline_partitions, global_topics, global_partitions) =
        match b.cluster() {
            None => {
                let ts = b.controller.topics();
                let n: usize = ts.iter().map(|t| t.partition_count).sum();
                (true, 0, ts.len() as u64, n as u64)
            }
            Some(c) if c.controller_id() == Some(b.node_id()) => {
                let img = c.image();
                let all = img.topics.values().flat_map(|t| t.partitions.iter());
                let offline = all.clone().filter(|p| p.leader < 0).count();
                (
                    true,
                    offline as u64,
                    img.topics.len() as u64,
                    all.count() as u64,
                )
            }
            Some(_) => (false, 0, 0, 0),
        };
    let listed = b.groups.list().await;
    let groups = listed
        .iter()
        .map(|g| (g.group_type, g.state_name))
        .collect();
    let mut lag = Vec::new();
    for g in &listed {
        let Ok(offsets) = b.groups.fetch_offsets(&g.group_id, None, false).await else {
            continue;
        };
        for (topic, parts) in offsets {
            let Some(t) = b.controller.topic(&topic) else {
                continue;
            };
            for o in parts.into_iter().filter(|o| o.offset >= 0) {
                // Partitions held elsewhere (a cluster) are left to the broker holding them.
                let Some(p) = t.partition(o.partition) else {
                    continue;
                };
                lag.push(LagRow {
                    group: g.group_id.clone(),
                    topic: topic.clone(),
                    partition: o.partition,
                    committed: o.offset,
                    lag: (p.high_watermark() - o.offset).max(0),
                });
            }
        }
    }
    Scrape {
        counters: m.snapshot(),
        bytes_in: m.bytes_in.load(Ordering::Relaxed),
        messages_in: m.messages_in.load(Ordering::Relaxed),
        bytes_out: m.bytes_out.load(Ordering::Relaxed),
        topics,
        partitions,
        active_controller,
        offline_partitions,
        global_topics,
        global_partitions,
        isr_shrinks: super::ISR_SHRINKS.load(Ordering::Relaxed),
        isr_expands: super::ISR_EXPANDS.load(Ordering::Relaxed),
        fetch_sessions: {
            let cache = b.frontend.data.fetch_sessions.lock().unwrap();
            (cache.len(), cache.partitions_cached(), cache.evictions())
        },
        groups,
        lag,
        throttle: b.quotas.throttle_times(),
        connections: m
            .listeners
            .iter()
            .map(|l| {
                (
                    l.name.clone(),
                    l.open.load(Ordering::Relaxed),
                    l.created.load(Ordering::Relaxed),
                )
            })
            .collect(),
    }
}

/// The states Kafka's group coordinator counts groups in, per group type.
const GROUP_STATES: [(&str, &[&str]); 2] = [
    (
        "classic",
        &[
            "PreparingRebalance",
            "CompletingRebalance",
            "Stable",
            "Dead",
            "Empty",
        ],
    ),
    (
        "consumer",
        &["Empty", "Assigning", "Reconciling", "Stable", "Dead"],
    ),
];

/// Groups of `group_type` in `state` ("": in any state).
fn count_groups(groups: &[(&str, &str)], group_type: &str, state: &str) -> i64 {
    groups
        .iter()
        .filter(|(t, s)| *t == group_type && (state.is_empty() || *s == state))
        .count() as i64
}

fn api_name(key: i16) -> String {
    match ApiKey::try_from(key) {
        Ok(k) => format!("{k:?}"),
        Err(_) => key.to_string(),
    }
}

type Labels = Vec<(&'static str, String)>;

/// Encodes one family of `rows`, each a label set and a value.
fn family<V: Copy>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    rows: impl IntoIterator<Item = (Labels, V)>,
    encode: impl Fn(V, prometheus_client::encoding::MetricEncoder) -> Result<(), std::fmt::Error>,
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, kind)?;
    for (labels, v) in rows {
        encode(v, m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn counters(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (Labels, u64)>,
) -> Result<(), std::fmt::Error> {
    family(enc, name, help, MetricType::Counter, rows, |v, e| {
        ConstCounter::new(v).encode(e)
    })
}

fn gauges(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (Labels, i64)>,
) -> Result<(), std::fmt::Error> {
    family(enc, name, help, MetricType::Gauge, rows, |v, e| {
        ConstGauge::new(v).encode(e)
    })
}

fn gauges_f64(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (Labels, f64)>,
) -> Result<(), std::fmt::Error> {
    family(enc, name, help, MetricType::Gauge, rows, |v, e| {
        ConstGauge::new(v).encode(e)
    })
}

fn one(v: i64) -> Vec<(Labels, i64)> {
    vec![(Vec::new(), v)]
}

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let e = &mut enc;
        let by_topic = |f: fn(&TopicRow) -> u64, all: u64| {
            std::iter::once((Vec::new(), all)).chain(
                self.topics
                    .iter()
                    .map(move |t| (vec![("topic", t.topic.to_string())], f(t))),
            )
        };
        counters(
            e,
            "kafka_server_brokertopicmetrics_bytesin",
            "Bytes of record batches appended for producers (BrokerTopicMetrics BytesInPerSec).",
            by_topic(|t| t.bytes_in, self.bytes_in),
        )?;
        counters(
            e,
            "kafka_server_brokertopicmetrics_messagesin",
            "Records appended for producers (BrokerTopicMetrics MessagesInPerSec).",
            by_topic(|t| t.messages_in, self.messages_in),
        )?;
        counters(
            e,
            "kafka_server_brokertopicmetrics_bytesout",
            "Record bytes sent to consumers (BrokerTopicMetrics BytesOutPerSec).",
            by_topic(|t| t.bytes_out, self.bytes_out),
        )?;
        let c = &self.counters;
        counters(
            e,
            "kafka_network_requestmetrics_requests",
            "Requests by API and version (RequestMetrics RequestsPerSec).",
            c.requests.iter().map(|(k, v, n)| {
                (
                    vec![("request", api_name(*k)), ("version", v.to_string())],
                    *n,
                )
            }),
        )?;
        counters(
            e,
            "kafka_network_requestmetrics_errors",
            "Error codes in responses by API, NONE included (RequestMetrics ErrorsPerSec).",
            c.errors.iter().map(|(k, code, n)| {
                (
                    vec![
                        ("request", api_name(*k)),
                        ("error", super::error_name(*code)),
                    ],
                    *n,
                )
            }),
        )?;
        {
            let mut m = e.encode_descriptor(
                "kafka_network_requestmetrics_totaltimems",
                "Request time in ms from its frame read to its answer written (RequestMetrics TotalTimeMs).",
                None,
                MetricType::Histogram,
            )?;
            for (k, h) in &c.latency {
                let labels: Labels = vec![("request", api_name(*k))];
                m.encode_family(&labels)?
                    .encode_histogram::<Labels>(h.sum_ms, h.count, &h.buckets, None)?;
            }
        }
        let rows = |f: fn(&PartitionRow) -> i64| {
            self.partitions.iter().map(move |p| {
                (
                    vec![
                        ("topic", p.topic.to_string()),
                        ("partition", p.partition.to_string()),
                    ],
                    f(p),
                )
            })
        };
        type PartitionGauge = (&'static str, &'static str, fn(&PartitionRow) -> i64);
        let per_partition: [PartitionGauge; 4] = [
            (
                "kafka_log_log_size",
                "Bytes of the partition's log segments (Log Size).",
                |p| p.size as i64,
            ),
            (
                "kafka_log_log_numlogsegments",
                "Segments of the partition's log (Log NumLogSegments).",
                |p| p.segments as i64,
            ),
            (
                "kafka_log_log_logstartoffset",
                "The log start offset (Log LogStartOffset).",
                |p| p.log_start,
            ),
            (
                "kafka_log_log_logendoffset",
                "The log end offset (Log LogEndOffset).",
                |p| p.log_end,
            ),
        ];
        for (name, help, f) in per_partition {
            gauges(e, name, help, rows(f))?;
        }
        let count =
            |f: fn(&PartitionRow) -> bool| self.partitions.iter().filter(|p| f(p)).count() as i64;
        let single: [(&str, &str, i64); 9] = [
            (
                "kafka_server_replicamanager_partitioncount",
                "Partition replicas on this broker (ReplicaManager PartitionCount).",
                count(|_| true),
            ),
            (
                "kafka_server_replicamanager_leadercount",
                "Partitions this broker leads (ReplicaManager LeaderCount).",
                count(|p| p.leader),
            ),
            (
                "kafka_server_replicamanager_underreplicatedpartitions",
                "Partitions led here whose ISR is smaller than their replicas (ReplicaManager UnderReplicatedPartitions).",
                count(|p| p.under_replicated),
            ),
            (
                "kafka_controller_kafkacontroller_activecontrollercount",
                "1 on the active controller, else 0 (KafkaController ActiveControllerCount).",
                i64::from(self.active_controller),
            ),
            (
                "kafka_controller_kafkacontroller_offlinepartitionscount",
                "Partitions without a leader, on the active controller (KafkaController OfflinePartitionsCount).",
                self.offline_partitions as i64,
            ),
            (
                "kafka_controller_kafkacontroller_globaltopiccount",
                "Topics, on the active controller (KafkaController GlobalTopicCount).",
                self.global_topics as i64,
            ),
            (
                "kafka_controller_kafkacontroller_globalpartitioncount",
                "Partitions, on the active controller (KafkaController GlobalPartitionCount).",
                self.global_partitions as i64,
            ),
            (
                "kafka_server_fetchsessioncache_numincrementalfetchsessions",
                "Incremental fetch sessions held (FetchSessionCache NumIncrementalFetchSessions).",
                self.fetch_sessions.0 as i64,
            ),
            (
                "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
                "Partitions held by the fetch sessions (FetchSessionCache NumIncrementalFetchPartitionsCached).",
                self.fetch_sessions.1 as i64,
            ),
        ];
        for (name, help, v) in single {
            gauges(e, name, help, one(v))?;
        }
        let events: [(&str, &str, u64); 3] = [
            (
                "kafka_server_replicamanager_isrshrinks",
                "ISR shrinks of partitions led here (ReplicaManager IsrShrinksPerSec).",
                self.isr_shrinks,
            ),
            (
                "kafka_server_replicamanager_isrexpands",
                "ISR expansions of partitions led here (ReplicaManager IsrExpandsPerSec).",
                self.isr_expands,
            ),
            (
                "kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
                "Fetch sessions evicted for others (FetchSessionCache IncrementalFetchSessionEvictionsPerSec).",
                self.fetch_sessions.2,
            ),
        ];
        for (name, help, v) in events {
            counters(e, name, help, [(Vec::new(), v)])?;
        }
        // Kafka 4's group coordinator metrics (`group-coordinator-metrics`).
        gauges(
            e,
            "kafka_server_group_coordinator_metrics_group_count",
            "Groups coordinated here, by protocol (group-coordinator-metrics group-count).",
            GROUP_STATES.iter().map(|(t, _)| {
                (
                    vec![("protocol", t.to_string())],
                    count_groups(&self.groups, t, ""),
                )
            }),
        )?;
        for (t, states) in GROUP_STATES {
            gauges(
                e,
                &format!("kafka_server_group_coordinator_metrics_{t}_group_count"),
                "Groups coordinated here by state (group-coordinator-metrics).",
                states.iter().map(|st| {
                    (
                        vec![("state", st.to_string())],
                        count_groups(&self.groups, t, st),
                    )
                }),
            )?;
        }
        // The classic coordinator's `GroupMetadataManager` gauges, which older dashboards read.
        gauges(
            e,
            "kafka_coordinator_group_groupmetadatamanager_numgroups",
            "Classic groups coordinated here (GroupMetadataManager NumGroups).",
            one(count_groups(&self.groups, "classic", "")),
        )?;
        for st in GROUP_STATES[0].1 {
            gauges(
                e,
                &format!(
                    "kafka_coordinator_group_groupmetadatamanager_numgroups{}",
                    st.to_ascii_lowercase()
                ),
                "Classic groups coordinated here in this state (GroupMetadataManager).",
                one(count_groups(&self.groups, "classic", st)),
            )?;
        }
        let lag_rows = |f: fn(&LagRow) -> i64| {
            self.lag.iter().map(move |l| {
                (
                    vec![
                        ("consumergroup", l.group.clone()),
                        ("topic", l.topic.clone()),
                        ("partition", l.partition.to_string()),
                    ],
                    f(l),
                )
            })
        };
        gauges(
            e,
            "kafka_consumergroup_current_offset",
            "A group's committed offset (as kafka_exporter names it).",
            lag_rows(|l| l.committed),
        )?;
        gauges(
            e,
            "kafka_consumergroup_lag",
            "High watermark minus the group's committed offset (as kafka_exporter names it).",
            lag_rows(|l| l.lag),
        )?;
        gauges(
            e,
            "kafka_server_socket_server_metrics_connection_count",
            "Open client connections per listener (socket-server-metrics connection-count).",
            self.connections
                .iter()
                .map(|(l, open, _)| (vec![("listener", l.to_string())], *open)),
        )?;
        counters(
            e,
            "kafka_server_socket_server_metrics_connection_creation",
            "Client connections accepted per listener (socket-server-metrics connection-creation-total).",
            self.connections
                .iter()
                .map(|(l, _, created)| (vec![("listener", l.to_string())], *created)),
        )?;
        for kind in [QuotaKind::Produce, QuotaKind::Fetch, QuotaKind::Request] {
            let ty = kind.metric_type();
            gauges_f64(
                e,
                &format!("kafka_server_{}_throttle_time", ty.to_lowercase()),
                &format!(
                    "Average throttle time in ms of a client under a {ty} quota \
                     (kafka.server:type={ty},user=,client-id= throttle-time)."
                ),
                self.throttle.iter().filter(|t| t.kind == kind).map(|t| {
                    let labels = vec![("user", t.user.clone()), ("client_id", t.client_id.clone())];
                    (labels, t.avg_ms)
                }),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_counted_by_type_and_state() {
        let g = [
            ("classic", "Stable"),
            ("classic", "Empty"),
            ("consumer", "Stable"),
            ("classic", "Stable"),
        ];
        assert_eq!(count_groups(&g, "classic", "Stable"), 2);
        assert_eq!(count_groups(&g, "classic", ""), 3);
        assert_eq!(count_groups(&g, "consumer", "Stable"), 1);
        assert_eq!(count_groups(&g, "consumer", "Empty"), 0);
    }
}
