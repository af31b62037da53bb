"""A scripted streamable-HTTP upstream for the gateway tests: an ASGI app that answers as
it is told (no SDK server sends garbage, floods requests or writes one endless event on
command), the rig that puts a real gateway replica (or two) in front of it on loopback,
and the small helpers that write what it sends.

:class:`Upstream` records every request that reached it (method, headers, body), counts
the response POSTs (answer submissions, refusals) it is serving at once, can hold them
open until an event is set, can issue a session id per ``initialize`` and refuse unknown
ones with ``404``, and notices when the gateway leaves a stream it is writing.
:class:`Flood` is one SSE event of any size (or one that never ends), written a piece at
a time as the gateway reads it: the upstream never holds it whole. :class:`PostScreen`
puts a test's own check of each ``POST`` in front of an :class:`Upstream`. A test with a
direct counterpart runs both ways (:data:`VIAS`), reaching the upstream as
:func:`served` does.

Principal A's side: :func:`a_session` and :func:`a_call` begin A's session and call;
:func:`while_a_is_asked` runs something while the prompt of an :func:`asking` upstream is
open, then answers it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import pytest

from fsm.gateway.app import GATEWAY_GUARD
from fsm.gateway.edge import HAS_HTTPTOOLS
from fsm.gateway.ids import EventIdKeys
from fsm.gateway.store import MemoryStore
from fsm.wire.serving import lifespan, on_loopback, whole_body
from support.changes import Changes
from support.gateway import RunningGateway, running_gateway

__all__ = [
    "ANSWER",
    "A_HEAD",
    "B_HEAD",
    "CALL",
    "GUARD",
    "HEAD",
    "INIT",
    "IN_SESSION",
    "PARSERS",
    "PROGRESS",
    "SID",
    "UNKNOWN_SESSION_BODY",
    "VIAS",
    "Flood",
    "HeldCall",
    "HeldCallStream",
    "Kept",
    "Piece",
    "PostScreen",
    "Refusal",
    "Upstream",
    "a_call",
    "a_session",
    "asking",
    "elicit",
    "empty_results",
    "gateway_for",
    "initialize",
    "json_reply",
    "lapses_within",
    "only_a",
    "peak_rss",
    "read_request",
    "read_until",
    "replaying",
    "reset_peak_rss",
    "result",
    "rss",
    "served",
    "sse",
    "sse_end",
    "sse_piece",
    "sse_start",
    "tool_call",
    "two_replicas_for",
    "while_a_is_asked",
]

_T = TypeVar("_T")

PARSERS = pytest.mark.parametrize(
    "http",
    [
        "h11",
        pytest.param(
            "httptools",
            marks=pytest.mark.skipif(not HAS_HTTPTOOLS, reason="httptools not installed"),
        ),
    ],
)
"""Runs a test on each HTTP parser the gateway's edge can use (``http``: uvicorn's
``h11`` and ``httptools``; httptools skipped where it is not installed)."""

VIAS = pytest.mark.parametrize("via", ["direct", "gateway"])
"""Runs a test with a direct counterpart both ways (``via``: ``direct`` or ``gateway``,
for :func:`served`)."""

GUARD = 30.0
"""Hang guard of one wait (seconds): it only elapses when the awaited event never comes."""

PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
"""A progress notification, as the upstream writes it into a call's stream."""
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
"""A client's ``initialize``, as the tests send it (the upstream answers :data:`SID`)."""
CALL = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "x"}}
"""A client's ``tools/call``, id 7 (:func:`tool_call` gives it another id)."""

