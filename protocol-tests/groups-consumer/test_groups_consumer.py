#!/usr/bin/env python3
"""KIP-848 consumer groups against the broker at $BOOTSTRAP: members are separate processes
(Java 4.4 client: protocol-tests/java ConsumerMember; librdkafka: member_ck.py) so a member
can be killed with SIGKILL. Every wait is bounded; nothing asserts on timing."""
import os
import signal
import subprocess
import threading
import time

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness import BOOTSTRAP, BROKER_CTL, RUN_TAG, Suite, check, info, wait_until

S = Suite("groups-consumer")
HERE = os.path.dirname(os.path.abspath(__file__))
MEMBER_CP = os.environ.get("MEMBER_CP", "")
KAFKA_LIBS = os.environ.get("KAFKA_LIBS", "")
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
# A member's partitions move once its session (10 s, broker-overrides) expired.
T = 60


def name(base):
    return "gcs-%s-%s" % (base, RUN_TAG)


_ADMIN = []


def admin():
    """The admin client in use (see restart_broker)."""
    if not _ADMIN:
        _ADMIN.append(AdminClient({"bootstrap.servers": BOOTSTRAP}))
    return _ADMIN[-1]


def restart_broker():
    """kill -9 and start the broker; later admin calls go through a new admin client (the
    old one is kept, not destroyed: a librdkafka handle destroyed while it still has a request
    in flight can bring the interpreter down)."""
    subprocess.run([BROKER_CTL, "kill9"], check=True, timeout=60)
    subprocess.run([BROKER_CTL, "start"], check=True, timeout=180)
    _ADMIN.append(AdminClient({"bootstrap.servers": BOOTSTRAP}))


def create_topic(topic, partitions):
    a = admin()
    fs = a.create_topics([NewTopic(topic, partitions, 1)])
    for f in fs.values():
        f.result(30)
    return topic


def produce(topic, n, partitions):
    p = Producer({"bootstrap.servers": BOOTSTRAP})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, key=b"k%d" % i, partition=i % partitions)
    check(p.flush(30) == 0, "produce did not complete")


def committed(group, topic, partitions):
    a = admin()
    from confluent_kafka import ConsumerGroupTopicPartitions
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    res = a.list_consumer_group_offsets([req])[group].result(30)
    return {tp.partition: tp.offset for tp in res.topic_partitions}


class Member:
    """A member process; its output lines are followed by a reader thread."""

    def __init__(self, argv, label):
        self.label = label
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(os.path.join(os.environ.get("SUITE_TMP", "/tmp"),
                                                              "gcs-%s.err" % label), "w"),
                                     text=True, start_new_session=True)
        self.assigned = None
        self.read = 0
        self.errors = []
        self.fenced = 0
        self.lost = []
        self.epochs = []
        self.closed = False
        self.lock = threading.Lock()
        threading.Thread(target=self._follow, daemon=True).start()

    def _follow(self):
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            with self.lock:
                if line.startswith("ASSIGNED"):
                    rest = line[len("ASSIGNED"):].strip()
                    self.assigned = frozenset(x for x in rest.split(",") if x)
                elif line.startswith("READ "):
                    self.read = int(line[5:])
                elif line.startswith("ERROR"):
                    self.errors.append(line)
                elif line.startswith("FENCED"):
                    self.fenced += 1
                elif line.startswith("LOST"):
                    self.lost.append(line)
                elif line.startswith("EPOCH "):
                    self.epochs.append(int(line[6:]))
                elif line == "CLOSED":
                    self.closed = True

    def owned(self):
        with self.lock:
            return self.assigned

    def stop(self, timeout=30):
        """Closes stdin: the member leaves the group and exits."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def state(self):
        """What the member reported and the end of its stderr, for a failure message."""
        try:
            with open(os.path.join(os.environ.get("SUITE_TMP", "/tmp"),
                                   "gcs-%s.err" % self.label)) as f:
                lines = f.read().splitlines()
            # the first exception lines say more than the end of a stack trace
            err = " | ".join([l for l in lines if "Exception" in l or "ERROR" in l][:4]
                             or lines[-6:])[:1200]
        except OSError:
            err = ""
        with self.lock:
            return "exit=%s owned=%s read=%d epochs=%s lost=%s errors=%s stderr=...%s" % (
                self.proc.poll(), self.assigned, self.read, self.epochs, self.lost, self.errors,
                err)

    def kill9(self):
        """SIGKILL to the member's process group (the timeout wrapper and the client)."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


