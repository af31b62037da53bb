"""Which held session a replica at ``max_sessions`` lets go, and when: a real gateway
replica (uvicorn, in this process) on loopback in front of the scripted upstream
(:mod:`scripted_upstream`).

Room is made only for a session the upstream accepted: a request that is never held (a
made-up session id the upstream answers ``404``, a preflight, an ``initialize`` the
upstream refuses) lets no held session go. A session with work under way is not let
go: an answer submission the guard will retry after its backoff (the client was told
``202``), a prompt this replica presented that still awaits its answer; a new session is
refused ``503`` while every held one has work under way, and served once one has none.
Past ``session_idle_s`` with no request, a prompt no longer keeps its session.

Every session the upstream accepts is held: one accepted while no room can be made
(every held session got work under way after its request was let in) is held over
``max_sessions``, a new session is refused ``503`` while none can be let go, and the
table is trimmed back below the bound once sessions can be let go. A session held over
the bound is held as any other: its answer taken with ``202`` reaches the server, or
the submission's failure reaches its client's resume; the prompts it shows keep their
leases while the replica runs, whether or not their client is still connected to it;
its store record is extended while it is in use.

Every wait is for something observed (a byte read, a request the upstream saw, a
counter); timeouts only guard against hangs."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio
import httpx2
import pytest
from anyio.abc import TaskGroup

from fsm.gateway.app import GATEWAY_GUARD
from fsm.gateway.store import MemoryStore
from support.changes import Changes
from support.gateway import RunningGateway
from tests.gateway import gateway_client as client
from tests.gateway import room_bed as room
from tests.gateway import scripted_upstream as scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


PING = {"jsonrpc": "2.0", "id": "b", "method": "ping"}

ELSEWHERE = "held-elsewhere"
"""B's session id: a session another replica began (recorded in the store)."""
B_SESSION_HEAD = {**scripted.HEAD, "mcp-session-id": ELSEWHERE}
"""The headers of a POST in B's session :data:`ELSEWHERE`."""

LEASE_S = 0.3
"""The lease of a presented prompt's claim where a test watches it (seconds): short, so
that a test sees several lease periods go by."""


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


class GatedCallsAnswersUnavailable(GatedCalls):
    """:class:`GatedCalls`, which also answers every JSON-RPC response POST (an answer
    submission) ``503`` without taking it, counted in ``refusals``: the first sets
    ``refused``, and each one after it waits for ``later`` first."""

    def __init__(self, inner: scripted.Upstream, sid: str) -> None:
        super().__init__(inner, sid)
        self.refused, self.later = anyio.Event(), anyio.Event()
        self.refusals = 0

    async def screen(self, headers: dict[str, str], msg: Any, send: Any) -> bool:
        if not (isinstance(msg, dict) and "method" not in msg):
            return await super().screen(headers, msg, send)
        if self.refused.is_set():
            await self.later.wait()
        self.refusals += 1
        await send({"type": "http.response.start", "status": 503, "headers": []})
        await send({"type": "http.response.body", "body": b"busy"})
        self.refused.set()
        return True


class GatedCallsFirstAnswerUnavailable(GatedCalls):
    """:class:`GatedCalls`, whose first JSON-RPC response POST (an answer submission)
    also gets ``503`` without being taken, as :class:`FirstAnswerUnavailable` does
    (``refused`` is set then)."""

    def __init__(self, inner: scripted.Upstream, sid: str) -> None:
        super().__init__(inner, sid)
        self.first_answer = FirstAnswerUnavailable(inner)
        self.refused = self.first_answer.refused

    async def screen(self, headers: dict[str, str], msg: Any, send: Any) -> bool:
        if await self.first_answer.screen(headers, msg, send):
            return True
        return await super().screen(headers, msg, send)


def script_a_and_b(inner: scripted.Upstream, b_call: Sequence[scripted.Piece]) -> anyio.Event:
    """Script the calls ``inner`` serves: B's (session :data:`ELSEWHERE`) gets ``b_call``;
    any other (A's) gets progress (``a1``), then, once the event returned is set, its
    result (``a2``)."""
    a_release = anyio.Event()
    a_script = [
        scripted.sse("a1", scripted.PROGRESS),
        a_release,
        scripted.sse("a2", scripted.result(7)),
    ]

    def script(msg: dict[str, Any], headers: dict[str, str]) -> Sequence[scripted.Piece]:
        return b_call if headers.get("mcp-session-id") == ELSEWHERE else a_script

    inner.script = script
    return a_release


