"""The rig of the MRTR scenarios (protocol 2026-07-28): a client behind the fault proxy,
against the MRTR test server, on a clock the scenario moves.

:func:`open_mrtr_rig` starts :func:`~fsm.wire.mrtr_server.running_mrtr_server` (tools that
ask through ``InputRequiredResult`` rounds, states sealed by the SDK's own middleware,
expired on command), a :class:`~fsm.wire.proxy.FaultProxy` in front of it, an HTTP
client, a scripted :class:`~fsm.wire.rig.User` and a :class:`ScenarioClock`: the client's
time, which the scenario moves by command (a question 541 s old without waiting 541 s).
:func:`run_mrtr_scenario` runs a step on it (:func:`fsm.wire.rig.drive`) and returns a
:class:`~fsm.wire.rig.ScenarioResult` with ``protocol`` :data:`~fsm.wire.rig.MRTR_PROTOCOL`,
which :mod:`fsm.wire.verdict` reads in MRTR terms.

The client factories take the same :class:`~fsm.wire.rig.ClientEnv` as the SSE era's
(``env.protocol`` is :data:`~fsm.wire.rig.MRTR_PROTOCOL`, ``env.clock`` the scenario's):
:func:`plain_mrtr_client` is mcp 2.x's ``Client(url)`` at 2026-07-28
(:func:`fsm.wire.sdk.modern_client`: no ``server/discover`` probe whose timeout could
move it to an older protocol on a slow machine) and its ``call_tool`` (the SDK's own
round driver), :func:`guarded_mrtr_client` the same ``Client`` through
:func:`fsm.adapters.mrtr.guarded_call_tool` on ``env.clock``. A presentation's
``request_id`` is the client's own name for the question (the plain SDK's round-local
key, the guarded path's question identity); the verdict matches presentations to the
questions on the wire by their message. The ``Client`` makes its own HTTP client
(``env.http_client`` is unused: mcp 2.3.0's ``Client(url)`` takes none).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from anyio.abc import TaskGroup
from mcp import types
from mcp.client.client import Client

from fsm.adapters.mrtr import guarded_call_tool
from fsm.mrtr.call import MrtrAction, MrtrConfig
from fsm.wire.mrtr_server import MrtrServer, running_mrtr_server
from fsm.wire.proxy import FaultProxy
from fsm.wire.rig import (
    MRTR_PROTOCOL,
    AnswerPost,
    BackgroundCall,
    ClientEnv,
    ClientFactory,
    Outcome,
    PresentationRequest,
    ScenarioClient,
    ScenarioResult,
    User,
    drive,
    plain_client,
)
from fsm.wire.sdk import http_client, modern_client

__all__ = [
    "QUESTION_AGE_S",
    "MrtrRig",
    "MrtrStep",
    "ScenarioClock",
    "capturing_guarded_mrtr_client",
    "guarded_mrtr_client",
    "open_mrtr_rig",
    "plain_mrtr_client",
    "run_mrtr_scenario",
]

QUESTION_AGE_S = MrtrConfig().question_ttl_s
"""The client-side age of a question the MRTR scenarios hold a client to: the guarded
path's default (540 s, below the official servers' 600 s TTL)."""


class ScenarioClock:
    """The client's clock in an MRTR scenario: starts at 0 s and moves only by
    :meth:`advance` (no sleeping, no wall clock)."""

    def __init__(self) -> None:
        self._now = 0.0

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` (>= 0) on; ``ValueError`` for a negative step."""
        if seconds < 0:
            raise ValueError(f"a clock does not go back ({seconds} s)")
        self._now += seconds


@dataclass
class MrtrRig:
    """A running MRTR server, the proxy in front of it, an HTTP client, a user and the
    client's clock."""

    server: MrtrServer
    proxy: FaultProxy
    http: Any  # an hx.AsyncClient
    user: User
    clock: ScenarioClock

    def env(self) -> ClientEnv:
        return ClientEnv(
            self.proxy.url,
            self.http,
            self.user.present,
            lambda: None,
            protocol=MRTR_PROTOCOL,
            clock=self.clock.now,
        )


MrtrStep = Callable[[MrtrRig, ScenarioClient, BackgroundCall, TaskGroup], Awaitable[Outcome | None]]
"""One MRTR scenario, as :data:`fsm.wire.rig.Step` on an :class:`MrtrRig`."""


