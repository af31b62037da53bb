"""Resumption against a real mcp 2.3.0 server whose event store replays everything.

The specification says a resumed stream replays the events *after* ``Last-Event-ID``;
:class:`ReplayEverythingStore` (written for these tests, plugged into the unmodified
server) replays the whole of the cursor's stream from the start of its buffer on every
resume. The client calls ``stream_progress`` (2,000 progress notifications) and the fault
proxy cuts the stream at points the test chooses: the store pauses the tool at a given
progress notification (nothing flows; no sleeping), the test waits until the proxy relayed
what came before, then cuts.

* **New events in the replay**: the guarded client completes the call with exactly one
  outcome, every progress notification reaches the application exactly once, it resumes
  once per cut, and each resume's ``Last-Event-ID`` is the newest id the proxy delivered
  before it.
* **Nothing new, ever**: each resumed connection replays the old events and is cut again.
  The guarded client gives up after ``max_resumes_without_progress`` resumes with one
  ``ResumeBudgetSpentError`` (reason ``resume-budget-spent``) from ``call_tool``.
* **The plain mcp 2.3.0 client** in the same setup, for contrast: what it does is
  recorded (``CONTRAST`` and ``docs/resumption.md``), and only that it ends is asserted.

Also: the resume GET's outcome as the guard's table judges it, with the body and
``Retry-After`` the adapter reads: 429 is retried after ``Retry-After`` and the call
completes; 400 with a JSON-RPC error is terminal, one typed error.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.streamable_http import (
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamId,
)
from mcp.types.jsonrpc import JSONRPCMessage, JSONRPCNotification, JSONRPCResponse

from fsm import actions as act
from fsm import events as ev
from fsm.adapters._transport.http import http_result
from fsm.adapters.mcp2 import GuardedSession, guarded_session
from fsm.errors import ResumeBudgetSpentError
from fsm.sse.guard import GuardConfig
from fsm.wire.proxy import Exchange, HttpFault, TrafficEvent, is_resume_get
from support.scenarios import (
    GUARDED_SCENARIO_CONFIG_KW,
    Rig,
    answer_once_resumed,
    elicit_to_user,
    open_rig,
    through_proxy,
    unless_ended,
)

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(120)]

COUNT = 2_000
CONFIG = GuardConfig(**GUARDED_SCENARIO_CONFIG_KW)


# --------------------------------------------------------------------------- the store


class ReplayEverythingStore(EventStore):
    """An mcp ``EventStore`` that replays the cursor's whole stream on every resume.

    Ids are ``r1``, ``r2``, ... in the order stored. ``replay_events_after`` finds the
    stream of ``last_event_id`` (``None`` if unknown) and sends every message of that
    stream from the start of the buffer, the events up to and including the cursor
    too. With ``stall`` it then never returns (the server attaches no live tail, sends
    no priming event: a resumed connection carries nothing new, ever). :meth:`hold_at`
    pauses the server before it stores its ``n``-th progress notification (the tool
    waits with it) until the returned event is set.
    """

    def __init__(self, *, stall: bool = False) -> None:
        self.stall = stall
        self.rows: list[tuple[EventId, StreamId, JSONRPCMessage | None]] = []
        self.order: dict[EventId, int] = {}
        self.progress_ids: list[EventId] = []
        self.results: dict[StreamId, EventId] = {}
        self.replays: list[list[EventId]] = []
        self._holds: dict[int, anyio.Event] = {}
        self._changed = anyio.Event()

    def hold_at(self, n: int) -> anyio.Event:
        gate = self._holds[n] = anyio.Event()
        return gate

    def call_finished(self) -> bool:
        """Whether the stream of the progress notifications has its result stored."""
        if not self.progress_ids:
            return False
        return self.rows[self.order[self.progress_ids[0]]][1] in self.results

    def release_all(self) -> None:
        for gate in self._holds.values():
            gate.set()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 20.0) -> None:
        with anyio.fail_after(timeout):
            while not predicate():
                await self._changed.wait()

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        progress = (
            isinstance(message, JSONRPCNotification) and message.method == "notifications/progress"
        )
        if progress:
            gate = self._holds.get(len(self.progress_ids) + 1)
            if gate is not None:
                await gate.wait()
        event_id = f"r{len(self.rows) + 1}"
        self.order[event_id] = len(self.rows)
        self.rows.append((event_id, stream_id, message))
        if progress:
            self.progress_ids.append(event_id)
        elif isinstance(message, JSONRPCResponse):
            self.results[stream_id] = event_id
        self._notify()
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        index = self.order.get(last_event_id)
        if index is None:
            return None
        stream = self.rows[index][1]
        sent: list[EventId] = []
        for event_id, stream_id, message in list(self.rows):
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
                sent.append(event_id)
        self.replays.append(sent)
        self._notify()
        if self.stall:
            await anyio.sleep_forever()
        return stream


# --------------------------------------------------------------------------- the clients


@dataclass
class Run:
    """One ``stream_progress`` call: progress seen by the application, its one outcome."""

    progress: list[float] = field(default_factory=list)
    outcomes: list[Any] = field(default_factory=list)
    done: anyio.Event = field(default_factory=anyio.Event)
    session: GuardedSession | None = None
    _changed: anyio.Event = field(default_factory=anyio.Event)

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append(progress)
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_progress(self, count: int) -> None:
        """Progress callbacks run as their own tasks and may trail the outcome."""
        with anyio.fail_after(20):
            while len(self.progress) < count:
                await self._changed.wait()

    async def call(self, session: Any, tool: str = "stream_progress") -> None:
        """Call ``tool`` (``stream_progress`` of ``COUNT`` notifications, or one without
        arguments) and keep its one outcome, result or exception."""
        args: dict[str, Any] = {"count": COUNT} if tool == "stream_progress" else {}
        try:
            result = await session.call_tool(tool, args, progress_callback=self.on_progress)
            self.outcomes.append(result)
        except Exception as exc:
            self.outcomes.append(exc)
        finally:
            self.done.set()


Client = Callable[[Rig, Run], contextlib.AbstractAsyncContextManager[Any]]


@contextlib.asynccontextmanager
async def guarded(rig: Rig, run: Run) -> AsyncIterator[Any]:
    async with through_proxy(rig, guarded_session, CONFIG) as session:
        run.session = session
        yield session


@contextlib.asynccontextmanager
async def plain(rig: Rig, run: Run) -> AsyncIterator[Any]:
    async with (
        streamable_http_client(rig.proxy.url, http_client=rig.http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


# --------------------------------------------------------------------------- steps


async def relayed(rig: Rig, exchange: Exchange, event_id: str) -> None:
    """Wait until the proxy relayed the event ``event_id`` on ``exchange``."""
    await rig.proxy.wait_for(
        lambda e: e.kind == "sse_event" and e.exchange == exchange.id and e.event_id == event_id,
        20.0,
    )


async def cut_and_hold_resume(
    rig: Rig, run: Run, exchange: Exchange
) -> tuple[Any, Exchange | None]:
    """Cut ``exchange`` abruptly; the client's next resume GET, parked (``None`` if the
    client ended instead)."""
    hold = rig.proxy.hold_next(is_resume_get)
    await rig.proxy.cut(exchange, "abrupt")
    return hold, await unless_ended(run.done, hold.wait_arrived(20.0))


async def replay_with_new_events(rig: Rig, run: Run, store: ReplayEverythingStore) -> None:
    """Two cuts. Round 1: the POST stream is cut after progress 499; the tool stores
    500-1199 while the client is away; the resume replays 1-1199 (499 old, 700 new) and
    attaches the live tail (1200-1599 come live). Round 2: that connection is cut after
    1599; the tool finishes (1600-2000 and the result) while the client is away; the
    resume replays everything, the result included."""
    first, second, third = store.hold_at(500), store.hold_at(1200), store.hold_at(1600)
    post = await rig.tools_call(timeout=20.0)
    await store.wait_until(lambda: len(store.progress_ids) == 499)
    await relayed(rig, post, store.progress_ids[498])
    hold, resume = await cut_and_hold_resume(rig, run, post)
    first.set()
    await store.wait_until(lambda: len(store.progress_ids) == 1199)
    hold.release()
    if resume is None:
        return
    await unless_ended(run.done, rig.primed(resume, 20.0))
    second.set()
    await store.wait_until(lambda: len(store.progress_ids) == 1599)
    await unless_ended(run.done, relayed(rig, resume, store.progress_ids[1598]))
    hold, _ = await cut_and_hold_resume(rig, run, resume)
    third.set()
    await store.wait_until(store.call_finished)
    hold.release()


async def replay_nothing_new(rig: Rig, run: Run, store: ReplayEverythingStore) -> None:
    """The tool pauses for good before progress 1000; the POST stream is cut after 999;
    every resumed connection replays 1-999 and is cut once the proxy relayed them."""
    store.hold_at(1000)
    current = await rig.tools_call(timeout=20.0)
    await store.wait_until(lambda: len(store.progress_ids) == 999)
    await relayed(rig, current, store.progress_ids[998])
    while True:
        replays = len(store.replays)

        def replayed(replays: int = replays) -> bool:
            return len(store.replays) > replays

        mark = rig.proxy.last_seq
        await rig.proxy.cut(current, "abrupt")
        request: TrafficEvent | None = await unless_ended(
            run.done,
            rig.proxy.wait_for(
                lambda e: e.kind == "request" and e.last_event_id is not None, 20.0, mark
            ),
        )
        if request is None:
            return
        current = rig.proxy.exchanges[request.exchange]
        await unless_ended(run.done, store.wait_until(replayed))
        if run.done.is_set():
            return
        await unless_ended(run.done, relayed(rig, current, store.replays[-1][-1]))
        if run.done.is_set():
            return


Script = Callable[[Rig, Run, ReplayEverythingStore], Awaitable[None]]


async def drive(
    client: Client, script: Script, *, stall: bool
) -> tuple[Rig, Run, ReplayEverythingStore]:
    """Run ``stream_progress`` with ``client`` through ``script``; the run once it ended."""
    store = ReplayEverythingStore(stall=stall)
    run = Run()
    with anyio.fail_after(90):
        async with open_rig(event_store=store) as rig:
            try:
                async with client(rig, run) as session, anyio.create_task_group() as tg:
                    tg.start_soon(run.call, session)
                    await script(rig, run, store)
                    await run.done.wait()
                    for _ in range(50):  # loop turns, not time: callbacks already started
                        await anyio.lowlevel.checkpoint()
            finally:
                store.release_all()
    return rig, run, store


def resumes(rig: Rig) -> list[Exchange]:
    return sorted((ex for ex in rig.proxy.exchanges.values() if ex.is_resume), key=lambda x: x.id)


def newest_delivered_before(rig: Rig, store: ReplayEverythingStore, resume: Exchange) -> str:
    """The newest (latest stored) event id the proxy relayed on any earlier connection
    of the call's stream, before ``resume`` was requested."""
    asked = next(e.seq for e in rig.proxy.log if e.kind == "request" and e.exchange == resume.id)
    ids = [
        e.event_id
        for e in rig.proxy.log
        if e.kind == "sse_event"
        and e.seq < asked
        and e.event_id in store.order
        and (
            rig.proxy.exchanges[e.exchange].rpc_method == "tools/call"
            or rig.proxy.exchanges[e.exchange].is_resume
        )
    ]
    return max(ids, key=store.order.__getitem__)


