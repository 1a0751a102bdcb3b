"""The kill tests shared by the one-node and the 3-node suites: Kafka's
TransactionalMessageCopier and a Kafka Streams word count (sluice.txn.WordCount) run while a
callback kills brokers with SIGKILL and restarts them; afterwards the output is checked
against the input (exactly once, or at least once).
"""
import collections
import json
import os
import random
import signal
import struct
import time

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from harness import check, info, wait_until
from txnlib import (KAFKA_LIBS, SUITE_TMP, Spawned, admin, create_topic, end_offsets, java_cmd,
                    name, produce_sync, producer, read_all)

# ---- Kafka's TransactionalMessageCopier through kills -----------------------------------------

COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"


def group_committed(bootstrap, group, topic, parts, stable=False):
    """{partition: committed offset} of a group (-1 when none), or None if the broker does not
    answer right now. stable: OffsetFetch with require_stable (waits out pending transactional
    offsets; while a copier commits a transaction every few ms it rarely gets an answer)."""
    a = admin(bootstrap)  # held until the answer: a collected client never completes its futures
    try:
        fs = a.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(parts)])],
            request_timeout=5, require_stable=stable)
        res = fs[group].result(timeout=10)
        return {tp.partition: tp.offset for tp in res.topic_partitions}
    except Exception:  # the broker is down or loading: the caller polls again
        return None


