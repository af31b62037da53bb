"""The HTTP transport the SDK's client is given (:class:`GuardedTransport`): every request
through the application's own client, answers and resumes through the guard; and the
transport's classes bound to one HTTP library (:func:`bind`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from fsm import events as ev
from fsm.adapters._transport.body import GuardedBody
from fsm.adapters._transport.handles import CURRENT_CALL, Tee
from fsm.adapters._transport.http import (
    SESSION_GONE_BODY,
    HttpLib,
    Passthrough,
    answer_result,
    body_method,
    json_body,
    json_sendable,
    local_response,
    opens_stream,
    origin_of,
    post_failed,
    refusal,
    says_accepted,
    stream_name,
    too_many_streams,
    tracked_id,
    undecoded,
    wrap_response,
)
from fsm.adapters._transport.rejoin import record_call
from fsm.errors import RequestKey, StoreError
from fsm.events import standalone_stream
from fsm.outcomes import SubmissionResult

if TYPE_CHECKING:
    from fsm.adapters._transport.session_io import SessionIO

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

MCP_METHODS = frozenset({"POST", "GET", "DELETE"})
"""The HTTP methods of the streamable HTTP transport's endpoint: only a response to one of
them says anything about the session (its credentials accepted, the session gone)."""


class GuardedTransport:
    """The transport core: forwards through ``engine.http`` and applies the guard.

    Not for direct use: :func:`open_guarded_session` builds it, as the subclass :func:`bind`
    makes of it and the SDK's HTTP library's ``AsyncBaseTransport``. Contract: every request
    of the SDK is sent once through the application's client, except answer POSTs (the guard's
    submissions replace them), resume GETs of the SDK (refused locally: resumption is the
    guard's) and anything after the session expired (local 404). A request of a method
    the protocol does not define for the endpoint (:data:`MCP_METHODS`: an ``OPTIONS``
    preflight, a ``HEAD``) is sent as it came and its response returned as it is: it
    changes no state of the session and proves nothing, since an upstream may answer it
    before any check of session or credentials (a CORS layer in front of its auth).
    """

    def __init__(self, engine: SessionIO) -> None:
        self.e = engine

    async def handle_async_request(self, request: Any) -> Any:
        e = self.e
        if request.method not in MCP_METHODS:
            resp = await e.http.send(request, stream=True)
            return wrap_response(e.hx, resp, request, e.bound.passthrough(resp))
        if e.expired is not None:
            return local_response(self.e.hx, request, 404, SESSION_GONE_BODY)
        if e.rejoined and e.session and "mcp-session-id" not in request.headers:
            request.headers["mcp-session-id"] = e.session  # rejoined: the SDK never saw it
        method = request.method
        body = json_body(request) if method == "POST" else None
        if not e.trusted(request) and self._in_session(request) and asks(method, body):
            await e.vouch(request)  # proven, they are the session's from here on
        if method == "POST":
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
                return post_failed(e.hx, request, body, why)
            status = resp.status_code
            if e.binding.errors_as_responses and status >= 400 and status != 404:
                await resp.aclose()
                logger.warning("POST answered HTTP %s", status)
                return post_failed(e.hx, request, body, f"request POST answered HTTP {status}")
            return resp
        if method == "GET":
            token = request.headers.get("last-event-id")
            if token is not None:
                restored = e.resuming.pop(token, None)
                if restored is not None:  # a call rejoined after a restart, from the store
                    resumed = self.reconnect(request, restored, origin_of(restored))
                    if resumed is not None:
                        return resumed
                # the SDK resuming on its own: only after the guard ended that body
                return local_response(self.e.hx, request, 405, b"")
            if e.session and not await e.stream_room(None, request):
                return local_response(e.hx, request, 503, too_many_streams(request))
            return await self._open_stream(request, None, None)
        if method == "DELETE" and e.ends_on_delete:
            # the client ends its session: what is still open ends now, before the server
            # closes it (a clean end of a GET without event id would read as a failure)
            e.end_session()
        return await self._send(request)

    async def _send(self, request: Any) -> Any:
        e = self.e
        resp = await e.http.send(request, stream=True)
        if session_gone(e, request, resp.status_code):
            await resp.aclose()
            e.session_expired()
            return local_response(e.hx, request, 404, SESSION_GONE_BODY)
        async with _closed_unless_returned(resp):
            await self._prove(request, resp)
        return wrap_response(e.hx, resp, request, e.bound.passthrough(resp))

    def _in_session(self, request: Any) -> bool:
        """Whether ``request`` carries the id of the engine's session."""
        e = self.e
        return bool(e.session) and request.headers.get("mcp-session-id") == e.session

    async def _prove(self, request: Any, resp: Any) -> None:
        """``resp`` answered ``request``: a 2xx to a request the engine trusts is
        :func:`accepted` (its protocol version taken). For one it does not, no status
        proves its credentials (a ``202`` to a notification may come before any check of
        them); an event stream the upstream opened for it, in the session, has the
        engine asked (:attr:`SessionIO.vouch_opened`: a gateway's ``ping`` for a session
        it does not hold yet, whose result proves them)."""
        e = self.e
        if resp.status_code >= 300:
            return
        opened = self._in_session(request) and opens_stream(resp)
        if e.trusted(request) or (opened and await e.vouch_opened(request)):
            accepted(e, request)

    async def _relay_answer(self, request: Any, body: dict[str, Any]) -> Any:
        """An answer POST the engine does not trust (credentials the upstream has not
        accepted for the session): sent upstream as it came, its response returned as
        it is. The guard records the request as answered (and submitted), or the answer
        as relayed (:meth:`SessionIO.relayed`), only if the upstream took it (``202``,
        the transport's answer to input it accepts: a ``200`` may carry a JSON-RPC
        error) and then accepts its credentials for the session
        (:attr:`SessionIO.vouch_answer`, asked once, only for an answer it would
        record). A ``202`` alone proves nothing: a server whose check is in its protocol
        layer answers it before the check and drops a stranger's answer, which must
        neither end the owner's prompt nor be kept for another replica to submit as the
        owner's. An answer refused, or whose credentials are not proven (the probe
        refused or timed out), changes nothing; nor does one that gives no result as the
        guard reads it (:func:`answer_result`: an error, or a body holding both)."""
        e = self.e
        resp = await e.http.send(request, stream=True)
        status = resp.status_code
        rid = body.get("id")
        result = answer_result(body)
        if (
            isinstance(rid, int | str)
            and not isinstance(rid, bool)
            and result is not None
            and says_accepted(request, resp)
        ):
            key: RequestKey = (e.session or "", rid)
            async with _closed_unless_returned(resp):
                await self._record_relayed(request, key, result, status)
        return wrap_response(e.hx, resp, request, e.bound.passthrough(resp))

    async def _record_relayed(
        self, request: Any, key: RequestKey, answer: Mapping[str, Any], status: int
    ) -> None:
        """The upstream took (``202``, ``status``) ``answer`` to ``key``, relayed as
        ``request``: recorded as answered upstream if the guard presented the request,
        as relayed if it never saw it, once the upstream accepts ``request``'s
        credentials for the session (asked only for an answer that would be recorded);
        else nothing is recorded. An answer to a request never seen here whose id is
        past :data:`~fsm.adapters._transport.http.MAX_TRACKED_ID` is not remembered
        either (:func:`tracked_id`: a session's memory does not grow with its ids)."""
        e = self.e
        state = e.guard.state_of(key)
        if state not in ("presented", None) or (state is None and not tracked_id(key[1])):
            return  # answered, withdrawn or ended here: a relayed answer changes nothing
        proven = await e.vouch_answer(request)
        state = e.guard.state_of(key)  # again: the probe took a round trip
        if proven and state == "presented":
            e.act_for_answer(key, request)
            e.answered_upstream(key, answer, SubmissionResult(status, None))
        elif proven and state is None:
            await e.relayed(key, answer)

    async def _answer(self, request: Any, body: dict[str, Any]) -> Any:
        """An answer POST from the SDK: the guard submits it (or it is dropped). Only a
        result as the guard reads it (:func:`answer_result`) is submitted, relayed or
        kept; an error, or a body holding both, to a presented request goes as it came
        (``None``), for the upstream to read."""
        e = self.e
        rid = body.get("id")
        if not isinstance(rid, int | str) or isinstance(rid, bool):
            return None
        key: RequestKey = (e.session or "", rid)
        state = e.guard.state_of(key)
        result = answer_result(body)
        if state is None:  # idempotent or untracked request: the answer goes as it is
            if e.on_answer is None or result is None or not tracked_id(rid):
                return None
            resp = await self._send(request)
            if resp.status_code < 300:
                await e.relayed(key, result)
            return resp
        if state == "presented" and not json_sendable(body.get("result")):
            return None  # not JSON the guard could send: forwarded as it came, to be refused
        if state == "presented" and result is not None:
            if e.on_answer is not None:  # written ahead: a crash after the 202 keeps it
                await e.on_answer(key, result)
            if e.guard.state_of(key) == "presented":
                e.act_for_answer(key, request)
                e.feed(ev.UserAnswered(key, result))
            else:
                e.dropped_answers += 1
            return local_response(self.e.hx, request, 202)
        if state == "presented":
            return None  # the handler raised: its error goes to the server unchanged
        e.dropped_answers += 1  # withdrawn, dead, or already answered: never sent
        return local_response(self.e.hx, request, 202)

    async def _forward_post(self, request: Any, body: Any) -> Any:
        e = self.e
        origin = body.get("id") if isinstance(body, dict) and "method" in body else None
        # another id (1.0, true, an object, one past MAX_TRACKED_ID) goes untracked, as it came
        if tracked_id(origin):
            slot = CURRENT_CALL.get() or e.sent_calls.pop(origin, None)
            if slot is not None and slot.binds(body.get("method")):
                slot.origin = origin
                e.calls[origin] = slot
            stream = stream_name(origin)
            if e.session and not await e.stream_room(stream, request):  # refused before sent
                return local_response(e.hx, request, 503, too_many_streams(request))
            if e.store is not None:  # what a restart needs to resume it, written ahead
                try:
                    await record_call(e, stream, body)
                except StoreError as exc:  # not sent: a call a restart could not resume
                    refused = refusal(request, f"{exc.reason}: {exc}", exc.reason)
                    return local_response(e.hx, request, 503, refused)
            return await self._open_stream(request, stream, origin)
        return await self._send(request)

    def reconnect(self, request: Any, stream: str, origin: Any, seen: tuple[str, ...] = ()) -> Any:
        """A client's resume ``GET`` for ``stream`` (a gateway's client reconnected after
        its connection broke): the response whose body resumes the stream upstream from
        the guard's cursor (never older than the newest event seen) and goes on as the
        stream's guarded body; ``None`` if the stream already ended here (done or dead:
        the caller answers). ``origin`` is the stream's origin request id; ``seen`` the
        event ids the client proved it has that are newer than any this process passed on
        in the stream (another replica carried it, whether or not this process saw it),
        oldest first: fed to the guard first, so the resume goes on after the newest (an
        id the stream already carried moves no cursor). A previous body of the stream (the
        client's broken connection) is stopped."""
        e = self.e
        state = e.guard.stream_state(stream)
        if state in ("done", "dead"):
            return None
        if state is None:
            if not e.room_for_stream(stream):
                return local_response(e.hx, request, 503, too_many_streams(request))
            e.feed(ev.StreamOpened(stream, origin))
        for event_id in seen:
            e.feed(ev.SseEvent(stream, None, event_id, None))
        old = e.tees.get(stream)
        tee = Tee()
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
        resp = await self.e.http.send(request, stream=True)
        async with _closed_unless_returned(resp):
            return await self._track(request, resp, stream, origin)

    async def adopt_standalone(self, request: Any, resp: Any) -> Any:
        """A client's fresh standalone ``GET`` (``request``), answered by ``resp``: the
        upstream's response to a GET the caller sent ahead of it for the same session
        (a gateway that opens the stream as soon as the session is initialized, so the
        server never sends to a stream no one attached). Tracked as :meth:`_open_stream`
        tracks its own; the engine's requests for the stream act for ``request``."""
        e = self.e
        if e.session and not e.room_for_stream(None):
            await resp.aclose()
            return local_response(e.hx, request, 503, too_many_streams(request))
        async with _closed_unless_returned(resp):
            return await self._track(request, resp, None, None)

    async def _track(self, request: Any, resp: Any, stream: str | None, origin: Any) -> Any:
        """``resp`` to ``request``, its SSE body tracked as ``stream`` (see
        :meth:`_open_stream`). A response's ``Mcp-Session-Id`` names the session only
        while it has none (the answer to its ``initialize``): an established session's
        id is never replaced, whatever a later response carries; the credentials of the
        ``initialize`` it answers are the ones the upstream made the session for
        (accepted). Any other request is judged by :meth:`_prove`. A stream in a content
        coding the HTTP library does not decode (:func:`undecoded`) is never tracked:
        relayed as it came, its bytes still encoded, with its ``Content-Encoding``."""
        e = self.e
        sid = resp.headers.get("mcp-session-id")
        begun = (
            bool(sid)
            and e.session is None
            and body_method(request) == "initialize"
            and request.headers.get("mcp-session-id") != sid  # an id it named: not new
        )
        if begun:
            e.session = sid
            e.feed(ev.SessionStarted(sid))
        if session_gone(e, request, resp.status_code):
            await resp.aclose()
            e.session_expired()
            return local_response(self.e.hx, request, 404, SESSION_GONE_BODY)
        if begun and resp.status_code < 300:  # the credentials the session was made for
            accepted(e, request)
        else:
            await self._prove(request, resp)
        if (
            not opens_stream(resp)
            or not e.session
            or not (e.trusted(request) or e.closing)
            or undecoded(e.hx, resp)
        ):
            # a stream opened for credentials the upstream has not accepted for the
            # session is that client's alone: relayed as it came, never tracked (it would
            # take a place under the session's stream cap, its result and its cursor);
            # one of a session closing here is tracked, to end as its other streams end.
            # One in a coding the HTTP library does not decode cannot be read as events
            # here (it would end with no cursor, its result unread): relayed as it came,
            # still encoded, for the client to decode as it would the upstream's own
            return wrap_response(self.e.hx, resp, request, self.e.bound.passthrough(resp))
        if stream is None:
            e.get_generations += 1
            stream = standalone_stream(e.get_generations)
        if e.guard.stream_state(stream) not in (None, "done", "dead"):
            return wrap_response(self.e.hx, resp, request, self.e.bound.passthrough(resp))
        if not e.room_for_stream(stream):
            await resp.aclose()
            return local_response(e.hx, request, 503, too_many_streams(request))
        e.feed(ev.StreamOpened(stream, origin))
        tee = Tee()
        e.tees[stream] = tee
        e.act_for_stream(stream, request)
        return wrap_response(
            e.hx, resp, request, e.bound.body(e, stream, origin, request, resp, tee)
        )


@contextlib.asynccontextmanager
async def _closed_unless_returned(resp: Any) -> AsyncIterator[None]:
    """Around the work between receiving ``resp`` and returning it: if that work fails or
    is cancelled (a gateway's client left while its credentials were being proven),
    ``resp`` is closed, so its connection goes back, before the exception goes on."""
    try:
        yield
    except BaseException:
        with anyio.CancelScope(shield=True):
            await resp.aclose()
        raise


def asks(method: str, body: Any) -> bool:
    """Whether a request of ``method`` with the parsed JSON ``body`` (:func:`json_body`)
    asks something of the session and waits for the answer: a ``GET``, a ``DELETE``, a
    ``POST`` carrying a JSON-RPC request (the keys as JSON reads them, escaped or not).
    Its 2xx proves nothing by its status; a ``POST`` of answers and notifications only is
    judged by its ``202``, and is handled whole, as the upstream handles a body that
    arrived whole."""
    if method != "POST":
        return True
    items = body if isinstance(body, list) else [body]
    return any(isinstance(m, dict) and "method" in m and "id" in m for m in items)


def accepted(e: SessionIO, request: Any) -> None:
    """The upstream accepted ``request`` for the session (:meth:`GuardedTransport._prove`;
    the ``initialize`` of a session, for the credentials it was made for): the engine is
    told (a gateway proves its credentials), and its ``MCP-Protocol-Version``, if it
    carries one, is the one the engine's own requests carry from then on. A request the
    upstream refused, or one whose acceptance nothing proved, changes neither: whoever
    sends it, it sets no state the session shares."""
    e.accepted(request)
    version = request.headers.get("mcp-protocol-version")
    if version:
        e.protocol_version = version


def session_gone(e: SessionIO, request: Any, status: int) -> bool:
    """Whether a response says the session is gone: a 404 to a request that carries the
    session id, with credentials the engine trusts (a 404 to another's credentials is
    that request's answer alone: a server may hide sessions of other users)."""
    return status == 404 and bool(request.headers.get("mcp-session-id")) and e.trusted(request)


@dataclass(frozen=True)
class Bound:
    """The core's classes bound to one HTTP library (subclasses of its base classes, which
    its client checks): the transport, the guarded body, the forwarded body."""

    transport: type[GuardedTransport]
    body: type[GuardedBody]
    passthrough: type[Passthrough]


_BOUND: dict[str, Bound] = {}


def bind(hx: HttpLib) -> Bound:
    """The core's classes for the HTTP library module ``hx`` (made once per library)."""
    bound = _BOUND.get(hx.__name__)
    if bound is None:
        bound = _BOUND[hx.__name__] = Bound(
            type("GuardedTransport", (GuardedTransport, hx.AsyncBaseTransport), {}),
            type("GuardedBody", (GuardedBody, hx.AsyncByteStream), {}),
            type("Passthrough", (Passthrough, hx.AsyncByteStream), {}),
        )
    return bound
