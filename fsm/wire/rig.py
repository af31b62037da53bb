"""The rig the wire scenarios run on: a client behind a fault proxy, against the loopback server.

A scenario (:data:`Step`) starts on a fresh :func:`open_rig`: a
:func:`~fsm.wire.server.running_server`, a :class:`~fsm.wire.proxy.FaultProxy` in front of
it, an HTTP client and a scripted :class:`User`. It opens a client through a **client
factory**, calls the destructive ``delete_files`` tool, drives faults by explicit command
(cuts, held resumes, deadline fired now, failed answer POSTs, session expiry) and
synchronises on observed traffic, never on sleeps.  :func:`run_scenario` runs one and
returns a :class:`ScenarioResult`; the scenarios are :mod:`fsm.wire.scenarios`' (the
demo's is :func:`fsm.wire.scenarios.seed`), judged by :mod:`fsm.wire.verdict`.

The client seam (what a guarded client must implement to reuse every scenario)
------------------------------------------------------------------------------
A *client factory* is a callable ``factory(env: ClientEnv)`` returning an **async context
manager** that yields a :class:`ScenarioClient`:

- ``env.url``: the MCP endpoint to connect to (the proxy; protocol 2025-11-25 over the legacy
  streamable-HTTP transport, i.e. ``ClientSession`` over ``streamable_http_client``, not
  ``Client(url)`` whose default negotiates 2026-07-28 and has no server->client requests);
- ``env.http_client``: the ``AsyncClient`` of the SDK's HTTP library (``httpx2`` for mcp
  2.x, ``httpx`` for 1.x) to use for **all** HTTP (pass it to
  ``streamable_http_client(url, http_client=...)`` or use it directly); do not create
  another one;
- ``env.on_present``: ``async (PresentationRequest) -> ElicitAnswer``.  Call it exactly when
  the client *presents* an elicitation to the user (it stands for the human) and send back
  what it returns.  Never call it for an elicitation the client decides not to show.  It
  may be cancelled (the client's business); the scenario records that;
- ``env.session_id()``: the current MCP session id seen on the wire (convenience for
  clients that do not track it themselves).

To observe answer-POST outcomes (the SDK hides them) a client may add event hooks
to ``env.http_client`` (``env.http_client.event_hooks = {...}``); the default rig is fresh
per scenario, so nothing leaks into the next one.

The context manager must have completed ``initialize`` when it yields and must close the
session on exit (bounded time: the scenario wraps the exit in its timeout).  The yielded
object must provide ``await client.call_tool(name, arguments)``, returning the tool result
(an object with ``content``/``isError`` like ``mcp.types.CallToolResult``, or a ``str``) or
raising; the scenario records the result or the exception type, JSON-RPC code (``code``
attribute, or ``error.code``) and message.  Optional: ``await client.list_tools()`` (no
scenario needs it; the project's tests probe a session with it).

Everything else (dedup, liveness, answer-outcome classification, resume policy) is the
client's business: the scenario only observes the wire (proxy log), the user (presentations)
and the server (controller log).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

import anyio
from anyio.abc import TaskGroup
from mcp import ClientSession, types
from mcp.server.streamable_http import EventStore

from fsm.wire.changes import Changes
from fsm.wire.proxy import Exchange, FaultProxy, TrafficEvent, is_resume_get
from fsm.wire.sdk import MODERN_PROTOCOL, adapter, http_client, open_client_streams
from fsm.wire.server import (
    PendingElicitation,
    RunningServer,
    ServerController,
    ServerEvent,
    StoreChoice,
    running_server,
)

__all__ = [
    "CONFIRM",
    "GUARDED_SCENARIO_CONFIG_KW",
    "MRTR_PROTOCOL",
    "SSE_PROTOCOL",
    "AnswerPost",
    "BackgroundCall",
    "ClientEnv",
    "ClientFactory",
    "ElicitAnswer",
    "MiddleTier",
    "Outcome",
    "Presentation",
    "PresentationRequest",
    "ResumeAttempt",
    "Rig",
    "ScenarioClient",
    "ScenarioResult",
    "Step",
    "Tier",
    "User",
    "capturing_guarded_client",
    "drive",
    "guarded_client",
    "open_rig",
    "plain_client",
    "run_scenario",
    "unless_ended",
]

T = TypeVar("T")


# --------------------------------------------------------------------------- the seam


@dataclass(frozen=True)
class PresentationRequest:
    """What the client shows the user: one elicitation, keyed by (session id, request id)."""

    session_id: str | None
    request_id: str | int
    message: str
    requested_schema: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ElicitAnswer:
    """The user's decision (``content`` only for ``accept``)."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


