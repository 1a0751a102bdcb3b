"""Run by protocol-tests/python-wheel/run with pytest in a fresh venv holding only the sluice
wheel, pytest, confluent-kafka and kafka-python, from a directory outside the repository,
with SLUICE_BIN unset and no target/ dir on PATH. The fixtures come from the installed
package's pytest plugin (nothing here imports or registers it)."""

import errno
import glob
import os
import shutil
import socket
import sys
import sysconfig
import tempfile
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic as KpNewTopic

import sluice
from sluice import Broker, Cluster, SluiceError

WAIT_S = 60

# pytest's own fixture for running pytest on a test file written by the test
pytest_plugins = ["pytester"]


def create_topic_confluent(bootstrap, name, partitions, replicas=1, config=None):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=replicas, config=config or {})],
        request_timeout=30,
    )
    futures[name].result(timeout=30)


def produce_confluent(bootstrap, topic, values, **conf):
    """Produces `values` (strings, each its own key) with confluent-kafka; returns the
    delivery errors."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **conf})
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(str(err))

    for v in values:
        producer.produce(topic, v.encode(), key=v.encode(), on_delivery=on_delivery)
        producer.poll(0)
    left = producer.flush(WAIT_S)
    assert left == 0, f"{left} records not delivered within {WAIT_S}s"
    return errors


def consume_confluent(bootstrap, topic, partitions, want):
    """Reads `want` records from the start of `topic`'s partitions with confluent-kafka."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}-{time.monotonic_ns()}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(got) < want and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.partition(), msg.offset(), msg.value().decode()))
    finally:
        consumer.close()
    return got


def consume_kafka_python(bootstrap, topic, want):
    """Reads `want` records from the start of `topic` with kafka-python."""
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, group_id=None)
    got = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(got) < want and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend((r.partition, r.offset, r.value.decode()) for r in records)
    finally:
        consumer.close()
    return got


def port_free(port):
    """A listener could bind 127.0.0.1:port now, and nothing accepts connections there."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        return False
    finally:
        s.close()
    c = socket.socket()
    c.settimeout(2)
    try:
        return c.connect_ex(("127.0.0.1", port)) == errno.ECONNREFUSED
    finally:
        c.close()


def process_gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def leftovers():
    return sorted(glob.glob(os.path.join(tempfile.gettempdir(), "sluice-*")))


# ---- the installed package --------------------------------------------------------------------


def test_installed_package_runs_without_the_repo(request):
    prefix = os.path.realpath(sys.prefix)
    assert "SLUICE_BIN" not in os.environ
    assert not any("target" + os.sep + "release" in p for p in os.environ.get("PATH", "").split(os.pathsep))
    # the module and the binary both come from this venv
    assert os.path.realpath(sluice.__file__).startswith(prefix + os.sep), sluice.__file__
    binary = os.path.realpath(sluice.binary())
    assert binary == os.path.realpath(os.path.join(sysconfig.get_path("scripts"), "sluice")), binary
    assert binary.startswith(prefix + os.sep)
    assert shutil.which("sluice") is not None and os.path.realpath(shutil.which("sluice")) == binary
    # the fixtures come from the package's pytest11 entry point
    plugin = request.config.pluginmanager.get_plugin("sluice")
    assert plugin is not None and plugin.__name__ == "sluice.pytest_plugin"


# ---- the fixtures -----------------------------------------------------------------------------


def test_broker_fixture_round_trip_both_clients(sluice_broker):
    bootstrap = sluice_broker.bootstrap_servers
    assert bootstrap == sluice_broker.bootstrap()
    host, port = bootstrap.split(":")
    assert host == "127.0.0.1" and int(port) == sluice_broker.port > 0

    # confluent-kafka admin and producer, kafka-python consumer
    create_topic_confluent(bootstrap, "from-confluent", 3)
    values = [f"c-{i}" for i in range(300)]
    assert produce_confluent(bootstrap, "from-confluent", values) == []
    got = consume_kafka_python(bootstrap, "from-confluent", len(values))
    assert sorted(v for _, _, v in got) == sorted(values)
    assert {p for p, _, _ in got} == {0, 1, 2}

    # kafka-python admin and producer, confluent-kafka consumer
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([KpNewTopic("from-kafka-python", 2, 1)])
        assert "from-kafka-python" in admin.list_topics()
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    values = [f"k-{i}" for i in range(200)]
    futures = [producer.send("from-kafka-python", v.encode(), key=v.encode()) for v in values]
    producer.flush(WAIT_S)
    for f in futures:
        f.get(timeout=WAIT_S)
    producer.close()
    got = consume_confluent(bootstrap, "from-kafka-python", 2, len(values))
    assert sorted(v for _, _, v in got) == sorted(values)
    # each partition's offsets are 0..n-1, once each
    for p in (0, 1):
        offsets = sorted(o for q, o, _ in got if q == p)
        assert offsets == list(range(len(offsets)))


@pytest.mark.parametrize("sluice_broker_properties", [{"num.partitions": 4, "auto.create.topics.enable": True}])
def test_broker_fixture_takes_properties(sluice_broker):
    bootstrap = sluice_broker.bootstrap_servers
    assert produce_confluent(bootstrap, "auto-created", ["x"]) == []
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics
    assert len(topics["auto-created"].partitions) == 4


def test_cluster_fixture_survives_a_killed_leader(sluice_cluster):
    cluster = sluice_cluster
    bootstrap = cluster.bootstrap_servers
    assert cluster.node_ids() == [1, 2, 3]
    assert len(bootstrap.split(",")) == 3
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    assert sorted(md.brokers) == [1, 2, 3]

    create_topic_confluent(bootstrap, "replicated", 1, replicas=3, config={"min.insync.replicas": "2"})
    deadline = time.monotonic() + WAIT_S
    while cluster.leader("replicated", 0) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    leader = cluster.leader("replicated", 0)
    assert leader in (1, 2, 3)

    idempotent = {"enable.idempotence": True}
    before = [f"before-{i}" for i in range(200)]
    assert produce_confluent(bootstrap, "replicated", before, **idempotent) == []

    cluster.kill(leader)
    assert not cluster.is_running(leader)
    after = [f"after-{i}" for i in range(200)]
    assert produce_confluent(bootstrap, "replicated", after, **idempotent) == []
    new_leader = cluster.leader("replicated", 0)
    assert new_leader is not None and new_leader != leader

    # every acknowledged record, once, in order, from both clients
    got = consume_confluent(bootstrap, "replicated", 1, len(before) + len(after))
    assert [v for _, _, v in got] == before + after
    assert [o for _, o, _ in got] == list(range(len(got)))
    got = consume_kafka_python(bootstrap, "replicated", len(before) + len(after))
    assert [v for _, _, v in got] == before + after

    # the killed node comes back on its data and ports and is a live broker again
    cluster.restart(leader)
    assert cluster.is_running(leader)
    for node in cluster.node_ids():
        assert cluster.brokers_seen_by(node) == [1, 2, 3]


def test_failed_test_report_shows_the_logs(pytester):
    pytester.makepyfile(
        """
        def test_broker(sluice_broker):
            assert sluice_broker.bootstrap_servers == "nowhere"

        def test_cluster(sluice_cluster):
            assert sluice_cluster.bootstrap_servers == "nowhere"
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*sluice_broker log (last 40 lines)*",
            "*sluice * started: node id 1,*",
            "*sluice_cluster node 1 log (last 40 lines)*",
            "*sluice_cluster node 3 log (last 40 lines)*",
            "*sluice * started: node id 3,*",
        ]
    )


