"""The Redis store against a real redis-server on 127.0.0.1 (AOF, ``appendfsync always``):
what SqliteStore passes (the contract tests in test_sqlite_store.py and test_call_store.py
run on both through :func:`open_store`), bad values as typed errors, one owner per profile
(a second refused, a killed one's lease lapsing, a lapsed one fenced off), a Redis restart
keeping every acknowledged write."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from durable_script import CONFIG, drive

from fsm.actions import Present
from fsm.durable import MemoryStore, SqliteStore, Store, codec
from fsm.durable.redis_store import RedisStore
from fsm.errors import StoreCorruptError, StoreError, StoreLockedError, StoreVersionError
from fsm.sse.guard import Guard, SseDelta
from support.redis_cluster import cluster_or_skip
from support.redis_server import RedisServer, redis_server

DEADLINE_S = 10.0
"""Seconds a test polls for a lease to lapse before it fails."""

OpenStore = Callable[..., Store]


def opened(server: RedisServer, profile: str, **kw: Any) -> RedisStore:
    """The store of ``profile``, polled for (at most :data:`DEADLINE_S`) while another
    owner's lease has not lapsed."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            return RedisStore.from_url(server.url, profile, **kw)
        except StoreLockedError:
            assert time.monotonic() < deadline, "the other owner's lease never lapsed"
            time.sleep(0.02)


@pytest.fixture(scope="module", name="aof")
def aof_fixture() -> Iterator[RedisServer]:
    """One loopback Redis per module with the append-only file synced at every write
    (what an operator runs the durable store on); each test has its own profile."""
    with redis_server() as server:
        server.extra = ("--appendonly", "yes", "--appendfsync", "always")
        server.restart()
        yield server


@pytest.fixture(params=["sqlite", "redis"], name="open_store")
def open_store_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> OpenStore:
    """``open_store``: opens the one profile of this test, in SQLite or in Redis (a second
    call: what a restarted process opens); the store contract tests take it (import this
    and :func:`aof_fixture`). Keywords go to the Redis store."""
    if request.param == "sqlite":
        return lambda **_: SqliteStore(tmp_path / "p.sqlite3")
    server: RedisServer = request.getfixturevalue("aof")
    profile = f"p-{uuid.uuid4().hex[:8]}"
    return lambda **kw: RedisStore.from_url(server.url, profile, **kw)


@pytest.fixture
def profile() -> str:
    return f"p-{uuid.uuid4().hex[:8]}"


def raw(server: RedisServer) -> Any:
    """A plain client, to damage what a store wrote."""
    import redis

    return redis.Redis.from_url(server.url)


def written(server: RedisServer, profile: str) -> RedisStore:
    """A store of ``profile`` after the scripted session, closed; reopen it to read."""
    with RedisStore.from_url(server.url, profile) as store:
        drive(store)
    return store


def test_every_key_of_a_profile_is_under_its_prefix_and_hash_tag(
    aof: RedisServer, profile: str
) -> None:
    store = written(aof, profile)
    keys = {k.decode() for k in raw(aof).keys(f"fsm:durable:{{{len(profile)}:{profile}}}:*")}
    assert {store.key(k) for k in ("schema", "meta", "requests", "questions")} <= keys
    assert store.key("owner") not in keys  # released by close
    assert all(k.startswith(store.prefix + ":") for k in keys)


@pytest.mark.parametrize(
    ("kind", "damage"),
    [
        ("requests", lambda r, k: r.hset(k, r.hkeys(k)[0], "not json")),
        ("requests", lambda r, k: r.hset(k, r.hkeys(k)[0], "[1, 2]")),
        ("questions", lambda r, k: r.hset(k, r.hkeys(k)[0], '["elicitation/create"]')),
        ("questions", lambda r, k: r.hset(k, '["s1", "true"]', '["m", null]')),
        ("meta", lambda r, k: r.hset(k, "expired", "maybe")),
        ("streams", lambda r, k: (r.delete(k), r.set(k, "a string, not a hash"))),
    ],
)
def test_a_value_that_does_not_read_back_is_a_typed_error(
    aof: RedisServer, profile: str, kind: str, damage: Callable[[Any, str], Any]
) -> None:
    store = written(aof, profile)
    damage(raw(aof), store.key(kind))
    with RedisStore.from_url(aof.url, profile) as again, pytest.raises(StoreCorruptError):
        again.load()


