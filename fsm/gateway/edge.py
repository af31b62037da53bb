"""What the gateway's HTTP edge accepts: request heads, connections, ``Host`` and ``Origin``.

Contract
--------
:class:`EdgeLimits` bounds each client connection of the server that serves the gateway
(uvicorn); :func:`uvicorn_settings` turns them into ``uvicorn.Config`` keywords, with
the HTTP protocol classes of this module (:class:`EdgeH11Protocol`,
:class:`EdgeHttpToolsProtocol`) as uvicorn's ``http``. With them, on a connection:

* a request head (request line and headers) longer than ``max_header_bytes`` gets
  ``431 Request Header Fields Too Large``, and so does one with more than ``max_headers``
  header lines; no more than ``max_header_bytes`` of a head is handed to the parser, so a
  64 MiB header line is never held (the rest of it is read and dropped, see below);
* a head not complete ``header_timeout_s`` after the connection opened, or after the
  previous response on it ended, gets ``408 Request Timeout`` (a connection that sent
  nothing of a next request is closed without an answer: it was idle);
* an idle keep-alive connection is closed after ``keep_alive_s``;
* a request arriving while more than ``max_connections`` connections are open gets
  ``503``.

An HTTP/1.0 request gets its response without chunked framing (HTTP/1.0 has none): a
response without ``Content-Length`` is delimited by the connection's close, as h11 does
by itself and the httptools protocol is made to do (uvicorn's chunks it).

A ``431`` or ``408`` ends the connection: the answer is written with
``connection: close``, the sending side shut (FIN), and what the client still sends is
read and dropped for at most :data:`LINGER_S` seconds, or until it closes its side.
Closing at once, with a client's bytes still unread, makes the kernel send a reset that
can destroy the answer before a client that writes its whole request first reads it.

Defaults: ``EdgeLimits()`` (32 KiB heads, 100 header lines, 10 s for a head, 5 s idle,
4096 connections). Which part is whose:

* uvicorn: the idle keep-alive timeout (``timeout_keep_alive``) and the connection bound
  (``limit_concurrency``; it answers ``503`` once the open connections, the asking one
  included, reach it, so it is given ``max_connections + 1``).
* h11: ``max_incomplete_event_size`` (set to ``max_header_bytes``) bounds what h11
  buffers of an incomplete head or chunk-size line; uvicorn answers it ``400``, this
  module ``431``, and feeds h11 no more of a head than the limit, so a head longer than
  the limit is refused even when all of it arrives in one read (h11 only bounds an
  *incomplete* event).
* httptools (llhttp) bounds nothing: it buffers a header line however long it grows and
  counts no headers. The head byte count, the header count, the header timeout and the
  lingering close are this module's, for both parsers.

Limits (what is not bounded, or only loosely):

* httptools: a head is counted from the read it starts in. When a request follows the end
  of the previous one inside the same read (HTTP pipelining), that read's part of it is
  not counted: such a head is refused by ``2 * max_header_bytes`` at the latest.
* a pipelined request that exceeds a limit while the response to an earlier one is still
  being written gets no ``431`` (it cannot be written into that response): the connection
  is closed.
* trailers (the fields after a chunked body) are not passed to the app, nor counted as
  header lines. h11 bounds their bytes by ``max_header_bytes``; with httptools the
  lines' count is not bounded (each is dropped), nor the length of one line.
* request bodies are not bounded here (the gateway times and bounds them itself:
  :class:`~fsm.gateway.app.GatewayLimits`), nor is the rest of a body a client keeps
  sending after the app answered early.
* ``max_connections`` bounds the connections served, not those accepted: a connection
  over it is accepted, answered ``503`` if it sends a request, and closed after
  ``header_timeout_s`` if it sends nothing. Held connections count: many slow clients
  make others' requests ``503`` for at most ``header_timeout_s``.
* an idle connection waits for a head, so it is closed after ``min(keep_alive_s,
  header_timeout_s)``.
* the protocol classes subclass uvicorn's (its hooks as of uvicorn 0.55: ``data_received``,
  ``handle_events``, ``on_header``, ``on_headers_complete``, ``on_message_complete``,
  ``on_response_complete``); HTTP/2 (uvicorn's ``zttp``) is not covered.

:class:`HostPolicy` says which ``Host`` and ``Origin`` values the gateway serves: it
sends the upstream its own ``Host``, so the upstream's DNS-rebinding check no longer
sees the client's, and the gateway checks it instead (``421`` / ``403``, as the MCP SDKs
answer).

This module imports uvicorn (the ``gateway`` extra) and, when installed, httptools.
"""

