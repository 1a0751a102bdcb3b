#!/usr/bin/env python3
"""Consumer groups against the broker at $BOOTSTRAP: balancing, members joining, dying
(SIGKILL, no LeaveGroup) and coming back (static membership), cooperative-sticky rebalances,
commits that survive a broker kill -9, and the group admin APIs.

Group members are confluent-kafka consumers in subprocesses (member.py) so that they can be
killed; admin calls use kafka-python's KafkaAdminClient and confluent-kafka's AdminClient.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient, MemberToRemove
from kafka import TopicPartition as KTP
import kafka.errors as KErr

from harness import BOOTSTRAP, BROKER_CTL, RUN_TAG, Suite, check, info, wait_until

S = Suite("groups")
T = 30
HERE = os.path.dirname(os.path.abspath(__file__))


def name(base):
    return "grp-%s-%s" % (base, RUN_TAG)


def quiet(err):
    info("librdkafka: %s" % err)


def create_topic(topic, partitions):
    a = AdminClient({"bootstrap.servers": BOOTSTRAP, "error_cb": quiet})
    a.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=T)
    wait_until(lambda: len(a.list_topics(topic, timeout=5).topics[topic].partitions) == partitions,
               T, "topic %s ready" % topic)
    return topic


def produce(topic, partitions, per_partition, tag):
    p = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 5, "error_cb": quiet})
    sent = []
    for part in range(partitions):
        for i in range(per_partition):
            p.produce(topic, value=("%s-%d-%d" % (tag, part, i)).encode(), partition=part)
    check(p.flush(T) == 0, "produce did not finish")
    return sent


def end_offsets(topic, partitions):
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "probe-" + RUN_TAG, "error_cb": quiet})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        c.close()


def kadmin():
    return KafkaAdminClient(bootstrap_servers=BOOTSTRAP, request_timeout_ms=20000)


class Member:
    """A member.py subprocess; its events are collected by a reader thread."""

    def __init__(self, group, topic, *conf):
        self.proc = subprocess.Popen(
            [sys.executable, "-u", os.path.join(HERE, "member.py"), BOOTSTRAP, group, topic] + list(conf),
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.events = []
        self.lock = threading.Lock()
        self.owned = set()
        self.consumed = set()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.events.append(ev)
                if ev["ev"] == "assign":
                    self.owned |= set(ev["parts"])
                elif ev["ev"] in ("revoke", "lost"):
                    self.owned -= set(ev["parts"])
                elif ev["ev"] in ("msg", "commit_failed"):
                    self.consumed.add((ev["p"], ev["o"]))

    def parts(self):
        with self.lock:
            return set(self.owned)

    def evs(self, kind):
        with self.lock:
            return [e for e in self.events if e["ev"] == kind]

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout=20):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def stop_all(members):
    for m in members:
        if m.proc.poll() is None:
            m.proc.send_signal(signal.SIGTERM)
    for m in members:
        m.stop()


def balanced(members, total, sizes=None):
    owned = [m.parts() for m in members]
    union = set().union(*owned)
    if len(union) != total or sum(len(o) for o in owned) != total:
        return False
    if sizes is not None and sorted(len(o) for o in owned) != sorted(sizes):
        return False
    return owned


@S.scenario("balance-join-kill-at-least-once", timeout=150)
def balance_join_kill():
    topic = create_topic(name("bal"), 6)
    group = name("bal")
    produce(topic, 6, 50, "a")
    ms = [Member(group, topic) for _ in range(3)]
    try:
        owned = wait_until(lambda: balanced(ms, 6, [2, 2, 2]), 40, "3 members with 2 partitions each")
        info("3 members: %s" % owned)
        ms.append(Member(group, topic))
        owned = wait_until(lambda: balanced(ms, 6, [2, 2, 1, 1]), 40, "4 members sharing 6 partitions")
        info("4 members: %s" % owned)
        produce(topic, 6, 50, "b")
        victim = next(m for m in ms if m.parts())
        lost = victim.parts()
        victim.kill9()
        t0 = time.monotonic()
        alive = [m for m in ms if m is not victim]
        owned = wait_until(lambda: balanced(alive, 6), 40, "partitions of the killed member %s moved" % sorted(lost))
        moved_after = time.monotonic() - t0
        info("after kill (%.1fs): %s" % (moved_after, owned))
        # session.timeout.ms=6000, plus the rebalance itself
        check(moved_after < 20, "partitions moved only after %.1fs" % moved_after)
        produce(topic, 6, 50, "c")
        ends = end_offsets(topic, 6)
        want = {(p, o) for p in range(6) for o in range(ends[p])}

        def missing():
            got = set().union(*(m.consumed for m in ms))
            return want - got
        try:
            wait_until(lambda: not missing(), 40, "every produced message consumed at least once")
        except AssertionError:
            left = sorted(missing())
            raise AssertionError("%d of %d messages never consumed, e.g. %s; owners %s" % (
                len(left), len(want), left[:5], [sorted(m.parts()) for m in alive]))
        stop_all(alive)
        c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group, "error_cb": quiet})
        committed = c.committed([TopicPartition(topic, p) for p in range(6)], timeout=10)
        c.close()
        got = {tp.partition: tp.offset for tp in committed}
        check(got == ends, "committed %s != end offsets %s" % (got, ends))
    finally:
        stop_all(ms)


@S.scenario("cooperative-sticky-moves-only-what-must", timeout=120)
def cooperative_sticky():
    topic = create_topic(name("coop"), 6)
    group = name("coop")
    conf = ["partition.assignment.strategy=cooperative-sticky"]
    ms = [Member(group, topic, *conf) for _ in range(2)]
    try:
        before = wait_until(lambda: balanced(ms, 6, [3, 3]), 40, "2 members with 3 partitions each")
        seen = [len(m.events) for m in ms]
        ms.append(Member(group, topic, *conf))
        after = wait_until(lambda: balanced(ms, 6, [2, 2, 2]), 40, "3 members with 2 partitions each")
        info("before %s after %s" % (before, after))
        for i in range(2):
            check(after[i] <= before[i], "member %d gained %s while losing" % (i, after[i] - before[i]))
            with ms[i].lock:
                revoked = [p for e in ms[i].events[seen[i]:] if e["ev"] == "revoke" for p in e["parts"]]
            check(sorted(revoked) == sorted(before[i] - after[i]),
                  "member %d revoked %s, but only %s had to move" % (i, revoked, sorted(before[i] - after[i])))
        check(not ms[2].evs("revoke"), "the new member had partitions revoked")
    finally:
        stop_all(ms)


@S.scenario("static-member-restart-keeps-partitions", timeout=120)
def static_membership():
    topic = create_topic(name("static"), 4)
    group = name("static")
    a = Member(group, topic, "group.instance.id=inst-a", "session.timeout.ms=15000")
    ms = [a]
    try:
        wait_until(lambda: len(a.parts()) == 4, 40, "first static member owns all partitions")
        b = Member(group, topic, "group.instance.id=inst-b", "session.timeout.ms=15000")
        ms.append(b)
        owned = wait_until(lambda: balanced([a, b], 4, [2, 2]), 40, "2 static members with 2 partitions each")
        a_events = len(a.events)
        b_parts = b.parts()
        b.kill9()
        time.sleep(1)
        b2 = Member(group, topic, "group.instance.id=inst-b", "session.timeout.ms=15000")
        ms.append(b2)
        wait_until(lambda: b2.parts() == b_parts, 30, "restarted static member gets %s back" % sorted(b_parts))
        time.sleep(3)  # anything a rebalance would do to the other member happens in this time
        with a.lock:
            later = [e for e in a.events[a_events:] if e["ev"] in ("assign", "revoke", "lost")]
        check(not later, "the other member saw a rebalance: %s" % later)
        check(a.parts() == owned[0], "other member's partitions changed")
        desc = kadmin().describe_groups([group])[group]
        info("describe: %s" % {k: desc[k] for k in ("group_state", "protocol_data")})
        insts = sorted(m["group_instance_id"] for m in desc["members"])
        check(insts == ["inst-a", "inst-b"], "members %s" % insts)
    finally:
        stop_all(ms)


def generation(m):
    """The (generation, member id) member `m`'s client holds now, or None."""
    gens = m.evs("gen")
    return (gens[-1]["gen"], gens[-1]["member"]) if gens else None


