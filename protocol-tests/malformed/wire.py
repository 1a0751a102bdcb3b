"""Minimal hand-written Kafka wire encoding for the malformed suite (struct.pack only).

Only what the suite needs: request headers v1/v2, ApiVersions v0/v3, Metadata v1,
Produce v3, Fetch v4, a v2 record batch with CRC-32C, and a socket exchange that
classifies the broker's reaction as a response, a close, or silence.
"""
import socket
import struct
import time

# ---------------------------------------------------------------- primitives


def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def u32(v):
    return struct.pack(">I", v)


def i64(v):
    return struct.pack(">q", v)


def string(s):
    """Kafka STRING / NULLABLE_STRING (i16 length, -1 = null)."""
    if s is None:
        return i16(-1)
    b = s.encode() if isinstance(s, str) else s
    return i16(len(b)) + b


def uvarint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(v):
    """zig-zag signed varint (record fields)."""
    return uvarint((v << 1) ^ (v >> 63))


def compact_string(s):
    if s is None:
        return uvarint(0)
    b = s.encode() if isinstance(s, str) else s
    return uvarint(len(b) + 1) + b


def frame(payload):
    return i32(len(payload)) + payload


def header_v1(api_key, version, corr, client_id="sluice-malformed"):
    return i16(api_key) + i16(version) + i32(corr) + string(client_id)


def header_v2(api_key, version, corr, client_id="sluice-malformed"):
    return header_v1(api_key, version, corr, client_id) + uvarint(0)


# ---------------------------------------------------------------- CRC-32C

_CRC32C_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC32C_TABLE.append(_c)


def crc32c(data):
    crc = 0xFFFFFFFF
    t = _CRC32C_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# ---------------------------------------------------------------- reader


