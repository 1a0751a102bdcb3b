#!/usr/bin/env python3
"""Compatibility suite: aiokafka against the broker at $BOOTSTRAP.

Consumer groups are not available yet (issue 3): reads use AIOKafkaConsumer(group_id=None)
with assign() + seek_to_beginning(), no commits. aiokafka's producer is not idempotent
by default (enable_idempotence=False), so nothing to turn off.
"""
import asyncio
import logging
import random
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from harness import BOOTSTRAP, by_offset, RUN_TAG, Suite, check, info

S = Suite("aiokafka")
T = 30  # seconds: bound for any single client wait
N = 1000

logging.basicConfig(level=logging.CRITICAL)


def topic_name(base):
    return "aio-%s-%s" % (base, RUN_TAG)


def sync(fn):
    """Scenario body is a coroutine; run it in a fresh event loop."""
    def run():
        asyncio.run(asyncio.wait_for(fn(), timeout=110))
    run.__name__ = fn.__name__
    return run


async def w(aw, timeout=T):
    return await asyncio.wait_for(aw, timeout)


async def create_topic(name, partitions=1):
    a = AIOKafkaAdminClient(bootstrap_servers=BOOTSTRAP, request_timeout_ms=T * 1000)
    await w(a.start())
    try:
        await w(a.create_topics([NewTopic(name, partitions, 1)], timeout_ms=T * 1000))
        deadline = time.monotonic() + T
        while True:
            d = await w(a.describe_topics([name]))
            if d and d[0].get("error_code", 0) == 0 and len(d[0].get("partitions", [])) == partitions \
                    and all(p.get("leader", -1) >= 0 for p in d[0]["partitions"]):
                break
            check(time.monotonic() < deadline, "topic %s not ready: %s" % (name, d))
            await asyncio.sleep(0.2)
    finally:
        await w(a.close())
    return name


async def producer(**extra):
    conf = dict(bootstrap_servers=BOOTSTRAP, acks="all", linger_ms=5,
                request_timeout_ms=T * 1000)
    conf.update(extra)
    p = AIOKafkaProducer(**conf)
    await w(p.start())
    return p


async def consume_exact(topic, counts, timeout=T):
    c = AIOKafkaConsumer(bootstrap_servers=BOOTSTRAP, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", check_crcs=True,
                         request_timeout_ms=T * 1000)
    await w(c.start())
    try:
        tps = [TopicPartition(topic, p) for p in counts]
        c.assign(tps)
        await w(c.seek_to_beginning(*tps))
        got = {p: [] for p in counts}
        deadline = time.monotonic() + timeout
        while any(len(got[p]) < counts[p] for p in counts):
            if time.monotonic() > deadline:
                raise AssertionError("timeout consuming %s: got %s of %s" % (
                    topic, {p: len(v) for p, v in got.items()}, counts))
            batch = await w(c.getmany(timeout_ms=500))
            for tp, recs in batch.items():
                got[tp.partition].extend(recs)
        ends = await w(c.end_offsets(tps))
        for p in counts:
            check(ends[TopicPartition(topic, p)] == counts[p],
                  "partition %d end offset %s, expected %d" % (p, ends[TopicPartition(topic, p)], counts[p]))
            offs = [m.offset for m in got[p]]
            check(offs == list(range(counts[p])), "partition %d offsets not consecutive: %s" % (p, offs[:20]))
        return got
    finally:
        await w(c.stop())




def compare(exp, got, check_ts=True):
    for pp, rs in exp.items():
        check(len(got[pp]) == len(rs), "partition %d: read %d, produced %d" % (pp, len(got[pp]), len(rs)))
        for r, m in zip(rs, got[pp]):
            where = "p%d@%d" % (pp, m.offset)
            check(m.key == r.get("key"), "%s key %r != %r" % (where, m.key, r.get("key")))
            check(m.value == r.get("value"), "%s value differs (%r... vs %r...)" % (
                where, (m.value or b"")[:20], (r.get("value") or b"")[:20]))
            check(tuple(m.headers or ()) == tuple(r.get("headers") or ()),
                  "%s headers %r != %r" % (where, m.headers, r.get("headers")))
            if check_ts and r.get("timestamp") is not None:
                check(m.timestamp == r["timestamp"], "%s timestamp %d != acknowledged %d" % (
                    where, m.timestamp, r["timestamp"]))


def make_records(n, partitions, seed, mixed=True):
    rng = random.Random(seed)
    recs = []
    for i in range(n):
        if not mixed or i % 4 == 0:
            v = b"value-%06d" % i
        elif i % 4 == 1:
            v = (b"compressible %06d " % i) * rng.randint(1, 100)
        elif i % 4 == 2:
            v = rng.randbytes(rng.randint(0, 3000))
        else:
            v = bytes([i % 256]) * rng.randint(1, 2000)
        key = None if i % 11 == 5 else b"key-%06d" % i
        recs.append({"partition": i % partitions, "key": key, "value": v})
    return recs


