"""A client's resume takes its stream over: the stream's old upstream response is closed
before the resume goes upstream.

Servers refuse a second reader of a stream while they still hold the first (the
TypeScript SDK's event store answers ``409``; gateways in front of them answer alike).
A client whose old connection is half-open (it vanished without closing it) resumes on a
new one: the gateway must let the server see the old one go, or every resume is refused
and the call ends for a legitimate client.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from fsm.sse.guard import GuardConfig  # noqa: E402
from tests.gateway import scripted_upstream as scripted  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


class OneReader(scripted.HeldCallStream):
    """An upstream that serves one reader per call stream: the call's POST streams one
    event and is held (waiting for an answer, say) until its connection goes; a resume
    ``GET`` meanwhile gets ``409``; after it, the result. Counts the refusals."""

    def refusal(self) -> scripted.Refusal | None:
        return (409, b'{"error": "the stream already has a reader"}', ()) if self.held else None

    def other(self, msg: Any) -> tuple[int, bytes]:
        return 200, json.dumps({"jsonrpc": "2.0", "id": msg.get("id"), "result": {}}).encode()


async def test_a_resume_while_the_old_connection_is_half_open_completes_the_call() -> None:
    """The client reads its call's first event, then, its old connection still open (as
    a half-open one looks from the gateway), resumes with the id it got: the gateway
    closes the stream's old upstream response first, the server sees it go, and the
    resume gets the result; no resume is refused."""
    up = OneReader()
    config = GuardConfig(backoff_initial_s=0.01, backoff_max_s=0.05)
    async with (
        scripted.gateway_for(up, config=config) as gw,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        await scripted.initialize(http, gw.url)
        h = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        async with http.stream("POST", gw.url, json=scripted.CALL, headers=h) as old:
            pieces = old.aiter_raw()  # kept: the old connection stays open
            [(event_id, _)] = scripted.parse(await pieces.__anext__())
            assert event_id is not None
            with anyio.fail_after(30):
                resume = {**h, "last-event-id": event_id}
                async with http.stream("GET", gw.url, headers=resume) as resumed:
                    events = scripted.parse(b"".join([c async for c in resumed.aiter_raw()]))
            assert [json.loads(d) for _, d in events if d] == [scripted.result(7)]
            assert up.refused == 0
