"""Event logs: the guarded client's conform to P1-P7; the plain client's seed run does not.

The guarded client's log (JSON Lines, :mod:`fsm.trace`) of every scenario is parsed back
and fed to a fresh :class:`fsm.properties.Monitor`: no violation, and every interaction
that began ended exactly once. The plain client keeps no log, so its seed run is rebuilt
as observations from what the proxy and the user saw, and the monitor flags P2 at the
second presentation of the same request.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from fsm import properties as P
from fsm import trace
from fsm.adapters.mcp2 import GuardedSession
from fsm.audit import audit_text
from fsm.wire.rig import SSE_PROTOCOL
from support.scenarios import (
    SCENARIOS,
    ScenarioResult,
    capturing_guarded_client,
    plain_client,
    run_scenario,
)
from support.session_endings import close_with_the_get_stream_open

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(90)]


async def _guarded_log(name: str) -> tuple[ScenarioResult, str, GuardedSession]:
    sessions: list[GuardedSession] = []
    result = await run_scenario(name, capturing_guarded_client(sessions))
    (session,) = sessions
    return result, session.event_log(), session


SSE_SCENARIOS = sorted(n for n, s in SCENARIOS.items() if s.protocol == SSE_PROTOCOL)
"""The scenarios a guarded session's event log records (the MRTR ones run no session)."""


@pytest.mark.parametrize("name", SSE_SCENARIOS)
async def test_guarded_logs_conform(name: str) -> None:
    result, text, session = await _guarded_log(name)
    assert session.violations == []

    lines = text.splitlines()
    header = json.loads(lines[0])
    assert (header["kind"], header["schema"]) == ("header", trace.SCHEMA)
    observations = [obs for _, obs, _ in trace.loads(text)]
    assert observations, name

    monitor = P.Monitor(session.guard.monitor.budgets)
    for obs in observations:
        monitor.observe(obs)
    assert monitor.violations == []
    assert monitor.finish() == ()

    began = [o.interaction for o in observations if isinstance(o, P.Began)]
    ended = [o.interaction for o in observations if isinstance(o, P.Ended)]
    # every interaction that began ended exactly once (a stream without origin, like
    # the standalone GET, has no Began but may end when the session dies)
    assert len(ended) == len(set(ended))
    assert len(began) == len(set(began)) and set(began) <= set(ended)

    presented = [o.key for o in observations if isinstance(o, P.Presented)]
    assert len(presented) == len(set(presented)) == len(result.presentations) == 1
    resumed = [o for o in observations if isinstance(o, P.Resumed)]
    assert [r.cursor for r in resumed] == [x.cursor for x in result.resumes]
    submitted = [o for o in observations if isinstance(o, P.Submitted)]
    assert len(submitted) == len(result.answers)
    if name == "session_expired":
        assert any(isinstance(o, P.SessionGone) for o in observations)
        assert [(o.outcome, o.reason) for o in observations if isinstance(o, P.Ended)][-1] == (
            "failed",
            "session-expired",
        )


def _plain_observations(r: ScenarioResult) -> tuple[list[P.Observation], list[int]]:
    """The plain client's seed run as observations, in wire order.

    Returns the observations and the (0-based) indices of its ``Presented`` ones.
    """
    session = r.session_ids[0]
    call = next(
        e
        for e in r.traffic
        if e.kind == "request"
        and isinstance(e.json, dict)
        and e.json.get("method") == "tools/call"
        and (e.json.get("params") or {}).get("name") == "delete_files"
    )
    stream = f"post:{call.json['id']}"
    resumes = {x.exchange for x in r.resumes}
    obs: list[P.Observation] = [P.Began(stream)]
    presented_at: list[int] = []
    shown = iter(r.presentations)
    for e in r.traffic:
        if e.kind == "request" and e.exchange in resumes:
            assert e.last_event_id is not None
            obs.append(P.Resumed(stream, e.last_event_id))
        if e.kind != "sse_event" or (e.exchange != call.exchange and e.exchange not in resumes):
            continue
        if e.event_id is not None:
            obs.append(P.EventSeen(stream, e.event_id))
        message: Any = json.loads(e.data) if e.data else None
        if isinstance(message, dict) and message.get("method") == "elicitation/create":
            key = (session, message["id"])
            p = next(shown)
            obs.append(P.Delivered(key, stream, p.at, replayed=e.exchange in resumes))
            presented_at.append(len(obs))
            obs.append(P.Presented(key, p.at))
            if p.answer is not None:
                answer = {"action": p.answer.action, "content": p.answer.content}
                obs.append(P.Answered(key, answer))
                obs.append(P.Submitted(key, answer))
    obs.append(P.Ended(stream, "failed", r.outcome.text))
    return obs, presented_at


async def test_plain_seed_run_violates_p2_at_the_second_presentation() -> None:
    r = await run_scenario("seed", plain_client)
    observations, presented_at = _plain_observations(r)
    assert len(presented_at) == 2

    monitor = P.Monitor()
    for obs in observations:
        monitor.observe(obs)
    p2 = [(n, v) for n, _, v in monitor.violations if v.name == "P2"]
    # Monitor numbers observations from 1: the second Presented is the violating one
    assert [n for n, _ in p2] == [presented_at[1] + 1]
    assert isinstance(observations[presented_at[1]], P.Presented)
    # the stale cursor of the second resume is flagged too (P7), before the duplicate
    names = [v.name for _, _, v in monitor.violations]
    assert names == ["P7", "P2"]

    # the same observations survive the JSON Lines round trip with the same verdict
    text = trace.dumps((o, 0.0) for o in observations)
    again = P.Monitor()
    for _, obs, _ in trace.loads(text):
        again.observe(obs)
    assert [(n, v.name) for n, _, v in again.violations] == [
        (n, v.name) for n, _, v in monitor.violations
    ]


# ----------------------------------------------------------------- a session's close


async def test_a_session_close_ends_the_get_stream_closed_and_the_log_is_in_time_order() -> None:
    """Leaving ``guarded_session`` ends the session (its DELETE): the standalone GET that
    was open ends ``closed`` (reason ``session-closed``), nothing is recorded failed, and
    the log, live and kept alike, has a wall-clock time on every record, in time order."""
    closed = await close_with_the_get_stream_open()
    kept = closed.kept
    assert closed.deletes == 1
    assert closed.failures == {} and closed.violations == []
    assert closed.live == kept
    closed.assert_get_ended_closed()

    header, *records = [json.loads(line) for line in kept.splitlines()]
    assert header["schema"] == trace.SCHEMA == "dead-or-resumable/trace/2"
    assert records[-1]["interaction"] == "get"  # the last thing that happened

    stamps = [r["t"] for r in records]
    walls = [r["wall"] for r in records]
    assert stamps == sorted(stamps) and walls == sorted(walls)
    first, last = (datetime.fromisoformat(w.replace("Z", "+00:00")) for w in (walls[0], walls[-1]))
    assert closed.before - 1.0 <= first.timestamp() <= last.timestamp() <= closed.after + 1.0

    audited = audit_text(kept, complete=True)
    assert audited.ok, audited.finding