def one_outcome(run: Run) -> Any:
    assert len(run.outcomes) == 1, run.outcomes
    return run.outcomes[0]


# --------------------------------------------------------------------------- the guarded client


async def test_guarded_replay_with_new_events_completes_once() -> None:
    rig, run, store = await drive(guarded, replay_with_new_events, stall=False)
    outcome = one_outcome(run)
    assert not isinstance(outcome, Exception), outcome
    assert outcome.content[0].text == f"streamed {COUNT}"
    await run.wait_progress(COUNT)
    # every notification reached the application once: the replayed ones were dropped
    assert sorted(run.progress) == [float(i) for i in range(1, COUNT + 1)]
    got = resumes(rig)
    assert len(got) == 2  # one per cut: bounded
    assert [len(r) for r in store.replays] == [1199, COUNT + 1]  # everything, the result too
    for resume in got:
        assert resume.last_event_id == newest_delivered_before(rig, store, resume)
    assert run.session is not None
    assert run.session.violations == []


async def test_guarded_replay_of_nothing_new_gives_up_with_one_typed_error() -> None:
    rig, run, store = await drive(guarded, replay_nothing_new, stall=True)
    err = one_outcome(run)
    assert isinstance(err, ResumeBudgetSpentError), err
    assert err.reason == "resume-budget-spent"
    got = resumes(rig)
    assert len(got) == CONFIG.max_resumes_without_progress
    cursor = store.progress_ids[998]
    for resume in got:  # never behind the newest id delivered, never moved by a replay
        assert resume.last_event_id == cursor == newest_delivered_before(rig, store, resume)
    assert [len(r) for r in store.replays] == [999] * CONFIG.max_resumes_without_progress
    await run.wait_progress(999)
    assert sorted(run.progress) == [float(i) for i in range(1, 1000)]
    assert run.session is not None
    assert list(run.session.failures.values()) == [err]
    assert run.session.violations == []


