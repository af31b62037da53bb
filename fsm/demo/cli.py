"""``python -m fsm demo [--json]``: the seed incident, plain client vs guarded client.

Runs the ``seed`` scenario (:mod:`fsm.wire.scenarios`) twice against a real mcp 2.3.0
server on 127.0.0.1 behind the fault proxy: once with the unmodified SDK client, once with
the same client wrapped by :func:`fsm.adapters.mcp2.guarded_session`. Prints, side by
side, how often the same elicitation was presented, the answer POSTs and their statuses,
every resume with its ``Last-Event-ID`` cursor, and how the call ended.

``--json`` prints one object ``{"plain": {...}, "guarded": {...}}``; each side has
``presentations`` (per presentation: session, request id, whether it was withdrawn),
``answer_posts`` (request id, status or fault), ``resumes`` (cursor, status, how the
connection ended), ``outcome`` and ``seconds``; the guarded side also ``violations`` (of
P1-P7, from its event log: empty). A second scene (:mod:`fsm.demo.mrtr_scene`, key
``"mrtr"``) runs protocol 2026-07-28's input rounds: a re-asking tool, a late answer into
expired state and a restart between rounds, plain ``Client.call_tool`` vs guarded. A third
(:mod:`fsm.demo.tasks_scene`, key ``"tasks"``) runs the tasks extension: a superseded key,
a re-asked question, a refused update and a failed task, the plain requester vs guarded.
The tables fit 100 columns, name the fault each scene injects and mark the client that
behaves; a summary closes them.

Exit status: 0 when the guarded run behaves (one presentation, one outcome, no property
violation), 1 otherwise, 2 when the optional ``mcp`` extra is not installed or the
arguments are bad. Takes a few seconds; all traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

from fsm._extras import require


def _side(result: Any, violations: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "presentations": [
            {
                "session": p.request.session_id,
                "request_id": p.request.request_id,
                "withdrawn": p.cancelled,
                "answered": p.answer is not None,
            }
            for p in result.presentations
        ],
        "answer_posts": [
            {"request_id": a.request_id, "status": a.status, "fault": a.fault}
            for a in result.answers
        ],
        "resumes": [
            {"cursor": x.cursor, "status": x.status, "ended": x.outcome} for x in result.resumes
        ],
        "outcome": {
            "kind": result.outcome.kind,
            "text": result.outcome.text,
            "error_type": result.outcome.error_type,
            "code": result.outcome.code,
        },
        "seconds": round(result.seconds, 3),
    }
    if violations is not None:
        out["violations"] = violations
    return out


async def _run() -> dict[str, Any]:
    from fsm.adapters.mcp2 import GuardedSession
    from fsm.demo import mrtr_scene, tasks_scene
    from fsm.wire.rig import capturing_guarded_client, plain_client, run_scenario
    from fsm.wire.scenarios import seed

    sessions: list[GuardedSession] = []
    plain = await run_scenario(seed, plain_client)
    guarded = await run_scenario(seed, capturing_guarded_client(sessions))
    found = [f"{v.name} at observation {n}: {v.why}" for n, _, v in sessions[0].violations]
    mrtr = await mrtr_scene.scene()
    tasks = await tasks_scene.scene()
    return {"plain": _side(plain), "guarded": _side(guarded, found), "mrtr": mrtr, "tasks": tasks}


def _cell(side: dict[str, Any], what: str) -> list[str]:
    if what == "presentations":
        rows = [
            f"#{i + 1} request {p['request_id']}" + (" (withdrawn)" if p["withdrawn"] else "")
            for i, p in enumerate(side["presentations"])
        ]
    elif what == "answer_posts":
        rows = [
            f"id {a['request_id']} -> {a['status'] if a['status'] is not None else a['fault']}"
            for a in side["answer_posts"]
        ]
    elif what == "resumes":
        rows = [f"Last-Event-ID {r['cursor']} -> {r['status']}" for r in side["resumes"]]
    else:
        o = side["outcome"]
        if o["kind"] == "result":
            rows = [f"result: {o['text']}"]
        else:
            code = f" {o['code']}" if o["code"] is not None else ""
            rows = [f"{o['error_type']}{code}: {o['text']}"]
    return rows or ["-"]


SEED_FAULT = (
    "the call's stream is cut after its first event and each resume after the tool asks "
    "'Delete 3 files?'; the question is replayed from a stale cursor after its deadline "
    "passed (the seed incident)"
)
"""What the proxy does to the first scene, in a line."""


def _table(report: dict[str, Any]) -> str:
    from fsm.demo.table import Row, side_by_side

    rows = [
        Row(label, _cell(report["plain"], what), _cell(report["guarded"], what))
        for what, label in (
            ("presentations", "presented"),
            ("answer_posts", "answer POSTs"),
            ("resumes", "resumes"),
            ("outcome", "outcome"),
        )
    ]
    table = side_by_side(
        "scene 1: protocol 2025-11-25 (SSE resumption with Last-Event-ID)",
        SEED_FAULT,
        ("plain mcp 2.3.0 client", "guarded (fsm.adapters.mcp2)"),
        rows,
    )
    violations = report["guarded"].get("violations") or []
    verdict = "conforms to P1-P7" if not violations else "; ".join(violations)
    return f"{table}\nguarded event log: {verdict}"


def summary(report: dict[str, Any]) -> str:
    """The closing lines: what each client did to the person in each scene."""

    def times(n: int) -> str:
        return "once" if n == 1 else "twice" if n == 2 else f"{n} times"

    def ended(side: dict[str, Any]) -> str:
        o = side["outcome"]
        return (
            "the tool's result"
            if o["kind"] == "result"
            else _cell(side, "outcome")[0].split(":")[0]
        )

    plain, guarded = report["plain"], report["guarded"]
    lines = [
        "summary",
        f"  scene 1: the plain client asked the same question "
        f"{times(len(plain['presentations']))} and ended with {ended(plain)}; the guarded "
        f"client asked it {times(len(guarded['presentations']))} and ended with "
        f"{ended(guarded)}.",
    ]
    mrtr = report.get("mrtr") or {}
    if mrtr:
        twice = {
            side: sum(c[side]["prompts"] > 1 for c in mrtr.values())
            for side in ("plain", "guarded")
        }
        lines.append(
            f"  scene 2: of {len(mrtr)} cases, the plain client asked a question twice in "
            f"{twice['plain']}, the guarded client in {twice['guarded']}."
        )
    tasks = report.get("tasks") or {}
    if tasks:
        from fsm.demo.tasks_scene import mishandled

        bad = {
            side: sum(mishandled(case, c[side]) for case, c in tasks.items())
            for side in ("plain", "guarded")
        }
        lines.append(
            f"  scene 3: of {len(tasks)} cases, the plain requester showed a question again or "
            f"had an answer dropped in {bad['plain']}, the guarded client in {bad['guarded']}."
        )
    verdict = "behaves" if behaves(report) else "DOES NOT behave"
    lines.append(f"  the guarded client {verdict} (exit status {0 if behaves(report) else 1}).")
    return "\n".join(
        textwrap.fill(line, 100, subsequent_indent="    ") if len(line) > 100 else line
        for line in lines
    )


def behaves(report: dict[str, Any]) -> bool:
    """One presentation, one outcome, no property violation on the guarded side (and,
    in the MRTR scene, no question shown twice)."""
    from fsm.demo import mrtr_scene, tasks_scene

    g = report["guarded"]
    return (
        len(g["presentations"]) == 1
        and g["outcome"]["kind"] in ("result", "error")
        and not g.get("violations")
        and mrtr_scene.behaves(report.get("mrtr", {}))
        and tasks_scene.behaves(report.get("tasks", {}))
    )


def main(argv: list[str] | None = None) -> int:
    """Run the demo; see the module docstring for output and exit status."""
    parser = argparse.ArgumentParser(
        prog="fsm demo",
        description="the seed incident: plain vs guarded client",
        epilog="exit status: 0 the guarded run behaves, 1 it does not, "
        "2 the 'mcp' extra is missing or bad arguments",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    try:
        require("mcp", "fsm demo", "mcp", "uvicorn", "httpx2", "anyio")
    except ModuleNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 2
    import logging

    import anyio

    logging.disable(logging.WARNING)  # the SDK logs the faults the demo injects
    try:
        report = anyio.run(_run)
    finally:
        logging.disable(logging.NOTSET)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        from fsm.demo import mrtr_scene, tasks_scene

        print(_table(report))
        print()
        print(mrtr_scene.table(report["mrtr"]))
        print()
        print(tasks_scene.table(report["tasks"]))
        print()
        print(summary(report))
    return 0 if behaves(report) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
