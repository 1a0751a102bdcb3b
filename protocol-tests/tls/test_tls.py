#!/usr/bin/env python3
"""TLS suite: clients over an SSL listener at $BOOTSTRAP (certificates in $PKI, made by
make-certs). See ./run for the scenarios and which broker setting each runs under."""
import os
import random
import socket
import struct

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from harness import BOOTSTRAP, RUN_TAG, Suite, check, host_port, info, wait_until
from tlslib import (CA, T, TMP, Relay, closed_by_broker, consume_with, fetch_v4, java_tool, pem,
                    produce_with, recv_frame, run, tls_context)

S = Suite("tls")
KIND = os.environ.get("BROKER_KIND", "sluice")
BROKER_LOG = os.environ.get("BROKER_LOG", "")


def quiet(err):
    info("librdkafka: %s" % err)


def rdkafka_conf(cert=None, **extra):
    """confluent-kafka / librdkafka settings for SSL, with `cert` (a make-certs name) as the
    client certificate when given."""
    c = {"bootstrap.servers": BOOTSTRAP, "security.protocol": "SSL",
         "ssl.ca.location": CA, "error_cb": quiet}
    if cert:
        c["ssl.certificate.location"] = pem(cert + ".crt")
        c["ssl.key.location"] = pem(cert + ".key")
    c.update(extra)
    return c


