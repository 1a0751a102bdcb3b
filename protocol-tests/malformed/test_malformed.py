#!/usr/bin/env python3
"""Malformed-input suite: raw sockets against the broker at $BOOTSTRAP.

Every probe goes out on a fresh connection. The broker may answer with an error
response or close that connection, but it must not stay silent on it, and it must stay
alive and correct for everybody else: after each probe a raw ApiVersions v3 + Metadata
v1 round trip on a new connection must work, and a bystander connection opened at the
start must keep answering. Each scenario ends with a real client produce/consume.
Real Apache Kafka is the reference for what is acceptable.
"""
import random
import socket
import struct
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import wire
from harness import BOOTSTRAP, RUN_TAG, Suite, check, host_port, info, wait_until

S = Suite("malformed")
T = 30
ADDR = host_port()
WAIT = 5.0  # seconds a probe may take to be answered or closed

_corr = [1000]
_bystander = {}
_health_topic = "malformed-health-%s" % RUN_TAG


def next_corr():
    _corr[0] += 1
    return _corr[0]


def quiet(err):
    pass


# ---------------------------------------------------------------- health checks

def raw_health(what):
    """ApiVersions v3 and Metadata v1 on a brand-new connection, then the bystander."""
    try:
        s = wire.connect(ADDR, timeout=WAIT)
    except OSError as e:
        raise AssertionError("after %s: cannot connect: %s" % (what, e))
    try:
        c = next_corr()
        corr, err, keys = wire.parse_api_versions(wire.round_trip(s, wire.api_versions_v3(c)), 3)
        check(corr == c and err == 0 and 18 in keys and 3 in keys,
              "after %s: ApiVersions v3 answer corr=%d err=%d keys=%d" % (what, corr, err, len(keys)))
        c = next_corr()
        corr, brokers, _, _ = wire.parse_metadata_v1(wire.round_trip(s, wire.metadata_v1(c)))
        check(corr == c and brokers, "after %s: Metadata v1 answer corr=%d brokers=%s" % (what, corr, brokers))
    finally:
        s.close()
    bystander(what)


def bystander(what):
    s = _bystander.get("sock")
    if s is None:
        _bystander["sock"] = s = wire.connect(ADDR, timeout=WAIT)
    c = next_corr()
    try:
        corr, err, _ = wire.parse_api_versions(wire.round_trip(s, wire.api_versions_v3(c)), 3)
    except (OSError, AssertionError) as e:
        _bystander.pop("sock", None)
        raise AssertionError("after %s: the bystander connection broke: %s" % (what, e))
    check(corr == c and err == 0, "after %s: bystander got corr=%d err=%d" % (what, corr, err))


def client_health(what):
    """A real client: produce one record, read it back at its offset, list topics."""
    value = ("%s-%s-%f" % (what, RUN_TAG, time.time())).encode()
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "error_cb": quiet, "log_level": 2})
    out = []
    p.produce(_health_topic, value=value, partition=0, on_delivery=lambda e, m: out.append((e, m)))
    check(p.flush(T) == 0 and out and out[0][0] is None,
          "after %s: produce failed: %s" % (what, out and str(out[0][0])))
    off = out[0][1].offset()
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "unused-%s" % RUN_TAG,
                  "enable.auto.commit": False, "auto.offset.reset": "error", "check.crcs": True,
                  "error_cb": quiet, "log_level": 2})
    try:
        c.assign([TopicPartition(_health_topic, 0, off)])
        deadline = time.monotonic() + T
        m = None
        while m is None and time.monotonic() < deadline:
            m = c.poll(0.5)
        check(m is not None and not m.error(), "after %s: consume failed: %s" % (
            what, m and m.error()))
        check(m.offset() == off and m.value() == value, "after %s: read back %r at %d" % (
            what, m.value(), m.offset()))
        md = c.list_topics(timeout=10)
        check(_health_topic in md.topics, "after %s: list_topics lacks %s" % (what, _health_topic))
    finally:
        c.close()


