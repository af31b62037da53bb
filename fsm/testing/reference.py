"""Reference clients for the conformance kit: the library's guard, and planted bugs.

* :func:`guard_factory` -- the library's own :class:`~fsm.sse.guard.Guard` (either engine):
  it must pass the kit.
* :class:`Sdk230Client` -- the plain mcp 2.3.0 Python client's behaviour, expressed in the
  guard's event/action vocabulary: the kit must find P2 violated against it.
* :class:`NoDedupGuard` -- the guard with de-duplication switched off (a repeated delivery
  is presented again): a second planted bug, also found as P2.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fsm import actions as act
from fsm import events as ev
from fsm.errors import InteractionFailed, RequestKey
from fsm.machines.tables import EngineName
from fsm.messages import Notification, Response, ServerRequest, parse
from fsm.sse.guard import Guard, GuardConfig

MAX_RECONNECTION_ATTEMPTS = 2
"""``mcp/client/streamable_http.py:60`` in the mcp 2.3.0 wheel."""

DEFAULT_RECONNECTION_DELAY_S = 1.0
"""``DEFAULT_RECONNECTION_DELAY_MS = 1000`` (``:59``): no backoff, no jitter."""


def guard_factory(
    engine: EngineName = "tables", config: GuardConfig | None = None
) -> Callable[[Callable[[], float]], Guard]:
    """``factory(clock) -> Guard``: the library's guard needs no shim, it *is* the
    protocol (``feed(event) -> tuple[Action, ...]``)."""

    def make(clock: Callable[[], float]) -> Guard:
        return Guard(clock=clock, config=config, engine=engine)

    return make


class _SdkStream:
    __slots__ = ("attempt", "ended", "last", "origin", "param", "resumed", "retry_s")

    def __init__(self, origin: int | str | None) -> None:
        self.origin = origin
        self.last: str | None = None  # newest id on the current connection
        self.param: str | None = None  # the cursor argument the reconnect loop uses
        self.attempt = 0
        self.resumed = False  # the current connection is a reconnect GET
        self.ended = False
        self.retry_s: float | None = None


class Sdk230Client:
    """The official mcp 2.3.0 Python client (streamable HTTP), as measured.

    Behaviour (line numbers into the installed 2.3.0 wheel, measured against a 2.3.0
    server; see the project's ``mcp-facts`` notes):

    * No de-duplication: the dispatcher runs the elicitation callback for every delivery
      of a request id (``mcp/shared/jsonrpc_dispatcher.py:605-608``, "duplicate ids
      blind-overwrite"), replays included: every delivery becomes ``Present``.
    * POST stream (``mcp/client/streamable_http.py:467-520``): cut before any event id fails
      the call ("SSE stream ended without a response"); otherwise it reconnects with
      ``Last-Event-ID`` after ``retry:`` or 1 s. In ``_handle_reconnection`` (``:536-607``)
      a clean end recurses with the *advanced* cursor and ``attempt=0`` (unbounded); an
      exception (abrupt cut, refused GET) recurses with the *first* cursor and
      ``attempt+1`` -- the stale cursor that replays what the resumed connection already
      delivered -- and after ``MAX_RECONNECTION_ATTEMPTS = 2`` the call fails (-32000).
    * Standalone GET (``:224-273``) keeps its cursor current; two consecutive abrupt
      failures abandon it silently.
    * Answer POST outcomes are ignored (4xx/5xx swallowed, ``:398-429``); a transport
      error on the POST kills the transport, so every pending call fails with
      "Connection closed" (``:687-693``). HTTP 404 on the session gets no reaction.
    * ``notifications/cancelled`` cancels the running callback (``Withdraw``).
    """

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self.clock = clock
        self.session = ""
        self.streams: dict[str, _SdkStream] = {}
        self.showing: set[RequestKey] = set()
        self.dead_transport = False

    def feed(self, event: ev.Event) -> Sequence[act.Action]:
        """Apply one event the way mcp 2.3.0 would; return what it does."""
        if self.dead_transport:
            return ()
        if isinstance(event, ev.SessionStarted):
            self.session = event.session
        elif isinstance(event, ev.StreamOpened):
            self.streams[event.stream] = _SdkStream(event.origin)
        elif isinstance(event, ev.SseEvent):
            return self._sse(event)
        elif isinstance(event, ev.ReplayBatch):
            return [a for item in event.events for a in self._sse(item)]
        elif isinstance(event, ev.StreamLost):
            return self._lost(event.stream, clean=event.clean)
        elif isinstance(event, ev.ResumeRefused):
            return self._lost(event.stream, clean=False)
        elif isinstance(event, ev.TimerFired):
            s = self.streams[event.stream]
            if s.ended:
                return ()
            s.resumed = True
            cursor = s.param if s.param is not None else (s.last or "")
            return (act.Resume(event.stream, cursor),)
        elif isinstance(event, ev.UserAnswered):
            self.showing.discard(event.key)
            return (act.Submit(event.key, event.answer, 1),)
        elif isinstance(event, ev.SubmissionOutcome):
            if event.result.status is None:  # post_writer dies with the transport
                self.dead_transport = True
                return [
                    self._end(name, "connection-closed", "Connection closed")
                    for name, s in self.streams.items()
                    if s.origin is not None and not s.ended
                ]
        elif isinstance(event, ev.OriginResponse):
            s = self.streams[event.stream]
            if not s.ended:
                s.ended = True
                return (act.Complete(event.stream),)
        return ()

    def _end(self, name: str, reason: str, message: str) -> act.Fail:
        self.streams[name].ended = True
        return act.Fail(name, InteractionFailed(message, stream=name, reason=reason))

    def _sse(self, e: ev.SseEvent) -> list[act.Action]:
        s = self.streams.get(e.stream)
        if s is None or s.ended:
            return []
        if e.event_id is not None:
            s.last = e.event_id
        if e.retry_ms is not None:
            s.retry_s = e.retry_ms / 1000.0
        if e.data in (None, "", b""):
            return []
        msg = parse(e.data)
        if isinstance(msg, ServerRequest):
            key: RequestKey = (self.session, msg.id)
            self.showing.add(key)
            return [act.Present(key, msg.method, msg.params)]
        if isinstance(msg, Notification) and msg.cancelled_id is not None:
            key = (self.session, msg.cancelled_id)
            if key in self.showing:
                self.showing.discard(key)
                return [act.Withdraw(key, "cancelled")]
        if isinstance(msg, Response) and s.origin is not None and msg.id == s.origin:
            s.ended = True
            return [act.Complete(e.stream)]
        return []

    def _lost(self, name: str, *, clean: bool) -> list[act.Action]:
        s = self.streams[name]
        if s.ended:
            return []
        delay = s.retry_s if s.retry_s is not None else DEFAULT_RECONNECTION_DELAY_S
        if s.origin is None:  # standalone GET: one cursor across loops
            s.attempt = 0 if clean else s.attempt + 1
            s.param, s.resumed = s.last, False
            if s.attempt >= MAX_RECONNECTION_ATTEMPTS or s.last is None:
                s.ended = True  # abandoned for the rest of the session, silently
                return []
            return [act.Wait(name, delay)]
        if not s.resumed:  # the POST's own stream broke
            if s.last is None:
                return [self._end(name, "no-response", "SSE stream ended without a response")]
            s.param, s.attempt = s.last, 0
            return [act.Wait(name, delay)]
        s.resumed = False
        if clean:  # advanced cursor, attempt reset (unbounded)
            s.param, s.attempt = s.last, 0
            return [act.Wait(name, delay)]
        s.attempt += 1  # the stale first cursor is reused
        if s.attempt >= MAX_RECONNECTION_ATTEMPTS:
            return [
                self._end(
                    name,
                    "reconnection-exhausted",
                    "SSE stream ended and reconnection attempts were exhausted",
                )
            ]
        return [act.Wait(name, delay)]


class NoDedupGuard:
    """The guard with de-duplication disabled: a repeated delivery of a known request
    that the guard would ignore (``duplicate-delivery``) is presented again."""

    def __init__(self, clock: Callable[[], float], engine: EngineName = "tables") -> None:
        self.guard = Guard(clock=clock, engine=engine)
        self._shown: dict[RequestKey, tuple[str, Mapping[str, Any] | None]] = {}

    def feed(self, event: ev.Event) -> Sequence[act.Action]:
        """``guard.feed(event)``, with ``duplicate-delivery`` turned into ``Present``."""
        out: list[act.Action] = []
        for a in self.guard.feed(event):
            if isinstance(a, act.Present):
                self._shown[a.key] = (a.method, a.params)
            if isinstance(a, act.Ignore) and a.reason == "duplicate-delivery" and a.key:
                shown = self._shown.get(a.key)
                if shown is not None:
                    out.append(act.Present(a.key, shown[0], shown[1]))
                    continue
            out.append(a)
        return out
