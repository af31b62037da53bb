"""DOT output: determinism, completeness against the declarations, trace highlighting."""

from __future__ import annotations

import pytest
from render_dotparse import Parsed, parse

from fsm.machines.resumption import LIVENESS, PRODUCT, TRANSPORT
from fsm.machines.spec import MachineSpec
from fsm.render import _dot
from fsm.render.dot import machine_dot, product_dot, state_graph_dot, trace_dot
from fsm.render.graph import GraphEdge, GraphNode, StateGraph, Trace, TraceError
from fsm.render.machine import node_id
from fsm.render.registry import PRODUCERS


def test_every_producer_is_deterministic() -> None:
    for name, produce in PRODUCERS.items():
        first, second = produce(), produce()
        assert first == second, name
        assert "\r" not in first.dot


def test_trace_render_is_deterministic(lasso: Trace, graph: StateGraph) -> None:
    assert trace_dot(TRANSPORT, lasso) == trace_dot(TRANSPORT, lasso)
    steps = Trace.of([("a", "present", "b"), ("b", "lose", "c"), ("c", "resume", "b")], 1)
    assert trace_dot(graph, steps) == trace_dot(graph, steps)


def _drawn(parsed: Parsed, spec: MachineSpec, source: str, trigger: str, dest: str) -> bool:
    """Some edge into ``dest`` carries ``trigger`` and leaves ``source`` or a box holding it."""
    src, dst = node_id(spec, source), node_id(spec, dest)
    for e in parsed.edges:
        if e.dst != dst or trigger not in e.label.split("\n"):
            continue
        box = e.attrs.get("ltail")
        if (box is None and e.src == src) or (box is not None and src in parsed.clusters[box]):
            return True
    return False


@pytest.mark.parametrize("spec", [TRANSPORT, LIVENESS], ids=lambda s: s.name)
def test_every_declared_transition_is_an_edge(spec: MachineSpec) -> None:
    parsed = parse(machine_dot(spec))
    missing = [t for t in spec.transitions if not _drawn(parsed, spec, t.source, t.trigger, t.dest)]
    assert missing == []


@pytest.mark.parametrize("spec", [TRANSPORT, LIVENESS], ids=lambda s: s.name)
def test_states_initial_terminal_and_legend(spec: MachineSpec) -> None:
    parsed = parse(machine_dot(spec))
    for state in spec.states:
        attrs = parsed.nodes[node_id(spec, state)]
        assert (attrs.get("peripheries") == "2") == (state in spec.terminal)
    start = [e for e in parsed.edges if e.src == f"{spec.name}.__start"]
    assert [e.dst for e in start] == [node_id(spec, spec.initial)]
    assert "cluster_legend" in parsed.clusters


def test_guards_are_in_brackets() -> None:
    labels = [e.label for e in parse(machine_dot(TRANSPORT)).edges]
    schedule = next(label for label in labels if label.startswith("schedule\n"))
    assert schedule.replace("\n", " ") == "schedule [cursor known, budget left]"


def test_fan_in_is_merged_into_one_edge_per_box() -> None:
    parsed = parse(machine_dot(TRANSPORT))
    into_dead = [e for e in parsed.edges if e.dst == "transport.dead" and "abort" in e.label]
    assert len(into_dead) == 1
    assert into_dead[0].attrs["ltail"].startswith("cluster_transport_box")
    assert into_dead[0].label.split("\n") == ["abort", "expire", "abandon"]


def _numbered(parsed: Parsed) -> list[tuple[int, str, str, dict[str, str]]]:
    out = []
    for e in parsed.edges:
        head = e.label.split(". ", 1)[0]
        if head.isdigit() and not e.src.startswith("legend."):
            out.append((int(head), e.src, e.dst, e.attrs))
    return sorted(out, key=lambda x: x[0])


def test_trace_numbers_edges_and_marks_the_loop(lasso: Trace) -> None:
    parsed = parse(trace_dot(TRANSPORT, lasso))
    numbered = _numbered(parsed)
    assert [n for n, *_ in numbered] == [1, 2, 3, 4]
    assert [(s, d) for _, s, d, _ in numbered] == [
        (node_id(TRANSPORT, s.src), node_id(TRANSPORT, s.dst)) for s in lasso.steps
    ]
    first, *loop = numbered
    assert first[3]["color"] == _dot.PATH and "(loop)" not in first[3]["label"]
    for _, _, _, attrs in loop:
        assert attrs["label"].endswith("(loop)")
        assert attrs["color"] == _dot.LOOP and attrs["style"] == "dashed"
    assert parsed.nodes["transport.broken"]["xlabel"] == "loop start"