CONFIRM = ElicitAnswer("accept", {"confirm": True})
"""The scripted user's default answer: yes, delete the files."""

PresentFn = Callable[[PresentationRequest], Awaitable[ElicitAnswer]]


SSE_PROTOCOL = "2025-11-25"
"""The protocol of the SSE-era scenarios: ``ClientSession`` over the streamable-HTTP
transport, server-to-client requests on SSE streams."""
MRTR_PROTOCOL = MODERN_PROTOCOL
"""The protocol of the MRTR scenarios (:mod:`fsm.wire.mrtr_rig`): ``Client(url)``,
questions in ``InputRequiredResult`` rounds."""


@dataclass(frozen=True)
class ClientEnv:
    """What a client factory receives (see the module docstring). ``protocol``: the
    scenario's (:data:`SSE_PROTOCOL` or :data:`MRTR_PROTOCOL`); ``clock``: the client's
    clock in seconds (an MRTR scenario's moves on by explicit command: a guarded client
    takes its question ages from it)."""

    url: str
    http_client: Any  # an hx.AsyncClient (httpx2 for mcp 2.x, httpx for 1.x)
    on_present: PresentFn
    session_id: Callable[[], str | None]
    protocol: str = SSE_PROTOCOL
    clock: Callable[[], float] = time.monotonic


