"""What a store load reads is bounded and typed (SQLite and Redis): a value nested deeper
than the JSON parser recurses, or longer than :data:`~fsm.durable.codec.MAX_VALUE_BYTES`
(a record, a question's params), is ``StoreCorruptError``, never a ``RecursionError`` or
an unbounded read. A value that long is refused at its write too (``StoreError``,
nothing written), so a store never holds what its next load would refuse."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from durable_script import drive
from sqlite_damage import Damage, assert_corrupt_after
from test_redis_store import OpenStore, aof_fixture, open_store_fixture, profile, raw, written

from fsm.durable import MemoryStore, SqliteStore, Store
from fsm.durable.calls import DurableCall
from fsm.durable.codec import MAX_VALUE_BYTES, naming_store
from fsm.durable.redis_store import RedisStore
from fsm.durable.store import LoadLimits, SessionRecord, SseCall, counts
from fsm.errors import StoreCorruptError, StoreError
from fsm.mrtr.call import MrtrCall
from fsm.sse.guard import GuardConfig, Question, SseDelta
from support.redis_server import RedisServer

__all__ = ["aof_fixture", "open_store_fixture", "profile"]

DEEP = "[" * 200_000 + "]" * 200_000
"""Valid JSON nested past the parser's recursion limit."""

LONG_PARAMS = '{"a": "' + "x" * MAX_VALUE_BYTES + '"}'
"""A JSON object one value longer than a load reads."""


def _padded(text: str) -> str:
    """``text`` (JSON) with trailing blanks past the bound: still the same JSON."""
    return text + " " * MAX_VALUE_BYTES


@pytest.mark.parametrize(
    "damage",
    [
        lambda db: db.execute("UPDATE requests SET record = ?", (DEEP,)),
        lambda db: db.execute("UPDATE streams SET record = record || ?", (" " * MAX_VALUE_BYTES,)),
        lambda db: db.execute("UPDATE questions SET params = ?", (LONG_PARAMS,)),
    ],
    ids=["deep", "long-record", "long-params"],
)
def test_sqlite_a_deep_or_long_value_is_corrupt(tmp_path: Path, damage: Damage) -> None:
    assert_corrupt_after(tmp_path / "p.sqlite3", damage)


RedisDamage = Callable[[Any, RedisStore], Any]


@pytest.mark.parametrize(
    "damage",
    [
        lambda r, s: r.hset(s.key("questions"), r.hkeys(s.key("questions"))[0], DEEP),
        lambda r, s: r.hset(s.key("questions"), DEEP, '["elicitation/create", null]'),
        lambda r, s: r.hset(s.key("requests"), r.hkeys(s.key("requests"))[0], DEEP),
        lambda r, s: r.hset(
            s.key("streams"), "get", _padded(r.hget(s.key("streams"), "get").decode())
        ),
        lambda r, s: r.hset(
            s.key("questions"),
            r.hkeys(s.key("questions"))[0],
            json.dumps(["elicitation/create", LONG_PARAMS]),
        ),
    ],
    ids=["deep-question", "deep-field", "deep-request", "long-record", "long-params"],
)
def test_redis_a_deep_or_long_value_is_corrupt(
    aof: RedisServer, profile: str, damage: RedisDamage
) -> None:
    store = written(aof, profile)
    damage(raw(aof), store)
    with RedisStore.from_url(aof.url, profile) as again, pytest.raises(StoreCorruptError):
        again.load()


def test_a_value_a_load_would_refuse_is_not_written(open_store: OpenStore) -> None:
    """A session record whose call's params, or a question whose params, are longer than a
    load reads: ``StoreError`` at the write (not ``StoreCorruptError``: the store is
    sound), nothing of that write stored, and the store still loads and takes writes."""
    record = SessionRecord("s1", "{}", (SseCall("post:1", "tools/call", "{}"),), "http://h/mcp")
    asked = SseDelta("s1", False, (), (), (Question(("s1", 1), "elicitation/create", "{}"),), ())
    with open_store() as store:
        store.write(asked)
        store.write_session(record)
        stored = store.load()
        long_call = record._replace(calls=(SseCall("post:2", "tools/call", LONG_PARAMS),))
        with pytest.raises(StoreError, match="not written") as refused:
            store.write_session(long_call)
        assert not isinstance(refused.value, StoreCorruptError)
        long_question = Question(("s1", 2), "elicitation/create", LONG_PARAMS)
        with pytest.raises(StoreError, match="not written"):
            store.write(asked._replace(questions=(long_question,)))
        assert store.writes == 2
    with open_store() as again:
        assert again.session() == record
        assert again.load() == stored
        again.write_session(record._replace(calls=()))


