#!/usr/bin/env python3
"""Cluster suite: a 3-node cluster (scripts/cluster, started by ./run) driven by Kafka's own
command-line tools, Kafka's VerifiableProducer/VerifiableConsumer, confluent-kafka, kafkajs and
kcat, with nodes killed by SIGKILL and restarted. See ./run for the scenario list.

Env (from ./run): BOOTSTRAP (the three brokers, comma-separated), CLUSTER_CTL, CLUSTER_DIR,
KAFKA_LIBS, SLUICE_ROOT.
"""
import json
import os
import re
import signal
import subprocess
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness import BOOTSTRAP, RUN_TAG, Suite, check, info, wait_until
import raft_voter_wire as rv

S = Suite("cluster")
N = 3
NODES = list(range(1, N + 1))
ROOT = os.environ.get("SLUICE_ROOT") or os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
CLUSTER_CTL = os.environ.get("CLUSTER_CTL") or os.path.join(ROOT, "scripts/cluster")
CLUSTER_DIR = os.environ["CLUSTER_DIR"]
KAFKA_LIBS = os.environ["KAFKA_LIBS"]
TMP = os.environ.get("SUITE_TMP") or CLUSTER_DIR
LOG4J = os.path.join(ROOT, "scripts/kafka/log4j2-tools.properties")
HERE = os.path.dirname(os.path.abspath(__file__))

KIND = os.environ.get("BROKER_KIND", "sluice")
ROUNDS = int(os.environ.get("CLUSTER_KILL_ROUNDS", "10"))
LOAD_RATE = 200           # VerifiableProducer --throughput (records/s)


def topic_name(base):
    return "c-%s-%s" % (base, RUN_TAG)


# ---- processes -----------------------------------------------------------------------------

def java_cmd(cls, *args, quick=True, heap="256m"):
    """A Kafka tool by main class, as bin/kafka-*.sh runs it (WARN and up on stderr). quick:
    C1 only and the serial GC, for short-lived tools on a 2-core machine."""
    jvm = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"] if quick else []
    return (["java", "-Xmx" + heap] + jvm +
            ["-Djava.awt.headless=true", "-Dlog4j2.configurationFile=" + LOG4J,
             "-cp", KAFKA_LIBS + "/*", cls] + list(args))


