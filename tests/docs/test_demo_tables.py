"""What ``fsm demo`` prints fits 100 columns, names each injected fault, marks the client
that behaves, never cuts an outcome short, and ends with a summary."""

from __future__ import annotations

from typing import Any

from fsm.demo import cli, mrtr_scene

LONG = "SSE stream ended and reconnection attempts were exhausted after the server stopped"


def _side(presented: int, outcome: dict[str, Any]) -> dict[str, Any]:
    return {
        "presentations": [{"session": "s", "request_id": 1, "withdrawn": False, "answered": True}]
        * presented,
        "answer_posts": [{"request_id": 1, "status": 202, "fault": None}] * presented,
        "resumes": [{"cursor": "ev3", "status": 200, "ended": "cut"}],
        "outcome": outcome,
        "seconds": 1.0,
        "violations": [],
    }


REPORT: dict[str, Any] = {
    "plain": _side(2, {"kind": "error", "text": LONG, "error_type": "MCPError", "code": -32000}),
    "guarded": _side(
        1,
        {
            "kind": "result",
            "text": "Kept 3 files: confirmation expired",
            "error_type": None,
            "code": None,
        },
    ),
    "mrtr": {
        case: {
            "plain": {"prompts": 2, "withdrawn": 0, "outcome": "result: " + LONG},
            "guarded": {"prompts": 1, "withdrawn": 1, "outcome": "RequestStateExpiredError"},
        }
        for case in mrtr_scene.FAULTS
    },
}


def test_the_demo_fits_100_columns_and_cuts_nothing() -> None:
    text = "\n".join((cli._table(REPORT), mrtr_scene.table(REPORT["mrtr"]), cli.summary(REPORT)))
    assert max(map(len, text.splitlines())) <= 100
    assert "..." not in text
    assert text.count("server stopped") == 1 + len(mrtr_scene.FAULTS)  # every outcome whole


def test_the_demo_names_its_faults_marks_the_good_client_and_sums_up() -> None:
    first, second = cli._table(REPORT), mrtr_scene.table(REPORT["mrtr"])
    assert "fault injected:" in first
    assert all(" ".join(f.split()) in " ".join(second.split()) for f in mrtr_scene.FAULTS.values())
    assert "guarded (fsm.adapters.mcp2) *" in first and "guarded (fsm.adapters.mrtr) *" in second
    summary = cli.summary(REPORT)
    assert summary.startswith("summary")
    assert "asked the same question twice" in summary and "asked it once" in summary
    assert "the guarded client behaves" in summary