@pytest.mark.parametrize(
    "damage",
    [
        lambda r, s: r.hset(s.key("calls"), "c9", "not json"),
        lambda r, s: r.zadd(s.key("order"), {"c-gone": 99}),  # ordered, not stored
        lambda r, s: r.hset(
            s.key("calls"), "c9", r.hget(s.key("calls"), "c9").replace(b'"c9"', b'"c8"')
        ),
    ],
)
def test_a_call_that_does_not_read_back_is_a_typed_error(
    aof: RedisServer, profile: str, damage: Callable[[Any, RedisStore], Any]
) -> None:
    from test_call_store import failed_record

    with RedisStore.from_url(aof.url, profile) as store:
        store.write(failed_record())
        damage(raw(aof), store)
        with pytest.raises(StoreCorruptError):
            store.calls()


def test_one_call_reads_alone_so_another_bad_record_fails_only_its_own(
    aof: RedisServer, profile: str
) -> None:
    from test_call_store import failed_record

    good = failed_record()
    with RedisStore.from_url(aof.url, profile) as store:
        store.write(good)
        store.write(good._replace(call="bad"))
        raw(aof).hset(store.key("calls"), "bad", "not json")
        with pytest.raises(StoreCorruptError):
            store.calls()
        assert store.call("c9") == good and store.call("missing") is None
        with pytest.raises(StoreCorruptError):
            store.call("bad")
        raw(aof).hset(store.key("calls"), "c9", codec.dump_call(good._replace(call="c8")))
        with pytest.raises(StoreCorruptError, match="another call"):
            store.call("c9")


@pytest.mark.parametrize(
    ("schema", "error"),
    [("3", StoreVersionError), ("99", StoreVersionError), ("two", StoreCorruptError)],
)
def test_a_schema_this_library_does_not_read_is_a_typed_error(
    aof: RedisServer, profile: str, schema: str, error: type[StoreError]
) -> None:
    store = written(aof, profile)
    raw(aof).set(store.key("schema"), schema)
    with pytest.raises(error):
        RedisStore.from_url(aof.url, profile)
    assert raw(aof).get(store.key("owner")) is None  # refused before taking the lease


def test_data_without_a_schema_is_corrupt_not_a_fresh_start(aof: RedisServer, profile: str) -> None:
    store = written(aof, profile)
    raw(aof).delete(store.key("schema"))
    with pytest.raises(StoreCorruptError):
        RedisStore.from_url(aof.url, profile)


def test_a_second_owner_in_this_process_is_refused(aof: RedisServer, profile: str) -> None:
    with RedisStore.from_url(aof.url, profile), pytest.raises(StoreLockedError, match="in use"):
        RedisStore.from_url(aof.url, profile)
    RedisStore.from_url(aof.url, profile).close()  # released on close