SID = "hostile-session"
"""The session id the upstream gives every ``initialize`` (unless it issues its own)."""
HEAD = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
"""The headers of a client's POST."""
IN_SESSION = f"Mcp-Session-Id: {SID}"
"""The header line of session :data:`SID`, for a request written as raw bytes."""
UNKNOWN_SESSION_BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": "server-error",
        "error": {"code": -32600, "message": "Session not found (scripted upstream)"},
    }
).encode()
"""The body of the upstream's ``404`` for a session id it did not issue."""
FORBIDDEN_BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": "server-error",
        "error": {"code": -32600, "message": "Forbidden (scripted upstream)"},
    }
).encode()
"""The body of the upstream's ``403`` for credentials it does not accept
(:attr:`Upstream.accepts`)."""
A_HEAD = {**HEAD, "authorization": "Bearer tok-a"}
"""The headers of principal A's POST (token ``tok-a``), before A has a session."""
B_HEAD = {**HEAD, "authorization": "Bearer tok-b", "mcp-session-id": SID}
"""The headers of principal B's POST (token ``tok-b``) naming A's session :data:`SID`."""
ANSWER: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "result": {"action": "accept"}}
"""An answer (accepting) to the prompt :func:`elicit` ``(1)``, the one :func:`asking` asks."""


def sse(event_id: str | None, data: Any, retry: Any = None) -> bytes:
    """One SSE event: ``data`` as it is if a string, else as JSON."""
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if retry is not None:
        lines.append(f"retry: {retry}")
    text = data if isinstance(data, str) else json.dumps(data)
    lines.append(f"data: {text}")
    return ("\n".join(lines) + "\n\n").encode()


def tool_call(rid: Any) -> dict[str, Any]:
    """:data:`CALL` with the id ``rid``."""
    return {**CALL, "id": rid}


def elicit(rid: Any, message: str = "Delete?") -> dict[str, Any]:
    """An ``elicitation/create`` request of the server's, id ``rid``."""
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "elicitation/create",
        "params": {"message": message, "requestedSchema": {"type": "object", "properties": {}}},
    }


def only_a(headers: Mapping[str, str]) -> bool:
    """An :attr:`Upstream.accepts` that accepts principal A's token (``tok-a``) alone."""
    return headers.get("authorization") == "Bearer tok-a"


def parse(raw: bytes) -> list[tuple[str | None, str]]:
    """The events of an SSE body as a client reads them, ``(id, data)`` each (bytes
    that are not UTF-8 decoded as U+FFFD, as HTTP clients decode text)."""
    events = []
    for block in raw.decode("utf-8", "replace").split("\n\n"):
        if not block.strip():
            continue
        eid, data = None, []
        for line in block.split("\n"):
            if line.startswith("id:"):
                eid = line[3:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        events.append((eid, "\n".join(data)))
    return events


def result(rid: Any) -> dict[str, Any]:
    """A tool call's result for request ``rid``."""
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [], "isError": False}}


def rss() -> int:
    """This process's resident set size now, in bytes (``VmRSS``)."""
    return _status_kib("VmRSS") * 1024


def peak_rss() -> int:
    """This process's peak resident set size, in bytes (``VmHWM``; see
    :func:`reset_peak_rss`)."""
    return _status_kib("VmHWM") * 1024


