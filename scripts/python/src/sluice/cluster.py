"""`Cluster`: n `sluice` processes forming a replicated cluster on 127.0.0.1, configured as
`scripts/cluster` and Rust's `sluice::testing::Cluster` configure their nodes."""

import os
import shutil
import socket
import tempfile
import time
import weakref
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from . import _process, _wire
from ._binary import binary as find_binary
from ._errors import SluiceError
from ._process import Properties


_PORT_TRIES = 3
# What a node logs when a port it was given is taken.
_PORT_TAKEN = "Address already in use"


def _free_ports(n: int) -> List[int]:
    """`n` distinct ports free on 127.0.0.1 (held together while chosen, so they differ)."""
    held = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def _remove(procs: List[_process.Process], root: str) -> None:
    """What is left when a Cluster is never stopped: its processes killed, its directory gone."""
    for p in procs:
        p.kill()
    shutil.rmtree(root, ignore_errors=True)


class _Node:
    def __init__(self, node_id: int, port: int, controller_port: int):
        self.id = node_id
        self.port = port
        self.controller_port = controller_port
        self.proc: Optional[_process.Process] = None


class Cluster:
    """A replicated cluster for tests: `n` nodes with ids 1..n, each a controller (a voter of
    the metadata quorum) and a broker, every one a `sluice` process::

        with Cluster(3, {"min.insync.replicas": 2}) as cluster:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
            ...
            leader = cluster.leader("orders", 0)
            cluster.kill(leader)       # SIGKILL
            ...
            cluster.restart(leader)    # on its data and ports
        # every node killed; the directory deleted

    Each node has a PLAINTEXT and a CONTROLLER listener on ports of 127.0.0.1 chosen at start,
    a broker session timeout of 6 s (fail-over within seconds) and the internal topics'
    replication factor at most n; `properties` (Kafka's names) are set on every node after
    those. `start` returns once every node serves and lists every node as a live broker.
    """

    def __init__(
        self,
        n: int = 3,
        properties: Properties = None,
        *,
        binary: Optional[str] = None,
        start_timeout: float = 60.0,
    ):
        if n < 1:
            raise SluiceError("a cluster needs at least one node")
        self.size = n
        self._properties = _process.settings(properties)
        self._binary = binary
        self.start_timeout = start_timeout
        self._nodes: List[_Node] = []
        self._root: Optional[str] = None
        self._finalizer: Optional[weakref.finalize] = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> "Cluster":
        """Starts every node, then returns once each answers and lists all n brokers."""
        if self._root is not None:
            raise SluiceError("the cluster is already started")
        binary = self._binary or find_binary()
        # The ports are picked free, then bound by the nodes: another process may take one in
        # between, and the cluster then starts again on other ports.
        for attempt in range(1, _PORT_TRIES + 1):
            try:
                self._start_once(binary)
                return self
            except SluiceError as e:
                if attempt == _PORT_TRIES or _PORT_TAKEN not in str(e):
                    raise
        raise AssertionError("unreachable")

    def _start_once(self, binary: str) -> None:
        ports = _free_ports(2 * self.size)
        self._nodes = [_Node(i + 1, ports[2 * i], ports[2 * i + 1]) for i in range(self.size)]
        self._root = tempfile.mkdtemp(prefix="sluice-cluster-")
        procs = []
        for node in self._nodes:
            node.proc = _process.Process(
                binary,
                self._settings(node),
                os.path.join(self._root, f"node-{node.id}.log"),
                f"sluice cluster node {node.id}",
            )
            procs.append(node.proc)
        self._finalizer = weakref.finalize(self, _remove, procs, self._root)
        try:
            # Every node starts before any is waited for: the quorum forms once a majority runs.
            for node in self._nodes:
                node.proc.launch()
            deadline = time.monotonic() + self.start_timeout
            for node in self._nodes:
                node.proc.wait_answers(("127.0.0.1", node.port), deadline)
            self._wait_listed(deadline)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Kills every node and deletes the cluster's directory (no clean shutdown is needed
        before the data goes). Stopping a stopped cluster does nothing."""
        if self._finalizer is not None:
            self._finalizer()
        self._root = None

    def __enter__(self) -> "Cluster":
        if self._root is None:
            self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop()

    # -- nodes ------------------------------------------------------------------------------

    def kill(self, node_id: int) -> None:
        """Stops node `node_id` abruptly (SIGKILL) and waits until its process is gone; what
        it wrote stays in its data dir. A node not running is left as it is."""
        self._node(node_id).proc.kill()

    def restart(self, node_id: int) -> None:
        """Starts a killed node again on its data and ports; returns once it answers and lists
        itself as a live broker."""
        node = self._node(node_id)
        if node.proc.running():
            raise SluiceError(f"node {node_id} is running")
        node.proc.launch()
        deadline = time.monotonic() + self.start_timeout
        node.proc.wait_answers(("127.0.0.1", node.port), deadline)
        self._wait_listed(deadline, [node])

    def is_running(self, node_id: int) -> bool:
        return self._node(node_id).proc.running()

    def node_ids(self) -> List[int]:
        return [n.id for n in self._nodes] if self._nodes else list(range(1, self.size + 1))

    def pid(self, node_id: int) -> Optional[int]:
        proc = self._node(node_id).proc
        return proc.pid if proc.running() else None

    # -- addresses and metadata ---------------------------------------------------------------

    def bootstrap(self) -> str:
        """Every node's client address, comma-separated (a client's `bootstrap.servers`)."""
        self._require_started()
        return ",".join(f"127.0.0.1:{n.port}" for n in self._nodes)

    @property
    def bootstrap_servers(self) -> str:
        """The same as `bootstrap()`, named as the clients' setting is."""
        return self.bootstrap()

    def node_bootstrap(self, node_id: int) -> str:
        """Node `node_id`'s client address, `127.0.0.1:PORT` (the same across restarts)."""
        return f"127.0.0.1:{self._node(node_id).port}"

    def ports(self) -> Dict[int, Tuple[int, int]]:
        """Each node's (client port, controller port)."""
        self._require_started()
        return {n.id: (n.port, n.controller_port) for n in self._nodes}

    @property
    def directory(self) -> Path:
        """The cluster's directory: node-I/data (log.dirs), node-I/meta (the metadata log) and
        node-I.log (what node I logged), deleted when the cluster stops."""
        self._require_started()
        return Path(self._root)

    def log(self, node_id: int) -> str:
        """What node `node_id` logged since it was last started."""
        return self._node(node_id).proc.log()

    def leader(self, topic: str, partition: int) -> Optional[int]:
        """The leader of `topic`'s `partition` in the metadata of the lowest-id running node
        (None if no node runs or the partition has no leader there)."""
        for node in self._nodes:
            if node.proc.running():
                return self.leader_seen_by(node.id, topic, partition)
        return None

    def leader_seen_by(self, node_id: int, topic: str, partition: int) -> Optional[int]:
        """The leader of `topic`'s `partition` in node `node_id`'s metadata."""
        node = self._node(node_id)
        md = _wire.metadata(("127.0.0.1", node.port), [topic])
        p = md.partitions.get(topic, {}).get(partition)
        if p is None or p.leader < 0:
            return None
        return p.leader

    def brokers_seen_by(self, node_id: int) -> List[int]:
        """The live broker ids in node `node_id`'s metadata, sorted."""
        node = self._node(node_id)
        return sorted(_wire.metadata(("127.0.0.1", node.port), []).brokers)

    # -- inside ---------------------------------------------------------------------------------

    def _settings(self, node: _Node) -> List[Tuple[str, str]]:
        """Node `node`'s settings, as a process of a cluster has them, then the test's."""
        n = len(self._nodes)
        voters = ",".join(f"{s.id}@127.0.0.1:{s.controller_port}" for s in self._nodes)
        root = Path(self._root) / f"node-{node.id}"
        replicas = str(min(n, 3))
        return [
            ("process.roles", "broker,controller"),
            ("node.id", str(node.id)),
            ("controller.quorum.voters", voters),
            ("listeners", f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}"),
            ("advertised.listeners", f"PLAINTEXT://127.0.0.1:{node.port}"),
            ("controller.listener.names", "CONTROLLER"),
            ("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"),
            ("inter.broker.listener.name", "PLAINTEXT"),
            ("log.dirs", str(root / "data")),
            ("metadata.log.dir", str(root / "meta")),
            # Fail-over within seconds, still not set off by a loaded machine.
            ("broker.session.timeout.ms", "6000"),
            ("broker.heartbeat.interval.ms", "1000"),
            ("replica.lag.time.max.ms", "6000"),
            ("group.initial.rebalance.delay.ms", "0"),
            # Internal topics fit a cluster of fewer than 3 nodes.
            ("offsets.topic.replication.factor", replicas),
            ("transaction.state.log.replication.factor", replicas),
            ("transaction.state.log.min.isr", str(min(n, 2))),
        ] + self._properties

    def _wait_listed(self, deadline: float, nodes: Optional[List[_Node]] = None) -> None:
        """Waits until each of `nodes` (default: every running node) lists every running node
        as a live broker in its metadata."""
        want = sorted(n.id for n in self._nodes if n.proc.running())
        for node in nodes if nodes is not None else [n for n in self._nodes if n.proc.running()]:
            seen: List[int] = []
            while True:
                try:
                    seen = self.brokers_seen_by(node.id)
                except _wire.WireError:
                    seen = []
                if all(i in seen for i in want):
                    break
                if not node.proc.running() or time.monotonic() > deadline:
                    raise node.proc.failure(f"lists brokers {seen} in its metadata, not all of {want}")
                time.sleep(0.1)

    def _node(self, node_id: int) -> _Node:
        self._require_started()
        for n in self._nodes:
            if n.id == node_id:
                return n
        raise SluiceError(f"no node {node_id} (the nodes are 1..{len(self._nodes)})")

    def _require_started(self) -> None:
        if self._root is None:
            raise SluiceError("the cluster is not running (start it, or use it in a with block)")

    def __repr__(self) -> str:
        if self._root is None:
            return f"<sluice.Cluster of {self.size}, stopped>"
        return f"<sluice.Cluster bootstrap={self.bootstrap()}>"
