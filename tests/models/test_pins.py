"""Every shipped model held to its row of ``pins.py``: each model a family's files define
is pinned, its state space is exactly as pinned, a model that must pass holds every
property and reaches its family's witnesses (not vacuous), and a model that must fail
violates exactly what it declares, each shortest counterexample of the pinned length and
replaying to the violation."""

from __future__ import annotations

import pytest
from pins import FAMILIES, FAMILY_OF, PINS, report

from fsm.checker import replay, violated_at
from fsm.worlds.common import WorldBounds


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_model_is_pinned(family: str) -> None:
    found = FAMILIES[family].shipped.models()
    assert sorted(m.name for m in found) == sorted(FAMILIES[family].pins)


@pytest.mark.parametrize("name", sorted(PINS))
def test_state_space_is_pinned(name: str) -> None:
    _, checked = report(name)
    assert checked.complete
    assert (checked.states, checked.transitions) == PINS[name].space


@pytest.mark.parametrize("name", sorted(n for n, pin in PINS.items() if not pin.violates))
def test_what_must_pass_holds_every_property(name: str) -> None:
    model, checked = report(name)
    checked.assert_properties()
    family = FAMILY_OF[name]
    # every shipped model is a world's, whose bounds name the user (read, not probed: a
    # renamed field fails here rather than skipping the witnesses of an answering user)
    assert isinstance(model.bounds, WorldBounds), name
    answers = model.bounds.user == "answers"
    for witness in (*family.witnesses, *(family.answered if answers else ())):
        assert checked.result(witness).path is not None, witness  # not vacuous


@pytest.mark.parametrize("name", sorted(n for n, pin in PINS.items() if pin.violates))
def test_what_must_fail_violates_exactly_what_it_declares(name: str) -> None:
    model, checked = report(name)
    shortest = PINS[name].violates
    violated = {r.name for r in checked.results if r.verdict.value == "violated"}
    assert violated == set(shortest) == set(model.expected_violations)
    for prop, (steps, loop_start) in shortest.items():
        path = checked.assert_violated(prop)
        assert (len(path.steps), path.loop_start) == (steps, loop_start), prop
        states = replay(model, path.names)
        assert violated_at(model, prop, states, path.loop_start)
