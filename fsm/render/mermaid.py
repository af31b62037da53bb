"""Mermaid text (renders natively on GitHub): ``stateDiagram-v2`` for a
:class:`~fsm.machines.spec.MachineSpec`, optionally with a trace as numbered labels and a note
(:func:`mermaid`); a ``flowchart`` for an explored
:class:`~fsm.render.graph.StateGraph` (:func:`state_graph_mermaid`).

Contract: deterministic; one line ``src --> dst : trigger [guard]`` per declared
transition, in declaration order; ``[*] --> initial``; ``terminal --> [*]``; a state
description line per documented state; terminal states get the ``terminal`` class.
With a trace, each transition on the path is labelled ``"n. trigger"`` (several step
numbers joined by ``", "`` if the path takes it more than once, ``" (loop)"`` if any of
them is in the loop), visited states get the ``onpath`` class, and a note on the loop's
first state says which steps repeat.
"""

from __future__ import annotations

from fsm.machines.spec import MachineSpec, Transition
from fsm.render.graph import StateGraph, Trace
from fsm.render.machine import trace_rows


def _id(state: str) -> str:
    """Mermaid state ids: letters, digits and underscores only."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in state)


def _text(text: str) -> str:
    """Label text Mermaid accepts after ``:`` (no colons, semicolons or line breaks)."""
    return text.replace(":", "\u2236").replace(";", ",").replace("\n", " ").replace("#", "nr ")


def mermaid(spec: MachineSpec, *, trace: Trace | None = None) -> str:
    """Mermaid text for ``spec`` (see the module docstring for the contract)."""
    numbers: dict[Transition, list[int]] = {}
    in_loop: set[Transition] = set()
    if trace:
        for index, row in enumerate(trace_rows(spec, trace)):
            numbers.setdefault(row, []).append(trace.number(index))
            if trace.in_loop(index):
                in_loop.add(row)
    title = trace.title if trace and trace.title else spec.name
    lines = ["---", f"title: {_text(title)}", "---", "stateDiagram-v2"]
    lines += [f"    {_id(s)} : {_text(doc)}" for s, doc in spec.state_docs if doc]
    lines.append(f"    [*] --> {_id(spec.initial)}")
    for t in spec.transitions:
        label = f"{t.trigger} [{t.guard}]" if t.guard else t.trigger
        if t in numbers:
            label = ", ".join(map(str, numbers[t])) + f". {t.trigger}"
            label += " (loop)" if t in in_loop else ""
        lines.append(f"    {_id(t.source)} --> {_id(t.dest)} : {_text(label)}")
    lines += [f"    {_id(s)} --> [*]" for s in spec.states if s in spec.terminal]
    if trace and trace.loop_start is not None:
        first, last = trace.number(trace.loop_start), trace.last_number
        at = _id(trace.steps[trace.loop_start].src)
        lines.append(f"    note right of {at} : loop, steps {first} to {last} repeat forever")
    lines.append("    classDef terminal fill:#e8e8e8,stroke:#222,stroke-width:3px")
    terminal = [_id(s) for s in spec.states if s in spec.terminal]
    lines.append(f"    class {','.join(terminal)} terminal")
    if trace:
        lines.append("    classDef onpath stroke:#1f5fbf,stroke-width:3px")
        visited = [_id(s) for s in trace.visited if s not in spec.terminal]
        if visited:
            lines.append(f"    class {','.join(visited)} onpath")
    return "\n".join(lines) + "\n"


def _quoted(text: str) -> str:
    """A flowchart label in double quotes: quotes escaped, line breaks as ``<br>``."""
    return '"' + text.replace('"', "#quot;").replace("\n", "<br>") + '"'


def state_graph_mermaid(graph: StateGraph) -> str:
    """Mermaid ``flowchart`` text for ``graph``, deterministic: one ``subgraph`` per
    group (in order of first appearance), each node a rounded box (ids ``n0``, ``n1``, ...
    in node order), initial nodes entered from a start dot, one ``src -->|label| dst``
    line per edge in input order; terminal nodes get the ``terminal`` class, bad ones
    ``bad``. Rows (:attr:`GraphNode.row`) are DOT-only: Mermaid lays out by itself."""
    ids = {n.id: f"n{i}" for i, n in enumerate(graph.nodes)}
    title = f"{graph.name}: {graph.doc}" if graph.doc else graph.name
    lines = ["---", f"title: {_text(title)}", "---", "flowchart TB"]
    lines += [f"    {ids[n.id]}({_quoted(n.text)})" for n in graph.nodes if not n.group]
    for index, group in enumerate(graph.groups):
        lines.append(f"    subgraph g{index}[{_quoted(group)}]")
        lines += [
            f"        {ids[n.id]}({_quoted(n.text)})" for n in graph.nodes if n.group == group
        ]
        lines.append("    end")
    for index, n in enumerate(n for n in graph.nodes if n.initial):
        lines.append(f'    start{index}((" ")) --> {ids[n.id]}')
    lines += [f"    {ids[e.src]} -->|{_quoted(e.label)}| {ids[e.dst]}" for e in graph.edges]
    for kind, style, members in (
        (
            "terminal",
            "fill:#e8e8e8,stroke:#222,stroke-width:3px",
            [n for n in graph.nodes if n.terminal],
        ),
        ("bad", "fill:#f9d0d0,stroke:#b22222", [n for n in graph.nodes if n.bad]),
    ):
        if members:
            lines.append(f"    classDef {kind} {style}")
            lines.append(f"    class {','.join(ids[n.id] for n in members)} {kind}")
    return "\n".join(lines) + "\n"
