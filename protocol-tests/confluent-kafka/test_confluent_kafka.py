#!/usr/bin/env python3
"""Compatibility suite: confluent-kafka (librdkafka) against the broker at $BOOTSTRAP.

Consumer groups are not available yet (issue 3): every read uses assign() with
explicit offsets, a placeholder group.id and enable.auto.commit=false.
librdkafka's producer is not idempotent by default; the suite's producers turn
enable.idempotence on (InitProducerId, sequence numbers checked by the broker).
"""
import json
import os
import random
import shlex
import socket
import struct
import subprocess
import time

from confluent_kafka import (Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic, OffsetSpec

from harness import (BOOTSTRAP, BROKER_CTL, RUN_TAG, Suite, check, host_port, info,
                     wait_until)

S = Suite("confluent-kafka")
T = 30  # seconds: default bound for any single client wait


def topic_name(base):
    return "ck-%s-%s" % (base, RUN_TAG)


def log_error_cb(err):
    # librdkafka reports transient things (e.g. a closed idle connection) here;
    # they are informational: scenarios assert on results, not on this stream.
    info("librdkafka error_cb: %s" % err)


def admin():
    return AdminClient({"bootstrap.servers": BOOTSTRAP, "error_cb": log_error_cb})


def producer(**extra):
    conf = {"bootstrap.servers": BOOTSTRAP, "linger.ms": 5, "acks": "all",
            "enable.idempotence": True, "error_cb": log_error_cb}
    conf.update(extra)
    return Producer(conf)


def consumer(**extra):
    conf = {
        "bootstrap.servers": BOOTSTRAP,
        "group.id": "unused-%s" % RUN_TAG,  # issue 3: no group protocol, assign() only
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",  # explicit offsets only; never silently jump
        "check.crcs": True,
        "enable.partition.eof": False,
        "error_cb": log_error_cb,
    }
    conf.update(extra)
    return Consumer(conf)


def create_topic(name, partitions=1, timeout=T):
    a = admin()
    fs = a.create_topics([NewTopic(name, partitions, 1)], operation_timeout=timeout,
                         request_timeout=timeout)
    fs[name].result(timeout=timeout)
    wait_until(lambda: _partition_count(a, name) == partitions, timeout,
               "topic %s visible with %d partitions" % (name, partitions))
    wait_partitions_ready(name, partitions, timeout)
    return name


def wait_partitions_ready(name, partitions, timeout=T):
    """Metadata can show a leader before the leader serves the partition (Kafka answers
    NOT_LEADER_OR_FOLLOWER for a moment): wait until ListOffsets works on every partition."""
    a = admin()
    specs = {TopicPartition(name, p): OffsetSpec.latest() for p in range(partitions)}

    def ready():
        for f in a.list_offsets(specs, request_timeout=10).values():
            f.result(timeout=10)
        return True
    wait_until(ready, timeout, "partitions of %s ready for ListOffsets" % name)


def _partition_count(a, name):
    md = a.list_topics(timeout=10)
    t = md.topics.get(name)
    if t is None or t.error is not None:
        return None
    return len(t.partitions)


class DeliveryLog:
    def __init__(self):
        self.ok = []      # confluent_kafka.Message objects, in report order
        self.errors = []  # (KafkaError, Message)

    def __call__(self, err, msg):
        if err is not None:
            self.errors.append((err, msg))
        else:
            self.ok.append(msg)


def produce_all(p, topic, records, timeout=T):
    """records: list of dicts with keys partition, key, value, [headers], [timestamp].
    Flushes and asserts every record was delivered. Sets r["offset"] on each record
    to the offset its delivery report gave. Returns the DeliveryLog."""
    # Warm the producer's metadata for the topic first: librdkafka parks records
    # for a partition it does not know yet and may interleave them with later ones.
    try:
        p.list_topics(topic=topic, timeout=10)
    except KafkaException:
        pass
    dl = DeliveryLog()

    def report(err, msg, r):
        dl(err, msg)
        if err is None:
            r["offset"] = msg.offset()
            r["delivered"] = msg

    for r in records:
        r.pop("offset", None)
        kw = {"partition": r["partition"], "key": r.get("key"), "value": r.get("value"),
              "on_delivery": (lambda err, msg, r=r: report(err, msg, r))}
        if r.get("headers") is not None:
            kw["headers"] = r["headers"]
        if r.get("timestamp") is not None:
            kw["timestamp"] = r["timestamp"]
        while True:
            try:
                p.produce(topic, **kw)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(timeout)
    check(left == 0, "%d record(s) still undelivered after flush(%ds)" % (left, timeout))
    check(not dl.errors, "delivery errors: %s" % [str(e) for e, _ in dl.errors[:5]])
    check(len(dl.ok) == len(records), "%d delivery reports for %d records" % (len(dl.ok), len(records)))
    return dl


def by_offset(records, start=0):
    """{partition: [record ordered by delivered offset]}; asserts the delivered
    offsets of each partition are exactly start..start+n-1 (no gap, no duplicate)."""
    out = {}
    for r in records:
        out.setdefault(r["partition"], []).append(r)
    for pp, rs in out.items():
        rs.sort(key=lambda r: r["offset"])
        offs = [r["offset"] for r in rs]
        check(offs == list(range(start, start + len(rs))),
              "partition %d delivered offsets not consecutive from %d: %s" % (pp, start, offs[:20]))
        pos = {id(r): i for i, r in enumerate(records)}
        inversions = sum(1 for a, b in zip(rs, rs[1:]) if pos[id(a)] > pos[id(b)])
        if inversions:
            info("partition %d: %d record(s) landed out of produce order" % (pp, inversions))
    return out


def consume_exact(topic, counts, timeout=T, start=0, **conf):
    """Read exactly counts[p] records from each partition p starting at offset
    `start`; returns {p: [Message...]} in offset order. Fails on any consumer error,
    on a timeout, or if a partition's high watermark is not start+counts[p]."""
    c = consumer(**conf)
    try:
        parts = [p for p, n in counts.items()]
        c.assign([TopicPartition(topic, p, start) for p in parts])
        got = {p: [] for p in parts}
        deadline = time.monotonic() + timeout
        while any(len(got[p]) < counts[p] for p in parts):
            if time.monotonic() > deadline:
                raise AssertionError("timeout consuming %s: got %s of %s" % (
                    topic, {p: len(v) for p, v in got.items()}, counts))
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise AssertionError("consumer error: %s" % m.error())
            got[m.partition()].append(m)
        for p in parts:
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            check(hi == start + counts[p], "partition %d high watermark %d, expected %d" % (
                p, hi, start + counts[p]))
            offs = [m.offset() for m in got[p]]
            check(offs == list(range(start, start + counts[p])),
                  "partition %d offsets not consecutive from %d: %s..." % (p, start, offs[:10]))
        return got
    finally:
        c.close()


# --------------------------------------------------------------------------
# raw Fetch v4, only to look at the stored batch attributes (compression codec)

def _str16(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def raw_fetch_batch_headers(topic, partition, timeout=10):
    """Fetch partition from offset 0 to the high watermark with Fetch v4 and
    return [(base_offset, last_offset_delta, attributes, magic)] per batch."""
    host, port = host_port()
    s = socket.create_connection((host, port), timeout=timeout)
    out = []
    try:
        offset, corr = 0, 100
        for _ in range(10000):
            body = struct.pack(">iiiib", -1, 100, 1, 8 << 20, 0)
            body += struct.pack(">i", 1) + _str16(topic) + struct.pack(">i", 1)
            body += struct.pack(">iqi", partition, offset, 8 << 20)
            hdr = struct.pack(">hhi", 1, 4, corr) + _str16("ck-raw")
            s.sendall(struct.pack(">i", len(hdr) + len(body)) + hdr + body)
            resp = _recv_frame(s)
            rc, = struct.unpack_from(">i", resp, 0)
            check(rc == corr, "correlation id %d != %d" % (rc, corr))
            corr += 1
            pos = 4 + 4  # corr, throttle
            nt, = struct.unpack_from(">i", resp, pos); pos += 4
            check(nt == 1, "fetch: %d topics in response" % nt)
            tl, = struct.unpack_from(">h", resp, pos); pos += 2 + tl
            np_, = struct.unpack_from(">i", resp, pos); pos += 4
            check(np_ == 1, "fetch: %d partitions in response" % np_)
            pidx, err, hw, lso = struct.unpack_from(">ihqq", resp, pos); pos += 22
            check(err == 0, "fetch error code %d" % err)
            na, = struct.unpack_from(">i", resp, pos); pos += 4
            if na > 0:
                pos += 16 * na
            rl, = struct.unpack_from(">i", resp, pos); pos += 4
            recs = resp[pos:pos + max(rl, 0)]
            q = 0
            progressed = False
            while q + 17 <= len(recs):
                base, blen = struct.unpack_from(">qi", recs, q)
                if q + 12 + blen > len(recs):
                    break  # partial trailing batch
                magic = recs[q + 16]
                attrs, lod = struct.unpack_from(">hi", recs, q + 21)
                out.append((base, lod, attrs, magic))
                offset = base + lod + 1
                progressed = True
                q += 12 + blen
            if offset >= hw:
                return out
            check(progressed, "fetch at %d returned no complete batch (hw %d)" % (offset, hw))
        raise AssertionError("raw fetch did not reach the high watermark")
    finally:
        s.close()


def _recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise AssertionError("connection closed by broker")
        buf += chunk
    return bytes(buf)


def _recv_frame(s):
    n, = struct.unpack(">i", _recv_exact(s, 4))
    return _recv_exact(s, n)


# --------------------------------------------------------------------------
# scenarios

@S.scenario("admin_create_topics")
def admin_create_topics():
    a = admin()
    explicit, default, vonly = topic_name("explicit"), topic_name("defaults"), topic_name("validate-only")
    fs = a.create_topics([NewTopic(explicit, 3, 1), NewTopic(default)],
                         operation_timeout=T, request_timeout=T)
    for name, f in fs.items():
        check(f.result(timeout=T) is None, "create %s returned a value" % name)
    wait_until(lambda: _partition_count(a, explicit) == 3, T, "%s with 3 partitions" % explicit)
    # NewTopic(name) sends num_partitions=-1, replication_factor=-1: broker defaults
    # (num.partitions=1 in the runner's default config)
    wait_until(lambda: _partition_count(a, default) == 1, T, "%s with 1 (default) partition" % default)
    md = a.list_topics(timeout=10)
    for p in list(md.topics[explicit].partitions.values()) + list(md.topics[default].partitions.values()):
        check(p.error is None, "partition %d error %s" % (p.id, p.error))
        check(p.leader >= 0 and len(p.replicas) == 1 and len(p.isrs) == 1,
              "partition %d leader %d replicas %s isrs %s" % (p.id, p.leader, p.replicas, p.isrs))

    # validate_only: succeeds, creates nothing
    f = a.create_topics([NewTopic(vonly, 2, 1)], validate_only=True,
                        operation_timeout=T, request_timeout=T)[vonly]
    check(f.result(timeout=T) is None, "validate_only returned a value")
    time.sleep(1.0)
    check(vonly not in a.list_topics(timeout=10).topics, "validate_only created the topic")

    # already exists
    f = a.create_topics([NewTopic(explicit, 3, 1)], request_timeout=T)[explicit]
    try:
        f.result(timeout=T)
        raise AssertionError("creating an existing topic succeeded")
    except KafkaException as e:
        code = e.args[0].code()
        check(code == KafkaError.TOPIC_ALREADY_EXISTS, "existing topic: error %s" % e.args[0])

    # replication factor larger than the cluster
    bad = topic_name("rf3")
    f = a.create_topics([NewTopic(bad, 1, 3)], request_timeout=T)[bad]
    try:
        f.result(timeout=T)
        raise AssertionError("replication_factor=3 on one broker succeeded")
    except KafkaException as e:
        check(e.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR,
              "rf=3: error %s" % e.args[0])
    check(bad not in a.list_topics(timeout=10).topics, "failed create left topic %s" % bad)


@S.scenario("admin_create_partitions", timeout=120)
def admin_create_partitions():
    """AdminClient.create_partitions: validate_only changes nothing, a decrease or the same
    count is INVALID_PARTITIONS, a real increase shows at once; an idempotent producer writes
    to the old partitions before and after, and to the new ones, every record read back
    exactly once."""
    a = admin()
    topic = create_topic(topic_name("grow"), 2)
    p = producer()
    before = [{"partition": i % 2, "key": b"k%d" % i, "value": b"before-%d" % i} for i in range(100)]
    produce_all(p, topic, before)

    def grow(count, validate_only=False):
        return a.create_partitions([NewPartitions(topic, count)], validate_only=validate_only,
                                   operation_timeout=T, request_timeout=T)[topic].result(timeout=T)

    check(grow(4, validate_only=True) is None, "validate_only returned a value")
    time.sleep(1.0)
    check(_partition_count(a, topic) == 2, "validate_only changed the partition count")
    for count in (1, 2):
        try:
            grow(count)
            raise AssertionError("create_partitions to %d of 2 succeeded" % count)
        except KafkaException as e:
            check(e.args[0].code() == KafkaError.INVALID_PARTITIONS,
                  "count %d: error %s" % (count, e.args[0]))
            info("count %d: %s" % (count, e.args[0]))
    check(grow(4) is None, "create_partitions returned a value")
    wait_until(lambda: _partition_count(a, topic) == 4, T, "%s with 4 partitions" % topic)
    wait_partitions_ready(topic, 4)
    after = [{"partition": i % 4, "key": b"k%d" % i, "value": b"after-%d" % i} for i in range(200)]
    produce_all(p, topic, after)  # the same producer: one producer id, sequences continue
    got = consume_exact(topic, {0: 100, 1: 100, 2: 50, 3: 50})
    want = {}
    for r in before + after:
        want.setdefault(r["partition"], []).append(r["value"])
    for part, msgs in got.items():
        check([m.value() for m in msgs] == want[part],
              "partition %d read back %s..., produced %s..." % (
                  part, [m.value() for m in msgs][:3], want[part][:3]))


@S.scenario("admin_list_topics")
def admin_list_topics():
    a = admin()
    names = [topic_name("list-%d" % i) for i in range(3)]
    fs = a.create_topics([NewTopic(n, i + 1, 1) for i, n in enumerate(names)], request_timeout=T)
    for f in fs.values():
        f.result(timeout=T)

    def all_listed():
        md = a.list_topics(timeout=10)
        return all(n in md.topics and len(md.topics[n].partitions) == i + 1
                   for i, n in enumerate(names)) and md
    md = wait_until(all_listed, T, "all three topics listed")
    check(len(md.brokers) >= 1, "no brokers in metadata")
    host, port = host_port()
    check(any(b.host == host and b.port == port for b in md.brokers.values()),
          "no broker advertises %s:%d: %s" % (host, port, md.brokers))
    check(md.orig_broker_id in md.brokers, "answering broker %d not in the broker list" % md.orig_broker_id)
    # single-topic metadata
    md1 = a.list_topics(topic=names[2], timeout=10)
    check(names[2] in md1.topics and len(md1.topics[names[2]].partitions) == 3,
          "single-topic metadata wrong: %s" % md1.topics)
    check(md1.topics[names[2]].error is None, "topic error %s" % md1.topics[names[2]].error)


@S.scenario("admin_delete_topics")
def admin_delete_topics():
    a = admin()
    keep, gone = topic_name("del-keep"), topic_name("del-gone")
    for f in a.create_topics([NewTopic(keep, 1, 1), NewTopic(gone, 2, 1)], request_timeout=T).values():
        f.result(timeout=T)
    wait_until(lambda: _partition_count(a, gone) == 2, T, "topic to delete visible")
    # put some data in it first
    produce_all(producer(), gone, [{"partition": i % 2, "value": b"x%d" % i} for i in range(10)])
    fs = a.delete_topics([gone], operation_timeout=T, request_timeout=T)
    check(fs[gone].result(timeout=T) is None, "delete returned a value")
    wait_until(lambda: gone not in a.list_topics(timeout=10).topics, T, "deleted topic to disappear")
    check(keep in a.list_topics(timeout=10).topics, "unrelated topic vanished")
    # deleting an unknown topic is an error
    f = a.delete_topics([topic_name("never-existed")], request_timeout=T)[topic_name("never-existed")]
    try:
        f.result(timeout=T)
        raise AssertionError("deleting a missing topic succeeded")
    except KafkaException as e:
        check(e.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART,
              "missing topic delete: error %s" % e.args[0])


@S.scenario("auto_create_on_produce")
def auto_create_on_produce():
    t = topic_name("auto")
    p = producer()
    # the producer's metadata request asks for auto-creation (broker default on)
    dl = produce_all(p, t, [{"partition": 0, "key": b"k", "value": b"auto-created"}], timeout=T)
    check(dl.ok[0].offset() == 0, "first offset %d" % dl.ok[0].offset())
    a = admin()
    check(_partition_count(a, t) == 1, "auto-created topic does not have num.partitions=1")
    got = consume_exact(t, {0: 1})
    check(got[0][0].value() == b"auto-created" and got[0][0].key() == b"k", "readback mismatch")


def _payloads(rng, n):
    """Mix of compressible text, incompressible bytes, tiny and empty values."""
    out = []
    for i in range(n):
        kind = i % 5
        if kind == 0:
            v = (b"line %06d of a fairly compressible log message; " % i) * rng.randint(1, 60)
        elif kind == 1:
            v = rng.randbytes(rng.randint(1, 20000))
        elif kind == 2:
            v = b""
        elif kind == 3:
            v = bytes([i % 256]) * rng.randint(1, 5000)
        else:
            v = rng.randbytes(rng.randint(1, 64))
        out.append(v)
    return out


CODEC_ID = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _compression_scenario(codec):
    def run():
        t = create_topic(topic_name("codec-" + codec), partitions=3)
        rng = random.Random(1000 + CODEC_ID[codec])
        n_per = [150, 97, 1]
        recs = []
        for p, n in enumerate(n_per):
            for i, v in enumerate(_payloads(rng, n)):
                key = None if i % 7 == 3 else b"key-%d-%05d" % (p, i)
                recs.append({"partition": p, "key": key, "value": v})
        rng.shuffle(recs)  # interleave partitions; per-partition order stays meaningful
        p = producer(**{"compression.type": codec, "linger.ms": 20, "batch.num.messages": 40})
        produce_all(p, t, recs)
        exp = by_offset(recs)
        check(sorted(exp) == [0, 1, 2], "partitions written: %s" % sorted(exp))
        got = consume_exact(t, {pp: len(exp[pp]) for pp in range(3)})
        for pp in range(3):
            for off, (m, r) in enumerate(zip(got[pp], exp[pp])):
                check(m.partition() == pp, "partition mismatch")
                check(m.key() == r["key"], "p%d@%d key %r != %r" % (pp, off, m.key(), r["key"]))
                check(m.value() == r["value"], "p%d@%d value differs (len %d vs %d)" % (
                    pp, off, len(m.value() or b""), len(r["value"])))
                check(m.timestamp() == r["delivered"].timestamp(), "p%d@%d timestamp %s != delivered %s" % (
                    pp, off, m.timestamp(), r["delivered"].timestamp()))
        # the broker must have stored what the client sent: check the batch codec on the wire
        for pp in range(3):
            batches = raw_fetch_batch_headers(t, pp)
            codecs = {a & 7 for (_, _, a, _) in batches}
            check(all(mg == 2 for (_, _, _, mg) in batches), "stored batches not magic v2")
            check(codecs == {CODEC_ID[codec]}, "p%d stored codecs %s, expected {%d}" % (
                pp, codecs, CODEC_ID[codec]))
            if pp == 0:
                info("codec %s: partition 0 stored as %d batches" % (codec, len(batches)))
    return run


for _codec in ("none", "gzip", "snappy", "lz4", "zstd"):
    S.scenario("compression_" + _codec)(_compression_scenario(_codec))


@S.scenario("headers_round_trip")
def headers_round_trip():
    t = create_topic(topic_name("headers"))
    hdrs = [("h1", b"v1"), ("dup", b"first"), ("dup", b"second"), ("null-value", None),
            ("empty", b""), ("dup", b"third"), ("bin", bytes(range(256))),
            ("ключ", "значение ✓".encode("utf-8"))]
    recs = [
        {"partition": 0, "key": b"a", "value": b"with headers", "headers": hdrs},
        {"partition": 0, "key": b"b", "value": b"no headers"},
        {"partition": 0, "key": b"c", "value": b"one header", "headers": [("only", b"1")]},
        {"partition": 0, "key": None, "value": None, "headers": [("k", None), ("k", None)]},
    ]
    produce_all(producer(), t, recs)
    recs = by_offset(recs)[0]
    got = consume_exact(t, {0: len(recs)})[0]
    for r, m in zip(recs, got):
        check(m.headers() == r.get("headers") and m.key() == r["key"] and m.value() == r["value"],
              "offset %d: headers %r key %r value %r, expected %r %r %r" % (
                  m.offset(), m.headers(), m.key(), m.value(), r.get("headers"), r["key"], r["value"]))
    got = sorted(got, key=lambda m: m.key() or b"~")  # literal order of recs above
    check(got[0].headers() == hdrs, "headers differ: %r" % (got[0].headers(),))
    check(got[1].headers() is None, "record without headers came back with %r" % (got[1].headers(),))
    check(got[2].headers() == [("only", b"1")], "single header: %r" % (got[2].headers(),))
    check(got[3].headers() == [("k", None), ("k", None)] and got[3].value() is None and got[3].key() is None,
          "null-only record: headers %r key %r value %r" % (got[3].headers(), got[3].key(), got[3].value()))
    # same through a compressed batch
    t2 = create_topic(topic_name("headers-gzip"))
    produce_all(producer(**{"compression.type": "gzip"}), t2, recs)
    recs = by_offset(recs)[0]
    got2 = consume_exact(t2, {0: len(recs)})[0]
    for r, m in zip(recs, got2):
        check(m.headers() == r.get("headers") and m.key() == r["key"] and m.value() == r["value"],
              "gzip batch, offset %d: headers %r key %r value %r, expected %r %r %r" % (
                  m.offset(), m.headers(), m.key(), m.value(), r.get("headers"), r["key"], r["value"]))


@S.scenario("null_key_and_value")
def null_key_and_value():
    t = create_topic(topic_name("nulls"))
    cases = [(None, None), (b"k", None), (None, b"v"), (b"", b""), (b"", None), (None, b""),
             (b"\x00", b"\x00\xff")]
    recs = [{"partition": 0, "key": k, "value": v} for k, v in cases]
    produce_all(producer(), t, recs)
    recs = by_offset(recs)[0]
    got = consume_exact(t, {0: len(recs)})[0]
    for i, (r, m) in enumerate(zip(recs, got)):
        k, v = r["key"], r["value"]
        check(m.key() == k and type(m.key()) is type(k),
              "offset %d key %r, expected %r (null and empty must differ)" % (i, m.key(), k))
        check(m.value() == v and type(m.value()) is type(v),
              "offset %d value %r, expected %r (null and empty must differ)" % (i, m.value(), v))


@S.scenario("offsets_for_times")
def offsets_for_times():
    t = create_topic(topic_name("times"))
    base = int(time.time() * 1000) - 600_000  # ten minutes ago: inside every broker bound
    groups = [
        [0, 100, 200, 300, 400],     # offsets 0-4, one batch
        [1000, 1100, 1200],          # offsets 5-7, second batch
        [2000, 2600, 2200, 2400],    # offsets 8-11, timestamps not monotonic inside the batch
    ]
    p = producer(**{"linger.ms": 2000})  # hold each group in one batch until flush
    recs = []
    for g in groups:
        rs = [{"partition": 0, "value": b"ts+%d" % d, "timestamp": base + d} for d in g]
        produce_all(p, t, rs)
        recs += rs
    layout = by_offset(recs)[0]
    off = len(layout)
    deltas = [r["timestamp"] - base for r in layout]
    # the literal expectations below assume produce order == offset order
    check(deltas == [d for g in groups for d in g], "records landed out of order: %s" % deltas)
    expect = [
        (-5000, 0), (0, 0), (1, 1), (100, 1), (250, 3), (400, 4), (401, 5), (999, 5),
        (1150, 7), (1200, 7), (1201, 8), (2000, 8), (2100, 9), (2300, 9), (2600, 9),
        (2601, -1), (10_000_000, -1),
    ]
    for q, e in expect:  # the rule: first offset whose timestamp >= asked, else -1 (end)
        first = next((i for i, d in enumerate(deltas) if d >= q), -1)
        check(first == e, "test table wrong for %d: %d vs %d" % (q, first, e))
    # a partition may appear once per request, so ask one timestamp at a time
    got = {}
    c = consumer()
    try:
        for d, _ in expect:
            r = c.offsets_for_times([TopicPartition(t, 0, base + d)], timeout=T)
            check(r[0].error is None, "offsets_for_times(%d) error %s" % (d, r[0].error))
            got[d] = r[0].offset
    finally:
        c.close()
    bad = [(d, got[d], e) for d, e in expect if got[d] != e]
    check(not bad, "offsets_for_times (delta, got, expected): %s" % bad)
    # the same through AdminClient.list_offsets
    a = admin()
    bad = []
    for d, e in expect:
        tp = TopicPartition(t, 0)
        r = a.list_offsets({tp: OffsetSpec.for_timestamp(base + d)}, request_timeout=T)[tp].result(timeout=T)
        if r.offset != e:
            bad.append((d, r.offset, e))
        elif e >= 0 and r.timestamp < base + d:
            bad.append((d, "timestamp %d < asked" % r.timestamp, e))
    check(not bad, "list_offsets(for_timestamp) (delta, got, expected): %s" % bad)
    tp = TopicPartition(t, 0)
    r = a.list_offsets({tp: OffsetSpec.max_timestamp()}, request_timeout=T)[tp].result(timeout=T)
    check(r.offset == 9 and r.timestamp == base + 2600,
          "max_timestamp: offset %d ts %d, expected 9 / base+2600" % (r.offset, r.timestamp - base))
    # timestamps come back exactly as produced
    msgs = consume_exact(t, {0: off})[0]
    flat = [d for g in groups for d in g]
    for m, d in zip(msgs, flat):
        ttype, ts = m.timestamp()
        check(ts == base + d, "offset %d timestamp %d != %d" % (m.offset(), ts, base + d))


@S.scenario("list_offsets_and_watermarks")
def list_offsets_and_watermarks():
    t = create_topic(topic_name("watermarks"), partitions=3)
    counts = {0: 10, 1: 0, 2: 25}
    a = admin()
    # empty topic first
    for pp in range(3):
        tp = TopicPartition(t, pp)
        e = a.list_offsets({tp: OffsetSpec.earliest()}, request_timeout=T)[tp].result(timeout=T)
        l = a.list_offsets({tp: OffsetSpec.latest()}, request_timeout=T)[tp].result(timeout=T)
        check((e.offset, l.offset) == (0, 0), "empty p%d earliest/latest %d/%d" % (pp, e.offset, l.offset))
    produce_all(producer(), t, [{"partition": pp, "value": b"%d-%d" % (pp, i)}
                               for pp, n in counts.items() for i in range(n)])
    specs = {TopicPartition(t, pp): OffsetSpec.earliest() for pp in range(3)}
    res = {tp.partition: f.result(timeout=T) for tp, f in a.list_offsets(specs, request_timeout=T).items()}
    check(all(res[pp].offset == 0 for pp in range(3)), "earliest %s" % {k: v.offset for k, v in res.items()})
    specs = {TopicPartition(t, pp): OffsetSpec.latest() for pp in range(3)}
    res = {tp.partition: f.result(timeout=T) for tp, f in a.list_offsets(specs, request_timeout=T).items()}
    check(all(res[pp].offset == counts[pp] for pp in range(3)),
          "latest %s, expected %s" % ({k: v.offset for k, v in res.items()}, counts))
    tp1 = TopicPartition(t, 1)
    r = a.list_offsets({tp1: OffsetSpec.max_timestamp()}, request_timeout=T)[tp1].result(timeout=T)
    check(r.offset == -1, "max_timestamp on empty partition: offset %d" % r.offset)
    c = consumer()
    try:
        for pp in range(3):
            wm = c.get_watermark_offsets(TopicPartition(t, pp), timeout=10, cached=False)
            check(wm == (0, counts[pp]), "p%d watermarks %s, expected (0, %d)" % (pp, wm, counts[pp]))
        # cached watermarks after fetching: assign and read p2 to the end
        c.assign([TopicPartition(t, 2, 0)])
        n = 0
        deadline = time.monotonic() + T
        while n < counts[2] and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                n += 1
        check(n == counts[2], "read %d of %d from p2" % (n, counts[2]))
        wm = c.get_watermark_offsets(TopicPartition(t, 2), cached=True)
        check(wm[1] == counts[2], "cached high watermark %s" % (wm,))
        # reading at the end: position == high watermark, nothing more arrives
        m = c.poll(1.0)
        check(m is None or (m.error() and m.error().code() == KafkaError._PARTITION_EOF),
              "extra record past the high watermark: %s" % (m and m.value()))
    finally:
        c.close()


@S.scenario("message_too_large", timeout=90)
def message_too_large():
    t = create_topic(topic_name("too-large"))
    p = producer(**{"message.max.bytes": 10_000_000, "compression.type": "none"})
    produce_all(p, t, [{"partition": 0, "value": b"before"}])
    big = random.Random(7).randbytes(2 * 1024 * 1024)
    dl = DeliveryLog()
    p.produce(t, value=big, partition=0, on_delivery=dl)
    left = p.flush(T)
    check(left == 0, "big record neither delivered nor failed within %ds" % T)
    check(not dl.ok, "2 MB record was accepted at offset %s (limit 1048588)" % (
        dl.ok and dl.ok[0].offset()))
    check(len(dl.errors) == 1, "expected one delivery error, got %d" % len(dl.errors))
    err = dl.errors[0][0]
    check(err.code() == KafkaError.MSG_SIZE_TOO_LARGE,
          "delivery error %s (%d), expected MSG_SIZE_TOO_LARGE (10)" % (err.name(), err.code()))
    # same producer, same connection: still works
    after = produce_all(p, t, [{"partition": 0, "value": b"after-same-conn"}])
    check(after.ok[0].offset() == 1, "offset after rejected record is %d, expected 1" % after.ok[0].offset())
    # fresh producer and consumer on new connections
    after2 = produce_all(producer(), t, [{"partition": 0, "value": b"after-new-conn"}])
    check(after2.ok[0].offset() == 2, "offset %d, expected 2" % after2.ok[0].offset())
    got = consume_exact(t, {0: 3})[0]
    check([m.value() for m in got] == [b"before", b"after-same-conn", b"after-new-conn"],
          "read back %r" % [m.value() for m in got])
    # a record just under the limit is accepted
    near = random.Random(8).randbytes(1_000_000)
    dl3 = produce_all(p, t, [{"partition": 0, "value": near}])
    check(dl3.ok[0].offset() == 3, "1 MB record offset %d" % dl3.ok[0].offset())
    got = consume_exact(t, {0: 1}, start=3, **{"fetch.max.bytes": 2_000_000,
                                               "max.partition.fetch.bytes": 2_000_000})[0]
    check(got[0].value() == near, "1 MB record read back differs")


@S.scenario("min_insync_above_replication_factor")
def min_insync_above_replication_factor():
    """min.insync.replicas=2 on a topic with one replica: Kafka caps it at the replication
    factor, so acks=all (idempotent) and acks=1 writes are both taken."""
    t = topic_name("min-isr")
    a = admin()
    a.create_topics([NewTopic(t, 1, 1, config={"min.insync.replicas": "2"})],
                    operation_timeout=T, request_timeout=T)[t].result(timeout=T)
    wait_partitions_ready(t, 1)
    recs = [{"partition": 0, "key": b"k%d" % i, "value": b"all-%d" % i} for i in range(10)]
    produce_all(producer(), t, recs)
    ones = [{"partition": 0, "key": b"k%d" % i, "value": b"one-%d" % i} for i in range(10)]
    produce_all(producer(acks="1", **{"enable.idempotence": False}), t, ones)
    check([r["offset"] for r in recs + ones] == list(range(20)),
          "offsets %s" % [r["offset"] for r in recs + ones])
    got = consume_exact(t, {0: 20})[0]
    check([m.value() for m in got] == [r["value"] for r in recs + ones], "values differ")


def _validate_at(topic, offset, leader_epoch, want):
    """Assigns topic-0 at `offset` carrying `leader_epoch` (auto.offset.reset=error), which
    librdkafka validates with OffsetForLeaderEpoch; polls for `want` records or the first
    error. Returns (messages, error)."""
    c = consumer()
    try:
        c.assign([TopicPartition(topic, 0, offset, leader_epoch=leader_epoch)])
        got = []
        deadline = time.monotonic() + T
        while len(got) < want and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                return got, m.error()
            got.append(m)
        return got, None
    finally:
        c.close()


@S.scenario("offset_validation_with_leader_epoch")
def offset_validation_with_leader_epoch():
    """KIP-320: a position carrying a leader epoch is checked against the broker's end offset
    for that epoch before fetching."""
    t = create_topic(topic_name("ofle"))
    produce_all(producer(), t, [{"partition": 0, "key": None, "value": b"v%d" % i}
                                for i in range(10)])
    got, err = _validate_at(t, 5, 0, 5)
    check(err is None, "error at a valid position: %s" % err)
    check([m.offset() for m in got] == list(range(5, 10)), "offsets %s" % [m.offset() for m in got])
    check(all(m.leader_epoch() == 0 for m in got), "leader epochs %s" % [m.leader_epoch() for m in got])
    # Past the end of epoch 0: log truncation, and librdkafka names the broker's end offset.
    got, err = _validate_at(t, 20, 0, 1)
    check(err is not None and err.code() == KafkaError._AUTO_OFFSET_RESET,
          "want _AUTO_OFFSET_RESET, got %s (%d records)" % (err, len(got)))
    check("truncation" in err.str() and "end offset is 10" in err.str(), err.str())
    # An epoch the log never had: the broker answers UNDEFINED (-1).
    got, err = _validate_at(t, 5, 3, 1)
    check(err is not None and err.code() == KafkaError._AUTO_OFFSET_RESET,
          "want _AUTO_OFFSET_RESET, got %s (%d records)" % (err, len(got)))
    check("end offset is -1" in err.str(), err.str())


# --------------------------------------------------------------------------
# DeleteRecords: the log start offset moves, consumers start there, segment files below it go,
# and it survives a kill -9 once checkpointed (broker-overrides: the checkpoint every second,
# retention checks every second so that Kafka deletes the segments soon too).

def _create_small_segments(name):
    a = admin()
    # 1 MiB: Kafka 4.4's smallest segment.bytes.
    fs = a.create_topics([NewTopic(name, 1, 1, config={"segment.bytes": "1048576"})],
                         operation_timeout=T, request_timeout=T)
    fs[name].result(timeout=T)
    wait_partitions_ready(name, 1)
    return name


def _segment_bases(topic):
    """Base offsets of the partition's segment files in the broker's data dir (Kafka renames
    deleted ones to .log.deleted before removing them: those do not count)."""
    d = os.path.join(os.environ["BROKER_DATA"], "%s-0" % topic)
    return sorted(int(f[:-4]) for f in os.listdir(d) if f.endswith(".log"))


def _expect_kept(bases, start):
    """The segments a log start of `start` keeps: all but those whose successor begins at or
    below it."""
    return [b for i, b in enumerate(bases) if i + 1 >= len(bases) or bases[i + 1] > start]


def _watermarks(topic):
    c = consumer()
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def _first_offset_consumed(topic, assign_offset):
    """The offset of the first record a consumer with auto.offset.reset=earliest reads, assigned
    at `assign_offset` (OFFSET_INVALID: no committed offset, so the reset policy decides)."""
    c = consumer(**{"auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, 0, assign_offset)])
        deadline = time.monotonic() + T
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise AssertionError("consumer error: %s" % m.error())
            return m.offset()
        raise AssertionError("nothing consumed from %s" % topic)
    finally:
        c.close()


def _produce_values(topic, n):
    """n records of 100 kB, about ten to a 1 MiB segment (two to a batch)."""
    produce_all(producer(**{"batch.size": 250000}), topic,
                [{"partition": 0, "key": None, "value": b"x" * 100000} for _ in range(n)])


@S.scenario("delete_records_admin", timeout=90)
def delete_records_admin():
    t = _create_small_segments(topic_name("delrec"))
    _produce_values(t, 60)
    bases = _segment_bases(t)
    check(len(bases) >= 4, "several segments: %s" % bases)
    start = bases[2] + 1  # inside the third segment
    a = admin()
    fs = a.delete_records([TopicPartition(t, 0, start)], request_timeout=T, operation_timeout=T)
    res = fs[TopicPartition(t, 0, start)].result(timeout=T)
    check(res.low_watermark == start, "low watermark %d, want %d" % (res.low_watermark, start))
    check(_watermarks(t) == (start, 60), "watermarks %s" % (_watermarks(t),))
    # Above the high watermark: OFFSET_OUT_OF_RANGE, nothing moves.
    fs = a.delete_records([TopicPartition(t, 0, 61)], request_timeout=T, operation_timeout=T)
    try:
        fs[TopicPartition(t, 0, 61)].result(timeout=T)
        raise AssertionError("delete_records past the high watermark succeeded")
    except KafkaException as e:
        check(e.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE, "error %s" % e)
    check(_watermarks(t)[0] == start, "low watermark moved: %s" % (_watermarks(t),))
    # Consumers from the beginning (no committed offset) and from below the start begin there.
    check(_first_offset_consumed(t, -1001) == start, "reset to earliest")
    check(_first_offset_consumed(t, 0) == start, "out of range from 0, reset to earliest")
    want = _expect_kept(bases, start)
    wait_until(lambda: _segment_bases(t) == want, 30,
               "segment files %s (now %s)" % (want, _segment_bases(t)))


def _kafka_tool(main_class, *args):
    libs = os.environ.get("KAFKA_LIBS") or subprocess.run(
        [os.path.join(os.environ["SLUICE_ROOT"], "scripts", "kafka-fetch")],
        stdout=subprocess.PIPE, check=True, timeout=600).stdout.decode().strip()
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
           "-cp", os.path.join(libs, "*"), main_class] + list(args)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    out = r.stdout.decode(errors="replace")
    check(r.returncode == 0, "%s exited %d: %s %s" % (
        main_class, r.returncode, out[-300:], r.stderr.decode(errors="replace")[-500:]))
    return out


def _broker_ctl(cmd):
    check(BROKER_CTL, "BROKER_CTL is not set")
    r = subprocess.run(shlex.split(BROKER_CTL) + [cmd], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=150)
    check(r.returncode == 0, "broker-ctl %s exited %d: %s" % (
        cmd, r.returncode, r.stdout.decode(errors="replace")[-400:]))


def _checkpointed_start(topic):
    path = os.path.join(os.environ["BROKER_DATA"], "log-start-offset-checkpoint")
    with open(path) as f:
        lines = f.read().splitlines()
    for line in lines[2:]:
        name, part, offset = line.split()
        if name == topic and part == "0":
            return int(offset)
    return None


@S.scenario("delete_records_tool_and_kill9", timeout=240)
def delete_records_tool_and_kill9():
    t = _create_small_segments(topic_name("delrec-tool"))
    _produce_values(t, 50)
    bases = _segment_bases(t)
    start = bases[1] + 2  # inside the second segment
    spec = os.path.join(os.environ.get("SUITE_TMP", "/tmp"), "delete-%s.json" % t)
    with open(spec, "w") as f:
        json.dump({"version": 1, "partitions": [{"topic": t, "partition": 0, "offset": start}]}, f)
    out = _kafka_tool("org.apache.kafka.tools.DeleteRecordsCommand",
                      "--bootstrap-server", BOOTSTRAP, "--offset-json-file", spec)
    info("kafka-delete-records: %s" % out.strip().replace("\n", " | "))
    check("partition: %s-0\tlow_watermark: %d" % (t, start) in out, "tool output: %r" % out)
    check(_first_offset_consumed(t, -1001) == start, "reset to earliest")
    want = _expect_kept(bases, start)
    wait_until(lambda: _segment_bases(t) == want, 30,
               "segment files %s (now %s)" % (want, _segment_bases(t)))
    # Once the start is in log-start-offset-checkpoint it survives kill -9, even inside a segment.
    wait_until(lambda: _checkpointed_start(t) == start, 30, "%s-0 %d in the checkpoint" % (t, start))
    _broker_ctl("kill9")
    _broker_ctl("start")
    wait_partitions_ready(t, 1, timeout=90)
    wait_until(lambda: _watermarks(t) == (start, 50), 60,
               "watermarks (%d, 50) after kill -9" % start)
    # OFFSET_BEGINNING: no group coordinator needed while the broker is still loading groups.
    check(_first_offset_consumed(t, -2) == start, "from the beginning after kill -9")
    check(_segment_bases(t) == want, "segment files after restart %s" % _segment_bases(t))


if __name__ == "__main__":
    S.main()
