#!/usr/bin/env python3
"""Cluster SASL_SSL suite: a 3-node cluster whose client and inter-broker listener is SASL_SSL
(scripts/cluster, started by ./run). See ./run for the scenarios.

Env (from ./run): BOOTSTRAP (the three brokers, comma-separated, in node order), CLUSTER_CTL,
PKI, SUITE_TMP.
"""
import os
import re
import socket
import ssl
import struct
import subprocess
import time

from confluent_kafka import (OFFSET_BEGINNING, Consumer, ElectionType, KafkaError,
                             KafkaException, Producer, TopicPartition)
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)

from harness import BOOTSTRAP, RUN_TAG, Suite, check, info, wait_until
from tlslib import consume_with, produce_with

S = Suite("cluster-sasl-ssl")
T = 30
CLUSTER_CTL = os.environ["CLUSTER_CTL"]
CA = os.path.join(os.environ["PKI"], "ca.pem")
NODES = {i + 1: hp.strip() for i, hp in enumerate(BOOTSTRAP.split(","))}
KIND = os.environ.get("BROKER_KIND", "sluice")
CLUSTER_DIR = os.environ.get("CLUSTER_DIR", "")
ADMIN = ("PLAIN", "admin", "admin-secret")
SUE = ("SCRAM-SHA-512", "sue", "sue-secret")
ALICE = ("PLAIN", "alice", "alice-secret")
KAFKA_LIBS = os.environ.get("KAFKA_LIBS", "")
ROOT = os.environ.get("SLUICE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
LOG4J = os.path.join(ROOT, "scripts", "kafka", "log4j2-tools.properties")


def quiet(err):
    info("librdkafka: %s" % err)


def conf(login=ADMIN, bootstrap=BOOTSTRAP, **extra):
    mech, user, password = login
    c = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
         "ssl.ca.location": CA, "sasl.mechanism": mech, "sasl.username": user,
         "sasl.password": password, "error_cb": quiet}
    c.update(extra)
    return c


def cluster(*args, timeout=150):
    t0 = time.monotonic()
    r = subprocess.run([CLUSTER_CTL] + [str(a) for a in args], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)
    out = r.stdout.decode(errors="replace").strip()
    check(r.returncode == 0, "scripts/cluster %s exited %d: %s" % (
        " ".join(map(str, args)), r.returncode, out[-800:].replace("\n", " | ")))
    info("cluster %s: %.1fs" % (" ".join(map(str, args)), time.monotonic() - t0))