def test_a_write_refused_for_its_length_names_the_store(open_store: OpenStore) -> None:
    """As a read that meets a record that does not read back names the store
    (``test_corrupt_names_store.py``), so does a write refused for its length, whichever
    record it is (a session record, an SSE delta, a call's record): in its message and as
    its ``path``."""
    long_question = Question(("s1", 2), "elicitation/create", LONG_PARAMS)
    long_call = SseCall("post:2", "tools/call", LONG_PARAMS)
    call = DurableCall(MrtrCall("c", clock=lambda: 0.0)).record()
    writes: list[Callable[[Store], None]] = [
        lambda store: store.write_session(SessionRecord("s1", "{}", (long_call,), "http://h/mcp")),
        lambda store: store.write(SseDelta("s1", False, (), (), (long_question,), ())),
        lambda store: store.write(call._replace(questions=(long_question,))),
    ]
    with open_store() as store:
        assert isinstance(store, SqliteStore | RedisStore)
        for write in writes:
            with pytest.raises(StoreError, match="not written") as refused:
                write(store)
            assert type(refused.value) is StoreError
            assert refused.value.path == store.path
            assert str(refused.value).startswith(f"{store.path}: ")
        assert store.writes == 0


def test_an_error_that_names_its_store_passes_through_unchanged() -> None:
    """Only an error naming no store is named: one that names a store (a store's own
    failure, naming its file or server) is raised as it came."""
    named = StoreCorruptError("elsewhere: bad", path="elsewhere")
    with pytest.raises(StoreCorruptError) as caught, naming_store("here"):
        raise named
    assert caught.value is named


def test_a_load_reads_up_to_its_limits_and_refuses_one_record_more(
    open_store: OpenStore,
) -> None:
    """With :class:`LoadLimits`, a store holding exactly as many records of each kind
    loads; one fewer allowed of any kind is ``StoreCorruptError`` naming that kind."""
    with open_store() as store:
        drive(store)
        stored = store.load()
        held = counts(stored)
        assert min(held) >= 1, held
        assert store.load(held) == stored
        for kind, n in zip(LoadLimits._fields, held, strict=True):
            tight = held._replace(**{kind: n - 1})
            with pytest.raises(StoreCorruptError, match=rf"{kind}: {n} stored, limit {n - 1}"):
                store.load(tight)


def test_a_sqlite_load_counts_its_rows_before_it_reads_one(tmp_path: Path) -> None:
    """The count comes first: rows past the limit that would not read back are refused
    for their number, not parsed (an unbounded read would parse them all first)."""
    path = tmp_path / "p.sqlite3"
    with SqliteStore(path) as store:
        drive(store)
        held = counts(store.load())
    db = sqlite3.connect(path)
    with db:
        db.executemany(
            "INSERT INTO streams (id, record) VALUES (?, ?)",
            ((f"extra-{i}", DEEP) for i in range(3)),
        )
    db.close()
    with SqliteStore(path) as store:
        with pytest.raises(StoreCorruptError, match=rf"streams: {held.streams + 3} stored"):
            store.load(held)
        with pytest.raises(StoreCorruptError, match="not JSON"):
            store.load()


def test_a_redis_load_counts_its_records_before_it_reads_one(
    aof: RedisServer, profile: str
) -> None:
    store = written(aof, profile)
    with RedisStore.from_url(aof.url, profile) as again:
        held = counts(again.load())
    client = raw(aof)
    client.hset(store.key("requests"), mapping={f'["s9", "{i}"]': DEEP for i in range(3)})
    with RedisStore.from_url(aof.url, profile) as again:
        with pytest.raises(StoreCorruptError, match=rf"requests: {held.requests + 3} stored"):
            again.load(held)
        with pytest.raises(StoreCorruptError, match="not JSON"):
            again.load()


def test_the_memory_store_checks_the_same_limits() -> None:
    store = MemoryStore()
    drive(store)
    held = counts(store.load())
    assert store.load(held) == store.stored
    with pytest.raises(StoreCorruptError, match=rf"questions: {held.questions} stored"):
        store.load(held._replace(questions=0))


def test_the_limits_of_a_guard_are_what_it_can_write() -> None:
    config = GuardConfig(max_streams=5, max_live_requests=7, max_tombstones=11)
    assert LoadLimits.of(config) == LoadLimits(5, 18, 18)
