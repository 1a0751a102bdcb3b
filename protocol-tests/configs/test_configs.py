#!/usr/bin/env python3
"""Configs suite: kafka-configs (Kafka 4.4's ConfigCommand) and confluent-kafka's admin client
change topic and dynamic broker configs on the running broker at $BOOTSTRAP; the effects are
read from the partition directories under $BROKER_DATA and from DescribeConfigs. See ./run for
the scenarios."""
import os
import shlex
import subprocess

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewTopic, OffsetSpec, ResourceType)

from harness import BOOTSTRAP, BROKER_CTL, RUN_TAG, Suite, check, info, wait_until

S = Suite("configs")
T = 30
MIB = 1 << 20
DATA = os.environ.get("BROKER_DATA", "")
KAFKA_LIBS = os.environ.get("KAFKA_LIBS", "")
ROOT = os.environ.get("SLUICE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
LOG4J = os.path.join(ROOT, "scripts", "kafka", "log4j2-tools.properties")


def quiet(err):
    info("librdkafka: %s" % err)


def name(base):
    return "cfg-%s-%s" % (base, RUN_TAG)


_ADMIN = []


def admin():
    """One admin client for the suite (a client dropped while its futures are pending
    fails them with _DESTROY)."""
    if not _ADMIN:
        _ADMIN.append(AdminClient({"bootstrap.servers": BOOTSTRAP, "error_cb": quiet}))
    return _ADMIN[0]


def broker_id():
    md = admin().list_topics(timeout=T)
    return min(md.brokers)


def kafka_configs(*args, check_rc=True):
    """Runs kafka-configs; returns (rc, stdout + stderr)."""
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
           "-Dlog4j2.configurationFile=" + LOG4J, "-cp", os.path.join(KAFKA_LIBS, "*"),
           "org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", BOOTSTRAP] + list(args)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=90)
    out = r.stdout.decode(errors="replace")
    if check_rc:
        check(r.returncode == 0, "kafka-configs %s exited %d: %s" % (
            " ".join(args), r.returncode, out[-600:]))
    return r.returncode, out


def alter_topic(topic, *configs):
    kafka_configs("--alter", "--entity-type", "topics", "--entity-name", topic,
                  "--add-config", ",".join(configs))


def create_topic(topic, config=None):
    fs = admin().create_topics([NewTopic(topic, 1, 1, config=config or {})], request_timeout=T)
    fs[topic].result(timeout=T)
    wait_until(lambda: topic in admin().list_topics(topic, timeout=T).topics and
               admin().list_topics(topic, timeout=T).topics[topic].error is None, T,
               "topic %s visible" % topic)