def ensure_all_up():
    """Every node running (an earlier scenario may have failed with one down)."""
    for i in NODES:
        if subprocess.run([CLUSTER_CTL, "pid", str(i)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode != 0:
            cluster("start", i)


def partition(topic, bootstrap=BOOTSTRAP):
    """(leader, replicas, isr) of partition 0 of `topic`."""
    md = AdminClient(conf(bootstrap=bootstrap)).list_topics(topic, timeout=10)
    p = md.topics[topic].partitions[0]
    return p.leader, sorted(p.replicas), sorted(p.isrs)


def produce(topic, values, login=ADMIN, bootstrap=BOOTSTRAP):
    produce_with(conf(login, bootstrap, acks="all"), topic, values)


def consume(topic, n, login=ADMIN, bootstrap=BOOTSTRAP):
    """n records of partition 0 from its start, read without a group (no coordinator: the
    offsets topic may not exist yet, and cannot be made with RF=3 while a node is down)."""
    return consume_with(conf(login, bootstrap), topic, n, group=False, timeout=60)


def log_sizes():
    """The length of each node's log now (Sluice), to read what is logged after."""
    if KIND != "sluice":
        return {}
    return {i: os.path.getsize(os.path.join(CLUSTER_DIR, "node-%d.log" % i)) for i in NODES}


def logged_since(sizes, needle):
    """Lines with `needle` each node logged after `sizes` (Sluice)."""
    out = []
    for i, at in sizes.items():
        with open(os.path.join(CLUSTER_DIR, "node-%d.log" % i), errors="replace") as f:
            f.seek(at)
            out += ["node %d: %s" % (i, l.strip()[:300]) for l in f if needle in l]
    return out


def authenticates(login, bootstrap):
    try:
        return bool(AdminClient(conf(login, bootstrap, **{"socket.timeout.ms": 3000}))
                    .list_topics(timeout=4).brokers)
    except KafkaException:
        return False


# ---- ACLs: Kafka's tools, and single-broker requests on the wire ---------------------------

ACL_TOOL = "org.apache.kafka.tools.AclCommand"
QUORUM_TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"
ACL_PATTERN = re.compile(r"ResourcePattern\(resourceType=(\w+), name=(.*?), patternType=(\w+)\)")
ACL_ENTRY = re.compile(r"\(principal=(.*?), host=(.*?), operation=(\w+), permissionType=(\w+)\)")
# Kafka's codes for resource types, pattern types, operations and permissions
RESOURCE = {"ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5}
PATTERN = {"ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
OPERATION = {"ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7,
             "DESCRIBE": 8, "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11,
             "IDEMPOTENT_WRITE": 12}
PERMISSION = {"ANY": 1, "DENY": 2, "ALLOW": 3}
NAMES = {t: {v: k for k, v in d.items()} for t, d in
         (("r", RESOURCE), ("p", PATTERN), ("o", OPERATION), ("a", PERMISSION))}
TOPIC_AUTHORIZATION_FAILED = 29


def admin_props():
    path = os.path.join(os.environ.get("SUITE_TMP", "/tmp"), "admin-client.properties")
    with open(path, "w") as f:
        f.write("security.protocol=SASL_SSL\nssl.truststore.type=PEM\n"
                "ssl.truststore.location=%s\nsasl.mechanism=PLAIN\n"
                "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                "required username=\"admin\" password=\"admin-secret\";\n" % CA)
    return path


def kafka_tool(cls, bootstrap, *args, timeout=120):
    """A Kafka command-line tool as admin; its output (AssertionError if it fails)."""
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
           "-Dlog4j2.configurationFile=" + LOG4J, "-cp", os.path.join(KAFKA_LIBS, "*"), cls,
           "--bootstrap-server", bootstrap, "--command-config", admin_props()] + list(args)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    out = r.stdout.decode(errors="replace")
    check(r.returncode == 0, "%s %s exited %d: %s" % (cls.rsplit(".", 1)[-1], " ".join(args),
                                                     r.returncode, out[-600:]))
    return out


def acls_listed(bootstrap):
    """kafka-acls --list: {(type, name, pattern, principal, host, operation, permission)}."""
    out, cur = set(), None
    for line in kafka_tool(ACL_TOOL, bootstrap, "--list").splitlines():
        m = ACL_PATTERN.search(line)
        if m:
            cur = m.groups()
            continue
        m = ACL_ENTRY.search(line)
        if m and cur is not None:
            out.add(cur + m.groups())
    return out


def active_controller(bootstrap):
    """The quorum's leader (kafka-metadata-quorum describe --status), -1 if none."""
    out = kafka_tool(QUORUM_TOOL, bootstrap, "describe", "--status")
    m = re.search(r"^LeaderId:\s*(-?\d+)", out, re.M)
    check(m, "no LeaderId in kafka-metadata-quorum's output: %s" % out[-400:])
    return int(m.group(1))


class Wire:
    """Reads a non-flexible response."""

    def __init__(self, data):
        self.d, self.i = data, 0

    def take(self, n):
        check(self.i + n <= len(self.d), "response ends early")
        b = self.d[self.i:self.i + n]
        self.i += n
        return b

    def int(self, fmt):
        return struct.unpack(">" + fmt, self.take(struct.calcsize(fmt)))[0]

    def str(self):
        n = self.int("h")
        return None if n < 0 else self.take(n).decode()

    def bytes(self):
        n = self.int("i")
        return None if n < 0 else self.take(n)

    def array(self, item):
        return [item(self) for _ in range(self.int("i"))]


def wstr(s):
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def broker_call(hp, requests, timeout=30):
    """Sends (api key, version, body) requests, in order, on one SASL_SSL connection to the
    broker at `hp` logged in as admin, and returns their responses (Wire). A client library
    would send an admin request to whichever broker it likes once it has learnt of the
    others; this reaches that broker alone."""
    host, port = hp.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=CA)
    sasl = [(17, 1, wstr("PLAIN")),
            (36, 1, struct.pack(">i", len(b"\0admin\0admin-secret")) + b"\0admin\0admin-secret")]
    out = []
    with ctx.wrap_socket(socket.create_connection((host, int(port)), timeout=timeout),
                         server_hostname=host) as s:
        for corr, (key, version, body) in enumerate(sasl + list(requests), 1):
            msg = struct.pack(">hhi", key, version, corr) + wstr("css-acl") + body
            s.sendall(struct.pack(">i", len(msg)) + msg)
            data = b""
            while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
                chunk = s.recv(65536)
                check(chunk, "broker %s closed the connection before response %d" % (hp, corr))
                data += chunk
            r = Wire(data[4:])
            check(r.int("i") == corr, "correlation id mismatch")
            out.append(r)
    handshake, auth = out[0], out[1]
    check(handshake.int("h") == 0, "SaslHandshake PLAIN refused by %s" % hp)
    code = auth.int("h")
    check(code == 0, "SaslAuthenticate as admin on %s: error %d %s" % (hp, code, auth.str()))
    return out[2:]


def acl_filter(rtype="ANY", name=None, pattern="ANY", principal=None, op="ANY", perm="ANY"):
    return (struct.pack(">b", RESOURCE[rtype]) + wstr(name) + struct.pack(">b", PATTERN[pattern])
            + wstr(principal) + wstr(None) + struct.pack(">bb", OPERATION[op], PERMISSION[perm]))


def read_binding(r):
    return (NAMES["r"][r.int("b")], r.str(), NAMES["p"][r.int("b")], r.str(), r.str(),
            NAMES["o"][r.int("b")], NAMES["a"][r.int("b")])


def acls_on(hp, principal):
    """DescribeAcls v1 on the broker at `hp` alone: `principal`'s ACLs there, as tuples
    (type, name, pattern, principal, host, operation, permission)."""
    r, = broker_call(hp, [(29, 1, acl_filter(principal=principal))])
    r.int("i")  # throttle
    code, msg = r.int("h"), r.str()
    check(code == 0, "DescribeAcls on %s: error %d %s" % (hp, code, msg))
    out = set()
    for res in r.array(lambda r: (r.int("b"), r.str(), r.int("b"),
                                   r.array(lambda r: (r.str(), r.str(), r.int("b"), r.int("b"))))):
        for principal_, host, op, perm in res[3]:
            out.add((NAMES["r"][res[0]], res[1], NAMES["p"][res[2]], principal_, host,
                     NAMES["o"][op], NAMES["a"][perm]))
    return out


def create_acls_on(hp, bindings):
    """CreateAcls v1 on the broker at `hp` alone (it forwards them to the controller)."""
    body = struct.pack(">i", len(bindings)) + b"".join(
        struct.pack(">b", RESOURCE[t]) + wstr(n) + struct.pack(">b", PATTERN[p]) + wstr(pr)
        + wstr(h) + struct.pack(">bb", OPERATION[o], PERMISSION[a])
        for t, n, p, pr, h, o, a in bindings)
    r, = broker_call(hp, [(30, 1, body)])
    r.int("i")
    results = r.array(lambda r: (r.int("h"), r.str()))
    check(len(results) == len(bindings) and all(c == 0 for c, _ in results),
          "CreateAcls on %s: %s" % (hp, results))


def delete_acls_on(hp, flt):
    """DeleteAcls v1 with one filter on the broker at `hp` alone: the bindings it deleted."""
    r, = broker_call(hp, [(31, 1, struct.pack(">i", 1) + flt)])
    r.int("i")
    results = r.array(lambda r: (r.int("h"), r.str(), r.array(
        lambda r: (r.int("h"), r.str(), read_binding(r)))))
    check(len(results) == 1 and results[0][0] == 0, "DeleteAcls on %s: %s" % (hp, results))
    check(all(c == 0 for c, _, _ in results[0][2]), "DeleteAcls on %s: %s" % (hp, results))
    return {b for _, _, b in results[0][2]}


def alice_produce(bootstrap, topic, partitions):
    """One record to each of `partitions` of `topic` from alice, whose client knows only
    `bootstrap`: {partition: None (acknowledged) or the error code of its delivery}."""
    p = Producer(conf(ALICE, bootstrap, acks="all", **{"message.timeout.ms": 15000,
                                                       "socket.timeout.ms": 10000}))
    res = {}
    for part in partitions:
        p.produce(topic, value=b"alice-%d" % part, partition=part,
                  on_delivery=lambda e, m, part=part: res.__setitem__(part, e and e.code()))
    p.flush(40)
    return {part: res.get(part, KafkaError._MSG_TIMED_OUT) for part in partitions}


@S.scenario("replicated-over-sasl-ssl", timeout=240)
def replicated():
    topic = "css-repl-%s" % RUN_TAG
    admin = AdminClient(conf())
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3,
                                  config={"min.insync.replicas": "2"})])[topic].result(timeout=T)
    wait_until(lambda: partition(topic)[2] == [1, 2, 3], 60, "a full ISR for %s" % topic)
    values = [("record-%05d-" % i).encode() + os.urandom(8).hex().encode() for i in range(3000)]
    produce(topic, values[:2000])
    wait_until(lambda: partition(topic)[2] == [1, 2, 3], 60,
               "every replica to stay in the ISR after 2000 records")
    # Past the brokers' session lifetime (connections.max.reauth.ms=5000): the followers'
    # connections to the leader are re-authenticated (or, failing that, closed by it).
    sizes = log_sizes()
    time.sleep(6)
    produce(topic, values[2000:])
    leader, replicas, isr = wait_until(
        lambda: (lambda p: p if p[2] == [1, 2, 3] else None)(partition(topic)), 60,
        "every replica to stay in the ISR after 1000 more records")
    # Sluice's followers renew their sessions on the same connection: none was closed.
    failed = logged_since(sizes, "replica fetch failed")
    check(not failed, "replica fetches failed across a session renewal: %s" % failed[:2])
    info("leader %d, replicas %s, isr %s" % (leader, replicas, isr))
    cluster("kill", leader)
    others = ",".join(hp for i, hp in NODES.items() if i != leader)
    new = wait_until(lambda: (lambda p: p[0] if p[0] not in (-1, leader) else None)(
        partition(topic, others)), 60, "a new leader for %s" % topic)
    info("node %d killed: node %d leads" % (leader, new))
    got = consume(topic, len(values), bootstrap=others)
    check(got == values, "the records read after the leader's kill differ (first %r)" % got[:1])
    cluster("start", leader)
    wait_until(lambda: partition(topic)[2] == [1, 2, 3], 90,
               "node %d back in the ISR of %s" % (leader, topic))


