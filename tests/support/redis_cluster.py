"""A throwaway Redis Cluster of three masters on 127.0.0.1 for the gateway's tests.

:func:`redis_cluster` starts three ``redis-server`` processes with ``--cluster-enabled
yes`` (each in its own temporary directory, without persistence, as
:mod:`support.redis_server` runs one), joins them with ``redis-cli --cluster create ...
--cluster-replicas 0 --cluster-yes`` (the 16384 slots split in three), and waits until
every node reports ``cluster_state:ok`` (polling ``CLUSTER INFO``). It yields a
:class:`RedisClusterServers`; :attr:`RedisClusterServers.url` is the
``redis+cluster://`` URL of the first node, which
:meth:`fsm.gateway.redis_store.RedisStore.from_url` takes. On exit every node is killed
and its directory removed.

Needs ``redis-server`` and ``redis-cli`` (the Debian package ``redis-server`` has both);
:class:`~support.redis_server.RedisServerError` says which is missing. A node's cluster
bus listens on its port plus 10000, so the ports are picked below 55536 with that one free
too.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from support.redis_server import RedisServer, RedisServerError

__all__ = [
    "CLUSTER_TIMEOUT_S",
    "RedisClusterServers",
    "cluster_or_skip",
    "cluster_tools",
    "redis_cluster",
]

CLUSTER_TIMEOUT_S = 20.0
"""Seconds the cluster has to form (every node ``cluster_state:ok``)."""

BUS_OFFSET = 10_000
"""A cluster node's bus port is its port plus this."""


def cluster_tools() -> tuple[str, str]:
    """The ``redis-server`` and ``redis-cli`` binaries; :class:`RedisServerError` naming
    the one missing."""
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    for name, found in (("redis-server", server), ("redis-cli", cli)):
        if found is None:
            raise RedisServerError(
                f"{name} is not on PATH: install the Debian package redis-server "
                "(apt-get install redis-server)"
            )
    assert server is not None and cli is not None
    return server, cli


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _node_port() -> int:
    """A free port below 65536 - :data:`BUS_OFFSET` whose bus port is free too."""
    for _ in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port + BUS_OFFSET < 65536 and _bindable(port + BUS_OFFSET):
            return port
    for port in range(20_000, 55_000, 7):  # the kernel kept giving high ports
        if _bindable(port) and _bindable(port + BUS_OFFSET):
            return port
    raise RedisServerError("no free port pair for a cluster node")


@dataclass
class RedisClusterServers:
    """The running nodes of a cluster (each a master)."""

    nodes: list[RedisServer]
    cli: str

    @property
    def url(self) -> str:
        """``redis+cluster://127.0.0.1:<port of the first node>``."""
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}"

    def info(self, node: RedisServer) -> str:
        """``CLUSTER INFO`` of ``node`` as text ("" when it does not answer)."""
        done = subprocess.run(
            [self.cli, "-h", "127.0.0.1", "-p", str(node.port), "CLUSTER", "INFO"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        return done.stdout if done.returncode == 0 else ""

    def formed(self) -> bool:
        """Whether every node reports ``cluster_state:ok`` and knows all the nodes."""
        want = f"cluster_known_nodes:{len(self.nodes)}"
        return all(
            "cluster_state:ok" in text and want in text
            for text in (self.info(node) for node in self.nodes)
        )


@contextmanager
def redis_cluster(masters: int = 3) -> Iterator[RedisClusterServers]:
    """A cluster of ``masters`` masters on loopback for the ``with`` block (see the
    module docstring)."""
    binary, cli = cluster_tools()
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fsm-cluster-")))
        nodes = []
        for i in range(masters):
            directory = root / f"node{i}"
            directory.mkdir()
            extra = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
            extra += ("--cluster-node-timeout", "5000")
            node = RedisServer(binary, directory, _node_port(), extra=extra)
            stack.callback(_stop, node)
            node.start()
            nodes.append(node)
        cluster = RedisClusterServers(nodes, cli)
        create = [cli, "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in nodes)]
        create += ["--cluster-replicas", "0", "--cluster-yes"]
        done = subprocess.run(create, capture_output=True, text=True, timeout=30, check=False)
        if done.returncode != 0:
            raise RedisServerError(f"redis-cli --cluster create failed:\n{done.stdout}")
        deadline = time.monotonic() + CLUSTER_TIMEOUT_S
        while not cluster.formed():  # polled: the nodes gossip until all agree
            if time.monotonic() > deadline:
                states = [cluster.info(n) for n in nodes]
                raise RedisServerError(f"the cluster did not form: {states}")
            time.sleep(0.05)
        yield cluster


def _stop(node: RedisServer) -> None:
    with suppress(OSError):
        node.stop()


@contextmanager
def cluster_or_skip() -> Iterator[RedisClusterServers]:
    """:func:`redis_cluster` for a test fixture: the test is skipped, saying why, only
    when ``redis-server`` or ``redis-cli`` is not installed (a cluster that does not
    form fails it)."""
    import pytest

    try:
        cluster_tools()
    except RedisServerError as exc:
        pytest.skip(str(exc))
    with redis_cluster() as running:
        yield running