@contextlib.asynccontextmanager
async def open_mrtr_rig(*, ttl: float = 30.0) -> AsyncIterator[MrtrRig]:
    """Server (states sealed with a ``ttl``-second TTL) + proxy + HTTP client + user +
    clock, all on 127.0.0.1; torn down on exit."""
    clock = ScenarioClock()
    async with (
        running_mrtr_server(ttl=ttl) as server,
        FaultProxy(server.url) as proxy,
        http_client() as http,
    ):
        yield MrtrRig(server, proxy, http, User(lambda: proxy.last_seq, clock.now), clock)


async def run_mrtr_scenario(
    step: MrtrStep,
    client_factory: ClientFactory = plain_client,
    *,
    timeout: float = 30.0,
    rig: MrtrRig | None = None,
    name: str | None = None,
) -> ScenarioResult:
    """Run the MRTR scenario ``step`` with ``client_factory`` on ``rig`` (a fresh one by
    default), as :func:`fsm.wire.rig.run_scenario` does an SSE one. The result's
    ``answers`` are the retries that carried ``inputResponses``."""
    async with contextlib.AsyncExitStack() as stack:
        if rig is None:
            rig = await stack.enter_async_context(open_mrtr_rig())
        call, probe, seconds = await drive(step, client_factory, rig, timeout)
        answers = [
            AnswerPost(ex.id, ex.json.get("id"), ex.json, ex.status, None, None)
            for ex in rig.proxy.exchanges.values()
            if isinstance(ex.json, dict) and _carries_answers(ex.json)
        ]
        return ScenarioResult(
            name=name or step.__name__,
            outcome=call.outcome,
            presentations=list(rig.user.presentations),
            answers=answers,
            resumes=[],
            session_ids=[],
            probe=probe,
            traffic=list(rig.proxy.log),
            seconds=seconds,
            ended_seq=call.ended_seq,
            protocol=MRTR_PROTOCOL,
            question_age_s=QUESTION_AGE_S,
        )
    raise AssertionError("unreachable")


def _carries_answers(body: dict[str, Any]) -> bool:
    params = body.get("params")
    return isinstance(params, dict) and bool(params.get("inputResponses"))


def _presenting(env: ClientEnv) -> Any:
    """The elicitation callback of both MRTR factories: present to ``env.on_present``."""

    async def on_elicit(
        context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        schema = getattr(params, "requested_schema", None)
        answer = await env.on_present(
            PresentationRequest(None, context.request_id, params.message, schema)
        )
        return types.ElicitResult(action=answer.action, content=answer.content)

    return on_elicit


class _PlainMrtr:
    def __init__(self, client: Client) -> None:
        self.client = client

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        return await self.client.call_tool(name, arguments)


class _GuardedMrtr:
    def __init__(
        self,
        client: Client,
        clock: Callable[[], float],
        on_action: Callable[[MrtrAction], None] | None = None,
    ) -> None:
        self.client = client
        self.clock = clock
        self.on_action = on_action

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        return await guarded_call_tool(
            self.client, name, arguments, clock=self.clock, on_action=self.on_action
        )


@contextlib.asynccontextmanager
async def plain_mrtr_client(env: ClientEnv) -> AsyncIterator[ScenarioClient]:
    """mcp 2.x's ``Client(env.url)`` at 2026-07-28 (:func:`fsm.wire.sdk.modern_client`)
    and its ``call_tool``: the SDK's driver shows every question of every round
    and sends every answer, whatever the time."""
    async with modern_client(env.url, elicitation_callback=_presenting(env)) as client:
        yield _PlainMrtr(client)


@contextlib.asynccontextmanager
async def guarded_mrtr_client(env: ClientEnv) -> AsyncIterator[ScenarioClient]:
    """The same ``Client`` through :func:`fsm.adapters.mrtr.guarded_call_tool` with
    ``env.clock`` (the default rules: a question's age limit is :data:`QUESTION_AGE_S`)."""
    async with modern_client(env.url, elicitation_callback=_presenting(env)) as client:
        yield _GuardedMrtr(client, env.clock)


def capturing_guarded_mrtr_client(actions: list[MrtrAction]) -> ClientFactory:
    """:func:`guarded_mrtr_client`, also appending every action the rules emit to
    ``actions`` (its ``on_action``: the withdrawals, the retries, the one outcome)."""

    @contextlib.asynccontextmanager
    async def capturing(env: ClientEnv) -> AsyncIterator[ScenarioClient]:
        async with modern_client(env.url, elicitation_callback=_presenting(env)) as client:
            yield _GuardedMrtr(client, env.clock, actions.append)

    return capturing
