"""DOT for one :class:`~fsm.machines.spec.MachineSpec`, optionally with a highlighted trace.

Layout contract:

* every declared transition is drawn: either as its own edge ``source -> dest``
  labelled ``trigger [guard]``, or inside a *fan-in*: when one ``(trigger, guard, dest)``
  is declared from at least ``merge_min`` sources, the sources are boxed in a dashed
  cluster and a single edge leaves the box (UML's "from any of these states"); fan-ins
  with the same box and dest share that edge. Boxes are only used when they nest
  cleanly (a laminar family); any other fan-in is drawn edge by edge;
* several transitions between the same two states share one edge with one label line each;
* the initial state has an incoming arrow from a dot; terminal states have a double
  border and a grey fill; a legend cluster explains the styles;
* with a :class:`~fsm.render.graph.Trace`, each step is drawn as its own numbered
  edge between the actual states (blue; the loop of a lasso orange, dashed, ``(loop)``),
  everything off the path is greyed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fsm.machines.spec import MachineSpec, Transition
from fsm.render import _dot as d
from fsm.render.graph import Trace, TraceError
from fsm.render.legend import legend


@dataclass
class _Edge:
    tail: str  # a state name
    dest: str
    box: int | None  # index of the fan-in box the edge leaves, if any
    rows: list[Transition] = field(default_factory=list)


def fan_in_boxes(spec: MachineSpec, merge_min: int = 3) -> list[frozenset[str]]:
    """The source sets drawn as dashed boxes: laminar, largest first, deterministic."""
    sources: dict[tuple[str, str, str], list[str]] = {}
    for t in spec.transitions:
        sources.setdefault((t.trigger, t.guard, t.dest), []).append(t.source)
    order = {s: i for i, s in enumerate(spec.states)}
    candidates = {frozenset(v) for v in sources.values() if len(set(v)) >= merge_min}
    ranked = sorted(candidates, key=lambda s: (-len(s), sorted(order[x] for x in s)))
    chosen: list[frozenset[str]] = []
    for box in ranked:
        if all(box.isdisjoint(c) or box <= c or c <= box for c in chosen):
            chosen.append(box)
    return chosen


def trace_rows(spec: MachineSpec, trace: Trace) -> list[Transition]:
    """The declared transition taken by each step (:class:`TraceError` if one is not)."""
    rows: list[Transition] = []
    for number, step in enumerate(trace.steps, start=1):
        row = next((t for t in spec.outgoing(step.src) if t.trigger == step.label), None)
        if row is None or row.dest != step.dst:
            raise TraceError(
                f"step {number} ({step.src} -{step.label}-> {step.dst}) is not a transition "
                f"of machine {spec.name!r}"
            )
        rows.append(row)
    return rows


def _edges(spec: MachineSpec, boxes: Sequence[frozenset[str]], merge_min: int) -> list[_Edge]:
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for t in spec.transitions:
        grouped.setdefault((t.trigger, t.guard, t.dest), []).append(t.source)
    edges: dict[tuple[str, str, int | None], _Edge] = {}
    for t in spec.transitions:
        srcs = frozenset(grouped[(t.trigger, t.guard, t.dest)])
        box = boxes.index(srcs) if len(srcs) >= merge_min and srcs in boxes else None
        tail = t.source if box is None else _box_tail(spec, boxes[box])
        edges.setdefault((tail, t.dest, box), _Edge(tail, t.dest, box)).rows.append(t)
    return list(edges.values())


def _box_tail(spec: MachineSpec, box: frozenset[str]) -> str:
    return [s for s in spec.states if s in box][-1]


def _label(rows: Sequence[Transition]) -> str:
    labels = dict.fromkeys(d.edge_label(t.trigger, t.guard) for t in rows)
    return "\n".join(labels)


def _tooltip(rows: Sequence[Transition]) -> str:
    lines = dict.fromkeys(f"{t.trigger}: {t.doc}" if t.doc else t.trigger for t in rows)
    return "\n".join(lines)


def node_id(spec: MachineSpec, state: str) -> str:
    """The DOT id of ``state``: ``machine.state`` (unique across machines)."""
    return f"{spec.name}.{state}"


def machine_body(
    dot: d.Dot,
    spec: MachineSpec,
    *,
    trace: Trace | None = None,
    merge_min: int = 3,
    muted: bool = False,
) -> None:
    """Emit the states, fan-in boxes and transitions of ``spec`` into ``dot``.

    ``muted`` draws every transition grey and unlabelled (the label stays in the
    tooltip), for diagrams where the machine is context, e.g. the product. The caller
    owns the enclosing graph or cluster.
    """
    boxes = fan_in_boxes(spec, merge_min)
    path = trace_rows(spec, trace) if trace else []
    visited = set(trace.visited) if trace else set(spec.states)
    loop_at = trace.steps[trace.loop_start].src if trace and trace.loop_start is not None else ""
    _states(dot, spec, boxes, visited, loop_at)
    start = f"{spec.name}.__start"
    dot.node(start, {"shape": "point", "width": 0.12, "label": "", "color": d.INK})
    dot.edge(start, node_id(spec, spec.initial), {"tooltip": "initial state"})
    dim = trace is not None or muted
    on_path = set(path)
    for e in _edges(spec, boxes, merge_min):
        rows = e.rows if e.box is not None else [r for r in e.rows if r not in on_path]
        if not rows:
            continue
        a: dict[str, d.Attr] = {"label": "" if muted else _label(rows), "tooltip": _tooltip(rows)}
        if e.box is not None:
            a.update(ltail=f"cluster_{spec.name}_box{e.box}", color=d.FANIN_LINE)
        if dim:
            a.update(color=d.GREY, fontcolor=d.GREY_TEXT)
        dot.edge(node_id(spec, e.tail), node_id(spec, e.dest), a)
    if trace:
        for index, (step, row) in enumerate(zip(trace.steps, path, strict=True)):
            label = trace.step_label(index, step.label)
            a = d.path_edge(label, trace.in_loop(index), row.doc or row.trigger)
            dot.edge(node_id(spec, step.src), node_id(spec, step.dst), a)


def _states(
    dot: d.Dot,
    spec: MachineSpec,
    boxes: Sequence[frozenset[str]],
    visited: set[str],
    loop_at: str,
) -> None:
    """States in declaration order, nested in their fan-in boxes."""

    def parent(i: int) -> int | None:
        supers = [j for j, b in enumerate(boxes) if j != i and boxes[i] < b]
        return min(supers, key=lambda j: len(boxes[j])) if supers else None

    def home(state: str) -> int | None:
        inside = [j for j, b in enumerate(boxes) if state in b]
        return min(inside, key=lambda j: len(boxes[j])) if inside else None

    def emit(box: int | None) -> None:
        for state in spec.states:
            if home(state) == box:
                _state(dot, spec, state, state in visited, state == loop_at)
        for j in range(len(boxes)):
            if parent(j) == box:
                dot.open(f"subgraph {d.quote(f'cluster_{spec.name}_box{j}')}")
                dot.defaults(
                    "graph",
                    {"label": "", "style": "dashed,rounded", "color": d.FANIN_LINE, "margin": 10},
                )
                emit(j)
                dot.close()

    emit(None)


def _state(dot: d.Dot, spec: MachineSpec, state: str, visited: bool, loop_at: bool) -> None:
    a: dict[str, d.Attr] = {"label": state, "tooltip": spec.state_doc(state) or state}
    if state in spec.terminal:
        a.update(peripheries=2, style="rounded,filled", fillcolor=d.TERMINAL_FILL)
    if not visited:
        a.update(color=d.GREY, fontcolor=d.GREY_TEXT)
    else:
        a["penwidth"] = 1.2
    if loop_at:
        a.update(color=d.LOOP, penwidth=2.4, xlabel="loop start", fontcolor=d.LOOP)
    dot.node(node_id(spec, state), a)


def machine_dot(
    spec: MachineSpec,
    *,
    trace: Trace | None = None,
    merge_min: int = 3,
    rankdir: str = "TB",
    title: str = "",
) -> str:
    """Deterministic DOT text for ``spec`` (see the module docstring for the layout).

    ``trace`` highlights a path (:class:`TraceError` if a step is not a declared
    transition); ``title`` defaults to the machine's name and doc (or the trace's title).
    """
    dot = d.Dot()
    label = title or (trace.title if trace and trace.title else "") or _title(spec)
    d.header(dot, spec.name, rankdir=rankdir, label=label)
    machine_body(dot, spec, trace=trace, merge_min=merge_min)
    legend(dot, spec.name, fan_in=bool(fan_in_boxes(spec, merge_min)), trace=trace)
    dot.close()
    return dot.text()


def _title(spec: MachineSpec) -> str:
    return f"{spec.name}: {spec.doc}" if spec.doc else spec.name
