"""The SSE adapter's session record: written whole, read back equal (SQLite and memory),
replaced by the next write, kept apart from the guard's deltas; a record without the
server's URL reads back with none; a row that does not read back (a call of a method that
is not resumable among them) is ``StoreCorruptError``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from fsm.durable import MemoryStore, SqliteStore
from fsm.durable.store import MAX_SSE_CALLS, SessionRecord, SseCall
from fsm.errors import StoreCorruptError
from fsm.sse.guard import SseDelta

RECORD = SessionRecord(
    "s1",
    '{"protocolVersion": "2025-11-25"}',
    (
        SseCall("post:1", "tools/call", '{"name":"delete_files"}'),
        SseCall("post:2", "prompts/get", None),
    ),
    "http://127.0.0.1:1/mcp",
)


def test_the_record_reads_back_and_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "p.sqlite3"
    with SqliteStore(path) as store:
        assert store.session() is None
        store.write(SseDelta("s1", False, (), (), (), ()))
        store.write_session(RECORD)
        assert store.writes == 2
    with SqliteStore(path) as store:
        assert store.session() == RECORD
        assert store.load().snapshot.session == "s1"  # the guard's meta is untouched
        store.write_session(RECORD._replace(calls=()))
        assert store.session() == RECORD._replace(calls=())
    memory = MemoryStore()
    memory.write_session(RECORD)
    assert memory.session() == RECORD and memory.writes == 1


def _with_raw_record(tmp_path: Path, value: str) -> Path:
    """A store file whose session record is ``value``, written past the codec."""
    path = tmp_path / "p.sqlite3"
    SqliteStore(path).close()
    db = sqlite3.connect(path)
    with db:
        db.execute("INSERT INTO meta VALUES ('rejoin', ?)", (value,))
    db.close()
    return path


@pytest.mark.parametrize(
    "value",
    [
        "not json",
        '["s1", 2, []]',
        '["s1", "{}", [["post:1", "tools/call"]]]',
        '["s1", "{}"]',
        '["s1", "{}", [["post:1", "ping", null]], "http://a/"]',
        '["s1", "{}", [["post:1", "tools/callx", null]]]',
        '["s1", "{}", [], 7]',
        "[" * 200_000 + "]" * 200_000,  # nested deeper than the decoder recurses
    ],
)
def test_a_record_that_does_not_read_back_is_corrupt(tmp_path: Path, value: str) -> None:
    path = _with_raw_record(tmp_path, value)
    with SqliteStore(path) as store, pytest.raises(StoreCorruptError):
        store.session()


def test_an_unbounded_list_of_calls_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "p.sqlite3"
    calls = tuple(SseCall(f"post:{n}", "tools/call", None) for n in range(MAX_SSE_CALLS + 1))
    with SqliteStore(path) as store:
        store.write_session(RECORD._replace(calls=calls))
        with pytest.raises(StoreCorruptError):
            store.session()


def test_a_record_without_the_url_reads_back_with_none(tmp_path: Path) -> None:
    path = _with_raw_record(tmp_path, '["s1", "{}", []]')
    with SqliteStore(path) as store:
        assert store.session() == SessionRecord("s1", "{}", (), "")
