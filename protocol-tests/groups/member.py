#!/usr/bin/env python3
"""One confluent-kafka group member, run as a subprocess so it can be killed with SIGKILL.

Usage: member.py <bootstrap> <group> <topic> [key=value librdkafka settings...]
Prints JSON lines on stdout: {"ev": "assign"|"revoke"|"lost", "parts": [...], "proto": ...},
{"ev": "msg", "p": partition, "o": offset} (the processing: printed before the
synchronous commit of its offset), {"ev": "gen", "gen": generation, "member": member id} each
time the group generation or member id the client holds changes, {"ev": "closed"}.
SIGTERM closes cleanly.
"""
import json
import signal
import struct
import sys

from confluent_kafka import Consumer, KafkaException, TopicPartition

bootstrap, group, topic = sys.argv[1:4]
conf = {
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "topic.metadata.refresh.interval.ms": 2000,
}
for kv in sys.argv[4:]:
    k, _, v = kv.partition("=")
    conf[k] = v
running = True


def out(**kw):
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def stop(*_):
    global running
    running = False


signal.signal(signal.SIGTERM, stop)
c = Consumer(conf)


def on_assign(cons, parts):
    out(ev="assign", parts=sorted(p.partition for p in parts), proto=cons.rebalance_protocol() if hasattr(cons, "rebalance_protocol") else "")
    if conf.get("partition.assignment.strategy") == "cooperative-sticky":
        cons.incremental_assign(parts)
    else:
        cons.assign(parts)


def on_revoke(cons, parts):
    out(ev="revoke", parts=sorted(p.partition for p in parts))
    if conf.get("partition.assignment.strategy") == "cooperative-sticky":
        cons.incremental_unassign(parts)
    else:
        cons.unassign()


def on_lost(cons, parts):
    out(ev="lost", parts=sorted(p.partition for p in parts))


def generation():
    """(generation, member id) from librdkafka's serialized group metadata: b"CGMDv2:", the
    generation as a host-order int32, then NUL-terminated group id and member id."""
    md = c.consumer_group_metadata()
    if not md.startswith(b"CGMDv2:") or len(md) < 11:
        return None
    gen = struct.unpack_from("=i", md, 7)[0]
    fields = md[11:].split(b"\0")
    return gen, fields[1].decode() if len(fields) > 1 else ""


c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
last_gen = None
while running:
    m = c.poll(0.2)
    g = generation()
    if g != last_gen:
        last_gen = g
        if g is not None:
            out(ev="gen", gen=g[0], member=g[1])
    if m is None or m.error():
        continue
    out(ev="msg", p=m.partition(), o=m.offset())  # processing, then the commit
    try:
        c.commit(message=m, asynchronous=False)
    except KafkaException as e:
        # A commit racing a rebalance fails; the message is redelivered (at least once).
        out(ev="commit_failed", p=m.partition(), o=m.offset(), err=str(e))
c.close()
out(ev="closed")