def reset_peak_rss() -> bool:
    """Reset :func:`peak_rss` to the resident set size now; whether the kernel let us
    (``/proc/self/clear_refs``, Linux 4.0 and later)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def _status_kib(name: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {name} in /proc/self/status")


@dataclass
class Flood:
    """One SSE event with ``size`` bytes of data, written ``chunk`` bytes at a time as
    the reader takes them (uvicorn's flow control paces the writes), so the upstream
    never holds it whole. ``end=False``: the blank line that ends an event never comes
    (the upstream then keeps the stream open). After ``pause_at`` bytes of data the
    writing waits for ``resume``. ``written`` counts the data bytes written; ``rss_max``
    is the largest resident set size of this process seen after a write."""

    size: int
    chunk: int = 64 * 1024
    event_id: str | None = "big"
    end: bool = True
    pause_at: int | None = None
    resume: anyio.Event | None = None
    paused: anyio.Event = field(default_factory=anyio.Event)
    """Set when the writing reached ``pause_at``."""
    written: int = 0
    rss_max: int = 0

    async def write(self, send: Any) -> None:
        head = b"" if self.event_id is None else f"id: {self.event_id}\n".encode()
        await sse_piece(send, head + b"data: ")
        piece = b"a" * self.chunk
        while self.written < self.size:  # bounded: size / chunk writes
            if self.pause_at is not None and self.written >= self.pause_at:
                self.paused.set()
                if self.resume is not None:
                    await self.resume.wait()
                self.pause_at = None
            n = min(self.chunk, self.size - self.written)
            await sse_piece(send, piece[:n])
            self.written += n
            self.rss_max = max(self.rss_max, rss())
            # uvicorn's send returns at once, with no checkpoint, once the reader left:
            # yield, so that the upstream notices the reader left
            await anyio.lowlevel.checkpoint()
        if self.end:
            await sse_piece(send, b"\n\n")


Piece = bytes | anyio.Event | Flood
"""What a scripted stream writes: bytes as they are, an event to wait for (as a server
awaits input), or a :class:`Flood`."""


@dataclass
class Upstream:
    """A scripted streamable-HTTP endpoint.

    A ``ping`` gets its empty result at once (JSON), as the specification requires of every
    server (or the event stream ``ping``, if given). Another request POST (a JSON-RPC
    request) gets an event stream of ``script(message, headers)`` if given, else of
    ``call``; then the connection ends cleanly if ``complete``, abruptly if not. A resume
    GET (``Last-Event-ID``) gets the events of ``replay(cursor)``. A fresh GET gets ``202``
    unless ``standalone`` is given: then an event stream of those pieces, kept open until
    the gateway leaves. A POST of a response (an answer submission or a refusal) or a
    notification gets ``202``; a response POST waits for ``answer_hold`` first if it is
    given. ``hold``: a request POST's stream stays open after its script until it is set.

    Sessions: every ``initialize`` gets :data:`SID`, or with ``issue_sessions`` an id of
    its own (``session-1``, ``session-2``, ...). With ``refuse_unknown`` a request whose
    ``Mcp-Session-Id`` the upstream did not issue gets ``404`` with
    :data:`UNKNOWN_SESSION_BODY`.

    Whatever the script, a stream ends early when the gateway leaves it (counted in
    ``left``). ``requests`` records (method, headers, body) of every request that
    reached it, ``response_posts_max`` the most response POSTs served at once; tests
    wait for what it saw with :meth:`wait_until`."""

    call: list[Piece] = field(default_factory=list)
    replay: Callable[[str], Sequence[Piece]] = lambda cursor: []
    complete: bool = True
    requests: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    hold: Any = None  # an anyio.Event: a call's stream stays open until it is set
    set_cookie: bytes | None = None  # a Set-Cookie header on the initialize response
    answered: anyio.Event = field(default_factory=anyio.Event)  # set by an answer POST
    script: Callable[[dict[str, Any], dict[str, str]], Sequence[Piece]] | None = None
    standalone: Sequence[Piece] | None = None
    answer_hold: anyio.Event | None = None
    issue_sessions: bool = False
    refuse_unknown: bool = False
    accepts: Callable[[Mapping[str, str]], bool] | None = None
    """Whether a request's headers carry credentials the upstream accepts (any, when
    ``None``); a request with others (an ``initialize`` aside) gets ``403`` with
    :data:`FORBIDDEN_BODY`, as a server that ties its sessions to a principal answers."""
    ping: Sequence[Piece] | None = None
    """The event stream a ``ping`` gets instead of its result, if given."""
    unchecked: frozenset[str] = frozenset()
    """HTTP methods ``accepts`` is not asked about (an upstream that lets a ``GET``
    through the check it applies to a ``POST``)."""
    unchecked_notifications: bool = False
    """Whether a notification is answered ``202`` without asking ``accepts`` (a server
    whose check is in its protocol layer, which its transport answers before)."""
    response_headers: Sequence[tuple[bytes, bytes]] = ()
    """More fields of every event stream and ``initialize`` answer it sends, as bytes
    (a value that is not ASCII, say)."""
    issued: list[str] = field(default_factory=list)
    """Session ids given out, oldest first."""
    response_posts: int = 0
    """Response POSTs (answers, refusals) being served now."""
    response_posts_max: int = 0
    left: int = 0
    """Streams the gateway left before their script ended."""
    changes: Changes = field(default_factory=Changes)
    """What :meth:`wait_until` waits on: noted at each request, response POST's end and
    stream left."""

    @property
    def session_ids(self) -> list[str | None]:
        """The ``Mcp-Session-Id`` of every request that reached the upstream, in order."""
        return [headers.get("mcp-session-id") for _, headers, _ in self.requests]

    def responses(self, kind: str = "error") -> list[dict[str, Any]]:
        """The response POSTs received: ``"error"`` (refusals) or ``"result"`` (answers)."""
        out = []
        for method, _, body in self.requests:
            msg = json.loads(body) if method == "POST" and body else None
            if isinstance(msg, dict) and "method" not in msg and kind in msg:
                out.append(msg)
        return out

    def resumes(self) -> list[str]:
        """The event ids the resumes that reached the upstream named (``Last-Event-ID`` of
        each ``GET`` carrying one), in order."""
        return [
            headers["last-event-id"]
            for method, headers, _ in self.requests
            if method == "GET" and "last-event-id" in headers
        ]

    def pings(self, token: str) -> int:
        """The ``ping``s with bearer ``token`` that reached the upstream (a gateway's
        probes of that token)."""
        auth = f"Bearer {token}"
        return sum(
            method == "POST" and headers.get("authorization") == auth and b'"ping"' in body
            for method, headers, body in self.requests
        )

    async def wait_until(self, predicate: Callable[[Upstream], bool]) -> None:
        """Return once ``predicate(self)`` holds, checked after each change the upstream
        sees (a request, a response POST's end, a stream left). Guard it with a timeout."""
        await self.changes.until(lambda: predicate(self))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await lifespan(receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        body = await whole_body(receive)
        self.requests.append((scope["method"], headers, body))
        self.changes.note()
        msg: Any = json.loads(body) if body else None
        method = scope["method"]
        is_request = isinstance(msg, dict) and "method" in msg and "id" in msg
        initialize = is_request and method == "POST" and msg.get("method") == "initialize"
        sid = headers.get("mcp-session-id")
        if self.refuse_unknown and not initialize and sid not in self.issued:
            await _reply(send, 404, UNKNOWN_SESSION_BODY, [(b"content-type", b"application/json")])
            return
        notification = isinstance(msg, dict) and "method" in msg and "id" not in msg
        checked = not initialize and method not in self.unchecked
        checked = checked and not (self.unchecked_notifications and notification)
        if self.accepts is not None and checked and not self.accepts(headers):
            await _reply(send, 403, FORBIDDEN_BODY, [(b"content-type", b"application/json")])
            return
        if initialize:
            assert isinstance(msg, dict)
            await self._initialize(msg, send)
            return
        if is_request and method == "POST" and msg.get("method") == "ping" and self.ping is None:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": {}}
            await json_reply(send, 200, json.dumps(reply).encode())
            return
        out: Sequence[Piece]
        if self.ping is not None and is_request and msg.get("method") == "ping":
            out = self.ping
        elif method == "POST" and is_request:
            out = self.script(msg, headers) if self.script is not None else self.call
        elif method == "GET" and "last-event-id" in headers:
            out = self.replay(headers["last-event-id"])
        elif method == "GET" and self.standalone is not None:
            out = self.standalone
        else:
            if isinstance(msg, dict) and "method" not in msg:
                self.answered.set()
                await self._response_post()
            await _reply(send, 202, b"", [])
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), *self.response_headers],
            }
        )
        open_until_left = method == "GET" and "last-event-id" not in headers
        if not await self._stream(out, method, open_until_left, receive, send):
            return
        if self.complete or method == "GET":
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            raise RuntimeError("cut")  # uvicorn drops the connection: an abrupt end

    async def _initialize(self, msg: dict[str, Any], send: Any) -> None:
        sid = f"session-{len(self.issued) + 1}" if self.issue_sessions else SID
        self.issued.append(sid)
        extra = [(b"set-cookie", self.set_cookie)] if self.set_cookie else []
        head = [(b"content-type", b"application/json"), (b"mcp-session-id", sid.encode())]
        head += self.response_headers
        await _reply(send, 200, json.dumps(result(msg["id"])).encode(), head + extra)

    async def _response_post(self) -> None:
        self.response_posts += 1
        self.response_posts_max = max(self.response_posts_max, self.response_posts)
        self.changes.note()
        try:
            if self.answer_hold is not None:
                await self.answer_hold.wait()
        finally:
            self.response_posts -= 1
            self.changes.note()

    async def _stream(
        self, out: Sequence[Piece], method: str, open_until_left: bool, receive: Any, send: Any
    ) -> bool:
        """Write ``out`` (then wait for ``hold`` on a POST, or for the gateway to leave a
        fresh GET); ``False`` if the gateway left first."""
        finished = False

        async def play() -> None:
            nonlocal finished
            for piece in out:
                if isinstance(piece, anyio.Event):
                    await piece.wait()
                elif isinstance(piece, Flood):
                    await piece.write(send)
                else:
                    await sse_piece(send, piece)
            if self.hold is not None and method == "POST":
                await self.hold.wait()
            if open_until_left:
                await anyio.sleep_forever()
            finished = True

        await until_left(receive, play)
        if not finished:
            self.left += 1
            self.changes.note()
        return finished