def test_a_killed_owner_is_refused_until_its_lease_lapses(aof: RedisServer, profile: str) -> None:
    code = (
        "import sys; from fsm.durable.redis_store import RedisStore\n"
        "from fsm.sse.guard import SseDelta\n"
        f"s = RedisStore.from_url({aof.url!r}, {profile!r}, lease_s=0.5)\n"
        "s.write(SseDelta('s-killed', False, (), ()))\n"
        "print('open', flush=True); sys.stdin.read()"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        with pytest.raises(StoreLockedError):
            RedisStore.from_url(aof.url, profile)
    finally:
        holder.kill()  # SIGKILL: no close, no release; the lease stays until it lapses
        holder.wait()
    with opened(aof, profile) as store:
        assert store.load().snapshot.session == "s-killed"


def test_a_lapsed_owner_writes_nothing_once_another_took_the_profile(
    aof: RedisServer, profile: str
) -> None:
    stalled = RedisStore.from_url(aof.url, profile, lease_s=0.2)
    stalled._stop.set()  # a process that stopped renewing (stalled, swapped out)
    with opened(aof, profile) as taker:
        taker.write(SseDelta("s-taker", False, (), ()))
        with pytest.raises(StoreLockedError, match="lapsed"):
            stalled.write(SseDelta("s-stalled", False, (), ()))
        with pytest.raises(StoreLockedError):
            stalled.load()
        assert taker.load().snapshot.session == "s-taker"
    stalled.close()


def test_an_open_store_renews_its_lease(aof: RedisServer, profile: str) -> None:
    """Renewal seen on the server, not timed: the owner key's time to live only falls
    unless renewed, so a reading above the lowest one before it is a renewal."""
    with RedisStore.from_url(aof.url, profile, lease_s=3) as store:
        client, owner = raw(aof), store.key("owner")
        lowest = client.pttl(owner)
        deadline = time.monotonic() + DEADLINE_S
        while (left := client.pttl(owner)) <= lowest:
            assert left > 0, "the lease lapsed"  # -2: the key is gone
            assert time.monotonic() < deadline, "the lease was never renewed"
            lowest = left
            time.sleep(0.02)
        assert client.get(owner).decode() == store.token
        with pytest.raises(StoreLockedError):
            RedisStore.from_url(aof.url, profile)
        store.write(SseDelta("s-kept", False, (), ()))


def test_a_redis_restart_keeps_every_acknowledged_write(aof: RedisServer, profile: str) -> None:
    memory = MemoryStore()
    with RedisStore.from_url(aof.url, profile) as store:
        drive(memory, store)
    aof.restart()  # SIGKILL, then the same directory: the append-only file is read back
    with RedisStore.from_url(aof.url, profile) as again:
        assert again.load() == memory.load()
        guard = Guard(clock=lambda: 5.0, config=CONFIG)
        shown = [a.key for a in guard.restart(again.load()) if isinstance(a, Present)]
    assert ("s1", 1) not in shown  # answered before the restart: never asked again


def test_wait_replicas_fails_a_write_no_replica_acknowledged(
    aof: RedisServer, profile: str
) -> None:
    waiting = RedisStore.from_url(aof.url, profile, wait_replicas=1, wait_timeout_s=0.05)
    with waiting as store, pytest.raises(StoreError, match="0 of 1 replicas"):
        store.write(SseDelta("s1", False, (), ()))


def test_an_unreachable_redis_is_a_typed_error_without_the_password(profile: str) -> None:
    with redis_server(password="sekrit-word") as server:
        wrong = server.url.replace("sekrit-word", "wrong-word")
        with pytest.raises(StoreError) as info:
            RedisStore.from_url(wrong, profile)
        assert "wrong-word" not in str(info.value) and "sekrit" not in str(info.value)
        with RedisStore.from_url(server.url, profile, timeout_s=0.2) as store:
            assert "sekrit" not in repr(store)
            server.stop()
            with pytest.raises(StoreError) as info:
                store.write(SseDelta("s1", False, (), ()))
            assert type(info.value) is StoreError and "write failed" in str(info.value)


def test_importing_fsm_durable_does_not_import_redis() -> None:
    code = "import sys, fsm.durable, fsm.durable.redis_store; assert 'redis' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_without_redis_py_the_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, profile: str
) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # as if redis-py were not installed
    with pytest.raises(ModuleNotFoundError, match=r"dead-or-resumable\[gateway\]"):
        RedisStore.from_url("redis://127.0.0.1:1/0", profile)


def test_a_profile_on_a_redis_cluster_is_one_slot(profile: str) -> None:
    memory = MemoryStore()
    with cluster_or_skip() as cluster:
        with RedisStore.from_url(cluster.url, profile) as store:
            drive(memory, store)  # every script call: one slot, or Redis Cluster refuses it
            assert store.load() == memory.load()
            with pytest.raises(StoreLockedError):
                RedisStore.from_url(cluster.url, profile)
        with RedisStore.from_url(cluster.url, profile) as again:
            assert again.load() == memory.load()


def test_the_session_record_reads_back_and_a_bad_one_is_typed(
    aof: RedisServer, profile: str
) -> None:
    from test_store_session import RECORD

    with RedisStore.from_url(aof.url, profile) as store:
        assert store.session() is None
        store.write(SseDelta("s1", False, (), (), (), ()))
        store.write_session(RECORD)
        assert store.writes == 2
    with RedisStore.from_url(aof.url, profile) as store:
        assert store.session() == RECORD
        assert store.load().snapshot.session == "s1"  # the guard's meta is untouched
        store.write_session(RECORD._replace(calls=()))
        assert store.session() == RECORD._replace(calls=())
        raw(aof).hset(store.key("meta"), "rejoin", '["s1", 2, []]')
        with pytest.raises(StoreCorruptError):
            store.session()


def test_an_unreachable_cluster_is_a_typed_error_and_a_bad_cluster_url_a_value_error(
    profile: str,
) -> None:
    """The blocking cluster client connects as it is made: a cluster no one listens for is
    :class:`StoreError` (not the URL's fault), never naming the password; a URL with no
    node or a database other than 0 is :class:`ValueError`, found before any IO."""
    from support.redis_server import _free_port

    port = _free_port()  # bound, then closed: nothing listens on it
    with pytest.raises(StoreError) as info:
        RedisStore.from_url(f"redis+cluster://:sekrit-word@127.0.0.1:{port}", profile)
    assert type(info.value) is StoreError and "sekrit" not in str(info.value)
    assert info.value.path == f"redis cluster 127.0.0.1:{port}"
    for url, says in [("redis+cluster://:sekrit-word@", "node"), ("redis+cluster://h:1/1", "db")]:
        with pytest.raises(ValueError, match=says) as bad:
            RedisStore.from_url(url, profile)
        assert "sekrit" not in str(bad.value)