def b_asks(inner: scripted.Upstream, *first: scripted.Piece) -> anyio.Event:
    """Script ``inner`` as :func:`script_a_and_b` does, B's call giving ``first``, then
    asking B's prompt (:func:`scripted.elicit` ``(1)``, ``e1``), then giving its result
    (``e2``) once ``inner`` got an answer; a resume of B's call gets that result once
    answered. The event that lets A's call end."""
    inner.replay = lambda cursor: [inner.answered, scripted.sse("e2", scripted.result(7))]
    b_call = [
        *first,
        scripted.sse("e1", scripted.elicit(1)),
        inner.answered,
        scripted.sse("e2", scripted.result(7)),
    ]
    return script_a_and_b(inner, b_call)


@dataclass
class BCall:
    """B's call in :func:`b_held_over_the_bound`, as the test's function for it sees it."""

    http: httpx2.AsyncClient
    url: str
    """The replica B calls through."""
    pieces: AsyncIterator[bytes]
    """The raw pieces of B's call stream, open until the test's function returns."""
    under_way: anyio.Event
    """For the test's function to set once B's call shows what the test waits for: the
    scenario goes on then."""

    async def answer(self) -> httpx2.Response:
        """B answers its prompt (:data:`scripted.ANSWER`) through the replica."""
        return await self.http.post(self.url, json=scripted.ANSWER, headers=B_SESSION_HEAD)


@dataclass
class OverTheBound:
    """The handles of :func:`b_held_over_the_bound`: the replica, A's session and call,
    B's connection, and the task group B's call runs in."""

    replica: RunningGateway
    a_sid: str
    a_seen: bytes
    """What A's call stream gave first: up to its progress."""
    a_pieces: AsyncIterator[bytes]
    """The rest of A's call stream, open until the block exits."""
    b_left: anyio.Event
    """Set once B's call connection closed (the test's function for it returned)."""
    tg: TaskGroup
    """For the test's own tasks; the block's exit waits for them and for B's call."""

    def held(self) -> list[str]:
        """The sessions the replica holds now, sorted."""
        return sorted(self.replica.gateway._sessions)


@contextlib.asynccontextmanager
async def b_held_over_the_bound(
    http: httpx2.AsyncClient,
    replica: RunningGateway,
    up: GatedCalls,
    b_while_calling: Callable[[BCall], Awaitable[None]],
) -> AsyncIterator[OverTheBound]:
    """B's session held over the bound on ``replica`` (``max_sessions`` 1, in front of
    ``up``, which holds back the calls of :data:`ELSEWHERE`). A begins a session, held and
    idle; B's session :data:`ELSEWHERE` (recorded in the store, as another replica began
    it) has its call let in while room can be made; ``up`` holds it back until A's call
    shows its progress, so when the upstream accepts B's session no held one can be let
    go. ``b_while_calling`` runs as a task while B's call stream is open; the block runs
    once it sets :attr:`BCall.under_way`, A's call still open. On exit A's call connection
    closes and the task group waits for B's call and the test's tasks."""
    await replica.gateway.store.begin_session(ELSEWHERE)  # another replica began it
    a_sid = await client.begin(http, replica.url)
    b_under_way, b_left = anyio.Event(), anyio.Event()

    async def b_calls() -> None:
        async with http.stream(
            "POST", replica.url, json=scripted.CALL, headers=B_SESSION_HEAD
        ) as r:
            await b_while_calling(BCall(http, replica.url, r.aiter_raw(), b_under_way))
        b_left.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(b_calls)
        with anyio.fail_after(room.STEP):
            await up.arrived.wait()
        a_head = {**scripted.HEAD, "mcp-session-id": a_sid}
        async with http.stream("POST", replica.url, json=scripted.CALL, headers=a_head) as r:
            a_pieces = r.aiter_raw()  # kept: A's call goes on while B's is accepted
            a_seen = await scripted.read_until(a_pieces, b"progress")
            up.gate.set()
            with anyio.fail_after(room.STEP):
                await b_under_way.wait()
            yield OverTheBound(replica, a_sid, a_seen, a_pieces, b_left, tg)


