"""Metrics suite: /metrics scraped and parsed with the Prometheus text parser of PyPI's
prometheus-client (text_string_to_metric_families), against Sluice's HTTP server or, with
BROKER_KIND=kafka, the Prometheus JMX exporter agent in Kafka's JVM with kafka-jmx-rules.yml.
See ./run for the scenarios."""
import os
import socket
import struct
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
from harness import BOOTSTRAP, RUN_TAG, Suite, check, host_port, info, wait_until  # noqa: E402
import kafka_wire as w  # noqa: E402

from confluent_kafka import ConsumerGroupTopicPartitions, Consumer, Producer, TopicPartition  # noqa: E402,E501
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

KIND = os.environ.get("BROKER_KIND", "sluice")
METRICS = os.environ["METRICS_URL"]  # http://host:port
DATA = os.environ.get("BROKER_DATA", "")
suite = Suite("metrics")

TOPIC = "metrics-%s" % RUN_TAG
N = 3000
VALUE = b"v" * 1000


def get(path):
    try:
        with urllib.request.urlopen(METRICS + path, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape():
    """{sample name: [(labels dict, value)]} of one /metrics scrape, as the parser reads it."""
    status, text = get("/metrics")
    check(status == 200, "/metrics answered %d" % status)
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def value(m, name, **labels):
    """Sum of the samples of `name` whose labels include `labels` (None: no such sample)."""
    vals = [v for (ls, v) in m.get(name, []) if all(ls.get(k) == x for k, x in labels.items())]
    return sum(vals) if vals else None


def untagged(m, name):
    """The sample of `name` without the per-topic label (the all-topics one)."""
    vals = [v for (ls, v) in m.get(name, []) if "topic" not in ls]
    return vals[0] if vals else None


def admin():
    return AdminClient({"bootstrap.servers": BOOTSTRAP})


def ensure_topic():
    a = admin()
    if TOPIC in a.list_topics(timeout=10).topics:
        return
    # 1 MiB segments (Kafka's smallest segment.bytes): N records of 1000 bytes roll several.
    fs = a.create_topics([NewTopic(TOPIC, 1, 1, config={"segment.bytes": "1048576"})])
    fs[TOPIC].result(30)


def produce(n):
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "linger.ms": 5,
                  "compression.type": "none"})
    for i in range(n):
        p.produce(TOPIC, key=b"k%d" % i, value=VALUE, partition=0)
        if i % 500 == 0:
            p.poll(0)
    check(p.flush(30) == 0, "records left unsent")


def consume_all(n):
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "metrics-read-%s" % RUN_TAG,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got = 0
    deadline = time.monotonic() + 40
    while got < n and time.monotonic() < deadline:
        for msg in c.consume(500, 1.0):
            if msg.error() is None:
                got += 1
    c.close()
    check(got == n, "consumed %d of %d" % (got, n))


