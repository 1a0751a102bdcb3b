#!/usr/bin/env python3
"""REST Proxy suite, API v2: produce in the binary, JSON, Avro, JSON Schema and Protobuf
embedded formats, topics
and brokers, and consumer instances that are real members of their group, cross-checked with
confluent-kafka's Producer, Consumer, AdminClient and its Schema Registry serializers. REST_PHASE selects the scenarios of one
broker start (main, acl; see run)."""
import base64
import json
import os
import time

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

import protos
from harness import BOOTSTRAP, RUN_TAG, Suite, check, info, main_phase, wait_until
from rest_http import ALICE, T, URL, b64, consume, http, name, ok, proxy_off
from rest_http import refused as refused_as

PHASE = os.environ.get("REST_PHASE", "main")
S = Suite("rest-proxy")
V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON = "application/vnd.kafka.json.v2+json"
AVRO = "application/vnd.kafka.avro.v2+json"
JSONSCHEMA = "application/vnd.kafka.jsonschema.v2+json"
PROTOBUF = "application/vnd.kafka.protobuf.v2+json"
# The main phase's sluice.rest.consumer.instance.timeout.ms (see run).
INSTANCE_TIMEOUT = float(os.environ.get("REST_INSTANCE_TIMEOUT_MS", "15000")) / 1000


def refused(*args, **kw):
    """A refusal answered in v2's content type unless `answer_type` says otherwise."""
    kw.setdefault("answer_type", V2)
    return refused_as(*args, **kw)


def admin(conf=None):
    return AdminClient(dict({"bootstrap.servers": BOOTSTRAP}, **(conf or {})))


def create_topic(topic, partitions, auth=None):
    """Creates a topic through v3 (v2 has no topic creation)."""
    cid = ok("GET", "/v3/clusters", auth=auth)["data"][0]["cluster_id"]
    ok("POST", "/v3/clusters/%s/topics" % cid, {"topic_name": topic,
                                                "partitions_count": partitions,
                                                "replication_factor": 1},
       status=201, auth=auth)


def produce_v2(path, records, ctype, auth=None, status=200):
    got_status, hdrs, got = http("POST", path, {"records": records}, auth=auth,
                                 content_type=ctype)
    check(got_status == status, "POST %s: %s %r" % (path, got_status, got))
    check((hdrs.get("Content-Type") or "").startswith(V2), "content type %r"
          % hdrs.get("Content-Type"))
    check(got["key_schema_id"] is None and got["value_schema_id"] is None, "ids: %r" % got)
    check(len(got["offsets"]) == len(records), "offsets: %r" % got)
    return got["offsets"]


def produce_real(topic, values, partition=0):
    p = Producer({"bootstrap.servers": BOOTSTRAP})
    for v in values:
        p.produce(topic, value=v, partition=partition)
    check(p.flush(T) == 0, "records unacknowledged")


def new_instance(group, inst, fmt="binary", reset="earliest", auto_commit="false", auth=None):
    got = ok("POST", "/consumers/%s" % group, {"name": inst, "format": fmt,
                                                "auto.offset.reset": reset,
                                                "auto.commit.enable": auto_commit},
             auth=auth, content_type=V2)
    check(got["instance_id"] == inst, "instance: %r" % got)
    base = "/consumers/%s/instances/%s" % (group, inst)
    check(got["base_uri"] == URL + base, "base_uri: %r" % got)
    return base


def call(method, path, body=None, status=204, auth=None):
    got_status, _, got = http(method, path, body, auth=auth, content_type=V2)
    check(got_status == status, "%s %s: %s %r" % (method, path, got_status, got))
    return got


def read(base, want, accept=BINARY, auth=None, budget=T):
    """Reads until `want` records came (bounded in time); every answer in `accept`."""
    got = []
    deadline = time.monotonic() + budget
    while len(got) < want and time.monotonic() < deadline:
        status, hdrs, body = http("GET", base + "/records?timeout=500", auth=auth,
                                  headers={"Accept": accept})
        check(status == 200, "records: %s %r" % (status, body))
        check(hdrs.get("Content-Type") == accept, "records type %r" % hdrs.get("Content-Type"))
        got.extend(body)
    check(len(got) == want, "read %d of %d records: %r" % (len(got), want, got))
    return got


def members(group):
    # The AdminClient stays referenced until its answer came: a destroyed one fails its
    # pending requests.
    a = admin()
    d = a.describe_consumer_groups([group], request_timeout=T)[group].result(timeout=T)
    return [(m.client_id, sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions))
            for m in d.members]


