"""Helpers shared by the transaction suites (txn, streams, cluster-txn): topics, plain and
transactional confluent-kafka clients, whole-topic reads at an isolation level, offsets at an
isolation level, Kafka's tools and this suite's Java programs as subprocesses, and the
copy check (copied / duplicated / lost) every exactly-once scenario ends with. The scenarios
that kill brokers under a copier or a Streams application are in killtests.py.
"""
import collections
import os
import shlex
import subprocess
import time

from confluent_kafka import (Consumer, IsolationLevel, KafkaError, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from harness import RUN_TAG, check, info, wait_until

T = 30  # seconds: default bound for a single client call
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("SLUICE_ROOT", os.path.abspath(os.path.join(HERE, "..", "..")))
KAFKA_LIBS = os.environ.get("KAFKA_LIBS", "")
JAVA_CP = os.environ.get("TXN_JAVA_CP", "")
LOG4J = os.path.join(ROOT, "scripts", "kafka", "log4j2-tools.properties")
SUITE_TMP = os.environ.get("SUITE_TMP", "/tmp")


def quiet(err):
    """librdkafka error_cb: transport errors while a broker is down are expected; scenarios
    assert on results, not on this stream."""
    info("librdkafka: %s" % err)


def name(base):
    return "%s-%s" % (base, RUN_TAG)


def admin(bootstrap):
    """A new AdminClient: librdkafka's admin client is not reused across a broker's kill and
    restart (seen here: requests time out afterwards, then an assertion in rdkafka_queue.h)."""
    return AdminClient({"bootstrap.servers": bootstrap, "error_cb": quiet, "log_level": 3})


def create_topic(bootstrap, topic, partitions, rf=-1, config=None, timeout=60):
    """Creates the topic (rf -1: the broker's default.replication.factor) and waits until
    ListOffsets answers on every partition (Metadata may name a leader a moment before it
    serves the partition)."""
    a = admin(bootstrap)
    a.create_topics([NewTopic(topic, partitions, rf, config=config or {})],
                    operation_timeout=timeout, request_timeout=timeout)[topic].result(timeout=timeout)
    specs = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}

    def ready():
        for f in a.list_offsets(specs, request_timeout=10).values():
            f.result(timeout=10)
        return True
    wait_until(ready, timeout, "partitions of %s ready for ListOffsets" % topic)
    return topic


def end_offsets(bootstrap, topic, partitions, committed=False):
    """{partition: latest offset} from ListOffsets: the last stable offset with
    committed=True (isolation level read_committed), the high watermark otherwise."""
    a = admin(bootstrap)
    iso = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    fs = a.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
                        isolation_level=iso, request_timeout=T)
    return {tp.partition: f.result(timeout=T).offset for tp, f in fs.items()}


def producer(bootstrap, **extra):
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
            "enable.idempotence": True, "error_cb": quiet}
    conf.update(extra)
    return Producer(conf)


def txn_producer(bootstrap, txn_id, **extra):
    """A transactional producer, initialized (InitProducerId through the coordinator)."""
    p = producer(bootstrap, **dict(extra, **{"transactional.id": txn_id}))
    p.init_transactions(T)
    return p


def produce_sync(p, topic, records):
    """records: [(partition, key, value)]; flushes and asserts every delivery succeeded.
    Returns the offsets in order."""
    out = [None] * len(records)
    errs = []

    def cb(i):
        def report(err, msg):
            if err is not None:
                errs.append(err)
            else:
                out[i] = msg.offset()
        return report
    for i, (part, key, value) in enumerate(records):
        while True:
            try:
                p.produce(topic, key=key, value=value, partition=part, on_delivery=cb(i))
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(T)
    check(left == 0, "%d record(s) undelivered after flush" % left)
    check(not errs, "delivery errors: %s" % [str(e) for e in errs[:5]])
    return out


def read_all(bootstrap, topic, partitions, committed, timeout=60):
    """Every record of the topic from offset 0 to its end at that isolation level (the LSO for
    committed=True, else the high watermark), as {partition: [(offset, key, value)]}. Ends when
    every partition reported end-of-partition at the offset ListOffsets gives for that
    isolation level, i.e. the consumer reached the end (a read_committed consumer stuck below
    the LSO fails here)."""
    want = end_offsets(bootstrap, topic, partitions, committed)
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "txn-reader-%s" % RUN_TAG,
        "enable.auto.commit": False, "enable.auto.offset.store": False,
        "auto.offset.reset": "error", "enable.partition.eof": True, "check.crcs": True,
        "isolation.level": "read_committed" if committed else "read_uncommitted",
        "error_cb": quiet, "log_level": 3,
    })
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got = {p: [] for p in range(partitions)}
        eof = {}
        deadline = time.monotonic() + timeout
        while True:
            done = [p for p in range(partitions) if eof.get(p, -1) >= want[p]]
            if len(done) == partitions:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(
                    "%s (%s) not read to its end within %ds: at %s, end offsets %s, %d records" % (
                        topic, "read_committed" if committed else "read_uncommitted", timeout,
                        eof, want, sum(len(v) for v in got.values())))
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof[m.partition()] = m.offset()
                    continue
                raise AssertionError("consumer error on %s: %s" % (topic, m.error()))
            got[m.partition()].append((m.offset(), m.key(), m.value()))
    finally:
        c.close()


