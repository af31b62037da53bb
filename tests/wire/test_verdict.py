"""The verdict reads the wire in the proxy's order: a hand-written traffic log, each
observation one event away from breaking a property or not (no server, no client)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

pytest.importorskip("mcp")

from fsm.wire.proxy import TrafficEvent
from fsm.wire.rig import Outcome, Presentation, PresentationRequest, ScenarioResult
from fsm.wire.verdict import judge

SID = "s1"
ELICIT = {"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {}}
CANCEL = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}


def _event(seq: int, kind: str, exchange: int, method: str = "GET", **kw: Any) -> TrafficEvent:
    headers = {"mcp-session-id": SID, **kw.pop("headers", {})}
    return TrafficEvent(seq, kind, exchange, exchange, method, "/mcp", headers, **kw)


def _sse(seq: int, exchange: int, event_id: str, message: dict[str, Any] | None) -> TrafficEvent:
    data = json.dumps(message) if message is not None else ""
    return _event(seq, "sse_event", exchange, event_id=event_id, data=data)


CALL = [
    _event(1, "request", 1, "POST", json={"jsonrpc": "2.0", "id": 2, "method": "tools/call"}),
    _sse(2, 1, "ev1", None),
    _sse(3, 1, "ev2", ELICIT),
    _sse(4, 1, "ev3", CANCEL),
]


def _result(traffic: list[TrafficEvent], presented_at: list[int]) -> ScenarioResult:
    shown = [
        Presentation(i, PresentationRequest(SID, 1, "Delete 3 files?"), 0.0, seq=seq)
        for i, seq in enumerate(presented_at)
    ]
    ended = Outcome("result", "Kept 3 files: confirmation expired")
    return ScenarioResult("hand-written", ended, shown, [], [], [SID], traffic=traffic, ended_seq=9)


def test_a_presentation_before_the_cancel_was_relayed_is_no_violation() -> None:
    assert judge(_result(CALL, [3])).passed


def test_a_presentation_after_the_cancel_was_relayed_breaks_p1() -> None:
    verdict = judge(_result(CALL, [4]))
    assert list(verdict.broken) == ["P1"]


def test_a_second_presentation_of_the_key_breaks_p2() -> None:
    assert list(judge(_result(CALL[:3], [3, 3])).broken) == ["P2"]


def test_a_resume_from_an_older_cursor_breaks_p7() -> None:
    resume = _event(5, "request", 2, headers={"last-event-id": "ev1"})
    current = _event(5, "request", 2, headers={"last-event-id": "ev3"})
    assert list(judge(_result([*CALL, resume], [3])).broken) == ["P7"]
    assert judge(_result([*CALL, current], [3])).passed


def test_a_resume_after_the_session_was_gone_breaks_p3() -> None:
    gone = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}
    first = [
        _event(5, "request", 2, headers={"last-event-id": "ev3"}),
        _event(6, "response", 2, status=404),
        _event(7, "body", 2, json=gone),
        _event(8, "end", 2, detail="complete"),
    ]
    again = _event(9, "request", 3, headers={"last-event-id": "ev3"})
    assert judge(_result([*CALL, *first], [3])).passed
    assert list(judge(_result([*CALL, *first, again], [3])).broken) == ["P3"]


def test_a_call_that_never_ended_breaks_p5() -> None:
    result = _result(CALL, [3])
    result.outcome = Outcome("pending")
    assert list(judge(result).broken) == ["P5"]


def test_an_error_reply_to_a_question_is_no_answer() -> None:
    """A client whose handler was cancelled replies with a JSON-RPC error: no answer was
    submitted, so no answer was made up (P4); a result nobody gave is one."""
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": 0, "message": "Request cancelled"}}
    made_up = {"jsonrpc": "2.0", "id": 1, "result": {"action": "accept"}}
    replied = _event(5, "request", 2, "POST", json=error)
    assert judge(_result([*CALL[:3], replied], [3])).passed
    answered = _event(5, "request", 2, "POST", json=made_up)
    assert list(judge(_result([*CALL[:3], answered], [3])).broken) == ["P4"]


def _refused(seq: int, exchange: int) -> list[TrafficEvent]:
    conflict = {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": CONFLICT}}
    return [
        _event(seq, "request", exchange, headers={"last-event-id": "ev3"}),
        _event(seq + 1, "response", exchange, status=409),
        _event(seq + 2, "body", exchange, json=conflict),
        _event(seq + 3, "end", exchange, detail="complete"),
    ]


CONFLICT = "Conflict: Stream already has an active connection"


def test_resumes_after_a_server_still_holding_the_stream_spend_no_budget() -> None:
    """Five resumes, the first four refused by a server that still holds the old
    connection (the TypeScript SDK's 409): the four after a refusal are patient, the
    bounded L1 (three resumes without progress) does not count them; refused plainly
    (503), they break it."""
    held = [e for n in range(4) for e in _refused(10 + 4 * n, 2 + n)]
    last = _event(30, "request", 9, headers={"last-event-id": "ev3"})
    assert judge(_result([*CALL, *held, last], [3])).passed
    busy = [
        dataclasses.replace(e, status=503, json=None) if e.kind in ("response", "body") else e
        for e in held
    ]
    assert list(judge(_result([*CALL, *busy, last], [3])).broken) == ["L1"]
