#!/usr/bin/env python3
"""Schema Registry on a 3-node cluster (scripts/cluster, started by ./run): writes through
every node reach the one writer (the leader of `_schemas` partition 0), reads are answered by
every node, and nothing registered is lost when the writer is killed -9 and restarted. See
./run for the scenario list.

Env (from ./run): BOOTSTRAP (the three brokers, node order), REGISTRY_URLS (their HTTP ports,
same order), CLUSTER_CTL, SUITE_TMP.
"""
import json
import os
import subprocess
import time

from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from harness import (BOOTSTRAP, RUN_TAG, Suite, check, host_ports, http_json, info,
                     wait_until)
import kafka_wire as kw

S = Suite("schema-registry-cluster")
NODES = [1, 2, 3]
URLS = dict(zip(NODES, os.environ["REGISTRY_URLS"].split(",")))
ADDRS = dict(zip(NODES, host_ports()))
CLUSTER_CTL = os.environ["CLUSTER_CTL"]
CT = "application/vnd.schemaregistry.v1+json"
# How long a client keeps retrying a registration while the writer moves: the broker
# session timeout (6 s here) and an election, with room to spare.
RETRY_FOR = 45

# Every registration so far: subject -> (version, id, schema text).
REGISTERED = {}


def subject(base):
    return "%s-%s" % (base, RUN_TAG)


def schema_text(n):
    """A distinct Avro record schema per n."""
    return json.dumps({"type": "record", "name": "R%d" % n, "namespace": "sluice.cluster",
                       "fields": [{"name": "f%d" % n, "type": "string"}]})


def http(node, method, path, body=None):
    """(status, JSON body) of one call to node's HTTP server."""
    return http_json(URLS[node] + path, method, body, content_type=CT)


def cluster(*args):
    t0 = time.monotonic()
    r = subprocess.run([CLUSTER_CTL] + [str(a) for a in args], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=120)
    out = r.stdout.decode(errors="replace").strip()
    check(r.returncode == 0, "scripts/cluster %s exited %d: %s" % (
        " ".join(map(str, args)), r.returncode, out[-800:].replace("\n", " | ")))
    info("cluster %s: %.1fs" % (" ".join(map(str, args)), time.monotonic() - t0))


def register(node, subj, n, retry_for=0):
    """Registers schema n under subj through node with SchemaRegistryClient; 5xx answers
    (the writer moving) are retried for retry_for seconds, as a client would. Records and
    returns the id."""
    deadline = time.monotonic() + retry_for
    while True:
        client = SchemaRegistryClient({"url": URLS[node]})
        try:
            sid = client.register_schema(subj, Schema(schema_text(n), "AVRO"))
            break
        except SchemaRegistryError as e:
            info("register %s through node %d: %s %s %s" % (subj, node, e.http_status_code,
                                                            e.error_code, e.error_message))
            if e.http_status_code < 500 or time.monotonic() >= deadline:
                raise
        time.sleep(0.5)
    status, latest = http(node, "GET", "/subjects/%s/versions/latest" % subj)
    check(status == 200 and latest["id"] == sid,
          "node %d, right after registering %s (id %d) through it: %s %s" % (
              node, subj, sid, status, latest))
    REGISTERED[subj] = (latest["version"], sid, schema_text(n))
    info("registered %s through node %d: id %d" % (subj, node, sid))
    return sid


def serves_all(node):
    """Node answers every registration so far with its subject, version, id and schema."""
    status, subjects = http(node, "GET", "/subjects")
    if status != 200:
        return False
    for subj, (version, sid, text) in REGISTERED.items():
        if subj not in subjects:
            return False
        status, v = http(node, "GET", "/subjects/%s/versions/%d" % (subj, version))
        check(status == 200, "node %d: %s version %d: %s %s" % (node, subj, version, status, v))
        check((v["subject"], v["version"], v["id"]) == (subj, version, sid),
              "node %d serves %s version %d as %s, registered with id %d" % (
                  node, subj, version, v, sid))
        check(json.loads(v["schema"]) == json.loads(text), "node %d: %s schema %r" % (
            node, subj, v["schema"]))
        status, by_id = http(node, "GET", "/schemas/ids/%d" % sid)
        check(status == 200 and json.loads(by_id["schema"]) == json.loads(text),
              "node %d: id %d: %s %s" % (node, sid, status, by_id))
    return True


def wait_served_by(nodes):
    wait_until(lambda: all(serves_all(n) for n in nodes), 30,
               "nodes %s to serve all %d registrations" % (nodes, len(REGISTERED)),
               interval=0.5)


def ids():
    return sorted(sid for _, sid, _ in REGISTERED.values())


def check_ids_unique():
    got = [sid for _, sid, _ in REGISTERED.values()]
    check(len(set(got)) == len(got), "ids repeat: %s" % REGISTERED)


def schemas_partition():
    """`_schemas` partition 0 as the cluster's metadata describes it."""
    md = AdminClient({"bootstrap.servers": BOOTSTRAP}).list_topics("_schemas", timeout=15)
    return md.topics["_schemas"].partitions.get(0)


def writer():
    """The leader of `_schemas` partition 0, as the cluster's metadata names it."""
    p = schemas_partition()
    check(p is not None and p.leader in NODES, "_schemas-0: %s" % (p and p.leader))
    return p.leader


