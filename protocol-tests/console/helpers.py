"""Kafka-side helpers of the console suite (confluent-kafka), run by console_test.mjs.

  helpers.py topics BOOTSTRAP NAME:PARTITIONS[:key=value,...] ...   create topics (with configs)
  helpers.py consumer BOOTSTRAP TOPIC GROUP PROTOCOL COUNT...      a consumer in a group of
        PROTOCOL (classic, or consumer: KIP-848): for each COUNT, read until that many records were seen, commit that offset synchronously,
        print "committed N" and wait for a line on stdin; then close
  helpers.py scram BOOTSTRAP ADMIN_USER ADMIN_PASSWORD USER PASSWORD   add a SCRAM-SHA-256 user
  helpers.py placed BOOTSTRAP NAME B0,B1,...   create a topic whose partition i has one replica,
        on broker Bi
  helpers.py coordinators BOOTSTRAP GROUP...   print "GROUP NODE" for each group: the broker
        that coordinates it (DescribeConsumerGroups, which asks FindCoordinator)
  helpers.py schemas BOOTSTRAP REGISTRY_URL AVRO_TOPIC JSON_TOPIC   two records to AVRO_TOPIC
        with confluent-kafka's AvroSerializer (registering `AVRO_TOPIC-value` in the broker's
        schema registry), a JSON schema registered under `JSON_TOPIC-value` and a Protobuf one
        under `JSON_TOPIC-point`, and a record in Confluent's wire format naming each to
        JSON_TOPIC; prints "avro ID", "json ID" and "protobuf ID"
Every wait is bounded; a failure prints "error: ..." and exits 1.
"""
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

T = 30


def topics(bootstrap, specs):
    a = AdminClient({"bootstrap.servers": bootstrap})
    new = []
    for spec in specs:
        parts = spec.split(":")
        cfg = dict(kv.split("=", 1) for kv in parts[2].split(",")) if len(parts) > 2 else {}
        new.append(NewTopic(parts[0], int(parts[1]), 1, config=cfg))
    for name, f in a.create_topics(new, operation_timeout=T).items():
        f.result(T)
        print("created " + name, flush=True)


def consumer(bootstrap, topic, group, protocol, counts):
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "client.id": "console-test-consumer", "auto.offset.reset": "earliest",
            "enable.auto.commit": False}
    if protocol == "classic":
        conf["session.timeout.ms"] = 45000
    c = Consumer(conf)
    c.subscribe([topic])
    seen = 0
    deadline = time.time() + 60
    for n in counts:
        while seen < n:
            if time.time() > deadline:
                raise SystemExit("error: read %d of %d records in 60 s" % (seen, n))
            m = c.poll(1.0)
            if m is None or m.error():
                continue
            seen += 1
        c.commit(offsets=[TopicPartition(topic, 0, n)], asynchronous=False)
        print("committed %d" % n, flush=True)
        if not sys.stdin.readline():
            break
    c.close()


def scram(bootstrap, admin_user, admin_password, user, password):
    a = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanism": "PLAIN", "sasl.username": admin_user,
                     "sasl.password": admin_password})
    up = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), password.encode())
    for _, f in a.alter_user_scram_credentials([up]).items():
        f.result(T)
    print("scram user " + user, flush=True)


def placed(bootstrap, name, brokers):
    a = AdminClient({"bootstrap.servers": bootstrap})
    assignment = [[int(b)] for b in brokers.split(",")]
    t = NewTopic(name, len(assignment), -1, replica_assignment=assignment)
    for n, f in a.create_topics([t], operation_timeout=T).items():
        f.result(T)
        print("created " + n, flush=True)


COORDINATOR_BUSY = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                    KafkaError.COORDINATOR_NOT_AVAILABLE)


def coordinators(bootstrap, groups):
    """Right after a cluster starts, the coordinators of __consumer_offsets may still be loading
    (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR): a group is asked again, as a client retries
    a retriable error, for at most 30 s."""
    a = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.time() + T
    for g in groups:
        while True:
            try:
                found = a.describe_consumer_groups([g], request_timeout=T)[g].result(T)
                break
            except KafkaException as e:
                # librdkafka does not flag NOT_COORDINATOR from ConsumerGroupDescribe as
                # retriable; its consumer finds the coordinator again and retries it.
                busy = e.args[0].retriable() or e.args[0].code() in COORDINATOR_BUSY
                if not busy or time.time() > deadline:
                    raise
                time.sleep(0.5)
        print("%s %d" % (g, found.coordinator.id), flush=True)


AVRO_USER = """{"type": "record", "name": "User", "namespace": "console.test",
  "fields": [{"name": "name", "type": "string"}, {"name": "n", "type": "long"}]}"""


def schemas(bootstrap, registry_url, avro_topic, json_topic):
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    sr = SchemaRegistryClient({"url": registry_url})
    ser = AvroSerializer(sr, AVRO_USER)
    p = Producer({"bootstrap.servers": bootstrap})
    ctx = SerializationContext(avro_topic, MessageField.VALUE)
    for user in ({"name": "ada", "n": 1}, {"name": "bob", "n": 2}):
        p.produce(avro_topic, key=user["name"], value=ser(user, ctx), partition=0)
    print("avro %d" % sr.get_latest_version(avro_topic + "-value").schema_id, flush=True)
    json_schema = '{"type": "object", "properties": {"city": {"type": "string"}}}'
    jid = sr.register_schema(json_topic + "-value", Schema(json_schema, "JSON"))
    framed = b"\x00" + jid.to_bytes(4, "big") + b'{"city":"Lisbon"}'
    p.produce(json_topic, value=framed, partition=0)
    # A Protobuf record beside it: message indexes [0] (one zero byte), then x = 150.
    proto = 'syntax = "proto3"; package console.test; message Point { int32 x = 1; }'
    pid = sr.register_schema(json_topic + "-point", Schema(proto, "PROTOBUF"))
    framed = b"\x00" + pid.to_bytes(4, "big") + b"\x00" + b"\x08\x96\x01"
    p.produce(json_topic, value=framed, partition=0)
    if p.flush(T) != 0:
        raise SystemExit("error: records not delivered in %d s" % T)
    print("json %d" % jid, flush=True)
    print("protobuf %d" % pid, flush=True)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    try:
        if cmd == "topics":
            topics(args[0], args[1:])
        elif cmd == "consumer":
            consumer(args[0], args[1], args[2], args[3], [int(n) for n in args[4:]])
        elif cmd == "scram":
            scram(*args[:5])
        elif cmd == "placed":
            placed(*args[:3])
        elif cmd == "coordinators":
            coordinators(args[0], args[1:])
        elif cmd == "schemas":
            schemas(*args[:4])
        else:
            raise SystemExit("error: unknown command " + cmd)
    except KafkaException as e:
        raise SystemExit("error: %s" % e)


if __name__ == "__main__":
    main()