from __future__ import annotations

import asyncio
import functools
import http
import importlib.util
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import formatdate
from typing import TYPE_CHECKING, Any, ClassVar, cast
from urllib.parse import urlsplit

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from fsm.fields import seconds_problem

if TYPE_CHECKING:
    from uvicorn.protocols.http.flow_control import FlowControl

__all__ = [
    "HAS_HTTPTOOLS",
    "LINGER_S",
    "LOOPBACK_HOSTS",
    "BodiesFull",
    "BodyBudget",
    "EdgeH11Protocol",
    "EdgeHttpToolsProtocol",
    "EdgeLimits",
    "HostPolicy",
    "protocol_class",
    "uvicorn_settings",
]

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
"""The host names :class:`HostPolicy` allows by default (any port)."""

LINGER_S = 2.0
"""Seconds a refused connection (``431``, ``408``) is still read, and what it sends
dropped, after its answer, so that the answer is not destroyed by a reset."""

HAS_HTTPTOOLS = importlib.util.find_spec("httptools") is not None
"""Whether httptools is installed (``http="auto"`` then takes it)."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EdgeLimits:
    """Bounds on one client connection (defaults stated per field; ``ValueError`` for a
    value out of range)."""

    max_header_bytes: int = 32 * 1024
    """Bytes of a request head (request line and headers, the blank line included); more
    gets ``431``. At least 1024."""
    max_headers: int = 100
    """Header lines of a request; more gets ``431``. At least 1."""
    header_timeout_s: float = 10.0
    """Seconds from a connection's start (or the end of the previous response on it) to
    the end of a request head; slower gets ``408`` and the connection is closed. Finite,
    > 0."""
    keep_alive_s: float = 5.0
    """Seconds an idle keep-alive connection is kept. Finite, > 0."""
    max_connections: int | None = 4096
    """Client connections at once (``None``: no bound); a request arriving while more are
    open gets ``503``. At least 1."""

    def __post_init__(self) -> None:
        if self.max_header_bytes < 1024:
            raise ValueError("EdgeLimits.max_header_bytes must be >= 1024")
        if self.max_headers < 1:
            raise ValueError("EdgeLimits.max_headers must be >= 1")
        for name in ("header_timeout_s", "keep_alive_s"):
            timeout = getattr(self, name)
            problem = seconds_problem(timeout, positive=True)
            if problem is not None:
                raise ValueError(f"EdgeLimits.{name}: {timeout!r} {problem}")
        if self.max_connections is not None and self.max_connections < 1:
            raise ValueError("EdgeLimits.max_connections must be None or >= 1")


# --------------------------------------------------------------------------- the protocols


class _EdgeMixin:
    """What both protocol classes share: the header timer and the refusals.

    ``__init__`` takes uvicorn's protocol arguments and then calls :meth:`_edge_init`,
    which a subclass extends with its own state. A subclass arms the timer when the
    connection starts waiting for a head and disarms it when a head is complete, and says
    whether the head it waits for has begun (:meth:`_edge_head_begun`)."""

    limits: ClassVar[EdgeLimits] = EdgeLimits()
    """The limits this class enforces (:func:`protocol_class` makes one per limits)."""

    if TYPE_CHECKING:  # uvicorn's protocols set these
        transport: asyncio.Transport
        loop: asyncio.AbstractEventLoop
        flow: FlowControl
        server_state: ServerState
        cycle: Any

        def _unset_keepalive_if_required(self) -> None: ...

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)  # type: ignore[call-arg]
        self._edge_init()

    def _edge_init(self) -> None:
        self._edge_timer: asyncio.TimerHandle | None = None
        self._edge_linger: asyncio.TimerHandle | None = None
        self._edge_closing = False
        """Refused or timed out: what arrives is dropped."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._edge_arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._edge_lost()
        super().connection_lost(exc)  # type: ignore[misc]

    def _edge_head_begun(self) -> bool:
        """Whether any of the head the connection waits for has arrived."""
        raise NotImplementedError

    def _unsupported_upgrade_warning(self) -> None:
        """An ``Upgrade`` the server does not take: the request is served as plain HTTP,
        so nothing is wrong (uvicorn logs two warnings per request: a log flood)."""
        logger.debug("Upgrade ignored: the request is served as plain HTTP")

    def data_received(self, data: bytes) -> None:
        """Feed ``data`` to the parser in pieces no larger than the room the head being
        read has left (the limit, for other data), refusing (431) a head with no room
        left; stop once the connection is refused or closing."""
        if self._edge_closing:
            return
        self._unset_keepalive_if_required()
        limit = self.limits.max_header_bytes
        while data:
            room = self._edge_room(limit)
            if room <= 0:
                self._edge_refuse(431)
                return
            piece, data = data[:room], data[room:]
            if not self._edge_feed(piece, limit):
                return

    def _edge_room(self, limit: int) -> int:
        """Bytes the parser may take next (``limit``: the largest head)."""
        raise NotImplementedError

    def _edge_feed(self, piece: bytes, limit: int) -> bool:
        """Feed ``piece`` to the parser; ``False`` when the connection stops reading."""
        raise NotImplementedError

    def _edge_busy(self) -> bool:
        """Whether a response is being written on this connection."""
        return self.cycle is not None and not self.cycle.response_complete

    def _edge_arm(self) -> None:
        """The connection waits for a head from now on (no-op if it already did)."""
        if self._edge_timer is None and not self._edge_closing and not self.transport.is_closing():
            self._edge_timer = self.loop.call_later(
                self.limits.header_timeout_s, self._edge_header_timeout
            )

    def _edge_disarm(self) -> None:
        if self._edge_timer is not None:
            self._edge_timer.cancel()
            self._edge_timer = None

    def _edge_header_timeout(self) -> None:
        self._edge_timer = None
        if self.transport.is_closing() or self._edge_busy():
            return
        if self._edge_head_begun():
            self._edge_refuse(408)
        else:  # idle: nothing to answer
            self._edge_closing = True
            self._unset_keepalive_if_required()
            self.transport.close()

    def _edge_refuse(self, status: int) -> None:
        """Answer ``status`` (``connection: close``) and end the connection, reading and
        dropping what the client still sends for at most :data:`LINGER_S`."""
        if self._edge_closing:
            return
        self._edge_closing = True
        self._edge_disarm()
        self._unset_keepalive_if_required()
        transport = self.transport
        if transport.is_closing():
            return
        if self._edge_busy():  # an answer now would land inside another response
            transport.close()
            return
        phrase = http.HTTPStatus(status).phrase
        body = phrase.encode("ascii")
        out = [f"HTTP/1.1 {status} {phrase}\r\n".encode("ascii")]
        defaults = self.server_state.default_headers
        for name, value in defaults:
            out.append(name + b": " + value + b"\r\n")
        if not any(name.lower() == b"date" for name, _ in defaults):
            out.append(b"date: " + formatdate(usegmt=True).encode("ascii") + b"\r\n")
        out.append(
            b"content-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body)
        )
        out.append(body)
        transport.write(b"".join(out))
        if not transport.can_write_eof():
            transport.close()
            return
        transport.write_eof()
        if not transport.is_reading():
            transport.resume_reading()
        self._edge_linger = self.loop.call_later(LINGER_S, transport.close)

    def _edge_lost(self) -> None:
        self._edge_closing = True
        self._edge_disarm()
        if self._edge_linger is not None:
            self._edge_linger.cancel()
            self._edge_linger = None


