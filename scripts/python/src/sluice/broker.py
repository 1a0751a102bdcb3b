"""`Broker`: one `sluice` process serving PLAINTEXT on an ephemeral port of 127.0.0.1, its data
in a temporary directory deleted when it stops."""

import os
import shutil
import tempfile
import time
import weakref
from pathlib import Path
from typing import Optional, Union

from . import _process
from ._binary import binary as find_binary
from ._errors import SluiceError
from ._process import Properties


def _remove(proc: _process.Process, root: str) -> None:
    """What is left when a Broker is never stopped: the process killed, its directory gone."""
    proc.kill()
    shutil.rmtree(root, ignore_errors=True)


class Broker:
    """A single-node broker for tests::

        with Broker({"num.partitions": 3}) as broker:
            producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
            ...
        # stopped; its data directory deleted

    `properties` are broker properties with Kafka's names (as in server.properties, or a list
    of pairs), over two defaults: `listeners=PLAINTEXT://127.0.0.1:0` (a port the system
    picks; the broker advertises the one it got) and `group.initial.rebalance.delay.ms=0`
    (as Kafka's own development configuration). A bad key or value makes `start` raise
    SluiceError with the broker's message. `data_dir` keeps the data in that directory (created
    if missing, left in place when the broker stops): a broker started again on it finds its
    topics and records. `binary` is the `sluice` to run (default: SLUICE_BIN, else the one
    installed with this module, else PATH).
    """

    def __init__(
        self,
        properties: Properties = None,
        *,
        data_dir: Union[str, os.PathLike, None] = None,
        binary: Optional[str] = None,
        start_timeout: float = 30.0,
        stop_timeout: float = 30.0,
    ):
        self._properties = _process.settings(properties)
        self._kept_dir = Path(data_dir) if data_dir is not None else None
        self._binary = binary
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._root: Optional[str] = None
        self._proc: Optional[_process.Process] = None
        self._finalizer: Optional[weakref.finalize] = None
        self._bootstrap = ""
        self._started: Optional[_process.Started] = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> "Broker":
        """Starts the broker and returns once it answers ApiVersions (self, for chaining)."""
        if self._proc is not None:
            raise SluiceError("the broker is already started")
        root = tempfile.mkdtemp(prefix="sluice-test-")
        data = self._kept_dir if self._kept_dir is not None else Path(root) / "data"
        data.mkdir(parents=True, exist_ok=True)
        props = [
            ("listeners", "PLAINTEXT://127.0.0.1:0"),
            ("log.dirs", str(data)),
            ("group.initial.rebalance.delay.ms", "0"),
        ] + self._properties
        try:
            proc = _process.Process(
                self._binary or find_binary(), props, os.path.join(root, "broker.log"), "sluice broker"
            )
            proc.launch()
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        self._root, self._proc, self._data = root, proc, data
        self._finalizer = weakref.finalize(self, _remove, proc, root)
        try:
            deadline = time.monotonic() + self.start_timeout
            self._started = proc.wait_started(deadline)
            first = self._started.listeners[0]
            self._bootstrap = "{}:{}".format(*_process.host_port(first))
            proc.wait_answers(_process.host_port(first), deadline)
        except BaseException:
            self._finalizer()
            self._proc = None
            raise
        return self

    def stop(self) -> None:
        """Stops the broker cleanly (SIGTERM; SIGKILL after `stop_timeout` seconds) and deletes
        its temporary directory. Raises SluiceError when the broker did not exit with status 0
        (its log tail in the message). Stopping a stopped broker does nothing."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        code = proc.terminate(self.stop_timeout)
        error = None
        if code != 0:
            what = "did not stop within the stop timeout" if code is None else f"exited with status {code}"
            error = proc.failure(what)
        if self._finalizer is not None:
            self._finalizer()
        if error is not None:
            raise error

    def kill(self) -> None:
        """Stops the broker abruptly (SIGKILL) and deletes its temporary directory."""
        proc, self._proc = self._proc, None
        if proc is not None and self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> "Broker":
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.stop()
        else:
            # The test's own error is the one to see; the broker goes in any case.
            try:
                self.stop()
            except SluiceError:
                pass

    # -- what a test needs -------------------------------------------------------------------

    def bootstrap(self) -> str:
        """The address clients bootstrap from, `127.0.0.1:PORT`."""
        self._require_started()
        return self._bootstrap

    @property
    def bootstrap_servers(self) -> str:
        """The same as `bootstrap()`, named as the clients' setting is."""
        return self.bootstrap()

    @property
    def port(self) -> int:
        return _process.host_port(self.bootstrap())[1]

    @property
    def data_dir(self) -> Path:
        """The data directory (`log.dirs` unless a property names another)."""
        self._require_started()
        return self._data

    @property
    def pid(self) -> Optional[int]:
        return self._proc.pid if self._proc else None

    @property
    def http_url(self) -> Optional[str]:
        """The HTTP server's URL when `sluice.http.server.listeners` is set (metrics, health,
        console, faults), else None."""
        self._require_started()
        return self._started.http if self._started else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.running()

    def log(self) -> str:
        """What the broker has logged (stderr: the log goes to a file in its directory)."""
        self._require_started()
        return self._proc.log() if self._proc else ""

    def _require_started(self) -> None:
        if self._proc is None:
            raise SluiceError("the broker is not running (start it, or use it in a with block)")

    def __repr__(self) -> str:
        state = f"bootstrap={self._bootstrap}" if self._proc else "stopped"
        return f"<sluice.Broker {state}>"
