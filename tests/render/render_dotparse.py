"""A parser for the one-statement-per-line DOT the renderer emits (tests only)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_QUOTED = r'"((?:[^"\\]|\\.)*)"'
_EDGE = re.compile(rf"^\s*{_QUOTED} -> {_QUOTED}(?: \[(.*)\])?$")
_NODE = re.compile(rf"^\s*{_QUOTED}(?: \[(.*)\])?$")
_CLUSTER = re.compile(rf"^\s*subgraph {_QUOTED} \{{$")
_ATTR = re.compile(rf"(\w+)=(?:{_QUOTED}|(<.*>)|([^,\]]+))")


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def _attrs(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    out: dict[str, str] = {}
    for m in _ATTR.finditer(text):
        value = m.group(2) if m.group(2) is not None else (m.group(3) or m.group(4))
        out[m.group(1)] = _unescape(value) if m.group(2) is not None else value
    return out


@dataclass
class Edge:
    src: str
    dst: str
    attrs: dict[str, str]

    @property
    def label(self) -> str:
        return self.attrs.get("label", "")


@dataclass
class Parsed:
    edges: list[Edge] = field(default_factory=list)
    nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    clusters: dict[str, set[str]] = field(default_factory=dict)  # cluster -> nodes (deep)


def parse(dot: str) -> Parsed:
    """Edges, nodes and (deep) cluster membership of renderer-emitted DOT."""
    out = Parsed()
    stack: list[str] = []
    for line in dot.splitlines():
        if m := _CLUSTER.match(line):
            stack.append(_unescape(m.group(1)))
            out.clusters.setdefault(stack[-1], set())
        elif line.strip() == "}":
            if stack:
                stack.pop()
        elif m := _EDGE.match(line):
            out.edges.append(Edge(_unescape(m.group(1)), _unescape(m.group(2)), _attrs(m.group(3))))
        elif m := _NODE.match(line):
            name = _unescape(m.group(1))
            out.nodes[name] = _attrs(m.group(2))
            for cluster in stack:
                out.clusters[cluster].add(name)
    return out
