"""Diagrams of checked models: the reachable product, and counterexamples on it.

A world (:mod:`fsm.world`) has thousands of states; a picture needs a dozen. Each diagram
here is a *projection*: a ``view`` maps every reachable state to a short label (for the
guard, its product configuration ``transport / liveness``), states with equal labels
become one node, and every explored edge that changes the label becomes an edge named
after the environment's move. A counterexample is projected the same way (steps that do
not change the label are folded into the next one), so it is a path of that graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fsm.checker import Checker, Path, load_models
from fsm.checker.loader import builtin_model_file
from fsm.render.graph import GraphEdge, GraphNode, StateGraph, Trace

View = Callable[[Any], tuple[str, str]]
"""``view(state) -> (group, label)``: the cluster and the node a state projects onto."""


def _move(action: object) -> str:
    """A move's name without its argument (``deliver 3`` -> ``deliver``)."""
    words = str(action).split()
    return " ".join(w for w in words if not w.isdigit())


def projected_graph(
    model: Any,
    view: View,
    name: str,
    doc: str = "",
    terminal: Callable[[str], bool] | None = None,
) -> StateGraph:
    """Explore ``model`` and project its reachable graph through ``view``. A node is drawn
    terminal when ``terminal(group)`` says so (default: its first state has no move)."""
    checker: Checker[Any, Any] = Checker(model)
    checker.run()
    nodes: dict[str, GraphNode] = {}
    edges: dict[tuple[str, str, str], None] = {}
    init_states = set(model.init_states())
    for state in checker.states:
        group, label = view(state)
        if label not in nodes:
            final = (
                terminal(group)
                if terminal is not None
                else not any(True for _ in model.actions(state))
            )
            nodes[label] = GraphNode(
                label, group=group, initial=state in init_states, terminal=final
            )
        for action in model.actions(state):
            nxt = model.next_state(state, action)
            if nxt is None:
                continue
            dst = view(nxt)[1]
            if dst != label:
                edges[(label, _move(action), dst)] = None
    for src, _, dst in edges:
        for end in (src, dst):
            if end not in nodes:
                nodes[end] = GraphNode(end)
    ordered = sorted(nodes.values(), key=lambda n: (not n.initial, n.group, n.id))
    return StateGraph(
        name, tuple(ordered), tuple(GraphEdge(s, d, lbl) for s, lbl, d in sorted(edges)), doc
    )


def around(graph: StateGraph, trace: Trace) -> StateGraph:
    """``graph`` restricted to the nodes ``trace`` visits (and the edges among them)."""
    keep = set(trace.visited)
    return StateGraph(
        graph.name,
        tuple(n for n in graph.nodes if n.id in keep),
        tuple(e for e in graph.edges if e.src in keep and e.dst in keep),
        graph.doc,
    )


def projected_trace(path: Path, view: View, title: str) -> Trace:
    """Project a checker path (or lasso) through ``view``; see the module docstring."""
    labels = [view(s)[1] for s in path.states]
    triples: list[tuple[str, str, str]] = []
    loop_start: int | None = None
    for i, step in enumerate(path.steps):
        if path.loop_start is not None and i >= path.loop_start and loop_start is None:
            loop_start = len(triples)
        if labels[i] != labels[i + 1]:
            triples.append((labels[i], _move(step.action), labels[i + 1]))
    if loop_start is not None and loop_start >= len(triples):
        loop_start = None
    return Trace.of(triples, loop_start, title)


# ------------------------------------------------------------------ views of the world


def guard_view(state: Any) -> tuple[str, str]:
    """The guard's product configuration: ``transport / liveness of request 0``."""
    _, snap = state.client
    streams, requests = snap[1], snap[2]
    transport = streams[0][2] if streams else "-"
    liveness = requests[0][5] if requests else "-"
    return transport, f"{transport} / {liveness}"


def client_view(state: Any) -> tuple[str, str]:
    """What any client's world shows: the server's request, connection, prompt, POST."""
    env = state.env
    server = env.server[0] if env.server else "unsent"
    if env.ended:
        return server, f"server {server}\nended"
    conn = (
        "connected"
        if env.conn is not None
        else ("resuming" if env.resume is not None else "disconnected")
    )
    parts = [f"server {server}", conn]
    if env.prompts:
        parts.append("prompt shown")
    if env.posts:
        parts.append("answer in flight")
    return server, "\n".join(parts)


def model_named(file: str, name: str) -> Any:
    """The model called ``name`` in the shipped model file ``file`` (``seed_incident``)."""
    for model in load_models(builtin_model_file(file)):
        if getattr(model, "name", None) == name:
            return model
    raise LookupError(f"no model {name!r} in {file}")


def counterexamples(model: Any) -> Sequence[tuple[str, Path]]:
    """``(property, counterexample)`` for every violated property of ``model``."""
    report = Checker(model).run()
    return [
        (r.name, r.path)
        for r in report.results
        if r.path is not None and r.verdict.value == "violated"
    ]
