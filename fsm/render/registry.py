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

from fsm.machines.spec import MachineSpec
from fsm.render.graph import StateGraph, Trace
from fsm.render.grid import grid_dot
from fsm.render.machine import machine_dot
from fsm.render.mermaid import mermaid, state_graph_mermaid
from fsm.render.product import product_dot
from fsm.render.stategraph import state_graph_dot


@dataclass(frozen=True, slots=True)
class Diagram:
    """What a producer returns: DOT text, and Mermaid text when it has a Mermaid form."""

    dot: str
    mermaid: str | None = None


Producer = Callable[[], Diagram]
"""A function that builds one :class:`Diagram` (registered with :func:`register`)."""

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
    from fsm.machines.resumption import LIVENESS, PRODUCT, TRANSPORT

    register("transport", lambda: machine_diagram(TRANSPORT))
    register("liveness", lambda: machine_diagram(LIVENESS))
    register("product-spec", lambda: Diagram(product_dot(PRODUCT)))

    from fsm.machines.rounds import MRTR_PRODUCT, ROUNDS

    register("rounds", lambda: machine_diagram(ROUNDS))
    register("mrtr-product-spec", lambda: Diagram(product_dot(MRTR_PRODUCT)))

    from fsm.machines.tasks import TASK, TASK_INPUT, TASKS_PRODUCT

    register("task", lambda: machine_diagram(TASK))
    register("task-input", lambda: machine_diagram(TASK_INPUT))
    register("tasks-product-spec", lambda: Diagram(product_dot(TASKS_PRODUCT)))


_builtin()


def _model_diagrams() -> None:
    """The reachable product of the guarded model, and every expected counterexample of
    the faulty-client models highlighted on their reachable graphs (the shipped models)."""
    from fsm.machines.resumption import TRANSPORT
    from fsm.render import models as m

    def product() -> Diagram:
        model = m.model_named("guarded", "guarded[inclusive,silent,rpc,answers]")
        graph = m.product_grid(
            m.projected_graph(
                model,
                m.guard_view,
                "guarded-product",
                "the reachable product configurations of the guarded client "
                "(transport / liveness of the request) and the moves out of each",
                terminal=lambda group: group in TRANSPORT.terminal,
            )
        )
        return Diagram(grid_dot(graph, corner="liveness \\ transport"), state_graph_mermaid(graph))

    def counterexample(file: str, name: str, prop: str, view: m.View = m.client_view) -> Producer:
        def produce() -> Diagram:
            model = m.model_named(file, name)
            graph = m.projected_graph(model, view, f"{name}-{prop}")
            result = {r.name: r for r in m.violations(model)}[prop]
            title = f"{name}: {prop} violated (steps numbered as fsm check prints them)"
            trace = m.counterexample_trace(result, view, title)
            return trace_diagram(m.around(graph, trace), trace)

        return produce

    register("guarded-product", product)
    for file, name in (
        ("seed_incident", "seed-incident"),
        ("mcp_sdk_2_3", "mcp-sdk-2.3.0"),
        ("mcp_sdk_1_x", "mcp-sdk-1.x"),
    ):
        for prop in m.model_named(file, name).expected_violations:
            register(f"cex-{name}-{prop.lower()}", counterexample(file, name, prop))
    # The MRTR era: the measured driver re-prompting a re-asking tool's question, and
    # sending a late answer into expired state.
    from fsm.render.mrtr_views import mrtr_view

    for variant, prop in (("reasking-tool", "P2"), ("reject-expired", "P6")):
        name = f"mcp-sdk-2.3.0-mrtr[{variant}]"
        producer = counterexample("mcp_sdk_2_3_mrtr", name, prop, mrtr_view)
        register(f"cex-mcp-sdk-2.3.0-mrtr-{variant}-{prop.lower()}", producer)
    # The tasks era: the ext-tasks requester presenting an answered question again under
    # a new key, and an answered key after a restart.
    from fsm.render.tasks_views import tasks_view

    for variant in ("reask", "crash"):
        name = f"ext-tasks-0.2.2[{variant}]"
        producer = counterexample("ext_tasks_0_2_2", name, "P2", tasks_view)
        register(f"cex-ext-tasks-0.2.2-{variant}-p2", producer)


_model_diagrams()
