"""Tasks end to end: the real mcp 2.3.0 client against the real tasks server of the test
bed (:mod:`fsm.wire.tasks_server`, the SDK's extension API, protocol 2026-07-28) on
127.0.0.1: the plain requester (:class:`fsm.wire.tasks_plain.PlainTasks`, what an
application on the raw SDK does) vs the guarded one (:class:`fsm.adapters.tasks.GuardedTasks`).
Faults are the server's explicit commands, run by the user's callback while its prompt is
up; a blocked user waits for the guard to take the prompt down (a cancel), never a timer."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pydantic
import pytest
from answering_user import User
from mcp import types
from mcp.shared.exceptions import MCPError

from fsm import actions as act
from fsm.adapters.tasks import GuardedTasks, TaskHandle, run_task
from fsm.errors import (
    CallRejectedError,
    InteractionFailed,
    MalformedTaskError,
    TaskCancelledError,
    TaskExpiredError,
    TaskFailedError,
)
from fsm.tasks.task import TaskAction
from fsm.wire.sdk import modern_client
from fsm.wire.tasks_plain import PlainTasks
from fsm.wire.tasks_server import TasksServer, running_tasks_server

pytestmark = pytest.mark.anyio


@pytest.fixture
async def server() -> AsyncIterator[TasksServer]:
    async with running_tasks_server(poll_interval_ms=100) as srv:
        yield srv


async def _call(server: TasksServer, user: User, extension: Any) -> types.CallToolResult:
    result = await _outcome(server, user, extension)
    assert isinstance(result, types.CallToolResult), result
    return result


async def _plain_keys(server: TasksServer) -> list[str]:
    """The plain requester's call, which completes: the key of each prompt, in order."""
    user = User()
    assert _text(await _call(server, user, PlainTasks())) == "Deleted 3 files"
    return [key for key, _ in user.prompts]


async def _outcome(
    server: TasksServer, user: User, extension: Any
) -> types.CallToolResult | Exception:
    """The call's result, or what it raised (caught inside the ``Client`` block, whose
    exit would wrap it in a group)."""
    async with modern_client(
        server.url, elicitation_callback=user, extensions=[extension]
    ) as client:
        with anyio.fail_after(10):
            try:
                return await client.call_tool("delete_files", {"count": 3})
            except Exception as exc:
                return exc


def _text(result: types.CallToolResult) -> str:
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    return content.text


async def test_a_task_asks_is_answered_and_completes(server: TasksServer) -> None:
    plain_user, guarded_user = User(), User()
    actions: list[TaskAction] = []
    plain = await _call(server, plain_user, PlainTasks())
    guarded = await _call(server, guarded_user, GuardedTasks(on_action=actions.append))
    assert _text(plain) == _text(guarded) == "Deleted 3 files"
    assert plain_user.prompts == guarded_user.prompts == [("confirm-1", "Delete 3 files?")]
    assert [a.key[1] for a in actions if isinstance(a, act.Present)] == ["confirm-1"]
    assert server.log.created == ["task-1", "task-2"]
    # every tasks/* request named its task in Mcp-Name (the SDK's name_param)
    assert set(server.log.names["tasks/get"]) == {"task-1", "task-2"}
    assert set(server.log.names["tasks/update"]) == {"task-1", "task-2"}


async def test_without_the_extension_the_tool_answers_plainly(server: TasksServer) -> None:
    async with modern_client(server.url) as client:
        result = await client.call_tool("delete_files", {"count": 3})
    assert _text(result) == "Deleted 3 files (no task)"
    assert server.log.created == []


async def test_a_superseded_prompt_is_withdrawn_and_the_new_key_presented(
    server: TasksServer,
) -> None:
    def supersede() -> None:
        server.supersede(server.latest().task_id)

    user = User(supersede, block=True)
    result = await _call(server, user, GuardedTasks())
    assert _text(result) == "Deleted 3 files"
    assert user.prompts == [
        ("confirm-1", "Delete 3 files?"),
        ("confirm-2", "Delete 3 files? (updated)"),
    ]
    assert user.withdrawn == 1  # the dead prompt was taken down, not answered
    assert server.log.ignored == []


