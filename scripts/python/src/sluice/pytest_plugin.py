"""The pytest plugin (entry point `pytest11`, so pytest loads it once the package is
installed): a fresh broker or cluster for each test that asks for one.

    def test_round_trip(sluice_broker):
        producer = Producer({"bootstrap.servers": sluice_broker.bootstrap_servers})

    def test_failover(sluice_cluster):       # 3 nodes
        sluice_cluster.kill(sluice_cluster.leader("t", 0))

Broker properties (Kafka's names) come from the `sluice_broker_properties` and
`sluice_cluster_properties` fixtures, the cluster's size from `sluice_cluster_size`; override
them in a conftest.py, a test module or class, or per test with
`@pytest.mark.parametrize("sluice_broker_properties", [{"num.partitions": 3}])`.

When a test that uses one of them fails, its report ends with the end of each node's log.
"""

import pytest

from .broker import Broker
from .cluster import Cluster


@pytest.fixture
def sluice_broker_properties():
    """Broker properties for `sluice_broker` (none: the Broker defaults)."""
    return {}


@pytest.fixture
def sluice_broker(sluice_broker_properties):
    """A started `sluice.Broker`, stopped and deleted after the test."""
    with Broker(sluice_broker_properties) as broker:
        yield broker


@pytest.fixture
def sluice_cluster_size():
    """How many nodes `sluice_cluster` has."""
    return 3


@pytest.fixture
def sluice_cluster_properties():
    """Broker properties set on every node of `sluice_cluster`."""
    return {}


@pytest.fixture
def sluice_cluster(sluice_cluster_size, sluice_cluster_properties):
    """A started `sluice.Cluster`, its nodes killed and its directory deleted after the test."""
    with Cluster(sluice_cluster_size, sluice_cluster_properties) as cluster:
        yield cluster


_LOG_LINES = 40


def _tail(text: str) -> str:
    return "\n".join(text.rstrip().splitlines()[-_LOG_LINES:]) or "(nothing logged)"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report gets the end of its broker's or cluster nodes' logs (taken
    before the fixtures stop them)."""
    report = yield
    if report.when != "call" or not report.failed:
        return report
    funcargs = getattr(item, "funcargs", {})
    broker = funcargs.get("sluice_broker")
    if isinstance(broker, Broker) and broker.is_running():
        report.sections.append((f"sluice_broker log (last {_LOG_LINES} lines)", _tail(broker.log())))
    cluster = funcargs.get("sluice_cluster")
    if isinstance(cluster, Cluster):
        for node in cluster.node_ids():
            report.sections.append(
                (f"sluice_cluster node {node} log (last {_LOG_LINES} lines)", _tail(cluster.log(node)))
            )
    return report