def committed(group, topic, partitions):
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p)
                                               for p in range(partitions)])
    a = admin()
    got = a.list_consumer_group_offsets([req], request_timeout=T)[group].result(timeout=T)
    return {tp.partition: tp.offset for tp in got.topic_partitions}


@S.scenario("v2-topics")
def v2_topics():
    t = name("v2topics")
    create_topic(t, 2)
    check(t in ok("GET", "/topics"), "GET /topics lacks " + t)
    d = ok("GET", "/topics/" + t)
    check(d["name"] == t and d["configs"].get("cleanup.policy") == "delete", "topic: %r" % d)
    check([p["partition"] for p in d["partitions"]] == [0, 1], "partitions: %r" % d)
    p0 = d["partitions"][0]
    check(p0["leader"] >= 0 and p0["replicas"] == [{"broker": p0["leader"], "leader": True,
                                                    "in_sync": True}], "replicas: %r" % p0)
    check(ok("GET", "/topics/%s/partitions" % t) == d["partitions"], "partitions list")
    check(ok("GET", "/topics/%s/partitions/1" % t) == d["partitions"][1], "partition 1")
    produce_real(t, [b"a", b"b", b"c"], partition=1)
    check(ok("GET", "/topics/%s/partitions/1/offsets" % t)
          == {"beginning_offset": 0, "end_offset": 3}, "offsets")
    brokers = ok("GET", "/brokers")["brokers"]
    check(brokers == [p0["leader"]], "brokers: %r" % brokers)
    refused("GET", "/topics/no-such-%s" % RUN_TAG, 404, 40401, message="Topic not found.")
    refused("GET", "/topics/%s/partitions/9" % t, 404, 40402, message="Partition not found.")


@S.scenario("v2-produce")
def v2_produce():
    t = name("v2produce")
    create_topic(t, 2)
    offs = produce_v2("/topics/" + t, [
        {"key": b64(b"k\x00"), "value": b64(b"\x00\xffbinary"), "partition": 0},
        {"value": b64(b"v2"), "partition": 1},
        {"value": None, "partition": 0}], BINARY)
    check(offs[1] == {"partition": 1, "offset": 0, "error_code": None, "error": None},
          "offsets: %r" % offs)
    check(all(o["error_code"] is None and o["offset"] >= 0 for o in offs), "offsets: %r" % offs)
    offs2 = produce_v2("/topics/%s/partitions/1" % t,
                       [{"value": {"id": 1, "tags": ["x"]}}, {"key": "k", "value": [1, 2]}],
                       JSON)
    check([(o["partition"], o["offset"]) for o in offs2] == [(1, 1), (1, 2)],
          "json offsets: %r" % offs2)
    got = {(m.partition(), m.offset()): (m.key(), m.value()) for m in consume(t, 5)}
    check([(o["partition"], o["offset"]) for o in offs] == [(0, 0), (1, 0), (0, 1)],
          "binary offsets: %r" % offs)
    check(got[(0, 0)] == (b"k\x00", b"\x00\xffbinary"), "binary: %r" % got)
    check(got[(1, 0)] == (None, b"v2") and got[(0, 1)] == (None, None), "read back: %r" % got)
    check(got[(1, 1)] == (None, b'{"id":1,"tags":["x"]}') and got[(1, 2)] == (b'"k"', b"[1,2]"),
          "json read back: %r" % got)
    refused("POST", "/topics/" + t, 415, 415, body={"records": [{"value": "eA=="}]},
            message="HTTP 415 Unsupported Media Type")
    refused("POST", "/topics/" + t, 415, 415, body={"records": [{"value": "eA=="}]},
            content_type="text/plain")
    refused("POST", "/topics/no-such-%s" % RUN_TAG, 404, 40401, body={"records": [{"value": 1}]},
            content_type=JSON)
    refused("POST", "/topics/%s/partitions/7" % t, 404, 40402, body={"records": [{"value": 1}]},
            content_type=JSON)
    refused("POST", "/topics/" + t, 422, 42207, body={"records": [{"value": "not base64!"}]},
            content_type=BINARY)
    refused("POST", "/topics/" + t, 400, 400, raw=b"{nope", content_type=JSON)


