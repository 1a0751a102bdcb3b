"""Helpers shared by the TLS suite's scenario files (test_tls.py, test_sasl_ssl.py):
subprocesses, the Java tools, and raw TLS sockets through a recording relay."""
import os
import socket
import ssl
import struct
import subprocess
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from harness import check, host_port

T = 30
PKI = os.environ["PKI"]
KAFKA_LIBS = os.environ.get("KAFKA_LIBS", "")
ROOT = os.environ.get("SLUICE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
LOG4J = os.path.join(ROOT, "scripts", "kafka", "log4j2-tools.properties")
CA = os.path.join(PKI, "ca.pem")
TMP = os.environ.get("SUITE_TMP", "/tmp")


def pem(name):
    return os.path.join(PKI, name)


def run(cmd, stdin=None, timeout=60):
    r = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def java_tool(main_class, args, bootstrap, stdin=None):
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
           "-Dlog4j2.configurationFile=" + LOG4J, "-cp", os.path.join(KAFKA_LIBS, "*"),
           main_class, "--bootstrap-server", bootstrap] + args
    return run(cmd, stdin=stdin, timeout=90)


def tls_context():
    ctx = ssl.create_default_context(cafile=CA)
    ctx.check_hostname = True
    return ctx


class Relay:
    """A TCP relay on a free port in front of the broker that keeps every byte it passes."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.to_broker = bytearray()
        self.to_client = bytearray()
        threading.Thread(target=self._serve, daemon=True).start()

    def _pump(self, src, dst, keep):
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                keep += b
                dst.sendall(b)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _serve(self):
        client, _ = self.sock.accept()
        broker = socket.create_connection(host_port(), timeout=T)
        broker.settimeout(None)
        threading.Thread(target=self._pump, args=(client, broker, self.to_broker), daemon=True).start()
        self._pump(broker, client, self.to_client)


def recv_frame(s):
    def exact(n):
        b = b""
        while len(b) < n:
            c = s.recv(n - len(b))
            if not c:
                raise ConnectionError("closed after %d of %d bytes" % (len(b), n))
            b += c
        return b
    n = struct.unpack(">i", exact(4))[0]
    return exact(n)


def fetch_v4(topic, partition=0):
    """A Fetch v4 request frame (header v1) for one partition from offset 0."""
    t = topic.encode()
    body = struct.pack(">iiiib", -1, 500, 1, 1 << 20, 0)
    body += struct.pack(">i", 1) + struct.pack(">h", len(t)) + t
    body += struct.pack(">i", 1) + struct.pack(">iqi", partition, 0, 1 << 20)
    header = struct.pack(">hhih", 1, 4, 7, 3) + b"raw"
    msg = header + body
    return struct.pack(">i", len(msg)) + msg


def closed_by_broker(s, timeout=15):
    """True once the broker has closed `s` (EOF or a reset), waiting up to `timeout`."""
    s.settimeout(timeout)
    try:
        while True:
            b = s.recv(4096)
            if not b:
                return True
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
        return True
    except socket.timeout:
        return False
    except OSError:
        return True


def produce_with(conf, topic, values, producer=None):
    """Produces `values` to `topic` with a confluent-kafka producer of settings `conf` (or
    `producer`), all acknowledged; returns the producer."""
    p = producer or Producer(dict(conf, **{"linger.ms": 5}))
    errors = []
    for v in values:
        p.produce(topic, value=v, on_delivery=lambda e, m: e and errors.append(e))
        p.poll(0)
    left = p.flush(T)
    check(left == 0 and not errors, "produce: %d undelivered, errors %s" % (left, errors[:3]))
    return p


def consume_with(conf, topic, n, group=True, timeout=T):
    """n values of partition 0 of `topic` from the beginning, read with settings `conf`: by a
    group consumer that commits, or (group=False) by an assigned consumer that needs no
    coordinator."""
    c = Consumer(dict(conf, **{"group.id": "g-" + topic, "auto.offset.reset": "earliest",
                               "enable.auto.commit": False}))
    if group:
        c.subscribe([topic])
    else:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or (m.error() and m.error().retriable()):
                continue
            check(m.error() is None, "consume: %s" % m.error())
            out.append(m.value())
        if group:
            c.commit(asynchronous=False)
    finally:
        c.close()
    check(len(out) == n, "consumed %d of %d" % (len(out), n))
    return out