async def test_plain_answers_a_superseded_prompt_into_the_void(server: TasksServer) -> None:
    user = User(lambda: server.supersede(server.latest().task_id) and None)
    result = await _call(server, user, PlainTasks())
    assert _text(result) == "Deleted 3 files"
    assert [key for key, _ in user.prompts] == ["confirm-1", "confirm-2"]
    assert user.withdrawn == 0
    assert server.log.ignored == [("task-1", "confirm-1")]  # acknowledged, then dropped


async def test_a_failed_task_withdraws_its_prompt_and_fails_once(server: TasksServer) -> None:
    user = User(lambda: server.fail(server.latest().task_id), block=True)
    error = await _outcome(server, user, GuardedTasks())
    assert isinstance(error, TaskFailedError)
    assert isinstance(error, MCPError)  # one typed error, an MCPError too
    assert error.reason == "task-failed"
    assert any("the job crashed" in fact for fact in error.evidence)
    assert user.withdrawn == 1
    assert server.log.answers == server.log.ignored == []


async def test_plain_answers_a_failed_task(server: TasksServer) -> None:
    user = User(lambda: server.fail(server.latest().task_id))
    error = await _outcome(server, user, PlainTasks())
    assert isinstance(error, RuntimeError) and "failed" in str(error)
    assert server.log.ignored == [("task-1", "confirm-1")]


@pytest.mark.parametrize("fault", ["purge", "expire"])
async def test_a_purged_or_expired_task_ends_with_one_typed_error(
    server: TasksServer, fault: str
) -> None:
    user = User(lambda: getattr(server, fault)(server.latest().task_id), block=True)
    error = await _outcome(server, user, GuardedTasks())
    assert isinstance(error, TaskExpiredError) and isinstance(error, MCPError)
    assert isinstance(error.__cause__, MCPError)  # the -32602 that ended it
    assert error.__cause__.code == -32602
    assert user.withdrawn == 1
    plain_user = User(lambda: getattr(server, fault)(server.latest().task_id))
    plain = await _outcome(server, plain_user, PlainTasks())
    assert isinstance(plain, MCPError) and not isinstance(plain, InteractionFailed)
    assert plain.code == -32602  # the SDK's raw error, after an answer sent into the void


async def test_an_answered_question_reasked_under_a_new_key_is_answered_from_the_store(
    server: TasksServer,
) -> None:
    server.reask_next(1)
    guarded_user = User()
    guarded = await _call(server, guarded_user, GuardedTasks())
    assert _text(guarded) == "Deleted 3 files"
    assert guarded_user.prompts == [("confirm-1", "Delete 3 files?")]  # asked once
    assert [key for _, key, _ in server.log.answers] == ["confirm-1", "confirm-2"]
    server.reask_next(1)
    assert await _plain_keys(server) == ["confirm-1", "confirm-2"]  # twice


async def test_run_task_drives_a_handle_from_the_session(server: TasksServer) -> None:
    user = User()
    async with modern_client(
        server.url, elicitation_callback=user, extensions=[GuardedTasks()]
    ) as c:
        handle = await c.session.call_tool("delete_files", {"count": 2}, allow_claimed=True)
        assert isinstance(handle, TaskHandle)
        with anyio.fail_after(10):
            result = await run_task(c.session, handle)
    assert _text(result) == "Deleted 2 files"


@pytest.mark.parametrize("fault", ["refused", "lost"])
async def test_a_refused_or_lost_update_fails_once_where_plain_presents_again(
    server: TasksServer, fault: str
) -> None:
    """The update is refused (a JSON-RPC -32603) or never reaches the server (HTTP 502,
    which mcp 2.3.0 reports as a JSON-RPC -32603: the HTTP status is not carried), so the
    rules judge it terminal: one typed error, never a second prompt; the plain requester
    releases the key and asks again."""
    spoil = server.refuse_updates if fault == "refused" else server.lose_updates
    spoil(1)
    guarded_user = User()
    error = await _outcome(server, guarded_user, GuardedTasks())
    assert isinstance(error, CallRejectedError) and isinstance(error, MCPError)
    assert isinstance(error.__cause__, MCPError) and error.__cause__.code == -32603
    assert len(guarded_user.prompts) == 1  # never released to be asked again
    spoil(1)
    assert await _plain_keys(server) == ["confirm-1", "confirm-1"]  # twice
    assert getattr(server.log, fault) == 2