@suite.scenario("parses")
def parses():
    m = scrape()
    info("%d sample names" % len(m))
    for name in ["kafka_network_requestmetrics_totaltimems_count",
                 "kafka_controller_kafkacontroller_activecontrollercount",
                 "kafka_server_replicamanager_underreplicatedpartitions",
                 "kafka_controller_kafkacontroller_offlinepartitionscount",
                 "kafka_server_replicamanager_isrshrinks_total",
                 "kafka_server_replicamanager_isrexpands_total",
                 "kafka_server_group_coordinator_metrics_group_count",
                 "kafka_server_group_coordinator_metrics_classic_group_count"]:
        check(name in m, "no %s in /metrics" % name)
    for api in ["Produce", "Fetch", "Metadata", "OffsetCommit"]:
        check(value(m, "kafka_network_requestmetrics_totaltimems_count", request=api) is not None,
              "no totaltimems_count{request=%s}" % api)
    check(value(m, "kafka_controller_kafkacontroller_activecontrollercount") == 1,
          "a single node is the active controller")
    check(value(m, "kafka_server_replicamanager_underreplicatedpartitions") == 0,
          "under-replicated partitions on a single node")
    check(value(m, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0,
          "offline partitions on a single node")


@suite.scenario("traffic-counters", timeout=120)
def traffic_counters():
    ensure_topic()
    before = scrape()
    req = lambda m, r: value(m, "kafka_network_requestmetrics_requests_total", request=r) or 0
    took = lambda m, r: value(m, "kafka_network_requestmetrics_totaltimems_count", request=r) or 0
    produce(N)
    consume_all(N)

    def moved():
        m = scrape()
        msgs = value(m, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) or 0
        out = value(m, "kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) or 0
        return m if msgs >= N and out > 0 else None
    m = wait_until(moved, 30, "messages in and bytes out of %s to move" % TOPIC)
    msgs = value(m, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC)
    bin_ = value(m, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC)
    bout = value(m, "kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC)
    info("messagesin %s bytesin %s bytesout %s" % (msgs, bin_, bout))
    check(msgs == N, "messagesin_total{topic} = %s, want %d" % (msgs, N))
    check(bin_ >= N * len(VALUE), "bytesin_total{topic} = %s < %d" % (bin_, N * len(VALUE)))
    check(bout >= bin_, "bytesout_total{topic} %s below bytesin %s after reading it all"
          % (bout, bin_))
    for name in ["kafka_server_brokertopicmetrics_messagesin_total",
                 "kafka_server_brokertopicmetrics_bytesin_total",
                 "kafka_server_brokertopicmetrics_bytesout_total"]:
        all_topics = untagged(m, name)
        check(all_topics is not None and all_topics >= value(m, name, topic=TOPIC),
              "%s without a topic (%s) below the topic's" % (name, all_topics))
    for r in ["Produce", "Fetch", "Metadata"]:
        check(req(m, r) > req(before, r), "requests_total{request=%s} did not move" % r)
    check(took(m, "Produce") > took(before, "Produce"),
          "totaltimems_count{request=Produce} did not move")
    check(value(m, "kafka_network_requestmetrics_errors_total", request="Produce",
                error="NONE") > 0, "no errors_total{request=Produce,error=NONE}")


def produce_to_missing_partition():
    """Produce v9 with one empty record set to partition 7 of the 1-partition topic."""
    body = (w.cstr(None) + struct.pack(">hi", 1, 10000)
            + w.carray([TOPIC], lambda t: w.cstr(t) + w.carray(
                [7], lambda p: struct.pack(">i", p) + w.uvarint(1) + w.TAGS) + w.TAGS)
            + w.TAGS)
    r = w.call(host_port(), 0, 9, body)
    topics = r.uvarint() - 1
    check(topics == 1, "%d topics in the answer" % topics)
    r.cstr()
    parts = r.uvarint() - 1
    check(parts == 1, "%d partitions in the answer" % parts)
    r.i32()
    return r.i16()


@suite.scenario("errors-by-code")
def errors_by_code():
    ensure_topic()
    name = "kafka_network_requestmetrics_errors_total"
    err = "UNKNOWN_TOPIC_OR_PARTITION"
    before = value(scrape(), name, request="Produce", error=err) or 0
    code = produce_to_missing_partition()
    check(code == 3, "Produce to a missing partition answered %d" % code)
    wait_until(lambda: (value(scrape(), name, request="Produce", error=err) or 0) == before + 1,
               20, "errors_total{request=Produce,error=%s} to move by one" % err)


def segment_files():
    d = os.path.join(DATA, "%s-0" % TOPIC)
    logs = [f for f in os.listdir(d) if f.endswith(".log")]
    return len(logs), sum(os.path.getsize(os.path.join(d, f)) for f in logs)


@suite.scenario("log-gauges")
def log_gauges():
    ensure_topic()
    n_files, size_files = segment_files()
    m = scrape()
    size = value(m, "kafka_log_log_size", topic=TOPIC, partition="0")
    segs = value(m, "kafka_log_log_numlogsegments", topic=TOPIC, partition="0")
    end = value(m, "kafka_log_log_logendoffset", topic=TOPIC, partition="0")
    info("size %s (files %d) segments %s (files %d) end %s" % (size, size_files, segs, n_files, end))
    check(segs == n_files, "numlogsegments %s, %d .log files on disk" % (segs, n_files))
    check(segs >= 3, "only %s segments for %d KB in 1 MiB segments" % (segs, N))
    check(size == size_files, "log_size %s, %d bytes of .log files on disk" % (size, size_files))
    check(end == N, "logendoffset %s, want %d" % (end, N))


@suite.scenario("consumer-lag", timeout=90)
def consumer_lag():
    ensure_topic()
    group = "metrics-lag-%s" % RUN_TAG
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "latest"})
    c.subscribe([TOPIC])
    # A member of a classic group: polled until it has its partition.
    wait_until(lambda: c.poll(0.5) is None and c.assignment(), 30, "the partition assigned")
    stable = "kafka_server_group_coordinator_metrics_classic_group_count"
    # Kafka 4.4's classic-group-count did not follow this group's states within 20 s when
    # measured here (it showed a group loaded at start-up), so the states are checked on
    # Sluice only; the family itself is checked on both (parses).
    if KIND != "kafka":
        wait_until(lambda: (value(scrape(), stable, state="Stable") or 0) >= 1, 20,
                   "classic_group_count{state=Stable} >= 1 with a member in the group")
    a = admin()
    for committed in (40, 2500, N):
        c.commit(offsets=[TopicPartition(TOPIC, 0, committed)], asynchronous=False)
        want = N - committed
        # The Admin API's view, which lag exporters read: the group's committed offset and
        # the partition's end offset.
        got = a.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)])[group].result(20)
        tp = [t for t in got.topic_partitions if t.topic == TOPIC][0]
        lo, hi = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        check(hi - tp.offset == want, "admin view: end %d - committed %d != %d"
              % (hi, tp.offset, want))
        if KIND == "kafka":
            # Kafka's brokers export no consumer lag (kafka_exporter and Burrow compute it
            # from the API values checked above).
            continue
        labels = {"consumergroup": group, "topic": TOPIC, "partition": "0"}
        wait_until(lambda: value(scrape(), "kafka_consumergroup_lag", **labels) == want,
                   20, "kafka_consumergroup_lag = %d after committing %d" % (want, committed))
        check(value(scrape(), "kafka_consumergroup_current_offset", **labels) == committed,
              "kafka_consumergroup_current_offset is not %d" % committed)
    c.close()
    if KIND != "kafka":
        wait_until(lambda: (value(scrape(), stable, state="Empty") or 0) >= 1, 20,
                   "classic_group_count{state=Empty} >= 1 once the member left")


