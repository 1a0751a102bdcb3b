#!/usr/bin/env python3
"""Configs suite: kafka-configs (Kafka 4.4's ConfigCommand) and confluent-kafka's admin client
change topic and dynamic broker configs on the running broker at $BOOTSTRAP; the effects are
read from the partition directories under $BROKER_DATA and from DescribeConfigs. See ./run for
the scenarios."""
import os
import re
import shlex
import subprocess

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewTopic, OffsetSpec, ResourceType)

import wire
from harness import BOOTSTRAP, BROKER_CTL, RUN_TAG, Suite, check, host_port, info, wait_until

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


def kafka_tool(main_class, args, check_rc=True, sub=()):
    """Runs one of Kafka's command-line tools by main class (`sub`: the subcommand words that
    come before --bootstrap-server); returns (rc, stdout + stderr)."""
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
           "-Dlog4j2.configurationFile=" + LOG4J, "-cp", os.path.join(KAFKA_LIBS, "*"),
           "org.apache.kafka.tools." + main_class] + list(sub) + [
               "--bootstrap-server", BOOTSTRAP] + list(args)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=90)
    out = r.stdout.decode(errors="replace")
    if check_rc:
        check(r.returncode == 0, "%s %s exited %d: %s" % (
            main_class, " ".join(args), r.returncode, out[-600:]))
    return r.returncode, out


def kafka_configs(*args, check_rc=True):
    return kafka_tool("ConfigCommand", args, check_rc)


def kafka_features(*args, check_rc=True):
    return kafka_tool("FeatureCommand", args, check_rc)


def kafka_topics(*args):
    return kafka_tool("TopicCommand", args)[1]


def alter_topic(topic, *configs):
    kafka_configs("--alter", "--entity-type", "topics", "--entity-name", topic,
                  "--add-config", ",".join(configs))


def create_topic(topic, config=None, partitions=1):
    fs = admin().create_topics([NewTopic(topic, partitions, 1, config=config or {})],
                               request_timeout=T)
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



def described_partitions(out, topic):
    """The partition numbers kafka-topics --describe lists for topic, in order, each line
    checked to carry the ELR columns (null ELR lists would fail the tool)."""
    parts = []
    for line in out.splitlines():
        cols = [c.strip() for c in line.strip().split("\t")]
        if cols and cols[0] == "Topic: %s" % topic and len(cols) > 1 and \
                cols[1].startswith("Partition: "):
            check(any(c.startswith("Elr:") for c in cols), "no Elr column: %r" % line)
            parts.append(int(cols[1].split()[1]))
    return parts


