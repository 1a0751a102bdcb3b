"""Just enough of Kafka's flexible wire format to send the admin requests no Python client
exposes (DescribeTopicPartitions with a cursor, ListConfigResources) and read the answers
field by field (the encoding itself is `common/kafka_wire.py`)."""
import struct

from kafka_wire import TAGS, Reader, call, carray, cstr, uvarint  # noqa: F401


def describe_topic_partitions(host_port, topics, limit, cursor=None):
    """DescribeTopicPartitions v0: (topics, next cursor). Each topic is a dict with error,
    name, id (hex), internal, partitions [(index, leader, replicas, isr, elr, offline)] and
    operations; the cursor is (topic, partition) or None."""
    body = carray(topics, lambda t: cstr(t) + TAGS) + struct.pack(">i", limit)
    if cursor is None:
        body += struct.pack(">b", -1)
    else:
        body += struct.pack(">b", 1) + cstr(cursor[0]) + struct.pack(">i", cursor[1]) + TAGS
    body += TAGS
    r = call(host_port, 75, 0, body)
    r.i32()  # throttle

    def partition(r):
        r.i16()  # error code
        p = (r.i32(), r.i32())
        r.i32()  # leader epoch
        replicas = r.carray(lambda r: r.i32())
        isr = r.carray(lambda r: r.i32())
        elr = r.carray(lambda r: r.i32())
        r.carray(lambda r: r.i32())  # last known ELR
        offline = r.carray(lambda r: r.i32())
        r.tags()
        return p + (replicas, isr, elr, offline)

    def topic(r):
        t = {"error": r.i16(), "name": r.cstr(), "id": r.take(16).hex(),
             "internal": r.i8() != 0, "partitions": r.carray(partition),
             "operations": r.i32()}
        r.tags()
        return t

    topics_out = r.carray(topic)
    cur = None
    if r.i8() >= 0:
        cur = (r.cstr(), r.i32())
        r.tags()
    r.tags()
    return topics_out, cur


def list_config_resources(host_port, types, version=1):
    """ListConfigResources (v0: ListClientMetricsResources): (error, [(name, type)])."""
    body = (carray(types, lambda t: struct.pack(">b", t)) if version >= 1 else b"") + TAGS
    r = call(host_port, 74, version, body)
    r.i32()  # throttle
    error = r.i16()

    def resource(r):
        name = r.cstr()
        rtype = r.i8() if version >= 1 else 16
        r.tags()
        return (name, rtype)

    return error, r.carray(resource) or []


def describe_configs(host_port, resources, synonyms=False, documentation=False):
    """DescribeConfigs v4 of [(type, name, keys or None)]: a list of dicts (error, message,
    type, name, configs: {name: dict(value, read_only, source, sensitive, synonyms
    [(name, value, source)], type, doc)})."""
    def resource(res):
        rtype, rname, keys = res
        ks = b"\x00" if keys is None else carray(keys, cstr)
        return struct.pack(">b", rtype) + cstr(rname) + ks + TAGS

    body = (carray(resources, resource) + struct.pack(">??", synonyms, documentation) + TAGS)
    r = call(host_port, 32, 4, body)
    r.i32()  # throttle

    def synonym(r):
        s = (r.cstr(), r.cstr(), r.i8())
        r.tags()
        return s

    def config(r):
        c = {"name": r.cstr(), "value": r.cstr(), "read_only": r.i8() != 0,
             "source": r.i8(), "sensitive": r.i8() != 0, "synonyms": r.carray(synonym),
             "type": r.i8(), "doc": r.cstr()}
        r.tags()
        return c

    def result(r):
        out = {"error": r.i16(), "message": r.cstr(), "type": r.i8(), "name": r.cstr()}
        out["configs"] = {c["name"]: c for c in (r.carray(config) or [])}
        r.tags()
        return out

    results = r.carray(result) or []
    r.tags()
    return results


def consumer_group_heartbeat(host_port, group, member_id, epoch, topics):
    """ConsumerGroupHeartbeat v0 (KIP-848): (error, member epoch, heartbeat interval ms), or
    (error, message, 0) when refused. Epoch 0 joins subscribed to `topics` (owning no
    partitions), -1 leaves."""
    body = (cstr(group) + cstr(member_id) + struct.pack(">i", epoch) + cstr(None) + cstr(None)
            + struct.pack(">i", 60000)
            + (carray(topics, cstr) if topics is not None else b"\x00")
            + cstr(None) + (carray([], cstr) if epoch == 0 else b"\x00") + TAGS)
    r = call(host_port, 68, 0, body)
    r.i32()  # throttle
    error = r.i16()
    message = r.cstr()
    if error:
        return error, message, 0
    r.cstr()  # member id
    member_epoch = r.i32()
    interval = r.i32()
    return error, member_epoch, interval
