"""An answer the client gave reaches the server once, across replicas sharing a store.

The replica that claims a prompt holds it under a lease and submits the client's answer;
a replica whose copy of the stream lost the claim watches it, and submits the answer
stored for it only when the holder died before its submission ended (its lease lapsed,
the answer not marked submitted: :meth:`~fsm.gateway.store.StateStore.mark_submitted`).
So: a stream that went to replica 2 and back to replica 1, answered on 1, sends the
answer once (1 submits it; 2, watching, does not); a holder that dies after the
client's ``202`` and before its submission loses nothing (2 submits it, once); with
three replicas, the two survivors of such a holder send its answer once between them
(each must take the dead holder's claim over first:
:meth:`~fsm.gateway.store.StateStore.take_over`, which one wins); one that dies after its
submission was marked is not followed by a second; and a replica runs one watcher per
prompt, however many of its copies lost the claim. The survivor that took a claim over
retries a retryable failure of its send, and its session is not let go for room
meanwhile; a holder whose mark failed keeps its lease until the mark lands; an answer a
live replica relayed is marked before it is stored, so no survivor sends it again. A
replica that was replayed the prompt and takes the answer while the holder lives
submits it under the claim's lease, handed to it as the answer is stored
(:meth:`~fsm.gateway.store.StateStore.hold_answer`): the holder's death lets no survivor
send it too, and the submitter's death leaves it to the holder.

No sleep provokes an order: the upstream is scripted (its replays by turn), a replica's
store calls are held or counted where a test needs an order, and every wait is for a
state (bounded by :data:`STEP` against hanging).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

import anyio
import httpx2
import pytest

pytest.importorskip("uvicorn")

from fsm.gateway.app import GATEWAY_GUARD, Gateway, GatewayLimits
from fsm.gateway.ids import EventIdKeys
from fsm.gateway.redis_store import RedisStore
from fsm.gateway.store import (
    ClaimStatus,
    Cursor,
    MemoryStore,
    RequestId,
    StoreUnavailableError,
)
from fsm.wire.serving import on_loopback
from support.changes import Changes
from support.gateway import RunningGateway, running_gateway
from tests.gateway import scripted_upstream as scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

STEP = 15.0
"""Safety bound of one wait: it only elapses when the awaited state never comes."""

LEASE_S = 1.0
"""The replicas' lease: renewed every third of it, watched as often; long enough that a
loaded machine's holder keeps it while it lives, short enough to wait for its lapse."""

CONFIG = replace(GATEWAY_GUARD, backoff_initial_s=0.01, backoff_max_s=0.02)
HEAD = {**scripted.HEAD, "mcp-session-id": scripted.SID}
"""The headers of the client's POSTs in session :data:`scripted.SID`."""
GET = {"accept": "text/event-stream", "mcp-session-id": scripted.SID}
"""The headers of the client's resume ``GET`` (its ``Last-Event-ID`` added)."""
RESULT = b"isError"
"""What only the call's result carries."""
PROMPT = scripted.elicit(1)
"""The server's prompt, id 1."""


class Meeting:
    """Holds each of ``n`` callers of :meth:`arrive` until all ``n`` arrived; later ones
    pass at once."""

    def __init__(self, n: int) -> None:
        self.left = n
        self.met = anyio.Event()

    async def arrive(self) -> None:
        if self.met.is_set():
            return
        self.left -= 1
        if self.left == 0:
            self.met.set()
        with anyio.fail_after(STEP):
            await self.met.wait()


class View:
    """One replica's view of the shared ``store``: every call passed on, and what a test
    needs of it: ``claim_status`` held while :attr:`held` is set (until :attr:`go`), its
    reply then held at ``meet`` (when given) until every replica met there read its own,
    cursors not recorded with :attr:`drop_cursors` (a replica that died before it
    could), and :attr:`lost` set once a claim was lost and its status read."""

    def __init__(
        self, store: Any, *, drop_cursors: bool = False, meet: Meeting | None = None
    ) -> None:
        self.store = store
        self.drop_cursors = drop_cursors
        self.meet = meet
        self.held = False
        self.go = anyio.Event()
        self.lost = anyio.Event()
        self.opened = anyio.Event()
        self._losing = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def claim(self, session: str, request_id: RequestId, **terms: Any) -> bool:
        won = bool(await self.store.claim(session, request_id, **terms))
        self._losing = not won
        return won

    async def claim_status(self, session: str, request_id: RequestId) -> ClaimStatus:
        if self.held:
            await self.go.wait()
        got: ClaimStatus = await self.store.claim_status(session, request_id)
        if self.meet is not None:
            await self.meet.arrive()
        if self._losing:
            self._losing = False
            self.lost.set()
        return got

    async def open_claims(self, session: str, stream: str) -> list[RequestId]:
        got: list[RequestId] = await self.store.open_claims(session, stream)
        self.opened.set()
        return got

    async def save_cursor(self, session: str, stream: str, cursor: Cursor) -> None:
        if not self.drop_cursors:
            await self.store.save_cursor(session, stream, cursor)


class Watchers:
    """Counts the claim watchers a replica runs (:meth:`Gateway._watch_claim`, wrapped on
    the instance: every watcher is spawned by that name): started in all, running now,
    the most running at once per request."""

    def __init__(self, gateway: Gateway) -> None:
        self.started = 0
        self.running = 0
        self.most: dict[RequestId, int] = {}
        self._now: dict[RequestId, int] = {}
        self._changes = Changes()
        inner = gateway._watch_claim

        async def watch(args: Any) -> None:
            rid = args[1][1]
            self.started += 1
            self.running += 1
            self._now[rid] = self._now.get(rid, 0) + 1
            self.most[rid] = max(self.most.get(rid, 0), self._now[rid])
            self._changes.note()
            try:
                await inner(args)
            finally:
                self.running -= 1
                self._now[rid] -= 1
                self._changes.note()

        gateway._watch_claim = watch  # type: ignore[method-assign]

    async def until(self, done: Callable[[], bool]) -> None:
        """Until ``done()`` holds, checked as watchers start and end."""
        with anyio.fail_after(STEP):
            await self._changes.until(done)

    async def begun(self) -> None:
        """Until a watcher started."""
        await self.until(lambda: self.started > 0)

    async def all_ended(self) -> None:
        """Until at least one watcher started and none runs."""
        await self.until(lambda: bool(self.started and not self.running))


class AnswerScreen(scripted.PostScreen):
    """An upstream in front of the scripted one that sees each answer POST first
    (:attr:`arrived` set at the first) and answers it itself (:meth:`answer` ``True``)
    or lets it go on; everything else goes on."""

    def __init__(self, inner: scripted.Upstream) -> None:
        super().__init__(inner)
        self.arrived = anyio.Event()

    async def screen(self, headers: dict[str, str], msg: Any, send: Any) -> bool:
        if not (isinstance(msg, dict) and "result" in msg and "method" not in msg):
            return False
        self.arrived.set()
        return await self.answer(send)

    async def answer(self, send: Any) -> bool:
        """Answer this answer POST with ``send`` (``True``), or let it go on (``False``)."""
        raise NotImplementedError


