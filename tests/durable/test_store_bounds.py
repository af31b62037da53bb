"""What a store load reads is bounded and typed (SQLite and Redis): a value nested deeper
than the JSON parser recurses, or longer than :data:`~fsm.durable.codec.MAX_VALUE_BYTES`
(a record, a question's params), is ``StoreCorruptError``, never a ``RecursionError`` or
an unbounded read."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlite_damage import Damage, assert_corrupt_after
from test_redis_store import aof_fixture, profile, raw, written

from fsm.durable.codec import MAX_VALUE_BYTES
from fsm.durable.redis_store import RedisStore
from fsm.errors import StoreCorruptError
from support.redis_server import RedisServer

__all__ = ["aof_fixture", "profile"]

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