def probe(what, data, expect=("response", "close"), half_close=False, wait=WAIT, corr=None):
    """Send data on a fresh connection; the broker must answer or close (as allowed by
    `expect`), never stay silent; then the broker must be healthy. Returns the Outcome."""
    try:
        o = wire.exchange(ADDR, data, wait=wait, half_close=half_close)
    except OSError as e:
        raise AssertionError("%s: could not connect/send: %s" % (what, e))
    check(not o.silent, "%s: broker neither answered nor closed within %.0fs" % (what, wait))
    if o.frames:
        check("response" in expect, "%s: broker answered (%d bytes) where a close was expected" % (
            what, len(o.frames[0])))
        if corr is not None and len(o.frames[0]) >= 4:
            got, = struct.unpack_from(">i", o.frames[0])
            check(got == corr, "%s: response correlation id %d, sent %d" % (what, got, corr))
    else:
        check("close" in expect, "%s: broker closed where a response was expected" % what)
    raw_health(what)
    return o


def describe(o):
    return "closed" if not o.frames else "answered %dB%s" % (len(o.frames[0]), " then closed" if o.closed else "")


# ---------------------------------------------------------------- scenarios

@S.scenario("baseline")
def baseline():
    raw_health("nothing")
    client_health("baseline")


@S.scenario("short_frames")
def short_frames():
    cases = {
        "length 2 (api key only)": wire.i32(2) + wire.i16(18),
        "length 0": wire.i32(0),
        "length 1": wire.i32(1) + b"\x00",
        "length 4 (api key + version)": wire.i32(4) + wire.i16(18) + wire.i16(3),
        "length 7 (correlation id cut)": wire.i32(7) + wire.i16(3) + wire.i16(1) + b"\x00\x00\x01",
        "length 8 (no client id)": wire.i32(8) + wire.i16(3) + wire.i16(1) + wire.i32(5),
    }
    for what, data in cases.items():
        o = probe(what, data)
        info("short_frames %s: %s" % (what, describe(o)))
    client_health("short frames")


@S.scenario("oversized_and_negative_length")
def oversized_and_negative_length():
    cases = {
        "length 0x7fffffff": struct.pack(">I", 0x7FFFFFFF),
        "length 104857601 (limit+1)": wire.i32(104857601) + wire.header_v1(18, 0, 1),
        "length -1": struct.pack(">I", 0xFFFFFFFF),
        "length -2147483648": struct.pack(">I", 0x80000000),
        "length 0x7fffffff + 64 KiB sent": struct.pack(">I", 0x7FFFFFFF) + wire.header_v1(3, 1, 1) + bytes(65536),
    }
    for what, data in cases.items():
        o = probe(what, data, expect=("close",))
        info("length %s: %s" % (what, describe(o)))
    client_health("bad lengths")


@S.scenario("unknown_api_key")
def unknown_api_key():
    for key in (9999, -1, 93, 32767):
        c = next_corr()
        o = probe("api_key %d" % key, wire.frame(wire.header_v1(key, 0, c) + b"\x00" * 8), corr=c)
        info("api_key %d: %s" % (key, describe(o)))
    client_health("unknown api keys")


@S.scenario("api_versions_unsupported_version")
def api_versions_unsupported_version():
    # 6: one above Kafka 4.4's newest ApiVersions (v5, KIP-1242), unsupported on both brokers
    for version, hdr in ((99, wire.header_v2), (6, wire.header_v2), (32767, wire.header_v2)):
        c = next_corr()
        body = wire.compact_string("sluice-malformed") + wire.compact_string("1.0") + wire.uvarint(0)
        s = wire.connect(ADDR)
        try:
            o = wire.exchange(None, wire.frame(hdr(18, version, c) + body), wait=WAIT, sock=s)
            check(o.frames, "ApiVersions v%d: no response (%r)" % (version, o))
            corr, err, keys = wire.parse_api_versions(o.frames[0], 0)  # answered in v0
            check(corr == c, "ApiVersions v%d: correlation id %d, sent %d" % (version, corr, c))
            check(err == 35, "ApiVersions v%d: error_code %d, expected 35 UNSUPPORTED_VERSION" % (version, err))
            check(18 in keys, "ApiVersions v%d: key 18 not in the %d listed keys" % (version, len(keys)))
            check(keys[18][0] == 0 and keys[18][1] >= 3, "ApiVersions range %s" % (keys[18],))
            # Kafka 4.4 lists only ApiVersions itself here; a full list is fine too
            info("ApiVersions v%d: error 35 listing %d api key(s): %s" % (
                version, len(keys), sorted(keys)[:8]))
            # the client is expected to retry with a version from the list on the same connection
            c2 = next_corr()
            corr, err, keys3 = wire.parse_api_versions(wire.round_trip(s, wire.api_versions_v3(c2)), 3)
            check(corr == c2 and err == 0 and keys3.get(18) == keys[18] and {0, 1, 3} <= set(keys3),
                  "retry with v3 on the same connection: corr=%d err=%d, keys %s" % (
                      corr, err, sorted(keys3)))
        finally:
            s.close()
        raw_health("ApiVersions v%d" % version)
    client_health("ApiVersions unsupported")


