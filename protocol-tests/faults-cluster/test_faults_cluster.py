#!/usr/bin/env python3
"""Cluster fault suite: `move_leader` and `isolate` injected through each node's HTTP port on
a 3-node cluster (scripts/cluster, started by ./run), observed with Kafka's VerifiableProducer
and checked with `sluice verify`. See ./run for the scenario list.

Env (from ./run): BOOTSTRAP (the three brokers), FAULTS_URLS (their HTTP ports, same order),
CLUSTER_CTL, CLUSTER_DIR, KAFKA_LIBS, SLUICE_ROOT, SLUICE_BIN, SUITE_TMP.
"""
import json
import os
import struct
import subprocess
import time
import urllib.error
import urllib.request

from confluent_kafka.admin import AdminClient, NewTopic

from harness import BOOTSTRAP, RUN_TAG, Suite, check, host_ports, info, wait_until
import kafka_wire as kw

S = Suite("faults-cluster")
NODES = [1, 2, 3]
URLS = dict(zip(NODES, os.environ["FAULTS_URLS"].split(",")))
ADDRS = dict(zip(NODES, host_ports()))
ROOT = os.environ.get("SLUICE_ROOT") or os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
SLUICE_BIN = os.environ.get("SLUICE_BIN", os.path.join(ROOT, "target/release/sluice"))
KAFKA_LIBS = os.environ["KAFKA_LIBS"]
TMP = os.environ.get("SUITE_TMP") or os.environ["CLUSTER_DIR"]
LOG4J = os.path.join(ROOT, "scripts/kafka/log4j2-tools.properties")
VPRODUCER = "org.apache.kafka.tools.VerifiableProducer"


def topic_name(base):
    return "fc-%s-%s" % (base, RUN_TAG)


