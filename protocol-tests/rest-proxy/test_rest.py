#!/usr/bin/env python3
"""REST Proxy suite: Confluent's REST Proxy API v3 on Sluice's HTTP port, over plain HTTP
(urllib, raw sockets for the streaming form), with records read back by confluent-kafka.
REST_PHASE selects the scenarios of one broker start (main, acl, off; see run)."""
import base64
import json
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)

from harness import BOOTSTRAP, RUN_TAG, Suite, check, main_phase, wait_until
from rest_http import (ADMIN, ALICE, T, URL, b64, consume, http, name, ok, proxy_off, refused,
                       sasl)

PHASE = os.environ.get("REST_PHASE", "main")
S = Suite("rest-proxy")


def cluster_id(auth=None):
    got = ok("GET", "/v3/clusters", auth=auth)
    check(got["kind"] == "KafkaClusterList" and len(got["data"]) == 1, "clusters: %r" % got)
    return got["data"][0]["cluster_id"]


def create_topic(cid, topic, partitions=1, configs=None, auth=None):
    body = {"topic_name": topic, "partitions_count": partitions, "replication_factor": 1}
    if configs:
        body["configs"] = configs
    got = ok("POST", "/v3/clusters/%s/topics" % cid, body, status=201, auth=auth)
    check(got["topic_name"] == topic and got["partitions_count"] == partitions,
          "created: %r" % got)
    return got


def reports(text):
    """The delivery reports of a produce answer: concatenated JSON objects."""
    dec = json.JSONDecoder()
    out, i = [], 0
    text = text if isinstance(text, str) else json.dumps(text)
    while True:
        while i < len(text) and text[i] in " \r\n\t":
            i += 1
        if i >= len(text):
            return out
        obj, i = dec.raw_decode(text, i)
        out.append(obj)


