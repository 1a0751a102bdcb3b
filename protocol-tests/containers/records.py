#!/usr/bin/env python3
"""Produce or read back numbered records with confluent-kafka (librdkafka), for the
containers suite.

  records.py produce BOOTSTRAP TOPIC N   creates TOPIC (1 partition) unless it exists, then
                                         produces value-0 .. value-(N-1) with acks=all;
                                         exit 0 once every record is acknowledged
  records.py consume BOOTSTRAP TOPIC N   reads partition 0 from the beginning; exit 0 if
                                         exactly value-0 .. value-(N-1) come back, in order
Errors go to stderr; each command gives up after 30 s (RECORDS_DEADLINE).

Environment, all optional: RECORDS_START=S numbers the records from S (consume expects
value-0 .. value-(N-1) all the same); RECORDS_RF and RECORDS_TOPIC_CONFIG (k=v,...) for the
topic created; RECORDS_SASL=user:password logs in with SASL PLAIN over SASL_PLAINTEXT.
"""
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

DEADLINE_S = float(os.environ.get("RECORDS_DEADLINE", "30"))


def client_conf(bootstrap):
    """The connection settings every client of this script uses."""
    conf = {"bootstrap.servers": bootstrap, "error_cb": errors}
    sasl = os.environ.get("RECORDS_SASL")
    if sasl:
        user, password = sasl.split(":", 1)
        conf.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                     "sasl.username": user, "sasl.password": password})
    return conf


def errors(err):
    print("librdkafka: %s" % err, file=sys.stderr)


def produce(bootstrap, topic, n):
    admin = AdminClient(client_conf(bootstrap))
    rf = int(os.environ.get("RECORDS_RF", "1"))
    cfg = dict(kv.split("=", 1) for kv in os.environ.get("RECORDS_TOPIC_CONFIG", "").split(",")
               if kv)
    new = NewTopic(topic, num_partitions=1, replication_factor=rf, config=cfg)
    end = time.monotonic() + DEADLINE_S
    while True:
        fut = admin.create_topics([new], operation_timeout=DEADLINE_S)[topic]
        try:
            fut.result(timeout=DEADLINE_S)
            break
        except Exception as e:
            # an existing topic is fine: the records go after its own
            if "TOPIC_ALREADY_EXISTS" in str(e):
                break
            # a cluster whose brokers are still registering, as with Kafka: ask again
            if "INVALID_REPLICATION_FACTOR" in str(e) and time.monotonic() < end:
                time.sleep(0.5)
                continue
            print("create %s: %s" % (topic, e), file=sys.stderr)
            return 1
    p = Producer(dict(client_conf(bootstrap), **{"acks": "all", "linger.ms": 5,
                                                  "enable.idempotence": True}))
    start = int(os.environ.get("RECORDS_START", "0"))
    failed = []

    def delivered(err, msg):
        if err is not None:
            failed.append(str(err))

    for i in range(start, start + n):
        p.produce(topic, value=("value-%d" % i).encode(), key=str(i).encode(),
                  on_delivery=delivered)
    left = p.flush(DEADLINE_S)
    if left or failed:
        print("produce: %d not delivered, errors: %s" % (left, failed[:3]), file=sys.stderr)
        return 1
    return 0


def consume(bootstrap, topic, n):
    c = Consumer(dict(client_conf(bootstrap), **{"group.id": "containers-suite",
                                                  "enable.auto.commit": False}))
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    end = time.monotonic() + DEADLINE_S
    try:
        while len(got) < n and time.monotonic() < end:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    print("consume: %s" % m.error(), file=sys.stderr)
                continue
            got.append(m.value().decode())
        # anything after the N expected records is an error too
        extra = c.poll(1.0)
        if extra is not None and not extra.error():
            got.append(extra.value().decode())
    finally:
        c.close()
    want = ["value-%d" % i for i in range(n)]
    if got != want:
        print("consume: %d records, want %d; first differences: %s" % (
            len(got), n, [(i, a, b) for i, (a, b) in enumerate(zip(got, want)) if a != b][:3]),
            file=sys.stderr)
        return 1
    return 0


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("produce", "consume"):
        print(__doc__, file=sys.stderr)
        return 2
    cmd, bootstrap, topic, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    return produce(bootstrap, topic, n) if cmd == "produce" else consume(bootstrap, topic, n)


if __name__ == "__main__":
    sys.exit(main())
