"""Minimal Kafka wire client for scripts/bench: just the requests the benchmark itself sends
(ApiVersions v0, Metadata v4, CreateTopics v2, CreatePartitions v1, Fetch v11 with and without
an incremental fetch session), hand-encoded, blocking sockets."""

import socket
import struct
import time

CLIENT_ID = b"sluice-bench"


def _str(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack(">h", len(b)) + b


def frame(api_key, version, corr, body):
    header = struct.pack(">hhi", api_key, version, corr) + _str(CLIENT_ID)
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return bytes(buf)


def roundtrip(sock, api_key, version, body, corr=1):
    sock.sendall(frame(api_key, version, corr, body))
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    data = recv_exact(sock, size)
    (got,) = struct.unpack(">i", data[:4])
    if got != corr:
        raise ValueError(f"correlation id {got} != {corr}")
    return data[4:]


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)
        self.p += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take(">h")
        if n < 0:
            return None
        s = self.d[self.p:self.p + n].decode()
        self.p += n
        return s


# When set (an ssl.SSLContext), connect() speaks TLS: the bench's TLS phase sets it while
# its brokers listen on SSL only.
tls_context = None


def connect(port, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if tls_context is not None:
        s = tls_context.wrap_socket(s, server_hostname="localhost")
    return s


def api_versions(sock, corr=1):
    """ApiVersions v0: returns {api_key: (min, max)}."""
    r = Reader(roundtrip(sock, 18, 0, b"", corr))
    err = r.take(">h")
    if err:
        raise ValueError(f"ApiVersions error {err}")
    out = {}
    for _ in range(r.take(">i")):
        k, lo, hi = r.take(">hhh")
        out[k] = (lo, hi)
    return out


def metadata(sock, topics=None, corr=1):
    """Metadata v4. Returns (broker count, {topic: (error, [(partition, error, leader)])})."""
    if topics is None:
        body = struct.pack(">i", -1)
    else:
        body = struct.pack(">i", len(topics)) + b"".join(_str(t) for t in topics)
    body += b"\x00"  # allow_auto_topic_creation = false
    r = Reader(roundtrip(sock, 3, 4, body, corr))
    r.take(">i")  # throttle
    nbrokers = r.take(">i")
    for _ in range(nbrokers):
        r.take(">i")
        r.string()
        r.take(">i")
        r.string()
    r.string()  # cluster id
    r.take(">i")  # controller
    out = {}
    for _ in range(r.take(">i")):
        terr = r.take(">h")
        name = r.string()
        r.take(">b")
        parts = []
        for _ in range(r.take(">i")):
            perr, idx, leader = r.take(">hii")
            for _ in range(2):  # replicas, isr
                n = r.take(">i")
                r.p += 4 * n
            parts.append((idx, perr, leader))
        out[name] = (terr, parts)
    return nbrokers, out


def create_topic(sock, name, partitions, timeout_ms=120000, configs=None, corr=1, replication=1,
                 assignment=None):
    """CreateTopics v2 for one topic; returns (error_code, message). `assignment`: the replica
    list of each partition (then `partitions` and `replication` are not sent)."""
    configs = configs or {}
    if assignment:
        partitions, replication = -1, -1
    body = struct.pack(">i", 1) + _str(name) + struct.pack(">ih", partitions, replication)
    body += struct.pack(">i", len(assignment or []))
    for i, replicas in enumerate(assignment or []):
        body += struct.pack(">ii", i, len(replicas)) + b"".join(struct.pack(">i", r) for r in replicas)
    body += struct.pack(">i", len(configs))
    for k, v in configs.items():
        body += _str(k) + _str(v)
    body += struct.pack(">i", timeout_ms) + b"\x00"
    old = sock.gettimeout()
    sock.settimeout(timeout_ms / 1000 + 30)
    try:
        r = Reader(roundtrip(sock, 19, 2, body, corr))
    finally:
        sock.settimeout(old)
    r.take(">i")
    r.take(">i")  # one topic
    r.string()
    err = r.take(">h")
    return err, r.string()


def wait_topic_ready(port, name, partitions, timeout=180.0):
    """Polls Metadata until every partition of `name` has a leader; returns seconds waited."""
    t0 = time.monotonic()
    while True:
        try:
            with connect(port, timeout=30) as s:
                _, topics = metadata(s, [name])
            terr, parts = topics.get(name, (-1, []))
            ok = sum(1 for _, perr, leader in parts if perr == 0 and leader >= 0)
            if terr == 0 and ok == partitions:
                return time.monotonic() - t0
        except (OSError, ValueError, struct.error):
            pass
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"topic {name}: not all {partitions} partitions have a leader")
        time.sleep(0.05)