def java_member(group, topics, label, *props, protocol="consumer"):
    argv = ["timeout", "-k", "5", "300", "java", "-Xmx256m", "-cp", MEMBER_CP,
            "sluice.ConsumerMember", BOOTSTRAP, group, protocol, topics] + list(props)
    return Member(argv, label)


# A classic member's session and heartbeats, as the consumer-protocol members' (broker-overrides).
CLASSIC = ("session.timeout.ms=10000", "heartbeat.interval.ms=1000")


def classic_member(group, topics, label, *props):
    return java_member(group, topics, label, *(CLASSIC + props), protocol="classic")


def ck_member(group, topics, label, *props):
    import sys
    argv = ["timeout", "-k", "5", "300", sys.executable, os.path.join(HERE, "member_ck.py"),
            BOOTSTRAP, group, topics] + list(props)
    return Member(argv, label)


def balanced(members, topic, partitions):
    """Every partition owned by exactly one member, counts within one of each other."""
    owned = [m.owned() for m in members]
    if any(o is None for o in owned):
        return False
    seen = [p for o in owned for p in o]
    want = {"%s-%d" % (topic, p) for p in range(partitions)}
    counts = sorted(len(o) for o in owned)
    return len(seen) == len(set(seen)) and set(seen) == want and counts[-1] - counts[0] <= 1


def stop_all(members):
    for m in members:
        if m.proc.poll() is None:
            m.stop()


@S.scenario("java-balance", timeout=200)
def java_balance():
    topic = create_topic(name("bal"), 6)
    group = name("bal")
    ms = []
    try:
        for i in range(3):
            ms.append(java_member(group, topic, "bal%d" % i))
            wait_until(lambda: balanced(ms, topic, 6), T,
                       "%d members to share 6 partitions" % len(ms))
            info("step %d: %s" % (i, [sorted(m.owned()) for m in ms]))
        for m in ms:
            check(len(m.owned()) == 2, "each of 3 members owns 2: %s" % [m.owned() for m in ms])
            check(not m.errors, "member errors: %s" % m.errors)
    finally:
        stop_all(ms)


@S.scenario("java-kill9", timeout=200)
def java_kill9():
    topic = create_topic(name("kill"), 6)
    group = name("kill")
    a = java_member(group, topic, "kill-a")
    b = java_member(group, topic, "kill-b")
    try:
        wait_until(lambda: balanced([a, b], topic, 6), T, "two members to share 6 partitions")
        b.kill9()
        wait_until(lambda: a.owned() is not None and len(a.owned()) == 6, T,
                   "the survivor to own all 6 partitions after the killed member's session")
        check(not a.errors, "member errors: %s" % a.errors)
    finally:
        stop_all([a, b])


@S.scenario("java-static-member", timeout=200)
def java_static():
    topic = create_topic(name("static"), 6)
    group = name("static")
    a = java_member(group, topic, "static-a1", "group.instance.id=inst-a")
    b = java_member(group, topic, "static-b")
    a2 = None
    try:
        wait_until(lambda: balanced([a, b], topic, 6), T, "two members to share 6 partitions")
        a_parts, b_parts = a.owned(), b.owned()
        a.stop()
        a2 = java_member(group, topic, "static-a2", "group.instance.id=inst-a")
        wait_until(lambda: a2.owned() == a_parts, T,
                   "the static member's new process to get its partitions %s back" % sorted(a_parts))
        check(b.owned() == b_parts, "the other member kept its partitions: %s -> %s" % (
            sorted(b_parts), sorted(b.owned() or [])))
        check(not a2.errors and not b.errors, "member errors: %s %s" % (a2.errors, b.errors))
    finally:
        stop_all([m for m in (a, b, a2) if m])


@S.scenario("java-regex", timeout=120)
def java_regex():
    base = name("rx")
    t1 = create_topic(base + "-a", 2)
    t2 = create_topic(base + "-b", 2)
    create_topic(name("notrx"), 2)
    group = name("rx")
    m = java_member(group, "--regex=" + base.replace("-", "\\-") + "\\-.*", "rx")
    try:
        want = {"%s-%d" % (t, p) for t in (t1, t2) for p in range(2)}
        wait_until(lambda: m.owned() == want, T, "the partitions of both matching topics")
        check(not m.errors, "member errors: %s" % m.errors)
    finally:
        m.stop()