class Swallow(AnswerScreen):
    """The upstream as a dying replica sees it: its answer POSTs never get through (each
    is held, counted in :attr:`held`, until its sender goes)."""

    held = 0

    async def answer(self, send: Any) -> bool:
        self.held += 1
        await anyio.sleep_forever()  # cancelled when its sender's connection goes
        return True  # pragma: no cover


def by_turn(*turns: Sequence[scripted.Piece]) -> Callable[[str], Sequence[scripted.Piece]]:
    """An :attr:`scripted.Upstream.replay` giving each resume the next of ``turns`` (the
    last one again once they are spent), whatever its cursor."""
    given = list(turns)

    def replay(cursor: str) -> Sequence[scripted.Piece]:
        return given.pop(0) if len(given) > 1 else given[0]

    return replay


def answers(up: scripted.Upstream) -> list[Any]:
    """The answers to prompt 1 that reached ``up``."""
    return [msg["result"] for msg in up.responses("result") if msg.get("id") == 1]


def ids_of(raw: bytes, word: str) -> str:
    """The id of the event of ``raw`` whose data holds ``word``."""
    found = [eid for eid, data in scripted.parse(raw) if word in data and eid]
    assert found, raw
    return found[0]


@contextlib.asynccontextmanager
async def fronted(
    up: scripted.Upstream, views: tuple[Any, ...], fronts: tuple[Any, ...] | None = None
) -> AsyncIterator[tuple[list[RunningGateway], httpx2.AsyncClient]]:
    """``up`` on loopback behind replicas, one per store of ``views`` (views of one shared
    store), replica ``i`` reaching ``up`` through ``fronts[i]`` (``None``, or no
    ``fronts``: directly), one key for their event ids; session :data:`scripted.SID`
    begun on the first."""
    limits = GatewayLimits(standalone_hold_s=0, lease_s=LEASE_S)
    common: dict[str, Any] = {"id_keys": EventIdKeys.generate(), "limits": limits}
    common["config"] = CONFIG
    async with contextlib.AsyncExitStack() as stack:
        gws = []
        for view, front in zip(views, fronts or (None,) * len(views), strict=True):
            url = await stack.enter_async_context(on_loopback(front if front is not None else up))
            gws.append(await stack.enter_async_context(running_gateway(url, store=view, **common)))
        http = await stack.enter_async_context(httpx2.AsyncClient(timeout=STEP))
        await scripted.initialize(http, gws[0].url)
        yield gws, http


def asks_after_progress(up: scripted.Upstream, *then: scripted.Piece) -> anyio.Event:
    """Script ``up``'s call: a progress event (``e0``), then, once the returned event is
    set, the prompt (``e1``: its claim records the stream, so a replica taking the stream
    over finds it among the stream's open claims), then ``then``."""
    gap = anyio.Event()
    up.call = [scripted.sse("e0", scripted.PROGRESS), gap, scripted.sse("e1", PROMPT), *then]
    return gap


async def prompt_then_leave(http: httpx2.AsyncClient, url: str, gap: anyio.Event) -> bytes:
    """The client calls the tool through ``url`` and reads its progress, then (``gap``
    set) up to the prompt; then its connection breaks. What it read."""
    async with http.stream("POST", url, json=scripted.CALL, headers=HEAD) as r:
        pieces = r.aiter_raw()
        seen = await scripted.read_until(pieces, b"progress")
        gap.set()
        return seen + await scripted.read_until(pieces, b"elicitation/create")


@contextlib.asynccontextmanager
async def resumed(
    http: httpx2.AsyncClient, url: str, prompt_id: str
) -> AsyncIterator[httpx2.Response]:
    """The client's resume, at ``url``, of its call stream from ``prompt_id`` (``200``),
    open while the block runs."""
    async with http.stream("GET", url, headers={**GET, "last-event-id": prompt_id}) as r:
        assert r.status_code == 200
        yield r


@contextlib.asynccontextmanager
async def replayed_on_second(
    http: httpx2.AsyncClient,
    replicas: tuple[RunningGateway, RunningGateway, RunningGateway],
    gap: anyio.Event,
    watch3: Watchers,
    lost: anyio.Event,
) -> AsyncIterator[httpx2.Response]:
    """The prompt shown on replica 1; the client resumes on replica 3 from it (3 then
    watches 1's claim: ``watch3`` begun) and leaves, then resumes on replica 2 from the
    event before it, so 2 is replayed the prompt and loses its claim (``lost`` set). That
    resume (yielded) stays open while the block runs."""
    r1, r2, r3 = replicas
    seen = await prompt_then_leave(http, r1.url, gap)
    stale, prompt_id = ids_of(seen, "progress"), ids_of(seen, "elicitation/create")
    await resume_then_leave(http, r3.url, prompt_id)
    await watch3.begun()
    async with resumed(http, r2.url, stale) as moved:
        await until_set(lost)
        yield moved


async def resume_then_leave(http: httpx2.AsyncClient, url: str, last_event_id: str) -> None:
    """The client resumes its call's stream through ``url`` from ``last_event_id`` (the
    replica takes the stream over); its connection then breaks."""
    async with resumed(http, url, last_event_id):
        pass


def runs_on_after_prompt(up: scripted.Upstream, *later: Sequence[scripted.Piece]) -> anyio.Event:
    """Script ``up``'s call (:func:`asks_after_progress`) so that the tool runs on after
    the prompt: nothing more comes on the call's stream, and a resume of it replays
    nothing; the resumes after the first get ``later``, in turn. The event that lets the
    prompt come."""
    never = anyio.Event()
    gap = asks_after_progress(up, never)
    up.replay = by_turn([never], *later)
    return gap


def answered_then_result(up: scripted.Upstream) -> list[scripted.Piece]:
    """A replay that waits until ``up`` took the answer, then brings the call's result
    (7)."""
    return [up.answered, scripted.sse("e2", scripted.result(7))]


def last_message(raw: bytes) -> Any:
    """The last message the events of ``raw`` carry."""
    return [json.loads(d) for _, d in scripted.parse(raw) if d][-1]


async def until_set(*events: anyio.Event) -> None:
    """Until each of ``events`` is set, in turn (all within one :data:`STEP`)."""
    with anyio.fail_after(STEP):
        for event in events:
            await event.wait()