def b_resume_head(shown: bytes) -> dict[str, str]:
    """The headers of B's resume of its call stream from its prompt: the event that
    carries it among ``shown`` (what B's call stream gave)."""
    prompt_id = next(eid for eid, data in scripted.parse(shown) if "elicitation" in data)
    return {
        "accept": "text/event-stream",
        "mcp-session-id": ELSEWHERE,
        "last-event-id": str(prompt_id),
    }


class Reading:
    """A stream read as a task (:meth:`read`): what it gave so far is :attr:`seen`;
    :meth:`until` waits for a word to show in it."""

    def __init__(self) -> None:
        self.seen = b""
        self._changes = Changes()

    async def read(self, pieces: AsyncIterator[bytes]) -> None:
        async for piece in pieces:
            self.seen += piece
            self._changes.note()

    async def until(self, word: bytes) -> None:
        """Return once ``word`` shows in :attr:`seen` (never, if the stream ends without
        it: guard it with a timeout)."""
        await self._changes.until(lambda: word in self.seen)


@contextlib.asynccontextmanager
async def b_resumed(
    http: httpx2.AsyncClient, url: str, shown: bytes, tg: TaskGroup
) -> AsyncIterator[Reading]:
    """B resumes its call stream through ``url`` from its prompt (:func:`b_resume_head`
    of ``shown``), read as a task of ``tg`` until the block exits."""
    async with http.stream("GET", url, headers=b_resume_head(shown)) as resumed:
        reading = Reading()
        tg.start_soon(reading.read, resumed.aiter_raw())
        yield reading


async def b_answers_unless_ended(
    http: httpx2.AsyncClient, url: str, resumed: Reading
) -> int | None:
    """Unless B's resumed stream has already ended B's call with an error, B answers its
    prompt through ``url`` and reads on until the call's result (up to :data:`room.STEP`):
    the status of B's answer, ``None`` when B did not answer."""
    if b'"error"' in resumed.seen:
        return None
    answer = await http.post(url, json=scripted.ANSWER, headers=B_SESSION_HEAD)
    with anyio.move_on_after(room.STEP):
        await resumed.until(b'"id": 7')
    return answer.status_code


async def submissions_over(session: Any) -> bool:
    """Whether held session ``session`` (``None``: not held) has no answer submission under
    way, polled up to :data:`room.STEP` for its last submission's outcome to reach its guard."""
    return await room.until(lambda: session is None or session.engine.submissions == 0)


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
    async with room.at_one_session(up) as (gw, http):
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
        with anyio.fail_after(room.STEP * 2):
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
    async with room.at_one_session(up, config=config) as (gw, http):
        sid, a_head = await room.a_prompt_shown(http, gw.url)
        a = await http.post(gw.url, json=scripted.ANSWER, headers=a_head)
        with anyio.fail_after(room.STEP):
            await up.refused.wait()
        await room.no_request_in_flight(gw, sid)
        if new_session:
            c = await http.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
            assert c.status_code == 503 and "gateway full" in c.text
            assert sorted(gw.gateway._sessions) == [sid]
        with anyio.move_on_after(room.STEP):
            await inner.answered.wait()
        reached = inner.answered.is_set()
        engine = gw.gateway._sessions[sid].engine
        # the submission's outcome reaches the guard
        assert await room.until(lambda: not engine.submissions), "the submission never ended"
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
    async with room.at_one_session(inner) as (gw, http):
        sid, a_head, _ = await room.a_prompt_left(gw, http)
        c = await http.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
        held = sorted(gw.gateway._sessions)
        a = await http.post(gw.url, json=scripted.ANSWER, headers=a_head)
        with anyio.move_on_after(room.STEP):
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
    limits = replace(room.ONE_SESSION, session_idle_s=60.0)
    async with room.at_one_session(inner, limits=limits) as (gw, http):
        sid, _, _ = await room.a_prompt_left(gw, http)
        gw.gateway._sessions[sid].last_used -= 61.0  # as if unused for session_idle_s
        c = await http.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
        held = sorted(gw.gateway._sessions)
    assert c.status_code == 200
    assert held == [c.headers["mcp-session-id"]]