class _H11Connection(h11.Connection):
    """h11's server connection that also refuses more than ``max_headers`` header lines,
    and remembers a ``431`` it raised (uvicorn answers every h11 error ``400``)."""

    def __init__(self, limits: EdgeLimits) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=limits.max_header_bytes)
        self.max_headers = limits.max_headers
        self.refusal: int | None = None

    def next_event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as exc:
            if exc.error_status_hint == 431:
                self.refusal = 431
            raise
        if isinstance(event, h11.Request) and len(event.headers) > self.max_headers:
            self.refusal = 431
            raise h11.RemoteProtocolError("too many header fields", error_status_hint=431)
        return event


class EdgeH11Protocol(_EdgeMixin, H11Protocol):
    """uvicorn's h11 protocol with :attr:`limits` enforced (see the module docstring)."""

    conn: _H11Connection

    def _edge_init(self) -> None:
        self.conn = _H11Connection(self.limits)
        super()._edge_init()

    def _waiting(self) -> bool:
        """Whether the connection waits for a request head (both sides idle)."""
        return self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE

    def _edge_head_begun(self) -> bool:
        return bool(self.conn.trailing_data[0])

    def _edge_room(self, limit: int) -> int:
        # a head is fed to h11 up to the limit, then refused if still incomplete;
        # other data in pieces of the limit (h11 bounds incomplete events by it)
        return limit - len(self.conn.trailing_data[0]) if self._waiting() else limit

    def _edge_feed(self, piece: bytes, limit: int) -> bool:
        self.conn.receive_data(piece)
        self.handle_events()
        if self._edge_closing or self.transport.is_closing():
            return False
        if self._waiting() and len(self.conn.trailing_data[0]) >= limit:
            self._edge_refuse(431)
            return False
        return True

    def handle_events(self) -> None:
        super().handle_events()
        if self._edge_closing or self.transport.is_closing():
            return
        if self._waiting():
            self._edge_arm()
        else:
            self._edge_disarm()

    def send_400_response(self, msg: str) -> None:
        if self.conn.refusal is not None:
            self._edge_refuse(self.conn.refusal)
        else:
            super().send_400_response(msg)


