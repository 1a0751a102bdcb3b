"""Just enough of Kafka's flexible wire format to send requests no Python client exposes and
read the answers field by field. Requests go over one socket per call; header v2, response
header v1."""
import socket
import struct


def uvarint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def cstr(s):
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


def carray(items, enc):
    return uvarint(len(items) + 1) + b"".join(enc(i) for i in items)


TAGS = b"\x00"


class Reader:
    def __init__(self, data):
        self.d, self.i = data, 0

    def take(self, n):
        if self.i + n > len(self.d):
            raise ValueError("response ends early")
        b = self.d[self.i:self.i + n]
        self.i += n
        return b

    def i8(self):
        return struct.unpack(">b", self.take(1))[0]

    def i16(self):
        return struct.unpack(">h", self.take(2))[0]

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def uvarint(self):
        shift = n = 0
        while True:
            b = self.take(1)[0]
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7

    def cstr(self):
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def carray(self, item):
        n = self.uvarint()
        return None if n == 0 else [item(self) for _ in range(n - 1)]

    def tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def call(host_port, key, version, body, timeout=30):
    """Sends one request and returns a Reader positioned after the response header."""
    header = struct.pack(">hhih", key, version, 1, 5) + b"wire" + b"\x00" + TAGS
    msg = header + body
    with socket.create_connection(host_port, timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(msg)) + msg)
        size = b""
        while len(size) < 4:
            chunk = s.recv(4 - len(size))
            if not chunk:
                raise ConnectionError("connection closed before the response")
            size += chunk
        n = struct.unpack(">i", size)[0]
        data = b""
        while len(data) < n:
            chunk = s.recv(n - len(data))
            if not chunk:
                raise ConnectionError("connection closed mid-response")
            data += chunk
    r = Reader(data)
    r.i32()  # correlation id
    r.tags()
    return r


def alter_client_quotas(host_port, entries, validate_only=False):
    """AlterClientQuotas v1. entries: [(entity parts [(type, name|None)], ops [(key,
    value|None: remove)])] -> [(error_code, error_message, entity parts)]"""
    def parts_bytes(parts):
        return carray(parts, lambda p: cstr(p[0]) + cstr(p[1]) + TAGS)

    def entry(e):
        parts, ops = e
        return parts_bytes(parts) + carray(ops, lambda o: cstr(o[0]) + struct.pack(
            ">d?", o[1] if o[1] is not None else 0.0, o[1] is None) + TAGS) + TAGS
    body = carray(entries, entry) + struct.pack(">?", validate_only) + TAGS
    r = call(host_port, 49, 1, body)
    r.i32()  # throttle

    def read_entry(r):
        code, msg = r.i16(), r.cstr()
        parts = r.carray(lambda r: (r.cstr(), r.cstr(), r.tags())[:2])
        r.tags()
        return code, msg, parts
    return r.carray(read_entry)