def calls_in_progress() -> tuple[scripted.Upstream, GatedCalls]:
    """An upstream whose calls show their progress and then wait for its ``hold`` (set:
    they complete), and in front of it the gate that holds back the calls of
    :data:`ELSEWHERE` (:func:`b_held_over_the_bound`)."""
    inner = scripted.Upstream(
        call=[scripted.sse("e1", scripted.PROGRESS)],
        hold=anyio.Event(),
        complete=True,
        issue_sessions=True,
    )
    return inner, GatedCalls(inner, ELSEWHERE)


async def test_a_session_accepted_with_no_room_is_held_over_the_bound_until_sessions_free() -> None:
    """At ``max_sessions`` (1) A's session is idle when B's call (a session held
    elsewhere) is let in; the upstream holds B's call back while A's call begins, so when
    the upstream accepts B's session no held one can be let go. B's session is held all
    the same (two held: one over the bound) and both calls go on; a new session is refused
    ``503`` meanwhile (none can be let go). Once both calls ended, a new session C is
    served, the table trimmed back below the bound for it: A's and B's sessions are let
    go, C's alone is held."""
    inner, up = calls_in_progress()
    got: dict[str, bytes] = {}

    async def b_while_calling(b: BCall) -> None:
        got["b"] = await scripted.read_until(b.pieces, b"progress")
        b.under_way.set()
        async for piece in b.pieces:
            got["b"] += piece

    async with room.at_one_session(up) as (gw, http):
        async with b_held_over_the_bound(http, gw, up, b_while_calling) as s:
            during = s.held()
            refused = await http.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
            inner.hold.set()
            got["a"] = s.a_seen
            async for piece in s.a_pieces:
                got["a"] += piece
        await room.no_request_in_flight(gw, s.a_sid)
        await room.no_request_in_flight(gw, ELSEWHERE)
        held_then = s.held()
        c = await http.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
        after = s.held()
    assert b"progress" in got["a"] and b"progress" in got["b"]
    assert during == sorted([s.a_sid, ELSEWHERE]), "B's session, accepted, was not held"
    assert refused.status_code == 503 and "gateway full" in refused.text
    assert held_then == during  # over the bound until a session needs the room
    assert c.status_code == 200
    assert after == [c.headers["mcp-session-id"]]


async def test_a_table_over_the_bound_is_trimmed_before_a_new_session_is_let_in() -> None:
    """A's and B's sessions are held, one over the bound (as above); B's call ends (its
    client leaves) while A's goes on, so B's session could be let go and A's could not. A
    request of another session id not held here is let in only once the table is back
    within the bound: B's session is let go first, and then none can be, so the request
    is refused ``503`` before it goes upstream and A's session alone is held (not let in
    because B's could be let go, which would leave the table over the bound)."""
    inner, up = calls_in_progress()

    async def b_while_calling(b: BCall) -> None:
        await scripted.read_until(b.pieces, b"progress")
        b.under_way.set()  # and B's connection closes: B's call ends

    other = {**scripted.HEAD, "mcp-session-id": "held-elsewhere-too"}
    async with (
        scripted.gateway_for(up, limits=room.ONE_SESSION) as gw,
        httpx2.AsyncClient(timeout=room.STEP * 2) as http,
        b_held_over_the_bound(http, gw, up, b_while_calling) as s,
    ):
        with anyio.fail_after(room.STEP):
            await s.b_left.wait()
        await room.no_request_in_flight(gw, ELSEWHERE)
        during = s.held()
        await gw.gateway.store.begin_session("held-elsewhere-too")
        refused = await http.post(gw.url, json=scripted.tool_call(9), headers=other)
        after = s.held()
        inner.hold.set()
    assert during == sorted([s.a_sid, ELSEWHERE])  # over the bound, B's droppable
    assert refused.status_code == 503 and "gateway full" in refused.text, refused.text
    assert after == [s.a_sid]  # trimmed back to the bound, not past it