class _TooManyHeaders(Exception):
    """Raised from a parser callback to stop httptools at one header line too many."""


if HAS_HTTPTOOLS:
    import httptools
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class EdgeHttpToolsProtocol(_EdgeMixin, HttpToolsProtocol):
        """uvicorn's httptools protocol with :attr:`limits` enforced (see the module
        docstring). Only with httptools installed."""

        def _edge_init(self) -> None:
            super()._edge_init()
            self._in_head = True
            """Between the end of a request (or the connection's start) and the end of
            the next head."""
            self._head_bytes = 0
            """Bytes of the current head fed to the parser (see the module's limits)."""
            self._phase = 0
            """Counts the parser's passages between head and body, both ways."""
            self._message_begun = False
            self._too_many = False

        def _edge_head_begun(self) -> bool:
            return self._head_bytes > 0 or self._message_begun

        def _edge_room(self, limit: int) -> int:
            return limit - self._head_bytes if self._in_head else limit

        def _edge_feed(self, piece: bytes, limit: int) -> bool:
            phase = self._phase
            try:
                self.parser.feed_data(piece)
            except httptools.HttpParserUpgrade:
                if self._should_upgrade():
                    self.handle_websocket_upgrade()
                else:
                    self._unsupported_upgrade_warning()
                return False
            except httptools.HttpParserError:
                if self._too_many:
                    self._edge_refuse(431)
                else:
                    msg = "Invalid HTTP request received."
                    self.logger.warning(msg)
                    self.send_400_response(msg)
                return False
            if self._edge_closing or self.transport.is_closing():
                return False
            if not self._in_head:
                self._head_bytes = 0
            elif self._phase == phase:  # all of the piece belongs to this head
                self._head_bytes += len(piece)
            else:  # this head began inside the piece: counted from the next one
                self._head_bytes = 0
            if self._in_head and self._head_bytes >= limit:
                self._edge_refuse(431)
                return False
            return True

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._message_begun = True

        def on_header(self, name: bytes, value: bytes) -> None:
            """A header line of the head (counted: one past ``max_headers`` stops the
            parser); a trailer line (after a chunked body) is dropped, uncounted: h11
            passes none to the app either, and uvicorn would add it to the headers of a
            request already being served."""
            if not self._in_head:
                return
            if len(self.headers) >= self.limits.max_headers:
                self._too_many = True
                raise _TooManyHeaders
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._message_begun = False
            self._phase += 1
            self._edge_disarm()
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._in_head = True
            self._phase += 1
            super().on_message_complete()
            if self.cycle is not None and self.cycle.response_complete and not self.pipeline:
                self._edge_arm()  # answered before the body ended: the next head is due

        def _start_asgi_task(self, cycle: Any, app: Any) -> None:
            if cycle.scope.get("http_version") == "1.0":
                _close_delimited(cycle)
            super()._start_asgi_task(cycle, app)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if (
                self._in_head
                and not self.transport.is_closing()
                and not self.pipeline
                and not self._edge_busy()
            ):
                self._edge_arm()