@S.scenario("describe-topic-partitions", timeout=150)
def describe_topic_partitions():
    many, one, missing = name("dtp-a"), name("dtp-b"), name("dtp-missing")
    create_topic(many, partitions=25)
    create_topic(one)
    hp = host_port()
    # Named topics (unsorted, one unknown), 7 partitions per answer, following the cursor.
    seen, cursor, pages, ids, unknown = [], None, 0, {}, []
    while True:
        topics, cursor = wire.describe_topic_partitions(hp, [one, missing, many], 7, cursor)
        pages += 1
        check(pages <= 10, "cursor loop did not end: %s" % (cursor,))
        check(sum(len(t["partitions"]) for t in topics if not t["error"]) <= 7,
              "page %d holds more than 7 partitions" % pages)
        for t in topics:
            if t["error"]:
                check(t["name"] == missing and t["error"] == 3 and not t["partitions"],
                      "error topic %s" % t)
                unknown.append(t["name"])
                continue
            check(t["operations"] == 3576 and not t["internal"], "topic fields %s" % t)
            check(t["id"] != "00" * 16 and ids.setdefault(t["name"], t["id"]) == t["id"],
                  "topic id of %s: %s" % (t["name"], t["id"]))
            for (index, leader, replicas, isr, elr, offline) in t["partitions"]:
                check(leader >= 0 and replicas == [leader] and isr == [leader] and
                      elr == [] and offline == [], "partition %s-%d" % (t["name"], index))
                seen.append((t["name"], index))
        if cursor is None:
            break
        info("page %d ends at cursor %s" % (pages, cursor))
    want = [(many, i) for i in range(25)] + [(one, 0)]
    check(seen == want, "partitions in order %s, expected %s" % (seen, want))
    check(unknown == [missing], "unknown topic reported %s" % unknown)
    check(pages == 4, "%d pages for 26 partitions by 7" % pages)
    # The cursor's topic must be among the named ones, its partition index not negative.
    topics, cursor = wire.describe_topic_partitions(hp, [one], 10, (many, 0))
    check([(t["name"], t["error"]) for t in topics] == [(one, 42)] and cursor is None,
          "cursor topic not named: %s %s" % (topics, cursor))
    topics, _ = wire.describe_topic_partitions(hp, [many], 10, (many, -1))
    check([(t["name"], t["error"]) for t in topics] == [(many, 42)],
          "negative cursor partition: %s" % topics)
    # Every topic from the cursor on: the cursor topic's partitions from its index.
    # (Limit 2: used up exactly by the cursor topic, the cursor points at the next topic.)
    topics, cursor = wire.describe_topic_partitions(hp, [], 2, (many, 23))
    check([(t["name"], [p[0] for p in t["partitions"]]) for t in topics] == [(many, [23, 24])]
          and cursor is not None and cursor[0] > many and cursor[1] == 0,
          "all topics from %s-23: %s, cursor %s" % (many, topics, cursor))
    # The Java admin client pages through DescribeTopicPartitions the same way.
    out = kafka_topics("--describe", "--topic", many, "--partition-size-limit-per-response", "4")
    check(described_partitions(out, many) == list(range(25)), "kafka-topics --describe: %s" %
          out[-800:])
    out = kafka_topics("--describe", "--partition-size-limit-per-response", "3")
    check(described_partitions(out, many) == list(range(25)) and
          described_partitions(out, one) == [0], "kafka-topics --describe (all): %s" % out[-800:])


@S.scenario("list-config-resources")
def list_config_resources():
    topic = name("lcr")
    create_topic(topic)
    hp = host_port()
    bid = str(broker_id())
    err, every = wire.list_config_resources(hp, [])
    info("ListConfigResources: %s" % every)
    check(err == 0 and (bid, 8) in every and (bid, 4) in every and (topic, 2) in every,
          "every resource: error %d, %s" % (err, every))
    order = [32, 16, 8, 4, 2]
    types = [t for _, t in every]
    check(types == sorted(types, key=order.index), "types in Kafka's order: %s" % types)
    err, topics = wire.list_config_resources(hp, [2])
    check(err == 0 and (topic, 2) in topics and all(t == 2 for _, t in topics),
          "topics only: %d %s" % (err, topics))
    err, some = wire.list_config_resources(hp, [4, 8])
    check(err == 0 and some == [(bid, 8), (bid, 4)], "brokers and loggers: %d %s" % (err, some))
    err, none = wire.list_config_resources(hp, [3])
    check(err == 35 and none == [], "unknown type 3: error %d, %s" % (err, none))
    err, metrics = wire.list_config_resources(hp, [], version=0)
    check(err == 0 and metrics == [], "v0 (client metrics): error %d, %s" % (err, metrics))



def feature_line(feature):
    """kafka-features describe's fields for feature: {SupportedMinVersion: .., ...}."""
    _, out = kafka_features("describe")
    for line in out.splitlines():
        if line.startswith("Feature: %s\t" % feature) or line.split()[:2] == ["Feature:", feature]:
            words = line.split()
            return dict(zip(words[2::2], words[3::2]))
    raise AssertionError("%s not described: %s" % (feature, out[-800:]))


def finalized_level(feature, level):
    def at_level():
        f = feature_line(feature)
        check(f.get("FinalizedVersionLevel:") == level, "%s finalized at %s, expected %s" % (
            feature, f.get("FinalizedVersionLevel:"), level))
        return True
    eventually(at_level, "%s at level %s" % (feature, level))


