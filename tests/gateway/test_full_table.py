"""A replica holding ``max_sessions`` sessions, none of which may be let go: what a
request it cannot hold a new session for costs it, and when it holds one again. A real
gateway replica (uvicorn, in this process) on loopback in front of the scripted upstream
(:mod:`scripted_upstream`).

A request of a session not held here (a made-up id needs no credentials, and never
reaches the upstream) and every ``initialize`` ask whether room could be made. Refused
``503`` while nothing changed, they ask nothing of the held sessions: a flood of them
costs no scan of the table each, and a held session's own request costs one check of
that session. And no refusal is stale: a held session that may be let go, whatever let
it (its last request ended, its answer's submission ended, its presented prompt ended,
``session_idle_s`` passed since its last use, it ended), makes room for the very next
request.

Every wait is for something observed (a byte read, a request the upstream saw, a
counter); timeouts only guard against hangs. Checks of the held sessions are counted by
wrapping ``Gateway._droppable``, readings of them in the order they are let go in by
wrapping ``Gateway._oldest_first``."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import pytest

from fsm import events
from fsm.gateway import app
from fsm.gateway.app import GatewayLimits
from fsm.gateway.store import MemoryStore
from fsm.outcomes import SubmissionResult
from tests.gateway import room_bed as room
from tests.gateway import scripted_upstream as scripted

httpx2 = pytest.importorskip("httpx2")
pytest.importorskip("uvicorn")

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}

T = TypeVar("T")


async def ping(http: Any, url: str, sid: str) -> int:
    """The status of a ``ping`` of session ``sid``."""
    headers = {**scripted.HEAD, "mcp-session-id": sid}
    return int((await http.post(url, json=PING, headers=headers)).status_code)


async def open_stream(streams: contextlib.AsyncExitStack, http: Any, url: str, sid: str) -> Any:
    """Session ``sid``'s client opens a standalone stream (``GET``), held open until
    ``streams`` closes: the response."""
    get = {"accept": "text/event-stream", "mcp-session-id": sid}
    return await streams.enter_async_context(http.stream("GET", url, headers=get))


async def held_back(tg: anyio.abc.TaskGroup, screen: Any, request: Awaitable[T]) -> list[T]:
    """``request`` sent in ``tg``, until the upstream ``screen`` holding it back has it
    (its ``arrived`` set): the list its outcome is put in once it ends."""
    ended: list[T] = []

    async def send() -> None:
        ended.append(await request)

    tg.start_soon(send)
    with anyio.fail_after(room.STEP):
        await screen.arrived.wait()
    return ended


def counted_checks(gw: Any) -> Callable[[], int]:
    """Count the replica's checks of whether a held session may be let go from now on
    (``Gateway._droppable`` wrapped); the count so far."""
    calls = 0
    real = gw.gateway._droppable

    def counted(session: Any, now: float) -> bool:
        nonlocal calls
        calls += 1
        return bool(real(session, now))

    gw.gateway._droppable = counted
    return lambda: calls


@contextlib.asynccontextmanager
async def full_of_streams(held: int, spare: int = 0) -> AsyncIterator[tuple[Any, Any, list[str]]]:
    """A replica at ``max_sessions`` ``held + spare`` holding ``held`` sessions, each with
    work under way (a standalone stream its client reads), so none may be let go: the
    replica, an HTTP client, and the held session ids."""
    up = scripted.Upstream(issue_sessions=True, standalone=[])
    limits = GatewayLimits(max_sessions=held + spare)
    async with (
        scripted.gateway_for(up, limits=limits) as gw,
        httpx2.AsyncClient(
            timeout=scripted.GUARD, limits=httpx2.Limits(max_connections=200)
        ) as http,
        contextlib.AsyncExitStack() as streams,
    ):
        sids = []
        with anyio.fail_after(20):
            for _ in range(held):
                sid = (await room.new_session(http, gw.url)).headers["mcp-session-id"]
                assert (await open_stream(streams, http, gw.url, sid)).status_code == 200
                sids.append(sid)
        assert gw.gateway.sessions == held
        yield gw, http, sids


def counted_reads(gw: Any) -> Callable[[], tuple[int, int]]:
    """Count, from now on, the replica's readings of the held sessions in the order they
    are let go in (``Gateway._oldest_first`` wrapped), and the sessions each reading
    gave before its reader stopped; the two counts so far."""
    readings = given = 0
    real = gw.gateway._oldest_first

    def counted(sessions: Any) -> Any:
        nonlocal readings, given
        readings += 1
        for each in real(sessions):
            given += 1
            yield each

    gw.gateway._oldest_first = counted
    return lambda: (readings, given)


async def made_up(http: Any, url: str, i: int) -> int:
    """The status of a ``ping`` naming made-up session id ``i``."""
    return await ping(http, url, f"made-up-{i}")


# ----------------------------------------------------------------- what a refusal costs


async def test_a_refused_request_costs_no_scan_of_the_held_sessions() -> None:
    """48 sessions held, each with a stream open: requests naming made-up session ids are
    refused ``503``. The first may check every held session once; the 19 after it, while
    nothing changed, check none."""
    refusals = 20
    async with full_of_streams(48) as (gw, http, _):
        checks = counted_checks(gw)
        with anyio.fail_after(20):
            assert await made_up(http, gw.url, 0) == 503
            first = checks()
            for i in range(1, refusals):
                assert await made_up(http, gw.url, i) == 503
            assert (await room.new_session(http, gw.url)).status_code == 503
    assert first <= 48
    assert checks() == first, f"{refusals} refusals made {checks()} checks"


async def test_a_held_sessions_request_costs_one_check_of_that_session() -> None:
    """48 sessions held, each with a stream open: between refusals of made-up ids, one
    held session's client sends a ``ping`` (served). Each such request changes one
    session, so the refusal after it checks that session alone."""
    refusals = 20
    async with full_of_streams(48) as (gw, http, sids):
        assert await made_up(http, gw.url, 0) == 503
        checks = counted_checks(gw)
        with anyio.fail_after(20):
            for i in range(1, refusals):
                assert await ping(http, gw.url, sids[0]) == 200
                assert await made_up(http, gw.url, i) == 503
    assert checks() <= refusals - 1, f"{refusals - 1} refusals made {checks()} checks"


async def test_a_session_accepted_at_a_full_table_costs_no_scan_of_the_held_sessions() -> None:
    """``max_sessions`` 24: 23 held sessions each with a stream open (never droppable),
    and an idle one. 20 ``initialize``s in turn are each served, and room is made for
    each session the upstream accepts by letting go the one droppable held session (the
    idle one, then the previous new one): the 23 stay held. The first may check every
    held session once, and the one let go again; each after it checks only the sessions
    that changed since (a constant, however many held sessions did not change)."""
    held, requests = 23, 20
    async with full_of_streams(held, spare=1) as (gw, http, sids):
        assert (await room.new_session(http, gw.url)).status_code == 200
        checks = counted_checks(gw)
        with anyio.fail_after(20):
            served = [await room.new_session(http, gw.url)]
            first = checks()
            for _ in range(1, requests):
                served.append(await room.new_session(http, gw.url))
        kept = sorted(gw.gateway._sessions)
    assert [r.status_code for r in served] == [200] * requests
    assert kept == sorted([*sids, served[-1].headers["mcp-session-id"]])
    assert first <= held + 2, f"the first initialize made {first} checks"
    rest = checks() - first
    assert rest <= 3 * (requests - 1), f"{requests - 1} initializes made {rest} checks"


# ----------------------------------------------------- no refusal once room can be made


class PingsHeldBack(scripted.PostScreen):
    """An upstream that holds a ``ping`` (of session ``only`` alone, once set) back until
    ``release`` is set (``arrived`` is set when one comes); everything goes on to
    ``inner``."""

    def __init__(self, inner: scripted.Upstream) -> None:
        super().__init__(inner)
        self.arrived, self.release = anyio.Event(), anyio.Event()
        self.only: str | None = None

    async def screen(self, headers: dict[str, str], msg: Any, send: Any) -> bool:
        ours = self.only is None or headers.get("mcp-session-id") == self.only
        if ours and isinstance(msg, dict) and msg.get("method") == "ping":
            self.arrived.set()
            await self.release.wait()
        return False


async def test_a_session_whose_last_request_ended_makes_room_for_the_next() -> None:
    """At ``max_sessions`` (1), A's ``ping`` is held back upstream: a new session is
    refused ``503``. Once A's ``ping`` is answered (A's session has no request in
    flight), the next new session is served, A's let go for it."""
    up = PingsHeldBack(scripted.Upstream(issue_sessions=True))
    async with room.at_one_session(up) as (gw, http), anyio.create_task_group() as tg:
        sid = (await room.new_session(http, gw.url)).headers["mcp-session-id"]
        pinged = await held_back(tg, up, ping(http, gw.url, sid))
        refused = await room.new_session(http, gw.url)
        up.release.set()
        await room.no_request_in_flight(gw, sid)
        served = await room.new_session(http, gw.url)
        held = sorted(gw.gateway._sessions)
    assert (refused.status_code, pinged) == (503, [200])
    assert served.status_code == 200
    assert held == [served.headers["mcp-session-id"]]


