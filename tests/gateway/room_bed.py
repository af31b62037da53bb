"""What the tests of room at ``max_sessions`` share (``test_session_eviction.py``,
``test_full_table.py``): a replica bounded at one session (:data:`ONE_SESSION`), A's
prompt shown and A's connection broken (:func:`a_prompt_shown`), the replica seeing the
end of A's requests (:func:`no_request_in_flight`), a new session asked for
(:func:`new_session`), and a poll of the replica's state (:func:`until`); a replica at
one session with a client for it (:func:`at_one_session`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx2

from fsm.gateway.app import GatewayLimits
from tests.gateway import scripted_upstream as scripted

__all__ = [
    "ONE_SESSION",
    "STEP",
    "a_prompt_left",
    "a_prompt_shown",
    "at_one_session",
    "new_session",
    "no_request_in_flight",
    "until",
]

STEP = 5.0
"""Safety bound of one wait: it only elapses when the awaited thing never comes."""

ONE_SESSION = GatewayLimits(max_sessions=1, standalone_hold_s=0)
"""One session held before room must be made for the next (``max_sessions``), and no
standalone ``GET`` opened ahead of a client's (``standalone_hold_s`` 0)."""


async def new_session(http: httpx2.AsyncClient, url: str) -> httpx2.Response:
    """An ``initialize``: a new session, served if the replica has room for it."""
    return await http.post(url, json=scripted.INIT, headers=scripted.HEAD)


async def until(pred: Callable[[], bool], seconds: float = STEP) -> bool:
    """Poll ``pred()`` (an observation of state, not a race provoker) up to ``seconds``;
    whether it holds."""
    with anyio.move_on_after(seconds):
        while not pred():
            await anyio.sleep(0.01)
    return bool(pred())


async def a_prompt_shown(http: httpx2.AsyncClient, url: str) -> tuple[str, dict[str, str]]:
    """A begins a session through ``url`` (its id issued by the upstream) and calls a tool
    until its prompt shows (claimed here); then A's connection breaks. A's session id and
    headers."""
    r = await new_session(http, url)
    sid = r.headers["mcp-session-id"]
    a_head = {**scripted.HEAD, "mcp-session-id": sid}
    async with http.stream("POST", url, json=scripted.CALL, headers=a_head) as stream:
        await scripted.read_until(stream.aiter_raw(), b"elicitation/create")
    return sid, a_head


async def no_request_in_flight(gw: Any, sid: str) -> Any:
    """Held session ``sid`` of the running gateway ``gw``, once the replica saw the end of
    each of its requests (a client's closed connection reaches it a moment later)."""
    session = gw.gateway._sessions[sid]
    assert await until(lambda: not session.busy), "a request of the session never ended"
    return session


async def a_prompt_left(gw: Any, http: httpx2.AsyncClient) -> tuple[str, dict[str, str], Any]:
    """:func:`a_prompt_shown` through the running gateway ``gw``, then
    :func:`no_request_in_flight`: A's session id, headers and held session, A's prompt
    shown and none of A's requests under way."""
    sid, a_head = await a_prompt_shown(http, gw.url)
    return sid, a_head, await no_request_in_flight(gw, sid)


@contextlib.asynccontextmanager
async def at_one_session(
    upstream: Any, **gateway: Any
) -> AsyncIterator[tuple[Any, httpx2.AsyncClient]]:
    """A replica in front of ``upstream`` bounded at :data:`ONE_SESSION` (unless
    ``gateway`` gives ``limits``; other keywords as :func:`scripted_upstream.gateway_for`'s),
    and an HTTP client whose requests wait up to two :data:`STEP`."""
    gateway.setdefault("limits", ONE_SESSION)
    async with (
        scripted.gateway_for(upstream, **gateway) as gw,
        httpx2.AsyncClient(timeout=STEP * 2) as http,
    ):
        yield gw, http
