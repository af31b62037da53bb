"""The demo's third scene: the tasks extension (protocol 2026-07-28), the plain requester
(:class:`fsm.wire.tasks_plain.PlainTasks`, what an application on the raw SDK does) vs
:class:`fsm.adapters.tasks.GuardedTasks`, against the test bed's real mcp 2.3.0 tasks
server on 127.0.0.1 (:mod:`fsm.wire.tasks_server`). Four cases, each run once per side:

* ``superseded``: the server replaces the prompt's key by a reworded question while the
  user thinks;
* ``re-asked``: after the answer, the server asks the same question under a new key;
* ``update refused``: the server refuses the ``tasks/update`` carrying the answer (-32603);
* ``task failed``: the task fails while the user thinks.

The user thinks :data:`THINK_S` seconds before answering a prompt the server changes
under them (a person's pace, not a fault: the fault is the server's command, run when the
prompt appears). Each side reports its prompts, how many were withdrawn, how many answers
the server dropped (acknowledged, then ignored) and how the call ended. :func:`scene`
returns the report; :func:`table` renders it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
from mcp import types
from mcp.client.session import ClientRequestContext

from fsm import actions as act
from fsm.adapters.tasks import GuardedTasks
from fsm.errors import InteractionFailed
from fsm.tasks.task import TaskAction
from fsm.wire.sdk import modern_client
from fsm.wire.tasks_plain import PlainTasks
from fsm.wire.tasks_server import TasksServer, running_tasks_server

THINK_S = 0.5
"""How long the user looks at a prompt the server changes under them (5 poll intervals)."""

FAULTS: dict[str, str] = {
    "superseded": "fault: the server supersedes the key with a reworded question while the "
    "user thinks",
    "re-asked": "fault: after the answer, the server asks the same question under a new key",
    "update refused": "fault: the server refuses the tasks/update carrying the answer (-32603)",
    "task failed": "fault: the task fails while the user thinks",
}
"""The fault each case injects, in a line."""


def _fault(case: str, server: TasksServer) -> Callable[[], None] | None:
    """What runs when the first prompt appears (``None``: the fault is set up before)."""
    if case == "superseded":

        def supersede() -> None:
            server.supersede(server.latest().task_id)

        return supersede
    if case == "task failed":
        return lambda: server.fail(server.latest().task_id)
    return None


async def _side(server: TasksServer, case: str, guarded: bool) -> dict[str, Any]:
    prompts: list[str] = []
    withdrawn: list[TaskAction] = []
    fault = _fault(case, server)
    if case == "re-asked":
        server.reask_next(1)
    elif case == "update refused":
        server.refuse_updates(1)
    dropped = len(server.log.ignored)

    async def user(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        prompts.append(str(context.request_id))
        if fault is not None and len(prompts) == 1:
            fault()
            await anyio.sleep(THINK_S)
        return types.ElicitResult(action="accept", content={})

    def seen(action: TaskAction) -> None:
        if isinstance(action, act.Withdraw):
            withdrawn.append(action)

    extension = GuardedTasks(on_action=seen) if guarded else PlainTasks()
    outcome: str
    async with modern_client(
        server.url, elicitation_callback=user, extensions=[extension]
    ) as client:
        try:
            with anyio.fail_after(20):
                result = await client.call_tool("delete_files", {"count": 3})
            text = result.content[0]
            outcome = f"result: {text.text}" if isinstance(text, types.TextContent) else "result"
        except Exception as exc:  # a typed error names its reason, the SDK's its code
            code = getattr(exc, "code", None)
            reason = exc.reason if isinstance(exc, InteractionFailed) else None
            detail = f" ({reason})" if reason else f" {code}" if code is not None else ""
            outcome = f"{type(exc).__name__}{detail}"
    return {
        "prompts": prompts,
        "withdrawn": len(withdrawn),
        "dropped": len(server.log.ignored) - dropped,
        "outcome": outcome,
    }


async def scene() -> dict[str, Any]:
    """Run every case on both sides; ``{case: {"plain": {...}, "guarded": {...}}}``."""
    report: dict[str, Any] = {}
    async with running_tasks_server(poll_interval_ms=100) as server:
        for case in FAULTS:
            report[case] = {
                side: await _side(server, case, side == "guarded") for side in ("plain", "guarded")
            }
    return report


def _cell(s: dict[str, Any]) -> str:
    n = len(s["prompts"])
    shown = f"{n} prompt{'s' if n != 1 else ''}"
    if s["withdrawn"]:
        shown += f" ({s['withdrawn']} withdrawn)"
    if s["dropped"]:
        shown += f", {s['dropped']} answer{'s' if s['dropped'] != 1 else ''} dropped"
    return f"{shown}, {s['outcome']}"


def table(report: dict[str, Any]) -> str:
    """The scene as a side-by-side table (:func:`fsm.demo.table.side_by_side`)."""
    from fsm.demo.table import Row, side_by_side

    rows = [
        Row(case, [_cell(sides["plain"])], [_cell(sides["guarded"])], note=FAULTS.get(case))
        for case, sides in report.items()
    ]
    return side_by_side(
        "scene 3: the tasks extension (input requests across polls)",
        None,
        ("plain requester (raw mcp 2.3.0)", "guarded (fsm.adapters.tasks)"),
        rows,
    )


def mishandled(case: str, side: dict[str, Any]) -> bool:
    """The side showed a key twice, showed an answered question again under a new key
    (``re-asked``), or had an answer dropped."""
    keys: list[str] = side["prompts"]
    return (
        len(set(keys)) < len(keys)
        or (case == "re-asked" and len(keys) > 1)
        or bool(side["dropped"])
    )


def behaves(report: dict[str, Any]) -> bool:
    """The guarded side mishandles no case."""
    return not any(mishandled(case, sides["guarded"]) for case, sides in report.items())
