#!/usr/bin/env python3
"""Compaction suite: compacted topics written through confluent-kafka at $BOOTSTRAP, read back
after the log cleaner ran, their segment files under $BROKER_DATA checked with Kafka's
DumpLogSegments; __consumer_offsets measured before and after cleaning. See ./run."""
import os
import shlex
import shutil
import subprocess
import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness import BOOTSTRAP, BROKER_CTL, RUN_TAG, Suite, check, info, wait_until

S = Suite("compaction")
T = 30
DATA = os.environ.get("BROKER_DATA", "")
KAFKA_LIBS = os.environ.get("KAFKA_LIBS", "")
ROOT = os.environ.get("SLUICE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
LOG4J = os.path.join(ROOT, "scripts", "kafka", "log4j2-tools.properties")
COMPACTED = {"cleanup.policy": "compact", "segment.ms": "100",
             "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "2000"}
KEYS, ROUNDS, DELETED = 20, 10, 5
_STATE = {}


def quiet(err):
    info("librdkafka: %s" % err)


def name(base):
    return "cmp-%s-%s" % (base, RUN_TAG)


_ADMIN = []


def admin():
    if not _ADMIN:
        _ADMIN.append(AdminClient({"bootstrap.servers": BOOTSTRAP, "error_cb": quiet}))
    return _ADMIN[0]


def create_topic(topic, config):
    fs = admin().create_topics([NewTopic(topic, 1, 1, config=config)], request_timeout=T)
    fs[topic].result(timeout=T)
    wait_until(lambda: topic in admin().list_topics(topic, timeout=T).topics and
               admin().list_topics(topic, timeout=T).topics[topic].error is None, T,
               "topic %s visible" % topic)


def java(cls, *args, timeout=120):
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
           "-Dlog4j2.configurationFile=" + LOG4J, "-cp", os.path.join(KAFKA_LIBS, "*"),
           cls] + list(args)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    return r.returncode, r.stdout.decode(errors="replace")


def kafka_configs(*args):
    rc, out = java("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", BOOTSTRAP,
                   *args)
    check(rc == 0, "kafka-configs %s exited %d: %s" % (" ".join(args), rc, out[-600:]))


class Writer:
    """A producer remembering where each acknowledged record landed."""

    def __init__(self):
        self.p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "linger.ms": 0,
                           "error_cb": quiet})
        self.acked = []
        self.errors = []

    def _cb(self, err, msg):
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.append((msg.offset(), msg.key(), msg.value()))

    def send(self, topic, key, value):
        self.p.produce(topic, key=key, value=value, on_delivery=self._cb)
        self.p.poll(0)

    def flush(self):
        left = self.p.flush(T)
        check(left == 0, "%d records unflushed" % left)


def read_all(topic):
    """Every record of partition 0 from the start to the high watermark:
    [(offset, key, value)]."""
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "cmp-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "error_cb": quiet})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=T)
        out = []
        if high <= low:
            return out
        c.assign([TopicPartition(topic, 0, low)])
        deadline = time.monotonic() + T
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            check(m.error() is None, "consume %s: %s" % (topic, m.error()))
            out.append((m.offset(), m.key(), m.value()))
            if m.offset() >= high - 1:
                return out
        raise AssertionError("did not read %s up to %d (got %d records)" % (topic, high, len(out)))
    finally:
        c.close()


def latest(acked):
    """key -> (offset, value) of the last acknowledged record of each key."""
    out = {}
    for off, k, v in sorted(acked, key=lambda r: r[0]):
        out[k] = (off, v)
    return out


def nudge(w, topic):
    """One more record under one key: it rolls the segment written before it (segment.ms)."""
    w.send(topic, b"nudge", b"n")
    w.flush()


def data(records):
    return [r for r in records if r[1] != b"nudge"]


