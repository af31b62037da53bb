"""A stored record holding something other than a number where the rules wrote one (NaN,
an infinity, ``1e999``, an integer beyond the floats, a float where a count belongs) is
:class:`~fsm.errors.StoreCorruptError`, in every store that decodes (the codec, SQLite,
Redis on a real loopback redis-server; the memory store keeps records, it decodes none).
Read with ``int()`` or ``float()``, such a value raises ``OverflowError`` out of a load,
or reads back as a time or a poll interval (a resumed task would wait ``inf`` seconds).

The one infinity a store holds on purpose reads back: a request's deadline under
``request_ttl_s=inf`` (no deadline)."""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path

import durable_script
import pytest
from durable_script import drive

from fsm.durable import CallRecord, MemoryStore, SqliteStore, Store, codec
from fsm.durable.calls import DurableCall
from fsm.durable.redis_store import RedisStore
from fsm.errors import StoreCorruptError
from fsm.mrtr.call import MrtrCall, RoundResult
from fsm.tasks.task import TaskCall, TaskCreated
from support.redis_fixtures import redis_fixture  # noqa: F401
from support.redis_server import RedisServer

HUGE = "1" + "0" * 400
"""An integer of 400 digits, as JSON text: an ``int`` no float holds."""

Path_ = tuple[int, ...]
"""Where a field is in a record's JSON list (indices, outermost first)."""


# ------------------------------------------------------------------ records as written


def mrtr_record() -> CallRecord:
    """An MRTR call with one question on screen (shown at t=1)."""
    call = DurableCall(MrtrCall("c9", clock=lambda: 1.0))
    asked = {"q": {"method": "elicitation/create", "params": {"message": "Go?"}}}
    call.feed(RoundResult({"resultType": "input_required", "inputRequests": asked}))
    return call.record()


def task_record() -> CallRecord:
    """A task just created (a 1 s poll interval, a 60 s TTL)."""
    call = DurableCall(TaskCall("t1", clock=lambda: 1.0))
    call.feed(TaskCreated({"taskId": "t1", "status": "working", "ttlMs": 60_000}))
    return call.record()


def written(kind: str) -> str:
    """One record of ``kind`` as the codec writes it."""
    if kind == "call":
        return codec.dump_call(mrtr_record())
    if kind == "task":
        return codec.dump_call(task_record())
    memory = MemoryStore()
    drive(memory)  # the scripted SSE session (durable_script)
    snap = memory.stored.snapshot
    if kind == "request":
        return codec.dump_request(snap.requests[0])
    return codec.dump_stream(snap.streams[0])


LOADS: dict[str, Callable[[str], object]] = {
    "request": codec.load_request,
    "stream": codec.load_stream,
    "call": codec.load_call,
    "task": codec.load_call,
}


def damaged(text: str, path: Path_, literal: str) -> str:
    """``text`` (a record's JSON) with the field at ``path`` replaced by the JSON text
    ``literal`` (what Python's reader accepts: ``Infinity``, ``NaN``, ``1e999``)."""
    record = json.loads(text)
    parent = record
    for i in path[:-1]:
        parent = parent[i]
    parent[path[-1]] = "@@"
    return json.dumps(record).replace('"@@"', literal)


# ------------------------------------------------------------------ the codec


@pytest.mark.parametrize(
    ("kind", "path", "literal"),
    [
        ("request", (3,), "Infinity"),  # the params digest: an integer
        ("request", (7,), "1e999"),  # the attempts
        ("request", (7,), "2.5"),  # int() took it as 2
        ("request", (12,), "-Infinity"),  # the re-asks
        ("request", (4,), "NaN"),  # the deadline: +inf only
        ("request", (4,), "-Infinity"),
        ("request", (4,), HUGE),
        ("request", (8,), "Infinity"),  # when it was shown
        ("request", (8,), HUGE),
        ("stream", (4,), "Infinity"),  # the stalls
        ("stream", (5,), "1e999"),  # the resumes
        ("stream", (11,), "[5.0, 0.0, 1e999]"),  # held: (since, waited, refusals)
        ("stream", (11,), "[Infinity, 0.0, 1]"),
        ("stream", (11,), "[5.0, NaN, 1]"),
        ("call", (2, 2, 0, 4), "Infinity"),  # an MRTR question shown at
        ("call", (2, 2, 0, 4), HUGE),
        ("task", (2, 11), "Infinity"),  # the poll interval
        ("task", (2, 11), "NaN"),
        ("task", (2, 11), HUGE),
        ("task", (2, 12), "-Infinity"),  # created
        ("task", (2, 13), "Infinity"),  # the TTL's deadline
    ],
)
def test_a_field_that_is_no_number_the_rules_write_does_not_read_back(
    kind: str, path: Path_, literal: str
) -> None:
    text = written(kind)
    LOADS[kind](text)  # the record as written reads back
    with pytest.raises(StoreCorruptError, match="does not read back"):
        LOADS[kind](damaged(text, path, literal))