@S.scenario("v2-consume", timeout=120)
def v2_consume():
    t = name("v2consume")
    g = name("v2group")
    create_topic(t, 2)
    for p in (0, 1):
        produce_real(t, [b"p%d-%d" % (p, i) for i in range(5)], partition=p)
    base = new_instance(g, "rest-a")
    call("POST", base + "/subscription", {"topics": [t]})
    check(ok("GET", base + "/subscription") == {"topics": [t]}, "subscription")
    got = read(base, 10)
    check(sorted((r["partition"], r["offset"]) for r in got)
          == [(p, o) for p in (0, 1) for o in range(5)], "records: %r" % got)
    check(all(r["topic"] == t and r["key"] is None for r in got), "records: %r" % got)
    check(sorted(base64.b64decode(r["value"]) for r in got)
          == sorted(b"p%d-%d" % (p, i) for p in (0, 1) for i in range(5)), "values")
    assigned = ok("GET", base + "/assignments")["partitions"]
    check(sorted((a["topic"], a["partition"]) for a in assigned) == [(t, 0), (t, 1)],
          "assignments: %r" % assigned)
    # The instance is the group's one member, as the group tools see it.
    check(members(g) == [("rest-consumer-rest-a", [(t, 0), (t, 1)])], "members: %r" % members(g))
    # Commit everything read (an empty body), then partition 1 back at offset 2 (+1).
    check(call("POST", base + "/offsets", None, status=200) == [], "commit answer")
    check(committed(g, t, 2) == {0: 5, 1: 5}, "committed: %r" % committed(g, t, 2))
    check(call("POST", base + "/offsets", {"offsets": [{"topic": t, "partition": 1,
                                                        "offset": 2}]}, status=200) == [],
          "commit answer")
    got_status, _, c = http("GET", base + "/offsets", {"partitions": [
        {"topic": t, "partition": 0}, {"topic": t, "partition": 1}]}, content_type=V2)
    check(got_status == 200 and c == {"offsets": [
        {"topic": t, "partition": 0, "offset": 5, "metadata": ""},
        {"topic": t, "partition": 1, "offset": 3, "metadata": ""}]}, "committed: %r" % c)
    call("DELETE", base)
    refused("GET", base + "/records", 404, 40403, message="Consumer instance not found.",
            answer_type=BINARY, headers={"Accept": BINARY})
    wait_until(lambda: members(g) == [], T, "the instance to leave the group")
    # A real consumer of the group starts where the instance committed.
    produce_real(t, [b"after"], partition=0)
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": g, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([t])
    seen = []
    deadline = time.monotonic() + T
    try:
        while len(seen) < 3 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                seen.append((m.partition(), m.offset(), m.value()))
    finally:
        c.close()
    check(sorted(seen) == [(0, 5, b"after"), (1, 3, b"p1-3"), (1, 4, b"p1-4")],
          "the real consumer read %r" % seen)


@S.scenario("v2-rebalance", timeout=120)
def v2_rebalance():
    t = name("v2rebalance")
    g = name("v2rgroup")
    create_topic(t, 2)
    base = new_instance(g, "rest-b", fmt="json", auto_commit="true")
    call("POST", base + "/subscription", {"topic_pattern": "rp-v2rebalance-%s" % RUN_TAG})
    check(ok("GET", base + "/subscription") == {"topics": [t]}, "pattern subscription")
    wait_until(lambda: members(g) == [("rest-consumer-rest-b", [(t, 0), (t, 1)])], T,
               "the instance to own both partitions")
    # A real consumer joins: the range assignor splits the partitions between the two.
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": g, "client.id": "real",
                  "auto.offset.reset": "earliest", "partition.assignment.strategy": "range"})
    c.subscribe([t])
    try:
        def split():
            c.poll(0.2)
            ms = dict(members(g))
            return (len(ms) == 2 and len(ms.get("real", [])) == 1
                    and len(ms.get("rest-consumer-rest-b", [])) == 1)
        wait_until(split, T, "the partitions to be split between the two members")
        mine = ok("GET", base + "/assignments")["partitions"]
        check(len(mine) == 1, "the instance's assignment: %r" % mine)
        p = mine[0]["partition"]
        produce_real(t, [b'{"n": %d}' % i for i in range(3)], partition=p)
        got = read(base, 3, accept=JSON)
        check([r["value"] for r in got] == [{"n": 0}, {"n": 1}, {"n": 2}], "json: %r" % got)
        # Auto-commit: the positions reach the group within its interval (5 s).
        wait_until(lambda: c.poll(0.1) is None and committed(g, t, 2).get(p) == 3, T,
                   "the automatic commit")
    finally:
        c.close()
    call("DELETE", base)


