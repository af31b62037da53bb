"""A fault-injecting loopback HTTP/1.1 relay for MCP streamable-HTTP tests.

:class:`FaultProxy` listens on 127.0.0.1 (ephemeral port) and relays every request to one
upstream server (also 127.0.0.1), one fresh upstream connection per request.  Response
bodies are relayed incrementally, chunk by chunk, so SSE events reach the client as the
server emits them; SSE bodies are parsed on the fly into ``sse_event`` log entries.

Faults are **explicit commands** from the test, never timers:

- :meth:`FaultProxy.cut` ends an open response now: ``"abrupt"`` (close the client socket
  mid-body, no terminating chunk: httpx2 raises ``RemoteProtocolError: incomplete chunked
  read``), ``"reset"`` (TCP RST) or ``"clean"`` (send the terminating chunk, so the client
  sees a normal end of stream).  The upstream connection is closed in every mode, so the
  server sees its client go away.
- :meth:`FaultProxy.fail_next` / :meth:`FaultProxy.fail_next_answer`: the next matching
  request (by default a POST whose JSON body is a JSON-RPC response or error, i.e. an
  *answer* to a server request) is not relayed and gets a :class:`ConnectionFault` (socket
  closed without a response, or reset) or an :class:`HttpFault` (chosen status, body,
  headers).  ``deliver=True`` relays it first and then lies to the client.
- :meth:`FaultProxy.hold_next`: park the next matching request before it is relayed until
  :meth:`Hold.release`, e.g. to fire a server deadline *while* the client is disconnected.

Observation: a bounded traffic log of :class:`TrafficEvent` (``request``, ``response``,
``sse_event``, ``end``, ``fault``, ``held``) and :meth:`FaultProxy.wait_for`, which returns
the first past-or-future event matching a predicate, with a safety timeout.

Ordering: every relayed request carries ``x-fsm-exchange`` (its exchange id) and
``x-fsm-after-cut`` (ids of the exchanges recently cut); the demo server
(:mod:`fsm.wire.server`) holds a request until those have finished server-side.  Other
servers ignore the headers.

Limits: HTTP/1.1 only, no TLS, no pipelining (httpx2 does not pipeline), request bodies
fully buffered (bounded by ``max_body``), asyncio only.  Not a general-purpose proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import socket
import struct
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal
from urllib.parse import urlsplit

from fsm.adapters._transport.sse import EventTooLarge, SseParser

__all__ = [
    "ConnectionFault",
    "CutMode",
    "Exchange",
    "Fault",
    "FaultProxy",
    "FaultRule",
    "Hold",
    "HttpFault",
    "TrafficEvent",
    "is_answer_post",
    "is_resume_get",
]

logger = logging.getLogger(__name__)

CutMode = Literal["abrupt", "reset", "clean"]
INTERESTING_HEADERS = frozenset(
    {
        "last-event-id",
        "mcp-session-id",
        "mcp-protocol-version",
        "content-type",
        "retry-after",
        "accept",
    }
)
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "content-length", "transfer-encoding", "proxy-connection"}
)
_REASONS = {
    200: "OK",
    202: "Accepted",
    400: "Bad Request",
    404: "Not Found",
    409: "Conflict",
    410: "Gone",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class TrafficEvent:
    """One observation.  ``kind``:

    - ``request``: a request was read (``method``, ``path``, ``headers``, ``json`` body);
    - ``response``: the status line and headers were relayed (or synthesised by a fault);
    - ``body``: a non-SSE response body (parsed JSON when possible, first 64 KiB);
    - ``sse_event``: one SSE event relayed (``event_id``, ``event``, ``data``, ``retry``;
      a priming event has ``data == ""``); comments (pings) are not logged;
    - ``end``: the exchange ended, ``detail`` in ``complete``, ``cut_abrupt``,
      ``cut_reset``, ``cut_clean``, ``client_closed``, ``upstream_closed``, ``fault``;
    - ``fault``: a fault rule fired (``detail`` describes it);
    - ``held`` / ``released``: a hold parked / released the request.
    """

    seq: int
    kind: str
    exchange: int
    conn: int
    method: str
    path: str
    headers: Mapping[str, str] = field(default_factory=dict)
    json: Any = None
    status: int | None = None
    event_id: str | None = None
    event: str | None = None
    data: str = ""
    retry: int | None = None
    detail: str = ""

    @property
    def last_event_id(self) -> str | None:
        return self.headers.get("last-event-id")

    @property
    def session_id(self) -> str | None:
        return self.headers.get("mcp-session-id")


@dataclass
class Exchange:
    """One request/response pair relayed (or answered) by the proxy."""

    id: int
    conn: int
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any
    status: int | None = None
    response_headers: dict[str, str] = field(default_factory=dict)
    is_sse: bool = False
    open: bool = True
    outcome: str | None = None
    sse_event_ids: deque[str] = field(default_factory=lambda: deque(maxlen=1024))
    _client: asyncio.StreamWriter | None = None
    _upstream: asyncio.StreamWriter | None = None
    _chunked: bool = False
    _cut: CutMode | None = None

    @property
    def last_event_id(self) -> str | None:
        """The ``Last-Event-ID`` request header (a resume cursor), if any."""
        return self.headers.get("last-event-id")

    @property
    def session_id(self) -> str | None:
        return self.headers.get("mcp-session-id") or self.response_headers.get("mcp-session-id")

    @property
    def is_answer(self) -> bool:
        """A POST whose body is a JSON-RPC response or error (an answer to a server request)."""
        return self.method == "POST" and _is_answer_body(self.json)

    @property
    def rpc_method(self) -> str | None:
        body = self.json
        if isinstance(body, dict) and isinstance(body.get("method"), str):
            return str(body["method"])
        return None

    @property
    def is_resume(self) -> bool:
        return self.method == "GET" and self.last_event_id is not None

    @property
    def is_standalone_get(self) -> bool:
        return self.method == "GET" and self.last_event_id is None


def _is_answer_body(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and "method" not in body
        and "id" in body
        and ("result" in body or "error" in body)
    )


def is_answer_post(exchange: Exchange) -> bool:
    """Default fault matcher: a POSTed JSON-RPC response/error."""
    return exchange.is_answer


def is_resume_get(exchange: Exchange) -> bool:
    """A GET carrying ``Last-Event-ID``."""
    return exchange.is_resume


@dataclass(frozen=True)
class ConnectionFault:
    """Fail the request at the connection level.

    ``mode="close"`` closes the client socket without a response (httpx2:
    ``RemoteProtocolError: Server disconnected without sending a response``);
    ``mode="reset"`` resets it (``ReadError``/``ConnectError``-class errors).
    ``deliver=True`` relays the request to the server first (its answer is discarded).
    """

    mode: Literal["close", "reset"] = "close"
    deliver: bool = False


@dataclass(frozen=True)
class HttpFault:
    """Answer the request with ``status``/``body``/``headers`` instead of relaying it.

    ``body`` may be bytes, str, or a JSON-serialisable object (sent as
    ``application/json``).  ``deliver=True`` relays the request first and then replaces the
    server's answer (the "accepted but reported as failed" ambiguity).
    """

    status: int
    body: bytes | str | dict[str, Any] | list[Any] = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    deliver: bool = False

    @classmethod
    def jsonrpc_error(
        cls, status: int, code: int, message: str, request_id: Any = None, **kw: Any
    ) -> HttpFault:
        """A JSON-RPC error body.

        Example: ``jsonrpc_error(500, -32602, "no such pending request", 1)``.
        """
        body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
        return cls(status, body, **kw)

    @classmethod
    def session_not_found(cls) -> HttpFault:
        """What mcp 2.3.0 answers for an unknown session."""
        return cls.jsonrpc_error(404, -32600, "Session not found")

    @classmethod
    def too_many_requests(cls, retry_after: int = 1) -> HttpFault:
        return cls(429, b"", {"retry-after": str(retry_after)})


Fault = ConnectionFault | HttpFault


@dataclass
class FaultRule:
    """A pending fault: applies ``fault`` to the next ``times`` requests matching ``match``."""

    match: Callable[[Exchange], bool]
    fault: Fault
    times: int = 1
    hits: list[Exchange] = field(default_factory=list)

    @property
    def exhausted(self) -> bool:
        return len(self.hits) >= self.times


@dataclass
class Hold:
    """A parked request (see :meth:`FaultProxy.hold_next`)."""

    match: Callable[[Exchange], bool]
    exchange: Exchange | None = None
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _released: asyncio.Event = field(default_factory=asyncio.Event)

    async def wait_arrived(self, timeout: float = 10.0) -> Exchange:
        """Wait until a matching request is parked; returns its exchange."""
        await asyncio.wait_for(self._arrived.wait(), timeout)
        assert self.exchange is not None
        return self.exchange

    def release(self) -> None:
        """Relay the parked request (or let the next match pass, if none arrived yet)."""
        self._released.set()


class _Closed(Exception):
    """The client connection must be closed after this exchange."""


# --------------------------------------------------------------------------- proxy


class FaultProxy:
    """Loopback relay in front of ``upstream_url`` (see the module docstring).

    Use as ``async with FaultProxy(upstream_url) as proxy:``; ``proxy.url`` is the same URL
    with the proxy's host and port.  All methods must run in the proxy's event loop.
    ``log_capacity`` bounds the traffic log; a request body over ``max_body`` bytes closes
    the connection.
    """

    def __init__(
        self,
        upstream_url: str,
        *,
        log_capacity: int = 50_000,
        max_body: int = 4 * 1024 * 1024,
        max_sse_event: int = 1024 * 1024,
        exchange_capacity: int = 4096,
    ) -> None:
        parts = urlsplit(upstream_url)
        if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("FaultProxy relays to loopback servers only")
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self._upstream_path = parts.path or "/"
        self.log: deque[TrafficEvent] = deque(maxlen=log_capacity)
        self.exchanges: dict[int, Exchange] = {}
        self._exchange_capacity = exchange_capacity
        self._max_body = max_body
        self._max_sse_event = max_sse_event
        self._seq = itertools.count(1)
        self._exchange_ids = itertools.count(1)
        self._conn_ids = itertools.count(1)
        self._rules: list[FaultRule] = []
        self._holds: list[Hold] = []
        self._recently_cut: deque[int] = deque(maxlen=64)
        self._waiters: list[
            tuple[Callable[[TrafficEvent], bool], int, asyncio.Future[TrafficEvent]]
        ] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.port = 0

    def retarget(self, upstream_url: str) -> None:
        """Relay every request that arrives from now on to ``upstream_url`` (loopback
        only; the same path): a load balancer switching replicas, by explicit command.
        Exchanges already relayed stay where they are."""
        parts = urlsplit(upstream_url)
        if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("FaultProxy relays to loopback servers only")
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80

    # -- lifecycle
    @property
    def url(self) -> str:
        """The proxied endpoint URL (``http://127.0.0.1:<port><upstream path>``)."""
        return f"http://127.0.0.1:{self.port}{self._upstream_path}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._on_client, "127.0.0.1", 0, limit=1 << 20)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def aclose(self) -> None:
        """Stop listening and abort every open connection."""
        if self._server is not None:
            self._server.close()
        for ex in list(self.exchanges.values()):
            if ex.open:
                for w in (ex._client, ex._upstream):
                    if w is not None:
                        w.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        for _, _, fut in self._waiters:
            if not fut.done():
                fut.cancel()

    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- commands
    def fail_next(
        self, fault: Fault, match: Callable[[Exchange], bool] = is_answer_post, times: int = 1
    ) -> FaultRule:
        """Apply ``fault`` to the next ``times`` requests matching ``match``."""
        rule = FaultRule(match, fault, times)
        self._rules.append(rule)
        return rule

    def fail_next_answer(self, fault: Fault, request_id: Any = None, times: int = 1) -> FaultRule:
        """Apply ``fault`` to the next answer POST (for JSON-RPC id ``request_id`` if given)."""

        def match(ex: Exchange) -> bool:
            return ex.is_answer and (request_id is None or ex.json.get("id") == request_id)

        return self.fail_next(fault, match, times)

    def hold_next(self, match: Callable[[Exchange], bool] = is_resume_get) -> Hold:
        """Park the next request matching ``match`` before relaying it (see :class:`Hold`)."""
        hold = Hold(match)
        self._holds.append(hold)
        return hold

    def open_sse(self, *, include_standalone: bool = False) -> list[Exchange]:
        """Open SSE exchanges, oldest first (standalone GET streams excluded by default)."""
        return [
            ex
            for ex in self.exchanges.values()
            if ex.open and ex.is_sse and (include_standalone or not ex.is_standalone_get)
        ]

    def current_sse(self, *, include_standalone: bool = False) -> Exchange:
        """The most recently opened open SSE exchange (``LookupError`` if none)."""
        open_ = self.open_sse(include_standalone=include_standalone)
        if not open_:
            raise LookupError("no open SSE exchange")
        return open_[-1]

    async def cut(
        self, exchange: Exchange | int | None = None, mode: CutMode = "abrupt"
    ) -> Exchange:
        """Cut an open response now (default: :meth:`current_sse`).  See module docstring.

        Returns once both sockets are closed (or, for ``clean``, the terminating chunk is
        queued).  The ``end`` event for the exchange is logged by its relay task.
        """
        if exchange is None:
            ex = self.current_sse()
        elif isinstance(exchange, int):
            ex = self.exchanges[exchange]
        else:
            ex = exchange
        if not ex.open or ex._cut is not None:
            raise RuntimeError(f"exchange {ex.id} is not open")
        ex._cut = mode
        self._recently_cut.append(ex.id)
        client, upstream = ex._client, ex._upstream
        if mode == "clean":
            if client is not None:
                if ex._chunked:
                    client.write(b"0\r\n\r\n")
                else:
                    client.transport.close()
        elif client is not None:
            if mode == "reset":
                _set_rst(client)
            client.transport.abort()
        if upstream is not None:
            upstream.transport.abort()
        await asyncio.sleep(0)
        return ex

    # -- observation
    def events(self, predicate: Callable[[TrafficEvent], bool] | None = None) -> list[TrafficEvent]:
        """Logged events (matching ``predicate``), oldest first."""
        return [e for e in self.log if predicate is None or predicate(e)]

    @property
    def last_seq(self) -> int:
        """The sequence number of the newest logged event (0 if none): use as ``after=``."""
        return self.log[-1].seq if self.log else 0

    async def wait_for(
        self,
        predicate: Callable[[TrafficEvent], bool],
        timeout: float = 10.0,
        after: int = 0,
    ) -> TrafficEvent:
        """The first event with ``seq > after`` matching ``predicate``, past or future.

        ``timeout`` is a safety net only; it raises ``TimeoutError``.
        """
        for event in self.log:
            if event.seq > after and predicate(event):
                return event
        fut: asyncio.Future[TrafficEvent] = asyncio.get_running_loop().create_future()
        entry = (predicate, after, fut)
        self._waiters.append(entry)
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(entry)

    async def wait_count(
        self, predicate: Callable[[TrafficEvent], bool], count: int, timeout: float = 10.0
    ) -> list[TrafficEvent]:
        """Wait until ``count`` logged events match ``predicate``; returns the first ``count``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        after = 0
        found: list[TrafficEvent] = []
        while len(found) < count:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"saw {len(found)} of {count} events")
            event = await self.wait_for(predicate, remaining, after)
            found.append(event)
            after = event.seq
        return found

    def _record(self, kind: str, ex: Exchange, **kw: Any) -> TrafficEvent:
        headers = kw.pop("headers", None)
        if headers is None:
            headers = {k: v for k, v in ex.headers.items() if k in INTERESTING_HEADERS}
        event = TrafficEvent(
            next(self._seq), kind, ex.id, ex.conn, ex.method, ex.path, headers=headers, **kw
        )
        self.log.append(event)
        for predicate, after, fut in list(self._waiters):
            if not fut.done() and event.seq > after:
                try:
                    hit = predicate(event)
                except Exception as exc:  # a broken predicate fails its waiter, not the relay
                    fut.set_exception(exc)
                    continue
                if hit:
                    fut.set_result(event)
        return event

    # -- connection handling
    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = next(self._conn_ids)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                try:
                    await self._one_exchange(conn, head, reader, writer)
                except _Closed:
                    return
        except asyncio.CancelledError:
            pass
        except Exception:
            logger.exception("proxy connection %d failed", conn)
        finally:
            self._tasks.discard(task)
            writer.transport.abort()

    async def _one_exchange(
        self, conn: int, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        request_line, headers = _parse_head(head)
        method, path = request_line[0], request_line[1]
        body = await _read_request_body(reader, headers, self._max_body)
        parsed: Any = None
        if body:
            with contextlib.suppress(ValueError):
                parsed = json.loads(body)
        ex = Exchange(next(self._exchange_ids), conn, method, path, headers, body, parsed)
        ex._client = writer
        self._remember(ex)
        self._record("request", ex, json=parsed)

        for hold in self._holds:
            if hold.exchange is None and hold.match(ex):
                hold.exchange = ex
                hold._arrived.set()
                self._record("held", ex)
                await hold._released.wait()
                self._holds.remove(hold)
                self._record("released", ex)
                break

        rule = next((r for r in self._rules if not r.exhausted and r.match(ex)), None)
        if rule is not None:
            rule.hits.append(ex)
            if rule.exhausted:
                self._rules.remove(rule)
            await self._apply_fault(ex, rule.fault, writer)
            return
        await self._relay(ex, reader, writer)

    def _remember(self, ex: Exchange) -> None:
        self.exchanges[ex.id] = ex
        if len(self.exchanges) > self._exchange_capacity:
            for old_id in list(self.exchanges):
                if len(self.exchanges) <= self._exchange_capacity:
                    break
                if not self.exchanges[old_id].open:
                    del self.exchanges[old_id]

    def _finish(self, ex: Exchange, outcome: str) -> None:
        if ex.open:
            ex.open = False
            ex.outcome = outcome
            self._record("end", ex, detail=outcome)

    async def _apply_fault(self, ex: Exchange, fault: Fault, writer: asyncio.StreamWriter) -> None:
        if fault.deliver:
            await self._relay_and_discard(ex)
        if isinstance(fault, ConnectionFault):
            self._record("fault", ex, detail=f"connection:{fault.mode}")
            if fault.mode == "reset":
                _set_rst(writer)
            writer.transport.abort()
            self._finish(ex, "fault")
            raise _Closed
        body = fault.body
        content_type = "application/json"
        if isinstance(body, dict | list):
            payload = json.dumps(body).encode()
        elif isinstance(body, str):
            payload = body.encode()
            content_type = "text/plain; charset=utf-8"
        else:
            payload = body
        headers = {"content-type": content_type, **{k.lower(): v for k, v in fault.headers.items()}}
        headers["content-length"] = str(len(payload))
        ex.status = fault.status
        ex.response_headers = headers
        self._record("fault", ex, status=fault.status, detail=f"http:{fault.status}")
        self._record(
            "response",
            ex,
            status=fault.status,
            json=_maybe_json(payload),
            headers=_interesting(ex.headers, headers),
        )
        if payload:
            self._record("body", ex, json=_maybe_json(payload))
        reason = _REASONS.get(fault.status, "Status")
        lines = [f"HTTP/1.1 {fault.status} {reason}"] + [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload)
        try:
            await writer.drain()
        except ConnectionError as exc:
            self._finish(ex, "client_closed")
            raise _Closed from exc
        self._finish(ex, "fault")

    def _upstream_head(self, ex: Exchange) -> bytes:
        lines = [f"{ex.method} {ex.path} HTTP/1.1"]
        for k, v in ex.headers.items():
            if k in _HOP_BY_HOP or k.startswith("x-fsm-"):
                continue
            lines.append(f"{k}: {v}")
        lines.append(f"content-length: {len(ex.body)}")
        lines.append("connection: close")
        lines.append(f"x-fsm-exchange: {ex.id}")
        cut = [str(i) for i in self._recently_cut if i != ex.id]
        if cut:
            lines.append(f"x-fsm-after-cut: {','.join(cut)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _relay_and_discard(self, ex: Exchange) -> None:
        up_r, up_w = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        try:
            up_w.write(self._upstream_head(ex) + ex.body)
            await up_w.drain()
            head = await up_r.readuntil(b"\r\n\r\n")
            status_line, headers = _parse_head(head)
            self._record(
                "response",
                ex,
                status=int(status_line[1]),
                detail="delivered-then-faulted",
                headers=_interesting(ex.headers, headers),
            )
            await up_r.read()  # connection: close, so EOF ends the body
        finally:
            up_w.transport.abort()

    async def _relay(
        self, ex: Exchange, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        except OSError:
            await self._apply_fault(ex, HttpFault(502, b"upstream unreachable"), writer)
            return
        ex._upstream = up_w
        watcher = asyncio.ensure_future(self._watch_client(ex, reader))
        try:
            await self._relay_body(ex, up_r, up_w, writer)
        finally:
            watcher.cancel()
            with contextlib.suppress(BaseException):
                await watcher
            up_w.transport.abort()

    async def _watch_client(self, ex: Exchange, reader: asyncio.StreamReader) -> None:
        """End the exchange upstream when the client goes away mid-response."""
        with contextlib.suppress(ConnectionError):
            data = await reader.read(1)
            if data:  # not expected: httpx2 does not pipeline
                logger.warning("exchange %d: client sent data mid-response; closing", ex.id)
        if ex.open and ex._cut is None:
            ex._cut = "abrupt"
            self._finish(ex, "client_closed")
            if ex._upstream is not None:
                ex._upstream.transport.abort()
            if ex._client is not None:
                ex._client.transport.abort()

    async def _relay_body(
        self,
        ex: Exchange,
        up_r: asyncio.StreamReader,
        up_w: asyncio.StreamWriter,
        writer: asyncio.StreamWriter,
    ) -> None:
        def stop() -> None:
            mode = ex._cut
            if mode is None:
                return
            self._finish(ex, f"cut_{mode}")
            if mode == "clean" and ex._chunked:
                return  # response ended properly; the client connection stays usable
            raise _Closed

        try:
            up_w.write(self._upstream_head(ex) + ex.body)
            await up_w.drain()
            head = await up_r.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            stop()
            if not ex.open:
                return
            await self._apply_fault(ex, HttpFault(502, b"upstream closed"), writer)
            return
        status_line, headers = _parse_head(head)
        status = int(status_line[1])
        ex.status = status
        ex.response_headers = headers
        te = headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        ex._chunked = "chunked" in te
        ex.is_sse = headers.get("content-type", "").lower().startswith("text/event-stream")
        close_delimited = not ex._chunked and length is None and status not in (204, 304)
        self._record("response", ex, status=status, headers=_interesting(ex.headers, headers))

        out = [f"HTTP/1.1 {status_line[1]} {status_line[2]}"]
        out += [f"{k}: {v}" for k, v in headers.items() if k not in ("connection", "keep-alive")]
        if close_delimited:
            out.append("connection: close")
        writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
        parser = SseParser(self._max_sse_event) if ex.is_sse else None
        body_chunks: list[bytes] = []
        try:
            await writer.drain()
            if ex._chunked:
                while True:
                    line = await up_r.readuntil(b"\r\n")
                    stop()
                    if not ex.open:
                        return
                    size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                    if size == 0:
                        while (await up_r.readuntil(b"\r\n")) != b"\r\n":
                            pass
                        writer.write(b"0\r\n\r\n")
                        await writer.drain()
                        break
                    data = await up_r.readexactly(size + 2)
                    stop()
                    if not ex.open:
                        return
                    writer.write(line + data)
                    parser = self._observe(ex, parser, data[:-2], body_chunks)
                    await writer.drain()
            elif length is not None:
                remaining = int(length)
                while remaining > 0:
                    data = await up_r.read(min(remaining, 65536))
                    stop()
                    if not ex.open:
                        return
                    if not data:
                        raise asyncio.IncompleteReadError(b"", remaining)
                    remaining -= len(data)
                    writer.write(data)
                    parser = self._observe(ex, parser, data, body_chunks)
                    await writer.drain()
            elif close_delimited:
                while data := await up_r.read(65536):
                    stop()
                    if not ex.open:
                        return
                    writer.write(data)
                    parser = self._observe(ex, parser, data, body_chunks)
                    await writer.drain()
                stop()
                self._observe(ex, parser, b"", body_chunks, ended=True)
                self._finish(ex, "complete")
                raise _Closed
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            stop()
            if not ex.open:
                return
            self._finish(ex, "upstream_closed")
            raise _Closed from exc
        self._observe(ex, parser, b"", body_chunks, ended=True)
        if body_chunks and not ex.is_sse:
            self._record("body", ex, json=_maybe_json(b"".join(body_chunks)))
        self._finish(ex, "complete")

    def _observe(
        self,
        ex: Exchange,
        parser: SseParser | None,
        data: bytes,
        chunks: list[bytes],
        *,
        ended: bool = False,
    ) -> SseParser | None:
        """Log the events ``data`` completes (``ended``: the body's clean end, which
        completes an event whose last line end was a bare CR); the parser for the next
        read (a new one after an event over the log's bound, which is dropped from the
        log)."""
        if parser is None:
            if data and sum(map(len, chunks)) < 65536:
                chunks.append(data)
            return None
        try:
            frames = parser.finish() if ended else parser.feed(data)
        except EventTooLarge:
            logger.warning("SSE event larger than %d chars dropped from the log", parser.max_event)
            return SseParser(parser.max_event)
        for frame in frames:
            if frame.event_id:
                ex.sse_event_ids.append(frame.event_id)
            self._record(
                "sse_event",
                ex,
                event_id=frame.event_id,
                event=frame.event,
                data=frame.data,
                retry=frame.retry,
            )
        return parser


# --------------------------------------------------------------------------- helpers


def _parse_head(head: bytes) -> tuple[list[str], dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    first = lines[0].split(" ", 2)
    while len(first) < 3:
        first.append("")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return first, headers


async def _read_request_body(
    reader: asyncio.StreamReader, headers: Mapping[str, str], max_body: int
) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts: list[bytes] = []
        total = 0
        while True:
            line = await reader.readuntil(b"\r\n")
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                return b"".join(parts)
            total += size
            if total > max_body:
                raise _Closed
            parts.append((await reader.readexactly(size + 2))[:-2])
    length = int(headers.get("content-length", "0") or 0)
    if length > max_body:
        raise _Closed
    return await reader.readexactly(length) if length else b""


def _interesting(request: Mapping[str, str], response: Mapping[str, str]) -> dict[str, str]:
    merged = {k: v for k, v in request.items() if k in INTERESTING_HEADERS}
    merged.update({f"response:{k}": v for k, v in response.items() if k in INTERESTING_HEADERS})
    return merged


def _maybe_json(payload: bytes) -> Any:
    if not payload:
        return None
    try:
        return json.loads(payload)
    except ValueError:
        return payload.decode("utf-8", errors="replace")


def _set_rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
