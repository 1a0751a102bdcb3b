"""AddRaftVoter (80) v0 and RemoveRaftVoter (81) v0 over a raw socket (no Python client has
them), with common/kafka_wire.py. Each returns (error code, error message)."""
import base64
import struct

from kafka_wire import TAGS, call, carray, cstr

ZERO_DIR = "AAAAAAAAAAAAAAAAAAAAAA"

NONE = 0
REQUEST_TIMED_OUT = 7
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
INCONSISTENT_CLUSTER_ID = 104
DUPLICATE_VOTER = 126
VOTER_NOT_FOUND = 127


def _uuid(s):
    raw = base64.urlsafe_b64decode(s + "==")
    assert len(raw) == 16, s
    return raw


def _answer(r):
    r.i32()  # throttle_time_ms
    return r.i16(), r.cstr()


def _addr(host_port):
    host, port = host_port.rsplit(":", 1)
    return host, int(port)


def add_voter(host_port, cluster_id, voter_id, directory_id, listeners, timeout_ms=30000):
    """listeners: [(name, host, port)]."""
    body = cstr(cluster_id) + struct.pack(">ii", timeout_ms, voter_id) + _uuid(directory_id)
    body += carray(listeners, lambda l: cstr(l[0]) + cstr(l[1]) + struct.pack(">H", l[2]) + TAGS)
    body += TAGS
    return _answer(call(_addr(host_port), 80, 0, body, timeout=timeout_ms / 1000 + 30))


def remove_voter(host_port, cluster_id, voter_id, directory_id):
    body = cstr(cluster_id) + struct.pack(">i", voter_id) + _uuid(directory_id) + TAGS
    return _answer(call(_addr(host_port), 81, 0, body, timeout=60))
