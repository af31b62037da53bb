"""The guarded client side by side with the plain mcp 2.3.0 client, scenario by scenario.

Each test runs one scenario of :mod:`support.scenarios` twice against a fresh real
server behind the fault proxy: once with :func:`~support.scenarios.plain_client`, once
with :func:`~support.scenarios.guarded_client` (the same SDK client wrapped by
:func:`fsm.adapters.mcp2.guarded_session`). Faults are driven by explicit commands and
every wait is on observed traffic; nothing sleeps to synchronise.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
import pytest
from mcp import MCPError
from sse_bodies import ScriptedBody, sse_event

from fsm import properties as P
from fsm.adapters.mcp2 import guarded_session
from fsm.errors import (
    ResumeBudgetSpentError,
    SessionExpiredError,
    StaleRequestError,
    SubmissionFailedError,
    UnknownPendingRequestError,
)
from fsm.sse.guard import GuardConfig
from fsm.wire.proxy import ConnectionFault, HttpFault, is_resume_get
from support.scenarios import (
    CONFIRM,
    EXHAUSTED,
    EXPIRED_RESULT,
    GUARDED_SCENARIO_CONFIG_KW,
    Rig,
    ScenarioResult,
    cursors_never_go_back,
    guarded_client,
    plain_client,
    run_scenario,
)

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(90)]

DELETED = "Deleted 3 files: a.txt, b.txt, c.txt"
ANSWER = {"action": "accept", "content": {"confirm": True}}


async def _both(name: str) -> tuple[ScenarioResult, ScenarioResult]:
    return await run_scenario(name, plain_client), await run_scenario(name, guarded_client)


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
    cursors_never_go_back(guarded)
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
    cursors_never_go_back(guarded)
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


# --------------------------------------------------------------------------- typed errors


async def _call_with_fault(rig: Rig, inject: Callable[[Rig], Awaitable[None]]) -> object:
    """Start ``delete_files`` with the guarded client, wait for the prompt, let
    ``inject`` break something, return what the call returned or raised."""
    ended = anyio.Event()
    out: list[object] = []
    async with guarded_client(rig.env()) as client, anyio.create_task_group() as tg:

        async def call() -> None:
            try:
                out.append(await client.call_tool("delete_files", {"deadline": "silent"}))
            except Exception as exc:
                out.append(exc)
            finally:
                ended.set()

        tg.start_soon(call)
        await rig.user.wait_presented(1)
        await inject(rig)
        with anyio.fail_after(20):
            await ended.wait()
        violations = client.session.violations  # type: ignore[attr-defined]
        assert violations == []
    return out[0]


async def test_terminal_rejection_of_the_answer_raises_unknown_pending(rig: Rig) -> None:
    async def reject(rig: Rig) -> None:
        rig.proxy.fail_next_answer(
            HttpFault.jsonrpc_error(500, -32602, "no such pending request", 1)
        )
        rig.user.answer_open()

    err = await _call_with_fault(rig, reject)
    assert isinstance(err, UnknownPendingRequestError)
    assert err.key == (rig.session_id(), 1)
    assert "jsonrpc-no-such-request" in str(err)
    answers = [ex for ex in rig.proxy.exchanges.values() if ex.is_answer]
    assert [ex.status for ex in answers] == [500]  # terminal: not resubmitted
    assert len(rig.user.presentations) == 1


async def test_retryable_answer_failures_are_bounded(rig: Rig) -> None:
    async def fail_three(rig: Rig) -> None:
        rig.proxy.fail_next_answer(HttpFault(503, b"busy"), times=3)
        rig.user.answer_open()

    err = await _call_with_fault(rig, fail_three)
    assert isinstance(err, SubmissionFailedError)
    assert err.key == (rig.session_id(), 1)
    answers = [ex for ex in rig.proxy.exchanges.values() if ex.is_answer]
    assert [ex.status for ex in answers] == [503, 503, 503]
    assert len({ex.body for ex in answers}) == 1  # the same answer every time
    assert len(rig.user.presentations) == 1


async def test_resumes_without_progress_are_bounded(rig: Rig) -> None:
    async def break_stream(rig: Rig) -> None:
        rig.proxy.fail_next(HttpFault(503, b"unavailable"), is_resume_get, times=10)
        await rig.proxy.cut(rig.proxy.current_sse(), "abrupt")

    err = await _call_with_fault(rig, break_stream)
    assert isinstance(err, ResumeBudgetSpentError)
    assert err.reason == "resume-budget-spent"
    resumes = [ex for ex in rig.proxy.exchanges.values() if ex.is_resume]
    assert [ex.status for ex in resumes] == [503, 503, 503]
    assert len({ex.last_event_id for ex in resumes}) == 1
    # the prompt died with its stream: withdrawn, never answered
    assert [p.cancelled for p in rig.user.presentations] == [True]
    assert not any(ex.is_answer for ex in rig.proxy.exchanges.values())


# --------------------------------------------------------------------------- stale replay


async def test_stale_replay_raises_stale_request_error() -> None:
    """A server that replays a request the client already holds, past its deadline.

    mcp 2.3.0 servers replay from the cursor the client sends, and the guarded client
    always sends the newest, so this needs a scripted server (``httpx2.MockTransport``,
    no network): it ignores ``Last-Event-ID`` and replays the whole stream.
    """
    now = [0.0]
    elicit = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "elicitation/create",
        "params": {
            "message": "Delete 3 files?",
            "requestedSchema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}},
        },
    }
    replay = [sse_event("e1"), sse_event("e2", elicit)]
    seen: list[tuple[str, str | None]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append((request.method, request.headers.get("last-event-id")))
        sse = {"content-type": "text/event-stream", "mcp-session-id": "S"}
        if request.method == "GET":
            if request.headers.get("last-event-id") is None:
                return httpx2.Response(405)
            now[0] = 100.0  # the user looked away; the deadline (60 s) passed
            return httpx2.Response(
                200,
                headers=sse,
                stream=ScriptedBody(replay, httpx2.ReadError("peer closed connection")),
            )
        if request.method == "DELETE":
            return httpx2.Response(200)
        body = json.loads(request.content)
        if body.get("method") == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "serverInfo": {"name": "scripted", "version": "0"},
            }
            return httpx2.Response(
                200,
                headers={"mcp-session-id": "S"},
                json={"jsonrpc": "2.0", "id": body["id"], "result": result},
            )
        if body.get("method") == "tools/call":
            return httpx2.Response(
                200,
                headers=sse,
                stream=ScriptedBody(replay, httpx2.ReadError("peer closed connection")),
            )
        return httpx2.Response(202)

    prompts: list[str] = []
    withdrawn = anyio.Event()

    async def on_elicit(context: Any, params: Any) -> Any:
        prompts.append(params.message)
        try:
            await anyio.sleep_forever()
        finally:
            withdrawn.set()

    config = GuardConfig(**GUARDED_SCENARIO_CONFIG_KW)
    async with (
        httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as http,
        guarded_session(
            "http://127.0.0.1:9/mcp",
            elicitation_callback=on_elicit,
            http_client=http,
            config=config,
            clock=lambda: now[0],
        ) as session,
    ):
        with anyio.fail_after(10), pytest.raises(StaleRequestError) as caught:
            await session.call_tool("delete_files", {})
        await withdrawn.wait()
        assert session.violations == []
    err = caught.value
    assert err.key == ("S", 7)
    assert any("deadline" in line for line in err.evidence)
    assert prompts == ["Delete 3 files?"]  # presented once, never again
    assert ("GET", "e2") in seen  # resumed from the newest id, not the priming one
    answers = [o for o, _ in session.observations() if isinstance(o, P.Submitted)]
    assert answers == []


async def test_request_post_connection_error_leaves_the_session_usable(rig: Rig) -> None:
    """A ``tools/call`` POST that gets no response fails that call only."""
    rig.proxy.fail_next(ConnectionFault("close"), lambda ex: ex.rpc_method == "tools/call")
    async with guarded_client(rig.env()) as client:
        with anyio.fail_after(10), pytest.raises(MCPError) as caught:
            await client.call_tool("ping", {})
        assert caught.value.error.code == -32000
        assert "request POST failed" in caught.value.error.message
        with anyio.fail_after(10):
            result = await client.call_tool("ping", {})
    assert "pong" in str(result)


async def test_a_session_that_expired_between_calls_raises_the_typed_error() -> None:
    """The server ends the session while no call is open: the next call raises
    ``SessionExpiredError`` (the typed error docs/adapter.md promises for every call after
    a 404, an ``MCPError`` too), not the SDK's own error for the 404, and so does the one
    after it."""
    from mcp.types import ElicitResult

    from fsm.wire.server import running_server

    async def on_elicit(context: Any, params: Any) -> Any:
        return ElicitResult(action="accept", content={"confirm": True})

    async with (
        running_server() as server,
        guarded_session(server.url, elicitation_callback=on_elicit) as session,
    ):
        first = await session.call_tool("delete_files", {"files": ["a.txt"]})
        assert "Deleted 1" in first.content[0].text
        assert session.session_id is not None
        await server.controller.expire_session(session.session_id)
        for _ in range(2):
            with anyio.fail_after(10), pytest.raises(SessionExpiredError):
                await session.call_tool("delete_files", {"files": ["b.txt"]})
