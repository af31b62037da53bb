"""The guarded-transport core both SDK adapters share (:mod:`fsm.adapters.mcp2`,
:mod:`fsm.adapters.mcp1`).

An application that already talks to a server with ``ClientSession`` over
``streamable_http_client`` swaps two lines::

    async with guarded_session(url, elicitation_callback=on_elicit) as session:
        result = await session.call_tool("delete_files", {"files": [...]})

and gets the guard's decisions (:mod:`fsm.guard`) on every inbound message, every answer and
every resume, plus one typed terminal error per failed interaction. This module is what the
two SDK lines share: SSE teeing, resume splicing, answer submission, the typed error, the
event log. What differs between them (the HTTP library's types: ``httpx2`` for mcp 2.x,
``httpx`` for 1.x; how the SDK's transport is opened) is an :class:`SdkBinding`; the core's
classes are bound to the library's base classes by :func:`bind`. Nothing the guard decides
depends on the SDK line.

How it works (public seams only)
--------------------------------
The SDK's ``streamable_http_client`` is given an ``AsyncClient`` of its HTTP library whose
transport is :class:`GuardedTransport`. That transport forwards every HTTP request through the
application's own ``http_client`` (``AsyncClient.send(..., stream=True)``: its hooks, auth
and timeouts apply) and sits between the wire and the SDK:

* **SSE response bodies are teed.** Every event is parsed (id, data, retry) and fed to the
  guard (only the id, :meth:`fsm.guard.Guard.on_plain_notification`, for progress-like
  notifications; otherwise ``SseEvent``); a compact plain notification (neither request,
  response nor cancellation) is recognised on the bytes by a strict pattern, without
  decoding or a JSON parse, and a chunk whose events all pass unchanged goes to the SDK
  as received. A server request the guard does not ``Present`` (a replayed duplicate, a
  stale replay, a request cancelled later in the replay) is rewritten into an empty event
  that keeps its id, so the SDK dispatcher never sees it and the elicitation callback runs
  at most once per (session, request id). A duplicate of an already submitted request gets
  the stored answer resubmitted by the adapter, never the callback.
* **Resumption is owned by the guard.** When a stream's connection breaks (abruptly or
  cleanly) the body the SDK reads does not end: the adapter waits as the guard says
  (``Wait``; the server's ``retry:`` first), sends the resume ``GET`` with
  ``Last-Event-ID`` = the guard's cursor (never older than the newest id seen: the SDK's
  stale-cursor re-resume cannot happen) and splices the new connection into the same body.
  The SDK's own reconnect loop (stale cursor, two attempts) is therefore never entered for
  a stream the adapter tracks. A resume ``GET`` that opens no event stream is judged by its
  status, the JSON body (first 64 KiB) and ``Retry-After`` (:data:`fsm.outcomes.RESUME_RULES`,
  the same reading as an answer POST's): 404 means the session is gone, 400, 405 and 406
  end the stream, 409, 429 and 5xx are retried within the stream's budgets.
* **Answer POSTs are the guard's.** The SDK's POST of an elicitation answer is answered
  ``202`` locally at once; the guard's ``Submit`` actions are performed by the adapter in
  the background with the same HTTP client, their status and body classified
  (:mod:`fsm.outcomes`), retryable failures (5xx, 429, connection errors) resubmitted with
  the *same* answer up to ``max_submit_attempts``. A connection error therefore never
  reaches the SDK's ``post_writer`` (which would tear the whole transport down). Answers the
  guard did not ask for (for a withdrawn, dead or already answered request) are dropped.
* **One typed error.** :meth:`GuardedSession.call_tool` races the SDK call against the
  guard's ``Fail`` action for the call's stream and raises the error it carries
  (:class:`~fsm.errors.StaleRequestError`, :class:`~fsm.errors.UnknownPendingRequestError`,
  :class:`~fsm.errors.SessionExpiredError`, :class:`~fsm.errors.ResumeBudgetSpentError`,
  :class:`~fsm.errors.SubmissionFailedError`), naming the request key and evidence. The
  SDK's waiter is released with a synthetic JSON-RPC error on the body so nothing hangs.
  After a session expiry every further HTTP request of the session is answered ``404``
  locally (no traffic) and every call raises :class:`~fsm.errors.SessionExpiredError`.
* **No POST error reaches the SDK's writer.** A request POST that gets no response is
  answered locally with a JSON-RPC error for its id (that call fails with ``MCPError``
  -32000, the session stays usable); a notification POST that gets none is answered 202.
* **Withdraw.** A request that dies while its prompt is showing (cancellation, session
  expiry, rejection) has its callback task cancelled.
* **Event log.** Every decision goes through :class:`fsm.observe.ObservedGuard`; the P1-P7
  monitor checks them online (:attr:`GuardedSession.violations`) and
  :meth:`GuardedSession.event_log` (or ``log=``) writes them as JSON Lines in the format of
  :mod:`fsm.trace`. Event ids of hot-path notifications (progress, logging) are coalesced:
  only the newest id seen before the next other observation is recorded, which is all
  P7 and the resume budget need.

What it cannot see or fix
-------------------------
* **Replay flag.** mcp servers (1.x and 2.x) send no "replayed" marker: every event arriving on a
  resumed connection is taken as a replay (the guard's conservative inference). A live
  request first delivered on a resumed connection is still presented (it is new); only a
  *repeated* delivery past its client-side deadline is judged stale.
* **Silent server deadlines.** With the correct cursor, a request that died silently on the
  server is usually never redelivered: the adapter cannot know it is dead, the prompt stays
  open, and the user's late answer is submitted and answered ``202`` (servers accept and
  drop late answers). The call ends with whatever the server returns for the tool.
* **202 proves nothing.** An accepted submission is not proof of liveness (see
  :mod:`fsm.outcomes`); the adapter cannot learn that the server dropped the answer.
* **Request POSTs** (``tools/call`` ...) are sent by the SDK. A 404 on them is seen and
  expires the session in the guard, but the adapter does not re-initialize: open a new
  :func:`guarded_session` (the agent layer re-issues the call).
* **Idempotent methods** (``ping``, ``roots/list``, configurable) are passed through every
  time; they are not de-duplicated.
* **Which call owns a stream** is learnt from a context variable set by
  :meth:`GuardedSession.call_tool`, which the SDK carries from the caller's task to its
  POST task (its context streams). A ``tools/call`` sent through the raw ``session``
  attribute is guarded on the wire, but its caller gets the SDK's own error, not the typed
  one.
* **Standalone GET stream.** Each fresh GET (no ``Last-Event-ID``) the SDK opens is a
  connection generation of its own (:func:`fsm.events.standalone_stream`: ``get``,
  ``get/2``, ...), a new stream and a new interaction that ends at most once. When the
  guard gives up on a generation its body ends cleanly. Cut before any event id, the SDK
  has no cursor either and opens a fresh GET after its reconnection delay (the GET's
  last ``retry:``, else 1 s: a fresh GET carries none), the next generation; messages
  the server sends while no GET is attached are stored by the server but never
  delivered (a fresh GET carries only live messages). Given up after event ids, the
  SDK's resume GET (with its own cursor) is refused locally with 405 and, after two
  refusals, the SDK stops: later server-initiated messages are lost for the session.
* **Versions.** The behaviour relied on (the SDK reading the body incrementally, resolving
  a request on an SSE JSON-RPC response, answering via a POST) is not a documented
  contract: each binding states the releases it accepts (:mod:`fsm.adapters.sdkversion`),
  every release in the range is tested, and others are refused unless told not to.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import IO, Any, TypeVar

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from fsm import actions as act
from fsm import events as ev
from fsm import trace
from fsm.adapters._transport.sse import (
    EventTooLarge,
    SseFrame,
    SseParser,
    encode_event,
    hot_event,
    plain_notification,
    raw_bytes,
)
from fsm.adapters.sdkversion import SdkRange, check_sdk_version
from fsm.errors import (
    EventTooLargeError,
    InteractionFailed,
    RequestId,
    RequestKey,
    SessionExpiredError,
)
from fsm.events import standalone_stream
from fsm.guard import Guard, GuardConfig
from fsm.messages import is_plain_notification
from fsm.observe import ObservedGuard
from fsm.outcomes import SubmissionResult
from fsm.properties import EventSeen, Observation, Violation

__all__ = [
    "Bound",
    "GuardedConnection",
    "GuardedSession",
    "GuardedTransport",
    "SdkBinding",
    "bind",
    "open_guarded_connection",
    "open_guarded_session",
    "sdk_streams",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

_LOCAL_HEADER = "x-fsm-guard"
_CLAIM_SALT = os.urandom(8).hex().encode()
"""Makes the tokens that hold a presented request's place unguessable by a server."""
_STRIP_HEADERS = ("content-length", "content-encoding", "transfer-encoding")

