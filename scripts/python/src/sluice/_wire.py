"""Two Kafka requests over a plain socket, enough to tell whether a node serves and what its
metadata says, with no client library: ApiVersions v0 and Metadata v4 (both non-flexible).
Each call opens one connection, sends one request and reads one answer."""

import socket
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

API_VERSIONS = 18
METADATA = 3
_CORRELATION_ID = 0x51C0
_CLIENT_ID = b"sluice-python"


class WireError(Exception):
    """The node did not answer, or answered something that is not the expected response."""


@dataclass
class Partition:
    error_code: int
    leader: int
    replicas: List[int]
    isr: List[int]


@dataclass
class Metadata:
    """A Metadata answer: the live brokers (id -> (host, port)) and, per topic asked for,
    its error code and partitions (index -> Partition)."""

    brokers: Dict[int, Tuple[str, int]] = field(default_factory=dict)
    topic_errors: Dict[str, int] = field(default_factory=dict)
    partitions: Dict[str, Dict[int, Partition]] = field(default_factory=dict)


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise WireError("connection closed before the answer was complete")
        buf += chunk
    return bytes(buf)


def _request(addr: Tuple[str, int], api_key: int, version: int, body: bytes, timeout: float) -> bytes:
    header = struct.pack(">hhih", api_key, version, _CORRELATION_ID, len(_CLIENT_ID)) + _CLIENT_ID
    frame = header + body
    try:
        with socket.create_connection(addr, timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            (size,) = struct.unpack(">i", _read_exact(sock, 4))
            if size < 4 or size > 64 << 20:
                raise WireError(f"answer of {size} bytes")
            data = _read_exact(sock, size)
    except OSError as e:
        raise WireError(str(e)) from e
    (correlation,) = struct.unpack_from(">i", data)
    if correlation != _CORRELATION_ID:
        raise WireError(f"correlation id {correlation}, expected {_CORRELATION_ID}")
    return data[4:]


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def _take(self, fmt: str):
        try:
            values = struct.unpack_from(fmt, self.data, self.pos)
        except struct.error as e:
            raise WireError(f"truncated answer: {e}") from e
        self.pos += struct.calcsize(fmt)
        return values[0]

    def int8(self) -> int:
        return self._take(">b")

    def int16(self) -> int:
        return self._take(">h")

    def int32(self) -> int:
        return self._take(">i")

    def string(self) -> Optional[str]:
        n = self.int16()
        if n < 0:
            return None
        s = self.data[self.pos : self.pos + n]
        if len(s) != n:
            raise WireError("truncated string")
        self.pos += n
        return s.decode("utf-8", "replace")

    def int32s(self) -> List[int]:
        return [self.int32() for _ in range(max(self.int32(), 0))]


def api_versions(addr: Tuple[str, int], timeout: float = 3.0) -> None:
    """One ApiVersions v0 round trip; raises WireError unless the answer's error code is 0."""
    r = _Reader(_request(addr, API_VERSIONS, 0, b"", timeout))
    code = r.int16()
    if code != 0:
        raise WireError(f"ApiVersions error code {code}")


def metadata(addr: Tuple[str, int], topics: Optional[List[str]] = None, timeout: float = 5.0) -> Metadata:
    """Metadata v4 for `topics` (None: every topic), never creating a topic."""
    if topics is None:
        body = struct.pack(">i", -1)
    else:
        body = struct.pack(">i", len(topics))
        for t in topics:
            b = t.encode()
            body += struct.pack(">h", len(b)) + b
    body += struct.pack(">b", 0)  # allow_auto_topic_creation
    r = _Reader(_request(addr, METADATA, 4, body, timeout))
    out = Metadata()
    r.int32()  # throttle_time_ms
    for _ in range(max(r.int32(), 0)):
        node_id, host, port = r.int32(), r.string(), r.int32()
        r.string()  # rack
        out.brokers[node_id] = (host or "", port)
    r.string()  # cluster_id
    r.int32()  # controller_id
    for _ in range(max(r.int32(), 0)):
        code, name = r.int16(), r.string() or ""
        r.int8()  # is_internal
        out.topic_errors[name] = code
        parts = out.partitions.setdefault(name, {})
        for _ in range(max(r.int32(), 0)):
            p_code, index, leader = r.int16(), r.int32(), r.int32()
            replicas = r.int32s()
            isr = r.int32s()
            parts[index] = Partition(p_code, leader, replicas, isr)
    return out
