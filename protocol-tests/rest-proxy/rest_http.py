"""Helpers of the REST Proxy suite's scripts (test_rest.py: v3, test_rest_v2.py: v2): plain
HTTP calls with Confluent's error bodies checked, unique names, records read back with a
confluent-kafka Consumer, and the SASL users of the acl phase."""
import base64
import json
import os
import time
import urllib.error
import urllib.request

from confluent_kafka import Consumer

from harness import BOOTSTRAP, RUN_TAG, check, check_error_body, info

URL = os.environ["REST_URL"]
T = 30


def http(method, path, body=None, raw=None, auth=None, headers=None,
         content_type="application/json"):
    """(status, headers, JSON body or text) of one call; a body goes as `content_type`."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(URL + path, data=data, method=method)
    if data is not None and content_type:
        req.add_header("Content-Type", content_type)
    if auth is not None:
        token = base64.b64encode(("%s:%s" % auth).encode()).decode()
        req.add_header("Authorization", "Basic " + token)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=T) as r:
            status, hdrs, text = r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        status, hdrs, text = e.code, e.headers, e.read()
    if not text:
        return status, hdrs, None
    try:
        return status, hdrs, json.loads(text)
    except ValueError:
        return status, hdrs, text.decode(errors="replace")


def ok(method, path, body=None, status=200, auth=None, **kw):
    got_status, _, got = http(method, path, body, auth=auth, **kw)
    check(got_status == status, "%s %s: %s %s" % (method, path, got_status, got))
    return got


def refused(method, path, status, code, body=None, raw=None, auth=None, message=None,
            answer_type="application/json", **kw):
    """Checks a refusal: the status, Confluent's error body and its content type."""
    got_status, hdrs, got = http(method, path, body, raw, auth, **kw)
    info("%s %s -> %s %s" % (method, path, got_status, got))
    check(got_status == status, "%s %s: status %s, wanted %s (%s)" % (
        method, path, got_status, status, got))
    check_error_body("%s %s" % (method, path), got, code, message)
    check((hdrs.get("Content-Type") or "").startswith(answer_type),
          "%s %s: content type %r" % (method, path, hdrs.get("Content-Type")))
    return got


def proxy_off(path):
    """Checks that `path` answers 404 (Confluent's body) with sluice.rest.proxy.enable=false."""
    status, _, body = http("GET", path)
    check(status == 404 and isinstance(body, dict) and body.get("error_code") == 404,
          "%s with the proxy off: %s %r" % (path, status, body))


def name(base):
    return "rp-%s-%s" % (base, RUN_TAG)


def b64(b):
    return base64.b64encode(b).decode()


def consume(topic, count, conf=None):
    """Reads `count` records of `topic` from the start with a Consumer (bounded in time)."""
    c = Consumer(dict({"bootstrap.servers": BOOTSTRAP, "group.id": "rp-read-" + topic,
                       "auto.offset.reset": "earliest", "enable.auto.commit": False},
                      **(conf or {})))
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + T
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None or m.error():
                continue
            got.append(m)
    finally:
        c.close()
    check(len(got) == count, "read %d of %d records of %s" % (len(got), count, topic))
    return got


ADMIN = ("admin", "admin-secret")
ALICE = ("alice", "alice-secret")


def sasl(user, password):
    return {"bootstrap.servers": BOOTSTRAP, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password}
