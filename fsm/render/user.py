"""Diagrams of a model of one's own: ``fsm render MODEL.py`` and ``fsm check MODEL.py
--diagrams DIR``.

For each model, :func:`model_diagrams` draws, by file name (``NAME`` is the model's
name in lowercase file-name characters):

* ``NAME-machine-M`` and ``NAME-product-spec``: the declared machines of its policy and
  their product, when the policy runs declared machines (a decider driven as a policy,
  :class:`fsm.worlds.common.SnapshotPolicy`: its ``product``); a policy of plain code
  declares none, and gets none;
* ``NAME-reachable``: its reachable states projected through a view (:func:`view_for`:
  what the server, the connection and the user show, for a world of either era; the
  formatted state for any other model), one node per view, one edge per move that changes
  it;
* ``NAME-cex-P``: each violated property's counterexample on that graph, its steps
  numbered as ``fsm check`` prints them, its violating state marked, its why under the
  title (:func:`fsm.render.models.counterexample_trace`).

A reachable graph of more than :data:`MAX_NODES` views is not drawn (it would not read);
its counterexamples still are, on the states they visit.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fsm.checker import Checker, Report
from fsm.machines.spec import ProductSpec
from fsm.render import models as m
from fsm.render.mrtr_views import mrtr_view
from fsm.render.product import product_dot
from fsm.render.registry import Diagram, machine_diagram, trace_diagram
from fsm.render.stategraph import state_graph_dot
from fsm.render.svg import RenderEngineMissing, render_png, render_svg, require_engine

MAX_NODES = 150
"""The most views a reachable graph may have to be drawn."""


def slug(name: str) -> str:
    """``name`` in lowercase file-name characters (``show-everything [replay=inclusive]``
    -> ``show-everything-replay-inclusive``)."""
    return re.sub(r"[^a-z0-9._]+", "-", name.lower()).strip("-._") or "model"


def view_for(model: Any) -> m.View:
    """How a state of ``model`` is drawn: a world's view of its era (the server's request,
    the connection, the prompt, the POST; the MRTR call's round), else the model's own
    ``format_state`` (or ``repr``) in one group."""
    from fsm.worlds.mrtr import MrtrWorld
    from fsm.worlds.sse import World

    if isinstance(model, World):
        return m.client_view
    if isinstance(model, MrtrWorld):
        return mrtr_view
    fmt = getattr(model, "format_state", repr)
    return lambda state: ("", str(fmt(state)))


def model_diagrams(model: Any, report: Report | None = None) -> dict[str, Diagram]:
    """The diagrams of ``model`` by file name (see the module docstring); ``report`` is
    its check, if already run (else it is checked here)."""
    name = slug(str(getattr(model, "name", "") or type(model).__name__))
    out: dict[str, Diagram] = {}
    product = getattr(getattr(model, "policy", None), "product", None)
    if isinstance(product, ProductSpec):
        for machine in product.machines:
            out[f"{name}-machine-{slug(machine.name)}"] = machine_diagram(machine)
        out[f"{name}-product-spec"] = Diagram(product_dot(product))
    view = view_for(model)
    graph = m.projected_graph(model, view, f"{name}-reachable", "its reachable states, projected")
    if len(graph.nodes) <= MAX_NODES:
        out[f"{name}-reachable"] = Diagram(state_graph_dot(m.merged_edges(graph)))
    report = report if report is not None else Checker(model).run()
    for result in report.results:
        if result.verdict.value != "violated" or result.path is None:
            continue
        title = f"{report.model}: {result.name} violated (steps numbered as fsm check prints them)"
        trace = m.counterexample_trace(result, view, title)
        out[f"{name}-cex-{slug(result.name)}"] = trace_diagram(m.around(graph, trace), trace)
    return out


def write_diagrams(
    diagrams: dict[str, Diagram], out: Path, *, svg: bool, png: bool = False
) -> list[Path]:
    """Write each diagram into ``out`` (made if missing): ``NAME.dot``, ``NAME.mmd`` when it
    has Mermaid text, ``NAME.svg`` with ``svg`` and ``NAME.png`` with ``png`` (both need
    the engine: :class:`~fsm.render.svg.RenderEngineMissing`). Returns the files written;
    OSError when ``out`` cannot be written."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, diagram in diagrams.items():
        files: dict[str, str | bytes] = {f"{name}.dot": diagram.dot}
        if diagram.mermaid is not None:
            files[f"{name}.mmd"] = diagram.mermaid
        if svg:
            files[f"{name}.svg"] = render_svg(diagram.dot)
        if png:
            files[f"{name}.png"] = render_png(diagram.dot)
        for file, content in files.items():
            path = out / file
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8", newline="\n")
            written.append(path)
    return written


def draw_checked(model: Any, report: Report, out: Path) -> list[str]:
    """What ``fsm check --diagrams DIR`` does for each model it checked: write its
    diagrams into ``out``, as SVG too when the engine is installed (DOT and Mermaid
    only otherwise). Returns the files written."""
    try:
        require_engine()
        svg = True
    except RenderEngineMissing:
        svg = False
    return [str(p) for p in write_diagrams(model_diagrams(model, report), out, svg=svg)]