def brokers_in_metadata(node):
    """(id, host, port) of each broker in node's Metadata v12 answer."""
    body = kw.carray([], None) + b"\x00\x00" + kw.TAGS
    r = kw.call(ADDRS[node], 3, 12, body, timeout=10)
    r.i32()
    return sorted((b[0], b[1], b[2]) for b in r.carray(
        lambda r: (r.i32(), r.cstr(), r.i32(), r.cstr(), r.tags())))


def brokers_in_describe_cluster(node):
    """(id, host, port) of each broker in node's DescribeCluster v1 answer (brokers)."""
    r = kw.call(ADDRS[node], 60, 1, b"\x00" + b"\x01" + kw.TAGS, timeout=10)
    r.i32()
    err, message = r.i16(), r.cstr()
    check(err == 0, "DescribeCluster through node %d: error %d %s" % (node, err, message))
    r.i8()
    r.cstr()
    r.i32()
    return sorted((b[0], b[1], b[2]) for b in r.carray(
        lambda r: (r.i32(), r.cstr(), r.i32(), r.cstr(), r.tags())))


# ---- scenarios ------------------------------------------------------------------------------


@S.scenario("register-through-every-node", timeout=120)
def register_through_every_node():
    n = 0
    last = 0
    for rnd in range(2):
        for node in NODES:
            n += 1
            sid = register(node, subject("via%d-%d" % (node, rnd)), n, retry_for=RETRY_FOR)
            check(sid > last, "id %d after %d: ids do not increase" % (sid, last))
            last = sid
    check_ids_unique()
    # The same schema again, through another node: the same id, no new version.
    subj = subject("via1-0")
    version, sid, text = REGISTERED[subj]
    again = SchemaRegistryClient({"url": URLS[3]}).register_schema(subj, Schema(text, "AVRO"))
    check(again == sid, "re-registered through node 3: id %d, was %d" % (again, sid))
    status, versions = http(2, "GET", "/subjects/%s/versions" % subj)
    check(status == 200 and versions == [version], "versions of %s: %s %s" % (
        subj, status, versions))
    # Two replicas of `_schemas` (see ./run): the third node answers from the writer's state,
    # as wait_served_by below checks of every node.
    holders = sorted(schemas_partition().replicas)
    check(len(holders) == 2, "_schemas-0 replicas: %s, want 2" % holders)
    info("node %s holds no replica of _schemas" % [x for x in NODES if x not in holders])
    # A config change and a delete through a node that does not write.
    w = writer()
    other = [x for x in NODES if x != w]
    status, body = http(other[0], "PUT", "/config/%s" % subj, {"compatibility": "FULL"})
    check(status == 200 and body == {"compatibility": "FULL"},
          "PUT /config through node %d (writer %d): %s %s" % (other[0], w, status, body))
    doomed = subject("doomed")
    register(other[1], doomed, 100)
    status, body = http(other[1], "DELETE", "/subjects/%s" % doomed)
    check(status == 200 and body == [1], "DELETE %s through node %d: %s %s" % (
        doomed, other[1], status, body))
    del REGISTERED[doomed]
    wait_until(lambda: all(http(x, "GET", "/config/%s" % subj) ==
                           (200, {"compatibilityLevel": "FULL"}) for x in NODES), 30,
               "every node to serve %s's config" % subj, interval=0.5)
    wait_until(lambda: all(doomed not in http(x, "GET", "/subjects")[1] for x in NODES), 30,
               "every node to drop %s" % doomed, interval=0.5)
    wait_served_by(NODES)
    # The HTTP listeners are registered with the controller, never shown to Kafka clients.
    kafka = sorted(port for _, port in ADDRS.values())
    for x in NODES:
        for what, got in (("Metadata", brokers_in_metadata(x)),
                          ("DescribeCluster", brokers_in_describe_cluster(x))):
            check(sorted(b[2] for b in got) == kafka and [b[0] for b in got] == NODES,
                  "%s through node %d lists %s, the Kafka listeners are %s" % (
                      what, x, got, kafka))


@S.scenario("writer-killed", timeout=150)
def writer_killed():
    if not REGISTERED:
        register(1, subject("before-kill"), 200, retry_for=RETRY_FOR)
    victim = writer()
    survivors = [x for x in NODES if x != victim]
    before = max(ids())
    info("killing node %d, the writer" % victim)
    cluster("kill", victim)
    n = 300
    for node in survivors:
        n += 1
        sid = register(node, subject("after-kill-via%d" % node), n, retry_for=RETRY_FOR)
        check(sid > before, "id %d registered after the kill, ids before it went up to %d" % (
            sid, before))
        before = sid
    check_ids_unique()
    new = writer()
    check(new in survivors, "the writer is now %d" % new)
    wait_served_by(survivors)


@S.scenario("restarted-node", timeout=150)
def restarted_node():
    down = [x for x in NODES if subprocess.run(
        [CLUSTER_CTL, "pid", str(x)], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL).returncode != 0]
    check(down, "no node is down (writer-killed runs first)")
    for x in down:
        cluster("start", x)
    wait_served_by(NODES)
    # A write through the restarted node, which does not write: a new id, served everywhere.
    sid = register(down[0], subject("after-restart"), 400, retry_for=RETRY_FOR)
    check(sid > max(i for i in ids() if i != sid), "id %d after the restart" % sid)
    check_ids_unique()
    wait_served_by(NODES)


if __name__ == "__main__":
    S.main()