def produce(cid, topic, records, auth=None):
    """POSTs the records in one body (concatenated); the HTTP status and the reports."""
    raw = "".join(json.dumps(r) + "\n" for r in records).encode()
    req = urllib.request.Request(URL + "/v3/clusters/%s/topics/%s/records" % (cid, topic),
                                 data=raw, method="POST")
    req.add_header("Content-Type", "application/json")
    if auth is not None:
        req.add_header("Authorization",
                       "Basic " + base64.b64encode(("%s:%s" % auth).encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=T) as r:
            return r.status, reports(r.read().decode())
    except urllib.error.HTTPError as e:
        return e.code, reports(e.read().decode())


@S.scenario("clusters")
def clusters():
    cid = cluster_id()
    c = ok("GET", "/v3/clusters/%s" % cid)
    check(c["kind"] == "KafkaCluster" and c["cluster_id"] == cid, "cluster: %r" % c)
    base = URL + "/v3/clusters/" + cid
    check(c["metadata"]["self"] == base, "self: %r" % c["metadata"])
    check(c["metadata"]["resource_name"] == "crn:///kafka=" + cid, "crn: %r" % c["metadata"])
    check(c["topics"]["related"] == base + "/topics", "topics link: %r" % c["topics"])
    check(c["brokers"]["related"] == base + "/brokers", "brokers link")
    check(c["consumer_groups"]["related"] == base + "/consumer-groups", "groups link")
    check(c["controller"]["related"].startswith(base + "/brokers/"), "controller link")
    bs = ok("GET", "/v3/clusters/%s/brokers" % cid)
    check(bs["kind"] == "KafkaBrokerList" and len(bs["data"]) == 1, "brokers: %r" % bs)
    b = bs["data"][0]
    check(b["kind"] == "KafkaBroker" and b["port"] == int(BOOTSTRAP.rsplit(":", 1)[1]),
          "broker: %r" % b)
    one = ok("GET", "/v3/clusters/%s/brokers/%d" % (cid, b["broker_id"]))
    check(one == b, "broker %d: %r vs %r" % (b["broker_id"], one, b))
    check(one["metadata"]["self"] == base + "/brokers/%d" % b["broker_id"], "broker self")


@S.scenario("topics")
def topics():
    cid = cluster_id()
    t = name("topics")
    got = create_topic(cid, t, 3, [{"name": "cleanup.policy", "value": "compact"}])
    check(got["kind"] == "KafkaTopic" and got["replication_factor"] == 1, "created %r" % got)
    status, hdrs, _ = http("GET", "/v3/clusters/%s/topics/%s" % (cid, t))
    check(status == 200, "describe after create: %s" % status)
    listed = ok("GET", "/v3/clusters/%s/topics" % cid)
    check(listed["kind"] == "KafkaTopicList", "list kind")
    mine = [x for x in listed["data"] if x["topic_name"] == t]
    check(len(mine) == 1 and mine[0]["partitions_count"] == 3, "listed: %r" % mine)
    d = ok("GET", "/v3/clusters/%s/topics/%s" % (cid, t))
    check(d["partitions_count"] == 3 and d["is_internal"] is False, "describe: %r" % d)
    check(d["metadata"]["resource_name"] == "crn:///kafka=%s/topic=%s" % (cid, t), "crn")
    check(d["partitions"]["related"].endswith("/topics/%s/partitions" % t), "partitions link")
    ps = ok("GET", "/v3/clusters/%s/topics/%s/partitions" % (cid, t))
    check(ps["kind"] == "KafkaPartitionList"
          and [p["partition_id"] for p in ps["data"]] == [0, 1, 2], "partitions: %r" % ps)
    p1 = ok("GET", "/v3/clusters/%s/topics/%s/partitions/1" % (cid, t))
    check(p1["kind"] == "KafkaPartition" and p1["partition_id"] == 1
          and "/partitions/1/replicas/" in p1["leader"]["related"], "partition 1: %r" % p1)
    # The config given at creation is the topic's.
    cp = ok("GET", "/v3/clusters/%s/topics/%s/configs/cleanup.policy" % (cid, t))
    check(cp["value"] == "compact", "cleanup.policy: %r" % cp)
    refused("POST", "/v3/clusters/%s/topics" % cid, 400, 40002,
            body={"topic_name": t, "partitions_count": 1, "replication_factor": 1},
            message="Topic '%s' already exists." % t)
    status, _, body = http("DELETE", "/v3/clusters/%s/topics/%s" % (cid, t))
    check(status == 204 and body is None, "delete: %s %r" % (status, body))
    wait_until(lambda: http("GET", "/v3/clusters/%s/topics/%s" % (cid, t))[0] == 404, T,
               "the deleted topic to be gone")
    refused("GET", "/v3/clusters/%s/topics/%s" % (cid, t), 404, 40403,
            message="This server does not host this topic-partition.")
    refused("DELETE", "/v3/clusters/%s/topics/%s" % (cid, t), 404, 40403)


@S.scenario("configs")
def configs():
    cid = cluster_id()
    t = name("configs")
    create_topic(cid, t)
    base = "/v3/clusters/%s/topics/%s/configs" % (cid, t)
    listed = ok("GET", base)
    check(listed["kind"] == "KafkaTopicConfigList", "kind: %r" % listed.get("kind"))
    by_name = {c["name"]: c for c in listed["data"]}
    rm = by_name.get("retention.ms")
    check(rm is not None and rm["is_default"] and rm["source"] == "DEFAULT_CONFIG"
          and rm["topic_name"] == t and rm["kind"] == "KafkaTopicConfig", "retention.ms: %r" % rm)
    check(isinstance(rm["synonyms"], list), "synonyms: %r" % rm)
    status, _, body = http("PUT", base + "/retention.ms", {"value": "3600000"})
    check(status == 204, "PUT: %s %r" % (status, body))
    got = ok("GET", base + "/retention.ms")
    check(got["value"] == "3600000" and not got["is_default"]
          and got["source"] == "DYNAMIC_TOPIC_CONFIG", "after PUT: %r" % got)
    check(got["metadata"]["self"] == URL + base + "/retention.ms", "self: %r" % got["metadata"])
    status, _, body = http("POST", base + ":alter", {"data": [
        {"name": "segment.ms", "value": "7200000"},
        {"name": "retention.ms", "operation": "DELETE"},
        {"name": "max.message.bytes", "value": "500000", "operation": "SET"}]})
    check(status == 204, "alter: %s %r" % (status, body))
    by_name = {c["name"]: c for c in ok("GET", base)["data"]}
    check(by_name["segment.ms"]["value"] == "7200000", "segment.ms: %r" % by_name["segment.ms"])
    check(by_name["max.message.bytes"]["value"] == "500000", "max.message.bytes")
    check(by_name["retention.ms"]["is_default"], "retention.ms back to default: %r"
          % by_name["retention.ms"])
    status, _, _ = http("DELETE", base + "/segment.ms")
    check(status == 204, "DELETE: %s" % status)
    check(ok("GET", base + "/segment.ms")["is_default"], "segment.ms back to default")
    refused("PUT", base + "/retention.ms", 400, 40002, body={"value": "not-a-number"})
    refused("GET", base + "/no.such.config", 404, 404)


@S.scenario("produce-binary")
def produce_binary():
    cid = cluster_id()
    t = name("binary")
    create_topic(cid, t, 2)
    status, rs = produce(cid, t, [{
        "partition_id": 1,
        "headers": [{"name": "trace", "value": b64(b"\x00\x01h")}],
        "key": {"type": "BINARY", "data": b64(b"\xffkey")},
        "value": {"type": "BINARY", "data": b64(b"\x00\x01binary value")},
        "timestamp": "2026-01-02T03:04:05.678Z"}])
    check(status == 200 and len(rs) == 1, "produce: %s %r" % (status, rs))
    r = rs[0]
    check(r["error_code"] == 200 and r["partition_id"] == 1 and r["offset"] == 0
          and r["topic_name"] == t and r["cluster_id"] == cid, "report: %r" % r)
    check(r["key"] == {"type": "BINARY", "size": 4}
          and r["value"] == {"type": "BINARY", "size": 14}, "sizes: %r" % r)
    check(r["timestamp"] == "2026-01-02T03:04:05.678Z", "timestamp: %r" % r["timestamp"])
    m = consume(t, 1)[0]
    check(m.partition() == 1 and m.key() == b"\xffkey" and m.value() == b"\x00\x01binary value",
          "read back: %r %r %r" % (m.partition(), m.key(), m.value()))
    check(m.headers() == [("trace", b"\x00\x01h")], "headers: %r" % m.headers())
    check(m.timestamp()[1] == 1767323045678, "record timestamp: %r" % (m.timestamp(),))


@S.scenario("produce-json")
def produce_json():
    cid = cluster_id()
    t = name("json")
    create_topic(cid, t, 4)
    docs = [{"id": i, "tags": ["a", "b"], "nested": {"ok": True}} for i in range(6)]
    status, rs = produce(cid, t, [{"key": {"type": "STRING", "data": "user-%d" % (i % 2)},
                                   "value": {"type": "JSON", "data": d}}
                                  for i, d in enumerate(docs)])
    check(status == 200 and len(rs) == 6, "produce: %s %r" % (status, rs))
    check(all(r["error_code"] == 200 and r["value"]["type"] == "JSON"
              and r["key"] == {"type": "STRING", "size": 6} for r in rs), "reports: %r" % rs)
    # A key's records share a partition, the one the Java client (murmur2) picks.
    by_key = {}
    for i, r in enumerate(rs):
        by_key.setdefault("user-%d" % (i % 2), set()).add(r["partition_id"])
    check(all(len(ps) == 1 for ps in by_key.values()), "partitions by key: %r" % by_key)
    p = Producer({"bootstrap.servers": BOOTSTRAP, "partitioner": "murmur2_random"})
    java = {}
    for k in by_key:
        p.produce(t, key=k.encode(), value=b"{}",
                  on_delivery=lambda err, m, k=k: java.__setitem__(k, m.partition()))
    check(p.flush(T) == 0, "java-partitioned records unacknowledged")
    check(java == {k: next(iter(v)) for k, v in by_key.items()},
          "murmur2 partitions %r, REST %r" % (java, by_key))
    got = consume(t, 8)
    values = sorted((json.loads(m.value()) for m in got if m.value() != b"{}"),
                    key=lambda d: d["id"])
    check(values == docs, "values read back: %r" % values)


def chunk(data):
    return b"%x\r\n%s\r\n" % (len(data), data)


class ChunkedReader:
    """Reads an HTTP/1.1 response with a chunked body from a socket, incrementally."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.body = b""
        self.done = False

    def _more(self):
        data = self.sock.recv(65536)
        if not data:
            raise AssertionError("the connection closed early: %r" % self.buf)
        self.buf += data

    def head(self):
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = dict(l.split(": ", 1) for l in lines[1:] if ": " in l)
        return status, {k.lower(): v for k, v in hdrs.items()}

    def until_reports(self, n):
        """Reads body chunks until `n` reports arrived (or the body ended)."""
        while len(reports(self.body.decode())) < n and not self.done:
            while b"\r\n" not in self.buf:
                self._more()
            size_line, rest = self.buf.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            while len(rest) < size + 2:
                self._more()
                size_line, rest = self.buf.split(b"\r\n", 1)
            if size == 0:
                self.done = True
            self.body += rest[:size]
            self.buf = rest[size + 2:]
        return reports(self.body.decode())


@S.scenario("produce-streaming")
def produce_streaming():
    cid = cluster_id()
    t = name("stream")
    create_topic(cid, t)
    # Several records in one body: one report each, in order.
    recs = [{"value": {"type": "STRING", "data": "batch-%d" % i}} for i in range(3)]
    status, rs = produce(cid, t, recs)
    check(status == 200 and [r["error_code"] for r in rs] == [200] * 3, "batch: %r" % rs)
    check([r["offset"] for r in rs] == [0, 1, 2], "offsets: %r" % rs)
    # A chunked body kept open: the first report comes back before the next record is sent.
    host, port = urllib.parse.urlsplit(URL).netloc.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=T)
    try:
        s.sendall(("POST /v3/clusters/%s/topics/%s/records HTTP/1.1\r\nHost: %s:%s\r\n"
                   "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                   % (cid, t, host, port)).encode())
        first = json.dumps({"value": {"type": "JSON", "data": {"n": 0}}}).encode()
        # The record split across two chunks.
        s.sendall(chunk(first[:10]) + chunk(first[10:]))
        r = ChunkedReader(s)
        status, hdrs = r.head()
        check(status == 200, "streaming status %s" % status)
        got = r.until_reports(1)
        check(len(got) == 1 and got[0]["error_code"] == 200 and got[0]["offset"] == 3,
              "first report before the rest was sent: %r" % got)
        more = b"".join(json.dumps({"value": {"type": "JSON", "data": {"n": i}}}).encode()
                        for i in (1, 2, 3))
        s.sendall(chunk(more) + b"0\r\n\r\n")
        got = r.until_reports(4)
    finally:
        s.close()
    check([g["error_code"] for g in got] == [200] * 4, "streamed reports: %r" % got)
    check([g["offset"] for g in got] == [3, 4, 5, 6], "streamed offsets: %r" % got)
    values = [m.value() for m in consume(t, 7)]
    check(values == [b"batch-0", b"batch-1", b"batch-2"]
          + [json.dumps({"n": i}, separators=(",", ":")).encode() for i in range(4)],
          "read back: %r" % values)


@S.scenario("group-lag", timeout=90)
def group_lag():
    cid = cluster_id()
    t = name("lag")
    g = name("group")
    create_topic(cid, t, 2)
    status, rs = produce(cid, t, [{"partition_id": i % 2, "value": {"type": "STRING",
                                                                    "data": "v%d" % i}}
                                  for i in range(10)])
    check(status == 200 and all(r["error_code"] == 200 for r in rs), "produce: %r" % rs)
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": g, "client.id": "rp-client",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([t])
    try:
        read = []
        deadline = time.monotonic() + T
        while len(read) < 10 and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and not m.error():
                read.append(m)
        check(len(read) == 10, "consumed %d of 10" % len(read))
        # Commit 2 of partition 0's 5 records and all of partition 1's.
        c.commit(offsets=[TopicPartition(t, 0, 2), TopicPartition(t, 1, 5)], asynchronous=False)
        base = "/v3/clusters/%s/consumer-groups/%s" % (cid, g)
        grp = ok("GET", base)
        check(grp["kind"] == "KafkaConsumerGroup" and grp["consumer_group_id"] == g
              and grp["state"] == "STABLE" and grp["type"] in ("CLASSIC", "CONSUMER")
              and grp["is_simple"] is False, "group: %r" % grp)
        check(grp["lag_summary"]["related"] == URL + base + "/lag-summary", "lag link")
        listed = ok("GET", "/v3/clusters/%s/consumer-groups" % cid)
        check(g in [x["consumer_group_id"] for x in listed["data"]], "listed: %r" % listed)
        cons = ok("GET", base + "/consumers")
        check(len(cons["data"]) == 1 and cons["data"][0]["client_id"] == "rp-client",
              "consumers: %r" % cons)
        member = cons["data"][0]["consumer_id"]
        one = ok("GET", base + "/consumers/" + urllib.parse.quote(member, safe=""))
        check(one["consumer_id"] == member, "consumer: %r" % one)
        lags = ok("GET", base + "/lags")
        rows = sorted((x["partition_id"], x["current_offset"], x["log_end_offset"], x["lag"],
                       x["consumer_id"]) for x in lags["data"])
        check(rows == [(0, 2, 5, 3, member), (1, 5, 5, 0, member)], "lags: %r" % rows)
        summary = ok("GET", base + "/lag-summary")
        check(summary["total_lag"] == 3 and summary["max_lag"] == 3
              and summary["max_lag_partition_id"] == 0 and summary["max_lag_topic_name"] == t
              and summary["max_lag_client_id"] == "rp-client", "summary: %r" % summary)
    finally:
        c.close()


@S.scenario("errors")
def errors():
    cid = cluster_id()
    t = name("errors")
    create_topic(cid, t)
    refused("GET", "/v3/clusters/no-such-cluster", 404, 404,
            message="Cluster no-such-cluster cannot be found.")
    refused("GET", "/v3/clusters/no-such-cluster/topics", 404, 404)
    refused("GET", "/v3/clusters/%s/topics/no-such-topic-%s" % (cid, RUN_TAG), 404, 40403)
    refused("GET", "/v3/clusters/%s/topics/%s/partitions/7" % (cid, t), 404, 40403)
    refused("GET", "/v3/clusters/%s/topics/no-such-topic-%s/configs" % (cid, RUN_TAG), 404, 40403)
    refused("GET", "/v3/clusters/%s/consumer-groups/no-such-group-%s" % (cid, RUN_TAG), 404, 404)
    refused("GET", "/v3/clusters/%s/brokers/99" % cid, 404, 404)
    refused("POST", "/v3/clusters/%s/topics" % cid, 400, 400, raw=b"{not json")
    refused("POST", "/v3/clusters/%s/topics" % cid, 400, 400, body={"partitions_count": 1})
    refused("POST", "/v3/clusters/%s/topics/%s/configs:alter" % (cid, t), 400, 400,
            raw=b"[1, 2")
    refused("POST", "/v3/clusters/%s/topics/%s/records" % (cid, t), 422, 42206, raw=b"")
    refused("POST", "/v3/clusters/%s/topics/no-such-topic-%s/records" % (cid, RUN_TAG),
            404, 40403, body={"value": {"type": "STRING", "data": "x"}})
    # Errors in a record are its report; the records around it are written.
    status, rs = produce(cid, t, [
        {"value": {"type": "STRING", "data": "before"}},
        {"value": {"type": "BINARY", "data": "not base64!"}},
        {"value": {"type": "STRING", "data": 17}},
        {"value": {"type": "NOPE", "data": "x"}},
        {"partition_id": 5, "value": {"type": "STRING", "data": "x"}},
        {"value": {"type": "STRING", "data": "after"}}])
    check(status == 200, "status %s" % status)
    check([r["error_code"] for r in rs] == [200, 400, 400, 400, 40402, 200], "reports: %r" % rs)
    check(all(isinstance(r.get("message"), str) for r in rs[1:5]), "messages: %r" % rs)
    # A body that stops parsing: the records before it are written, then one error.
    raw = json.dumps({"value": {"type": "STRING", "data": "last"}}).encode() + b' {"value": ['
    status, _, body = http("POST", "/v3/clusters/%s/topics/%s/records" % (cid, t), raw=raw)
    rs = reports(body)
    check(status == 200 and [r["error_code"] for r in rs] == [200, 400], "cut body: %r" % rs)
    values = [m.value() for m in consume(t, 3)]
    check(values == [b"before", b"after", b"last"], "written: %r" % values)
    # The broker still serves.
    check(cluster_id() == cid, "cluster id changed")


@S.scenario("acl", timeout=90)
def acl():
    refused("GET", "/v3/clusters", 401, 40101)
    refused("GET", "/v3/clusters", 401, 40101, auth=("alice", "wrong"))
    cid = cluster_id(auth=ADMIN)
    check(cluster_id(auth=ALICE) == cid, "alice sees another cluster id")
    t = name("acl")
    create_topic(cid, t, auth=ADMIN)
    admin_view = ok("GET", "/v3/clusters/%s/topics" % cid, auth=ADMIN)
    check(t in [x["topic_name"] for x in admin_view["data"]], "admin does not list " + t)
    alice_view = ok("GET", "/v3/clusters/%s/topics" % cid, auth=ALICE)
    check(t not in [x["topic_name"] for x in alice_view["data"]], "alice lists " + t)
    refused("GET", "/v3/clusters/%s/topics/%s" % (cid, t), 403, 40301, auth=ALICE)
    refused("GET", "/v3/clusters/%s/topics/%s/configs" % (cid, t), 403, 40301, auth=ALICE)
    refused("POST", "/v3/clusters/%s/topics" % cid, 403, 40301, auth=ALICE,
            body={"topic_name": name("alice-made"), "partitions_count": 1})
    refused("DELETE", "/v3/clusters/%s/topics/%s" % (cid, t), 403, 40301, auth=ALICE)
    refused("POST", "/v3/clusters/%s/topics/%s/records" % (cid, t), 403, 40301, auth=ALICE,
            body={"value": {"type": "STRING", "data": "denied"}})
    # Granted WRITE and DESCRIBE, alice produces through the proxy as herself.
    a = AdminClient(sasl(*ADMIN))
    acls = [AclBinding(ResourceType.TOPIC, t, ResourcePatternType.LITERAL, "User:alice", "*",
                       op, AclPermissionType.ALLOW)
            for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
    for f in a.create_acls(acls, request_timeout=T).values():
        f.result()
    wait_until(lambda: http("GET", "/v3/clusters/%s/topics/%s" % (cid, t), auth=ALICE)[0] == 200,
               T, "alice's DESCRIBE to apply")
    status, rs = produce(cid, t, [{"value": {"type": "STRING", "data": "by alice"}}], auth=ALICE)
    check(status == 200 and rs and rs[0]["error_code"] == 200, "alice's produce: %r" % rs)
    # Still no READ for her: the config read (DESCRIBE_CONFIGS) stays refused.
    refused("GET", "/v3/clusters/%s/topics/%s/configs" % (cid, t), 403, 40301, auth=ALICE)
    m = consume(t, 1, sasl(*ADMIN))[0]
    check(m.value() == b"by alice", "read back: %r" % m.value())


@S.scenario("off")
def off():
    proxy_off("/v3/clusters")


PHASES = {
    "main": ["clusters", "topics", "configs", "produce-binary", "produce-json",
             "produce-streaming", "group-lag", "errors"],
    "acl": ["acl"],
    "off": ["off"],
}

if __name__ == "__main__":
    main_phase(S, PHASES, PHASE)
