#!/usr/bin/env python3
"""ACL suite: kafka-acls and confluent-kafka's AdminClient against the broker at $BOOTSTRAP,
which runs Kafka's StandardAuthorizer with super.users=User:ANONYMOUS. See ./run."""
import os
import re
import shlex
import struct
import subprocess

import kafka_wire as kw

from confluent_kafka import KafkaException
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                   AclPermissionType, AdminClient, ResourcePatternType,
                                   ResourceType)

def host_port(bootstrap):
    h, p = bootstrap.rsplit(":", 1)
    return h, int(p)


from harness import BOOTSTRAP, BROKER_CTL, RUN_TAG, Suite, check, info, wait_until

S = Suite("acl")
KAFKA_LIBS = os.environ.get("KAFKA_LIBS", "")
ROOT = os.environ.get("SLUICE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
LOG4J = os.path.join(ROOT, "scripts", "kafka", "log4j2-tools.properties")
PATTERN = re.compile(r"ResourcePattern\(resourceType=(\w+), name=(.*?), patternType=(\w+)\)")
ENTRY = re.compile(r"\(principal=(.*?), host=(.*?), operation=(\w+), permissionType=(\w+)\)")


def kafka_acls(*args, bootstrap=None):
    cmd = ["java", "-Xmx512m", "-XX:+UseSerialGC", "-Dlog4j2.configurationFile=" + LOG4J,
           "-cp", os.path.join(KAFKA_LIBS, "*"), "org.apache.kafka.tools.AclCommand",
           "--bootstrap-server", bootstrap or BOOTSTRAP] + list(args)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    out = r.stdout.decode(errors="replace")
    return r.returncode, out


def ok_acls(*args):
    rc, out = kafka_acls(*args)
    check(rc == 0, "kafka-acls %s exited %d: %s" % (" ".join(args), rc, out[-800:]))
    return out


def listed(out):
    """kafka-acls --list output as {(type, name, pattern): {(principal, host, op, perm)}}."""
    acls, cur = {}, None
    for line in out.splitlines():
        m = PATTERN.search(line)
        if m:
            cur = acls.setdefault(m.groups(), set())
            continue
        m = ENTRY.search(line)
        if m and cur is not None:
            cur.add(m.groups())
    return acls


def drop_all():
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    admin().delete_acls([flt], request_timeout=30)[flt].result(timeout=30)


_ADMIN = []


def admin(bootstrap=None):
    if bootstrap:
        return AdminClient({"bootstrap.servers": bootstrap})
    if not _ADMIN:
        _ADMIN.append(AdminClient({"bootstrap.servers": BOOTSTRAP}))
    return _ADMIN[0]


@S.scenario("add-list", timeout=240)
def add_list():
    t = "acl-orders-%s" % RUN_TAG
    ok_acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", t)
    ok_acls("--add", "--deny-principal", "User:mallory", "--operation", "Write", "--topic", t,
            "--deny-host", "10.0.0.9")
    ok_acls("--add", "--allow-principal", "User:bob", "--operation", "Write",
            "--topic", "acl-", "--resource-pattern-type", "prefixed",
            "--allow-host", "127.0.0.1")
    ok_acls("--add", "--allow-principal", "User:carol", "--operation", "Describe", "--topic", "*")
    ok_acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "g1")
    ok_acls("--add", "--allow-principal", "User:alice", "--operation", "Write",
            "--transactional-id", "tx1")
    ok_acls("--add", "--allow-principal", "User:alice", "--operation", "Alter", "--cluster")
    ok_acls("--add", "--allow-principal", "User:dave", "--producer", "--topic", "prod-t")
    ok_acls("--add", "--allow-principal", "User:erin", "--consumer", "--topic", "cons-t",
            "--group", "cons-g")
    # Adding an ACL that exists changes nothing.
    ok_acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", t)
    acls = listed(ok_acls("--list"))
    info("listed: %s" % acls)
    want = {
        ("TOPIC", t, "LITERAL"): {("User:alice", "*", "READ", "ALLOW"),
                                  ("User:mallory", "10.0.0.9", "WRITE", "DENY")},
        ("TOPIC", "acl-", "PREFIXED"): {("User:bob", "127.0.0.1", "WRITE", "ALLOW")},
        ("TOPIC", "*", "LITERAL"): {("User:carol", "*", "DESCRIBE", "ALLOW")},
        ("GROUP", "g1", "LITERAL"): {("User:alice", "*", "READ", "ALLOW")},
        ("TRANSACTIONAL_ID", "tx1", "LITERAL"): {("User:alice", "*", "WRITE", "ALLOW")},
        ("CLUSTER", "kafka-cluster", "LITERAL"): {("User:alice", "*", "ALTER", "ALLOW")},
        ("TOPIC", "prod-t", "LITERAL"): {("User:dave", "*", op, "ALLOW")
                                         for op in ("WRITE", "DESCRIBE", "CREATE")},
        ("TOPIC", "cons-t", "LITERAL"): {("User:erin", "*", op, "ALLOW")
                                         for op in ("READ", "DESCRIBE")},
        ("GROUP", "cons-g", "LITERAL"): {("User:erin", "*", "READ", "ALLOW")},
    }
    check(acls == want, "kafka-acls --list: %s, want %s" % (acls, want))
    # match: the literal ACLs of the name, the literal wildcard, the prefixes of the name.
    m = listed(ok_acls("--list", "--topic", t, "--resource-pattern-type", "match"))
    check(set(m) == {("TOPIC", t, "LITERAL"), ("TOPIC", "acl-", "PREFIXED"),
                     ("TOPIC", "*", "LITERAL")}, "--list match: %s" % m)
    a = listed(ok_acls("--list", "--topic", "acl-", "--resource-pattern-type", "any"))
    check(set(a) == {("TOPIC", "acl-", "PREFIXED")}, "--list any: %s" % a)
    lit = listed(ok_acls("--list", "--topic", t))
    check(set(lit) == {("TOPIC", t, "LITERAL")}, "--list literal: %s" % lit)