class ScenarioClient(Protocol):
    """What a client factory yields."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any: ...


ClientFactory = Callable[[ClientEnv], AbstractAsyncContextManager[ScenarioClient]]


class _PlainClient:
    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        return await self.session.call_tool(name, arguments)

    async def list_tools(self) -> types.ListToolsResult:
        return await self.session.list_tools()


def _presenting_callback(env: ClientEnv) -> Any:
    """The elicitation callback both factories give the SDK: present every request it is
    handed to ``env.on_present`` (the user) and return the answer."""

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        schema = getattr(params, "requested_schema", None) or getattr(
            params, "requestedSchema", None
        )
        answer = await env.on_present(
            PresentationRequest(env.session_id(), context.request_id, params.message, schema)
        )
        return types.ElicitResult(action=answer.action, content=answer.content)

    return on_elicit


@contextlib.asynccontextmanager
async def plain_client(env: ClientEnv) -> AsyncIterator[ScenarioClient]:
    """The unmodified mcp client (the installed line): ``ClientSession`` over
    ``streamable_http_client``.

    Its elicitation callback presents every ``elicitation/create`` it is handed (the SDK
    dispatcher does not de-duplicate replays) and returns the user's answer. In an MRTR
    scenario it is :func:`fsm.wire.mrtr_rig.plain_mrtr_client` (the same SDK's
    ``Client(url)`` and ``call_tool``).
    """
    if env.protocol == MRTR_PROTOCOL:
        from fsm.wire.mrtr_rig import plain_mrtr_client

        async with plain_mrtr_client(env) as client:
            yield client
        return

    on_elicit = _presenting_callback(env)

    async with (
        open_client_streams(env.url, env.http_client) as (read, write),
        ClientSession(read, write, elicitation_callback=on_elicit) as session,
    ):
        await session.initialize()
        yield _PlainClient(session)


GUARDED_SCENARIO_CONFIG_KW: dict[str, Any] = {"backoff_initial_s": 0.05, "backoff_max_s": 0.5}
"""Policy of :func:`guarded_client`: the default guard with short backoffs (the demo
server sends ``retry: 50``; answer resubmissions would otherwise wait a second)."""


class _GuardedScenarioClient:
    def __init__(self, session: Any) -> None:
        self.session = session

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        result: types.CallToolResult = await self.session.call_tool(name, arguments)
        return result

    async def list_tools(self) -> types.ListToolsResult:
        result: types.ListToolsResult = await self.session.list_tools()
        return result


@contextlib.asynccontextmanager
async def guarded_client(env: ClientEnv) -> AsyncIterator[ScenarioClient]:
    """The same client wrapped by the installed line's adapter
    (:func:`fsm.adapters.mcp2.guarded_session`, or :func:`fsm.adapters.mcp1.guarded_session`).

    The yielded object also has ``session`` (the :class:`~fsm.adapters.mcp2.GuardedSession`,
    for its event log and violations). In an MRTR scenario it is
    :func:`fsm.wire.mrtr_rig.guarded_mrtr_client` (:func:`fsm.adapters.mrtr.guarded_call_tool`).
    """
    if env.protocol == MRTR_PROTOCOL:
        from fsm.wire.mrtr_rig import guarded_mrtr_client

        async with guarded_mrtr_client(env) as client:
            yield client
        return

    from fsm.sse.guard import GuardConfig

    on_elicit = _presenting_callback(env)

    async with adapter().guarded_session(
        env.url,
        elicitation_callback=on_elicit,
        http_client=env.http_client,
        config=GuardConfig(**GUARDED_SCENARIO_CONFIG_KW),
    ) as session:
        yield _GuardedScenarioClient(session)


def capturing_guarded_client(sessions: list[Any]) -> ClientFactory:
    """:func:`guarded_client`, also appending each run's ``GuardedSession`` to ``sessions``
    (to read its event log and violations after the scenario)."""

    @contextlib.asynccontextmanager
    async def capturing(env: ClientEnv) -> AsyncIterator[ScenarioClient]:
        async with guarded_client(env) as client:
            sessions.append(client.session)  # type: ignore[attr-defined]
            yield client

    return capturing


# --------------------------------------------------------------------------- the user


@dataclass
class Presentation:
    """One presentation to the user, in order (``index`` from 0)."""

    index: int
    request: PresentationRequest
    at: float
    answer: ElicitAnswer | None = None
    cancelled: bool = False
    seq: int = 0
    """The proxy log's sequence number when the client presented it (what it had been
    told by then: :func:`fsm.wire.verdict.observations` orders the two by it)."""
    answered_seq: int | None = None
    """The same, when the user's answer was handed back to the client."""
    answered_at: float | None = None
    """The user's clock when the answer was handed back (as :attr:`at`)."""
    _decided: anyio.Event = field(default_factory=anyio.Event, repr=False)
    _given: ElicitAnswer | None = field(default=None, repr=False)

    @property
    def key(self) -> tuple[str | None, str]:
        return (self.request.session_id, str(self.request.request_id))

    @property
    def open(self) -> bool:
        return self.answer is None and not self.cancelled


