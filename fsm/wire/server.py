"""An in-process mcp streamable-HTTP server (1.x or 2.x) for end-to-end tests and the demo.

What it offers (protocol 2025-11-25 over the legacy, session-ful streamable HTTP transport):

- Tool ``delete_files(files, deadline, gated, after_deadline, deadline_seconds)``: asks the
  client "Delete N files?" with ``elicitation/create`` and waits for the answer under a
  server-side deadline.  The deadline is fired by **explicit command** through
  :class:`ServerController` (:meth:`ServerController.fire_deadline`), or by an optional timer
  for the demo.  Two flavours:

  * ``deadline="silent"``: the pending request is dropped with no wire trace (the seed
    incident's case; the SDK's ``cancel_on_abandon=False`` channel, the v1.x behaviour).
    A later answer for it gets ``202`` and is dropped by the server's dispatcher.
  * ``deadline="cancel"``: the mcp v2 courtesy ``notifications/cancelled`` is emitted
    (caller-cancel arm, reason ``"caller cancelled"``), routed to the tool call's stream and
    stored in the event store, so replays carry the request *followed by* its cancellation.

  ``gated=True`` parks the tool before it elicits until :meth:`ServerController.release`;
  ``after_deadline="hold"`` parks it after an expired deadline until
  :meth:`ServerController.finish` (or the session ends), ``"return"`` returns at once.
- Tool ``ping()``: returns ``"pong"``; a full round trip, used as a barrier.
- Tool ``stream_progress(count)``: emits ``count`` ``notifications/progress`` on the call's
  stream (needs a progress token from the client) and returns ``"streamed <count>"``;
  :func:`call_stream_progress` calls it and waits for every progress callback.
- Tool ``work(count)``: asks the client once (``elicitation/create``, "Proceed?", a boolean
  ``proceed``), then emits ``count`` ``notifications/progress`` on the call's stream, each
  with ``message`` the server's ``time.perf_counter()`` when it sent it (as ``repr`` of a
  float: a client in the same process measures each event's latency), and returns
  ``"worked <count> (<action>)"`` (``action``: the answer's, e.g. ``accept``). The unit
  of the gateway benchmark's load.
- Tool ``reask(count)``: asks the client "Proceed?" (as ``work`` does), then, as a
  server-side shim that lost the answer does, asks the same question again under a new
  request id ``count`` times (identical params), and returns ``"answered <n>: <actions>"``
  (the answers it got, e.g. ``"answered 2: accept accept"``).
- Tool ``announce(count, text)``: sends ``count`` log messages (``notifications/message``,
  data ``"<text> <n>"``) related to no request, so the server routes them to the session's
  standalone GET stream (stored in the event store, sent only if a GET is attached), and
  returns ``"announced <count>"``. :meth:`ServerController.wait_standalone` waits until a
  GET stream is attached to a session.
- Prompt ``greeting(name, held)``: one user message ``Hello, <name>!``; with
  ``held="yes"`` it logs ``held`` (detail: ``what="prompts/get"``) and returns only once
  :meth:`ServerController.release_held` lets it go (a prompt whose stream stays open).
- Resources ``fsm://notes/readme`` (text), ``fsm://notes/held`` (logs ``held``, detail
  ``what="resources/read"``, and is read only once released, as the held prompt) and the
  template ``fsm://notes/{name}``; completion of a ``name`` argument from ``ada``,
  ``alan``, ``grace``. Nothing else (no subscriptions: the SDK's error answers those).
- Session expiry on command: :meth:`ServerController.expire_session` terminates a session
  (as a DELETE would); every later request carrying its id gets ``404`` with
  ``{"code": -32600, "message": "Session not found"}``.
- Event stores: :class:`SessionScopedEventStore` (default; replays never cross sessions) and
  :class:`SharedEventStore` (the SDK example's behaviour: one store for every session, keyed
  by stream id only, so replays leak across sessions, for hostile-input tests).

Ordering guarantee for the proxy: requests forwarded by :class:`fsm.wire.proxy.FaultProxy`
carry ``x-fsm-exchange`` (their exchange id) and ``x-fsm-after-cut`` (ids of exchanges the
proxy has cut).  The harness middleware holds such a request until every listed exchange
has finished on the server side (bounded by ``order_timeout``).  Without it a resume ``GET``
could overtake the server's clean-up of the connection just cut and find the request stream
still attached (the SDK then replays and ends the GET instead of attaching the live tail),
which would make the scenarios depend on machine speed.

Limits: a test server, not a production one.  It relies on private details of the mcp server
that every supported release shares (2.x: ``ServerSession._request_outbound`` for the silent
deadline; 1.x: ``BaseSession._request_id`` to name the elicitation a courtesy cancel is for;
both: the session manager's ``_server_instances``/``_session_owners`` tables for
per-session stores and expiry), which is why each supported release is tested.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import logging
import socket
import time
import warnings
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, cast

import anyio
from mcp import types
from mcp.server.streamable_http import (
    GET_STREAM_KEY,
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamId,
)
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.message import ServerMessageMetadata
from pydantic import BaseModel
from starlette.types import ASGIApp, Receive, Scope, Send

from fsm.wire.changes import Changes
from fsm.wire.sdk import MCP_MAJOR, request_headers, server_class
from fsm.wire.serving import serving

_F = TypeVar("_F", bound=Callable[..., Any])
DEPRECATION: type[Warning] = getattr(
    importlib.import_module("mcp.shared.exceptions"), "MCPDeprecationWarning", DeprecationWarning
)
"""2.x's warning for calls deprecated in 2026-07-28 (1.x has none: any DeprecationWarning)."""
JSONRPCMessage = Any  # mcp.types.JSONRPCMessage: its module differs between 1.x and 2.x
if TYPE_CHECKING:
    from mcp.server.mcpserver import Context
