"""DOT for a :class:`~fsm.render.graph.StateGraph` laid out as a grid: a table whose
columns are the nodes' groups and whose rows are the nodes' rows (for a product of two
machines: one machine's states across, the other's down).

Layout contract: deterministic; columns and rows in order of first appearance; each
cell is one node (a node without a group or a row is refused): its moves out, one line
each, ``move -> destination`` where the destination is written as its column when it
stays in the row, as its row when it stays in the column, as ``column / row``
otherwise; parallel edges are one line each. The initial node says ``start``, terminal
nodes are shaded, cells no node occupies are left blank. A graph of a few dozen edges
stays legible where a drawn graph's labels would overlap.
"""

from __future__ import annotations

from fsm.render import _dot as d
from fsm.render.graph import GraphNode, StateGraph


def _where(src: GraphNode, dst: GraphNode) -> str:
    if dst.row == src.row:
        return dst.group
    if dst.group == src.group:
        return dst.row
    return f"{dst.group} / {dst.row}"


def _cell(graph: StateGraph, node: GraphNode | None) -> str:
    if node is None:
        return f'<TD BGCOLOR="white"><FONT COLOR="{d.GREY_TEXT}">unreachable</FONT></TD>'
    lines = ["<B>start</B>"] if node.initial else []
    lines += [
        f"{d.html_escape(e.label)} &#8594; {d.html_escape(_where(node, graph.node(e.dst)))}"
        for e in graph.edges
        if e.src == node.id
    ]
    if node.terminal:
        lines.append("<I>terminal</I>")
    fill = d.TERMINAL_FILL if node.terminal else d.GROUP_FILL
    text = '<BR ALIGN="LEFT"/>'.join(lines) + '<BR ALIGN="LEFT"/>'
    return f'<TD BGCOLOR="{fill}" ALIGN="LEFT" BALIGN="LEFT">{text}</TD>'


def grid_dot(graph: StateGraph, *, corner: str = "", title: str = "") -> str:
    """Deterministic DOT text for ``graph`` as a grid (see the module docstring);
    ``corner`` labels the top-left cell (what the rows and columns are)."""
    loose = [n.id for n in graph.nodes if not (n.group and n.row)]
    if loose:
        raise ValueError(f"grid {graph.name!r}: nodes without a group and a row: {loose}")
    at = {(n.group, n.row): n for n in graph.nodes}
    head = "".join(f"<TD><B>{d.html_escape(c)}</B></TD>" for c in graph.groups)
    rows = [f"<TR><TD>{d.html_escape(corner)}</TD>{head}</TR>"]
    for row in graph.rows:
        cells = "".join(_cell(graph, at.get((column, row))) for column in graph.groups)
        rows.append(f"<TR><TD><B>{d.html_escape(row)}</B></TD>{cells}</TR>")
    table = (
        '<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="6" '
        f'COLOR="{d.GREY}">' + "".join(rows) + "</TABLE>>"
    )
    dot = d.Dot()
    label = title or (f"{graph.name}: {graph.doc}" if graph.doc else graph.name)
    d.header(dot, graph.name, rankdir="TB", label=label)
    dot.node("grid", {"shape": "plaintext", "label": table})
    dot.close()
    return dot.text()