def asking(up: Upstream) -> Upstream:
    """``up``, whose call (:data:`CALL`, id 7) asks prompt 1 (:func:`elicit`) and ends
    with its result once an answer reaches ``up`` (:attr:`Upstream.answered`)."""
    up.call = [sse("e1", elicit(1)), up.answered, sse("e2", result(7))]
    return up


def replaying(body: bytes, receive: Any) -> Callable[[], Awaitable[Any]]:
    """An ASGI ``receive`` that gives ``body`` (a request's body, already read whole from
    ``receive``) in one message, then what ``receive`` gives (its disconnect)."""
    given = False

    async def again() -> Any:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


class PostScreen:
    """An upstream in front of ``inner`` that sees each ``POST`` first: :meth:`screen`
    gets its headers and JSON message and answers it itself (``True``), or lets it go on
    to ``inner`` with its body as it came (``False``). Any other request, and the
    lifespan, go to ``inner`` untouched."""

    def __init__(self, inner: Upstream) -> None:
        self.inner = inner

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.inner(scope, receive, send)
            return
        body = await whole_body(receive)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if not await self.screen(headers, json.loads(body) if body else None, send):
            await self.inner(scope, replaying(body, receive), send)

    async def screen(self, headers: dict[str, str], msg: Any, send: Any) -> bool:
        """Answer this ``POST`` (``msg``: its JSON body, ``None`` when it has none) with
        ``send`` and return ``True``, or return ``False`` to let it go on to ``inner``."""
        raise NotImplementedError


