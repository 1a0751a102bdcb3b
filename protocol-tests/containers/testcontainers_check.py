#!/usr/bin/env python3
"""The README's Testcontainers recipe, run for the containers suite: Testcontainers for Python
starts the Sluice image as a generic container through the Docker-compatible socket in
DOCKER_HOST (podman's, here), and a client produces and consumes through the mapped port.

  testcontainers_check.py IMAGE N NAME

The container publishes 9092 on a host port picked here and is told to advertise that port
(the image's default advertises localhost:9092). Exit 0 when N records come back in order.
"""
import os
import socket
import subprocess
import sys
import time

from testcontainers.core.container import DockerContainer


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    image, n, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    port = free_port()
    here = os.path.dirname(os.path.abspath(__file__))
    records = [sys.executable, os.path.join(here, "records.py")]
    container = (DockerContainer(image)
                 .with_name(name)
                 .with_bind_ports(9092, port)
                 .with_command("--override advertised.listeners=PLAINTEXT://127.0.0.1:%d" % port))
    with container:
        host = container.get_container_host_ip()
        mapped = container.get_exposed_port(9092)
        bootstrap = "%s:%s" % (host, mapped)
        print("# container %s, bootstrap %s" % (container.get_wrapped_container().name, bootstrap),
              file=sys.stderr)
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection((host, int(mapped)), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    print("nothing listens on %s" % bootstrap, file=sys.stderr)
                    return 1
                time.sleep(0.1)
        topic = "containers-testcontainers-%d" % os.getpid()
        for cmd in ("produce", "consume"):
            r = subprocess.run(records + [cmd, bootstrap, topic, str(n)])
            if r.returncode != 0:
                print("%s through %s failed" % (cmd, bootstrap), file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