async def test_an_answer_taken_in_a_session_held_over_the_bound_reaches_the_server() -> None:
    """At ``max_sessions`` (1) A's session is held and idle when B's call (a session
    another replica began) is let in; the upstream holds B's call back until A's call is
    under way, so when it accepts B's session no room can be made: B's session is held
    over the bound. B's call shows B's prompt; B answers, and the gateway says ``202``
    (its guard took the answer). The first submission gets ``503`` and the guard
    resubmits it after its backoff (1 s); meanwhile B's call connection breaks, so B's
    session has no request in flight. B's answer, taken with ``202``, reaches the server,
    once, as any held session's does
    (:func:`test_an_answer_being_resubmitted_keeps_its_session`), and B's session is
    still held (the same guard) once its submission is over."""
    inner = scripted.Upstream()
    a_release = b_asks(inner)
    up = GatedCallsFirstAnswerUnavailable(inner, ELSEWHERE)
    config = replace(GATEWAY_GUARD, backoff_initial_s=1.0, backoff_max_s=1.0)
    got: dict[str, Any] = {}

    async def b_while_calling(b: BCall) -> None:
        # B's stream is kept open: its reader going would end the call
        await scripted.read_until(b.pieces, b"elicitation/create")
        b.under_way.set()
        got["answer"] = await b.answer()
        with anyio.fail_after(room.STEP):
            await up.refused.wait()
        # B's call connection breaks now, its answer to be resubmitted

    async with room.at_one_session(up, config=config) as (gw, http):
        async with b_held_over_the_bound(http, gw, up, b_while_calling) as s:
            held_during = s.held()
            with anyio.fail_after(room.STEP):
                await s.b_left.wait()
            b_session = gw.gateway._sessions.get(ELSEWHERE)
            with anyio.move_on_after(room.STEP):
                await inner.answered.wait()
            a_release.set()
        over = await submissions_over(b_session)
        b_kept = b_session is not None and not b_session.closed
        b_kept = b_kept and gw.gateway._sessions.get(ELSEWHERE) is b_session
        held_after = s.held()
    assert got["answer"].status_code == 202
    assert inner.answered.is_set(), "B's answer, taken with 202, never reached the server"
    assert [m["result"] for m in inner.responses("result")] == [{"action": "accept"}]
    assert held_during == sorted([scripted.SID, ELSEWHERE])  # B's held over the bound
    assert over and b_kept, "B's session was let go with its answer under way"
    assert held_after == held_during


async def test_a_prompt_shown_by_a_session_held_over_the_bound_keeps_its_lease() -> None:
    """Two replicas on one store (lease 0.3 s), ``max_sessions`` 1. On replica 1 B's
    session is held over the bound (as above), and B's call shows B's prompt, claimed
    there under a lease. Replica 1 is alive and still serves B's call (B's connection to
    it half-open), so it renews that lease as it does any held session's: six lease periods
    later the claim has not lapsed, and a resume of B's stream on replica 2 (a balancer
    without affinity) waits for B's answer instead of ending B's call with
    ``claim-lapsed``; B answers through replica 2 and the resumed stream ends with the
    call's result."""
    gap = anyio.Event()  # the prompt comes in a read of its own, after B read e0
    inner = scripted.Upstream()
    a_release = b_asks(inner, scripted.sse("e0", scripted.PROGRESS), gap)
    up = GatedCalls(inner, ELSEWHERE)
    store = MemoryStore()
    limits = replace(room.ONE_SESSION, lease_s=LEASE_S)
    b_finished = anyio.Event()
    got: dict[str, bytes] = {}

    async def b_while_calling(b: BCall) -> None:
        got["shown"] = await scripted.read_until(b.pieces, b"progress")
        gap.set()
        got["shown"] += await scripted.read_until(b.pieces, b"elicitation/create")
        b.under_way.set()
        await b_finished.wait()  # half-open: replica 1 still serves it

    async with (
        scripted.two_replicas_for(up, store=store, limits=limits) as (r1, r2),
        httpx2.AsyncClient(timeout=room.STEP * 2) as http,
        b_held_over_the_bound(http, r1, up, b_while_calling) as s,
    ):
        held_on_r1 = s.held()
        # six lease periods go by while replica 1 serves B's call: returns early only if
        # the claim lapses
        lapsed = await scripted.lapses_within(store, ELSEWHERE, 1, LEASE_S * 6)
        async with b_resumed(http, r2.url, got["shown"], s.tg) as resumed:
            # B reads its resumed stream a while before answering (its prompt is open on
            # replica 1, alive): nothing is to come before the answer
            with anyio.move_on_after(LEASE_S * 3):
                await resumed.until(b'"error"')
            answer = await b_answers_unless_ended(http, r2.url, resumed)
        b_finished.set()
        a_release.set()
    messages = [json.loads(d) for _, d in scripted.parse(resumed.seen) if d]
    assert answer in (None, 202)
    assert not lapsed, "the lease of a prompt replica 1 still serves lapsed"
    assert messages and messages[-1] == scripted.result(7), (
        f"B's call, its prompt alive on a running replica, ended with {messages}"
    )
    assert held_on_r1 == sorted([scripted.SID, ELSEWHERE])  # B's held over the bound