async def send_and_wait_each(p, topic, recs):
    for r in recs:
        md = await w(p.send_and_wait(topic, value=r["value"], key=r["key"], partition=r["partition"],
                                     headers=r.get("headers")))
        check(md.partition == r["partition"], "metadata partition %d" % md.partition)
        r["offset"], r["timestamp"] = md.offset, md.timestamp


async def send_pipelined(p, topic, recs):
    futs = []
    for r in recs:
        futs.append(await w(p.send(topic, value=r["value"], key=r["key"], partition=r["partition"],
                                   headers=r.get("headers"))))
    mds = await w(asyncio.gather(*futs), timeout=T * 2)
    for r, md in zip(recs, mds):
        check(md.partition == r["partition"], "metadata partition %d" % md.partition)
        # aiokafka 0.14 quirk: MessageBatch.done() hands every record of a batch the
        # first record's timestamp, so md.timestamp is only right for one record per
        # batch; do not compare it.
        r["offset"], r["timestamp"] = md.offset, None


def _send_and_wait_scenario(acks, partitions):
    @sync
    async def run():
        t = await create_topic(topic_name("acks%s" % acks), partitions)
        recs = make_records(N, partitions, seed=21 if acks == 1 else 22, mixed=False)
        p = await producer(acks=acks)
        try:
            await send_and_wait_each(p, t, recs[:300])   # one record per request
            await send_pipelined(p, t, recs[300:])       # many in flight
        finally:
            await w(p.stop())
        exp = by_offset(recs)
        compare(exp, await consume_exact(t, {pp: len(exp[pp]) for pp in range(partitions)}))
    return run


S.scenario("produce_1000_acks_1")(_send_and_wait_scenario(1, 1))
S.scenario("produce_1000_acks_all")(_send_and_wait_scenario("all", 3))


@S.scenario("send_batch")
@sync
async def send_batch():
    t = await create_topic(topic_name("batches"), 2)
    recs = make_records(N, 2, seed=23)
    p = await producer(acks="all", max_batch_size=64 * 1024)
    try:
        for pp in (0, 1):
            queue = [r for r in recs if r["partition"] == pp]
            nbatches = 0
            while queue:
                b = p.create_batch()
                taken = []
                for r in queue:
                    if b.append(key=r["key"], value=r["value"], timestamp=None,
                                headers=r.get("headers") or []) is None:
                        break
                    taken.append(r)
                check(taken, "an empty batch could not take one record")
                queue = queue[len(taken):]
                b.close()
                fut = await w(p.send_batch(b, t, partition=pp))
                md = await w(fut)
                # the batch's records get consecutive offsets from the returned base offset
                for i, r in enumerate(taken):
                    r["offset"] = md.offset + i
                nbatches += 1
            info("send_batch: partition %d in %d batches" % (pp, nbatches))
    finally:
        await w(p.stop())
    exp = by_offset(recs)
    compare(exp, await consume_exact(t, {0: len(exp[0]), 1: len(exp[1])}), check_ts=False)


def _compression_scenario(codec):
    @sync
    async def run():
        t = await create_topic(topic_name("codec-" + codec), 2)
        recs = make_records(N, 2, seed=30 + len(codec))
        p = await producer(compression_type=codec, linger_ms=20, max_batch_size=64 * 1024)
        try:
            await send_pipelined(p, t, recs)
        finally:
            await w(p.stop())
        exp = by_offset(recs)
        compare(exp, await consume_exact(t, {0: len(exp[0]), 1: len(exp[1])}))
    return run


for _codec in ("gzip", "lz4", "snappy", "zstd"):
    S.scenario("compression_" + _codec)(_compression_scenario(_codec))


@S.scenario("headers_and_nulls")
@sync
async def headers_and_nulls():
    t = await create_topic(topic_name("headers"))
    recs = [
        {"partition": 0, "key": b"", "value": b""},
        {"partition": 0, "key": b"k", "value": None},
        {"partition": 0, "key": None, "value": b"v"},
        {"partition": 0, "key": b"h", "value": b"headers",
         "headers": [("a", b"1"), ("dup", b"x"), ("dup", b"y"), ("empty", b"")]},
    ]
    p = await producer()
    try:
        await send_and_wait_each(p, t, recs)
    finally:
        await w(p.stop())
    exp = by_offset(recs)
    compare(exp, await consume_exact(t, {0: len(recs)}))


if __name__ == "__main__":
    S.main()