@S.scenario("java-unsupported-assignor", timeout=90)
def java_unsupported_assignor():
    topic = create_topic(name("assignor"), 1)
    m = java_member(name("assignor"), topic, "assignor", "group.remote.assignor=nope")
    try:
        wait_until(lambda: m.errors, T, "the poll to fail")
        check("UnsupportedAssignorException" in m.errors[0], "error: %s" % m.errors[0])
        check("ServerAssignor nope is not supported. Supported assignors: uniform, range."
              in m.errors[0], "Kafka's message: %s" % m.errors[0])
    finally:
        m.stop()


def read_and_commit(group, topic, partitions, n, label):
    """A member reads n records, commits them and leaves."""
    m = java_member(group, topic, label)
    try:
        wait_until(lambda: m.read >= n, T, "%s to read %d records" % (label, n))
        wait_until(lambda: sum(committed(group, topic, partitions).values()) >= n, T,
                   "the commits of %d records" % n)
        check(m.read == n, "%s read %d records, %d were produced" % (label, m.read, n))
        check(not m.errors, "member errors: %s" % m.errors)
    finally:
        m.stop()
    check(m.closed, "%s closed" % label)


@S.scenario("java-commit-resume", timeout=200)
def java_commit_resume():
    topic = create_topic(name("resume"), 3)
    group = name("resume")
    produce(topic, 300, 3)
    read_and_commit(group, topic, 3, 300, "resume1")
    resume_from_commits(group, topic, "resume2")


def resume_from_commits(group, topic, label):
    """60 more records to the 3 partitions holding 300 committed ones: a new member of the
    group reads the 60 only."""
    produce(topic, 60, 3)
    m = java_member(group, topic, label)
    try:
        wait_until(lambda: sum(committed(group, topic, 3).values()) >= 360, T,
                   "%s's commits" % label)
        # the member reports READ after its commitSync returns: wait for that line too
        wait_until(lambda: m.read >= 60, T, "%s's READ line" % label)
        check(m.read == 60, "%s read %d records, 60 were new" % (label, m.read))
    finally:
        m.stop()


@S.scenario("commits-survive-kill9", timeout=240)
def commits_survive_kill9():
    check(BROKER_CTL, "BROKER_CTL is set")
    topic = create_topic(name("k9"), 3)
    group = name("k9")
    produce(topic, 300, 3)
    read_and_commit(group, topic, 3, 300, "k9-1")
    before = committed(group, topic, 3)
    restart_broker()
    after = wait_until(lambda: committed(group, topic, 3), 2 * T, "the offsets after the restart",
                       interval=1)
    check(after == before, "committed offsets before the kill %s, after the restart %s" % (
        before, after))
    resume_from_commits(group, topic, "k9-2")


@S.scenario("member-across-broker-kill9", timeout=240)
def member_across_kill9():
    """The group's members and assignments are in __consumer_offsets: after the broker's
    kill -9 and restart the member carries on at its epoch (no rejoin, no partition lost,
    no commit refused)."""
    check(BROKER_CTL, "BROKER_CTL is set")
    topic = create_topic(name("live"), 3)
    group = name("live")
    produce(topic, 300, 3)
    m = java_member(group, topic, "live")
    try:
        wait_until(lambda: sum(committed(group, topic, 3).values()) >= 300, T,
                   "the member's commits of 300 records")
        wait_until(lambda: m.owned() is not None and len(m.owned()) == 3 and m.epochs, T,
                   "the member to own the 3 partitions at an epoch")
        with m.lock:
            seen = len(m.epochs)
            epoch = m.epochs[-1]
        info("member epoch before the restart: %d" % epoch)
        restart_broker()
        produce(topic, 60, 3)
        try:
            wait_until(lambda: sum(committed(group, topic, 3).values()) >= 360, T,
                       "the same member process to read and commit the 60 new records")
        except AssertionError as e:
            raise AssertionError("%s; member: %s" % (e, m.state()))
        with m.lock:
            after = m.epochs[seen:]
        info("member epochs reported after the restart: %s" % (after,))
        check(m.proc.poll() is None, "the member kept running")
        check(m.fenced == 0, "no commit refused across the restart: %s" % m.state())
        check(not m.lost, "no partition lost across the restart: %s" % m.state())
        check(all(e == epoch for e in after),
              "the member stayed at epoch %d across the restart: %s" % (epoch, m.state()))
        check(m.owned() is not None and len(m.owned()) == 3, "it owns the 3 partitions: %s" % (
            m.owned(),))
        check(not m.errors, "member errors: %s" % m.errors)
    finally:
        m.stop()


