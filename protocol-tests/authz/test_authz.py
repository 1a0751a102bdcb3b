"""Authorization suite: a broker with the StandardAuthorizer and a SASL_PLAINTEXT listener
(PLAIN users admin, a super user, and alice, who has no ACL), started by ./run. Scenarios:

  produce           alice's produce fails with TOPIC_AUTHORIZATION_FAILED
  metadata-hidden   a topic admin created is missing from alice's topic listing and named
                    is TOPIC_AUTHORIZATION_FAILED; admin sees it
  create-topic      alice's CreateTopics is TOPIC_AUTHORIZATION_FAILED
  group-join        alice's consumer gets GROUP_AUTHORIZATION_FAILED
  transactions      alice's init_transactions is TRANSACTIONAL_ID_AUTHORIZATION_FAILED
  prefixed          admin grants alice ALL on topics and groups prefixed authz-ok-: her
                    produce and consume work there; a DENY of WRITE beats the ALLOW
  fetch-denied      alice may describe a topic and read a group but not read the topic: her
                    assigned consumer's fetch and her offset commit both get
                    TOPIC_AUTHORIZATION_FAILED
  authorized-ops    describe_cluster with authorized operations: every operation for admin
                    (a super user), none for alice
  admin-apis-denied alice's describe_configs of a topic, ListOffsets (on the wire),
                    create_partitions and delete_topics are TOPIC_AUTHORIZATION_FAILED, her
                    delete_consumer_groups GROUP_AUTHORIZATION_FAILED; admin's same calls
                    succeed
  cluster-apis-denied  alice's DescribeLogDirs, Describe/AlterUserScramCredentials,
                    Describe/AlterClientQuotas, ListPartitionReassignments (kafka-python's
                    requests) and ElectLeaders (confluent-kafka) are
                    CLUSTER_AUTHORIZATION_FAILED; admin's succeed
"""
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness import BOOTSTRAP, RUN_TAG, Suite, check, host_port, wait_until

S = Suite("authz")
T = 30


def quiet(_err):
    pass


def conf(user, **extra):
    c = {"bootstrap.servers": BOOTSTRAP, "security.protocol": "SASL_PLAINTEXT",
         "sasl.mechanism": "PLAIN", "sasl.username": user,
         "sasl.password": user + "-secret", "error_cb": quiet}
    c.update(extra)
    return c


def admin(user="admin"):
    return AdminClient(conf(user))


def make_topic(name):
    a = admin()
    fs = a.create_topics([NewTopic(name, 1, 1)], operation_timeout=T)
    fs[name].result(T)
    wait_until(lambda: name in a.list_topics(timeout=T).topics, T, "topic " + name)


def code_of(exc):
    e = exc.args[0] if exc.args else None
    return e.code() if isinstance(e, KafkaError) else None


def alice_produce(topic, value):
    """alice produces one record; the errors it got (None for a delivery)."""
    errors = []
    p = Producer(conf("alice", **{"message.timeout.ms": 10000}))
    try:
        p.produce(topic, value, on_delivery=lambda err, _m: errors.append(err))
    except KafkaException as e:
        # librdkafka refuses at once when its metadata already says the topic is denied.
        errors.append(e.args[0])
    p.flush(T)
    return errors


@S.scenario("produce")
def produce():
    t = "authz-pf-" + RUN_TAG
    make_topic(t)
    errors = alice_produce(t, b"v")
    check(errors and errors[0] is not None
          and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED,
          "alice's produce: %r" % errors)


@S.scenario("metadata-hidden")
def metadata_hidden():
    t = "authz-md-" + RUN_TAG
    make_topic(t)
    a, alice = admin(), admin("alice")
    check(t in a.list_topics(timeout=T).topics, "admin does not see " + t)
    check(t not in alice.list_topics(timeout=T).topics, "alice sees " + t)
    md = alice.list_topics(topic=t, timeout=T)
    err = md.topics[t].error
    check(err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED,
          "alice naming %s: %r" % (t, err))


