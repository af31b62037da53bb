"""The re-asking server (``models/guarded_reask.py``): a server-side shim that lost an
answer asks the same question again under a new id. The world's ``reasks`` is proved by
models that must fail (the mcp 2.3.0 client, the guard keyed by id alone: P2, the second
prompt) and models that must pass (the guard resubmitting, failing once past its budget,
failing at once with ``on_reask="fail"``). Pins, full spaces and shortest counterexamples
are in ``pins.py``; this file checks what the counterexample and the guard's runs are."""

from __future__ import annotations

import pickle

import pins
import pytest

from fsm.worlds.sse import Bounds, Reask


def test_a_reask_is_its_tagged_tuple() -> None:
    typed = Reask(5, 1, 0, 1)
    assert typed == ("reask", 5, 1, 0, 1) and hash(typed) == hash(("reask", 5, 1, 0, 1))
    assert pickle.loads(pickle.dumps(typed)) == typed


def test_no_reasks_by_default() -> None:
    assert Bounds().reasks == 0


@pytest.mark.parametrize("name", ["mcp-sdk-2.3.0[reask] x2", "keyed-by-id[reask] x2"])
def test_the_counterexample_is_a_second_prompt_for_an_answered_question(name: str) -> None:
    assert pins.counterexample(name, "P2").names == [
        "server sends elicitation 0",
        "deliver 0",
        "deliver 1",
        "user answers 0",
        "answer POST 0",
        "server re-asks under a new id (0, 1)",
        "deliver 2",
    ]


def test_the_guard_resubmits_and_fails_once_past_its_budget() -> None:
    fired: set[str] = set()
    for name in ("guarded-reask[resubmit] x2", "guarded-reask[twice] x3"):
        _, report = pins.report(name)
        report.assert_properties()
        fired |= set(report.coverage.fired)
    assert "liveness: new -reuse-> answered" in fired  # the stored answer, no prompt
    assert "liveness: new -reask-> dead" in fired  # the second re-ask: one failure
    assert "transport: open -abort-> dead" in fired


def test_on_reask_fail_fails_without_resubmitting() -> None:
    _, report = pins.report("guarded-reask[fail] x2")
    report.assert_properties()
    assert "liveness: new -reask-> dead" in report.coverage.fired
    assert "liveness: new -reuse-> answered" not in report.coverage.fired
