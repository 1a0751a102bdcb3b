#!/usr/bin/env python3
"""Schema Registry suite, Protobuf: confluent-kafka's ProtobufSerializer and
ProtobufDeserializer round-trip records through Sluice (a .proto compiled into a Python module
here with grpcio-tools), and Protobuf evolutions are accepted or refused under BACKWARD and FULL
as Confluent's SchemaDiff rules say. REGISTRY_PHASE selects the scenarios of one broker start
(see run); only the main start has Protobuf scenarios."""
import base64
import os

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2

import protos
from harness import BOOTSTRAP, RUN_TAG, Suite, check, info, main_phase
from test_registry import consume, incompatible, ok, refused

PHASE = os.environ.get("REGISTRY_PHASE", "main")
URL = os.environ["REGISTRY_URL"]
S = Suite("schema-registry")
T = 30

ADDRESS_PROTO = """syntax = "proto3";
package sluice.test.common;
message Address {
  string city = 1;
  int32 zip = 2;
}
"""

ORDER_PROTO = """syntax = "proto3";
package sluice.test;
import "google/protobuf/timestamp.proto";
import "sluice_test_common.proto";
message Order {
  string id = 1;
  int64 amount = 2;
  repeated string items = 3;
  sluice.test.common.Address ship_to = 4;
  google.protobuf.Timestamp at = 5;
  oneof payment {
    string card = 6;
    bool cash = 7;
  }
}
"""


def compiled():
    """The Python module protoc makes of ORDER_PROTO (and the one it imports)."""
    return protos.compiled([("sluice_test_common.proto", ADDRESS_PROTO),
                            ("sluice_test_order.proto", ORDER_PROTO)], "sluice_test_order_pb2")


@S.scenario("protobuf-round-trip", timeout=90)
def protobuf_round_trip():
    pb = compiled()
    topic = "sr-proto-orders-%s" % RUN_TAG
    a = AdminClient({"bootstrap.servers": BOOTSTRAP})
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=T)
    sr = SchemaRegistryClient({"url": URL})
    ser = ProtobufSerializer(pb.Order, sr, {"use.deprecated.format": False})
    p = Producer({"bootstrap.servers": BOOTSTRAP})
    orders = []
    for i in range(20):
        o = pb.Order(id="order-%d" % i, amount=i * 100 - 7, items=["a", "b"][: i % 3])
        o.ship_to.city = "city-%d" % i
        o.ship_to.zip = 10000 + i
        o.at.seconds = 1700000000 + i
        if i % 2:
            o.card = "card-%d" % i
        else:
            o.cash = True
        orders.append(o)
        p.produce(topic, value=ser(o, SerializationContext(topic, MessageField.VALUE)))
    check(p.flush(T) == 0, "records left unacknowledged")
    # The serializer registered the imported file under its name, with the main schema
    # referencing it; the well-known import needs no reference.
    latest = sr.get_latest_version(topic + "-value")
    check(latest.schema.schema_type == "PROTOBUF", "type %s" % latest.schema.schema_type)
    refs = [(r.name, r.subject) for r in latest.schema.references]
    check(refs == [("sluice_test_common.proto", "sluice_test_common.proto")], "references %s" % refs)
    # A fresh client reads them back through the ids in the records.
    de = ProtobufDeserializer(pb.Order, {"use.deprecated.format": False},
                              schema_registry_client=SchemaRegistryClient({"url": URL}))
    got = []
    for v in consume(topic, "sr-proto-%s" % RUN_TAG, len(orders)):
        check(v[0] == 0 and int.from_bytes(v[1:5], "big") == latest.schema_id,
              "record header %r" % v[:5])
        # One message in the file: its index list is the single byte 0.
        check(v[5] == 0, "message indexes %r" % v[5:7])
        got.append(de(v, SerializationContext(topic, MessageField.VALUE)))
    check(got == orders, "deserialized %s" % got[:2])


def proto(fields, extra=""):
    return 'syntax = "proto3";\npackage sluice.evolve;\n%s\nmessage User {\n%s\n}\n' % (extra, fields)