@S.scenario("create-topic")
def create_topic():
    t = "authz-ct-" + RUN_TAG
    a = admin("alice")
    fs = a.create_topics([NewTopic(t, 1, 1)], operation_timeout=T)
    try:
        fs[t].result(T)
        got = None
    except KafkaException as e:
        got = code_of(e)
    check(got == KafkaError.TOPIC_AUTHORIZATION_FAILED, "alice's create: %r" % got)


@S.scenario("group-join")
def group_join():
    t = "authz-gj-" + RUN_TAG
    make_topic(t)
    c = Consumer(conf("alice", **{"group.id": "authz-gj-" + RUN_TAG}))
    c.subscribe([t])
    got = None
    deadline = time.monotonic() + T
    while got is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error():
            if m.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                got = m.error().code()
    c.close()
    check(got == KafkaError.GROUP_AUTHORIZATION_FAILED, "alice's group join: %r" % got)


@S.scenario("transactions")
def transactions():
    p = Producer(conf("alice", **{"transactional.id": "authz-tx-" + RUN_TAG}))
    try:
        p.init_transactions(T)
        got = None
    except KafkaException as e:
        got = code_of(e)
    check(got == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
          "alice's init_transactions: %r" % got)


@S.scenario("prefixed")
def prefixed():
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType)
    pre = "authz-ok-%s-" % RUN_TAG
    t = pre + "t"
    make_topic(t)
    a = admin()
    acls = [AclBinding(rt, pre, ResourcePatternType.PREFIXED, "User:alice", "*",
                       AclOperation.ALL, AclPermissionType.ALLOW)
            for rt in (ResourceType.TOPIC, ResourceType.GROUP)]
    for f in a.create_acls(acls, request_timeout=T).values():
        f.result(T)
    errors = alice_produce(t, b"ok")
    check(errors == [None], "alice's produce with the prefixed ACL: %r" % errors)
    c = Consumer(conf("alice", **{"group.id": pre + "g", "auto.offset.reset": "earliest"}))
    c.subscribe([t])
    got = None
    deadline = time.monotonic() + T
    while got is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got = m.value()
    c.close()
    check(got == b"ok", "alice's consume with the prefixed ACL: %r" % got)
    deny = AclBinding(ResourceType.TOPIC, t, ResourcePatternType.LITERAL, "User:alice", "*",
                      AclOperation.WRITE, AclPermissionType.DENY)
    for f in a.create_acls([deny], request_timeout=T).values():
        f.result(T)
    errors = alice_produce(t, b"no")
    check(errors and errors[0] is not None
          and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED,
          "alice's produce after the DENY: %r" % errors)


@S.scenario("fetch-denied")
def fetch_denied():
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType)
    t, g = "authz-fd-" + RUN_TAG, "authz-fd-g-" + RUN_TAG
    make_topic(t)
    p = Producer(conf("admin"))
    p.produce(t, b"secret", partition=0)
    check(p.flush(T) == 0, "admin's record unsent")
    acls = [AclBinding(ResourceType.TOPIC, t, ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.DESCRIBE, AclPermissionType.ALLOW),
            AclBinding(ResourceType.GROUP, g, ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW)]
    a = admin()  # kept: the futures need the handle alive
    for f in a.create_acls(acls, request_timeout=T).values():
        f.result(T)
    c = Consumer(conf("alice", **{"group.id": g, "enable.auto.commit": False}))
    try:
        c.assign([TopicPartition(t, 0, 0)])
        err, got = None, None
        deadline = time.monotonic() + T
        while err is None and got is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                err = m.error()
            else:
                got = m.value()
        check(got is None, "alice read %r without READ on the topic" % got)
        check(err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED,
              "alice's fetch: %r" % err)
        code = None
        try:
            res = c.commit(offsets=[TopicPartition(t, 0, 1)], asynchronous=False)
            code = res[0].error.code() if res and res[0].error else 0
        except KafkaException as e:
            code = code_of(e)
        check(code == KafkaError.TOPIC_AUTHORIZATION_FAILED, "alice's commit: %r" % code)
    finally:
        c.close()


