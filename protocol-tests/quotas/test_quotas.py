#!/usr/bin/env python3
"""Quotas suite: client quotas through kafka-configs and the wire, enforced on Kafka's perf
tools against the broker at $BOOTSTRAP. See ./run for the scenarios."""
import os
import re
import shlex
import struct
import subprocess
import tempfile
import time

from confluent_kafka.admin import AdminClient, NewTopic

import kafka_wire as kw
from harness import BOOTSTRAP, BROKER_CTL, RUN_TAG, Suite, check, host_port, info, wait_until

S = Suite("quotas")
T = 30
MIB = 1 << 20
KAFKA_LIBS = os.environ.get("KAFKA_LIBS", "")
ROOT = os.environ.get("SLUICE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
LOG4J = os.path.join(ROOT, "scripts", "kafka", "log4j2-tools.properties")
ALTER, DESCRIBE = 49, 48
INVALID_REQUEST, UNSUPPORTED_VERSION = 42, 35
# The quota's rate counts at least 10 one-second windows, so a client's first ~10 s worth of
# bytes go through at once; the steady rate is measured after that burst.


def quiet(err):
    info("librdkafka: %s" % err)


_ADMIN = []


def admin():
    if not _ADMIN:
        _ADMIN.append(AdminClient({"bootstrap.servers": BOOTSTRAP, "error_cb": quiet}))
    return _ADMIN[0]


def java_tool(main_class, args, timeout=150, check_rc=True):
    cmd = ["java", "-Xmx512m", "-XX:+UseSerialGC", "-Dlog4j2.configurationFile=" + LOG4J,
           "-cp", os.path.join(KAFKA_LIBS, "*"), "org.apache.kafka.tools." + main_class] + list(args)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    out = r.stdout.decode(errors="replace")
    if check_rc:
        check(r.returncode == 0, "%s exited %d: %s" % (main_class, r.returncode, out[-800:]))
    return out


def kafka_configs(*args, check_rc=True):
    return java_tool("ConfigCommand", ["--bootstrap-server", BOOTSTRAP] + list(args),
                     timeout=90, check_rc=check_rc)


def entity_args(user=False, client=False):
    """kafka-configs arguments for an entity: a name, True for the default, False for none."""
    out = []
    for flag, v in (("users", user), ("clients", client)):
        if v is False:
            continue
        out += ["--entity-type", flag]
        out += ["--entity-default"] if v is True else ["--entity-name", v]
    return out


def set_quotas(configs, **entity):
    kafka_configs("--alter", *entity_args(**entity), "--add-config", configs)


def delete_quotas(keys, **entity):
    kafka_configs("--alter", *entity_args(**entity), "--delete-config", keys)


def described_users(name):
    """kafka-configs --describe --entity-type users also asks for SCRAM credentials: the
    user quotas are read over the wire (DescribeClientQuotas, strict)."""
    comp = [("user", 1, None) if name is True else ("user", 0, name)]
    code, msg, entries = describe_wire(comp, strict=True)
    check(code == 0, "describe user %s: %s %s" % (name, code, msg))
    return (entries[0][1] if entries else {}), entries


def described(**entity):
    """{key: value} kafka-configs --describe prints for the entity."""
    out = kafka_configs("--describe", *entity_args(**entity))
    got = {}
    for k, v in re.findall(r"([a-z_]+)=([0-9.E+-]+)", out):
        got[k] = float(v)
    return got, out


# ---- the wire -------------------------------------------------------------------------------

def entity_bytes(parts):
    return kw.carray(parts, lambda p: kw.cstr(p[0]) + kw.cstr(p[1]) + kw.TAGS)


def alter_wire(entries, validate_only=False):
    """entries: [(entity parts [(type, name|None)], ops [(key, value|None)])] ->
    [(error_code, error_message, entity parts)]"""
    return kw.alter_client_quotas(host_port(), entries, validate_only)


def describe_wire(components, strict=False):
    """components: [(entity type, match type, match|None)] ->
    (error_code, error_message, entries [(entity parts, {key: value})] or None)"""
    body = kw.carray(components, lambda c: kw.cstr(c[0]) + struct.pack(">b", c[1]) +
                     kw.cstr(c[2]) + kw.TAGS) + struct.pack(">?", strict) + kw.TAGS
    r = kw.call(host_port(), DESCRIBE, 1, body)
    r.i32()
    code, msg = r.i16(), r.cstr()

    def read_entry(r):
        parts = r.carray(lambda r: (r.cstr(), r.cstr(), r.tags())[:2])
        values = r.carray(lambda r: (r.cstr(), struct.unpack(">d", r.take(8))[0], r.tags())[:2])
        r.tags()
        return sorted(parts), dict(values)
    entries = r.carray(read_entry)
    return code, msg, sorted(entries) if entries is not None else None


# ---- scenarios ------------------------------------------------------------------------------

@S.scenario("describe-alter", timeout=180)
def describe_alter():
    u, c = "qu-%s" % RUN_TAG, "qc-%s" % RUN_TAG
    set_quotas("producer_byte_rate=1048576,consumer_byte_rate=2097152", client=c)
    set_quotas("request_percentage=50.5", user=u)
    set_quotas("producer_byte_rate=4096", user=u, client=c)
    set_quotas("consumer_byte_rate=8192", user=True)
    try:
        got, out = described(client=c)
        check(got == {"producer_byte_rate": 1048576, "consumer_byte_rate": 2097152},
              "client quotas described: %s" % out)
        got, out = described_users(u)
        check(got == {"request_percentage": 50.5}, "user quotas described: %s" % out)
        got, out = described(user=u, client=c)
        check(got == {"producer_byte_rate": 4096}, "user+client quotas described: %s" % out)
        got, out = described_users(True)
        check(got == {"consumer_byte_rate": 8192}, "default user quotas described: %s" % out)
        code, msg, entries = describe_wire([("user", 0, u)])
        check(code == 0, "describe by user: %s %s" % (code, msg))
        check(entries == [([("client-id", c), ("user", u)], {"producer_byte_rate": 4096.0}),
                          ([("user", u)], {"request_percentage": 50.5})],
              "exact user match: %s" % entries)
        code, msg, entries = describe_wire([("user", 0, u)], strict=True)
        check(entries == [([("user", u)], {"request_percentage": 50.5})],
              "strict exact user match: %s" % entries)
        code, msg, entries = describe_wire([("user", 1, None)], strict=True)
        check(entries == [([("user", None)], {"consumer_byte_rate": 8192.0})],
              "default user: %s" % entries)
        code, msg, entries = describe_wire([("client-id", 0, c), ("user", 2, None)])
        check(entries == [([("client-id", c), ("user", u)], {"producer_byte_rate": 4096.0})],
              "client exact and any user: %s" % entries)
        delete_quotas("producer_byte_rate", client=c)
        got, out = described(client=c)
        check(got == {"consumer_byte_rate": 2097152}, "after --delete-config: %s" % out)
    finally:
        delete_quotas("consumer_byte_rate", client=c)
        delete_quotas("request_percentage", user=u)
        delete_quotas("producer_byte_rate", user=u, client=c)
        delete_quotas("consumer_byte_rate", user=True)
    code, msg, entries = describe_wire([("client-id", 0, c)])
    check(code == 0 and entries == [], "all deleted: %s %s %s" % (code, msg, entries))


@S.scenario("invalid", timeout=60)
def invalid():
    u = "qi-%s" % RUN_TAG
    cases = [
        ([("group", "g")], [("producer_byte_rate", 1.0)],
         "Unhandled client quota entity type: group"),
        ([("user", "")], [("producer_byte_rate", 1.0)], "Empty user not supported"),
        ([("user", u)], [("no_such_quota", 1.0)], "Invalid configuration key no_such_quota"),
        ([("user", u)], [("producer_byte_rate", 1.5)],
         "producer_byte_rate cannot be a fractional value."),
        ([("user", u)], [("consumer_byte_rate", 0.0)], "Quota consumer_byte_rate must be greater than 0"),
        ([("user", u), ("ip", "127.0.0.1")], [("producer_byte_rate", 1.0)],
         "Invalid quota entity combination"),
        ([("user", u)], [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)],
         "Ignoring duplicate entity ClientQuotaEntity(entries={user=%s})" % u),
        ([("ip", "127.0.0.1")], [("producer_byte_rate", 1.0)],
         "Invalid configuration key producer_byte_rate"),
        ([], [("producer_byte_rate", 1.0)], "Invalid empty client quota entity"),
    ]
    for parts, ops, want in cases:
        res = alter_wire([(parts, ops)])
        check(len(res) == 1, "one result for %s: %s" % (parts, res))
        code, msg, _ = res[0]
        check(code == INVALID_REQUEST and msg is not None and msg.startswith(want),
              "%s %s: got %s %r, expected INVALID_REQUEST %r" % (parts, ops, code, msg, want))
    # A good entry next to a bad one is applied; validate_only applies nothing.
    res = alter_wire([([("user", u)], [("producer_byte_rate", 1000.0)]),
                      ([("user", u + "x")], [("bad_key", 1.0)])], validate_only=True)
    # Kafka answers the entries in no particular order: compare them by entity.
    by_user = lambda res: sorted((r[2][0][1], r[0]) for r in res)  # noqa: E731
    want = [(u, 0), (u + "x", INVALID_REQUEST)]
    check(by_user(res) == want, "validate_only results: %s" % res)
    code, msg, entries = describe_wire([("user", 0, u)])
    check(entries == [], "validate_only changed nothing: %s" % entries)
    res = alter_wire([([("user", u)], [("producer_byte_rate", 1000.0)]),
                      ([("user", u + "x")], [("bad_key", 1.0)])])
    check(by_user(res) == want, "mixed results: %s" % res)
    code, msg, entries = describe_wire([("user", 0, u)])
    check(entries == [([("user", u)], {"producer_byte_rate": 1000.0})], "applied: %s" % entries)
    res = alter_wire([([("user", u)], [("producer_byte_rate", None)])])
    check(res[0][0] == 0, "removal: %s" % res)
    code, msg, entries = describe_wire([("group", 2, None)])
    check(code == UNSUPPORTED_VERSION and msg == "Unsupported entity type group",
          "unknown filter type: %s %r" % (code, msg))
    code, msg, entries = describe_wire([("user", 0, None)])
    check(code == INVALID_REQUEST and entries is None and
          msg == "Request specified MATCH_TYPE_EXACT, but set match string to null.",
          "exact match without a name: %s %r %s" % (code, msg, entries))
    code, msg, entries = describe_wire([("ip", 2, None), ("user", 2, None)])
    check(code == INVALID_REQUEST, "ip with user: %s %r" % (code, msg))


