"""The scenarios the tests run: the wire scenarios of :mod:`fsm.wire` on the test bed.

Re-exports the rig of :mod:`fsm.wire.rig` (the client seam, the user, the results) and the
scenarios of :mod:`fsm.wire.scenarios` (what each does to the mcp 2.3.0 plain client is
told there) with two changes for the tests: :func:`open_rig` can put guarding gateway
replicas between the proxy and the server, and :func:`run_scenario` also takes a
scenario by its name in :data:`SCENARIOS` and returns the raw result (not a verdict).

:func:`run_progress_stream` times the plain client on 10,000 progress notifications.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from mcp import ClientSession, types
from mcp.server.streamable_http import EventStore

from fsm.sse.guard import GuardConfig
from fsm.wire import rig as _rig
from fsm.wire.rig import (
    CONFIRM,
    GUARDED_SCENARIO_CONFIG_KW,
    AnswerPost,
    BackgroundCall,
    ClientEnv,
    ClientFactory,
    ElicitAnswer,
    MiddleTier,
    Outcome,
    Presentation,
    PresentationRequest,
    ResumeAttempt,
    Rig,
    ScenarioClient,
    ScenarioResult,
    Step,
    User,
    capturing_guarded_client,
    guarded_client,
    plain_client,
    unless_ended,
)
from fsm.wire.scenarios import (
    SCENARIOS,
    answer_conn_error,
    happy,
    replayed_cancel,
    session_expired,
)
from fsm.wire.sdk import open_client_streams
from fsm.wire.server import StoreChoice, call_stream_progress

__all__ = [
    "CONFIRM",
    "EXHAUSTED",
    "EXPIRED_RESULT",
    "GUARDED_SCENARIO_CONFIG_KW",
    "SCENARIOS",
    "AnswerPost",
    "BackgroundCall",
    "ClientEnv",
    "ClientFactory",
    "ElicitAnswer",
    "Outcome",
    "Presentation",
    "PresentationRequest",
    "ProgressRun",
    "ResumeAttempt",
    "Rig",
    "ScenarioClient",
    "ScenarioResult",
    "Step",
    "User",
    "answer_conn_error",
    "answer_once_resumed",
    "cancel_withdraws_the_prompt",
    "capturing_guarded_client",
    "cursors_never_go_back",
    "elicit_to_user",
    "guarded_client",
    "happy",
    "open_rig",
    "plain_client",
    "replayed_cancel",
    "run_progress_stream",
    "run_scenario",
    "seed_ends_once",
    "session_expired",
    "through_proxy",
    "unless_ended",
]

EXHAUSTED = "SSE stream ended and reconnection attempts were exhausted"
"""The error text (code -32000) of the mcp 2.x client giving up on resuming a stream."""

EXPIRED_RESULT = "Kept 3 files: confirmation expired"
"""The harness tool's own result once its confirmation's deadline passed."""


@contextlib.asynccontextmanager
async def open_rig(
    *,
    event_store: StoreChoice | EventStore = "scoped",
    retry_interval_ms: int = 50,
    gateway: Mapping[str, Any] | None = None,
    replicas: int = 1,
    upstream_faults: bool = False,
) -> AsyncIterator[Rig]:
    """:func:`fsm.wire.rig.open_rig`; with ``gateway``, guarding gateway replicas between
    the proxy and the server (:func:`support.gateway.gateway_tier` takes the other
    keywords; ``rig.middle`` is its :class:`~support.gateway.GatewayTier`)."""
    middle: MiddleTier | None = None
    if gateway is not None:
        from support.gateway import gateway_tier  # needs the gateway extra

        middle = functools.partial(
            gateway_tier, gateway=gateway, replicas=replicas, upstream_faults=upstream_faults
        )
    async with _rig.open_rig(
        event_store=event_store, retry_interval_ms=retry_interval_ms, middle=middle
    ) as rig:
        yield rig


async def run_scenario(
    name: str | Step,
    client_factory: ClientFactory = plain_client,
    *,
    timeout: float = 30.0,
    rig: Rig | None = None,
) -> ScenarioResult:
    """Run scenario ``name`` (a key of :data:`SCENARIOS`, on a fresh rig with its event
    store unless ``rig`` is given, or a :data:`Step` of the caller's own, named by its
    function) with ``client_factory``, as :func:`fsm.wire.rig.run_scenario` does."""
    if isinstance(name, str):
        return await SCENARIOS[name].run(client_factory, timeout=timeout, rig=rig)
    return await _rig.run_scenario(name, client_factory, timeout=timeout, rig=rig)


# --------------------------------------------------------------------------- benchmark


@dataclass(frozen=True)
class ProgressRun:
    """Result of :func:`run_progress_stream`."""

    count: int
    received: int
    relayed_events: int
    seconds: float
    result_text: str


async def run_progress_stream(count: int = 10_000, *, through_proxy: bool = True) -> ProgressRun:
    """Call ``stream_progress(count)`` with the plain client and time it.

    ``received`` counts progress callbacks seen by the client, ``relayed_events`` the SSE
    events with data the proxy relayed on the call's stream (``0`` without the proxy).
    """
    async with open_rig() as rig:
        url = rig.proxy.url if through_proxy else rig.server.url
        async with (
            open_client_streams(url, rig.http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            started = time.monotonic()
            result, received = await call_stream_progress(session, count, timeout=30)
            seconds = time.monotonic() - started
        relayed = sum(
            1 for e in rig.proxy.log if e.kind == "sse_event" and "notifications/progress" in e.data
        )
        return ProgressRun(count, received, relayed, seconds, Outcome.of_result(result).text)


def elicit_to_user(rig: Rig) -> Any:
    """An elicitation callback for an SDK session on ``rig``: show each request to the
    rig's scripted user and return the answer."""

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        request = PresentationRequest(rig.session_id(), context.request_id, params.message)
        answer = await rig.user.present(request)
        return types.ElicitResult(action=answer.action, content=answer.content)

    return on_elicit


