"""The scenarios the tests run: the demo's rig and seed incident, and the other drivers.

Re-exports the rig of :mod:`fsm.wire.rig` (the client seam, the user, the results) with two
changes for the tests: :func:`open_rig` can put guarding gateway replicas between the proxy
and the server, and :func:`run_scenario` also takes a scenario by its name in
:data:`SCENARIOS`. The scenarios besides ``seed`` (:func:`fsm.wire.scenarios.seed`):

``replayed_cancel``
    As ``seed`` with the **cancel-emitting** deadline: the second replay carries the request
    followed by its ``notifications/cancelled``.  Plain client: the replayed request is
    dispatched again (a second handler, cancelled by the replayed cancel); the first
    presentation stays open and its late answer gets 202; -32000 as above.
``answer_conn_error``
    Elicitation delivered live, the answer POST fails with a connection error.  Plain
    client: the transport dies (``Error in post_writer``), the call fails with -32000
    "Connection closed".
``session_expired``
    Elicitation delivered live, then the server expires the session.  Plain client: the
    stream ends cleanly, two resume GETs get 404, the call fails with -32000 "...exhausted";
    the late answer gets 404 (ignored by the client); a probe gets -32600 "Session not
    found" (no re-initialisation).
``happy``
    The user confirms in time: one presentation, one answer (202), result
    ``"Deleted 3 files: a.txt, b.txt, c.txt"``.

:func:`run_progress_stream` times the plain client on 10,000 progress notifications.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from anyio.abc import TaskGroup
from mcp import ClientSession
from mcp.server.streamable_http import EventStore

from fsm.wire import rig as _rig
from fsm.wire.proxy import ConnectionFault
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
from fsm.wire.scenarios import replayed_deadline, seed, settle
from fsm.wire.sdk import open_client_streams

__all__ = [
    "CONFIRM",
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
    "capturing_guarded_client",
    "guarded_client",
    "happy",
    "open_rig",
    "plain_client",
    "replayed_cancel",
    "run_progress_stream",
    "run_scenario",
    "session_expired",
    "unless_ended",
]


@contextlib.asynccontextmanager
async def open_rig(
    *,
    event_store: Literal["scoped", "shared"] | EventStore = "scoped",
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


async def replayed_cancel(
    rig: Rig, client: ScenarioClient, call: BackgroundCall, tg: TaskGroup
) -> Outcome | None:
    """As ``seed``, with the deadline that also stores ``notifications/cancelled``."""
    return await replayed_deadline(rig, client, call, tg, "cancel")


async def answer_conn_error(
    rig: Rig, client: ScenarioClient, call: BackgroundCall, tg: TaskGroup
) -> Outcome | None:
    """The answer POST fails with a connection error."""
    tg.start_soon(call.run, client, "delete_files", {"deadline": "silent"})
    await rig.user.wait_presented(1)
    rig.proxy.fail_next_answer(ConnectionFault("close"))
    rig.user.answer_open()
    await call.wait()
    await settle(rig, client)
    return None


async def session_expired(
    rig: Rig, client: ScenarioClient, call: BackgroundCall, tg: TaskGroup
) -> Outcome | None:
    """The server expires the session while the elicitation is shown; a probe after."""
    tg.start_soon(call.run, client, "delete_files", {"deadline": "silent"})
    await rig.user.wait_presented(1)
    sid = rig.session_id()
    assert sid is not None
    await rig.controller.expire_session(sid)
    await call.wait()
    rig.user.answer_open()
    await settle(rig, client)
    try:
        with anyio.fail_after(10):
            return Outcome.of_result(await client.call_tool("ping", {}))
    except Exception as exc:
        return Outcome.of_exception(exc)


async def happy(
    rig: Rig, client: ScenarioClient, call: BackgroundCall, tg: TaskGroup
) -> Outcome | None:
    """The user confirms in time."""
    tg.start_soon(call.run, client, "delete_files", {"deadline": "silent"})
    await rig.user.wait_presented(1)
    rig.user.answer_open()
    await call.wait()
    await settle(rig, client)
    return None


SCENARIOS: dict[str, Step] = {
    "seed": seed,
    "replayed_cancel": replayed_cancel,
    "answer_conn_error": answer_conn_error,
    "session_expired": session_expired,
    "happy": happy,
}
"""Every scenario by name."""


async def run_scenario(
    name: str | Step,
    client_factory: ClientFactory = plain_client,
    *,
    timeout: float = 30.0,
    rig: Rig | None = None,
) -> ScenarioResult:
    """Run scenario ``name`` (a key of :data:`SCENARIOS`, or a :data:`Step` of the
    caller's own, named by its function) with ``client_factory``, as
    :func:`fsm.wire.rig.run_scenario` does."""
    if isinstance(name, str):
        step = SCENARIOS[name]
    else:
        step, name = name, name.__name__
    return await _rig.run_scenario(step, client_factory, timeout=timeout, rig=rig, name=name)


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
        received = 0
        all_received = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            nonlocal received
            received += 1
            if received >= count:
                all_received.set()

        async with (
            open_client_streams(url, rig.http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            started = time.monotonic()
            result = await session.call_tool(
                "stream_progress", {"count": count}, progress_callback=on_progress
            )
            # progress callbacks run as their own tasks and may trail the result
            with anyio.fail_after(30):
                await all_received.wait()
            seconds = time.monotonic() - started
        relayed = sum(
            1 for e in rig.proxy.log if e.kind == "sse_event" and "notifications/progress" in e.data
        )
        return ProgressRun(count, received, relayed, seconds, Outcome.of_result(result).text)