else:  # the tool context class the server recognises by annotation: 2.x's or 1.x's
    _, Context = server_class()

__all__ = [
    "DeadlineFlavour",
    "PendingElicitation",
    "RunningServer",
    "ServerController",
    "ServerEvent",
    "SessionScopedEventStore",
    "SharedEventStore",
    "StoreChoice",
    "ToolCaller",
    "build_app",
    "call_stream_progress",
    "install_scoped_views",
    "running_server",
]

logger = logging.getLogger(__name__)

DeadlineFlavour = Literal["silent", "cancel"]
AfterDeadline = Literal["hold", "return"]
StoreHook = Callable[[str | None, StreamId, EventId, JSONRPCMessage | None], None]
StoreChoice = Literal["scoped", "replay_everything", "shared", "none"]
"""The event stores :func:`build_app` builds by name (see there)."""

EXCHANGE_HEADER = "x-fsm-exchange"
AFTER_CUT_HEADER = "x-fsm-after-cut"
DEFAULT_FILES = ("a.txt", "b.txt", "c.txt")
CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "description": "Really delete?"}},
    "required": ["confirm"],
}


# --------------------------------------------------------------------------- event stores


@dataclass
class _Row:
    event_id: EventId
    stream_id: StreamId
    message: JSONRPCMessage | None


class _Log:
    """Bounded, ordered rows of one scope (a session, or everything for the shared store)."""

    def __init__(self, capacity: int) -> None:
        self.rows: deque[_Row] = deque(maxlen=capacity)

    def append(self, row: _Row) -> None:
        self.rows.append(row)

    async def replay_after(
        self, last_event_id: EventId, send: EventCallback, everything: bool = False
    ) -> StreamId | None:
        """Send the rows of the cursor's stream after the cursor (``everything``: from the
        start of the log, the cursor's own row and earlier ones too); ``None`` for an
        unknown cursor."""
        rows = list(self.rows)
        index = next((i for i, row in enumerate(rows) if row.event_id == last_event_id), None)
        if index is None:
            return None
        stream_id = rows[index].stream_id
        for later in rows if everything else rows[index + 1 :]:
            if later.stream_id == stream_id and later.message is not None:
                await send(EventMessage(later.message, later.event_id))
        return stream_id


class _ScopedView(EventStore):
    """The event store one session's transport sees."""

    def __init__(self, owner: SessionScopedEventStore, session_id: str) -> None:
        self._owner = owner
        self.session_id = session_id

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        return self._owner._store(self.session_id, stream_id, message)

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        log = self._owner._logs.get(self.session_id)
        if log is None:
            return None
        return await log.replay_after(last_event_id, send_callback, self._owner.replay_everything)