# ---- the context managers ---------------------------------------------------------------------


def test_broker_context_manager():
    before = leftovers()
    with Broker({"num.partitions": 2}) as broker:
        data_dir, port, pid = broker.data_dir, broker.port, broker.pid
        assert broker.is_running() and data_dir.is_dir()
        assert produce_confluent(broker.bootstrap_servers, "ctx", [f"v{i}" for i in range(20)]) == []
        assert (data_dir / "ctx-0").is_dir() and (data_dir / "ctx-1").is_dir()
        assert "started" in broker.log()
    assert not data_dir.exists()
    assert process_gone(pid)
    assert port_free(port)
    assert leftovers() == before
    with pytest.raises(SluiceError):
        broker.bootstrap()


def test_broker_bad_property_is_refused():
    before = leftovers()
    with pytest.raises(SluiceError, match='unknown key "no.such.key"'):
        Broker({"no.such.key": "1"}).start()
    with pytest.raises(SluiceError, match="num.partitions"):
        with Broker({"num.partitions": "many"}):
            pass
    assert leftovers() == before


def test_broker_on_a_kept_data_dir(tmp_path):
    kept = tmp_path / "kept"
    with Broker(data_dir=kept) as broker:
        assert broker.data_dir == kept
        assert produce_confluent(broker.bootstrap_servers, "kept", ["one", "two", "three"]) == []
    assert (kept / "kept-0").is_dir()
    with Broker(data_dir=kept) as broker:
        got = consume_confluent(broker.bootstrap_servers, "kept", 1, 3)
        assert [v for _, _, v in got] == ["one", "two", "three"]


def test_cluster_context_manager():
    before = leftovers()
    with Cluster(3) as cluster:
        directory = cluster.directory
        ports = cluster.ports()
        pids = [cluster.pid(i) for i in cluster.node_ids()]
        assert sorted(ports) == [1, 2, 3]
        assert len({p for pair in ports.values() for p in pair}) == 6
        for i in (1, 2, 3):
            assert cluster.node_bootstrap(i) == f"127.0.0.1:{ports[i][0]}"
            assert cluster.brokers_seen_by(i) == [1, 2, 3]
            assert (directory / f"node-{i}" / "meta").is_dir()
        md = AdminClient({"bootstrap.servers": cluster.bootstrap()}).list_topics(timeout=30)
        assert {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()} == {
            i: cluster.node_bootstrap(i) for i in (1, 2, 3)
        }
    assert not directory.exists()
    assert all(process_gone(pid) for pid in pids)
    assert all(port_free(p) for pair in ports.values() for p in pair)
    assert leftovers() == before
