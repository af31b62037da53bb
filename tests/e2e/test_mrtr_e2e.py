"""MRTR end to end: the real mcp 2.3.0 client against a real mcp 2.3.0 server in
protocol 2026-07-28 mode on 127.0.0.1, plain ``Client.call_tool`` vs
``guarded_call_tool``. Faults are explicit: the server expires its states or restarts on
command, the guard's clock is moved by the test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import mcp.client.session
import pytest
from answering_user import User
from mcp import types
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from fsm import actions as act
from fsm.adapters.mrtr import guarded_call_tool
from fsm.errors import InteractionFailed, QuestionReaskedError, RequestStateExpiredError
from fsm.mrtr.call import MrtrAction, MrtrConfig, Retry
from fsm.wire.mrtr_server import MrtrServer, running_mrtr_server
from fsm.wire.sdk import modern_client

pytestmark = pytest.mark.anyio


@pytest.fixture
async def server() -> AsyncIterator[MrtrServer]:
    async with running_mrtr_server(ttl=30.0) as srv:
        yield srv


async def test_the_protocol_is_2026_07_28(
    server: MrtrServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's own negotiation (``mode="auto"``) settles on 2026-07-28 with this server.
    Its probe's 10 s timeout is a behaviour (on expiry it falls back to 2025-11-25), so
    here it is made a hang guard: a loaded machine must not change the verdict."""
    monkeypatch.setattr(mcp.client.session, "DISCOVER_TIMEOUT_SECONDS", 120.0)
    async with Client(server.url) as client:
        assert client.protocol_version == "2026-07-28"


async def test_one_round_completes_plain_and_guarded(server: MrtrServer) -> None:
    user = User()
    async with modern_client(server.url, elicitation_callback=user) as client:
        plain = await client.call_tool("delete_files", {"count": 3})
        guarded = await guarded_call_tool(client, "delete_files", {"count": 3})
    assert plain.content == guarded.content
    assert isinstance(guarded.content[0], types.TextContent)
    assert guarded.content[0].text == "Deleted 3 files"
    assert len(user.prompts) == 2  # one per call
    assert user.prompts[1][0].startswith("elicitation/create#")  # the question's identity


async def test_a_reasking_tool_reprompts_plain_but_never_guarded(server: MrtrServer) -> None:
    plain_user, guarded_user = User(), User()
    actions: list[MrtrAction] = []
    async with modern_client(server.url, elicitation_callback=plain_user) as client:
        await client.call_tool("reasking_delete", {"count": 3, "reasks": 1})
    async with modern_client(server.url, elicitation_callback=guarded_user) as client:
        result = await guarded_call_tool(
            client, "reasking_delete", {"count": 3, "reasks": 1}, on_action=actions.append
        )
    assert len(plain_user.prompts) == 2  # the same question shown twice
    assert plain_user.prompts[0][1] == plain_user.prompts[1][1]
    assert len(guarded_user.prompts) == 1
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == "Deleted 3 files after 2 answers"
    retries = [a for a in actions if isinstance(a, Retry)]
    assert [r.input_responses for r in retries] == [
        {"confirm": {"action": "accept", "content": {}}}
    ] * 2


async def test_a_tool_that_keeps_reasking_fails_once_naming_the_reask(server: MrtrServer) -> None:
    user = User()
    async with modern_client(server.url, elicitation_callback=user) as client:
        with pytest.raises(QuestionReaskedError) as info:
            await guarded_call_tool(client, "reasking_delete", {"count": 3, "reasks": 5})
    assert len(user.prompts) == 1
    assert "re-asks" in info.value.evidence[0]
    assert server.log.asked["reasking_delete"] == 3


async def test_expired_state_loses_the_answer_plain_and_fails_typed_guarded(
    server: MrtrServer,
) -> None:
    user = User(server.expire_states, every=True)
    async with modern_client(server.url, elicitation_callback=user) as client:
        with pytest.raises(MCPError) as plain:
            await client.call_tool("delete_files", {"count": 3})
        with pytest.raises(RequestStateExpiredError) as guarded:
            await guarded_call_tool(client, "delete_files", {"count": 3})
    assert plain.value.code == -32602
    err = guarded.value
    assert err.reason == "invalid-request-state" and err.key is not None
    assert any("reason=invalid_request_state" in e for e in err.evidence)
    assert server.log.answers == []  # the server never took either answer


