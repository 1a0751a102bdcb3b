#!/usr/bin/env python3
"""Log dirs suite: a replica moved between the two log dirs of the broker at $BOOTSTRAP with
Kafka 4.4's kafka-reassign-partitions (AlterReplicaLogDirs), seen with kafka-log-dirs
(DescribeLogDirs), in the directories $LOG_DIR_A and $LOG_DIR_B, and through confluent-kafka;
then kill -9 and a restart. See ./run for the scenarios."""
import json
import os
import subprocess

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from harness import BOOTSTRAP, BROKER_CTL, RUN_TAG, Suite, check, info, wait_until

S = Suite("log-dirs")
T = 30
KAFKA_LIBS = os.environ.get("KAFKA_LIBS", "")
ROOT = os.environ.get("SLUICE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
LOG4J = os.path.join(ROOT, "scripts", "kafka", "log4j2-tools.properties")
TMP = os.environ.get("SUITE_TMP", "/tmp")
DIRS = [os.environ["LOG_DIR_A"], os.environ["LOG_DIR_B"]]


def quiet(err):
    info("librdkafka: %s" % err)


def kafka_tool(main_class, *args):
    """Runs one of Kafka's tools by main class; its output (stdout + stderr), rc 0 required."""
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
           "-Dlog4j2.configurationFile=" + LOG4J, "-cp", os.path.join(KAFKA_LIBS, "*"),
           "org.apache.kafka.tools." + main_class, "--bootstrap-server", BOOTSTRAP] + list(args)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=90)
    out = r.stdout.decode(errors="replace")
    check(r.returncode == 0, "%s %s exited %d: %s" % (
        main_class, " ".join(args), r.returncode, out[-600:]))
    return out


def broker_ctl(cmd):
    r = subprocess.run([BROKER_CTL, cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=120)
    check(r.returncode == 0, "broker-ctl %s exited %d: %s" % (
        cmd, r.returncode, r.stdout.decode(errors="replace")[-600:]))


def broker_id():
    md = AdminClient({"bootstrap.servers": BOOTSTRAP, "error_cb": quiet}).list_topics(timeout=T)
    return min(md.brokers)


def replicas(topic):
    """{(log dir, partition name): is_future} from kafka-log-dirs --describe (its JSON line)."""
    out = kafka_tool("LogDirsCommand", "--describe", "--topic-list", topic)
    line = next((l for l in out.splitlines() if l.startswith("{")), None)
    check(line is not None, "kafka-log-dirs printed no JSON: %s" % out[-400:])
    found = {}
    for b in json.loads(line)["brokers"]:
        for d in b["logDirs"]:
            check(d.get("error") is None, "log dir %s: error %s" % (d["logDir"], d.get("error")))
            for p in d["partitions"]:
                found[(os.path.realpath(d["logDir"]), p["partition"])] = p["isFuture"]
    return found


def produce(topic, values):
    """Produces values to partition 0 (acks=all, idempotent); answers their offsets."""
    offsets = []
    errors = []

    def done(err, msg):
        if err:
            errors.append(err)
        else:
            offsets.append(msg.offset())

    p = Producer({"bootstrap.servers": BOOTSTRAP, "enable.idempotence": True,
                  "linger.ms": 5, "error_cb": quiet})
    for v in values:
        p.produce(topic, value=v, partition=0, on_delivery=done)
        p.poll(0)
    check(p.flush(T) == 0, "records still unacknowledged after %ds" % T)
    check(not errors, "produce errors: %s" % errors[:3])
    return sorted(offsets)


def read_all(topic, expected):
    """Every (offset, value) of partition 0, reading until `expected` records came."""
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "ld-" + RUN_TAG,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "error_cb": quiet})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        wait_until(lambda: got.extend((m.offset(), m.value()) for m in c.consume(500, 1.0)
                                      if not m.error()) or len(got) >= expected,
                   T, "%d records of %s" % (expected, topic))
    finally:
        c.close()
    return got


def in_dir(found, d, name):
    return found.get((os.path.realpath(d), name)) is False


@S.scenario("move-partition", timeout=240)
def move_partition():
    t = "ld-move-%s" % RUN_TAG
    name = t + "-0"
    kafka_tool("TopicCommand", "--create", "--topic", t, "--partitions", "1",
               "--replication-factor", "1")
    values = [b"v%d" % i for i in range(300)]
    check(produce(t, values) == list(range(300)), "first offsets not 0..299")
    found = replicas(t)
    src = next((d for d in DIRS if in_dir(found, d, name)), None)
    check(src is not None, "%s in neither log dir: %s" % (name, found))
    dst = DIRS[1] if src == DIRS[0] else DIRS[0]
    info("moving %s from %s to %s" % (name, src, dst))

    plan = os.path.join(TMP, "move-%s.json" % RUN_TAG)
    with open(plan, "w") as f:
        json.dump({"version": 1, "partitions": [
            {"topic": t, "partition": 0, "replicas": [broker_id()], "log_dirs": [dst]}]}, f)
    out = kafka_tool("reassign.ReassignPartitionsCommand", "--reassignment-json-file", plan,
                     "--execute")
    check("Successfully started moving log directory to %s for replica %s" % (dst, name) in out,
          "--execute: %s" % out[-400:])

    def moved():
        f = replicas(t)
        return in_dir(f, dst, name) and len(f) == 1
    wait_until(moved, 60, "%s alone in %s" % (name, dst), interval=1.0)
    check(any(n.endswith(".log") for n in os.listdir(os.path.join(dst, name))),
          "no segment file in %s" % os.path.join(dst, name))
    # Kafka removes the old directory (renamed *-delete) after log.segment.delete.delay.ms.
    wait_until(lambda: not [n for n in os.listdir(src) if n.startswith(name)], 30,
               "%s gone from %s (left: %s)" % (name, src, os.listdir(src)))
    got = read_all(t, 300)
    check(got == list(enumerate(values)), "records differ after the move")
    check(produce(t, [b"after-move-%d" % i for i in range(50)]) == list(range(300, 350)),
          "produce after the move did not continue at 300")

    broker_ctl("kill9")
    broker_ctl("start")
    wait_until(lambda: in_dir(replicas(t), dst, name), 60, "%s in %s after restart" % (name, dst),
               interval=1.0)
    got = read_all(t, 350)
    check([v for _, v in got] == values + [b"after-move-%d" % i for i in range(50)],
          "records differ after kill -9 and restart")
    check(produce(t, [b"after-restart"]) == [350], "produce after restart not at 350")


if __name__ == "__main__":
    S.main()
