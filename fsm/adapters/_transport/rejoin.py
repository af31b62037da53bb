"""A guarded session with a store (:class:`~fsm.durable.store.Store`): the guard's
decisions written ahead, and a restarted process rejoining the session to resume each
call that was in flight.

* **Write-ahead.** The guard is durable: each :class:`~fsm.actions.Persist` it returns
  comes first among a feed's actions, and :meth:`SessionIO.perform` writes it (a
  synchronous write, on the event loop) before any other action of that feed is taken
  and before the event that caused it is passed on to the SDK: a question is on disk
  before the SDK's callback shows it, an answer before its POST, an end before the
  call's result or error.
* **What a rejoin needs** (:class:`~fsm.durable.store.SessionRecord`, written whole):
  the session id and the ``InitializeResult`` once the session is initialized, and each
  call's method and params (:data:`RESUMABLE` methods) before its request is sent.
* **Leaving** (the guarded session closes: :func:`forget_session`) clears the record: the
  next process starts a fresh session.
* **Restart** (:func:`restart`, when the store holds a session to rejoin): the
  guard starts from the store (:meth:`fsm.sse.guard.Guard.restart`), the SDK session
  adopts the stored ``InitializeResult`` (no ``initialize`` is sent) and numbers its
  requests past the ids the store names (:data:`ID_MARGIN`), and every request carries
  the stored session id. The calls in flight at the crash are
  :attr:`SessionIO.restored`; :func:`resume_call` resumes one through the SDK's own
  resumption (a ``GET`` with ``Last-Event-ID``, which the transport turns into the
  guard's resume from the stored cursor), so the server replays what the stream carried
  after the last write: an answered question is never shown again (its stored answer is
  resubmitted while in flight), a question on screen at the crash is shown once more,
  marked (:func:`reshow`), and the call ends with exactly one outcome.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import anyio
import anyio.to_thread

from fsm import actions as act
from fsm import events as ev
from fsm.adapters._transport.handles import CURRENT_CALL
from fsm.adapters._transport.http import origin_of
from fsm.durable.store import (
    MAX_SSE_CALLS,
    RESUMABLE,
    LoadLimits,
    SessionRecord,
    SseCall,
    Store,
)
from fsm.errors import GuardUsageError, InteractionFailed, StoreCorruptError
from fsm.machines.resumption import LIVENESS
from fsm.questions import canonical_json
from fsm.sse.guard import SseStored

if TYPE_CHECKING:
    from fsm.adapters._transport.session import GuardedSession
    from fsm.adapters._transport.session_io import SessionIO

__all__ = [
    "ID_MARGIN",
    "REJOIN_TOKEN",
    "RESUMABLE",
    "SdkRejoin",
    "forget_session",
    "record_call",
    "record_session",
    "reshow",
    "restart",
    "resume_call",
    "session_url",
]

ID_MARGIN = 1024
"""How far past the highest request id the store names a rejoined session's SDK starts
numbering: requests the old process sent after its last write (answered as plain JSON,
or not tracked) are not stored, and an id must not be used twice in a session."""

REJOIN_TOKEN = "fsm-rejoin:"
"""The prefix of the resumption token :func:`resume_call` gives the SDK: the transport
knows its ``GET`` by it and resumes the named stream from the guard's stored cursor."""


class SdkRejoin(Protocol):
    """What rejoining needs of an SDK line (an :class:`~fsm.adapters.core.SdkBinding`'s
    ``rejoin``; ``None`` for a line that cannot adopt a stored session)."""

    def dump_initialize(self, result: Any) -> str:
        """The ``InitializeResult`` ``initialize()`` returned, as JSON."""
        ...

    def adopt(self, session: Any, initialize: str, next_id: int) -> None:
        """Install the stored ``InitializeResult`` on a fresh SDK session (no traffic), and
        have it number its requests from ``next_id`` (ids are unique in a session)."""
        ...

    def resume(self, session: Any, call: SseCall, token: str) -> Awaitable[Any]:
        """Send ``call`` again as a resumption with token ``token`` (no POST: the SDK
        GETs with ``Last-Event-ID``); its result as the SDK returns it."""
        ...

    def reshow(self, session: Any, callback: Any, shown: act.Reshown) -> Awaitable[Any]:
        """Show ``shown`` (marked as re-shown) through the application's callback; the
        answer as a JSON object, or ``None`` (refused, or not a question this line can
        show again)."""
        ...