@S.scenario("v2-seek", timeout=90)
def v2_seek():
    t = name("v2seek")
    g = name("v2sgroup")
    create_topic(t, 1)
    produce_real(t, [b"s%d" % i for i in range(6)])
    base = new_instance(g, "rest-c", reset="latest")
    call("POST", base + "/assignments", {"partitions": [{"topic": t, "partition": 0}]})
    check(ok("GET", base + "/assignments") == {"partitions": [{"topic": t, "partition": 0}]},
          "assignments")
    # reset=latest: nothing old is read until a seek.
    status, _, body = http("GET", base + "/records?timeout=200", headers={"Accept": BINARY})
    check(status == 200 and body == [], "latest: %s %r" % (status, body))
    call("POST", base + "/positions/beginning", {"partitions": [{"topic": t, "partition": 0}]})
    got = read(base, 6)
    check([r["offset"] for r in got] == list(range(6)), "from the beginning: %r" % got)
    call("POST", base + "/positions", {"offsets": [{"topic": t, "partition": 0, "offset": 4}]})
    check([r["offset"] for r in read(base, 2)] == [4, 5], "from offset 4")
    call("POST", base + "/positions", {"timestamps": [
        {"topic": t, "partition": 0, "timestamp": "2000-01-01T00:00:00Z"}]})
    check(read(base, 6)[0]["offset"] == 0, "from a timestamp")
    call("POST", base + "/positions/end", {"partitions": [{"topic": t, "partition": 0}]})
    # The seek resolves at the next read (as the Java consumer's): before the new record.
    status, _, body = http("GET", base + "/records?timeout=200", headers={"Accept": BINARY})
    check(status == 200 and body == [], "at the end: %s %r" % (status, body))
    produce_real(t, [b"new"])
    got = read(base, 1)
    check(got[0]["offset"] == 6 and base64.b64decode(got[0]["value"]) == b"new", "from the end: %r" % got)
    # max_bytes: a record that would reach the limit stays for the next read.
    call("POST", base + "/positions/beginning", {"partitions": [{"topic": t, "partition": 0}]})
    status, _, body = http("GET", base + "/records?timeout=300&max_bytes=5",
                           headers={"Accept": BINARY})
    check(status == 200 and [r["offset"] for r in body] == [0, 1], "max_bytes: %r" % body)
    # A simple (unsubscribed) consumer commits too.
    call("POST", base + "/offsets", {"offsets": [{"topic": t, "partition": 0, "offset": 1}]},
         status=200)
    check(committed(g, t, 1) == {0: 2}, "committed: %r" % committed(g, t, 1))
    call("DELETE", base)


@S.scenario("v2-errors", timeout=90)
def v2_errors():
    t = name("v2errors")
    g = name("v2egroup")
    create_topic(t, 1)
    missing = "/consumers/%s/instances/nobody" % g
    for method, path in [("GET", "/records"), ("POST", "/subscription"), ("GET", "/assignments"),
                         ("POST", "/offsets"), ("DELETE", "")]:
        refused(method, missing + path, 404, 40403, message="Consumer instance not found.",
                answer_type=V2 if path != "/records" else BINARY,
                body={"topics": [t]} if method == "POST" else None, content_type=V2)
    base = new_instance(g, "rest-d")
    refused("POST", "/consumers/" + g, 409, 40902, body={"name": "rest-d"}, content_type=V2,
            message="Consumer with specified consumer ID already exists in the specified "
                    "consumer group.")
    refused("POST", "/consumers/" + g, 422, 42204, body={"name": "x", "auto.offset.reset": "no"},
            content_type=V2)
    refused("POST", "/consumers/" + g, 415, 415, body={"name": "y"}, content_type="text/plain")
    # consumer.request.timeout.ms is an Integer: a larger number is a body it cannot read.
    refused("POST", "/consumers/" + g, 400, 400, content_type=V2,
            body={"name": "z", "consumer.request.timeout.ms": 2 ** 40})
    # Reading before subscribing, and in another format than the instance's.
    refused("GET", base + "/records", 409, 40903, headers={"Accept": BINARY},
            answer_type=BINARY)
    refused("GET", base + "/records", 406, 40601, headers={"Accept": JSON}, answer_type=JSON)
    refused("GET", base + "/records", 406, 406, headers={"Accept": "text/html"},
            message="HTTP 406 Not Acceptable")
    call("POST", base + "/subscription", {"topics": [t]})
    refused("POST", base + "/assignments", 409, 40903,
            body={"partitions": [{"topic": t, "partition": 0}]}, content_type=V2)
    refused("POST", base + "/positions", 409, 40903, content_type=V2,
            body={"offsets": [{"topic": t, "partition": 5, "offset": 0}]},
            message="Illegal state: No current assignment for partition %s-5" % t)
    call("DELETE", base + "/subscription")
    check(ok("GET", base + "/subscription") == {"topics": []}, "unsubscribed")
    call("DELETE", base)


