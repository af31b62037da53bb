"""fastmcp 3.x's ``Client`` (on mcp 1.x) guarded through
:func:`fsm.adapters.mcp1.guarded_connection` (:mod:`fsm.harness.fastmcp_clients`).

fastmcp 3.x runs the 1.x SDK's transport and ``ClientSession``: guarded, the seed gives one
presentation and one outcome, and a replayed cancellation withdraws the prompt although the
SDK's receive loop is blocked in the handler.
"""

from __future__ import annotations

import pytest
from conftest import needs_primed_replays

pytest.importorskip("fastmcp")

from fsm.harness.fastmcp_clients import guarded_fastmcp
from fsm.harness.scenarios import run_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(90)]


@needs_primed_replays()
async def test_guarded_fastmcp3_presents_once_and_ends_once() -> None:
    r = await run_scenario("seed", guarded_fastmcp)
    assert list(r.presentation_counts.values()) == [1]
    assert r.outcome.kind == "result"
    assert r.outcome.text == "Kept 3 files: confirmation expired"


@needs_primed_replays()
async def test_guarded_fastmcp3_withdraws_a_cancelled_prompt() -> None:
    r = await run_scenario("replayed_cancel", guarded_fastmcp)
    assert list(r.presentation_counts.values()) == [1]
    assert [p.cancelled for p in r.presentations] == [True]
    assert r.answers == []
