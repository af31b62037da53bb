"""The diagram producers the CLI renders: a name mapped to a function returning a
:class:`Diagram`. Producers run only when rendered, so registering one is free.

Add a producer in one line, e.g.::

    register("reachable-naive", lambda: Diagram(state_graph_dot(reachable_graph(model))))
    register("cex-naive-P1", lambda: trace_diagram(graph, Trace.from_path(path, "P1")))

Names become file names: ``NAME.dot``, ``NAME.svg`` and, if the diagram has Mermaid
text, ``NAME.mmd``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from fsm.render.graph import StateGraph, Trace
from fsm.render.machine import machine_dot
from fsm.render.mermaid import mermaid
from fsm.render.product import product_dot
from fsm.render.stategraph import state_graph_dot
from fsm.spec import MachineSpec


@dataclass(frozen=True, slots=True)
class Diagram:
    """What a producer returns: DOT text, and Mermaid text when it has a Mermaid form."""

    dot: str
    mermaid: str | None = None


Producer = Callable[[], Diagram]

PRODUCERS: dict[str, Producer] = {}
"""Registered producers, in registration order (the order files are rendered in)."""

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def register(name: str, producer: Producer) -> Producer:
    """Register ``producer`` under ``name`` (lowercase file-name characters; unique)."""
    if not _NAME.match(name):
        raise ValueError(f"diagram name {name!r}: use lowercase letters, digits, '.', '_', '-'")
    if name in PRODUCERS:
        raise ValueError(f"diagram {name!r} is already registered")
    PRODUCERS[name] = producer
    return producer


def machine_diagram(spec: MachineSpec, *, rankdir: str = "TB") -> Diagram:
    """A machine's DOT and Mermaid."""
    return Diagram(machine_dot(spec, rankdir=rankdir), mermaid(spec))


def trace_diagram(target: MachineSpec | StateGraph, trace: Trace) -> Diagram:
    """A trace highlighted on a machine (DOT and Mermaid) or a state graph (DOT)."""
    if isinstance(target, MachineSpec):
        return Diagram(machine_dot(target, trace=trace, rankdir="TB"), mermaid(target, trace=trace))
    return Diagram(state_graph_dot(target, trace=trace))


def _builtin() -> None:
    from fsm.machines import LIVENESS, PRODUCT, TRANSPORT

    register("transport", lambda: machine_diagram(TRANSPORT))
    register("liveness", lambda: machine_diagram(LIVENESS))
    register("product-spec", lambda: Diagram(product_dot(PRODUCT)))


_builtin()


def _model_diagrams() -> None:
    """The reachable product of the guarded model, and every expected counterexample of
    the faulty-client models highlighted on their reachable graphs (source checkouts)."""
    from fsm.machines import TRANSPORT
    from fsm.render import models as m

    if not m.MODELS_DIR.is_dir():
        return

    def product() -> Diagram:
        model = m.model_named("guarded.py", "guarded[inclusive,silent,rpc,answers]")
        return Diagram(
            state_graph_dot(
                m.projected_graph(
                    model,
                    m.guard_view,
                    "guarded-product",
                    "reachable product configurations (transport / liveness) of the guarded client",
                    terminal=lambda group: group in TRANSPORT.terminal,
                )
            )
        )

    def counterexample(file: str, name: str, prop: str) -> Producer:
        def produce() -> Diagram:
            model = m.model_named(file, name)
            graph = m.projected_graph(model, m.client_view, f"{name}-{prop}")
            path = dict(m.counterexamples(model))[prop]
            trace = m.projected_trace(path, m.client_view, f"{name}: {prop} violated")
            return trace_diagram(m.around(graph, trace), trace)

        return produce

    register("guarded-product", product)
    for file, name in (
        ("seed_incident.py", "seed-incident"),
        ("mcp_sdk_2_3.py", "mcp-sdk-2.3.0"),
        ("mcp_sdk_1_x.py", "mcp-sdk-1.x"),
    ):
        for prop in m.model_named(file, name).expected_violations:
            register(f"cex-{name}-{prop.lower()}", counterexample(file, name, prop))


_model_diagrams()