@S.scenario("v2-expiry", timeout=90)
def v2_expiry():
    t = name("v2expiry")
    g = name("v2xgroup")
    create_topic(t, 1)
    base = new_instance(g, "rest-e")
    call("POST", base + "/subscription", {"topics": [t]})
    wait_until(lambda: len(members(g)) == 1, T, "the instance to join")
    info("waiting %.0f s for the idle instance to expire" % INSTANCE_TIMEOUT)
    time.sleep(INSTANCE_TIMEOUT + 1)
    wait_until(lambda: members(g) == [], T, "the expired instance to leave its group")
    refused("GET", base + "/subscription", 404, 40403)
    # Its name is free again.
    new_instance(g, "rest-e")
    call("DELETE", base)


USER = {"type": "record", "name": "User", "namespace": "sluice.rest",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"},
                   {"name": "email", "type": ["null", "string"], "default": None}]}


def produce_avro(topic, body, ctype=AVRO):
    got_status, hdrs, got = http("POST", "/topics/" + topic, body, content_type=ctype)
    check(got_status == 200, "POST %s %s: %s %r" % (ctype, topic, got_status, got))
    check((hdrs.get("Content-Type") or "").startswith(V2), "content type %r"
          % hdrs.get("Content-Type"))
    check(len(got["offsets"]) == len(body["records"])
          and all(o["error_code"] is None for o in got["offsets"]), "offsets: %r" % got)
    return got


