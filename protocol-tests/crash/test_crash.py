#!/usr/bin/env python3
"""Crash suite: kill -9 the broker under load and check acknowledged data survives.

Uses confluent-kafka (librdkafka) with acks=all and enable.idempotence=true, so retried
sends that had in fact been written must not appear twice: every acknowledged record is
in the partition exactly once, in the order sent. Reads use assign() with explicit offsets (issue 3: no groups).
Needs $BROKER_CTL (kill9 / start / restart).
"""
import re
import shlex
import subprocess
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness import BOOTSTRAP, BROKER_CTL, RUN_TAG, Suite, check, info, wait_until

S = Suite("crash")
T = 30

N_MESSAGES = 100_000
KILL_AFTER_ACKS = 30_000
WINDOW = 4_000            # max produced-but-unacknowledged, so the kill lands mid-stream
MESSAGE_TIMEOUT_MS = 60_000


def topic_name(base):
    return "crash-%s-%s" % (base, RUN_TAG)


def broker_ctl(cmd, timeout=120):
    check(BROKER_CTL, "BROKER_CTL is not set")
    t0 = time.monotonic()
    r = subprocess.run(shlex.split(BROKER_CTL) + [cmd], timeout=timeout,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = r.stdout.decode(errors="replace").strip().replace("\n", " | ")
    check(r.returncode == 0, "$BROKER_CTL %s exited %d: %s" % (cmd, r.returncode, out[-400:]))
    return time.monotonic() - t0


def quiet_error_cb(err):
    # transport errors while the broker is down are expected; keep stderr readable
    pass


def admin():
    return AdminClient({"bootstrap.servers": BOOTSTRAP, "error_cb": quiet_error_cb, "log_level": 2})


def create_topic(name, partitions=1):
    a = admin()
    a.create_topics([NewTopic(name, partitions, 1)], request_timeout=T)[name].result(timeout=T)
    wait_until(lambda: name in a.list_topics(timeout=10).topics and
               len(a.list_topics(timeout=10).topics[name].partitions) == partitions,
               T, "topic %s" % name)
    return name


def read_partition(topic, partition, timeout=60):
    """Read a whole partition from offset 0 to its high watermark; returns
    (list of (offset, value), high_watermark). Any consumer error fails (check.crcs
    on, so a corrupt batch surfaces here)."""
    c = Consumer({
        "bootstrap.servers": BOOTSTRAP,
        "group.id": "unused-%s" % RUN_TAG,  # issue 3: no group protocol, assign() only
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "check.crcs": True,
        "error_cb": quiet_error_cb, "log_level": 2,
    })
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=T, cached=False)
        check(lo == 0, "log start offset %d, expected 0" % lo)
        c.assign([TopicPartition(topic, partition, 0)])
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < hi:
            check(time.monotonic() < deadline, "timeout reading %s/%d: %d of %d" % (
                topic, partition, len(out), hi))
            for m in c.consume(num_messages=5000, timeout=0.5):
                if m.error():
                    raise AssertionError("consumer error at ~offset %d: %s" % (
                        out[-1][0] + 1 if out else 0, m.error()))
                out.append((m.offset(), m.value()))
        # nothing beyond the high watermark
        extra = [m for m in c.consume(num_messages=10, timeout=1.0) if not m.error()]
        check(not extra, "records past the high watermark %d: offsets %s" % (hi, [m.offset() for m in extra]))
        return out, hi
    finally:
        c.close()