def session_url(url: str) -> str:
    """What a session record keeps of the server's URL: scheme, host, port and path as
    the application gave them (no user name or password, query or fragment). ``""`` for a
    URL that does not parse (never rejoined)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def restart(e: SessionIO, store: Store) -> tuple[act.Reshown, ...]:
    """Start ``e``'s (fresh, durable) guard from ``store`` if it holds a session to rejoin
    (a session record opened on this URL (:func:`session_url`) whose session the guard's
    store names, not expired); take the restart's actions (writes, ends, resubmissions)
    and return its re-shows, for :func:`reshow` once the SDK session exists. Nothing to
    rejoin: ``()``, and the session starts afresh. A stored state beyond the guard's own
    limits is refused with :class:`~fsm.errors.StoreCorruptError`: more streams, requests
    or questions than :meth:`LoadLimits.of` its config before any is read, then more live
    requests or tombstones than ``max_live_requests`` or ``max_tombstones``."""
    record = store.session()
    if record is None or not record.session or record.url != session_url(e.url):
        return ()
    stored = store.load(LoadLimits.of(e.guard.config))
    snap = stored.snapshot
    if snap.session != record.session or snap.expired:
        return ()
    _check_bounds(e, stored)
    e.session, e.rejoin, e.rejoined = record.session, record, True
    e.restored = tuple(record.calls)
    origins = [s.origin for s in snap.streams] + [origin_of(c.stream) for c in record.calls]
    used = [o for o in origins if isinstance(o, int) and not isinstance(o, bool)]
    e.next_id = max(used, default=0) + ID_MARGIN
    actions = e.guard.restart(stored)
    e.perform(actions)
    return tuple(a for a in actions if isinstance(a, act.Reshown))


def _check_bounds(e: SessionIO, stored: SseStored) -> None:
    """Refuse (:class:`~fsm.errors.StoreCorruptError`) a stored state the guard could not
    have written under its own limits: more live requests or more tombstones than it
    keeps (the load itself refused more streams or requests in all than
    :class:`~fsm.durable.store.LoadLimits` allow, before reading them)."""
    cfg = e.guard.config
    snap = stored.snapshot
    ended = sum(1 for r in snap.requests if r.state in LIVENESS.terminal)
    live = len(snap.requests) - ended
    over = [
        f"{name}={limit} ({held} stored)"
        for name, limit, held in (
            ("max_live_requests", cfg.max_live_requests, live),
            ("max_tombstones", cfg.max_tombstones, ended),
        )
        if held > limit
    ]
    if over:
        raise StoreCorruptError(f"the stored state is beyond this guard's limits: {over}")


async def record_session(e: SessionIO, store: Store, initialize: str) -> None:
    """The session is initialized: write what a restart needs to rejoin it (with the
    server's URL as :func:`session_url` keeps it)."""
    if not e.session:
        return
    e.rejoin = SessionRecord(e.session, initialize, (), session_url(e.url))
    await anyio.to_thread.run_sync(store.write_session, e.rejoin)


def forget_session(e: SessionIO) -> None:
    """The application left the session (the guarded session closed, not a crash): its
    record is cleared, so the next process starts a fresh session instead of rejoining
    one its client ended (the SDK's ``DELETE``) or abandoned."""
    if e.store is not None and e.rejoin is not None:
        e.rejoin = None
        e.store.write_session(SessionRecord("", "", ()))


async def record_call(e: SessionIO, stream: str, body: Mapping[str, Any]) -> None:
    """Before a :data:`RESUMABLE` request is sent as ``stream``: list it in the session
    record (its method and params), dropping calls whose streams ended; the newest
    :data:`MAX_SSE_CALLS` are kept."""
    store, record = e.store, e.rejoin
    method = body.get("method")
    if store is None or record is None or method not in RESUMABLE:
        return
    params = body.get("params")
    state = e.guard.stream_state
    kept = [c for c in record.calls if c.stream != stream and state(c.stream) not in _ENDED]
    call = SseCall(stream, str(method), None if params is None else canonical_json(params))
    updated = record._replace(calls=(*kept, call)[-MAX_SSE_CALLS:])
    await anyio.to_thread.run_sync(store.write_session, updated)
    e.rejoin = updated  # only once written: a refused record is not written again


_ENDED = ("done", "dead")


async def reshow(
    e: SessionIO, rejoin: SdkRejoin, session: Any, callback: Any, shown: act.Reshown
) -> None:
    """Show a question that was on screen at the crash once more (marked), under a
    prompt scope the guard's ``Withdraw`` cancels, and give the guard its answer (the
    answer written ahead, then submitted). A refusal, or a line that cannot show it,
    leaves the question unanswered: the server's deadline or the call's end settles it."""
    from fsm.adapters._transport.session import _prompt_scope

    answer: Any = None
    with _prompt_scope(e, shown.key[1]):
        answer = await rejoin.reshow(session, callback, shown)
    if isinstance(answer, Mapping) and e.guard.state_of(shown.key) == "presented":
        e.feed(ev.UserAnswered(shown.key, answer))


async def resume_call(conn: GuardedSession, rejoin: SdkRejoin, call: SseCall) -> Any:
    """Resume ``call`` (one of :attr:`SessionIO.restored`) to its one outcome: its
    result, or one typed error: the guard's (the stream ended at the restart, e.g. with
    no cursor stored), or :class:`~fsm.errors.InteractionFailed` with reason
    ``ended-before-restart`` (its end was recorded before the crash: its result is not
    stored) or ``not-resumable`` (no stream of it was stored: whether the server ran it
    is not known; the application decides whether to send it again).
    :class:`~fsm.errors.GuardUsageError` for a call not in :attr:`SessionIO.restored`
    or one already being resumed."""
    e = conn._e
    stream = call.stream
    if call not in e.restored:
        raise GuardUsageError(f"{stream} is not a call this session restored")
    if stream in e.resume_calls:
        raise GuardUsageError(f"{stream} is already being resumed")
    e.resume_calls.add(stream)
    try:
        return await _resume(conn, rejoin, call)
    finally:
        e.resume_calls.discard(stream)


async def _resume(conn: GuardedSession, rejoin: SdkRejoin, call: SseCall) -> Any:
    """:func:`resume_call` of a call checked to be restored and not being resumed."""
    e = conn._e
    stream = call.stream
    state = e.guard.stream_state(stream)
    if state is None or state in _ENDED:
        failed = e.failures.get(stream)
        if failed is not None:
            from fsm.adapters._transport.session import _again

            raise _again(e, failed)
        reason = "not-resumable" if state is None else "ended-before-restart"
        raise e.typed(
            InteractionFailed(
                f"{stream} cannot be resumed after the restart ({reason})",
                stream=stream,
                reason=reason,
                evidence=(f"stored stream state {state}",),
            )
        )
    token = REJOIN_TOKEN + stream
    e.resuming[token] = stream

    async def run() -> Any:
        slot = CURRENT_CALL.get()
        if slot is not None:  # the resumed stream decides this call
            slot.origin = origin_of(stream)
            e.calls[slot.origin] = slot
        return await rejoin.resume(conn.session, call, token)

    try:
        return await conn.call(run, method=None)
    finally:
        e.resuming.pop(token, None)


def params_of(call: SseCall) -> Any:
    """A stored call's params, decoded."""
    return None if call.params is None else json.loads(call.params)