@S.scenario("unsupported_version_other_api")
def unsupported_version_other_api():
    for key, version in ((3, 99), (0, 99), (1, 99), (3, -1)):
        c = next_corr()
        o = probe("api %d v%d" % (key, version),
                  wire.frame(wire.header_v1(key, version, c) + wire.i32(-1)), corr=c)
        info("api %d v%d: %s" % (key, version, describe(o)))
    client_health("unsupported versions")


@S.scenario("metadata_truncated_string")
def metadata_truncated_string():
    c = next_corr()
    # client id says 16 bytes, 4 present; frame length matches what is sent
    cut_header = wire.i16(3) + wire.i16(1) + wire.i32(c) + wire.i16(16) + b"sluc"
    # topic name says 40 bytes, 7 present
    cut_body = wire.header_v1(3, 1, c) + wire.i32(1) + wire.i16(40) + b"partial"
    # second topic of two is cut
    cut_second = wire.header_v1(3, 1, c) + wire.i32(2) + wire.string("a-topic") + wire.i16(300) + b"x" * 10
    # string length negative (other than -1) in a non-nullable field
    neg_len = wire.header_v1(3, 1, c) + wire.i32(1) + wire.i16(-7) + b"abc"
    for what, payload in (("client id cut", cut_header), ("topic name cut", cut_body),
                          ("second topic cut", cut_second), ("negative string length", neg_len)):
        o = probe("Metadata v1 " + what, wire.frame(payload), corr=c)
        info("metadata %s: %s" % (what, describe(o)))
    client_health("truncated metadata")


@S.scenario("metadata_huge_array_count")
def metadata_huge_array_count():
    c = next_corr()
    # exactly the 18-byte frame: length 14, api 3, v1, corr, client id null, topics 0x7fffffff
    f = wire.i32(14) + wire.i16(3) + wire.i16(1) + wire.i32(c) + wire.i16(-1) + struct.pack(">I", 0x7FFFFFFF)
    check(len(f) == 18, "frame is %d bytes" % len(f))
    o = probe("Metadata v1 topics=0x7fffffff (18-byte frame)", f, corr=c)
    info("metadata 18-byte frame: %s" % describe(o))
    variants = {
        "count 0x7fffffff + one topic": wire.header_v1(3, 1, c) + struct.pack(">I", 0x7FFFFFFF) + wire.string("t"),
        "count 0x10000000": wire.header_v1(3, 1, c) + wire.i32(0x10000000),
        "count -2": wire.header_v1(3, 1, c) + wire.i32(-2),
        # flexible version (v9+) with a compact array length of 2^31
        "Metadata v12 compact count 2^31": wire.header_v2(3, 12, c) + wire.uvarint(1 << 31),
    }
    for what, payload in variants.items():
        o = probe("Metadata " + what, wire.frame(payload), corr=c)
        info("metadata %s: %s" % (what, describe(o)))
    # many at once on parallel connections: memory must not follow the claimed counts
    socks = []
    try:
        for _ in range(50):
            s = wire.connect(ADDR)
            s.sendall(f)
            socks.append(s)
        for s in socks:
            o = wire.exchange(None, b"", wait=WAIT, sock=s)
            check(not o.silent, "one of 50 parallel 18-byte frames was neither answered nor closed")
    finally:
        for s in socks:
            s.close()
    raw_health("50 parallel 18-byte frames")
    client_health("huge array count")


