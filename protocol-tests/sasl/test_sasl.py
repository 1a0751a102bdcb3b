"""SASL suite: a broker whose only client listener is SASL_PLAINTEXT (PLAIN users from the
JAAS entry, SCRAM users from the metadata, OAUTHBEARER with unsecured JWTs), started by
./run. Every client produces and consumes with each mechanism; the wire checks talk to the
broker over raw sockets. Scenarios:

  before-auth          ApiVersions is answered before authentication (and lists
                       SaslHandshake and SaslAuthenticate); a Metadata request before it
                       closes the connection
  scram-users          kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=...]' and
                       'SCRAM-SHA-512=[iterations=8192,password=...]' (authenticated as the
                       PLAIN admin), then the admin client describes both
  confluent-kafka      PLAIN, SCRAM-SHA-256, SCRAM-SHA-512: produce + consume each
  kafka-python         the same
  kafkajs              the same
  java-client          the same, with Kafka 4.4's Java client
  wrong-password       each client refused with an authentication error (PLAIN and SCRAM);
                       over the wire SASL_AUTHENTICATION_FAILED with Kafka's messages
  scram-delete         kafka-configs --delete-config SCRAM-SHA-512: the credential no longer
                       authenticates; describe says it does not exist
  oauthbearer          unsecured JWTs: confluent-kafka and kafka-python produce + consume as
                       their token's subject; an expired token gets {"status":"invalid_token"}
  bad-input            an oversized frame and a truncated SaslAuthenticate before
                       authentication each close their own connection; an authenticated
                       connection beside them keeps working
  reauth               (restarts the broker with connections.max.reauth.ms=3000) the session
                       lifetime is told to the client, re-authentication on the same
                       connection works, an expired session is closed at its next request,
                       and a long-lived confluent-kafka producer keeps producing across
                       several re-authentications (a consumer then reads every record)
"""
import base64
import json
import os
import socket
import struct
import subprocess
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from harness import BOOTSTRAP, RUN_TAG, Suite, check, host_port, info, wait_until

S = Suite("sasl")
HERE = os.path.dirname(os.path.abspath(__file__))
KAFKA_LIBS = os.environ.get("KAFKA_LIBS", "")
ROOT = os.environ.get("SLUICE_ROOT", os.path.join(HERE, "..", ".."))
LOG4J = os.path.join(ROOT, "scripts", "kafka", "log4j2-tools.properties")
TMP = os.environ.get("SUITE_TMP", "/tmp")
T = 30

ADMIN = ("admin", "admin-secret")
USERS = [
    ("PLAIN", "alice", "alice-secret"),
    ("SCRAM-SHA-256", "sam", "sam-secret"),
    ("SCRAM-SHA-512", "sue", "sue-secret"),
]


def topic(base):
    return "sasl-%s-%s" % (base, RUN_TAG)


def quiet(err):
    info("librdkafka: %s" % err)


def rdkafka_conf(mech, user, password, **extra):
    c = {"bootstrap.servers": BOOTSTRAP, "security.protocol": "SASL_PLAINTEXT",
         "sasl.mechanism": mech, "sasl.username": user, "sasl.password": password,
         "error_cb": quiet}
    c.update(extra)
    return c


def java_tool(main_class, args, check_rc=True):
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
           "-Dlog4j2.configurationFile=" + LOG4J, "-cp", os.path.join(KAFKA_LIBS, "*"),
           main_class] + list(args)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    out = r.stdout.decode(errors="replace")
    if check_rc:
        check(r.returncode == 0, "%s %s exited %d: %s" % (
            main_class, " ".join(args), r.returncode, out[-800:]))
    return out


def admin_config_file():
    path = os.path.join(TMP, "sasl-admin.properties")
    with open(path, "w") as f:
        f.write("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                "required username=\"%s\" password=\"%s\";\n" % ADMIN)
    return path


def kafka_configs(*args):
    return java_tool("org.apache.kafka.tools.ConfigCommand",
                     ["--bootstrap-server", BOOTSTRAP, "--command-config", admin_config_file()]
                     + list(args))


# ---- raw wire ---------------------------------------------------------------------------------

def frame(key, version, correlation, body, flexible=False):
    cid = b"sasl-raw"
    header = struct.pack(">hhih", key, version, correlation, len(cid)) + cid
    if flexible:
        header += b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed after %d of %d bytes" % (len(out), n))
        out += chunk
    return out