def tool(cls, *args, timeout=90, ok=True):
    """Run a Kafka tool; returns its stdout (AssertionError if ok and it exits non-zero)."""
    r = subprocess.run(java_cmd(cls, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    out = r.stdout.decode(errors="replace")
    err = r.stderr.decode(errors="replace")
    if ok:
        check(r.returncode == 0, "%s %s exited %d: %s %s" % (
            cls.rsplit(".", 1)[-1], " ".join(args)[:200], r.returncode, out[-300:], err[-500:]))
    return out if ok else (r.returncode, out, err)


TOPICS = "org.apache.kafka.tools.TopicCommand"
QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
LOGDIRS = "org.apache.kafka.tools.LogDirsCommand"
VPRODUCER = "org.apache.kafka.tools.VerifiableProducer"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"
FEATURES = "org.apache.kafka.tools.FeatureCommand"
VCONSUMER = "org.apache.kafka.tools.VerifiableConsumer"


def vproducer_config():
    """VerifiableProducer sets retries=0 (which also turns idempotence off); this restores the
    Java client's own defaults: unbounded retries within delivery.timeout.ms, idempotent,
    acks=all (its --acks default, -1)."""
    path = os.path.join(TMP, "verifiable-producer.properties")
    with open(path, "w") as f:
        f.write("retries=2147483647\nenable.idempotence=true\n")
    return path


def cluster(*args, timeout=200):
    t0 = time.monotonic()
    r = subprocess.run([CLUSTER_CTL] + [str(a) for a in args], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)
    out = r.stdout.decode(errors="replace").strip()
    check(r.returncode == 0, "scripts/cluster %s exited %d: %s" % (
        " ".join(map(str, args)), r.returncode, out[-800:].replace("\n", " | ")))
    info("cluster %s: %.1fs" % (" ".join(map(str, args)), time.monotonic() - t0))
    return out


def node_up(i):
    return subprocess.run([CLUSTER_CTL, "pid", str(i)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def ensure_all_up():
    """Each scenario starts with every node running (an earlier failure may have left one
    down) and every partition of every topic with a full ISR."""
    for i in NODES:
        if not node_up(i):
            info("node %d was down at the start of a scenario: starting it" % i)
            cluster("start", i)


class Spawned:
    """A background process with stdout in a file under TMP."""

    def __init__(self, name, cmd, cwd=None, env=None):
        self.path = os.path.join(TMP, "%s.%s.out" % (name, RUN_TAG))
        self.errpath = self.path[:-4] + ".err"
        self.out = open(self.path, "wb")
        self.err = open(self.errpath, "wb")
        self.p = subprocess.Popen(cmd, stdout=self.out, stderr=self.err, cwd=cwd, env=env)
        # ./run ends whatever is still running from this list when the suite is over (a hung
        # scenario ends the process at once, with no chance to stop its children)
        with open(os.path.join(TMP, "spawned.pids"), "a") as f:
            f.write("%d\n" % self.p.pid)

    def lines(self):
        with open(self.path, "rb") as f:
            return f.read().decode(errors="replace").splitlines()

    def events(self, name=None):
        out = []
        for line in self.lines():
            if not line.startswith("{"):
                continue
            try:
                e = json.loads(line)
            except ValueError:
                continue  # a line cut short while being written
            if name is None or e.get("name") == name:
                out.append(e)
        return out

    def count(self, needle):
        with open(self.path, "rb") as f:
            return f.read().count(needle.encode())

    def alive(self):
        return self.p.poll() is None

    def stop(self, timeout=60):
        if self.alive():
            self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(10)
        self.out.close()
        self.err.close()
        return self.p.returncode

    def stderr_tail(self, n=600):
        with open(self.errpath, "rb") as f:
            return f.read().decode(errors="replace")[-n:].replace("\n", " | ")


# ---- metadata ------------------------------------------------------------------------------

def quiet(err):
    pass  # transport errors while a node is down are expected


_admin = None


def admin():
    global _admin
    if _admin is None:
        _admin = AdminClient({"bootstrap.servers": BOOTSTRAP, "error_cb": quiet, "log_level": 2,
                              "topic.metadata.refresh.interval.ms": 1000})
    return _admin


def parts(topic):
    """{partition: (leader, [replicas], set(isr))} from a fresh Metadata request."""
    md = admin().list_topics(topic=topic, timeout=10)
    t = md.topics.get(topic)
    check(t is not None and t.error is None, "metadata of %s: %s" % (topic, t and t.error))
    return {p: (m.leader, list(m.replicas), set(m.isrs)) for p, m in t.partitions.items()}


def isr_full(topic, partitions=None):
    ps = parts(topic)
    if partitions is not None and len(ps) != partitions:
        return False
    return all(leader >= 0 and set(reps) == isr for leader, reps, isr in ps.values())


def wait_isr_full(topic, timeout=120, partitions=None):
    wait_until(lambda: isr_full(topic, partitions), timeout, "full ISR of every partition of %s" % topic,
               interval=0.5)


def create_topic(name, partitions=1, rf=3, config=None, assignment=None):
    if assignment is not None:
        nt = NewTopic(name, len(assignment), -1, replica_assignment=assignment, config=config or {})
    else:
        nt = NewTopic(name, partitions, rf, config=config or {})
    admin().create_topics([nt], request_timeout=30)[name].result(timeout=60)
    wait_isr_full(name, 60, partitions=len(assignment) if assignment else partitions)
    return name


def quorum_status():
    out = tool(QUORUM, "--bootstrap-server", BOOTSTRAP, "describe", "--status")
    st = {}
    for line in out.splitlines():
        k, sep, v = line.partition(":")
        if sep:
            st[k.strip()] = v.strip()
    return st


def describe_topic(topic):
    """kafka-topics --describe: {partition: (leader, [replicas], [isr])}"""
    out = tool(TOPICS, "--bootstrap-server", BOOTSTRAP, "--describe", "--topic", topic)
    res = {}
    for m in re.finditer(r"Partition: (\d+)\s+Leader: (\S+)\s+Replicas: ([\d,]*)\s+Isr: ([\d,]*)", out):
        ids = lambda s: [int(x) for x in s.split(",") if x]
        leader = int(m.group(2)) if m.group(2).lstrip("-").isdigit() else -1
        res[int(m.group(1))] = (leader, ids(m.group(3)), ids(m.group(4)))
    check(res, "no partition line in kafka-topics --describe: %s" % out[:400])
    return res, out


# ---- data ----------------------------------------------------------------------------------

def produce(topic, values, partition=0, acks="all", timeout=60):
    """Produce values (bytes) to one partition; returns [(offset, value)] in ack order."""
    acked, errors = [], []

    def cb(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.offset(), msg.value()))
    conf = {"bootstrap.servers": BOOTSTRAP, "acks": acks, "linger.ms": 5, "error_cb": quiet,
            "log_level": 2}
    if acks != "all":
        conf["enable.idempotence"] = False
    p = Producer(conf)
    for v in values:
        while True:
            try:
                p.produce(topic, value=v, partition=partition, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(timeout)
    check(left == 0 and not errors, "produce to %s: %d unflushed, errors %s" % (topic, left, errors[:3]))
    return acked


def read_partition(topic, partition, timeout=90):
    """Every record of a partition from its log start to its high watermark:
    (log start, high watermark, {offset: value})."""
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "c-reader-%s" % RUN_TAG,
                  "enable.auto.commit": False, "auto.offset.reset": "error", "check.crcs": True,
                  "error_cb": quiet, "log_level": 2})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30, cached=False)
        c.assign([TopicPartition(topic, partition, lo)])
        out = {}
        last = lo - 1
        deadline = time.monotonic() + timeout
        while last < hi - 1:
            check(time.monotonic() < deadline, "timed out reading %s-%d: at %d of %d" % (
                topic, partition, last, hi))
            for m in c.consume(num_messages=5000, timeout=0.5):
                if m.error():
                    raise AssertionError("reading %s-%d: %s" % (topic, partition, m.error()))
                check(m.offset() not in out, "offset %d read twice" % m.offset())
                out[m.offset()] = m.value()
                last = max(last, m.offset())
        return lo, hi, out
    finally:
        c.close()


def check_acked(topic, partitions, acked):
    """acked: [(partition, offset, value str)] from a producer that sends increasing integers.
    Every acknowledged record is at its acknowledged offset, no value is in the topic twice,
    and values increase with the offset in each partition. Returns the topic's record count."""
    logs = {p: read_partition(topic, p)[2] for p in range(partitions)}
    lost = [(p, o, v) for p, o, v in acked if (logs[p].get(o) or b"").decode() != v]
    seen = {}
    dups = []
    for p, log in logs.items():
        prev = None
        for o in sorted(log):
            v = (log[o] or b"").decode()
            check(v.isdigit(), "%s-%d offset %d holds %r, not a produced value" % (topic, p, o, v))
            if v in seen:
                dups.append((v, seen[v], (p, o)))
            seen[v] = (p, o)
            if prev is not None:
                check(int(v) > prev, "%s-%d: value %s at offset %d after %d (order)" % (
                    topic, p, v, o, prev))
            prev = int(v)
    total = sum(len(log) for log in logs.values())
    info("%s: %d records in the log, %d acknowledged, %d lost, %d duplicated" % (
        topic, total, len(acked), len(lost), len(dups)))
    check(not lost, "%d acknowledged record(s) missing or different at their offset, e.g. %s" % (
        len(lost), [(p, o, v, logs[p].get(o)) for p, o, v in lost[:5]]))
    check(not dups, "%d value(s) in the topic twice, e.g. %s" % (len(dups), dups[:5]))
    return total, len(lost)


# ---- scenarios -----------------------------------------------------------------------------

RF3 = topic_name("rf3")


@S.scenario("topics-create-describe", timeout=120)
def topics_create_describe():
    ensure_all_up()
    tool(TOPICS, "--bootstrap-server", BOOTSTRAP, "--create", "--topic", RF3,
         "--partitions", "6", "--replication-factor", "3")
    wait_isr_full(RF3, 60, partitions=6)
    d, out = describe_topic(RF3)
    info(out.strip())
    check(sorted(d) == list(range(6)), "partitions %s, expected 0..5" % sorted(d))
    leads = {i: 0 for i in NODES}
    for p, (leader, reps, isr) in d.items():
        check(sorted(reps) == NODES, "partition %d replicas %s, expected one on each of %s" % (p, reps, NODES))
        check(sorted(isr) == NODES, "partition %d ISR %s, expected all 3" % (p, isr))
        check(leader in NODES, "partition %d leader %s" % (p, leader))
        check(leader == reps[0], "partition %d leader %d is not its preferred replica %d" % (p, leader, reps[0]))
        leads[leader] += 1
    check(all(n == 2 for n in leads.values()), "leaders per broker %s, expected 2 each" % leads)
    m = json.loads(subprocess.run(["kcat", "-b", BOOTSTRAP, "-L", "-J", "-t", RF3], check=True,
                                  stdout=subprocess.PIPE, timeout=30).stdout)
    ports = {i: int(b.split(":")[1]) for i, b in enumerate(BOOTSTRAP.split(","), 1)}
    got = {b["id"]: b["name"] for b in m["brokers"]}
    check(got == {i: "127.0.0.1:%d" % ports[i] for i in NODES}, "kcat -L brokers %s" % got)
    check(len(m["topics"][0]["partitions"]) == 6, "kcat -L: %s" % m["topics"])


@S.scenario("metadata-quorum", timeout=90)
def metadata_quorum():
    ensure_all_up()
    st = quorum_status()
    info("describe --status: %s" % st)
    leader = int(st.get("LeaderId", "-1"))
    check(leader in NODES, "LeaderId %s" % st.get("LeaderId"))
    check(int(st.get("LeaderEpoch", "0")) >= 1, "LeaderEpoch %s" % st.get("LeaderEpoch"))
    check(int(st.get("HighWatermark", "0")) > 0, "HighWatermark %s" % st.get("HighWatermark"))
    voters = sorted(int(v) for v in re.findall(r'"id":\s*(\d+)', st.get("CurrentVoters", "")))
    check(voters == NODES, "CurrentVoters %s" % st.get("CurrentVoters"))
    check(st.get("ClusterId"), "no ClusterId")
    out = tool(QUORUM, "--bootstrap-server", BOOTSTRAP, "describe", "--replication")
    info(out.strip())
    rows = [l.split() for l in out.splitlines()[1:] if l.strip()]
    check(out.splitlines()[0].split()[:4] == ["NodeId", "DirectoryId", "LogEndOffset", "Lag"],
          "header %r" % out.splitlines()[0])
    ids = sorted(int(r[0]) for r in rows)
    check(ids == NODES, "replication rows for nodes %s" % ids)
    status = {int(r[0]): r[-1] for r in rows}
    check(status[leader] == "Leader", "node %d (LeaderId) has status %s" % (leader, status[leader]))
    check(sorted(s for i, s in status.items() if i != leader) == ["Follower", "Follower"],
          "statuses %s" % status)
    for r in rows:
        check(int(r[2]) > 0, "node %s LogEndOffset %s" % (r[0], r[2]))


@S.scenario("topics-alter-partitions", timeout=120)
def topics_alter_partitions():
    ensure_all_up()
    tool(TOPICS, "--bootstrap-server", BOOTSTRAP, "--alter", "--topic", RF3, "--partitions", "9")
    wait_isr_full(RF3, 60, partitions=9)
    d, out = describe_topic(RF3)
    check(sorted(d) == list(range(9)), "partitions %s after --alter --partitions 9" % sorted(d))
    for p in range(6, 9):
        leader, reps, isr = d[p]
        check(sorted(reps) == NODES, "new partition %d replicas %s" % (p, reps))
        check(sorted(isr) == NODES, "new partition %d ISR %s" % (p, isr))
        check(leader in reps, "new partition %d leader %s" % (p, leader))
    rc, out, err = tool(TOPICS, "--bootstrap-server", BOOTSTRAP, "--alter", "--topic", RF3,
                        "--partitions", "4", ok=False)
    check(rc != 0 and "InvalidPartitionsException" in (out + err),
          "--alter --partitions 4 (a decrease): rc %d %s" % (rc, (out + err)[-300:]))


@S.scenario("log-dirs", timeout=90)
def log_dirs():
    ensure_all_up()
    out = tool(LOGDIRS, "--bootstrap-server", BOOTSTRAP, "--describe", "--topic-list", RF3,
               "--broker-list", ",".join(map(str, NODES)))
    js = [l for l in out.splitlines() if l.startswith("{")]
    check(js, "no JSON in kafka-log-dirs output: %s" % out[:300])
    brokers = {b["broker"]: b for b in json.loads(js[-1])["brokers"]}
    check(sorted(brokers) == NODES, "brokers %s" % sorted(brokers))
    want = sorted("%s-%d" % (RF3, p) for p in range(9))
    for i, b in brokers.items():
        dirs = b["logDirs"]
        data = os.path.join(CLUSTER_DIR, "node-%d" % i, "data")
        paths = [os.path.realpath(d["logDir"]) for d in dirs]
        check(os.path.realpath(data) in paths, "broker %d log dirs %s, expected %s" % (i, paths, data))
        for d in dirs:
            check(d.get("error") in (None, "null", ""), "broker %d dir %s error %s" % (i, d["logDir"], d.get("error")))
        got = sorted(p["partition"] for d in dirs for p in d["partitions"] if not p.get("isFuture"))
        check(got == want, "broker %d lists %s, expected %s" % (i, got, want))
        for d in dirs:
            for p in d["partitions"]:
                check(p["size"] >= 0 and p["offsetLag"] == 0, "broker %d %s" % (i, p))


@S.scenario("reassign-partitions", timeout=200)
def reassign_partitions():
    ensure_all_up()
    t = topic_name("reassign")
    create_topic(t, assignment=[[1, 2]])
    values = [b"r-%05d" % i for i in range(2000)]
    acked = produce(t, values)
    plan = os.path.join(TMP, "reassign-%s.json" % RUN_TAG)
    with open(plan, "w") as f:
        json.dump({"version": 1, "partitions": [{"topic": t, "partition": 0, "replicas": [1, 3],
                                                  "log_dirs": ["any", "any"]}]}, f)
    out = tool(REASSIGN, "--bootstrap-server", BOOTSTRAP, "--reassignment-json-file", plan, "--execute")
    check("Successfully started partition reassignment" in out, "--execute: %s" % out[-400:])
    deadline = time.monotonic() + 90
    while True:
        out = tool(REASSIGN, "--bootstrap-server", BOOTSTRAP, "--reassignment-json-file", plan, "--verify")
        if "Reassignment of partition %s-0 is completed" % t in out:
            break
        check("is still in progress" in out, "--verify: %s" % out[-400:])
        check(time.monotonic() < deadline, "reassignment not complete after 90s: %s" % out[-300:])
        time.sleep(1)
    wait_isr_full(t, 60)
    d, _ = describe_topic(t)
    leader, reps, isr = d[0]
    check(sorted(reps) == [1, 3] and sorted(isr) == [1, 3], "after reassignment: replicas %s ISR %s" % (reps, isr))
    lo, hi, log = read_partition(t, 0)
    check((lo, hi) == (0, len(values)), "offsets %d..%d, expected 0..%d" % (lo, hi, len(values)))
    check(all(log.get(o) == v for o, v in acked), "records differ after the reassignment")
    # the new replica holds the same log: broker 3 reports it with no lag and the leader's size
    out = tool(LOGDIRS, "--bootstrap-server", BOOTSTRAP, "--describe", "--topic-list", t,
               "--broker-list", "1,2,3")
    js = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
    size = {b["broker"]: [p for d in b["logDirs"] for p in d["partitions"]] for b in js["brokers"]}
    check(len(size[3]) == 1 and size[3][0]["offsetLag"] == 0, "broker 3: %s" % size[3])
    check(len(size[1]) == 1 and size[1][0]["size"] == size[3][0]["size"],
          "replica sizes differ: broker 1 %s, broker 3 %s" % (size[1], size[3]))
    wait_until(lambda: not [p for p in json.loads([l for l in tool(
        LOGDIRS, "--bootstrap-server", BOOTSTRAP, "--describe", "--topic-list", t,
        "--broker-list", "2").splitlines() if l.startswith("{")][-1])["brokers"][0]["logDirs"][0]["partitions"]],
        60, "broker 2 to delete its replica", interval=2)


@S.scenario("leader-election-preferred", timeout=200)
def leader_election_preferred():
    ensure_all_up()
    t = topic_name("pref")
    create_topic(t, assignment=[[2, 3, 1]])
    produce(t, [b"p-%d" % i for i in range(100)])
    check(parts(t)[0][0] == 2, "leader %s, expected the preferred replica 2" % parts(t)[0][0])
    cluster("kill", 2)
    wait_until(lambda: parts(t)[0][0] in (1, 3), 60, "a new leader of %s-0 after killing node 2" % t, interval=0.5)
    time.sleep(2)
    cluster("start", 2)
    wait_isr_full(t, 90)
    leader = parts(t)[0][0]
    check(leader in (1, 3), "leader %d moved back before the election (auto.leader.rebalance is off)" % leader)
    out = tool(ELECTION, "--bootstrap-server", BOOTSTRAP, "--election-type", "PREFERRED",
               "--topic", t, "--partition", "0")
    check("Successfully completed leader election (PREFERRED) for partitions %s-0" % t in out,
          "kafka-leader-election: %s" % out[-400:])
    wait_until(lambda: parts(t)[0][0] == 2, 30, "node 2 to lead %s-0 again" % t, interval=0.5)
    d, _ = describe_topic(t)
    check(d[0][0] == 2 and sorted(d[0][2]) == NODES, "kafka-topics --describe: %s" % (d[0],))
    lo, hi, log = read_partition(t, 0)
    check(hi == 100, "high watermark %d, expected 100" % hi)


# ---- fail-over of the clients --------------------------------------------------------------

FAILOVER = {}
FO_N = 3000
FO_RATE = 150


def confluent_client(topic, stop, res):
    """Produce FO_N values at ~FO_RATE/s with librdkafka's defaults (acks=all, retries), and
    consume the topic meanwhile in a group."""
    acked, errors = [], []
    consumed = []

    def cb(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked.append((msg.partition(), msg.offset(), msg.value().decode()))

    def consume():
        c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "c-fo-ck-%s" % RUN_TAG,
                      "auto.offset.reset": "earliest", "error_cb": quiet, "log_level": 2})
        c.subscribe([topic])
        try:
            while not stop.is_set():
                for m in c.consume(num_messages=500, timeout=0.3):
                    if not m.error():
                        consumed.append((m.partition(), m.offset(), m.value().decode()))
        finally:
            c.close()
    ct = threading.Thread(target=consume, daemon=True)
    ct.start()
    p = Producer({"bootstrap.servers": BOOTSTRAP, "error_cb": quiet, "log_level": 2})
    res.update(acked=acked, errors=errors, consumed=consumed, consumer=ct)
    t0 = time.monotonic()
    for i in range(FO_N):
        while time.monotonic() < t0 + i / FO_RATE:
            p.poll(0.005)
        p.produce(topic, value=str(i).encode(), on_delivery=cb)
        p.poll(0)
    res["unflushed"] = p.flush(120)
    res["done"] = True


