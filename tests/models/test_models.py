"""The shipped SSE-era models (their pins, verdicts and shortest counterexamples are in
``pins.py``, held by ``test_pins.py``): the seed loop is the incident, the guard's
coverage, ``fsm check`` on models that fail as declared or claim too little, and the
audit judging the standalone GET's paths as the checker does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pins
import pytest

from fsm import trace
from fsm.audit import audit_text
from fsm.checker import Path as CheckerPath
from fsm.checker import replay
from fsm.checker.cli import main as check_main
from fsm.worlds.sse import OPENING, World

ROOT = Path(__file__).resolve().parents[2]


def test_the_seed_loop_is_the_incident() -> None:
    _, report = pins.report("seed-incident")
    loop = report.assert_violated("L1")
    assert loop.loop_start is not None
    cycle = [str(s.action) for s in loop.steps[loop.loop_start :]]
    # present -> answer -> rejected -> re-resume -> replayed -> present ... (a rotation)
    assert sorted(cycle) == ["answer POST 0", "deliver 1", "resume answered", "user answers 0"]


def test_guard_coverage_reaches_the_stale_rule_and_reports_dead_declarations() -> None:
    fired: set[str] = set()
    declared: list[str] = []
    for name in pins.FAMILIES["sse"].pins:
        if name.startswith("guarded") and " x" not in name:
            model, report = pins.report(name)
            fired |= set(report.coverage.fired)
            declared = list(model.declared_transitions())
    assert "liveness: presented -stale-> dead" in fired
    assert "liveness: submitting -reject-> dead" in fired
    assert "transport: open -abort-> dead" in fired
    never = [d for d in declared if d not in fired]
    # Reachable only through replay batches or origin responses on a broken stream,
    # which the world does not generate: reported, not hidden.
    assert "liveness: new -cancel-> cancelled" in never
    # An application abandoning a stream (its reader gone, an event over its bound) is
    # not a move of the world either.
    assert "transport: open -abandon-> dead" in never
    assert len(declared) == 54


def test_check_cli_passes_models_that_fail_as_expected(capsys: pytest.CaptureFixture[str]) -> None:
    code = check_main(
        [
            "--brief",
            "-q",
            str(ROOT / "models" / "seed_incident.py"),
            str(ROOT / "models" / "mcp_sdk_2_3.py"),
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert len(lines) == 2, lines  # --brief --quiet: one line per model that passes
    assert lines[0].startswith("seed-incident: states=168 ")
    assert lines[0].endswith("violates L1, P1, P2, P3, P4, P7 as declared, the other 6 hold")


def test_check_cli_fails_a_faulty_model_that_claims_too_little(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model_file = tmp_path / "liar.py"
    model_file.write_text(
        "from models.seed_incident import MODEL\nMODEL.expected_violations = ('P1',)\n"
    )
    assert check_main(["-q", str(model_file)]) == 1
    assert "NOT as expected" in capsys.readouterr().out
    assert check_main(["--brief", "-q", str(model_file)]) == 1  # brief: the full failures
    out = capsys.readouterr().out
    assert "✗ P2 violated" in out and "NOT as expected (expected ['P1'])" in out


def _event_log(model: World[Any], path: CheckerPath) -> str:
    """The path's observations (the opening, then each edge's) as a JSON Lines log."""
    states = replay(model, path.names)
    observations = list(OPENING)
    for state, name in zip(states, path.names, strict=False):
        (move,) = {m for m in model.actions(state) if str(m) == name}
        observations += model.observations(state, move)
    return trace.dumps((o, 0.0) for o in observations)


def test_the_audit_judges_the_standalone_get_paths_as_the_checker_does() -> None:
    faulty, report = pins.report("one name for every fresh GET")
    text = _event_log(faulty, report.assert_violated("P5"))
    finding = audit_text(text, budgets=faulty.budgets).finding
    assert finding is not None and (finding.name, finding.why) == ("P5", "get ended twice")
    assert finding.line == len(text.splitlines())  # the path's last record, as in the checker

    model, report = pins.report("guarded[after,silent,202,answers] get3")
    for witness in ("get-reopened", "completed"):
        path = report.result(witness).path
        assert path is not None
        text = _event_log(model, path)
        ended = [r for r in map(json.loads, text.splitlines()) if r["kind"] == "ended"]
        assert audit_text(text, budgets=model.budgets, complete=witness == "completed").ok
        if witness == "get-reopened":
            assert [r["interaction"] for r in ended] == ["get", "get/2", "get/3"]