def create_topic(name, partitions=1):
    fs = admin().create_topics([NewTopic(name, partitions, 1)])
    fs[name].result(T)
    wait_until(lambda: name in admin().list_topics(timeout=T).topics, 30, "topic %s" % name)


def producer_perf(topic, client_id, records, throughput=-1, record_size=1000):
    """kafka-producer-perf-test at `throughput` records/s (-1: as fast as it can); the 5 s
    progress lines' MiB/s, the overall MiB/s and the producer's produce-throttle-time-max."""
    out = java_tool("ProducerPerformance", [
        "--topic", topic, "--num-records", str(records), "--record-size", str(record_size),
        "--throughput", str(throughput), "--print-metrics", "--producer-props",
        "bootstrap.servers=" + BOOTSTRAP, "client.id=" + client_id, "acks=1",
        "linger.ms=5", "batch.size=65536"], timeout=200)
    rates = [float(x) for x in re.findall(
        r"^\d+ records sent, [0-9.]+ records/sec \(([0-9.]+) MB/sec\)", out, re.M)]
    check(rates, "no progress lines: %s" % out[-600:])
    m = re.search(r"producer-metrics:produce-throttle-time-max:\{client-id=%s\}\s*:\s*([0-9.NaE-]+)"
                  % re.escape(client_id), out)
    throttle = float(m.group(1)) if m and m.group(1) != "NaN" else 0.0
    return rates[:-1], rates[-1], throttle