def fo_result(name):
    r = FAILOVER.get(name)
    check(r is not None, "the failover-clients run did not get to this client")
    if "error" in r:
        raise AssertionError(r["error"])
    acked, consumed, errors = r["acked"], r["consumed"], r["errors"]
    after = r["acked_after_kill"]
    info("%s: %d acked (%d after the kill), %d send errors %s, %d consumed, %d records in the log" % (
        name, len(acked), after, len(errors), errors[:2], len(consumed), r["in_log"]))
    check(after > 0, "no record acknowledged after the leader was killed")
    missing = set(acked) - set(consumed)
    check(not missing, "%d acknowledged record(s) never consumed, e.g. %s" % (len(missing), sorted(missing)[:5]))
    lost = r["lost"]
    check(not lost, "%d acknowledged record(s) not in the log at their offset, e.g. %s" % (len(lost), lost[:5]))


@S.scenario("failover-clients", timeout=300)
def failover_clients():
    ensure_all_up()
    q = int(quorum_status()["LeaderId"])
    victim = next(i for i in NODES if i != q)      # kill a leader that is not the controller
    others = [i for i in NODES if i != victim]
    topics = {k: topic_name("fo-" + k) for k in ("ck", "js", "java")}
    for t in topics.values():
        create_topic(t, config={"min.insync.replicas": "2"}, assignment=[[victim] + others])
    stop = threading.Event()
    ck = {}
    ck_thread = threading.Thread(target=confluent_client, args=(topics["ck"], stop, ck), daemon=True)
    ck_thread.start()
    env = dict(os.environ, BOOTSTRAP=BOOTSTRAP)
    js = Spawned("failover-kafkajs", ["node", os.path.join(HERE, "failover.js"), topics["js"],
                                      str(FO_N), str(FO_RATE), "c-fo-js-%s" % RUN_TAG], cwd=HERE, env=env)
    jp = Spawned("failover-java-producer", java_cmd(
        VPRODUCER, "--topic", topics["java"], "--bootstrap-server", BOOTSTRAP,
        "--max-messages", str(FO_N), "--throughput", str(FO_RATE),
        "--command-config", vproducer_config(), quick=False))
    jc = Spawned("failover-java-consumer", java_cmd(
        VCONSUMER, "--topic", topics["java"], "--bootstrap-server", BOOTSTRAP,
        "--group-id", "c-fo-java-%s" % RUN_TAG, "--verbose", quick=False))
    counts = {
        "confluent-kafka": lambda: len(ck.get("acked", [])),
        "kafkajs": lambda: js.count('"acked"'),
        "java": lambda: jp.count("producer_send_success"),
    }
    try:
        wait_until(lambda: all(f() >= 300 for f in counts.values()), 90,
                   "300 acks from every client (%s)" % {k: f() for k, f in counts.items()}, interval=0.3)
        at_kill = {k: f() for k, f in counts.items()}
        info("killing node %d (leader of the 3 topics; controller is %d), acks so far %s" % (victim, q, at_kill))
        cluster("kill", victim)
        wait_until(lambda: all(parts(t)[0][0] in others for t in topics.values()), 60,
                   "new leaders after killing node %d" % victim, interval=0.5)
        time.sleep(1)
        cluster("start", victim)
        for t in topics.values():
            wait_isr_full(t, 90)
        ck_thread.join(150)
        check(ck.get("done"), "confluent-kafka producer did not finish")
        js.p.wait(180)
        jp.p.wait(180)
    except BaseException:
        stop.set()
        for sp in (js, jp, jc):
            sp.stop(10)
        raise
    # what each client had acknowledged (partition, offset, value) and consumed
    acked_js = [tuple(e["acked"]) for e in js.events() if "acked" in e]
    summary = [e for e in js.events() if e.get("summary")]
    check(summary, "the kafkajs script printed no summary (exit %s): %s" % (js.p.returncode, js.stderr_tail()))
    consumed_js = [tuple(x) for x in summary[-1]["consumed"]]
    errors_js = summary[-1]["errors"]
    jp_acked = [(e["partition"], e["offset"], e["value"]) for e in jp.events("producer_send_success")]
    jp_errors = [e.get("message", e.get("exception")) for e in jp.events("producer_send_error")]

    def java_consumed():
        return [(e["partition"], e["offset"], e["value"]) for e in jc.events("record_data")]
    # let the two in-process consumers catch up (a miss is reported per client below)
    settle(lambda: set(jp_acked) <= set(java_consumed()), 60)
    settle(lambda: set(ck["acked"]) <= set(ck["consumed"]), 60)
    stop.set()
    ck["consumer"].join(30)
    jc.stop()
    for name, t, acked, consumed, errors in (
            ("confluent-kafka", topics["ck"], ck["acked"], ck["consumed"], ck["errors"]),
            ("kafkajs", topics["js"], acked_js, consumed_js, errors_js),
            ("java", topics["java"], jp_acked, java_consumed(), jp_errors)):
        try:
            lo, hi, log = read_partition(t, 0)
            lost = [(p, o, v) for p, o, v in acked if (log.get(o) or b"").decode() != v]
            FAILOVER[name] = dict(acked=acked, consumed=consumed, errors=errors, lost=lost,
                                  in_log=len(log), acked_after_kill=len(acked) - at_kill[name])
        except Exception as e:
            FAILOVER[name] = {"error": "reading %s back: %r" % (t, e)}


