"""The embedded default store: one SQLite file per client profile (standard library).

* **Journal** WAL, with ``synchronous=FULL``: a commit returns once the WAL is synced, so
  a question recorded before its prompt survives a power loss too. (``NORMAL`` in WAL
  mode survives a process crash but may lose the last commits on power loss: the user
  would then be asked again, unmarked, for something already shown or answered.) Writes
  are rare (a question, an answer, an outcome, an end; never a progress event), so the
  sync is affordable: see bench/durable_bench.py.
* **One process per file**: the connection takes SQLite's exclusive lock at open
  (``locking_mode=EXCLUSIVE`` and ``BEGIN EXCLUSIVE``) and keeps it until
  :meth:`SqliteStore.close`; a second store on the same file, in this process or
  another, gets :class:`~fsm.errors.StoreLockedError` at once (no wait). The lock is
  released by the OS when the process dies, so a restart after a crash opens it.
* **Schema** versioned by ``PRAGMA user_version`` (:data:`~fsm.durable.codec.SCHEMA_VERSION`),
  migrated forward at open in one transaction; a newer version is
  :class:`~fsm.errors.StoreVersionError`.
* **Bad files**: a file that is not a database, is truncated or damaged (SQLite says so
  when a page is read), or holds a row that does not read back, is
  :class:`~fsm.errors.StoreCorruptError`, at open or at :meth:`SqliteStore.load`
  (which reads every row). Never a fresh start on its own: that could ask
  an answered question again; an application that accepts that moves the file aside.
* **Keys**: requests and questions by (session, request id), streams by stream name;
  the session id and whether it expired in ``meta``, and the SSE adapter's
  :class:`~fsm.durable.store.SessionRecord` there too (name ``rejoin``); an MRTR call's
  or a task's record (:class:`~fsm.durable.calls.CallRecord`) by call id in ``calls``,
  replaced by each write, at most :data:`~fsm.durable.store.MAX_ENDED_CALLS` ended ones
  kept.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from fsm.durable import codec, store
from fsm.durable.calls import CallRecord
from fsm.durable.codec import SCHEMA_VERSION
from fsm.errors import StoreCorruptError, StoreError, StoreLockedError, StoreVersionError
from fsm.machines.resumption import LIVENESS
from fsm.sse.guard import SseDelta, SseStored

_COUNTS = (
    "SELECT (SELECT COUNT(*) FROM streams), (SELECT COUNT(*) FROM requests),"
    " (SELECT COUNT(*) FROM questions)"
)
"""The rows :meth:`SqliteStore.load` would read of each kind, as
:class:`~fsm.durable.store.LoadLimits` counts them (a re-shown question is a flag on its
row)."""

MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1
    """
    CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE streams (id TEXT PRIMARY KEY, record TEXT NOT NULL);
    CREATE TABLE requests (
        session TEXT NOT NULL, rid TEXT NOT NULL, record TEXT NOT NULL,
        PRIMARY KEY (session, rid));
    CREATE TABLE questions (
        session TEXT NOT NULL, rid TEXT NOT NULL, method TEXT NOT NULL, params TEXT,
        reshown INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (session, rid));
    """,
    # 1 -> 2: the MRTR calls' and tasks' records, one row per call, newest write last
    """
    CREATE TABLE calls (
        call TEXT PRIMARY KEY, era TEXT NOT NULL, ended INTEGER NOT NULL,
        seq INTEGER NOT NULL, record TEXT NOT NULL);
    CREATE INDEX calls_ended ON calls (ended, seq);
    """,
)
"""``MIGRATIONS[n]`` takes a file from version ``n`` to ``n + 1``."""

_PROFILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def profile_path(directory: str | Path, profile: str) -> Path:
    """The store file of client profile ``profile`` in ``directory``: one file each.
    Raises ``ValueError`` for a profile name that is not a plain file name (letters,
    digits, ``.``, ``_``, ``-``; at most 128)."""
    if not _PROFILE.fullmatch(profile):
        raise ValueError(f"not a profile name: {profile!r}")
    return Path(directory) / f"{profile}.sqlite3"


class SqliteStore:
    """A :class:`~fsm.durable.store.Store` in one SQLite file (see the module docstring).

    ``before_write(delta)``, if given, is called before each write (crash tests stop the
    process there). Its methods may be called from any thread (an asyncio embedder writes
    from a worker thread), one at a time: a lock serialises them."""

    def __init__(
        self,
        path: str | Path,
        *,
        before_write: Callable[[store.Written], None] | None = None,
    ) -> None:
        self.path = str(path)
        self._before_write = before_write
        self._writes = 0
        self._lock = threading.Lock()  # one transaction at a time, from any thread
        self._db: sqlite3.Connection | None = None
        try:
            db = sqlite3.connect(
                self.path, timeout=0, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}", path=self.path) from exc
        try:
            _open(db, self.path)
        except BaseException:
            db.close()
            raise
        self._db = db

    @property
    def writes(self) -> int:
        """The deltas written through this store."""
        return self._writes

    def write(self, delta: store.Delta) -> None:
        """Write ``delta`` in one transaction; returns once it is synced."""
        with self._lock:
            self._write_locked(delta)

    def write_session(self, record: store.SessionRecord) -> None:
        """Replace the SSE adapter's session record in one transaction (synced)."""
        with self._lock:
            self._write_locked(record)

    def _write_locked(self, delta: store.Written) -> None:
        db = self._conn()
        if self._before_write is not None:
            self._before_write(delta)
        with _errors(self.path), codec.naming_store(self.path):
            db.execute("BEGIN")
            try:
                if isinstance(delta, store.SessionRecord):
                    db.execute(
                        "INSERT OR REPLACE INTO meta VALUES ('rejoin', ?)",
                        (codec.dump_session(delta),),
                    )
                elif isinstance(delta, CallRecord):
                    _write_call(db, delta)
                else:
                    _write(db, delta)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        self._writes += 1

    def load(self, limits: store.LoadLimits | None = None) -> SseStored:
        """Everything stored (:class:`~fsm.errors.StoreCorruptError` for a row that does
        not read back, or, with ``limits``, for more rows of a kind than they allow,
        counted before any row is read)."""
        with self._lock:
            return self._load_locked(limits)

    def _load_locked(self, limits: store.LoadLimits | None) -> SseStored:
        db = self._conn()
        with _errors(self.path), codec.naming_store(self.path):
            if limits is not None:
                limits.check(self.path, store.LoadLimits(*db.execute(_COUNTS).fetchone()))
            session, expired = codec.load_meta(dict(db.execute("SELECT name, value FROM meta")))
            streams = tuple(
                codec.load_stream(r) for (r,) in db.execute("SELECT record FROM streams")
            )
            requests = tuple(
                codec.load_request(r) for (r,) in db.execute("SELECT record FROM requests")
            )
            rows = list(db.execute("SELECT session, rid, method, params, reshown FROM questions"))
            questions = tuple(codec.load_question(s, r, m, p) for s, r, m, p, _ in rows)
        reshown = tuple(q.key for q, row in zip(questions, rows, strict=True) if row[4])
        everything = SseDelta(session, expired, streams, requests, questions, reshown)
        return store.EMPTY.apply(everything)

    def calls(self) -> dict[str, CallRecord]:
        """The MRTR calls' and tasks' records by call id
        (:class:`~fsm.errors.StoreCorruptError` for a row that does not read back)."""
        with self._lock:
            db = self._conn()
            with _errors(self.path):
                rows = list(db.execute("SELECT call, record FROM calls ORDER BY seq"))
        return {call: self._load_call(call, text) for call, text in rows}

    def call(self, call_id: str) -> CallRecord | None:
        """The record of ``call_id`` alone (one row decoded), or ``None``
        (:class:`~fsm.errors.StoreCorruptError` if that row does not read back)."""
        with self._lock:
            db = self._conn()
            with _errors(self.path):
                row = db.execute("SELECT record FROM calls WHERE call = ?", (call_id,)).fetchone()
        return None if row is None else self._load_call(call_id, row[0])

    def session(self) -> store.SessionRecord | None:
        """The SSE adapter's session record (in ``meta``, name ``rejoin``), or ``None``
        (:class:`~fsm.errors.StoreCorruptError` if it does not read back)."""
        with self._lock:
            db = self._conn()
            with _errors(self.path):
                row = db.execute("SELECT value FROM meta WHERE name = 'rejoin'").fetchone()
        if row is None:
            return None
        with codec.naming_store(self.path):
            return codec.load_session(row[0])

    def _load_call(self, call: str, text: str) -> CallRecord:
        with codec.naming_store(self.path):
            return codec.load_call_of(call, text)

    def close(self) -> None:
        """Close the file and release its lock (idempotent)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError(f"{self.path} is closed", path=self.path)
        return self._db


def _open(db: sqlite3.Connection, path: str) -> None:
    """Lock, check and migrate a freshly connected file."""
    with _errors(path):
        db.execute("PRAGMA locking_mode=EXCLUSIVE")
        db.execute("BEGIN EXCLUSIVE")  # takes the lock now, and keeps it (exclusive mode)
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            db.execute("ROLLBACK")
            raise StoreVersionError(
                f"{path} has schema {version}; this library reads up to {SCHEMA_VERSION}",
                path=path,
            )
        for n in range(version, SCHEMA_VERSION):
            for statement in MIGRATIONS[n].split(";"):
                if statement.strip():
                    db.execute(statement)
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        db.execute("COMMIT")
        mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        db.execute("PRAGMA synchronous=FULL")
        if mode != "wal":
            raise StoreError(f"{path}: journal_mode is {mode}, not wal", path=path)


def _write(db: sqlite3.Connection, d: SseDelta) -> None:
    db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", codec.dump_meta(d))
    db.executemany("DELETE FROM streams WHERE id = ?", ((n,) for n in d.dropped))
    gone = [(k[0], codec.dump_id(k[1])) for k in d.forgotten]
    db.executemany("DELETE FROM requests WHERE session = ? AND rid = ?", gone)
    db.executemany("DELETE FROM questions WHERE session = ? AND rid = ?", gone)
    db.executemany(
        "INSERT OR REPLACE INTO streams VALUES (?, ?)",
        ((s.id, codec.dump_stream(s)) for s in d.streams),
    )
    db.executemany(
        "INSERT OR REPLACE INTO requests VALUES (?, ?, ?)",
        ((r.key[0], codec.dump_id(r.key[1]), codec.dump_request(r)) for r in d.requests),
    )
    db.executemany(
        "INSERT OR REPLACE INTO questions (session, rid, method, params) VALUES (?, ?, ?, ?)",
        (
            (
                q.key[0],
                codec.dump_id(q.key[1]),
                q.method,
                None if q.params is None else codec.storable(q.params),
            )
            for q in d.questions
        ),
    )
    db.executemany(
        "UPDATE questions SET reshown = 1 WHERE session = ? AND rid = ?",
        ((k[0], codec.dump_id(k[1])) for k in d.reshown),
    )
    ended = [
        (r.key[0], codec.dump_id(r.key[1])) for r in d.requests if r.state in LIVENESS.terminal
    ]
    db.executemany("DELETE FROM questions WHERE session = ? AND rid = ?", ended)  # not asked again


def _write_call(db: sqlite3.Connection, rec: CallRecord) -> None:
    seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM calls").fetchone()[0]
    db.execute(
        "INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?, ?)",
        (rec.call, rec.era, int(rec.ended), seq, codec.dump_call(rec)),
    )
    if rec.ended:  # keep the newest ended records only: the store stays bounded
        db.execute(
            "DELETE FROM calls WHERE ended = 1 AND seq NOT IN "
            "(SELECT seq FROM calls WHERE ended = 1 ORDER BY seq DESC LIMIT ?)",
            (store.MAX_ENDED_CALLS,),
        )


class _errors:
    """Map ``sqlite3`` errors to the store's typed errors."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if exc is None or isinstance(exc, StoreError):
            return
        text = str(exc)
        if isinstance(exc, sqlite3.OperationalError) and "locked" in text:
            raise StoreLockedError(f"{self.path} is in use: {text}", path=self.path) from exc
        if isinstance(exc, sqlite3.OperationalError):  # cannot open, read-only, disk full
            raise StoreError(f"{self.path} cannot be used: {text}", path=self.path) from exc
        if isinstance(exc, sqlite3.DatabaseError):  # not a database, malformed, truncated
            raise StoreCorruptError(f"{self.path} is not a store: {text}", path=self.path) from exc
