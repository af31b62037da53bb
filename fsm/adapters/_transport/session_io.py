"""One MCP session's guard and every IO it asks for (:class:`SessionIO`): feeding events,
performing actions, the background submissions, refusals and closes, and whose
credentials each of its own requests carries.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from fsm import actions as act
from fsm import events as ev
from fsm.adapters._transport import envelope
from fsm.adapters._transport.handles import Recent
from fsm.adapters._transport.http import (
    HttpRequest,
    HttpResponse,
    aclose_response,
    http_result,
    origin_of,
)
from fsm.adapters._transport.sse import LARGE_EVENT, plain_notification
from fsm.adapters._transport.transport import bind
from fsm.durable.store import SessionRecord, SseCall, Store
from fsm.errors import (
    InteractionFailed,
    RequestId,
    RequestKey,
    SessionExpiredError,
)
from fsm.messages import is_plain_notification
from fsm.outcomes import SubmissionResult
from fsm.properties import EventSeen
from fsm.sse.guard import SseDelta
from fsm.sse.observe import ObservedGuard

if TYPE_CHECKING:
    from fsm.adapters._transport.handles import CallSlot, Tee
    from fsm.adapters._transport.session import SdkBinding
    from fsm.adapters._transport.sse import SseFrame

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

REMEMBERED = 1024
"""What a :class:`SessionIO` remembers of each kind of past event by default (failed
interactions, withdrawn prompts, relayed answers): the newest this many."""

_ActingFor = tuple[dict[str, str], Any]
"""The carried headers and the URL of a client request the engine's own requests act for."""

CREDENTIALS_PRUNED_AT = 64
"""Answers' credentials kept before those of requests no longer live are dropped (the
threshold doubles while most kept ones are live, so a prune costs O(1) per answer)."""


Claim = Callable[[RequestKey, str, "str | None"], Awaitable[bool]]
"""``claim(key, stream, event_id)``: may this process pass on the presentation of ``key``
(carried by event ``event_id`` of ``stream``)? ``False``: another process did."""


