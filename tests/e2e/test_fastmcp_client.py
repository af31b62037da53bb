"""fastmcp 4.x's ``Client`` against the harness, plain and guarded through
:func:`fsm.adapters.mcp2.guarded_connection` (fastmcp opens the SDK session itself; the
guard comes in through its ``httpx_client_factory`` seam and the elicitation handler).

``mode="legacy"``: the protocol versions with replayable streams (fastmcp's default
``"auto"`` negotiates 2026-07-28 with a 2.x server, which has no server-to-client requests
on streams). fastmcp 4.x runs the SDK's own streamable-HTTP transport and ``ClientSession``,
so plain it
does what the SDK does in the seed incident (the dead elicitation presented twice, the call
failing with -32000); guarded: one presentation, one outcome.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

fastmcp = pytest.importorskip("fastmcp")

from fastmcp import Client  # noqa: E402
from fastmcp.client.transports import StreamableHttpTransport  # noqa: E402
from mcp import types  # noqa: E402

from fsm.adapters.core import GuardedConnection  # noqa: E402
from fsm.adapters.mcp2 import guarded_connection  # noqa: E402
from fsm.guard import GuardConfig  # noqa: E402
from fsm.harness.scenarios import (  # noqa: E402
    GUARDED_SCENARIO_CONFIG_KW,
    ClientEnv,
    PresentationRequest,
    ScenarioClient,
    run_scenario,
)

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(90)]


class _Fast:
    """A fastmcp ``Client`` as a scenario client; ``conn`` races each call when guarded."""

    def __init__(self, client: Any, conn: GuardedConnection | None) -> None:
        self.client, self.conn = client, conn

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        def run() -> Any:
            return self.client.call_tool(name, arguments, raise_on_error=False)

        return await (self.conn.call(run) if self.conn is not None else run())


def _handler(env: ClientEnv, conn: GuardedConnection | None) -> Any:
    async def on_elicit(message: str, response_type: Any, params: Any, context: Any) -> Any:
        request = PresentationRequest(env.session_id(), context.request_id, message)
        if conn is None:
            answer = await env.on_present(request)
            return types.ElicitResult(action=answer.action, content=answer.content)
        with conn.prompt(context.request_id):
            answer = await env.on_present(request)
            return types.ElicitResult(action=answer.action, content=answer.content)
        return types.ElicitResult(action="cancel")  # withdrawn by the guard

    return on_elicit


@contextlib.asynccontextmanager
async def plain_fastmcp(env: ClientEnv) -> AsyncIterator[ScenarioClient]:
    def factory(**kw: Any) -> httpx2.AsyncClient:  # fastmcp closes it: its own, to the proxy
        kw.setdefault("timeout", httpx2.Timeout(30.0, read=300.0))
        return httpx2.AsyncClient(**kw)

    transport = StreamableHttpTransport(env.url, httpx_client_factory=factory)
    async with Client(transport, mode="legacy", elicitation_handler=_handler(env, None)) as client:
        yield _Fast(client, None)


@contextlib.asynccontextmanager
async def guarded_fastmcp(env: ClientEnv) -> AsyncIterator[ScenarioClient]:
    config = GuardConfig(**GUARDED_SCENARIO_CONFIG_KW)
    async with guarded_connection(env.url, http_client=env.http_client, config=config) as conn:
        transport = StreamableHttpTransport(env.url, httpx_client_factory=conn.http_client)
        async with Client(transport, mode="legacy", elicitation_handler=_handler(env, conn)) as c:
            yield _Fast(c, conn)


async def test_plain_fastmcp_presents_the_dead_elicitation_twice() -> None:
    r = await run_scenario("seed", plain_fastmcp)
    assert list(r.presentation_counts.values()) == [2]
    assert r.outcome.kind == "error" and r.outcome.code == -32000


async def test_guarded_fastmcp_presents_once_and_ends_once() -> None:
    r = await run_scenario("seed", guarded_fastmcp)
    assert list(r.presentation_counts.values()) == [1]
    for before, after in zip(r.resumes, r.resumes[1:], strict=False):
        if before.delivered:
            assert after.cursor == before.delivered[-1]
    assert r.outcome.kind == "result"
    assert r.outcome.text == "Kept 3 files: confirmation expired"


async def test_guarded_fastmcp_withdraws_a_cancelled_prompt() -> None:
    r = await run_scenario("replayed_cancel", guarded_fastmcp)
    assert list(r.presentation_counts.values()) == [1]
    assert [p.cancelled for p in r.presentations] == [True]
    assert r.answers == []
