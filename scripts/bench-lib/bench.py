#!/usr/bin/env python3
"""Driver of scripts/bench: Sluice against Apache Kafka on this machine.

Each repetition starts one broker at a time (never both), runs every workload on it, stops it
and deletes its data; the brokers alternate (K S, S K, K S, ...) so that drift of the machine
hits both alike. Results: per metric the median over repetitions, the range, and the ratio
Sluice/Kafka of the medians. Raw per-run records go to <out>/runs.jsonl, the tables to
<out>/results.md and <out>/results.json; docs/bench.md and docs/bench.png are updated from them
with --publish.
"""

import argparse
import glob
import json
import os
import platform
import shutil
import signal
import statistics
import ssl
import subprocess
import sys
import threading
import time

import kwire

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPTS = os.path.join(ROOT, "scripts")
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

SIZES = [100, 1024, 16384]
ACKS = ["1", "all"]
# Many-partitions steps measured in the first repetition only.
ONE_REP_STEPS = {100_000}

# Broker settings given to both brokers explicitly: 1 GiB segments, no forced fsync (the OS
# writes back), one partition per new topic (Kafka's defaults), and no initial rebalance delay
# for a new group (the value of Kafka's shipped config/server.properties; broker-ctl gives it
# to Kafka anyway, so Sluice must get it too).
COMMON_SETTINGS = {
    "log.segment.bytes": "1073741824",
    "log.flush.interval.messages": "9223372036854775807",
    "num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
}
# Kafka's own start script (bin/kafka-server-start.sh + kafka-run-class.sh) defaults.
KAFKA_HEAP = "-Xmx1G -Xms1G"
KAFKA_JVM = ("-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 "
             "-XX:+ExplicitGCInvokesConcurrent")


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def kafka_version(libs):
    """The broker's version, from the name of the kafka_2.13-<version>.jar in the classpath dir."""
    jars = glob.glob(os.path.join(libs, "kafka_2.13-*.jar"))
    return os.path.basename(jars[0])[len("kafka_2.13-"):-len(".jar")] if jars else "?"


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def proc_cpu(pid):
    """utime+stime of a process (all its threads), seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def proc_rss(pid):
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return None


def proc_fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


class RssSampler:
    """Samples a process's RSS every 100 ms in a thread; keeps the maximum."""

    def __init__(self, pid):
        self.pid, self.max, self._stop = pid, 0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            r = proc_rss(self.pid)
            if r:
                self.max = max(self.max, r)
            self._stop.wait(0.1)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *a):
        self._stop.set()
        self._t.join()


def remove(path):
    """Deletes a data dir. `rm -rf` rather than shutil.rmtree: with 100,000 partition dirs
    (half a million files) it takes about a third less time here, as it neither stats each
    entry from Python nor builds a path string per file."""
    if os.path.lexists(path):
        subprocess.run(["rm", "-rf", "--", path], check=False)