async def test_a_failed_submission_in_a_session_held_over_the_bound_reaches_its_resume() -> None:
    """One replica, ``max_sessions`` 1: A's session is held and busy when B's session
    (begun on another replica) is accepted, so B's is held over the bound. B's call shows
    B's prompt; B answers (``202``: the guard took it); the upstream refuses every
    submission (``503``), and B's call connection breaks after the first. The guard
    spends ``max_submit_attempts`` and ends B's call with ``submission-failed``. B then
    resumes its call stream and gets that outcome (B was told ``202``; talking to the
    server directly B would have seen the ``503``), from B's session, still held: the
    resume does not go upstream, where the server (which never got the answer) still
    waits."""
    never = anyio.Event()
    inner = scripted.Upstream()
    a_release = script_a_and_b(inner, [scripted.sse("e1", scripted.elicit(1)), never])
    inner.replay = lambda cursor: [never]  # the server never got B's answer: still asking
    up = GatedCallsAnswersUnavailable(inner, ELSEWHERE)
    config = replace(GATEWAY_GUARD, backoff_initial_s=0.05, backoff_max_s=0.05)
    seen = b""
    got: dict[str, Any] = {}

    async def b_while_calling(b: BCall) -> None:
        got["shown"] = await scripted.read_until(b.pieces, b"elicitation/create")
        got["answer"] = await b.answer()
        with anyio.fail_after(room.STEP):
            await up.refused.wait()
        b.under_way.set()  # B's call connection breaks now; its answer is being resubmitted

    async with room.at_one_session(up, config=config) as (gw, http):
        async with b_held_over_the_bound(http, gw, up, b_while_calling) as s:
            with anyio.fail_after(room.STEP):  # the gateway left B's call stream
                await inner.wait_until(lambda u: u.left >= 1)
            got["held"] = s.held()
            up.later.set()  # the remaining submissions are refused too
            spent = await room.until(lambda: up.refusals >= config.max_submit_attempts)
            assert spent, up.refusals
            a_release.set()
            await scripted.read_until(s.a_pieces, b'"id": 7')
        # B's submissions are over (the guard ended B's call); B resumes its call stream
        await submissions_over(gw.gateway._sessions.get(ELSEWHERE))
        get = b_resume_head(got["shown"])
        with anyio.move_on_after(room.STEP):
            async with http.stream("GET", gw.url, headers=get) as resumed:
                got["resume_status"] = resumed.status_code
                async for piece in resumed.aiter_raw():
                    seen += piece
                    if b'"error"' in seen:
                        break
        never.set()
    assert got["answer"].status_code == 202
    assert b"submission-failed" in seen, (
        f"B was told 202, its answer never reached the server, and B's resume got "
        f"{got.get('resume_status')} {seen!r}: the call has no outcome"
    )
    assert got["held"] == sorted([scripted.SID, ELSEWHERE])  # B's held over the bound