@S.scenario("scram-users-everywhere", timeout=180)
def scram_everywhere():
    ensure_all_up()
    admin = AdminClient(conf(bootstrap=NODES[1]))
    up = UserScramCredentialUpsertion(SUE[1], ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512,
                                                                  8192), SUE[2].encode())
    for f in admin.alter_user_scram_credentials([up]).values():
        f.result(timeout=T)
    topic = "css-scram-%s" % RUN_TAG
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(
        timeout=T)
    # the brokers' authorizer lets sue (no super user) write and read that topic only, and
    # use the consumer's group (librdkafka looks its coordinator up, even with no subscription)
    sue_acls = {("TOPIC", topic, "LITERAL", "User:sue", "*", op, "ALLOW")
                for op in ("WRITE", "READ")}
    sue_acls.add(("GROUP", "g-" + topic, "LITERAL", "User:sue", "*", "READ", "ALLOW"))
    create_acls_on(NODES[1], sorted(sue_acls))
    total = 0
    for i, hp in NODES.items():
        wait_until(lambda hp=hp: authenticates(SUE, hp), 20,
                   "sue to authenticate on broker %d alone" % i)
        wait_until(lambda hp=hp: acls_on(hp, "User:sue") == sue_acls, 20,
                   "broker %d to describe sue's ACLs" % i)
        produce(topic, [b"from-%d-%d" % (i, k) for k in range(50)], SUE, hp)
        total += 50
        got = consume(topic, total, SUE, hp)
        check(got[-50:] == [b"from-%d-%d" % (i, k) for k in range(50)],
              "broker %d: sue read back other records" % i)
    delete = UserScramCredentialDeletion(SUE[1], ScramMechanism.SCRAM_SHA_512)
    admin3 = AdminClient(conf(bootstrap=NODES[3]))
    for f in admin3.alter_user_scram_credentials([delete]).values():
        f.result(timeout=T)
    for i, hp in NODES.items():
        wait_until(lambda hp=hp: not authenticates(SUE, hp), 20,
                   "sue to be refused on broker %d once deleted" % i)