@S.scenario("remove", timeout=240)
def remove():
    t = "acl-rm-%s" % RUN_TAG
    ok_acls("--add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
            "--operation", "Read", "--operation", "Write", "--topic", t)
    ok_acls("--remove", "--force", "--allow-principal", "User:bob", "--operation", "Write",
            "--topic", t)
    got = listed(ok_acls("--list", "--topic", t)).get(("TOPIC", t, "LITERAL"), set())
    check(got == {("User:alice", "*", "READ", "ALLOW"), ("User:alice", "*", "WRITE", "ALLOW"),
                  ("User:bob", "*", "READ", "ALLOW")}, "after removing bob's WRITE: %s" % got)
    ok_acls("--remove", "--force", "--topic", t)
    got = listed(ok_acls("--list", "--topic", t))
    check(not got, "after --remove --topic: %s" % got)
    drop_all()
    check(not listed(ok_acls("--list")), "ACLs left after removing every pattern")


def binding(rt, name, pt, principal, op, perm, host="*"):
    return AclBinding(rt, name, pt, principal, host, op, perm)


@S.scenario("admin-client", timeout=120)
def admin_client():
    a = admin()
    t = "acl-admin-%s" % RUN_TAG
    good = binding(ResourceType.TOPIC, t, ResourcePatternType.LITERAL, "User:alice",
                   AclOperation.READ, AclPermissionType.ALLOW)
    bad = binding(ResourceType.BROKER, "not-the-cluster", ResourcePatternType.LITERAL,
                  "User:alice", AclOperation.ALTER, AclPermissionType.ALLOW)
    fs = a.create_acls([good, bad], request_timeout=30)
    fs[good].result(timeout=30)
    try:
        fs[bad].result(timeout=30)
        check(False, "an ACL on CLUSTER named not-the-cluster was created")
    except KafkaException as e:
        err = e.args[0]
        info("invalid binding: %s %s" % (err.name(), err.str()))
        check(err.code() == 42, "invalid binding: %s, want INVALID_REQUEST" % err)
        check("kafka-cluster" in err.str(), "message: %s" % err.str())
    flt = AclBindingFilter(ResourceType.TOPIC, t, ResourcePatternType.ANY, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    found = a.describe_acls(flt, request_timeout=30).result(timeout=30)
    check(found == [good], "describe_acls: %s" % found)
    deleted = a.delete_acls([flt], request_timeout=30)[flt].result(timeout=30)
    check(deleted == [good], "delete_acls: %s" % deleted)
    found = a.describe_acls(flt, request_timeout=30).result(timeout=30)
    check(found == [], "describe_acls after the delete: %s" % found)


class SecondBroker:
    """A broker of the same kind without an authorizer, on ports of its own."""

    def __enter__(self):
        import socket
        port = None
        for _ in range(100):
            p = 20000 + int.from_bytes(os.urandom(2), "big") % 10000
            free = True
            for q in (p, p + 1):
                with socket.socket() as s:
                    free = free and s.connect_ex(("127.0.0.1", q)) != 0
            if free:
                port = p
                break
        check(port, "no free port for a second broker")
        d = os.path.join(os.environ.get("SUITE_TMP", "/tmp"), "plain-broker-%d" % port)
        self.env = dict(os.environ, BROKER_PORT=str(port), BROKER_DATA=d + "/data",
                        BROKER_LOG=d + ".log", BROKER_PIDFILE=d + ".pid", BROKER_OVERRIDES="")
        r = subprocess.run(shlex.split(BROKER_CTL) + ["start"], env=self.env, timeout=150,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        check(r.returncode == 0, "second broker did not start: %s" % r.stdout.decode()[-600:])
        return "127.0.0.1:%d" % port

    def __exit__(self, *exc):
        subprocess.run(shlex.split(BROKER_CTL) + ["stop"], env=self.env, timeout=60,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@S.scenario("security-disabled", timeout=200)
def security_disabled():
    check(BROKER_CTL, "BROKER_CTL is not set")
    with SecondBroker() as bootstrap:
        # DescribeAcls v2 over the wire, every ACL: the top-level error.
        body = struct.pack(">b", 1) + b"\x00" + struct.pack(">b", 1) + b"\x00\x00" \
            + struct.pack(">bb", 1, 1) + kw.TAGS
        r = kw.call(host_port(bootstrap), 29, 2, body)
        r.i32()
        code, msg = r.i16(), r.cstr()
        info("DescribeAcls without an authorizer: %d %s" % (code, msg))
        check((code, msg) == (54, "No Authorizer is configured on the broker"),
              "DescribeAcls: %d %r, want SECURITY_DISABLED" % (code, msg))
        rc, out = kafka_acls("--add", "--allow-principal", "User:a", "--operation", "Read",
                             "--topic", "t", bootstrap=bootstrap)
        check("SecurityDisabledException" in out or "No Authorizer is configured" in out,
              "kafka-acls --add without an authorizer: rc %d %s" % (rc, out[-600:]))


def broker_ctl(cmd):
    r = subprocess.run(shlex.split(BROKER_CTL) + [cmd], timeout=150,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    check(r.returncode == 0, "broker-ctl %s exited %d: %s" % (
        cmd, r.returncode, r.stdout.decode(errors="replace")[-400:]))


@S.scenario("survives-restart", timeout=240)
def survives_restart():
    check(BROKER_CTL, "BROKER_CTL is not set")
    t = "acl-restart-%s" % RUN_TAG
    ok_acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", t,
            "--resource-pattern-type", "prefixed")
    ok_acls("--add", "--deny-principal", "User:bob", "--operation", "All", "--group", t)
    want = listed(ok_acls("--list", "--topic", t, "--resource-pattern-type", "any"))
    want.update(listed(ok_acls("--list", "--group", t)))
    check(len(want) == 2, "before the restart: %s" % want)
    broker_ctl("kill9")
    broker_ctl("start")
    got = wait_until(lambda: listed(ok_acls("--list", "--topic", t, "--resource-pattern-type",
                                            "any")), 60, "the broker back")
    got.update(listed(ok_acls("--list", "--group", t)))
    check(got == want, "after kill -9: %s, want %s" % (got, want))


if __name__ == "__main__":
    S.main()
