"""One `sluice` process: its command line (Kafka property names as `--override key=value`),
its log file, and how it starts, waits until it serves, is killed or stopped."""

import os
import re
import signal
import subprocess
import time
from typing import Iterable, List, Mapping, Optional, Tuple, Union

from . import _wire
from ._errors import SluiceError

Properties = Union[None, Mapping[str, object], Iterable[Tuple[str, object]]]

# The line a node logs once its listeners are bound (src/run.rs, `log_started`).
_STARTED = re.compile(r" started: node id (-?\d+), .*, listeners (\S+), advertised listeners (\S+?)(?:, http server (\S+))?\s*$")


def settings(properties: Properties) -> List[Tuple[str, str]]:
    """Properties as (key, value) strings, in order; booleans as Kafka writes them."""
    if properties is None:
        return []
    items = properties.items() if isinstance(properties, Mapping) else properties
    out = []
    for key, value in items:
        if isinstance(value, bool):
            value = "true" if value else "false"
        out.append((str(key), str(value)))
    return out


def _child_env() -> dict:
    """The environment with the caller's log filter kept, and the start-up line (which tells
    the bound ports) logged whatever that filter says."""
    env = dict(os.environ)
    spec = env.get("SLUICE_LOG") or env.get("RUST_LOG")
    if spec:
        env["SLUICE_LOG"] = spec + ",sluice::run=info"
    return env


def host_port(address: str) -> Tuple[str, int]:
    """`NAME://host:port` or `host:port` as (host, port)."""
    hp = address.split("://", 1)[-1]
    host, _, port = hp.rpartition(":")
    return host.strip("[]"), int(port)


class Started:
    """What the start-up line says: the node id, the bound listeners and the advertised ones
    (each `NAME://host:port`) and the HTTP server's URL, if any."""

    def __init__(self, match: "re.Match[str]"):
        self.node_id = int(match.group(1))
        self.listeners = match.group(2).split(",")
        self.advertised = match.group(3).split(",")
        self.http = match.group(4)


class Process:
    def __init__(self, binary: str, props: List[Tuple[str, str]], log_path: str, name: str):
        self.args = [binary]
        for key, value in props:
            self.args += ["--override", f"{key}={value}"]
        self.log_path = log_path
        self.name = name
        self.proc: Optional[subprocess.Popen] = None
        self._log_start = 0

    def launch(self) -> None:
        with open(self.log_path, "ab") as log:
            self._log_start = log.tell()
            # A session of its own: a terminal's Ctrl-C reaches the test, which stops the node.
            self.proc = subprocess.Popen(
                self.args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_child_env(),
                start_new_session=True,
                close_fds=True,
            )

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        """What the node logged since it was last launched."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_start)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def tail(self, lines: int = 25) -> str:
        text = "\n".join(self.log().rstrip().splitlines()[-lines:])
        return text or "(nothing logged)"

    def failure(self, what: str) -> SluiceError:
        return SluiceError(f"{self.name}: {what}; its log ({self.log_path}) ends:\n{self.tail()}")

    def _check_alive(self) -> None:
        if not self.running():
            code = self.proc.returncode if self.proc else None
            raise self.failure(f"exited with status {code} while starting")

    def wait_started(self, deadline: float) -> Started:
        """Waits for the start-up line (the listeners are bound)."""
        while True:
            for line in self.log().splitlines():
                m = _STARTED.search(line)
                if m:
                    return Started(m)
            self._check_alive()
            if time.monotonic() > deadline:
                raise self.failure("no start-up line before the start timeout")
            time.sleep(0.02)

    def wait_answers(self, address: Tuple[str, int], deadline: float) -> None:
        """Waits until the node answers ApiVersions at `address`."""
        while True:
            self._check_alive()
            try:
                _wire.api_versions(address, timeout=min(3.0, max(0.2, deadline - time.monotonic())))
                return
            except _wire.WireError as e:
                if time.monotonic() > deadline:
                    raise self.failure(f"not answering ApiVersions at {address[0]}:{address[1]} ({e})")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL, and waits until the process is gone (its sockets closed)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def terminate(self, timeout: float) -> Optional[int]:
        """SIGTERM (a clean shutdown), SIGKILL if it has not ended within `timeout` seconds;
        the exit status, None if it had to be killed."""
        if self.proc is None:
            return 0
        if self.proc.poll() is not None:
            return self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
