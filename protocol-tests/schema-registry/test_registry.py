#!/usr/bin/env python3
"""Schema Registry suite: Sluice's registry used by confluent-kafka's SchemaRegistryClient and
Avro serdes, and by plain HTTP. REGISTRY_PHASE selects the scenarios of one broker start
(main, restarted, off; see run)."""
import json
import os
import urllib.error
import urllib.request

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError

from harness import (BOOTSTRAP, RUN_TAG, Suite, check, check_error_body, info, main_phase,
                     wait_until)

PHASE = os.environ.get("REGISTRY_PHASE", "main")
URL = os.environ["REGISTRY_URL"]
STATE = os.environ["REGISTRY_STATE"]
S = Suite("schema-registry")
T = 30
CT = "application/vnd.schemaregistry.v1+json"


def http(method, path, body=None, raw=None, content_type=CT):
    """(status, content type, JSON body or text) of one call."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(URL + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status, ctype, text = r.status, r.headers.get("Content-Type"), r.read()
    except urllib.error.HTTPError as e:
        status, ctype, text = e.code, e.headers.get("Content-Type"), e.read()
    try:
        return status, ctype, json.loads(text)
    except ValueError:
        return status, ctype, text.decode(errors="replace")


def ok(method, path, body=None):
    status, _, got = http(method, path, body)
    check(status == 200, "%s %s: %s %s" % (method, path, status, got))
    return got


def refused(method, path, status, code, message=None, body=None, raw=None, ctype=CT):
    """Checks a refusal: the status, Confluent's body and content type."""
    got_status, got_ctype, got = http(method, path, body, raw, ctype)
    info("%s %s -> %s %s" % (method, path, got_status, got))
    check(got_status == status, "%s %s: status %s, wanted %s (%s)" % (
        method, path, got_status, status, got))
    check_error_body("%s %s" % (method, path), got, code, message)
    check(got_ctype == CT, "%s %s: content type %r" % (method, path, got_ctype))
    return got


def record(fields, name="User"):
    return json.dumps({"type": "record", "name": name, "namespace": "sluice.test",
                       "fields": fields})


NAME = {"name": "name", "type": "string"}
AGE_DEFAULT = {"name": "age", "type": "int", "default": 0}
AGE = {"name": "age", "type": "int"}
EMAIL = {"name": "email", "type": "string"}


def subject(base):
    return "%s-%s" % (base, RUN_TAG)


def client():
    return SchemaRegistryClient({"url": URL})


def save(key, value):
    state = {}
    if os.path.exists(STATE):
        with open(STATE) as f:
            state = json.load(f)
    state[key] = value
    with open(STATE, "w") as f:
        json.dump(state, f)


def saved():
    with open(STATE) as f:
        return json.load(f)


def consume(topic, group, count):
    """The first `count` values of `topic`, read from the start by a consumer of `group`."""
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group,
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []

    def poll():
        m = c.poll(1)
        if m is not None and m.error() is None:
            got.append(m.value())
        return len(got) >= count

    wait_until(poll, T, "%d records consumed" % count)
    c.close()
    return got


def read_back(topic, group, want, de, schema_id):
    """The values of `topic` read by a new consumer of `group` and deserialized with `de`,
    each framed with `schema_id`."""
    got = []
    for v in consume(topic, group, want):
        check(v[0] == 0 and int.from_bytes(v[1:5], "big") == schema_id,
              "record header %r" % v[:5])
        got.append(de(v, SerializationContext(topic, MessageField.VALUE)))
    return got


@S.scenario("avro-round-trip", timeout=90)
def avro_round_trip():
    topic = "sr-orders-%s" % RUN_TAG
    a = AdminClient({"bootstrap.servers": BOOTSTRAP})
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=T)
    sr = client()
    schema = record([NAME, AGE_DEFAULT])
    ser = AvroSerializer(sr, schema)
    p = Producer({"bootstrap.servers": BOOTSTRAP})
    users = [{"name": "user-%d" % i, "age": i} for i in range(20)]
    for u in users:
        p.produce(topic, value=ser(u, SerializationContext(topic, MessageField.VALUE)))
    check(p.flush(T) == 0, "records left unacknowledged")
    # The serializer registered the schema under TopicNameStrategy's subject.
    latest = sr.get_latest_version(topic + "-value")
    check(latest.version == 1, "latest version %s" % latest.version)
    check(json.loads(latest.schema.schema_str) == json.loads(schema),
          "stored schema %s" % latest.schema.schema_str)
    # A fresh client (no cache) reads them back through the ids in the records.
    got = read_back(topic, "sr-%s" % RUN_TAG, len(users), AvroDeserializer(client()),
                    latest.schema_id)
    check(got == users, "deserialized %s" % got[:3])
    save("round-trip", {"subject": topic + "-value", "id": latest.schema_id})