@S.scenario("authorized-ops")
def authorized_ops():
    from confluent_kafka.admin import AclOperation
    everything = {AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                  AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                  AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE}
    a, alice = admin(), admin("alice")
    d = a.describe_cluster(include_authorized_operations=True, request_timeout=T).result(T)
    check(set(d.authorized_operations or []) == everything,
          "admin's cluster operations: %r" % d.authorized_operations)
    d = alice.describe_cluster(include_authorized_operations=True,
                               request_timeout=T).result(T)
    check(not d.authorized_operations, "alice's cluster operations: %r" % d.authorized_operations)


def outcome(fut):
    """0 when the admin future succeeds, else the error code it fails with."""
    try:
        fut.result(T)
        return 0
    except KafkaException as e:
        return code_of(e)


def sasl_exchange(user, requests):
    """Sends (key, version, flexible body) requests on one connection after a SASL/PLAIN
    login as `user` (SaslHandshake v1, SaslAuthenticate v2); returns a Reader per answer,
    positioned after its header. librdkafka answers some refusals itself (list_offsets of a
    topic its metadata cannot see), so the broker's own answer is read on the wire."""
    import socket
    import struct
    from kafka_wire import TAGS, Reader, uvarint

    def frame(sock, key, version, corr, body, flexible):
        header = struct.pack(">hhih", key, version, corr, 5) + b"authz"
        msg = header + (TAGS if flexible else b"") + body
        sock.sendall(struct.pack(">i", len(msg)) + msg)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed before the response")
            data += chunk
        r = Reader(data[4:])
        check(r.i32() == corr, "correlation id")
        if flexible:
            r.tags()
        return r

    with socket.create_connection(host_port(), timeout=T) as sock:
        r = frame(sock, 17, 1, 1, struct.pack(">h", 5) + b"PLAIN", False)
        check(r.i16() == 0, "SaslHandshake refused")
        token = ("\0%s\0%s-secret" % (user, user)).encode()
        r = frame(sock, 36, 2, 2, uvarint(len(token) + 1) + token + TAGS, True)
        check(r.i16() == 0, "SaslAuthenticate of %s refused: %r" % (user, r.cstr()))
        return [frame(sock, key, version, 3 + i, body, True)
                for i, (key, version, body) in enumerate(requests)]


def list_offsets_code(user, t):
    """The error code of partition 0 of `t` in `user`'s ListOffsets v7 (latest offset)."""
    import struct
    from kafka_wire import TAGS, carray, cstr
    part = struct.pack(">iiq", 0, -1, -1) + TAGS
    body = (struct.pack(">ib", -1, 0)
            + carray([t], lambda n: cstr(n) + carray([part], lambda p: p) + TAGS) + TAGS)
    r = sasl_exchange(user, [(2, 7, body)])[0]
    r.i32()  # throttle
    check(r.uvarint() == 2 and r.cstr() == t, "ListOffsets answers another topic")
    check(r.uvarint() == 2 and r.i32() == 0, "ListOffsets answers another partition")
    return r.i16()


def admin_calls(a, user, t, g):
    """The error code (0: success) of each admin call, in the order they are made; the topic
    deletion comes last."""
    from confluent_kafka.admin import ConfigResource, NewPartitions
    got = {}
    res = ConfigResource(ConfigResource.Type.TOPIC, t)
    got["describe_configs"] = outcome(a.describe_configs([res], request_timeout=T)[res])
    got["list_offsets"] = list_offsets_code(user, t)
    fs = a.create_partitions([NewPartitions(t, 2)], operation_timeout=T, request_timeout=T)
    got["create_partitions"] = outcome(fs[t])
    got["delete_groups"] = outcome(a.delete_consumer_groups([g], request_timeout=T)[g])
    fs = a.delete_topics([t], operation_timeout=T, request_timeout=T)
    got["delete_topics"] = outcome(fs[t])
    return got