class User:
    """A scripted user: records presentations, answers only when told to.

    ``clock``: the sequence each presentation and answer is stamped with
    (:attr:`Presentation.seq`; the rig's is the proxy log's last sequence number);
    ``now``: the time in seconds (:attr:`Presentation.at`, :attr:`Presentation.answered_at`;
    by default the wall clock from the user's creation).
    """

    def __init__(
        self, clock: Callable[[], int] = lambda: 0, now: Callable[[], float] | None = None
    ) -> None:
        self.presentations: list[Presentation] = []
        self._changes = Changes()
        t0 = time.monotonic()
        self._now = now if now is not None else lambda: time.monotonic() - t0
        self._clock = clock

    async def present(self, request: PresentationRequest) -> ElicitAnswer:
        """The ``on_present`` hook: blocks until :meth:`answer` decides this presentation."""
        item = Presentation(len(self.presentations), request, self._now(), seq=self._clock())
        self.presentations.append(item)
        self._changes.notify()
        try:
            await item._decided.wait()
        except anyio.get_cancelled_exc_class():
            item.cancelled = True
            self._changes.notify()
            raise
        assert item._given is not None
        item.answer = item._given
        item.answered_seq = self._clock()
        item.answered_at = self._now()
        self._changes.notify()
        return item._given

    def answer(self, index: int, answer: ElicitAnswer = CONFIRM) -> None:
        item = self.presentations[index]
        item._given = answer
        item._decided.set()

    def answer_open(self, answer: ElicitAnswer = CONFIRM) -> list[int]:
        """Answer every presentation still open; returns their indices."""
        indices = [p.index for p in self.presentations if p.open and not p._decided.is_set()]
        for i in indices:
            self.answer(i, answer)
        return indices

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        """Wait until ``predicate()`` holds (re-checked on every presentation, answer and
        cancellation); ``TimeoutError`` after ``timeout`` seconds."""
        await self._changes.wait_until(predicate, timeout)

    async def wait_presented(self, count: int, timeout: float = 10.0) -> Presentation:
        """Wait until ``count`` presentations happened; returns the ``count``-th."""
        await self.wait_until(lambda: len(self.presentations) >= count, timeout)
        return self.presentations[count - 1]


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Outcome:
    """How a call ended: ``kind="result"`` (``text``, ``is_error``) or ``"error"``."""

    kind: Literal["result", "error", "pending"]
    text: str = ""
    is_error: bool = False
    error_type: str | None = None
    code: int | None = None
    reason: str | None = None
    """The JSON-RPC error's ``data.reason`` (a guard's or gateway's ending error)."""

    @classmethod
    def of_result(cls, result: Any) -> Outcome:
        if isinstance(result, str):
            return cls("result", result)
        texts = [getattr(c, "text", "") for c in getattr(result, "content", []) or []]
        flag = getattr(result, "is_error", None)  # 2.x and fastmcp; 1.x: isError
        if flag is None:
            flag = getattr(result, "isError", False)
        return cls("result", "\n".join(t for t in texts if t), bool(flag))

    @classmethod
    def of_exception(cls, exc: BaseException) -> Outcome:
        code = getattr(exc, "code", None)
        if code is None:
            code = getattr(getattr(exc, "error", None), "code", None)
        error = getattr(exc, "error", None)
        message = getattr(error, "message", None) or str(exc)
        data = getattr(error, "data", None)
        reason = data.get("reason") if isinstance(data, dict) else None
        return cls(
            "error",
            message,
            True,
            type(exc).__name__,
            code if isinstance(code, int) else None,
            reason if isinstance(reason, str) else None,
        )


@dataclass(frozen=True)
class AnswerPost:
    """An answer POST seen by the proxy: the JSON-RPC id answered and what came back."""

    exchange: int
    request_id: Any
    body: Any
    status: int | None
    fault: str | None
    response_body: Any


@dataclass(frozen=True)
class ResumeAttempt:
    """A GET with ``Last-Event-ID``: its cursor, status and the event ids it delivered."""

    exchange: int
    cursor: str
    status: int | None
    delivered: tuple[str, ...]
    outcome: str | None


