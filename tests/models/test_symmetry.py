"""Symmetry reduction on the shipped worlds, proved on their full spaces.

For every shipped model with more than one request (up to 3), the world's declared
symmetry (request ids renumbered in send order, across the environment, the guard's
snapshot and the monitor) is audited state by state against the full space, the verdicts
of both explorations must agree, and both state counts are pinned. Faulty clients with
several requests show that counterexamples found among representatives are concrete paths
that replay on the unreduced model and are as short as the full space's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from pins import PINS
from shipped import ROOT, Shipped

from fsm.checker import Report, check, replay, verify_symmetry, violated_at
from fsm.checker.model import model_name
from fsm.worlds.sse import World
from models.mcp_sdk_2_3 import MODEL as SDK
from models.mcp_sdk_2_3 import SdkPolicy
from models.seed_incident import MODEL as SEED
from models.seed_incident import NaivePolicy

# the timeout is a hang guard: a full-space audit of 451k states took 177 s with three
# workers on two cores, and a slower machine must not fail it
pytestmark = [pytest.mark.heavy(minutes=4), pytest.mark.timeout(900)]

FULL = {name: pin.full for name, pin in PINS.items() if pin.full is not None}
"""Full-space (states, transitions) of every shipped model that declares a symmetry."""


SHIPPED = Shipped(tuple(f.name for f in sorted((ROOT / "models").glob("*.py"))))
"""Every model ``make demo`` checks."""


def _shipped() -> dict[str, Any]:
    return {model_name(m): m for m in SHIPPED.models()}


def _verdicts(report: Report) -> dict[str, str]:
    return {r.name: r.verdict.value for r in report.results}


def test_every_model_with_a_symmetry_is_audited() -> None:
    declared = {
        name for name, m in _shipped().items() if getattr(m, "symmetry", lambda: None)() is not None
    }
    assert declared == set(FULL)
    assert all(" x" in name for name in declared)  # one request: nothing to permute


@pytest.fixture(scope="module")
def unaudited() -> Iterator[dict[str, Any]]:
    """The shipped models, loaded once for the module and taken out as each is audited.

    Loaded once, the guarded models share one policy, so an audit reuses the decisions of
    those before it (the two replay modes' models differ only after a resume: most of the
    inclusive one's decisions are the after one's); taken out, a model's interning tables
    go with its test. The shared policies forget their decisions when the module is done,
    not held to the worker's end."""
    models = _shipped()
    policies = {id(m.policy): m.policy for m in models.values() if hasattr(m, "policy")}
    yield models
    models.clear()
    for policy in policies.values():
        forget = getattr(policy, "forget", None)
        if forget is not None:
            forget()


@pytest.mark.parametrize("name", sorted(FULL))
def test_the_declared_symmetry_is_sound_on_the_full_space(
    name: str, unaudited: dict[str, Any]
) -> None:
    audit = verify_symmetry(unaudited.pop(name))
    assert audit.ok, audit.problems
    assert audit.reduced is not None
    assert _verdicts(audit.reduced) == _verdicts(audit.full)
    assert (audit.full.states, audit.full.transitions) == FULL[name]
    assert (audit.reduced.states, audit.reduced.transitions) == (
        PINS[name].states,
        PINS[name].transitions,
    )
    assert audit.reduced.represented == audit.full.states
    assert audit.full.states > audit.reduced.states


FAULTY = {
    "seed-incident x2": (NaivePolicy, replace(SEED.bounds, requests=2)),
    "seed-incident x3": (NaivePolicy, replace(SEED.bounds, requests=3, cuts=0)),
    "mcp-sdk-2.3.0 x2": (SdkPolicy, replace(SDK.bounds, requests=2)),
}
"""The faulty clients' models with more requests (policy and bounds, by name): violations
to rebuild in concrete ids. With three requests the seed's client runs without cuts: it
violates the properties it violates with its cut, and the permutations of three ids are
what the instance is for. Each test builds its world: a checked world keeps its interned
states as long as it lives, and a test's parameters live as long as the session."""

SEED_VIOLATED = ("L1", "P1", "P2", "P3", "P4", "P5-quiescent", "P7")
FAULTY_PINS = {
    "seed-incident x2": ((4221, 8433), SEED_VIOLATED),
    "seed-incident x3": ((18210, 109205), SEED_VIOLATED),
    "mcp-sdk-2.3.0 x2": ((6684, 13344), ("P2", "P6", "P7")),
}
"""Each faulty model's (reduced, full) state counts and the properties it violates."""


@pytest.mark.parametrize("name", FAULTY)
def test_counterexamples_among_representatives_replay_on_the_full_model(name: str) -> None:
    policy, bounds = FAULTY[name]
    model = World(policy(), bounds, name=name)
    reduced, full = check(model), check(model, symmetry=False)
    assert reduced.symmetry and reduced.states < full.states == reduced.represented
    assert _verdicts(reduced) == _verdicts(full)
    violated = [r for r in reduced.results if r.verdict.value == "violated"]
    counts, names = FAULTY_PINS[name]
    assert (reduced.states, full.states) == counts
    assert sorted(r.name for r in violated) == list(names)
    for result in violated:
        path = result.path
        assert path is not None
        states = replay(model, path.names, init=path.init_index)  # the unreduced model
        assert states == list(path.states)
        assert violated_at(model, result.name, states, path.loop_start), result.name
        shortest = full.counterexample(result.name)
        assert shortest is not None
        if path.loop_start is None:  # a lasso may go round its loop more than once
            assert len(path) == len(shortest), result.name
