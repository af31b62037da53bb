"""Fixtures the gateway's store tests share."""

from __future__ import annotations

import pytest

from support.redis_fixtures import cluster_fixture, redis_fixture  # noqa: F401
from support.redis_server import RedisServer


@pytest.fixture(scope="module")
def server(redis: RedisServer) -> RedisServer:
    """The module's Redis (:func:`support.redis_fixtures.redis_fixture`), by the name the
    store tests give it."""
    return redis