@dataclass
class ScenarioResult:
    """What happened, from the user's, the wire's and the server's point of view."""

    name: str
    outcome: Outcome
    presentations: list[Presentation]
    answers: list[AnswerPost]
    resumes: list[ResumeAttempt]
    session_ids: list[str]
    probe: Outcome | None = None
    server_log: list[ServerEvent] = field(default_factory=list)
    traffic: list[TrafficEvent] = field(default_factory=list)
    seconds: float = 0.0
    ended_seq: int | None = None
    """The proxy log's sequence number when the call under test ended (``None``: it
    never did)."""
    protocol: str = SSE_PROTOCOL
    """The scenario's protocol (:data:`SSE_PROTOCOL` or :data:`MRTR_PROTOCOL`): how the
    verdict reads the traffic."""
    question_age_s: float | None = None
    """The client-side age of a question the scenario holds a client to (an MRTR
    scenario's): an answer the user gave later than that after the presentation must
    not be sent. ``None``: not judged."""

    @property
    def presentation_counts(self) -> dict[tuple[str | None, str], int]:
        """Times presented per (session id, request id)."""
        return dict(Counter(p.key for p in self.presentations))

    def times_presented(self, request_id: str | int, session_id: str | None = None) -> int:
        return sum(
            1
            for p in self.presentations
            if str(p.request.request_id) == str(request_id)
            and (session_id is None or p.request.session_id == session_id)
        )

    @property
    def answer_statuses(self) -> list[int | str | None]:
        """Per answer POST: the HTTP status, or the fault name when no status came back."""
        return [a.status if a.status is not None else a.fault for a in self.answers]


# --------------------------------------------------------------------------- the rig


@dataclass
class Rig:
    """A running server, a proxy in front of it, an HTTP client and a user."""

    server: RunningServer
    proxy: FaultProxy
    http: Any  # an hx.AsyncClient
    user: User
    middle: Any = None
    """What the ``middle`` tier of :func:`open_rig` yielded (``None`` without one)."""

    @property
    def controller(self) -> ServerController:
        return self.server.controller

    def session_id(self) -> str | None:
        for ex in reversed(list(self.proxy.exchanges.values())):
            sid = ex.response_headers.get("mcp-session-id") or ex.headers.get("mcp-session-id")
            if sid:
                return sid
        return None

    def env(self) -> ClientEnv:
        return ClientEnv(self.proxy.url, self.http, self.user.present, self.session_id)

    async def tools_call(self, after: int = 0, timeout: float = 10.0) -> Exchange:
        """The exchange of the next ``tools/call`` POST, once its priming event was relayed."""
        req = await self.proxy.wait_for(
            lambda e: e.kind == "request" and _rpc_method(e.json) == "tools/call", timeout, after
        )
        await self.proxy.wait_for(
            lambda e: e.kind == "sse_event" and e.exchange == req.exchange and e.data == "",
            timeout,
        )
        return self.proxy.exchanges[req.exchange]

    async def primed(self, exchange: Exchange, timeout: float = 10.0) -> None:
        """Wait until ``exchange`` relayed a priming event (a resume GET attached its tail)."""
        await self.proxy.wait_for(
            lambda e: e.kind == "sse_event" and e.exchange == exchange.id and e.data == "",
            timeout,
        )

    async def stored(self, what: str, after: int = 0, timeout: float = 10.0) -> ServerEvent:
        """Wait until the server's event store stored a message (``what`` = method/kind)."""
        return await self.controller.wait_for(
            lambda e: e.kind == "stored" and e.detail.get("what") == what, timeout, after
        )

    async def cut_while_away(
        self,
        exchange: Exchange,
        away: Callable[[int], Awaitable[None]] | None = None,
        *,
        primed: bool = True,
    ) -> Exchange:
        """Cut ``exchange`` (abrupt) and hold the client's resume GET until ``away(mark)``
        has run (``mark``: the server log's sequence before the cut, for waits on what
        the server stores meanwhile); then let the resume through and return its
        exchange, once its priming event was relayed when ``primed``."""
        hold = self.proxy.hold_next(is_resume_get)
        mark = self.controller.log[-1].seq
        await self.proxy.cut(exchange, "abrupt")
        resume = await hold.wait_arrived()
        if away is not None:
            await away(mark)
        hold.release()
        if primed:
            await self.primed(resume)
        return resume

    def elicit_while_away(self, pending: PendingElicitation) -> Callable[[int], Awaitable[None]]:
        """An ``away`` for :meth:`cut_while_away`: release the gated tool and wait until
        its ``elicitation/create`` is stored (sent while the client is disconnected)."""

        async def away(mark: int) -> None:
            self.controller.release(pending)
            await self.stored("elicitation/create", after=mark)

        return away

    async def answers_quiet(self, timeout: float = 10.0) -> None:
        """Wait until no answer POST seen by the proxy is still in flight."""
        with anyio.fail_after(timeout):
            while True:
                busy = [ex for ex in self.proxy.exchanges.values() if ex.is_answer and ex.open]
                if not busy:
                    return
                await self.proxy.wait_for(_ends(busy[0].id), timeout)


