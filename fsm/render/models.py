"""Diagrams of checked models: the reachable product, and counterexamples on it.

A world (:mod:`fsm.worlds.sse`) has thousands of states; a picture needs a dozen. Each diagram
here is a *projection*: a ``view`` maps every reachable state to a short label (for the
guard, its product configuration ``transport / liveness``), states with equal labels
become one node, and every explored edge that changes the label becomes an edge named
after the environment's move. A counterexample is projected the same way (steps that do
not change the label are folded into the next one, except the last, violating step), so
it is a path of that graph (:func:`around` adds that step when it is a loop); each drawn
step keeps its number in the checker's text trace.

A model, or a view (a model's ``format_state``), that raises while it is drawn is a
:class:`~fsm.checker.ModelError` naming the line that raised, as ``fsm check`` reports it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from fsm.checker import Checker, Path, PropertyResult, load_models
from fsm.checker.explore import model_errors
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
    terminal when ``terminal(group)`` says so (default: its first state has no move).
    :class:`~fsm.checker.ModelError` when the model or the view (its ``format_state``)
    raises, as ``fsm check`` reports a model that raises."""
    checker: Checker[Any, Any] = Checker(model)
    checker.run()
    nodes: dict[str, GraphNode] = {}
    edges: dict[tuple[str, str, str], None] = {}
    with model_errors("drawing its reachable states"):
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


def merged_edges(graph: StateGraph) -> StateGraph:
    """``graph`` with one edge per ``(src, dst)`` pair, labelled with every move that
    takes it (moves that differ in their last word only are written once:
    ``cut clean/abrupt``). For overviews: a trace needs the edges one move each."""
    labels: dict[tuple[str, str], list[str]] = {}
    for e in graph.edges:
        labels.setdefault((e.src, e.dst), []).append(e.label)
    edges = tuple(GraphEdge(src, dst, _join(moves)) for (src, dst), moves in labels.items())
    return StateGraph(graph.name, graph.nodes, edges, graph.doc)


def _join(moves: list[str]) -> str:
    words = [m.split() for m in moves]
    heads = {" ".join(w[:-1]) for w in words}
    if len(moves) > 1 and len(heads) == 1 and all(len(w) > 1 for w in words):
        return f"{heads.pop()} {'/'.join(w[-1] for w in words)}"
    return "\n".join(moves)


def around(graph: StateGraph, trace: Trace) -> StateGraph:
    """``graph`` restricted to the nodes ``trace`` visits (and the edges among them),
    plus the trace's steps the projection has no edge for (a violating last step that
    changes nothing the view shows: drawn as a loop on its node)."""
    keep = set(trace.visited)
    edges = [e for e in graph.edges if e.src in keep and e.dst in keep]
    known = {(e.src, e.label, e.dst) for e in edges}
    edges += [
        GraphEdge(s.src, s.dst, s.label)
        for s in trace.steps
        if (s.src, s.label, s.dst) not in known
    ]
    return StateGraph(
        graph.name, tuple(n for n in graph.nodes if n.id in keep), tuple(edges), graph.doc
    )


def projected_trace(
    path: Path, view: View, title: str, why: str = "", at: int | None = None
) -> Trace:
    """Project a checker path (or lasso) through ``view``; see the module docstring.
    ``at`` (a :class:`~fsm.checker.PropertyResult`'s: the number of the state that
    violates) marks where that state is drawn, ``why`` says what breaks the property.
    :class:`~fsm.checker.ModelError` when the view (a model's ``format_state``) raises."""
    with model_errors("drawing a counterexample"):
        labels = [view(s)[1] for s in path.states]
    triples: list[tuple[str, str, str]] = []
    numbers: list[int] = []
    loop_start: int | None = None
    for i, step in enumerate(path.steps):
        if path.loop_start is not None and i >= path.loop_start and loop_start is None:
            loop_start = len(triples)
        last = i == len(path.steps) - 1 and path.loop_start is None
        if labels[i] != labels[i + 1] or last:  # the violating step is always drawn
            triples.append((labels[i], _move(step.action), labels[i + 1]))
            numbers.append(i + 1)  # the text trace's number of this step
    if loop_start is not None and loop_start >= len(triples):
        loop_start = None
    drawn = {end for src, _, dst in triples for end in (src, dst)}
    violates = labels[at] if at is not None and labels[at] in drawn else ""
    return Trace.of(triples, loop_start, title, numbers, violates, why)


# ------------------------------------------------------------------ views of the world


def product_grid(graph: StateGraph) -> StateGraph:
    """A graph projected through :func:`guard_view`, for :func:`fsm.render.grid.grid_dot`:
    each transport state a column, each liveness state a row (in their declared order),
    one edge per pair of configurations."""
    from fsm.machines.resumption import LIVENESS, TRANSPORT

    columns = [s for s in TRANSPORT.states if s not in TRANSPORT.terminal]
    columns += [s for s in TRANSPORT.states if s in TRANSPORT.terminal]
    rows = ["no request", *LIVENESS.states]

    def place(n: GraphNode) -> tuple[int, int]:
        column, row = n.id.split(" / ", 1)
        return columns.index(column), rows.index(row)

    nodes = tuple(replace(n, row=n.id.split(" / ", 1)[1]) for n in sorted(graph.nodes, key=place))
    return merged_edges(StateGraph(graph.name, nodes, graph.edges, graph.doc))


def guard_view(state: Any) -> tuple[str, str]:
    """The guard's product configuration: ``transport / liveness of request 0``."""
    _, snap = state.client
    streams, requests = snap[1], snap[2]
    transport = streams[0][2] if streams else "-"
    liveness = requests[0][5] if requests else "no request"
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
    """The model called ``name`` in the shipped model file ``file`` (``seed_incident``;
    a ``.py`` suffix is ignored)."""
    for model in load_models(builtin_model_file(file.removesuffix(".py"))):
        if getattr(model, "name", None) == name:
            return model
    raise LookupError(f"no model {name!r} in {file}")


def violations(model: Any) -> Sequence[PropertyResult]:
    """The result of every violated property of ``model`` (each with its counterexample,
    why and violating state)."""
    report = Checker(model).run()
    return [r for r in report.results if r.path is not None and r.verdict.value == "violated"]


def counterexamples(model: Any) -> Sequence[tuple[str, Path]]:
    """``(property, counterexample)`` for every violated property of ``model``."""
    return [(r.name, r.path) for r in violations(model) if r.path is not None]


def counterexample_trace(result: PropertyResult, view: View, title: str) -> Trace:
    """``result``'s counterexample projected through ``view``, its violating state marked
    and its why under ``title``."""
    assert result.path is not None
    return projected_trace(result.path, view, title, result.why or "", result.at)
