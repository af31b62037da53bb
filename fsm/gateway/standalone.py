"""A session's standalone ``GET`` stream, opened upstream ahead of its client's.

Servers send a request that belongs to no client request (a tool's sampling or
elicitation sent as the server's own, a ``list_changed`` notification) on the session's
standalone ``GET`` stream, and a message sent while no ``GET`` is attached is not
delivered (the TypeScript SDK's server and mcp 2.3.0's store it for a replay that a fresh
``GET`` never asks for). A client opens its ``GET`` as its ``notifications/initialized``
is answered and sends its next request at once; directly, its ``GET`` reaches the server
first, but behind a proxy the two race on separate connections. So the gateway opens the
session's ``GET`` itself (:class:`StandaloneAhead`) when the upstream accepts the
session's ``notifications/initialized``, and waits for the response's head (at most
:data:`HEAD_WAIT_S`) before the client gets its ``202``: once the client can send
anything else, the server has a ``GET`` attached. The client's own fresh ``GET`` then
takes that response instead of opening another.

Authority: the ``GET`` carries the notification's credentials (``Authorization`` and
``Cookie``, which the upstream just accepted for the session) and only the session's
own headers besides (``Accept``, ``Mcp-Session-Id``, ``MCP-Protocol-Version``); only a
client ``GET`` whose credentials the upstream accepted for the session takes it (any
other is forwarded as it came). A response other than ``200`` with an event stream (a
server without a standalone stream answers ``405``, one that authenticates by another
header ``401``) is closed and the client's ``GET`` goes upstream as usual. And only the
client that opened it takes it: a ``GET`` with the notification's credentials and the
same query string (an upstream may authenticate by a key in the URL); a ``GET`` of
anyone else the upstream accepted for the session goes upstream as it came, and the
held stream stays for its opener.

Bounds: the held response is not read until a client takes it: what the server sends
meanwhile waits in the connection (about 128 KiB in the gateway's HTTP client, then the
sockets' buffers; a server writing more waits, as it waits for a slow client). If no
client ``GET`` takes it within ``hold_s`` (``GatewayLimits.standalone_hold_s``), it is
closed: the server sees its reader go, and what it sent to it is lost as it would be
with no ``GET`` attached. It is also closed with its session. Only the first stream of a
session is opened ahead, and none when the client's own ``GET`` came first.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

import anyio

from fsm.adapters._transport.http import opens_stream

__all__ = ["HEAD_WAIT_S", "StandaloneAhead", "claimant", "is_initialized"]

logger = logging.getLogger(__name__)

HEAD_WAIT_S = 1.0
"""Seconds the ``202`` to ``notifications/initialized`` waits at most for the head of
the ``GET`` opened ahead; a server slower than that to answer it gets the client's
next request first (the ``GET`` goes on opening and is held as usual)."""

SESSION_HEADERS = ("mcp-session-id", "mcp-protocol-version")
"""Headers of the client's notification the ``GET`` opened ahead repeats."""

State = Literal["idle", "opening", "held", "over"]


def is_initialized(body: Any) -> bool:
    """Whether a POST's parsed body is the ``notifications/initialized`` notification."""
    return (
        isinstance(body, dict)
        and body.get("method") == "notifications/initialized"
        and "id" not in body
    )


def claimant(credentials: Sequence[str], query: bytes) -> bytes:
    """Who a client request is, as far as the gateway's trust goes: a SHA-256 digest of
    its credentials (the gateway's ``credentials_of`` its headers) and the query string of
    its URL. Two requests are the same claimant exactly when both are equal; what a
    session keeps of each claimant is 32 bytes, however long its cookies or query."""
    digest = hashlib.sha256()
    for part in (*(value.encode("utf-8", "surrogatepass") for value in credentials), query):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.digest()


def ahead_headers(headers: Mapping[str, str], credentials: Mapping[str, str]) -> dict[str, str]:
    """The ``GET``'s headers: ``Accept``, ``Accept-Encoding: identity``, the session's
    headers of the client's request ``headers``, and ``credentials`` (those the upstream
    accepted with that request). A request with no ``Accept-Encoding`` lets the upstream
    pick any coding (RFC 9110, section 12.5.3); the stream is for a client ``GET`` still
    to come, whose codings are unknown, and must be one the guard reads: none."""
    out = {"accept": "text/event-stream", "accept-encoding": "identity"}
    out.update({name: headers[name] for name in SESSION_HEADERS if name in headers})
    out.update(credentials)
    return out


class StandaloneAhead:
    """One session's standalone ``GET`` opened ahead (see the module docstring).

    States: ``idle`` (nothing opened), ``opening`` (sent, no head yet), ``held`` (an open
    event stream no client took yet), ``over`` (taken, closed, refused, or never to be
    opened because the client's own ``GET`` came first). Driven from one event loop."""

    def __init__(self) -> None:
        self.state: State = "idle"
        self._owner: bytes | None = None
        self._resp: Any = None
        self._settled = anyio.Event()
        self._taken = anyio.Event()

    def wanted(self) -> bool:
        """Whether the stream is still to be opened ahead (nothing opened, no client
        ``GET`` seen)."""
        return self.state == "idle"

    async def open(
        self,
        send: Callable[[], Awaitable[Any]],
        spawn: Callable[[Callable[[Any], Awaitable[None]], Any], object],
        hold_s: float,
        owner: bytes,
    ) -> None:
        """Open the stream: ``send()`` sends the ``GET`` and returns its response (head
        read), in a task ``spawn`` starts in the session's work (cancelled with it); wait
        for the head at most :data:`HEAD_WAIT_S`. The response is held ``hold_s`` seconds
        for the client ``owner`` names (:func:`claimant`) to :meth:`take`, then closed."""
        if self.state != "idle":
            return
        self.state, self._owner = "opening", owner

        async def run(_: Any) -> None:
            resp = None
            try:
                try:
                    resp = await send()
                except Exception as exc:  # the client's own GET will go upstream
                    logger.info("standalone GET opened ahead failed: %s", type(exc).__name__)
                if resp is not None and self.state == "opening" and opens_stream(resp):
                    self._resp, self.state = resp, "held"
                    resp = None
                else:
                    self.state = "over"
                self._settled.set()
                if self.state == "held":
                    with anyio.move_on_after(hold_s):
                        await self._taken.wait()
            finally:
                self._settled.set()
                with anyio.CancelScope(shield=True):
                    if self.state == "held":  # no client took it
                        self.state = "over"
                        resp, self._resp = self._resp, None
                    if resp is not None:
                        with contextlib.suppress(Exception):
                            await resp.aclose()

        spawn(run, None)
        with anyio.move_on_after(HEAD_WAIT_S):
            await self._settled.wait()

    async def take(self, claimant: bytes) -> Any:
        """For a client's fresh ``GET`` with credentials the upstream accepted for the
        session: the held response (waiting for one being opened) if ``claimant`` is its
        opener, else ``None`` (the client's ``GET`` goes upstream itself; from then on
        nothing is opened ahead)."""
        if self.state == "idle":
            self.state = "over"
            return None
        if claimant != self._owner:
            return None
        if self.state == "opening":
            await self._settled.wait()
        if self.state != "held":
            return None
        resp, self._resp, self.state = self._resp, None, "over"
        self._taken.set()
        return resp

    def seen_get(self) -> None:
        """A client's fresh ``GET`` went upstream itself: open nothing ahead."""
        if self.state == "idle":
            self.state = "over"