def test_trace_greys_everything_off_the_path(lasso: Trace) -> None:
    parsed = parse(trace_dot(TRANSPORT, lasso))
    off = [e for e in parsed.edges if not e.src.startswith(("legend.", "transport.__"))]
    off = [e for e in off if not e.label.split(". ", 1)[0].isdigit()]
    assert off and all(e.attrs["color"] == _dot.GREY for e in off)
    assert parsed.nodes["transport.done"]["color"] == _dot.GREY


def test_trace_on_a_state_graph(graph: StateGraph) -> None:
    trace = Trace.of([("a", "present", "b"), ("b", "lose", "c"), ("c", "resume", "b")], 1)
    parsed = parse(state_graph_dot(graph, trace=trace))
    numbered = _numbered(parsed)
    assert [(n, s, d) for n, s, d, _ in numbered] == [(1, "a", "b"), (2, "b", "c"), (3, "c", "b")]
    assert [a["label"] for *_, a in numbered] == [
        "1. present",
        "2. lose (loop)",
        "3. resume (loop)",
    ]


def test_state_graph_clusters_and_styles(graph: StateGraph) -> None:
    parsed = parse(state_graph_dot(graph))
    groups = {k: v for k, v in parsed.clusters.items() if k.startswith("cluster_group")}
    assert sorted(map(sorted, groups.values())) == [["a", "b", "e"], ["c"], ["d"]]
    assert parsed.nodes["d"]["peripheries"] == "2"
    assert parsed.nodes["e"]["fillcolor"] == _dot.BAD_FILL
    assert {
        (e.src, e.dst, e.label) for e in parsed.edges if not e.src.startswith(("legend", "__"))
    } == {(e.src, e.dst, e.label) for e in graph.edges}


def test_state_graph_validates() -> None:
    with pytest.raises(ValueError, match="duplicate node id 'a'"):
        StateGraph("g", (GraphNode("a"), GraphNode("a")), ())
    with pytest.raises(ValueError, match="unknown node 'z'"):
        StateGraph("g", (GraphNode("a"),), (GraphEdge("a", "z", "x"),))


def test_bad_traces_are_rejected(graph: StateGraph) -> None:
    with pytest.raises(TraceError, match="step 2 starts at"):
        Trace.of([("open", "lose", "broken"), ("open", "lose", "broken")])
    with pytest.raises(TraceError, match="loop does not close"):
        Trace.of([("open", "lose", "broken"), ("broken", "schedule", "waiting")], loop_start=0)
    with pytest.raises(TraceError, match="not a transition"):
        trace_dot(TRANSPORT, Trace.of([("open", "schedule", "waiting")]))
    with pytest.raises(TraceError, match="not an edge"):
        trace_dot(graph, Trace.of([("a", "lose", "c")]))


def test_trace_from_a_checker_path() -> None:
    from fsm.checker.path import Lasso, Step

    path = Lasso(
        init="open",
        steps=(
            Step("lose", "broken"),
            Step("schedule", "waiting"),
            Step("resume", "resuming"),
            Step("lose", "broken"),
        ),
        loop_start=1,
    )
    trace = Trace.from_path(path, "L1")
    assert trace.steps[0].src == "open" and trace.steps[-1].dst == "broken"
    assert trace.loop_start == 1
    assert len(_numbered(parse(trace_dot(TRANSPORT, trace)))) == 4


def test_product_draws_every_synchronisation_row() -> None:
    parsed = parse(product_dot(PRODUCT))
    rows = {
        e.dst for e in parsed.edges if e.dst.startswith("sync.") and e.attrs.get("style") != "invis"
    }
    assert rows == {"sync.B1", "sync.B2", "sync.C1", "sync.C2"}
    b1 = {(e.src, e.label) for e in parsed.edges if e.dst == "sync.B1"}
    assert b1 == {
        ("transport.done", "complete"),
        ("liveness.resolved", "complete"),
        ("liveness.dead", "complete"),
    }
    c1 = {(e.src, e.label.split("\n")[0]) for e in parsed.edges if e.dst == "sync.C1"}
    assert c1 == {("liveness.dead", "when"), ("transport.dead", "abort")}
    assert {"cluster_machine_transport", "cluster_machine_liveness"} <= set(parsed.clusters)
    table = parsed.nodes["sync.table"]["label"]
    for word in ("dead_request_aborts_stream", "B1", "C2", "broadcast", "coupling"):
        assert word in table or word in product_dot(PRODUCT)