class Tier(Protocol):
    """What a middle tier yields: something serving HTTP that the fault proxy relays to."""

    @property
    def url(self) -> str: ...


MiddleTier = Callable[[str], AbstractAsyncContextManager[Tier]]
"""What :func:`open_rig` may put between the fault proxy and the server: called with the
server's URL, it starts what it runs (replicas of a relay, say) and yields a :class:`Tier`
whose ``url`` the proxy relays to; it is stopped when the rig is torn down."""


@contextlib.asynccontextmanager
async def open_rig(
    *,
    event_store: StoreChoice | EventStore = "scoped",
    retry_interval_ms: int = 50,
    middle: MiddleTier | None = None,
) -> AsyncIterator[Rig]:
    """Server + proxy + HTTP client + user, all on 127.0.0.1; torn down on exit.
    ``event_store``: as :func:`~fsm.wire.server.running_server` takes it (a store
    instance is shared by every session). ``middle``: a :data:`MiddleTier` between the
    proxy and the server (what it yields is :attr:`Rig.middle`)."""
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(
            running_server(event_store=event_store, retry_interval_ms=retry_interval_ms)
        )
        tier = None if middle is None else await stack.enter_async_context(middle(server.url))
        proxy = await stack.enter_async_context(
            FaultProxy(server.url if tier is None else tier.url)
        )
        http = await stack.enter_async_context(http_client())
        yield Rig(server, proxy, http, User(lambda: proxy.last_seq), tier)


class BackgroundCall:
    """A tool call running in the background (``tg.start_soon(call.run, client, name,
    args)``); ``outcome`` once it ended, ``await call.wait()`` for it; ``ended_seq`` the
    ``clock`` then (the rig's: the proxy log's last sequence number)."""

    def __init__(self, clock: Callable[[], int] = lambda: 0) -> None:
        self.outcome = Outcome("pending")
        self.done = anyio.Event()
        self.ended_seq: int | None = None
        self._clock = clock

    async def run(self, client: ScenarioClient, name: str, arguments: dict[str, Any]) -> None:
        try:
            self.outcome = Outcome.of_result(await client.call_tool(name, arguments))
        except Exception as exc:
            self.outcome = Outcome.of_exception(exc)
        finally:
            self.ended_seq = self._clock()
            self.done.set()

    async def wait(self, timeout: float = 10.0) -> Outcome:
        with anyio.fail_after(timeout):
            await self.done.wait()
        return self.outcome


Step = Callable[[Rig, ScenarioClient, BackgroundCall, TaskGroup], Awaitable["Outcome | None"]]
"""One scenario: drive ``client`` on ``rig``, running the call under test as ``call`` in
``tg``; returns a probe outcome (a later call's) or ``None``."""


async def unless_ended(done: anyio.Event, step: Awaitable[T]) -> T | None:
    """``await step``, or ``None`` as soon as ``done`` is set first (a client that ended
    the call: gave up, failed or completed). A synchronisation point: never sleeps."""
    got: list[T] = []
    async with anyio.create_task_group() as tg:

        async def run_step() -> None:
            got.append(await step)
            tg.cancel_scope.cancel()

        async def ended() -> None:
            await done.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(run_step)
        tg.start_soon(ended)
    return got[0] if got else None