@S.scenario("admin-apis-denied")
def admin_apis_denied():
    from confluent_kafka import TopicPartition
    t, g = "authz-ad-" + RUN_TAG, "authz-ad-g-" + RUN_TAG
    make_topic(t)
    # An empty group with a committed offset, which admin may delete.
    c = Consumer(conf("admin", **{"group.id": g, "enable.auto.commit": False}))
    try:
        c.commit(offsets=[TopicPartition(t, 0, 0)], asynchronous=False)
    finally:
        c.close()
    denied = KafkaError.TOPIC_AUTHORIZATION_FAILED
    want = {"describe_configs": denied, "list_offsets": denied, "create_partitions": denied,
            "delete_groups": KafkaError.GROUP_AUTHORIZATION_FAILED, "delete_topics": denied}
    got = admin_calls(admin("alice"), "alice", t, g)
    check(got == want, "alice's admin calls: %r" % got)
    got = admin_calls(admin(), "admin", t, g)
    check(got == dict.fromkeys(want, 0), "admin's admin calls: %r" % got)
def kp_admin(user):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=BOOTSTRAP, security_protocol="SASL_PLAINTEXT",
                            sasl_mechanism="PLAIN", sasl_plain_username=user,
                            sasl_plain_password=user + "-secret", request_timeout_ms=T * 1000)


def raw(a, request):
    """The response to `request`, sent by kafka-python's admin client `a`."""
    async def go():
        return await a._manager.send(request)
    return a._manager.run(go)


@S.scenario("cluster-apis-denied")
def cluster_apis_denied():
    from confluent_kafka import ElectionType, TopicPartition
    from kafka.protocol.admin import (AlterClientQuotasRequest,
                                      AlterUserScramCredentialsRequest,
                                      DescribeClientQuotasRequest, DescribeLogDirsRequest,
                                      DescribeUserScramCredentialsRequest,
                                      ListPartitionReassignmentsRequest)
    denied = KafkaError.CLUSTER_AUTHORIZATION_FAILED
    t = "authz-ca-" + RUN_TAG
    make_topic(t)
    for user, want in (("alice", denied), ("admin", 0)):
        ck, kp = admin(user), kp_admin(user)
        try:
            r = raw(kp, DescribeLogDirsRequest(topics=None))
            check(r.error_code == want and bool(r.results) == (want == 0),
                  "%s's DescribeLogDirs: %r" % (user, r))
            r = raw(kp, DescribeClientQuotasRequest(components=[], strict=False))
            check(r.error_code == want, "%s's DescribeClientQuotas: %r" % (user, r))
            entry = AlterClientQuotasRequest.EntryData(
                entity=[AlterClientQuotasRequest.EntryData.EntityData(
                    entity_type="user", entity_name="authz-q-" + RUN_TAG)],
                ops=[AlterClientQuotasRequest.EntryData.OpData(
                    key="producer_byte_rate", value=1048576.0, remove=False)])
            r = raw(kp, AlterClientQuotasRequest(entries=[entry], validate_only=False))
            check([e.error_code for e in r.entries] == [want],
                  "%s's AlterClientQuotas: %r" % (user, r))
            r = raw(kp, ListPartitionReassignmentsRequest(timeout_ms=T * 1000, topics=None))
            check(r.error_code == want, "%s's ListPartitionReassignments: %r" % (user, r))
            r = raw(kp, DescribeUserScramCredentialsRequest(users=[]))
            check(r.error_code == want, "%s's DescribeUserScramCredentials: %r" % (user, r))
            up = AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                name="authz-scram-" + RUN_TAG, mechanism=1, iterations=4096,
                salt=b"s" * 16, salted_password=b"p" * 32)
            r = raw(kp, AlterUserScramCredentialsRequest(deletions=[], upsertions=[up]))
            check([x.error_code for x in r.results] == [want],
                  "%s's AlterUserScramCredentials: %r" % (user, r))
            tp = TopicPartition(t, 0)
            f = ck.elect_leaders(ElectionType.PREFERRED, [tp])
            try:
                res = f.result(T)
                got = 0
                part = res.get(tp) if isinstance(res, dict) else None
                if part is not None and part.code() != KafkaError.ELECTION_NOT_NEEDED:
                    got = part.code()
            except KafkaException as e:
                got = code_of(e)
            check(got == want, "%s's ElectLeaders: %r" % (user, got))
        finally:
            kp.close()


if __name__ == "__main__":
    S.main()
