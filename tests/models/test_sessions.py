"""A second session after the first is gone: request ids restart, keys do not collide."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fsm.checker import Checker, Report, Verdict, load_models, replay, violated_at
from fsm.checker.model import model_name

ROOT = Path(__file__).resolve().parents[2]
FILE = str(ROOT / "tests" / "models" / "two_sessions.py")

PINNED: dict[str, tuple[int, int]] = {
    "guarded[after,silent,202,answers,reaper] sessions=2": (51412, 85225),
    "seed-incident sessions=2": (1346, 2671),
    "mcp-sdk-2.3.0 sessions=2": (15804, 30384),
}

_RUNS: dict[str, tuple[Checker[Any, Any], Report]] = {}


def _run(name: str) -> tuple[Checker[Any, Any], Report]:
    if not _RUNS:
        for model in load_models(FILE):
            checker = Checker(model)
            _RUNS[model_name(model)] = (checker, checker.run())
    return _RUNS[name]


@pytest.mark.parametrize("name", sorted(PINNED))
def test_two_session_worlds_are_pinned_and_judged_as_declared(name: str) -> None:
    checker, report = _run(name)
    assert report.complete and (report.states, report.transitions) == PINNED[name]
    expected = set(getattr(checker.model, "expected_violations", ()))
    violated = {r.name for r in report.results if r.verdict is Verdict.VIOLATED}
    assert violated == expected
    assert all(r.verdict.ok for r in report.results if r.name not in expected)
    for prop in sorted(violated):
        path = report.assert_violated(prop)
        states = replay(checker.model, path.names, init=path.init_index)
        assert violated_at(checker.model, prop, states, path.loop_start)


def test_the_guard_presents_the_same_id_again_in_the_new_session() -> None:
    checker, _ = _run("guarded[after,silent,202,answers,reaper] sessions=2")
    both = [s for s in checker.states if {("s", 0), ("s2", 0)} <= s.monitor.presented]
    assert both, "the second session's request 0 was never presented"
    assert any(s.env.session == 1 and s.env.ended and not s.env.reaped for s in checker.states)
