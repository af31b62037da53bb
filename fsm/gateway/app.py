"""The guarding gateway: an ASGI reverse proxy in front of one MCP streamable-HTTP endpoint.

Every request of a client goes through the guarded-transport core the SDK adapters use
(:class:`fsm.adapters.core.GuardedTransport`), with one guard per MCP session, so the
gateway enforces on the wire what the adapters enforce in-process:

* **Replays are blanked.** A server request the guard does not present (a replayed
  duplicate, a stale replay, one cancelled later in the replay) reaches the client as an
  empty event that keeps its id; the client never sees it twice.
* **Presentation is claimed.** Before a request is passed on, the gateway claims it in its
  :class:`~fsm.gateway.store.StateStore` (atomic: two replicas never both present a key).
  A lost claim blanks the request; a store that cannot answer blanks it and ends the
  interaction with :class:`~fsm.gateway.store.StoreUnavailableError` (fail closed).
* **Answers are the gateway's.** A client's answer POST is answered ``202`` at once and
  submitted by the guard: classified, retryable failures resubmitted with the same answer,
  answers to withdrawn or dead requests dropped.
* **Resumes are the gateway's.** When the upstream connection breaks under a client, the
  gateway resumes it itself (the guard's cursor, backoff and budgets) and the client sees
  one unbroken stream. When the client's own connection breaks, its resume ``GET`` carries a
  gateway-issued ``Last-Event-ID`` (:mod:`fsm.gateway.ids`): the stream is resumed upstream
  from the newest event the gateway passed on (a stale client cursor is rewritten), or,
  on a replica that never saw the stream, from the newer of the client's id and the
  store's cursor.
* **One outcome.** An interaction the guard ends (dead request, budget spent, session
  gone, store unavailable) gets exactly one JSON-RPC error response for its origin request
  on the client's stream: code :data:`~fsm.adapters.core.ENDED_CODE` (-32000), ``message``
  ``"<reason>: ..."``, ``data`` with ``reason``, ``key``, ``stream`` and ``evidence``.
* **Sessions end once.** After the server said the session is gone (404), every request
  of it is answered ``404`` by the gateway (every replica, through the store).

Limits (see docs/gateway.md): the gateway cannot know which events a client received
before its connection broke; an event written to a connection that then broke counts as
passed on (a request in it is not presented again, its interaction ends by the server's
deadline), and a stream's final response is kept (up to 1 MiB) to answer a resume that
lost it. An answer POST that lands on a replica that never saw its request is forwarded
unchanged. Request bodies over ``max_body`` get ``413``; at most ``max_sessions``
sessions are held (the least recently used idle one is dropped first; when all are busy a
new session gets ``503``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
from anyio.abc import TaskGroup

from fsm import events
from fsm.adapters import core
from fsm.adapters.sdkversion import MCP2
from fsm.errors import InteractionFailed, RequestKey
from fsm.gateway.ids import GatewayEventId, IdRewriter, parse_event_id
from fsm.gateway.store import Cursor, MemoryStore, StateStore, StoreUnavailableError
from fsm.gateway.upstream import AiohttpTransport
from fsm.guard import Guard, GuardConfig
from fsm.observe import ObservedGuard

__all__ = ["Gateway", "GatewayLimits"]

logger = logging.getLogger(__name__)

Scope = Mapping[str, Any]
Message = dict[str, Any]

_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
_FORWARDED_TO_GUARD = ("authorization", "cookie")
"""Client headers the gateway's own requests for a session (answer submissions, resumes)
carry upstream, as the client's own requests do."""


def _unused(*_: Any) -> Any:
    raise RuntimeError("the gateway opens no SDK session")


_BINDING = core.SdkBinding(
    name="gateway",
    hx=httpx2,
    supported=MCP2,
    others=(),
    connect=core.sdk_streams,
    session_class=_unused,
    cancel_result=_unused,
)
"""The core as the gateway uses it: httpx2 upstream, no SDK session, HTTP errors of request
POSTs forwarded unchanged (the client handles them)."""


@dataclass(frozen=True)
class GatewayLimits:
    """Bounds on what one gateway process holds and accepts."""

    max_body: int = 4 * 1024 * 1024
    """Bytes of a request body; more gets ``413``."""
    max_sessions: int = 10_000
    """Sessions (guards) held; past it the least recently used idle one is dropped, and
    a new session is refused (``503``) while every held one has a request in flight."""
    session_idle_s: float = 3600.0
    """A session with no request for this long is dropped (its guard forgotten)."""
    max_final: int = 1024 * 1024
    """Bytes of a stream's final response kept to answer a resume that lost it."""
    observations: int = 1_000
    """Observations each session's event log keeps (the monitor checks them all)."""
    upstream_connections: int | None = None
    """Connections to the upstream at once (``None``: as many as the sessions need; each
    streaming session holds two: its call's POST stream and its standalone GET)."""
    upstream_idle_s: float = 1.0
    """Seconds an idle upstream connection is kept for reuse: shorter than servers keep
    an idle connection (uvicorn: 5 s), so a reused one is never one the server is closing."""