def settle(pred, timeout):
    """Wait up to timeout seconds for pred(); True if it held."""
    try:
        wait_until(pred, timeout, "", interval=0.5)
        return True
    except AssertionError:
        return False


@S.scenario("failover-confluent-kafka", timeout=30)
def failover_confluent_kafka():
    fo_result("confluent-kafka")


@S.scenario("failover-kafkajs", timeout=30)
def failover_kafkajs():
    fo_result("kafkajs")


@S.scenario("failover-java", timeout=30)
def failover_java():
    fo_result("java")


# ---- kill -9 under load --------------------------------------------------------------------

def kill_rounds(topic, producer, rounds, budget):
    """rounds x: SIGKILL the leader of partition 0, one of its followers, or the active
    controller (in turn), wait, restart it, wait until every partition's ISR is full again.
    Returns the acks counted at the end of each round."""
    kinds = ("leader", "follower", "controller")
    deadline = time.monotonic() + budget
    acks = []
    for r in range(rounds):
        check(time.monotonic() < deadline, "round %d: the kill loop used its %ds" % (r + 1, budget))
        check(producer.alive(), "round %d: VerifiableProducer exited: %s" % (r + 1, producer.stderr_tail()))
        kind = kinds[r % 3]
        if kind == "controller":
            victim = int(quorum_status()["LeaderId"])
        else:
            leader, reps, _ = parts(topic)[0]
            victim = leader if kind == "leader" else [x for x in reps if x != leader][r % 2]
        cluster("kill", victim)
        time.sleep(2.5)
        cluster("start", victim)
        wait_isr_full(topic, 120)
        acks.append(producer.count("producer_send_success"))
        info("round %d: killed the %s (node %d), ISR full again; %d acks so far" % (
            r + 1, kind, victim, acks[-1]))
    return acks