@S.scenario("kill9_during_produce", timeout=115)
def kill9_during_produce():
    t = create_topic(topic_name("load"))
    acked = {}            # offset -> value
    acked_seq = set()
    failed = []           # (seq, error)
    lock = threading.Lock()
    state = {"acks": 0}
    kill_info = {}
    kill_started = threading.Event()
    kill_done = threading.Event()
    kill_error = []

    def on_delivery(err, msg):
        with lock:
            if err is not None:
                failed.append((msg.value(), err))
            else:
                off = msg.offset()
                if off in acked:
                    failed.append((msg.value(), "offset %d acknowledged twice" % off))
                acked[off] = msg.value()
                acked_seq.add(msg.value())
                state["acks"] += 1
                if state["acks"] >= KILL_AFTER_ACKS and not kill_started.is_set():
                    kill_started.set()

    def killer():
        try:
            kill_started.wait(90)
            if not kill_started.is_set():
                kill_error.append("never reached %d acks" % KILL_AFTER_ACKS)
                return
            with lock:
                kill_info["acks_at_kill"] = state["acks"]
            kill_info["kill9_s"] = broker_ctl("kill9")
            with lock:
                kill_info["acks_when_dead"] = state["acks"]
            kill_info["start_s"] = broker_ctl("start")
        except Exception as e:
            kill_error.append(repr(e))
        finally:
            kill_done.set()

    p = Producer({
        "bootstrap.servers": BOOTSTRAP,
        "acks": "all",
        "enable.idempotence": True,
        "message.timeout.ms": MESSAGE_TIMEOUT_MS,
        "request.timeout.ms": 10_000,
        "retry.backoff.ms": 100,
        "retry.backoff.max.ms": 1000,
        "reconnect.backoff.ms": 100,
        "reconnect.backoff.max.ms": 1000,
        "linger.ms": 5,
        "batch.num.messages": 1000,
        "error_cb": quiet_error_cb, "log_level": 2,
    })
    p.list_topics(topic=t, timeout=10)
    threading.Thread(target=killer, daemon=True).start()
    t0 = time.monotonic()
    deadline = t0 + 100
    produced = 0
    while produced < N_MESSAGES:
        check(time.monotonic() < deadline, "producer stuck at %d produced / %d acked" % (
            produced, state["acks"]))
        with lock:
            outstanding = produced - state["acks"] - len(failed)
        if outstanding >= WINDOW:
            p.poll(0.02)
            continue
        try:
            p.produce(t, value=b"msg-%06d" % produced, partition=0, on_delivery=on_delivery)
            produced += 1
        except BufferError:
            p.poll(0.05)
            continue
        if produced % 200 == 0:
            p.poll(0)
    left = p.flush(max(1, deadline - time.monotonic()))
    produce_s = time.monotonic() - t0
    check(kill_done.wait(max(1, deadline - time.monotonic())), "kill9/start did not finish")
    check(not kill_error, "kill thread: %s" % kill_error)
    check(left == 0, "%d message(s) neither acknowledged nor failed" % left)
    check(kill_info.get("acks_at_kill", N_MESSAGES) < N_MESSAGES,
          "the kill came after every message was acknowledged")
    info("crash: kill9 at %d acks (%d when dead), kill9 took %.2fs, start took %.2fs, "
         "produce phase %.1fs" % (kill_info["acks_at_kill"], kill_info["acks_when_dead"],
                                  kill_info["kill9_s"], kill_info["start_s"], produce_s))
    info("crash: %d acknowledged, %d delivery failures%s" % (
        len(acked), len(failed), (": " + str([str(e) for _, e in failed[:3]])) if failed else ""))

    records, hw = read_partition(t, 0)
    offs = [o for o, _ in records]
    check(offs == list(range(hw)), "offsets read are not 0..%d without gaps" % (hw - 1))
    by_off = dict(records)
    lost = [(o, v) for o, v in acked.items() if by_off.get(o) != v]
    check(not lost, "%d acknowledged record(s) missing or different, e.g. %s" % (
        len(lost), [(o, v, by_off.get(o)) for o, v in sorted(lost)[:5]]))
    pat = re.compile(rb"^msg-(\d{6})$")
    seqs = []
    for o, v in records:
        mm = pat.match(v or b"")
        check(mm, "offset %d holds %r, not a produced value" % (o, v))
        seqs.append(int(mm.group(1)))
    distinct = set(seqs)
    check(all(0 <= s < N_MESSAGES for s in distinct), "sequence out of range")
    check({int(v[4:]) for v in acked_seq} <= distinct, "acknowledged sequence missing")
    dups = len(seqs) - len(distinct)
    never_written = N_MESSAGES - len(distinct)
    info("crash: partition holds %d records, %d distinct, %d duplicate(s) (retried sends), "
         "%d sequence(s) never written" % (len(seqs), len(distinct), dups, never_written))
    check(not failed, "%d message(s) failed delivery within message.timeout.ms=%d (e.g. %s)" % (
        len(failed), MESSAGE_TIMEOUT_MS, [str(e) for _, e in failed[:3]]))
    check(never_written == 0, "%d sequence(s) acknowledged by nobody and absent" % never_written)
    check(dups == 0, "%d duplicate(s) despite enable.idempotence" % dups)
    check(seqs == sorted(seqs), "records are not in the order sent")
    # the broker keeps serving after recovery: append continues at the high watermark
    p2 = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "error_cb": quiet_error_cb, "log_level": 2})
    res = []
    p2.produce(t, value=b"after-recovery", partition=0, on_delivery=lambda e, m: res.append((e, m)))
    check(p2.flush(T) == 0 and res and res[0][0] is None, "produce after recovery failed: %s" % res)
    check(res[0][1].offset() == hw, "append after recovery at %d, expected %d" % (res[0][1].offset(), hw))


