#!/usr/bin/env python3
"""Transactions on a 3-node cluster whose nodes are killed with SIGKILL: see ./run."""
import os
import time

import killtests
import txnlib as L
from harness import BOOTSTRAP, Suite, check, info, wait_until

S = Suite("cluster-txn")
CLUSTER_CTL = os.environ.get("CLUSTER_CTL", "")
INTERNAL = ["__transaction_state", "__consumer_offsets"]


def cluster(*args, timeout=240):
    check(CLUSTER_CTL, "CLUSTER_CTL is not set")
    return L.shell([CLUSTER_CTL] + [str(a) for a in args], timeout=timeout)


def metadata(topics):
    a = L.admin(BOOTSTRAP)
    return {t: a.list_topics(topic=t, timeout=15).topics[t] for t in topics}


def leader_of(topic, partition):
    return metadata([topic])[topic].partitions[partition].leader


def coordinator_of(txn_id):
    """The node coordinating a transactional id, as kafka-transactions describe shows it."""
    _, out, _ = L.transactions_tool(BOOTSTRAP, "describe", "--transactional-id", txn_id)
    rows = L.table(out)
    check(len(rows) == 1 and rows[0].get("CoordinatorId", "").isdigit(),
          "describe %s: %s" % (txn_id, out))
    return int(rows[0]["CoordinatorId"])


def full_isr(topics):
    """Every partition of the topics has its 3 replicas in sync."""
    for t, md in metadata(topics).items():
        if md.error is not None or not md.partitions:
            return False
        if any(len(p.isrs) != 3 or p.leader < 0 for p in md.partitions.values()):
            return False
    return True


def kill_node(node, topics, ctx=None, down=3.0, live=0.3):
    """SIGKILL a node, leave it down `down` seconds (the clients fail over meanwhile),
    restart it on its data, and wait until the topics and the internal ones have a full ISR
    again (so that the next round may kill any node). With a copier's ctx, the copiers run on
    for `live` seconds after the kill (their requests in flight to the dead node fail, their
    transactions are cut mid-way) and are then paused (SIGSTOP) until the ISR is full:
    otherwise a copier the kill does not touch goes on at full speed (on Sluice up to 10,000
    records/s) and finishes the copy before the later rounds."""
    t0 = time.monotonic()
    cluster("kill", node)
    if ctx:
        time.sleep(live)
        ctx["pause"]()
        time.sleep(max(0.0, down - live))
    else:
        time.sleep(down)
    try:
        cluster("start", node)
        wait_until(lambda: full_isr(topics + INTERNAL), 180,
                   "a full ISR after restarting node %d" % node)
    finally:
        if ctx:
            ctx["resume"]()
    return "node %d (%.1fs)" % (node, time.monotonic() - t0)


@S.scenario("copier-leaders-kill9", timeout=600)
def copier_leaders_kill9():
    """Two TransactionalMessageCopiers through 4 kills: the transaction coordinator of copier
    0, the leader of output partition 0, the leader of input partition 1, the coordinator of
    copier 1."""
    def kill(r, ctx):
        # The copiers wait while the victim is looked up (kafka-transactions describe is a JVM
        # start of a few seconds, long enough for a fast copier to finish a round's share).
        ctx["pause"]()
        try:
            victim, why = victim_of(r, ctx)
        finally:
            ctx["resume"]()
        return "%s %s" % (why, kill_node(victim, [ctx["src"], ctx["dst"]], ctx))

    def victim_of(r, ctx):
        if r in (1, 4):
            victim, why = coordinator_of(ctx["txn_ids"][0 if r == 1 else 1]), "coordinator"
        elif r == 2:
            victim, why = leader_of(ctx["dst"], 0), "output leader"
        else:
            victim, why = leader_of(ctx["src"], 1), "input leader"
        return victim, why
    inp, out = killtests.copier_kill9(BOOTSTRAP, 2, 25000, 4, kill, "ccopier", timeout=480)
    L.check_exactly_once("copier-leaders-kill9", L.values(inp), L.values(out))
    for p in inp:
        check([v for _, _, v in out[p]] == [v for _, _, v in inp[p]],
              "output partition %d is not the input partition in order" % p)


def streams(guarantee, tag):
    """The word count (replication factor 3) while the leader of input partition 0 is killed."""
    src, dst = L.name("%s-in" % tag), L.name("%s-out" % tag)  # as killtests.wordcount names them

    def kill():
        return "input leader " + kill_node(leader_of(src, 0), [src, dst])
    killtests.wordcount(BOOTSTRAP, guarantee, kill, tag, rf=3)


@S.scenario("streams-eos-kill9", timeout=420)
def streams_eos():
    streams("exactly_once_v2", "cwc-eos")


@S.scenario("streams-alos-kill9", timeout=420)
def streams_alos():
    streams("at_least_once", "cwc-alos")


if __name__ == "__main__":
    info("cluster bootstrap %s" % BOOTSTRAP)
    S.main()