def _create_topic(name):
    a = AdminClient({"bootstrap.servers": BOOTSTRAP, "error_cb": quiet, "log_level": 2})
    a.create_topics([NewTopic(name, 1, 1)], request_timeout=T)[name].result(timeout=T)
    wait_until(lambda: name in a.list_topics(timeout=10).topics, T, "topic %s" % name)
    # metadata may name a leader a moment before it serves the partition: wait for ListOffsets
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "unused-%s" % RUN_TAG,
                  "error_cb": quiet, "log_level": 2})
    try:
        wait_until(lambda: c.get_watermark_offsets(TopicPartition(name, 0), timeout=5, cached=False) == (0, 0),
                   T, "partition %s/0 ready" % name)
    finally:
        c.close()


def _read_values(topic, n):
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "unused-%s" % RUN_TAG,
                  "enable.auto.commit": False, "auto.offset.reset": "error", "check.crcs": True,
                  "error_cb": quiet, "log_level": 2})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=T, cached=False)
        check((lo, hi) == (0, n), "%s watermarks %s, expected (0, %d)" % (topic, (lo, hi), n))
        c.assign([TopicPartition(topic, 0, 0)])
        out = []
        deadline = time.monotonic() + T
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            check(not m.error(), "consumer error: %s" % m.error())
            out.append((m.offset(), m.value()))
        return out
    finally:
        c.close()


@S.scenario("produce_bad_crc")
def produce_bad_crc():
    t = "malformed-crc-%s" % RUN_TAG
    _create_topic(t)
    s = wire.connect(ADDR)
    try:
        c = next_corr()
        corr, res = wire.parse_produce_v3(wire.round_trip(s, wire.produce_v3(c, t, 0, wire.record_batch([b"good-0", b"good-1"]))))
        check(corr == c and res.get((t, 0), (None,))[0] == 0, "good batch: %s" % res)
        check(res[(t, 0)][1] == 0, "good batch base offset %d" % res[(t, 0)][1])
    finally:
        s.close()
    s = wire.connect(ADDR)
    try:
        c = next_corr()
        o = wire.exchange(None, wire.produce_v3(c, t, 0, wire.record_batch([b"bad-0", b"bad-1"], corrupt_crc=True)),
                          wait=WAIT, sock=s)
        check(o.frames, "bad CRC batch: no response (%r)" % o)
        corr, res = wire.parse_produce_v3(o.frames[0])
        check(corr == c, "correlation id %d, sent %d" % (corr, c))
        err = res.get((t, 0), (None,))[0]
        check(err == 2, "bad CRC batch: error_code %s, expected 2 CORRUPT_MESSAGE (%s)" % (err, res))
        # the same connection is still usable afterwards (clients keep it)
        c = next_corr()
        corr, res = wire.parse_produce_v3(wire.round_trip(s, wire.produce_v3(c, t, 0, wire.record_batch([b"good-2"]))))
        check(corr == c and res[(t, 0)] == (0, 2), "good batch after the bad one: %s" % res)
    finally:
        s.close()
    raw_health("bad CRC produce")
    got = _read_values(t, 3)
    check(got == [(0, b"good-0"), (1, b"good-1"), (2, b"good-2")], "partition holds %r" % got)
    client_health("bad CRC produce")