class SessionIO:
    """The guard, its observer, and every IO it asks for. One per MCP session."""

    def __init__(
        self,
        observed: ObservedGuard,
        http: Any,
        tg: TaskGroup,
        url: str,
        binding: SdkBinding,
        *,
        remembered: int = REMEMBERED,
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
        self.failures: Recent[str, InteractionFailed] = Recent(remembered)
        """The interactions the guard failed (the newest ``remembered``), each error as a
        call raises it (:meth:`typed`)."""
        self.closed: Recent[str, InteractionFailed] = Recent(remembered)
        """The interactions that ended because the client closed the session
        (:meth:`end_session`; reason ``session-closed``): not failures, but a call still
        waiting on one ends with this error."""
        self.calls: dict[Any, CallSlot] = {}
        self.sent_calls: dict[Any, CallSlot] = {}
        """Calls by request id, noted where the SDK sends them (:class:`NotingWriter`)."""
        self.tees: dict[str, Tee] = {}
        self.prompts: dict[RequestKey, anyio.CancelScope] = {}
        self.withdrawn: Recent[RequestKey, None] = Recent(remembered)
        """Prompts the guard withdrew (the newest ``remembered``): their answers are
        dropped."""
        self._pending_ids: dict[str, str] = {}
        self._bg: set[anyio.CancelScope] = set()
        self.closing = False
        self.dropped_answers = 0
        self.submissions = 0
        """Answer submissions begun and not ended: awaiting their backoff or in flight (a
        resubmission begins before the attempt it follows ends, so this stays above zero
        until the answer's submitting is over). While it is, the client was told its
        answer was taken and the session has work under way: a gateway does not let it
        go."""
        self.changed: Callable[[], None] = _unchanged
        """Told, at once, after each event fed to the guard (a prompt presented may have
        left ``presented``) and each answer submission that ended (:attr:`submissions`
        fell): what keeps a gateway from letting the session go may be over, so it asks
        again. Nothing by default."""
        self.get_generations = 0
        """Connection generations of the standalone GET stream opened so far."""
        self.claim: Claim | None = None
        """Asked before a presented request is passed on (a gateway's shared store); a
        request whose claim is lost is blanked, one whose claim raises
        :class:`~fsm.errors.InteractionFailed` is blanked and fails its stream."""
        self.on_answer: Callable[[RequestKey, Mapping[str, Any]], Awaitable[None]] | None = None
        """Awaited with each answer the guard takes from the client, before the client is
        told it was taken (a gateway writes it ahead to its store)."""
        self.on_submitted: Callable[[RequestKey], Awaitable[None]] | None = None
        """Awaited once this engine's own submission of an answer ended: the guard's
        outcome for it is final (accepted, or failed for good; not after a retryable
        failure, whose resubmission follows), and once an answer relayed from here was
        accepted upstream with credentials proven for the session (:meth:`relayed`,
        :meth:`answered_upstream`). Never for a submission cut short (the session closed,
        the process stopped): a gateway marks the answer submitted in its store, so that
        no other replica submits it again, and an unmarked one is a survivor's to
        submit."""
        self.carried: tuple[str, ...] = ()
        """Names (lower case) of request headers the engine's own requests copy from the
        client request they act for: a gateway's client's credentials. An answer
        submission carries those of the answer's POST; a resume or a refusal those of
        the request that opened (or last reconnected) the stream. Empty for an SDK
        adapter, whose HTTP client adds its own."""
        self.acts_for_clients = False
        """Whether the engine's own requests act for client requests (a gateway): each
        answer submission, refusal and resume goes to the URL of the client request it
        acts for (its query may hold a key) with that request's :attr:`carried` headers,
        even when no header is carried. ``False`` for an SDK adapter: its own URL."""
        self.trusted: Callable[[Any], bool] = _always
        """Whether a request's answer may change shared state (a 404 ending the session,
        an answer taken by the guard). A gateway trusts only credentials the upstream
        accepted for the session; an SDK adapter trusts its own client."""
        self.accepted: Callable[[Any], None] = _never_mind
        """Told each request whose credentials the upstream accepted for the session
        (:func:`~fsm.adapters._transport.transport.accepted`): a gateway proves them."""
        self.vouch: Callable[[Any], Awaitable[bool]] = _no_voucher
        """Asked, before it is sent, about a request the engine does not :attr:`trust
        <trusted>` that asks something of the session (a request, a ``GET``, a
        ``DELETE``), and at the stream cap: whether the upstream accepts its credentials
        for the session (a gateway asks it with a ``ping`` carrying them, for a session
        it holds, and proves them if so). ``False`` by default: nobody to ask."""
        self.vouch_opened: Callable[[Any], Awaitable[bool]] = _no_voucher
        """Asked after the upstream opened an event stream for a request the engine does
        not trust (its credentials not asked about before it was sent): a gateway asks
        about a session it does not hold yet there, so a made-up id, which gets no
        stream, costs the upstream nothing more. ``False`` by default."""
        self.vouch_answer: Callable[[Any], Awaitable[bool]] = _no_voucher
        """Asked after the upstream took (``202``) an answer the engine does not trust,
        before anything records it: whether the upstream accepts its credentials for the
        session (a gateway asks with a ``ping`` carrying them, whether or not it holds
        the session, and proves them if so). A ``202`` says nothing of them (a server
        whose check is in its protocol layer answers before it, and drops the answer);
        refused, the answer is the relayed request's alone. ``False`` by default."""
        self.max_event: int | None = None
        """Characters of one SSE event held (``None``: no bound); past it the stream
        ends with :class:`~fsm.errors.EventTooLargeError`."""
        self.max_pending_refusals: int | None = None
        """Refusals (answers to requests over the guard's capacity) waiting to be sent;
        past it a refusal is dropped (counted in :attr:`dropped_refusals`): the server's
        own deadline ends that request. ``None``: no bound."""
        self.relayed_answers: Recent[RequestId, None] = Recent(remembered)
        """Answers to requests this guard never saw that went upstream from here as they
        came (the newest ``remembered``): a gateway does not send them again."""
        self.dropped_refusals = 0
        self._pending_refusals = 0
        self.upstream_slots: anyio.CapacityLimiter | None = None
        """Bounds the engine's own upstream requests in flight at once (submissions,
        refusals); ``None``: no bound."""
        self._creds_by_stream: dict[str, _ActingFor] = {}
        self._creds_by_key: dict[RequestKey, _ActingFor] = {}
        """The credentials (and URL) of each answer's POST, kept while its request is
        live (never evicted while live: a submission must carry its own answer's
        credentials)."""
        self._creds_pruned_at = CREDENTIALS_PRUNED_AT
        self.store: Store | None = None
        """Where the durable guard's writes go (:mod:`fsm.adapters._transport.rejoin`);
        ``None``: the guard is not durable."""
        self.rejoin: SessionRecord | None = None
        """What the store keeps to rejoin this session (once it is initialized)."""
        self.rejoined = False
        """Whether this session was rejoined from the store (no ``initialize`` sent): its
        requests carry the stored session id, which the SDK never saw."""
        self.next_id = 1
        """The first request id a rejoined session's SDK uses (past the stored ones)."""
        self.restored: tuple[SseCall, ...] = ()
        """The calls the store listed as in flight when this session was rejoined."""
        self.resuming: dict[str, str] = {}
        """Restored streams being resumed by the SDK, by the resumption token it sends."""
        self.resume_calls: set[str] = set()
        """Restored streams a ``resume_call`` is running for (one at a time each)."""
        self.ends_on_delete = False
        """Whether a DELETE sent through the transport is this client closing its own
        session (an SDK adapter), so :meth:`end_session` runs before it is sent. A gateway
        forwards its clients' DELETEs and leaves this off."""

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
        self.changed()
        self.perform(actions)
        return actions

    def session_expired(self) -> None:
        """The server said the session is gone (a trusted 404): the guard fails what is
        open, and the session is marked expired even when nothing was open, so every
        later call raises :class:`~fsm.errors.SessionExpiredError` instead of the SDK's
        own error."""
        self.feed(ev.SessionExpired())
        if self.expired is None:
            self.expired = self.typed(
                SessionExpiredError(
                    "the session is gone (HTTP 404 on a request carrying its id)",
                    reason=SessionExpiredError.reason,
                    evidence=("HTTP 404 on the session",),
                )
            )

    def end_session(self) -> None:
        """The client closes the session (it sends the DELETE that ends it, or leaves
        it): every stream still open ends now, normally. Each is fed
        ``StreamAbandoned(stream, SESSION_CLOSED)``: its body stops without resuming (a
        server that ends its streams when the session goes is not taken for a cut), the
        event log records ``ended`` with outcome ``closed``, and :attr:`failures` does not
        list it. A call still waiting on such a stream gets the guard's
        :class:`~fsm.errors.StreamAbandonedError` (reason ``session-closed``). Idempotent:
        streams already ended are left alone."""
        for stream in self.guard.live_streams():
            self.feed(
                ev.StreamAbandoned(stream, ev.SESSION_CLOSED, "the client closed the session")
            )

    def on_sse(self, stream: str, sse: SseFrame) -> tuple[tuple[act.Action, ...], Any]:
        """Feed one SSE event; returns (actions, decoded message or None). An event that
        is not UTF-8 is fed without its data (only its id and ``retry:`` count); one over
        :data:`LARGE_EVENT` bytes is decoded by its envelope (a response's payload is
        checked, not built: :mod:`fsm.adapters._transport.envelope`)."""
        if not sse.has_data or not sse.data_bytes or not sse.utf8:
            return self.feed(ev.SseEvent(stream, None, sse.event_id, sse.retry)), None
        if sse.size > LARGE_EVENT:  # read by its envelope: a response's payload skipped
            try:
                large: Any = envelope.decode(sse.data_bytes)
            except (ValueError, RecursionError):
                large = None
            fed: Any = large if isinstance(large, dict) else sse.data
            return self.feed(ev.SseEvent(stream, fed, sse.event_id, sse.retry)), large
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
        (:meth:`fsm.sse.guard.Guard.on_plain_notification`); returns its actions, or ``None``
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
            if isinstance(a, act.Persist):  # first: on disk before anything else happens
                if self.store is None or not isinstance(a.delta, SseDelta):
                    raise ValueError("a Persist reached a session without a store")
                self.store.write(a.delta)
            elif isinstance(a, act.Submit):
                if self.spawn(self._submit, a):  # _submit counts it out as it ends
                    self.submissions += 1
            elif isinstance(a, act.Withdraw):
                self.withdrawn[a.key] = None
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

    def typed(self, err: InteractionFailed) -> InteractionFailed:
        """``err`` as the session's caller gets it: also an instance of the SDK line's
        JSON-RPC error type when the binding names one (``SdkBinding.errors``), else
        ``err`` itself."""
        errors = self.binding.errors
        return err if errors is None else errors.wrap(err)

    def _fail(self, a: act.Fail) -> None:
        err = self.typed(a.error)
        if err.reason != ev.SESSION_CLOSED:  # a stream that closed with the session did not fail
            self.failures[a.interaction] = err
        else:
            self.closed[a.interaction] = err
        if isinstance(err, SessionExpiredError) and self.expired is None:
            self.expired = err
        stream = err.stream or a.interaction
        tee = self.tees.get(stream)
        if tee is not None:
            self._close(tee.kill())
        origin = origin_of(stream)
        slot = self.calls.get(origin) if origin is not None else None
        if slot is not None and slot.error is None:
            slot.error = err
            slot.failed.set()

    # -- background IO -------------------------------------------------------------

    def spawn(self, fn: Callable[[Any], Awaitable[None]], arg: Any) -> bool:
        """Run ``fn(arg)`` in the session's task group, an exception in it logged and
        contained, cancelled by :meth:`close`; whether it was started (not once the
        session is closing)."""
        if self.closing:
            return False

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
        return True

    def start_detached(self, fn: Callable[[], Awaitable[None]], scope: anyio.CancelScope) -> None:
        """Run ``fn()`` in the session's task group under ``scope`` (the caller cancels
        it when it wants it gone), which :meth:`close` cancels too: work started for a
        caller that may outlive the caller's wait. The task copies the caller's context
        variables. After :meth:`close`, ``fn()`` starts cancelled."""

        async def run() -> None:
            with scope:
                self._bg.add(scope)
                try:
                    await fn()
                finally:
                    self._bg.discard(scope)

        if self.closing:
            scope.cancel()
        self.tg.start_soon(run)

    def _close(self, resp: HttpResponse | None) -> None:
        if resp is not None and not self.closing:
            self.spawn(aclose_response, resp)

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

    def carry(self, request: HttpRequest) -> dict[str, str]:
        """What of ``request``'s headers the engine's own requests for it carry."""
        if not self.carried:
            return {}
        headers = request.headers
        return {name: headers[name] for name in self.carried if name in headers}

    def act_for_stream(self, stream: str, request: HttpRequest) -> None:
        """The engine's own requests for ``stream`` now act for ``request``."""
        if self.acts_for_clients:
            self._creds_by_stream[stream] = (self.carry(request), request.url)

    def forget_stream(self, stream: str) -> None:
        """Drop what the engine keeps for ``stream`` once it ended (its credentials)."""
        self._creds_by_stream.pop(stream, None)

    def act_for_answer(self, key: RequestKey, request: HttpRequest) -> None:
        """The submissions of ``key``'s answer act for ``request`` (its POST)."""
        if not self.acts_for_clients:
            return
        self._creds_by_key[key] = (self.carry(request), request.url)
        if len(self._creds_by_key) > self._creds_pruned_at:
            for old in list(self._creds_by_key):  # keep those of live requests only
                if self.guard.state_of(old) not in LIVE_ANSWERS:
                    del self._creds_by_key[old]
            self._creds_pruned_at = max(CREDENTIALS_PRUNED_AT, 2 * len(self._creds_by_key))

    def acting_for(
        self, key: RequestKey | None = None, stream: str | None = None
    ) -> tuple[dict[str, str], Any]:
        """The carried headers and the URL (an upstream may take credentials in its
        query) of the client request the engine acts for: the answer's POST for ``key``,
        else the request of the stream that delivered it; no headers and :attr:`url`
        when it acts for none."""
        acting = self._creds_by_key.get(key) if key is not None else None
        if acting is None:
            stream = stream or (self.guard.stream_of(key) if key is not None else None)
            acting = self._creds_by_stream.get(stream) if stream is not None else None
        return acting if acting is not None else ({}, self.url)

    def room_for_stream(self, stream: str | None, request: Any = None) -> bool:
        """Whether the guard can track one more stream (``stream``, about to open; ``None``:
        a standalone GET's next generation). At the guard's ``max_streams`` live streams,
        the oldest stream no client connection reads (its reader left and did not come
        back) is abandoned to make room; a session whose every live stream has a reader
        has no room (the new stream is refused, the session goes on). Asked before the
        request is sent, so a refused stream's request never reaches the server. For a
        client ``request`` whose credentials the upstream has not accepted for the session
        (:attr:`trusted`, judged only at the cap) nothing is abandoned: it cannot end a
        stream of the client whose session id it carries (:meth:`stream_room` asks the
        upstream about them first)."""
        live = self.guard.live_streams()
        if stream in live:
            return True
        if len(live) < self.guard.config.max_streams:
            return True
        if request is not None and not self.trusted(request):
            return False
        for old in live:
            if old not in self.tees:
                self.feed(ev.StreamAbandoned(old, "abandoned", "no client connection reads it"))
                return True
        return False

    async def stream_room(self, stream: str | None, request: Any) -> bool:
        """:meth:`room_for_stream` for a client ``request`` that would open ``stream``,
        and, where that refuses a request the engine does not trust, once more after
        asking the upstream (:attr:`vouch`): credentials it accepts for the session are
        the session's own (a client that refreshed its token), and make room as its
        other requests do. Refused, the request gets no room and nothing is abandoned."""
        if self.room_for_stream(stream, request):
            return True
        if self.trusted(request) or not await self.vouch(request):
            return False
        return self.room_for_stream(stream, request)

    async def _submit(self, a: act.Submit) -> None:
        try:
            if a.delay_s > 0:
                await anyio.sleep(a.delay_s)
            body = {"jsonrpc": "2.0", "id": a.key[1], "result": dict(a.answer)}
            result = await self._post(body, *self.acting_for(a.key))
            self.feed(ev.SubmissionOutcome(a.key, result))
            # ended unless a retry was scheduled (its own submission then reports); the
            # submission still counts (the session is kept) until this is told
            if self.on_submitted is not None and self.guard.state_of(a.key) not in SUBMITTING:
                await self.on_submitted(a.key)
        finally:
            self.submissions -= 1
            self.changed()

    async def _refuse(self, a: act.Refuse) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": a.key[1],
            "error": {"code": -32603, "message": str(a.error)},
        }
        try:
            await self._post(body, *self.acting_for(stream=self.guard.stream_of(a.key)))
        finally:
            self._pending_refusals -= 1

    async def _post(
        self, body: Mapping[str, Any], carried: Mapping[str, str] | None = None, url: Any = None
    ) -> SubmissionResult:
        """POST ``body`` (an answer or a refusal) upstream with ``carried`` headers, to
        ``url`` (default :attr:`url`)."""
        if self.expired is not None:
            return SubmissionResult(404, None)
        slots = self.upstream_slots
        async with slots if slots is not None else contextlib.nullcontext():
            try:
                req = self.http.build_request(
                    "POST", url or self.url, json=dict(body), headers=self.headers(carried)
                )
                resp = await self.http.send(req, stream=True)
            except self.hx.HTTPError as exc:
                return SubmissionResult(None, None, type(exc).__name__)
            except Exception as exc:  # a request that cannot be built or sent: one failure
                logger.warning("answer POST not sent: %r", exc)
                return SubmissionResult(None, None, type(exc).__name__)
            return await http_result(resp)

    async def relayed(self, key: RequestKey, answer: Mapping[str, Any]) -> None:
        """The upstream accepted an answer, relayed as it came, to a request this guard
        never saw, and its credentials for the session (a gateway's
        :attr:`vouch_answer`): remembered (not sent again from here), told submitted
        (:attr:`on_submitted`), then kept for other processes that watch for it
        (:attr:`on_answer`). In that order: it already went upstream, so no moment may
        show it kept and not yet submitted (another process would send it again); one
        told submitted and not yet kept is one nobody sends."""
        self.relayed_answers[key[1]] = None
        if self.on_submitted is not None:
            await self.on_submitted(key)
        if self.on_answer is not None:
            await self.on_answer(key, answer)

    def answered_upstream(
        self,
        key: RequestKey,
        answer: Mapping[str, Any],
        result: SubmissionResult,
        *,
        tell: bool = True,
    ) -> None:
        """The client's answer for ``key`` went upstream as it was (relayed, not
        submitted by the guard) and the upstream accepted it and its credentials for the
        session: the guard records it as answered and submitted, without a submission of
        its own. ``tell``: :attr:`on_submitted` is told, in the background (``False``
        for an answer another process submitted and already said so)."""
        self.flush()
        actions = self.og.feed(ev.UserAnswered(key, answer))
        self.changed()
        self.perform(tuple(a for a in actions if not isinstance(a, act.Submit)))
        if any(isinstance(a, act.Submit) for a in actions):
            self.feed(ev.SubmissionOutcome(key, result))
            if tell and self.on_submitted is not None:
                self.spawn(self.on_submitted, key)


def _always(_request: HttpRequest) -> bool:
    return True


async def _no_voucher(_request: HttpRequest) -> bool:
    return False


def _never_mind(_request: HttpRequest) -> None:
    return None


def _unchanged() -> None:
    return None


SUBMITTING = frozenset({"answered", "submitting"})
"""Liveness states of a request whose answer's submission is not over: a retry scheduled
(``answered``) or under way."""

LIVE_ANSWERS = frozenset({"presented", "answered", "submitting", "submitted"})
"""Liveness states whose answer may still be (re)submitted."""