@S.scenario("transactions-over-sasl-ssl", timeout=180)
def transactions():
    """A transactional producer writes to a 3-partition RF=3 topic (partitions led by
    different brokers): the coordinator's markers reach each leader over SASL_SSL, so a
    read_committed consumer reads the committed transaction and not the aborted one."""
    ensure_all_up()
    topic = "css-txn-%s" % RUN_TAG
    admin = AdminClient(conf())
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic].result(
        timeout=T)
    leaders = wait_until(lambda: (lambda md: {p.id: p.leader for p in md.topics[topic].partitions.values()}
                                  if all(len(p.isrs) == 3 for p in md.topics[topic].partitions.values())
                                  else None)(admin.list_topics(topic, timeout=10)),
                         60, "a full ISR for every partition of %s" % topic)
    info("partition leaders %s" % leaders)
    p = Producer(conf(**{"transactional.id": "css-txn-" + RUN_TAG, "acks": "all"}))
    p.init_transactions(T)
    for outcome in ("commit", "abort"):
        p.begin_transaction()
        for k in range(30):
            p.produce(topic, value=b"%s-%d" % (outcome.encode(), k), partition=k % 3)
        if outcome == "commit":
            p.commit_transaction(T)
        else:
            p.abort_transaction(T)
    got = []
    for part in range(3):
        c = Consumer(conf(**{"group.id": "g-" + topic, "isolation.level": "read_committed",
                             "enable.auto.commit": False, "enable.partition.eof": True}))
        c.assign([TopicPartition(topic, part, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        try:
            while time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        break
                    check(m.error().retriable(), "consume: %s" % m.error())
                    continue
                got.append(m.value())
        finally:
            c.close()
    check(sorted(got) == sorted(b"commit-%d" % k for k in range(30)),
          "read_committed read %d records (%r...), not the 30 committed" % (len(got), got[:3]))


@S.scenario("acls-across-brokers", timeout=240)
def acls_across_brokers():
    """ACLs created through broker 1 reach every broker's authorizer through the cluster
    metadata; one deleted through a survivor once the active controller is killed is gone
    everywhere, the restarted node included."""
    ensure_all_up()
    prefix = "css-acl-%s-" % RUN_TAG
    topic, other, group = prefix + "orders", "css-noacl-%s" % RUN_TAG, "g-%sorders" % prefix
    admin = AdminClient(conf())
    # partition i is led by node i+1 (its preferred leader): every broker's authorizer
    # decides on alice's records
    rotations = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
    fs = admin.create_topics([NewTopic(topic, 3, -1, replica_assignment=rotations),
                              NewTopic(other, num_partitions=1, replication_factor=3)])
    for f in fs.values():
        f.result(timeout=T)
    leaders = lambda: {p.id: p.leader for p in admin.list_topics(topic, timeout=10)
                       .topics[topic].partitions.values()}
    wait_until(lambda: leaders() == {0: 1, 1: 2, 2: 3}, 60, "nodes 1, 2, 3 leading %s" % topic)
    alice = "User:alice"
    write = ("TOPIC", prefix, "PREFIXED", alice, "*", "WRITE", "ALLOW")
    want = {write,
            ("TOPIC", prefix, "PREFIXED", alice, "*", "DESCRIBE", "ALLOW"),
            ("TOPIC", prefix, "PREFIXED", alice, "*", "READ", "ALLOW"),
            ("GROUP", group, "LITERAL", alice, "*", "READ", "ALLOW")}
    create_acls_on(NODES[1], sorted(want))
    for i, hp in NODES.items():
        wait_until(lambda hp=hp: acls_on(hp, alice) == want, 30,
                   "broker %d to describe alice's 4 ACLs" % i)
        got = {a for a in acls_listed(hp) if a[3] == alice}
        check(got == want, "kafka-acls --list on broker %d: %s, want %s" % (i, got, want))
    for i in (2, 3):
        res = alice_produce(NODES[i], topic, [0, 1, 2])
        check(all(e is None for e in res.values()),
              "alice's records to %s through broker %d alone: %s" % (topic, i, res))
        res = alice_produce(NODES[i], other, [0])
        check(res == {0: TOPIC_AUTHORIZATION_FAILED},
              "alice producing to %s through broker %d: %s, not TOPIC_AUTHORIZATION_FAILED"
              % (other, i, res))
    # alice reads her 6 records with her group (READ on the topics and on the group)
    got = consume_with(conf(ALICE, NODES[3]), topic, 6, group=True, timeout=60)
    check(sorted(got) == sorted(b"alice-%d" % p for p in (0, 1, 2) for _ in range(2)),
          "alice read %r" % got)

    ctl = active_controller(NODES[1])
    check(ctl in NODES, "no active controller: LeaderId %d" % ctl)
    cluster("kill", ctl)
    rest = {i: hp for i, hp in NODES.items() if i != ctl}
    survivors = ",".join(rest.values())
    new = wait_until(lambda: (lambda c: c if c in rest else None)(
        active_controller(survivors)), 60, "a new active controller after node %d" % ctl,
        interval=1)
    info("active controller %d killed, %d took over" % (ctl, new))
    via = min(rest)
    gone, failed = set(), []

    def delete_write():
        # a broker still finding the new controller may answer with an error: try again
        try:
            gone.update(delete_acls_on(rest[via], acl_filter("TOPIC", prefix, "PREFIXED", alice,
                                                             "WRITE", "ALLOW")))
            return True
        except AssertionError as e:
            failed.append(str(e))
            info("DeleteAcls through broker %d: %s" % (via, e))
            return False
    wait_until(delete_write, 60, "DeleteAcls through broker %d to succeed" % via, interval=1)
    # (an attempt that failed may still have deleted it: then the next one matched nothing)
    check(gone == {write} or (failed and not gone),
          "DeleteAcls through broker %d deleted %s, not %s" % (via, gone, write))
    left = want - {write}
    for i, hp in rest.items():
        wait_until(lambda hp=hp: acls_on(hp, alice) == left, 30,
                   "broker %d to drop alice's WRITE ACL" % i)
    # every partition led by a survivor now; each survivor refuses alice's records
    for i, hp in rest.items():
        wait_until(lambda hp=hp: alice_produce(hp, topic, [0, 1, 2]) == {
            0: TOPIC_AUTHORIZATION_FAILED, 1: TOPIC_AUTHORIZATION_FAILED,
            2: TOPIC_AUTHORIZATION_FAILED}, 60,
            "alice refused on every partition through broker %d alone" % i, interval=1)

    cluster("start", ctl)
    wait_until(lambda: acls_on(NODES[ctl], alice) == left, 30,
               "restarted node %d to describe alice's 3 remaining ACLs" % ctl)
    got = {a for a in acls_listed(NODES[ctl]) if a[3] == alice}
    check(got == left, "kafka-acls --list on restarted node %d: %s, want %s" % (ctl, got, left))
    # the restarted node leads its partition again and refuses alice there
    wait_until(lambda: all(len(p.isrs) == 3 for p in admin.list_topics(topic, timeout=10)
                           .topics[topic].partitions.values()), 90,
               "node %d back in the ISRs of %s" % (ctl, topic))
    tp = TopicPartition(topic, ctl - 1)

    def preferred():
        try:
            admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(timeout=T)
        except KafkaException as e:
            info("elect_leaders: %s" % e)  # ELECTION_NOT_NEEDED if it already leads
        return leaders().get(ctl - 1) == ctl
    wait_until(preferred, 60, "node %d to lead partition %d again" % (ctl, ctl - 1), interval=1)
    res = alice_produce(NODES[ctl], topic, [0, 1, 2])
    check(res == {p: TOPIC_AUTHORIZATION_FAILED for p in (0, 1, 2)},
          "alice producing through restarted node %d alone: %s" % (ctl, res))
    # READ is still hers: she reads partition 0 (no group: hers has committed its end)
    got = consume_with(conf(ALICE, NODES[ctl]), topic, 2, group=False, timeout=60)
    check(got == [b"alice-0"] * 2, "alice read %r through node %d" % (got, ctl))


if __name__ == "__main__":
    S.main()
