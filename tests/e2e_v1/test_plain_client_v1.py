"""The unmodified mcp 1.30 client against the mcp 1.30 harness server: what it does.

The behaviours ``models/mcp_sdk_1_x.py`` models, measured here on the wire.
"""

from __future__ import annotations

import pytest

from fsm.harness.scenarios import plain_client, run_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_happy_path_ids_start_at_zero() -> None:
    r = await run_scenario("happy", plain_client)
    ((session, rid),) = r.presentation_counts
    assert rid == "0" and r.presentation_counts[(session, rid)] == 1  # 1.x counts from 0
    assert [(a.request_id, a.status) for a in r.answers] == [(0, 202)]
    assert r.outcome.text == "Deleted 3 files: a.txt, b.txt, c.txt"


async def test_failed_answer_post_kills_the_session() -> None:
    """A connection error on the answer POST raises in ``post_writer``: the transport
    closes and the call fails with "Connection closed" (the model's writer death)."""
    r = await run_scenario("answer_conn_error", plain_client)
    assert sum(r.presentation_counts.values()) == 1
    assert [a.status for a in r.answers] == [None]  # no response: the proxy closed it
    assert r.outcome.kind == "error"
    assert (r.outcome.error_type, r.outcome.code) == ("McpError", -32000)
    assert r.outcome.text == "Connection closed"
    assert not any(e.kind == "elicit_answered" for e in r.server_log)
