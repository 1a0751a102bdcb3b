"""Sluice for Python tests: `Broker()` (one node) and `Cluster(n)` (a replicated cluster whose
nodes a test can kill and restart) run the `sluice` binary installed with this package, on
127.0.0.1 ports chosen at start, with their data in temporary directories deleted when they
stop. Both are context managers; the pytest plugin (loaded by pytest on its own once the
package is installed) offers them as the `sluice_broker` and `sluice_cluster` fixtures.

    from sluice import Broker, Cluster

    with Broker() as broker:
        print(broker.bootstrap_servers)      # 127.0.0.1:PORT, for any Kafka client

    with Cluster(3) as cluster:
        cluster.kill(cluster.leader("orders", 0))
"""

from ._binary import binary
from ._errors import SluiceError
from .broker import Broker
from .cluster import Cluster

__all__ = ["Broker", "Cluster", "SluiceError", "binary"]