async def answer_once_resumed(rig: Rig, done: anyio.Event, after: int, timeout: float) -> None:
    """After a cut (the proxy log's sequence ``after``): answer the user's open prompt
    once a resume has attached (its priming event relayed), unless the call ended first
    (``done``); then wait for the call to end. Each wait is given ``timeout`` seconds."""

    def attached(e: Any) -> bool:
        return e.kind == "sse_event" and e.data == "" and rig.proxy.exchanges[e.exchange].is_resume

    if await unless_ended(done, rig.proxy.wait_for(attached, timeout, after)) is not None:
        rig.user.answer_open()
    with anyio.fail_after(timeout):
        await done.wait()


T = TypeVar("T")


def through_proxy(
    rig: Rig, opener: Callable[..., T], config: GuardConfig | None = None, **kw: Any
) -> T:
    """``opener`` (a line's ``guarded_session`` or ``guarded_connection``) to the rig's
    fault proxy over the rig's HTTP client, with ``config`` (by default the scenarios'
    :data:`GUARDED_SCENARIO_CONFIG_KW`) and ``kw``."""
    config = config if config is not None else GuardConfig(**GUARDED_SCENARIO_CONFIG_KW)
    return opener(rig.proxy.url, http_client=rig.http, config=config, **kw)


def cursors_never_go_back(r: ScenarioResult) -> None:
    """Each resume starts from the newest event id the previous connection delivered;
    for a scenario that resumes after a resume that delivered events (a run with no such
    pair fails: the check would hold of nothing)."""
    pairs = [(a, b) for a, b in zip(r.resumes, r.resumes[1:], strict=False) if a.delivered]
    assert pairs, ("no resume followed one that delivered events", r.resumes)
    for before, after in pairs:
        assert after.cursor == before.delivered[-1], (before, after)


async def seed_ends_once(factory: ClientFactory) -> ScenarioResult:
    """The seed incident with a guarding client ``factory``: the request presented once,
    every resume from the newest id delivered, and the call ending once, with the tool's
    own expired result."""
    r = await run_scenario("seed", factory)
    assert list(r.presentation_counts.values()) == [1]
    assert len(r.resumes) >= 1, "the seed's cut stream was never resumed"
    cursors_never_go_back(r)
    assert r.outcome.kind == "result" and r.outcome.text == EXPIRED_RESULT
    return r


async def cancel_withdraws_the_prompt(factory: ClientFactory) -> ScenarioResult:
    """``replayed_cancel`` with a guarding client ``factory``: the request presented once,
    its prompt withdrawn by the replayed cancellation, no answer ever sent, every resume
    from the newest id delivered."""
    r = await run_scenario("replayed_cancel", factory)
    assert list(r.presentation_counts.values()) == [1]
    assert [p.cancelled for p in r.presentations] == [True]
    assert r.answers == []
    cursors_never_go_back(r)
    return r
