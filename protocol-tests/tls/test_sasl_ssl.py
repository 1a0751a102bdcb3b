#!/usr/bin/env python3
"""TLS suite, SASL_SSL part: clients over a SASL_SSL listener at $BOOTSTRAP (certificates in
$PKI, PLAIN users in the listener's JAAS entry, SCRAM-SHA-512 users in the metadata). See
./run for the scenarios and which broker setting each runs under."""
import os
import socket
import struct

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

from harness import BOOTSTRAP, RUN_TAG, Suite, check, info, wait_until
from tlslib import (CA, T, TMP, Relay, consume_with, fetch_v4, java_tool, pem, produce_with,
                    recv_frame, run, tls_context)

S = Suite("tls")
ADMIN = ("PLAIN", "admin", "admin-secret")
ALICE = ("PLAIN", "alice", "alice-secret")
SUE = ("SCRAM-SHA-512", "sue", "sue-secret")


def quiet(err):
    info("librdkafka: %s" % err)


def rdkafka_conf(login, cert=None, **extra):
    """confluent-kafka settings for SASL_SSL as `login` (mechanism, user, password), with
    `cert` (a make-certs name) as the client certificate when given."""
    mech, user, password = login
    c = {"bootstrap.servers": BOOTSTRAP, "security.protocol": "SASL_SSL",
         "ssl.ca.location": CA, "sasl.mechanism": mech, "sasl.username": user,
         "sasl.password": password, "error_cb": quiet}
    if cert:
        c["ssl.certificate.location"] = pem(cert + ".crt")
        c["ssl.key.location"] = pem(cert + ".key")
    c.update(extra)
    return c


def kcat_args(login):
    mech, user, password = login
    return ["-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + CA,
            "-X", "sasl.mechanism=" + mech, "-X", "sasl.username=" + user,
            "-X", "sasl.password=" + password]


def java_props(login):
    mech, user, password = login
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mech == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    path = os.path.join(TMP, "sasl-ssl-%s-%s.properties" % (user, mech))
    with open(path, "w") as f:
        f.write("security.protocol=SASL_SSL\nssl.truststore.type=PEM\n"
                "ssl.truststore.location=%s\nsasl.mechanism=%s\n"
                "sasl.jaas.config=%s required username=\"%s\" password=\"%s\";\n"
                % (CA, mech, module, user, password))
    return path


def create_topic(name, login=ADMIN, cert=None):
    admin = AdminClient(rdkafka_conf(login, cert))
    fs = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    fs[name].result(timeout=T)


def produce(topic, values, login, cert=None):
    produce_with(rdkafka_conf(login, cert), topic, values)


def consume(topic, n, login, cert=None):
    return consume_with(rdkafka_conf(login, cert), topic, n)


def roundtrip_confluent(login, cert=None, n=1000):
    topic = "saslssl-ck-%s-%s-%s" % (login[1], cert or "anon", RUN_TAG)
    create_topic(topic, login, cert)
    values = [("record-%06d-" % i).encode() + os.urandom(8).hex().encode() for i in range(n)]
    produce(topic, values, login, cert)
    got = consume(topic, n, login, cert)
    check(got == values, "%s: values read back differ" % login[0])


def refused(login, cert=None, what=""):
    """confluent-kafka as `login` gets no metadata."""
    admin = AdminClient(rdkafka_conf(login, cert, **{"socket.timeout.ms": 4000}))
    try:
        md = admin.list_topics(timeout=6)
        raise AssertionError("%s: confluent-kafka got metadata (%d brokers)" % (
            what, len(md.brokers)))
    except KafkaException as e:
        info("%s: refused as expected: %s" % (what, e))
        return str(e)


# --- wire ---------------------------------------------------------------------------------

def request(key, version, correlation, body):
    header = struct.pack(">hhih", key, version, correlation, 3) + b"raw"
    msg = header + body
    return struct.pack(">i", len(msg)) + msg


def raw_login(s, user, password):
    """SaslHandshake v1 (PLAIN) and SaslAuthenticate v1 on a raw TLS socket."""
    mech = b"PLAIN"
    s.sendall(request(17, 1, 1, struct.pack(">h", len(mech)) + mech))
    answer = recv_frame(s)
    check(struct.unpack(">h", answer[4:6])[0] == 0, "SaslHandshake error %r" % answer[4:6])
    token = b"\0" + user.encode() + b"\0" + password.encode()
    s.sendall(request(36, 1, 2, struct.pack(">i", len(token)) + token))
    answer = recv_frame(s)
    check(struct.unpack(">h", answer[4:6])[0] == 0, "SaslAuthenticate error %r" % answer[:60])


# --- scenarios ----------------------------------------------------------------------------

@S.scenario("sasl-ssl-scram-user", timeout=60)
def scram_user():
    """A SCRAM-SHA-512 user made through the admin API over SASL_SSL (as the PLAIN admin)
    authenticates."""
    admin = AdminClient(rdkafka_conf(ADMIN))
    up = UserScramCredentialUpsertion(SUE[1], ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512,
                                                                  8192), SUE[2].encode())
    for f in admin.alter_user_scram_credentials([up]).values():
        f.result(timeout=T)
    wait_until(lambda: AdminClient(rdkafka_conf(SUE)).list_topics(timeout=5).brokers, 20,
               "sue to authenticate with SCRAM-SHA-512")


@S.scenario("sasl-ssl-confluent-kafka", timeout=120)
def confluent():
    for login in (ALICE, SUE):
        roundtrip_confluent(login)