def create_partitions(sock, name, total, timeout_ms=120000, corr=1):
    """CreatePartitions v1: grows `name` to `total` partitions; returns (error_code, message)."""
    body = struct.pack(">i", 1) + _str(name) + struct.pack(">i", total) + struct.pack(">i", -1)
    body += struct.pack(">i", timeout_ms) + b"\x00"
    old = sock.gettimeout()
    sock.settimeout(timeout_ms / 1000 + 30)
    try:
        r = Reader(roundtrip(sock, 37, 1, body, corr))
    finally:
        sock.settimeout(old)
    r.take(">i")
    r.take(">i")
    r.string()
    err = r.take(">h")
    return err, r.string()


def fetch_request(topic, offsets, session_id=0, epoch=-1, max_bytes=64 << 20,
                  partition_max_bytes=1 << 20):
    """The body of a Fetch v11 of `topic` from `offsets` ({partition: offset}; in an
    incremental session only the partitions that changed), max wait 0, min bytes 0.
    session_id 0 with epoch -1: no session; 0 with epoch 0: open one (KIP-227)."""
    body = struct.pack(">iiiibii", -1, 0, 0, max_bytes, 0, session_id, epoch)
    if offsets:
        body += struct.pack(">i", 1) + _str(topic) + struct.pack(">i", len(offsets))
        body += b"".join(struct.pack(">iiqqi", p, -1, o, -1, partition_max_bytes)
                         for p, o in sorted(offsets.items()))
    else:
        body += struct.pack(">i", 0)
    body += struct.pack(">i", 0) + _str("")  # no forgotten topics; rack ""
    return body


def fetch_send(sock, body, corr=1):
    """Sends a Fetch v11 body; returns (request bytes, response bytes, top-level error,
    session id, {partition: (error, high watermark, records bytes)})."""
    req = frame(1, 11, corr, body)
    sock.sendall(req)
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    data = recv_exact(sock, size)
    r = Reader(data[4:])
    r.take(">i")  # throttle
    err, session = r.take(">hi")
    parts = {}
    for _ in range(r.take(">i")):
        r.string()
        for _ in range(r.take(">i")):
            idx, perr, hw = r.take(">ihq")
            r.take(">qq")  # last stable offset, log start offset
            n = r.take(">i")  # aborted transactions (nullable)
            r.p += 16 * max(0, n)
            r.take(">i")  # preferred read replica
            length = r.take(">i")
            records = b""
            if length > 0:
                records = r.d[r.p:r.p + length]
                r.p += length
            parts[idx] = (perr, hw, records)
    return len(req), 4 + size, err, session, parts


def batches_end(records):
    """(record count, next offset) of the v2 record batches in `records`."""
    count, nxt, p = 0, None, 0
    while p + 61 <= len(records):
        base, length = struct.unpack_from(">qi", records, p)
        if p + 12 + length > len(records):
            break
        (last_delta,) = struct.unpack_from(">i", records, p + 23)
        (n,) = struct.unpack_from(">i", records, p + 57)
        count += n
        nxt = base + last_delta + 1
        p += 12 + length
    return count, nxt