def run_client(cmd, timeout, env=None):
    """Runs a load generator; returns (rc, stdout, stderr, wall s, its CPU s from wait4)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         start_new_session=True)
    out_chunks, err_chunks = [], []
    to = threading.Thread(target=lambda: out_chunks.append(p.stdout.read()), daemon=True)
    te = threading.Thread(target=lambda: err_chunks.append(p.stderr.read()), daemon=True)
    to.start()
    te.start()
    deadline = t0 + timeout
    rusage = None
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            rusage = ru
            break
        if time.monotonic() > deadline:
            os.killpg(p.pid, signal.SIGKILL)
            _, status, rusage = os.wait4(p.pid, 0)
            break
        time.sleep(0.01)
    p.returncode = os.waitstatus_to_exitcode(status)
    to.join(5)
    te.join(5)
    wall = time.monotonic() - t0
    out = (out_chunks[0] if out_chunks else b"").decode(errors="replace")
    err = (err_chunks[0] if err_chunks else b"").decode(errors="replace")
    cpu = rusage.ru_utime + rusage.ru_stime if rusage else None
    return p.returncode, out, err, wall, cpu


class Broker:
    """One broker, started and stopped through scripts/broker-ctl."""

    def __init__(self, kind, port, work, sluice_bin, kafka_libs):
        self.kind, self.port, self.work = kind, port, work
        self.data = os.path.join(work, f"data-{kind}")
        self.stamp = os.path.join(work, f"start-stamp-{kind}")
        self.bindir = os.path.join(work, "bin")
        self.sluice_bin, self.kafka_libs = sluice_bin, kafka_libs
        self.pid = None
        # Extra settings (the TLS phase's SSL listener), appended to the common ones.
        self.extra = []
        os.makedirs(self.bindir, exist_ok=True)
        # Wrappers that note the wall-clock time right before the broker process is exec'd,
        # so start-up time is measured from process start (not from broker-ctl's own checks,
        # nor Kafka's one-time storage formatting).
        real_java = shutil.which("java")
        with open(os.path.join(self.bindir, "java"), "w") as f:
            f.write("#!/usr/bin/env bash\n"
                    'for a in "$@"; do [[ "$a" == kafka.Kafka ]] && '
                    f'echo "$EPOCHREALTIME" > "{os.path.join(work, "start-stamp-kafka")}"; done\n'
                    f'exec "{real_java}" "$@"\n')
        with open(os.path.join(self.bindir, "sluice"), "w") as f:
            f.write("#!/usr/bin/env bash\n"
                    f'echo "$EPOCHREALTIME" > "{os.path.join(work, "start-stamp-sluice")}"\n'
                    f'exec "{sluice_bin}" "$@"\n')
        for n in ("java", "sluice"):
            os.chmod(os.path.join(self.bindir, n), 0o755)

    def env(self):
        e = dict(os.environ)
        e.update({
            "BROKER_KIND": self.kind,
            "BROKER_PORT": str(self.port),
            "BROKER_DATA": self.data,
            "BROKER_LOG": os.path.join(self.work, f"broker-{self.kind}.log"),
            "BROKER_PIDFILE": os.path.join(self.work, f"broker-{self.kind}.pid"),
            "BROKER_OVERRIDES": " ".join([f"{k}={v}" for k, v in COMMON_SETTINGS.items()]
                                         + self.extra),
            "SLUICE_BIN": os.path.join(self.bindir, "sluice"),
            "KAFKA_LIBS": self.kafka_libs,
            "KAFKA_HEAP_OPTS": KAFKA_HEAP,
            "KAFKA_JVM_OPTS": KAFKA_JVM,
            "PATH": self.bindir + os.pathsep + e.get("PATH", ""),
        })
        return e

    def ctl(self, cmd, timeout=180):
        return subprocess.run([os.path.join(SCRIPTS, "broker-ctl"), cmd], env=self.env(),
                              capture_output=True, text=True, timeout=timeout)

    def start(self, keep_data=False):
        """Starts the broker, on an empty data dir unless keep_data; returns seconds from
        process start to the first Metadata response that lists a broker (and leaves the
        seconds to the first accepted connection in self.first_connect_s)."""
        if not keep_data:
            remove(self.data)
        self.first_connect_s = None
        first_connect = None
        for p in (self.stamp,):
            if os.path.exists(p):
                os.remove(p)
        ctl = subprocess.Popen([os.path.join(SCRIPTS, "broker-ctl"), "start"], env=self.env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first_ok = None
        deadline = time.monotonic() + 180
        while first_ok is None and time.monotonic() < deadline:
            try:
                with kwire.connect(self.port, timeout=1.0) as s:
                    if s.getsockname() == s.getpeername():
                        # TCP self-connect (a port in the ephemeral range, nothing listening
                        # yet): it would hold the broker's port.
                        continue
                    if first_connect is None:
                        first_connect = time.time()
                    n, _ = kwire.metadata(s, [])
                    if n >= 1:
                        first_ok = time.time()
                        break
            except (OSError, ValueError, Exception):
                pass
            if ctl.poll() is not None and ctl.returncode != 0:
                break
            time.sleep(0.001)
        out, err = ctl.communicate(timeout=200)
        if ctl.returncode != 0:
            raise RuntimeError(f"{self.kind} did not start: {err.strip()[-2000:]}")
        with open(os.path.join(self.work, f"broker-{self.kind}.pid")) as f:
            self.pid = int(f.read().strip())
        with open(self.stamp) as f:
            t0 = float(f.read().strip())
        if first_connect:
            self.first_connect_s = first_connect - t0
        return first_ok - t0 if first_ok else None

    def kill9(self):
        """SIGKILL, the data kept (a restart measures recovery); the data is then written
        back (sync), so that the restart's time holds no write-back of the killed run."""
        self.ctl("kill9", timeout=120)
        self.pid = None
        subprocess.run(["sync"], check=False)

    def stop(self):
        # SIGKILL: shutdown is not measured and the data is deleted (Kafka's orderly shutdown
        # with 10,000 partitions takes half a minute here). No sync: deleted files' dirty
        # pages are dropped, not written (a sync here took 20 s after a phase's writes).
        self.ctl("kill9", timeout=120)
        self.pid = None
        remove(self.data)

    def cpu(self):
        return proc_cpu(self.pid)

    def rss(self):
        return proc_rss(self.pid)