@S.scenario("static-leader-restart-no-rebalance", timeout=150)
def static_leader_restart():
    """Three static members; the leader (the first to join) is killed with SIGKILL and comes
    back within its session timeout: it gets its partitions back in the same generation, and
    neither of the others sees a rebalance."""
    topic = create_topic(name("sleader"), 6)
    group = name("sleader")
    conf = lambda inst: ["group.instance.id=" + inst, "session.timeout.ms=20000"]
    a = Member(group, topic, *conf("inst-a"))
    ms = [a]
    try:
        wait_until(lambda: len(a.parts()) == 6, 40, "the first static member (the leader) owns all partitions")
        b, c = Member(group, topic, *conf("inst-b")), Member(group, topic, *conf("inst-c"))
        ms += [b, c]
        owned = wait_until(lambda: balanced([a, b, c], 6, [2, 2, 2]), 40, "3 static members with 2 partitions each")

        def settled():
            gs = [generation(m) for m in (a, b, c)]
            return all(gs) and len({g[0] for g in gs}) == 1 and gs
        gens = wait_until(settled, 20, "the 3 members in one generation")
        gen = gens[0][0]
        info("generation %d, owned %s" % (gen, owned))
        seen = {m: len(m.events) for m in (b, c)}
        a.kill9()
        time.sleep(1)
        a2 = Member(group, topic, *conf("inst-a"))
        ms.append(a2)
        wait_until(lambda: a2.parts() == owned[0], 30, "restarted leader gets %s back" % sorted(owned[0]))
        time.sleep(4)  # what a rebalance would do to the others happens in this time
        for m, label in ((b, "inst-b"), (c, "inst-c")):
            with m.lock:
                later = [e for e in m.events[seen[m]:] if e["ev"] in ("assign", "revoke", "lost")]
            check(not later, "%s saw a rebalance: %s" % (label, later))
        check([b.parts(), c.parts()] == owned[1:], "the others' partitions changed")
        now = [generation(m) for m in (a2, b, c)]
        info("after the restart: %s" % now)
        check(all(g and g[0] == gen for g in now), "generation changed from %d: %s" % (gen, now))
        check(now[0][1] != gens[0][1], "the restarted leader kept its old member id %s" % gens[0][1])
        desc = kadmin().describe_groups([group])[group]
        check(desc["group_state"] == "Stable", "group state %s" % desc["group_state"])
        ids = sorted((mm["group_instance_id"], mm["member_id"]) for mm in desc["members"])
        check(ids == sorted([("inst-a", now[0][1]), ("inst-b", now[1][1]), ("inst-c", now[2][1])]),
              "described members %s" % ids)
    finally:
        stop_all(ms)


