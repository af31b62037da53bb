"""Low-level DOT text helpers shared by the diagram builders (not public API).

Every builder emits one statement per line, in an order fixed by its input, so the same
input always gives byte-identical text. Identifiers and strings are always quoted.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

Attr = str | int | float | bool

FONT = "Helvetica"

# Palette: one place for every colour the diagrams use.
INK = "#222222"
GREY = "#b5b5b5"
GREY_TEXT = "#9a9a9a"
TERMINAL_FILL = "#e8e8e8"
BAD_FILL = "#f9d0d0"
BAD_LINE = "#b22222"
GROUP_FILL = "#f6f8fb"
FANIN_LINE = "#8a9bb0"
PATH = "#1f5fbf"
LOOP = "#d9480f"
SYNC_BROADCAST = "#6a3d9a"
SYNC_COUPLING = "#b8860b"


def quote(text: str) -> str:
    """``text`` as a DOT double-quoted string; ``\\n`` in ``text`` becomes a DOT line break."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def html_escape(text: str) -> str:
    """``text`` escaped for a DOT HTML-like label."""
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def _value(value: Attr) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value.startswith("<") and value.endswith(">"):  # HTML-like label, emitted raw
        return value
    return quote(value)


def attrs(values: Mapping[str, Attr]) -> str:
    """`` [k=v, ...]`` in the mapping's order (empty string for no attributes)."""
    if not values:
        return ""
    return " [" + ", ".join(f"{k}={_value(v)}" for k, v in values.items()) + "]"


def wrap(text: str, width: int = 26) -> str:
    """``text`` broken into lines of at most ``width`` characters (on spaces)."""
    return "\n".join(textwrap.wrap(text, width=width, break_on_hyphens=False)) or text


def edge_label(trigger: str, guard: str) -> str:
    """``trigger [guard]``, the guard wrapped onto its own lines when long."""
    if not guard:
        return trigger
    return f"{trigger}\n" + wrap(f"[{guard}]")


class Dot:
    """An append-only list of DOT lines with indentation for nested blocks."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._depth = 0

    def line(self, text: str) -> None:
        """Append one statement at the current depth."""
        self.lines.append("  " * self._depth + text)

    def open(self, header: str) -> None:
        """Start a block: ``header {``."""
        self.line(header + " {")
        self._depth += 1

    def close(self) -> None:
        """End the innermost block."""
        self._depth -= 1
        self.line("}")

    def node(self, node_id: str, values: Mapping[str, Attr]) -> None:
        """A node statement."""
        self.line(quote(node_id) + attrs(values))

    def edge(self, src: str, dst: str, values: Mapping[str, Attr]) -> None:
        """A directed edge statement."""
        self.line(f"{quote(src)} -> {quote(dst)}" + attrs(values))

    def defaults(self, kind: str, values: Mapping[str, Attr]) -> None:
        """``graph``/``node``/``edge`` default attributes."""
        self.line(kind + attrs(values))

    def text(self) -> str:
        """The DOT text, newline-terminated."""
        return "\n".join(self.lines) + "\n"


def path_edge(label: str, in_loop: bool, tooltip: str | None = None) -> dict[str, Attr]:
    """The attributes of a counterexample's step: its label (and tooltip), drawn in the
    path's colour, or dashed in the loop's colour for a step of a lasso's loop."""
    colour = LOOP if in_loop else PATH
    a: dict[str, Attr] = {"label": label}
    if tooltip is not None:
        a["tooltip"] = tooltip
    a.update(color=colour, fontcolor=colour, penwidth=2.4, fontsize=11)
    if in_loop:
        a["style"] = "dashed"
    return a


def header(dot: Dot, name: str, *, rankdir: str = "LR", label: str = "") -> None:
    """Open a ``digraph`` with the shared look (font, sizes, spacing)."""
    dot.open(f"digraph {quote(name)}")
    graph: dict[str, Attr] = {
        "rankdir": rankdir,
        "fontname": FONT,
        "fontsize": 14,
        "labelloc": "t",
        "nodesep": 0.35,
        "ranksep": 0.45,
        "compound": True,
        "newrank": True,
        "bgcolor": "white",
    }
    if label:
        graph["label"] = label
    dot.defaults("graph", graph)
    dot.defaults(
        "node",
        {"fontname": FONT, "fontsize": 12, "shape": "box", "style": "rounded", "color": INK},
    )
    dot.defaults("edge", {"fontname": FONT, "fontsize": 10, "color": INK, "arrowsize": 0.7})
