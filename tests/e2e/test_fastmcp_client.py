"""fastmcp 4.x's ``Client`` against the harness, plain and guarded through
:func:`fsm.adapters.mcp2.guarded_connection` (:mod:`support.fastmcp_clients`).

Plain, fastmcp does what the SDK under it does in the seed incident (the dead elicitation
presented twice, the call failing with -32000); guarded: one presentation, one outcome.
"""

from __future__ import annotations

import pytest

pytest.importorskip("fastmcp")

from support.fastmcp_clients import guarded_fastmcp, plain_fastmcp
from support.scenarios import cancel_withdraws_the_prompt, run_scenario, seed_ends_once

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(90)]


async def test_plain_fastmcp_presents_the_dead_elicitation_twice() -> None:
    r = await run_scenario("seed", plain_fastmcp)
    assert list(r.presentation_counts.values()) == [2]
    assert r.outcome.kind == "error" and r.outcome.code == -32000


async def test_guarded_fastmcp_presents_once_and_ends_once() -> None:
    await seed_ends_once(guarded_fastmcp)


async def test_guarded_fastmcp_withdraws_a_cancelled_prompt() -> None:
    await cancel_withdraws_the_prompt(guarded_fastmcp)


async def test_guarded_fastmcp_fails_a_call_with_the_typed_error() -> None:
    r = await run_scenario("session_expired", guarded_fastmcp)
    assert list(r.presentation_counts.values()) == [1]
    assert r.outcome.error_type == "SessionExpiredError"
