"""DOT for a :class:`~fsm.machines.spec.ProductSpec`'s declared synchronisations.

Layout contract: each machine is a cluster (its transitions thin and grey, as
context); every synchronisation row gets an id (``B1``.. for broadcasts, ``C1``.. for
couplings) and is drawn twice:

* as coloured dashed edges across the clusters: a broadcast is an event node with one
  purple edge per fired ``(machine, trigger)`` to each state that trigger can lead to;
  a coupling is an ochre edge from each of its ``when_states`` to each state its
  ``then_trigger`` leads to, labelled with the condition on the target machine;
* as a row of the table node below the machines (id, kind, scope, rule, meaning).
"""

from __future__ import annotations

from fsm.machines.spec import Broadcast, Coupling, MachineSpec, ProductSpec
from fsm.render import _dot as d
from fsm.render.machine import machine_body, node_id


def _dests(machine: MachineSpec, trigger: str, sources: frozenset[str] | None = None) -> list[str]:
    """States ``trigger`` can lead to (from ``sources`` if given), in declaration order."""
    ends = {
        t.dest
        for t in machine.transitions
        if t.trigger == trigger and (sources is None or t.source in sources)
    }
    return [s for s in machine.states if s in ends]


def _states_text(machine: MachineSpec, states: frozenset[str]) -> str:
    if states == frozenset(machine.states) - machine.terminal:
        return f"{machine.name} not terminal"
    ordered = [s for s in machine.states if s in states]
    return (
        f"{machine.name} in {{{', '.join(ordered)}}}"
        if len(ordered) > 1
        else (f"{machine.name} {ordered[0]}")
    )


def _broadcast_rule(b: Broadcast) -> str:
    return f"on {b.event}: " + ", ".join(f"{m}.{t}" for m, t in b.fires)


def _coupling_rule(product: ProductSpec, c: Coupling) -> str:
    when = _states_text(product.machine(c.when_machine), c.when_states)
    then = _states_text(product.machine(c.then_machine), c.then_states)
    return f"{when} and {then}: {c.then_machine}.{c.then_trigger}"


def _cell(text: str, *, width: int = 0, bold_colour: str = "") -> str:
    body = d.html_escape(d.wrap(text, width) if width else text)
    body = body.replace("\n", '<BR ALIGN="LEFT"/>')
    if bold_colour:
        body = f'<FONT COLOR="{bold_colour}"><B>{body}</B></FONT>'
    return f'<TD ALIGN="LEFT" BALIGN="LEFT">{body}</TD>'


def _table(product: ProductSpec) -> str:
    """An HTML-like label: one row per synchronisation."""
    head = "".join(
        f'<TD ALIGN="LEFT"><B>{h}</B></TD>' for h in ("row", "kind", "scope", "rule", "meaning")
    )
    rows = [f"<TR>{head}</TR>"]
    for i, b in enumerate(product.broadcasts, start=1):
        cells = [
            _cell(f"B{i}", bold_colour=d.SYNC_BROADCAST),
            _cell("broadcast"),
            _cell(b.scope),
            _cell(_broadcast_rule(b), width=36),
            _cell(b.doc, width=40),
        ]
        rows.append("<TR>" + "".join(cells) + "</TR>")
    for i, c in enumerate(product.couplings, start=1):
        cells = [
            _cell(f"C{i}", bold_colour=d.SYNC_COUPLING),
            _cell("coupling"),
            _cell(c.scope),
            _cell(_coupling_rule(product, c), width=36),
            _cell(c.doc, width=40),
        ]
        rows.append("<TR>" + "".join(cells) + "</TR>")
    key = d.html_escape(d.wrap(_KEY, 110)).replace("\n", '<BR ALIGN="LEFT"/>')
    rows.append(f'<TR><TD COLSPAN="5" ALIGN="LEFT" BALIGN="LEFT">{key}</TD></TR>')
    return (
        '<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="4" COLOR="#999999">'
        + "".join(rows)
        + "</TABLE>>"
    )