# --------------------------------------------------------------------------- the plain client


CONTRAST: dict[str, dict[str, Any]] = {}
"""What the plain client did in each setup (printed with ``-s``; for the documentation)."""


def _record(name: str, rig: Rig, run: Run) -> None:
    outcome = one_outcome(run)
    CONTRAST[name] = {
        "outcome": repr(outcome)[:160],
        "progress callbacks": len(run.progress),
        "distinct progress": len(set(run.progress)),
        "resumes (Last-Event-ID)": [r.last_event_id for r in resumes(rig)],
    }
    print(name, CONTRAST[name])


async def test_plain_client_against_replay_with_new_events() -> None:
    rig, run, _ = await drive(plain, replay_with_new_events, stall=False)
    _record("replay-with-new-events", rig, run)


async def test_plain_client_against_replay_of_nothing_new() -> None:
    rig, run, _ = await drive(plain, replay_nothing_new, stall=True)
    _record("replay-of-nothing-new", rig, run)


# --------------------------------------------------------------------------- resume GET outcomes


async def _spied_call(
    rig: Rig, fault: HttpFault
) -> tuple[Run, list[ev.ResumeRefused], list[act.Action]]:
    """``delete_files`` with the guarded client; once the prompt shows, the next resume
    GET gets ``fault`` and the stream is cut; the user answers once the stream is back.
    Returns the run, the ``ResumeRefused`` events the guard was fed and its actions."""
    refused: list[ev.ResumeRefused] = []
    actions: list[act.Action] = []
    run = Run()
    async with (
        through_proxy(
            rig, guarded_session, CONFIG, elicitation_callback=elicit_to_user(rig)
        ) as session,
        anyio.create_task_group() as tg,
    ):
        run.session = session
        feed = session.guard.feed

        def spy(event: ev.Event) -> tuple[act.Action, ...]:
            if isinstance(event, ev.ResumeRefused):
                refused.append(event)
            out = feed(event)
            actions.extend(out)
            return out

        session.guard.feed = spy  # type: ignore[method-assign]

        tg.start_soon(run.call, session, "delete_files")
        await rig.user.wait_presented(1)
        mark = rig.proxy.last_seq
        rig.proxy.fail_next(fault, is_resume_get)
        await rig.proxy.cut(rig.proxy.current_sse(), "abrupt")
        await answer_once_resumed(rig, run.done, mark, 20.0)
        assert session.violations == []
    return run, refused, actions