class SessionScopedEventStore(EventStore):
    """In-memory event store whose replays never cross sessions.

    Contract: :meth:`for_session` returns the view a session's transport must use (the
    harness installs it per session).  Event ids are globally unique (``ev<n>``); a replay
    looks the cursor up in the resuming session's own rows only, replays the later rows of
    the cursor's stream (priming rows excluded) and returns that stream id, or ``None`` for
    an unknown cursor.  Used directly (not through a view) it behaves as one anonymous
    session.  Each session keeps at most ``capacity_per_session`` rows (oldest evicted).
    ``replay_everything``: a replay sends the cursor's whole stream from the start of the
    session's rows, already delivered events (same ids) included, as some servers do.
    """

    def __init__(
        self,
        capacity_per_session: int = 100_000,
        on_store: StoreHook | None = None,
        *,
        replay_everything: bool = False,
    ) -> None:
        self.replay_everything = replay_everything
        self._capacity = capacity_per_session
        self._logs: dict[str, _Log] = {}
        self._ids = itertools.count(1)
        self.on_store = on_store

    def for_session(self, session_id: str) -> EventStore:
        """The view to give the transport of ``session_id``."""
        return _ScopedView(self, session_id)

    def forget_session(self, session_id: str) -> None:
        """Drop every row of ``session_id`` (e.g. after it expired)."""
        self._logs.pop(session_id, None)

    def _store(
        self, session_id: str, stream_id: StreamId, message: JSONRPCMessage | None
    ) -> EventId:
        event_id = f"ev{next(self._ids)}"
        log = self._logs.get(session_id)
        if log is None:
            log = self._logs[session_id] = _Log(self._capacity)
        log.append(_Row(event_id, stream_id, message))
        if self.on_store is not None:
            self.on_store(session_id, stream_id, event_id, message)
        return event_id

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        return self._store("", stream_id, message)

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        log = self._logs.get("")
        if log is None:
            return None
        return await log.replay_after(last_event_id, send_callback, self.replay_everything)


class SharedEventStore(EventStore):
    """The python-sdk example's store: one log for all sessions, keyed by stream id only.

    Deliberately unsafe: stream ids are the client's request ids and ``"_GET_stream"``, which
    repeat across sessions, so session A resuming stream ``"2"`` also receives session B's
    events of stream ``"2"``.  For hostile-input tests only.  Bounded to ``capacity`` rows.
    """

    def __init__(self, capacity: int = 100_000, on_store: StoreHook | None = None) -> None:
        self._log = _Log(capacity)
        self._ids = itertools.count(1)
        self.on_store = on_store

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = f"ev{next(self._ids)}"
        self._log.append(_Row(event_id, stream_id, message))
        if self.on_store is not None:
            self.on_store(None, stream_id, event_id, message)
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        return await self._log.replay_after(last_event_id, send_callback)


# --------------------------------------------------------------------------- controller


@dataclass(frozen=True)
class ServerEvent:
    """One entry of the controller's log.

    ``kind`` is one of: ``tool_started``, ``elicit_gated``, ``elicit_sending``,
    ``elicit_answered`` (detail: action, content), ``elicit_failed`` (detail: error),
    ``deadline_fired`` (detail: flavour), ``tool_finished`` (detail: text), ``stored``
    (detail: stream, event_id, method or kind), ``exchange_started``/``exchange_finished``
    (detail: exchange), ``session_expired``, ``progress_done``, ``announced`` (detail: count),
    ``held`` (detail: what, the held request's method).
    """

    seq: int
    kind: str
    session_id: str | None = None
    request_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class PendingElicitation:
    """The state of one ``delete_files`` call's confirmation.

    ``state`` goes ``gated`` -> ``asking`` -> ``answered`` | ``expired`` | ``failed``.
    ``request_id`` is the *tool call's* JSON-RPC id (the stream id); the elicitation's own
    id is assigned by the SDK (per-session counter from 1) and is visible on the wire.
    """

    session_id: str
    request_id: str
    flavour: DeadlineFlavour
    message: str
    state: str = "gated"
    _go: anyio.Event = field(default_factory=anyio.Event)
    _fire: anyio.Event = field(default_factory=anyio.Event)
    _finish: anyio.Event = field(default_factory=anyio.Event)
    _settled: anyio.Event = field(default_factory=anyio.Event)
    _scope: anyio.CancelScope | None = None