def values(records_by_partition):
    return [v for p in sorted(records_by_partition) for _, _, v in records_by_partition[p]]


def copy_report(inputs, outputs):
    """inputs, outputs: lists of values. Returns (copied, duplicated, lost): records of the
    output that are distinct input records, output records beyond the first copy of each,
    input records missing from the output; extra values (never in the input) count as
    duplicated too, so that dup == 0 and lost == 0 is exactly-once."""
    want = collections.Counter(inputs)
    have = collections.Counter(outputs)
    copied = sum(min(n, have[v]) for v, n in want.items())
    duplicated = len(outputs) - copied
    lost = len(inputs) - copied
    return copied, duplicated, lost


def check_exactly_once(what, inputs, outputs):
    copied, dup, lost = copy_report(inputs, outputs)
    info("%s: copied %d, duplicated %d, lost %d (input %d, output %d)" % (
        what, copied, dup, lost, len(inputs), len(outputs)))
    check(dup == 0 and lost == 0, "%s not exactly once: copied %d, duplicated %d, lost %d" % (
        what, copied, dup, lost))
    return copied


# ---- subprocesses -------------------------------------------------------------------------------

def java_cmd(main_class, *args, heap="256m", classpath=None, short=False):
    """The command line of a Java program; short: a tool that runs for seconds (C1 only and
    the serial collector: a quicker start on a busy machine)."""
    fast = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"] if short else []
    return ["java", "-Xmx" + heap] + fast + ["-Djava.awt.headless=true",
            "-Dlog4j2.configurationFile=" + LOG4J,
            "-cp", classpath or JAVA_CP, main_class] + [str(a) for a in args]


def kafka_tool(main_class, *args, timeout=90, check_rc=True):
    """Runs one of Kafka's tools (KAFKA_LIBS) by main class; returns (rc, stdout, stderr)."""
    cmd = java_cmd(main_class, *args, heap="512m", classpath=os.path.join(KAFKA_LIBS, "*"), short=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    out, err = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    if check_rc:
        check(r.returncode == 0, "%s %s exited %d: %s %s" % (
            main_class.rsplit(".", 1)[-1], " ".join(map(str, args[:3])), r.returncode,
            out[-300:], err[-500:]))
    return r.returncode, out, err


def transactions_tool(bootstrap, *args, **kw):
    return kafka_tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server",
                      bootstrap, *args, **kw)


def table(text):
    """Rows of a kafka-transactions table (tab-separated, header first) as dicts."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return []
    head = [h.strip() for h in lines[0].split("\t") if h.strip()]
    rows = []
    for ln in lines[1:]:
        cells = [c.strip() for c in ln.split("\t")]
        rows.append(dict(zip(head, cells)))
    return rows


def run_program(cmd, what, timeout=180, env=None, cwd=None):
    """Runs one of the suites' programs to completion; its last line must be `OK <details>`
    (the details are returned) or `FAIL <reason>` (raised, with its stderr on ours)."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                       env=env, cwd=cwd)
    out = r.stdout.decode(errors="replace").strip().splitlines()
    err = r.stderr.decode(errors="replace")
    last = out[-1] if out else ""
    if not last.startswith("OK"):
        info("%s stderr: %s" % (what, err[-3000:]))
    check(last.startswith("OK"), "%s: %s (exit %d) %s" % (
        what, last or "no result line", r.returncode,
        "" if last else err[-400:].replace("\n", " | ")))
    return last[2:].strip()


def run_java(main_class, *args, timeout=180, env=None):
    return run_program(java_cmd(main_class, *args), main_class.rsplit(".", 1)[-1], timeout, env)


class Spawned:
    """A background process whose stdout goes to a file; killed (SIGKILL) by stop() or at exit
    of the scenario that made it."""

    def __init__(self, cmd, tag, env=None):
        self.out_path = os.path.join(SUITE_TMP, "%s.%d.out" % (tag, time.monotonic_ns()))
        self.out = open(self.out_path, "wb")
        self.p = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT, env=env,
                                  start_new_session=True)
        with open(os.path.join(SUITE_TMP, "spawned.pids"), "a") as f:
            f.write("%d\n" % self.p.pid)
        self.cmd = cmd

    def lines(self):
        with open(self.out_path, "rb") as f:
            return f.read().decode(errors="replace").splitlines()

    def alive(self):
        return self.p.poll() is None

    def signal(self, sig):
        if self.p.poll() is None:
            os.kill(self.p.pid, sig)

    def kill9(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(20)
        self.out.close()

    def term(self, timeout=60):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(20)
        self.out.close()
        return self.p.returncode

    def tail(self, n=15):
        return " | ".join(self.lines()[-n:])


def shell(cmd, timeout=180):
    """Runs a command line (e.g. "$BROKER_CTL kill9"); asserts exit 0; returns seconds taken."""
    t0 = time.monotonic()
    r = subprocess.run(cmd if isinstance(cmd, list) else shlex.split(cmd), timeout=timeout,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = r.stdout.decode(errors="replace").strip().replace("\n", " | ")
    check(r.returncode == 0, "%s exited %d: %s" % (cmd, r.returncode, out[-400:]))
    return time.monotonic() - t0

