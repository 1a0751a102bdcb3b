#!/usr/bin/env python3
"""Transactions on one broker, driven by real clients: see ./run for the scenario list.

Every check reads back through a consumer at an isolation level and compares exact records
(offsets and values from the producers' delivery reports), so a scenario passes only if the
broker kept committed records, hid aborted ones from read_committed, and let the last stable
offset reach the end.
"""
import os
import re
import shlex
import socket
import subprocess
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

import killtests
import txnlib as L
from harness import BOOTSTRAP, BROKER_CTL, Suite, check, info, wait_until

S = Suite(os.environ.get("TXN_SUITE_NAME", "txn"))  # cluster-txn/run runs most of it on 3 nodes
B = BOOTSTRAP
HERE = L.HERE
PY = sys.executable


def broker(cmd, timeout=180):
    check(BROKER_CTL, "BROKER_CTL is not set")
    return L.shell(shlex.split(BROKER_CTL) + [cmd], timeout=timeout)


# ---- confluent-kafka ---------------------------------------------------------------------------

def txn_write(p, topic, recs):
    """Produce recs [(partition, value)] and flush (delivery reports give the offsets)."""
    return L.produce_sync(p, topic, [(part, None, v) for part, v in recs])


@S.scenario("confluent-interleaved", timeout=120)
def confluent_interleaved():
    """Committed and aborted transactions over 2 partitions with plain (idempotent,
    non-transactional) writes before, between and inside them. read_committed sees exactly
    the plain and committed records, at their offsets, and reaches the end; read_uncommitted
    sees every record."""
    topic = L.create_topic(B, L.name("ck-mix"), 2)
    plain = L.producer(B)
    tx = L.txn_producer(B, L.name("ck-mix-tx"))
    written = []  # (partition, offset, value, visible)
    seq = [0]

    def recs(n, tag):
        out = []
        for _ in range(n):
            out.append((seq[0] % 2, ("%s-%d" % (tag, seq[0])).encode()))
            seq[0] += 1
        return out

    def plain_write(n):
        rs = recs(n, "plain")
        for (part, v), off in zip(rs, txn_write(plain, topic, rs)):
            written.append((part, off, v, True))

    steps = [("plain", 3), ("commit", 10), ("plain", 2), ("abort", 10), ("plain", 2),
             ("commit", 5), ("abort", 4), ("abort", 6), ("commit", 7), ("plain", 3)]
    for kind, n in steps:
        if kind == "plain":
            plain_write(n)
            continue
        tx.begin_transaction()
        rs = recs(n, kind)
        offs = txn_write(tx, topic, rs)  # flushed: in the log, transaction still open
        plain_write(1)                   # a plain record inside the open transaction's range
        if kind == "commit":
            tx.commit_transaction(L.T)
        else:
            tx.abort_transaction(L.T)
        for (part, v), off in zip(rs, offs):
            written.append((part, off, v, kind == "commit"))

    for committed in (True, False):
        got = L.read_all(B, topic, 2, committed)
        for part in (0, 1):
            want = sorted((off, v) for p, off, v, vis in written if p == part and (vis or not committed))
            have = [(off, v) for off, _, v in got[part]]
            check(have == want, "%s partition %d: got %d records %s..., want %d %s..." % (
                "read_committed" if committed else "read_uncommitted", part, len(have),
                have[:6], len(want), want[:6]))
    n_vis = sum(1 for w in written if w[3])
    info("interleaved: %d records written, %d visible to read_committed" % (len(written), n_vis))