async def until_left(receive: Any, work: Callable[[], Awaitable[Any]]) -> None:
    """Run ``work`` until the reader of the response goes (``http.disconnect``), or until
    it returns."""
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        await work()
        tg.cancel_scope.cancel()


async def read_request(
    scope: Any, receive: Any, *, lenient: bool = False
) -> tuple[dict[str, str], Any]:
    """An HTTP request's headers (decoded) and its JSON body (``{}`` when it has none);
    ``lenient``: a byte that is not UTF-8 read as U+FFFD, as a Node (``TextDecoder``) or
    Go (``encoding/json``) server reads it, where Python's ``json`` refuses the body."""
    headers = {k.decode(): v.decode() for k, v in scope["headers"]}
    body = await whole_body(receive)
    text = body.decode("utf-8", "replace") if lenient else body
    return headers, json.loads(text) if body else {}


async def sse_start(send: Any) -> None:
    """Start a ``200`` SSE response."""
    headers = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})


async def sse_piece(send: Any, data: bytes) -> None:
    """Send ``data`` as the next piece of a response, more to come."""
    await send({"type": "http.response.body", "body": data, "more_body": True})


async def sse_end(send: Any) -> None:
    """End a response sent in pieces."""
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def sse_reply(send: Any, pieces: Sequence[bytes]) -> None:
    """A whole ``200`` SSE response of ``pieces``, each sent as it is."""
    await sse_start(send)
    for piece in pieces:
        await sse_piece(send, piece)
    await sse_end(send)