def start_load(topic, max_messages):
    return Spawned("load-" + topic, java_cmd(
        VPRODUCER, "--topic", topic, "--bootstrap-server", BOOTSTRAP,
        "--max-messages", str(max_messages), "--throughput", str(LOAD_RATE),
        "--command-config", vproducer_config(), quick=False))


def load_topic(base):
    return create_topic(topic_name(base), partitions=3, config={"min.insync.replicas": "2"})


def finish_load(producer, acks):
    check(acks[-1] > acks[0], "no record acknowledged during the kill rounds (%s)" % acks)
    time.sleep(2)
    producer.stop()
    acked = [(e["partition"], e["offset"], e["value"]) for e in producer.events("producer_send_success")]
    errors = producer.events("producer_send_error")
    info("VerifiableProducer: %d acked, %d send errors %s" % (
        len(acked), len(errors), [e.get("message") for e in errors[:3]]))
    check(acked, "VerifiableProducer acknowledged nothing: %s" % producer.stderr_tail())
    return acked


LOAD = {}


@S.scenario("kill9-under-load", timeout=480)
def kill9_under_load():
    """One load run serves this scenario (the producer's facts) and kill9-consumer-group
    (the group consumer's): a VerifiableConsumer group reads the topic throughout."""
    ensure_all_up()
    t = load_topic("load")
    group = "c-vc-%s" % RUN_TAG
    prod = start_load(t, LOAD_RATE * 400)
    cons = Spawned("group-" + t, java_cmd(
        VCONSUMER, "--topic", t, "--bootstrap-server", BOOTSTRAP, "--group-id", group,
        "--verbose", quick=False))
    LOAD.update(topic=t, consumer=cons)
    acks = None
    try:
        wait_until(lambda: prod.count("producer_send_success") >= 200 and cons.count("record_data") > 0,
                   60, "the first acks and the first records consumed")
        acks = kill_rounds(t, prod, ROUNDS, 400)
    finally:
        if acks is None:
            prod.stop()
            cons.stop()
    acked = finish_load(prod, acks)
    LOAD.update(acked=acked, rounds=len(acks))
    wait_isr_full(t, 60)
    total, lost = check_acked(t, 3, acked)
    info("kill9-under-load: %d rounds survived, %d acked, %d lost, %d records in the topic" % (
        len(acks), len(acked), lost, total))


@S.scenario("kill9-consumer-group", timeout=150)
def kill9_consumer_group():
    check(LOAD.get("acked"), "the kill9-under-load run did not get as far as its producer's results")
    cons = LOAD["consumer"]
    acked = LOAD["acked"]
    want = {(p, o) for p, o, _ in acked}

    def consumed():
        return {(e["partition"], e["offset"]) for e in cons.events("record_data")}
    try:
        settle(lambda: want <= consumed(), 90)
    finally:
        cons.stop()
    events = cons.events()
    got = {(e["partition"], e["offset"]) for e in events if e.get("name") == "record_data"}
    missing = want - got
    last = {}
    backwards = []
    ok_commits = 0
    for c in events:
        if c.get("name") != "offsets_committed" or not c.get("success"):
            continue
        ok_commits += 1
        for o in c.get("offsets", []):
            p = o["partition"]
            if p in last and o["offset"] < last[p]:
                backwards.append((p, last[p], o["offset"]))
            last[p] = max(last.get(p, -1), o["offset"])
    vals = {(e["partition"], e["offset"]): e["value"] for e in events if e.get("name") == "record_data"}
    wrong = [(p, o, v, vals[(p, o)]) for p, o, v in acked if (p, o) in vals and vals[(p, o)] != v]
    info("kill9-consumer-group: %d rounds, %d acked, %d consumed (distinct), %d missing, "
         "%d successful commits (last %s), %d backwards, %d assignments" % (
             LOAD["rounds"], len(acked), len(got), len(missing), ok_commits, last, len(backwards),
             sum(1 for e in events if e.get("name") == "partitions_assigned")))
    check(ok_commits > 0, "no successful offset commit")
    check(not backwards, "committed offsets went backwards (partition, before, after): %s" % backwards[:5])
    check(not missing, "%d acknowledged record(s) never consumed, e.g. %s" % (len(missing), sorted(missing)[:5]))
    check(not wrong, "consumed values differ from the acknowledged ones: %s" % wrong[:5])
    ends = {p: read_partition(LOAD["topic"], p)[1] for p in range(3)}
    # A partition the producer never wrote to (the sticky partitioner may skip one) has
    # nothing to consume and so nothing committed: its position is its log end, 0.
    check(all(last.get(p, 0) == ends[p] for p in range(3)),
          "last committed offsets %s, log end offsets %s" % (last, ends))


# ---- unclean leader election ---------------------------------------------------------------

@S.scenario("unclean-election", timeout=300)
def unclean_election():
    ensure_all_up()
    q = int(quorum_status()["LeaderId"])
    # leader a and follower b; the third node (the controller if possible) stays up throughout
    a, b = [i for i in NODES if i != q][:2]
    t = topic_name("unclean")
    create_topic(t, config={"unclean.leader.election.enable": "false", "min.insync.replicas": "1"},
                 assignment=[[a, b]])
    n1, n2 = 500, 300
    produce(t, [b"in-sync-%d" % i for i in range(n1)])
    wait_isr_full(t, 30)
    cluster("kill", b)
    wait_until(lambda: parts(t)[0][2] == {a}, 60, "ISR {%d} after killing node %d" % (a, b), interval=0.5)
    produce(t, [b"lagging-%d" % i for i in range(n2)], acks="1")
    cluster("kill", a)
    cluster("start", b)
    wait_until(lambda: parts(t)[0][0] == -1, 60, "%s-0 to be offline (leader none)" % t, interval=0.5)
    # it stays offline: b is not in the ISR and unclean election is off
    for _ in range(8):
        time.sleep(1)
        leader, reps, isr = parts(t)[0]
        check(leader == -1, "%s-0 got leader %d with unclean.leader.election.enable=false" % (t, leader))
    d, out = describe_topic(t)
    check(d[0][0] == -1, "kafka-topics --describe shows leader %s, expected none" % d[0][0])
    out = tool(ELECTION, "--bootstrap-server", BOOTSTRAP, "--election-type", "UNCLEAN",
               "--topic", t, "--partition", "0")
    check("Successfully completed leader election (UNCLEAN) for partitions %s-0" % t in out,
          "kafka-leader-election --election-type UNCLEAN: %s" % out[-400:])
    wait_until(lambda: parts(t)[0][0] == b, 30, "node %d (the lagging replica) to lead" % b, interval=0.5)
    lo, hi, log = read_partition(t, 0)
    lost = n1 + n2 - hi
    info("unclean-election: node %d leads at high watermark %d; %d acks=1 records lost (its lag was %d)" % (
        b, hi, lost, n2))
    check(hi >= n1, "high watermark %d below the %d records both replicas had" % (hi, n1))
    check(0 <= lost <= n2, "lost %d, more than the lag %d" % (lost, n2))
    check(all(log.get(i) == b"in-sync-%d" % i for i in range(n1)), "in-sync records differ")
    cluster("start", a)
    wait_isr_full(t, 90)
    lo2, hi2, log2 = read_partition(t, 0)
    check(hi2 == hi and log2 == log, "after node %d rejoined: hw %d (was %d)" % (a, hi2, hi))


