#!/usr/bin/env python3
"""Compatibility suite: kafka-python 3 against the broker at $BOOTSTRAP.

Consumer groups are not available yet (issue 3): reads use KafkaConsumer(group_id=None)
with assign() + seek_to_beginning(), no commits.
kafka-python 3 makes producers idempotent by default (InitProducerId); they run with that default.
"""
import logging
import random
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from harness import BOOTSTRAP, by_offset, RUN_TAG, Suite, check, wait_until

S = Suite("kafka-python")
T = 30  # seconds: bound for any single client wait
N = 1000

logging.basicConfig(level=logging.CRITICAL)  # kafka-python logs reconnects at WARNING/ERROR


def topic_name(base):
    return "kp-%s-%s" % (base, RUN_TAG)


def producer(**extra):
    conf = dict(bootstrap_servers=BOOTSTRAP,
                acks="all", linger_ms=5, request_timeout_ms=T * 1000,
                max_block_ms=T * 1000)
    conf.update(extra)
    return KafkaProducer(**conf)


def admin():
    return KafkaAdminClient(bootstrap_servers=BOOTSTRAP, request_timeout_ms=T * 1000)


def create_topic(name, partitions=1):
    a = admin()
    try:
        a.create_topics({name: {"num_partitions": partitions, "replication_factor": 1}},
                        timeout_ms=T * 1000, wait_for_metadata=True)
        wait_until(lambda: any(t["name"] == name and len(t["partitions"]) == partitions
                               for t in a.describe_topics([name])), T,
                   "topic %s with %d partitions" % (name, partitions))
    finally:
        a.close()
    return name


def send_all(p, topic, records, timeout=T):
    """Send every record (dict: partition, key, value, [headers]), flush, and set
    r["offset"] from the returned RecordMetadata. Asserts all succeeded."""
    futs = []
    for r in records:
        futs.append((r, p.send(topic, key=r.get("key"), value=r.get("value"),
                               partition=r["partition"], headers=r.get("headers"))))
    p.flush(timeout=timeout)
    for r, f in futs:
        md = f.get(timeout=timeout)
        check(md.topic == topic and md.partition == r["partition"],
              "metadata for %s/%d: %s" % (topic, r["partition"], md))
        r["offset"] = md.offset
        r["timestamp"] = md.timestamp
    return records




def consume_exact(topic, counts, timeout=T, **extra):
    """assign() all partitions in counts, seek_to_beginning(), read exactly counts[p]
    records per partition; asserts offsets 0..n-1 and end offsets == counts."""
    conf = dict(bootstrap_servers=BOOTSTRAP, group_id=None, enable_auto_commit=False,
                auto_offset_reset="earliest", check_crcs=True, request_timeout_ms=T * 1000)
    conf.update(extra)
    c = KafkaConsumer(**conf)
    try:
        tps = [TopicPartition(topic, p) for p in counts]
        c.assign(tps)
        c.seek_to_beginning()
        got = {p: [] for p in counts}
        deadline = time.monotonic() + timeout
        while any(len(got[p]) < counts[p] for p in counts):
            if time.monotonic() > deadline:
                raise AssertionError("timeout consuming %s: got %s of %s" % (
                    topic, {p: len(v) for p, v in got.items()}, counts))
            for tp, recs in c.poll(timeout_ms=500).items():
                got[tp.partition].extend(recs)
        ends = c.end_offsets(tps)
        for p in counts:
            check(ends[TopicPartition(topic, p)] == counts[p],
                  "partition %d end offset %s, expected %d" % (p, ends[TopicPartition(topic, p)], counts[p]))
            offs = [m.offset for m in got[p]]
            check(offs == list(range(counts[p])), "partition %d offsets not consecutive: %s" % (p, offs[:20]))
        return got
    finally:
        c.close()


def compare(exp, got):
    for pp, rs in exp.items():
        check(len(got[pp]) == len(rs), "partition %d: read %d, produced %d" % (pp, len(got[pp]), len(rs)))
        for r, m in zip(rs, got[pp]):
            where = "p%d@%d" % (pp, m.offset)
            check(m.key == r.get("key"), "%s key %r != %r" % (where, m.key, r.get("key")))
            check(m.value == r.get("value"), "%s value differs (%r... vs %r...)" % (
                where, (m.value or b"")[:20], (r.get("value") or b"")[:20]))
            check(list(m.headers or []) == list(r.get("headers") or []),
                  "%s headers %r != %r" % (where, m.headers, r.get("headers")))
            check(m.timestamp == r["timestamp"], "%s timestamp %d != acknowledged %d" % (
                where, m.timestamp, r["timestamp"]))


