"""DOT for a generic explored :class:`~fsm.render.graph.StateGraph`.

Layout contract: nodes with the same ``group`` sit in one shaded cluster labelled with
the group (clusters in order of first appearance, nodes and edges in input order), nodes
with the same ``row`` on one rank;
initial nodes get an arrow from a dot, terminal nodes a double border and grey fill,
bad nodes a red fill. With a :class:`~fsm.render.graph.Trace` (whose steps must be
edges of the graph, matched on ``(src, label, dst)``), each step is drawn as its own
numbered edge, the loop of a lasso orange and dashed, everything else greyed; the state
the trace marks as violating has a thick red border and says so, and the trace's ``why``
heads the diagram under its title.
"""

from __future__ import annotations

import textwrap

from fsm.render import _dot as d
from fsm.render.graph import GraphEdge, GraphNode, StateGraph, Trace, TraceError
from fsm.render.legend import legend


def _check(graph: StateGraph, trace: Trace) -> None:
    edges = {(e.src, e.label, e.dst) for e in graph.edges}
    for number, s in enumerate(trace.steps, start=1):
        if (s.src, s.label, s.dst) not in edges:
            raise TraceError(
                f"step {number} ({s.src} -{s.label}-> {s.dst}) is not an edge of "
                f"state graph {graph.name!r}"
            )


def _node(
    dot: d.Dot, n: GraphNode, *, visited: bool, loop_at: bool, violates: bool = False
) -> None:
    a: dict[str, d.Attr] = {"label": n.text, "tooltip": n.id}
    if n.terminal:
        a.update(peripheries=2, style="rounded,filled", fillcolor=d.TERMINAL_FILL)
    if n.bad:
        a.update(style="rounded,filled", fillcolor=d.BAD_FILL, color=d.BAD_LINE)
    if not visited:
        a.update(color=d.GREY, fontcolor=d.GREY_TEXT)
    if loop_at:
        a.update(color=d.LOOP, penwidth=2.4, xlabel="loop start", fontcolor=d.LOOP)
    if violates:
        where = "loop start: violates here" if loop_at else "violates here"
        a.update(color=d.BAD_LINE, penwidth=3, xlabel=where, fontcolor=d.BAD_LINE)
    dot.node(n.id, a)


def state_graph_dot(
    graph: StateGraph, *, trace: Trace | None = None, rankdir: str = "TB", title: str = ""
) -> str:
    """Deterministic DOT text for ``graph`` (see the module docstring for the layout)."""
    if trace:
        _check(graph, trace)
    visited = set(trace.visited) if trace else {n.id for n in graph.nodes}
    loop_at = trace.steps[trace.loop_start].src if trace and trace.loop_start is not None else ""
    violates = trace.violates if trace else ""
    dot = d.Dot()
    label = title or (trace.title if trace and trace.title else "") or _title(graph)
    if trace and trace.why:
        label += "\n" + "\n".join(textwrap.wrap(f"why: {trace.why}", 100))
    d.header(dot, graph.name, rankdir=rankdir, label=label)
    for n in graph.nodes:
        if not n.group:
            _node(
                dot,
                n,
                visited=n.id in visited,
                loop_at=n.id == loop_at,
                violates=n.id == violates,
            )
    for index, group in enumerate(graph.groups):
        dot.open(f"subgraph {d.quote(f'cluster_group{index}')}")
        dot.defaults(
            "graph",
            {
                "label": group,
                "style": "rounded,filled",
                "fillcolor": d.GROUP_FILL,
                "color": d.GREY,
                "fontsize": 11,
            },
        )
        for n in graph.nodes:
            if n.group == group:
                _node(
                    dot,
                    n,
                    visited=n.id in visited,
                    loop_at=n.id == loop_at,
                    violates=n.id == violates,
                )
        dot.close()
    for row in graph.rows:
        dot.open("subgraph")
        dot.defaults("graph", {"rank": "same"})
        for n in graph.nodes:
            if n.row == row:
                dot.line(d.quote(n.id))
        dot.close()
    for index, n in enumerate(n for n in graph.nodes if n.initial):
        start = f"__start{index}"
        dot.node(start, {"shape": "point", "width": 0.12, "label": ""})
        dot.edge(start, n.id, {"tooltip": "initial state"})
    on_path = {(s.src, s.label, s.dst) for s in trace.steps} if trace else set()
    for e in graph.edges:
        if (e.src, e.label, e.dst) not in on_path:
            _edge(dot, e, dim=trace is not None)
    if trace:
        for index, s in enumerate(trace.steps):
            dot.edge(
                s.src, s.dst, d.path_edge(trace.step_label(index, s.label), trace.in_loop(index))
            )
    legend(
        dot,
        graph.name,
        trace=trace,
        bad=any(n.bad for n in graph.nodes),
        groups=bool(graph.groups),
    )
    dot.close()
    return dot.text()


def _edge(dot: d.Dot, e: GraphEdge, *, dim: bool) -> None:
    a: dict[str, d.Attr] = {"label": e.label}
    if dim:
        a.update(color=d.GREY, fontcolor=d.GREY_TEXT)
    dot.edge(e.src, e.dst, a)


def _title(graph: StateGraph) -> str:
    return f"{graph.name}: {graph.doc}" if graph.doc else graph.name