# ------------------------------------------------------------------ the stores


class Backend:
    """One profile in one store kind: opened again as a restarted process would, and its
    stored values damaged in place (``table``: ``requests``, ``streams`` or ``calls``)."""

    def __init__(self, tmp_path: Path, server: RedisServer | None) -> None:
        self.path, self.server = tmp_path / "p.sqlite3", server
        self.profile = f"p-{uuid.uuid4().hex[:8]}"

    def open(self) -> Store:
        """The profile's store (SQLite without a Redis server)."""
        if self.server is None:
            return SqliteStore(self.path)
        return RedisStore.from_url(self.server.url, self.profile)

    def damage(self, table: str, edit: Callable[[str], str]) -> None:
        """Replace every value of ``table`` by ``edit(value)``, the store closed."""
        if self.server is None:
            self._damage_file(table, edit)
        else:
            self._damage_redis(self.server, table, edit)

    def _damage_file(self, table: str, edit: Callable[[str], str]) -> None:
        db = sqlite3.connect(self.path)
        with db:
            for rowid, text in db.execute(f"SELECT rowid, record FROM {table}").fetchall():
                db.execute(f"UPDATE {table} SET record = ? WHERE rowid = ?", (edit(text), rowid))
        db.close()

    def _damage_redis(self, server: RedisServer, table: str, edit: Callable[[str], str]) -> None:
        import redis as client

        with RedisStore.from_url(server.url, self.profile) as store:
            key = store.key(table)
        raw = client.Redis.from_url(server.url)
        for field, value in raw.hgetall(key).items():
            raw.hset(key, field, edit(value.decode()))
        raw.close()


@pytest.fixture(params=["sqlite", "redis"], name="backend")
def backend_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """``backend``: a SQLite file, or a profile on the module's loopback redis-server."""
    server = request.getfixturevalue("redis") if request.param == "redis" else None
    return Backend(tmp_path, server)


def edit(path: Path_, literal: str) -> Callable[[str], str]:
    """What :meth:`Backend.damage` does to each value: :func:`damaged` at ``path``."""
    return lambda text: damaged(text, path, literal)


@pytest.mark.parametrize(
    ("table", "path", "literal"),
    [
        ("requests", (7,), "Infinity"),  # the attempts: int(inf) raised OverflowError
        ("requests", (4,), "NaN"),  # a deadline that is no time
        ("streams", (11,), "[5.0, 0.0, 1e999]"),  # a held connection's refusals
    ],
)
def test_a_stored_sse_number_out_of_range_is_corrupt(
    backend: Backend, table: str, path: Path_, literal: str
) -> None:
    with backend.open() as store:
        drive(store)
    backend.damage(table, edit(path, literal))
    with backend.open() as store, pytest.raises(StoreCorruptError):
        store.load()


@pytest.mark.parametrize("literal", ["Infinity", "NaN", HUGE])
def test_a_stored_task_whose_poll_interval_is_no_finite_number_is_corrupt(
    backend: Backend, literal: str
) -> None:
    """Resumed, such a task would wait ``inf`` seconds before its next poll."""
    with backend.open() as store:
        store.write(task_record())
    backend.damage("calls", edit((2, 11), literal))
    with backend.open() as store:
        with pytest.raises(StoreCorruptError):
            store.calls()
        with pytest.raises(StoreCorruptError):
            store.call("t1")


def test_a_deadline_of_forever_reads_back_and_no_other_infinity_does(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``request_ttl_s=inf`` stores ``+inf`` deadlines: they read back equal (the guard
    restarts from them); a deadline that is NaN does not."""
    forever = dataclasses.replace(durable_script.CONFIG, request_ttl_s=math.inf)
    monkeypatch.setattr(durable_script, "CONFIG", forever)
    with backend.open() as store:
        requests = drive(store).snapshot().requests
    assert requests and all(r.deadline == math.inf for r in requests)
    with backend.open() as store:
        assert store.load().snapshot.requests == requests
    backend.damage("requests", edit((4,), "NaN"))
    with backend.open() as store, pytest.raises(StoreCorruptError):
        store.load()
