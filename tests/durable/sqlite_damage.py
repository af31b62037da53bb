"""A SQLite store file holding the scripted session (:func:`durable_script.drive`),
damaged by the test: its load must be ``StoreCorruptError``."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from durable_script import drive

from fsm.durable import SqliteStore
from fsm.errors import StoreCorruptError

Damage = Callable[[sqlite3.Connection], object]
"""What a test does to the file's rows, in one transaction."""


def assert_corrupt_after(path: Path, damage: Damage) -> None:
    """Write the scripted session to a new SQLite store at ``path``, apply ``damage`` to
    the closed file, and check that opening it again loads ``StoreCorruptError``."""
    with SqliteStore(path) as store:
        drive(store)
    db = sqlite3.connect(path)
    with db:
        damage(db)
    db.close()
    with SqliteStore(path) as store, pytest.raises(StoreCorruptError):
        store.load()