class Bench:
    def __init__(self, args):
        self.a = args
        self.quick = args.quick
        self.port = args.port
        self.work = args.out
        os.makedirs(self.work, exist_ok=True)
        self.runs_file = open(os.path.join(self.work, "runs.jsonl"), "a")
        self.loadgen = args.loadgen
        self.kafka_libs = args.kafka_libs
        self.brokers = {k: Broker(k, self.port, self.work, args.sluice_bin, args.kafka_libs)
                        for k in ("kafka", "sluice")}
        self.results = []  # dicts: rep, broker, workload, metrics
        self.kafka_max = {}  # (size, acks) -> records/s of Kafka's unthrottled Java produce
        self.sluice_groups = None
        s = 1 if self.quick else args.scale
        # Records per unthrottled produce run (about 3-4 s on Kafka here at full scale).
        # Record counts per unthrottled run: a few seconds on Kafka here (ProducerPerformance
        # longer: its JVM compiles for the first seconds, a fixed cost that would otherwise
        # weigh more on the broker where the run is shorter); native topics stay below one
        # 1 GiB segment, so no run includes a segment roll.
        self.n_java = {100: int(600_000 * s), 1024: int(150_000 * s), 16384: int(8_000 * s)}
        self.n_native = {100: int(3_000_000 * s), 1024: int(800_000 * s), 16384: int(50_000 * s)}
        if self.quick:
            self.n_java = {100: 200_000, 1024: 50_000, 16384: 3_000}
            self.n_native = {100: 600_000, 1024: 200_000, 16384: 15_000}
        self.throttled_s = 1.5 if self.quick else 2.0
        self.consume_passes = 1 if self.quick else 2
        # Partition counts of the many-partitions steps (each a topic of its own, created,
        # produced to round-robin, consumed, then polled for the fetch cost).
        # 100,000 on Sluice only: Kafka keeps about one descriptor open per two partitions and
        # this machine allows 20,000 per process (not raisable here), so Kafka cannot hold them.
        # 100,000 runs in the first repetition only (ONE_REP_STEPS): its create, fill, read
        # and data dir deletion took about four minutes a repetition.
        self.part_steps = [1_000] if self.quick else [1_000, 10_000, 100_000]
        self.parts_records = 20_000 if self.quick else 100_000
        self.conns = 500 if self.quick else 10_000
        # Fetch cost: fetches per (partitions, mode), bounded in count and time.
        self.fetches, self.fetch_s = (50_000, 1.0) if self.quick else (100_000, 2.0)

    def java_size(self, gen, size):
        """Whether an unthrottled produce of generator `gen` runs at record size `size`: in
        --quick, ProducerPerformance only at 1 KiB. Each Java run starts a JVM that compiles
        for its first seconds: in the last --quick run (471 s) they took 218 s, and Kafka's
        restart with TLS another 56 s, so --quick also leaves out the throttled Java runs,
        ConsumerPerformance and the TLS phase (unless --only names them); the native
        generator covers every size and the full run everything."""
        return gen != "java" or not self.quick or size == 1024 or bool(self.a.only)

    # --- bookkeeping ------------------------------------------------------------------------

    def record(self, rep, broker, workload, **metrics):
        row = {"rep": rep, "broker": broker, "workload": workload, **metrics}
        self.results.append(row)
        self.runs_file.write(json.dumps(row) + "\n")
        self.runs_file.flush()
        short = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in metrics.items()
                 if k in ("mb_s", "rec_s", "p99_ms", "p99_us", "seconds", "broker_cpu_s",
                          "client_cpu_s", "error", "startup_ms", "rss_mb")}
        log(f"rep {rep} {broker:6} {workload:24} {short}")

    def measure(self, broker, fn):
        """Runs fn() and adds the broker's CPU seconds and peak RSS during it.

        Dirty pages are written back first (not timed): past ~2 GB of dirty data the kernel's
        background writeback runs concurrently with the broker's writes and makes them several
        times as expensive, so without this a workload's cost would depend on how much the
        previous ones wrote (measured here: 16 KiB produce 1,671 MB/s on a clean page cache,
        443 MB/s with 2 GB dirty, on either broker alike)."""
        subprocess.run(["sync"], check=False)
        c0 = broker.cpu()
        t0 = time.monotonic()
        with RssSampler(broker.pid) as rs:
            out = fn()
        out["wall_s"] = time.monotonic() - t0
        c1 = broker.cpu()
        out["broker_cpu_s"] = (c1 - c0) if (c0 is not None and c1 is not None) else None
        out["broker_rss_peak_mb"] = rs.max / 2**20
        return out

    # --- load generators ----------------------------------------------------------------------

    def java_produce(self, topic, size, count, acks, throughput=-1, linger=None):
        props = [f"bootstrap.servers=127.0.0.1:{self.port}", f"acks={acks}",
                 "enable.idempotence=false"]
        if linger is not None:
            props.append(f"linger.ms={linger}")
        cmd = [os.path.join(SCRIPTS, "kafka-run-class"),
               "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
               "--num-records", str(count), "--record-size", str(size),
               "--throughput", str(throughput), "--producer-props", *props]
        env = dict(os.environ, KAFKA_LIBS=self.kafka_libs)
        rc, out, err, wall, cpu = run_client(cmd, timeout=300, env=env)
        res = {"client": "java", "client_cpu_s": cpu, "client_wall_s": wall}
        final = [l for l in out.splitlines() if "records sent" in l and "th." in l]
        if rc != 0 or not final:
            res["error"] = (err.strip() or out.strip())[-500:] or f"exit {rc}"
            return res
        # "N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency,
        #  a ms 50th, b ms 95th, c ms 99th, d ms 99.9th."
        parts = [p.strip() for p in final[-1].rstrip(".").split(",")]
        res["records"] = int(parts[0].split()[0])
        res["rec_s"] = float(parts[1].split()[0])
        res["mb_s"] = res["rec_s"] * size / 1e6
        res["avg_ms"] = float(parts[2].split()[0])
        res["max_ms"] = float(parts[3].split()[0])
        res["p50_ms"] = float(parts[4].split()[0])
        res["p95_ms"] = float(parts[5].split()[0])
        res["p99_ms"] = float(parts[6].split()[0])
        res["p999_ms"] = float(parts[7].split()[0])
        res["seconds"] = res["records"] / res["rec_s"] if res["rec_s"] else None
        return res

    def native(self, *args, timeout=240):
        cmd = [self.loadgen, "-brokers", f"127.0.0.1:{self.port}", "-timeout", "200s", *args]
        if kwire.tls_context is not None:
            cmd += ["-tls-ca", self.tls_ca]
        rc, out, err, wall, cpu = run_client(cmd, timeout=timeout)
        res = {"client": "native", "client_cpu_s": cpu, "client_wall_s": wall}
        try:
            j = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            res["error"] = (err.strip() or out.strip())[-500:] or f"exit {rc}"
            return res
        if j.get("errors") or rc != 0:
            res["error"] = j.get("first_error") or err.strip()[-500:] or f"exit {rc}"
        res.update({"records": j["records"], "bytes": j["bytes"], "seconds": j["seconds"],
                    "rec_s": j["rec_per_s"], "mb_s": j["mb_per_s"]})
        for k in ("p50_us", "p99_us", "p999_us", "max_us", "avg_us"):
            if k in j:
                res[k] = j[k]
        return res

    def create(self, name, partitions=1, timeout_ms=120000):
        """Creates a topic and waits until every partition has a leader; returns (seconds to
        the CreateTopics response, seconds until ready, how). Both brokers refuse one request
        of more than 10,000 partitions (Sluice) or 10,000 records (Kafka's KRaft controller: a
        topic of 10,000 partitions is 10,001 records) with POLICY_VIOLATION: then the topic is
        created with at most 5,000 and grown with CreatePartitions 5,000 at a time, as an
        operator has to."""
        how = "CreateTopics"
        step = 5_000
        with kwire.connect(self.port, timeout=60) as s:
            t0 = time.monotonic()
            err, msg = kwire.create_topic(s, name, partitions, timeout_ms=timeout_ms)
            if err == 44 and partitions > 1:
                how = "CreateTopics + CreatePartitions"
                have = min(partitions // 2, step)
                err, msg = kwire.create_topic(s, name, have, timeout_ms=timeout_ms, corr=2)
                corr = 3
                while not err and have < partitions:
                    have = min(have + step, partitions)
                    err, msg = kwire.create_partitions(s, name, have, timeout_ms, corr=corr)
                    corr += 1
            t_resp = time.monotonic() - t0
        if err:
            raise RuntimeError(f"{how} {name}: error {err} {msg}")
        t_ready = kwire.wait_topic_ready(self.port, name, partitions, timeout=300)
        return t_resp, t_resp + t_ready, how

    # --- workloads ----------------------------------------------------------------------------

    def phase(self, rep, kind):
        b = self.brokers[kind]
        log(f"rep {rep}: starting {kind} (load average {loadavg()})")
        startup = b.start()
        time.sleep(2.0)
        self.record(rep, kind, "startup", startup_ms=startup * 1000 if startup else None,
                    rss_mb=b.rss() / 2**20, fds=proc_fds(b.pid),
                    broker_cpu_s=b.cpu(), load=loadavg()[0])
        try:
            self.workloads(rep, kind, b)
        finally:
            b.stop()

    def startup_modes(self, rep):
        """Sluice only: a single node's start-up (its one-voter Raft quorum) on an empty data
        dir and again after kill -9 with a topic of 1,000 partitions: ms from process start to
        the first accepted connection and to the first Metadata answer listing a broker.
        (Earlier runs also measured the `file` metadata mode, since removed.)"""
        b = self.brokers["sluice"]
        for mode in ("raft",):
            row = {}
            try:
                row["empty_ms"] = b.start() * 1000
                row["empty_connect_ms"] = b.first_connect_s * 1000
                self.create("startup-1000", 1_000)
                b.kill9()
                row["restart_ms"] = b.start(keep_data=True) * 1000
                row["restart_connect_ms"] = b.first_connect_s * 1000
            except Exception as e:  # noqa: BLE001 (one row's failure is reported in its cell)
                row["error"] = str(e)[-300:]
            finally:
                b.stop()
            self.record(rep, "sluice", f"startup-{mode}", **row)

    def workloads(self, rep, kind, b):
        w = self.a.only
        want = lambda name: (not w) or any(x in name for x in w.split(","))  # noqa: E731
        if kind == "sluice" and self.sluice_groups is None:
            with kwire.connect(self.port) as s:
                self.sluice_groups = 11 in kwire.api_versions(s)

        # Idle connections first, on the fresh broker: RSS growth after the other workloads
        # would partly land in memory they freed.
        if want("connections"):
            self.connections(rep, kind, b)

        # Warm-up (not reported): lets the JVM compile its hot paths before anything is timed,
        # and gives both brokers the same history.
        self.create("warmup")
        self.native("-mode", "produce", "-topic", "warmup", "-size", "1024", "-count",
                    str(100_000 if self.quick else 300_000), "-acks", "1")
        self.java_produce("warmup", 1024, 50_000 if self.quick else 200_000, "1")
        self.native("-mode", "consume", "-topic", "warmup", "-count", "100000")

        for size in SIZES:
            # Unthrottled produce. ProducerPerformance: Kafka's own producer with its defaults
            # (batch.size 16 KiB, linger.ms 5). Native: franz-go, 1 MB batches, linger 5 ms.
            for gen in ("java", "native"):
                for acks in ACKS:
                    name = f"produce-{gen}-{size}-acks{acks}"
                    topic = f"{gen}-{size}-acks{acks}"
                    self.create(topic)
                    if not want(name) or not self.java_size(gen, size):
                        continue
                    if gen == "java":
                        r = self.measure(b, lambda: self.java_produce(
                            topic, size, self.n_java[size], acks))
                    else:
                        r = self.measure(b, lambda: self.native(
                            "-mode", "produce", "-topic", topic, "-size", str(size), "-count",
                            str(self.n_native[size]), "-acks", acks))
                    self.record(rep, kind, name, **r)
                    if kind == "kafka" and "rec_s" in r:
                        self.kafka_max.setdefault((gen, size, acks), r["rec_s"])
            # Consume from the beginning what the native producer wrote (acks=1 topic).
            if want(f"consume-native-{size}"):
                self.consume(rep, kind, b, f"native-{size}-acks1", size, self.n_native[size])
            # Throttled at half of Kafka's maximum for the same generator, size and acks (from
            # the first Kafka repetition, which always runs before any throttled run).
            # linger 0 on both clients, so the latency is the broker's and the network's, not
            # the client's batching delay.
            for gen in ("native", "java"):
                for acks in ACKS:
                    name = f"latency-{gen}-{size}-acks{acks}"
                    rate = self.kafka_max.get((gen, size, acks))
                    if not rate or not want(name) or (self.quick and gen == "java" and not self.a.only):
                        continue
                    rate = max(1, int(rate / 2))
                    count = max(1000, int(rate * self.throttled_s))
                    topic = f"lat-{gen}-{size}-acks{acks}"
                    self.create(topic)
                    if gen == "java":
                        r = self.measure(b, lambda: self.java_produce(
                            topic, size, count, acks, throughput=rate, linger=0))
                    else:
                        r = self.measure(b, lambda: self.native(
                            "-mode", "produce", "-topic", topic, "-size", str(size), "-count",
                            str(count), "-acks", acks, "-rate", str(rate), "-linger", "0s"))
                    self.record(rep, kind, name, rate=rate, **r)
        # Eight producer connections at once, one partition each.
        for size in (100, 1024):
            for acks in ACKS:
                name = f"produce8-native-{size}-acks{acks}"
                if want(name):
                    self.produce_conns(rep, kind, b, name, size, acks, 8)
        if want("consume-java") and (not self.quick or self.a.only):
            self.consume_java(rep, kind, b)
        if want("fetch-"):
            self.fetch_topic(rep, kind, b, "fetch-10", 10, 1_000)
        for n in self.part_steps:
            if n in ONE_REP_STEPS and rep > 1:
                continue
            if want("partitions") or want("fetch-"):
                self.many_partitions(rep, kind, b, n, with_create=want("partitions"))
        self.record(rep, kind, "end", rss_mb=b.rss() / 2**20, fds=proc_fds(b.pid))

    def consume(self, rep, kind, b, topic, size, count, name=None):
        def go():
            tot = {"records": 0, "bytes": 0, "seconds": 0.0, "client_cpu_s": 0.0}
            for _ in range(self.consume_passes):
                r = self.native("-mode", "consume", "-topic", topic, "-count", str(count))
                if "error" in r:
                    return r
                for k in tot:
                    tot[k] += r[k]
            tot["rec_s"] = tot["records"] / tot["seconds"]
            tot["mb_s"] = tot["bytes"] / tot["seconds"] / 1e6
            tot["client"] = "native"
            return tot
        r = self.measure(b, go)
        if r.get("broker_cpu_s") is not None and r.get("bytes"):
            r["broker_cpu_s_per_gib"] = r["broker_cpu_s"] / (r["bytes"] / 2**30)
        self.record(rep, kind, name or f"consume-native-{size}", **r)

    def tls_phase(self, rep, kind):
        """The broker restarted with one SSL listener (protocol-tests/tls/make-certs' PEM
        keystore, no client authentication), a 1 KiB topic written over TLS, then consumed
        from the beginning over TLS: consume-tls-1024, to set against consume-native-1024
        (the same over PLAINTEXT, where Sluice uses sendfile)."""
        b = self.brokers[kind]
        pki = os.path.join(self.work, "pki")
        if not os.path.exists(os.path.join(pki, "broker.pem")):
            subprocess.run([os.path.join(ROOT, "protocol-tests", "tls", "make-certs"), pki],
                           check=True, capture_output=True)
        self.tls_ca = os.path.join(pki, "ca.pem")
        addr = f"127.0.0.1:{self.port}"
        # The truststore is for Kafka's own inter-broker client, which it checks at start-up.
        b.extra = ["ssl.keystore.type=PEM", f"ssl.keystore.location={pki}/broker.pem",
                   "ssl.truststore.type=PEM", f"ssl.truststore.location={self.tls_ca}",
                   f"advertised.listeners=SSL://{addr}"]
        if kind == "kafka":
            b.extra += [f"listeners=SSL://{addr},CONTROLLER://127.0.0.1:{self.port + 1}",
                        "listener.security.protocol.map=SSL:SSL,CONTROLLER:PLAINTEXT",
                        "inter.broker.listener.name=SSL"]
        else:
            b.extra += [f"listeners=SSL://{addr}"]
        kwire.tls_context = ssl.create_default_context(cafile=self.tls_ca)
        log(f"rep {rep}: starting {kind} with an SSL listener (load average {loadavg()})")
        try:
            b.start()
            time.sleep(2.0)
            topic, count = "tls-1024", self.n_native[1024]
            self.create(topic)
            r = self.native("-mode", "produce", "-topic", topic, "-size", "1024", "-count",
                            str(count), "-acks", "1")
            if "error" in r:
                self.record(rep, kind, "consume-tls-1024", error="produce: " + r["error"])
                return
            self.consume(rep, kind, b, topic, 1024, count, name="consume-tls-1024")
        finally:
            kwire.tls_context = None
            b.extra = []
            b.stop()

    def consume_java(self, rep, kind, b):
        """Kafka's ConsumerPerformance (1 KiB topic). It needs consumer groups: run on Sluice
        only once Sluice advertises JoinGroup."""
        if kind == "sluice" and not self.sluice_groups:
            self.record(rep, kind, "consume-java-1024", skipped="no consumer groups in Sluice yet")
            return
        topic, count = "java-1024-acks1", self.n_java[1024]
        cmd = [os.path.join(SCRIPTS, "kafka-run-class"),
               "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server",
               f"127.0.0.1:{self.port}", "--topic", topic, "--messages", str(count),
               "--group", f"bench-{rep}", "--timeout", "60000", "--hide-header"]

        def go():
            env = dict(os.environ, KAFKA_LIBS=self.kafka_libs)
            rc, out, err, wall, cpu = run_client(cmd, timeout=180, env=env)
            res = {"client": "java", "client_cpu_s": cpu, "client_wall_s": wall}
            # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg,
            # nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
            rows = [l for l in out.splitlines() if l.count(",") >= 9]
            if rc != 0 or not rows:
                res["error"] = (err.strip() or out.strip())[-500:] or f"exit {rc}"
                return res
            f = [x.strip() for x in rows[-1].split(",")]
            res["bytes"] = float(f[2]) * 2**20
            res["records"] = int(f[4])
            res["rebalance_ms"] = float(f[6])
            res["fetch_ms"] = float(f[7])
            res["mb_s"] = float(f[8]) * 2**20 / 1e6  # fetch MB/s, excluding the group join
            res["rec_s"] = float(f[9])
            return res
        r = self.measure(b, go)
        if r.get("broker_cpu_s") is not None and r.get("bytes"):
            r["broker_cpu_s_per_gib"] = r["broker_cpu_s"] / (r["bytes"] / 2**30)
        self.record(rep, kind, "consume-java-1024", **r)

    def produce_conns(self, rep, kind, b, name, size, acks, conns):
        """`conns` native producers at once, each on its own connection to its own partition
        of one topic; MB/s = all their bytes over the longest one's time."""
        topic = name.replace("produce8-native-", "p8-")
        self.create(topic, conns)
        count = max(1000, self.n_native[size] // conns)

        def go():
            outs = [None] * conns

            def one(i):
                outs[i] = self.native("-mode", "produce", "-topic", topic, "-partition", str(i),
                                      "-size", str(size), "-count", str(count), "-acks", acks)
            ts = [threading.Thread(target=one, args=(i,)) for i in range(conns)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            errs = [o["error"] for o in outs if o and "error" in o]
            if errs or any(o is None for o in outs):
                return {"error": (errs or ["a producer did not report"])[0]}
            secs = max(o["seconds"] for o in outs)
            total = sum(o["bytes"] for o in outs)
            return {"client": "native", "connections": conns,
                    "records": sum(o["records"] for o in outs), "bytes": total,
                    "seconds": secs, "mb_s": total / secs / 1e6,
                    "rec_s": sum(o["records"] for o in outs) / secs,
                    "client_cpu_s": sum(o.get("client_cpu_s") or 0 for o in outs)}
        self.record(rep, kind, name, **self.measure(b, go))

    def many_partitions(self, rep, kind, b, n, with_create=True):
        """A topic of n partitions: created (time until every partition has a leader, RSS,
        descriptors), produced to round-robin, consumed from the start over all partitions,
        then the fetch cost of polling all of them."""
        name = f"parts-{n}"
        if kind == "kafka" and n > 10_000:
            why = ("not run: Kafka keeps every segment open (about 5,200 descriptors for "
                   "10,000 partitions) and this machine's limit is 20,000 per process")
            for w in ("create", "produce", "consume"):
                self.record(rep, kind, f"partitions-{n}-{w}", skipped=why)
            return
        # As in measure(): with the earlier workloads' data still being written back, every
        # fsync waits for it (ext4 ordered mode).
        subprocess.run(["sync"], check=False)
        rss0 = b.rss()
        c0 = b.cpu()
        try:
            t_resp, t_ready, how = self.create(name, n, timeout_ms=300000)
        except Exception as e:  # noqa: BLE001 - reported, not fatal
            self.record(rep, kind, f"partitions-{n}-create", error=str(e)[-300:],
                        rss_mb=(b.rss() or 0) / 2**20)
            return
        if with_create:
            self.record(rep, kind, f"partitions-{n}-create", seconds=t_ready, response_s=t_resp,
                        how=how, broker_cpu_s=b.cpu() - c0, rss_mb=b.rss() / 2**20,
                        rss_growth_mb=(b.rss() - rss0) / 2**20, fds=proc_fds(b.pid))
        self.fetch_topic(rep, kind, b, name, n, self.parts_records,
                         prefix=f"partitions-{n}" if with_create else None)

    def fetch_topic(self, rep, kind, b, topic, n, records, prefix=None):
        """Fills `topic` (n partitions; created here unless it exists) round-robin with
        `records` records of 100 B, reads them all back with Fetch over every partition
        (recorded as <prefix>-produce and <prefix>-consume when a prefix is given), then
        measures fetch-<n>-full and fetch-<n>-session at the high watermarks."""
        if not topic.startswith("parts-"):
            self.create(topic, n)
        r = self.measure(b, lambda: self.native(
            "-mode", "produce", "-topic", topic, "-partition", "-1", "-size", "100",
            "-count", str(records), "-acks", "1"))
        r["rss_mb"] = b.rss() / 2**20
        if prefix:
            self.record(rep, kind, f"{prefix}-produce", **r)
        if "error" in r:
            return
        c = self.measure(b, lambda: self.consume_all(topic, n, r["records"]))
        offsets = c.pop("offsets", None)
        if prefix:
            self.record(rep, kind, f"{prefix}-consume", **c)
        if offsets is None:
            return
        for mode in ("full", "session"):
            self.record(rep, kind, f"fetch-{n}-{mode}",
                        **self.fetch_cost(b, topic, offsets, mode == "session"))

    def consume_all(self, topic, n, expected, timeout=120):
        """Reads every partition of `topic` from offset 0 with Fetch v11 over all partitions
        until `expected` records came back; the next offset of each partition."""
        offsets = {p: 0 for p in range(n)}
        got, corr = 0, 0
        t0 = time.monotonic()
        with kwire.connect(self.port, timeout=60) as s:
            while got < expected and time.monotonic() - t0 < timeout:
                corr += 1
                _, _, err, _, parts = kwire.fetch_send(s, kwire.fetch_request(topic, offsets), corr)
                if err:
                    return {"error": f"Fetch error {err}"}
                moved = False
                for p, (perr, _hw, records) in parts.items():
                    if perr or p not in offsets:
                        continue
                    k, nxt = kwire.batches_end(records)
                    if nxt is not None and nxt > offsets[p]:
                        offsets[p], got, moved = nxt, got + k, True
                if not moved:
                    time.sleep(0.01)
        secs = time.monotonic() - t0
        out = {"records": got, "seconds": secs, "rec_s": got / secs, "fetches": corr}
        if got < expected:
            out["error"] = f"read {got} of {expected} records in {secs:.0f} s"
        else:
            out["offsets"] = offsets
        return out

    def fetch_cost(self, b, topic, offsets, session):
        """Polls every partition of `topic` at `offsets` (nothing new to read) with max wait 0:
        without a session every request names every partition and every answer lists them;
        in an incremental session (KIP-227), after the full fetch that opens it, requests
        and answers carry only what changed, here nothing. Broker CPU µs, wall ms, request
        and response bytes per fetch."""
        with kwire.connect(self.port, timeout=60) as s:
            sid, epoch, corr = 0, -1, 1
            if session:
                _, _, err, sid, _ = kwire.fetch_send(s, kwire.fetch_request(topic, offsets, 0, 0))
                if err or not sid:
                    return {"error": f"no fetch session (error {err}, session id {sid})"}
                epoch = 1
            body = kwire.fetch_request(topic, offsets)
            count, req_b, resp_b, parts_back = 0, 0, 0, 0
            subprocess.run(["sync"], check=False)
            c0 = b.cpu()
            t0 = time.monotonic()
            while count < self.fetches and time.monotonic() - t0 < self.fetch_s:
                if session:
                    body = kwire.fetch_request(topic, {}, sid, epoch)
                    epoch += 1
                corr += 1
                rq, rs, err, _, parts = kwire.fetch_send(s, body, corr)
                if err:
                    return {"error": f"Fetch error {err} after {count} fetches"}
                count += 1
                req_b, resp_b, parts_back = req_b + rq, resp_b + rs, parts_back + len(parts)
            wall = time.monotonic() - t0
            cpu = b.cpu() - c0
        return {"fetches": count, "partitions": len(offsets), "session": session,
                "broker_cpu_s": cpu, "wall_s": wall, "cpu_us_per_fetch": cpu / count * 1e6,
                "ms_per_fetch": wall / count * 1000, "request_bytes": req_b / count,
                "response_bytes": resp_b / count, "partitions_answered": parts_back / count}

    def connections(self, rep, kind, b):
        """Opens N connections, each answering one ApiVersions, holds them, then checks that the
        broker still answers Metadata quickly and that every connection still works."""
        import socket
        n = self.conns
        subprocess.run(["sync"], check=False)
        rss0, c0 = b.rss(), b.cpu()
        socks = []
        err = None
        t0 = time.monotonic()
        try:
            for _ in range(n):
                s = kwire.connect(self.port, timeout=10)
                kwire.api_versions(s)
                socks.append(s)
        except (OSError, ValueError) as e:
            err = f"after {len(socks)} connections: {e}"
        t_open = time.monotonic() - t0
        time.sleep(2.0)
        rss1 = b.rss()
        lat = []
        for i in range(20):
            t = time.monotonic()
            with kwire.connect(self.port) as s:
                kwire.metadata(s, [])
            lat.append(time.monotonic() - t)
        alive = 0
        for i, s in enumerate(socks):
            try:
                kwire.api_versions(s, corr=2)
                alive += 1
            except (OSError, ValueError):
                pass
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self.record(rep, kind, f"connections-{n}", opened=len(socks), alive=alive,
                    open_s=t_open, rss_mb=rss1 / 2**20,
                    kib_per_conn=(rss1 - rss0) / 1024 / max(1, len(socks)),
                    metadata_ms=statistics.median(lat) * 1000, broker_cpu_s=b.cpu() - c0,
                    **({"error": err} if err else {}))

    # --- main ---------------------------------------------------------------------------------

    def run(self):
        reps = 1 if self.quick else self.a.reps
        order = ["kafka", "sluice"]
        t0 = time.monotonic()
        for rep in range(1, reps + 1):
            for kind in (order if rep % 2 == 1 else order[::-1]):
                if self.a.broker and kind != self.a.broker:
                    continue
                only = [x for x in self.a.only.split(",") if x]
                if not only or any("consume-tls" not in x for x in only):
                    self.phase(rep, kind)
                if kind == "sluice" and (not only or any(x in "startup-modes" for x in only)):
                    self.startup_modes(rep)
                # --quick leaves TLS out unless --only names it.
                tls = any(x in "consume-tls-1024" for x in only) if only else not self.quick
                if tls:
                    self.tls_phase(rep, kind)
        self.elapsed = time.monotonic() - t0
        log(f"done in {self.elapsed:.0f} s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply record counts")
    ap.add_argument("--port", type=int, default=19092,
                    help="below the ephemeral range: the start-up probe connects in a tight loop")
    ap.add_argument("--out", required=True)
    ap.add_argument("--loadgen", required=True)
    ap.add_argument("--kafka-libs", required=True)
    ap.add_argument("--sluice-bin", required=True)
    ap.add_argument("--only", default="", help="comma-separated substrings of workload names")
    ap.add_argument("--broker", choices=["kafka", "sluice"], help="run only this broker")
    args = ap.parse_args()
    bench = Bench(args)
    meta = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "load_at_start": loadavg(),
        "quick": args.quick,
        "host": platform.node(),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "cpu_model": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                           if l.startswith("model name")), "?"),
        "mem_gib": round(os.sysconf("SC_PHYS_PAGES") * PAGE / 2**30, 1),
        "settings": COMMON_SETTINGS,
        "kafka_version": kafka_version(args.kafka_libs),
        "kafka_heap": KAFKA_HEAP,
        "kafka_jvm": KAFKA_JVM,
    }
    try:
        bench.run()
    finally:
        meta["load_at_end"] = loadavg()
        meta["elapsed_s"] = getattr(bench, "elapsed", None)
        meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump({"meta": meta, "runs": bench.results}, f, indent=1)
        for b in bench.brokers.values():
            if b.pid:
                b.stop()


if __name__ == "__main__":
    main()