@S.scenario("admin-list-describe-delete", timeout=120)
def admin():
    topic = create_topic(name("adm"), 3)
    group = name("adm")
    produce(topic, 3, 10, "x")
    m = Member(group, topic)
    ka = kadmin()
    try:
        wait_until(lambda: len(m.parts()) == 3, 40, "member owns all partitions")
        wait_until(lambda: len(m.consumed) == 30, 30, "member consumed everything")
        listed = {g["group_id"]: g for g in ka.list_groups()}
        check(group in listed and listed[group]["protocol_type"] == "consumer", "list_groups: %s" % listed.get(group))
        stable = [g["group_id"] for g in ka.list_groups(states_filter=["Stable"])]
        check(group in stable, "states filter Stable misses the group: %s" % stable)
        empty = [g["group_id"] for g in ka.list_groups(states_filter=["Empty"])]
        check(group not in empty, "states filter Empty lists a stable group")
        d = ka.describe_groups([group])[group]
        check(d["error"] is None and d["group_state"] == "Stable", "describe: %s" % d)
        check(d["protocol_type"] == "consumer" and d["protocol_data"] in ("range", "roundrobin"), "protocol: %s" % d)
        check(len(d["members"]) == 1, "members: %s" % d["members"])
        mem = d["members"][0]
        check(mem["client_host"].startswith("/127.0.0.1"), "client host %r" % mem["client_host"])
        assigned = mem["member_assignment"]
        tps = assigned["assigned_partitions"] if isinstance(assigned, dict) else assigned.assigned_partitions
        parts = sorted(p for t in tps for p in (t["partitions"] if isinstance(t, dict) else t.partitions))
        info("assignment: %s" % assigned)
        check(parts == [0, 1, 2], "assignment %s" % parts)
        # errors while the group has members
        res = ka.delete_groups([group])
        check(res[group] == "NonEmptyGroupError", "delete of a live group: %s" % res)
        r = ka.delete_group_offsets(group, [KTP(topic, 0)])
        check(r[KTP(topic, 0)] is KErr.GroupSubscribedToTopicError, "offset delete of a subscribed topic: %s" % r)
        # a member removed by the admin (LeaveGroup v3+ batch)
        rm = ka.remove_group_members(group, [MemberToRemove(member_id=mem["member_id"]),
                                             MemberToRemove(member_id="no-such-member")])
        info("remove_group_members: %s" % rm)
        check(rm[mem["member_id"]] is KErr.NoError, "remove member: %s" % rm)
        check(rm["no-such-member"] is KErr.UnknownMemberIdError, "remove unknown member: %s" % rm)
        m.stop()
        wait_until(lambda: ka.describe_groups([group])[group]["group_state"] == "Empty", 20, "group Empty")
        r = ka.delete_group_offsets(group, [KTP(topic, 0), KTP(topic, 1)])
        check(all(e is KErr.NoError for e in r.values()), "offset delete: %s" % r)
        offs = ka.list_group_offsets(group)
        info("offsets after delete: %s" % offs)
        left = sorted(tp.partition for tp, om in (offs.get(group, offs) if isinstance(offs, dict) else {}).items()
                      if getattr(om, "offset", -1) >= 0)
        check(left == [2], "offsets left after deleting 0 and 1: %s" % left)
        res = ka.delete_groups([group, name("never-existed")])
        check(res[group] == "OK", "delete empty group: %s" % res)
        check(res[name("never-existed")] == "GroupIdNotFoundError", "delete unknown group: %s" % res)
        check(group not in [g["group_id"] for g in ka.list_groups()], "deleted group still listed")
        d = ka.describe_groups([name("never-existed")])[name("never-existed")]
        info("describe unknown: %s" % d)
        check(d["error"] is not None or d["group_state"] == "Dead", "describe of an unknown group: %s" % d)
    finally:
        m.stop()
        ka.close()