class Reader:
    def __init__(self, data, pos=0):
        self.d = data
        self.p = pos

    def _take(self, fmt, n):
        if self.p + n > len(self.d):
            raise ValueError("response truncated at %d (+%d > %d)" % (self.p, n, len(self.d)))
        v, = struct.unpack_from(fmt, self.d, self.p)
        self.p += n
        return v

    def i8(self):
        return self._take(">b", 1)

    def i16(self):
        return self._take(">h", 2)

    def i32(self):
        return self._take(">i", 4)

    def i64(self):
        return self._take(">q", 8)

    def uvarint(self):
        shift = v = 0
        while True:
            b = self._take(">B", 1)
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        s = self.d[self.p:self.p + n]
        self.p += n
        return s.decode()

    def bytes_(self):
        n = self.i32()
        if n < 0:
            return None
        s = self.d[self.p:self.p + n]
        self.p += n
        return s

    def tagged_fields(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.p += self.uvarint()

    def remaining(self):
        return len(self.d) - self.p


# ---------------------------------------------------------------- requests / responses

API_VERSIONS, METADATA, PRODUCE, FETCH = 18, 3, 0, 1


def api_versions_v3(corr):
    body = compact_string("sluice-malformed") + compact_string("1.0") + uvarint(0)
    return frame(header_v2(API_VERSIONS, 3, corr) + body)


def parse_api_versions(resp, version):
    """resp: response frame payload (after the length). ApiVersions responses always
    use response header v0 (correlation id only). Returns (corr, error, {key: (min, max)})."""
    r = Reader(resp)
    corr = r.i32()
    err = r.i16()
    keys = {}
    if version >= 3:
        n = r.uvarint() - 1
    else:
        n = r.i32()
    for _ in range(max(n, 0)):
        k, lo, hi = r.i16(), r.i16(), r.i16()
        if version >= 3:
            r.tagged_fields()
        keys[k] = (lo, hi)
    return corr, err, keys


def metadata_v1(corr, topics=None):
    body = i32(-1) if topics is None else i32(len(topics)) + b"".join(string(t) for t in topics)
    return frame(header_v1(METADATA, 1, corr) + body)


def parse_metadata_v1(resp):
    r = Reader(resp)
    corr = r.i32()
    brokers = []
    for _ in range(r.i32()):
        brokers.append((r.i32(), r.string(), r.i32(), r.string()))
    controller = r.i32()
    topics = {}
    for _ in range(r.i32()):
        err, name, internal = r.i16(), r.string(), r.i8()
        parts = {}
        for _ in range(r.i32()):
            perr, idx, leader = r.i16(), r.i32(), r.i32()
            replicas = [r.i32() for _ in range(r.i32())]
            isr = [r.i32() for _ in range(r.i32())]
            parts[idx] = (perr, leader, replicas, isr)
        topics[name] = (err, parts)
    return corr, brokers, controller, topics


def record_batch(values, base_ts=None, corrupt_crc=False, attributes=0):
    """A magic-2 record batch (base offset 0) holding `values` (bytes) with null keys."""
    ts = int(time.time() * 1000) if base_ts is None else base_ts
    recs = b""
    for i, v in enumerate(values):
        body = i8(0) + varint(0) + varint(i) + varint(-1) + varint(len(v)) + v + varint(0)
        recs += varint(len(body)) + body
    after_crc = (i16(attributes) + i32(len(values) - 1) + i64(ts) + i64(ts) + i64(-1) + i16(-1)
                 + i32(-1) + i32(len(values)) + recs)
    crc = crc32c(after_crc)
    if corrupt_crc:
        crc ^= 0x5A5A5A5A
    after_len = i32(-1) + i8(2) + u32(crc) + after_crc
    return i64(0) + i32(len(after_len)) + after_len


def produce_v3(corr, topic, partition, records, acks=-1, timeout_ms=10000):
    body = string(None) + i16(acks) + i32(timeout_ms)
    body += i32(1) + string(topic) + i32(1) + i32(partition)
    body += (i32(-1) if records is None else i32(len(records)) + records)
    return frame(header_v1(PRODUCE, 3, corr) + body)


def parse_produce_v3(resp):
    """Returns (corr, {(topic, partition): (error_code, base_offset)})."""
    r = Reader(resp)
    corr = r.i32()
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            idx, err, base, _log_append = r.i32(), r.i16(), r.i64(), r.i64()
            out[(name, idx)] = (err, base)
    r.i32()  # throttle_time_ms
    return corr, out


def fetch_v4_body(topics, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation=0,
                  replica_id=-1):
    """topics: [(name, [(partition, fetch_offset, partition_max_bytes)])]"""
    body = i32(replica_id) + i32(max_wait_ms) + i32(min_bytes) + i32(max_bytes) + i8(isolation)
    body += i32(len(topics))
    for name, parts in topics:
        body += string(name) + i32(len(parts))
        for p, off, pmax in parts:
            body += i32(p) + i64(off) + i32(pmax)
    return body


def fetch_v4(corr, topics, **kw):
    return frame(header_v1(FETCH, 4, corr) + fetch_v4_body(topics, **kw))


def parse_fetch_v4(resp):
    """Returns (corr, {(topic, partition): (error, high_watermark, records_bytes)})."""
    r = Reader(resp)
    corr = r.i32()
    r.i32()  # throttle
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            idx, err, hw, _lso = r.i32(), r.i16(), r.i64(), r.i64()
            n_ab = r.i32()
            for _ in range(max(n_ab, 0)):
                r.i64(), r.i64()
            out[(name, idx)] = (err, hw, r.bytes_())
    return corr, out


# ---------------------------------------------------------------- socket exchange


class Outcome:
    """What the broker did with what we sent."""

    def __init__(self, frames, closed, silent, error=None):
        self.frames = frames      # complete response payloads received (after length)
        self.closed = closed      # the broker closed (EOF or reset)
        self.silent = silent      # neither a response nor a close before the deadline
        self.error = error

    def __repr__(self):
        what = "closed" if self.closed else ("silent (open, no response)" if self.silent else "answered")
        return "<%s, %d response frame(s)%s>" % (what, len(self.frames),
                                                  (", " + self.error) if self.error else "")


def connect(addr, timeout=5):
    s = socket.create_connection(addr, timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def exchange(addr, data, wait=5.0, half_close=False, want_frames=1, sock=None):
    """Send `data` on a fresh connection (or `sock`) and watch for `wait` seconds.
    Returns an Outcome as soon as want_frames complete response frames arrived
    (unless half_close: then reads until the broker closes), or the broker closed,
    or the deadline passed (silent)."""
    own = sock is None
    s = connect(addr) if own else sock
    frames, buf, closed, err = [], b"", False, None
    try:
        try:
            s.sendall(data)
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except OSError as e:  # EPIPE, ECONNRESET, ENOTCONN: the broker already closed
            closed, err = True, "send: %s" % (e.strerror or type(e).__name__)
        deadline = time.monotonic() + wait
        while not closed:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not half_close and len(frames) >= want_frames:
                break
            s.settimeout(left)
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except (ConnectionResetError, ConnectionAbortedError) as e:
                closed, err = True, "recv: %s" % type(e).__name__
                break
            if not chunk:
                closed = True
                break
            buf += chunk
            while len(buf) >= 4:
                n, = struct.unpack_from(">i", buf)
                if n < 0 or len(buf) < 4 + n:
                    break
                frames.append(buf[4:4 + n])
                buf = buf[4 + n:]
        silent = not closed and not frames
        return Outcome(frames, closed, silent, err)
    finally:
        if own:
            s.close()


def round_trip(sock, data, timeout=10):
    """Send one request on an open socket and return its response payload."""
    o = exchange(None, data, wait=timeout, sock=sock)
    if not o.frames:
        raise AssertionError("no response on the connection: %r" % o)
    return o.frames[0]