@contextlib.asynccontextmanager
async def answered_while_watched(
    http: httpx2.AsyncClient, holder: RunningGateway, watcher: RunningGateway, gap: anyio.Event
) -> AsyncIterator[tuple[Watchers, httpx2.Response, httpx2.Response]]:
    """The prompt shown on ``holder`` (claimed there; the client's connection then
    breaks), the client resumes its call's stream on ``watcher``, which watches the
    holder's claim, then answers on ``holder``. The claim watchers of ``watcher``, the
    holder's reply to the answer, and the resume, open while the block runs."""
    watchers = Watchers(watcher.gateway)
    prompt_id = ids_of(await prompt_then_leave(http, holder.url, gap), "elicitation/create")
    async with resumed(http, watcher.url, prompt_id) as moved:
        await watchers.begun()
        a = await http.post(holder.url, json=scripted.ANSWER, headers=HEAD)
        yield watchers, a, moved


async def dies_sending(holder: RunningGateway, screen: AnswerScreen) -> None:
    """Until ``holder``'s answer POST reached ``screen`` (which never lets it through);
    then ``holder`` dies, its answer stored and its submission not over."""
    await until_set(screen.arrived)
    holder.kill()


async def lapsed(store: Any) -> None:
    """Until the lease of prompt 1's claim in ``store`` lapsed."""
    with anyio.fail_after(STEP):
        while not (await store.claim_status(scripted.SID, 1)).lease_lapsed:
            await anyio.sleep(0.05)


