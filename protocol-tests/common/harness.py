"""Tiny scenario harness shared in shape by every protocol-tests suite.

Each scenario prints exactly one line on stdout:
    PASS <suite> <scenario>
    FAIL <suite> <scenario>: <reason>
Extra information (timings, counts) goes to stderr, prefixed with '#'.
A watchdog turns a hung scenario into a FAIL and ends the process, so a stuck
broker can never stall the runner. Exit status is 1 if anything failed.

Before each scenario the broker's port must accept a TCP connection (else an
immediate FAIL instead of a long client timeout), and once the suite has used
SUITE_BUDGET seconds (default 170, below the runner's 300) the remaining scenarios
FAIL as not run.

Usage: python3 test_x.py [scenario ...]   (no argument: run all)
"""
import json
import os
import socket
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request

BOOTSTRAP = os.environ.get("BOOTSTRAP", "127.0.0.1:9092")
BROKER_CTL = os.environ.get("BROKER_CTL", "")
# A short random tag keeps topic names unique when a suite is re-run against
# the same (non-fresh) broker during development.
RUN_TAG = "%x" % (int(time.time() * 1000) % 0xFFFFFF)


def host_ports():
    """Every host:port of BOOTSTRAP (a cluster's is comma-separated)."""
    out = []
    for hp in BOOTSTRAP.split(","):
        host, _, port = hp.strip().rpartition(":")
        out.append((host or "127.0.0.1", int(port)))
    return out


def host_port():
    return host_ports()[0]


SUITE_BUDGET = float(os.environ.get("SUITE_BUDGET", "170"))


def port_open(timeout=3.0):
    """Some broker of BOOTSTRAP accepts a TCP connection."""
    for hp in host_ports():
        try:
            socket.create_connection(hp, timeout=timeout).close()
            return True
        except OSError:
            pass
    return False


def info(msg):
    print("# " + msg, file=sys.stderr, flush=True)


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def wait_until(pred, timeout, what, interval=0.2):
    """Poll pred() until it is truthy; AssertionError after timeout seconds."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while time.monotonic() < deadline:
        try:
            v = pred()
            if v:
                return v
        except Exception as e:  # keep polling, remember why
            last_exc = e
        time.sleep(interval)
    raise AssertionError("timed out after %.0fs waiting for %s%s" % (
        timeout, what, (" (last error: %r)" % last_exc) if last_exc else ""))


class Suite:
    def __init__(self, name):
        self.name = name
        self.scenarios = []

    def scenario(self, name, timeout=60):
        def deco(fn):
            self.scenarios.append((name, fn, timeout))
            return fn
        return deco

    def _line(self, text):
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def run(self, argv=None):
        argv = sys.argv[1:] if argv is None else argv
        selected = [s for s in self.scenarios if not argv or s[0] in argv]
        unknown = set(argv) - {s[0] for s in self.scenarios}
        if unknown:
            print("unknown scenario(s): %s" % ", ".join(sorted(unknown)), file=sys.stderr)
            return 2
        failed = 0
        t_suite = time.monotonic()
        for idx, (name, fn, timeout) in enumerate(selected):
            done = threading.Event()

            def watchdog(name=name, timeout=timeout, done=done, rest=selected[idx + 1:]):
                if not done.wait(timeout):
                    self._line("FAIL %s %s: hung, no result within %ds" % (self.name, name, timeout))
                    for r in rest:
                        self._line("FAIL %s %s: not run (an earlier scenario hung)" % (self.name, r[0]))
                    os._exit(1)

            used = time.monotonic() - t_suite
            if used > SUITE_BUDGET:
                failed += 1
                self._line("FAIL %s %s: not run (suite already used %.0fs of its %.0fs budget)" % (
                    self.name, name, used, SUITE_BUDGET))
                continue
            if not port_open():
                failed += 1
                self._line("FAIL %s %s: broker at %s does not accept TCP connections" % (
                    self.name, name, BOOTSTRAP))
                continue
            threading.Thread(target=watchdog, daemon=True).start()
            t0 = time.monotonic()
            try:
                fn()
                done.set()
                self._line("PASS %s %s" % (self.name, name))
            except Exception as e:
                done.set()
                failed += 1
                reason = ("%s: %s" % (type(e).__name__, e)).replace("\n", " | ")
                if not str(e):  # e.g. a bare TimeoutError from a future: say where
                    frames = [f for f in traceback.extract_tb(e.__traceback__)
                              if os.path.basename(f.filename).startswith("test_")]
                    if frames:
                        reason += "(no message) at " + " <- ".join(
                            "%s:%d %s" % (os.path.basename(f.filename), f.lineno, f.line)
                            for f in reversed(frames[-2:]))
                if len(reason) > 600:
                    reason = reason[:600] + "..."
                self._line("FAIL %s %s: %s" % (self.name, name, reason))
                traceback.print_exc(file=sys.stderr)
            info("%s %s took %.2fs" % (self.name, name, time.monotonic() - t0))
        info("%s: %d scenario(s), %d failed, %.1fs" % (
            self.name, len(selected), failed, time.monotonic() - t_suite))
        return 1 if failed else 0

    def main(self):
        """Run, then leave at once: client libraries' background threads (librdkafka,
        asyncio) must not be able to delay or hang interpreter shutdown."""
        rc = self.run()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)


def by_offset(records):
    """Acknowledged records (dicts with partition/offset) grouped per partition in offset
    order; checks each partition's offsets run 0, 1, 2, ..."""
    out = {}
    for r in records:
        out.setdefault(r["partition"], []).append(r)
    for pp, rs in out.items():
        rs.sort(key=lambda r: r["offset"])
        offs = [r["offset"] for r in rs]
        check(offs == list(range(len(rs))),
              "partition %d acknowledged offsets not 0..%d: %s" % (pp, len(rs) - 1, offs[:20]))
    return out


def main_phase(suite, phases, phase):
    """Runs the scenarios of `phase` (one of several broker starts of a suite: `phases` maps
    each to its scenario names), only those named on the command line if any are, then
    leaves as `Suite.main` does. Names of other phases are not run here."""
    mine = phases[phase]
    asked = sys.argv[1:]
    suite.scenarios = [s for s in suite.scenarios if s[0] in mine]
    if asked:
        asked = [a for a in asked if a in mine]
        if not asked:
            os._exit(0)
    sys.argv = [sys.argv[0]] + asked
    suite.main()


def http_json(url, method, body=None, content_type="application/json", timeout=30):
    """(status, JSON body, or the text when it is not JSON) of one HTTP call to url, with
    body (any JSON value) sent as content_type."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw or b"null")
    except ValueError:
        return status, raw.decode(errors="replace")


def check_error_body(where, got, code, message=None):
    """Checks a Confluent error body (Schema Registry, REST Proxy): `error_code` is `code`, a
    non-empty `message`, equal to `message` when one is given."""
    check(isinstance(got, dict) and got.get("error_code") == code,
          "%s: body %r, wanted error_code %s" % (where, got, code))
    check(isinstance(got.get("message"), str) and got["message"],
          "%s: no message: %r" % (where, got))
    if message is not None:
        check(got["message"] == message, "%s: message %r, wanted %r" % (
            where, got["message"], message))