Connect = Callable[[str, Any], AbstractAsyncContextManager[tuple[Any, Any]]]
"""``connect(url, http_client)``: the SDK's transport, yielding ``(read, write)``."""

Claim = Callable[[RequestKey, str, "str | None"], Awaitable[bool]]
"""``claim(key, stream, event_id)``: may this process pass on the presentation of ``key``
(carried by event ``event_id`` of ``stream``)? ``False``: another process did."""


@contextlib.asynccontextmanager
async def sdk_streams(url: str, http_client: Any) -> AsyncIterator[tuple[Any, Any]]:
    """The installed SDK's ``streamable_http_client`` on ``http_client``, as ``(read,
    write)``: the :data:`Connect` of both lines (1.x also yields a session-id getter,
    dropped here). Imports the SDK when called."""
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url, http_client=http_client) as streams:
        yield streams[0], streams[1]


@dataclass(frozen=True)
class SdkBinding:
    """What differs between the SDK lines the core serves; nothing the guard decides.

    ``hx`` is the SDK's HTTP library module (``httpx2`` for mcp 2.x, ``httpx`` for 1.x: one
    API, distinct types); ``connect`` opens the SDK's streamable-HTTP transport on an
    ``hx.AsyncClient``; ``session_class`` is its ``ClientSession``; ``cancel_result()`` the
    ``ElicitResult(action="cancel")`` a withdrawn prompt returns; ``supported``/``others``
    the release ranges for :func:`~fsm.adapters.sdkversion.check_sdk_version`.
    ``errors_as_responses``: answer a request POST's HTTP error status (other than 404)
    locally with a JSON-RPC error for its id, for SDKs whose writer dies on one (1.x).
    ``context_follows_sends``: the SDK's POST task sees the sending task's context
    variables (2.x); when not (1.x), the core notes which call sent each request id on the
    SDK's write stream instead.
    """

    name: str
    hx: Any
    supported: SdkRange
    others: tuple[SdkRange, ...]
    connect: Connect
    session_class: Callable[..., Any]
    cancel_result: Callable[[], Any]
    errors_as_responses: bool = False
    context_follows_sends: bool = True


# --------------------------------------------------------------------------- the engine


@dataclass
class _CallSlot:
    """One :meth:`GuardedSession.call_tool` in flight: its origin id and its failure."""

    origin: Any = None
    error: InteractionFailed | None = None
    failed: anyio.Event = field(default_factory=anyio.Event)


_CALL: contextvars.ContextVar[_CallSlot | None] = contextvars.ContextVar(
    "fsm_guarded_call", default=None
)


class _Tee:
    """What the engine knows of one tracked stream's body, to stop it from outside."""

    def __init__(self) -> None:
        self.resp: Any = None
        self.killed = False

    def kill(self) -> Any:
        """Mark the body dead; returns the connection to close (a blocked read ends)."""
        self.killed = True
        return self.resp