def recv_frame(s):
    (n,) = struct.unpack(">i", recv_exact(s, 4))
    return recv_exact(s, n)


def closed(s, timeout=10):
    """The peer closes the connection (EOF or reset) within timeout seconds."""
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def connect():
    s = socket.create_connection(host_port(), timeout=T)
    s.settimeout(T)
    return s


def kstr(v):
    b = v.encode()
    return struct.pack(">h", len(b)) + b


def handshake(s, mech, corr=1):
    s.sendall(frame(17, 1, corr, kstr(mech)))
    r = recv_frame(s)
    (c, err) = struct.unpack(">ih", r[:6])
    check(c == corr, "handshake correlation id %d" % c)
    return err


def authenticate(s, token, corr=2):
    """SaslAuthenticate v1: (error code, message, auth bytes, session lifetime ms)."""
    s.sendall(frame(36, 1, corr, struct.pack(">i", len(token)) + token))
    r = recv_frame(s)
    (c, err) = struct.unpack(">ih", r[:6])
    i = 6
    (mlen,) = struct.unpack(">h", r[i:i + 2])
    i += 2
    msg = None
    if mlen >= 0:
        msg = r[i:i + mlen].decode()
        i += mlen
    (blen,) = struct.unpack(">i", r[i:i + 4])
    i += 4
    auth = r[i:i + blen]
    i += blen
    (lifetime,) = struct.unpack(">q", r[i:i + 8])
    return err, msg, auth, lifetime


def plain_login(s, user, password, corr=1):
    check(handshake(s, "PLAIN", corr) == 0, "PLAIN handshake refused")
    return authenticate(s, b"\0" + user.encode() + b"\0" + password.encode(), corr + 1)


def metadata_ok(s, corr=9):
    """Metadata v1 for all topics answered with our correlation id."""
    s.sendall(frame(3, 1, corr, struct.pack(">i", -1)))
    r = recv_frame(s)
    return struct.unpack(">i", r[:4])[0] == corr


# ---- clients ------------------------------------------------------------------------------------

def confluent_round(mech, user, password, t, n=20):
    p = Producer(rdkafka_conf(mech, user, password))
    for i in range(n):
        p.produce(t, key=b"k%d" % i, value=b"v%d" % i)
    check(p.flush(T) == 0, "confluent-kafka %s: records not delivered" % mech)
    c = Consumer(rdkafka_conf(mech, user, password, **{
        "group.id": "g-" + t, "auto.offset.reset": "earliest"}))
    c.subscribe([t])
    seen = []
    deadline = time.monotonic() + T
    while len(seen) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen.append(m.value())
    c.close()
    check(len(seen) == n, "confluent-kafka %s: consumed %d of %d" % (mech, len(seen), n))


def kafka_python_round(mech, user, password, t, n=20, **extra):
    from kafka import KafkaConsumer, KafkaProducer
    conf = dict(bootstrap_servers=BOOTSTRAP, security_protocol="SASL_PLAINTEXT",
                sasl_mechanism=mech, **extra)
    if mech != "OAUTHBEARER":
        conf.update(sasl_plain_username=user, sasl_plain_password=password)
    p = KafkaProducer(request_timeout_ms=15000, **conf)
    futs = [p.send(t, key=b"k%d" % i, value=b"v%d" % i) for i in range(n)]
    for f in futs:
        f.get(timeout=T)
    p.close()
    c = KafkaConsumer(t, group_id="g-" + t, auto_offset_reset="earliest",
                      consumer_timeout_ms=20000, **conf)
    seen = []
    for m in c:
        seen.append(m.value)
        if len(seen) >= n:
            break
    c.close()
    check(len(seen) == n, "kafka-python %s: consumed %d of %d" % (mech, len(seen), n))


def kafkajs(mech, user, password, t, n=20, retries=5):
    arg = json.dumps({"bootstrap": BOOTSTRAP, "mechanism": mech.lower(), "username": user,
                      "password": password, "topic": t, "count": n, "retries": retries})
    r = subprocess.run(["node", os.path.join(HERE, "kafkajs_sasl.js"), arg],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=90)
    lines = r.stdout.decode().strip().splitlines()
    check(lines, "kafkajs printed nothing: %s" % r.stderr.decode()[-400:])
    return json.loads(lines[-1])


_JAVA = []