@S.scenario("features", timeout=150)
def features():
    tv = feature_line("transaction.version")
    check(tv.get("SupportedMinVersion:") == "0" and tv.get("SupportedMaxVersion:") == "2" and
          tv.get("FinalizedVersionLevel:") == "2", "transaction.version: %s" % tv)
    mv = feature_line("metadata.version")
    check(mv.get("FinalizedVersionLevel:") == "4.4-IV2", "metadata.version: %s" % mv)
    _, out = kafka_features("downgrade", "--feature", "transaction.version=1", "--dry-run")
    check("transaction.version can be downgraded to 1." in out, "dry run: %s" % out[-400:])
    finalized_level("transaction.version", "2")
    try:
        _, out = kafka_features("downgrade", "--feature", "transaction.version=1")
        check("transaction.version was downgraded to 1." in out, "downgrade: %s" % out[-400:])
        finalized_level("transaction.version", "1")
        for args, message in [
            (["upgrade", "--feature", "transaction.version=3"],
             "Could not upgrade transaction.version to 3. The update failed for all features "
             "since the following feature had an error: Invalid update version 3 for feature "
             "transaction.version. Local controller %s only supports versions 0-2"),
            (["upgrade", "--feature", "no.such.feature=1"],
             "Invalid update version 1 for feature no.such.feature. Local controller %s does "
             "not support this feature."),
        ]:
            rc, out = kafka_features(*args, check_rc=False)
            pattern = re.escape(message).replace(re.escape("%s"), "[0-9]+")
            check(rc != 0 and re.search(pattern, out), "%s: rc %d: %s" % (
                " ".join(args), rc, out[-500:]))
    finally:
        kafka_features("upgrade", "--feature", "transaction.version=2")
    finalized_level("transaction.version", "2")


@S.scenario("unregister-broker")
def unregister_broker():
    rc, out = kafka_tool("ClusterTool", ["--id", "42"], check_rc=False, sub=["unregister"])
    check(rc != 0 and "BrokerIdNotRegisteredException: Broker ID 42 is not currently "
          "registered" in out, "kafka-cluster unregister --id 42: rc %d: %s" % (rc, out[-500:]))


def logger_levels(bid):
    """{logger: level} kafka-configs --describe --entity-type broker-loggers shows."""
    _, out = kafka_configs("--describe", "--entity-type", "broker-loggers", "--entity-name", bid)
    levels = {}
    for line in out.splitlines():
        m = re.match(r"\s+(\S+)=(\S+) sensitive=false synonyms=\{\}$", line)
        if m:
            levels[m.group(1)] = m.group(2)
    check("root" in levels, "no root logger described: %s" % out[-600:])
    return levels


@S.scenario("broker-loggers", timeout=120)
def broker_loggers():
    bid = str(broker_id())
    before = logger_levels(bid)
    logger = sorted(k for k in before if k != "root")[0]
    info("loggers: %d, changing %s (at %s)" % (len(before), logger, before[logger]))

    def alter(*args, ok=True):
        return kafka_configs("--alter", "--entity-type", "broker-loggers", "--entity-name", bid,
                             *args, check_rc=ok)
    alter("--add-config", "%s=DEBUG" % logger)
    try:
        eventually(lambda: check(logger_levels(bid)[logger] == "DEBUG", "%s not DEBUG" % logger),
                   "%s at DEBUG" % logger)
        for args, message in [
            (["--add-config", "%s=BOGUS" % logger],
             "InvalidConfigurationException: Cannot set the log level of %s to BOGUS as it is "
             "not a supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, "
             "WARN" % logger),
            (["--delete-config", "root"],
             "InvalidRequestException: Removing the log level of the root logger is not allowed"),
            (["--add-config", "no.such.logger=DEBUG"], "Invalid broker logger(s): no.such.logger"),
        ]:
            rc, out = alter(*args, ok=False)
            check(rc != 0 and message in out, "%s: rc %d: %s" % (" ".join(args), rc, out[-500:]))
    finally:
        alter("--delete-config", logger)
    after = logger_levels(bid)
    check(after[logger] == after["root"], "%s at %s after the delete, root at %s" % (
        logger, after[logger], after["root"]))


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
        ("segment.bytes", "1024", "Invalid value 1024 for configuration segment.bytes: "
                                  "Value must be at least 1048576"),
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


