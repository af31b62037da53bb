"""``python -m fsm demo [--json]``: the seed incident, plain client vs guarded client.

Runs the ``seed`` scenario (:mod:`fsm.demo.seed`) twice against a real mcp 2.3.0
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
expired state and a restart between rounds, plain ``Client.call_tool`` vs guarded.

Exit status: 0 when the guarded run behaves (one presentation, one outcome, no property
violation), 1 otherwise, 2 when the optional ``mcp`` extra is not installed or the
arguments are bad. Takes a few seconds; all traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import sys
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
    from fsm.demo import mrtr_scene
    from fsm.demo.rig import capturing_guarded_client, plain_client, run_scenario
    from fsm.demo.seed import seed

    sessions: list[GuardedSession] = []
    plain = await run_scenario(seed, plain_client)
    guarded = await run_scenario(seed, capturing_guarded_client(sessions))
    found = [f"{v.name} at observation {n}: {v.why}" for n, _, v in sessions[0].violations]
    mrtr = await mrtr_scene.scene()
    return {"plain": _side(plain), "guarded": _side(guarded, found), "mrtr": mrtr}


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


def _table(report: dict[str, Any]) -> str:
    width = 50
    lines = [f"{'':<14}{'plain mcp 2.3.0 client':<{width}}guarded (fsm.adapters.mcp2)"]
    lines.append("-" * (14 + 2 * width))
    for what, label in (
        ("presentations", "presented"),
        ("answer_posts", "answer POSTs"),
        ("resumes", "resumes"),
        ("outcome", "outcome"),
    ):
        left, right = _cell(report["plain"], what), _cell(report["guarded"], what)
        for i in range(max(len(left), len(right))):
            a = left[i] if i < len(left) else ""
            b = right[i] if i < len(right) else ""
            if len(a) > width - 2:
                a = a[: width - 5] + "..."
            lines.append(f"{label if i == 0 else '':<14}{a:<{width}}{b}")
    violations = report["guarded"].get("violations") or []
    lines.append("")
    lines.append(
        "guarded event log: " + ("conforms to P1-P7" if not violations else "; ".join(violations))
    )
    return "\n".join(lines)


def behaves(report: dict[str, Any]) -> bool:
    """One presentation, one outcome, no property violation on the guarded side (and,
    in the MRTR scene, no question shown twice)."""
    from fsm.demo import mrtr_scene

    g = report["guarded"]
    return (
        len(g["presentations"]) == 1
        and g["outcome"]["kind"] in ("result", "error")
        and not g.get("violations")
        and mrtr_scene.behaves(report.get("mrtr", {}))
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
        from fsm.demo import mrtr_scene

        print(_table(report))
        print()
        print(mrtr_scene.table(report["mrtr"]))
    return 0 if behaves(report) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
