"""The SQLite store: what is written reads back as the in-memory store holds it, one
process per file, and a bad file is a typed error, never a crash or a fresh start. The
tests taking ``open_store`` are the store contract: they run on the Redis store too."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from durable_script import CONFIG, PROGRESS, drive
from sqlite_damage import assert_corrupt_after
from test_redis_store import OpenStore, aof_fixture, open_store_fixture  # noqa: F401

from fsm import events as ev
from fsm.actions import Persist, Present
from fsm.durable import SCHEMA_VERSION, MemoryStore, SqliteStore, profile_path
from fsm.errors import StoreCorruptError, StoreError, StoreLockedError, StoreVersionError
from fsm.sse.guard import Guard


def test_what_is_written_reads_back_as_memory_holds_it(open_store: OpenStore) -> None:
    memory = MemoryStore()
    with open_store() as store:
        drive(memory, store)
        assert store.writes == memory.writes
    with open_store() as again:  # a new process would open it so
        assert again.load() == memory.load()
        g1, g2 = (Guard(clock=lambda: 5.0, config=CONFIG) for _ in range(2))
        assert g1.restart(again.load()) == g2.restart(memory.load())
    assert any(r.cause is not None for r in memory.load().snapshot.requests)
    assert len(memory.load().snapshot.requests) <= 2 + CONFIG.max_tombstones + 4


def test_the_file_is_wal_with_full_sync(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "a.sqlite3") as store:
        db = store._db
        assert db is not None
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_progress_event_writes_nothing_to_disk(open_store: OpenStore) -> None:
    with open_store() as store:
        guard = drive(store)
        before = store.writes
        for i in range(200):
            for action in guard.feed(ev.SseEvent("post:1", PROGRESS, f"p{i}")):
                assert not isinstance(action, Persist)
        assert store.writes == before


def test_a_second_store_on_one_file_is_refused(open_store: OpenStore) -> None:
    with open_store(), pytest.raises(StoreLockedError):
        open_store()
    open_store().close()  # released on close


def test_another_process_is_refused_until_the_holder_dies(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite3"
    code = (
        "import sys; from fsm.durable import SqliteStore\n"
        f"s = SqliteStore({str(path)!r}); print('open', flush=True); sys.stdin.read()"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        with pytest.raises(StoreLockedError):
            SqliteStore(path)
    finally:
        holder.kill()  # SIGKILL: a crash, no close
        holder.wait()
    SqliteStore(path).close()  # the OS released the lock with the process


def test_a_file_that_is_not_a_database_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite3"
    path.write_bytes(b"this is not a database\n" * 400)
    with pytest.raises(StoreCorruptError):
        SqliteStore(path)
    assert path.read_bytes() == b"this is not a database\n" * 400  # untouched


def test_a_truncated_file_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite3"
    with SqliteStore(path) as store:
        drive(store)
    data = path.read_bytes()
    assert len(data) >= 4 * 4096
    path.write_bytes(data[: 2 * 4096])
    with pytest.raises(StoreCorruptError):
        SqliteStore(path).load()


def test_a_newer_schema_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite3"
    SqliteStore(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreVersionError):
        SqliteStore(path)


def test_an_empty_database_of_version_0_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite3"
    sqlite3.connect(path).close()
    with SqliteStore(path) as store:
        assert store.load().snapshot.requests == ()
        drive(store)
    with SqliteStore(path) as store:
        assert store.load().snapshot.session == "s1"


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE requests SET record = 'not json'",
        "UPDATE requests SET record = '[1, 2]'",
        "UPDATE requests SET record = replace(record, 'RequestCancelledError', 'system')",
        "UPDATE questions SET rid = 'true' WHERE rowid = (SELECT min(rowid) FROM questions)",
    ],
)
def test_a_row_that_does_not_read_back_is_a_typed_error(tmp_path: Path, sql: str) -> None:
    def damage(db: sqlite3.Connection) -> None:
        assert db.execute(sql).rowcount > 0

    assert_corrupt_after(tmp_path / "a.sqlite3", damage)


def test_a_restart_from_the_file_never_asks_an_answered_question(open_store: OpenStore) -> None:
    with open_store() as store:
        drive(store)
    with open_store() as store:
        guard = Guard(clock=lambda: 5.0, config=CONFIG)
        shown = [a.key for a in guard.restart(store.load()) if isinstance(a, Present)]
    assert ("s1", 1) not in shown


def test_one_file_per_profile() -> None:
    assert profile_path("/x", "work.laptop-2") == Path("/x/work.laptop-2.sqlite3")
    for bad in ("", "../etc", "a/b", ".hidden", "x" * 200):
        with pytest.raises(ValueError):
            profile_path("/x", bad)


def test_a_file_that_cannot_be_opened_is_unusable_not_corrupt(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as info:
        SqliteStore(tmp_path / "missing" / "a.sqlite3")
    assert type(info.value) is StoreError


@pytest.mark.parametrize(
    ("table", "field", "value"),
    [
        ("requests", 6, "not an object"),  # the stored answer
        ("requests", 6, "[1]"),
        ("streams", 3, 7),  # the cursor
        ("streams", 1, True),  # the origin
        ("streams", 6, "soon"),  # retry_ms
    ],
)
def test_a_field_of_the_wrong_kind_is_a_typed_error(
    tmp_path: Path, table: str, field: int, value: object
) -> None:
    def damage(db: sqlite3.Connection) -> None:
        rowid, text = db.execute(f"SELECT rowid, record FROM {table} LIMIT 1").fetchone()
        record = json.loads(text)
        record[field] = value
        db.execute(f"UPDATE {table} SET record = ? WHERE rowid = ?", (json.dumps(record), rowid))

    assert_corrupt_after(tmp_path / "a.sqlite3", damage)