@dataclass
class _Session:
    engine: core._Engine
    transport: core.GuardedTransport
    ids: dict[str, IdRewriter] = field(default_factory=dict)
    finals: dict[str, bytes] = field(default_factory=dict)
    last_used: float = 0.0
    busy: int = 0
    ended_recorded: bool = False

    def rewriter(self, stream: str) -> IdRewriter:
        ids = self.ids.get(stream)
        if ids is None:
            ids = self.ids[stream] = IdRewriter(stream)
        return ids


class Gateway:
    """The ASGI app (see the module docstring). ``upstream`` is the MCP endpoint URL
    (``http://host:port/mcp``); clients use the same path on the gateway. ``store``
    defaults to a :class:`~fsm.gateway.store.MemoryStore` (one replica). ``config`` is
    each session's guard policy. Run it with any ASGI server with lifespan on (``python
    -m fsm gateway`` runs uvicorn), or enter :meth:`running` around serving it, on an
    ``asyncio`` loop (uvloop included): its upstream connections are aiohttp's
    (:mod:`fsm.gateway.upstream`)."""

    def __init__(
        self,
        upstream: str,
        *,
        store: StateStore | None = None,
        config: GuardConfig | None = None,
        limits: GatewayLimits | None = None,
        timeout: httpx2.Timeout | None = None,
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"upstream must be an http(s) URL, not {upstream!r}")
        self.upstream = upstream
        self.path = parts.path or "/"
        self.store: StateStore = store if store is not None else MemoryStore()
        self.config = config
        self.limits = limits or GatewayLimits()
        self._timeout = timeout or httpx2.Timeout(30.0, read=300.0)
        self._timeouts = self._timeout.as_dict()
        """What a forwarded request's ``timeout`` extension holds (made once)."""
        self._upstream_url = httpx2.URL(upstream)
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        if self.limits.upstream_connections is not None and self.limits.upstream_connections < 1:
            raise ValueError("GatewayLimits.upstream_connections must be None or >= 1")
        self._http: httpx2.AsyncClient | None = None
        self._tg: TaskGroup | None = None

    # -- lifecycle -----------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        """Hold the upstream HTTP client and the background task group (answer
        submissions, store writes) while serving; on exit every session is closed. A
        store with a ``connect()`` (:class:`~fsm.gateway.redis_store.RedisStore`) is
        checked first: :class:`~fsm.gateway.store.StoreUnavailableError` if it does not
        answer."""
        connect = getattr(self.store, "connect", None)
        if connect is not None:  # a remote store's start-up check (fails: no start)
            await connect()
        transport = AiohttpTransport(
            connections=self.limits.upstream_connections, idle_s=self.limits.upstream_idle_s
        )
        async with (
            httpx2.AsyncClient(
                transport=transport, timeout=self._timeout, cookies=_no_cookies()
            ) as http,
            anyio.create_task_group() as tg,
        ):
            self._http, self._tg = http, tg
            try:
                yield self
            finally:
                for session in self._sessions.values():
                    session.engine.close()
                self._sessions.clear()
                tg.cancel_scope.cancel()
                self._http = self._tg = None

    @property
    def sessions(self) -> int:
        """Sessions held now."""
        return len(self._sessions)

    def session_guard(self, session_id: str) -> ObservedGuard | None:
        """The observed guard of a held session (its decisions, monitor, violations)."""
        held = self._sessions.get(session_id)
        return held.engine.og if held is not None else None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http_request(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        started = False
        try:
            async with self.running():
                await send({"type": "lifespan.startup.complete"})
                started = True
                while (await receive())["type"] != "lifespan.shutdown":
                    pass
        except Exception as exc:  # say which phase failed to the server
            phase = "shutdown" if started else "startup"
            await send({"type": f"lifespan.{phase}.failed", "message": repr(exc)})
            raise
        with contextlib.suppress(Exception):
            await self.store.aclose()
        await send({"type": "lifespan.shutdown.complete"})

    # -- one request ---------------------------------------------------------------

    async def _http_request(self, scope: Scope, receive: Any, send: Any) -> None:
        if self._http is None:
            await _reply(send, 503, b"gateway not started (lifespan off?)", "text/plain")
            return
        if scope.get("path") != self.path:
            await _reply(send, 404, b"not found", "text/plain")
            return
        try:
            headers = _headers(scope)
        except ValueError as exc:
            await _reply(send, 400, _rpc_error(None, -32600, f"bad header: {exc}"))
            return
        method = scope["method"]
        body = await _read_body(receive, headers, self.limits.max_body)
        if body is None:
            await _reply(send, 413, _rpc_error(None, -32600, "request body too large"))
            return
        sid = headers.get("mcp-session-id")
        try:
            session = await self._session_for(sid)
        except StoreUnavailableError as exc:
            await _store_unavailable(send, method, headers, body, exc)
            return
        except _Full:
            message = f"gateway full: {self.limits.max_sessions} sessions in use"
            await _reply(send, 503, _rpc_error(_request_id(body), -32000, message))
            return
        if session is None:  # the session ended (here or on another replica)
            await _reply(send, 404, core._SESSION_GONE_BODY)
            return
        session.busy += 1
        try:
            await self._serve(session, scope, method, headers, body, receive, send)
        finally:
            session.busy -= 1
            session.last_used = time.monotonic()
            await self._after(session)

    async def _serve(
        self,
        session: _Session,
        scope: Scope,
        method: str,
        headers: dict[str, str],
        body: bytes,
        receive: Any,
        send: Any,
    ) -> None:
        e = session.engine
        for name in _FORWARDED_TO_GUARD:
            if name in headers:
                e.forwarded[name] = headers[name]
        if headers.get("mcp-protocol-version"):
            e.protocol_version = headers["mcp-protocol-version"]
        url = self._upstream_url
        if scope.get("query_string"):
            url = url.copy_with(query=scope["query_string"])
        # the client's request as it came: no default header of the gateway's HTTP client
        # added (merging them, build_request, took a sixth of a forwarded request's CPU)
        request = httpx2.Request(
            method,
            url,
            headers=[(k, v) for k, v in headers.items() if k not in _HOP_BY_HOP],
            content=body,
            extensions={"timeout": self._timeouts},
        )
        last_event_id = headers.get("last-event-id")
        if method == "GET" and last_event_id is not None:
            resp = await self._client_resume(session, request, last_event_id)
        else:
            resp = await session.transport.handle_async_request(request)
        if e.session is not None and e.session not in self._sessions:
            # a session began here (its initialize was answered): the store records it
            # before the client learns the session id, so no claim of it can come first
            self._hold(e.session, session)
            try:
                await self.store.begin_session(e.session)
            except StoreUnavailableError as exc:  # its claims will fail closed
                logger.warning("session %s not recorded: %s", e.session, exc)
        await self._respond(session, resp, receive, send)
        if method == "DELETE" and resp.status_code < 300 and e.session:
            e.expired = InteractionFailed("the client ended the session", reason="deleted")

    async def _client_resume(self, session: _Session, request: Any, value: str) -> Any:
        e = session.engine
        got = parse_event_id(value)
        if got is None:
            return _response(
                400, _rpc_error(None, -32600, "Last-Event-ID was not issued by this gateway")
            )
        stream, origin = got.stream, core._origin_of(got.stream)
        ids = session.rewriter(stream)
        seen = [] if e.guard.stream_state(stream) is not None else [got]
        if seen and e.session is not None:  # another replica carried it: its cursor?
            try:
                stored = await self.store.cursor_of(e.session, stream)
            except StoreUnavailableError as exc:  # the client's id then; claims still hold
                logger.warning("no stored cursor for %s: %s", stream, exc)
                stored = None
            if stored is not None and stored.position > got.position:
                seen.append(GatewayEventId(stream, stored.position, stored.event_id))
        for item in seen:
            ids.advance_to(item.position, item.upstream_id)
        resp = session.transport.reconnect(
            request, stream, origin, tuple(item.upstream_id for item in seen)
        )
        if resp is not None:
            return resp
        final = session.finals.get(stream)
        if final is None:  # dead here (the error was sent), or done with no result kept
            err = e.failures.get(stream) or InteractionFailed(
                f"{stream} ended before this resume; its result was not kept",
                stream=stream,
                reason="result-not-kept",
            )
            final = core._sse_bytes(None, json.dumps(core.ending_error(origin, err)))
        return _response(200, final, "text/event-stream")

    async def _respond(self, session: _Session, resp: Any, receive: Any, send: Any) -> None:
        body = resp.stream
        tracked = isinstance(body, core._GuardedBody)
        ids = session.rewriter(body.stream) if tracked else None
        out = [
            (k.encode("latin-1"), v.encode("latin-1"))
            for k, v in resp.headers.multi_items()
            if k.lower() not in _HOP_BY_HOP and k.lower() != core._LOCAL_HEADER
        ]
        await send({"type": "http.response.start", "status": resp.status_code, "headers": out})
        last = b""  # the newest piece of a tracked stream (its final one holds the result)

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            tg.cancel_scope.cancel()

        async def pump() -> None:
            nonlocal last
            async for piece in _pieces(resp):
                if ids is not None:
                    piece = last = ids.rewrite(piece)
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            tg.cancel_scope.cancel()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                tg.start_soon(pump)
        finally:
            with anyio.CancelScope(shield=True):
                await resp.aclose()
                if ids is not None:
                    self._connection_ended(session, body.stream, ids, last)

    def _connection_ended(
        self, session: _Session, stream: str, ids: IdRewriter, last: bytes
    ) -> None:
        """A client connection of ``stream`` ended: keep the stream's final piece if the
        origin's response arrived (a resume that lost it gets it again), and record the
        newest event passed on as the stream's cursor in the store."""
        done = session.engine.guard.stream_state(stream) == "done"
        if done and stream not in session.finals and len(last) <= self.limits.max_final:
            session.finals[stream] = _final_event(last)
        if ids.last is not None and session.engine.session:
            cursor = Cursor(ids.position, ids.last)
            self._spawn(self.store.save_cursor, session.engine.session, stream, cursor)

    # -- sessions ------------------------------------------------------------------

    async def _session_for(self, sid: str | None) -> _Session | None:
        """The held session ``sid``, one begun here for it (another replica or an earlier
        process began it), or a new one (``sid`` None: an ``initialize``); ``None`` when
        the session ended. Raises :class:`_Full` when ``max_sessions`` are held and busy."""
        if sid is None:
            if not self._make_room():
                raise _Full
            return self._new_session(None)
        held = self._sessions.get(sid)
        if held is not None:
            self._sessions.move_to_end(sid)
            return None if held.engine.expired is not None else held
        if await self.store.session_ended(sid) is not None:
            return None
        if not self._make_room():
            raise _Full
        session = self._new_session(sid)
        self._hold(sid, session)
        return session

    def _new_session(self, sid: str | None) -> _Session:
        assert self._http is not None and self._tg is not None
        observed = ObservedGuard(
            Guard(clock=time.monotonic, config=self.config), log_limit=self.limits.observations
        )
        engine = core._Engine(observed, self._http, self._tg, self.upstream, _BINDING)
        session = _Session(engine, core.bind(httpx2).transport(engine))
        if sid is not None:  # a session another replica (or an earlier process) began
            engine.session = sid
            engine.feed(events.SessionStarted(sid))
        engine.claim = self._claimer(session)
        engine.on_answer = self._answer_keeper(session)
        session.last_used = time.monotonic()
        return session

    def _make_room(self) -> bool:
        """Drop sessions idle past ``session_idle_s`` and, while ``max_sessions`` are
        held, the least recently used ones with no request in flight; whether there is
        room for one more."""
        now = time.monotonic()
        for old_sid, old in list(self._sessions.items()):
            idle = now - old.last_used > self.limits.session_idle_s
            full = len(self._sessions) >= self.limits.max_sessions
            if not (idle or full):
                break  # least recently used first: the rest are newer
            if old.busy == 0:
                old.engine.close()
                del self._sessions[old_sid]
        return len(self._sessions) < self.limits.max_sessions

    def _hold(self, sid: str, session: _Session) -> None:
        """Hold ``session`` as the most recently used."""
        self._sessions[sid] = session
        self._sessions.move_to_end(sid)

    async def _after(self, session: _Session) -> None:
        """After a request: a session that ended (the server said 404, or the client's
        DELETE was answered) is recorded as ended in the store and no longer held (its
        streams end); later requests of it are answered ``404`` from the store."""
        e = session.engine
        if e.expired is None or not e.session or session.ended_recorded:
            return
        session.ended_recorded = True
        if self._sessions.get(e.session) is session:
            del self._sessions[e.session]
        e.close()
        try:
            await self.store.end_session(e.session, e.expired.reason)
        except StoreUnavailableError as exc:  # other replicas learn it from the server
            logger.warning("session end not recorded: %s", exc)

    def _claimer(self, session: _Session) -> core.Claim:
        """The engine's claim: the store's compare-and-set. A lost claim whose request
        has an answer kept in the store (the client answered through another replica)
        hands that answer to this replica's guard, which submits it as its own: the
        server asking again is answered, the person is not asked again."""
        store = self.store

        async def claim(key: RequestKey, stream: str, event_id: str | None) -> bool:
            e = session.engine
            sid = e.session or ""
            ids = session.ids.get(stream)
            if ids is not None and ids.last is not None:  # the newest event passed on
                won = await store.claim(
                    sid, key[1], stream=stream, cursor=Cursor(ids.position, ids.last)
                )
            else:
                won = await store.claim(sid, key[1])
            if won:
                return True
            answer = await store.answer_of(sid, key[1])
            if answer is not None and e.guard.state_of(key) == "presented":
                e.feed(events.UserAnswered(key, answer))
            return False

        return claim

    def _answer_keeper(self, session: _Session) -> Any:
        def keep(key: RequestKey, answer: Mapping[str, Any]) -> None:
            if session.engine.session:
                self._spawn(self.store.save_answer, session.engine.session, key[1], answer)

        return keep

    def _spawn(self, fn: Any, *args: Any) -> None:
        if self._tg is None:
            return

        async def run() -> None:
            try:
                await fn(*args)
            except StoreUnavailableError as exc:
                logger.warning("store write failed: %s", exc)

        self._tg.start_soon(run)