class ServerController:
    """Explicit control over the test server: deadlines, gates, session expiry, and a log.

    Every ``wait_*`` takes a safety ``timeout`` (seconds) and raises ``TimeoutError`` when it
    elapses; they are synchronisation points, never sleeps.  All methods must be called from
    the event loop running the server.
    """

    def __init__(self, log_capacity: int = 50_000) -> None:
        self.pending: list[PendingElicitation] = []
        self.log: deque[ServerEvent] = deque(maxlen=log_capacity)
        self._seq = itertools.count(1)
        self._changes = Changes()
        self._inflight: dict[str, anyio.Event] = {}
        self.manager: StreamableHTTPSessionManager | None = None
        self.store: EventStore | None = None
        self._held = anyio.Event()

    # -- log
    def record(
        self,
        kind: str,
        session_id: str | None = None,
        request_id: str | None = None,
        **detail: Any,
    ) -> ServerEvent:
        event = ServerEvent(next(self._seq), kind, session_id, request_id, dict(detail))
        self.log.append(event)
        self._changes.notify()
        return event

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        """Wait until ``predicate()`` holds (re-checked on every controller change)."""
        await self._changes.wait_until(predicate, timeout)

    async def wait_for(
        self, predicate: Callable[[ServerEvent], bool], timeout: float = 10.0, after: int = 0
    ) -> ServerEvent:
        """The first logged event with ``seq > after`` matching ``predicate`` (past or future)."""
        found: list[ServerEvent] = []

        def check() -> bool:
            for event in self.log:
                if event.seq > after and predicate(event):
                    found.append(event)
                    return True
            return False

        await self.wait_until(check, timeout)
        return found[0]

    # -- elicitations
    async def wait_pending(
        self, state: str | None = None, timeout: float = 10.0, index: int = -1
    ) -> PendingElicitation:
        """The ``index``-th pending elicitation (default: latest), once it exists (in ``state``)."""

        def ready() -> bool:
            if not self.pending:
                return False
            try:
                p = self.pending[index]
            except IndexError:
                return False
            return state is None or p.state == state

        await self.wait_until(ready, timeout)
        return self.pending[index]

    def _pick(self, pending: PendingElicitation | None) -> PendingElicitation:
        if pending is not None:
            return pending
        if not self.pending:
            raise LookupError("no pending elicitation")
        return self.pending[-1]

    def release(self, pending: PendingElicitation | None = None) -> None:
        """Let a ``gated=True`` tool send its elicitation now (default: the latest one)."""
        self._pick(pending)._go.set()

    async def fire_deadline(
        self, pending: PendingElicitation | None = None, timeout: float = 10.0
    ) -> PendingElicitation:
        """Fire the deadline of the pending elicitation now and wait until the tool saw it.

        On return the server has dropped its waiter for the elicitation (a later answer gets
        ``202`` and is discarded) and, for the ``cancel`` flavour, has handed the courtesy
        ``notifications/cancelled`` to the transport (wait for ``stored`` in the log to know
        it reached the event store).  No effect if the elicitation already settled.
        """
        p = self._pick(pending)
        p._fire.set()
        if p._scope is not None:
            p._scope.cancel()
        with anyio.fail_after(timeout):
            await p._settled.wait()
        return p

    def finish(self, pending: PendingElicitation | None = None) -> None:
        """Let a tool parked by ``after_deadline="hold"`` return its result."""
        self._pick(pending)._finish.set()

    # -- held prompts and resource reads
    async def hold(self, what: str) -> None:
        """Log ``held`` (detail: ``what``) and wait for :meth:`release_held`."""
        gate = self._held
        self.record("held", what=what)
        await gate.wait()

    def release_held(self) -> None:
        """Let every request held now return (a later one waits for the next release)."""
        gate, self._held = self._held, anyio.Event()
        gate.set()

    # -- sessions
    def session_ids(self) -> list[str]:
        """Ids of the sessions the server currently knows."""
        if self.manager is None:
            return []
        return list(self.manager._server_instances)

    async def expire_session(self, session_id: str) -> None:
        """Terminate ``session_id`` now, as the server's reaper or a DELETE would.

        Open streams of the session end (cleanly), its tool calls are cancelled, and every
        later request carrying the id gets ``404 {"code": -32600, "message": "Session not
        found"}``.  Unknown ids are ignored.
        """
        manager = self.manager
        if manager is None:
            raise RuntimeError("server not running")
        transport = manager._server_instances.get(session_id)
        if transport is None:
            return
        # what the manager does for a DELETE or an idle timeout, in every release: forget
        # the id first (404 from now on), then terminate the transport
        manager._server_instances.pop(session_id, None)
        getattr(manager, "_session_owners", {}).pop(session_id, None)  # not in every release
        if not transport.is_terminated:
            with anyio.CancelScope(shield=True):
                await transport.terminate()
        if isinstance(self.store, SessionScopedEventStore):
            self.store.forget_session(session_id)
        self.record("session_expired", session_id)

    def standalone_attached(self, session_id: str) -> bool:
        """Whether a standalone GET stream is attached to ``session_id`` now (messages
        related to no request are sent on it; otherwise they are only stored)."""
        manager = self.manager
        transport = manager._server_instances.get(session_id) if manager is not None else None
        return transport is not None and GET_STREAM_KEY in transport._request_streams

    async def wait_standalone(
        self, session_id: str, timeout: float = 10.0, interval: float = 0.005
    ) -> None:
        """Wait until :meth:`standalone_attached` holds for ``session_id``.

        The SDK attaches a GET stream in a task of its own, after the response headers
        may have gone out, and tells no one: this re-checks that server state every
        ``interval`` seconds (a poll of the condition itself, not a sleep standing in for
        it) and raises ``TimeoutError`` after ``timeout``.
        """
        with anyio.fail_after(timeout):
            while not self.standalone_attached(session_id):
                await anyio.sleep(interval)

    # -- exchange ordering (see module docstring)
    async def _before_exchange(
        self, exchange: str | None, after: Sequence[str], timeout: float
    ) -> None:
        waits = [self._inflight[e] for e in after if e in self._inflight]
        if waits:
            try:
                with anyio.fail_after(timeout):
                    for done in waits:
                        await done.wait()
            except TimeoutError:
                logger.warning("exchange %s: cut exchanges %s still running", exchange, after)
        if exchange is not None:
            self._inflight[exchange] = anyio.Event()
            self.record("exchange_started", exchange=exchange)

    def _after_exchange(self, exchange: str | None) -> None:
        if exchange is None:
            return
        done = self._inflight.pop(exchange, None)
        if done is not None:
            done.set()
        self.record("exchange_finished", exchange=exchange)

    def _on_store(
        self,
        session_id: str | None,
        stream_id: StreamId,
        event_id: EventId,
        message: JSONRPCMessage | None,
    ) -> None:
        what: str
        if message is None:
            what = "priming"
        else:
            dumped = message.model_dump(by_alias=True, mode="json", exclude_none=True)
            what = str(dumped.get("method") or ("error" if "error" in dumped else "result"))
        self.record("stored", session_id, None, stream=stream_id, event_id=event_id, what=what)