class MarksHeldBack(MemoryStore):
    """A store whose marks of a submitted answer wait for ``release`` (``marking`` is
    set when one begins): the replica's answer submission ends only then."""

    def __init__(self) -> None:
        super().__init__()
        self.marking, self.release = anyio.Event(), anyio.Event()

    async def mark_submitted(self, session: str, request_id: Any) -> bool:
        self.marking.set()
        await self.release.wait()
        return await super().mark_submitted(session, request_id)


async def test_a_session_whose_answer_submission_ended_makes_room_for_the_next() -> None:
    """At ``max_sessions`` (1), A answers its prompt (``202``) and the guard's submission
    reaches the server; its end waits for the store's mark: a new session is refused
    ``503`` meanwhile. Once the submission ended (the mark made), the next new session
    is served, A's let go for it."""
    inner = scripted.asking(scripted.Upstream(issue_sessions=True))
    store = MarksHeldBack()
    async with room.at_one_session(inner, store=store) as (gw, http):
        sid, a_head = await room.a_prompt_shown(http, gw.url)
        answered = await http.post(gw.url, json=scripted.ANSWER, headers=a_head)
        with anyio.fail_after(room.STEP):
            await store.marking.wait()
        session = await room.no_request_in_flight(gw, sid)
        refused = await room.new_session(http, gw.url)
        store.release.set()
        assert await room.until(lambda: not session.engine.submissions), "it never ended"
        served = await room.new_session(http, gw.url)
        held = sorted(gw.gateway._sessions)
    assert (answered.status_code, refused.status_code) == (202, 503)
    assert inner.answered.is_set()
    assert served.status_code == 200
    assert held == [served.headers["mcp-session-id"]]