def _close_delimited(cycle: Any) -> None:
    """Make uvicorn's httptools request cycle answer an HTTP/1.0 request without chunked
    framing: a response with no ``Content-Length`` (and a body: not ``HEAD``, ``204`` or
    ``304``) is written as it comes and ended by closing the connection (uvicorn keeps
    no HTTP/1.0 connection alive), as RFC 9112 section 6.3 reads such a response."""
    send = cycle.send
    delimited = False

    async def send_http10(message: Any) -> None:
        nonlocal delimited
        if message["type"] == "http.response.start" and not cycle.response_started:
            fields = list(message.get("headers", ()))
            if (
                all(name.lower() != b"content-length" for name, _ in fields)
                and cycle.scope["method"] != "HEAD"
                and message["status"] not in (204, 304)
            ):
                delimited = True
                cycle.chunked_encoding = False
                fields = [(n, v) for n, v in fields if n.lower() != b"transfer-encoding"]
                message = {**message, "headers": fields}
        elif delimited and message["type"] == "http.response.body":
            cycle.expected_content_length = len(message.get("body", b""))  # no length check
        await send(message)

    cycle.send = send_http10


@functools.lru_cache(maxsize=64)
def protocol_class(limits: EdgeLimits, http: str = "auto") -> type[asyncio.Protocol]:
    """The uvicorn HTTP protocol class enforcing ``limits`` with the ``http`` parser:
    ``"h11"``, ``"httptools"`` or ``"auto"`` (httptools when installed, else h11);
    ``ValueError`` for another name or httptools asked for and not installed."""
    if http == "auto":
        http = "httptools" if HAS_HTTPTOOLS else "h11"
    base: type[_EdgeMixin]
    if http == "h11":
        base = EdgeH11Protocol
    elif http == "httptools":
        if not HAS_HTTPTOOLS:
            raise ValueError("http='httptools': httptools is not installed")
        base = EdgeHttpToolsProtocol
    else:
        raise ValueError(f"http must be 'auto', 'h11' or 'httptools', not {http!r}")
    return cast("type[asyncio.Protocol]", type(base.__name__, (base,), {"limits": limits}))