def incompatible(sr, subj, named, schema, schema_type):
    """Checks that `schema` is refused under `subj` with Confluent's 409 body (its message
    naming `named`: the level, or a difference's kind), over HTTP and through the client."""
    got = refused("POST", "/subjects/%s/versions" % subj, 409, 409,
                  body={"schemaType": schema_type, "schema": schema})
    prefix = ('Schema being registered is incompatible with an earlier schema for '
              'subject "%s", details: [' % subj)
    check(got["message"].startswith(prefix), "409 message %r" % got["message"])
    check(named in got["message"], "%s is not named: %r" % (named, got["message"]))
    try:
        sr.register_schema(subj, Schema(schema, schema_type))
        raise AssertionError("%s: registered an incompatible schema" % subj)
    except SchemaRegistryError as e:
        check(e.http_status_code == 409 and e.error_code == 409, "client error %s" % e)


@S.scenario("evolution", timeout=90)
def evolution():
    sr = client()
    ids = {}
    for level in ["BACKWARD", "FORWARD", "FULL"]:
        subj = subject("evolve-" + level.lower())
        sr.set_compatibility(subj, level)
        check(sr.get_compatibility(subj) == level, "level of %s" % subj)
        v1 = sr.register_schema(subj, Schema(record([NAME]), "AVRO"))
        # A field with a default: compatible under all three.
        v2 = sr.register_schema(subj, Schema(record([NAME, AGE_DEFAULT]), "AVRO"))
        check(v2 != v1, "a new id for a new schema under %s" % level)
        # The same schema again: the same id, no new version.
        again = sr.register_schema(subj, Schema(record([NAME, AGE_DEFAULT]), "AVRO"))
        check(again == v2, "re-registration under %s gave %s, not %s" % (level, again, v2))
        check(sr.get_versions(subj) == [1, 2], "versions %s" % sr.get_versions(subj))
        ids[subj] = [v1, v2]
        # A field without a default: forward only. Removing a field with no default in the
        # previous reader: backward only.
        add_required = record([NAME, AGE_DEFAULT, EMAIL])
        drop_name = record([AGE_DEFAULT])
        verdicts = {"BACKWARD": (False, True), "FORWARD": (True, False), "FULL": (False, False)}
        for schema, allowed in zip([add_required, drop_name], verdicts[level]):
            path = "/compatibility/subjects/%s/versions/latest?verbose=true" % subj
            got = ok("POST", path, {"schema": schema})
            check(got["is_compatible"] == allowed, "%s %s: %s" % (level, schema, got))
            check(allowed or got["messages"], "%s: no messages for an incompatible schema" % level)
            if allowed:
                ids[subj].append(sr.register_schema(subj, Schema(schema, "AVRO")))
                # Back to the fields of version 2 for the next check.
                sr.delete_version(subj, 3)
                sr.delete_version(subj, 3, permanent=True)
                ids[subj].pop()
                continue
            incompatible(sr, subj, level, schema, "AVRO")
    save("evolution", ids)


def json_schema(props, required=(), closed=False):
    s = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "User",
         "type": "object", "properties": props}
    if required:
        s["required"] = list(required)
    if closed:
        s["additionalProperties"] = False
    return json.dumps(s)


J_NAME = {"name": {"type": "string"}}
J_AGE = {"age": {"type": "integer"}}