@S.scenario("latest-per-key", timeout=150)
def latest_per_key():
    topic = name("latest")
    create_topic(topic, COMPACTED)
    w = Writer()
    for r in range(ROUNDS):
        for k in range(KEYS):
            key = b"k%02d" % k
            tomb = r == ROUNDS - 1 and k < DELETED
            w.send(topic, key, None if tomb else b"v%d-%d" % (k, r))
        w.flush()
        time.sleep(0.15)
    check(not w.errors, "produce errors: %s" % w.errors[:3])
    want = latest([a for a in w.acked])
    live = {k: v for k, v in want.items() if v[1] is not None}
    tombs = {k: v for k, v in want.items() if v[1] is None}
    check(len(live) == KEYS - DELETED and len(tombs) == DELETED, "unexpected acks")

    def cleaned(require_tombstones_gone):
        time.sleep(0.3)
        nudge(w, topic)
        got = data(read_all(topic))
        keys = [k for _, k, _ in got]
        if len(keys) != len(set(keys)):
            return False
        for off, k, v in got:
            check(k in want, "unexpected key %r at %d" % (k, off))
            check(want[k] == (off, v), "key %r: read %r at %d, last written %r" % (
                k, v, off, want[k]))
        present = {k for _, k, _ in got}
        check(set(live) <= present, "live keys missing: %s" % sorted(set(live) - present))
        if require_tombstones_gone and present & set(tombs):
            return False
        _STATE["records"] = got
        return True

    wait_until(lambda: cleaned(False), 60, "%s cleaned to one record per key" % topic)
    got = _STATE["records"]
    info("after cleaning: %d records, offsets %s" % (len(got), [o for o, _, _ in got]))
    check(len(got) < ROUNDS * KEYS, "nothing was cleaned")
    # Tombstones stay delete.retention.ms after their first cleaning, then go.
    wait_until(lambda: cleaned(True), 60, "%s tombstones removed after delete.retention.ms" % topic)
    got = _STATE["records"]
    check(sorted(k for _, k, _ in got) == sorted(live), "keys after tombstone removal: %s" % (
        sorted(k for _, k, _ in got)))
    _STATE["latest_topic"] = topic
    _STATE["latest_live"] = live


def dump_inactive(topic):
    """DumpLogSegments --deep-iteration --print-data-log over the inactive segments of
    `topic`'s partition 0: the tool's output lines. The cleaner may replace segments
    meanwhile: the tool reads a copy of them (.log, .index, .timeindex) taken while none was
    replaced."""
    d = os.path.join(DATA, "%s-0" % topic)
    copy = os.path.join(os.environ.get("SUITE_TMP", "/tmp"), "dump-%s-%s" % (topic, RUN_TAG))
    files = []

    def copied():
        shutil.rmtree(copy, ignore_errors=True)
        os.makedirs(copy)
        files.clear()
        logs = sorted(f for f in os.listdir(d) if f.endswith(".log"))
        check(len(logs) >= 2, "expected cleaned segments and an active one: %s" % logs)
        for f in logs[:-1]:
            base = f[:-4]
            for name_ in (f, base + ".index", base + ".timeindex"):
                src = os.path.join(d, name_)
                if name_ == f or os.path.exists(src):
                    shutil.copy(src, copy)
                    files.append(os.path.join(copy, name_))
        return True
    wait_until(copied, 30, "a copy of %s's segments" % topic)
    rc, out = java("org.apache.kafka.tools.DumpLogSegments", "--files", ",".join(files),
                   "--deep-iteration", "--print-data-log")
    info("DumpLogSegments %s: %s" % (topic, out[-3000:]))
    check(rc == 0, "DumpLogSegments exited %d: %s" % (rc, out[-800:]))
    for bad in ("Exception", "Mismatches", "mismatch", "corrupt", "Corrupt"):
        check(bad not in out, "DumpLogSegments reports %r: %s" % (bad, out[-800:]))
    return out.splitlines()


@S.scenario("dump-log-segments", timeout=120)
def dump_log_segments():
    topic = _STATE.get("latest_topic")
    check(topic is not None, "needs latest-per-key's topic")
    lines = dump_inactive(topic)
    for k, (off, v) in _STATE["latest_live"].items():
        mark = "offset: %d " % off
        hits = [l for l in lines if mark in l and ("key: %s" % k.decode()) in l]
        check(hits, "DumpLogSegments does not show key %s at offset %d" % (k.decode(), off))
        check(("payload: %s" % v.decode()) in hits[0], "DumpLogSegments: %s" % hits[0])


