"""Deterministic DOT text for machines, explored state graphs, traces and the product.

The same input always gives byte-identical text: no timestamps, ids derived from names
(``machine.state``; state-graph node ids as given), statements in declaration order.

* :func:`machine_dot` draws one :class:`~fsm.machines.spec.MachineSpec`;
* :func:`state_graph_dot` draws a generic :class:`~fsm.render.graph.StateGraph`;
* :func:`trace_dot` highlights a :class:`~fsm.render.graph.Trace` on either;
* :func:`product_dot` draws a :class:`~fsm.machines.spec.ProductSpec`'s synchronisations.
"""

from __future__ import annotations

from fsm.machines.spec import MachineSpec
from fsm.render.graph import StateGraph, Trace
from fsm.render.machine import machine_dot
from fsm.render.product import product_dot
from fsm.render.stategraph import state_graph_dot

__all__ = ["machine_dot", "product_dot", "state_graph_dot", "trace_dot"]


def trace_dot(target: MachineSpec | StateGraph, trace: Trace, *, title: str = "") -> str:
    """DOT of ``target`` with ``trace`` highlighted: step ``n`` is an edge labelled
    ``"n. label"`` (1-based), loop steps orange, dashed and suffixed ``" (loop)"``, the
    loop's first state marked ``loop start``, everything off the path grey.

    Raises :class:`~fsm.render.graph.TraceError` if a step is not a transition of the
    machine (matched on source and trigger) or an edge of the graph.
    """
    if isinstance(target, MachineSpec):
        return machine_dot(target, trace=trace, rankdir="TB", title=title)
    return state_graph_dot(target, trace=trace, title=title)
