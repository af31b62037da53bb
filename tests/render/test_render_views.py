"""The product as a grid (DOT) and a flowchart (Mermaid); counterexample diagrams number
their steps as the checker's text trace does."""

from __future__ import annotations

import re

import pytest

from fsm.machines.resumption import TRANSPORT
from fsm.render import models as m
from fsm.render.graph import GraphEdge, GraphNode, StateGraph, Trace, TraceError
from fsm.render.grid import grid_dot
from fsm.render.mermaid import state_graph_mermaid
from fsm.render.registry import PRODUCERS


def test_grid_cells_list_the_moves_out(graph: StateGraph) -> None:
    rows = {"a": "new", "b": "presented", "c": "presented", "d": "dead", "e": "twice"}
    nodes = tuple(
        GraphNode(n.id, n.label, n.group, n.initial, n.terminal, n.bad, rows[n.id])
        for n in graph.nodes
    )
    grid = StateGraph("toy", nodes, graph.edges)
    text = grid_dot(grid, corner="row \\ column")
    assert text == grid_dot(grid, corner="row \\ column")  # deterministic
    cells = re.findall(r"<TD[^>]*>(.*?)</TD>", text)
    assert cells[:4] == ["row \\ column", "<B>open</B>", "<B>broken</B>", "<B>dead</B>"]
    # row "new": a (open) is the start and presents (same column: the row is named)
    assert cells[5] == '<B>start</B><BR ALIGN="LEFT"/>present &#8594; presented<BR ALIGN="LEFT"/>'
    # row "presented": b loses to c (same row: the column is named); c resumes, gives up
    assert "lose &#8594; broken" in cells[9] and "give_up &#8594; dead / dead" in cells[10]
    assert "unreachable" in cells[6] and text.count("<I>terminal</I>") == 1


def test_grid_refuses_nodes_without_a_place(graph: StateGraph) -> None:
    with pytest.raises(ValueError, match="nodes without a group and a row"):
        grid_dot(graph)


def test_state_graph_mermaid(graph: StateGraph) -> None:
    text = state_graph_mermaid(graph)
    assert text.startswith("---\ntitle: toy\u2236 a toy explored graph\n---\nflowchart TB\n")
    assert '    subgraph g0["open"]\n        n0("open/new")\n' in text
    assert '    start0((" ")) --> n0\n' in text
    arrows = re.findall(r"^    (n\d+) -->\|\"([^\"]*)\"\| (n\d+)$", text, re.M)
    ids = {f"n{i}": n.id for i, n in enumerate(graph.nodes)}
    assert [(ids[s], lbl, ids[d]) for s, lbl, d in arrows] == [
        (e.src, e.label, e.dst) for e in graph.edges
    ]
    assert "    class n3 terminal\n" in text and "    class n4 bad\n" in text


def test_trace_numbers_are_checked_and_drawn() -> None:
    steps = [("a", "x", "b"), ("b", "y", "c")]
    trace = Trace.of(steps, numbers=[2, 5])
    assert [trace.step_label(i, s[1]) for i, s in enumerate(steps)] == ["2. x", "5. y"]
    assert trace.last_number == 5 and Trace.of(steps).last_number == 2
    for bad in ([1], [3, 3], [0, 1]):
        with pytest.raises(TraceError, match="increasing step numbers"):
            Trace.of(steps, numbers=bad)


CEX = [name for name in PRODUCERS if name.startswith("cex-")]


def _source(diagram: str) -> tuple[str, str, str]:
    """The model file, model name and property a counterexample diagram shows."""
    for file, name in (
        ("seed_incident", "seed-incident"),
        ("mcp_sdk_2_3", "mcp-sdk-2.3.0"),
        ("mcp_sdk_1_x", "mcp-sdk-1.x"),
    ):
        rest = diagram.removeprefix(f"cex-{name}-")
        if rest != diagram and not rest.startswith("mrtr-"):
            props = m.model_named(file, name).expected_violations
            return file, name, next(p for p in props if p.lower() == rest)
    stem, prop = diagram.removeprefix("cex-").rsplit("-", 1)
    if stem.startswith("ext-tasks-0.2.2-"):
        variant = stem.removeprefix("ext-tasks-0.2.2-")
        return "ext_tasks_0_2_2", f"ext-tasks-0.2.2[{variant}]", prop.upper()
    variant = stem.removeprefix("mcp-sdk-2.3.0-mrtr-")
    return "mcp_sdk_2_3_mrtr", f"mcp-sdk-2.3.0-mrtr[{variant}]", prop.upper()


@pytest.mark.parametrize("name", CEX)
def test_counterexample_steps_carry_the_text_trace_numbers(name: str) -> None:
    """Every drawn step ``n. move`` is step n of the checker's trace, and the last one
    drawn is the trace's last step (the loop closes where the text says)."""
    file, model, prop = _source(name)
    path = dict(m.counterexamples(m.model_named(file, model)))[prop]
    drawn = re.findall(r'label="(\d+)\. ([^"(]+?)(?: \(loop\))?"', PRODUCERS[name]().dot)
    drawn = [(int(n), move) for n, move in drawn if move not in ("a step, numbered", "step")]
    assert drawn and drawn[-1][0] == len(path.steps)
    for number, move in drawn:
        assert str(path.steps[number - 1].action).startswith(move), (number, move)


def test_the_product_grid_has_every_reachable_configuration_once() -> None:
    model = m.model_named("guarded", "guarded[inclusive,silent,rpc,answers]")
    graph = m.product_grid(m.projected_graph(model, m.guard_view, "p"))
    diagram = PRODUCERS["guarded-product"]()
    assert diagram.mermaid is not None
    assert len(re.findall(r'^        n\d+\("', diagram.mermaid, re.M)) == len(graph.nodes)
    cells = len(graph.groups) * len(graph.rows)
    assert diagram.dot.count("unreachable") == cells - len(graph.nodes)
    assert graph.groups[: len(TRANSPORT.states)] == ("open", "waiting", "resuming", "done", "dead")
    assert all(isinstance(e, GraphEdge) for e in graph.edges)