def uvicorn_settings(
    limits: EdgeLimits, http: str = "auto", *, relay: bool = False
) -> dict[str, Any]:
    """``uvicorn.Config`` keywords that apply ``limits`` with the ``http`` parser
    (``auto``: httptools when installed, else h11): ``http`` (the protocol class of
    :func:`protocol_class`), ``timeout_keep_alive``, ``limit_concurrency``,
    ``h11_max_incomplete_event_size`` and ``ws="none"`` (no WebSocket protocol: a request
    asking to upgrade is served as a plain HTTP request, its ``Upgrade`` ignored); with
    ``relay`` (a server that passes on another's responses, the gateway) also
    ``server_header=False`` and ``date_header=False``, so that a response keeps the
    upstream's ``Server`` and its one ``Date``, and ``proxy_headers=False``: the client
    address the app sees (and appends to ``X-Forwarded-For``) is the connection's peer,
    never one read from a request field. ``ValueError`` as :func:`protocol_class`."""
    relayed = (
        {"server_header": False, "date_header": False, "proxy_headers": False} if relay else {}
    )
    return {
        **relayed,
        "http": protocol_class(limits, http),
        # no WebSocket: an upgrade request is answered as the plain HTTP request it also is
        "ws": "none",
        # uvicorn types it int but only schedules it: a fraction of a second is kept
        "timeout_keep_alive": limits.keep_alive_s,
        "limit_concurrency": (
            None if limits.max_connections is None else limits.max_connections + 1
        ),
        "h11_max_incomplete_event_size": limits.max_header_bytes,
    }


# --------------------------------------------------------------------------- request bodies


class BodiesFull(Exception):
    """A request body would take the bytes held by a :class:`BodyBudget` past its limit,
    or past its peer's share (the message says which)."""


class BodyBudget:
    """Bytes of request bodies held at once over every connection (one per app), and
    per peer.

    :meth:`take` counts bytes in as they are received and refuses (``False``, nothing
    counted) what would pass ``limit`` (over every peer together) or ``per_peer`` (over
    the connections of one ``peer``: whatever key the caller gives, the gateway the
    client address's host, one shared key when the server gives none); :meth:`give`
    counts them out. The holder gives back what it took once it no longer holds the
    bytes, whatever ended it (a ``finally``): :attr:`held` and :attr:`peers` are then
    back where they were. Not thread-safe (one event loop).

    ``per_peer`` keeps one client from holding the whole of ``limit`` alone (stalled
    bodies on many connections), so that the others' requests still fit. It does not
    stop many peers (addresses) from filling ``limit`` together; and behind a proxy every
    client is one peer (the proxy's address): there give ``per_peer`` as ``limit``."""

    PEER_SHARE = 16 * 1024 * 1024
    """What ``GatewayLimits.max_receiving_bytes_per_peer`` is when not given (within
    ``max_body`` and ``max_receiving_bytes``)."""

    def __init__(self, limit: int, per_peer: int | None = None) -> None:
        """``per_peer``: ``None`` (the default) is ``limit`` (no share below the whole)."""
        per_peer = limit if per_peer is None else per_peer
        if limit < 1:
            raise ValueError("BodyBudget limit must be >= 1")
        if not 1 <= per_peer <= limit:
            raise ValueError("BodyBudget per_peer must be >= 1 and <= limit")
        self.limit = limit
        self.per_peer = per_peer
        self.held = 0
        """Bytes counted in and not yet given back: at most :attr:`limit`."""
        self.peers: dict[str, int] = {}
        """Bytes held per peer (each at most :attr:`per_peer`); a peer holding none has
        no entry, so there are no more entries than bodies being received."""

    def over(self, n: int, peer: str = "") -> str | None:
        """Which bound ``n`` more bytes from ``peer`` would pass now: ``"all"``
        (``limit``), ``"peer"`` (``per_peer``), or ``None`` (they fit; nothing counted)."""
        if self.held + n > self.limit:
            return "all"
        if self.peers.get(peer, 0) + n > self.per_peer:
            return "peer"
        return None

    def fits(self, n: int, peer: str = "") -> bool:
        """Whether ``n`` more bytes from ``peer`` would fit now (nothing counted)."""
        return self.over(n, peer) is None

    def take(self, n: int, peer: str = "") -> bool:
        """Count ``n`` bytes from ``peer`` in, if they fit; ``False`` (nothing counted) if
        not."""
        if not self.fits(n, peer):
            return False
        self.held += n
        if n:
            self.peers[peer] = self.peers.get(peer, 0) + n
        return True

    def give(self, n: int, peer: str = "") -> None:
        """Count ``n`` bytes (taken before from ``peer``) out."""
        self.held -= n
        left = self.peers.get(peer, 0) - n
        if left:
            self.peers[peer] = left
        else:
            self.peers.pop(peer, None)