class _HarnessMiddleware:
    """ASGI wrapper implementing the exchange-ordering guarantee (see module docstring)."""

    def __init__(self, app: ASGIApp, controller: ServerController, order_timeout: float) -> None:
        self.app = app
        self.controller = controller
        self.order_timeout = order_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange: str | None = None
        after: list[str] = []
        for name, value in scope.get("headers", []):
            if name == EXCHANGE_HEADER.encode():
                exchange = value.decode("latin-1")
            elif name == AFTER_CUT_HEADER.encode():
                after = [v for v in value.decode("latin-1").split(",") if v]
        await self.controller._before_exchange(exchange, after, self.order_timeout)
        try:
            await self.app(scope, receive, send)
        finally:
            self.controller._after_exchange(exchange)


# --------------------------------------------------------------------------- the MCP server


def _session_of(ctx: Context) -> str:
    return str(request_headers(ctx).get("mcp-session-id", ""))


@contextlib.contextmanager
def _logging_untouched() -> Iterator[None]:
    """Undo what the block does to the root logger: ``MCPServer()`` calls
    ``logging.basicConfig(level="INFO")``, which would turn on every library's INFO
    logging in the embedding process."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        yield
    finally:
        root.setLevel(level)
        root.handlers[:] = handlers


def build_server(
    controller: ServerController,
    *,
    name: str = "fsm-harness",
    event_store: EventStore | None = None,
    retry_interval_ms: int | None = None,
) -> Any:
    """The SDK's server (``MCPServer``; ``FastMCP`` on 1.x) with the harness tools, wired to
    ``controller`` (1.x takes the event store and ``retry:`` here, 2.x in its app).
    Building it leaves the process's logging configuration as it was."""
    server_cls, _ = server_class()
    with _logging_untouched():
        if MCP_MAJOR >= 2:
            mcp = server_cls(name, log_level="WARNING")
        else:
            mcp = server_cls(
                name,
                event_store=event_store,
                retry_interval=retry_interval_ms,
                log_level="WARNING",
            )
    tool = cast(Callable[[_F], _F], mcp.tool())

    @tool
    async def delete_files(
        ctx: Context,
        files: list[str] | None = None,
        deadline: DeadlineFlavour = "silent",
        gated: bool = False,
        after_deadline: AfterDeadline = "return",
        deadline_seconds: float | None = None,
    ) -> str:
        """Delete files after the user confirms; the confirmation has a server-side deadline."""
        names = list(files) if files is not None else list(DEFAULT_FILES)
        session_id = _session_of(ctx)
        request_id = str(ctx.request_id)
        message = f"Delete {len(names)} files?"
        p = PendingElicitation(session_id, request_id, deadline, message)
        controller.pending.append(p)
        controller.record("tool_started", session_id, request_id, tool="delete_files")
        try:
            if not gated:
                p._go.set()
            return await _confirm_and_delete(
                ctx, controller, p, names, after_deadline, deadline_seconds
            )
        finally:
            p._settled.set()
            controller._changes.notify()

    @tool
    async def ping() -> str:
        """Return ``"pong"`` (a round trip the scenarios use as a barrier)."""
        return "pong"

    @tool
    async def stream_progress(ctx: Context, count: int = 10_000) -> str:
        """Emit ``count`` progress notifications on this call's stream, then return."""
        for i in range(count):
            await ctx.report_progress(i + 1, count)
        controller.record("progress_done", _session_of(ctx), str(ctx.request_id), count=count)
        return f"streamed {count}"

    @tool
    async def work(ctx: Context, count: int = 100) -> str:
        """Ask the client once, then emit ``count`` progress notifications stamped with the
        server's ``time.perf_counter()`` at send, then return."""
        answer = await ctx.elicit("Proceed?", schema=_Proceed)
        for i in range(count):
            await ctx.report_progress(i + 1, count, repr(time.perf_counter()))
        controller.record("work_done", _session_of(ctx), str(ctx.request_id), count=count)
        return f"worked {count} ({answer.action})"

    @tool
    async def reask(ctx: Context, count: int = 1) -> str:
        """Ask "Proceed?", then the same question again under a new id ``count`` times."""
        actions = [(await ctx.elicit("Proceed?", schema=_Proceed)).action]
        for _ in range(count):
            actions.append((await ctx.elicit("Proceed?", schema=_Proceed)).action)
        controller.record("reasked", _session_of(ctx), str(ctx.request_id), count=count)
        return f"answered {len(actions)}: {' '.join(actions)}"

    @tool
    async def announce(ctx: Context, count: int = 1, text: str = "announcement") -> str:
        """Send ``count`` log messages related to no request (the standalone GET stream)."""
        for i in range(count):
            with warnings.catch_warnings():  # deprecated for 2026-07-28, not for this protocol
                warnings.simplefilter("ignore", DEPRECATION)
                await ctx.session.send_log_message("info", f"{text} {i + 1}", logger=name)
        controller.record("announced", _session_of(ctx), str(ctx.request_id), count=count)
        return f"announced {count}"

    _add_prompts_and_resources(mcp, controller)
    return mcp


