"""Counterexamples of the shipped faulty clients say why: the monitor's own reason (the one
the audit and the kits report) with the step its fact began, the client's outputs at each
step, and what the client does each lap of a loop."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fsm import properties as P
from fsm.checker import PropertyResult, check, load_models
from fsm.checker.loader import builtin_model_file


def _result(file: str, prop: str, name: str | None = None) -> PropertyResult:
    models: list[Any] = load_models(builtin_model_file(file))
    model = next(m for m in models if name is None or m.name == name)
    result = check(model).result(prop)
    assert result.verdict.value == "violated" and result.path is not None
    return result


def _notes(result: PropertyResult) -> list[str]:
    assert result.path is not None
    return [s.note for s in result.path.steps]


def test_p7_names_the_cursor_used_and_the_newest_id_seen() -> None:
    result = _result("mcp_sdk_2_3", "P7")
    assert result.why == "post resumed from '0', newest seen is '1'; '1' seen at step 6"
    notes = _notes(result)
    assert notes[5] == "client: Present(0)"  # step 6 delivered event 1
    assert notes[-1] == "client: Resume(0)"  # the resume that breaks P7
    assert result.at == len(notes)
    # the monitor's words, as the audit and the kit report them
    facts = P.Facts()
    facts.observe(P.EventSeen("post", "1"))
    (violation,) = facts.check(P.Resumed("post", "0"))
    assert result.why is not None and result.why.startswith(violation.why + "; ")


def test_p2_names_the_key_and_the_step_it_was_first_presented() -> None:
    result = _result("seed_incident", "P2")
    assert result.why == "('s', 0) presented a second time; first presented at step 4"
    notes = _notes(result)
    assert notes[3] == notes[-1] == "client: Present(0)"
    assert "client: Present(0)" not in notes[4:-1]


@pytest.mark.parametrize(
    ("prop", "why"),
    [
        ("P1", "('s', 0) presented after the client knew it dead; known dead at step 6"),
        ("P3", "post resumed after a terminal rejection; resumes forbidden at step 6"),
        (
            "P4",
            "answer for ('s', 0) submitted that the user did not give for it; the client"
            ' submitted {"confirm": true}, the user answered {"action": "accept"}',
        ),
        ("P7", "post resumed from '0', newest seen is '1'; '1' seen at step 3"),
    ],
)
def test_every_violation_of_the_seed_says_why(prop: str, why: str) -> None:
    assert _result("seed_incident", prop).why == why


def test_p5_names_the_interaction_and_the_step_it_first_ended() -> None:
    result = _result("standalone_get", "P5", "one name for every fresh GET")
    assert result.why == "get ended twice; first ended at step 2"


def test_the_seed_loop_says_what_the_client_does_each_lap() -> None:
    result = _result("seed_incident", "L1")
    assert result.path is not None and result.at == result.path.loop_start == 5
    assert result.why == (
        "steps 6-9 return the system to where step 5 left it (the monitor aside), so they"
        " repeat for ever; each lap the client does Resume(1), Present(0),"
        " Submit(0, (('confirm', True),))"
    )


def test_a_hang_names_the_interaction_that_never_ended() -> None:
    result = _result("mcp_sdk_1_x", "P5-quiescent")
    assert result.why == "post never ended (nothing more can happen)"


def test_the_mrtr_world_says_which_late_answer_a_retry_carried() -> None:
    result = _result("mcp_sdk_2_3_mrtr", "P6", "mcp-sdk-2.3.0-mrtr[reject-expired]")
    assert result.why == (
        "a retry carried the answer to question 0, given after the question's client-side"
        " age passed"
    )
    assert _notes(result)[-1].startswith("client: Retry(0, ")


def test_fsm_check_json_carries_the_why_and_the_client_outputs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from fsm.checker.cli import main as check_main

    assert check_main(["--builtin", "mcp_sdk_2_3", "--json", "-q"]) == 0  # violates as declared
    record = json.loads(capsys.readouterr().out)
    p7 = record["properties"]["P7"]
    assert p7["why"] == "post resumed from '0', newest seen is '1'; '1' seen at step 6"
    assert p7["at"] == len(p7["counterexample"]["steps"]) == 8
    assert p7["counterexample"]["steps"][-1]["note"] == "client: Resume(0)"
    assert record["properties"]["P1"]["why"] is None
