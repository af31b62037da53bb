"""Replicas of one shared gateway state, for the suites that hold every store to the
contract of :mod:`fsm.gateway.store`: in memory one :class:`MemoryStore` (one process, an
injected clock); in Redis each replica its own :class:`RedisStore` (its own client and
connections) on one server or cluster, under a prefix of its own."""

from __future__ import annotations

import uuid

from fsm.gateway.redis_store import RedisStore
from fsm.gateway.store import MemoryStore, StateStore

CONTRACT_TIMEOUT_S = 30.0
"""Each Redis replica's ``timeout_s``: the contract suites check what is stored, not how
fast, so a loaded machine's slow answer must not fail them (the timeout's own tests set
theirs)."""


class Clock:
    """An injected clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Shared:
    """Replicas of one shared state at ``url`` (``None``: in memory), and a way to let
    time pass for it: the memory store's clock moved, or every key's TTL shortened in
    Redis."""

    def __init__(self, url: str | None) -> None:
        self.clock = Clock()
        self.memory = MemoryStore(clock=self.clock) if url is None else None
        self.url = url
        self.prefix = f"t{uuid.uuid4().hex[:8]}:"
        self.made: list[RedisStore] = []

    def replica(self) -> StateStore:
        if self.memory is not None:
            return self.memory
        assert self.url is not None
        store = RedisStore.from_url(self.url, prefix=self.prefix, timeout_s=CONTRACT_TIMEOUT_S)
        self.made.append(store)
        return store

    async def advance(self, seconds: float) -> None:
        """As if ``seconds`` had passed: for Redis, every key of this state lives that
        much less (a key with less left is deleted, as Redis would have expired it)."""
        if self.memory is not None:
            self.clock.now += seconds
            return
        client = self.made[0].client
        for key in await client.keys(f"{self.prefix}*"):
            left = await client.pttl(key)
            if left < 0:
                continue
            if left <= seconds * 1000:
                await client.delete(key)
            else:
                await client.pexpire(key, left - round(seconds * 1000))

    async def aclose(self) -> None:
        for store in self.made:
            await store.aclose()