@S.scenario("produce_corrupt_batches")
def produce_corrupt_batches():
    t = "malformed-batch-%s" % RUN_TAG
    _create_topic(t)
    good = wire.record_batch([b"v0", b"v1", b"v2"])

    def with_crc(b):
        """Recompute the CRC of a hand-modified batch so only the intended defect remains."""
        body = b[21:]
        return b[:17] + wire.u32(wire.crc32c(body)) + body

    count_too_big = with_crc(good[:57] + wire.i32(50) + good[61:])  # says 50 records, holds 3
    bad_magic = good[:16] + wire.i8(7) + good[17:]
    length_past_end = good[:8] + wire.i32(len(good) - 12 + 100) + good[12:]
    length_short = good[:8] + wire.i32(20) + good[12:]
    truncated = good[:40]
    bad_codec = with_crc(good[:21] + wire.i16(6) + good[23:])  # compression codec 6 does not exist
    garbage_records = with_crc(good[:61] + bytes(random.Random(5).randbytes(len(good) - 61)))
    cases = {
        "record count larger than records": count_too_big,
        "magic 7": bad_magic,
        "batch length past the end": length_past_end,
        "batch length too short": length_short,
        "batch cut at 40 bytes": truncated,
        "compression codec 6": bad_codec,
        "records are random bytes (valid CRC)": garbage_records,
        "empty records field": b"",
    }
    for what, records in cases.items():
        c = next_corr()
        o = probe("Produce v3 " + what, wire.produce_v3(c, t, 0, records), corr=c)
        if o.frames:
            corr, res = wire.parse_produce_v3(o.frames[0])
            err = res.get((t, 0), (None,))[0]
            check(err not in (0, None), "%s: accepted (error_code %s)" % (what, err))
            info("produce %s: error_code %d" % (what, err))
        else:
            info("produce %s: closed" % what)
    c = next_corr()
    s = wire.connect(ADDR)
    try:
        corr, res = wire.parse_produce_v3(wire.round_trip(s, wire.produce_v3(c, t, 0, good)))
    finally:
        s.close()
    check(res[(t, 0)] == (0, 0), "good batch after corrupt ones: %s (nothing corrupt may be stored)" % res)
    check(_read_values(t, 3) == [(0, b"v0"), (1, b"v1"), (2, b"v2")], "partition content wrong")
    client_health("corrupt batches")


@S.scenario("produce_too_large")
def produce_too_large():
    """A 2 MB batch (under socket.request.max.bytes, over message.max.bytes=1048588) must be
    read whole and answered with MESSAGE_TOO_LARGE (10); the connection stays usable."""
    t = "malformed-large-%s" % RUN_TAG
    _create_topic(t)
    big = wire.record_batch([random.Random(9).randbytes(2 * 1024 * 1024)])
    s = wire.connect(ADDR)
    try:
        c = next_corr()
        o = wire.exchange(None, wire.produce_v3(c, t, 0, big), wait=15, sock=s)
        check(o.frames, "2 MB produce: no response (%r)" % o)
        corr, res = wire.parse_produce_v3(o.frames[0])
        check(corr == c, "correlation id %d, sent %d" % (corr, c))
        check(res.get((t, 0), (None,))[0] == 10, "2 MB batch: %s, expected error_code 10 MESSAGE_TOO_LARGE" % res)
        c = next_corr()
        corr, res = wire.parse_produce_v3(wire.round_trip(s, wire.produce_v3(c, t, 0, wire.record_batch([b"small"]))))
        check(corr == c and res[(t, 0)] == (0, 0), "small batch after the big one: %s" % res)
    finally:
        s.close()
    raw_health("2 MB produce")
    check(_read_values(t, 1) == [(0, b"small")], "partition content wrong")
    client_health("2 MB produce")