def copier_kill9(bootstrap, parts, n_per_part, rounds, kill_round, tag, timeout=300,
                 first_commit_timeout=120):
    """Copies a `parts`-partition topic of n_per_part records per partition with one
    TransactionalMessageCopier per input partition (transactions of 100 records, offsets by
    sendOffsetsToTransaction with group metadata) while kill_round(r, ctx) kills and restarts
    brokers `rounds` times: the first once the copiers committed total/(rounds+2) records, each
    later one once they committed a share of what was left (so no round waits past the end);
    ctx names the input and output topics, the group and the copiers'
    transactional ids, and has pause() / resume() (SIGSTOP / SIGCONT the copiers, for a
    round's wait for a restarted node to catch up). A copier that
    exits with an error (the broker was gone longer than its timeouts) is started again: it
    resumes from the group's committed offsets (at most rounds + 1 times each). Fails early if
    no copier committed anything within first_commit_timeout seconds. Returns the input and
    output records."""
    src = create_topic(bootstrap, name("%s-in" % tag), parts)
    dst = create_topic(bootstrap, name("%s-out" % tag), parts)
    group = name("%s-g" % tag)
    produce_sync(producer(bootstrap), src,
                 [(p, None, b"%d-%06d" % (p, i)) for i in range(n_per_part) for p in range(parts)])
    total = parts * n_per_part

    ctx = {"src": src, "dst": dst, "group": group,
           "txn_ids": [name("%s-tx-%d" % (tag, p)) for p in range(parts)],
           "pause": lambda: [c.signal(signal.SIGSTOP) for c in copiers.values()],
           "resume": lambda: [c.signal(signal.SIGCONT) for c in copiers.values()]}

    def launch(p):
        return Spawned(java_cmd(COPIER, "--broker-list", bootstrap, "--input-topic", src,
                                "--input-partition", p, "--output-topic", dst,
                                "--transactional-id", ctx["txn_ids"][p],
                                "--consumer-group", group, "--transaction-size", 100,
                                "--use-group-metadata", heap="256m",
                                classpath=os.path.join(KAFKA_LIBS, "*")), "copier-%d" % p)
    copiers = {p: launch(p) for p in range(parts)}
    restarts = {p: 0 for p in range(parts)}
    done = set()

    def tend():
        """Restarts copiers that died with an error; notes those that finished (exit 0)."""
        for p, c in copiers.items():
            if p in done or c.alive():
                continue
            rc = c.p.returncode
            if rc == 0:
                done.add(p)
                continue
            info("copier %d exited %s: %s" % (p, rc, c.tail(4)))
            check(restarts[p] <= rounds, "copier %d failed %d times: %s" % (
                p, restarts[p] + 1, c.tail(6)))
            restarts[p] += 1
            copiers[p] = launch(p)

    progress = {p: 0 for p in range(parts)}

    def copied():
        """Records copied so far, from the copiers' own status lines: each JSON line's
        `remaining` counts what the process has yet to commit up to the input's end (its
        status after a commit, never behind the group's committed offset)."""
        for p, c in copiers.items():
            for ln in reversed(c.lines()):
                if ln.startswith("{") and '"remaining"' in ln:
                    try:
                        rem = json.loads(ln)["remaining"]
                    except ValueError:
                        continue
                    progress[p] = max(progress[p], n_per_part - rem)
                    break
        return sum(progress.values())

    started = time.monotonic()
    deadline = started + timeout
    kills = []
    try:
        step = total // (rounds + 2)
        target = step
        for r in range(1, rounds + 1):
            while True:
                tend()
                now = copied()
                if now >= target:
                    break
                check(time.monotonic() < deadline, "round %d: %s of %d copied after %ds" % (
                    r, now, total, timeout))
                check(now > 0 or time.monotonic() < started + first_commit_timeout,
                      "no copier committed a transaction within %ds: %s" % (
                          first_commit_timeout, " / ".join(c.tail(2) for c in copiers.values())))
                time.sleep(0.25)
            check(now < total, "round %d: the copy was already complete (%d) before the kill" % (r, now))
            kills.append((now, kill_round(r, ctx)))
            info("%s: round %d at %d of %d copied (%.0fs): %s; now %d copied" % (
                tag, r, now, total, time.monotonic() - started, kills[-1][1], copied()))
            # the rounds left share what is left to copy, so the next target stays short of
            # the end even when the copy ran ahead during this round's restart
            now = copied()
            target = now + max(1, (total - now) // (rounds - r + 2))
        while len(done) < parts:
            tend()
            check(time.monotonic() < deadline, "copiers not done after %ds (done: %s)" % (
                timeout, sorted(done)))
            time.sleep(0.3)
    finally:
        for c in copiers.values():
            c.kill9()
    info("%s: kills at %s of %d copied; copier restarts %s" % (tag, kills, total, restarts))
    com = group_committed(bootstrap, group, src, parts, stable=True)
    check(com == {p: n_per_part for p in range(parts)}, "committed offsets %s, want %d each" % (
        com, n_per_part))
    inp = read_all(bootstrap, src, parts, False)
    out = read_all(bootstrap, dst, parts, True)
    return inp, out


# ---- Kafka Streams word count through kills -------------------------------------------------

WORDS = ["w%02d" % i for i in range(40)]


def word_lines(tag, n, per_line=6):
    rng = random.Random(tag)
    return [" ".join(rng.choice(WORDS) for _ in range(per_line)) for _ in range(n)]


def counts_from(bootstrap, topic, parts):
    """The output at read_committed: ({word: last count}, {word: [counts in offset order]})."""
    last, seqs = {}, collections.defaultdict(list)
    for p, recs in read_all(bootstrap, topic, parts, True, timeout=90).items():
        for _, k, v in recs:
            word, count = k.decode(), struct.unpack(">q", v)[0]
            seqs[word].append(count)
            last[word] = count
    return last, seqs


def wordcount(bootstrap, guarantee, kill, tag, rf=1, parts=3, n_lines=3000, timeout=300):
    """Runs sluice.txn.WordCount (processing.guarantee `guarantee`, 2 stream threads) over a
    `parts`-partition topic of n_lines lines of 6 words, fed in three parts: the first before
    the application starts, the second once it has committed output, then kill() (SIGKILL
    brokers and restart them) right away, while it processes the second part, the third after
    the restart. Waits until the output's counts cover the input and the group's offsets
    reached the input's end, stops the application (SIGTERM: close), and checks the final
    counts (last value per word at read_committed): exactly_once_v2: equal to the input's
    counts, each word's counts strictly increasing (no replay is visible); at_least_once: at
    least the input's counts. Returns a summary."""
    eos = guarantee == "exactly_once_v2"
    src = create_topic(bootstrap, name("%s-in" % tag), parts, rf=-1)
    dst = create_topic(bootstrap, name("%s-out" % tag), parts, rf=-1)
    app_id = name("%s-app" % tag)
    lines = word_lines(tag, n_lines)
    want = collections.Counter(w for ln in lines for w in ln.split())
    thirds = [lines[:n_lines // 3], lines[n_lines // 3:2 * n_lines // 3], lines[2 * n_lines // 3:]]
    feed = producer(bootstrap)
    sent = [0]

    def send(chunk):
        produce_sync(feed, src, [((sent[0] + i) % parts, None, ln.encode()) for i, ln in enumerate(chunk)])
        sent[0] += len(chunk)

    send(thirds[0])
    env = dict(os.environ, BOOTSTRAP=bootstrap)
    app = Spawned(java_cmd("sluice.txn.WordCount", app_id, src, dst, guarantee,
                           os.path.join(SUITE_TMP, "state-" + app_id), rf, heap="384m"),
                  "wordcount-" + tag, env=env)
    try:
        wait_until(lambda: sum(end_offsets(bootstrap, dst, parts, committed=True).values()) > 0
                   or not app.alive(), 150, "the application's first committed output")
        check(app.alive(), "WordCount exited: %s" % app.tail())
        send(thirds[1])
        at_kill = group_committed(bootstrap, app_id, src, parts)
        how = kill()
        how += " with %s of %d input lines committed" % (
            sum(max(o, 0) for o in at_kill.values()) if at_kill else "?", sent[0])
        send(thirds[2])
        deadline = time.monotonic() + timeout
        while True:
            check(app.alive(), "WordCount exited: %s" % app.tail())
            last, _ = counts_from(bootstrap, dst, parts)
            if eos:
                over = {w: (c, want[w]) for w, c in last.items() if c > want[w]}
                check(not over, "exactly_once_v2 counted words more often than the input has them "
                      "(count, input): %s" % over)
            if all(last.get(w, 0) >= n for w, n in want.items()):
                break
            check(time.monotonic() < deadline, "counts not complete after %ds: %d of %d words, "
                  "%d of %d counted" % (timeout, sum(1 for w, n in want.items() if last.get(w, 0) >= n),
                                        len(want), sum(last.values()), sum(want.values())))
            time.sleep(2)
        ends = end_offsets(bootstrap, src, parts)
        wait_until(lambda: group_committed(bootstrap, app_id, src, parts) == ends, 90,
                   "the application's committed offsets to reach the input's end %s" % ends)
    finally:
        rc = app.term(90)
    errors = [ln for ln in app.lines() if ln.startswith("THREAD-ERROR")]
    check(rc is not None and "CLOSED" in app.lines(), "WordCount did not close on SIGTERM (exit %s): %s" % (
        rc, app.tail()))
    last, seqs = counts_from(bootstrap, dst, parts)
    extra = sum(last.get(w, 0) for w in want) - sum(want.values())
    summary = "%s: %d lines, %d words, %d distinct; final counts %d over the input; %s; %d stream " \
        "thread(s) replaced" % (guarantee, n_lines, sum(want.values()), len(want), extra, how, len(errors))
    info(summary)
    for e in errors[:5]:
        info(e[:300])
    check(set(last) == set(want), "words counted %s, want %s" % (sorted(set(last) ^ set(want)), "none"))
    if eos:
        wrong = {w: (last[w], n) for w, n in want.items() if last[w] != n}
        check(not wrong, "exactly_once_v2 final counts differ from the input (count, input): %s" % wrong)
        replays = {w: s for w, s in seqs.items() if any(b <= a for a, b in zip(s, s[1:]))}
        check(not replays, "exactly_once_v2 output went back or repeated a count: %s" % {
            w: s[:12] for w, s in list(replays.items())[:3]})
    else:
        low = {w: (last[w], n) for w, n in want.items() if last[w] < n}
        check(not low, "at_least_once lost counts (count, input): %s" % low)
    return summary
