"""The gateway's state stores keep the contract of :mod:`fsm.gateway.store`.

One conformance suite runs on :class:`MemoryStore`, on :class:`RedisStore` against a real
``redis-server`` on 127.0.0.1 (:mod:`support.redis_server`) and on :class:`RedisStore`
against a real three-master Redis Cluster on 127.0.0.1 (:mod:`support.redis_cluster`):
claims win once, also for
fifty concurrent claimers on two replicas; typed ids stay distinct; cursors never move
back, also under concurrent writers; a claim advances the cursor in the same step; answers
and ended sessions round-trip; sessions are isolated. Then what only one store has: the
in-memory store's expiry on an injected clock, Redis TTLs read from Redis, round trips
counted, and failing closed when Redis is stopped, frozen or restarted.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import pytest
from redis.asyncio import Redis
from redis.crc import key_slot
from shared_state import Shared

from fsm.gateway.redis_store import RedisStore
from fsm.gateway.store import (
    Cursor,
    MemoryStore,
    StateStore,
    StoreStateLostError,
    StoreUnavailableError,
)
from support.redis_cluster import RedisClusterServers
from support.redis_server import RedisServer, RedisServerError, redis_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture(params=["memory", "redis", "cluster"])
def backend(request: pytest.FixtureRequest) -> str | None:
    """The Redis URL of the module's server or cluster, or ``None`` for the in-memory
    store."""
    if request.param == "memory":
        return None
    return str(request.getfixturevalue("server" if request.param == "redis" else "cluster").url)


@pytest.fixture
async def shared(backend: str | None) -> AsyncIterator[Shared]:
    state = Shared(backend)
    yield state
    await state.aclose()


# ------------------------------------------------------------------ conformance


async def test_a_key_is_claimed_once_across_replicas(shared: Shared) -> None:
    one, two = shared.replica(), shared.replica()
    await one.begin_session("s")
    assert await one.claim("s", 7) is True
    assert await one.claim("s", 7) is False
    assert await two.claim("s", 7) is False
    assert await two.claim("s", 8) is True


async def test_fifty_concurrent_claimers_on_two_replicas_win_once(shared: Shared) -> None:
    replicas = [shared.replica(), shared.replica()]
    await replicas[1].begin_session("s")
    for request_id in (1, "1", 2, "req-3", 4):
        results = await asyncio.gather(*(replicas[n % 2].claim("s", request_id) for n in range(50)))
        assert results.count(True) == 1, (request_id, results)


async def test_ids_keep_their_json_type(shared: Shared) -> None:
    store = shared.replica()
    await store.begin_session("s")
    assert [await store.claim("s", rid) for rid in (1, "1", "int:1", "str:1")] == [True] * 4
    await store.save_answer("s", 1, {"n": "int"})
    await store.save_answer("s", "1", {"n": "str"})
    assert await store.answer_of("s", 1) == {"n": "int"}
    assert await store.answer_of("s", "1") == {"n": "str"}
    assert await store.answer_of("s", "int:1") is None


async def test_a_cursor_never_moves_back(shared: Shared) -> None:
    store = shared.replica()
    assert await store.cursor_of("s", "get") is None
    await store.save_cursor("s", "get", Cursor(5, "ev5"))
    await store.save_cursor("s", "get", Cursor(3, "ev3"))
    await store.save_cursor("s", "get", Cursor(5, "other id at the same position"))
    assert await store.cursor_of("s", "get") == Cursor(5, "ev5")
    await store.save_cursor("s", "get", Cursor(6, "ev 6: spaces kept"))
    assert await store.cursor_of("s", "get") == Cursor(6, "ev 6: spaces kept")
    assert await store.cursor_of("s", "post:1") is None


async def test_concurrent_cursor_writers_leave_the_newest(shared: Shared) -> None:
    replicas = [shared.replica(), shared.replica()]
    rng = random.Random(7)
    for round_ in range(5):
        positions = list(range(1, 101))
        rng.shuffle(positions)
        stream = f"stream-{round_}"
        await asyncio.gather(
            *(
                replicas[n % 2].save_cursor("s", stream, Cursor(p, f"ev{p}"))
                for n, p in enumerate(positions)
            )
        )
        assert await replicas[round_ % 2].cursor_of("s", stream) == Cursor(100, "ev100")


async def test_a_claim_advances_the_cursor_whatever_it_wins(shared: Shared) -> None:
    one, two = shared.replica(), shared.replica()
    await two.begin_session("s")
    assert await one.claim("s", 1, stream="get", cursor=Cursor(4, "ev4")) is True
    assert await two.cursor_of("s", "get") == Cursor(4, "ev4")
    assert await two.claim("s", 1, stream="get", cursor=Cursor(9, "ev9")) is False
    assert await one.cursor_of("s", "get") == Cursor(9, "ev9")
    assert await one.claim("s", 2, stream="get", cursor=Cursor(2, "ev2")) is True
    assert await one.cursor_of("s", "get") == Cursor(9, "ev9")
    assert await one.claim("s", 2) is False
    with pytest.raises(ValueError):
        await one.claim("s", 3, stream="get")
    with pytest.raises(ValueError):
        await one.claim("s", 3, cursor=Cursor(1, "ev1"))
    assert await one.claim("s", 3) is True  # the refused calls claimed nothing


async def test_answers_round_trip(shared: Shared) -> None:
    one, two = shared.replica(), shared.replica()
    answer = {"action": "accept", "content": {"n": 3, "ok": True, "list": [1, "a", None]}}
    assert await two.answer_of("s", 1) is None
    await one.save_answer("s", 1, answer)
    assert await two.answer_of("s", 1) == answer
    await two.save_answer("s", 1, {"action": "decline"})
    assert await one.answer_of("s", 1) == {"action": "decline"}


async def test_ended_sessions(shared: Shared) -> None:
    one, two = shared.replica(), shared.replica()
    assert await two.session_ended("s") is None
    await one.end_session("s", "session-expired")
    assert await two.session_ended("s") == "session-expired"
    assert await two.session_ended("t") is None


async def test_sessions_are_isolated(shared: Shared) -> None:
    """Names chosen to collide if keys were joined naively (``:``, braces, empty); text
    that is not valid UTF-8 (a lone surrogate) is kept as it is."""
    store = shared.replica()
    sessions = ["a", "a:b", "a:claim:int", "", "{a}", "a}", "1:a", "ä", "\ud800"]
    for session in sessions:
        await store.begin_session(session)
        assert await store.claim(session, 1) is True
        await store.save_cursor(session, "b:x", Cursor(len(session) + 1, session))
        await store.save_answer(session, 1, {"session": session})
    assert await store.claim("a", "b:x") is True
    for session in sessions:
        assert await store.cursor_of(session, "b:x") == Cursor(len(session) + 1, session)
        assert await store.answer_of(session, 1) == {"session": session}
        assert await store.cursor_of(session, "x") is None
    await store.end_session("a", "gone \udcff")
    assert [await store.session_ended(s) for s in sessions] == ["gone \udcff"] + [None] * 8


async def test_a_claim_in_a_session_the_store_never_saw_fails_closed(shared: Shared) -> None:
    """No record of the session (begun before the store's state, or idle past the TTL):
    whether its requests were presented is unknown, so the claim raises, changing nothing."""
    store = shared.replica()
    for attempt in range(2):
        with pytest.raises(StoreStateLostError, match="no record of the session"):
            await store.claim("unseen", attempt, stream="get", cursor=Cursor(5, "ev5"))
    assert await store.cursor_of("unseen", "get") is None
    await store.begin_session("unseen")
    assert await store.claim("unseen", 0) is True


async def test_keeping_a_session_extends_a_record_the_store_has_and_makes_none(
    shared: Shared,
) -> None:
    """``keep_session`` of a session the store has no record of (lost, expired, never
    begun) leaves it unrecorded: its claims still fail closed."""
    store = shared.replica()
    await store.keep_session("unseen")
    with pytest.raises(StoreStateLostError, match="no record of the session"):
        await store.claim("unseen", 1)
    await store.begin_session("seen")
    await store.keep_session("seen")
    assert await store.claim("seen", 1) is True


# ------------------------------------------------------------------ expiry


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_memory_entries_expire_ttl_after_their_last_write() -> None:
    clock = Clock()
    store = MemoryStore(ttl_s=10, clock=clock)
    await store.begin_session("s")
    assert await store.claim("s", 1, stream="get", cursor=Cursor(1, "ev1")) is True
    await store.save_answer("s", 1, {"a": 1})
    await store.end_session("s", "gone")
    clock.now += 6
    assert await store.claim("s", 1) is False  # a lost claim writes nothing
    await store.save_cursor("s", "get", Cursor(2, "ev2"))  # written: lives 10 s more
    clock.now += 5
    assert await store.claim("s", 1) is True  # 11 s after its write: expired
    assert await store.answer_of("s", 1) is None
    assert await store.session_ended("s") is None
    assert await store.cursor_of("s", "get") == Cursor(2, "ev2")
    clock.now += 10
    assert await store.cursor_of("s", "get") is None


async def test_a_kept_session_outlives_the_ttl_from_its_beginning() -> None:
    clock = Clock()
    store = MemoryStore(ttl_s=10, clock=clock)
    await store.begin_session("kept")
    await store.begin_session("idle")
    clock.now += 6
    await store.keep_session("kept")  # lives 10 s from now
    clock.now += 6
    assert await store.claim("kept", 1) is True
    with pytest.raises(StoreStateLostError):
        await store.claim("idle", 1)


async def test_redis_keys_carry_the_ttl_and_writes_refresh_it(server: RedisServer) -> None:
    store = RedisStore.from_url(server.url, ttl_s=30, prefix=f"t{uuid.uuid4().hex[:8]}:")
    try:
        await store.begin_session("s")
        await store.claim("s", 1, stream="get", cursor=Cursor(1, "ev1"))
        await store.save_answer("s", 1, {"a": 1})
        await store.end_session("s", "gone")
        keys = [
            store.key("s", "claim", "int:1"),
            store.key("s", "answer", "int:1"),
            store.key("s", "cursor", "get"),
            store.key("s", "ended"),
            store.key("s", "session"),
        ]
        found = await store.client.keys(f"{store.prefix}*")
        assert sorted(found) == sorted(k.encode() for k in keys)
        for key in keys:
            assert 29_000 < await store.client.pttl(key) <= 30_000, key
            await store.client.pexpire(key, 1000)  # as if 29 s had passed
        assert await store.claim("s", 1) is False
        await store.save_cursor("s", "get", Cursor(1, "not newer"))
        assert [await store.client.pttl(k) <= 1000 for k in keys[:4:2]] == [True, True]
        assert await store.client.pttl(keys[4]) > 29_000  # a claim, even lost, refreshes it
        await store.save_cursor("s", "get", Cursor(2, "ev2"))
        await store.save_answer("s", 1, {"a": 2})
        await store.end_session("s", "gone")
        for key in keys[1:]:
            assert await store.client.pttl(key) > 29_000, key
        await store.client.pexpire(keys[4], 1000)
        await store.keep_session("s")  # the session's record alone, 30 s from now
        assert await store.client.pttl(keys[4]) > 29_000
        await store.keep_session("never begun")
        assert not await store.client.exists(store.key("never begun", "session"))
    finally:
        await store.aclose()


# ------------------------------------------------------------------ round trips


def _every_operation(store: StateStore) -> list[tuple[str, Callable[[], Awaitable[object]]]]:
    """Each operation once (claim twice: alone and with a cursor), by the name its failure
    message uses; each call claims a new id."""
    n = itertools.count(100)
    return [
        ("begin_session", lambda: store.begin_session("s")),
        ("keep_session", lambda: store.keep_session("s")),
        ("claim", lambda: store.claim("s", next(n))),
        ("claim", lambda: store.claim("s", next(n), stream="get", cursor=Cursor(50, "e"))),
        ("save_cursor", lambda: store.save_cursor("s", "get", Cursor(60, "e"))),
        ("cursor_of", lambda: store.cursor_of("s", "get")),
        ("save_answer", lambda: store.save_answer("s", 1, {"a": 1})),
        ("answer_of", lambda: store.answer_of("s", 1)),
        ("mark_submitted", lambda: store.mark_submitted("s", 100)),
        ("take_over", lambda: store.take_over("s", 100, "b", 30)),
        ("hold_answer", lambda: store.hold_answer("s", 101, {"a": 1}, "b", 30)),
        ("end_session", lambda: store.end_session("t", "gone")),
        ("session_ended", lambda: store.session_ended("s")),
    ]


def _every_redis_operation(store: RedisStore) -> list[tuple[str, Callable[[], Awaitable[object]]]]:
    """:func:`_every_operation`, and :meth:`RedisStore.connect`."""
    return [*_every_operation(store), ("connect", store.connect)]


async def test_each_operation_is_one_round_trip(server: RedisServer) -> None:
    store = RedisStore.from_url(server.url, prefix=f"t{uuid.uuid4().hex[:8]}:")
    try:
        await store.client.script_flush()
        before = store.round_trips
        await store.save_cursor("s", "get", Cursor(1, "ev1"))
        assert store.round_trips - before == 2  # EVALSHA unknown to Redis, then EVAL
        await store.connect()  # loads the claim's script
        for name, call in _every_operation(store):
            before = store.round_trips
            await call()
            assert store.round_trips - before == 1, name
        await store.client.script_flush()
        await store.connect()  # loads the script: the next call finds it
        before = store.round_trips
        assert await store.claim("s", "new", stream="get", cursor=Cursor(70, "ev70")) is True
        assert store.round_trips - before == 1
    finally:
        await store.aclose()


# ------------------------------------------------------------------ Redis Cluster


async def test_on_a_cluster_every_operation_touches_one_slot_on_each_master(
    cluster: RedisClusterServers,
) -> None:
    """A session on each of the three masters: every operation succeeds there (a command
    or script whose keys spanned two slots would fail with ``CROSSSLOT``), every key the
    session left is in its one slot, on its master, and ``connect`` loaded the script on
    every master."""
    store = RedisStore.from_url(cluster.url, prefix=f"t{uuid.uuid4().hex[:8]}:")
    nodes = [Redis(host="127.0.0.1", port=node.port) for node in cluster.nodes]
    try:
        await store.connect()
        for node in nodes:
            assert await node.script_exists(_sha()) == [True]
        masters: dict[int, str] = {}  # node index -> a session whose slot it serves
        for i in itertools.count():
            session = f"s{i}"
            slot = key_slot(store.key(session, "session").encode())
            owner = await _owner(nodes, slot)
            masters.setdefault(owner, session)
            if len(masters) == len(nodes):
                break
        for owner, session in masters.items():
            await store.begin_session(session)
            assert await store.claim(session, 1, stream="get", cursor=Cursor(5, "e5"))
            assert not await store.claim(session, 1)
            lease = {"owner": "r1", "lease_s": 5.0}
            assert await store.claim(session, 2, stream="get", cursor=Cursor(6, "e6"), **lease)
            assert await store.renew(session, 2, "r1", 5.0)
            assert (await store.claim_status(session, 2)).owner == "r1"
            assert await store.open_claims(session, "get") == [2]
            await store.save_cursor(session, "get", Cursor(9, "e9"))
            assert await store.cursor_of(session, "get") == Cursor(9, "e9")
            await store.save_answer(session, 2, {"ok": True})
            assert await store.answer_of(session, 2) == {"ok": True}
            await store.end_session(session, "gone")
            assert await store.session_ended(session) == "gone"
            keys = await nodes[owner].keys(f"{store.prefix}*{{{len(session)}:{session}}}*")
            assert len(keys) >= 8
            assert {key_slot(key) for key in keys} == {key_slot(keys[0])}
    finally:
        await store.aclose()
        for node in nodes:
            await node.aclose()


async def test_a_cluster_refuses_a_script_over_two_sessions_slots(
    cluster: RedisClusterServers,
) -> None:
    """The rule the store's keys keep is the cluster's: the store's own script, called by
    hand with the keys of two sessions in different slots, is refused (``CROSSSLOT``, or
    redis-py's refusal before sending), so the test above would fail on a key layout
    that spread one session over slots."""
    store = RedisStore.from_url(cluster.url, prefix=f"t{uuid.uuid4().hex[:8]}:")
    try:
        await store.connect()
        one, two = "a", "b"
        assert key_slot(store.key(one, "session").encode()) != key_slot(
            store.key(two, "session").encode()
        )
        keys = [store.key(one, "cursor", "get"), store.key(two, "cursor", "get")]
        with pytest.raises(StoreUnavailableError) as got:
            await store._script("save_cursor", keys, "cursor", 1000, 1, "e1")
        assert "slot" in str(got.value.__cause__)  # the cause: chained, not told to clients
    finally:
        await store.aclose()


def _sha() -> str:
    from fsm.gateway import redis_store

    return str(redis_store._SHA)


async def _owner(nodes: list[Redis], slot: int) -> int:
    """The index of the node serving ``slot`` (read from the first node's slot map)."""
    ports = [node.connection_pool.connection_kwargs["port"] for node in nodes]
    for start, end, master, *_ in await nodes[0].execute_command("CLUSTER", "SLOTS"):
        if int(start) <= slot <= int(end):
            return ports.index(int(master[1]))
    raise AssertionError(f"no node serves slot {slot}")


# ------------------------------------------------------------------ failing closed

TIMEOUT_S = 0.2


async def _each_fails_closed(store: RedisStore) -> list[float]:
    took = []
    for name, call in _every_redis_operation(store):
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as got:
            await call()
        took.append(time.monotonic() - started)
        assert str(got.value) == f"redis store: {name} failed"  # clients are told it
        assert got.value.__cause__ is not None  # the cause: chained and logged
        assert got.value.reason == "store-unavailable"
    return took


@pytest.fixture
async def own_server() -> AsyncIterator[tuple[RedisServer, RedisStore]]:
    """A Redis of the test's own, to stop, freeze and restart, and a store on it."""
    with redis_server() as running:
        store = RedisStore.from_url(running.url, timeout_s=TIMEOUT_S)
        try:
            yield running, store
        finally:
            await store.aclose()


async def _settle() -> None:
    """Let the event loop run a few rounds (it sees connections the server closed)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_stopped_redis_fails_every_operation_at_once_then_works_again(
    own_server: tuple[RedisServer, RedisStore],
) -> None:
    server, store = own_server
    await store.begin_session("s")
    assert await store.claim("s", 1) is True
    server.stop()
    took = await _each_fails_closed(store)
    assert max(took) < TIMEOUT_S, took  # refused: no wait for the timeout
    server.start()
    await _settle()
    for _, call in _every_operation(store):
        await call()
    assert await store.claim("s", 1) is True  # the claim made before the stop is gone


async def test_a_frozen_redis_fails_every_operation_within_the_timeout(
    own_server: tuple[RedisServer, RedisStore],
) -> None:
    server, store = own_server
    await store.begin_session("s")
    await store.save_cursor("s", "get", Cursor(1, "ev1"))
    server.pause()
    try:
        took = await _each_fails_closed(store)
    finally:
        server.resume()
    assert all(TIMEOUT_S * 0.9 <= t < TIMEOUT_S + 0.5 for t in took), took
    assert await store.claim("s", "after") is True


async def test_a_restarted_redis_works_at_once_and_has_lost_every_key(
    own_server: tuple[RedisServer, RedisStore],
) -> None:
    server, store = own_server
    other = RedisStore.from_url(server.url, timeout_s=TIMEOUT_S)
    try:
        await store.begin_session("s")
        await asyncio.gather(*(store.claim("s", n) for n in range(5)))  # pooled connections
        await store.save_cursor("s", "get", Cursor(3, "ev3"))
        await store.end_session("t", "gone")
        assert await other.claim("s", 0) is False
        server.restart()
        await _settle()
        before = store.round_trips
        for replica in (store, other):  # the session's claims are gone: fail closed
            with pytest.raises(StoreStateLostError, match="no record of the session") as got:
                await replica.claim("s", 0, stream="get", cursor=Cursor(4, "ev4"))
            assert got.value.reason == "store-state-lost"
        assert store.round_trips - before == 2  # the restarted Redis learns the script again
        assert await store.cursor_of("s", "get") is None  # and the refused claim wrote none
        assert await store.session_ended("t") is None
        await store.begin_session("s2")  # a session begun after the restart works
        assert await other.claim("s2", 0) is True
        assert await store.claim("s2", 0) is False
    finally:
        await other.aclose()


# ------------------------------------------------------------------ construction and bad data


async def test_stored_values_that_are_not_ours_fail_closed(server: RedisServer) -> None:
    store = RedisStore.from_url(server.url, prefix=f"t{uuid.uuid4().hex[:8]}:")
    try:
        await store.client.set(store.key("s", "answer", "int:1"), b"[1, 2]")
        await store.client.set(store.key("s", "answer", "int:2"), b"{not json")
        await store.client.set(store.key("s", "cursor", "get"), b"seven ev7")
        for call in (
            store.answer_of("s", 1),
            store.answer_of("s", 2),
            store.cursor_of("s", "get"),
        ):
            with pytest.raises(StoreUnavailableError):
                await call
        await store.save_cursor("s", "get", Cursor(1, "ev1"))  # a malformed cursor is replaced
        assert await store.cursor_of("s", "get") == Cursor(1, "ev1")
        with pytest.raises(TypeError):
            await store.save_answer("s", 3, {"a": object()})
    finally:
        await store.aclose()


async def test_a_store_on_a_given_client_leaves_it_open(server: RedisServer) -> None:
    client = Redis.from_url(server.url)
    try:
        store = RedisStore(client, prefix=f"t{uuid.uuid4().hex[:8]}:")
        await store.begin_session("s")
        assert await store.claim("s", 1) is True
        await store.aclose()
        assert await client.ping() is True
    finally:
        await client.aclose()


async def test_a_burst_past_the_pool_queues_instead_of_failing(server: RedisServer) -> None:
    """More operations at once than the store has connections: each waits for one. With
    redis-py's default pool every operation past its connections failed at once
    (``MaxConnectionsError``), and a session whose record was not written failed closed."""
    store = RedisStore.from_url(server.url, prefix=f"t{uuid.uuid4().hex[:8]}:", max_connections=2)
    try:
        sessions = [f"s{i}" for i in range(60)]
        await asyncio.gather(*(store.begin_session(s) for s in sessions))
        won = await asyncio.gather(*(store.claim(s, 1) for s in sessions))
        assert won == [True] * len(sessions)
        assert len(store.client.connection_pool._in_use_connections) == 0  # all given back
        opened = store.client.connection_pool._available_connections
        assert 1 <= len(opened) <= 2
    finally:
        await store.aclose()


async def test_namespaces_keep_deployments_apart(server: RedisServer) -> None:
    """Two deployments on one Redis under different namespaces share nothing: each wins
    its own claim of the same request; two replicas of one namespace share its claims."""
    run = uuid.uuid4().hex[:8]
    blue = RedisStore.from_url(server.url, namespace=f"blue-{run}")
    blue_too = RedisStore.from_url(server.url, namespace=f"blue-{run}")
    green = RedisStore.from_url(server.url, namespace=f"green-{run}")
    try:
        assert blue.prefix == f"fsm:blue-{run}:" and green.prefix == f"fsm:green-{run}:"
        await blue.begin_session("s")
        with pytest.raises(StoreStateLostError):  # blue's session is not green's
            await green.claim("s", 1)
        await green.begin_session("s")
        assert await blue.claim("s", 1) is True
        assert await green.claim("s", 1) is True  # another deployment: won again
        assert await blue_too.claim("s", 1) is False  # the same one: lost
        await blue.save_answer("s", 1, {"a": "blue"})
        await blue.save_cursor("s", "get", Cursor(9, "ev9"))
        await blue.end_session("s", "gone")
        assert await blue_too.answer_of("s", 1) == {"a": "blue"}
        assert await green.answer_of("s", 1) is None
        assert await green.cursor_of("s", "get") is None
        assert await green.session_ended("s") is None
        green_keys = [green.key("s", "session"), green.key("s", "claim", "int:1")]
        assert sorted(await green.client.keys(f"{green.prefix}*")) == [
            k.encode() for k in sorted(green_keys)
        ]
    finally:
        for store in (blue, blue_too, green):
            await store.aclose()


def test_namespaces_are_checked() -> None:
    url = "redis://127.0.0.1:1/0"
    for name in ("prod", "a:b", "eu-west_1.x", "x" * 64, "ä"):
        assert RedisStore.from_url(url, namespace=name).prefix == f"fsm:{name}:"
    for name in ("", "a b", "a\tb", "a\nb", "{a}", "a}", "x" * 65, "a\x00b", "\u00a0"):
        with pytest.raises(ValueError, match="namespace"):
            RedisStore.from_url(url, namespace=name)
    with pytest.raises(ValueError, match="not both"):
        RedisStore.from_url(url, namespace="prod", prefix="x:")
    with pytest.raises(ValueError, match="rediss://"):
        RedisStore.from_url(url, ssl_ca_certs="/nonexistent/ca.pem")
    assert RedisStore.from_url(url).prefix == "fsm:"


async def test_failures_log_no_session_request_answer_or_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every failure path of both stores: no record at INFO or above (any logger,
    redis-py's too) names the session, the request, the answer or the URL's password, and
    neither does any error's message (the gateway logs those at WARNING and tells them to
    clients). The store's own records of Redis failures are at WARNING and name the
    cause; its ``repr`` hides the password."""
    caplog.set_level(logging.DEBUG)
    session, request, password = "sess-4c1d", "req-9e2f", f"pw-{uuid.uuid4().hex}"
    secrets = (session, request, password, "answer-7b3a")
    errors: list[Exception] = []

    async def fails(call: Awaitable[object]) -> None:
        with anyio.fail_after(20), pytest.raises(StoreUnavailableError) as got:
            await call
        errors.append(got.value)

    await fails(MemoryStore().claim(session, request, owner="a", lease_s=1))
    with redis_server(password=password) as running:
        assert password in running.url
        store = RedisStore.from_url(running.url, timeout_s=0.2)
        intruder = RedisStore.from_url(running.url.replace(password, "wrong"), timeout_s=0.2)
        try:
            assert all(password not in repr(x) for x in (store, store.client, intruder))
            await fails(intruder.begin_session(session))  # AuthenticationError
            await fails(store.claim(session, request, stream="get", cursor=Cursor(1, "e")))
            await store.client.set(store.key(session, "answer", "str:" + request), b"answer-7b3a")
            await store.client.set(store.key(session, "cursor", "get"), b"x answer-7b3a")
            await fails(store.answer_of(session, request))
            await fails(store.claim_status(session, request))
            await fails(store.cursor_of(session, "get"))
            for fault in (running.pause, running.stop):  # no answer, then refused
                fault()
                for name, call in _every_redis_operation(store):
                    await fails(call())
                    assert f"redis store: {name} failed" in str(errors[-1])
                await fails(store.claim(session, request, owner="a", lease_s=1))
                await fails(store.renew(session, request, "a", 1))
                await fails(store.claim_status(session, request))
                if fault == running.pause:
                    running.resume()
        finally:
            await store.aclose()
            await intruder.aclose()
    assert len(errors) == 6 + 2 * 17
    for error in errors:
        assert not any(secret in str(error) for secret in secrets), error
    loud = [r for r in caplog.records if r.levelno >= logging.INFO]
    for record in loud:
        assert not any(secret in record.getMessage() for secret in secrets), record
    ours = [r for r in caplog.records if r.name == "fsm.gateway.redis_store"]
    assert ours and all(r.levelno == logging.WARNING for r in ours)
    assert any("AuthenticationError" in r.getMessage() for r in ours)


def test_bad_settings_are_refused() -> None:
    for settings in ({"ttl_s": 0}, {"timeout_s": -1}, {"prefix": "a{b}:"}, {"max_connections": 0}):
        with pytest.raises(ValueError):
            RedisStore.from_url("redis://127.0.0.1:1/0", **settings)
    with pytest.raises(ValueError):
        MemoryStore(ttl_s=0)


def test_the_runner_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(RedisServerError, match="apt-get install redis-server"), redis_server():
        pass


async def test_both_stores_are_state_stores(server: RedisServer) -> None:
    store = RedisStore.from_url(server.url)
    assert isinstance(store, StateStore) and isinstance(MemoryStore(), StateStore)
    await store.aclose()


def test_the_command_line_refuses_to_start_on_an_unreachable_redis() -> None:
    """``fsm gateway --store redis://...`` checks the store at start-up: nothing listens
    on that port, so it exits 1 at once, saying why, instead of serving without a store."""
    import os
    import subprocess
    import sys

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fsm",
            "gateway",
            "--upstream",
            "http://127.0.0.1:9/mcp",
            "--listen",
            "127.0.0.1:0",
            "--store",
            f"redis://127.0.0.1:{port}/0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "FSM_GATEWAY_ID_KEY": "k" * 40},  # replicas share one
    )
    assert done.returncode == 1, done
    assert "redis store: connect failed" in done.stderr


async def test_an_unreachable_cluster_is_the_typed_error_without_the_password() -> None:
    """The asyncio cluster client connects on first use, not when it is made: a cluster no
    one listens for fails that first operation with :class:`StoreUnavailableError`, whose
    message does not name the URL's password."""
    from support.redis_server import _free_port

    port = _free_port()  # bound, then closed: nothing listens on it
    store = RedisStore.from_url(f"redis+cluster://:sekrit-word@127.0.0.1:{port}", timeout_s=1)
    try:
        assert "sekrit" not in repr(store)
        with anyio.fail_after(20), pytest.raises(StoreUnavailableError) as got:
            await store.begin_session("s")
        assert "sekrit" not in str(got.value) and "begin_session failed" in str(got.value)
    finally:
        await store.aclose()