@S.scenario("confluent-open-txn-lso", timeout=90)
def confluent_open_txn_lso():
    """While a transaction is open, ListOffsets(read_committed) answers its first offset (the
    LSO) and a read_committed consumer ends there although later plain records are stored;
    once the commit's marker is written the LSO is the high watermark and everything is
    visible."""
    topic = L.create_topic(B, L.name("ck-lso"), 1)
    plain = L.producer(B)
    tx = L.txn_producer(B, L.name("ck-lso-tx"))
    before = txn_write(plain, topic, [(0, b"before-%d" % i) for i in range(3)])
    tx.begin_transaction()
    opened = txn_write(tx, topic, [(0, b"txn-%d" % i) for i in range(4)])
    after = txn_write(plain, topic, [(0, b"after-%d" % i) for i in range(2)])
    check(before == [0, 1, 2] and opened == [3, 4, 5, 6] and after == [7, 8],
          "unexpected offsets %s %s %s" % (before, opened, after))
    lso = L.end_offsets(B, topic, 1, committed=True)[0]
    hw = L.end_offsets(B, topic, 1)[0]
    check((lso, hw) == (3, 9), "open transaction at 3: LSO %d, high watermark %d; want 3, 9" % (lso, hw))
    got = [v for _, _, v in L.read_all(B, topic, 1, True)[0]]
    check(got == [b"before-0", b"before-1", b"before-2"], "read_committed below the LSO: %s" % got)
    tx.commit_transaction(L.T)
    # EndTxn is answered once the commit is prepared; the markers follow (as in Kafka), and on
    # a cluster the marker must reach the followers before the high watermark passes it.
    ends = [None]

    def settled():
        ends[0] = (L.end_offsets(B, topic, 1, committed=True)[0], L.end_offsets(B, topic, 1)[0])
        return ends[0] == (10, 10)
    try:
        wait_until(settled, 30, "the commit marker")
    except AssertionError:
        check(False, "after the commit: (LSO, high watermark) %s; want (10, 10) (marker at 9)" % (
            ends[0],))
    got = [(o, v) for o, _, v in L.read_all(B, topic, 1, True)[0]]
    want = [(i, v) for i, v in enumerate([b"before-0", b"before-1", b"before-2", b"txn-0", b"txn-1",
                                          b"txn-2", b"txn-3", b"after-0", b"after-1"])]
    check(got == want, "read_committed after commit: %s" % got)


