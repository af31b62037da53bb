"""The test bed's SDK seam: the clients it makes wait as a person would, and its 2026
clients do not negotiate."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp")

from fsm.wire.sdk import MCP_MAJOR, MODERN_PROTOCOL, http_client, hx

pytestmark = pytest.mark.anyio


async def test_the_http_client_outwaits_a_quiet_stream() -> None:
    """httpx's default gives every phase 5 s; the SDK takes a read timeout on an SSE
    stream for a broken stream and reconnects, so a quiet stream on a loaded machine
    would change what a scenario measures."""
    async with http_client() as http:
        assert isinstance(http, hx.AsyncClient)
        timeout = http.timeout
    assert (timeout.connect, timeout.write, timeout.pool) == (30.0, 30.0, 30.0)
    assert timeout.read == 300.0


@pytest.mark.skipif(MCP_MAJOR < 2, reason="protocol 2026-07-28 needs mcp 2.x")
def test_a_modern_client_names_its_version() -> None:
    from fsm.wire.sdk import modern_client

    client = modern_client("http://127.0.0.1:9/mcp")
    assert client.mode == MODERN_PROTOCOL == "2026-07-28"
