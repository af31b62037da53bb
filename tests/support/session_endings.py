"""Two ends of a guarded session that both SDK lines' tests drive the same way
(``tests/e2e`` on mcp 2.x, ``tests/e2e_v1`` on 1.x): the server expiring the session
under it, and the application closing it while its standalone GET stream is open. Each
runs against the harness server on 127.0.0.1 with the installed line's adapter
(:func:`fsm.wire.sdk.adapter`) and returns what a test asserts on; each line's test adds
the checks only its own line's error class or log supports."""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass
from typing import Any

import anyio
from mcp import types

from fsm.errors import SessionExpiredError
from fsm.wire.sdk import McpError, adapter, hx
from fsm.wire.server import running_server

__all__ = [
    "Closed",
    "SlowDelete",
    "accept",
    "close_with_the_get_stream_open",
    "errors_after_expiry",
]


async def accept(context: Any, params: Any) -> types.ElicitResult:
    """An elicitation callback that accepts every question."""
    return types.ElicitResult(action="accept", content={"confirm": True})


async def errors_after_expiry() -> tuple[list[Exception], SessionExpiredError]:
    """A session the server expires after one call: the errors of the next two calls
    (the one that meets the 404, and one after it), each caught as the SDK's own error
    class (:data:`fsm.wire.sdk.McpError`), then the error of a third call caught as the
    library's :class:`~fsm.errors.SessionExpiredError`. Each call is given 10 s."""
    caught: list[Exception] = []
    async with (
        running_server() as server,
        adapter().guarded_session(server.url, elicitation_callback=accept) as session,
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
        try:
            with anyio.fail_after(10):
                await session.list_tools()
        except SessionExpiredError as typed:
            return caught, typed
    raise AssertionError("list_tools on the expired session returned")


class SlowDelete(hx.AsyncBaseTransport):  # type: ignore[misc]
    """The application's HTTP transport, answering the session's DELETE only after a
    pause: the server has ended the session's streams by then, so a guard that took the
    end of its GET stream for a cut would record it before the session is gone."""

    def __init__(self) -> None:
        self.inner = hx.AsyncHTTPTransport()
        self.deletes = 0

    async def handle_async_request(self, request: Any) -> Any:
        response = await self.inner.handle_async_request(request)
        if request.method == "DELETE":
            self.deletes += 1
            await anyio.sleep(0.3)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass(frozen=True)
class Closed:
    """What a closed session left: its live log, its kept log, how many DELETEs the
    transport answered, the session's failures and violations, and the wall clock just
    before the session opened and just after it closed."""

    live: str
    kept: str
    deletes: int
    failures: dict[str, Any]
    violations: list[Any]
    before: float
    after: float

    def ended(self) -> list[tuple[str, str, str]]:
        """``(interaction, outcome, reason)`` of every ``ended`` record of the live log."""
        records = [json.loads(line) for line in self.live.splitlines()[1:]]
        return [
            (r["interaction"], r["outcome"], r["reason"]) for r in records if r["kind"] == "ended"
        ]

    def assert_get_ended_closed(self) -> None:
        """The standalone GET ended ``closed`` (``session-closed``), nothing failed."""
        ended = self.ended()
        assert ("get", "closed", "session-closed") in ended
        assert all(outcome != "failed" for _, outcome, _ in ended), ended


async def close_with_the_get_stream_open() -> Closed:
    """One call on a guarded session, then leaving it (its DELETE answered slowly, by
    :class:`SlowDelete`) once its standalone GET stream is open (given 10 s)."""
    live = io.StringIO()
    slow = SlowDelete()
    before = time.time()
    async with running_server() as server, hx.AsyncClient(transport=slow, timeout=30.0) as http:
        async with adapter().guarded_session(server.url, http_client=http, log=live) as session:
            await session.call_tool("ping", {})
            with anyio.fail_after(10):
                while session.guard.guard.stream_state("get") != "open":
                    await anyio.sleep(0.01)
        after = time.time()
        return Closed(
            live.getvalue(),
            session.event_log(),
            slow.deletes,
            session.failures,
            session.violations,
            before,
            after,
        )