# ---- configs and registrations -------------------------------------------------------------

def broker_addrs():
    """{broker id: host:port} of the live brokers."""
    md = admin().list_topics(timeout=10)
    return {b.id: "%s:%d" % (b.host, b.port) for b in md.brokers.values()}


def configs_seen(addrs, nodes, topic, retention_ms):
    """Through each of nodes alone: the topic's own retention.ms and the cluster-wide
    log.retention.bytes default, on the topic (which follows it) and on that broker itself."""
    for i in nodes:
        out = tool(CONFIGS, "--bootstrap-server", addrs[i], "--describe", "--all",
                   "--entity-type", "topics", "--entity-name", topic)
        check("retention.ms=%d sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=%d"
              % (retention_ms, retention_ms) in out, "node %d: %s's retention.ms: %s" % (
                  i, topic, out[-600:]))
        check("retention.bytes=987654321 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
              "log.retention.bytes=987654321" in out, "node %d: %s's retention.bytes: %s" % (
                  i, topic, out[-600:]))
        out = tool(CONFIGS, "--bootstrap-server", addrs[i], "--describe", "--all",
                   "--entity-type", "brokers", "--entity-name", str(i))
        check("log.retention.bytes=987654321 sensitive=false synonyms={"
              "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=987654321" in out,
              "broker %d's log.retention.bytes: %s" % (i, out[-600:]))
    return True


@S.scenario("configs-across-brokers", timeout=420)
def configs_across_brokers():
    ensure_all_up()
    t = create_topic(topic_name("cfg"), partitions=3)
    addrs = broker_addrs()
    check(sorted(addrs) == NODES, "brokers %s" % addrs)
    tool(CONFIGS, "--bootstrap-server", addrs[1], "--alter", "--entity-type", "topics",
         "--entity-name", t, "--add-config", "retention.ms=7654321")
    tool(CONFIGS, "--bootstrap-server", addrs[1], "--alter", "--entity-type", "brokers",
         "--entity-default", "--add-config", "log.retention.bytes=987654321")
    try:
        wait_until(lambda: configs_seen(addrs, NODES, t, 7654321), 90,
                   "the configs on every broker", interval=1)
        leader = int(quorum_status().get("LeaderId", "-1"))
        check(leader in NODES, "no active controller")
        cluster("kill", leader)
        rest = [i for i in NODES if i != leader]
        wait_until(lambda: int(quorum_status().get("LeaderId", "-1")) in rest, 60,
                   "a new active controller", interval=1)
        wait_until(lambda: configs_seen(addrs, rest, t, 7654321), 90,
                   "the configs after the kill of controller %d" % leader, interval=1)
        tool(CONFIGS, "--bootstrap-server", addrs[rest[0]], "--alter", "--entity-type", "topics",
             "--entity-name", t, "--add-config", "retention.ms=7654322")
        cluster("start", leader)
        wait_isr_full(t, 120)
        wait_until(lambda: configs_seen(addrs, NODES, t, 7654322), 90,
                   "the changed config on every broker, %d restarted" % leader, interval=1)
    finally:
        ensure_all_up()
        tool(CONFIGS, "--bootstrap-server", BOOTSTRAP, "--alter", "--entity-type", "brokers",
             "--entity-default", "--delete-config", "log.retention.bytes")


# ---- a KIP-848 group across a coordinator failover ------------------------------------------

MEMBER_SRC = os.path.join(ROOT, "protocol-tests/java/src/main/java/sluice/ConsumerMember.java")