@S.scenario("confluent-send-offsets-copy", timeout=180)
def confluent_send_offsets_copy():
    """Consume-transform-produce: a group consumer (read_committed, no auto commit) and a
    transactional producer copy a 3-partition topic of 3000 records in transactions of at most
    100 records whose offsets go in with send_offsets_to_transaction; every fourth transaction
    is aborted and the consumer rewinds to the committed offsets. The output is the input
    exactly, partition by partition and in order, and the group's committed offsets are the
    input's end offsets."""
    parts, n = 3, 3000
    src = L.create_topic(B, L.name("ck-copy-in"), parts)
    dst = L.create_topic(B, L.name("ck-copy-out"), parts)
    L.produce_sync(L.producer(B), src, [(i % parts, None, b"c-%05d" % i) for i in range(n)])
    group = L.name("ck-copy-g")
    c = Consumer({"bootstrap.servers": B, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                  "error_cb": L.quiet})
    tx = L.txn_producer(B, L.name("ck-copy-tx"))
    c.subscribe([src])
    txns = aborts = 0
    try:
        deadline = time.monotonic() + 150
        while True:
            check(time.monotonic() < deadline, "copy not done in 150s (%d transactions)" % txns)
            msgs = c.consume(num_messages=100, timeout=1.0)
            for m in msgs:
                if m.error():
                    raise AssertionError("consumer error: %s" % m.error())
            if not msgs:
                asg = c.assignment()
                if len(asg) == parts:
                    com = {tp.partition: tp.offset for tp in c.committed(asg, timeout=L.T)}
                    if com == {p: n // parts for p in range(parts)}:
                        break
                continue
            tx.begin_transaction()
            for m in msgs:
                tx.produce(dst, key=m.key(), value=m.value(), partition=m.partition())
            pos = [tp for tp in c.position(c.assignment()) if tp.offset >= 0]
            tx.send_offsets_to_transaction(pos, c.consumer_group_metadata(), L.T)
            txns += 1
            if txns % 4 == 0:
                tx.flush(L.T)
                tx.abort_transaction(L.T)
                aborts += 1
                for tp in c.committed(c.assignment(), timeout=L.T):
                    c.seek(TopicPartition(src, tp.partition,
                                          tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
            else:
                tx.commit_transaction(L.T)
    finally:
        c.close()
    info("send-offsets copy: %d transactions, %d aborted" % (txns, aborts))
    check(aborts > 0, "no transaction was aborted")
    inp = L.read_all(B, src, parts, False)
    out = L.read_all(B, dst, parts, True)
    L.check_exactly_once("confluent copy", L.values(inp), L.values(out))
    for p in range(parts):
        check([v for _, _, v in out[p]] == [v for _, _, v in inp[p]],
              "output partition %d is not the input's partition in order" % p)


@S.scenario("confluent-zombie-fencing", timeout=90)
def confluent_zombie_fencing():
    """Two librdkafka producers with one transactional id: the second's init_transactions
    fences the first, whose open transaction is aborted; the first's commit fails with a
    fatal fencing error (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH) and nothing it wrote is
    visible to read_committed."""
    topic = L.create_topic(B, L.name("ck-zombie"), 1)
    txn_id = L.name("ck-zombie-tx")
    old = L.txn_producer(B, txn_id)
    old.begin_transaction()
    txn_write(old, topic, [(0, b"old-a%d" % i) for i in range(3)])
    new = L.txn_producer(B, txn_id)
    new.begin_transaction()
    txn_write(new, topic, [(0, b"new-%d" % i) for i in range(3)])
    new.commit_transaction(L.T)
    # librdkafka raises the fatal error from whichever call meets it first (flush's delivery
    # report or commit_transaction); what matters is that it is a fencing error and fatal.
    errs = []
    try:
        old.produce(topic, value=b"old-b0", partition=0, on_delivery=lambda err, msg: errs.append(err))
        old.flush(L.T)
        old.commit_transaction(L.T)
        raise AssertionError("the fenced producer committed (delivery: %s)" % errs)
    except (KafkaException, SystemError) as e:
        ke = e if isinstance(e, KafkaException) else e.__cause__
        check(isinstance(ke, KafkaException), "the fenced producer failed with %r" % e)
        err = ke.args[0]
        info("fenced producer: %s (fatal %s)" % (err, err.fatal()))
        check(err.fatal() and err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                             KafkaError.INVALID_PRODUCER_EPOCH),
              "the fenced producer failed with %s, want a fatal fencing error" % err)
    got = [v for _, _, v in L.read_all(B, topic, 1, True)[0]]
    check(got == [b"new-0", b"new-1", b"new-2"], "read_committed got %s" % got)
    raw = [v for _, _, v in L.read_all(B, topic, 1, False)[0]]
    check(b"old-b0" not in raw, "the fenced producer's later write is in the log: %s" % raw)


# ---- kafka-python ------------------------------------------------------------------------------

@S.scenario("kafka-python-txn", timeout=120)
def kafka_python_txn():
    """kafka-python's transactional producer: commits and aborts (with flush), offsets sent
    into a committed and into an aborted transaction; its read_committed consumer reads
    exactly the committed records up to the end offsets; the group sees only the committed
    transaction's offsets."""
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
    from kafka import TopicPartition as KTP
    topic = L.create_topic(B, L.name("kp-txn"), 1)
    group = L.name("kp-txn-g")
    p = KafkaProducer(bootstrap_servers=B, transactional_id=L.name("kp-txn-tx"))
    want = []
    tp = KTP(topic, 0)
    try:
        p.init_transactions()
        for t in range(6):
            p.begin_transaction()
            vals = [b"kp-%d-%d" % (t, i) for i in range(8)]
            for v in vals:
                p.send(topic, value=v, partition=0)
            p.flush()
            if t in (2, 5):
                p.send_offsets_to_transaction({tp: OffsetAndMetadata(100 + t, "", -1)}, group)
            if t % 2 == 1:
                p.abort_transaction()
            else:
                p.commit_transaction()
                want += vals
    finally:
        p.close(timeout=10)
    c = KafkaConsumer(bootstrap_servers=B, isolation_level="read_committed",
                      enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + 60
        while True:
            for recs in c.poll(timeout_ms=500).values():
                got += [r.value for r in recs]
            end = c.end_offsets([tp])[tp]
            if len(got) >= len(want) and c.position(tp) >= end:
                break
            check(time.monotonic() < deadline, "kafka-python read_committed: %d of %d records, "
                  "position %d, end %d" % (len(got), len(want), c.position(tp), end))
        check(got == want, "kafka-python read_committed got %d records, want %d: %s" % (
            len(got), len(want), got[:10]))
    finally:
        c.close()
    g = KafkaConsumer(bootstrap_servers=B, group_id=group, enable_auto_commit=False)
    try:
        com = g.committed(tp)
    finally:
        g.close()
    check(com == 102, "group offset %s, want 102 (the committed transaction's, not 105)" % com)
    assert_cmp = [v for _, _, v in L.read_all(B, topic, 1, True)[0]]
    check(assert_cmp == want, "confluent read_committed disagrees with kafka-python's")


# ---- kafkajs, Java, franz-go --------------------------------------------------------------------

@S.scenario("kafkajs-txn", timeout=120)
def kafkajs_txn():
    """kafkajs's transactional producer (commit, abort, sendOffsets) and a read_committed
    group consumer: see txn.js."""
    info("kafkajs: " + L.run_program(["node", os.path.join(HERE, "txn.js"), L.name("kjs")],
                                     "txn.js", timeout=110, cwd=HERE))


@S.scenario("java-produce-consume", timeout=150)
def java_produce_consume():
    info("java: " + L.run_java("sluice.txn.TxnClients", "produce-consume", L.name("java-pc")))


@S.scenario("java-zombie-fencing", timeout=120)
def java_zombie_fencing():
    info("java: " + L.run_java("sluice.txn.TxnClients", "zombie", L.name("java-zombie")))


@S.scenario("franz-go-etl-rebalance", timeout=180)
def franz_go_etl():
    """franz-go's GroupTransactSession copying a 6-partition topic while a second member joins
    and the first leaves (two rebalances): see etl.go."""
    binary = os.environ.get("TXN_ETL_BIN", "")
    check(binary and os.access(binary, os.X_OK), "no franz-go program (TXN_ETL_BIN)")
    info("franz-go: " + L.run_program([binary, "-bootstrap", B, "-tag", L.name("fg")], "etl",
                                      timeout=170))


# ---- a transaction left open ---------------------------------------------------------------------

def open_txn(topic, txn_id, timeout_ms, count):
    """A producer process (open_txn.py) with an open transaction of `count` records on
    partition 0; returns it once the records are in the log."""
    sp = L.Spawned([PY, os.path.join(HERE, "open_txn.py"), B, topic, txn_id, str(timeout_ms),
                    str(count)], "open-txn")
    wait_until(lambda: "READY" in sp.lines() or not sp.alive(), 60, "open_txn.py READY")
    check("READY" in sp.lines(), "open_txn.py: %s" % sp.tail())
    return sp


@S.scenario("timeout-abort", timeout=120)
def timeout_abort():
    """A producer with transaction.timeout.ms=4000 opens a transaction, writes 5 records and is
    killed with SIGKILL. The LSO stays at the transaction's first offset (later plain records
    stay invisible to read_committed) until the coordinator aborts the expired transaction;
    then the LSO reaches the high watermark and read_committed reads to the end, without the
    killed producer's records."""
    topic = L.create_topic(B, L.name("timeout"), 1)
    plain = L.producer(B)
    txn_write(plain, topic, [(0, b"before-%d" % i) for i in range(2)])
    sp = open_txn(topic, L.name("timeout-tx"), 4000, 5)
    sp.kill9()
    txn_write(plain, topic, [(0, b"after-%d" % i) for i in range(3)])
    lso = L.end_offsets(B, topic, 1, committed=True)[0]
    check(lso == 2, "LSO %d right after the kill, want 2 (the open transaction's first offset)" % lso)
    t0 = time.monotonic()
    wait_until(lambda: L.end_offsets(B, topic, 1, committed=True)[0] ==
               L.end_offsets(B, topic, 1)[0], 90, "the LSO to reach the high watermark")
    info("timeout-abort: the LSO moved on %.1fs after the kill" % (time.monotonic() - t0))
    got = [v for _, _, v in L.read_all(B, topic, 1, True)[0]]
    check(got == [b"before-0", b"before-1", b"after-0", b"after-1", b"after-2"],
          "read_committed after the abort: %s" % got)


# ---- kafka-transactions --------------------------------------------------------------------------

class ToolState:
    """The open transaction the kafka-transactions scenarios look at (made by the first that
    runs; if making it failed, the others fail with that reason at once)."""
    topic = None
    txn_id = None
    proc = None
    producer_id = None
    start = None
    failed = None


TS = ToolState()


def tool_setup():
    check(TS.failed is None, "no open transaction to look at: %s" % TS.failed)
    if TS.proc is None:
        try:
            TS.topic = L.create_topic(B, L.name("tools"), 1)
            TS.txn_id = L.name("tools-tx")
            txn_write(L.producer(B), TS.topic, [(0, b"plain-%d" % i) for i in range(3)])
            TS.start = 3
            TS.proc = open_txn(TS.topic, TS.txn_id, 600000, 5)
        except Exception as e:
            TS.failed = str(e)[:300]
            raise
    check(TS.proc.alive(), "the open_txn.py producer died: %s" % TS.proc.tail())


def one_row(rows, what, **match):
    hit = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    check(len(hit) == 1, "%s: want one row with %s, got %s" % (what, match, rows))
    return hit[0]


@S.scenario("kafka-transactions-list", timeout=90)
def tools_list():
    """kafka-transactions list: the open transaction's id, its producer id, state Ongoing."""
    tool_setup()
    _, out, _ = L.transactions_tool(B, "list")
    info(out)
    row = one_row(L.table(out), "list", TransactionalId=TS.txn_id)
    check(row.get("TransactionState") == "Ongoing", "list row %s, want state Ongoing" % row)
    check(re.fullmatch(r"\d+", row.get("ProducerId", "")), "list row %s: no producer id" % row)
    TS.producer_id = row["ProducerId"]


@S.scenario("kafka-transactions-describe", timeout=90)
def tools_describe():
    """kafka-transactions describe: state Ongoing, the producer id list gave, the timeout the
    producer asked for, and the partition written to."""
    tool_setup()
    _, out, _ = L.transactions_tool(B, "describe", "--transactional-id", TS.txn_id)
    info(out)
    row = one_row(L.table(out), "describe", TransactionalId=TS.txn_id)
    check(row.get("TransactionState") == "Ongoing", "describe %s: want Ongoing" % row)
    check(row.get("TransactionTimeoutMs") == "600000", "describe %s: want timeout 600000" % row)
    check(row.get("TopicPartitions") == "%s-0" % TS.topic, "describe %s: want partition %s-0" % (row, TS.topic))
    if TS.producer_id is not None:
        check(row.get("ProducerId") == TS.producer_id, "describe %s: producer id differs from list's %s" % (
            row, TS.producer_id))
    check(re.fullmatch(r"\d+", row.get("CoordinatorId", "")), "describe %s: no coordinator id" % row)


@S.scenario("kafka-transactions-describe-producers", timeout=90)
def tools_describe_producers():
    """kafka-transactions describe-producers: the partition's transactional producer with its
    last sequence (4: five records) and the open transaction's start offset (3), and the plain
    idempotent producer before it without an open transaction."""
    tool_setup()
    _, out, _ = L.transactions_tool(B, "describe-producers", "--topic", TS.topic, "--partition", "0")
    info(out)
    rows = L.table(out)
    check(len(rows) == 2, "describe-producers: want 2 producers, got %s" % rows)
    open_rows = [r for r in rows if r.get("CurrentTransactionStartOffset") != "None"]
    check(len(open_rows) == 1, "describe-producers: want one producer with an open transaction: %s" % rows)
    row = open_rows[0]
    check(row.get("CurrentTransactionStartOffset") == str(TS.start) and row.get("LastSequence") == "4",
          "describe-producers %s: want start offset %d, last sequence 4" % (row, TS.start))
    if TS.producer_id is not None:
        check(row.get("ProducerId") == TS.producer_id, "describe-producers %s: producer id %s" % (
            row, TS.producer_id))
    other = [r for r in rows if r is not row][0]
    check(other.get("LastSequence") == "2", "the plain producer's row %s: want last sequence 2" % other)


@S.scenario("kafka-transactions-find-hanging", timeout=150)
def tools_find_hanging():
    """kafka-transactions find-hanging (--max-transaction-timeout 0: every open transaction is a
    candidate): the open transaction the coordinator knows is not hanging. Then, on a second
    broker of the same kind started with transaction.partition.verification.enable=false, a
    transactional batch written with a producer id no transactional id owns (InitProducerId
    without one, then Produce with the transactional bit: hanging.py) is found hanging at its
    start offset; `abort --start-offset` ends it, the LSO reaches the high watermark and
    find-hanging finds nothing."""
    tool_setup()
    _, out, _ = L.transactions_tool(B, "find-hanging", "--topic", TS.topic,
                                    "--max-transaction-timeout", "0")
    info(out)
    check(L.table(out) == [] and out.split()[:1] == ["Topic"],
          "find-hanging listed the coordinator's own open transaction: %s" % out)
    with second_broker(["transaction.partition.verification.enable=false"]) as b2:
        topic = L.create_topic(b2, L.name("hanging"), 1)
        txn_write(L.producer(b2), topic, [(0, b"plain-%d" % i) for i in range(2)])
        r = subprocess.run([PY, os.path.join(HERE, "hanging.py"), b2, topic], timeout=60,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        res = r.stdout.decode(errors="replace").strip()
        check(r.returncode == 0 and res.startswith("OK"), "hanging.py: %s" % res[-500:])
        pid, start = res.split()[1:3]
        check(start == "2", "hanging batch at offset %s, want 2" % start)
        lso, hw = L.end_offsets(b2, topic, 1, True)[0], L.end_offsets(b2, topic, 1)[0]
        check((lso, hw) == (2, 5), "with the hanging transaction: LSO %d, HW %d; want 2, 5" % (lso, hw))
        _, out, _ = L.transactions_tool(b2, "find-hanging", "--topic", topic,
                                        "--max-transaction-timeout", "0")
        info(out)
        rows = L.table(out)
        check(len(rows) == 1 and rows[0].get("ProducerId") == pid and rows[0].get("StartOffset") == "2",
              "find-hanging: want one row of producer %s at start offset 2: %s" % (pid, out))
        _, out, err = L.transactions_tool(b2, "abort", "--topic", topic, "--partition", "0",
                                          "--start-offset", "2")
        info("abort: %s %s" % (out, err))
        wait_until(lambda: L.end_offsets(b2, topic, 1, True)[0] == L.end_offsets(b2, topic, 1)[0],
                   30, "the LSO to reach the high watermark after abort")
        _, out, _ = L.transactions_tool(b2, "find-hanging", "--topic", topic,
                                        "--max-transaction-timeout", "0")
        check(L.table(out) == [], "find-hanging after abort: %s" % out)
        got = [v for _, _, v in L.read_all(b2, topic, 1, True)[0]]
        check(got == [b"plain-0", b"plain-1"], "read_committed after abort: %s" % got)


@S.scenario("kafka-transactions-abort", timeout=90)
def tools_abort():
    """kafka-transactions abort --start-offset on the open transaction (its producer still
    alive): the abort marker ends it on the partition; the LSO reaches the high watermark,
    read_committed reads the plain records only, describe-producers shows no open
    transaction."""
    tool_setup()
    try:
        lso = L.end_offsets(B, TS.topic, 1, committed=True)[0]
        check(lso == TS.start, "LSO %d before abort, want %d" % (lso, TS.start))
        _, out, err = L.transactions_tool(B, "abort", "--topic", TS.topic, "--partition", "0",
                                          "--start-offset", str(TS.start))
        info("abort: %s %s" % (out, err))
        wait_until(lambda: L.end_offsets(B, TS.topic, 1, True)[0] == L.end_offsets(B, TS.topic, 1)[0],
                   30, "the LSO to reach the high watermark after abort")
        got = [v for _, _, v in L.read_all(B, TS.topic, 1, True)[0]]
        check(got == [b"plain-0", b"plain-1", b"plain-2"], "read_committed after abort: %s" % got)
        _, out, _ = L.transactions_tool(B, "describe-producers", "--topic", TS.topic, "--partition", "0")
        rows = L.table(out)
        check(len(rows) == 2 and all(r.get("CurrentTransactionStartOffset") == "None" for r in rows),
              "describe-producers after abort: %s" % out)
    finally:
        if TS.proc is not None:
            TS.proc.kill9()


class second_broker:
    """Another broker of the suite's kind ($BROKER_CTL with its own port and data dir) with
    extra settings, stopped on exit."""

    def __init__(self, overrides):
        self.overrides = overrides

    def __enter__(self):
        port = None
        for _ in range(100):
            p = 20000 + int.from_bytes(os.urandom(2), "big") % 10000
            if all(not port_open(q) for q in (p, p + 1)):
                port = p
                break
        check(port, "no free port for a second broker")
        d = os.path.join(L.SUITE_TMP, "second-broker-%d" % port)
        self.env = dict(os.environ, BROKER_PORT=str(port), BROKER_DATA=d + "/data",
                        BROKER_LOG=d + ".log", BROKER_PIDFILE=d + ".pid",
                        BROKER_OVERRIDES=" ".join(self.overrides))
        r = subprocess.run(shlex.split(BROKER_CTL) + ["start"], env=self.env, timeout=150,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        check(r.returncode == 0, "second broker did not start: %s" % r.stdout.decode()[-600:])
        return "127.0.0.1:%d" % port

    def __exit__(self, *exc):
        subprocess.run(shlex.split(BROKER_CTL) + ["stop"], env=self.env, timeout=60,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def port_open(p):
    try:
        socket.create_connection(("127.0.0.1", p), timeout=1).close()
        return True
    except OSError:
        return False


# ---- Kafka's TransactionalMessageCopier through kill -9 (last: restarts the broker) -------------

@S.scenario("copier-kill9", timeout=400)
def copier_kill9_one_node():
    """Kafka's TransactionalMessageCopier (kafka-tools), one per partition of a 2-partition
    topic of 2 x 25000 records, while the broker is killed with SIGKILL and restarted 3
    times: the output holds every input record exactly once (copied, duplicated 0, lost 0),
    each partition in input order."""
    def kill(r, ctx):
        t = broker("kill9")
        t += broker("start")
        return "kill+restart %.1fs" % t
    inp, out = killtests.copier_kill9(B, 2, 25000, 3, kill, "copier")
    L.check_exactly_once("copier-kill9", L.values(inp), L.values(out))
    for p in inp:
        check([v for _, _, v in out[p]] == [v for _, _, v in inp[p]],
              "output partition %d is not the input partition in order" % p)


if __name__ == "__main__":
    S.main()