async def json_reply(send: Any, status: int, body: bytes, extra: Any = ()) -> None:
    """A whole ``application/json`` response of ``status`` with ``body`` and the ``extra``
    headers."""
    await _reply(send, status, body, [(b"content-type", b"application/json"), *extra])


async def _reply(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def empty_results(scope: Any, receive: Any, send: Any) -> None:
    """An MCP endpoint that answers every request with an empty JSON-RPC result (JSON,
    session ``edge-test``) and anything else (a notification, a response) with ``202``."""
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
        return
    body = await whole_body(receive)
    msg = json.loads(body) if body else {}
    if "id" not in msg:
        await _reply(send, 202, b"", [])
        return
    payload = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {}}).encode()
    await json_reply(send, 200, payload, [(b"mcp-session-id", b"edge-test")])


Refusal = tuple[int, bytes, Sequence[tuple[bytes, bytes]]]
"""A resume refused: its status, body and extra headers (the body is sent as JSON)."""


class SessionApp:
    """An upstream of one session, for a script of its own: ``initialize`` gets the
    session :data:`SID`; every other request goes to :meth:`serve`. ``requests`` records
    each request (its method, headers and JSON body)."""

    lenient = False
    """Whether it reads its requests as :func:`read_request` does when ``lenient``."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        headers, msg = await read_request(scope, receive, lenient=self.lenient)
        self.requests.append((scope["method"], headers, msg))
        if msg.get("method") == "initialize":
            session = [(b"mcp-session-id", SID.encode())]
            await json_reply(send, 200, json.dumps(result(msg["id"])).encode(), session)
            return
        await self.serve(scope, headers, msg, receive, send)

    async def serve(
        self, scope: Any, headers: dict[str, str], msg: Any, receive: Any, send: Any
    ) -> None:
        """Answer a request other than ``initialize``."""
        raise NotImplementedError


class HeldCallStream(SessionApp):
    """An upstream whose call stream sends one event (``e1``) and is then held until its
    reader goes (``held`` meanwhile); a resume ``GET`` (its ``Last-Event-ID`` recorded in
    ``resumed_from``) gets :meth:`refusal`'s reply when it gives one (counted in
    ``refused``), else the call's result as ``e2``. ``initialize`` gets the session
    :data:`SID`; any other request :meth:`other`'s reply."""

    def __init__(self) -> None:
        super().__init__()
        self.held = False
        self.refused = 0
        self.resumed_from: list[str] = []

    def refusal(self) -> Refusal | None:
        """How this resume is refused, or ``None`` to let it through."""
        return None

    def other(self, msg: Any) -> tuple[int, bytes]:
        """The status and JSON body for a request other than those above: ``202``."""
        return 202, b""

    async def serve(
        self, scope: Any, headers: dict[str, str], msg: Any, receive: Any, send: Any
    ) -> None:
        if msg.get("method") == "tools/call":
            self.held = True
            await sse_start(send)
            await sse_piece(send, sse("e1", {"jsonrpc": "2.0", "method": "x/progress"}))
            while (await receive())["type"] != "http.disconnect":
                pass  # held until its connection goes
            self.held = False
        elif scope["method"] == "GET" and "last-event-id" in headers:
            self.resumed_from.append(headers["last-event-id"])
            refused = self.refusal()
            if refused is not None:
                self.refused += 1
                await json_reply(send, *refused)
                return
            await sse_reply(send, [sse("e2", result(7))])
        else:
            await json_reply(send, *self.other(msg))


