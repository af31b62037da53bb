"""Tasks through the guarding gateway (the app ``fsm gateway`` serves,
:class:`fsm.gateway.app.Gateway`, on 127.0.0.1) in front of the tasks server of the test
bed: the guarded client's task completes through it, and every ``tasks/*`` request reaches
the upstream with the ``Mcp-Name`` header it routes on (the task id) intact."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp import types

from fsm.adapters.tasks import GuardedTasks
from fsm.wire.sdk import modern_client
from fsm.wire.tasks_server import running_tasks_server

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from support.gateway import running_gateway  # noqa: E402

pytestmark = pytest.mark.anyio

ACCEPT = types.ElicitResult(action="accept", content={})


async def test_a_guarded_task_completes_through_the_gateway_with_mcp_name_intact() -> None:
    prompts: list[str] = []

    async def user(ctx: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        prompts.append(str(params.message))
        return ACCEPT

    async with (
        running_tasks_server() as server,
        running_gateway(server.url) as gateway,
        modern_client(
            gateway.url, elicitation_callback=user, extensions=[GuardedTasks()]
        ) as client,
    ):
        with anyio.fail_after(10):
            result = await client.call_tool("delete_files", {"count": 3})
    content = result.content[0]
    assert isinstance(content, types.TextContent) and content.text == "Deleted 3 files"
    assert prompts == ["Delete 3 files?"]
    assert server.log.created == ["task-1"]
    assert server.log.names["tools/call"] == ["delete_files"]
    assert server.log.polls >= 1
    assert set(server.log.names["tasks/get"]) == {"task-1"}  # routed on, as sent
    assert server.log.names["tasks/update"] == ["task-1"]