async def test_a_restart_between_rounds_is_terminal_not_a_reprompt(server: MrtrServer) -> None:
    user = User(server.restart)
    async with modern_client(server.url, elicitation_callback=user) as client:
        with pytest.raises(RequestStateExpiredError):
            await guarded_call_tool(client, "delete_files", {"count": 3})
    assert server.restarts == 1 and len(user.prompts) == 1
    # the new server works
    async with modern_client(server.url, elicitation_callback=user) as client:
        result = await guarded_call_tool(client, "delete_files", {"count": 3})
    assert isinstance(result.content[0], types.TextContent)


async def test_a_late_answer_is_withdrawn_not_sent(server: MrtrServer) -> None:
    now = [0.0]

    def late() -> None:
        now[0] += 541.0  # the user took longer than the client-side age limit

    user = User(late)
    actions: list[MrtrAction] = []
    async with modern_client(server.url, elicitation_callback=user) as client:
        with pytest.raises(RequestStateExpiredError) as info:
            await guarded_call_tool(
                client, "delete_files", {"count": 3}, clock=lambda: now[0], on_action=actions.append
            )
    assert info.value.reason == "aged-out"
    assert [type(a) for a in actions] == [act.Present, act.Withdraw, act.Fail]
    assert server.log.answers == []


async def test_a_prompt_nobody_answers_is_cancelled_when_it_ages_out(server: MrtrServer) -> None:
    user = User(block=True)
    async with modern_client(server.url, elicitation_callback=user) as client:
        with pytest.raises(RequestStateExpiredError):
            await guarded_call_tool(
                client, "delete_files", {"count": 3}, config=MrtrConfig(question_ttl_s=0.2)
            )
    assert user.withdrawn == 1


async def test_state_only_rounds_back_off_and_complete(server: MrtrServer) -> None:
    actions: list[MrtrAction] = []
    async with modern_client(server.url) as client:
        result = await guarded_call_tool(client, "slow_job", {"polls": 3}, on_action=actions.append)
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == "job done after 3 polls"
    assert [a.delay_s for a in actions if isinstance(a, Retry)] == [0.05, 0.1, 0.2]


async def test_the_demo_scene_shows_plain_and_guarded_side_by_side() -> None:
    from fsm.demo import mrtr_scene

    report = await mrtr_scene.scene()
    assert report["re-asking tool"]["plain"]["prompts"] == 2
    assert report["re-asking tool"]["guarded"]["prompts"] == 1
    assert report["late answer"]["plain"]["outcome"] == "MCPError -32602"
    assert report["late answer"]["guarded"] == {
        "prompts": 1,
        "withdrawn": 1,
        "outcome": "RequestStateExpiredError (aged-out)",
    }
    assert report["restart"]["guarded"]["outcome"] == (
        "RequestStateExpiredError (invalid-request-state)"
    )
    assert mrtr_scene.behaves(report)
    assert "re-asking tool  2 prompts" in mrtr_scene.table(report)


async def test_the_sdk_servers_own_ttl_gives_the_same_rejection() -> None:
    """The expiry switch stands in for the wall clock; here the real TTL lapses (0.5 s,
    the answer comes 0.6 s later: certain, not a race) and the rejection is the same."""
    async with running_mrtr_server(ttl=0.5) as srv:
        user = User(lambda: anyio.sleep(0.6))
        async with modern_client(srv.url, elicitation_callback=user) as client:
            with pytest.raises(RequestStateExpiredError) as info:
                await guarded_call_tool(client, "delete_files", {"count": 3})
    assert info.value.reason == "invalid-request-state"
    assert srv.log.answers == []


async def test_a_callback_that_raises_ends_the_call_once_chained(server: MrtrServer) -> None:
    def broken() -> None:
        raise ValueError("the UI crashed")

    user = User(broken)
    async with modern_client(server.url, elicitation_callback=user) as client:
        with pytest.raises(InteractionFailed) as info:
            await guarded_call_tool(client, "delete_files", {"count": 3})
    assert info.value.reason == "cancelled"
    assert isinstance(info.value.__cause__, ValueError)
