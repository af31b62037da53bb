"""The legend cluster every diagram carries: sample nodes and edges drawn in the very
styles the diagram uses, each labelled with what the style means."""

from __future__ import annotations

from fsm.render import _dot as d
from fsm.render.graph import Trace


def legend(
    dot: d.Dot,
    prefix: str,
    *,
    fan_in: bool = False,
    trace: Trace | None = None,
    bad: bool = False,
    groups: bool = False,
) -> None:
    """Emit ``cluster_legend`` into ``dot``; ids are prefixed ``legend.`` + ``prefix``."""

    def nid(name: str) -> str:
        return f"legend.{prefix}.{name}"

    small: dict[str, d.Attr] = {"fontsize": 10}
    dot.open(f"subgraph {d.quote('cluster_legend')}")
    dot.defaults(
        "graph",
        {
            "label": "legend",
            "fontsize": 11,
            "style": "rounded",
            "color": d.GREY,
            "fontcolor": "#555555",
            "margin": 8,
        },
    )
    dot.node(nid("init"), {"shape": "point", "width": 0.12, "label": ""})
    dot.node(nid("state"), {"label": "state", **small})
    dot.node(
        nid("terminal"),
        {
            "label": "terminal",
            "peripheries": 2,
            "style": "rounded,filled",
            "fillcolor": d.TERMINAL_FILL,
            **small,
        },
    )
    dot.edge(nid("init"), nid("state"), {"label": "initial", "fontsize": 9})
    dot.edge(nid("state"), nid("terminal"), {"label": "trigger [guard]", "fontsize": 9})
    if bad:
        dot.node(
            nid("bad"),
            {
                "label": "violates a property",
                "style": "rounded,filled",
                "fillcolor": d.BAD_FILL,
                "color": d.BAD_LINE,
                **small,
            },
        )
    if trace is not None and trace.violates:
        dot.node(
            nid("violates"),
            {"label": "violates here", "color": d.BAD_LINE, "penwidth": 3, **small},
        )
    notes: list[str] = []
    if fan_in:
        notes.append("dashed box: its arrow fires\nfrom every state inside")
    if groups:
        notes.append("shaded box: states sharing\none group")
    if notes:
        dot.node(
            nid("notes"),
            {
                "shape": "plaintext",
                "label": "\n".join(notes),
                "fontsize": 9,
                "fontcolor": "#555555",
            },
        )
    if trace is not None:
        samples: list[tuple[str, str, dict[str, d.Attr]]] = [
            ("path", "1. a step, numbered", {"color": d.PATH, "penwidth": 2.4}),
        ]
        if trace.loop_start is not None:
            samples.append(
                (
                    "loop",
                    "5. step (loop):\nrepeats forever",
                    {"color": d.LOOP, "penwidth": 2.4, "style": "dashed"},
                )
            )
        samples.append(("off", "not on the trace", {"color": d.GREY}))
        for name, label, style in samples:
            colour = style["color"]
            for end in ("tail", "head"):
                dot.node(
                    nid(f"{name}.{end}"),
                    {"label": "", "shape": "point", "width": 0.06, "color": colour},
                )
            fontcolor = d.GREY_TEXT if name == "off" else colour
            dot.edge(
                nid(f"{name}.tail"),
                nid(f"{name}.head"),
                {"label": label, "fontcolor": fontcolor, "fontsize": 9, **style},
            )
    dot.close()