@S.scenario("v2-avro", timeout=120)
def v2_avro():
    t = name("v2avro")
    create_topic(t, 1)
    registry = SchemaRegistryClient({"url": URL})
    # Schemas given: registered under <topic>-key and <topic>-value.
    got = produce_avro(t, {"key_schema": '"string"', "value_schema": json.dumps(USER),
                           "records": [
                               {"key": "ada", "value": {"name": "ada", "age": 36,
                                                        "email": {"string": "a@x"}}},
                               {"key": "bo", "value": {"name": "bo", "age": 7,
                                                       "email": None}}]})
    kid, vid = got["key_schema_id"], got["value_schema_id"]
    check(isinstance(kid, int) and isinstance(vid, int) and kid != vid, "ids: %r" % got)
    check(registry.get_latest_version(t + "-value").schema_id == vid, "the value subject")
    check(registry.get_latest_version(t + "-key").schema_id == kid, "the key subject")
    # The same schema again is the same id; schemas by id; a field left to its default.
    got = produce_avro(t, {"value_schema": json.dumps(USER), "key_schema_id": kid,
                           "records": [{"key": "cy", "value": {"name": "cy", "age": 1}}]})
    check((got["key_schema_id"], got["value_schema_id"]) == (kid, vid), "ids: %r" % got)
    check(registry.get_versions(t + "-value") == [1], "versions: %r"
          % registry.get_versions(t + "-value"))
    # confluent-kafka's AvroDeserializer reads what v2 wrote.
    vctx = SerializationContext(t, MessageField.VALUE)
    kctx = SerializationContext(t, MessageField.KEY)
    values, keys = AvroDeserializer(registry), AvroDeserializer(registry)
    msgs = sorted(consume(t, 3), key=lambda m: m.offset())
    read_back = [(keys(m.key(), kctx), values(m.value(), vctx)) for m in msgs]
    check(read_back == [("ada", {"name": "ada", "age": 36, "email": "a@x"}),
                        ("bo", {"name": "bo", "age": 7, "email": None}),
                        ("cy", {"name": "cy", "age": 1, "email": None})],
          "AvroDeserializer read %r" % read_back)
    # A v2 avro instance reads what AvroSerializer wrote, beside what v2 wrote itself.
    p = Producer({"bootstrap.servers": BOOTSTRAP})
    ser = AvroSerializer(registry, json.dumps(USER))
    p.produce(t, value=ser({"name": "di", "age": 99, "email": "d@x"}, vctx), partition=0)
    check(p.flush(T) == 0, "records unacknowledged")
    base = new_instance(name("v2avrogroup"), "rest-avro", fmt="avro")
    call("POST", base + "/subscription", {"topics": [t]})
    got = sorted(read(base, 4, accept=AVRO), key=lambda r: r["offset"])
    check([(r["key"], r["value"]) for r in got] == [
        ("ada", {"name": "ada", "age": 36, "email": {"string": "a@x"}}),
        ("bo", {"name": "bo", "age": 7, "email": None}),
        ("cy", {"name": "cy", "age": 1, "email": None}),
        (None, {"name": "di", "age": 99, "email": {"string": "d@x"}})], "v2 read %r" % got)
    refused("GET", base + "/records", 406, 40601, headers={"Accept": BINARY},
            answer_type=BINARY)
    # A record not in the wire format fails the read (40801), as kafka-rest's deserializer.
    produce_real(t, [b"not avro"])
    status, _, body = http("GET", base + "/records?timeout=2000", headers={"Accept": AVRO})
    check(status == 408 and body["error_code"] == 40801, "plain bytes: %s %r" % (status, body))
    call("DELETE", base)
    # kafka-rest's refusals.
    rec = {"key": "k", "value": {"name": "x", "age": 1}}
    refused("POST", "/topics/" + t, 422, 42201, body={"value_schema_id": vid, "records": [rec]},
            content_type=AVRO, message="Request includes keys but does not include key schema")
    refused("POST", "/topics/" + t, 422, 42202, body={"key_schema_id": kid, "records": [rec]},
            content_type=AVRO,
            message="Request includes values but does not include value schema")
    refused("POST", "/topics/" + t, 400, 400, content_type=AVRO,
            body={"value_schema_id": vid, "records": [{"value": {"name": 5, "age": 1}}]})
    refused("POST", "/topics/" + t, 400, 400, content_type=AVRO,
            body={"value_schema": '{"type": "nope"}', "records": [{"value": 1}]})
    refused("POST", "/topics/" + t, 422, 42207, content_type=AVRO,
            body={"value_schema_id": 987654, "records": [{"value": 1}]})
    # An id registered under another subject: not this topic's value schema.
    refused("POST", "/topics/" + t, 422, 42207, content_type=AVRO,
            body={"value_schema_id": kid, "records": [{"value": "k"}]})
    # The registry's compatibility check refuses a value schema BACKWARD cannot follow.
    changed = dict(USER, fields=USER["fields"] + [{"name": "new", "type": "int"}])
    got = refused("POST", "/topics/" + t, 422, 42207, content_type=AVRO,
                  body={"value_schema": json.dumps(changed),
                        "records": [{"value": {"name": "x", "age": 1, "new": 2}}]})
    check("error code: 409" in got["message"], "incompatible: %r" % got)
    check(ok("GET", "/topics/%s/partitions/0/offsets" % t)["end_offset"] == 5,
          "refused requests wrote nothing")


ORDER = {"type": "object", "properties": {"id": {"type": "integer"},
                                          "item": {"type": "string"}},
         "required": ["id"]}


