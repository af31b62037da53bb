"""The guarded session stands in for mcp 1.x's ``ClientSession``: the surface compared
with the installed SDK's (every public coroutine method offered with 1.x's signature or
excluded with a reason; every parameter of ``ClientSession`` and
``streamable_http_client`` taken), each request method answering as the plain session
does, and a prompt or resource read whose interaction dies ending with one typed error
that is also ``McpError``. A real mcp 1.x client and server on 127.0.0.1. The tests both
lines pass are :class:`support.guarded_surface.GuardedSurfaceTests`; the 2.x line:
``tests/e2e/test_guarded_surface.py``.
"""

from __future__ import annotations

from typing import ClassVar

import anyio
import pytest

from fsm.adapters.mcp1 import guarded_session
from fsm.errors import ResumeBudgetSpentError
from fsm.wire.proxy import HttpFault, is_resume_get
from support.guarded_surface import GuardedSurfaceTests, one_ending
from support.scenarios import open_rig, through_proxy

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(90)]


class TestGuardedSession(GuardedSurfaceTests):
    """mcp 1.x's ``ClientSession`` and :mod:`fsm.adapters.mcp1`. A held request whose
    session expires may also end ``not-resumable``: the oldest 1.x servers answer its
    resume 400, not 404 (the stream cannot be resumed)."""

    EXPIRY_ENDINGS: ClassVar[dict[str, str]] = {
        "SessionExpiredError": "session-expired",
        "ResumeBudgetSpentError": "not-resumable",
    }


async def test_a_call_the_guard_failed_leaves_the_session_usable() -> None:
    """A tool call's stream is cut and every resume refused: the call raises the typed
    error at once, and the SDK's own request is not cancelled while the guard's ending
    error is delivered to it (1.x's receive loop would close on that, and the session
    with it): the next call works."""
    async with open_rig() as rig, through_proxy(rig, guarded_session) as session:
        ending: list[BaseException] = []
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                ending.append(await one_ending(session.call_tool("delete_files", {"gated": True})))

            tg.start_soon(call)
            post = await rig.tools_call()
            await rig.controller.wait_pending(state="gated")
            rig.proxy.fail_next(HttpFault(503, b"unavailable"), is_resume_get, times=10)
            await rig.proxy.cut(post, "abrupt")
        [err] = ending
        assert isinstance(err, ResumeBudgetSpentError)
        with anyio.fail_after(10):
            result = await session.call_tool("ping", {})
        assert result.content[0].text == "pong"  # type: ignore[union-attr]
        assert session.violations == []
