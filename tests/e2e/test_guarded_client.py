"""The guarded client side by side with the plain mcp 2.3.0 client, scenario by scenario.

Each test runs one scenario of :mod:`fsm.mcpsdk.scenarios` twice against a fresh real
server behind the fault proxy: once with :func:`~fsm.mcpsdk.scenarios.plain_client`, once
with :func:`~fsm.mcpsdk.scenarios.guarded_client` (the same SDK client wrapped by
:func:`fsm.mcpsdk.adapter.guarded_session`). Faults are driven by explicit commands and
every wait is on observed traffic; nothing sleeps to synchronise.
"""

from __future__ import annotations

import pytest

from fsm.mcpsdk.scenarios import (
    CONFIRM,
    ScenarioResult,
    guarded_client,
    plain_client,
    run_scenario,
)

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(90)]

EXHAUSTED = "SSE stream ended and reconnection attempts were exhausted"
EXPIRED_RESULT = "Kept 3 files: confirmation expired"
DELETED = "Deleted 3 files: a.txt, b.txt, c.txt"
ANSWER = {"action": "accept", "content": {"confirm": True}}


async def _both(name: str) -> tuple[ScenarioResult, ScenarioResult]:
    return await run_scenario(name, plain_client), await run_scenario(name, guarded_client)


def _cursors_never_go_back(r: ScenarioResult) -> None:
    """Each resume starts from the newest event id the previous connection delivered."""
    for before, after in zip(r.resumes, r.resumes[1:], strict=False):
        if before.delivered:
            assert after.cursor == before.delivered[-1], (before, after)


async def test_seed_presented_once_and_the_server_decides() -> None:
    plain, guarded = await _both("seed")

    # plain: the stale cursor replays the dead elicitation, presented twice
    assert list(plain.presentation_counts.values()) == [2]
    assert plain.resumes[0].cursor == plain.resumes[1].cursor
    assert (plain.outcome.code, plain.outcome.text) == (-32000, EXHAUSTED)

    # guarded: one presentation; every resume from the newest id, so the dead request is
    # never replayed; the guard keeps resuming (each resume made progress) and the real
    # server completes the call with the tool's own "expired" result
    assert list(guarded.presentation_counts.values()) == [1]
    assert [p.cancelled for p in guarded.presentations] == [False]
    assert len(guarded.resumes) == 3
    assert len({x.cursor for x in guarded.resumes}) == 3
    _cursors_never_go_back(guarded)
    assert [x.status for x in guarded.resumes] == [200, 200, 200]
    # the late answer is submitted once, and (as the server does) accepted then dropped
    assert [(a.request_id, a.status) for a in guarded.answers] == [(1, 202)]
    assert guarded.answers[0].body["result"] == ANSWER
    assert guarded.outcome.kind == "result" and not guarded.outcome.is_error
    assert guarded.outcome.text == EXPIRED_RESULT


async def test_replayed_cancel_is_never_presented() -> None:
    plain, guarded = await _both("replayed_cancel")

    assert list(plain.presentation_counts.values()) == [2]
    assert [p.cancelled for p in plain.presentations] == [False, True]
    assert [(a.request_id, a.status) for a in plain.answers] == [(1, 202)]

    # guarded: the replay carries only the cancel (cursor is current): the open prompt is
    # withdrawn, the request is never presented again and no answer is ever sent
    assert list(guarded.presentation_counts.values()) == [1]
    assert [p.cancelled for p in guarded.presentations] == [True]
    assert guarded.presentations[0].answer is None
    assert guarded.answers == []
    _cursors_never_go_back(guarded)
    replay = guarded.resumes[1]
    datas = [
        e.data for e in guarded.traffic if e.kind == "sse_event" and e.exchange == replay.exchange
    ]
    assert not any("elicitation/create" in d for d in datas)
    assert any("notifications/cancelled" in d for d in datas)
    # the cancel withdrew the request, not the call: the server completes it
    assert guarded.outcome.kind == "result" and guarded.outcome.text == EXPIRED_RESULT


async def test_answer_connection_error_resubmits_the_same_answer() -> None:
    plain, guarded = await _both("answer_conn_error")

    assert (plain.outcome.code, plain.outcome.text) == (-32000, "Connection closed")
    assert [a.fault for a in plain.answers] == ["connection:close"]

    # guarded: the SDK's transport survives; the stored answer is resubmitted (bounded by
    # max_submit_attempts), the user is never asked again, the call completes
    assert list(guarded.presentation_counts.values()) == [1]
    assert guarded.presentations[0].answer == CONFIRM
    assert [a.status if a.status is not None else a.fault for a in guarded.answers] == [
        "connection:close",
        202,
    ]
    assert all(a.request_id == 1 and a.body["result"] == ANSWER for a in guarded.answers)
    assert guarded.resumes == []
    assert guarded.outcome.kind == "result" and guarded.outcome.text == DELETED


async def test_session_expired_ends_with_one_typed_error() -> None:
    plain, guarded = await _both("session_expired")

    assert [x.status for x in plain.resumes] == [404, 404]
    assert (plain.outcome.code, plain.outcome.text) == (-32000, EXHAUSTED)

    # guarded: one SessionExpiredError for the call, from the first 404
    assert guarded.outcome.kind == "error"
    assert guarded.outcome.error_type == "SessionExpiredError"
    assert "expired" in guarded.outcome.text
    assert [x.status for x in guarded.resumes] == [404]
    # nothing goes on the wire after the 404: no resume, no answer, no probe, no DELETE
    refused = guarded.resumes[0].exchange
    response = next(e for e in guarded.traffic if e.kind == "response" and e.exchange == refused)
    later = [e for e in guarded.traffic if e.kind == "request" and e.seq > response.seq]
    assert later == []
    # the open prompt was withdrawn; its answer is never submitted
    assert list(guarded.presentation_counts.values()) == [1]
    assert [p.cancelled for p in guarded.presentations] == [True]
    assert guarded.answers == []
    assert guarded.probe is not None and guarded.probe.error_type == "SessionExpiredError"


async def test_happy_path_same_result() -> None:
    plain, guarded = await _both("happy")

    for r in (plain, guarded):
        assert list(r.presentation_counts.values()) == [1]
        assert [(a.request_id, a.status) for a in r.answers] == [(1, 202)]
        assert r.resumes == []
    assert plain.outcome == guarded.outcome
    assert guarded.outcome.kind == "result" and guarded.outcome.text == DELETED
    assert plain.answers[0].body == guarded.answers[0].body