async def run_scenario(
    step: Step,
    client_factory: ClientFactory = plain_client,
    *,
    timeout: float = 30.0,
    rig: Rig | None = None,
    name: str | None = None,
) -> ScenarioResult:
    """Run the scenario ``step`` (:func:`fsm.wire.scenarios.seed`, or one of the caller's own)
    with ``client_factory``; the result is named ``name``, by default the step's.

    A fresh rig (server, proxy, HTTP client, user) is used unless ``rig`` is given.  Raises
    ``TimeoutError`` if the scenario does not finish within ``timeout`` seconds (a safety
    net: every step waits on an observed event).
    """
    async with contextlib.AsyncExitStack() as stack:
        if rig is None:
            rig = await stack.enter_async_context(open_rig())
        call, probe, seconds = await drive(step, client_factory, rig, timeout)
        result = _collect(name or step.__name__, rig, call.outcome, probe, seconds)
        result.ended_seq = call.ended_seq
        return result
    raise AssertionError("unreachable")


class Driven(Protocol):
    """What :func:`drive` needs of a rig: its proxy (whose log stamps the call's end)
    and the environment it gives a client factory."""

    @property
    def proxy(self) -> FaultProxy: ...

    def env(self) -> ClientEnv: ...


R = TypeVar("R", bound=Driven)


async def drive(
    step: Callable[[R, ScenarioClient, BackgroundCall, TaskGroup], Awaitable[Outcome | None]],
    client_factory: ClientFactory,
    rig: R,
    timeout: float,
) -> tuple[BackgroundCall, Outcome | None, float]:
    """Open a client through ``client_factory`` on ``rig`` and run ``step`` with it
    within ``timeout`` seconds (``TimeoutError`` past it); returns the call under test,
    the step's probe outcome and the seconds it took. What the user still has open is
    abandoned by closing the client."""
    started = time.monotonic()
    call = BackgroundCall(lambda: rig.proxy.last_seq)
    probe: Outcome | None = None
    with anyio.fail_after(timeout):
        async with client_factory(rig.env()) as client, anyio.create_task_group() as tg:
            probe = await step(rig, client, call, tg)
    return call, probe, time.monotonic() - started


def _collect(
    name: str, rig: Rig, outcome: Outcome, probe: Outcome | None, seconds: float
) -> ScenarioResult:
    proxy = rig.proxy
    answers: list[AnswerPost] = []
    resumes: list[ResumeAttempt] = []
    sessions: list[str] = []
    for ex in proxy.exchanges.values():
        sid = ex.response_headers.get("mcp-session-id")
        if sid and sid not in sessions:
            sessions.append(sid)
        if ex.is_answer:
            faults = [e.detail for e in proxy.log if e.kind == "fault" and e.exchange == ex.id]
            bodies = [e.json for e in proxy.log if e.exchange == ex.id and e.kind == "body"]
            answers.append(
                AnswerPost(
                    ex.id,
                    ex.json.get("id"),
                    ex.json,
                    ex.status,
                    faults[0] if faults else None,
                    bodies[0] if bodies else None,
                )
            )
        elif ex.is_resume:
            assert ex.last_event_id is not None
            resumes.append(
                ResumeAttempt(
                    ex.id, ex.last_event_id, ex.status, tuple(ex.sse_event_ids), ex.outcome
                )
            )
    return ScenarioResult(
        name=name,
        outcome=outcome,
        presentations=list(rig.user.presentations),
        answers=answers,
        resumes=resumes,
        session_ids=sessions,
        probe=probe,
        server_log=list(rig.controller.log),
        traffic=list(proxy.log),
        seconds=seconds,
    )


def _ends(exchange_id: int) -> Callable[[TrafficEvent], bool]:
    return lambda e: e.kind == "end" and e.exchange == exchange_id


def _rpc_method(body: Any) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("method"), str):
        return str(body["method"])
    return None
