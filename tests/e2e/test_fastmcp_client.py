"""fastmcp 4.x's ``Client`` against the harness, plain and guarded through
:func:`fsm.adapters.mcp2.guarded_connection` (:mod:`support.fastmcp_clients`).

Plain, fastmcp does what the SDK under it does in the seed incident (the dead elicitation
presented twice, the call failing with -32000); guarded: one presentation, one outcome.
"""

from __future__ import annotations

import pytest

pytest.importorskip("fastmcp")

from support.fastmcp_clients import guarded_fastmcp, plain_fastmcp
from support.scenarios import run_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(90)]


async def test_plain_fastmcp_presents_the_dead_elicitation_twice() -> None:
    r = await run_scenario("seed", plain_fastmcp)
    assert list(r.presentation_counts.values()) == [2]
    assert r.outcome.kind == "error" and r.outcome.code == -32000


async def test_guarded_fastmcp_presents_once_and_ends_once() -> None:
    r = await run_scenario("seed", guarded_fastmcp)
    assert list(r.presentation_counts.values()) == [1]
    for before, after in zip(r.resumes, r.resumes[1:], strict=False):
        if before.delivered:
            assert after.cursor == before.delivered[-1]
    assert r.outcome.kind == "result"
    assert r.outcome.text == "Kept 3 files: confirmation expired"


async def test_guarded_fastmcp_withdraws_a_cancelled_prompt() -> None:
    r = await run_scenario("replayed_cancel", guarded_fastmcp)
    assert list(r.presentation_counts.values()) == [1]
    assert [p.cancelled for p in r.presentations] == [True]
    assert r.answers == []


async def test_guarded_fastmcp_fails_a_call_with_the_typed_error() -> None:
    r = await run_scenario("session_expired", guarded_fastmcp)
    assert list(r.presentation_counts.values()) == [1]
    assert r.outcome.error_type == "SessionExpiredError"
