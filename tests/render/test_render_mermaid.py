"""Mermaid output: every declared transition appears, traces are numbered."""

from __future__ import annotations

import re

import pytest

from fsm.machines.resumption import LIVENESS, TRANSPORT
from fsm.machines.spec import MachineSpec
from fsm.render.graph import Trace
from fsm.render.mermaid import mermaid

_ARROW = re.compile(r"^\s+(\S+) --> (\S+)(?: : (.*))?$")


def _edges(text: str) -> list[tuple[str, str, str]]:
    return [(m[1], m[2], m[3] or "") for line in text.splitlines() if (m := _ARROW.match(line))]


@pytest.mark.parametrize("spec", [TRANSPORT, LIVENESS], ids=lambda s: s.name)
def test_every_declared_transition_is_an_edge(spec: MachineSpec) -> None:
    text = mermaid(spec)
    assert text.startswith("---\ntitle: ") and "stateDiagram-v2\n" in text
    edges = {(s, d, label.split(" [")[0]) for s, d, label in _edges(text)}
    assert {(t.source, t.dest, t.trigger) for t in spec.transitions} <= edges
    assert ("[*]", spec.initial, "") in {(s, d, lbl) for s, d, lbl in _edges(text)}
    for state in spec.terminal:
        assert (state, "[*]", "") in _edges(text)


def test_deterministic() -> None:
    assert mermaid(LIVENESS) == mermaid(LIVENESS)


def test_trace_labels_are_numbered_and_the_loop_noted(lasso: Trace) -> None:
    text = mermaid(TRANSPORT, trace=lasso)
    labels = {(s, d): lbl for s, d, lbl in _edges(text)}
    assert labels[("open", "broken")] == "1. lose"
    assert labels[("broken", "waiting")] == "2. schedule (loop)"
    assert labels[("waiting", "resuming")] == "3. resume (loop)"
    assert labels[("resuming", "broken")] == "4. lose (loop)"
    assert "note right of broken : loop, steps 2 to 4 repeat forever" in text
    assert "class open,broken,waiting,resuming onpath" in text
