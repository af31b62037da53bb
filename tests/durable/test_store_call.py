"""``Store.call``: one call's record read alone, so a record of another call that does not
read back fails only that call's start (the adapters' start reads this, not ``calls()``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from fsm.adapters._stored import load_record
from fsm.durable import MemoryStore, SqliteStore
from fsm.durable.calls import CallRecord, DurableCall
from fsm.errors import StoreCorruptError
from fsm.mrtr.call import MrtrCall

pytestmark = pytest.mark.anyio


def record(call: str) -> CallRecord:
    return DurableCall(MrtrCall(call, clock=lambda: 0.0)).record()


def corrupt_row(path: Path, call: str) -> None:
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE calls SET record = 'not json' WHERE call = ?", (call,))
    db.close()


async def test_a_corrupt_row_fails_only_its_own_call(tmp_path: Path) -> None:
    path = tmp_path / "p.sqlite3"
    with SqliteStore(path) as store:
        store.write(record("good"))
        store.write(record("bad"))
    corrupt_row(path, "bad")
    with SqliteStore(path) as store:
        with pytest.raises(StoreCorruptError):
            store.calls()  # every row decoded
        good = await load_record(store, "good", "mrtr")
        assert good is not None and good.call == "good"
        assert store.call("missing") is None
        with pytest.raises(StoreCorruptError):
            store.call("bad")


def test_a_row_holding_another_call_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "p.sqlite3"
    with SqliteStore(path) as store:
        store.write(record("a"))
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE calls SET call = 'b' WHERE call = 'a'")
    db.close()
    with SqliteStore(path) as store, pytest.raises(StoreCorruptError, match="another call"):
        store.call("b")


def test_memory_store_reads_one_call() -> None:
    store = MemoryStore()
    store.write(record("a"))
    found = store.call("a")
    assert found is not None and found.call == "a"
    assert store.call("b") is None
