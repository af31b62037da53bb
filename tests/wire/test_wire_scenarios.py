"""Every wire scenario (:data:`fsm.wire.SCENARIOS`) against the unguarded mcp 2.x
``ClientSession`` (its verdict names what it breaks, as measured in ``tests/e2e``) and
against the guarded one (it passes): each verdict is proved both ways."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

from fsm.wire import SCENARIOS, guarded_client, plain_client, run, run_sync
from fsm.wire.sdk import MCP_MAJOR

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]

measured_on_2x = pytest.mark.skipif(MCP_MAJOR != 2, reason="the plain client's faults are 2.x's")
"""What the plain client breaks was measured on mcp 2.x; the guarded client (either
line) passes everywhere."""

PLAIN_BREAKS = {
    "seed": {"P2", "P7"},
    "replayed_cancel": {"P1", "P2", "P7"},
    "replay_everything": {"P2"},
    "answer_conn_error": set(),
    "answer_rejected": {"P3"},
    "half_open": set(),
    "session_expired": {"P3"},
    "happy": set(),
}
if MCP_MAJOR >= 2:  # the MRTR scenarios need protocol 2026-07-28 (tests/wire/test_mrtr_scenarios)
    PLAIN_BREAKS |= {"mrtr_expiry": {"P6"}, "mrtr_reask": {"P2"}, "mrtr_restart": set()}
"""What the mcp 2.3.0 plain client breaks in each scenario (``tests/e2e/test_plain_client``
and ``tests/e2e/test_mrtr_e2e`` measure the wire behind each)."""


def test_every_scenario_is_listed_here_and_documented() -> None:
    assert set(SCENARIOS) == set(PLAIN_BREAKS)
    for name, scenario in SCENARIOS.items():
        assert scenario.name == name and scenario.fault and scenario.step.__doc__
        assert PLAIN_BREAKS[name] <= set(scenario.exercises)


@measured_on_2x
@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_the_plain_client_breaks_what_it_is_measured_to_break(name: str) -> None:
    verdict = await run(name, plain_client)
    assert set(verdict.broken) == PLAIN_BREAKS[name], verdict.summary()
    assert verdict.passed == (not PLAIN_BREAKS[name])


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_the_guarded_client_passes(name: str) -> None:
    verdict = await run(name, guarded_client)
    assert verdict.passed, verdict.summary()
    assert verdict.presentations and all(n == 1 for n in verdict.presentations.values())
    assert verdict.outcome.kind != "pending"


@measured_on_2x
async def test_the_verdict_counts_what_happened() -> None:
    """The raw counts beside the properties: the seed incident's two presentations of one
    key and its two late answers, each accepted (202), and how the call ended."""
    verdict = await run(SCENARIOS["seed"], plain_client)
    assert list(verdict.presentations.values()) == [2]
    assert verdict.answer_statuses == (202, 202)
    assert verdict.outcome.code == -32000
    assert "P2 (each interactive request key is presented at most once)" in verdict.summary()


@measured_on_2x
async def test_a_retryable_answer_failure_is_told_by_the_outcome() -> None:
    """``answer_conn_error`` breaks no property of the plain client: it gives up (the
    call fails) where the guarded one resubmits the same answer and completes."""
    plain = await run("answer_conn_error", plain_client)
    guarded = await run("answer_conn_error", guarded_client)
    assert plain.outcome.kind == "error" and plain.answer_statuses == ("connection:close",)
    assert guarded.outcome.kind == "result" and not guarded.outcome.is_error
    assert guarded.answer_statuses == ("connection:close", 202)


def test_an_unknown_scenario_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        run_sync("no_such_scenario", plain_client)


@measured_on_2x
def test_run_sync_runs_a_scenario_in_a_loop_of_its_own() -> None:
    verdict = run_sync("happy", plain_client)
    assert verdict.passed and verdict.outcome.text == "Deleted 3 files: a.txt, b.txt, c.txt"