def _add_prompts_and_resources(mcp: Any, controller: ServerController) -> None:
    """The prompt, the resources and the completion of the module docstring."""

    prompt = cast(Callable[[_F], _F], mcp.prompt())
    completion = cast(Callable[[_F], _F], mcp.completion())

    def resource(uri: str) -> Callable[[_F], _F]:
        return cast(Callable[[_F], _F], mcp.resource(uri, mime_type="text/plain"))

    @prompt
    async def greeting(name: str = "world", held: str = "no") -> str:
        """Greet ``name`` (``held="yes"``: once :meth:`ServerController.release_held`)."""
        if held == "yes":
            await controller.hold("prompts/get")
        return f"Hello, {name}!"

    @resource("fsm://notes/readme")
    async def readme() -> str:
        """A note."""
        return "Notes of the harness server."

    @resource("fsm://notes/held")
    async def held_note() -> str:
        """A note read once :meth:`ServerController.release_held` lets it go."""
        await controller.hold("resources/read")
        return "A held note."

    @resource("fsm://notes/{name}")
    async def note(name: str) -> str:
        """The note called ``name``."""
        return f"Note {name}."

    @completion
    async def complete(ref: Any, argument: Any, context: Any) -> Any:
        """Names for a ``name`` argument, by prefix."""
        if argument.name != "name":
            return None
        names = [n for n in ("ada", "alan", "grace") if n.startswith(argument.value)]
        return types.Completion(values=names)