V1 = proto("string name = 1;\nint32 age = 2;")
COMPATIBLE = [
    ("add-field", proto("string name = 1;\nint32 age = 2;\nstring email = 3;")),
    ("rename-field", proto("string full_name = 1;\nint32 age = 2;\nstring email = 3;")),
    ("widen-int", proto("string full_name = 1;\nint64 age = 2;\nstring email = 3;")),
]
INCOMPATIBLE = [
    ("FIELD_SCALAR_KIND_CHANGED", proto("string full_name = 1;\nstring age = 2;\nstring email = 3;")),
    ("FIELD_KIND_CHANGED",
     proto("string full_name = 1;\nAge age = 2;\nstring email = 3;", "message Age { int32 v = 1; }")),
]


@S.scenario("protobuf-evolution", timeout=90)
def protobuf_evolution():
    sr = SchemaRegistryClient({"url": URL})
    for level in ["BACKWARD", "FULL"]:
        subj = "evolve-proto-%s-%s" % (level.lower(), RUN_TAG)
        sr.set_compatibility(subj, level)
        ids = [sr.register_schema(subj, Schema(V1, "PROTOBUF"))]
        for name, schema in COMPATIBLE:
            ids.append(sr.register_schema(subj, Schema(schema, "PROTOBUF")))
            check(ids[-1] not in ids[:-1], "%s %s: id %s reused" % (level, name, ids[-1]))
        check(sr.get_versions(subj) == [1, 2, 3, 4], "%s versions %s" % (level, sr.get_versions(subj)))
        last = COMPATIBLE[-1][1]
        for kind, schema in INCOMPATIBLE:
            path = "/compatibility/subjects/%s/versions/latest?verbose=true" % subj
            got = ok("POST", path, {"schema": schema, "schemaType": "PROTOBUF"})
            info("%s %s -> %s" % (level, kind, got))
            check(got["is_compatible"] is False, "%s %s: %s" % (level, kind, got))
            check(any(kind in m for m in got["messages"]), "%s: %s not named in %s" % (
                level, kind, got["messages"]))
            incompatible(sr, subj, kind, schema, "PROTOBUF")
        # A new message is compatible backward, but under FULL the old schema lacks it
        # (MESSAGE_REMOVED read forward).
        more = last + "message Extra {\n  string note = 1;\n}\n"
        path = "/compatibility/subjects/%s/versions/latest?verbose=true" % subj
        got = ok("POST", path, {"schema": more, "schemaType": "PROTOBUF"})
        check(got["is_compatible"] == (level == "BACKWARD"), "%s new message: %s" % (level, got))
        if level == "FULL":
            check(any("MESSAGE_REMOVED" in m for m in got["messages"]), "FULL: %s" % got)
    # An invalid Protobuf schema: 42201, as Confluent answers it.
    subj = "invalid-proto-%s" % RUN_TAG
    for bad in ['syntax = "proto3"; message M { strng a = 1; }', "message {",
                'syntax = "proto3"; import "missing.proto"; message M { int32 a = 1; }']:
        got = refused("POST", "/subjects/%s/versions" % subj, 422, 42201,
                      body={"schema": bad, "schemaType": "PROTOBUF"})
        check(got["message"].startswith("Invalid schema"), "42201 message %r" % got["message"])


@S.scenario("protobuf-serialized", timeout=60)
def protobuf_serialized():
    # A .proto registered as text is served as text, and with ?format=serialized as the
    # base64 FileDescriptorProto that confluent-kafka's deserializers read.
    subj = "serialized-proto-%s" % RUN_TAG
    got = ok("POST", "/subjects/%s/versions" % subj, {"schema": V1, "schemaType": "PROTOBUF"})
    sid = got["id"]
    check(ok("GET", "/schemas/ids/%d" % sid)["schema"] == V1, "text served as registered")
    for path in ["/schemas/ids/%d?format=serialized" % sid,
                 "/subjects/%s/versions/1?format=serialized" % subj]:
        text = ok("GET", path)["schema"]
        fd = descriptor_pb2.FileDescriptorProto()
        fd.ParseFromString(base64.standard_b64decode(text))
        check(fd.package == "sluice.evolve" and [m.name for m in fd.message_type] == ["User"],
              "%s: %s" % (path, fd))


PHASES = {"main": ["protobuf-round-trip", "protobuf-evolution", "protobuf-serialized"]}

if __name__ == "__main__":
    main_phase(S, PHASES, PHASE)