CODECS = ("gzip", "snappy", "lz4", "zstd")


@S.scenario("compressed-batches-keep-codec", timeout=180)
def compressed_batches_keep_codec():
    """Batches the cleaner rebuilds (some records kept, some dropped) are compressed again
    with the codec they were written with, and read back by librdkafka and Kafka's tool."""
    topics = {}
    for codec in CODECS:
        topic = name("codec-" + codec)
        create_topic(topic, COMPACTED)
        p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "linger.ms": 200,
                      "compression.type": codec, "error_cb": quiet})
        acked, errors = [], []

        def cb(err, msg, acked=acked, errors=errors):
            (errors.append(err) if err is not None
             else acked.append((msg.offset(), msg.key(), msg.value())))
        # Round 0 writes ten keys (one batch); round 1 overwrites the even ones, so cleaning
        # rebuilds round 0's batch around the odd keys.
        for r, keys in ((0, range(10)), (1, range(0, 10, 2))):
            for k in keys:
                p.produce(topic, key=b"k%d" % k, value=(b"%s-%d-%d-" % (codec.encode(), k, r)) * 20,
                          on_delivery=cb)
            check(p.flush(T) == 0, "%s: records unflushed" % codec)
            time.sleep(0.15)
        check(not errors, "%s: produce errors %s" % (codec, errors[:3]))
        topics[codec] = (topic, latest(acked), Writer())

    def cleaned(codec):
        topic, want, w = topics[codec]
        nudge(w, topic)
        got = data(read_all(topic))
        if len(got) != len(want):
            return False
        for off, k, v in got:
            check(want.get(k) == (off, v), "%s key %r: read %r at %d, last written %r" % (
                codec, k, v[:20], off, want.get(k)))
        return True
    for codec in CODECS:
        wait_until(lambda: (time.sleep(0.3), cleaned(codec))[1], 60,
                   "%s topic cleaned to one record per key" % codec)
        topic, want, _ = topics[codec]
        lines = dump_inactive(topic)
        batch = None
        seen = 0
        for l in lines:
            if l.startswith("baseOffset:"):
                batch = l
            elif batch and l.lstrip("| ").startswith("offset:"):
                off = int(l.split("offset:")[1].split()[0])
                k = [k for k, (o, _) in want.items() if o == off]
                if k and k[0] in (b"k1", b"k3", b"k5", b"k7", b"k9"):
                    seen += 1
                    check(("compresscodec: %s" % codec) in batch.lower(),
                          "%s: key %s kept in a batch that is not %s: %s" % (
                              codec, k[0].decode(), codec, batch))
        check(seen == 5, "%s: DumpLogSegments shows %d of the 5 odd keys" % (codec, seen))


@S.scenario("keyless-refused", timeout=60)
def keyless_refused():
    topic = name("keyless")
    create_topic(topic, COMPACTED)
    w = Writer()
    w.send(topic, None, b"no key")
    w.flush()
    check(len(w.errors) == 1 and w.errors[0].code() == KafkaError.INVALID_RECORD,
          "keyless record: expected INVALID_RECORD, got %s (acked %s)" % (w.errors, w.acked))
    w.errors.clear()
    w.send(topic, b"k", b"keyed")
    w.flush()
    check(not w.errors and len(w.acked) == 1, "keyed record: %s" % w.errors)
    got = read_all(topic)
    check([(k, v) for _, k, v in got] == [(b"k", b"keyed")], "read back: %s" % got)


def java_hash(s):
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return 0 if h == -(1 << 31) else abs(h)


def offsets_bytes():
    total = 0
    for d in os.listdir(DATA):
        if d.startswith("__consumer_offsets-"):
            for f in os.listdir(os.path.join(DATA, d)):
                if f.endswith(".log"):
                    total += os.path.getsize(os.path.join(DATA, d, f))
    return total