@contextlib.asynccontextmanager
async def gateway_for(
    upstream: Upstream | PostScreen, **kwargs: Any
) -> AsyncIterator[RunningGateway]:
    """``upstream`` served on loopback, and a gateway replica in front of it (keywords go
    to :func:`~support.gateway.running_gateway`; the gateway's guard policy with a short
    backoff unless ``config`` is given)."""
    kwargs.setdefault("config", replace(GATEWAY_GUARD, backoff_initial_s=0.01, backoff_max_s=0.02))
    async with on_loopback(upstream) as url, running_gateway(url, **kwargs) as gw:
        yield gw


@contextlib.asynccontextmanager
async def served(
    via: str, upstream: Any, **kwargs: Any
) -> AsyncIterator[tuple[str, RunningGateway | None]]:
    """The URL clients use to reach ``upstream`` (an ASGI app), and the gateway replica
    they reach it through: ``upstream`` itself on loopback (``via`` ``direct``; no
    gateway) or a gateway replica in front of it (``gateway``; keywords go to
    :func:`gateway_for`)."""
    if via == "direct":
        async with on_loopback(upstream) as url:
            yield url, None
    else:
        async with gateway_for(upstream, **kwargs) as gw:
            yield gw.url, gw


async def initialize(http: Any, url: str) -> None:
    """Begin a session through ``url`` with :data:`INIT` (``http``: an HTTP client); its
    id is :data:`SID`."""
    r = await http.post(url, json=INIT, headers=HEAD)
    assert r.status_code == 200 and r.headers["mcp-session-id"] == SID


async def a_session(http: Any, url: str) -> dict[str, str]:
    """Principal A begins a session through ``url`` (``http``: an HTTP client): A's
    headers from then on, in session :data:`SID`."""
    assert (await http.post(url, json=INIT, headers=A_HEAD)).status_code == 200
    return {**A_HEAD, "mcp-session-id": SID}


@contextlib.asynccontextmanager
async def two_replicas_for(
    upstream: Upstream | PostScreen, **kwargs: Any
) -> AsyncIterator[tuple[RunningGateway, RunningGateway]]:
    """``upstream`` served on loopback, and two gateway replicas in front of it that read
    each other's event ids (one key for both, as replicas behind one balancer share it);
    keywords (a shared ``store``, say) go to both replicas'
    :func:`~support.gateway.running_gateway`."""
    shared = {"id_keys": EventIdKeys.generate(), **kwargs}
    async with (
        on_loopback(upstream) as url,
        running_gateway(url, **shared) as first,
        running_gateway(url, **shared) as second,
    ):
        yield first, second


async def read_until(pieces: AsyncIterator[bytes], word: bytes) -> bytes:
    """What ``pieces`` (a response's raw pieces, as an async iterator) give until ``word``
    shows in them (within :data:`GUARD`)."""
    seen = b""
    with anyio.fail_after(GUARD):
        while word not in seen:
            seen += await pieces.__anext__()
    return seen


@contextlib.asynccontextmanager
async def a_call(http: Any, url: str) -> AsyncIterator[tuple[dict[str, str], AsyncIterator[bytes]]]:
    """Principal A begins a session through ``url`` (:func:`a_session`) and calls a tool
    (:data:`CALL`): A's headers and the raw pieces of the call's stream, open until the
    block exits (then A's connection breaks)."""
    a_head = await a_session(http, url)
    async with http.stream("POST", url, json=CALL, headers=a_head) as stream:
        yield a_head, stream.aiter_raw()


