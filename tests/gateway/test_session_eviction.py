"""Which held session a replica at ``max_sessions`` lets go, and when: a real gateway
replica (uvicorn, in this process) on loopback in front of the scripted upstream
(:mod:`scripted_upstream`).

Room is made only for a session the upstream accepted: a request that is never held (a
made-up session id the upstream answers ``404``, a preflight, an ``initialize`` the
upstream refuses) lets no held session go. A session with work under way is not let
go: an answer submission the guard will retry after its backoff (the client was told
``202``), a prompt this replica presented that still awaits its answer; a new session is
refused ``503`` while every held one has work under way, and served once one has none.
Past ``session_idle_s`` with no request, a prompt no longer keeps its session. A session
the upstream accepts while no room can be made is served but not held: held sessions
never pass ``max_sessions``.

Every wait is for something observed (a byte read, a request the upstream saw, a
counter); timeouts only guard against hangs."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import anyio
import httpx2
import pytest

from fsm.gateway.app import GATEWAY_GUARD, GatewayLimits
from tests.gateway import scripted_upstream as scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

STEP = 5.0
"""Safety bound of one wait: it only elapses when the awaited thing never comes."""

PING = {"jsonrpc": "2.0", "id": "b", "method": "ping"}


class RefusesInitializeOfB(scripted.PostScreen):
    """An upstream that refuses (``401``) an ``initialize`` carrying principal B's token
    (``tok-b``), counted in ``refused``; everything else goes to ``inner``."""

    def __init__(self, inner: scripted.Upstream) -> None:
        super().__init__(inner)
        self.refused = 0

    async def screen(self, headers: dict[str, str], msg: Any, send: Any) -> bool:
        initialize = isinstance(msg, dict) and msg.get("method") == "initialize"
        if not (initialize and headers.get("authorization") == "Bearer tok-b"):
            return False
        self.refused += 1
        await send({"type": "http.response.start", "status": 401, "headers": []})
        await send({"type": "http.response.body", "body": b"unauthorized"})
        return True


class FirstAnswerUnavailable(scripted.PostScreen):
    """An upstream whose first JSON-RPC response POST (an answer submission) gets ``503``
    without being taken (``refused`` is set then); the rest go to ``inner``."""

    def __init__(self, inner: scripted.Upstream) -> None:
        super().__init__(inner)
        self.refused = anyio.Event()

    async def screen(self, headers: dict[str, str], msg: Any, send: Any) -> bool:
        answer = isinstance(msg, dict) and "method" not in msg
        if not answer or self.refused.is_set():
            return False
        await send({"type": "http.response.start", "status": 503, "headers": []})
        await send({"type": "http.response.body", "body": b"busy"})
        self.refused.set()
        return True


class GatedCalls(scripted.PostScreen):
    """An upstream that holds back a ``tools/call`` of session ``sid`` until ``gate`` is
    set (``arrived`` is set when one comes); everything goes on to ``inner``."""

    def __init__(self, inner: scripted.Upstream, sid: str) -> None:
        super().__init__(inner)
        self.sid = sid
        self.arrived, self.gate = anyio.Event(), anyio.Event()

    async def screen(self, headers: dict[str, str], msg: Any, send: Any) -> bool:
        call = isinstance(msg, dict) and msg.get("method") == "tools/call"
        if call and headers.get("mcp-session-id") == self.sid:
            self.arrived.set()
            await self.gate.wait()
        return False


async def a_prompt_shown(http: Any, url: str) -> tuple[str, dict[str, str]]:
    """A begins a session through ``url`` (its id issued by the upstream) and calls a tool
    until its prompt shows; then A's connection breaks. A's session id and headers."""
    r = await http.post(url, json=scripted.INIT, headers=scripted.HEAD)
    sid = r.headers["mcp-session-id"]
    a_head = {**scripted.HEAD, "mcp-session-id": sid}
    async with http.stream("POST", url, json=scripted.CALL, headers=a_head) as stream:
        await scripted.read_until(stream.aiter_raw(), b"elicitation/create")
    return sid, a_head


async def no_request_in_flight(gw: Any, sid: str) -> None:
    """Return once the gateway has seen the end of every request of held session ``sid``
    (a client's closed connection reaches it a moment later)."""
    session = gw.gateway._sessions[sid]
    with anyio.fail_after(STEP):
        while session.busy:
            await anyio.sleep(0.01)


@pytest.mark.parametrize("stranger", ["ping", "preflight", "refused-initialize"])
async def test_a_request_that_is_never_held_lets_no_held_session_go(stranger: str) -> None:
    """A replica at ``max_sessions`` (1) holds A's idle session, whose finished call's
    result is kept for a resume that lost it. B sends one request no session is ever
    held for: a ``ping`` naming a made-up session id (the upstream answers ``404``), a
    preflight naming one, or an ``initialize`` the upstream refuses (``401``). A's session
    is still held, and A's resume of its finished call gets the kept result, with nothing
    asked of the upstream."""
    inner = scripted.Upstream(
        call=[scripted.sse("e1", scripted.PROGRESS), scripted.sse("e2", scripted.result(7))],
        refuse_unknown=True,
    )
    up = RefusesInitializeOfB(inner)
    limits = GatewayLimits(max_sessions=1, standalone_hold_s=0)
    async with (
        scripted.gateway_for(up, limits=limits) as gw,
        httpx2.AsyncClient(timeout=STEP * 2) as http,
    ):
        await scripted.initialize(http, gw.url)
        a_head = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        call = await http.post(gw.url, json=scripted.CALL, headers=a_head)
        first = scripted.parse(call.content)[0][0]
        made_up = {**scripted.HEAD, "mcp-session-id": "made-up-by-b"}
        if stranger == "ping":
            b = await http.post(gw.url, json=PING, headers=made_up)
        elif stranger == "preflight":
            b = await http.request("OPTIONS", gw.url, json=PING, headers=made_up)
        else:
            b_head = {**scripted.HEAD, "authorization": "Bearer tok-b"}
            b = await http.post(gw.url, json=scripted.INIT, headers=b_head)
        held = sorted(gw.gateway._sessions)
        get = {
            "accept": "text/event-stream",
            "mcp-session-id": scripted.SID,
            "last-event-id": first,
        }
        with anyio.fail_after(STEP * 2):
            resumed = await http.get(gw.url, headers=get)
        upstream_resumes = sum(m == "GET" for m, _, _ in inner.requests)
    messages = [json.loads(d) for _, d in scripted.parse(resumed.content) if d]
    assert b.status_code == (401 if stranger == "refused-initialize" else 404)
    assert held == [scripted.SID], "a request never held let A's held session go"
    assert (messages, upstream_resumes) == ([scripted.result(7)], 0)


@pytest.mark.parametrize("new_session", [False, True], ids=["alone", "new-session"])
async def test_an_answer_being_resubmitted_keeps_its_session(new_session: bool) -> None:
    """A's answer got ``202`` from the gateway; its first submission got ``503`` and the
    guard will resubmit it after its backoff (2 s). A's call connection is down, so A's
    session has no request in flight. At ``max_sessions`` (1), a new session is refused
    ``503`` meanwhile (A's session is not let go), A's answer reaches the server, and
    once its submission is over the new session is served, A's let go for it."""
    inner = scripted.asking(scripted.Upstream(issue_sessions=True))
    up = FirstAnswerUnavailable(inner)
    config = replace(GATEWAY_GUARD, backoff_initial_s=2.0, backoff_max_s=2.0)
    limits = GatewayLimits(max_sessions=1, standalone_hold_s=0)
    async with (
        scripted.gateway_for(up, config=config, limits=limits) as gw,
        httpx2.AsyncClient(timeout=STEP * 2) as http,
    ):
        sid, a_head = await a_prompt_shown(http, gw.url)
        a = await http.post(gw.url, json=scripted.ANSWER, headers=a_head)
        with anyio.fail_after(STEP):
            await up.refused.wait()
        await no_request_in_flight(gw, sid)
        if new_session:
            c = await http.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
            assert c.status_code == 503 and "gateway full" in c.text
            assert sorted(gw.gateway._sessions) == [sid]
        with anyio.move_on_after(STEP):
            await inner.answered.wait()
        reached = inner.answered.is_set()
        engine = gw.gateway._sessions[sid].engine
        with anyio.fail_after(STEP):  # the submission's outcome reaches the guard
            while engine.submissions:
                await anyio.sleep(0.01)
        later = await http.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
        held = sorted(gw.gateway._sessions)
    assert a.status_code == 202
    assert reached, "A's answer, taken with 202, never reached the server"
    assert later.status_code == 200
    assert held == [later.headers["mcp-session-id"]]


async def test_a_prompt_presented_here_keeps_its_session() -> None:
    """A's call shows A's prompt (claimed here) and A's connection breaks before A
    answers. At ``max_sessions`` (1), a new session is refused ``503``: A's session, with
    its prompt, is kept, and A's answer is taken by its guard and ends A's call."""
    inner = scripted.asking(scripted.Upstream(issue_sessions=True))
    limits = GatewayLimits(max_sessions=1, standalone_hold_s=0)
    async with (
        scripted.gateway_for(inner, limits=limits) as gw,
        httpx2.AsyncClient(timeout=STEP * 2) as http,
    ):
        sid, a_head = await a_prompt_shown(http, gw.url)
        await no_request_in_flight(gw, sid)
        c = await http.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
        held = sorted(gw.gateway._sessions)
        a = await http.post(gw.url, json=scripted.ANSWER, headers=a_head)
        with anyio.move_on_after(STEP):
            await inner.answered.wait()
        guard = gw.gateway._sessions[sid].engine.guard
        state = guard.state_of((sid, 1))
    assert (c.status_code, held) == (503, [sid])
    assert a.status_code == 202 and inner.answered.is_set()
    assert state in ("submitting", "submitted")  # submitted by A's own guard


async def test_a_prompt_does_not_keep_a_session_unused_past_session_idle_s() -> None:
    """A's prompt is shown and A's connection breaks; A then makes no request for
    ``session_idle_s``: a new session is served, and A's session is let go for it (the
    prompt's client is gone; a prompt alone does not hold a replica's room for ever)."""
    inner = scripted.asking(scripted.Upstream(issue_sessions=True))
    limits = GatewayLimits(max_sessions=1, standalone_hold_s=0, session_idle_s=60.0)
    async with (
        scripted.gateway_for(inner, limits=limits) as gw,
        httpx2.AsyncClient(timeout=STEP * 2) as http,
    ):
        sid, _ = await a_prompt_shown(http, gw.url)
        await no_request_in_flight(gw, sid)
        gw.gateway._sessions[sid].last_used -= 61.0  # as if unused for session_idle_s
        c = await http.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
        held = sorted(gw.gateway._sessions)
    assert c.status_code == 200
    assert held == [c.headers["mcp-session-id"]]


async def test_a_session_accepted_with_no_room_is_served_not_held() -> None:
    """At ``max_sessions`` (1) A's session is idle when B's call (a session held
    elsewhere) is let in; the upstream holds B's call back while A's call begins, so when
    the upstream accepts B's session every held one is busy. B's call is served, B's
    session not held (held sessions never pass ``max_sessions``), and A's call goes on.
    Once both calls ended, B's next call holds B's session, A's let go for it."""
    inner = scripted.Upstream(
        call=[scripted.sse("e1", scripted.PROGRESS)], hold=anyio.Event(), complete=True
    )
    up = GatedCalls(inner, "held-elsewhere")
    limits = GatewayLimits(max_sessions=1, standalone_hold_s=0)
    b_head = {**scripted.HEAD, "mcp-session-id": "held-elsewhere"}
    async with (
        scripted.gateway_for(up, limits=limits) as gw,
        httpx2.AsyncClient(timeout=STEP * 2) as http,
    ):
        await scripted.initialize(http, gw.url)
        a_head = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        async with anyio.create_task_group() as tg:
            got: dict[str, bytes] = {}
            b_began = anyio.Event()

            async def b_calls() -> None:
                async with http.stream("POST", gw.url, json=scripted.CALL, headers=b_head) as r:
                    pieces = r.aiter_raw()
                    got["b"] = await scripted.read_until(pieces, b"progress")
                    b_began.set()
                    async for piece in pieces:
                        got["b"] += piece

            tg.start_soon(b_calls)
            with anyio.fail_after(STEP):
                await up.arrived.wait()
            async with http.stream("POST", gw.url, json=scripted.CALL, headers=a_head) as r:
                pieces = r.aiter_raw()
                got["a"] = await scripted.read_until(pieces, b"progress")
                up.gate.set()
                with anyio.fail_after(STEP):
                    await b_began.wait()
                during = sorted(gw.gateway._sessions)
                inner.hold.set()
                async for piece in pieces:
                    got["a"] += piece
        b_again = await http.post(gw.url, json=scripted.CALL, headers=b_head)
        after = sorted(gw.gateway._sessions)
    assert during == [scripted.SID], "held sessions passed max_sessions"
    assert b"progress" in got["a"] and b"progress" in got["b"]
    assert b_again.status_code == 200
    assert after == ["held-elsewhere"]
