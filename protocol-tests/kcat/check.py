"""Checks for the kcat suite. Reads what `kcat -C` printed and compares it with what was produced.

    python3 check.py gen N KEYS            -> stdout: N lines "key-<i % KEYS>:<value(i)>"
    python3 check.py keyed FILE N KEYS PARTITIONS
          FILE has lines "%p %o %k %s": count N, every key in one partition, sequence numbers
          rising within each partition, offsets 0.. contiguous per partition, values intact.
    python3 check.py plain FILE N KEYS
          FILE has lines "%o %k %s" of a single partition: exact content and order.
Prints one line: "ok <details>" (exit 0) or the first problem found (exit 1).
"""
import sys


def value(i):
    # sequence number, its key and a deterministic padding of 0..300 characters (printable, no
    # newline, includes ':' and spaces so the key/value split and value bytes are exercised)
    pad_len = (i * 7919) % 301
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 :;,._-+=/"
    pad = "".join(alphabet[(i + j * 31) % len(alphabet)] for j in range(pad_len))
    return "seq=%d|%s" % (i, pad)


def key(i, keys):
    return "key-%d" % (i % keys)


def parse_seq(v):
    if not v.startswith("seq="):
        raise ValueError("value does not start with seq=: %r" % v[:40])
    return int(v[4:v.index("|")])


def fail(msg):
    print(msg)
    sys.exit(1)


def gen(n, keys):
    out = sys.stdout
    for i in range(n):
        out.write("%s:%s\n" % (key(i, keys), value(i)))


def read_lines(path):
    with open(path, "rb") as f:
        data = f.read()
    text = data.decode("utf-8")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def keyed(path, n, keys, partitions):
    lines = read_lines(path)
    if len(lines) != n:
        fail("read %d messages, expected %d" % (len(lines), n))
    key_part = {}
    last_seq = {}
    next_off = {}
    seen = set()
    for ln, line in enumerate(lines, 1):
        parts = line.split(" ", 3)
        if len(parts) != 4:
            fail("line %d malformed: %r" % (ln, line[:80]))
        p, o, k, v = int(parts[0]), int(parts[1]), parts[2], parts[3]
        if not 0 <= p < partitions:
            fail("line %d: partition %d out of range" % (ln, p))
        try:
            s = parse_seq(v)
        except ValueError as e:
            fail("line %d: %s" % (ln, e))
        if s in seen:
            fail("sequence %d read twice" % s)
        seen.add(s)
        if v != value(s):
            fail("seq %d: value differs (%d bytes, expected %d)" % (s, len(v), len(value(s))))
        if k != key(s, keys):
            fail("seq %d: key %r, expected %r" % (s, k, key(s, keys)))
        if key_part.setdefault(k, p) != p:
            fail("key %s in partitions %d and %d" % (k, key_part[k], p))
        if o != next_off.get(p, 0):
            fail("partition %d: offset %d, expected %d" % (p, o, next_off.get(p, 0)))
        next_off[p] = o + 1
        if s <= last_seq.get(p, -1):
            fail("partition %d: seq %d after %d (order lost)" % (p, s, last_seq[p]))
        last_seq[p] = s
    if len(seen) != n:
        fail("%d distinct sequence numbers, expected %d" % (len(seen), n))
    if len(key_part) != keys:
        fail("%d distinct keys, expected %d" % (len(key_part), keys))
    print("ok %d messages, per partition %s" % (n, dict(sorted(next_off.items()))))


def plain(path, n, keys):
    lines = read_lines(path)
    if len(lines) != n:
        fail("read %d messages, expected %d" % (len(lines), n))
    for i, line in enumerate(lines):
        parts = line.split(" ", 2)
        if len(parts) != 3:
            fail("line %d malformed: %r" % (i + 1, line[:80]))
        o, k, v = int(parts[0]), parts[1], parts[2]
        if o != i:
            fail("offset %d at position %d" % (o, i))
        if k != key(i, keys) or v != value(i):
            fail("offset %d: expected key %s seq %d, got key %s value %r" % (o, key(i, keys), i, k, v[:40]))
    print("ok %d messages" % n)


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[:1] == ["gen"]:
        gen(int(a[1]), int(a[2]))
    elif a[:1] == ["keyed"]:
        keyed(a[1], int(a[2]), int(a[3]), int(a[4]))
    elif a[:1] == ["plain"]:
        plain(a[1], int(a[2]), int(a[3]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
