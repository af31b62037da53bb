"""The module-scoped Redis fixtures of the suites that share one Redis per test module
(each test keeps to its own key prefix): import them into a test module, or into a
folder's conftest, to use them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.redis_cluster import RedisClusterServers, cluster_or_skip
from support.redis_server import RedisServer, redis_server


@pytest.fixture(scope="module", name="redis")
def redis_fixture() -> Iterator[RedisServer]:
    """``redis``: one loopback Redis per test module."""
    with redis_server() as running:
        yield running


@pytest.fixture(scope="module", name="cluster")
def cluster_fixture() -> Iterator[RedisClusterServers]:
    """``cluster``: one loopback Redis Cluster (three masters) per test module; skipped,
    saying why, only when ``redis-server`` or ``redis-cli`` is not installed."""
    with cluster_or_skip() as running:
        yield running
