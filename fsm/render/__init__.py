"""Diagrams of the declared machines, their product, explored state graphs and traces.

Text outputs (DOT, Mermaid) are pure Python; SVG/PNG need the optional ``diagrams``
extra (pygraphviz), imported lazily by :mod:`fsm.render.svg`.
"""

from __future__ import annotations

from fsm.render.dot import machine_dot, product_dot, state_graph_dot, trace_dot
from fsm.render.graph import GraphEdge, GraphNode, StateGraph, Trace, TraceError, TraceStep
from fsm.render.mermaid import mermaid
from fsm.render.registry import PRODUCERS, Diagram, Producer, register
from fsm.render.svg import RenderEngineMissing

__all__ = [
    "PRODUCERS",
    "Diagram",
    "GraphEdge",
    "GraphNode",
    "Producer",
    "RenderEngineMissing",
    "StateGraph",
    "Trace",
    "TraceError",
    "TraceStep",
    "machine_dot",
    "mermaid",
    "product_dot",
    "register",
    "state_graph_dot",
    "trace_dot",
]