@S.scenario("confluent-kafka-balance", timeout=200)
def confluent_balance():
    topic = create_topic(name("ck"), 4)
    group = name("ck")
    produce(topic, 400, 4)
    a = ck_member(group, topic, "ck-a")
    b = ck_member(group, topic, "ck-b")
    try:
        wait_until(lambda: balanced([a, b], topic, 4), T, "two librdkafka members to share 4")
        wait_until(lambda: sum(committed(group, topic, 4).values()) >= 400, T,
                   "every record committed")
        # each member reports READ after its commit returns: wait for those lines too
        wait_until(lambda: a.read + b.read >= 400, T, "the members' READ lines")
        check(a.read + b.read >= 400, "read %d + %d of 400" % (a.read, b.read))
        check(not a.errors and not b.errors, "member errors: %s %s" % (a.errors, b.errors))
    finally:
        stop_all([a, b])


def groups_tool(*args):
    argv = ["timeout", "-k", "5", "90", "java", "-Xmx256m",
            "-Dlog4j2.configurationFile=" + os.path.join(ROOT, "scripts/kafka/log4j2-tools.properties"),
            "-cp", os.path.join(KAFKA_LIBS, "*"),
            "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
            "--bootstrap-server", BOOTSTRAP] + list(args)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    info("kafka-consumer-groups %s:\n%s%s" % (" ".join(args), r.stdout, r.stderr))
    check(r.returncode == 0, "kafka-consumer-groups %s: exit %d: %s" % (
        " ".join(args), r.returncode, r.stderr[-300:]))
    return r.stdout


@S.scenario("kafka-consumer-groups", timeout=200)
def consumer_groups_tool():
    topic = create_topic(name("tool"), 4)
    group = name("tool")
    ms = [java_member(group, topic, "tool-a"), java_member(group, topic, "tool-b")]
    try:
        wait_until(lambda: balanced(ms, topic, 4), T, "two members to share 4 partitions")
        check(group in groups_tool("--list").split(), "--list shows the group")
        listed = groups_tool("--list", "--type", "consumer")
        check(group in listed.split(), "--list --type consumer shows the group")
        state = wait_until(lambda: (lambda o: o if "Stable" in o else None)(
            groups_tool("--describe", "--group", group, "--state")), T, "the state Stable")
        check(group in state, "--state names the group")
        members = groups_tool("--describe", "--group", group, "--members", "--verbose")
        lines = [l for l in members.splitlines() if l.startswith(group)]
        check(len(lines) == 2, "two member lines: %s" % lines)
        for l in lines:
            check(topic in l, "a member line shows its assignment: %s" % l)
    finally:
        stop_all(ms)


def group_type(group):
    """The group's type and state as ListGroups shows them (None if not listed)."""
    for g in admin().list_consumer_groups().result(30).valid:
        if g.group_id == group:
            return (g.type.name, g.state.name)
    return None


def disjoint(members):
    owned = [m.owned() or frozenset() for m in members]
    seen = [p for o in owned for p in o]
    return len(seen) == len(set(seen))


def read_once(group, topic, members, n):
    """The members (of a group on a 6-partition topic) committed n records and read each once."""
    wait_until(lambda: sum(committed(group, topic, 6).values()) >= n, T,
               "the commits of %d records" % n)
    # each member reports READ after its commitSync returns: wait for those lines too
    wait_until(lambda: sum(m.read for m in members) >= n, T, "the members' READ lines")
    check(sum(m.read for m in members) == n, "%d records read once: %s" % (
        n, [m.read for m in members]))