@S.scenario("sasl-ssl-kcat", timeout=90)
def kcat():
    # PLAIN only: the kcat here (librdkafka 2.0.2) sends a SCRAM client-final message with a
    # nonce both Kafka 4.4 and Sluice refuse ("Invalid client nonce in the final client
    # message."); newer librdkafka (confluent-kafka above) logs in with SCRAM.
    for login in (ALICE,):
        topic = "saslssl-kcat-%s-%s" % (login[1], RUN_TAG)
        create_topic(topic)
        lines = ["kcat %s line %d %s" % (login[0], i, RUN_TAG) for i in range(200)]
        rc, _, err = run(["kcat", "-b", BOOTSTRAP, "-P", "-t", topic] + kcat_args(login),
                         stdin=("\n".join(lines) + "\n").encode())
        check(rc == 0, "kcat -P (%s) exited %d: %s" % (login[0], rc, err[-400:]))
        rc, out, err = run(["kcat", "-b", BOOTSTRAP, "-C", "-e", "-q", "-o", "beginning",
                            "-t", topic] + kcat_args(login))
        check(rc == 0, "kcat -C (%s) exited %d: %s" % (login[0], rc, err[-400:]))
        check(out.splitlines() == lines, "kcat (%s) read %d lines, not %d" % (
            login[0], len(out.splitlines()), len(lines)))


@S.scenario("sasl-ssl-java", timeout=240)
def java():
    for login in (ALICE, SUE):
        topic = "saslssl-java-%s-%s" % (login[1], RUN_TAG)
        props = java_props(login)
        create_topic(topic)
        lines = ["java %s line %d %s" % (login[0], i, RUN_TAG) for i in range(100)]
        rc, out, err = java_tool("org.apache.kafka.tools.ConsoleProducer",
                                 ["--topic", topic, "--command-config", props], BOOTSTRAP,
                                 stdin=("\n".join(lines) + "\n").encode())
        check(rc == 0, "ConsoleProducer (%s) exited %d: %s" % (login[0], rc, (out + err)[-600:]))
        rc, out, err = java_tool("org.apache.kafka.tools.consumer.ConsoleConsumer",
                                 ["--topic", topic, "--command-config", props,
                                  "--from-beginning", "--max-messages", str(len(lines)),
                                  "--timeout-ms", "20000"], BOOTSTRAP)
        check(rc == 0, "ConsoleConsumer (%s) exited %d: %s" % (login[0], rc, (out + err)[-600:]))
        got = [l for l in out.splitlines() if l.startswith("java ")]
        check(got == lines, "the Java consumer (%s) read %d lines, not %d" % (
            login[0], len(got), len(lines)))


@S.scenario("sasl-ssl-wrong-password", timeout=90)
def wrong_password():
    for mech, user, _ in (ALICE, SUE):
        errors = []
        p = Producer(rdkafka_conf((mech, user, "not-the-password"), error_cb=errors.append))
        p.produce("saslssl-wrong-%s" % RUN_TAG, b"x")
        wait_until(lambda: p.poll(0.2) >= 0 and any("uthentication" in e.str() for e in errors),
                   T, "confluent-kafka %s authentication error" % mech)
        info("confluent-kafka %s: %s" % (mech, errors[0].str()))
        p.purge()
        rc, out, err = run(["kcat", "-b", BOOTSTRAP, "-L", "-m", "5"]
                           + kcat_args((mech, user, "not-the-password")), timeout=30)
        check(rc != 0, "kcat %s with a wrong password exited 0: %s" % (mech, out[:200]))


@S.scenario("sasl-ssl-wire-is-encrypted", timeout=90)
def wire_is_encrypted():
    """A raw connection through a recording relay: TLS, the PLAIN login, then a Fetch. The
    decrypted answer holds the record; the bytes on the wire hold neither the password, nor
    the user name, nor the record, nor the topic name."""
    topic = "saslssl-wire-%s" % RUN_TAG
    value = ("secret-value-%s-" % RUN_TAG).encode() * 8
    create_topic(topic)
    produce(topic, [value], ALICE)
    relay = Relay()
    raw = socket.create_connection(("127.0.0.1", relay.port), timeout=T)
    s = tls_context().wrap_socket(raw, server_hostname="localhost")
    raw_login(s, ALICE[1], ALICE[2])
    s.sendall(fetch_v4(topic))
    answer = recv_frame(s)
    s.close()
    check(value in answer, "the decrypted Fetch answer does not hold the record value")
    wait_until(lambda: len(relay.to_client) > len(value), 5, "the relay to see the answer")
    up, down = bytes(relay.to_broker), bytes(relay.to_client)
    for secret, what in ((ALICE[2].encode(), "the password"), (b"alice", "the user name"),
                         (topic.encode(), "the topic name"), (value[:16], "the record value")):
        check(secret not in up and secret not in down, "%s crossed the wire in clear" % what)
    info("relay saw %d bytes to the broker, %d to the client" % (len(up), len(down)))


@S.scenario("sasl-ssl-mtls", timeout=90)
def mtls():
    """listener.name.<l>.ssl.client.auth=required on SASL_SSL: a client with a certificate
    and a SASL login works."""
    roundtrip_confluent(ALICE, cert="alice", n=200)


@S.scenario("sasl-ssl-mtls-missing-cert", timeout=60)
def mtls_missing_cert():
    refused(ALICE, what="a SASL login without a client certificate")
    refused(ALICE, cert="mallory", what="a SASL login with a certificate from another CA")


if __name__ == "__main__":
    S.main()
