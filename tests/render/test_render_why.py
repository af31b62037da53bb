"""Counterexample diagrams mark the state that violates and say why under their title: the
stuck state of a hang, the loop start of a lasso, the last state of a broken invariant."""

from __future__ import annotations

import re

import pytest

from fsm.render import models as m
from fsm.render.graph import Trace, TraceError
from fsm.render.registry import PRODUCERS
from fsm.render.stategraph import state_graph_dot


def _marked(dot: str) -> list[str]:
    """The labels of the nodes drawn as violating, and the xlabel each says."""
    return re.findall(r'\[label="([^"]*)"[^\]]*xlabel="((?:loop start: )?violates here)"', dot)


@pytest.mark.parametrize(
    ("diagram", "node", "xlabel", "why"),
    [
        (
            "cex-mcp-sdk-1.x-p5-quiescent",
            "server dead\\ndisconnected",
            "violates here",
            "why: post never ended (nothing more can happen)",
        ),
        (
            "cex-seed-incident-l1",
            "server dead\\nconnected\\nanswer in flight",
            "loop start: violates here",
            "why: steps 6-9 return the system to where step 5 left it",
        ),
        (
            "cex-mcp-sdk-2.3.0-p7",
            "server pending\\nresuming\\nprompt shown",
            "violates here",
            "why: post resumed from '0', newest seen is '1'; '1' seen at step 6",
        ),
    ],
)
def test_a_counterexample_marks_its_violating_state_and_says_why(
    diagram: str, node: str, xlabel: str, why: str
) -> None:
    dot = PRODUCERS[diagram]().dot
    assert _marked(dot) == [(node, xlabel)]
    assert why in dot
    assert '"legend.' in dot and 'label="violates here", color=' in dot


def test_the_marked_state_is_the_results_state() -> None:
    model = m.model_named("mcp_sdk_1_x", "mcp-sdk-1.x")
    result = next(r for r in m.violations(model) if r.name == "P5-quiescent")
    assert result.path is not None and result.at == len(result.path)
    trace = m.counterexample_trace(result, m.client_view, "hang")
    assert trace.violates == m.client_view(result.path.states[-1])[1]
    assert trace.why == result.why


def test_a_trace_without_a_violating_state_marks_none() -> None:
    trace = Trace.of([("a", "go", "b")])
    graph_dot = state_graph_dot(m.around(_graph(), trace), trace=trace)
    assert _marked(graph_dot) == [] and "why:" not in graph_dot


def test_a_violating_state_off_the_trace_is_refused() -> None:
    with pytest.raises(TraceError, match="the violating state 'z' is not on the trace"):
        Trace.of([("a", "go", "b")], violates="z")


def _graph() -> m.StateGraph:
    from fsm.render.graph import GraphEdge, GraphNode

    return m.StateGraph("g", (GraphNode("a"), GraphNode("b")), (GraphEdge("a", "b", "go"),))