async def while_a_is_asked(
    http: Any,
    url: str,
    up: Upstream,
    meanwhile: Callable[[], Awaitable[_T]],
    answer_headers: Mapping[str, str] | None = None,
) -> tuple[_T, int, bool, list[Any]]:
    """A begins a session through ``url`` (:func:`a_session`) and calls a tool
    (:data:`CALL`) until its prompt shows (``up`` scripted by :func:`asking`); then
    ``meanwhile()`` runs; then A answers (:data:`ANSWER`; ``answer_headers`` over A's own
    headers, if given). Returns what ``meanwhile()`` returned, the status of A's answer,
    whether an answer reached ``up`` (within :data:`GUARD`), and the messages of A's
    call: up to its end if an answer reached ``up``, else up to the prompt."""
    async with a_call(http, url) as (a_head, pieces):
        seen = await read_until(pieces, b"elicitation/create")
        got = await meanwhile()
        a = await http.post(url, json=ANSWER, headers={**a_head, **(answer_headers or {})})
        with anyio.move_on_after(GUARD):
            await up.answered.wait()
        reached = up.answered.is_set()
        if reached:
            with anyio.move_on_after(GUARD):
                async for piece in pieces:
                    seen += piece
    return got, a.status_code, reached, [json.loads(d) for _, d in parse(seen) if d]


class HeldCall(SessionApp):
    """An upstream that gives ``initialize`` the session :data:`SID` and answers anything
    else but a ``tools/call`` with ``202`` (a ``ping`` with ``404``, the session gone,
    when ``ping_expires``). A ``tools/call`` sets ``arrived`` and gets no
    byte until ``release`` is set; then an event stream that ``then`` says: ``"result"``
    the call's result, then a clean end; ``"held"`` no event until the gateway leaves;
    ``"cut"`` a progress notification, then an abrupt end. ``methods`` records the
    method of every request that reached it."""

    def __init__(self, then: str, *, ping_expires: bool = False) -> None:
        super().__init__()
        self.then = then
        self.ping_expires = ping_expires
        self.arrived = anyio.Event()
        self.release = anyio.Event()

    @property
    def methods(self) -> list[str]:
        return [method for method, _, _ in self.requests]

    async def serve(
        self, scope: Any, headers: dict[str, str], msg: Any, receive: Any, send: Any
    ) -> None:
        if msg.get("method") == "ping" and self.ping_expires:
            await json_reply(send, 404, UNKNOWN_SESSION_BODY)
            return
        if msg.get("method") != "tools/call":
            await json_reply(send, 202, b"")
            return
        self.arrived.set()
        await self.release.wait()
        await sse_start(send)
        if self.then == "result":
            await sse_piece(send, sse("e1", result(msg["id"])))
            await sse_end(send)
            return
        if self.then == "cut":
            await sse_piece(send, sse("e1", PROGRESS))
            raise RuntimeError("cut")  # uvicorn drops the connection: an abrupt end
        while (await receive())["type"] != "http.disconnect":
            pass  # held, with no event, until the gateway leaves


class Kept(MemoryStore):
    """A memory store that counts the extensions of session records it is asked for:
    :attr:`kept` in all, :attr:`kept_of` per session."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kept = 0
        self.kept_of: dict[str, int] = {}
        self.changed = anyio.Event()

    async def keep_session(self, session: str) -> None:
        await super().keep_session(session)
        self.kept += 1
        self.kept_of[session] = self.kept_of.get(session, 0) + 1
        self.changed.set()
        self.changed = anyio.Event()

    async def kept_once_more(self, before: int, session: str | None = None) -> None:
        """Until the records (of ``session``, if given) were extended more than
        ``before`` times."""
        while (self.kept if session is None else self.kept_of.get(session, 0)) <= before:
            await self.changed.wait()


async def lapses_within(store: Any, session: str, rid: Any, seconds: float) -> bool:
    """Whether the claim of request ``rid`` of ``session`` in ``store`` (a
    :class:`~fsm.gateway.store.StateStore`) lapses within ``seconds``: watched as they go
    by (a replica that keeps serving the prompt renews its lease all along)."""
    with anyio.move_on_after(seconds):
        while not (await store.claim_status(session, rid)).lapsed:
            await anyio.sleep(0.02)
    return bool((await store.claim_status(session, rid)).lapsed)