class _Engine:
    """The guard, its observer, and every IO it asks for. One per MCP session."""

    def __init__(
        self,
        observed: ObservedGuard,
        http: Any,
        tg: TaskGroup,
        url: str,
        binding: SdkBinding,
    ) -> None:
        self.binding = binding
        self.hx = binding.hx
        self.bound = bind(binding.hx)
        self.og = observed
        self.guard = observed.guard
        self.http = http
        self.tg = tg
        self.url = url
        self.session: str | None = None
        self.protocol_version: str | None = None
        self.expired: InteractionFailed | None = None
        self.failures: dict[str, InteractionFailed] = {}
        self.calls: dict[Any, _CallSlot] = {}
        self.sent_calls: dict[Any, _CallSlot] = {}
        """Calls by request id, noted where the SDK sends them (:class:`_NotingWriter`)."""
        self.tees: dict[str, _Tee] = {}
        self.prompts: dict[RequestKey, anyio.CancelScope] = {}
        self.withdrawn: set[RequestKey] = set()
        self._pending_ids: dict[str, str] = {}
        self._bg: set[anyio.CancelScope] = set()
        self.closing = False
        self.dropped_answers = 0
        self.get_generations = 0
        """Connection generations of the standalone GET stream opened so far."""
        self.claim: Claim | None = None
        """Asked before a presented request is passed on (a gateway's shared store); a
        request whose claim is lost is blanked, one whose claim raises
        :class:`~fsm.errors.InteractionFailed` is blanked and fails its stream."""
        self.on_answer: Callable[[RequestKey, Mapping[str, Any]], Awaitable[None]] | None = None
        """Awaited with each answer the guard takes from the client, before the client is
        told it was taken (a gateway writes it ahead to its store)."""
        self.carried: tuple[str, ...] = ()
        """Names (lower case) of request headers the engine's own requests copy from the
        client request they act for: a gateway's client's credentials. An answer
        submission carries those of the answer's POST; a resume or a refusal those of
        the request that opened (or last reconnected) the stream. Empty for an SDK
        adapter, whose HTTP client adds its own."""
        self.trusted: Callable[[Any], bool] = _always
        """Whether a request's answer may change shared state (a 404 ending the session,
        an answer taken by the guard). A gateway trusts only credentials the upstream
        accepted for the session; an SDK adapter trusts its own client."""
        self.accepted: Callable[[Any], None] = _never_mind
        """Told each request the upstream accepted (2xx): a gateway proves its
        credentials for the session."""
        self.max_event: int | None = None
        """Characters of one SSE event held (``None``: no bound); past it the stream
        ends with :class:`~fsm.errors.EventTooLargeError`."""
        self.max_pending_refusals: int | None = None
        """Refusals (answers to requests over the guard's capacity) waiting to be sent;
        past it a refusal is dropped (counted in :attr:`dropped_refusals`): the server's
        own deadline ends that request. ``None``: no bound."""
        self.relayed_answers: OrderedDict[RequestId, None] = OrderedDict()
        """Answers to requests this guard never saw that went upstream from here as they
        came (the newest :data:`_RELAYED_KEPT`): a gateway does not send them again."""
        self.dropped_refusals = 0
        self._pending_refusals = 0
        self.upstream_slots: anyio.CapacityLimiter | None = None
        """Bounds the engine's own upstream requests in flight at once (submissions,
        refusals); ``None``: no bound."""
        self._creds_by_stream: dict[str, dict[str, str]] = {}
        self._creds_by_key: dict[RequestKey, dict[str, str]] = {}

    # -- feeding -----------------------------------------------------------------

    def flush(self) -> None:
        """Record coalesced hot-path event ids before any other observation."""
        if self._pending_ids:
            pending, self._pending_ids = self._pending_ids, {}
            for stream, event_id in pending.items():
                self.og.observe(EventSeen(stream, event_id))

    def feed(self, event: ev.Event) -> tuple[act.Action, ...]:
        """Feed ``event`` (observed) and perform the global actions it returns."""
        self.flush()
        actions = self.og.feed(event)
        self.perform(actions)
        return actions

    def on_sse(self, stream: str, sse: SseFrame) -> tuple[tuple[act.Action, ...], Any]:
        """Feed one SSE event; returns (actions, decoded message or None). An event that
        is not UTF-8 is fed without its data (only its id and ``retry:`` count)."""
        if not sse.has_data or not sse.data or not sse.utf8:
            return self.feed(ev.SseEvent(stream, None, sse.event_id, sse.retry)), None
        if sse.retry is None and plain_notification(sse.data) is not None:
            hot = self.on_hot(stream, sse.event_id)
            if hot is not None:
                return hot, None
        try:
            msg = json.loads(sse.data)
        except (ValueError, RecursionError):  # the guard reads it as malformed
            msg = None
        if sse.retry is None and is_plain_notification(msg):
            hot = self.on_hot(stream, sse.event_id)
            if hot is not None:
                return hot, msg
        data: Any = msg if isinstance(msg, dict) else sse.data
        return self.feed(ev.SseEvent(stream, data, sse.event_id, sse.retry)), msg

    def on_hot(self, stream: str, event_id: str | None) -> tuple[act.Action, ...] | None:
        """Feed the id of an event whose message is a notification that needs no decision
        (it passes :func:`fsm.messages.is_plain_notification`, or was read as one by
        :func:`plain_notification` or :func:`hot_event`) on the guard's hot path
        (:meth:`fsm.guard.Guard.on_plain_notification`); returns its actions, or ``None``
        (nothing fed) when ``stream`` is not open: the caller then feeds the event as an
        observed ``SseEvent``. The id of an event with no actions is recorded coalesced
        (:meth:`flush`)."""
        actions = self.guard.on_plain_notification(stream, event_id)
        if not actions and event_id is not None and actions is not None:
            self._pending_ids[stream] = event_id
        return actions

    def perform(self, actions: tuple[act.Action, ...]) -> None:
        """Actions that concern more than the stream being read."""
        for a in actions:
            if isinstance(a, act.Submit):
                self.spawn(self._submit, a)
            elif isinstance(a, act.Withdraw):
                self.withdrawn.add(a.key)
                scope = self.prompts.get(a.key)
                if scope is not None:
                    scope.cancel()
            elif isinstance(a, act.Fail):
                self._fail(a)
            elif isinstance(a, act.Refuse):
                limit = self.max_pending_refusals
                if limit is not None and self._pending_refusals >= limit:
                    self.dropped_refusals += 1
                    continue
                self._pending_refusals += 1
                self.spawn(self._refuse, a)

    def _fail(self, a: act.Fail) -> None:
        err = a.error
        self.failures[a.interaction] = err
        if isinstance(err, SessionExpiredError) and self.expired is None:
            self.expired = err
        stream = err.stream or a.interaction
        tee = self.tees.get(stream)
        if tee is not None:
            self._close(tee.kill())
        origin = _origin_of(stream)
        slot = self.calls.get(origin) if origin is not None else None
        if slot is not None and slot.error is None:
            slot.error = err
            slot.failed.set()

    # -- background IO -------------------------------------------------------------

    def spawn(self, fn: Callable[[Any], Awaitable[None]], arg: Any) -> None:
        if self.closing:
            return

        async def run() -> None:
            with anyio.CancelScope() as scope:
                self._bg.add(scope)
                try:
                    await fn(arg)
                except Exception:  # contained: one session's fault never ends the others
                    logger.exception("background %s failed", getattr(fn, "__name__", fn))
                finally:
                    self._bg.discard(scope)

        self.tg.start_soon(run)

    def _close(self, resp: Any) -> None:
        if resp is not None and not self.closing:
            self.spawn(_aclose, resp)

    def close(self) -> None:
        self.closing = True
        for scope in list(self._bg):
            scope.cancel()
        for tee in list(self.tees.values()):
            tee.kill()

    def headers(self, carried: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
        """The headers of a request the engine makes itself: the session's, then
        ``carried`` (the credentials of the client request it acts for), then ``extra``."""
        h = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        if self.session:
            h["mcp-session-id"] = self.session
        if self.protocol_version:
            h["mcp-protocol-version"] = self.protocol_version
        if carried:
            h.update(carried)
        h.update(extra)
        return h

    def carry(self, request: Any) -> dict[str, str]:
        """What of ``request``'s headers the engine's own requests for it carry."""
        if not self.carried:
            return {}
        headers = request.headers
        return {name: headers[name] for name in self.carried if name in headers}

    def act_for_stream(self, stream: str, request: Any) -> None:
        """The engine's own requests for ``stream`` now act for ``request``."""
        if self.carried:
            self._creds_by_stream[stream] = self.carry(request)

    def forget_stream(self, stream: str) -> None:
        """Drop what the engine keeps for ``stream`` once it ended (its credentials)."""
        self._creds_by_stream.pop(stream, None)

    def act_for_answer(self, key: RequestKey, request: Any) -> None:
        """The submissions of ``key``'s answer act for ``request`` (its POST)."""
        if not self.carried:
            return
        self._creds_by_key[key] = self.carry(request)
        if len(self._creds_by_key) > 2 * self.guard.config.max_live_requests:
            for old in list(self._creds_by_key):  # keep those of live requests only
                if self.guard.state_of(old) not in _LIVE_ANSWERS:
                    del self._creds_by_key[old]

    def credentials_for(
        self, key: RequestKey | None = None, stream: str | None = None
    ) -> dict[str, str]:
        """The carried headers of the client request the engine acts for: the answer's
        POST for ``key``, else the request of the stream that delivered it."""
        if key is not None:
            creds = self._creds_by_key.get(key)
            if creds is not None:
                return creds
            stream = stream or self.guard.stream_of(key)
        return self._creds_by_stream.get(stream, {}) if stream is not None else {}

    def room_for_stream(self, stream: str | None) -> bool:
        """Whether the guard can track one more stream (``stream``, about to open; ``None``:
        a standalone GET's next generation). At the guard's ``max_streams`` live streams,
        the oldest stream no client connection reads (its reader left and did not come
        back) is abandoned to make room; a session whose every live stream has a reader
        has no room (the new stream is refused, the session goes on). Asked before the
        request is sent, so a refused stream's request never reaches the server."""
        live = self.guard.live_streams()
        if stream in live:
            return True
        if len(live) < self.guard.config.max_streams:
            return True
        for old in live:
            if old not in self.tees:
                self.feed(ev.StreamAbandoned(old, "abandoned", "no client connection reads it"))
                return True
        return False

    async def _submit(self, a: act.Submit) -> None:
        if a.delay_s > 0:
            await anyio.sleep(a.delay_s)
        body = {"jsonrpc": "2.0", "id": a.key[1], "result": dict(a.answer)}
        result = await self._post(body, self.credentials_for(a.key))
        self.feed(ev.SubmissionOutcome(a.key, result))

    async def _refuse(self, a: act.Refuse) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": a.key[1],
            "error": {"code": -32603, "message": str(a.error)},
        }
        try:
            await self._post(body, self.credentials_for(stream=self.guard.stream_of(a.key)))
        finally:
            self._pending_refusals -= 1

    async def _post(
        self, body: Mapping[str, Any], carried: Mapping[str, str] | None = None
    ) -> SubmissionResult:
        if self.expired is not None:
            return SubmissionResult(404, None)
        slots = self.upstream_slots
        async with slots if slots is not None else contextlib.nullcontext():
            try:
                req = self.http.build_request(
                    "POST", self.url, json=dict(body), headers=self.headers(carried)
                )
                resp = await self.http.send(req, stream=True)
            except self.hx.HTTPError as exc:
                return SubmissionResult(None, None, type(exc).__name__)
            except Exception as exc:  # a request that cannot be built or sent: one failure
                logger.warning("answer POST not sent: %r", exc)
                return SubmissionResult(None, None, type(exc).__name__)
            return await _http_result(resp)

    async def relayed(self, key: RequestKey, answer: Mapping[str, Any]) -> None:
        """The upstream accepted an answer, relayed as it came, to a request this guard
        never saw: remembered (not sent again from here) and kept for other processes
        that watch for it (:attr:`on_answer`)."""
        self.relayed_answers[key[1]] = None
        while len(self.relayed_answers) > _RELAYED_KEPT:
            self.relayed_answers.popitem(last=False)
        if self.on_answer is not None:
            await self.on_answer(key, answer)

    def answered_upstream(
        self, key: RequestKey, answer: Mapping[str, Any], result: SubmissionResult
    ) -> None:
        """The client's answer for ``key`` went upstream as it was (relayed, not
        submitted by the guard) and the upstream accepted it: the guard records it as
        answered and submitted, without a submission of its own."""
        self.flush()
        actions = self.og.feed(ev.UserAnswered(key, answer))
        self.perform(tuple(a for a in actions if not isinstance(a, act.Submit)))
        if any(isinstance(a, act.Submit) for a in actions):
            self.feed(ev.SubmissionOutcome(key, result))


