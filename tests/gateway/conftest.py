"""Fixtures the gateway's store tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.redis_cluster import RedisClusterServers, cluster_or_skip
from support.redis_server import RedisServer, redis_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    """One loopback Redis per test module; each test has its own key prefix."""
    with redis_server() as running:
        yield running


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisClusterServers]:
    """One loopback Redis Cluster (three masters) per test module; skipped, saying why,
    only when ``redis-server`` or ``redis-cli`` is not installed."""
    with cluster_or_skip() as running:
        yield running