def broker_ctl(cmd):
    r = subprocess.run([BROKER_CTL, cmd], capture_output=True, text=True, timeout=150)
    check(r.returncode == 0, "broker-ctl %s failed: %s" % (cmd, r.stderr[-500:]))


def first_offsets(c, topic, partitions, timeout=40):
    """Subscribes `c` to `topic`; the offset of the first message it gets from each partition."""
    c.subscribe([topic])
    first = {}
    deadline = time.monotonic() + timeout
    while len(first) < partitions and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            first.setdefault(m.partition(), m.offset())
    return first


@S.scenario("commits-survive-kill9", timeout=200)
def commits_survive_kill9():
    topic = create_topic(name("k9"), 3)
    group, simple = name("k9"), name("k9-simple")
    produce(topic, 3, 20, "k")
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "error_cb": quiet})
    seen = first_offsets(c, topic, 3)
    check(len(seen) == 3, "group consumer got messages from %s only" % seen)
    want = {0: 7, 1: 11, 2: 13}
    c.commit(offsets=[TopicPartition(topic, p, o, metadata="meta-%d" % p) for p, o in want.items()],
             asynchronous=False)
    c.close()
    # a standalone consumer (no group membership: generation -1) commits too
    s = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": simple, "enable.auto.commit": False, "error_cb": quiet})
    s.assign([TopicPartition(topic, 0, 5)])
    s.commit(offsets=[TopicPartition(topic, 0, 5, metadata="simple")], asynchronous=False)
    try:
        s.commit(offsets=[TopicPartition(name("no-such-topic"), 0, 1)], asynchronous=False)
        check(False, "commit for an unknown topic succeeded")
    except KafkaException as e:
        info("unknown topic commit: %s" % e)
        check("UNKNOWN_TOPIC_OR_PART" in str(e) or "Unknown topic" in str(e), "error %s" % e)
    s.close()
    broker_ctl("kill9")
    broker_ctl("start")

    def committed(g, parts):
        c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": g, "error_cb": quiet})
        try:
            return {tp.partition: (tp.offset, tp.metadata) for tp in
                    c.committed([TopicPartition(topic, p) for p in parts], timeout=10)}
        finally:
            c.close()
    got = wait_until(lambda: committed(group, range(3)), 60, "OffsetFetch after restart")
    check(got == {p: (o, "meta-%d" % p) for p, o in want.items()}, "after kill -9: %s" % got)
    got = committed(simple, [0])
    check(got == {0: (5, "simple")}, "simple consumer's commit after kill -9: %s" % got)
    # a member rejoining resumes exactly at the committed offsets
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "error_cb": quiet})
    first = first_offsets(c, topic, 3)
    c.close()
    check(first == want, "rejoined consumer started at %s, committed %s" % (first, want))


if __name__ == "__main__":
    S.main()