def _always(_request: Any) -> bool:
    return True


def _never_mind(_request: Any) -> None:
    return None


async def _aclose(resp: Any) -> None:
    await resp.aclose()


LARGE_EVENT = 256 * 1024
"""Characters of an SSE event from which :class:`_GuardedBody` hands the event loop back
between the steps of its handling (see :meth:`_GuardedBody._pass_on`)."""

_RELAYED_KEPT = 1024
"""Relayed answers an engine remembers (:attr:`_Engine.relayed_answers`)."""

_LIVE_ANSWERS = frozenset({"presented", "answered", "submitting", "submitted"})
"""Liveness states whose answer may still be (re)submitted."""


def _origin_of(stream: str) -> Any:
    if not stream.startswith("post:"):
        return None
    raw = stream[5:]
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


def _stream_name(origin: Any) -> str:
    return f"post:{json.dumps(origin)}"


_RESULT_BODY_LIMIT = 64 * 1024
"""Bytes of a response body read to classify an answer POST or a failed resume GET."""


async def _http_result(resp: Any) -> SubmissionResult:
    """What the outcome tables (:mod:`fsm.outcomes`) read of a response that opened no
    event stream: its status, the JSON object its body holds (``None`` if the body is
    empty, not JSON, not an object, or longer than 64 KiB: only that much is read) and
    ``Retry-After`` in seconds. Closes ``resp``; a body that breaks off while read is
    taken as far as it came (any exception of the HTTP library, whichever it is)."""
    data = bytearray()
    try:
        async for chunk in resp.aiter_bytes():
            data += chunk
            if len(data) > _RESULT_BODY_LIMIT:
                break
    except Exception as exc:
        logger.debug("response body broke off: %r", exc)
    finally:
        await resp.aclose()
    parsed: Mapping[str, Any] | None = None
    if data and len(data) <= _RESULT_BODY_LIMIT:
        with contextlib.suppress(ValueError, RecursionError):
            value = json.loads(bytes(data))
            parsed = value if isinstance(value, Mapping) else None
    return SubmissionResult(resp.status_code, parsed, None, _retry_after(resp))


def _retry_after(resp: Any) -> float | None:
    value = resp.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _json_body(request: Any) -> Any:
    try:
        return json.loads(request.content) if request.content else None
    except (ValueError, RecursionError):
        return None


def _local(
    hx: Any, request: Any, status: int, body: bytes = b"", ctype: str = "application/json"
) -> Any:
    """A response made here (``x-fsm-guard: 1``), an ``hx.Response``."""
    return hx.Response(
        status,
        headers={"content-type": ctype, _LOCAL_HEADER: "1"},
        content=body,
        request=request,
    )


_SESSION_GONE_BODY = json.dumps(
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}
).encode()


# --------------------------------------------------------------------------- the transport


