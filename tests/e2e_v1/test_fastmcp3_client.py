"""fastmcp 3.x's ``Client`` (on mcp 1.x) guarded through
:func:`fsm.adapters.mcp1.guarded_connection` (:mod:`support.fastmcp_clients`).

fastmcp 3.x runs the 1.x SDK's transport and ``ClientSession``: guarded, the seed gives one
presentation and one outcome, and a replayed cancellation withdraws the prompt although the
SDK's receive loop is blocked in the handler.
"""

from __future__ import annotations

import pytest

from conftest import needs_primed_replays

pytest.importorskip("fastmcp")

from support.fastmcp_clients import guarded_fastmcp
from support.scenarios import cancel_withdraws_the_prompt, open_rig, seed_ends_once

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(90)]


@needs_primed_replays()
async def test_guarded_fastmcp3_presents_once_and_ends_once() -> None:
    await seed_ends_once(guarded_fastmcp)


@needs_primed_replays()
async def test_guarded_fastmcp3_withdraws_a_cancelled_prompt() -> None:
    await cancel_withdraws_the_prompt(guarded_fastmcp)


async def test_guarded_fastmcp3_fails_a_call_with_the_typed_error() -> None:
    """A resume of the call's stream is refused for good (400): the guard ends that
    stream. fastmcp 3.x owns the SDK's write stream, so the guard cannot tell which call
    sent the request, but the ending error it puts on the stream names the stream and the
    reason: the call raises the typed error (a McpError too, not the SDK's own)."""
    import anyio

    from fsm.errors import ResumeBudgetSpentError
    from fsm.wire.proxy import HttpFault, is_resume_get

    raised: list[BaseException] = []
    async with (
        open_rig() as rig,
        guarded_fastmcp(rig.env()) as client,
        anyio.create_task_group() as tg,
    ):

        async def call() -> None:
            try:
                await client.call_tool("delete_files", {"gated": True})
            except Exception as exc:
                raised.append(exc)

        tg.start_soon(call)
        post = await rig.tools_call()
        await rig.controller.wait_pending(state="gated")
        rig.proxy.fail_next(HttpFault(400, b"bad Last-Event-ID"), match=is_resume_get)
        await rig.proxy.cut(post, "abrupt")
    [err] = raised
    assert isinstance(err, ResumeBudgetSpentError) and err.reason == "not-resumable"