@S.scenario("fetch_negative_and_huge")
def fetch_negative_and_huge():
    t = "malformed-fetch-%s" % RUN_TAG
    _create_topic(t)
    s = wire.connect(ADDR)
    try:
        c = next_corr()
        _, res = wire.parse_produce_v3(wire.round_trip(s, wire.produce_v3(c, t, 0, wire.record_batch([b"a", b"b"]))))
        check(res[(t, 0)] == (0, 0), "seed produce %s" % res)
    finally:
        s.close()
    c = next_corr()
    B = wire.fetch_v4_body
    cases = {
        "max_bytes -1, partition_max_bytes -1": B([(t, [(0, 0, -1)])], max_bytes=-1),
        "max_bytes -2147483648": B([(t, [(0, 0, 1 << 20)])], max_bytes=-(1 << 31)),
        "min_bytes -1, max_wait -1": B([(t, [(0, 0, 1 << 20)])], min_bytes=-1, max_wait_ms=-1),
        "fetch_offset -5": B([(t, [(0, -5, 1 << 20)])]),
        "fetch_offset 2^63-1": B([(t, [(0, (1 << 63) - 1, 1 << 20)])]),
        "partition -1": B([(t, [(-1, 0, 1 << 20)])]),
        "partition 2^31-1": B([(t, [(0x7FFFFFFF, 0, 1 << 20)])]),
        "isolation level 7": B([(t, [(0, 0, 1 << 20)])], isolation=7),
        "same partition 1000 times": B([(t, [(0, 0, 1 << 20)] * 1000)]),
        "topics count 0x7fffffff": wire.i32(-1) + wire.i32(100) + wire.i32(1) + wire.i32(1 << 20)
        + wire.i8(0) + struct.pack(">I", 0x7FFFFFFF),
        "partitions count 0x7fffffff": wire.i32(-1) + wire.i32(100) + wire.i32(1) + wire.i32(1 << 20)
        + wire.i8(0) + wire.i32(1) + wire.string(t) + struct.pack(">I", 0x7FFFFFFF) + wire.i32(0),
        "replica_id 7 (not a follower)": B([(t, [(0, 0, 1 << 20)])], replica_id=7),
    }
    for what, body in cases.items():
        o = probe("Fetch v4 " + what, wire.frame(wire.header_v1(1, 4, c) + body), corr=c)
        if o.frames:
            try:
                corr, res = wire.parse_fetch_v4(o.frames[0])
                summary = {k[1]: (v[0], v[1], len(v[2] or b"")) for k, v in list(res.items())[:3]}
            except ValueError as e:
                raise AssertionError("Fetch v4 %s: unparsable response: %s" % (what, e))
            info("fetch %s: answered, partitions (err, hw, bytes) %s" % (what, summary))
        else:
            info("fetch %s: closed" % what)
    check(_read_values(t, 2) == [(0, b"a"), (1, b"b")], "partition content changed")
    client_health("odd fetches")


@S.scenario("random_garbage", timeout=110)
def random_garbage():
    rng = random.Random(20261130)
    kinds = {"raw": 0, "length-prefixed": 0, "valid-header": 0}
    outcomes = {"closed": 0, "answered": 0}
    # api keys whose random bodies might parse as a request that legitimately waits
    # (long-poll fetches, joins, produce with a timeout) are left out of "valid-header"
    waiting = {0, 1, 11, 14, 68, 69, 76, 79}
    for i in range(200):
        kind = ("raw", "length-prefixed", "valid-header")[i % 3]
        kinds[kind] += 1
        n = rng.choice([1, 2, 3, 5, 8, 13, 40, 100, 300, 1000, 5000])
        body = rng.randbytes(n)
        if kind == "raw":
            data = body
        elif kind == "length-prefixed":
            data = wire.frame(body)
        else:
            key = rng.choice([k for k in range(0, 75) if k not in waiting])
            data = wire.frame(wire.header_v1(key, rng.randint(0, 15), 7000 + i) + body)
        o = wire.exchange(ADDR, data, wait=WAIT, half_close=True)
        check(not o.silent, "garbage #%d (%s, %d bytes): broker kept the connection open after our "
                            "EOF for %.0fs without answering" % (i, kind, len(data), WAIT))
        check(o.closed, "garbage #%d (%s): connection still open %.0fs after our EOF" % (i, kind, WAIT))
        outcomes["answered" if o.frames else "closed"] += 1
        # a raw health check after every frame; a full client check every 50
        raw_health("garbage #%d (%s, %d bytes)" % (i, kind, len(data)))
        if i % 50 == 49:
            client_health("garbage #%d" % i)
    info("random_garbage: %s; %s" % (kinds, outcomes))
    client_health("random garbage")


@S.scenario("broker_still_alive")
def broker_still_alive():
    s = socket.create_connection(ADDR, timeout=WAIT)
    s.close()
    raw_health("everything")
    client_health("everything")
    t = "malformed-final-%s" % RUN_TAG
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "linger.ms": 5, "error_cb": quiet,
                  "log_level": 2})
    out = []
    for i in range(500):
        p.produce(t, value=b"final-%04d" % i, partition=0, on_delivery=lambda e, m: out.append((e, m)))
    check(p.flush(T) == 0, "final produce did not finish")
    check(all(e is None for e, _ in out) and len(out) == 500, "final produce errors")
    got = _read_values(t, 500)
    check(got == [(i, b"final-%04d" % i) for i in range(500)], "final read back differs")


if __name__ == "__main__":
    S.main()