class GuardedTransport:
    """The transport core: forwards through ``engine.http`` and applies the guard.

    Not for direct use: :func:`open_guarded_session` builds it, as the subclass :func:`bind`
    makes of it and the SDK's HTTP library's ``AsyncBaseTransport``. Contract: every request
    of the SDK is sent once through the application's client, except answer POSTs (the guard's
    submissions replace them), resume GETs of the SDK (refused locally: resumption is the
    guard's) and anything after the session expired (local 404).
    """

    def __init__(self, engine: _Engine) -> None:
        self.e = engine

    async def handle_async_request(self, request: Any) -> Any:
        e = self.e
        if e.expired is not None:
            return _local(self.e.hx, request, 404, _SESSION_GONE_BODY)
        method = request.method
        if method == "POST":
            body = _json_body(request)
            version = request.headers.get("mcp-protocol-version")
            if version:
                e.protocol_version = version
            if isinstance(body, dict) and "method" not in body and "id" in body:
                if not e.trusted(request):
                    return await self._relay_answer(request, body)
                local = await self._answer(request, body)
                if local is not None:
                    return local
            try:
                resp = await self._forward_post(request, body)
            except e.hx.TransportError as exc:
                logger.warning("POST failed without a response: %r", exc)
                why = f"request POST failed without a response ({type(exc).__name__})"
                return _post_failed(e.hx, request, body, why)
            status = resp.status_code
            if e.binding.errors_as_responses and status >= 400 and status != 404:
                await resp.aclose()
                logger.warning("POST answered HTTP %s", status)
                return _post_failed(e.hx, request, body, f"request POST answered HTTP {status}")
            return resp
        if method == "GET":
            if request.headers.get("last-event-id") is not None:
                # the SDK resuming on its own: only after the guard ended that body
                return _local(self.e.hx, request, 405, b"")
            if e.session and not e.room_for_stream(None):
                return _local(e.hx, request, 503, _too_many_streams(request))
            return await self._open_stream(request, None, None)
        return await self._send(request)

    async def _send(self, request: Any) -> Any:
        e = self.e
        resp = await e.http.send(request, stream=True)
        if _session_gone(e, request, resp.status_code):
            await resp.aclose()
            e.feed(ev.SessionExpired())
            return _local(e.hx, request, 404, _SESSION_GONE_BODY)
        if resp.status_code < 300:
            e.accepted(request)
        return _wrap(e.hx, resp, request, e.bound.passthrough(resp))

    async def _relay_answer(self, request: Any, body: dict[str, Any]) -> Any:
        """An answer POST the engine does not trust (credentials the upstream has not
        accepted for the session): sent upstream as it came, its response returned as
        it is. Only if the upstream accepted it does the guard record the request as
        answered (and submitted): an answer the upstream refused changes nothing."""
        e = self.e
        resp = await e.http.send(request, stream=True)
        status = resp.status_code
        rid = body.get("id")
        result = body.get("result")
        if status < 300 and isinstance(rid, int | str) and not isinstance(rid, bool):
            e.accepted(request)
            key: RequestKey = (e.session or "", rid)
            state = e.guard.state_of(key)
            if state == "presented" and isinstance(result, Mapping):
                e.act_for_answer(key, request)
                e.answered_upstream(key, result, SubmissionResult(status, None))
            elif state is None and isinstance(result, Mapping):
                await e.relayed(key, result)
        return _wrap(e.hx, resp, request, e.bound.passthrough(resp))

    async def _answer(self, request: Any, body: dict[str, Any]) -> Any:
        """An answer POST from the SDK: the guard submits it (or it is dropped)."""
        e = self.e
        rid = body.get("id")
        if not isinstance(rid, int | str) or isinstance(rid, bool):
            return None
        key: RequestKey = (e.session or "", rid)
        state = e.guard.state_of(key)
        if state is None:  # idempotent or untracked request: the answer goes as it is
            if e.on_answer is None or not isinstance(body.get("result"), Mapping):
                return None
            resp = await self._send(request)
            if resp.status_code < 300:
                await e.relayed(key, body["result"])
            return resp
        if state == "presented" and isinstance(body.get("result"), Mapping):
            if e.on_answer is not None:  # written ahead: a crash after the 202 keeps it
                await e.on_answer(key, body["result"])
            if e.guard.state_of(key) == "presented":
                e.act_for_answer(key, request)
                e.feed(ev.UserAnswered(key, body["result"]))
            else:
                e.dropped_answers += 1
            return _local(self.e.hx, request, 202)
        if state == "presented":
            return None  # the handler raised: its error goes to the server unchanged
        e.dropped_answers += 1  # withdrawn, dead, or already answered: never sent
        return _local(self.e.hx, request, 202)

    async def _forward_post(self, request: Any, body: Any) -> Any:
        e = self.e
        origin = body.get("id") if isinstance(body, dict) and "method" in body else None
        if origin is not None:
            slot = _CALL.get() or e.sent_calls.pop(origin, None)
            if slot is not None and slot.origin is None and body.get("method") == "tools/call":
                slot.origin = origin
                e.calls[origin] = slot
            stream = _stream_name(origin)
            if e.session and not e.room_for_stream(stream):  # refused before it is sent
                return _local(e.hx, request, 503, _too_many_streams(request))
            return await self._open_stream(request, stream, origin)
        return await self._send(request)

    def reconnect(self, request: Any, stream: str, origin: Any, seen: tuple[str, ...] = ()) -> Any:
        """A client's resume ``GET`` for ``stream`` (a gateway's client reconnected after
        its connection broke): the response whose body resumes the stream upstream from
        the guard's cursor (never older than the newest event seen) and goes on as the
        stream's guarded body; ``None`` if the stream already ended here (done or dead:
        the caller answers). ``origin`` is the stream's origin request id; ``seen`` the
        event ids the client proved it has, oldest first, fed to the guard first when this
        process never saw the stream (another replica carried it). A previous body of the
        stream (the client's broken connection) is stopped."""
        e = self.e
        state = e.guard.stream_state(stream)
        if state in ("done", "dead"):
            return None
        if state is None:
            if not e.room_for_stream(stream):
                return _local(e.hx, request, 503, _too_many_streams(request))
            e.feed(ev.StreamOpened(stream, origin))
            for event_id in seen:
                e.feed(ev.SseEvent(stream, None, event_id, None))
        old = e.tees.get(stream)
        tee = _Tee()
        e.tees[stream] = tee
        e.act_for_stream(stream, request)
        body = e.bound.body(e, stream, origin, request, None, tee)
        if old is not None:  # the client's previous connection: closed before resuming
            body.replaced = old.kill()
        return e.hx.Response(
            200,
            headers={"content-type": "text/event-stream", "cache-control": "no-cache"},
            stream=body,
            request=request,
        )

    async def _open_stream(self, request: Any, stream: str | None, origin: Any) -> Any:
        """Send ``request`` and track its SSE response as ``stream``; ``None``: a fresh
        standalone GET, tracked as the next connection generation (never under the name
        of one that ended: each generation is its own interaction)."""
        e = self.e
        resp = await e.http.send(request, stream=True)
        sid = resp.headers.get("mcp-session-id")
        if sid and sid != e.session and body_method(request) == "initialize":
            e.session = sid
            e.feed(ev.SessionStarted(sid))
        if _session_gone(e, request, resp.status_code):
            await resp.aclose()
            e.feed(ev.SessionExpired())
            return _local(self.e.hx, request, 404, _SESSION_GONE_BODY)
        if resp.status_code < 300:
            e.accepted(request)
        ctype = resp.headers.get("content-type", "").partition(";")[0].strip().lower()
        if resp.status_code != 200 or ctype != "text/event-stream" or not e.session:
            return _wrap(self.e.hx, resp, request, self.e.bound.passthrough(resp))
        if stream is None:
            e.get_generations += 1
            stream = standalone_stream(e.get_generations)
        if e.guard.stream_state(stream) not in (None, "done", "dead"):
            return _wrap(self.e.hx, resp, request, self.e.bound.passthrough(resp))
        if not e.room_for_stream(stream):
            await resp.aclose()
            return _local(e.hx, request, 503, _too_many_streams(request))
        e.feed(ev.StreamOpened(stream, origin))
        tee = _Tee()
        e.tees[stream] = tee
        e.act_for_stream(stream, request)
        return _wrap(e.hx, resp, request, e.bound.body(e, stream, origin, request, resp, tee))


ENDED_CODE = -32000
"""The JSON-RPC error code of the response that ends an interaction the guard failed."""


def _session_gone(e: _Engine, request: Any, status: int) -> bool:
    """Whether a response says the session is gone: a 404 to a request that carries the
    session id, with credentials the engine trusts (a 404 to another's credentials is
    that request's answer alone: a server may hide sessions of other users)."""
    return status == 404 and bool(request.headers.get("mcp-session-id")) and e.trusted(request)


def _too_many_streams(request: Any) -> bytes:
    """The JSON-RPC error for a request whose stream would pass the session's cap."""
    body = _json_body(request)
    rid = body.get("id") if isinstance(body, dict) else None
    message = "too many open streams in this session; close one and retry"
    error = {"code": ENDED_CODE, "message": message, "data": {"reason": "too-many-streams"}}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).encode()


def ending_error(origin: Any, err: InteractionFailed | None) -> dict[str, Any]:
    """The JSON-RPC error response for request ``origin`` whose interaction the guard ended
    with ``err``: code :data:`ENDED_CODE`, ``message`` "<reason>: <error>", ``data`` the
    error's :meth:`~fsm.errors.InteractionFailed.to_json` (``reason``, ``key``,
    ``stream``, ``evidence``)."""
    if err is None:
        error: dict[str, Any] = {
            "code": ENDED_CODE,
            "message": "interaction ended by the guard",
            "data": {"reason": "ended"},
        }
    else:
        error = {"code": ENDED_CODE, "message": f"{err.reason}: {err}", "data": err.to_json()}
    return {"jsonrpc": "2.0", "id": origin, "error": error}


def _post_failed(hx: Any, request: Any, body: Any, why: str) -> Any:
    """A POST that got no usable response, answered locally so the SDK's writer survives.

    A request gets a JSON-RPC error for its id saying ``why`` (its caller sees the SDK's
    error type; the server may or may not have received it); a notification or answer
    gets 202.
    """
    if isinstance(body, dict) and "method" in body and "id" in body:
        payload = {
            "jsonrpc": "2.0",
            "id": body["id"],
            "error": {
                "code": -32000,
                "message": why,
            },
        }
        return _local(hx, request, 200, json.dumps(payload).encode())
    return _local(hx, request, 202)


def body_method(request: Any) -> str | None:
    """The JSON-RPC method of a POST body (``None`` if none)."""
    body = _json_body(request)
    if isinstance(body, dict) and isinstance(body.get("method"), str):
        return str(body["method"])
    return None


def _wrap(hx: Any, resp: Any, request: Any, stream: Any) -> Any:
    headers = [(k, v) for k, v in resp.headers.multi_items() if k.lower() not in _STRIP_HEADERS]
    return hx.Response(
        resp.status_code,
        headers=headers,
        stream=stream,
        request=request,
        extensions=dict(resp.extensions),
    )


class _Passthrough:
    """A forwarded body, unchanged (bound to the HTTP library by :func:`bind`)."""

    def __init__(self, resp: Any) -> None:
        self.resp = resp

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.resp.aiter_bytes():
            yield chunk

    async def aclose(self) -> None:
        await self.resp.aclose()