def member_classes():
    """protocol-tests/java's ConsumerMember compiled against Kafka's client jars."""
    out = os.path.join(TMP, "member-classes")
    if not os.path.exists(os.path.join(out, "sluice", "ConsumerMember.class")):
        r = subprocess.run(["javac", "-d", out, "-cp", KAFKA_LIBS + "/*", MEMBER_SRC],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        check(r.returncode == 0, "javac ConsumerMember: %s" % r.stdout.decode(errors="replace")[-500:])
    return out


class GroupMember:
    """A ConsumerMember process (group.protocol=consumer); closing its stdin makes it leave.
    Its report lines (ASSIGNED, READ, EPOCH, FENCED, LOST, ERROR) go to a file."""

    def __init__(self, group, topic, label):
        self.path = os.path.join(TMP, "member-%s.%s.out" % (label, RUN_TAG))
        self.out = open(self.path, "wb")
        self.err = open(self.path[:-4] + ".err", "wb")
        cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
               "-Dlog4j2.configurationFile=" + LOG4J,
               "-cp", member_classes() + ":" + KAFKA_LIBS + "/*", "sluice.ConsumerMember",
               BOOTSTRAP, group, "consumer", topic, "client.id=" + label]
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=self.out, stderr=self.err)
        with open(os.path.join(TMP, "spawned.pids"), "a") as f:
            f.write("%d\n" % self.p.pid)

    def lines(self, prefix):
        with open(self.path, "rb") as f:
            return [l for l in f.read().decode(errors="replace").splitlines() if l.startswith(prefix)]

    def epochs(self):
        return [int(l.split()[1]) for l in self.lines("EPOCH ")]

    def owned(self):
        a = self.lines("ASSIGNED")
        return {x for x in a[-1][len("ASSIGNED"):].strip().split(",") if x} if a else None

    def state(self):
        return "exit=%s epochs=%s owned=%s fenced=%s lost=%s errors=%s" % (
            self.p.poll(), self.epochs(), self.owned(), self.lines("FENCED")[:2],
            self.lines("LOST")[:2], self.lines("ERROR")[:2])

    def stop(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(10)
        self.out.close()
        self.err.close()


def java_hash_partition(group, n):
    """The __consumer_offsets partition of a group: abs(String.hashCode) mod n."""
    h = 0
    for unit in group.encode("utf-16-be").hex(" ", 2).split():
        h = (h * 31 + int(unit, 16)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % n


def committed_sum(group, topic, partitions):
    """{partition: committed offset}; a partition with no commit is 0 here (librdkafka
    reports it as OFFSET_INVALID, -1001), so the values add up to the records committed."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    res = admin().list_consumer_group_offsets([req], request_timeout=10)[group].result(15)
    return {tp.partition: max(tp.offset, 0) for tp in res.topic_partitions}


@S.scenario("consumer-group-coordinator-kill9", timeout=300)
def consumer_group_coordinator_kill9():
    """Two members of a consumer-protocol group read and commit; the group's coordinator (the
    leader of its __consumer_offsets partition) is killed -9. The new coordinator has the
    group from the log: the members carry on at their epochs (no rejoin, no partition lost,
    no commit refused) and no committed offset is lost."""
    ensure_all_up()
    topic = create_topic(topic_name("g848"), partitions=4)
    group = "c-g848-%s" % RUN_TAG
    produce(topic, [b"a%d" % i for i in range(200)], partition=0)
    produce(topic, [b"b%d" % i for i in range(200)], partition=1)
    members = [GroupMember(group, topic, "g848-%d" % i) for i in range(2)]
    victim = None
    try:
        def settled():
            owned = [m.owned() for m in members]
            return (all(o and len(o) == 2 for o in owned) and
                    sum(committed_sum(group, topic, 4).values()) >= 400)
        try:
            wait_until(settled, 120, "two members owning 2 partitions each, 400 records committed",
                       interval=1)
        except AssertionError as e:
            raise AssertionError("%s; members: %s" % (e, [m.state() for m in members]))
        before = committed_sum(group, topic, 4)
        epochs = [m.epochs()[-1] for m in members]
        seen = [len(m.epochs()) for m in members]
        n = len(parts("__consumer_offsets"))
        victim = parts("__consumer_offsets")[java_hash_partition(group, n)][0]
        info("group coordinator: node %d (partition %d of %d); member epochs %s; committed %s" % (
            victim, java_hash_partition(group, n), n, epochs, before))
        cluster("kill", victim)
        produce(topic, [b"c%d" % i for i in range(50)], partition=2)
        produce(topic, [b"d%d" % i for i in range(50)], partition=3)
        try:
            wait_until(lambda: sum(committed_sum(group, topic, 4).values()) >= 500, 150,
                       "the members to read and commit the 100 new records", interval=1)
        except AssertionError as e:
            raise AssertionError("%s; members: %s" % (e, [m.state() for m in members]))
        after = committed_sum(group, topic, 4)
        coordinator = parts("__consumer_offsets")[java_hash_partition(group, n)][0]
        info("new coordinator: node %d; committed %s; members: %s" % (
            coordinator, after, [m.state() for m in members]))
        check(coordinator != victim, "the coordinator moved off node %d" % victim)
        check(all(after[p] >= before[p] for p in before),
              "no committed offset went back: before %s, after %s" % (before, after))
        for m, e, k in zip(members, epochs, seen):
            check(m.p.poll() is None, "the member kept running: %s" % m.state())
            check(not m.lines("FENCED"), "no commit refused: %s" % m.state())
            check(not m.lines("LOST"), "no partition lost: %s" % m.state())
            check(all(x == e for x in m.epochs()[k:]),
                  "the member stayed at epoch %d: %s" % (e, m.state()))
            check(not m.lines("ERROR"), "member errors: %s" % m.state())
    finally:
        for m in members:
            m.stop()
        if victim is not None:
            cluster("start", victim)


def registered(include_fenced=True):
    """Broker ids kafka-cluster list-endpoints shows (fenced ones too)."""
    args = ["--include-fenced-brokers"] if include_fenced else []
    out = tool(CLUSTER_TOOL, "list-endpoints", "--bootstrap-server", BOOTSTRAP, *args)
    return sorted(int(l.split()[0]) for l in out.splitlines()[1:] if l.strip())


@S.scenario("unregister-broker", timeout=240)
def unregister_broker():
    ensure_all_up()
    rc, out, err = tool(CLUSTER_TOOL, "unregister", "--bootstrap-server", BOOTSTRAP, "--id", "42",
                        ok=False)
    check(rc != 0 and "Broker ID 42 is not currently registered" in out + err,
          "unregister --id 42: rc %d: %s %s" % (rc, out[-300:], err[-300:]))
    cluster("stop", 3)
    try:
        wait_until(lambda: 3 not in registered(False), 60, "broker 3 fenced", interval=1)
        check(3 in registered(), "a stopped broker is still registered (fenced)")
        out = tool(CLUSTER_TOOL, "unregister", "--bootstrap-server", BOOTSTRAP, "--id", "3")
        check("Broker 3 is no longer registered." in out, "unregister --id 3: %s" % out[-300:])
        wait_until(lambda: registered() == [1, 2], 30, "broker 3's registration gone", interval=1)
    finally:
        cluster("start", 3)
    wait_until(lambda: registered(False) == NODES, 90, "broker 3 registered again", interval=1)


def transaction_version(addr):
    """transaction.version's finalized level as kafka-features describe shows it through addr."""
    out = tool(FEATURES, "--bootstrap-server", addr, "describe")
    for line in out.splitlines():
        words = line.split()
        if words[:2] == ["Feature:", "transaction.version"]:
            return dict(zip(words[2::2], words[3::2])).get("FinalizedVersionLevel:")
    raise AssertionError("transaction.version not described: %s" % out[-500:])


@S.scenario("features", timeout=240)
def features():
    ensure_all_up()
    addrs = broker_addrs()
    out = tool(FEATURES, "--bootstrap-server", addrs[2], "downgrade", "--feature",
               "transaction.version=1")
    check("transaction.version was downgraded to 1." in out, "downgrade: %s" % out[-300:])
    try:
        for i in NODES:
            wait_until(lambda: transaction_version(addrs[i]) == "1", 60,
                       "transaction.version 1 through broker %d" % i, interval=1)
    finally:
        tool(FEATURES, "--bootstrap-server", addrs[3], "upgrade", "--feature",
             "transaction.version=2")
    for i in NODES:
        wait_until(lambda: transaction_version(addrs[i]) == "2", 60,
                   "transaction.version 2 through broker %d" % i, interval=1)


def quorum_members():
    """kafka-metadata-quorum describe --status: (leader, sorted voter ids, sorted observer ids)."""
    st = quorum_status()
    ids = lambda key: sorted(int(v) for v in re.findall(r'"id":\s*(\d+)', st.get(key, "")))
    return int(st.get("LeaderId", "-1")), ids("CurrentVoters"), ids("CurrentObservers")


def voter_directories():
    """{voter id: directory id} from describe --status."""
    voters = json.loads(quorum_status()["CurrentVoters"])
    return {v["id"]: v["directoryId"] for v in voters}


def controller_endpoint(i):
    """Node i's CONTROLLER listener (host, port), from its properties file."""
    with open(os.path.join(CLUSTER_DIR, "node-%d.properties" % i)) as f:
        for line in f:
            if line.startswith("listeners="):
                m = re.search(r"CONTROLLER://([^:,]+):(\d+)", line)
                return m.group(1), int(m.group(2))
    raise AssertionError("no CONTROLLER listener for node %d" % i)


def answer_is(got, code, what, text=None):
    check(got[0] == code and (text is None or text in (got[1] or "")),
          "%s: answered %s, expected %d%s" % (what, got, code, " (%s)" % text if text else ""))


@S.scenario("quorum-voters", timeout=300)
def quorum_voters():
    ensure_all_up()
    leader, voters, _ = quorum_members()
    check(voters == NODES, "voters %s" % voters)
    cid = quorum_status()["ClusterId"]
    via = broker_addrs()[NODES[0]]
    other_dir = "b3Ivc2x1aWNlLXZvdGVyMQ"  # a directory id no node has
    ctl = lambda i: [("CONTROLLER",) + controller_endpoint(i)]
    # Checked before the quorum is looked at, by Kafka and Sluice alike.
    answer_is(rv.remove_voter(via, "not-this-cluster", 2, other_dir), rv.INCONSISTENT_CLUSTER_ID,
              "RemoveRaftVoter of another cluster", 'doesn\'t match the cluster id "%s"' % cid)
    answer_is(rv.add_voter(via, "not-this-cluster", 2, other_dir, ctl(2)),
              rv.INCONSISTENT_CLUSTER_ID, "AddRaftVoter of another cluster")
    answer_is(rv.add_voter(via, cid, 2, rv.ZERO_DIR, ctl(2)), rv.INVALID_REQUEST,
              "AddRaftVoter with the zero directory id",
              "Add voter request didn't include a valid voter")
    answer_is(rv.remove_voter(via, cid, 2, rv.ZERO_DIR), rv.INVALID_REQUEST,
              "RemoveRaftVoter with the zero directory id",
              "Remove voter request didn't include a valid voter")
    if KIND == "kafka":
        # scripts/cluster starts Kafka with controller.quorum.voters, a static quorum
        # (kraft.version 0, voters without directory ids): its controller refuses every voter
        # change. A dynamic quorum needs StorageTool format --initial-controllers (or
        # --standalone) and controller.quorum.bootstrap.servers instead of the voter list.
        for got, what in ((rv.remove_voter(via, cid, 3, other_dir), "RemoveRaftVoter"),
                          (rv.remove_voter(via, cid, 42, other_dir), "RemoveRaftVoter of node 42"),
                          (rv.add_voter(via, cid, leader, other_dir, ctl(leader)),
                           "AddRaftVoter of a voter")):
            answer_is(got, rv.UNSUPPORTED_VERSION, what, "kraft.version feature is 0")
        check(quorum_members()[1] == NODES, "voters changed: %s" % (quorum_members(),))
        return
    dirs = voter_directories()
    check(sorted(dirs) == NODES and rv.ZERO_DIR not in dirs.values()
          and len(set(dirs.values())) == N, "voter directory ids %s" % dirs)
    victim = next(i for i in NODES if i != leader)
    answer_is(rv.remove_voter(via, cid, 42, other_dir), rv.VOTER_NOT_FOUND,
              "RemoveRaftVoter of node 42", "Cannot remove voter ReplicaKey(id=42")
    answer_is(rv.remove_voter(via, cid, victim, other_dir), rv.VOTER_NOT_FOUND,
              "RemoveRaftVoter of node %d with another directory id" % victim)
    answer_is(rv.add_voter(via, cid, leader, dirs[leader], ctl(leader)), rv.DUPLICATE_VOTER,
              "AddRaftVoter of voter %d" % leader, "is already part of the set of voters")
    answer_is(rv.add_voter(via, cid, 42, other_dir, [("CONTROLLER", "127.0.0.1", 1)]),
              rv.REQUEST_TIMED_OUT, "AddRaftVoter of node 42, not running",
              "is not ready to receive requests")
    out = tool(QUORUM, "--bootstrap-server", BOOTSTRAP, "remove-controller", "--controller-id",
               str(victim), "--controller-directory-id", dirs[victim])
    info("remove-controller %d: %s" % (victim, out.strip()))
    wait_until(lambda: quorum_members()[1:] == ([i for i in NODES if i != victim], [victim]),
               60, "2 voters and node %d an observer" % victim, interval=1)
    out = tool(QUORUM, "--bootstrap-server", BOOTSTRAP, "describe", "--replication")
    info(out.strip())
    rows = {int(r.split()[0]): r.split() for r in out.splitlines()[1:] if r.strip()}
    check(rows.get(victim, [None])[-1] == "Observer" and rows[victim][1] == dirs[victim],
          "replication rows %s" % rows)
    # The removed node killed -9: two voters still elect and serve.
    cluster("kill", victim)
    t = create_topic(topic_name("voters"), assignment=[[i for i in NODES if i != victim]])
    acked = produce(t, [b"v%d" % n for n in range(50)])
    check(len(acked) == 50, "acked %d of 50 with node %d down" % (len(acked), victim))
    check(quorum_members()[0] not in (-1, victim), "leader %s" % (quorum_members(),))
    cluster("start", victim)
    # Back as a learner; AddRaftVoter makes it a voter again once the leader has met it.
    answer_is(rv.add_voter(via, cid, victim, other_dir, ctl(victim), timeout_ms=5000),
              rv.REQUEST_TIMED_OUT, "AddRaftVoter of node %d with another directory id" % victim)
    deadline = time.monotonic() + 90
    while True:
        got = rv.add_voter(via, cid, victim, dirs[victim], ctl(victim), timeout_ms=10000)
        if got[0] != rv.REQUEST_TIMED_OUT or time.monotonic() > deadline:
            break
        info("AddRaftVoter %d: %s; retrying" % (victim, got))
        time.sleep(1)
    answer_is(got, rv.NONE, "AddRaftVoter of node %d" % victim)
    wait_until(lambda: quorum_members()[1:] == (NODES, []), 60, "3 voters again", interval=1)
    check(voter_directories() == dirs, "directory ids %s, were %s" % (voter_directories(), dirs))
    # A kill -9 of the leader elects among the three.
    old = quorum_members()[0]
    cluster("kill", old)
    wait_until(lambda: quorum_members()[0] in [i for i in NODES if i != old], 60,
               "a new leader after killing %d" % old, interval=1)
    cluster("start", old)
    wait_until(lambda: quorum_members()[1] == NODES, 60, "3 voters after the restart", interval=1)
    _, _, got = read_partition(t, 0)
    check(all(got.get(o) == v for o, v in acked), "acknowledged records missing from %s" % t)


def scram_alter(node, deletions=(), upsertions=()):
    """AlterUserScramCredentials v0 through broker `node`: {user: (error code, message)}."""
    import kafka_wire as kw
    body = kw.carray(list(deletions), lambda d: kw.cstr(d[0]) + bytes([d[1]]) + kw.TAGS)
    body += kw.carray(list(upsertions), lambda u: kw.cstr(u[0]) + bytes([u[1]])
                      + u[2].to_bytes(4, "big") + kw.uvarint(len(u[3]) + 1) + u[3]
                      + kw.uvarint(len(u[4]) + 1) + u[4] + kw.TAGS)
    body += kw.TAGS
    r = kw.call(node_addr(node), 51, 0, body)
    r.i32()  # throttle

    def result(r):
        user, code, msg = r.cstr(), r.i16(), r.cstr()
        r.tags()
        return user, (code, msg)
    return dict(r.carray(result))


def scram_describe(node):
    """DescribeUserScramCredentials v0 (all users) at broker `node`: {user: [(mech, iters)]}."""
    import kafka_wire as kw
    r = kw.call(node_addr(node), 50, 0, b"\x00" + kw.TAGS)  # users: null (all)
    r.i32()
    check(r.i16() == 0, "describe: top-level error")
    r.cstr()

    def cred(r):
        m, it = r.i8(), r.i32()
        r.tags()
        return m, it

    def result(r):
        user, code, _msg = r.cstr(), r.i16(), r.cstr()
        infos = r.carray(cred)
        r.tags()
        return user, (code, infos)
    return {u: infos for u, (code, infos) in r.carray(result) if code == 0}


def node_addr(i):
    host, port = BOOTSTRAP.split(",")[i - 1].rsplit(":", 1)
    return host, int(port)


@S.scenario("scram-credentials", timeout=90)
def scram_credentials():
    ensure_all_up()
    import hashlib
    user = "scram-" + RUN_TAG
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha512", b"secret", salt, 8192)
    res = scram_alter(1, upsertions=[(user, 2, 8192, salt, salted)])
    check(res.get(user, (None,))[0] == 0, "alter through broker 1: %s" % res)
    for i in NODES:
        wait_until(lambda: scram_describe(i).get(user) == [(2, 8192)], 10,
                   "broker %d to list %s's SCRAM-SHA-512 credential" % (i, user))
    res = scram_alter(3, deletions=[(user, 2)])
    check(res.get(user, (None,))[0] == 0, "delete through broker 3: %s" % res)
    for i in NODES:
        wait_until(lambda: user not in scram_describe(i), 10,
                   "broker %d to drop %s's credential" % (i, user))
    res = scram_alter(2, deletions=[(user, 2)])
    check(res.get(user, (None,))[0] == 91, "deleting it again: %s (RESOURCE_NOT_FOUND)" % res)


if __name__ == "__main__":
    S.main()
