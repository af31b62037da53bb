"""The shipped models: pinned state spaces, expected verdicts, shortest counterexamples.

Like TLC's and Stateright's own tests, the state and transition counts of every shipped
model at its default bounds are pinned: a change to the guard, the world or the monitor
that changes what is explored shows up here first. A model with several requests declares
their ids interchangeable: its counts are of representatives (one state per orbit; a move
per interchangeable id, so sends of two unsent ids are two edges to one representative),
and ``test_symmetry.py`` pins its full space.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from shipped import Shipped, pin_tests

from fsm import trace
from fsm.audit import audit_text
from fsm.checker import Path as CheckerPath
from fsm.checker import replay
from fsm.checker.cli import main as check_main
from fsm.worlds.sse import OPENING, World

ROOT = Path(__file__).resolve().parents[2]
MODEL_FILES = (
    "guarded.py",
    "guarded_concurrent.py",
    "standalone_get.py",
    "guarded_replay.py",
    "seed_incident.py",
    "mcp_sdk_2_3.py",
    "mcp_sdk_1_x.py",
    "guarded_reask.py",
)

PINNED: dict[str, tuple[int, int]] = {
    "guarded[after,silent,202,answers]": (492, 1237),
    "guarded[after,silent,202,answers,reaper]": (1578, 2729),
    "guarded[after,silent,202,never]": (141, 313),
    "guarded[after,silent,404,answers]": (492, 1123),
    "guarded[after,silent,404,never]": (141, 313),
    "guarded[after,silent,rpc,answers]": (492, 1123),
    "guarded[after,silent,rpc,never]": (141, 313),
    "guarded[after,silent,500rpc,answers]": (492, 1123),
    "guarded[after,silent,500rpc,never]": (141, 313),
    "guarded[after,cancel,202,answers]": (708, 1759),
    "guarded[after,cancel,202,answers,reaper]": (2328, 3947),
    "guarded[after,cancel,202,never]": (177, 382),
    "guarded[after,cancel,404,answers]": (708, 1531),
    "guarded[after,cancel,404,never]": (177, 382),
    "guarded[after,cancel,rpc,answers]": (708, 1645),
    "guarded[after,cancel,rpc,never]": (177, 382),
    "guarded[after,cancel,500rpc,answers]": (708, 1645),
    "guarded[after,cancel,500rpc,never]": (177, 382),
    "guarded[inclusive,silent,202,answers]": (600, 1557),
    "guarded[inclusive,silent,202,answers,reaper]": (1692, 3157),
    "guarded[inclusive,silent,202,never]": (177, 399),
    "guarded[inclusive,silent,404,answers]": (582, 1407),
    "guarded[inclusive,silent,404,never]": (177, 399),
    "guarded[inclusive,silent,rpc,answers]": (582, 1407),
    "guarded[inclusive,silent,rpc,never]": (177, 399),
    "guarded[inclusive,silent,500rpc,answers]": (582, 1407),
    "guarded[inclusive,silent,500rpc,never]": (177, 399),
    "guarded[inclusive,cancel,202,answers]": (870, 2214),
    "guarded[inclusive,cancel,202,answers,reaper]": (2496, 4564),
    "guarded[inclusive,cancel,202,never]": (222, 486),
    "guarded[inclusive,cancel,404,answers]": (834, 1914),
    "guarded[inclusive,cancel,404,never]": (222, 486),
    "guarded[inclusive,cancel,rpc,answers]": (852, 2064),
    "guarded[inclusive,cancel,rpc,never]": (222, 486),
    "guarded[inclusive,cancel,500rpc,answers]": (852, 2064),
    "guarded[inclusive,cancel,500rpc,never]": (222, 486),
    "guarded[after,silent,202,answers] x2": (5816, 19753),
    "guarded[after,silent,rpc,answers] x2": (6164, 17282),
    "guarded[after,cancel,202,answers] x2": (19460, 60759),
    "guarded[after,cancel,rpc,answers] x2": (20036, 54495),
    "guarded[inclusive,silent,202,answers] x2": (7212, 25085),
    "guarded[inclusive,silent,rpc,answers] x2": (7158, 21395),
    "guarded[inclusive,cancel,202,answers] x2": (24144, 76574),
    "guarded[inclusive,cancel,rpc,answers] x2": (23784, 67757),
    "guarded[after,silent,rpc,answers] x3": (66684, 219054),
    "guarded[inclusive,silent,rpc,answers] x3": (75384, 264150),
    "guarded[after,silent,202,answers] get3": (3936, 13340),
    "guarded[after,silent,202,answers,reaper] get3": (12624, 25276),
    "guarded[after,silent,202,never] get3": (1128, 3491),
    "one name for every fresh GET": (468, 1344),
    "guarded-replay[silent,202,answers]": (1422, 4347),
    "guarded-replay[silent,202,never]": (345, 901),
    "guarded-replay[silent,rpc,answers]": (1332, 3831),
    "guarded-replay[silent,rpc,never]": (345, 901),
    "guarded-replay[cancel,202,answers]": (3144, 9270),
    "guarded-replay[cancel,202,never]": (632, 1578),
    "guarded-replay[cancel,rpc,answers]": (3054, 8754),
    "guarded-replay[cancel,rpc,never]": (632, 1578),
    "guarded-replay[history-full]": (462, 857),
    "guarded-replay[rewinds]": (3439, 9636),
    "unverified-cursor": (5314, 15863),
    "window-only": (1126, 3014),
    "seed-incident": (168, 303),
    "mcp-sdk-2.3.0": (501, 1116),
    "mcp-sdk-1.x": (1653, 3248),
    "mcp-sdk-2.3.0[reask] x2": (1712, 4702),
    "guarded-reask[resubmit] x2": (2984, 8772),
    "guarded-reask[twice] x3": (12370, 44872),
    "guarded-reask[fail] x2": (1262, 3739),
    "keyed-by-id[reask] x2": (1398, 4037),
}

# (steps, loop_start) of each expected shortest counterexample.
SHORTEST = {
    "seed-incident": {
        "P1": (8, None),
        "P2": (8, None),
        "P3": (6, None),
        "P4": (4, None),
        "P7": (5, None),
        # shortest over the system's states (the monitor projected out): the loop starts
        # where the client first re-presents, as SPIN finds it (5 + 4)
        "L1": (9, 5),
    },
    "mcp-sdk-2.3.0": {"P2": (10, None), "P7": (8, None)},
    # the duplicate presented after the first answer; the stale cursor; a POST stream
    # cut before its first event id: not resumed, no outcome (a hang)
    "mcp-sdk-1.x": {"P2": (11, None), "P7": (8, None), "P5-quiescent": (4, None)},
    # a fresh GET tracked under the name of the one that ended: open, cut, open, cut
    "one name for every fresh GET": {"P5": (4, None)},
    "window-only": {"P7": (9, None), "L1": (9, 4)},
    # the answered question asked again under a new id, presented again
    "mcp-sdk-2.3.0[reask] x2": {"P2": (7, None)},
    "keyed-by-id[reask] x2": {"P2": (7, None)},
    "unverified-cursor": {"P7": (7, None)},
}

SHIPPED = Shipped(MODEL_FILES)
_all_models = SHIPPED.models
_report = SHIPPED.report


test_every_shipped_model_is_pinned, test_state_space_is_pinned = pin_tests(
    SHIPPED, PINNED, _all_models
)


@pytest.mark.parametrize("name", sorted(n for n in PINNED if n.startswith("guarded")))
def test_the_guard_satisfies_every_property(name: str) -> None:
    _, report = _report(name)
    report.assert_properties()
    assert report.result("presented").path is not None  # not vacuous


@pytest.mark.parametrize("name", sorted(SHORTEST))
def test_faulty_clients_violate_exactly_what_they_should(name: str) -> None:
    SHIPPED.assert_violates_exactly(name, SHORTEST[name])


def test_the_seed_loop_is_the_incident() -> None:
    _, report = _report("seed-incident")
    loop = report.assert_violated("L1")
    assert loop.loop_start is not None
    cycle = [str(s.action) for s in loop.steps[loop.loop_start :]]
    # present -> answer -> rejected -> re-resume -> replayed -> present ... (a rotation)
    assert sorted(cycle) == ["answer POST 0", "deliver 1", "resume answered", "user answers 0"]


def test_guard_coverage_reaches_the_stale_rule_and_reports_dead_declarations() -> None:
    fired: set[str] = set()
    declared: list[str] = []
    for name in PINNED:
        if name.startswith("guarded") and " x" not in name:
            model, report = _report(name)
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
    faulty, report = _report("one name for every fresh GET")
    text = _event_log(faulty, report.assert_violated("P5"))
    finding = audit_text(text, budgets=faulty.budgets).finding
    assert finding is not None and (finding.name, finding.why) == ("P5", "get ended twice")
    assert finding.line == len(text.splitlines())  # the path's last record, as in the checker

    model, report = _report("guarded[after,silent,202,answers] get3")
    for witness in ("get-reopened", "completed"):
        path = report.result(witness).path
        assert path is not None
        text = _event_log(model, path)
        ended = [r for r in map(json.loads, text.splitlines()) if r["kind"] == "ended"]
        assert audit_text(text, budgets=model.budgets, complete=witness == "completed").ok
        if witness == "get-reopened":
            assert [r["interaction"] for r in ended] == ["get", "get/2", "get/3"]