_KEY = (
    "purple dashed arrow: broadcast; the event fires the trigger on every non-terminal "
    "instance in scope.  Ochre dashed arrow: coupling; fires while the joint configuration "
    "holds.  Grey: each machine's own transitions (labelled in its own diagram); dashed box: "
    "fires from every state inside; double border: terminal."
)


def product_dot(product: ProductSpec, *, title: str = "") -> str:
    """Deterministic DOT text for ``product``'s synchronisations (see the module docstring)."""
    dot = d.Dot()
    d.header(dot, product.name, rankdir="TB", label=title or _title(product))
    for machine in product.machines:
        _machine_cluster(dot, machine)
    # Synchronisation rows sit in one row of boxes below the machines; every arrow
    # between a row and a state is declared state -> row (dir=back for arrows into a
    # state) so the rows rank below the terminal states they act on.
    sync: dict[str, d.Attr] = {"style": "dashed", "penwidth": 1.8, "fontsize": 10}
    box: dict[str, d.Attr] = {"style": "filled", "fontsize": 11}
    purple: dict[str, d.Attr] = {"color": d.SYNC_BROADCAST, "fontcolor": d.SYNC_BROADCAST}
    ochre: dict[str, d.Attr] = {"color": d.SYNC_COUPLING, "fontcolor": d.SYNC_COUPLING}
    for i, b in enumerate(product.broadcasts, start=1):
        row = f"sync.B{i}"
        dot.node(
            row,
            {
                **box,
                **purple,
                "label": f"B{i}  on {b.event}\n(scope: {b.scope})",
                "fillcolor": "#efe6f7",
                "tooltip": b.doc,
            },
        )
        for name, trigger in b.fires:
            machine = product.machine(name)
            for dest in _dests(machine, trigger):
                dot.edge(
                    node_id(machine, dest),
                    row,
                    {**sync, **purple, "dir": "back", "label": trigger, "tooltip": b.doc},
                )
    for i, c in enumerate(product.couplings, start=1):
        row = f"sync.C{i}"
        when, then = product.machine(c.when_machine), product.machine(c.then_machine)
        dot.node(
            row,
            {
                **box,
                **ochre,
                "label": f"C{i}  {c.name}\n(scope: {c.scope})",
                "fillcolor": "#fbf1d9",
                "tooltip": c.doc,
            },
        )
        for src in [s for s in when.states if s in c.when_states]:
            dot.edge(node_id(when, src), row, {**sync, **ochre, "label": "when", "tooltip": c.doc})
        cond = _states_text(then, c.then_states)
        for dest in _dests(then, c.then_trigger, c.then_states):
            dot.edge(
                node_id(then, dest),
                row,
                {
                    **sync,
                    **ochre,
                    "dir": "back",
                    "label": f"{c.then_trigger}\nif {cond}",
                    "tooltip": c.doc,
                },
            )
    rows = [f"sync.B{i}" for i in range(1, len(product.broadcasts) + 1)]
    rows += [f"sync.C{i}" for i in range(1, len(product.couplings) + 1)]
    dot.line("{rank=same; " + "; ".join(d.quote(r) for r in rows) + "}")
    dot.node("sync.table", {"shape": "plaintext", "label": _table(product), "fontsize": 10})
    for r in rows:
        dot.edge(r, "sync.table", {"style": "invis"})
    dot.close()
    return dot.text()


def _machine_cluster(dot: d.Dot, machine: MachineSpec) -> None:
    dot.open(f"subgraph {d.quote(f'cluster_machine_{machine.name}')}")
    dot.defaults(
        "graph",
        {
            "label": machine.name,
            "fontsize": 13,
            "style": "rounded,filled",
            "fillcolor": d.GROUP_FILL,
            "color": d.GREY,
        },
    )
    machine_body(dot, machine, muted=True)
    dot.close()


def _title(product: ProductSpec) -> str:
    return f"{product.name}: {product.doc}" if product.doc else product.name