def java_classes():
    if not _JAVA:
        out = os.path.join(TMP, "sasl-java")
        os.makedirs(out, exist_ok=True)
        r = subprocess.run(["javac", "-d", out, "-cp", os.path.join(KAFKA_LIBS, "*"),
                            os.path.join(HERE, "SaslClients.java")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        check(r.returncode == 0, "javac: %s" % r.stdout.decode()[-600:])
        _JAVA.append(out)
    return _JAVA[0]


def java_clients(*specs):
    cp = java_classes() + os.pathsep + os.path.join(KAFKA_LIBS, "*")
    r = subprocess.run(["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                        "-Dlog4j2.configurationFile=" + LOG4J, "-cp", cp, "SaslClients",
                        BOOTSTRAP] + list(specs),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=150)
    out = r.stdout.decode(errors="replace")
    return [l for l in out.splitlines() if l.split(" ")[0] in ("OK", "AUTHFAIL", "ERROR")], out


# ---- scenarios -----------------------------------------------------------------------------------

@S.scenario("before-auth")
def before_auth():
    s = connect()
    s.sendall(frame(18, 0, 5, b""))
    r = recv_frame(s)
    corr, err, n = struct.unpack(">ihi", r[:10])
    check(corr == 5 and err == 0, "ApiVersions before authentication: error %d" % err)
    keys = {struct.unpack(">hhh", r[10 + 6 * i:16 + 6 * i])[0] for i in range(n)}
    check({17, 36} <= keys, "SaslHandshake/SaslAuthenticate not advertised")
    s.close()
    s = connect()
    s.sendall(frame(3, 1, 6, struct.pack(">i", -1)))
    check(closed(s), "Metadata before authentication was not refused by closing")


@S.scenario("scram-users", timeout=120)
def scram_users():
    kafka_configs("--alter", "--add-config", "SCRAM-SHA-256=[password=sam-secret]",
                  "--entity-type", "users", "--entity-name", "sam")
    kafka_configs("--alter", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=sue-secret]",
                  "--entity-type", "users", "--entity-name", "sue")
    # (kafka-configs --describe of users also asks for their client quotas, which Sluice
    # does not serve yet: the admin client describes the credentials alone.)
    a = AdminClient(rdkafka_conf("PLAIN", *ADMIN))
    got = {}
    for user, f in a.describe_user_scram_credentials(["sam", "sue"]).items():
        got[user] = sorted((i.mechanism.name, i.iterations)
                           for i in f.result(T).scram_credential_infos)
    check(got == {"sam": [("SCRAM_SHA_256", 4096)], "sue": [("SCRAM_SHA_512", 8192)]},
          "described: %s" % got)
    everyone = a.describe_user_scram_credentials().result(T)
    check({"sam", "sue"} <= set(everyone), "all users: %s" % sorted(everyone))


@S.scenario("confluent-kafka", timeout=120)
def confluent():
    for mech, user, pw in USERS:
        confluent_round(mech, user, pw, topic("ck-" + mech.lower()))


@S.scenario("kafka-python", timeout=120)
def kafka_python():
    for mech, user, pw in USERS:
        kafka_python_round(mech, user, pw, topic("kp-" + mech.lower()))


@S.scenario("kafkajs", timeout=150)
def kafkajs_all():
    for mech, user, pw in USERS:
        r = kafkajs(mech, user, pw, topic("js-" + mech.lower()))
        check(r.get("ok") and r["consumed"] == 20, "kafkajs %s: %s" % (mech, r))


@S.scenario("java-client", timeout=150)
def java_client():
    specs = ["%s:%s:%s:%s:20" % (m, u, p, topic("java-" + m.lower())) for m, u, p in USERS]
    lines, out = java_clients(*specs)
    check(len(lines) == 3 and all(l.startswith("OK ") for l in lines),
          "Java client: %s" % (lines or out[-800:]))


@S.scenario("wrong-password", timeout=150)
def wrong_password():
    # Over the wire: Kafka's messages.
    s = connect()
    err, msg, _, _ = plain_login(s, "alice", "nope")
    check(err == 58 and msg == "Authentication failed: Invalid username or password",
          "PLAIN wrong password: %d %r" % (err, msg))
    check(closed(s), "connection kept after a failed authentication")
    s = connect()
    check(handshake(s, "SCRAM-SHA-256") == 0, "SCRAM handshake refused")
    err, msg, _, _ = authenticate(s, b"n,,n=nobody,r=abcdefgh")
    check(err == 58 and msg == "Authentication failed during authentication due to invalid "
          "credentials with SASL mechanism SCRAM-SHA-256", "SCRAM unknown user: %d %r" % (err, msg))
    s = connect()
    check(handshake(s, "GSSAPI") == 33, "GSSAPI handshake not UNSUPPORTED_SASL_MECHANISM")
    # confluent-kafka: the producer reports an authentication error.
    for mech, user in (("PLAIN", "alice"), ("SCRAM-SHA-256", "sam")):
        errors = []
        p = Producer(rdkafka_conf(mech, user, "wrong", error_cb=errors.append))
        p.produce(topic("wrong"), b"x")
        wait_until(lambda: p.poll(0.2) >= 0 and any("uthentication" in e.str() for e in errors),
                   T, "confluent-kafka %s authentication error" % mech)
        info("confluent-kafka %s: %s" % (mech, errors[0].str()))
        p.purge()
    # kafka-python: it retries the bootstrap until its timeout, logging why each try failed.
    # The broker answers SASL_AUTHENTICATION_FAILED and closes at once (as Kafka does);
    # kafka-python 3.0.12 drops bytes that arrive together with the end of the stream
    # (transport._sock_recv), so it mostly logs "socket disconnected" instead of the error.
    import logging
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    class Seen(logging.Handler):
        def __init__(self):
            super().__init__()
            self.messages = []

        def emit(self, record):
            self.messages.append(record.getMessage())

    seen = Seen()
    logging.getLogger("kafka").addHandler(seen)
    logging.getLogger("kafka").setLevel(logging.WARNING)
    for mech, user in (("PLAIN", "alice"), ("SCRAM-SHA-512", "sue")):
        seen.messages.clear()
        try:
            KafkaProducer(bootstrap_servers=BOOTSTRAP, security_protocol="SASL_PLAINTEXT",
                          sasl_mechanism=mech, sasl_plain_username=user,
                          sasl_plain_password="wrong", request_timeout_ms=3000,
                          max_block_ms=3000).close()
            raise AssertionError("kafka-python %s: wrong password accepted" % mech)
        except KafkaError:
            pass
        failures = [m for m in seen.messages
                    if "SaslAuthenticationFailedError" in m or "socket disconnected" in m]
        check(failures, "kafka-python %s: no authentication error logged: %s" % (
            mech, seen.messages[-3:]))
        info("kafka-python %s: %s" % (mech, failures[0]))
    logging.getLogger("kafka").removeHandler(seen)
    # kafkajs
    for mech, user in (("PLAIN", "alice"), ("SCRAM-SHA-256", "sam")):
        r = kafkajs(mech, user, "wrong", topic("wrong"), 1, retries=0)
        check(not r.get("ok") and "SASL" in (r.get("name", "") + r.get("message", "")),
              "kafkajs %s: %s" % (mech, r))
    # the Java client
    lines, out = java_clients("PLAIN:alice:wrong:%s:fail" % topic("wrong"),
                              "SCRAM-SHA-512:sue:wrong:%s:fail" % topic("wrong"))
    check(len(lines) == 2 and all(l.startswith("AUTHFAIL ") for l in lines),
          "Java client: %s" % (lines or out[-800:]))
    check("Invalid username or password" in lines[0], "Java PLAIN message: %s" % lines[0])


@S.scenario("scram-delete", timeout=90)
def scram_delete():
    kafka_configs("--alter", "--delete-config", "SCRAM-SHA-512", "--entity-type", "users",
                  "--entity-name", "sue")
    a = AdminClient(rdkafka_conf("PLAIN", *ADMIN))
    try:
        a.describe_user_scram_credentials(["sue"])["sue"].result(T)
        raise AssertionError("sue still has credentials")
    except KafkaException as e:
        check("does not exist" in str(e), "describe a deleted user: %s" % e)
    errors = []
    p = Producer(rdkafka_conf("SCRAM-SHA-512", "sue", "sue-secret", error_cb=errors.append))
    p.produce(topic("deleted"), b"x")
    wait_until(lambda: p.poll(0.2) >= 0 and any("uthentication" in e.str() for e in errors), T,
               "authentication error for a deleted credential")
    p.purge()


def unsecured_jwt(sub, lifetime_s=3600, exp=None):
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    now = time.time()
    claims = {"sub": sub, "iat": now, "exp": exp if exp is not None else now + lifetime_s}
    return enc({"alg": "none"}) + "." + enc(claims) + "."


@S.scenario("oauthbearer", timeout=90)
def oauthbearer():
    t = topic("oauth")
    p = Producer({"bootstrap.servers": BOOTSTRAP, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
                  "sasl.oauthbearer.config": "principal=olivia", "error_cb": quiet})
    for i in range(10):
        p.produce(t, value=b"v%d" % i)
    check(p.flush(T) == 0, "confluent-kafka OAUTHBEARER: records not delivered")

    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Tokens(AbstractTokenProvider):
        def token(self):
            return unsecured_jwt("olga")

    kafka_python_round("OAUTHBEARER", None, None, t, n=10, sasl_oauth_token_provider=Tokens())
    s = connect()
    check(handshake(s, "OAUTHBEARER") == 0, "OAUTHBEARER handshake refused")
    expired = unsecured_jwt("old", exp=time.time() - 600)
    err, msg, auth, _ = authenticate(s, b"n,,\x01auth=Bearer " + expired.encode() + b"\x01\x01")
    check(err == 0 and auth == b'{"status":"invalid_token"}', "expired token: %d %r" % (err, auth))
    err, msg, _, _ = authenticate(s, b"\x01", 3)
    check(err == 58 and msg == '{"status":"invalid_token"}', "after 0x01: %d %r" % (err, msg))


@S.scenario("bad-input")
def bad_input():
    good = connect()
    err, _, _, _ = plain_login(good, "alice", "alice-secret")
    check(err == 0, "PLAIN login failed: %d" % err)
    big = connect()
    big.sendall(struct.pack(">i", 600000) + b"\x00" * 1024)
    check(closed(big), "an oversized frame before authentication did not close its connection")
    cut = connect()
    check(handshake(cut, "PLAIN") == 0, "PLAIN handshake refused")
    body = struct.pack(">i", 100) + b"\0alice"  # says 100 bytes, carries 6
    cut.sendall(frame(36, 1, 2, body))
    check(closed(cut), "a truncated SaslAuthenticate did not close its connection")
    check(metadata_ok(good), "the authenticated connection stopped working")
    good.close()


@S.scenario("reauth", timeout=150)
def reauth():
    ctl = os.environ.get("BROKER_CTL")
    env = dict(os.environ)
    env["BROKER_OVERRIDES"] = env.get("BROKER_OVERRIDES", "") + " connections.max.reauth.ms=3000"
    r = subprocess.run([ctl, "restart"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=120)
    check(r.returncode == 0, "restart: %s" % r.stdout.decode()[-600:])
    s = connect()
    err, _, _, lifetime = plain_login(s, "alice", "alice-secret")
    check(err == 0 and lifetime == 3000, "session_lifetime_ms %d (error %d)" % (lifetime, err))
    check(metadata_ok(s), "Metadata after authentication")
    time.sleep(1.5)
    err, _, _, lifetime = plain_login(s, "alice", "alice-secret", corr=20)
    check(err == 0 and lifetime == 3000, "re-authentication: %d %d" % (err, lifetime))
    time.sleep(2)
    check(metadata_ok(s, 30), "Metadata after re-authentication (within the new session)")
    time.sleep(1.5)
    s.sendall(frame(3, 1, 31, struct.pack(">i", -1)))
    check(closed(s), "a request after the session expired was served")

    # Long-lived clients re-authenticate by themselves and keep working for 10 s.
    t = topic("reauth")
    stop = time.monotonic() + 10
    p = Producer(rdkafka_conf("SCRAM-SHA-256", "sam", "sam-secret"))
    sent = 0
    while time.monotonic() < stop:
        p.produce(t, value=b"v%d" % sent)
        sent += 1
        p.poll(0)
        time.sleep(0.05)
    check(p.flush(T) == 0, "long-lived producer: records not delivered")
    c = Consumer(rdkafka_conf("SCRAM-SHA-256", "sam", "sam-secret", **{
        "group.id": "g-" + t, "auto.offset.reset": "earliest"}))
    c.subscribe([t])
    got = 0
    deadline = time.monotonic() + T
    while got < sent and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    c.close()
    check(got == sent, "long-lived consumer read %d of %d" % (got, sent))


if __name__ == "__main__":
    S.main()
