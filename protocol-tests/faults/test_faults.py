#!/usr/bin/env python3
"""Fault injection suite: faults injected over HTTP (/faults) and the `sluice faults` CLI,
observed by confluent-kafka clients. FAULTS_PHASE selects the scenarios of one broker start
(main, off, secure; see run)."""
import base64
import json
import os
import socket
import struct
import subprocess
import time
import urllib.error
import urllib.request
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness import BOOTSTRAP, RUN_TAG, Suite, check, host_port, info, main_phase, wait_until
import kafka_wire as kw

PHASE = os.environ.get("FAULTS_PHASE", "main")
URL = os.environ["FAULTS_URL"]
SLUICE_BIN = os.environ.get("SLUICE_BIN", "sluice")
S = Suite("faults")
T = 30
KAFKA_LIBS = os.environ.get("KAFKA_LIBS", "")
TMP = os.environ.get("SUITE_TMP", "/tmp")
ROOT = os.environ.get("SLUICE_ROOT") or os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
LOG4J = os.path.join(ROOT, "scripts/kafka/log4j2-tools.properties")
VPRODUCER = "org.apache.kafka.tools.VerifiableProducer"


def log_error_cb(err):
    info("librdkafka error_cb: %s" % err)


def http(method, path, body=None, user=None):
    """(status, JSON body) of one call to the broker's HTTP server."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(URL + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if user:
        token = base64.b64encode(("%s:%s" % user).encode()).decode()
        req.add_header("Authorization", "Basic " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw.decode(errors="replace")


def add_fault(**spec):
    status, body = http("POST", "/faults", spec)
    check(status == 201, "POST /faults %s: %s %s" % (spec, status, body))
    info("fault %s" % body)
    return body


def fault(fid):
    status, body = http("GET", "/faults")
    check(status == 200, "GET /faults: %s %s" % (status, body))
    for f in body["faults"]:
        if f["id"] == fid:
            return f
    raise AssertionError("fault %s is not listed: %s" % (fid, body))


def clear():
    status, body = http("DELETE", "/faults")
    check(status == 200, "DELETE /faults: %s %s" % (status, body))


def cli(*args, env=None):
    """Runs `sluice faults --url URL ARGS`: (exit code, stdout, stderr)."""
    p = subprocess.run([SLUICE_BIN, "faults", "--url", URL] + list(args),
                       capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, **(env or {})))
    info("sluice faults %s -> %d %s %s" % (" ".join(args), p.returncode, p.stdout.strip(),
                                           p.stderr.strip()))
    return p.returncode, p.stdout, p.stderr


def java_cmd(cls, *args):
    """A Kafka tool by main class, as bin/kafka-*.sh runs it (WARN and up on stderr)."""
    return (["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
             "-Djava.awt.headless=true", "-Dlog4j2.configurationFile=" + LOG4J,
             "-cp", KAFKA_LIBS + "/*", cls] + list(args))


def verifiable_producer(topic, n, name, **props):
    """Runs Kafka's VerifiableProducer to the end (n records, acks=all, the Java client's
    default retries and idempotence, which VerifiableProducer's own retries=0 turns off, plus
    props); returns the path of its output, one JSON event a line."""
    conf = os.path.join(TMP, "%s.properties" % name)
    with open(conf, "w") as f:
        f.write("retries=2147483647\nenable.idempotence=true\n")
        for k, v in props.items():
            f.write("%s=%s\n" % (k.replace("_", "."), v))
    out = os.path.join(TMP, "%s.jsonl" % name)
    with open(out, "wb") as o:
        r = subprocess.run(java_cmd(VPRODUCER, "--topic", topic, "--bootstrap-server", BOOTSTRAP,
                                    "--max-messages", str(n), "--throughput", "-1",
                                    "--acks", "-1", "--command-config", conf),
                           stdout=o, stderr=subprocess.PIPE, timeout=120)
    info("VerifiableProducer %s exited %d: %s" % (name, r.returncode,
                                                  r.stderr.decode(errors="replace")[-300:]))
    check(r.returncode == 0, "VerifiableProducer exited %d" % r.returncode)
    return out


def events(path, name):
    out = []
    with open(path) as f:
        for line in f:
            if line.startswith("{"):
                e = json.loads(line)
                if e.get("name") == name:
                    out.append(e)
    return out


def verify(topic, acked, *extra):
    """Runs `sluice verify`: (exit code, stdout)."""
    p = subprocess.run([SLUICE_BIN, "verify", "--bootstrap", BOOTSTRAP, "--topic", topic,
                        "--acked", acked] + list(extra),
                       capture_output=True, text=True, timeout=90)
    info("sluice verify %s -> %d %s %s" % (topic, p.returncode, p.stdout.strip()[:600],
                                           p.stderr.strip()[-300:]))
    return p.returncode, p.stdout


def topic_name(base):
    return "fi-%s-%s" % (base, RUN_TAG)


def create_topic(name, partitions=1):
    a = AdminClient({"bootstrap.servers": BOOTSTRAP, "error_cb": log_error_cb})
    a.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=T)
    wait_until(lambda: name in a.list_topics(timeout=5).topics and
               len(a.list_topics(timeout=5).topics[name].partitions) == partitions,
               T, "topic %s visible" % name)
    return name


def producer(**extra):
    conf = {"bootstrap.servers": BOOTSTRAP, "linger.ms": 5, "acks": "all",
            "enable.idempotence": True, "error_cb": log_error_cb,
            "retry.backoff.ms": 50, "client.id": "faults-producer"}
    conf.update(extra)
    return Producer(conf)


def produce_all(p, topic, values):
    """Produces every value; the delivery errors (None when all were acknowledged)."""
    errors = []

    def cb(err, msg):
        if err is not None:
            errors.append(str(err))

    for v in values:
        p.produce(topic, value=v.encode(), on_delivery=cb)
        p.poll(0)
    left = p.flush(T)
    check(left == 0, "%d messages still unacknowledged after %ds" % (left, T))
    return errors or None


def read_all(topic, partitions=1, expect=None):
    """Every value in the topic, from offset 0 to the end."""
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "fi-read-%s" % uuid.uuid4(),
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "error_cb": log_error_cb})
    try:
        ends = {}
        for p in range(partitions):
            _, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=T)
            ends[p] = hi
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out = []
        done = {p: ends[p] == 0 for p in ends}
        deadline = time.monotonic() + T
        while not all(done.values()) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            out.append(m.value().decode())
            if m.offset() + 1 >= ends[m.partition()]:
                done[m.partition()] = True
        check(all(done.values()), "read %d records, not to the end %s" % (len(out), ends))
        if expect is not None:
            check(len(out) == expect, "read %d records, expected %d" % (len(out), expect))
        return out
    finally:
        c.close()


def exactly_once(values, got):
    check(sorted(got) == sorted(values),
          "read back %d records (%d distinct) for %d produced; missing %s, repeated %s" % (
              len(got), len(set(got)), len(values), sorted(set(values) - set(got))[:5],
              sorted({v for v in got if got.count(v) > 1})[:5]))


# ---- main: faults on -------------------------------------------------------------------


@S.scenario("api")
def api():
    clear()
    f = add_fault(api_key="Produce", kind="error", error="NOT_LEADER_OR_FOLLOWER", count=2,
                  topic="nowhere", partition=3)
    check(f["error_code"] == 6 and f["api_key"] == 0 and f["count"] == 2, "created %s" % f)
    check(f["fired"] == 0 and f["remaining"] == 2, "counts %s" % f)
    d = add_fault(api_key=1, kind="delay", delay_ms=10)
    check(d["count"] is None and d["api"] == "Fetch", "a delay fires on every request: %s" % d)
    c = add_fault(api_key="JOIN_GROUP", kind="close", when="after")
    check(c["when"] == "after" and c["count"] == 1, "close %s" % c)
    for bad, why in [
        ({"api_key": "Produce", "kind": "error"}, "error is missing"),
        ({"api_key": "Nope", "kind": "close"}, "not a Kafka API"),
        ({"api_key": "Produce", "kind": "error", "error": "NO_SUCH"}, "not a Kafka error"),
        ({"api_key": "ApiVersions", "kind": "error", "error": 7}, "cannot answer ApiVersions"),
        ({"api_key": "JoinGroup", "kind": "close", "topic": "t"}, "name no topic"),
        ({"api_key": "Produce", "kind": "close", "colour": "red"}, "unknown field"),
    ]:
        status, body = http("POST", "/faults", bad)
        check(status == 400 and why in body.get("error", ""),
              "%s: expected 400 with %r, got %s %s" % (bad, why, status, body))
    status, body = http("POST", "/faults", None)
    check(status == 400, "an empty body: %s %s" % (status, body))
    status, body = http("DELETE", "/faults/%d" % f["id"])
    check(status == 200 and body == {"removed": 1}, "DELETE one: %s %s" % (status, body))
    status, body = http("DELETE", "/faults/%d" % f["id"])
    check(status == 404, "DELETE it again: %s %s" % (status, body))
    status, body = http("GET", "/faults")
    check([x["id"] for x in body["faults"]] == [d["id"], c["id"]], "listed %s" % body)
    # The CLI: the same calls.
    rc, out, _ = cli("add", "--api", "Produce", "--error", "REQUEST_TIMED_OUT", "--count", "3",
                     "--client-id", "someone")
    check(rc == 0, "cli add exit %d" % rc)
    added = json.loads(out)
    check(added["error"] == "REQUEST_TIMED_OUT" and added["client_id"] == "someone",
          "cli add printed %s" % added)
    rc, out, _ = cli("list")
    check(rc == 0 and added["id"] in [x["id"] for x in json.loads(out)["faults"]],
          "cli list: %s" % out)
    rc, _, err = cli("add", "--api", "Produce", "--error", "BAD_NAME")
    check(rc == 1 and "not a Kafka error" in err, "cli refusal: %s" % err)
    rc, out, _ = cli("remove", str(added["id"]))
    check(rc == 0 and json.loads(out) == {"removed": 1}, "cli remove: %s" % out)
    rc, out, _ = cli("remove", "--all")
    check(rc == 0 and json.loads(out) == {"removed": 2}, "cli remove --all: %s" % out)


@S.scenario("produce-retries", timeout=90)
def produce_retries():
    clear()
    topic = create_topic(topic_name("retries"))
    nl = add_fault(api_key="Produce", kind="error", error="NOT_LEADER_OR_FOLLOWER", count=3,
                   topic=topic, partition=0)
    rt = add_fault(api_key="Produce", kind="error", error="REQUEST_TIMED_OUT", count=2,
                   topic=topic)
    other = add_fault(api_key="Produce", kind="error", error="UNKNOWN_SERVER_ERROR",
                      client_id="not-this-client", count=None)
    values = ["r-%d" % i for i in range(2000)]
    p = producer()
    errors = produce_all(p, topic, values)
    check(errors is None, "delivery errors: %s" % errors)
    check(fault(nl["id"])["fired"] == 3, "NOT_LEADER_OR_FOLLOWER fired %s" % fault(nl["id"]))
    check(fault(rt["id"])["fired"] == 2, "REQUEST_TIMED_OUT fired %s" % fault(rt["id"]))
    check(fault(other["id"])["fired"] == 0, "another client's fault fired")
    exactly_once(values, read_all(topic))
    clear()


@S.scenario("close-after-produce", timeout=120)
def close_after_produce():
    clear()
    # Idempotent: the retry of the applied batch is recognised by its sequence numbers.
    topic = create_topic(topic_name("close-idem"))
    f = add_fault(api_key="Produce", kind="close", when="after", topic=topic)
    values = ["c-%d" % i for i in range(500)]
    errors = produce_all(producer(), topic, values)
    check(errors is None, "delivery errors: %s" % errors)
    check(fault(f["id"])["fired"] == 1, "the close fired %s" % fault(f["id"]))
    exactly_once(values, read_all(topic))

    # Not idempotent: the same fault writes the batch twice, so the request was applied.
    topic = create_topic(topic_name("close-plain"))
    f = add_fault(api_key="Produce", kind="close", when="after", topic=topic)
    p = producer(**{"enable.idempotence": False, "linger.ms": 0,
                    "max.in.flight.requests.per.connection": 1})
    check(produce_all(p, topic, ["once"]) is None, "delivery failed")
    check(fault(f["id"])["fired"] == 1, "the close fired %s" % fault(f["id"]))
    got = read_all(topic)
    check(got == ["once", "once"], "after an applied request the retry wrote again: %s" % got)

    # Closed before it is applied: the retry writes it once, even without idempotence.
    topic = create_topic(topic_name("close-before"))
    f = add_fault(api_key="Produce", kind="close", when="before", topic=topic)
    check(produce_all(p, topic, ["once"]) is None, "delivery failed")
    check(fault(f["id"])["fired"] == 1, "the close fired %s" % fault(f["id"]))
    got = read_all(topic)
    check(got == ["once"], "a request closed before it was applied: %s" % got)
    clear()


@S.scenario("delay-produce", timeout=90)
def delay_produce():
    clear()
    topic = create_topic(topic_name("delay"))
    f = add_fault(api_key="Produce", kind="delay", delay_ms=4000, count=1, topic=topic)
    values = ["d-%d" % i for i in range(300)]
    p = producer(**{"request.timeout.ms": 1500, "message.timeout.ms": 25000})
    errors = produce_all(p, topic, values)
    check(errors is None, "delivery errors: %s" % errors)
    check(fault(f["id"])["fired"] == 1, "the delay fired %s" % fault(f["id"]))
    exactly_once(values, read_all(topic))
    clear()


def after_reset(reset, start):
    """A consumer assigned at `start` of a topic holding 10 records is answered
    OFFSET_OUT_OF_RANGE once and resets per `reset`; 5 more records are produced once its
    fetcher runs again (librdkafka's statistics: fetch_state active, next_offset set). The
    values it reads."""
    topic = create_topic(topic_name("oor-" + reset))
    p = producer()
    check(produce_all(p, topic, ["v-%d" % i for i in range(10)]) is None, "delivery failed")
    f = add_fault(api_key="Fetch", kind="error", error="OFFSET_OUT_OF_RANGE", topic=topic,
                  partition=0)
    fetcher = {}

    def stats(raw):
        part = json.loads(raw).get("topics", {}).get(topic, {}).get("partitions", {}).get("0")
        if part:
            fetcher.update(state=part.get("fetch_state"), next=part.get("next_offset"))

    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "fi-oor-%s" % RUN_TAG,
                  "enable.auto.commit": False, "auto.offset.reset": reset,
                  "statistics.interval.ms": 100, "stats_cb": stats, "error_cb": log_error_cb})
    got = []

    def poll_until(pred):
        m = c.poll(0.1)
        if m is not None and not m.error():
            got.append(m.value().decode())
        return pred()

    try:
        c.assign([TopicPartition(topic, 0, start)])
        want_next = 10 if reset == "latest" else 0
        wait_until(lambda: poll_until(lambda: fault(f["id"])["fired"] == 1 and (
            got or (fetcher.get("state") == "active" and fetcher.get("next") == want_next))),
            T, "the consumer to reset to %d (fetcher %s)" % (want_next, fetcher))
        check(produce_all(p, topic, ["v-%d" % i for i in range(10, 15)]) is None,
              "delivery failed")
        wait_until(lambda: poll_until(lambda: "v-14" in got), T, "the new records")
        return got
    finally:
        c.close()


@S.scenario("fetch-out-of-range", timeout=90)
def fetch_out_of_range():
    clear()
    got = after_reset("latest", 3)
    check(got == ["v-%d" % i for i in range(10, 15)],
          "auto.offset.reset=latest read %s (expected only the 5 new records)" % got)
    got = after_reset("earliest", 7)
    check(got == ["v-%d" % i for i in range(15)],
          "auto.offset.reset=earliest read %s (expected all 15 from offset 0)" % got)
    clear()


@S.scenario("group-coordinator-load", timeout=120)
def group_coordinator_load():
    clear()
    topic = create_topic(topic_name("group"), partitions=2)
    group = "fi-group-%s" % RUN_TAG
    fc = add_fault(api_key="FindCoordinator", kind="error", error="COORDINATOR_LOAD_IN_PROGRESS",
                   count=2)
    jg = add_fault(api_key="JoinGroup", kind="error", error="COORDINATOR_LOAD_IN_PROGRESS",
                   count=2)

    def member(name):
        c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group,
                      "client.id": name, "auto.offset.reset": "earliest",
                      "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
                      "partition.assignment.strategy": "range", "error_cb": log_error_cb})
        c.subscribe([topic])
        return c

    a = member("member-a")
    try:
        wait_until(lambda: a.poll(0.2) is None and len(a.assignment()) == 2, T,
                   "member a to get both partitions")
        check(fault(fc["id"])["fired"] == 2, "FindCoordinator fault %s" % fault(fc["id"]))
        check(fault(jg["id"])["fired"] == 2, "JoinGroup fault %s" % fault(jg["id"]))
        # A second member makes the group rebalance: a rejoins through two more errors.
        jg2 = add_fault(api_key="JoinGroup", kind="error", error="COORDINATOR_LOAD_IN_PROGRESS",
                        count=2, client_id="member-a")
        b = member("member-b")
        try:
            def balanced():
                a.poll(0.1)
                b.poll(0.1)
                return len(a.assignment()) == 1 and len(b.assignment()) == 1
            wait_until(balanced, 60, "both members to hold one partition each")
            check(fault(jg2["id"])["fired"] == 2, "a's rejoin fault %s" % fault(jg2["id"]))
        finally:
            b.close()
    finally:
        a.close()
    clear()


@S.scenario("node-down", timeout=90)
def node_down():
    clear()
    topic = create_topic(topic_name("down"))
    p = producer()
    check(produce_all(p, topic, ["before"]) is None, "delivery failed")
    rc, out, _ = cli("add", "--down-ms", "3000")
    check(rc == 0, "cli add --down-ms exit %d" % rc)
    down = json.loads(out)
    check(down["api"] == "*" and down["duration_ms"] == 3000 and down["count"] is None,
          "down fault %s" % down)
    # A new connection is closed as it is accepted, before it sends anything.
    with socket.create_connection(host_port(), timeout=2) as s:
        try:
            got = s.recv(1)
        except socket.timeout:
            got = None
    check(got == b"", "a connection opened while down was not closed at accept (%r)" % got)
    values = ["n-%d" % i for i in range(300)]
    errors = produce_all(p, topic, values)
    check(errors is None, "delivery errors: %s" % errors)
    listed = fault(down["id"])
    check(listed["fired"] >= 1 and not listed["live"], "the down fault %s" % listed)
    exactly_once(["before"] + values, read_all(topic))
    clear()


@S.scenario("fetch-error-session-id")
def fetch_error_session_id():
    """An error answer to a Fetch carries the request's session id, as Kafka's does."""
    clear()
    topic = create_topic(topic_name("session"))
    add_fault(api_key="Fetch", kind="error", error="NOT_LEADER_OR_FOLLOWER", topic=topic)
    part = (struct.pack(">iiqiqi", 0, -1, 0, -1, -1, 1 << 20) + kw.TAGS)
    body = (struct.pack(">iiiibii", -1, 0, 1, 1 << 20, 0, 4242, 7) +
            kw.carray([topic], lambda t: kw.cstr(t) + kw.carray([part], lambda p: p) + kw.TAGS) +
            kw.carray([], None) + kw.cstr("") + kw.TAGS)
    r = kw.call(host_port(), 1, 12, body)
    _throttle, top, session = r.i32(), r.i16(), r.i32()
    topics = r.uvarint() - 1
    name = r.cstr()
    partitions = r.uvarint() - 1
    index, error = r.i32(), r.i16()
    info("Fetch v12 answer: top error %d, session %d, %d topic(s): %s %d partition(s), "
         "partition %d error %d" % (top, session, topics, name, partitions, index, error))
    check(session == 4242, "session id %d in the error answer, sent 4242" % session)
    check(top == 0 and (topics, name, partitions, index, error) == (1, topic, 1, 0, 6),
          "NOT_LEADER_OR_FOLLOWER in the partition: top %d, partition %d error %d" % (
              top, index, error))
    clear()


@S.scenario("node-faults-need-a-cluster")
def node_faults_need_a_cluster():
    clear()
    for spec in ({"kind": "move_leader", "topic": "t", "partition": 0},
                 {"kind": "isolate", "duration_ms": 1000}):
        status, body = http("POST", "/faults", spec)
        check(status == 400 and "runs alone" in body.get("error", ""),
              "%s on one node: %s %s" % (spec["kind"], status, body))
    rc, _, err = cli("add", "--isolate")
    check(rc == 1 and "runs alone" in err, "the CLI printed %r" % err)
    status, body = http("GET", "/faults")
    check(body["faults"] == [], "a refused fault is not listed: %s" % body)


@S.scenario("verify-acked", timeout=150)
def verify_acked():
    """Kafka's VerifiableProducer writes; `sluice verify` finds every acked record; an acked
    file naming an offset the topic does not have is reported lost (exit 1)."""
    clear()
    topic = create_topic(topic_name("verify"), partitions=3)
    out = verifiable_producer(topic, 600, "verify-" + RUN_TAG)
    acked = events(out, "producer_send_success")
    check(len(acked) == 600, "%d of 600 records acked" % len(acked))
    rc, text = verify(topic, out)
    check(rc == 0 and text.startswith("sluice verify: %s: 600 acked, 600 read" % topic) and
          "0 lost, 0 duplicated, 0 moved, 0 reordered: OK" in text, "sluice verify: %s" % text)
    rc, text = verify(topic, out, "--json")
    report = json.loads(text)
    check(rc == 0 and report["ok"] and report["acked"] == 600, "--json: %s" % text[:300])
    bad = os.path.join(TMP, "bad-acked.jsonl")
    with open(bad, "w") as f:
        f.write(json.dumps(acked[0]) + "\n")
        f.write(json.dumps(dict(acked[0], value="no-such-value", offset=999999)) + "\n")
    rc, text = verify(topic, bad)
    check(rc == 1 and "1 lost" in text and "FAILED" in text and
          'lost: value "no-such-value" acked at partition %d offset 999999' % acked[0]["partition"]
          in text, "the bad acked file: exit %d, %s" % (rc, text))


@S.scenario("java-idempotent-retries", timeout=150)
def java_idempotent_retries():
    """The Java idempotent producer (Kafka's VerifiableProducer) gets NOT_LEADER_OR_FOLLOWER
    three times and REQUEST_TIMED_OUT twice on Produce, retries, and `sluice verify` finds
    every record exactly once."""
    clear()
    topic = create_topic(topic_name("java"))
    nl = add_fault(api_key="Produce", kind="error", error="NOT_LEADER_OR_FOLLOWER", count=3,
                   topic=topic, client_id="faults-java")
    to = add_fault(api_key="Produce", kind="error", error="REQUEST_TIMED_OUT", count=2,
                   topic=topic, client_id="faults-java")
    out = verifiable_producer(topic, 500, "java-" + RUN_TAG, client_id="faults-java",
                              retry_backoff_ms=50)
    check(fault(nl["id"])["fired"] == 3 and fault(to["id"])["fired"] == 2,
          "the faults fired %s, %s" % (fault(nl["id"]), fault(to["id"])))
    check(len(events(out, "producer_send_success")) == 500, "every record acked")
    rc, text = verify(topic, out)
    check(rc == 0 and "500 acked, 500 read" in text and "0 lost, 0 duplicated" in text,
          "sluice verify: %s" % text)
    clear()


# ---- off: no flag ------------------------------------------------------------------------


@S.scenario("refused-without-flag")
def refused_without_flag():
    for method, path, body in [("POST", "/faults", {"api_key": "Produce", "kind": "close"}),
                               ("GET", "/faults", None), ("DELETE", "/faults", None)]:
        status, got = http(method, path, body)
        check(status == 403 and "sluice.faults.enable=true" in got.get("error", ""),
              "%s %s without the flag: %s %s" % (method, path, status, got))
    rc, _, err = cli("add", "--api", "Produce", "--close", "before")
    check(rc == 1 and "sluice.faults.enable=true" in err, "the CLI printed %r" % err)
    # The broker serves as usual.
    topic = create_topic(topic_name("off"))
    check(produce_all(producer(), topic, ["x"]) is None, "delivery failed")
    check(read_all(topic) == ["x"], "read back")


# ---- secure: SASL and an authorizer --------------------------------------------------------


@S.scenario("super-user-only")
def super_user_only():
    spec = {"api_key": "Produce", "kind": "close"}
    status, got = http("POST", "/faults", spec)
    check(status == 401, "no credentials: %s %s" % (status, got))
    status, got = http("POST", "/faults", spec, user=("alice", "wrong"))
    check(status == 401, "a wrong password: %s %s" % (status, got))
    status, got = http("POST", "/faults", spec, user=("alice", "alice-secret"))
    check(status == 403 and "super user" in got.get("error", ""),
          "alice (not a super user): %s %s" % (status, got))
    status, got = http("POST", "/faults", spec, user=("admin", "admin-secret"))
    check(status == 201 and got["id"] >= 1, "admin: %s %s" % (status, got))
    rc, _, err = cli("--user", "alice", "list", env={"SLUICE_PASSWORD": "alice-secret"})
    check(rc == 1 and "super user" in err, "the CLI as alice printed %r" % err)
    rc, out, _ = cli("--user", "admin", "remove", "--all", env={"SLUICE_PASSWORD": "admin-secret"})
    check(rc == 0 and json.loads(out) == {"removed": 1}, "the CLI as admin: %s" % out)


PHASES = {
    "main": ["api", "produce-retries", "close-after-produce", "delay-produce",
             "fetch-out-of-range", "group-coordinator-load", "node-down",
             "fetch-error-session-id", "node-faults-need-a-cluster", "verify-acked",
             "java-idempotent-retries"],
    "off": ["refused-without-flag"],
    "secure": ["super-user-only"],
}

if __name__ == "__main__":
    main_phase(S, PHASES, PHASE)
