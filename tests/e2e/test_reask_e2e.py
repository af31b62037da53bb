"""A real mcp 2.x server that asks an answered question again under a new JSON-RPC id
(the harness's ``reask`` tool, as a server-side shim that lost the answer does): the
plain SDK client presents it again, the guarded client presents it once and resubmits
the stored answer, and past ``max_reasks`` fails the call once with
``QuestionReaskedError``. Loopback only; nothing sleeps."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from mcp import ClientSession, MCPError
from mcp.types import ElicitResult

from fsm import properties as P
from fsm.adapters.mcp2 import guarded_session
from fsm.errors import QuestionReaskedError
from fsm.sse.guard import GuardConfig
from fsm.wire.sdk import http_client, open_client_streams
from fsm.wire.server import running_server

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]

Elicit = Callable[[Any, Any], Awaitable[ElicitResult]]


def _user(prompts: list[str]) -> Elicit:
    async def on_elicit(context: Any, params: Any) -> ElicitResult:
        prompts.append(params.message)
        return ElicitResult(action="accept", content={"proceed": True})

    return on_elicit


async def test_the_plain_client_presents_the_reask_again() -> None:
    prompts: list[str] = []
    async with (
        running_server() as server,
        http_client() as http,
        open_client_streams(server.url, http) as (read, write),
        ClientSession(read, write, elicitation_callback=_user(prompts)) as session,
    ):
        await session.initialize()
        with anyio.fail_after(20):
            result = await session.call_tool("reask", {"count": 1})
    assert prompts == ["Proceed?", "Proceed?"]  # one question, two prompts
    assert result.content[0].text == "answered 2: accept accept"  # type: ignore[union-attr]


async def test_the_guarded_client_presents_once_and_resubmits_the_answer() -> None:
    prompts: list[str] = []
    async with (
        running_server() as server,
        guarded_session(server.url, elicitation_callback=_user(prompts)) as session,
    ):
        with anyio.fail_after(20):
            result = await session.call_tool("reask", {"count": 1})
        assert session.violations == []
        submitted = [o.key for o, _ in session.observations() if isinstance(o, P.Submitted)]
    assert prompts == ["Proceed?"]
    assert result.content[0].text == "answered 2: accept accept"  # type: ignore[union-attr]
    assert len(submitted) == 2 and submitted[0] != submitted[1]  # one answer, two ids


async def test_past_max_reasks_the_guarded_call_fails_once() -> None:
    prompts: list[str] = []
    async with (
        running_server() as server,
        guarded_session(
            server.url, elicitation_callback=_user(prompts), config=GuardConfig(max_reasks=1)
        ) as session,
    ):
        with anyio.fail_after(20), pytest.raises(QuestionReaskedError) as caught:
            await session.call_tool("reask", {"count": 2})
        assert session.violations == []
    assert prompts == ["Proceed?"]
    assert isinstance(caught.value, MCPError)  # what an application's SDK handler catches
    assert caught.value.reason == "question-reasked"


async def test_through_the_gateway_the_plain_client_presents_once() -> None:
    """The unmodified client behind the guarding gateway: the gateway's guard submits
    the stored answer for the re-ask upstream; the client sees one prompt."""
    from anyio.abc import TaskGroup
    from gateway_support import gateway_rig

    from support.scenarios import (
        BackgroundCall,
        ElicitAnswer,
        Rig,
        ScenarioClient,
        plain_client,
        run_scenario,
    )

    async def reasking(
        rig: Rig, client: ScenarioClient, call: BackgroundCall, tg: TaskGroup
    ) -> None:
        tg.start_soon(call.run, client, "reask", {"count": 1})
        await rig.user.wait_presented(1)
        rig.user.answer_open(ElicitAnswer("accept", {"proceed": True}))
        await call.wait()

    async with gateway_rig() as rig:
        r = await run_scenario(reasking, plain_client, rig=rig)
    assert list(r.presentation_counts.values()) == [1]
    assert (r.outcome.kind, r.outcome.text) == ("result", "answered 2: accept accept")