GROUP_TYPE = 32
DYNAMIC_GROUP_CONFIG = 8
DEFAULT_SOURCE = 5


def group_configs_of(group, **kw):
    """DescribeConfigs v4 of one group over the wire: {name: config dict}."""
    [r] = wire.describe_configs(host_port(), [(GROUP_TYPE, group, None)], **kw)
    check(r["error"] == 0, "describe group %s: error %d %s" % (group, r["error"], r["message"]))
    return r["configs"]


def alter_group(group, entries, validate_only=False):
    """IncrementalAlterConfigs of a GROUP resource with confluent-kafka: None, or the
    (error name, message) it was refused with."""
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    try:
        admin().incremental_alter_configs([res], validate_only=validate_only,
                                          request_timeout=T)[res].result(timeout=T)
        return None
    except Exception as e:  # KafkaException carrying the KafkaError
        err = e.args[0]
        return err.name(), err.str()


def group_value(group, key, value, source):
    c = group_configs_of(group).get(key)
    check(c is not None and c["value"] == value and c["source"] == source,
          "%s of %s: %s, expected %r (source %d)" % (key, group, c, value, source))


@S.scenario("group-configs", timeout=150)
def group_configs():
    group = name("grp")
    rc, out = kafka_configs("--describe", "--all", "--entity-type", "groups",
                            "--entity-name", group)
    lines = [l.strip() for l in out.splitlines() if "sensitive=" in l]
    check(len(lines) == 21 and any(l.startswith(
        "consumer.heartbeat.interval.ms=5000 sensitive=false synonyms={DEFAULT_CONFIG:"
        "group.consumer.heartbeat.interval.ms=5000}") for l in lines),
        "describe --all of a group that does not exist: %s" % out[-1500:])
    kafka_configs("--alter", "--entity-type", "groups", "--entity-name", group, "--add-config",
                  "consumer.heartbeat.interval.ms=6000,share.auto.offset.reset=earliest")

    def set_now():
        c = group_configs_of(group, synonyms=True, documentation=True)
        hb = c["consumer.heartbeat.interval.ms"]
        check(hb["value"] == "6000" and hb["source"] == DYNAMIC_GROUP_CONFIG and
              hb["synonyms"] == [("consumer.heartbeat.interval.ms", "6000", 8),
                                 ("group.consumer.heartbeat.interval.ms", "5000", 5)] and
              hb["type"] == 3 and not hb["read_only"] and not hb["sensitive"] and
              hb["doc"] == "The heartbeat interval given to the members of a consumer group.",
              "consumer.heartbeat.interval.ms: %s" % hb)
        reset = c["share.auto.offset.reset"]
        check(reset["value"] == "earliest" and reset["synonyms"] == [
            ("share.auto.offset.reset", "earliest", 8), ("share.auto.offset.reset", "latest", 5)],
            "share.auto.offset.reset: %s" % reset)
        lock = c["share.record.lock.duration.ms"]
        check(lock["source"] == DEFAULT_SOURCE and lock["synonyms"] == [
            ("group.share.record.lock.duration.ms", "30000", 5)],
            "share.record.lock.duration.ms: %s" % lock)
    eventually(set_now, "group configs of %s set" % group)
    plain = group_configs_of(group)
    check(plain["consumer.heartbeat.interval.ms"]["synonyms"] == [] and
          plain["consumer.heartbeat.interval.ms"]["doc"] is None,
          "without synonyms and documentation: %s" % plain["consumer.heartbeat.interval.ms"])
    _, out = kafka_configs("--describe", "--entity-type", "groups", "--entity-name", group)
    check("consumer.heartbeat.interval.ms=6000" in out and "share.auto.offset.reset=earliest"
          in out and "share.session.timeout.ms" not in out, "describe (dynamic only): %s" % out)
    err, listed = wire.list_config_resources(host_port(), [GROUP_TYPE])
    check(err == 0 and (group, GROUP_TYPE) in listed, "ListConfigResources groups: %s" % listed)
    kafka_configs("--alter", "--entity-type", "groups", "--entity-name", group,
                  "--delete-config", "consumer.heartbeat.interval.ms,share.auto.offset.reset")
    eventually(lambda: group_value(group, "consumer.heartbeat.interval.ms", "5000",
                                   DEFAULT_SOURCE), "group configs of %s deleted" % group)
    err, listed = wire.list_config_resources(host_port(), [GROUP_TYPE])
    check(err == 0 and (group, GROUP_TYPE) not in listed, "after the deletion: %s" % listed)
    [r] = wire.describe_configs(host_port(), [(GROUP_TYPE, "", None)])
    check(r["error"] == 42 and r["message"] == "Group name must not be empty",
          "empty group name: %s" % r)