async def test_a_prompt_shown_by_a_session_held_over_the_bound_keeps_its_lease_once_moved() -> None:
    """Two replicas on one store (lease 0.3 s), ``max_sessions`` 1. On replica 1 B's
    session is held over the bound (as above), and B's call shows B's prompt, claimed
    there under a lease. B's connection to replica 1 breaks (a balancer moved B) and B
    resumes its stream on replica 2, where the person takes a while (six leases) to
    answer. Replica 1 is alive and its guard presented the prompt, so it keeps renewing
    the lease (the presented prompt keeps B's session: ``_droppable``): replica 2 waits
    for B's answer, and B's answer ends the call with its result (as it would, direct)."""
    inner = scripted.Upstream()
    a_release = b_asks(inner)
    up = GatedCalls(inner, ELSEWHERE)
    store = MemoryStore()
    limits = replace(room.ONE_SESSION, lease_s=LEASE_S)
    got: dict[str, Any] = {}

    async def b_while_calling(b: BCall) -> None:
        got["shown"] = await scripted.read_until(b.pieces, b"elicitation/create")
        b.under_way.set()  # B's connection to replica 1 breaks now

    async with (
        scripted.two_replicas_for(up, store=store, limits=limits) as (r1, r2),
        httpx2.AsyncClient(timeout=room.STEP * 2) as http,
        b_held_over_the_bound(http, r1, up, b_while_calling) as s,
    ):
        with anyio.fail_after(room.STEP):
            await s.b_left.wait()
        got["held"] = s.held()
        async with b_resumed(http, r2.url, got["shown"], s.tg) as resumed:
            # the person takes six lease periods to answer; replica 1 is alive: returns
            # early only if the call ends first
            with anyio.move_on_after(LEASE_S * 6):
                await resumed.until(b'"error"')
            got["lapsed"] = (await store.claim_status(ELSEWHERE, 1)).lapsed
            got["answer"] = await b_answers_unless_ended(http, r2.url, resumed)
        a_release.set()
    messages = [json.loads(d) for _, d in scripted.parse(resumed.seen) if d]
    assert not got["lapsed"], "the lease of a prompt replica 1 presented lapsed while it ran"
    assert messages and messages[-1] == scripted.result(7), (
        f"B's call, its prompt presented by a running replica, ended with {messages}"
    )
    assert got["held"] == sorted([scripted.SID, ELSEWHERE])  # B's held over the bound


async def test_a_session_held_over_the_bound_keeps_its_store_record_while_in_use() -> None:
    """One replica, a store keeping records 100 s of its clock (``ttl_s``),
    ``max_sessions`` 1. B's session (begun on another replica, recorded in the store) is
    held over the bound (as above), and B's call streams progress while the store's
    clock moves 240 s, in steps of 60 s, before its prompt comes. B's session is in use,
    so its record is extended after each step (``session_keepalive_s``) as any held
    session's is: the prompt's claim finds it, and B's call shows its prompt (as it
    would, direct) instead of ending with ``store-state-lost``."""
    gap = anyio.Event()
    inner = scripted.Upstream()
    a_release = b_asks(inner, scripted.sse("e0", scripted.PROGRESS), gap)
    up = GatedCalls(inner, ELSEWHERE)
    now = [0.0]
    store = scripted.Kept(ttl_s=100.0, clock=lambda: now[0])
    limits = replace(room.ONE_SESSION, lease_s=LEASE_S, session_keepalive_s=0.0)
    got: dict[str, Any] = {}

    async def b_while_calling(b: BCall) -> None:
        got["b"] = await scripted.read_until(b.pieces, b"progress")
        b.under_way.set()
        with anyio.move_on_after(room.STEP):
            while not any(w in got["b"] for w in (b"elicitation/create", b'"error"')):
                got["b"] += await b.pieces.__anext__()

    async with (
        scripted.gateway_for(up, store=store, limits=limits) as gw,
        httpx2.AsyncClient(timeout=room.STEP * 2) as http,
        b_held_over_the_bound(http, gw, up, b_while_calling) as s,
    ):
        got["held"] = s.held()
        # the store's clock passes the record's life, a step at a time, while B's call
        # goes on without a prompt; each step is followed by an extension of B's record
        # (the keep-alive pass of a held session)
        for step in range(1, 5):
            kept = store.kept_of.get(ELSEWHERE, 0)
            now[0] = 60.0 * step
            with anyio.move_on_after(room.STEP):
                await store.kept_once_more(kept, ELSEWHERE)
        gap.set()
        with anyio.fail_after(room.STEP):
            await s.b_left.wait()
        inner.answered.set()
        a_release.set()
    assert b"elicitation/create" in got["b"], (
        f"B's call, served by a running replica, lost its store record: {got['b'][-300:]!r}"
    )
    assert got["held"] == sorted([scripted.SID, ELSEWHERE])  # B's held over the bound
