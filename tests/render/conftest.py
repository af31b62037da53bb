from __future__ import annotations

import builtins
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
for path in (REPO, Path(__file__).resolve().parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from fsm.render.graph import GraphEdge, GraphNode, StateGraph, Trace  # noqa: E402


@pytest.fixture
def without_pygraphviz(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test runs as if pygraphviz (the ``diagrams`` extra's engine) were not installed:
    importing it raises ``ImportError``."""
    real = builtins.__import__

    def fake(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "pygraphviz" or name.startswith("pygraphviz."):
            raise ImportError("No module named 'pygraphviz'")
        return real(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "pygraphviz", raising=False)
    monkeypatch.setattr(builtins, "__import__", fake)


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def lasso() -> Trace:
    """open -lose-> broken, then broken -> waiting -> resuming -> broken forever."""
    return Trace.of(
        [
            ("open", "lose", "broken"),
            ("broken", "schedule", "waiting"),
            ("waiting", "resume", "resuming"),
            ("resuming", "lose", "broken"),
        ],
        loop_start=1,
        title="resume loop",
    )


@pytest.fixture
def graph() -> StateGraph:
    nodes = (
        GraphNode("a", "open/new", group="open", initial=True),
        GraphNode("b", "open/presented", group="open"),
        GraphNode("c", "broken/presented", group="broken"),
        GraphNode("d", "dead/dead", group="dead", terminal=True),
        GraphNode("e", "open/presented twice", group="open", bad=True),
    )
    edges = (
        GraphEdge("a", "b", "present"),
        GraphEdge("b", "c", "lose"),
        GraphEdge("c", "b", "resume"),
        GraphEdge("c", "d", "give_up"),
        GraphEdge("b", "e", "replay"),
    )
    return StateGraph("toy", nodes, edges, doc="a toy explored graph")