@S.scenario("group-config-errors", timeout=150)
def group_config_errors():
    group = name("grp-bad")
    rc, out = kafka_configs("--alter", "--entity-type", "groups", "--entity-name", group,
                            "--add-config", "consumer.session.timeout.ms=1000", check_rc=False)
    check(rc != 0 and "InvalidConfigurationException: consumer.session.timeout.ms must be in "
          "the range 45000 to 60000 inclusive." in out, "rc %d: %s" % (rc, out[-500:]))
    SET = AlterConfigOpType.SET
    for key, value, op, message in [
        ("x", "1", SET, "Unknown group config name: x"),
        ("consumer.heartbeat.interval.ms", "20000", SET,
         "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
        ("consumer.session.timeout.ms", "abc", SET, "Invalid value abc for configuration "
         "consumer.session.timeout.ms: Not a number of type INT"),
        ("share.record.lock.duration.ms", "500", SET, "Invalid value 500 for configuration "
         "share.record.lock.duration.ms: Value must be at least 1000"),
        ("share.delivery.count.limit", "50", SET,
         "share.delivery.count.limit must be in the range 2 to 10 inclusive."),
        ("streams.num.standby.replicas", "5", SET,
         "streams.num.standby.replicas must be less than or equal to 2"),
        ("share.isolation.level", "READ_COMMITTED", SET, "Invalid value READ_COMMITTED for "
         "configuration share.isolation.level: String must be one of: read_committed, "
         "read_uncommitted"),
        ("share.auto.offset.reset", "by_duration:-PT1H", SET,
         "The value must be either 'earliest', 'latest' or of the format "
         "'by_duration:<PnDTnHnMn.nS>'."),
        ("streams.rack.aware.assignment.tags", "a", AlterConfigOpType.APPEND,
         "Can't APPEND to key streams.rack.aware.assignment.tags because its type is not LIST."),
        ("consumer.heartbeat.interval.ms", "6000", AlterConfigOpType.SUBTRACT,
         "Can't SUBTRACT to key consumer.heartbeat.interval.ms because its type is not LIST."),
    ]:
        got = alter_group(group, [ConfigEntry(key, value, incremental_operation=op)])
        check(got is not None and got[0] == "INVALID_CONFIG" and message in got[1],
              "%s %s=%s: %s" % (op, key, value, got))
    ok = alter_group(group, [ConfigEntry("share.isolation.level", "read_committed",
                                         incremental_operation=SET)], validate_only=True)
    check(ok is None, "validate_only: %s" % (ok,))
    group_value(group, "share.isolation.level", "read_uncommitted", DEFAULT_SOURCE)
    # AlterConfigs replaces a group's configs whole.
    ok = alter_group(group, [ConfigEntry("share.delivery.count.limit", "4",
                                         incremental_operation=SET)])
    check(ok is None, "set share.delivery.count.limit: %s" % (ok,))
    res = ConfigResource(ResourceType.GROUP, group,
                         set_config={"share.isolation.level": "read_committed"})
    admin().alter_configs([res], request_timeout=T)[res].result(timeout=T)

    def replaced():
        group_value(group, "share.isolation.level", "read_committed", DYNAMIC_GROUP_CONFIG)
        group_value(group, "share.delivery.count.limit", "5", DEFAULT_SOURCE)
    eventually(replaced, "%s's configs replaced" % group)
    kafka_configs("--alter", "--entity-type", "groups", "--entity-name", group,
                  "--delete-config", "share.isolation.level")


@S.scenario("group-heartbeat-interval", timeout=120)
def group_heartbeat_interval():
    topic = name("grp-hb")
    create_topic(topic)
    group = name("grp-hb")
    kafka_configs("--alter", "--entity-type", "groups", "--entity-name", group,
                  "--add-config", "consumer.heartbeat.interval.ms=7000")
    eventually(lambda: group_value(group, "consumer.heartbeat.interval.ms", "7000",
                                   DYNAMIC_GROUP_CONFIG), "heartbeat interval of %s set" % group)
    hp = host_port()
    member = "m-" + RUN_TAG
    # The admin client's FindCoordinator creates __consumer_offsets where it is missing.
    wait_until(lambda: admin().describe_consumer_groups([group], request_timeout=T)[group]
               .result(timeout=T), 60, "the group coordinator of %s" % group)

    def joined(want):
        """A member joins, is told the interval, and leaves."""
        err, epoch, interval = wire.consumer_group_heartbeat(hp, group, member, 0, [topic])
        if err in (14, 15, 16):  # coordinator loading / not available / not coordinator
            raise AssertionError("coordinator not ready: error %d" % err)
        check(err == 0 and epoch >= 1 and interval == want,
              "ConsumerGroupHeartbeat join: error %d, epoch %d, interval %d (expected %d)" % (
                  err, epoch, interval, want))
        err, epoch, _ = wire.consumer_group_heartbeat(hp, group, member, -1, None)
        check(err == 0 and epoch == -1, "leave: error %d, epoch %d" % (err, epoch))
    wait_until(lambda: joined(7000) is None, 30, "a member of %s told 7000 ms" % group)
    kafka_configs("--alter", "--entity-type", "groups", "--entity-name", group,
                  "--delete-config", "consumer.heartbeat.interval.ms")
    eventually(lambda: group_value(group, "consumer.heartbeat.interval.ms", "5000",
                                   DEFAULT_SOURCE), "heartbeat interval of %s deleted" % group)
    wait_until(lambda: joined(5000) is None, 30, "a member of %s told 5000 ms" % group)


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
    kafka_features("downgrade", "--feature", "transaction.version=1")
    group = name("grp-restart")
    kafka_configs("--alter", "--entity-type", "groups", "--entity-name", group,
                  "--add-config", "share.record.lock.duration.ms=20000")

    def still_there(when):
        d = describe(ResourceType.TOPIC, topic)
        check_source(d, "retention.bytes", "123456789", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        check_source(d, "segment.ms", "3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        check_source(d, "max.message.bytes", "2000000", ConfigSource.DYNAMIC_BROKER_CONFIG)
        tv = feature_line("transaction.version").get("FinalizedVersionLevel:")
        check(tv == "1", "transaction.version finalized at %s, expected 1" % tv)
        group_value(group, "share.record.lock.duration.ms", "20000", DYNAMIC_GROUP_CONFIG)
        err, listed = wire.list_config_resources(host_port(), [GROUP_TYPE])
        check(err == 0 and (group, GROUP_TYPE) in listed, "groups listed: %s" % listed)
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
        kafka_features("upgrade", "--feature", "transaction.version=2")
        kafka_configs("--alter", "--entity-type", "groups", "--entity-name", group,
                      "--delete-config", "share.record.lock.duration.ms")


if __name__ == "__main__":
    S.main()
