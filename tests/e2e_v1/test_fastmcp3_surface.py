"""fastmcp 3.x's ``Client`` (on mcp 1.x) against the guard, method by method
(:mod:`support.fastmcp_surface`, as ``tests/e2e/test_fastmcp_surface.py`` for 4.x).

Every public coroutine method of the installed ``Client`` is classified (3.x has the task
methods, not the Skills ones); each request method, run once through
:func:`fsm.adapters.mcp1.guarded_connection`, reaches the harness server through the guard
and ends with its result or one exception.
"""

from __future__ import annotations

import pytest

pytest.importorskip("fastmcp")

from fastmcp import Client
from mcp import McpError

from support.fastmcp_surface import calls, problems, race_each, unclassified
from support.scenarios import open_rig

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]

TASKS = ("cancel_task", "get_task_result", "get_task_status", "list_tasks")


def test_every_public_coroutine_method_of_the_client_is_classified() -> None:
    assert unclassified(Client) == set()


async def test_each_request_method_reaches_the_server_through_the_guard_and_ends_once() -> None:
    async with open_rig() as rig:
        records = await race_each(rig, calls(Client))
    assert problems(records) == []
    assert set(TASKS) <= set(records)
    # the 1.x server has no tasks and no logging: the SDK's error, once
    for name in (*TASKS, "set_logging_level"):
        assert isinstance(records[name].error, McpError), name
    assert records["call_tool"].result.content[0].text == "pong"
    assert [name for name, r in records.items() if r.error is not None] == [
        "set_logging_level",
        *TASKS,
    ]