def steady(rates):
    """The mean of the 5 s windows after the first (the quota's burst), over an even number
    of them: a producer held to its quota alternates a window above and one below it (the
    sawtooth of the 11 s the rate spans), so an odd count would weigh one side twice."""
    after = rates[1:]
    after = after[:len(after) // 2 * 2]
    check(len(after) >= 2, "too few windows after the burst: %s" % rates)
    return sum(after) / len(after)


@S.scenario("produce-throttled", timeout=260)
def produce_throttled():
    topic = "q-prod-%s" % RUN_TAG
    create_topic(topic)
    client = "q-prod-%s" % RUN_TAG
    set_quotas("producer_byte_rate=%d" % MIB, client=client)
    try:
        # Offering twice the quota (2,000 records of 1,000 bytes a second): ~10 MB of burst,
        # then ~26 s at 1 MiB/s. (A producer with no limit of its own sees Kafka's sawtooth:
        # ~10 MB at once whenever the burst's window leaves the 11 s the rate spans.)
        windows, overall, throttle = producer_perf(topic, client, 36000, throughput=2000)
        rate = steady(windows)
        info("produce quota 1 MiB/s: windows %s MiB/s, steady %.3f, overall %.3f, "
             "throttle-time-max %.0f ms" % (windows, rate, overall, throttle))
        check(0.8 <= rate <= 1.2, "steady produce rate %.3f MiB/s, not within 20%% of 1" % rate)
        check(throttle > 0, "the producer saw no throttle time")
        # Another client id is not under the quota.
        _, free, free_throttle = producer_perf(topic, "q-free-%s" % RUN_TAG, 20000)
        info("unthrottled client: %.2f MiB/s, throttle-time-max %.0f" % (free, free_throttle))
        check(free_throttle == 0, "the other client was throttled: %s" % free_throttle)
    finally:
        delete_quotas("producer_byte_rate", client=client)


def consumer_perf(topic, client_id, messages):
    cfg = tempfile.NamedTemporaryFile("w", suffix=".properties", delete=False)
    cfg.write("client.id=%s\ngroup.id=qg-%s-%s\n" % (client_id, client_id, time.time()))
    cfg.close()
    try:
        out = java_tool("ConsumerPerformance", [
            "--bootstrap-server", BOOTSTRAP, "--topic", topic, "--messages", str(messages),
            "--show-detailed-stats", "--reporting-interval", "5000", "--timeout", "30000",
            "--command-config", cfg.name], timeout=200)
    finally:
        os.unlink(cfg.name)
    lines = [l for l in out.splitlines() if re.match(r"^\d{4}-\d\d-\d\d \d", l)]
    header = next((l for l in out.splitlines() if l.startswith("time,")), None)
    check(header and lines, "no detailed stats: %s" % out[-600:])
    cols = [h.strip() for h in header.split(",")]
    rows = [[f.strip() for f in l.split(",")] for l in lines]
    at = [time.mktime(time.strptime(r[0][:19], "%Y-%m-%d %H:%M:%S")) + int(r[0][20:]) / 1000
          for r in rows]
    mb = [float(r[cols.index("data.consumed.in.MB")]) for r in rows]
    return list(zip(at, mb))


@S.scenario("fetch-throttled", timeout=260)
def fetch_throttled():
    topic = "q-fetch-%s" % RUN_TAG
    create_topic(topic)
    producer_perf(topic, "q-fill-%s" % RUN_TAG, 36000)
    client = "q-cons-%s" % RUN_TAG
    set_quotas("consumer_byte_rate=%d" % MIB, client=client)
    try:
        # (time, MiB read so far) at each report; the rate from the first report on, after
        # the quota's burst.
        reports = consumer_perf(topic, client, 36000)
        check(len(reports) >= 2, "too few reports: %s" % reports)
        (t0, mb0), (t1, mb1) = reports[0], reports[-1]
        rate = (mb1 - mb0) / (t1 - t0)
        info("fetch quota 1 MiB/s: reports %s, rate %.3f MiB/s" % (reports, rate))
        check(0.8 <= rate <= 1.2, "steady fetch rate %.3f MiB/s, not within 20%% of 1" % rate)
    finally:
        delete_quotas("consumer_byte_rate", client=client)


def metadata_throttles(client_id, n, budget):
    """Sends up to n Metadata v12 requests (all topics) on one connection as client_id, each
    after the last answer; returns the throttle_time_ms of each response until the first
    non-zero one."""
    import socket
    body = b"\x00" + struct.pack(">??", False, False) + kw.TAGS  # topics null, no creation
    cid = client_id.encode()
    out = []
    deadline = time.monotonic() + budget
    with socket.create_connection(host_port(), timeout=30) as sock:
        for i in range(n):
            if time.monotonic() > deadline:
                break
            header = struct.pack(">hhih", 3, 12, i, len(cid)) + cid + kw.TAGS
            msg = header + body
            sock.sendall(struct.pack(">i", len(msg)) + msg)
            data = b""
            while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
                chunk = sock.recv(65536)
                check(chunk, "the broker closed the connection")
                data += chunk
            r = kw.Reader(data[4:])
            check(r.i32() == i, "correlation id")
            r.tags()
            out.append(r.i32())
            if out[-1] > 0:
                break
    return out


@S.scenario("request-throttled", timeout=120)
def request_throttled():
    client = "q-req-%s" % RUN_TAG
    set_quotas("request_percentage=0.001", client=client)
    try:
        want = [([("client-id", client)], {"request_percentage": 0.001})]
        wait_until(lambda: describe_wire([("client-id", 0, client)])[2] == want, 30,
                   "the request quota described")
        got = metadata_throttles(client, 5000, 60)
        info("request_percentage=0.001: %d Metadata requests until throttle_time_ms %s"
             % (len(got), got[-1:]))
        check(got and got[-1] > 0, "no throttle time in %d Metadata answers" % len(got))
        free = metadata_throttles("q-req-free-%s" % RUN_TAG, len(got), 60)
        check(not any(free), "a client without the quota was throttled: %s" % free[-1:])
    finally:
        delete_quotas("request_percentage", client=client)


def broker_ctl(cmd):
    check(BROKER_CTL, "BROKER_CTL is not set")
    r = subprocess.run(shlex.split(BROKER_CTL) + [cmd], timeout=150,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    check(r.returncode == 0, "broker-ctl %s exited %d: %s" % (
        cmd, r.returncode, r.stdout.decode(errors="replace")[-400:]))


@S.scenario("survives-restart", timeout=200)
def survives_restart():
    client = "q-restart-%s" % RUN_TAG
    set_quotas("producer_byte_rate=%d,consumer_byte_rate=2048" % MIB, client=client)
    set_quotas("request_percentage=75", user=True, client=True)
    try:
        want = [([("client-id", client)], {"consumer_byte_rate": 2048.0,
                                           "producer_byte_rate": float(MIB)})]
        broker_ctl("kill9")
        broker_ctl("start")
        code, msg, entries = wait_until(
            lambda: describe_wire([("client-id", 0, client)]), 60, "the broker back")
        check(entries == want, "client quotas after kill -9: %s %s %s" % (code, msg, entries))
        code, msg, entries = describe_wire([("user", 1, None), ("client-id", 1, None)], True)
        check(entries == [([("client-id", None), ("user", None)], {"request_percentage": 75.0})],
              "default quotas after kill -9: %s" % entries)
        topic = "q-restart-%s" % RUN_TAG
        create_topic(topic)
        windows, overall, throttle = producer_perf(topic, client, 14000)
        info("after the restart: overall %.2f MiB/s, throttle-time-max %.0f" % (overall, throttle))
        check(throttle > 0, "the quota is enforced after the restart")
    finally:
        delete_quotas("producer_byte_rate,consumer_byte_rate", client=client)
        delete_quotas("request_percentage", user=True, client=True)


if __name__ == "__main__":
    S.main()