def kcat_args(cert=None):
    a = ["-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + CA]
    if cert:
        a += ["-X", "ssl.certificate.location=" + pem(cert + ".crt"),
              "-X", "ssl.key.location=" + pem(cert + ".key")]
    return a


def java_props(cert=None):
    """A Java client properties file: PEM truststore, and a PEM keystore (key + chain in one
    file) when `cert` is given."""
    path = os.path.join(TMP, "client-%s.properties" % (cert or "anon"))
    lines = ["security.protocol=SSL", "ssl.truststore.type=PEM", "ssl.truststore.location=" + CA]
    if cert:
        lines += ["ssl.keystore.type=PEM", "ssl.keystore.location=" + pem(cert + ".pem")]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def create_topic(name, cert=None):
    admin = AdminClient(rdkafka_conf(cert))
    fs = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    fs[name].result(timeout=T)


def produce(topic, values, cert=None, producer=None):
    return produce_with(rdkafka_conf(cert), topic, values, producer)


def consume(topic, n, cert=None):
    """n values of `topic` read by a group consumer from the beginning."""
    return consume_with(rdkafka_conf(cert), topic, n)


def roundtrip_confluent(cert=None):
    topic = "tls-ck-%s-%s" % (cert or "anon", RUN_TAG)
    create_topic(topic, cert)
    values = [("record-%06d-" % i).encode() + os.urandom(16).hex().encode() for i in range(2000)]
    produce(topic, values, cert)
    got = consume(topic, len(values), cert)
    check(got == values, "values read back differ (first %r vs %r)" % (got[:1], values[:1]))


def roundtrip_kcat(cert=None):
    topic = "tls-kcat-%s-%s" % (cert or "anon", RUN_TAG)
    create_topic(topic, cert)
    lines = ["kcat line %d %s" % (i, RUN_TAG) for i in range(200)]
    rc, _, err = run(["kcat", "-b", BOOTSTRAP, "-P", "-t", topic] + kcat_args(cert),
                     stdin=("\n".join(lines) + "\n").encode())
    check(rc == 0, "kcat -P exited %d: %s" % (rc, err[-400:]))
    rc, out, err = run(["kcat", "-b", BOOTSTRAP, "-C", "-e", "-q", "-o", "beginning", "-t", topic]
                       + kcat_args(cert))
    check(rc == 0, "kcat -C exited %d: %s" % (rc, err[-400:]))
    check(out.splitlines() == lines, "kcat read %d lines, not the %d written: %r" % (
        len(out.splitlines()), len(lines), out[:200]))


def roundtrip_java(cert=None):
    topic = "tls-java-%s-%s" % (cert or "anon", RUN_TAG)
    props = java_props(cert)
    create_topic(topic, cert)
    lines = ["java line %d %s" % (i, RUN_TAG) for i in range(100)]
    rc, out, err = java_tool("org.apache.kafka.tools.ConsoleProducer",
                             ["--topic", topic, "--command-config", props], BOOTSTRAP,
                             stdin=("\n".join(lines) + "\n").encode())
    check(rc == 0, "ConsoleProducer exited %d: %s" % (rc, (out + err)[-600:]))
    rc, out, err = java_tool("org.apache.kafka.tools.consumer.ConsoleConsumer",
                             ["--topic", topic, "--command-config", props, "--from-beginning",
                              "--max-messages", str(len(lines)), "--timeout-ms", "20000"],
                             BOOTSTRAP)
    check(rc == 0, "ConsoleConsumer exited %d: %s" % (rc, (out + err)[-600:]))
    got = [l for l in out.splitlines() if l.startswith("java line")]
    check(got == lines, "the Java consumer read %d lines, not the %d written" % (
        len(got), len(lines)))


def refused(cert, what):
    """A client with certificate `cert` (None: none) gets no metadata, from confluent-kafka
    and from kcat."""
    admin = AdminClient(rdkafka_conf(cert, **{"socket.timeout.ms": 4000}))
    try:
        md = admin.list_topics(timeout=6)
        raise AssertionError("%s: confluent-kafka got metadata (%d brokers)" % (what, len(md.brokers)))
    except KafkaException as e:
        info("%s: confluent-kafka refused as expected: %s" % (what, e))
    rc, out, err = run(["kcat", "-b", BOOTSTRAP, "-L", "-m", "5"] + kcat_args(cert), timeout=30)
    check(rc != 0, "%s: kcat -L exited %d: %s" % (what, rc, out[:300]))
    info("%s: kcat refused: %s" % (what, err.strip().splitlines()[-1:]))


def logged_once(port):
    """Sluice logs one line for a refused connection, naming its address."""
    if KIND != "sluice" or not BROKER_LOG:
        return
    needle = "client=127.0.0.1:%d" % port

    def count():
        with open(BROKER_LOG, errors="replace") as f:
            return sum(1 for line in f if needle in line and "closing connection" in line)
    wait_until(lambda: count() >= 1, 10, "a log line for %s" % needle)
    check(count() == 1, "%s logged %d times" % (needle, count()))


# --- scenarios --------------------------------------------------------------------------

# A round trip per client, over SSL (no certificate) and over mTLS (alice's certificate).
for _prefix, _cert in (("ssl", None), ("mtls", "alice")):
    for _client, _fn, _timeout in (("confluent-kafka", roundtrip_confluent, 90),
                                   ("kcat", roundtrip_kcat, 90),
                                   ("java", roundtrip_java, 150)):
        S.scenario("%s-%s" % (_prefix, _client), timeout=_timeout)(
            lambda fn=_fn, cert=_cert: fn(cert))


@S.scenario("wire-is-encrypted", timeout=90)
def wire_is_encrypted():
    topic = "tls-wire-%s" % RUN_TAG
    value = ("secret-value-%s-" % RUN_TAG).encode() * 8
    create_topic(topic)
    produce(topic, [value])
    relay = Relay()
    raw = socket.create_connection(("127.0.0.1", relay.port), timeout=T)
    s = tls_context().wrap_socket(raw, server_hostname="localhost")
    info("raw TLS connection: %s, %s" % (s.version(), s.cipher()[0]))
    s.sendall(fetch_v4(topic))
    answer = recv_frame(s)
    s.close()
    check(value in answer, "the decrypted Fetch answer does not hold the record value")
    wait_until(lambda: len(relay.to_client) > len(value), 5, "the relay to see the answer")
    check(value not in bytes(relay.to_client), "the record value crossed the wire in clear")
    check(value[:16] not in bytes(relay.to_client), "part of the value crossed the wire in clear")
    check(topic.encode() not in bytes(relay.to_broker), "the topic name crossed the wire in clear")
    info("relay saw %d bytes to the broker, %d to the client" % (
        len(relay.to_broker), len(relay.to_client)))


@S.scenario("garbage-is-isolated", timeout=90)
def garbage_is_isolated():
    topic = "tls-garbage-%s" % RUN_TAG
    create_topic(topic)
    p = produce(topic, [b"before-%d" % i for i in range(10)])

    def connect():
        return socket.create_connection(host_port(), timeout=T)

    # Random bytes.
    s = connect()
    port = s.getsockname()[1]
    s.sendall(random.Random(7).randbytes(4096))
    check(closed_by_broker(s), "random bytes: the broker kept the connection open")
    s.close()
    logged_once(port)
    # A plaintext Kafka request (ApiVersions v0) on the TLS port.
    s = connect()
    port = s.getsockname()[1]
    s.sendall(struct.pack(">ihhih", 10, 18, 0, 1, 0))
    check(closed_by_broker(s), "a plaintext request: the broker kept the connection open")
    s.close()
    logged_once(port)
    # Half a ClientHello: a handshake record header promising more than is sent, then EOF.
    s = connect()
    s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(20))
    s.shutdown(socket.SHUT_WR)
    check(closed_by_broker(s), "half a ClientHello: the broker kept the connection open")
    s.close()
    # Garbage after a finished handshake: a record the session cannot decrypt.
    raw = connect()
    t = tls_context().wrap_socket(raw, server_hostname="localhost")
    port = t.getsockname()[1]
    os.write(t.fileno(), b"\x17\x03\x03\x00\x40" + os.urandom(64))
    check(closed_by_broker(t), "garbage after the handshake: the broker kept the connection open")
    t.close()
    logged_once(port)
    # The producer's connection was not disturbed, and new clients work.
    produce(topic, [b"after-%d" % i for i in range(10)], producer=p)
    got = consume(topic, 20)
    check(got == [b"before-%d" % i for i in range(10)] + [b"after-%d" % i for i in range(10)],
          "records read back differ: %r" % got[:3])


@S.scenario("mtls-missing-cert", timeout=60)
def mtls_missing_cert():
    refused(None, "no client certificate")


@S.scenario("mtls-wrong-ca", timeout=60)
def mtls_wrong_ca():
    refused("mallory", "a certificate from another CA")


if __name__ == "__main__":
    S.main()