def _abandoned(e: Any, key: Any) -> None:
    """A's prompt ends as the replica's claim watcher ends one whose holder's lease
    lapsed elsewhere: its stream abandoned."""
    stream = e.guard.stream_of(key)
    assert stream is not None
    e.feed(events.StreamAbandoned(stream, "claim-lapsed", "the stream's lease lapsed"))


def _answered_elsewhere(e: Any, key: Any) -> None:
    """A's prompt ends as answered upstream (``SessionIO.answered_upstream``, what the
    claim watcher does when the store says another replica submitted A's answer)."""
    e.answered_upstream(key, scripted.ANSWER["result"], SubmissionResult(202, None), tell=False)


@pytest.mark.parametrize(
    "end", [_abandoned, _answered_elsewhere], ids=["abandoned", "answered-elsewhere"]
)
async def test_a_session_whose_presented_prompt_ended_makes_room_for_the_next(
    end: Callable[[Any, Any], None],
) -> None:
    """At ``max_sessions`` (1), A's prompt is shown here and A's connection breaks: a new
    session is refused ``503`` (the prompt keeps A's session). Then A's prompt ends with
    no request of A's session (``end``: its stream abandoned, or answered through another
    replica). The next new session is served, A's let go for it."""
    inner = scripted.asking(scripted.Upstream(issue_sessions=True))
    async with room.at_one_session(inner) as (gw, http):
        sid, _, session = await room.a_prompt_left(gw, http)
        refused = await room.new_session(http, gw.url)
        e = session.engine
        key = (sid, 1)
        assert e.guard.state_of(key) == "presented"
        end(e, key)
        ended = e.guard.state_of(key)
        served = await room.new_session(http, gw.url)
        held = sorted(gw.gateway._sessions)
    assert refused.status_code == 503
    assert ended != "presented"
    assert served.status_code == 200, f"refused {served.status_code} once A's prompt ended"
    assert held == [served.headers["mcp-session-id"]]


