"""On the mcp 1.x line: the typed errors :mod:`fsm.adapters.mcp1` raises are the SDK's
``McpError`` too (code -32000, ``data.reason``), and leaving a guarded session ends its
standalone GET stream ``closed``, not failed. A real mcp 1.x client and server on
127.0.0.1."""

from __future__ import annotations

import io
import json
from typing import Any

import anyio
import httpx
import pytest
from mcp import types
from mcp.shared.exceptions import McpError

from fsm.adapters.mcp1 import guarded_session
from fsm.audit import audit_text
from fsm.errors import SessionExpiredError
from fsm.wire.server import running_server

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]


async def _accept(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"confirm": True})


async def test_except_mcperror_catches_a_session_expired_error() -> None:
    caught: list[McpError] = []
    async with (
        running_server() as server,
        guarded_session(server.url, elicitation_callback=_accept) as session,
    ):
        await session.call_tool("ping", {})
        assert session.session_id is not None
        await server.controller.expire_session(session.session_id)
        for _ in range(2):
            try:
                with anyio.fail_after(10):
                    await session.call_tool("ping", {})
            except McpError as err:
                caught.append(err)
        with pytest.raises(SessionExpiredError) as typed:
            await session.list_tools()
    assert len(caught) == 2
    for err in [*caught, typed.value]:
        assert isinstance(err, SessionExpiredError) and isinstance(err, McpError)
        assert isinstance(err.error, types.ErrorData)
        assert err.error.code == -32000
        assert err.error.data["reason"] == err.reason == "session-expired"
        assert err.error.message == str(err) and type(err).__name__ == "SessionExpiredError"


class SlowDelete(httpx.AsyncBaseTransport):
    """The application's transport, answering the session's DELETE after a pause (the
    server ends the session's streams meanwhile)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.deletes = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method == "DELETE":
            self.deletes += 1
            await anyio.sleep(0.3)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_session_close_ends_the_get_stream_closed() -> None:
    live = io.StringIO()
    slow = SlowDelete()
    async with running_server() as server, httpx.AsyncClient(transport=slow, timeout=30) as http:
        async with guarded_session(server.url, http_client=http, log=live) as session:
            await session.call_tool("ping", {})
            with anyio.fail_after(10):
                while session.guard.guard.stream_state("get") != "open":
                    await anyio.sleep(0.01)
        failures = session.failures
    assert slow.deletes == 1 and failures == {}
    records = [json.loads(line) for line in live.getvalue().splitlines()[1:]]
    ended = [(r["interaction"], r["outcome"], r["reason"]) for r in records if r["kind"] == "ended"]
    assert ("get", "closed", "session-closed") in ended
    assert all(outcome != "failed" for _, outcome, _ in ended), ended
    assert all(isinstance(r["wall"], str) for r in records)
    assert audit_text(live.getvalue(), complete=True).ok