# --------------------------------------------------------------------------- Host, Origin


def _split_host(value: str) -> tuple[str, str | None]:
    """``host[:port]`` (or ``[v6]:port``) as (lower-case host, port or ``None``); a bare
    IPv6 address (two colons or more, no brackets) is bracketed. A value that is neither
    (``[::1``, ``[::1]x``, ``[::1]:x``) comes back whole as its host: it names no host an
    entry names."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value, None
        host, rest = value[: end + 1], value[end + 1 :]
        if not rest:
            return host, None
        if rest.startswith(":") and _is_port(rest[1:]):
            return host, rest[1:]
        return value, None
    if value.count(":") > 1:
        return f"[{value}]", None
    host, sep, port = value.rpartition(":")
    if sep and _is_port(port):
        return host, port
    return value, None


def _is_port(value: str) -> bool:
    """Whether ``value`` is a port: ASCII digits (``""`` included, as RFC 3986 allows)."""
    return value.isascii() and (value.isdigit() or not value)


@dataclass(frozen=True)
class HostPolicy:
    """Which ``Host`` and ``Origin`` values reach the upstream.

    ``allowed_hosts``: an entry without a port matches that host on any port, one with a
    port (``"example.com:8443"``) that port only, ``"*"`` any host; IPv6 addresses in
    brackets (``"[::1]"``); compared without regard to case. ``allowed_origins``: exact
    origins (``"https://app.example.com"``) allowed besides those (scheme http or https)
    whose host an entry of ``allowed_hosts`` other than ``"*"`` names, and those naming
    the request's own ``Host`` (same origin). ``"*"`` thus admits any ``Host`` but not any
    ``Origin``: a page elsewhere still cannot call the gateway from a browser. A request
    without ``Origin`` is allowed (not a browser's cross-origin request)."""

    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    allowed_origins: tuple[str, ...] = ()

    def host_allowed(self, value: str) -> bool:
        """Whether ``Host: value`` is served."""
        return "*" in self.allowed_hosts or self._named(value)

    def _named(self, value: str) -> bool:
        """Whether an entry of ``allowed_hosts`` other than ``"*"`` matches ``value``."""
        host, port = _split_host(value)
        for entry in self.allowed_hosts:
            if entry == "*":
                continue
            want_host, want_port = _split_host(entry)
            if host == want_host and (want_port is None or want_port == port):
                return True
        return False

    def origin_allowed(self, value: str, host: str | None = None) -> bool:
        """Whether ``Origin: value`` is served (on a request with ``Host: host``); an
        origin that is not a URL (``http://[``, ``http://[zz]:80``: what ``urlsplit``
        refuses) is not. Never raises."""
        origin = value.strip().lower().rstrip("/")
        if origin in (o.strip().lower().rstrip("/") for o in self.allowed_origins):
            return True
        try:
            parts = urlsplit(origin)
        except ValueError:  # an unclosed or invalid [IPv6] host
            return False
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        if host is not None and _split_host(parts.netloc) == _split_host(host):
            return True
        return self._named(parts.netloc)

    def refusal(self, headers: Mapping[str, str]) -> tuple[int, str] | None:
        """``None`` when the request (lower-case header names) is allowed, else its
        status and message: ``400`` without ``Host``, ``421`` for a ``Host`` not
        allowed (a malformed one included), ``403`` for an ``Origin`` not allowed (a
        malformed one included). Never raises, whatever the values."""
        host = headers.get("host")
        if not host:
            return 400, "Missing Host header"
        if not self.host_allowed(host):
            return 421, "Invalid Host header"
        origin = headers.get("origin")
        if origin is not None and not self.origin_allowed(origin, host):
            return 403, "Invalid Origin header"
        return None