@contextlib.asynccontextmanager
async def shared_store(
    kind: str, request: pytest.FixtureRequest, n: int = 2
) -> AsyncIterator[tuple[Any, ...]]:
    """The store of each of ``n`` replicas, one shared state: one :class:`MemoryStore`,
    or a :class:`RedisStore` each (a client of its own) on the module's real Redis, under
    one prefix of their own."""
    if kind == "memory":
        memory = MemoryStore()
        yield (memory,) * n
        return
    url = str(request.getfixturevalue("server").url)
    prefix = f"once{uuid.uuid4().hex[:8]}:"
    stores = tuple(RedisStore.from_url(url, prefix=prefix) for _ in range(n))
    try:
        yield stores
    finally:
        for store in stores:
            await store.aclose()


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_stream_back_on_its_holder_sends_the_answer_once(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """The reproduction. The call's stream goes replica 1 (prompt shown, claimed there)
    -> replica 2 (which takes it over and watches 1's claim) -> replica 1, where the
    client answers. Replica 1, alive, submits the answer and marks it submitted;
    replica 2's watcher sees the answer stored, then the mark, and sends nothing:
    exactly one answer POST for the prompt reaches the server."""
    up = scripted.Upstream()
    gap = runs_on_after_prompt(up, answered_then_result(up))
    async with (
        shared_store(kind, request) as (store, other),
        fronted(up, (store, other)) as ((r1, r2), http),
    ):
        watchers = Watchers(r2.gateway)
        prompt_id = ids_of(await prompt_then_leave(http, r1.url, gap), "elicitation/create")
        await resume_then_leave(http, r2.url, prompt_id)  # replica 2 watches 1's claim
        async with resumed(http, r1.url, prompt_id) as back:
            a = await http.post(r1.url, json=scripted.ANSWER, headers=HEAD)
            got = await scripted.read_until(back.aiter_raw(), RESULT)
        await watchers.all_ended()
        status = await store.claim_status(scripted.SID, 1)
    assert a.status_code == 202
    assert last_message(got) == scripted.result(7)
    assert answers(up) == [{"action": "accept"}], "the answer reached the server twice"
    assert (status.submitted, status.answer) == (True, {"action": "accept"})


async def test_a_holder_dead_after_the_202_before_its_submission_loses_nothing() -> None:
    """Replica 1 shows the prompt and takes the client's answer (``202``, the answer kept
    in the store), but its submission never gets through; it dies. Replica 2, which took
    the stream over, waits while 1's lease holds, then (lapsed, unmarked) takes the
    claim over and submits the stored answer: once, and the call ends with its result."""
    up = scripted.Upstream()
    gap = asks_after_progress(up, anyio.Event())
    up.replay = by_turn(answered_then_result(up))
    dying = Swallow(up)
    store = MemoryStore()
    async with fronted(up, (store, store), (dying, None)) as ((r1, r2), http):
        async with answered_while_watched(http, r1, r2, gap) as (watchers, a, moved):
            await until_set(dying.arrived)  # replica 1's submission, held
            before = answers(up)
            r1.kill()
            got = await scripted.read_until(moved.aiter_raw(), RESULT)
        await watchers.all_ended()
        status = await store.claim_status(scripted.SID, 1)
        survivor = r2.gateway.replica
    assert a.status_code == 202
    assert before == [] and dying.held == 1
    assert answers(up) == [{"action": "accept"}]
    assert last_message(got) == scripted.result(7)
    assert status.submitted and status.owner == survivor  # 2 took the claim over to send it


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_two_survivors_of_a_holder_dead_after_the_202_send_its_answer_once(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """Three replicas. Replica 1 shows the prompt and takes the client's answer (``202``,
    kept in the store); its submission never gets through, and it dies. Replicas 3 (the
    client resumed there, then left) and 2 (the client resumed there and reads on) both
    watch 1's claim; both are let read it only once 1's lease lapsed, and both read
    "answer stored, unmarked, holder gone" before either acts. Each must take the claim
    over before it submits: one wins and sends the answer; the other finds a live lease
    again, waits, then the mark. Exactly one answer POST reaches the server, and the
    call ends with its result."""
    up = scripted.Upstream()
    gap = runs_on_after_prompt(up, answered_then_result(up))
    dying = Swallow(up)
    meeting = Meeting(2)
    async with shared_store(kind, request, 3) as (store, two, three):
        second, third = View(two, meet=meeting), View(three, meet=meeting)
        second.held = third.held = True  # they read the claim only once 1's lease lapsed
        views = (store, second, third)
        async with fronted(up, views, (dying, None, None)) as ((r1, r2, r3), http):
            watching = [Watchers(r2.gateway), Watchers(r3.gateway)]
            prompt_id = ids_of(await prompt_then_leave(http, r1.url, gap), "elicitation/create")
            await resume_then_leave(http, r3.url, prompt_id)  # replica 3 watches 1's claim
            async with resumed(http, r2.url, prompt_id) as moved:
                await watching[0].begun()
                await watching[1].begun()
                a = await http.post(r1.url, json=scripted.ANSWER, headers=HEAD)
                await dies_sending(r1, dying)
                await lapsed(two)
                second.go.set()
                third.go.set()
                got = await scripted.read_until(moved.aiter_raw(), RESULT)
            for w in watching:
                await w.all_ended()
            status = await two.claim_status(scripted.SID, 1)
            survivors = {r2.gateway.replica, r3.gateway.replica}
    assert a.status_code == 202
    assert dying.held == 1
    assert answers(up) == [{"action": "accept"}], "each survivor sent the dead holder's answer"
    assert last_message(got) == scripted.result(7)
    assert status.submitted and status.owner in survivors


async def test_a_holder_dead_after_its_submission_was_marked_is_not_followed() -> None:
    """Replica 1 submits the client's answer (the server takes it) and marks it
    submitted, then dies; its lease lapses. Replica 2's watcher, held until then, finds
    the answer stored, marked, the holder gone: it sends nothing, and ends no call
    (``claim-lapsed`` is for a prompt with no answer)."""
    up = scripted.Upstream()
    gap = runs_on_after_prompt(up)
    store = MemoryStore()
    second = View(store)
    second.held = True  # replica 2 reads the claim only once 1 is dead
    async with fronted(up, (store, second)) as ((r1, r2), http):
        watchers = Watchers(r2.gateway)
        prompt_id = ids_of(await prompt_then_leave(http, r1.url, gap), "elicitation/create")
        await resume_then_leave(http, r2.url, prompt_id)
        a = await http.post(r1.url, json=scripted.ANSWER, headers=HEAD)
        with anyio.fail_after(STEP):
            while not (await store.claim_status(scripted.SID, 1)).submitted:
                await anyio.sleep(0.01)
        r1.kill()
        await lapsed(store)
        second.go.set()
        await watchers.all_ended()
        failures = dict(r2.gateway._sessions[scripted.SID].engine.failures.items())
    assert a.status_code == 202
    assert answers(up) == [{"action": "accept"}]
    assert failures == {}


async def test_one_watcher_runs_per_prompt_in_a_session() -> None:
    """Replica 2 takes the stream over from a stale id (the cursor replica 1 reached was
    not recorded): it watches the claims made on the stream, and the server's replay
    brings the prompt again, whose claim it loses: two reasons to watch one prompt, one
    watcher. The client answers on replica 1; replica 2's watcher finds it marked
    submitted and records it as answered upstream: one answer reaches the server."""
    up = scripted.Upstream()
    gap = asks_after_progress(up, anyio.Event())
    up.replay = by_turn([scripted.sse("e1", PROMPT), anyio.Event()])
    store = MemoryStore()
    first, second = View(store, drop_cursors=True), View(store, drop_cursors=True)
    async with fronted(up, (first, second)) as ((r1, r2), http):
        watchers = Watchers(r2.gateway)
        async with http.stream("POST", r1.url, json=scripted.CALL, headers=HEAD) as r:
            pieces = r.aiter_raw()
            stale = ids_of(await scripted.read_until(pieces, b"progress"), "progress")
            gap.set()
            await scripted.read_until(pieces, b"elicitation/create")
        async with resumed(http, r2.url, stale):
            await until_set(second.opened, second.lost)  # both reasons to watch came
            a = await http.post(r1.url, json=scripted.ANSWER, headers=HEAD)
            await watchers.all_ended()
        guard = r2.gateway.session_guard(scripted.SID)
        assert guard is not None
        state = guard.guard.state_of((scripted.SID, 1))
    assert a.status_code == 202
    assert up.resumes() == ["e0"]  # the replay brought the prompt to replica 2
    assert watchers.started == 1 and watchers.most == {1: 1}
    assert answers(up) == [{"action": "accept"}]
    assert state not in ("presented", "answered", "submitting")


class FailFirstAnswer(AnswerScreen):
    """The upstream as a replica sees it: its first answer POST gets ``503`` (a retryable
    failure, as a restarting server or a balancer answers), later ones go on."""

    failed = 0

    async def answer(self, send: Any) -> bool:
        if self.failed:
            return False
        self.failed += 1
        await scripted.json_reply(send, 503, b'{"error": "try again"}')
        return True


class MarkView(View):
    """:class:`View`, and: ``mark_submitted`` raises ``StoreUnavailableError`` the first
    :attr:`fail_marks` times (a blip of the store), or is held until :attr:`mark_go` while
    :attr:`hold_marks` is set (:attr:`marking` set once one is asked for); a won
    ``take_over`` sets :attr:`took`, its reply held until :attr:`take_go` while
    :attr:`hold_take` is set (a store answering a moment late); a ``hold_answer`` that
    gave this replica the claim sets :attr:`took` and :attr:`held_answer`."""

    def __init__(self, store: Any, **kw: Any) -> None:
        super().__init__(store, **kw)
        self.fail_marks = 0
        self.hold_marks = False
        self.mark_go = anyio.Event()
        self.marking = anyio.Event()
        self.took = anyio.Event()
        self.hold_take = False
        self.take_go = anyio.Event()
        self.held_answer = anyio.Event()

    async def mark_submitted(self, session: str, request_id: RequestId) -> bool:
        self.marking.set()
        if self.fail_marks:
            self.fail_marks -= 1
            raise StoreUnavailableError("redis store: mark_submitted failed")
        if self.hold_marks:
            await self.mark_go.wait()
        return bool(await self.store.mark_submitted(session, request_id))

    async def take_over(
        self, session: str, request_id: RequestId, owner: str, lease_s: float
    ) -> bool:
        got = bool(await self.store.take_over(session, request_id, owner, lease_s))
        if got:
            self.took.set()
            if self.hold_take:
                await self.take_go.wait()
        return got

    async def hold_answer(
        self, session: str, request_id: RequestId, answer: Any, owner: str, lease_s: float
    ) -> bool:
        got = bool(await self.store.hold_answer(session, request_id, answer, owner, lease_s))
        if got:
            self.took.set()
            self.held_answer.set()
        return got


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_taken_over_answer_whose_post_gets_a_retryable_failure_is_sent_again(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """Replica 1 takes the answer (``202``, stored) and dies before its submission gets
    through. Replica 2 (the client resumed there) takes the claim over and sends the
    stored answer as it is; the upstream answers that POST ``503``, which the guard's
    classifier calls retryable: replica 2 sends it again after the guard's backoff, so
    the answer reaches the server once, and it is marked submitted only then."""
    up = scripted.Upstream()
    gap = asks_after_progress(up, anyio.Event())
    up.replay = by_turn(answered_then_result(up))
    dying = Swallow(up)
    flaky = FailFirstAnswer(up)
    async with (
        shared_store(kind, request) as (one, two),
        fronted(up, (one, two), (dying, flaky)) as ((r1, r2), http),
    ):
        async with answered_while_watched(http, r1, r2, gap) as (watchers, a, moved):
            await dies_sending(r1, dying)
            await until_set(flaky.arrived, up.answered)  # replica 2 sends it: 503; again: taken
            got = await scripted.read_until(moved.aiter_raw(), RESULT)
        await watchers.all_ended()
        status = await two.claim_status(scripted.SID, 1)
    assert a.status_code == 202 and flaky.failed == 1
    assert answers(up) == [{"action": "accept"}]
    assert last_message(got) == scripted.result(7)
    assert status.submitted


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_live_holder_whose_mark_failed_keeps_its_lease_until_it_lands(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """Replica 1 holds the prompt, takes the answer and submits it (the server takes
    it); its ``mark_submitted`` meets one store failure. Replica 1 keeps renewing its
    lease and marks the answer again until the mark lands: replica 2, watching the
    claim, never finds it lapsed and unmarked, and sends nothing. One answer reaches the
    server."""
    up = scripted.Upstream()
    gap = runs_on_after_prompt(up)  # no result yet on the resumed stream
    async with shared_store(kind, request) as (one, two):
        first = MarkView(one)
        first.fail_marks = 1
        async with fronted(up, (first, two)) as ((r1, r2), http):
            async with answered_while_watched(http, r1, r2, gap) as (watchers, a, _):
                await until_set(up.answered, first.marking)
                await watchers.all_ended()  # the watcher found it marked
                with anyio.move_on_after(2 * LEASE_S):  # time for a lapsed lease to show
                    await up.wait_until(lambda u: len(answers(u)) > 1)
            status = await two.claim_status(scripted.SID, 1)
    assert a.status_code == 202 and first.fail_marks == 0
    assert answers(up) == [{"action": "accept"}]
    assert status.submitted


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_an_answer_relayed_by_a_live_replica_is_not_sent_again_by_a_survivor(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """Three replicas. Replica 1 shows the prompt; the client resumes on 3 (which then
    watches 1's claim) and on 2, where it answers: 2 never saw the request, so it relays
    the answer (the server takes it), then marks it submitted, then keeps it in the
    store. With 2's mark held, replica 1 dies and its lease lapses, and 3 reads the
    claim: it finds the answer marked (or not yet stored), never stored and unmarked, so
    it takes nothing over and sends nothing. One answer reaches the server."""
    up = scripted.Upstream()
    gap = runs_on_after_prompt(up)
    async with shared_store(kind, request, 3) as (one, two, three):
        second, third = MarkView(two), MarkView(three)
        second.hold_marks = True
        third.held = True  # 3's watcher reads the claim only once told
        async with fronted(up, (one, second, third)) as ((r1, r2, r3), http):
            watch3 = Watchers(r3.gateway)
            prompt_id = ids_of(await prompt_then_leave(http, r1.url, gap), "elicitation/create")
            await resume_then_leave(http, r3.url, prompt_id)
            await watch3.begun()
            async with resumed(http, r2.url, prompt_id), anyio.create_task_group() as tg:
                posted: list[int] = []

                async def answer() -> None:
                    r = await http.post(r2.url, json=scripted.ANSWER, headers=HEAD)
                    posted.append(r.status_code)

                tg.start_soon(answer)
                await until_set(second.marking)  # relayed, taken upstream; mark held
                assert len(answers(up)) == 1
                r1.kill()
                await lapsed(one)
                third.go.set()
                await watch3.all_ended()  # 3 read the claim: marked, so it is done
                second.mark_go.set()
            status = await two.claim_status(scripted.SID, 1)
    assert posted == [202] and not third.took.is_set()
    assert answers(up) == [{"action": "accept"}]
    assert (status.submitted, status.answer) == (True, {"action": "accept"})


async def test_a_session_sending_a_taken_over_answer_is_not_let_go_for_room() -> None:
    """Replica 1 takes the answer (``202``, stored) and dies before its submission gets
    through. Replica 2 (the client resumed there, then left) watches the claim and takes
    it over (its store's reply a moment late) to send the stored answer. Meanwhile a new
    session arrives at replica 2, whose ``max_sessions`` is 1: the session sending the
    answer counts as one with an answer submission under way, so it is kept (the new
    one, with none to let go, gets ``503``), and the answer reaches the server once."""
    up = scripted.Upstream(issue_sessions=True)
    gap = asks_after_progress(up, anyio.Event())
    up.replay = by_turn([anyio.Event()])
    dying = Swallow(up)
    store = MemoryStore()
    second = MarkView(store)
    second.hold_take = True
    keys = EventIdKeys.generate()
    roomy = GatewayLimits(standalone_hold_s=0, lease_s=LEASE_S)
    tight = GatewayLimits(standalone_hold_s=0, lease_s=LEASE_S, max_sessions=1)
    async with (
        on_loopback(dying) as u1,
        on_loopback(up) as u2,
        running_gateway(u1, store=store, id_keys=keys, limits=roomy, config=CONFIG) as r1,
        running_gateway(u2, store=second, id_keys=keys, limits=tight, config=CONFIG) as r2,
        httpx2.AsyncClient(timeout=STEP) as http,
    ):
        r = await http.post(r1.url, json=scripted.INIT, headers=scripted.HEAD)
        sid = r.headers["mcp-session-id"]
        head = {**scripted.HEAD, "mcp-session-id": sid}
        watchers = Watchers(r2.gateway)
        async with http.stream("POST", r1.url, json=scripted.CALL, headers=head) as call:
            pieces = call.aiter_raw()
            await scripted.read_until(pieces, b"progress")
            gap.set()
            seen = await scripted.read_until(pieces, b"elicitation/create")
        prompt_id = ids_of(seen, "elicitation/create")
        resume = {"accept": "text/event-stream", "mcp-session-id": sid, "last-event-id": prompt_id}
        async with http.stream("GET", r2.url, headers=resume) as moved:
            assert moved.status_code == 200
        await watchers.begun()
        a = await http.post(r1.url, json=scripted.ANSWER, headers=head)
        await dies_sending(r1, dying)
        await until_set(second.took)  # replica 2 took the claim over, about to send
        other = await http.post(r2.url, json=scripted.INIT, headers=scripted.HEAD)
        kept = sid in r2.gateway._sessions
        second.take_go.set()
        with anyio.fail_after(STEP):
            await up.wait_until(lambda u: len(answers(u)) > 0)
        await watchers.all_ended()
        status = await store.claim_status(sid, 1)
    assert a.status_code == 202 and other.status_code == 503 and kept
    assert answers(up) == [{"action": "accept"}]
    assert status.submitted


class LateRetry(AnswerScreen):
    """The upstream as a replica sees it: its first answer POST gets ``503`` with a
    ``Retry-After`` of :attr:`after_s` (a retryable failure whose retry waits that long),
    later ones go on."""

    def __init__(self, inner: scripted.Upstream, after_s: float) -> None:
        super().__init__(inner)
        self.after_s = after_s
        self.failed = 0

    async def answer(self, send: Any) -> bool:
        if self.failed:
            return False
        self.failed += 1
        wait = [(b"retry-after", f"{self.after_s:g}".encode())]
        await scripted.json_reply(send, 503, b'{"error": "try again"}', wait)
        return True


class FailThenSwallow(AnswerScreen):
    """The upstream as a dying replica sees it: its first answer POST gets ``503`` (a
    retryable failure), later ones never get through (held until their sender goes;
    :attr:`resent` set at the first)."""

    def __init__(self, inner: scripted.Upstream) -> None:
        super().__init__(inner)
        self.failed = 0
        self.resent = anyio.Event()

    async def answer(self, send: Any) -> bool:
        if not self.failed:
            self.failed += 1
            await scripted.json_reply(send, 503, b'{"error": "try again"}')
            return True
        self.resent.set()
        await anyio.sleep_forever()  # cancelled when its sender's connection goes
        return True  # pragma: no cover


class HoldAnswer(AnswerScreen):
    """The upstream as a replica sees it: each answer POST is held until :attr:`release`
    is set (a slow server), then goes on."""

    def __init__(self, inner: scripted.Upstream) -> None:
        super().__init__(inner)
        self.release = anyio.Event()

    async def answer(self, send: Any) -> bool:
        await self.release.wait()
        return False


class CountView(MarkView):
    """:class:`MarkView`, counting the claim reads it answered (:attr:`reads`; those that
    found the answer marked submitted: :attr:`marked_reads`); :meth:`until` waits on
    them and on a won ``take_over``."""

    def __init__(self, store: Any, **kw: Any) -> None:
        super().__init__(store, **kw)
        self.reads = 0
        self.marked_reads = 0
        self.changes = Changes()

    async def claim_status(self, session: str, request_id: RequestId) -> ClaimStatus:
        got = await super().claim_status(session, request_id)
        self.reads += 1
        self.marked_reads += got.submitted
        self.changes.note()
        return got

    async def take_over(
        self, session: str, request_id: RequestId, owner: str, lease_s: float
    ) -> bool:
        got = await super().take_over(session, request_id, owner, lease_s)
        self.changes.note()
        return got

    async def until(self, done: Callable[[], bool]) -> None:
        """Until ``done()`` holds, checked at each read and take-over."""
        with anyio.fail_after(STEP):
            await self.changes.until(done)


class SaveFails(View):
    """:class:`View`, whose ``save_answer`` always raises ``StoreUnavailableError`` (the
    answer's write-ahead fails; the replica still submits it)."""

    async def save_answer(self, session: str, request_id: RequestId, answer: Any) -> None:
        raise StoreUnavailableError("redis store: save_answer failed")


def gated(gateway: Gateway) -> anyio.Event:
    """Hold every claim watcher ``gateway`` starts until the returned event is set."""
    gate = anyio.Event()
    inner = gateway._watch_claim

    async def watch(args: Any) -> None:
        await gate.wait()
        await inner(args)

    gateway._watch_claim = watch  # type: ignore[method-assign]
    return gate


async def settled_on(replica: RunningGateway) -> None:
    """Until prompt 1 no longer awaits its answer or its submission on ``replica``."""
    with anyio.fail_after(STEP):
        while True:
            og = replica.gateway.session_guard(scripted.SID)
            state = og.guard.state_of((scripted.SID, 1)) if og is not None else None
            if state not in ("presented", "answered", "submitting"):
                return
            await anyio.sleep(0.05)


async def first_of(*waits: Awaitable[None]) -> None:
    """Until the first of ``waits`` returned (the others cancelled)."""
    async with anyio.create_task_group() as tg:

        async def one(wait: Awaitable[None]) -> None:
            await wait
            tg.cancel_scope.cancel()

        for wait in waits:
            tg.start_soon(one, wait)


ENOUGH_READS = 6
"""Claim reads of a watcher, a third of the lease apart: two leases, time for an
unrenewed lease to show lapsed."""


async def reads_through_a_slow_send(third: CountView, slow: HoldAnswer) -> None:
    """Replica 3 (``third``, held until now) reads the claim :data:`ENOUGH_READS` times,
    or takes it over, while ``slow`` holds the survivor's answer POST; then the POST goes
    on."""
    third.go.set()
    await third.until(lambda: third.reads >= ENOUGH_READS or third.took.is_set())
    slow.release.set()


async def test_a_holder_whose_resubmission_waits_past_its_lease_keeps_it() -> None:
    """Replica 1 holds the prompt and takes the answer; its submission gets ``503`` with
    a ``Retry-After`` of three leases. While the retry waits, replica 1 keeps renewing its
    lease (the answer's submission is not over), so replica 2, watching the claim, never
    finds it lapsed and unmarked and sends nothing: the retry is the one answer POST that
    reaches the server."""
    up = scripted.Upstream()
    gap = runs_on_after_prompt(up)
    late = LateRetry(up, after_s=3 * LEASE_S)
    store = MemoryStore()
    async with fronted(up, (store, store), (late, None)) as ((r1, r2), http):
        async with answered_while_watched(http, r1, r2, gap) as (watchers, a, _):
            await until_set(late.arrived)
            await settled_on(r1)  # its retry went, after the Retry-After
            await watchers.all_ended()
        status = await store.claim_status(scripted.SID, 1)
    assert a.status_code == 202 and late.failed == 1
    assert answers(up) == [{"action": "accept"}], "a watcher sent it during the holder's retry"
    assert status.submitted and status.owner == r1.gateway.replica


async def test_a_holder_killed_while_its_resubmission_waits_leaves_the_answer_unmarked() -> None:
    """Replica 1 holds the prompt and takes the answer; its submission gets ``503`` and
    its resubmission never gets through; it dies. The failed submission was not marked
    (a retry followed it), so replica 2, watching the claim, takes it over once the lease
    lapsed and sends the stored answer: it reaches the server once."""
    up = scripted.Upstream()
    gap = runs_on_after_prompt(up)
    failing = FailThenSwallow(up)
    store = MemoryStore()
    async with fronted(up, (store, store), (failing, None)) as ((r1, r2), http):
        async with answered_while_watched(http, r1, r2, gap) as (watchers, a, _):
            await until_set(failing.resent)  # 503, then the resubmission, held
            marked = (await store.claim_status(scripted.SID, 1)).submitted
            r1.kill()
            await watchers.all_ended()
        status = await store.claim_status(scripted.SID, 1)
    assert a.status_code == 202 and failing.failed == 1
    assert not marked, "marked submitted after a retryable failure, its retry to come"
    assert answers(up) == [{"action": "accept"}], "no survivor sent the dead holder's answer"
    assert status.submitted and status.owner == r2.gateway.replica


async def test_a_survivor_slowly_sending_a_taken_over_answer_keeps_its_lease() -> None:
    """Three replicas. Replica 1 takes the answer (stored) and dies before its submission
    gets through. Replica 2 takes the claim over and sends the stored answer as it is;
    the server holds that POST for two leases while replica 3 watches the claim.
    Replica 2 renews its lease meanwhile, so 3 never takes the claim over: one answer
    POST reaches the server."""
    up = scripted.Upstream()
    gap = runs_on_after_prompt(up)
    dying, slow = Swallow(up), HoldAnswer(up)
    store = MemoryStore()
    third = CountView(store)
    third.held = True  # 3 reads the claim only once 2 took it over
    async with fronted(up, (store, store, third), (dying, slow, None)) as ((r1, r2, r3), http):
        watch2, watch3 = Watchers(r2.gateway), Watchers(r3.gateway)
        prompt_id = ids_of(await prompt_then_leave(http, r1.url, gap), "elicitation/create")
        await resume_then_leave(http, r3.url, prompt_id)
        await watch3.begun()
        async with resumed(http, r2.url, prompt_id):
            await watch2.begun()
            a = await http.post(r1.url, json=scripted.ANSWER, headers=HEAD)
            await dies_sending(r1, dying)
            await until_set(slow.arrived)  # 2 took the claim over; its POST held
            await reads_through_a_slow_send(third, slow)
            await watch2.all_ended()
            await watch3.all_ended()
        status = await store.claim_status(scripted.SID, 1)
    assert a.status_code == 202
    assert not third.took.is_set(), "replica 3 took over a claim whose send was under way"
    assert answers(up) == [{"action": "accept"}]
    assert status.submitted and status.owner == r2.gateway.replica


async def test_a_replayed_replica_taking_a_lapsed_claims_answer_takes_it_over_first() -> None:
    """Three replicas. Replica 1 shows the prompt and dies; its lease lapses. Replica 2
    was replayed the prompt (its claim lost; its guard has it presented) and the client
    answers there: replica 2 takes the lapsed claim over before it stores the answer, so
    replica 3, watching the claim, finds a live lease (not a dead holder's unmarked
    answer) and sends nothing. One answer POST reaches the server."""
    up = scripted.Upstream()
    gap = runs_on_after_prompt(up, [scripted.sse("e1", PROMPT), anyio.Event()])
    store = MemoryStore()
    first = View(store, drop_cursors=True)
    second = MarkView(store, drop_cursors=True)
    third = CountView(store, drop_cursors=True)
    second.hold_marks = True  # 2's submission ended; its mark held
    third.held = True  # 3 reads the claim only once 2 stored the answer
    async with fronted(up, (first, second, third)) as ((r1, r2, r3), http):
        gate2 = gated(r2.gateway)  # 2's watcher would end the call (claim-lapsed)
        watch3 = Watchers(r3.gateway)
        async with replayed_on_second(http, (r1, r2, r3), gap, watch3, second.lost):
            r1.kill()
            await lapsed(store)
            a = await http.post(r2.url, json=scripted.ANSWER, headers=HEAD)
            await until_set(second.marking)  # 2 submitted it (the server took it)
            third.go.set()
            await third.until(lambda: third.reads >= 2 or third.took.is_set())
            second.mark_go.set()
            await watch3.all_ended()
            gate2.set()
        status = await store.claim_status(scripted.SID, 1)
    assert a.status_code == 202
    assert not third.took.is_set(), "replica 3 took over the claim 2 stored its answer under"
    assert answers(up) == [{"action": "accept"}]
    assert second.took.is_set() and status.submitted and status.owner == r2.gateway.replica


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_replayed_replica_submitting_while_the_holder_lives_holds_a_lease(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """Three replicas. Replica 1 shows the prompt and lives; replica 2 was replayed the
    prompt (its claim lost; its guard has it presented) and the client answers there:
    2 stores the answer and takes the claim's lease in one step, and its guard submits
    it; the server holds that POST. Replica 1 dies (its lease is gone) while replica 3
    watches the claim for two leases: it finds 2's live lease, never a dead holder's
    unmarked answer, and sends nothing. Exactly one answer POST reaches the server, and
    the call ends with its result."""
    up = scripted.Upstream()
    later = [scripted.sse("e1", PROMPT), *answered_then_result(up)]
    gap = runs_on_after_prompt(up, later)
    slow = HoldAnswer(up)
    async with shared_store(kind, request, 3) as (one, two, three):
        first = View(one, drop_cursors=True)
        second = MarkView(two, drop_cursors=True)
        third = CountView(three, drop_cursors=True)
        third.held = True  # 3 reads the claim only once 1 is dead
        views = (first, second, third)
        async with fronted(up, views, (None, slow, None)) as ((r1, r2, r3), http):
            watch3 = Watchers(r3.gateway)
            async with replayed_on_second(http, (r1, r2, r3), gap, watch3, second.lost) as moved:
                a = await http.post(r2.url, json=scripted.ANSWER, headers=HEAD)
                await until_set(slow.arrived)  # 2's guard submits it; the server holds it
                r1.kill()
                await reads_through_a_slow_send(third, slow)
                got = await scripted.read_until(moved.aiter_raw(), RESULT)
                await watch3.all_ended()
            status = await two.claim_status(scripted.SID, 1)
    assert a.status_code == 202
    assert answers(up) == [{"action": "accept"}], "the answer reached the server twice"
    assert not third.took.is_set(), "replica 3 took over a claim whose submission was under way"
    assert last_message(got) == scripted.result(7)
    assert second.held_answer.is_set()
    assert status.submitted and status.owner == r2.gateway.replica


class HoldReplyLost(View):
    """:class:`View`, whose ``hold_answer`` runs on the shared store and then raises
    ``StoreUnavailableError`` (the store took it; its reply was lost: :attr:`ran` set)."""

    def __init__(self, store: Any, **kw: Any) -> None:
        super().__init__(store, **kw)
        self.ran = anyio.Event()

    async def hold_answer(
        self, session: str, request_id: RequestId, answer: Any, owner: str, lease_s: float
    ) -> bool:
        await self.store.hold_answer(session, request_id, answer, owner, lease_s)
        self.ran.set()
        raise StoreUnavailableError("redis store: hold_answer reply lost")


async def test_a_replayed_replica_whose_hold_reply_was_lost_still_renews_its_lease() -> None:
    """Three replicas. Replica 1 shows the prompt and lives; replica 2 was replayed the
    prompt and the client answers there: 2's ``hold_answer`` lands (the answer stored,
    the claim's lease handed to 2) but its reply is lost. 2 renews that lease all the
    same while its guard submits; the server holds that POST for two leases while
    replica 1, its renewal refused, watches the claim: it finds 2's live lease and sends
    nothing. Exactly one answer POST reaches the server, and the call ends with its
    result."""
    up = scripted.Upstream()
    later = [scripted.sse("e1", PROMPT), *answered_then_result(up)]
    gap = runs_on_after_prompt(up, later)
    slow = HoldAnswer(up)
    store = MemoryStore()
    first = CountView(store, drop_cursors=True)
    second = HoldReplyLost(store, drop_cursors=True)
    third = CountView(store, drop_cursors=True)
    third.held = True  # only the holder watches
    async with fronted(up, (first, second, third), (None, slow, None)) as ((r1, r2, r3), http):
        watch1, watch3 = Watchers(r1.gateway), Watchers(r3.gateway)
        async with replayed_on_second(http, (r1, r2, r3), gap, watch3, second.lost) as moved:
            a = await http.post(r2.url, json=scripted.ANSWER, headers=HEAD)
            await until_set(second.ran, slow.arrived)  # 2's guard submits it; held
            await watch1.begun()  # 1's renewal was refused: it watches the claim
            first.reads = 0
            await first.until(lambda: first.reads >= ENOUGH_READS or first.took.is_set())
            slow.release.set()
            got = await scripted.read_until(moved.aiter_raw(), RESULT)
            await watch1.all_ended()
        status = await store.claim_status(scripted.SID, 1)
    assert a.status_code == 202
    assert answers(up) == [{"action": "accept"}], "the answer reached the server twice"
    assert not first.took.is_set(), "replica 1 took over a claim whose submission was under way"
    assert last_message(got) == scripted.result(7)
    assert status.submitted and status.owner == r2.gateway.replica


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_replayed_replica_dead_mid_submission_leaves_the_answer_to_the_holder(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """Three replicas. Replica 1 shows the prompt and lives; replica 2 was replayed the
    prompt and the client answers there: 2 holds the claim's lease and its guard
    submits the answer, but the POST never gets through, and 2 dies. Replica 1's
    renewals are refused from the moment 2 took the lease (no fault: it watches the
    claim instead); once 2's lease lapsed, replica 1 takes the claim over and its guard
    sends the stored answer (3, which would too, is held from reading the claim). The
    answer reaches the server once and is marked."""
    up = scripted.Upstream()
    gap = runs_on_after_prompt(up, [scripted.sse("e1", PROMPT), anyio.Event()])
    dying = Swallow(up)
    async with shared_store(kind, request, 3) as (one, two, three):
        first = MarkView(one, drop_cursors=True)
        second = MarkView(two, drop_cursors=True)
        third = CountView(three, drop_cursors=True)
        third.held = True  # only the holder is let act
        views = (first, second, third)
        async with fronted(up, views, (None, dying, None)) as ((r1, r2, r3), http):
            watch1, watch3 = Watchers(r1.gateway), Watchers(r3.gateway)
            async with replayed_on_second(http, (r1, r2, r3), gap, watch3, second.lost):
                a = await http.post(r2.url, json=scripted.ANSWER, headers=HEAD)
                await dies_sending(r2, dying)
                await watch1.begun()  # 1's renewal was refused: it watches the claim
                with anyio.fail_after(STEP):
                    await up.wait_until(lambda u: len(answers(u)) > 0)
                await until_set(first.took)
                await settled_on(r1)
                await watch1.all_ended()
            status = await one.claim_status(scripted.SID, 1)
            failures = dict(r1.gateway._sessions[scripted.SID].engine.failures.items())
    assert a.status_code == 202 and dying.held == 1 and second.held_answer.is_set()
    assert answers(up) == [{"action": "accept"}]
    assert status.submitted and status.owner == r1.gateway.replica
    assert failures == {}


async def test_a_survivor_submitting_through_its_guard_slowly_keeps_its_lease() -> None:
    """Three replicas. Replica 1 takes the answer (stored) and dies before its submission
    gets through. Replica 2 was replayed the prompt (its claim lost; its guard has it
    presented): it takes the claim over and its guard submits the stored answer; the
    server holds that POST for two leases while replica 3 watches the claim. Replica 2
    renews its lease meanwhile, so 3 never takes the claim over: one answer POST reaches
    the server."""
    up = scripted.Upstream()
    gap = runs_on_after_prompt(up, [scripted.sse("e1", PROMPT), anyio.Event()])
    dying, slow = Swallow(up), HoldAnswer(up)
    store = MemoryStore()
    first = View(store, drop_cursors=True)
    second = MarkView(store, drop_cursors=True)
    third = CountView(store, drop_cursors=True)
    third.held = True  # 3 reads the claim only once 2 took it over
    fronts = (dying, slow, None)
    async with fronted(up, (first, second, third), fronts) as ((r1, r2, r3), http):
        watch2, watch3 = Watchers(r2.gateway), Watchers(r3.gateway)
        async with replayed_on_second(http, (r1, r2, r3), gap, watch3, second.lost):
            await watch2.begun()
            a = await http.post(r1.url, json=scripted.ANSWER, headers=HEAD)
            await dies_sending(r1, dying)
            await until_set(slow.arrived)  # 2 took the claim over; its guard's POST held
            await reads_through_a_slow_send(third, slow)
            await watch2.all_ended()
            await watch3.all_ended()
        status = await store.claim_status(scripted.SID, 1)
    assert a.status_code == 202 and second.took.is_set()
    assert not third.took.is_set(), "replica 3 took over a claim whose submission was under way"
    assert answers(up) == [{"action": "accept"}]
    assert status.submitted and status.owner == r2.gateway.replica


async def test_an_answer_relayed_here_unmarked_is_not_sent_again_from_the_store() -> None:
    """Replica 1 takes the answer (stored) and dies before its submission gets through.
    The client answers again on replica 2, which never saw the request: 2 relays it (the
    server takes it), but its mark fails while the store stays down for marks. Once 1's
    lease lapsed, 2's watcher finds 1's answer stored and unmarked; 2 relayed it, so it
    sends nothing more: one answer POST reaches the server."""
    up = scripted.Upstream()
    gap = runs_on_after_prompt(up)
    dying = Swallow(up)
    store = MemoryStore()
    second = MarkView(store)
    second.fail_marks = 1_000_000  # no mark of 2's lands
    async with (
        fronted(up, (store, second), (dying, None)) as ((r1, r2), http),
        answered_while_watched(http, r1, r2, gap) as (watchers, a, _),
    ):
        await until_set(dying.arrived)
        b = await http.post(r2.url, json=scripted.ANSWER, headers=HEAD)
        relayed = answers(up)
        r1.kill()
        await watchers.all_ended()
        took = second.took.is_set()
        second.fail_marks = 0
    assert a.status_code == 202 and b.status_code == 202 and second.marking.is_set()
    assert relayed == [{"action": "accept"}]
    assert not took and answers(up) == relayed, "replica 2 sent again the answer it relayed"


async def test_a_watcher_ends_on_a_mark_with_no_answer_stored() -> None:
    """Replica 1 holds the prompt and takes the answer, but its write-ahead fails: it
    submits the answer and marks it, none stored. Replica 2, watching the claim, ends its
    watch at the first read that finds it marked (it polls the store no more) and ends
    no call."""
    up = scripted.Upstream()
    gap = runs_on_after_prompt(up)
    store = MemoryStore()
    second = CountView(store)
    async with fronted(up, (SaveFails(store), second)) as ((r1, r2), http):
        async with answered_while_watched(http, r1, r2, gap) as (watchers, a, _):

            def over() -> bool:  # the watch ended, or read the mark more than once
                return not watchers.running or second.marked_reads >= 3

            await first_of(watchers.until(over), second.until(over))
            running, marked_reads = watchers.running, second.marked_reads
            failures = dict(r2.gateway._sessions[scripted.SID].engine.failures.items())
        status = await store.claim_status(scripted.SID, 1)
    assert a.status_code == 202 and status.submitted and status.answer is None
    assert answers(up) == [{"action": "accept"}]
    assert running == 0 and marked_reads == 1, f"the watcher read the mark {marked_reads} times"
    assert failures == {}