@dataclass
class _Later:
    """The ``time`` module as the gateway reads it, ``ahead`` seconds later (its own
    clock only: the event loop's and the guard's are untouched)."""

    ahead: float

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead

    def time(self) -> float:
        return time.time() + self.ahead


async def test_a_session_unused_past_session_idle_s_makes_room_for_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At ``max_sessions`` (1), A's prompt is shown here and A's connection breaks: a new
    session is refused ``503``. ``session_idle_s`` (60 s) later, with no request of A's
    session meanwhile (the replica's clock moved on), the next new session is served,
    A's let go for it."""
    inner = scripted.asking(scripted.Upstream(issue_sessions=True))
    limits = GatewayLimits(max_sessions=1, standalone_hold_s=0, session_idle_s=60.0)
    async with room.at_one_session(inner, limits=limits) as (gw, http):
        await room.a_prompt_left(gw, http)
        refused = await room.new_session(http, gw.url)
        monkeypatch.setattr(app, "time", _Later(61.0))
        served = await room.new_session(http, gw.url)
        held = sorted(gw.gateway._sessions)
    assert refused.status_code == 503
    assert served.status_code == 200
    assert held == [served.headers["mcp-session-id"]]


async def test_a_session_its_client_ended_makes_room_for_the_next() -> None:
    """At ``max_sessions`` (1), A's prompt is shown here and A's connection breaks: a new
    session is refused ``503``. A then ends its session (``DELETE``): the next new
    session is served."""
    inner = scripted.asking(scripted.Upstream(issue_sessions=True))
    async with room.at_one_session(inner) as (gw, http):
        _, a_head, _ = await room.a_prompt_left(gw, http)
        refused = await room.new_session(http, gw.url)
        deleted = await http.request("DELETE", gw.url, headers=a_head)
        served = await room.new_session(http, gw.url)
        held = sorted(gw.gateway._sessions)
    assert (refused.status_code, deleted.status_code) == (503, 202)
    assert served.status_code == 200
    assert held == [served.headers["mcp-session-id"]]


# ------------------------------------------------------------ which sessions are let go


async def test_room_is_made_by_letting_go_the_least_recently_used_droppable_session_alone() -> None:
    """``max_sessions`` 3: S's session, held first, has a stream open (it may not be let
    go); A's and B's are held after it. A's ``ping`` is held back upstream while B's is
    served, so A's last request began before B's (A's is the less recently used session)
    and ended after it. A new session C is served, and room is made for it by letting go
    A's session alone: of those that may be let go, the least recently used (by when
    their requests began, not ended), and no more than the bound needs (B's stays)."""
    up = PingsHeldBack(scripted.Upstream(issue_sessions=True, standalone=[]))
    async with (
        room.at_one_session(up, limits=GatewayLimits(max_sessions=3)) as (gw, http),
        contextlib.AsyncExitStack() as streams,
        anyio.create_task_group() as tg,
    ):
        s = (await room.new_session(http, gw.url)).headers["mcp-session-id"]
        opened = await open_stream(streams, http, gw.url, s)
        a = (await room.new_session(http, gw.url)).headers["mcp-session-id"]
        b = (await room.new_session(http, gw.url)).headers["mcp-session-id"]
        up.only = a
        pinged = await held_back(tg, up, ping(http, gw.url, a))
        b_pinged = await ping(http, gw.url, b)
        up.release.set()
        a_session = await room.no_request_in_flight(gw, a)
        table = list(gw.gateway._sessions)
        ended_first = gw.gateway._sessions[b].last_used < a_session.last_used
        served = await room.new_session(http, gw.url)
        held = sorted(gw.gateway._sessions)
    assert (opened.status_code, b_pinged, pinged) == (200, 200, [200])
    assert (table, ended_first) == ([s, a, b], True)
    assert served.status_code == 200
    assert held == sorted([s, b, served.headers["mcp-session-id"]])


async def test_of_few_droppable_sessions_among_many_the_least_recently_used_is_let_go() -> None:
    """``max_sessions`` 18: 16 held sessions each with a stream open (never droppable),
    then A's and B's, idle, held after them; A's client then sends a ``ping``, so B's is
    the least recently used. A new session C is served, and room is made for it by
    letting go B's session alone: of two droppable sessions among 18 held (few of many,
    looked at without a pass over the table), the least recently used."""
    async with full_of_streams(16, spare=2) as (gw, http, sids):
        a = (await room.new_session(http, gw.url)).headers["mcp-session-id"]
        b = (await room.new_session(http, gw.url)).headers["mcp-session-id"]
        pinged = await ping(http, gw.url, a)
        await room.no_request_in_flight(gw, a)
        with anyio.fail_after(20):
            served = await room.new_session(http, gw.url)
        held = sorted(gw.gateway._sessions)
    assert (pinged, served.status_code) == (200, 200)
    c = served.headers["mcp-session-id"]
    kept = sorted(set(held) - set(sids))
    assert b not in held and held == sorted([*sids, a, c]), f"kept {kept}, not A's and C's"


@contextlib.asynccontextmanager
async def held_back_at_one_session(
    up: Any,
) -> AsyncIterator[tuple[Any, Any, contextlib.AsyncExitStack, Any]]:
    """:func:`room.at_one_session` in front of ``up``, a stack that keeps the streams its
    clients open (:func:`open_stream`) and a task group for the requests ``up`` holds
    back (:func:`held_back`)."""
    async with (
        room.at_one_session(up) as (gw, http),
        contextlib.AsyncExitStack() as streams,
        anyio.create_task_group() as tg,
    ):
        yield gw, http, streams, tg


async def test_a_session_ended_here_is_no_room_once_its_last_request_ends() -> None:
    """``max_sessions`` 1: A's ``ping`` is held back upstream while A's client ends A's
    session (``DELETE``); then the ``ping`` is answered, so a request of A ends after A
    stopped being held. B's session is held with a stream open (never droppable): the
    table is full, and a new session C is refused ``503``: A, no longer held, is no
    room, however late its request ended."""
    up = PingsHeldBack(scripted.Upstream(issue_sessions=True, standalone=[]))
    async with held_back_at_one_session(up) as (gw, http, streams, tg):
        a = (await room.new_session(http, gw.url)).headers["mcp-session-id"]
        a_session = gw.gateway._sessions[a]
        a_head = {**scripted.HEAD, "mcp-session-id": a}
        up.only = a
        pinged = await held_back(tg, up, ping(http, gw.url, a))
        deleted = await http.request("DELETE", gw.url, headers=a_head)
        assert await room.until(lambda: a_session.closed), "A's session held after its DELETE"
        up.release.set()
        assert await room.until(lambda: bool(pinged)), "A's ping never ended"
        assert await room.until(lambda: a_session.busy == 0), "A's request never ended"
        b = (await room.new_session(http, gw.url)).headers["mcp-session-id"]
        opened = await open_stream(streams, http, gw.url, b)
        refused = await room.new_session(http, gw.url)
        held = sorted(gw.gateway._sessions)
        unsure_closed = [s for s in gw.gateway._unsure if s.closed]
    assert (deleted.status_code, opened.status_code) == (202, 200)
    assert refused.status_code == 503, f"C got {refused.status_code}: A counted as room"
    assert held == [b], f"held {held}"
    assert unsure_closed == []


class InitHeldBack(scripted.PostScreen):
    """An upstream that holds an ``initialize`` back until ``release`` is set, once
    ``holding`` (``arrived`` is set when one comes); everything goes on to ``inner``."""

    def __init__(self, inner: scripted.Upstream) -> None:
        super().__init__(inner)
        self.arrived, self.release = anyio.Event(), anyio.Event()
        self.holding = False

    async def screen(self, headers: dict[str, str], msg: Any, send: Any) -> bool:
        if self.holding and isinstance(msg, dict) and msg.get("method") == "initialize":
            self.arrived.set()
            await self.release.wait()
        return False


async def test_a_refusal_at_a_table_over_the_bound_reads_no_session_to_let_go() -> None:
    """``max_sessions`` 1: S's session is held, idle, so C's ``initialize`` is let in
    and held back upstream; meanwhile S's client opens a stream (S may not be let go).
    The upstream accepts C's session: it is held over the bound, and C's client opens a
    stream too. 10 requests naming made-up session ids are each refused ``503`` without
    the held sessions being read in the order they are let go in (nothing could be let
    go: no trim of the table is tried), and with no more checks than the first makes."""
    up = InitHeldBack(scripted.Upstream(issue_sessions=True, standalone=[]))
    async with held_back_at_one_session(up) as (gw, http, streams, tg):
        s = (await room.new_session(http, gw.url)).headers["mcp-session-id"]
        up.holding = True
        inits = await held_back(tg, up, room.new_session(http, gw.url))
        for sid in (s, None):
            if sid is None:
                up.release.set()
                assert await room.until(lambda: bool(inits)), "C's initialize never ended"
                sid = inits[0].headers["mcp-session-id"]
            assert (await open_stream(streams, http, gw.url, sid)).status_code == 200
        over = len(gw.gateway._sessions)
        checks, reads = counted_checks(gw), counted_reads(gw)
        with anyio.fail_after(20):
            statuses = [await made_up(http, gw.url, i) for i in range(10)]
    assert (inits[0].status_code, over) == (200, 2)
    assert statuses == [503] * 10
    assert reads() == (0, 0), f"10 refusals read the sessions to let go {reads()} times"
    assert checks() <= 2, f"10 refusals made {checks()} checks"


async def test_room_made_reads_the_held_sessions_no_further_than_the_one_let_go() -> None:
    """``max_sessions`` 20, all held, all idle (none looked at since held): a new session
    is served, and room is made for it by letting go the least recently used one. The
    held sessions are read, least recently used first, only up to the first that need
    not go (two given): not the whole table."""
    up = scripted.Upstream(issue_sessions=True)
    limits = GatewayLimits(max_sessions=20, standalone_hold_s=0)
    async with room.at_one_session(up, limits=limits) as (gw, http):
        with anyio.fail_after(20):
            sids = [
                (await room.new_session(http, gw.url)).headers["mcp-session-id"] for _ in range(20)
            ]
            reads = counted_reads(gw)
            served = await room.new_session(http, gw.url)
        held = sorted(gw.gateway._sessions)
    assert served.status_code == 200
    assert held == sorted([*sids[1:], served.headers["mcp-session-id"]])
    assert reads() == (1, 2), f"(readings, sessions given) {reads()}"