class _GuardedBody:
    """The body the SDK reads for one tracked stream: filtered events, spliced resumes.

    Ends when the origin's response was passed on (the SDK closes it), when the guard
    failed the stream (a synthetic JSON-RPC error for the origin is appended first), or
    when the guard stopped resuming a stream without origin.
    """

    def __init__(
        self,
        engine: _Engine,
        stream: str,
        origin: Any,
        request: Any,
        resp: Any,
        tee: _Tee,
    ) -> None:
        self.e, self.stream, self.origin = engine, stream, origin
        self.request, self.resp, self.tee = request, resp, tee
        self._acted = False
        self._claims: list[tuple[bytes, RequestKey, str | None, bytes]] = []
        self._claim_key: RequestKey | None = None
        self.replaced: Any = None
        """The upstream response of the stream's previous client connection, closed
        before this one resumes (a server may refuse a resume while it holds it)."""

    async def aclose(self) -> None:
        if self.resp is not None:
            await self.resp.aclose()
        if self.e.tees.get(self.stream) is self.tee:
            del self.e.tees[self.stream]

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.resp is None:  # a client reconnected (:meth:`GuardedTransport.reconnect`)
            first = await self._reconnect()
            if first is None:
                tail = self._ending()
                if tail:
                    yield tail
                return
            self.resp = first
        while True:
            parser = SseParser(self.e.max_event)
            self.tee.resp = self.resp
            # no content coding: read the transport stream itself (one generator hop less)
            source = (
                self.resp.stream
                if "content-encoding" not in self.resp.headers
                and isinstance(self.resp.stream, self.e.hx.AsyncByteStream)
                else self.resp.aiter_bytes()
            )
            chunks = source.__aiter__()
            clean = True
            while True:
                chunk: bytes | None
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    logger.debug("%s connection ended", self.stream)
                    chunk = None
                except Exception as exc:  # whatever ends a connection abruptly
                    logger.debug("%s read failed: %r", self.stream, exc)
                    chunk, clean = None, False
                if self.tee.killed:
                    chunk, clean = None, False
                if chunk is None:
                    break
                self._acted = False
                try:
                    out = await self._pass_on(parser, chunk)
                except EventTooLarge as exc:
                    too_large = EventTooLargeError.reason
                    self.e.feed(ev.StreamAbandoned(self.stream, too_large, str(exc)))
                    break
                if self._claims:
                    out = await self._settle_claims(out)
                if out:
                    yield out
                if self._acted and self._dead():
                    break
            await self.resp.aclose()
            if self._dead():
                tail = self._ending()
                if tail:
                    yield tail
                return
            nxt = await self._resume(clean)
            if nxt is None:
                tail = self._ending()
                if tail:
                    yield tail
                return
            self.resp = nxt

    def _dead(self) -> bool:
        return self.e.guard.stream_state(self.stream) in ("done", "dead") or self.tee.killed

    async def _pass_on(self, parser: SseParser, chunk: bytes) -> bytes:
        """Feed every event ``chunk`` completes; the bytes the SDK gets for them.

        That is ``chunk`` itself when it holds only whole events, all passed unchanged
        (the common case), else the events up to the last complete one, each as received
        or as rewritten by :meth:`_verdict` (an incomplete tail stays in ``parser``). Stops
        after the first event that leaves the stream dead (``_acted`` and :meth:`_dead`);
        the events after it are dropped. Plain notifications at the start of an event
        (``parser.idle``) in an ASCII chunk are read by :func:`hot_event` and fed through
        :meth:`_Engine.on_hot` without decoding; the rest of the chunk goes to ``parser``.

        An event over :data:`LARGE_EVENT` characters is handled in steps (its parse, its
        JSON decoding, its encoding) with a checkpoint after each: no one step holds the
        event loop, which other sessions share, for longer than one pass over it.
        """
        e, stream = self.e, self.stream
        pos = mark = 0  # chunk[:mark] is in parts (rewritten), chunk[mark:pos] unchanged
        parts: list[bytes] = []
        if parser.idle and chunk.isascii():
            size = len(chunk)
            while pos < size:
                hot = hot_event(chunk, pos)
                if hot is None:
                    break
                end, event_id = hot
                actions = e.on_hot(stream, event_id)
                if actions is None:
                    break
                if actions:
                    new = self._verdict(event_id, actions, None)
                    if new is not None:
                        parts += (chunk[mark:pos], new)
                        mark = end
                    if self._dead():
                        parts.append(chunk[mark:end])
                        return b"".join(parts)
                pos = end
            if pos == size:
                if not parts:
                    return chunk
                parts.append(chunk[mark:])
                return b"".join(parts)
        whole = not parser.pending and not parts  # all bytes before chunk went out
        events = parser.feed(chunk[pos:] if pos else chunk)
        large = any(len(sse.raw) > LARGE_EVENT for sse in events)
        if large:
            await anyio.lowlevel.checkpoint()
        pieces: list[bytes | None] = []
        for sse in events:
            actions, msg = e.on_sse(stream, sse)
            if large and len(sse.raw) > LARGE_EVENT:
                await anyio.lowlevel.checkpoint()
            piece = self._verdict(sse.event_id, actions, msg)
            if not sse.utf8 and piece is None:  # malformed: reaches nobody as a message
                piece = encode_event(sse.event_id, "") if sse.event_id is not None else b""
            if self._claim_key is not None:
                token = b"\x00fsm-claim-%d-%s\x00" % (len(self._claims), _CLAIM_SALT)
                raw = raw_bytes(sse)
                self._claims.append((token, self._claim_key, sse.event_id, raw))
                self._claim_key, piece = None, token
            pieces.append(piece)
            if self._acted and self._dead():
                whole = False
                break
        if whole and not parser.pending and all(p is None for p in pieces):
            return chunk
        parts.append(chunk[mark:pos])
        parts += (
            raw_bytes(sse) if p is None else p for sse, p in zip(events, pieces, strict=False)
        )
        if large:
            await anyio.lowlevel.checkpoint()
        return b"".join(parts)

    def _verdict(
        self, event_id: str | None, actions: tuple[act.Action, ...], msg: Any
    ) -> bytes | None:
        """The bytes the SDK gets instead of an event the guard answered with ``actions``
        (``msg``: its decoded message, or ``None`` when read as a plain notification);
        ``None``: the event goes unchanged. Sets ``_acted`` when there are actions."""
        if not actions:
            return None
        self._acted = True
        is_request = isinstance(msg, dict) and "method" in msg and "id" in msg
        presented = any(isinstance(a, act.Present) for a in actions)
        if is_request and not presented:
            return encode_event(event_id, "") if event_id is not None else b""
        if is_request and self.e.claim is not None:
            self._claim_key = next(a.key for a in actions if isinstance(a, act.Present))
            return None
        if any(
            isinstance(a, act.Ignore)
            and a.reason in ("duplicate-event", "foreign-response", "stream-terminal")
            for a in actions
        ):
            return encode_event(event_id, "") if event_id is not None else b""
        return None

    def _ending(self) -> bytes:
        """The synthetic JSON-RPC error that releases the SDK's waiter (origin streams)."""
        if self.origin is None or self.e.guard.stream_state(self.stream) == "done":
            return b""
        err = self.e.failures.get(self.stream)
        return encode_event(None, json.dumps(ending_error(self.origin, err)))

    async def _settle_claims(self, out: bytes) -> bytes:
        """Ask :attr:`_Engine.claim` for each request presented in ``out`` (held there as
        a token): pass it on if won, blank it (keeping its id) if lost; a claim that
        raises blanks it and fails the stream with that error (fail closed)."""
        e = self.e
        claims, self._claims = self._claims, []
        assert e.claim is not None
        for token, key, event_id, raw in claims:
            try:
                won = await e.claim(key, self.stream, event_id)
            except InteractionFailed as err:
                logger.warning("a claim failed: %s", err)
                won = False
                e.failures.setdefault(self.stream, err)
                self.tee.killed = True
            blank = encode_event(event_id, "") if event_id is not None else b""
            out = out.replace(token, raw if won else blank, 1)
        return out

    async def _resume(self, clean: bool) -> Any:
        """Resume as the guard says; the new connection's response, or ``None`` to stop."""
        actions = self.e.feed(ev.StreamLost(self.stream, clean))
        logger.debug("%s lost (clean=%s): %s", self.stream, clean, actions)
        return await self._resume_as(actions, immediate=False)

    async def _reconnect(self) -> Any:
        """The client reconnected to this stream: resume it upstream now (the client
        already waited), from the guard's cursor, within the stream's budgets."""
        e, stream = self.e, self.stream
        if self.replaced is not None:
            replaced, self.replaced = self.replaced, None
            with contextlib.suppress(Exception):
                await replaced.aclose()
        state = e.guard.stream_state(stream)
        actions: tuple[act.Action, ...]
        if state == "open":
            actions = e.feed(ev.StreamLost(stream, False))
        elif state == "resuming":  # the GET in flight went with the old connection
            actions = e.feed(ev.ResumeRefused(stream, None, "ClientReconnected"))
        else:
            actions = (act.Wait(stream, 0.0),) if state == "waiting" else ()
        return await self._resume_as(actions, immediate=True)

    async def _resume_as(self, actions: tuple[act.Action, ...], immediate: bool) -> Any:
        """Follow the guard's ``Wait``/``Resume`` from ``actions`` until a resume opens an
        event stream (its response) or the guard stops (``None``). ``immediate``: this is
        a client's reconnection, sent at once with its request's headers."""
        e, stream = self.e, self.stream
        while True:
            wait = next((a for a in actions if isinstance(a, act.Wait)), None)
            if wait is None or self._dead():
                return None
            if not immediate:
                await anyio.sleep(wait.delay_s)
            if self._dead():
                return None
            actions = e.feed(ev.TimerFired(stream))
            logger.debug("%s timer: %s", stream, actions)
            resume = next((a for a in actions if isinstance(a, act.Resume)), None)
            if resume is None:
                return None
            if immediate:  # the client's own resume GET, its cursor rewritten
                headers = dict(self.request.headers)
                headers["last-event-id"] = resume.cursor
            else:
                carried = e.credentials_for(stream=stream)
                headers = e.headers(carried, **{"last-event-id": resume.cursor})
                headers.pop("content-type", None)
            immediate = False
            req = e.http.build_request("GET", e.url, headers=headers)
            try:
                resp = await e.http.send(req, stream=True)
            except (e.hx.HTTPError, OSError) as exc:
                actions = e.feed(ev.ResumeRefused(stream, None, type(exc).__name__))
                continue
            ctype = resp.headers.get("content-type", "").partition(";")[0].strip().lower()
            logger.debug("%s resume -> %s %s", stream, resp.status_code, ctype)
            if resp.status_code == 200 and ctype == "text/event-stream":
                e.feed(ev.StreamResumed(stream))
                return resp
            got = await _http_result(resp)
            actions = e.feed(
                ev.ResumeRefused(stream, got.status, body=got.body, retry_after=got.retry_after)
            )