def produce(topic, total_bytes, value_size=50_000):
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "linger.ms": 5,
                  "batch.size": 200_000, "error_cb": quiet})
    errors = []

    def cb(err, _msg):
        if err is not None:
            errors.append(err)

    for i in range(total_bytes // value_size):
        p.produce(topic, value=b"v" * value_size, key=b"%d" % i, on_delivery=cb)
        p.poll(0)
    left = p.flush(T)
    check(left == 0 and not errors, "produce to %s: %d unflushed, errors %s" % (
        topic, left, errors[:3]))


def segments(topic):
    """{base offset: size} of the partition's segment files still in use (.log)."""
    d = os.path.join(DATA, "%s-0" % topic)
    out = {}
    for f in os.listdir(d):
        if f.endswith(".log"):
            out[int(f[:-4])] = os.path.getsize(os.path.join(d, f))
    return out


def earliest(topic):
    tp = TopicPartition(topic, 0)
    fs = admin().list_offsets({tp: OffsetSpec.earliest()}, request_timeout=T)
    return fs[tp].result(timeout=T).offset


def describe(rtype, rname, keys=None):
    res = ConfigResource(rtype, rname)
    fs = admin().describe_configs([res], request_timeout=T)
    entries = fs[res].result(timeout=T)
    return {k: e for k, e in entries.items() if keys is None or k in keys}


def check_source(entries, key, value, source):
    e = entries.get(key)
    check(e is not None, "%s not described" % key)
    check(e.value == value and e.source == source.value,
          "%s = %r (source %s), expected %r (%s); synonyms %s" % (
              key, e.value, e.source, value, source.name,
              [(s.name, s.value, s.source) for s in e.synonyms.values()]))


def eventually(fn, what, timeout=30):
    """fn() passes within timeout seconds: Kafka answers an alter before its brokers have
    applied the metadata record, so a describe right after it may still see the old value."""
    wait_until(lambda: fn() or True, timeout, what)


def rolled_at_most(topic, limit):
    segs = segments(topic)
    sizes = [segs[b] for b in sorted(segs)]
    info("%s segments: %s" % (topic, sizes))
    check(len(sizes) >= 3, "%s has %d segment(s), expected a roll every MiB" % (topic, len(sizes)))
    check(all(s <= limit for s in sizes[:-1]), "%s segments above %d bytes: %s" % (
        topic, limit, sizes))


@S.scenario("topic-retention-live", timeout=120)
def topic_retention_live():
    topic = name("retention")
    create_topic(topic, {"segment.bytes": str(MIB)})
    produce(topic, 3 * MIB)
    before = segments(topic)
    info("segments before: %s" % sorted(before))
    check(len(before) >= 3, "expected 3+ segments, have %s" % sorted(before))
    check(earliest(topic) == 0, "log start moved before the change")
    alter_topic(topic, "retention.ms=2000")
    wait_until(lambda: 0 not in segments(topic) and earliest(topic) > 0, 60,
               "old segments of %s deleted after retention.ms=2000" % topic)
    after = segments(topic)
    info("segments after: %s, log start %d" % (sorted(after), earliest(topic)))
    check(min(after) == earliest(topic), "log start %d is not the first segment %d" % (
        earliest(topic), min(after)))


@S.scenario("segment-bytes-next-roll", timeout=120)
def segment_bytes_next_roll():
    topic = name("segbytes")
    create_topic(topic)
    produce(topic, 300_000)
    check(len(segments(topic)) == 1, "rolled before the change: %s" % segments(topic))
    alter_topic(topic, "segment.bytes=%d" % MIB)
    eventually(lambda: check_source(describe(ResourceType.TOPIC, topic), "segment.bytes", str(MIB),
                                    ConfigSource.DYNAMIC_TOPIC_CONFIG), "segment.bytes applied")
    produce(topic, 3 * MIB)
    rolled_at_most(topic, MIB)


@S.scenario("broker-default", timeout=150)
def broker_default():
    plain, own = name("follows"), name("own")
    create_topic(plain)
    create_topic(own, {"segment.bytes": str(4 * MIB)})
    bid = str(broker_id())
    kafka_configs("--alter", "--entity-type", "brokers", "--entity-default",
                  "--add-config", "log.segment.bytes=%d,log.retention.bytes=900000000" % MIB)
    try:
        def follows_default():
            d = describe(ResourceType.TOPIC, plain)
            check_source(d, "segment.bytes", str(MIB), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
            check_source(d, "retention.bytes", "900000000",
                         ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        eventually(follows_default, "%s follows the broker default" % plain)
        check_source(describe(ResourceType.TOPIC, own), "segment.bytes", str(4 * MIB),
                     ConfigSource.DYNAMIC_TOPIC_CONFIG)
        _, out = kafka_configs("--describe", "--entity-type", "brokers", "--entity-default")
        want = ("log.segment.bytes=%d sensitive=false synonyms={"
                "DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=%d}" % (MIB, MIB))
        check(want in out, "kafka-configs --describe --entity-default, expected %s: %s" % (
            want, out[-700:]))
        produce(plain, 3 * MIB)
        rolled_at_most(plain, MIB)
        produce(own, 3 * MIB)
        check(len(segments(own)) == 1, "%s rolled below its own 4 MiB: %s" % (own, segments(own)))
        # One broker's own value wins over the default.
        kafka_configs("--alter", "--entity-type", "brokers", "--entity-name", bid,
                      "--add-config", "log.retention.bytes=800000000")
        eventually(lambda: check_source(describe(ResourceType.TOPIC, plain), "retention.bytes",
                                        "800000000", ConfigSource.DYNAMIC_BROKER_CONFIG),
                   "%s follows broker %s's own value" % (plain, bid))
        b = describe(ResourceType.BROKER, bid, ["log.retention.bytes"])
        check_source(b, "log.retention.bytes", "800000000", ConfigSource.DYNAMIC_BROKER_CONFIG)
        _, out = kafka_configs("--describe", "--entity-type", "brokers", "--entity-name", bid)
        want = ("log.retention.bytes=800000000 sensitive=false synonyms={"
                "DYNAMIC_BROKER_CONFIG:log.retention.bytes=800000000, "
                "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=900000000, "
                "DEFAULT_CONFIG:log.retention.bytes=-1}")
        check(want in out, "kafka-configs --describe, expected %s: %s" % (want, out[-700:]))
    finally:
        kafka_configs("--alter", "--entity-type", "brokers", "--entity-name", bid,
                      "--delete-config", "log.retention.bytes")
        kafka_configs("--alter", "--entity-type", "brokers", "--entity-default",
                      "--delete-config", "log.segment.bytes,log.retention.bytes")

    def back_to_static():
        d = describe(ResourceType.TOPIC, plain)
        check_source(d, "segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG)
        check_source(d, "retention.bytes", "-1", ConfigSource.DEFAULT_CONFIG)
    eventually(back_to_static, "%s back to the static values" % plain)


@S.scenario("read-only-broker-config")
def read_only_broker_config():
    bid = str(broker_id())
    rc, out = kafka_configs("--alter", "--entity-type", "brokers", "--entity-name", bid,
                            "--add-config", "log.dirs=/elsewhere", check_rc=False)
    check(rc != 0 and "InvalidRequestException: Cannot update these configs dynamically: "
          "[log.dirs]" in out, "log.dirs altered? rc %d: %s" % (rc, out[-500:]))
    rc, out = kafka_configs("--alter", "--entity-type", "brokers", "--entity-default",
                            "--add-config", "log.retention.ms=abc", check_rc=False)
    check(rc != 0 and "InvalidRequestException: Invalid value abc for configuration "
          "log.retention.ms: Not a number of type LONG" in out, "rc %d: %s" % (rc, out[-500:]))
    _, out = kafka_configs("--describe", "--entity-type", "brokers", "--entity-default")
    check("log.retention.ms" not in out, "refused value stored: %s" % out[-500:])


@S.scenario("invalid-values")
def invalid_values():
    topic = name("invalid")
    create_topic(topic)
    rc, out = kafka_configs("--alter", "--entity-type", "topics", "--entity-name", topic,
                            "--add-config", "retention.ms=abc", check_rc=False)
    check(rc != 0 and "InvalidConfigurationException: Invalid value abc for configuration "
          "retention.ms: Not a number of type LONG" in out, "rc %d: %s" % (rc, out[-500:]))
    a = admin()
    for key, value, message in [
        ("cleanup.policy", "bogus", "Invalid value bogus for configuration cleanup.policy: "
                                    "String must be one of: compact, delete"),
        ("min.insync.replicas", "0", "Invalid value 0 for configuration min.insync.replicas: "
                                     "Value must be at least 1"),
        ("no.such.config", "1", "Unknown topic config name: no.such.config"),
    ]:
        res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
        try:
            a.incremental_alter_configs([res], request_timeout=T)[res].result(timeout=T)
            check(False, "%s=%s accepted" % (key, value))
        except Exception as e:  # KafkaException carrying the KafkaError
            err = e.args[0]
            check(err.name() == "INVALID_CONFIG" and message in err.str(),
                  "%s=%s: %s %s" % (key, value, err.name(), err.str()))
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([res], validate_only=True, request_timeout=T)[res].result(timeout=T)
    check_source(describe(ResourceType.TOPIC, topic), "retention.ms", "604800000",
                 ConfigSource.DEFAULT_CONFIG)


@S.scenario("legacy-alter-configs")
def legacy_alter_configs():
    topic = name("legacy")
    create_topic(topic, {"retention.ms": "3600000"})
    a = admin()
    res = ConfigResource(ResourceType.TOPIC, topic, set_config={"segment.ms": "7200000"})
    a.alter_configs([res], request_timeout=T)[res].result(timeout=T)

    def replaced():
        d = describe(ResourceType.TOPIC, topic)
        check_source(d, "segment.ms", "7200000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        check_source(d, "retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG)
    eventually(replaced, "%s's configs replaced" % topic)


def broker_ctl(cmd):
    check(BROKER_CTL, "BROKER_CTL is not set")
    r = subprocess.run(shlex.split(BROKER_CTL) + [cmd], timeout=150,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    check(r.returncode == 0, "broker-ctl %s exited %d: %s" % (
        cmd, r.returncode, r.stdout.decode(errors="replace")[-400:]))


@S.scenario("survives-restart", timeout=240)
def survives_restart():
    topic = name("restart")
    create_topic(topic)
    bid = str(broker_id())
    alter_topic(topic, "retention.bytes=123456789", "cleanup.policy=delete")
    kafka_configs("--alter", "--entity-type", "brokers", "--entity-default",
                  "--add-config", "log.roll.ms=3600000")
    kafka_configs("--alter", "--entity-type", "brokers", "--entity-name", bid,
                  "--add-config", "message.max.bytes=2000000")

    def still_there(when):
        d = describe(ResourceType.TOPIC, topic)
        check_source(d, "retention.bytes", "123456789", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        check_source(d, "segment.ms", "3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        check_source(d, "max.message.bytes", "2000000", ConfigSource.DYNAMIC_BROKER_CONFIG)
        info("configs intact %s" % when)

    eventually(lambda: still_there("before the restarts"), "configs applied")
    try:
        for how in ("kill9", "stop"):
            broker_ctl(how)
            broker_ctl("start")
            wait_until(lambda: topic in admin().list_topics(timeout=T).topics, 60,
                       "topic back after %s" % how)
            wait_until(lambda: still_there("after " + how) is None, 30, "configs after " + how)
    finally:
        kafka_configs("--alter", "--entity-type", "brokers", "--entity-default",
                      "--delete-config", "log.roll.ms")
        kafka_configs("--alter", "--entity-type", "brokers", "--entity-name", bid,
                      "--delete-config", "message.max.bytes")


if __name__ == "__main__":
    S.main()
