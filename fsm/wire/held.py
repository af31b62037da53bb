"""A relay that holds a call's stream half-open, as a server does that never saw its client go.

:func:`holding_tier` runs a :class:`HoldingRelay` as a rig's middle tier
(:data:`fsm.wire.rig.MiddleTier`): a relay on 127.0.0.1 between the fault proxy and the
demo server that passes every request on to the server. When the client's side of a
POST's event stream goes (the fault proxy cuts it), the relay keeps the server's side
open and goes on reading it: the server still holds the old connection, as a server does
whose client vanished without a FIN. While it does, the relay refuses every resume (a
``GET`` with ``Last-Event-ID``) the way a server holding a stream refuses a second reader
(:class:`Refusal`: the TypeScript SDK's 409, a 409 with ``Retry-After`` as IBM
ContextForge's listener claim answers, Render's 400 "session already exists").

It lets go (closes the server's side, so the server sees its client go) at the first
refusal at which it has refused at least ``min_refusals`` resumes and held the connection
for at least ``hold_s`` seconds: the decision is taken at an event, a refusal, never on a
timer (the time is only read), so a slow machine makes the hold longer, never flaky. The
next resume reaches the server, which by then has let the old stream go (the proxy's
ordering headers, passed on, make it finish the cut exchange first).

One connection is held per relay (the first event stream whose client goes); every other
one is relayed as it is, its server side closed when its client goes. asyncio only
(uvicorn).
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio

from fsm.wire.sdk import hx
from fsm.wire.serving import lifespan, serving, whole_body

__all__ = [
    "CLAIMED_409",
    "RENDER_400",
    "TYPESCRIPT_409",
    "HoldingRelay",
    "HoldingTier",
    "Refusal",
    "holding_tier",
]

_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "host", "upgrade"}
)


@dataclass(frozen=True)
class Refusal:
    """How the relay refuses a resume while it holds the old connection."""

    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()


TYPESCRIPT_409 = Refusal(
    409,
    json.dumps(
        {
            "jsonrpc": "2.0",
            "error": {
                "code": -32000,
                "message": "Conflict: Stream already has an active connection",
            },
            "id": None,
        }
    ).encode(),
    "application/json",
)
"""The TypeScript SDK server's answer while the old stream is still mapped (1.32.2)."""

CLAIMED_409 = Refusal(409, b"Conflict", headers=(("retry-after", "1"),))
"""A 409 with ``Retry-After``, as a single-listener claim is refused (IBM ContextForge)."""

RENDER_400 = Refusal(400, b"Session registration failed: session already exists")
"""Render's hosted server, for about two minutes after the old stream went."""


@dataclass
class HoldingRelay:
    """The relay (an ASGI app; see the module docstring). ``refused`` holds, for each
    refusal, the seconds since the client's side went; ``released_after`` the seconds
    the old connection was held (``None`` while it is, or before)."""

    upstream: str
    refusal: Refusal
    hold_s: float
    min_refusals: int = 3
    held_at: float | None = None
    refused: list[float] = field(default_factory=list)
    released_after: float | None = None
    _let_go: anyio.Event = field(default_factory=anyio.Event)
    _http: Any = None

    @property
    def holding(self) -> bool:
        """Whether the server's side of a stream whose client went is still held open."""
        return self.held_at is not None and self.released_after is None

    def let_go(self) -> None:
        """Let go of a held connection now (by command: its client gave up resuming)."""
        if self.holding:
            assert self.held_at is not None
            self.released_after = time.monotonic() - self.held_at
        self._let_go.set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        body = await whole_body(receive)
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in scope["headers"]
            if k.decode("latin-1").lower() not in _HOP_BY_HOP
        ]
        resume = scope["method"] == "GET" and any(k.lower() == "last-event-id" for k, _ in headers)
        if resume and self.holding:
            await self._refuse(send)
            return
        base = urlsplit(self.upstream)
        query = scope.get("query_string", b"").decode("latin-1")
        url = f"{base.scheme}://{base.netloc}{scope['path']}" + (f"?{query}" if query else "")
        request = self._http.build_request(scope["method"], url, headers=headers, content=body)
        resp = await self._http.send(request, stream=True)
        try:
            out = [
                (k.encode("latin-1"), v.encode("latin-1"))
                for k, v in resp.headers.multi_items()
                if k.lower() not in _HOP_BY_HOP and k.lower() != "content-length"
            ]
            await send({"type": "http.response.start", "status": resp.status_code, "headers": out})
            stream = resp.headers.get("content-type", "").startswith("text/event-stream")
            may_hold = stream and scope["method"] == "POST" and self.held_at is None
            await self._relay(resp, receive, send, may_hold)
        finally:
            await resp.aclose()  # the server sees its client go

    async def _relay(self, resp: Any, receive: Any, send: Any, may_hold: bool) -> None:
        """Pass the body on until it ends or its client goes; a stream that may be held
        is read on after its client went, until the relay lets go."""
        held = ended = False
        async with anyio.create_task_group() as tg:

            async def client_gone() -> None:
                nonlocal held
                while (await receive())["type"] != "http.disconnect":
                    pass  # (also said once the response is complete: ``ended`` then)
                if may_hold and not ended and self.held_at is None:
                    held, self.held_at = True, time.monotonic()
                    await self._let_go.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(client_gone)
            async for chunk in resp.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            ended = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            tg.cancel_scope.cancel()
        if held and self.held_at is not None and self.released_after is None:
            self.released_after = time.monotonic() - self.held_at  # the server ended it

    async def _refuse(self, send: Any) -> None:
        assert self.held_at is not None
        held = time.monotonic() - self.held_at
        self.refused.append(held)
        r = self.refusal
        headers = [(b"content-type", r.content_type.encode())]
        headers += [(k.encode(), v.encode()) for k, v in r.headers]
        headers.append((b"content-length", str(len(r.body)).encode()))
        await send({"type": "http.response.start", "status": r.status, "headers": headers})
        await send({"type": "http.response.body", "body": r.body, "more_body": False})
        if len(self.refused) >= self.min_refusals and held >= self.hold_s:
            self.released_after = held
            self._let_go.set()


@contextlib.asynccontextmanager
async def holding_tier(
    upstream: str, *, refusal: Refusal, hold_s: float, min_refusals: int = 3
) -> AsyncIterator[HoldingTier]:
    """A :class:`HoldingRelay` for ``upstream`` served on 127.0.0.1 until the block exits
    (a rig's middle tier: ``functools.partial(holding_tier, refusal=..., hold_s=...)``)."""
    relay = HoldingRelay(upstream, refusal, hold_s, min_refusals)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    url = f"http://127.0.0.1:{port}{urlsplit(upstream).path}"
    try:
        async with hx.AsyncClient(timeout=hx.Timeout(30.0, read=None)) as http:
            relay._http = http
            async with serving(relay, sock, shutdown_timeout=0.0):
                yield HoldingTier(url, relay)
                relay._let_go.set()  # nothing stays held past the rig
    finally:
        sock.close()


@dataclass
class HoldingTier:
    """What :func:`holding_tier` yields: ``url`` (where the proxy relays) and the relay."""

    url: str
    relay: HoldingRelay