async def _confirm_and_delete(
    ctx: Context,
    controller: ServerController,
    p: PendingElicitation,
    names: list[str],
    after_deadline: AfterDeadline,
    deadline_seconds: float | None,
) -> str:
    sid, rid = p.session_id, p.request_id
    if not p._go.is_set():
        controller.record("elicit_gated", sid, rid)
        await p._go.wait()
    params = types.ElicitRequestFormParams.model_validate(
        {"mode": "form", "message": p.message, "requestedSchema": CONFIRM_SCHEMA}
    )
    result: types.ElicitResult | None = None
    error: str | None = None
    async with anyio.create_task_group() as timers:
        if deadline_seconds is not None:

            async def timer() -> None:
                await anyio.sleep(deadline_seconds)
                p._fire.set()
                if p._scope is not None:
                    p._scope.cancel()

            timers.start_soon(timer)
        with anyio.CancelScope() as scope:
            p._scope = scope
            p.state = "asking"
            controller.record("elicit_sending", sid, rid, flavour=p.flavour)
            if p._fire.is_set():
                scope.cancel()
            try:
                if MCP_MAJOR < 2:
                    result = await _elicit_v1(ctx, p, params)
                elif p.flavour == "cancel":
                    result = await ctx.session.send_request(
                        types.ElicitRequest(params=params),
                        types.ElicitResult,
                        metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
                    )
                else:
                    raw = await ctx.session._request_outbound.send_raw_request(
                        "elicitation/create",
                        params.model_dump(by_alias=True, mode="json", exclude_none=True),
                        {"cancel_on_abandon": False},
                    )
                    result = types.ElicitResult.model_validate(raw, by_name=False)
            except Exception as exc:  # peer error, connection closed, validation
                error = f"{type(exc).__name__}: {exc}"
        p._scope = None
        timers.cancel_scope.cancel()
    if result is not None:
        p.state = "answered"
        controller.record("elicit_answered", sid, rid, action=result.action, content=result.content)
        confirmed = result.action == "accept" and bool((result.content or {}).get("confirm"))
        text = (
            f"Deleted {len(names)} files: {', '.join(names)}"
            if confirmed
            else f"Kept {len(names)} files ({result.action})"
        )
    elif error is not None:
        p.state = "failed"
        controller.record("elicit_failed", sid, rid, error=error)
        text = f"Kept {len(names)} files: confirmation failed ({error})"
    else:
        p.state = "expired"
        controller.record("deadline_fired", sid, rid, flavour=p.flavour)
        p._settled.set()
        if after_deadline == "hold":
            await p._finish.wait()
        text = f"Kept {len(names)} files: confirmation expired"
    controller.record("tool_finished", sid, rid, text=text)
    return text


async def _elicit_v1(ctx: Context, p: PendingElicitation, params: Any) -> Any:
    """mcp 1.x: ``send_request`` abandoned by cancellation sends nothing (the silent
    deadline as the SDK does it); the ``cancel`` flavour then sends the courtesy
    ``notifications/cancelled`` itself, on the tool call's stream."""
    session, v1 = ctx.session, cast(Any, types)  # types is typed as 2.x's
    elicit_id = session._request_id  # the id send_request is about to use
    try:
        return await session.send_request(
            v1.ServerRequest(v1.ElicitRequest(method="elicitation/create", params=params)),
            v1.ElicitResult,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        )
    except anyio.get_cancelled_exc_class():
        if p.flavour == "cancel":
            with anyio.CancelScope(shield=True):
                await session.send_notification(
                    v1.ServerNotification(
                        v1.CancelledNotification(
                            method="notifications/cancelled",
                            params=v1.CancelledNotificationParams(
                                requestId=elicit_id, reason="caller cancelled"
                            ),
                        )
                    ),
                    related_request_id=ctx.request_id,
                )
        raise


class _Proceed(BaseModel):
    """The answer ``work`` asks for."""

    proceed: bool


# --------------------------------------------------------------------------- app + runner


def build_app(
    controller: ServerController,
    *,
    event_store: StoreChoice | EventStore = "scoped",
    retry_interval_ms: int | None = 50,
    order_timeout: float = 5.0,
    session_idle_timeout: float | None = None,
) -> ASGIApp:
    """The harness ASGI app (Starlette app of the MCP server wrapped in the ordering middleware).

    ``event_store``: ``"scoped"`` (a :class:`SessionScopedEventStore`, one view per session;
    ``"replay_everything"``: the same, replaying whole streams),
    ``"shared"`` (a :class:`SharedEventStore`), ``"none"`` (no resumability) or any store
    instance (used as given, shared by all sessions).  ``retry_interval_ms`` is the SSE
    ``retry:`` the server advertises in priming events (the client's reconnect delay).
    """
    store: EventStore | None
    if event_store in ("scoped", "replay_everything"):
        store = SessionScopedEventStore(
            on_store=controller._on_store, replay_everything=event_store == "replay_everything"
        )
    elif event_store == "shared":
        store = SharedEventStore(on_store=controller._on_store)
    elif event_store == "none":
        store = None
    else:
        assert not isinstance(event_store, str)
        store = event_store
    mcp = build_server(controller, event_store=store, retry_interval_ms=retry_interval_ms)
    if MCP_MAJOR >= 2:
        extra: dict[str, Any] = {}
        if session_idle_timeout is not None:  # a keyword of mcp 2.2 on
            extra["session_idle_timeout"] = session_idle_timeout
        app = mcp.streamable_http_app(event_store=store, retry_interval=retry_interval_ms, **extra)
    else:
        app = mcp.streamable_http_app()
    manager = mcp.session_manager
    controller.manager = manager
    controller.store = store
    if isinstance(store, SessionScopedEventStore):
        install_scoped_views(manager, store)
    return _HarnessMiddleware(app, controller, order_timeout)


