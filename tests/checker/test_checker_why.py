"""Why a property is violated: a model's ``why`` hook, the checker's own words for a stuck
state and a loop, the state that violates (``at``), and the steps' notes
(``describe_step``), in the report's text and JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from checker_models import GraphModel, chain

from fsm.checker import Property, check


@dataclass
class Explained(GraphModel):
    """A graph model that says why and what each step does."""

    def why(self, name: str, states: Sequence[int], loop_start: int | None) -> str | None:
        return f"{name} breaks at s{states[-1]} after {len(states) - 1} steps"

    def describe_step(self, state: int, action: str, next_state: int) -> str:
        return f"did {action} from s{state}"


def test_a_models_why_and_notes_are_in_the_text_and_the_json() -> None:
    model = Explained(chain(3), [Property.always("small", lambda s: s < 3, "stays below 3")])
    result = check(model).result("small")
    assert (result.why, result.at) == ("small breaks at s3 after 3 steps", 3)
    assert result.path is not None
    assert [s.note for s in result.path.steps] == [f"did step {i} from s{i}" for i in range(3)]
    text = result.format_text()
    assert "    why: small breaks at s3 after 3 steps\n" in text
    assert "-> did step 2 from s2" in text
    as_json = check(model).to_json()["properties"]["small"]
    assert (as_json["why"], as_json["at"]) == ("small breaks at s3 after 3 steps", 3)
    assert as_json["counterexample"]["steps"][0]["note"] == "did step 0 from s0"


def test_without_the_hooks_a_stuck_state_and_a_loop_say_where() -> None:
    stuck = check(GraphModel(chain(2), [Property.deadlock()])).result("deadlock")
    assert (stuck.at, stuck.why) == (
        2,
        "no action is enabled in the state after step 2, not a terminal one",
    )
    edges = {**chain(3), 3: [("back", 1)]}
    loop = check(GraphModel(edges, [Property.terminates()])).result("L1")
    assert loop.path is not None and loop.path.loop_start == 1
    assert loop.at == 1
    assert loop.why == "steps 2-4 lead back to the state after step 1: they can repeat for ever"
    assert all(s.note == "" for s in loop.path.steps)
    assert "->" not in loop.format_text()


def test_an_invariant_says_nothing_without_the_hook_and_a_holding_property_nothing() -> None:
    report = check(GraphModel(chain(3), [Property.always("small", lambda s: s < 3)]))
    bad = report.result("small")
    assert (bad.why, bad.at) == (None, 3)
    assert "why:" not in bad.format_text()
    fine = check(GraphModel(chain(3), [Property.always("any", lambda s: True)])).result("any")
    assert (fine.why, fine.at) == (None, None)
    assert check(GraphModel(chain(3), [])).to_json()["properties"] == {}
