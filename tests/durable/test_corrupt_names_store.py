"""A SQLite row that does not read back is :class:`StoreCorruptError` naming the store
file, in its message and as its ``path``, whichever read meets it (``load``, ``calls``,
``call``, ``session``), as the Redis store names its server and prefix."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from durable_script import drive

from fsm.durable import SqliteStore
from fsm.durable.calls import DurableCall
from fsm.durable.store import SessionRecord
from fsm.errors import StoreCorruptError
from fsm.mrtr.call import MrtrCall

DAMAGES: dict[str, tuple[str, Callable[[SqliteStore], object]]] = {
    "stream": ("UPDATE streams SET record = 'not json'", SqliteStore.load),
    "meta": ("UPDATE meta SET value = '2' WHERE name = 'expired'", SqliteStore.load),
    "calls": ("UPDATE calls SET record = 'not json'", SqliteStore.calls),
    "call": ("UPDATE calls SET record = 'not json'", lambda store: store.call("c")),
    "session": ("UPDATE meta SET value = '[]' WHERE name = 'rejoin'", SqliteStore.session),
}
"""What a test does to the file, and the read that meets it."""


def _written(path: Path) -> None:
    """A store at ``path`` holding the scripted session, one call and a session record."""
    with SqliteStore(path) as store:
        drive(store)
        store.write(DurableCall(MrtrCall("c", clock=lambda: 0.0)).record())
        store.write_session(SessionRecord("s", "{}"))


@pytest.mark.parametrize("kind", sorted(DAMAGES))
def test_a_row_that_does_not_read_back_names_the_file(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "p.sqlite3"
    _written(path)
    statement, read = DAMAGES[kind]
    db = sqlite3.connect(path)
    with db:
        assert db.execute(statement).rowcount >= 1  # the damage is done
    db.close()
    with SqliteStore(path) as store, pytest.raises(StoreCorruptError) as caught:
        read(store)
    assert caught.value.path == str(path)
    assert str(caught.value).startswith(f"{path}: ")