@S.scenario("json-round-trip", timeout=90)
def json_round_trip():
    topic = "sr-json-%s" % RUN_TAG
    a = AdminClient({"bootstrap.servers": BOOTSTRAP})
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=T)
    sr = client()
    # The address schema is registered on its own and referenced by name.
    address = json.dumps({"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]})
    addr_subj = subject("json-address")
    sr.register_schema(addr_subj, Schema(address, "JSON"))
    props = dict(J_NAME, age={"type": "integer", "minimum": 0},
                 address={"$ref": "address.json"})
    schema = Schema(json_schema(props, required=["name"]), "JSON",
                    [SchemaReference("address.json", addr_subj, 1)])
    ser = JSONSerializer(schema, sr)
    ctx = SerializationContext(topic, MessageField.VALUE)
    p = Producer({"bootstrap.servers": BOOTSTRAP})
    users = [{"name": "user-%d" % i, "age": i, "address": {"city": "c%d" % i}}
             for i in range(20)]
    for u in users:
        p.produce(topic, value=ser(u, ctx))
    check(p.flush(T) == 0, "records left unacknowledged")
    # The client validates before it serializes: a record the schema refuses never leaves.
    try:
        ser({"name": "x", "age": -1, "address": {"city": "c"}}, ctx)
        raise AssertionError("a record with age -1 was serialized")
    except SerializationError:
        pass
    latest = sr.get_latest_version(topic + "-value")
    check(latest.version == 1 and latest.schema.schema_type == "JSON",
          "latest %s %s" % (latest.version, latest.schema.schema_type))
    check([r.name for r in latest.schema.references] == ["address.json"],
          "references %s" % latest.schema.references)
    # A fresh client reads them back with the schema fetched by the id in each record.
    de = JSONDeserializer(None, schema_registry_client=client())
    got = read_back(topic, "sr-json-%s" % RUN_TAG, len(users), de, latest.schema_id)
    check(got == users, "deserialized %s" % got[:3])
    # A schema that is not a valid JSON Schema, and one whose $ref resolves to nothing.
    refused("POST", "/subjects/%s/versions" % subject("json-bad"), 422, 42201,
            body={"schemaType": "JSON", "schema": json.dumps({"type": "strnig"})})
    refused("POST", "/subjects/%s/versions" % subject("json-bad"), 422, 42201,
            body={"schemaType": "JSON", "schema": json.dumps({"$ref": "nowhere.json"})})


@S.scenario("json-evolution", timeout=90)
def json_evolution():
    sr = client()
    # (schema, compatible under BACKWARD, under FULL), each checked against v1 below.
    v1 = json_schema(J_NAME, closed=True)
    cases = [
        # An optional property added to a closed model: the new reader takes the old data;
        # an old reader (closed) refuses the new property, so not FULL.
        (json_schema(dict(J_NAME, **J_AGE), closed=True), True, False),
        # A required property without a default: old data lacks it.
        (json_schema(dict(J_NAME, **J_AGE), required=["age"], closed=True), False, False),
        # A property's type changed.
        (json_schema({"name": {"type": "integer"}}, closed=True), False, False),
        # Opening the content model: the new schema accepts more, the old one less.
        (json_schema(J_NAME), True, False),
        # Only a description added: compatible both ways.
        (json_schema({"name": {"type": "string", "description": "who"}}, closed=True),
         True, True),
    ]
    for level, col in (("BACKWARD", 1), ("FULL", 2)):
        subj = subject("json-evolve-" + level.lower())
        sr.set_compatibility(subj, level)
        base = sr.register_schema(subj, Schema(v1, "JSON"))
        for case in cases:
            schema, allowed = case[0], case[col]
            path = "/compatibility/subjects/%s/versions/latest?verbose=true" % subj
            got = ok("POST", path, {"schemaType": "JSON", "schema": schema})
            check(got["is_compatible"] == allowed, "%s %s: %s" % (level, schema, got))
            if allowed:
                new = sr.register_schema(subj, Schema(schema, "JSON"))
                check(new != base, "a new id under %s" % level)
                sr.delete_version(subj, 2)
                sr.delete_version(subj, 2, permanent=True)
                continue
            check(got["messages"] and "errorType" in got["messages"][0],
                  "%s: messages %s" % (level, got["messages"]))
            incompatible(sr, subj, level, schema, "JSON")
        check(sr.get_versions(subj) == [1], "versions %s" % sr.get_versions(subj))


@S.scenario("error-bodies")
def error_bodies():
    subj = subject("errors")
    ok("POST", "/subjects/%s/versions" % subj, {"schema": record([NAME])})
    refused("GET", "/subjects/nope-%s/versions" % RUN_TAG, 404, 40401,
            "Subject 'nope-%s' not found." % RUN_TAG)
    refused("GET", "/subjects/nope-%s/versions/1" % RUN_TAG, 404, 40401)
    refused("GET", "/subjects/%s/versions/9" % subj, 404, 40402, "Version 9 not found.")
    refused("GET", "/schemas/ids/987654", 404, 40403, "Schema 987654 not found")
    refused("GET", "/subjects/%s/versions/abc" % subj, 422, 42202)
    refused("GET", "/subjects/%s/versions/0" % subj, 422, 42202)
    refused("POST", "/subjects/%s/versions" % subj, 422, 42201,
            body={"schema": '{"type":"record","name":"X"}'})
    refused("POST", "/subjects/%s/versions" % subj, 422, 42201, body={"schema": "{not json"})
    refused("POST", "/subjects/%s/versions" % subj, 422, 42201, body={"schema": ""})
    refused("POST", "/subjects/%s/versions" % subj, 400, 400, raw=b"{this is not json")
    refused("POST", "/subjects/%s/versions" % subj, 400, 400, raw=b"\xff\xfe", ctype="application/json")
    refused("POST", "/subjects/%s" % subj, 404, 40403, "Schema not found",
            body={"schema": record([EMAIL])})
    refused("PUT", "/config/%s" % subj, 422, 42203, body={"compatibility": "SIDEWAYS"})
    refused("PUT", "/config", 422, 42203, raw=b'{"compatibility": 3}', ctype="application/json")
    refused("GET", "/config/%s" % subj, 404, 40408)
    refused("PUT", "/mode", 422, 42204, body={"mode": "UPSIDE_DOWN"})
    # Plain JSON is accepted as well as Confluent's content type.
    status, ctype, got = http("POST", "/subjects/%s" % subj, {"schema": record([NAME])},
                              content_type="application/json")
    check(status == 200 and got["version"] == 1 and got["subject"] == subj, "lookup %s" % got)
    check(ctype == CT, "content type %r" % ctype)
    check(sorted(ok("GET", "/schemas/types")) == ["AVRO", "JSON", "PROTOBUF"], "types")
    check(ok("GET", "/config") == {"compatibilityLevel": "BACKWARD"}, "global config")


@S.scenario("deletes")
def deletes():
    subj = subject("deletes")
    # Record names of their own: an id shared with another subject's version stays.
    first = ok("POST", "/subjects/%s/versions" % subj,
               {"schema": record([NAME], "Deleted")})["id"]
    ok("POST", "/subjects/%s/versions" % subj, {"schema": record([NAME, AGE_DEFAULT], "Deleted")})
    base = "/subjects/%s/versions" % subj
    refused("DELETE", base + "/1?permanent=true", 404, 40407)
    check(ok("DELETE", base + "/1") == 1, "soft delete of version 1")
    refused("DELETE", base + "/1", 404, 40406)
    check(ok("GET", base) == [2], "versions after a soft delete")
    check(ok("GET", base + "?deleted=true") == [1, 2], "versions with deleted=true")
    refused("GET", base + "/1", 404, 40402)
    check(ok("GET", base + "/1?deleted=true")["id"] == first, "a soft-deleted version")
    # The id of a soft-deleted version still resolves, for consumers of old records.
    check("schema" in ok("GET", "/schemas/ids/%d" % first), "id of a soft-deleted version")
    check(ok("DELETE", base + "/1?permanent=true") == 1, "hard delete of version 1")
    refused("GET", "/schemas/ids/%d" % first, 404, 40403)
    refused("DELETE", "/subjects/%s?permanent=true" % subj, 404, 40405)
    check(ok("DELETE", "/subjects/%s" % subj) == [2], "soft delete of the subject")
    refused("DELETE", "/subjects/%s" % subj, 404, 40404)
    check(subj not in ok("GET", "/subjects"), "a soft-deleted subject is listed")
    check(subj in ok("GET", "/subjects?deleted=true"), "deleted=true lists it")
    check(ok("DELETE", "/subjects/%s?permanent=true" % subj) == [2], "hard delete")
    check(subj not in ok("GET", "/subjects?deleted=true"), "a hard-deleted subject is listed")
    # References: a schema using a named type of another subject.
    other = subject("ref-other")
    ok("POST", "/subjects/%s/versions" % other,
       {"schema": json.dumps({"type": "record", "name": "Address", "namespace": "sluice.ref",
                              "fields": [{"name": "street", "type": "string"}]})})
    uses = subject("ref-uses")
    body = {"schema": record([NAME, {"name": "home", "type": "sluice.ref.Address"}]),
            "references": [{"name": "sluice.ref.Address", "subject": other, "version": 1}]}
    refused("POST", "/subjects/%s/versions" % uses, 422, 42201, body={"schema": body["schema"]})
    uid = ok("POST", "/subjects/%s/versions" % uses, body)["id"]
    got = ok("GET", "/subjects/%s/versions/1" % uses)
    check(got["references"] == body["references"], "references %s" % got)
    check(ok("GET", "/subjects/%s/versions/1/referencedby" % other) == [uid], "referencedby")
    refused("DELETE", "/subjects/%s/versions/1" % other, 422, 42206)
    check(ok("GET", "/schemas/ids/%d/subjects" % uid) == [uses], "subjects of an id")
    check(ok("GET", "/schemas/ids/%d/versions" % uid) == [{"subject": uses, "version": 1}],
          "versions of an id")


@S.scenario("modes")
def modes():
    subj = subject("modes")
    check(ok("GET", "/mode") == {"mode": "READWRITE"}, "default mode")
    check(ok("PUT", "/mode/%s" % subj, {"mode": "READONLY"}) == {"mode": "READONLY"}, "set")
    refused("POST", "/subjects/%s/versions" % subj, 422, 42205, body={"schema": record([NAME])})
    check(ok("DELETE", "/mode/%s" % subj) == {"mode": "READONLY"}, "mode removed")
    imported = subject("imported")
    ok("PUT", "/mode/%s" % imported, {"mode": "IMPORT"})
    got = ok("POST", "/subjects/%s/versions" % imported,
             {"schema": record([NAME]), "id": 4242, "version": 3})
    check(got == {"id": 4242}, "imported id %s" % got)
    check(ok("GET", "/subjects/%s/versions/latest" % imported)["version"] == 3, "imported version")
    refused("POST", "/subjects/%s/versions" % imported, 422, 42207,
            body={"schema": record([EMAIL]), "id": 4242})
    ok("PUT", "/mode/%s" % imported, {"mode": "READWRITE"})
    ok("PUT", "/config/%s" % imported, {"compatibility": "NONE"})
    save("modes", {"imported": imported})


@S.scenario("persisted")
def persisted():
    state = saved()
    rt = state["round-trip"]
    got = ok("GET", "/subjects/%s/versions/latest" % rt["subject"])
    check(got["id"] == rt["id"], "round-trip subject after restart: %s" % got)
    sr = client()
    for subj, ids in state["evolution"].items():
        check(sr.get_versions(subj) == [1, 2], "versions of %s" % subj)
        for version, sid in enumerate(ids, start=1):
            check(sr.get_version(subj, version).schema_id == sid, "%s v%d" % (subj, version))
    forward = [s for s in state["evolution"] if s.startswith("evolve-forward-")]
    check(len(forward) == 1 and sr.get_compatibility(forward[0]) == "FORWARD",
          "subject level kept: %s" % forward)
    imported = state["modes"]["imported"]
    check(ok("GET", "/schemas/ids/4242/subjects") == [imported], "imported id kept")
    check(ok("GET", "/config/%s" % imported) == {"compatibilityLevel": "NONE"}, "config kept")
    # New registrations take ids above every id held.
    fresh = sr.register_schema(subject("after-restart"), Schema(record([EMAIL], "Fresh"), "AVRO"))
    check(fresh > 4242, "a new id after restart: %s" % fresh)


@S.scenario("off")
def off():
    refused("GET", "/subjects", 404, 404)
    refused("POST", "/subjects/x/versions", 404, 404, body={"schema": record([NAME])})


PHASES = {
    "main": ["avro-round-trip", "evolution", "json-round-trip", "json-evolution", "error-bodies",
             "deletes", "modes"],
    "restarted": ["persisted"],
    "off": ["off"],
}

if __name__ == "__main__":
    main_phase(S, PHASES, PHASE)
