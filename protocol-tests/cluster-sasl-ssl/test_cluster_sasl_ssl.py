#!/usr/bin/env python3
"""Cluster SASL_SSL suite: a 3-node cluster whose client and inter-broker listener is SASL_SSL
(scripts/cluster, started by ./run). See ./run for the scenarios.

Env (from ./run): BOOTSTRAP (the three brokers, comma-separated, in node order), CLUSTER_CTL,
PKI, SUITE_TMP.
"""
import os
import subprocess
import time

from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)

from harness import BOOTSTRAP, RUN_TAG, Suite, check, info, wait_until
from tlslib import produce_with, consume_with

S = Suite("cluster-sasl-ssl")
T = 30
CLUSTER_CTL = os.environ["CLUSTER_CTL"]
CA = os.path.join(os.environ["PKI"], "ca.pem")
NODES = {i + 1: hp.strip() for i, hp in enumerate(BOOTSTRAP.split(","))}
KIND = os.environ.get("BROKER_KIND", "sluice")
CLUSTER_DIR = os.environ.get("CLUSTER_DIR", "")
ADMIN = ("PLAIN", "admin", "admin-secret")
SUE = ("SCRAM-SHA-512", "sue", "sue-secret")


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
    total = 0
    for i, hp in NODES.items():
        wait_until(lambda hp=hp: authenticates(SUE, hp), 20,
                   "sue to authenticate on broker %d alone" % i)
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


if __name__ == "__main__":
    S.main()
