"""One store for every era: MRTR calls' and tasks' records read back equal from SQLite,
Redis and memory, a version-1 file migrates with its SSE content kept, a bad call row is a
typed error, and ended calls' records stay bounded."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from test_call_durability import Run, drive
from test_redis_store import OpenStore, aof_fixture, open_store_fixture  # noqa: F401

from fsm.actions import Persist
from fsm.durable import SCHEMA_VERSION, CallRecord, MemoryStore, SqliteStore
from fsm.durable.calls import DurableCall
from fsm.durable.sqlite import MIGRATIONS
from fsm.durable.store import MAX_ENDED_CALLS
from fsm.errors import StoreCorruptError
from fsm.mrtr.call import CallCancelled, MrtrCall, RoundResult
from fsm.sse.guard import GuardSnapshot, SseDelta


def every_record(era: str) -> list[CallRecord]:
    """Each record one run writes (causes included: a crash, a resend, the end)."""
    run = Run(era, None)
    records: list[CallRecord] = []
    take = run.take

    def spy(actions: tuple[object, ...]) -> bool:
        for a in actions:
            if isinstance(a, Persist) and isinstance(a.delta, CallRecord):
                records.append(a.delta)
        return take(actions)

    run.take = spy  # type: ignore[method-assign]
    drive(run)
    return records


def failed_record() -> CallRecord:
    call = DurableCall(MrtrCall("c9", clock=lambda: 1.0))
    asked = {"q": {"method": "elicitation/create", "params": {"message": "Go?"}}}
    call.feed(RoundResult({"resultType": "input_required", "inputRequests": asked}))
    call.feed(CallCancelled())
    return call.record()


@pytest.mark.parametrize("era", ["mrtr", "tasks"])
def test_every_record_reads_back_equal(open_store: OpenStore, era: str) -> None:
    records = every_record(era)
    assert records
    with open_store() as store:
        for rec in records:
            store.write(rec)
            assert store.calls()[rec.call] == rec
    with open_store() as store:  # and after a reopen
        assert list(store.calls().values()) == [records[-1]]


def test_a_cause_reads_back(open_store: OpenStore) -> None:
    rec = failed_record()
    assert rec.snapshot.cause is not None and rec.ended
    with open_store() as store:
        store.write(rec)
        assert store.calls() == {"c9": rec}


def test_a_version_1_file_migrates_and_keeps_its_content(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    for statement in MIGRATIONS[0].split(";"):
        if statement.strip():
            db.execute(statement)
    db.execute("INSERT INTO meta VALUES ('session', 's-old'), ('expired', '0')")
    db.execute("PRAGMA user_version=1")
    db.close()
    with SqliteStore(path) as store:
        assert store.load().snapshot.session == "s-old"
        assert store.calls() == {}
        store.write(every_record("mrtr")[0])
        assert len(store.calls()) == 1
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    db.close()


@pytest.mark.parametrize(
    "row",
    [
        "not json",
        '["mrtr", "c1"]',
        '["sse", "c1", [], [], []]',
        '["mrtr", "c1", ["sent", null, [], [], "1", null, 0, 0, false], [], []]',
        '["tasks", "c1", [], [], []]',
        '["mrtr", "c1", ["presenting", null, [], [], 1, null, 0, 0, false],'
        ' [[["c1", "q"], "elicitation/create", "{not json"]], []]',
    ],
)
def test_a_call_row_that_does_not_read_back_is_typed(tmp_path: Path, row: str) -> None:
    path = tmp_path / "p.sqlite3"
    SqliteStore(path).close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("INSERT INTO calls VALUES ('c1', 'mrtr', 0, 1, ?)", (row,))
    db.close()
    with SqliteStore(path) as store, pytest.raises(StoreCorruptError):
        store.calls()


def test_a_row_under_another_call_id_is_typed(tmp_path: Path) -> None:
    path = tmp_path / "p.sqlite3"
    with SqliteStore(path) as store:
        store.write(failed_record())
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("UPDATE calls SET call = 'other'")
    db.close()
    with SqliteStore(path) as store, pytest.raises(StoreCorruptError, match="another call"):
        store.calls()


def test_ended_records_stay_bounded_in_every_store(open_store: OpenStore) -> None:
    ended = failed_record()
    with open_store() as durable_store:
        memory = MemoryStore()
        for store in (durable_store, memory):
            store.write(every_record("tasks")[0])  # live: kept
            for n in range(MAX_ENDED_CALLS + 3):
                store.write(ended._replace(call=f"c{n}"))
            calls = store.calls()
            assert len(calls) == MAX_ENDED_CALLS + 1 and "t1" in calls
            assert "c0" not in calls and f"c{MAX_ENDED_CALLS + 2}" in calls


def test_one_store_serves_the_sse_guard_and_the_calls(open_store: OpenStore) -> None:
    with open_store() as store:
        store.write(SseDelta("s1", False, (), (), (), ()))
        store.write(failed_record())
        assert store.load().snapshot == GuardSnapshot("s1", (), (), False)
        assert list(store.calls()) == ["c9"]