# --------------------------------------------------------------------------- helpers


def _no_cookies() -> CookieJar:
    """A cookie jar that keeps nothing. The upstream client is shared by sessions: a
    cookie it kept from one session's response would go out with the other sessions'
    requests (the gateway's own resumes and answer submissions, which it builds). The
    upstream's ``Set-Cookie`` reaches the client, whose requests carry it or not."""
    return CookieJar(DefaultCookiePolicy(allowed_domains=[]))


def _final_event(piece: bytes) -> bytes:
    """The last event of ``piece`` (whole events, as passed on): a finished stream's
    response. One read of the upstream can carry several events; a resume that lost the
    result gets the result alone, not the events before it again (a request among them
    would reach the client twice)."""
    events = core._SseParser().feed(piece)
    return (events[-1].raw + "\n\n").encode() if events else piece


class _Full(Exception):
    """Every held session is busy and ``max_sessions`` are held: no room for another."""


async def _pieces(resp: Any) -> AsyncIterator[bytes]:
    """The body of ``resp``: its content if it was made here, else its stream as read."""
    try:
        content = resp.content
    except httpx2.ResponseNotRead:
        async for piece in resp.aiter_raw():
            yield piece
    else:
        yield content


async def _store_unavailable(
    send: Any, method: str, headers: Mapping[str, str], body: bytes, exc: StoreUnavailableError
) -> None:
    """Fail closed when the store cannot say whether the session ended: a resume of a
    call's stream gets that call's ending error (one outcome for it), anything else
    ``503`` with a JSON-RPC error for its request id."""
    got = parse_event_id(headers.get("last-event-id") or "") if method == "GET" else None
    origin = core._origin_of(got.stream) if got is not None else None
    if origin is not None:
        ending = core._sse_bytes(None, json.dumps(core.ending_error(origin, exc)))
        await _reply(send, 200, ending, "text/event-stream")
    else:
        await _reply(send, 503, _rpc_error(_request_id(body), core.ENDED_CODE, str(exc)))


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers, lower-case names, last value wins; ``ValueError`` for a
    header the gateway must read that is not visible ASCII."""
    out: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        if name in ("mcp-session-id", "last-event-id", "mcp-protocol-version") and (
            not value or not all(0x20 < ord(c) < 0x7F for c in value)
        ):
            raise ValueError(f"{name} must be visible ASCII")
        out[name] = value
    return out


async def _read_body(receive: Any, headers: Mapping[str, str], limit: int) -> bytes | None:
    """The whole request body, or ``None`` if it is longer than ``limit`` bytes."""
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    data = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return bytes(data)
        data += message.get("body", b"")
        if len(data) > limit:
            return None
        if not message.get("more_body", False):
            return bytes(data)


def _request_id(body: bytes) -> Any:
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return value.get("id") if isinstance(value, dict) else None


def _rpc_error(rid: Any, code: int, message: str) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
    ).encode()


def _response(status: int, body: bytes, ctype: str = "application/json") -> Any:
    return httpx2.Response(status, headers={"content-type": ctype}, content=body)


async def _reply(send: Any, status: int, body: bytes, ctype: str = "application/json") -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", ctype.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})
