"""The store protocol and the in-memory store (no durability: tests and benchmarks)."""

from __future__ import annotations

from typing import NamedTuple, Protocol

from fsm.durable.calls import CallRecord
from fsm.errors import StoreCorruptError
from fsm.sse.guard import GuardConfig, GuardSnapshot, SseDelta, SseStored

EMPTY = SseStored(GuardSnapshot("", (), (), False))
"""What an empty store holds."""

MAX_SSE_CALLS = 64
"""Calls a :class:`SessionRecord` lists at most (the newest): an SSE adapter drops a call
from it once the call's stream ended, so this bounds only calls sent and not yet ended."""


RESUMABLE = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The requests whose method and params an SSE adapter records before they are sent, so
a restart can resume their streams: those a server answers after asking the user. A
stored call of any other method does not read back."""


class SseCall(NamedTuple):
    """A request an SSE adapter sent on the session whose response stream a restart may
    resume: the stream's name (``post:<request id>``), the JSON-RPC method, and its
    params as canonical JSON (``None``: none)."""

    stream: str
    method: str
    params: str | None


class SessionRecord(NamedTuple):
    """What an SSE adapter keeps to rejoin its session after a restart, written whole
    (each write replaces the last): the session id, the ``InitializeResult`` the server
    answered (JSON, adopted again without a new ``initialize``), and the calls sent and
    not known ended, oldest first (at most :data:`MAX_SSE_CALLS`), and the server's URL
    the session was opened on (scheme, host, port and path only: never credentials, a
    query or a fragment; ``""`` in a record written without it, which is never rejoined).
    Written before a call's request is sent, so a call whose stream is stored is listed."""

    session: str
    initialize: str
    calls: tuple[SseCall, ...] = ()
    url: str = ""


class LoadLimits(NamedTuple):
    """The most records of each kind a :meth:`Store.load` reads: a store holding more is
    refused (:class:`~fsm.errors.StoreCorruptError`, naming the kind, its count and its
    limit) before any of its records is read, so a load stays as bounded as the guard
    that wrote it (each record is bounded too: ``codec.MAX_VALUE_BYTES``)."""

    streams: int
    requests: int
    questions: int
    """Questions, and question keys re-shown (one per question at most)."""

    @classmethod
    def of(cls, config: GuardConfig) -> LoadLimits:
        """What a guard configured by ``config`` can have written: ``max_streams``
        streams, and ``max_live_requests + max_tombstones`` requests and questions."""
        requests = config.max_live_requests + config.max_tombstones
        return cls(config.max_streams, requests, requests)

    def check(self, where: str, counts: LoadLimits) -> None:
        """:class:`~fsm.errors.StoreCorruptError` if ``counts`` (the records a store holds
        of each kind) exceed these limits; ``where`` names the store."""
        over = [
            f"{name}: {held} stored, limit {limit}"
            for name, held, limit in zip(self._fields, counts, self, strict=True)
            if held > limit
        ]
        if over:
            raise StoreCorruptError(
                f"{where}: more records than this guard's limits allow ({'; '.join(over)})"
                ": not loaded",
                path=where,
            )


Delta = SseDelta | CallRecord
"""What one ``Persist`` carries: the SSE guard's delta, or an MRTR call's or a task's
whole record (which replaces the one stored under its call id)."""

Written = Delta | SessionRecord
"""Anything a store writes (what a file store's ``before_write`` hook is given)."""

MAX_ENDED_CALLS = 256
"""Ended calls' records a store keeps (their tombstones: an ended call is not run again);
the oldest beyond this many leave, so the store stays bounded."""


class Store(Protocol):
    """Where a durable guard's deltas go, one client profile per store.

    ``write`` returns once the delta is durable (the embedder takes the actions after a
    ``Persist`` only then); ``load`` returns every delta written, applied in order
    (:meth:`fsm.sse.guard.SseStored.apply`); ``writes`` counts the writes made through
    this object; ``calls`` returns the stored MRTR calls' and tasks' records, ``call`` one
    of them; ``write_session`` and ``session`` write and read the SSE adapter's
    :class:`SessionRecord`. Nothing is written for
    a progress event: the guard asks for no write. One store serves every era.
    """

    @property
    def writes(self) -> int:
        """The deltas written through this object."""
        ...

    def write(self, delta: Delta) -> None:
        """Make ``delta`` durable (one atomic write)."""
        ...

    def load(self, limits: LoadLimits | None = None) -> SseStored:
        """What is stored: start a guard from it with ``Guard.restart``. With ``limits``
        (:meth:`LoadLimits.of` the guard's config), a store holding more records of a kind
        is :class:`~fsm.errors.StoreCorruptError` before any record is read."""
        ...

    def calls(self) -> dict[str, CallRecord]:
        """The MRTR calls' and tasks' records by call id: restart each with
        :meth:`fsm.durable.calls.DurableCall.restart`."""
        ...

    def call(self, call_id: str) -> CallRecord | None:
        """The record of call ``call_id`` alone, or ``None``: reads that one record, so
        a record of another call that does not read back cannot fail this call's start."""
        ...

    def write_session(self, record: SessionRecord) -> None:
        """Make ``record`` durable, replacing the session record stored (one atomic write,
        counted in ``writes``)."""
        ...

    def session(self) -> SessionRecord | None:
        """The SSE adapter's :class:`SessionRecord` last written, or ``None``."""
        ...

    def close(self) -> None:
        """Release the store (and its file, for a file store). Idempotent."""
        ...


def counts(stored: SseStored) -> LoadLimits:
    """The records of each kind ``stored`` holds, as :meth:`LoadLimits.check` reads them
    (re-shown keys count as questions: the larger of the two)."""
    snap = stored.snapshot
    questions = max(len(stored.questions), len(stored.reshown))
    return LoadLimits(len(snap.streams), len(snap.requests), questions)


class MemoryStore:
    """A :class:`Store` in this process's memory: survives nothing, costs no disk write.
    ``stored`` is the current content. A write rebuilds it (O(records stored), bounded
    as the guard's tombstones are): for tests, models and benchmarks."""

    def __init__(self, stored: SseStored = EMPTY) -> None:
        self.stored = stored
        self._calls: dict[str, CallRecord] = {}
        self._session: SessionRecord | None = None
        self._writes = 0

    @property
    def writes(self) -> int:
        """The deltas written."""
        return self._writes

    def write(self, delta: Delta) -> None:
        """Apply ``delta``."""
        if isinstance(delta, CallRecord):
            self._calls.pop(delta.call, None)  # the newest write last, as SQLite orders them
            self._calls[delta.call] = delta
            ended = [c for c, r in self._calls.items() if r.ended]
            for call in ended[: max(0, len(ended) - MAX_ENDED_CALLS)]:
                del self._calls[call]
        else:
            self.stored = self.stored.apply(delta)
        self._writes += 1

    def load(self, limits: LoadLimits | None = None) -> SseStored:
        """The current content (checked against ``limits``, as every store's load is)."""
        if limits is not None:
            limits.check("memory store", counts(self.stored))
        return self.stored

    def calls(self) -> dict[str, CallRecord]:
        """The calls' current records."""
        return dict(self._calls)

    def call(self, call_id: str) -> CallRecord | None:
        """The current record of ``call_id``, or ``None``."""
        return self._calls.get(call_id)

    def write_session(self, record: SessionRecord) -> None:
        """Replace the session record."""
        self._session = record
        self._writes += 1

    def session(self) -> SessionRecord | None:
        """The session record last written."""
        return self._session

    def close(self) -> None:
        """Nothing to release."""