@S.scenario("v2-jsonschema", timeout=120)
def v2_jsonschema():
    t = name("v2jsonschema")
    create_topic(t, 1)
    registry = SchemaRegistryClient({"url": URL})
    # Schemas given: registered under <topic>-key and <topic>-value as JSON schemas.
    got = produce_avro(t, ctype=JSONSCHEMA, body={
        "key_schema": '{"type": "string"}', "value_schema": json.dumps(ORDER),
        "records": [{"key": "o1", "value": {"id": 1, "item": "pen"}},
                    {"key": "o2", "value": {"id": 2}}]})
    kid, vid = got["key_schema_id"], got["value_schema_id"]
    check(isinstance(kid, int) and isinstance(vid, int) and kid != vid, "ids: %r" % got)
    latest = registry.get_latest_version(t + "-value")
    check(latest.schema_id == vid and latest.schema.schema_type == "JSON",
          "the value subject: %r" % latest)
    # confluent-kafka's JSONDeserializer reads what v2 wrote.
    vctx = SerializationContext(t, MessageField.VALUE)
    kctx = SerializationContext(t, MessageField.KEY)
    values = JSONDeserializer(None, schema_registry_client=registry)
    keys = JSONDeserializer(None, schema_registry_client=registry)
    msgs = sorted(consume(t, 2), key=lambda m: m.offset())
    read_back = [(keys(m.key(), kctx), values(m.value(), vctx)) for m in msgs]
    check(read_back == [("o1", {"id": 1, "item": "pen"}), ("o2", {"id": 2})],
          "JSONDeserializer read %r" % read_back)
    # A v2 jsonschema instance reads what JSONSerializer wrote, beside what v2 wrote.
    p = Producer({"bootstrap.servers": BOOTSTRAP})
    ser = JSONSerializer(json.dumps(ORDER), registry)
    p.produce(t, value=ser({"id": 3, "item": "ink"}, vctx), partition=0)
    check(p.flush(T) == 0, "records unacknowledged")
    base = new_instance(name("v2jsgroup"), "rest-js", fmt="jsonschema")
    call("POST", base + "/subscription", {"topics": [t]})
    got = sorted(read(base, 3, accept=JSONSCHEMA), key=lambda r: r["offset"])
    check([(r["key"], r["value"]) for r in got] == [
        ("o1", {"id": 1, "item": "pen"}), ("o2", {"id": 2}), (None, {"id": 3, "item": "ink"})],
        "v2 read %r" % got)
    call("DELETE", base)
    # A value the schema refuses (400, kafka-rest's converter), a value without a schema.
    refused("POST", "/topics/" + t, 400, 400, content_type=JSONSCHEMA,
            body={"value_schema_id": vid, "records": [{"value": {"item": "no id"}}]})
    refused("POST", "/topics/" + t, 422, 42202, content_type=JSONSCHEMA,
            body={"records": [{"value": {"id": 4}}]})
    # A schema that is not a valid JSON Schema.
    refused("POST", "/topics/" + t, 400, 400, content_type=JSONSCHEMA,
            body={"value_schema": '{"type": "nope"}', "records": [{"value": 1}]})
    check(ok("GET", "/topics/%s/partitions/0/offsets" % t)["end_offset"] == 3,
          "refused requests wrote nothing")


PAYMENT_PROTO = """syntax = "proto3";
package sluice.rest;
message Payment {
  string id = 1;
  int64 cents = 2;
  repeated string tags = 3;
  Method method = 4;
  enum Method { CARD = 0; CASH = 1; }
}
message Unused { bool b = 1; }
"""