def http(node, method, path, body=None):
    """(status, JSON body) of one call to node's HTTP server."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(URLS[node] + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw.decode(errors="replace")


def cli(node, *args):
    p = subprocess.run([SLUICE_BIN, "faults", "--url", URLS[node]] + list(args),
                       capture_output=True, text=True, timeout=90)
    info("node %d: sluice faults %s -> %d %s %s" % (node, " ".join(args), p.returncode,
                                                    p.stdout.strip(), p.stderr.strip()))
    return p.returncode, p.stdout, p.stderr


def leaders_seen_by(node, topic):
    """{partition: (leader, [isr])} in node's own Metadata answer (v12, raw: a client library
    would ask whichever broker it likes)."""
    body = (kw.carray([topic], lambda t: b"\x00" * 16 + kw.cstr(t) + kw.TAGS) +
            b"\x00\x00" + kw.TAGS)
    r = kw.call(ADDRS[node], 3, 12, body, timeout=10)
    r.i32()
    r.carray(lambda r: (r.i32(), r.cstr(), r.i32(), r.cstr(), r.tags()))
    r.cstr()
    r.i32()
    out = {}

    def partition(r):
        _err, index, leader, _epoch = r.i16(), r.i32(), r.i32(), r.i32()
        r.carray(lambda r: r.i32())
        isr = r.carray(lambda r: r.i32())
        r.carray(lambda r: r.i32())
        r.tags()
        out[index] = (leader, isr)

    def topic_entry(r):
        r.i16()
        r.cstr()
        r.take(17)
        r.carray(partition)
        r.i32()
        r.tags()

    r.carray(topic_entry)
    return out


def admin():
    return AdminClient({"bootstrap.servers": BOOTSTRAP})


def create_topic(name, config=None):
    a = admin()
    a.create_topics([NewTopic(name, 1, 3, config=config or {})],
                    request_timeout=30)[name].result(timeout=60)
    wait_until(lambda: all(leaders_seen_by(n, name).get(0, (-1, []))[0] in NODES and
                           sorted(leaders_seen_by(n, name)[0][1]) == NODES for n in NODES),
               60, "%s-0 with a leader and a full ISR on every node" % name, interval=0.5)
    return name


def leader(topic, node=1):
    return leaders_seen_by(node, topic)[0][0]


def verify(topic, acked):
    p = subprocess.run([SLUICE_BIN, "verify", "--bootstrap", BOOTSTRAP, "--topic", topic,
                        "--acked", acked], capture_output=True, text=True, timeout=150)
    info("sluice verify %s -> %d %s %s" % (topic, p.returncode, p.stdout.strip()[:800],
                                           p.stderr.strip()[-300:]))
    return p.returncode, p.stdout


# ---- scenarios ------------------------------------------------------------------------------


@S.scenario("move-leader", timeout=120)
def move_leader():
    t = create_topic(topic_name("move"))
    was = leader(t)
    to = [n for n in NODES if n != was][0]
    via = [n for n in NODES if n not in (was, to)][0]
    status, f = http(via, "POST", "/faults", {"kind": "move_leader", "topic": t, "partition": 0,
                                              "to": to})
    check(status == 201 and f["leader"] == to, "move_leader to %d through node %d: %s %s" % (
        to, via, status, f))
    check(f["kind"] == "move_leader" and f["fired"] == 1 and not f["live"] and f["to"] == to,
          "the fault as created: %s" % f)
    wait_until(lambda: all(leader(t, n) == to for n in NODES), 30,
               "every node to name %d the leader of %s-0" % (to, t), interval=0.5)
    status, listed = http(via, "GET", "/faults")
    check([x["id"] for x in listed["faults"]] == [f["id"]] and listed["faults"][0]["fired"] == 1,
          "listed %s" % listed)
    # The CLI, with no --to: another in-sync replica.
    rc, out, _ = cli(was, "add", "--move-leader", "%s:0" % t)
    check(rc == 0, "cli --move-leader exit %d" % rc)
    moved = json.loads(out)
    check(moved["leader"] != to, "the CLI moved it from %d to %s" % (to, moved))
    # Every node, the one asked next included, must see the move before it can refuse one.
    wait_until(lambda: all(leader(t, n) == moved["leader"] for n in NODES), 30,
               "every node to see the second move", interval=0.5)
    status, body = http(via, "POST", "/faults", {"kind": "move_leader", "topic": t,
                                                 "partition": 0, "to": moved["leader"]})
    check(status == 400 and "already leads" in body.get("error", ""),
          "a move to the leader: %s %s" % (status, body))
    for n in NODES:
        http(n, "DELETE", "/faults")


@S.scenario("isolate-leader", timeout=240)
def isolate_leader():
    t = create_topic(topic_name("isolate"), {"min.insync.replicas": "2"})
    victim = leader(t)
    others = [n for n in NODES if n != victim]
    conf = os.path.join(TMP, "isolate-producer.properties")
    with open(conf, "w") as f:
        f.write("retries=2147483647\nenable.idempotence=true\nrequest.timeout.ms=5000\n")
    acked = os.path.join(TMP, "isolate-acked.jsonl")
    out = open(acked, "wb")
    err = open(os.path.join(TMP, "isolate-producer.err"), "wb")
    cmd = (["java", "-Xmx256m", "-Djava.awt.headless=true", "-Dlog4j2.configurationFile=" + LOG4J,
            "-cp", KAFKA_LIBS + "/*", VPRODUCER, "--topic", t, "--bootstrap-server", BOOTSTRAP,
            "--max-messages", "4000", "--throughput", "200", "--acks", "-1",
            "--command-config", conf])
    producer = subprocess.Popen(cmd, stdout=out, stderr=err)
    with open(os.path.join(TMP, "spawned.pids"), "a") as f:
        f.write("%d\n" % producer.pid)

    def acks():
        with open(acked) as f:
            return sum(1 for line in f if '"producer_send_success"' in line)

    try:
        wait_until(lambda: acks() >= 300, 60, "VerifiableProducer's first 300 acks", interval=0.5)
        rc, text, _ = cli(victim, "add", "--isolate")
        check(rc == 0, "cli --isolate exit %d" % rc)
        iso = json.loads(text)
        check(iso["kind"] == "isolate" and iso["fired"] == 1 and iso["live"], "isolate %s" % iso)
        at_isolation = acks()
        wait_until(lambda: all(leader(t, n) in others for n in others), 60,
                   "another node to lead %s-0 (node %d isolated)" % (t, victim), interval=0.5)
        new = leader(t, others[0])
        info("node %d isolated at %d acks; node %d leads now" % (victim, at_isolation, new))
        wait_until(lambda: acks() >= at_isolation + 300, 90,
                   "300 more acks from the new leader", interval=0.5)
        status, body = http(victim, "DELETE", "/faults/%d" % iso["id"])
        check(status == 200, "removing the isolation: %s %s" % (status, body))
        wait_until(lambda: producer.poll() is not None, 60, "VerifiableProducer to finish",
                   interval=0.5)
        check(producer.returncode == 0, "VerifiableProducer exited %s" % producer.returncode)
    finally:
        if producer.poll() is None:
            producer.terminate()
            producer.wait(10)
        out.close()
        err.close()
    wait_until(lambda: sorted(leaders_seen_by(new, t)[0][1]) == NODES, 90,
               "node %d back in the ISR of %s-0" % (victim, t), interval=0.5)
    total = acks()
    check(total == 4000, "%d of 4000 records acked" % total)
    rc, text = verify(t, acked)
    check(rc == 0 and ("%d acked" % total) in text and "0 lost, 0 duplicated" in text,
          "sluice verify after the isolation: %s" % text)


@S.scenario("isolate-expires", timeout=120)
def isolate_expires():
    t = create_topic(topic_name("expire"))
    lead = leader(t)
    follower = [n for n in NODES if n != lead][0]
    status, f = http(follower, "POST", "/faults", {"kind": "isolate", "duration_ms": 10000})
    check(status == 201 and f["duration_ms"] == 10000, "isolate for 10 s: %s %s" % (status, f))
    # The follower stops fetching and heartbeating: it leaves the ISR (replica.lag.time.max.ms,
    # or fenced by the controller), then comes back once the fault has expired.
    wait_until(lambda: follower not in leaders_seen_by(lead, t)[0][1], 60,
               "node %d out of the ISR" % follower, interval=0.5)
    wait_until(lambda: sorted(leaders_seen_by(lead, t)[0][1]) == NODES, 60,
               "node %d back in the ISR after the fault expired" % follower, interval=0.5)
    status, listed = http(follower, "GET", "/faults")
    check(not listed["faults"][0]["live"], "the expired fault %s" % listed)
    http(follower, "DELETE", "/faults")


if __name__ == "__main__":
    S.main()