def broker_ctl(cmd):
    check(BROKER_CTL, "BROKER_CTL is not set")
    t0 = time.monotonic()
    r = subprocess.run(shlex.split(BROKER_CTL) + [cmd], timeout=150,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    check(r.returncode == 0, "broker-ctl %s exited %d: %s" % (
        cmd, r.returncode, r.stdout.decode(errors="replace")[-400:]))
    return time.monotonic() - t0


def restart_timed(group, topic):
    """Stops the broker cleanly and starts it: seconds from the start until it answers an
    OffsetFetch of `group` (its groups are loaded)."""
    broker_ctl("stop")
    _ADMIN.clear()
    t0 = time.monotonic()
    broker_ctl("start")

    def answers():
        c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group,
                      "enable.auto.commit": False, "error_cb": quiet})
        try:
            return c.committed([TopicPartition(topic, 0)], timeout=5)[0].error is None
        finally:
            c.close()
    wait_until(answers, 60, "OffsetFetch answered after the restart", interval=0.05)
    return time.monotonic() - t0


COMMITS = 25_000


@S.scenario("consumer-offsets", timeout=330)
def consumer_offsets():
    topic = name("committed")
    create_topic(topic, {})
    first = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "cmp-probe-" + RUN_TAG,
                      "enable.auto.commit": False, "error_cb": quiet})
    first.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    first.close()
    md = admin().list_topics("__consumer_offsets", timeout=T)
    n = len(md.topics["__consumer_offsets"].partitions)
    target = java_hash("cmp-g0-" + RUN_TAG) % n
    groups = [g for g in ("cmp-g%d-%s" % (i, RUN_TAG) for i in range(400))
              if java_hash(g) % n == target][:4]
    check(len(groups) == 4, "groups on one offsets partition")
    # Hold cleaning back (a log's dirty ratio never exceeds 1) while the commits pile up.
    kafka_configs("--alter", "--entity-type", "topics", "--entity-name", "__consumer_offsets",
                  "--add-config", "min.cleanable.dirty.ratio=1")
    time.sleep(2)
    consumers = [Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": g,
                           "enable.auto.commit": False, "error_cb": quiet}) for g in groups]
    last = {}
    for i in range(COMMITS):
        c = consumers[i % len(consumers)]
        off = i // len(consumers) + 1
        c.commit(offsets=[TopicPartition(topic, 0, off)], asynchronous=True)
        last[groups[i % len(consumers)]] = off
        if i % 200 == 0:
            for cc in consumers:
                cc.poll(0)
    for c, g in zip(consumers, groups):
        c.commit(offsets=[TopicPartition(topic, 0, last[g])], asynchronous=False)
        c.close()
    before = offsets_bytes()
    info("__consumer_offsets after %d commits, before cleaning: %d bytes" % (COMMITS, before))
    check(before > 2 * (1 << 20), "expected several MiB of commits, have %d bytes" % before)
    t_before = restart_timed(groups[0], topic)
    info("start-up before cleaning: %.2f s (%d bytes of __consumer_offsets)" % (t_before, before))
    kafka_configs("--alter", "--entity-type", "topics", "--entity-name", "__consumer_offsets",
                  "--add-config", "min.cleanable.dirty.ratio=0.01")
    wait_until(lambda: offsets_bytes() < before // 2, 90,
               "__consumer_offsets cleaned below half of %d bytes" % before)
    after = offsets_bytes()
    t_after = restart_timed(groups[0], topic)
    info("start-up after cleaning: %.2f s (%d bytes of __consumer_offsets)" % (t_after, after))
    print("FIGURES __consumer_offsets bytes before=%d after=%d; start-up s before=%.2f after=%.2f"
          % (before, after, t_before, t_after), file=__import__("sys").stderr)
    check(after < before, "size did not drop: %d -> %d" % (before, after))
    for g in groups:
        c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": g,
                      "enable.auto.commit": False, "error_cb": quiet})
        got = c.committed([TopicPartition(topic, 0)], timeout=T)[0].offset
        c.close()
        check(got == last[g], "group %s: committed %d after cleaning, expected %d" % (
            g, got, last[g]))


if __name__ == "__main__":
    S.main()
