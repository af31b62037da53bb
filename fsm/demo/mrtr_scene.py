"""The demo's second scene: protocol 2026-07-28, plain ``Client.call_tool`` vs
:func:`fsm.adapters.mrtr.guarded_call_tool`, run as the MRTR wire scenarios
(:data:`fsm.wire.SCENARIOS`, on :mod:`fsm.wire.mrtr_rig`: a real mcp 2.3.0 server on
127.0.0.1). Three cases, each run once per side:

* ``re-asking tool`` (``mrtr_reask``): the tool asks the same question again after it
  was answered;
* ``late answer`` (``mrtr_expiry``): the user answers after the state's TTL (the server's
  states expire while the prompt is up; the client's clock says the question is 541 s
  old);
* ``restart`` (``mrtr_restart``): the server restarts (fresh key) while the prompt is up.

Each side reports how many prompts the user saw, how many the guarded rules withdrew, and
how the call ended. :func:`scene` returns the report; :func:`table` renders it.
"""

from __future__ import annotations

from typing import Any

from fsm import actions as act
from fsm import errors
from fsm.errors import InteractionFailed
from fsm.mrtr.call import MrtrAction
from fsm.wire import SCENARIOS, Outcome, plain_client
from fsm.wire.mrtr_rig import capturing_guarded_mrtr_client

CASES: tuple[tuple[str, str], ...] = (
    ("re-asking tool", "mrtr_reask"),
    ("late answer", "mrtr_expiry"),
    ("restart", "mrtr_restart"),
)
"""Each case and the wire scenario that runs it."""


def _ended(o: Outcome) -> str:
    """How the call ended, in a few words: a typed error of ``fsm`` names its reason,
    the SDK's its JSON-RPC code."""
    if o.kind == "result":
        return f"result: {o.text}" if o.text else "result"
    kind = getattr(errors, o.error_type or "", None)
    typed = isinstance(kind, type) and issubclass(kind, InteractionFailed)
    detail = f" ({o.reason})" if typed and o.reason else f" {o.code}" if o.code is not None else ""
    return f"{o.error_type}{detail}"


async def _side(scenario: str, guarded: bool) -> dict[str, Any]:
    actions: list[MrtrAction] = []
    client = capturing_guarded_mrtr_client(actions) if guarded else plain_client
    result = await SCENARIOS[scenario].run(client)
    withdrawn = sum(isinstance(a, act.Withdraw) for a in actions)
    return {
        "prompts": len(result.presentations),
        "withdrawn": withdrawn,
        "outcome": _ended(result.outcome),
    }


async def scene() -> dict[str, Any]:
    """Run every case on both sides; ``{case: {"plain": {...}, "guarded": {...}}}``."""
    return {
        case: {side: await _side(scenario, side == "guarded") for side in ("plain", "guarded")}
        for case, scenario in CASES
    }


FAULTS: dict[str, str] = {
    "re-asking tool": "fault: the tool asks the question it was answered again",
    "late answer": "fault: the server's state expires while the prompt is up; the answer "
    "comes 541 s late",
    "restart": "fault: the server restarts with a fresh key while the prompt is up",
}
"""The fault each case injects, in a line."""


def table(report: dict[str, Any]) -> str:
    """The scene as a side-by-side table (:func:`fsm.demo.table.side_by_side`)."""
    from fsm.demo.table import Row, side_by_side

    rows = []
    for case, sides in report.items():
        cells = []
        for side in ("plain", "guarded"):
            s = sides[side]
            shown = f"{s['prompts']} prompt{'s' if s['prompts'] != 1 else ''}"
            if s["withdrawn"]:
                shown += f" ({s['withdrawn']} withdrawn)"
            cells.append(f"{shown}, {s['outcome']}")
        rows.append(Row(case, [cells[0]], [cells[1]], note=FAULTS.get(case)))
    return side_by_side(
        "scene 2: protocol 2026-07-28 (input rounds, sealed requestState)",
        None,
        ("plain mcp 2.3.0 Client.call_tool", "guarded (fsm.adapters.mrtr)"),
        rows,
    )


def behaves(report: dict[str, Any]) -> bool:
    """The guarded side never shows a question twice and ends every case."""
    return all(sides["guarded"]["prompts"] <= 1 for sides in report.values())