def make_records(n, partitions, seed, mixed=True):
    rng = random.Random(seed)
    recs = []
    for i in range(n):
        p = i % partitions
        if not mixed or i % 4 == 0:
            v = b"value-%06d" % i
        elif i % 4 == 1:
            v = (b"compressible %06d " % i) * rng.randint(1, 100)
        elif i % 4 == 2:
            v = rng.randbytes(rng.randint(0, 3000))
        else:
            v = bytes([i % 256]) * rng.randint(1, 2000)
        key = None if i % 11 == 5 else b"key-%06d" % i
        recs.append({"partition": p, "key": key, "value": v})
    return recs


def _produce_scenario(acks, partitions):
    def run():
        t = create_topic(topic_name("acks%s" % acks), partitions)
        recs = make_records(N, partitions, seed=11 if acks == 1 else 12, mixed=False)
        p = producer(acks=acks)
        try:
            # the first few one at a time (one record per request), the rest pipelined
            for r in recs[:10]:
                send_all(p, t, [r])
            send_all(p, t, recs[10:])
        finally:
            p.close(timeout=T)
        exp = by_offset(recs)
        compare(exp, consume_exact(t, {pp: len(exp[pp]) for pp in range(partitions)}))
    return run


S.scenario("produce_1000_acks_1")(_produce_scenario(1, 1))
S.scenario("produce_1000_acks_all")(_produce_scenario("all", 3))


def _compression_scenario(codec):
    def run():
        t = create_topic(topic_name("codec-" + codec), 2)
        recs = make_records(N, 2, seed=len(codec))
        p = producer(compression_type=codec, linger_ms=20, batch_size=64 * 1024)
        try:
            send_all(p, t, recs)
        finally:
            p.close(timeout=T)
        exp = by_offset(recs)
        compare(exp, consume_exact(t, {0: len(exp[0]), 1: len(exp[1])}))
    return run


for _codec in ("gzip", "lz4", "snappy", "zstd"):
    S.scenario("compression_" + _codec)(_compression_scenario(_codec))


@S.scenario("headers_and_nulls")
def headers_and_nulls():
    t = create_topic(topic_name("headers"))
    # kafka-python refuses key=None with value=None client-side ("Need at least one")
    recs = [
        {"partition": 0, "key": b"", "value": b""},
        {"partition": 0, "key": b"k", "value": None},
        {"partition": 0, "key": None, "value": b"v"},
        {"partition": 0, "key": b"h", "value": b"headers",
         "headers": [("a", b"1"), ("dup", b"x"), ("dup", b"y"), ("empty", b"")]},  # no None header values: refused client-side
    ]
    p = producer()
    try:
        send_all(p, t, recs)
    finally:
        p.close(timeout=T)
    exp = by_offset(recs)
    compare(exp, consume_exact(t, {0: len(recs)}))


@S.scenario("admin_create_list_delete")
def admin_create_list_delete():
    a = admin()
    try:
        t3, tdef = topic_name("admin3"), topic_name("admin-default")
        a.create_topics({t3: {"num_partitions": 3, "replication_factor": 1}, tdef: {}},
                        timeout_ms=T * 1000, wait_for_metadata=True)
        wait_until(lambda: {t3, tdef} <= set(a.list_topics()), T, "created topics listed")
        desc = {d["name"]: d for d in a.describe_topics([t3, tdef])}
        check(len(desc[t3]["partitions"]) == 3, "%s has %d partitions" % (t3, len(desc[t3]["partitions"])))
        check(len(desc[tdef]["partitions"]) == 1, "default topic has %d partitions" % len(desc[tdef]["partitions"]))
        a.delete_topics([t3], timeout_ms=T * 1000)
        wait_until(lambda: t3 not in a.list_topics(), T, "deleted topic gone from the list")
        check(tdef in a.list_topics(), "unrelated topic vanished")
    finally:
        a.close()


if __name__ == "__main__":
    S.main()