async def test_resume_answered_429_is_retried_after_retry_after(rig: Rig) -> None:
    run, refused, actions = await _spied_call(rig, HttpFault.too_many_requests(retry_after=1))
    outcome = one_outcome(run)
    assert not isinstance(outcome, Exception), outcome
    assert "Deleted 3 files" in outcome.content[0].text
    assert [(r.status, r.retry_after) for r in refused] == [(429, 1.0)]
    waits = [a.delay_s for a in actions if isinstance(a, act.Wait)]
    assert 1.0 in waits  # the server's Retry-After, not the backoff
    assert [ex.status for ex in resumes(rig)] == [429, 200]
    assert len(rig.user.presentations) == 1


async def test_resume_answered_400_with_a_jsonrpc_error_is_terminal(rig: Rig) -> None:
    fault = HttpFault.jsonrpc_error(400, -32000, "Invalid event ID format")
    run, refused, _ = await _spied_call(rig, fault)
    err = one_outcome(run)
    assert isinstance(err, ResumeBudgetSpentError), err
    assert err.reason == "not-resumable"
    assert [(r.status, r.body) for r in refused] == [(400, fault.body)]
    assert any("Invalid event ID format" in line for line in err.evidence)
    assert [ex.status for ex in resumes(rig)] == [400]  # never retried
    assert [p.cancelled for p in rig.user.presentations] == [True]
    assert not any(ex.is_answer for ex in rig.proxy.exchanges.values())


# --------------------------------------------------------------------------- reading a refusal

BIG = {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": "x" * 70_000}}


@pytest.mark.parametrize(
    ("content", "headers", "body", "retry_after"),
    [
        (b'{"jsonrpc":"2.0","error":{"code":-32000,"message":"m"}}', {}, "object", None),
        (json.dumps(BIG).encode(), {}, None, None),  # over 64 KiB: not read to the end
        (b"[1, 2]", {"retry-after": "2"}, None, 2.0),  # JSON, but not an object
        (b'{"broken": ', {"retry-after": "soon"}, None, None),
        (b"[" * 30_000 + b"]" * 30_000, {}, None, None),  # a nesting bomb within 64 KiB
        (b"", {"retry-after": "-5"}, None, 0.0),
    ],
)
async def test_a_refusal_is_read_boundedly(
    content: bytes, headers: dict[str, str], body: str | None, retry_after: float | None
) -> None:
    """What the outcome tables get of a response that opened no event stream: the JSON
    object of at most 64 KiB of body, else nothing; ``Retry-After`` in seconds if it is
    a number (negative: 0)."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(400, headers=headers, content=content)

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as http:
        resp = await http.send(http.build_request("GET", "http://127.0.0.1:9/mcp"), stream=True)
        got = await http_result(resp)
    assert got.status == 400
    assert (got.body is not None) == (body is not None)
    assert got.retry_after == retry_after