class _NotingWriter:
    """The SDK's write stream, noting which guarded call sends each ``tools/call`` id
    (for SDKs whose POST task does not inherit the caller's context variables). Everything
    else is the wrapped stream's."""

    def __init__(self, inner: Any, engine: _Engine) -> None:
        self._inner, self._e = inner, engine

    async def send(self, item: Any) -> None:
        slot = _CALL.get()
        if slot is not None and slot.origin is None:
            root: Any = getattr(getattr(item, "message", None), "root", None)
            if getattr(root, "method", None) == "tools/call":
                self._e.sent_calls[root.id] = slot
        await self._inner.send(item)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def __aenter__(self) -> _NotingWriter:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        return await self._inner.__aexit__(*exc)


# --------------------------------------------------------------------------- the session


class GuardedConnection:
    """The guard for one MCP session, for a client that opens the SDK session itself (a
    framework such as fastmcp's ``Client``): give it :meth:`http_client` as its HTTP
    client, run each tool call through :meth:`call`, and hold each prompt inside
    :meth:`prompt` (or give the SDK :meth:`wrap_callback` of its elicitation callback).
    :func:`open_guarded_connection` makes one; :class:`GuardedSession` is one with the
    SDK's ``ClientSession`` opened for you.
    """

    def __init__(self, engine: _Engine) -> None:
        self._e = engine

    @property
    def guard(self) -> ObservedGuard:
        """The observed guard (decisions, monitor, kept observations)."""
        return self._e.og

    @property
    def session_id(self) -> str | None:
        """The MCP session id the server assigned."""
        return self._e.session

    @property
    def violations(self) -> list[tuple[int, Observation, Violation]]:
        """Property violations the online monitor saw (empty for a conforming run)."""
        self._e.flush()
        return self._e.og.violations

    @property
    def failures(self) -> dict[str, InteractionFailed]:
        """Every interaction the guard failed, by interaction name."""
        return dict(self._e.failures)

    def observations(self) -> list[tuple[Observation, float]]:
        """The kept ``(observation, t)`` pairs, oldest first."""
        self._e.flush()
        return list(self._e.og.log)

    def event_log(self) -> str:
        """The observations as JSON Lines (:func:`fsm.trace.dumps`)."""
        return trace.dumps(self.observations())

    def http_client(self, **kwargs: Any) -> Any:
        """A new ``AsyncClient`` of the SDK's HTTP library whose transport is the guard
        (all traffic goes on through the application's client). ``kwargs`` go to the
        ``AsyncClient`` (a framework's client factory passes ``headers``, ``auth``,
        ``timeout``, ``follow_redirects``); the caller closes it. One MCP session only."""
        e = self._e
        kwargs.setdefault("timeout", e.http.timeout)
        return e.hx.AsyncClient(transport=e.bound.transport(e), **kwargs)

    def wrap_callback(self, callback: ElicitationFn | None) -> ElicitationFn | None:
        """The SDK elicitation callback to install instead of ``callback``: run under
        :meth:`prompt`, returning the SDK's "cancel" result when withdrawn."""
        return _wrap_callback(self._e, callback)

    def prompt(self, request_id: Any) -> contextlib.AbstractContextManager[anyio.CancelScope]:
        """Hold the presentation of server request ``request_id`` inside this: it is
        cancelled when the guard withdraws the request (cancelled on the wire, session
        gone, rejected), even if the SDK's own loop is blocked (``scope.cancelled_caught``
        tells). Answer with what the SDK expects; the adapter submits it."""
        return _prompt_scope(self._e, request_id)

    async def call(self, run: Callable[[], Awaitable[_T]]) -> _T:
        """Await ``run()`` (one tool call through the SDK or a framework on it), raced
        against the guard's ``Fail`` for the call's stream.

        Raises the guard's typed error (once) if the interaction died; raises
        :class:`~fsm.errors.SessionExpiredError` at once if the session is known gone;
        otherwise returns or raises what ``run()`` does.
        """
        e = self._e
        if e.expired is not None:
            raise _again(e.expired)
        slot = _CallSlot()
        token = _CALL.set(slot)
        outcome: list[_T] = []
        raised: list[BaseException] = []
        done = anyio.Event()

        async def attempt() -> None:
            try:
                outcome.append(await run())
            except Exception as exc:
                raised.append(exc)
            finally:
                done.set()

        async def watch() -> None:
            await slot.failed.wait()
            done.set()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(attempt)
                tg.start_soon(watch)
                await done.wait()
                tg.cancel_scope.cancel()
        finally:
            _CALL.reset(token)
            if slot.origin is not None:
                e.calls.pop(slot.origin, None)
        if slot.error is not None:
            raise slot.error
        if outcome:
            return outcome[0]
        typed = _typed_failure(e, raised[0]) if raised else None
        if typed is not None:
            raise typed from raised[0]
        if e.expired is not None:
            raise _again(e.expired)
        raise raised[0]