@suite.scenario("connections")
def connections():
    name = "kafka_server_socket_server_metrics_connection_count"
    created = "kafka_server_socket_server_metrics_connection_creation_total"
    before = value(scrape(), created, listener="PLAINTEXT") or 0
    with socket.create_connection(host_port(), timeout=10):
        wait_until(lambda: (value(scrape(), name, listener="PLAINTEXT") or 0) >= 1, 20,
                   "connection_count{listener=PLAINTEXT} >= 1 with a connection open")
    wait_until(lambda: (value(scrape(), created, listener="PLAINTEXT") or 0) > before, 20,
               "connection_creation_total{listener=PLAINTEXT} to move")


@suite.scenario("throttle-time")
def throttle_time():
    client = "metrics-throttled-%s" % RUN_TAG
    res = w.alter_client_quotas(host_port(), [([("client-id", client)],
                                               [("producer_byte_rate", 1024.0)])])
    check(res and res[0][0] == 0, "AlterClientQuotas: %s" % res)
    name = "kafka_server_produce_throttle_time"
    try:
        ensure_topic()
        p = Producer({"bootstrap.servers": BOOTSTRAP, "client.id": client, "linger.ms": 50,
                      "compression.type": "none"})
        # ~20 kB at once against 1 kB/s: the first answer carries a throttle time (the
        # rate counts at least 10 windows, so ~2 kB/s).
        for i in range(20):
            p.produce(TOPIC, value=VALUE, partition=0)
        check(p.flush(60) == 0, "records left unsent")
        wait_until(lambda: (value(scrape(), name, client_id=client) or 0) > 0, 30,
                   "%s{client_id=%s} > 0" % (name, client))
        other = value(scrape(), name, client_id="metrics-unthrottled")
        check(not other, "a client without a quota has a throttle time: %s" % other)
    finally:
        w.alter_client_quotas(host_port(), [([("client-id", client)],
                                             [("producer_byte_rate", None)])])


@suite.scenario("health-ready")
def health_ready():
    if KIND == "kafka":
        # Kafka has no health endpoints; the JMX exporter's own is /-/healthy.
        status, _ = get("/-/healthy")
        check(status == 200, "/-/healthy answered %d" % status)
        return
    status, body = get("/health")
    check(status == 200, "/health answered %d %r" % (status, body))
    status, body = get("/ready")
    check(status == 200, "/ready answered %d %r" % (status, body))
    status, _ = get("/no-such-page")
    check(status == 404, "/no-such-page answered %d" % status)
    lone_cluster_node_is_not_ready()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lone_cluster_node_is_not_ready():
    """Node 1 of a two-voter cluster whose other voter never starts: its quorum cannot form,
    so it serves /health but answers /ready and /metrics 503."""
    import subprocess
    import tempfile
    client, controller, other, http = free_port(), free_port(), free_port(), free_port()
    d = tempfile.mkdtemp(dir=os.environ.get("SUITE_TMP"))
    sets = {
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:%d,2@127.0.0.1:%d" % (controller, other),
        "listeners": "PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d" % (client, controller),
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": d + "/data", "metadata.log.dir": d + "/meta",
        "sluice.http.server.listeners": "http://127.0.0.1:%d" % http,
    }
    args = [os.environ["SLUICE_BIN"]]
    for k, v in sets.items():
        args += ["--override", "%s=%s" % (k, v)]
    with open(d + "/node.log", "w") as log:
        node = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = "http://127.0.0.1:%d" % http

        def status(path):
            try:
                with urllib.request.urlopen(url + path, timeout=5) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code
        wait_until(lambda: status("/health") == 200, 20, "the lone node's /health")
        check(status("/ready") == 503, "the lone node's /ready is not 503")
        check(status("/metrics") == 503, "the lone node's /metrics is not 503")
    finally:
        # SIGKILL: a node still waiting for its quorum does not act on SIGTERM yet.
        node.kill()
        node.wait(15)


if __name__ == "__main__":
    suite.main()