@S.scenario("v2-protobuf", timeout=120)
def v2_protobuf():
    t = name("v2protobuf")
    create_topic(t, 1)
    registry = SchemaRegistryClient({"url": URL})
    # Schemas given: registered under <topic>-key and <topic>-value as PROTOBUF schemas; the
    # records are the first message of each, in proto3's JSON mapping.
    key_proto = 'syntax = "proto3"; package sluice.rest; message PaymentKey { string id = 1; }'
    got = produce_avro(t, ctype=PROTOBUF, body={
        "key_schema": key_proto, "value_schema": PAYMENT_PROTO,
        "records": [{"key": {"id": "p1"},
                     "value": {"id": "p1", "cents": "250", "tags": ["a", "b"],
                               "method": "CASH"}},
                    {"key": {"id": "p2"}, "value": {"id": "p2", "cents": 7}}]})
    kid, vid = got["key_schema_id"], got["value_schema_id"]
    check(isinstance(kid, int) and isinstance(vid, int) and kid != vid, "ids: %r" % got)
    latest = registry.get_latest_version(t + "-value")
    check(latest.schema_id == vid and latest.schema.schema_type == "PROTOBUF",
          "the value subject: %r" % latest)
    # By id too.
    produce_avro(t, ctype=PROTOBUF, body={"value_schema_id": vid,
                                           "records": [{"value": {"id": "p3"}}]})
    # confluent-kafka's ProtobufDeserializer reads what v2 wrote.
    pb = protos.compiled([("sluice_rest_payment.proto", PAYMENT_PROTO)],
                         "sluice_rest_payment_pb2", tag="rest-proto")
    vctx = SerializationContext(t, MessageField.VALUE)
    values = ProtobufDeserializer(pb.Payment, {"use.deprecated.format": False})
    msgs = sorted(consume(t, 3), key=lambda m: m.offset())
    read_back = [values(m.value(), vctx) for m in msgs]
    check([(v.id, v.cents, list(v.tags), v.method) for v in read_back]
          == [("p1", 250, ["a", "b"], pb.Payment.CASH), ("p2", 7, [], pb.Payment.CARD),
              ("p3", 0, [], pb.Payment.CARD)], "ProtobufDeserializer read %r" % read_back)
    # A v2 protobuf instance reads what ProtobufSerializer wrote, beside what v2 wrote.
    p = Producer({"bootstrap.servers": BOOTSTRAP})
    ser = ProtobufSerializer(pb.Payment, registry, {"use.deprecated.format": False,
                                                    "auto.register.schemas": True})
    p.produce(t, value=ser(pb.Payment(id="p4", cents=99, tags=["z"]), vctx), partition=0)
    check(p.flush(T) == 0, "records unacknowledged")
    base = new_instance(name("v2pbgroup"), "rest-pb", fmt="protobuf")
    call("POST", base + "/subscription", {"topics": [t]})
    got = sorted(read(base, 4, accept=PROTOBUF), key=lambda r: r["offset"])
    check([(r["key"], r["value"]) for r in got] == [
        ({"id": "p1"}, {"id": "p1", "cents": "250", "tags": ["a", "b"], "method": "CASH"}),
        ({"id": "p2"}, {"id": "p2", "cents": "7"}),
        (None, {"id": "p3"}),
        (None, {"id": "p4", "cents": "99", "tags": ["z"]})], "v2 read %r" % got)
    # A binary instance may not read with the protobuf Accept.
    refused("GET", base + "/records", 406, 40601, headers={"Accept": BINARY},
            answer_type=BINARY)
    call("DELETE", base)
    # A value the message refuses, a value without a schema, a schema that does not compile.
    refused("POST", "/topics/" + t, 400, 400, content_type=PROTOBUF,
            body={"value_schema_id": vid, "records": [{"value": {"cents": "many"}}]})
    refused("POST", "/topics/" + t, 400, 400, content_type=PROTOBUF,
            body={"value_schema_id": vid, "records": [{"value": {"nope": 1}}]})
    refused("POST", "/topics/" + t, 422, 42202, content_type=PROTOBUF,
            body={"records": [{"value": {"id": "x"}}]})
    refused("POST", "/topics/" + t, 400, 400, content_type=PROTOBUF,
            body={"value_schema": "message {", "records": [{"value": {}}]})
    check(ok("GET", "/topics/%s/partitions/0/offsets" % t)["end_offset"] == 4,
          "refused requests wrote nothing")


@S.scenario("v2-acl", timeout=90)
def v2_acl():
    t = name("v2acl")
    create_topic(t, 1, auth=("admin", "admin-secret"))
    refused("GET", "/topics/" + t, 403, 40301, auth=ALICE)
    got_status, _, got = http("POST", "/topics/" + t, {"records": [{"value": "eA=="}]},
                              auth=ALICE, content_type=BINARY)
    check(got_status == 403 and got["offsets"][0]["error_code"] == 40301
          and got["offsets"][0]["offset"] is None, "alice's produce: %s %r" % (got_status, got))
    # Her instance joins nothing: the group is refused to her.
    base = new_instance(name("v2agroup"), "rest-f", auth=ALICE)
    call("POST", base + "/subscription", {"topics": [t]}, auth=ALICE)
    wait_until(lambda: http("GET", base + "/records", auth=ALICE)[0] == 403, T,
               "alice's join to be refused")
    refused("GET", base + "/records", 403, 40301, auth=ALICE, answer_type=BINARY,
            headers={"Accept": BINARY})
    # Another principal does not see her instance.
    refused("GET", base + "/subscription", 404, 40403, auth=("admin", "admin-secret"),
            answer_type=V2)
    call("DELETE", base, auth=ALICE)
    check(ok("GET", "/topics/%s/partitions/0/offsets" % t, auth=("admin", "admin-secret"))
          == {"beginning_offset": 0, "end_offset": 0}, "nothing was written")


@S.scenario("v2-off")
def v2_off():
    proxy_off("/topics")


PHASES = {
    "main": ["v2-topics", "v2-produce", "v2-consume", "v2-rebalance", "v2-seek", "v2-errors",
             "v2-avro", "v2-jsonschema", "v2-protobuf", "v2-expiry"],
    "acl": ["v2-acl"],
    "off": ["v2-off"],
}

if __name__ == "__main__":
    main_phase(S, PHASES, PHASE)
