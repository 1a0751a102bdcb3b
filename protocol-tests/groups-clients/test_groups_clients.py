#!/usr/bin/env python3
"""Consumer groups with kcat -G (librdkafka balanced consumer), kafka-python and aiokafka,
against the broker at $BOOTSTRAP with group.initial.rebalance.delay.ms=3000 (Kafka's default,
set in broker-overrides):
the first rebalance of a new group waits that long; later ones do not.
"""
import asyncio
import os
import signal
import subprocess
import threading
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from aiokafka import AIOKafkaConsumer

from harness import BOOTSTRAP, RUN_TAG, Suite, check, info, wait_until

S = Suite("groups-clients")
T = 30


def name(base):
    return "gc-%s-%s" % (base, RUN_TAG)


def create_topic(topic, partitions):
    a = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)
    a.create_topics([NewTopic(topic, partitions, 1)])
    a.close()
    return topic


def produce(topic, partitions, per_partition, tag):
    p = KafkaProducer(bootstrap_servers=BOOTSTRAP, enable_idempotence=False, acks=1)
    for part in range(partitions):
        for i in range(per_partition):
            p.send(topic, value=("%s-%d-%d" % (tag, part, i)).encode(), partition=part)
    p.flush(T)
    p.close()


def committed(group, topic, partitions):
    a = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)
    try:
        offs = a.list_group_offsets(group)
        offs = offs.get(group, offs)
        return {tp.partition: om.offset for tp, om in offs.items() if tp.topic == topic}
    finally:
        a.close()


@S.scenario("initial-rebalance-delay", timeout=60)
def initial_delay():
    topic = create_topic(name("delay"), 2)
    c = KafkaConsumer(bootstrap_servers=BOOTSTRAP, group_id=name("delay"), enable_auto_commit=False)
    t0 = time.monotonic()
    c.subscribe([topic])
    while not c.assignment() and time.monotonic() - t0 < 30:
        c.poll(100)
    took = time.monotonic() - t0
    info("first assignment after %.2fs" % took)
    check(len(c.assignment()) == 2, "assignment %s" % c.assignment())
    check(took >= 2.5, "a new group formed after %.2fs, before the 3 s initial delay" % took)
    c.close()


@S.scenario("kcat-balanced-consumers", timeout=120)
def kcat_balanced():
    topic = create_topic(name("kcat"), 4)
    group = name("kcat")
    procs, outs, errs = [], [[], []], [[], []]

    def reader(stream, sink):
        for line in stream:
            sink.append(line.rstrip("\n"))
    for i in range(2):
        p = subprocess.Popen(
            ["kcat", "-u", "-b", BOOTSTRAP, "-G", group, "-f", "%p %s\\n", "-o", "beginning",
             "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500", topic],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(p)
        threading.Thread(target=reader, args=(p.stdout, outs[i]), daemon=True).start()
        threading.Thread(target=reader, args=(p.stderr, errs[i]), daemon=True).start()
    try:
        def both_assigned():
            return all(any("assigned:" in l for l in e) for e in errs) and \
                len([l for e in errs for l in e if "assigned:" in l]) >= 2
        wait_until(both_assigned, 40, "both kcat consumers assigned")
        # the last assignment line of each shows its partitions
        time.sleep(2)
        info("kcat stderr: %s" % [e[-3:] for e in errs])
        produce(topic, 4, 25, "k")
        wait_until(lambda: len(outs[0]) + len(outs[1]) >= 100, 40, "100 messages through kcat")
        parts = [set(int(l.split()[0]) for l in o) for o in outs]
        info("partitions consumed: %s" % parts)
        check(parts[0] and parts[1], "one kcat consumed nothing: %s" % parts)
        check(not (parts[0] & parts[1]), "a partition consumed by both: %s" % parts)
        check(sorted(l.split()[1] for o in outs for l in o) ==
              sorted("k-%d-%d" % (p, i) for p in range(4) for i in range(25)), "messages differ")
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
    got = wait_until(lambda: committed(group, topic, 4) == {p: 25 for p in range(4)} and committed(group, topic, 4),
                     20, "kcat's auto commits: all offsets at 25")
    info("committed %s" % got)


def commit(c):
    """A commit racing a rebalance fails (CommitFailedError); the records come again."""
    try:
        c.commit()
    except Exception as e:
        info("kafka-python commit: %r" % e)


@S.scenario("kafka-python-group-commit", timeout=120)
def kafka_python_group():
    topic = create_topic(name("kp"), 4)
    group = name("kp")
    produce(topic, 4, 20, "p")

    def member():
        return KafkaConsumer(bootstrap_servers=BOOTSTRAP, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=6000,
                             heartbeat_interval_ms=500)
    a = member()
    a.subscribe([topic])
    got = []
    deadline = time.monotonic() + 40
    while len(got) < 40 and time.monotonic() < deadline:
        for tp, recs in a.poll(200, max_records=10).items():
            got.extend((tp.partition, r.offset) for r in recs)
            commit(a)
    check(len(got) >= 40, "kafka-python consumed %d" % len(got))
    # a second member joins: the four partitions are split 2/2
    b = member()
    b.subscribe([topic])
    stop = threading.Event()

    def pump(c):
        while not stop.is_set():
            for tp, recs in c.poll(100).items():
                got.extend((tp.partition, r.offset) for r in recs)
                commit(c)
    tb = threading.Thread(target=pump, args=(b,), daemon=True)
    tb.start()
    try:
        def split():
            for tp, recs in a.poll(100).items():
                got.extend((tp.partition, r.offset) for r in recs)
                commit(a)
            return len(a.assignment()) == 2 and len(b.assignment()) == 2 and not (a.assignment() & b.assignment())
        wait_until(split, 40, "partitions split between two kafka-python members")
        def all_seen():
            for tp, recs in a.poll(100).items():
                got.extend((tp.partition, r.offset) for r in recs)
                commit(a)
            return {(p, o) for p in range(4) for o in range(20)} <= set(got)
        wait_until(all_seen, 30, "all 80 messages")
    finally:
        stop.set()
        tb.join(10)
    a.close()
    b.close()
    c = committed(group, topic, 4)
    check(c == {p: 20 for p in range(4)}, "committed %s" % c)


@S.scenario("aiokafka-group-commit", timeout=120)
def aiokafka_group():
    topic = create_topic(name("aio"), 4)
    group = name("aio")
    produce(topic, 4, 15, "a")

    async def run():
        def member():
            return AIOKafkaConsumer(topic, bootstrap_servers=BOOTSTRAP, group_id=group,
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    session_timeout_ms=6000, heartbeat_interval_ms=500)
        a, b = member(), member()
        await a.start()
        await b.start()
        seen = set()
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                for c in (a, b):
                    batch = await c.getmany(timeout_ms=200)
                    for tp, recs in batch.items():
                        seen.update((tp.partition, r.offset) for r in recs)
                    if batch:
                        await c.commit()
                split = len(a.assignment()) == 2 and len(b.assignment()) == 2
                if split and len(seen) == 60:
                    break
            check(len(a.assignment()) == 2 and len(b.assignment()) == 2,
                  "assignments %s / %s" % (a.assignment(), b.assignment()))
            check(len(seen) == 60, "consumed %d of 60" % len(seen))
        finally:
            await a.stop()
            await b.stop()
    asyncio.run(run())
    c = committed(group, topic, 4)
    check(c == {p: 15 for p in range(4)}, "committed %s" % c)


if __name__ == "__main__":
    S.main()