async def test_a_completion_without_a_result_is_a_typed_error(server: TasksServer) -> None:
    user = User(lambda: server.complete_bare(server.latest().task_id), block=True)
    error = await _outcome(server, user, GuardedTasks())
    assert isinstance(error, MalformedTaskError) and isinstance(error, MCPError)
    assert user.withdrawn == 1


async def test_a_callback_that_raises_cancels_the_task(server: TasksServer) -> None:
    def broken() -> None:
        raise ValueError("the UI crashed")

    error = await _outcome(server, User(broken), GuardedTasks())
    assert isinstance(error, TaskCancelledError) and isinstance(error, MCPError)
    assert isinstance(error.__cause__, ValueError)
    assert server.log.cancelled == ["task-1"]  # tasks/cancel sent


async def test_an_input_request_the_sdk_cannot_parse_cancels_the_task(
    server: TasksServer,
) -> None:
    user = User(lambda: server.ask_malformed(server.latest().task_id) and None, block=True)
    error = await _outcome(server, user, GuardedTasks())
    assert isinstance(error, TaskCancelledError) and error.reason == "cancelled"
    assert isinstance(error.__cause__, pydantic.ValidationError)
    assert user.withdrawn == 1 and len(user.prompts) == 1  # the bad request never shown
    assert server.log.cancelled == ["task-1"]


async def test_the_ttl_passing_while_the_prompt_is_up_ends_the_call(server: TasksServer) -> None:
    skew = [0.0]

    def later() -> None:  # the user looks away for two minutes: the guard's clock moves
        skew[0] = 120.0

    user = User(later, block=True)
    error = await _outcome(server, user, GuardedTasks(clock=lambda: time.time() + skew[0]))
    assert isinstance(error, TaskExpiredError) and error.reason == "ttl-passed"
    assert user.withdrawn == 1
    assert server.log.answers == server.log.ignored == []  # no answer after the TTL


async def test_the_demo_scene_shows_plain_and_guarded_side_by_side() -> None:
    from fsm.demo import cli, tasks_scene

    report = await tasks_scene.scene()
    assert report["superseded"]["plain"]["dropped"] == 1
    assert report["superseded"]["guarded"] == {
        "prompts": ["confirm-1", "confirm-2"],
        "withdrawn": 1,
        "dropped": 0,
        "outcome": "result: Deleted 3 files",
    }
    assert report["re-asked"]["plain"]["prompts"] == ["confirm-1", "confirm-2"]
    assert report["re-asked"]["guarded"]["prompts"] == ["confirm-1"]
    assert report["update refused"]["plain"]["prompts"] == ["confirm-1", "confirm-1"]
    assert report["update refused"]["guarded"]["outcome"] == "CallRejectedError (jsonrpc-error)"
    assert report["task failed"]["guarded"]["outcome"] == "TaskFailedError (task-failed)"
    assert all(tasks_scene.mishandled(case, sides["plain"]) for case, sides in report.items())
    assert tasks_scene.behaves(report)
    text = tasks_scene.table(report)
    assert max(map(len, text.splitlines())) <= 100
    assert "guarded (fsm.adapters.tasks) *" in text
    assert all(" ".join(f.split()) in " ".join(text.split()) for f in tasks_scene.FAULTS.values())
    summary = " ".join(cli.summary({**_FIRST_SCENE, "tasks": report}).split())
    assert "scene 3: of 4 cases, the plain requester" in summary
    assert "dropped in 4, the guarded client in 0." in summary


_SIDE = {"presentations": [], "answer_posts": [], "resumes": [], "seconds": 0.0}
_FIRST_SCENE = {
    side: {**_SIDE, "outcome": {"kind": "result", "text": "", "error_type": None, "code": None}}
    for side in ("plain", "guarded")
}