class GuardedSession(GuardedConnection):
    """An initialized ``ClientSession`` with the guard in front of it.

    ``call_tool`` returns the tool's result, or raises exactly one
    :class:`~fsm.errors.InteractionFailed` subclass when the guard decided the interaction
    cannot complete. ``session`` is the raw SDK session (for everything else: its requests
    are still guarded on the wire).
    """

    def __init__(self, session: Any, engine: _Engine) -> None:
        super().__init__(engine)
        self.session = session

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """``ClientSession.call_tool`` through :meth:`~GuardedConnection.call`: the
        result, or one typed error."""
        return await self.call(lambda: self.session.call_tool(name, arguments, **kwargs))

    async def list_tools(self) -> Any:
        """``ClientSession.list_tools`` (raises SessionExpiredError once the session is gone)."""
        if self._e.expired is not None:
            raise _again(self._e.expired)
        return await self.session.list_tools()


def _typed_failure(engine: _Engine, exc: BaseException) -> InteractionFailed | None:
    """The guard's typed error behind ``exc``: an SDK or framework error (or one it wraps)
    carrying the guard's ending error (:func:`ending_error`: ``data.stream`` names a stream
    the guard failed with ``data.reason``). How a call learns its typed error when the
    guard could not tell which call sent the request (a framework's own write stream)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        data = getattr(getattr(current, "error", None), "data", None)
        if isinstance(data, Mapping) and isinstance(data.get("stream"), str):
            err = engine.failures.get(data["stream"])
            if err is not None and err.reason == data.get("reason"):
                return _again(err)
        current = current.__cause__ or current.__context__
    return None


def _again(err: InteractionFailed) -> InteractionFailed:
    """A fresh copy of a terminal error (the original was raised to its own caller)."""
    return type(err)(
        str(err), key=err.key, stream=err.stream, reason=err.reason, evidence=err.evidence
    )


ElicitationFn = Callable[[Any, Any], Awaitable[Any]]
"""The SDK's elicitation callback: ``async (context, params) -> ElicitResult | ErrorData``."""


@contextlib.contextmanager
def _prompt_scope(engine: _Engine, request_id: Any) -> Iterator[anyio.CancelScope]:
    key: RequestKey = (engine.session or "", request_id)
    with anyio.CancelScope() as scope:
        engine.prompts[key] = scope
        if key in engine.withdrawn:
            scope.cancel()
        try:
            yield scope
        finally:
            engine.prompts.pop(key, None)


def _wrap_callback(engine: _Engine, callback: ElicitationFn | None) -> ElicitationFn | None:
    """The callback the SDK gets: ``callback`` under a cancel scope the guard's ``Withdraw``
    cancels (then it returns ``cancel_result()``, which the transport drops: the key is
    dead). Both SDK lines put the server request's id on ``context.request_id``."""
    if callback is None:
        return None
    cancel_result = engine.binding.cancel_result

    async def on_elicit(context: Any, params: Any) -> Any:
        result: Any = cancel_result()
        with _prompt_scope(engine, context.request_id):
            result = await callback(context, params)
        return result

    return on_elicit


LogTarget = str | os.PathLike[str] | IO[str]


@dataclass(frozen=True)
class Bound:
    """The core's classes bound to one HTTP library (subclasses of its base classes, which
    its client checks): the transport, the guarded body, the forwarded body."""

    transport: type[GuardedTransport]
    body: type[_GuardedBody]
    passthrough: type[_Passthrough]


_BOUND: dict[str, Bound] = {}


def bind(hx: Any) -> Bound:
    """The core's classes for the HTTP library module ``hx`` (made once per library)."""
    bound = _BOUND.get(hx.__name__)
    if bound is None:
        bound = _BOUND[hx.__name__] = Bound(
            type("GuardedTransport", (GuardedTransport, hx.AsyncBaseTransport), {}),
            type("GuardedBody", (_GuardedBody, hx.AsyncByteStream), {}),
            type("Passthrough", (_Passthrough, hx.AsyncByteStream), {}),
        )
    return bound


@contextlib.asynccontextmanager
async def open_guarded_connection(
    binding: SdkBinding,
    url: str,
    *,
    http_client: Any = None,
    config: GuardConfig | None = None,
    clock: Callable[[], float] = time.monotonic,
    log: LogTarget | None = None,
    strict_sdk: bool = True,
) -> AsyncIterator[GuardedConnection]:
    """The guard for one MCP session on ``url``, for a client that opens the SDK session
    itself (see :class:`GuardedConnection`); arguments as :func:`open_guarded_session`.
    Its background IO (submissions, resumes) ends when this exits."""
    check_sdk_version(binding.supported, others=binding.others, strict=strict_sdk)
    hx = binding.hx
    async with contextlib.AsyncExitStack() as stack:
        if http_client is None:
            http_client = await stack.enter_async_context(
                hx.AsyncClient(timeout=hx.Timeout(30.0, read=300.0))
            )
        sink: IO[str] | None = None
        if isinstance(log, str | os.PathLike):
            sink = stack.enter_context(open(log, "w", encoding="utf-8"))  # noqa: SIM115
        elif log is not None:
            sink = log
        on_obs: Callable[[Observation, float], None] | None = None
        if sink is not None:
            out = sink
            out.write(json.dumps({"kind": "header", "schema": trace.SCHEMA}) + "\n")

            def on_obs(obs: Observation, t: float) -> None:
                out.write(json.dumps(trace.to_record(obs, t), sort_keys=True) + "\n")

        observed = ObservedGuard(Guard(clock=clock, config=config), on_observation=on_obs)
        tg = await stack.enter_async_context(anyio.create_task_group())
        engine = _Engine(observed, http_client, tg, url, binding)
        stack.callback(engine.close)
        yield GuardedConnection(engine)
        engine.flush()


@contextlib.asynccontextmanager
async def open_guarded_session(
    binding: SdkBinding,
    url: str,
    *,
    elicitation_callback: ElicitationFn | None = None,
    http_client: Any = None,
    config: GuardConfig | None = None,
    clock: Callable[[], float] = time.monotonic,
    log: LogTarget | None = None,
    strict_sdk: bool = True,
    **session_kwargs: Any,
) -> AsyncIterator[GuardedSession]:
    """Open an initialized, guarded MCP session on ``url`` (legacy streamable HTTP).

    ``http_client`` carries all HTTP (its hooks, auth and timeouts apply; it is not closed
    here); ``config`` is the guard's policy; ``clock`` its time source; ``log`` a path or
    text stream that receives the event log as JSON Lines while it happens (header
    first). Extra keyword arguments go to ``ClientSession``. Raises ``RuntimeError`` for an
    unsupported SDK version when ``strict_sdk``. ``binding`` says which SDK line.
    """
    async with (
        open_guarded_connection(
            binding,
            url,
            http_client=http_client,
            config=config,
            clock=clock,
            log=log,
            strict_sdk=strict_sdk,
        ) as conn,
        conn.http_client(headers=conn._e.http.headers) as outer,
        binding.connect(url, outer) as (read, write),
        binding.session_class(
            read,
            write if binding.context_follows_sends else _NotingWriter(write, conn._e),
            elicitation_callback=conn.wrap_callback(elicitation_callback),
            **session_kwargs,
        ) as session,
    ):
        await session.initialize()
        yield GuardedSession(session, conn._e)