@S.scenario("mixed-group", timeout=300)
def mixed_group():
    """A running classic group (a Java classic member) is upgraded when a consumer-protocol
    member joins; both share the partitions and read every record once; when the
    consumer-protocol member leaves the group is classic again and the classic member takes
    every partition."""
    topic = create_topic(name("mixed"), 6)
    group = name("mixed")
    produce(topic, 300, 6)
    a = classic_member(group, topic, "mixed-classic")
    b = None
    try:
        wait_until(lambda: a.owned() is not None and len(a.owned()) == 6, T,
                   "the classic member to own the 6 partitions")
        check(group_type(group) == ("CLASSIC", "STABLE"), "a classic group: %s" % (
            group_type(group),))
        b = java_member(group, topic, "mixed-consumer")
        try:
            wait_until(lambda: balanced([a, b], topic, 6), T,
                       "the classic and the consumer-protocol member to share 6 partitions")
        except AssertionError as e:
            raise AssertionError("%s; classic: %s; consumer: %s" % (e, a.state(), b.state()))
        info("shared: classic %s, consumer %s" % (sorted(a.owned()), sorted(b.owned())))
        check(len(a.owned()) == 3 and len(b.owned()) == 3, "3 partitions each")
        listed = wait_until(lambda: (lambda t: t if t and t[0] == "CONSUMER" else None)(
            group_type(group)), T, "the group listed as a consumer group")
        info("listed as %s" % (listed,))
        members = groups_tool("--describe", "--group", group, "--members", "--verbose")
        lines = [l for l in members.splitlines() if l.startswith(group)]
        check(len(lines) == 2, "two member lines: %s" % lines)
        # the last column (UPGRADED) says which member uses the consumer protocol
        check(sorted(l.split()[-1] for l in lines) == ["false", "true"],
              "one classic and one consumer-protocol member: %s" % lines)
        produce(topic, 300, 6)
        read_once(group, topic, [a, b], 600)
        check(disjoint([a, b]), "no partition owned by both: %s %s" % (a.owned(), b.owned()))
        check(sum(committed(group, topic, 6).values()) == 600, "600 committed")
        b.stop()
        check(b.closed, "the consumer-protocol member closed")
        wait_until(lambda: a.owned() is not None and len(a.owned()) == 6, T,
                   "the classic member to own the 6 partitions again")
        wait_until(lambda: group_type(group) == ("CLASSIC", "STABLE"), T,
                   "the group listed as a stable classic group again")
        described = groups_tool("--describe", "--group", group, "--members")
        lines = [l for l in described.splitlines() if l.startswith(group)]
        check(len(lines) == 1 and lines[0].split()[-1] == "6",
              "one member line, with 6 partitions: %s" % lines)
        state = groups_tool("--describe", "--group", group, "--state")
        lines = [l.split() for l in state.splitlines() if l.startswith(group)]
        check(len(lines) == 1 and "Stable" in lines[0] and "range" in lines[0],
              "a Stable classic group with the range assignor: %s" % lines)
        produce(topic, 60, 6)
        read_once(group, topic, [a, b], 660)
        check(not a.errors and not b.errors, "member errors: %s %s" % (a.errors, b.errors))
        check(a.fenced == 0 and b.fenced == 0, "no commit refused: %d %d" % (a.fenced, b.fenced))
    finally:
        stop_all([m for m in (a, b) if m])


@S.scenario("java-regex-new-topic", timeout=150)
def java_regex_new_topic():
    """A topic created after the member joined with a regex, matching it, is assigned to the
    member without the member changing its subscription (Kafka re-resolves a group's regexes
    at a heartbeat once the metadata has new topics)."""
    base = name("rxn")
    t1 = create_topic(base + "-a", 2)
    group = name("rxn")
    m = java_member(group, "--regex=" + base.replace("-", "\\-") + "\\-.*", "rxn")
    try:
        wait_until(lambda: m.owned() == {"%s-%d" % (t1, p) for p in range(2)}, T,
                   "the partitions of the matching topic")
        t2 = create_topic(base + "-b", 3)
        want = {"%s-%d" % (t, p) for t, n in ((t1, 2), (t2, 3)) for p in range(n)}
        wait_until(lambda: m.owned() == want, T,
                   "the partitions of the topic created later too")
        check(not m.errors, "member errors: %s" % m.errors)
    finally:
        m.stop()


if __name__ == "__main__":
    S.main()
