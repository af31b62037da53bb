"""The official conformance suite, client mode: the guarded mcp 2.x session
(:func:`fsm.adapters.mcp2.guarded_session`) against the suite's test servers, beside the
plain mcp 2.x ``ClientSession``, through the same client program (``client.py``). The
guard must cost no conformance: the two results are identical check by check.

The scenarios: every client scenario of 0.1.16 but the ``auth/*`` ones (the adapters add
no authorization of their own). 0.1.16 has no client scenario of the MRTR era.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from support.conformance_suite import Results, differences, installed, run_client_scenario

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.anyio,
    pytest.mark.timeout(120),
    pytest.mark.skipif(not installed(), reason="make conformance installs the suite"),
]

SCENARIOS = ("initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry")
CLIENT = Path(__file__).with_name("client.py")


async def test_the_guarded_session_conforms_as_the_plain_one_does() -> None:
    """Each scenario with the plain and the guarded session, all at once: identical
    results, and the plain session's checks all pass (what the guard must keep)."""
    runs: dict[str, Results] = {"plain": {}, "guarded": {}}

    async def run(mode: str, scenario: str) -> None:
        flag = " --guarded" if mode == "guarded" else ""
        command = f"{sys.executable} {CLIENT}{flag}"
        runs[mode].update(await run_client_scenario(command, scenario, timeout_s=90))

    async with anyio.create_task_group() as tg:
        for scenario in SCENARIOS:
            for mode in runs:
                tg.start_soon(run, mode, scenario)

    assert sorted(runs["plain"]) == sorted(SCENARIOS)
    statuses = {status for rows in runs["plain"].values() for _, status in rows}
    assert "FAILURE" not in statuses
    assert differences(runs["plain"], runs["guarded"]) == []