class _Sessions(dict[str, Any]):
    """The manager's session table, giving each new session's transport its own store view.

    Every SDK release registers a new session's transport in ``_server_instances`` before
    the transport handles its first request (stores nothing before that), so hooking the
    table's insertion works whatever the manager's internals around it look like.
    """

    def __init__(self, store: SessionScopedEventStore, *args: Any) -> None:
        super().__init__(*args)
        self._store = store

    def __setitem__(self, session_id: str, transport: Any) -> None:
        transport._event_store = self._store.for_session(session_id)
        super().__setitem__(session_id, transport)


def install_scoped_views(
    manager: StreamableHTTPSessionManager, store: SessionScopedEventStore
) -> None:
    """Give each session ``manager`` creates from now on its own view of ``store`` (its
    transport's event store is ``store.for_session(session_id)``), so one session's
    ``Last-Event-ID`` never replays another's events. Reaches into the SDK's session
    manager (its ``_server_instances``); the servers of the demo, the test bed and the
    benches share it."""
    manager._server_instances = _Sessions(store, manager._server_instances)


@dataclass
class RunningServer:
    """A started harness server: ``url`` is the MCP endpoint (``http://127.0.0.1:<port>/mcp``)."""

    url: str
    host: str
    port: int
    controller: ServerController


@contextlib.asynccontextmanager
async def running_server(
    *,
    event_store: StoreChoice | EventStore = "scoped",
    retry_interval_ms: int | None = 50,
    order_timeout: float = 5.0,
    log_level: str = "warning",
    shutdown_timeout: float = 5.0,
    port: int = 0,
) -> AsyncIterator[RunningServer]:
    """Run the harness server with uvicorn on 127.0.0.1, ephemeral port, in this event loop.

    Yields a :class:`RunningServer`.  On exit the server is asked to stop; open SSE
    connections are closed after ``shutdown_timeout`` at the latest. ``port``: 0 picks a
    free one; a given port restarts a server where an earlier one ran (its sessions and
    event store are gone, as after a real restart).  asyncio only
    (uvicorn).
    """
    controller = ServerController()
    app = build_app(
        controller,
        event_store=event_store,
        retry_interval_ms=retry_interval_ms,
        order_timeout=order_timeout,
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = int(sock.getsockname()[1])
    try:
        async with serving(app, sock, log_level=log_level, shutdown_timeout=shutdown_timeout):
            yield RunningServer(f"http://127.0.0.1:{port}/mcp", "127.0.0.1", port, controller)
    finally:
        sock.close()


class ToolCaller(Protocol):
    """What :func:`call_stream_progress` calls: an SDK ``ClientSession`` (1.x or 2.x), a
    guarded session, or any object with their ``call_tool``."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, progress_callback: Any
    ) -> types.CallToolResult:
        """Call tool ``name`` with ``arguments``, reporting progress to the callback."""
        ...


async def call_stream_progress(
    session: ToolCaller, count: int, timeout: float
) -> tuple[types.CallToolResult, int]:
    """The client's side of the ``stream_progress`` tool: call it on ``session`` with a
    progress callback (without one the server sends no progress at all) and return
    ``(result, received)`` once the result is in and ``count`` callbacks ran (they may
    trail the result; a ``count`` of 0 or less waits for none); ``TimeoutError`` if they
    have not all run ``timeout`` seconds after the result."""
    received = 0
    all_received = anyio.Event()
    if count <= 0:
        all_received.set()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        nonlocal received
        received += 1
        if received >= count:
            all_received.set()

    result = await session.call_tool(
        "stream_progress", {"count": count}, progress_callback=on_progress
    )
    with anyio.fail_after(timeout):
        await all_received.wait()
    return result, received