def _produce_few(topic, partitions, per_partition, tag):
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "linger.ms": 5,
                  "error_cb": quiet_error_cb, "log_level": 2})
    p.list_topics(topic=topic, timeout=10)
    out = []
    for pp in range(partitions):
        for i in range(per_partition):
            p.produce(topic, key=b"%d" % i, value=b"%s-%d-%d" % (tag, pp, i), partition=pp,
                      on_delivery=lambda e, m: out.append((e, m)))
    check(p.flush(T) == 0, "undelivered records")
    check(all(e is None for e, _ in out), "delivery errors %s" % [str(e) for e, _ in out if e][:3])
    return {(m.partition(), m.offset()): m.value() for _, m in out}


def _restart_scenario(how):
    def run():
        a = admin()
        multi = create_topic(topic_name("%s-multi" % how), 3)
        auto = topic_name("%s-auto" % how)  # created by the producer's metadata request
        before = _produce_few(multi, 3, 50, b"before")
        before_auto = _produce_few(auto, 1, 20, b"auto")
        if how == "kill9":
            broker_ctl("kill9")
            broker_ctl("start")
        else:
            broker_ctl("restart")
        md = wait_until(lambda: (lambda m: m if multi in m.topics and auto in m.topics else None)(
            a.list_topics(timeout=10)), T, "topics listed after %s" % how)
        check(len(md.topics[multi].partitions) == 3, "%s has %d partitions after %s" % (
            multi, len(md.topics[multi].partitions), how))
        check(len(md.topics[auto].partitions) == 1, "auto topic has %d partitions" % len(md.topics[auto].partitions))
        for topic, parts, data in ((multi, 3, before), (auto, 1, before_auto)):
            for pp in range(parts):
                recs, hw = wait_until(lambda: read_partition(topic, pp, timeout=T), T,
                                      "%s/%d readable" % (topic, pp))
                exp = sorted((o, v) for (q, o), v in data.items() if q == pp)
                check(recs == exp, "%s/%d after %s: %d records, expected %d (first diff %s)" % (
                    topic, pp, how, len(recs), len(exp),
                    next(((a_, b_) for a_, b_ in zip(recs, exp) if a_ != b_), None)))
        after = _produce_few(multi, 3, 5, b"after")
        for (pp, off) in after:
            check(50 <= off < 55, "append after %s landed at %d/%d, expected 50..54" % (how, pp, off))
    return run


S.scenario("topics_and_data_survive_kill9", timeout=100)(_restart_scenario("kill9"))
S.scenario("topics_and_data_survive_restart", timeout=100)(_restart_scenario("restart"))


if __name__ == "__main__":
    S.main()
