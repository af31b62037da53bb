"""The demo's second scene: protocol 2026-07-28, plain ``Client.call_tool`` vs
:func:`fsm.adapters.mrtr.guarded_call_tool`, against a real mcp 2.3.0 server on
127.0.0.1 (:mod:`fsm.wire.mrtr_server`). Three cases, each run once per side:

* ``re-asking tool``: the tool asks the same question again after it was answered;
* ``late answer``: the user answers after the state's TTL (the server's states expire
  while the prompt is up; the guarded side's clock says the question is 541 s old);
* ``restart``: the server restarts (fresh key) while the prompt is up.

Each side reports how many prompts the user saw, how many were withdrawn, and how the
call ended. :func:`scene` returns the report; :func:`table` renders it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp import types
from mcp.client.client import Client
from mcp.client.session import ClientRequestContext

from fsm import actions as act
from fsm.adapters.mrtr import guarded_call_tool
from fsm.errors import InteractionFailed
from fsm.mrtr.call import MrtrAction
from fsm.wire.mrtr_server import MrtrServer, running_mrtr_server

CASES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("re-asking tool", "reasking_delete", {"count": 3, "reasks": 1}),
    ("late answer", "delete_files", {"count": 3}),
    ("restart", "delete_files", {"count": 3}),
)


def _fault(case: str, server: MrtrServer, now: list[float]) -> Callable[[], Awaitable[None]]:
    async def fault() -> None:
        if case == "late answer":
            server.expire_states()
            now[0] += 541.0
        elif case == "restart":
            await server.restart()

    return fault


async def _side(
    server: MrtrServer, case: str, tool: str, args: dict[str, Any], guarded: bool
) -> dict[str, Any]:
    prompts: list[str] = []
    withdrawn: list[MrtrAction] = []
    now = [0.0]
    fault = _fault(case, server, now)

    async def user(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        prompts.append(str(params.message))
        await fault()
        return types.ElicitResult(action="accept", content={})

    def seen(action: MrtrAction) -> None:
        if isinstance(action, act.Withdraw):
            withdrawn.append(action)

    outcome: str
    async with Client(server.url, elicitation_callback=user) as client:
        try:
            if guarded:
                result = await guarded_call_tool(
                    client, tool, args, clock=lambda: now[0], on_action=seen
                )
            else:
                result = await client.call_tool(tool, args)
            text = result.content[0]
            outcome = f"result: {text.text}" if isinstance(text, types.TextContent) else "result"
        except Exception as exc:  # a typed error names its reason, the SDK's its code
            code = getattr(exc, "code", None)
            reason = exc.reason if isinstance(exc, InteractionFailed) else None
            detail = f" ({reason})" if reason else f" {code}" if code is not None else ""
            outcome = f"{type(exc).__name__}{detail}"
    return {"prompts": len(prompts), "withdrawn": len(withdrawn), "outcome": outcome}


async def scene() -> dict[str, Any]:
    """Run every case on both sides; ``{case: {"plain": {...}, "guarded": {...}}}``."""
    report: dict[str, Any] = {}
    async with running_mrtr_server(ttl=30.0) as server:
        for case, tool, args in CASES:
            report[case] = {
                side: await _side(server, case, tool, args, side == "guarded")
                for side in ("plain", "guarded")
            }
    return report


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
