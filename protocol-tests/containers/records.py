#!/usr/bin/env python3
"""Produce or read back numbered records with confluent-kafka (librdkafka), for the
containers suite.

  records.py produce BOOTSTRAP TOPIC N   creates TOPIC (1 partition) unless it exists, then
                                         produces value-0 .. value-(N-1) with acks=all;
                                         exit 0 once every record is acknowledged
  records.py consume BOOTSTRAP TOPIC N   reads partition 0 from the beginning; exit 0 if
                                         exactly value-0 .. value-(N-1) come back, in order
Errors go to stderr; each command gives up after 30 s.
"""
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

DEADLINE_S = 30


def errors(err):
    print("librdkafka: %s" % err, file=sys.stderr)


def produce(bootstrap, topic, n):
    admin = AdminClient({"bootstrap.servers": bootstrap, "error_cb": errors})
    fut = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic]
    try:
        fut.result(timeout=DEADLINE_S)
    except Exception as e:  # an existing topic is fine: the records go after its own
        if "TOPIC_ALREADY_EXISTS" not in str(e):
            print("create %s: %s" % (topic, e), file=sys.stderr)
            return 1
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "enable.idempotence": True, "error_cb": errors})
    failed = []

    def delivered(err, msg):
        if err is not None:
            failed.append(str(err))

    for i in range(n):
        p.produce(topic, value=("value-%d" % i).encode(), key=str(i).encode(),
                  on_delivery=delivered)
    left = p.flush(DEADLINE_S)
    if left or failed:
        print("produce: %d not delivered, errors: %s" % (left, failed[:3]), file=sys.stderr)
        return 1
    return 0


def consume(bootstrap, topic, n):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "containers-suite",
                  "enable.auto.commit": False, "error_cb": errors})
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
