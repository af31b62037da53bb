"""The unmodified mcp 2.3.0 client against the harness: what it actually does.

Each test drives one scenario of :mod:`support.scenarios` (faults by explicit command,
synchronised on observed traffic) and asserts the behaviour measured in the project's
mcp facts notes: duplicate presentation of a dead elicitation through the stale resume
cursor, 202 for late answers, transport death on a failed answer POST, 404 after session
expiry with no re-initialisation.  These document the *problem*; the guarded client must
later be run through the same scenarios with a different client factory.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator

import anyio
import pytest

from fsm.wire.proxy import ConnectionFault, HttpFault
from support.scenarios import (
    CONFIRM,
    EXHAUSTED,
    ClientEnv,
    ElicitAnswer,
    PresentationRequest,
    Rig,
    ScenarioClient,
    ScenarioResult,
    plain_client,
    run_progress_stream,
    run_scenario,
)

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]


def _only_key(result: ScenarioResult) -> tuple[str | None, str]:
    keys = list(result.presentation_counts)
    assert len(keys) == 1, keys
    return keys[0]


async def test_seed_dead_elicitation_presented_twice() -> None:
    """Silent deadline fires while disconnected; the stale cursor replays the dead request."""
    r = await run_scenario("seed", plain_client)

    session_id, request_id = _only_key(r)
    assert r.session_ids == [session_id]
    assert request_id == "1"
    assert r.presentation_counts[(session_id, "1")] == 2  # same elicitation, same id, twice
    assert [p.cancelled for p in r.presentations] == [False, False]

    # two resumes, both from the cursor of the POST stream's priming event: the second
    # did not advance past what the first one delivered (the stale-cursor bug)
    assert len(r.resumes) == 2
    first, second = r.resumes
    assert first.cursor == second.cursor
    assert first.status == second.status == 200
    assert first.outcome == second.outcome == "cut_abrupt"
    assert set(first.delivered) & set(second.delivered)  # the elicitation event, twice

    # both answers are for the dead request, and both are accepted on the wire
    assert [a.request_id for a in r.answers] == [1, 1]
    assert [a.status for a in r.answers] == [202, 202]
    assert all(
        a.body["result"] == {"action": "accept", "content": {"confirm": True}} for a in r.answers
    )

    # the server had already given up, silently, and ignored both answers
    kinds = [e.kind for e in r.server_log]
    assert "deadline_fired" in kinds and "elicit_answered" not in kinds
    assert not any(
        e.kind == "stored" and e.detail.get("what") == "notifications/cancelled"
        for e in r.server_log
    )

    assert r.outcome.kind == "error"
    assert r.outcome.code == -32000
    assert r.outcome.text == EXHAUSTED


async def test_replay_carries_request_then_its_cancellation() -> None:
    """Cancel-emitting deadline: the replay holds the request followed by its cancel."""
    r = await run_scenario("replayed_cancel", plain_client)

    session_id, _ = _only_key(r)
    # the plain client dispatches the replayed request again (a second presentation) and
    # the replayed cancel interrupts only that newest handler; the first stays open
    assert r.presentation_counts[(session_id, "1")] == 2
    assert [p.cancelled for p in r.presentations] == [False, True]
    assert r.presentations[0].answer == CONFIRM

    replay = r.resumes[1]
    datas = [e.data for e in r.traffic if e.kind == "sse_event" and e.exchange == replay.exchange]
    methods = [d for d in datas if d]
    assert "elicitation/create" in methods[0]
    assert "notifications/cancelled" in methods[1]
    assert '"requestId":1' in methods[1].replace(" ", "")

    # the still-open first presentation is answered late: 202, dropped by the server
    assert [(a.request_id, a.status) for a in r.answers] == [(1, 202)]
    assert r.outcome.code == -32000 and r.outcome.text == EXHAUSTED


async def test_answer_post_connection_error_kills_transport() -> None:
    r = await run_scenario("answer_conn_error", plain_client)

    assert list(r.presentation_counts.values()) == [1]
    assert len(r.answers) == 1
    assert r.answers[0].status is None and r.answers[0].fault == "connection:close"
    # no retry of the answer, no re-prompt: the whole session is gone
    assert r.outcome.error_type == "MCPError"
    assert r.outcome.code == -32000
    assert r.outcome.text == "Connection closed"
    assert r.resumes == []


async def test_session_expired_mid_interaction() -> None:
    r = await run_scenario("session_expired", plain_client)

    assert list(r.presentation_counts.values()) == [1]
    # the stream ends cleanly, two resume GETs get 404, then the client gives up
    assert [x.status for x in r.resumes] == [404, 404]
    assert r.resumes[0].cursor == r.resumes[1].cursor
    assert r.outcome.code == -32000 and r.outcome.text == EXHAUSTED
    # the late answer is rejected with the session-level 404, which the client ignores
    assert len(r.answers) == 1
    answer = r.answers[0]
    assert answer.status == 404
    assert answer.response_body == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "Session not found"},
    }
    # and it never starts a new session
    assert r.probe is not None
    assert (r.probe.code, r.probe.text) == (-32600, "Session not found")
    inits = [
        e
        for e in r.traffic
        if e.kind == "request" and isinstance(e.json, dict) and e.json.get("method") == "initialize"
    ]
    assert len(inits) == 1


async def test_happy_path() -> None:
    r = await run_scenario("happy", plain_client)

    assert list(r.presentation_counts.values()) == [1]
    assert [(a.request_id, a.status) for a in r.answers] == [(1, 202)]
    assert r.resumes == []
    assert r.outcome.kind == "result" and not r.outcome.is_error
    assert r.outcome.text == "Deleted 3 files: a.txt, b.txt, c.txt"


# --------------------------------------------------------------------------- harness checks


@contextlib.asynccontextmanager
async def _presented(rig: Rig) -> AsyncIterator[list[object]]:
    """The plain client's ``delete_files`` (deadline silent) running in the background,
    its question presented: the list its result goes in once it returns (the block's
    end waits for it)."""
    async with plain_client(rig.env()) as client, anyio.create_task_group() as tg:
        out: list[object] = []

        async def call() -> None:
            out.append(await client.call_tool("delete_files", {"deadline": "silent"}))

        tg.start_soon(call)
        await rig.user.wait_presented(1)
        yield out


async def test_http_fault_on_answer_is_ignored_by_plain_client(rig: Rig) -> None:
    """A 500 wrapping "no such pending request" is swallowed; the call then hangs on."""
    fault = HttpFault.jsonrpc_error(500, -32602, "no such pending request", 1)
    async with _presented(rig) as results:
        rule = rig.proxy.fail_next_answer(fault)
        rig.user.answer_open()
        ev = await rig.proxy.wait_for(lambda e: e.kind == "fault")
        assert ev.status == 500 and rule.exhausted
        # the server never saw the answer: its waiter is still pending
        pending = await rig.controller.wait_pending(state="asking")
        # nothing else happens on the client side; end it with the deadline
        await rig.controller.fire_deadline(pending)
        await rig.controller.wait_for(lambda e: e.kind == "tool_finished")
    assert results and "expired" in str(results[0])
    assert rig.user.presentations[0].answer == CONFIRM


async def test_connection_reset_fault_and_retry_after_are_relayed(rig: Rig) -> None:
    """Proxy self-check: faults match only their targets; other traffic flows."""
    import httpx2

    rig.proxy.fail_next(HttpFault.too_many_requests(3), lambda ex: ex.method == "GET")
    resp = await rig.http.get(rig.proxy.url)
    assert resp.status_code == 429 and resp.headers["retry-after"] == "3"
    rig.proxy.fail_next(ConnectionFault("reset"), lambda ex: ex.method == "GET")
    with pytest.raises(httpx2.TransportError):
        await rig.http.get(rig.proxy.url)
    # an ordinary request still reaches the server (405/406-class answer from mcp)
    resp = await rig.http.get(rig.proxy.url, headers={"accept": "application/json"})
    assert resp.status_code >= 400


async def test_clean_cut_resumes_with_advanced_cursor(rig: Rig) -> None:
    """A clean end of the POST stream: the client resumes from the newest event id."""
    async with _presented(rig) as out:
        post = rig.proxy.current_sse()
        last_id = post.sse_event_ids[-1]
        await rig.proxy.cut(post, "clean")
        resume = await rig.proxy.wait_for(
            lambda e: e.kind == "request" and e.method == "GET" and e.last_event_id is not None
        )
        assert resume.last_event_id == last_id
        await rig.proxy.wait_for(
            lambda e: e.kind == "sse_event" and e.exchange == resume.exchange and e.data == ""
        )
        rig.user.answer_open()
    assert "Deleted 3 files" in str(out[0])
    assert len(rig.user.presentations) == 1


async def test_a_progress_stream_of_no_events_waits_for_none() -> None:
    run = await run_progress_stream(0)
    assert (run.result_text, run.received, run.relayed_events) == ("streamed 0", 0, 0)


@pytest.mark.timeout(300)  # a hang guard: 10,000 events on a loaded machine may take minutes
async def test_progress_stream_10k() -> None:
    """Benchmark: 10,000 progress notifications relayed incrementally by the proxy."""
    run = await run_progress_stream(10_000)
    assert run.result_text == "streamed 10000"
    assert run.received == 10_000
    assert run.relayed_events == 10_000
    print(f"\n10k progress notifications through proxy: {run.seconds:.2f}s")


async def test_demo_timer_deadline_expires_without_commands(rig: Rig) -> None:
    """The optional timer (for the demo) fires the deadline without any test command."""
    async with plain_client(rig.env()) as client:
        with anyio.fail_after(10):
            result = await client.call_tool(
                "delete_files", {"deadline": "cancel", "deadline_seconds": 0.05}
            )
    assert "confirmation expired" in str(result)
    # on a slow machine the cancel can overtake the presentation; either way nothing is
    # left open: the courtesy cancel (or the session close) interrupted the handler
    assert len(rig.user.presentations) <= 1
    assert all(p.cancelled for p in rig.user.presentations)


# --------------------------------------------------------------------------- the seam


@contextlib.asynccontextmanager
async def _dedup_client(env: ClientEnv) -> AsyncIterator[ScenarioClient]:
    """A toy non-plain factory: the plain client with a per-(session, id) seen-set.

    Not the library's guard: it only proves the scenarios run any factory to completion.
    A repeated delivery is never shown again; it gets the first presentation's answer.
    """
    first: dict[tuple[str | None, str], asyncio.Future[ElicitAnswer]] = {}

    async def on_present(req: PresentationRequest) -> ElicitAnswer:
        key = (req.session_id, str(req.request_id))
        if key in first:
            return await asyncio.shield(first[key])
        fut: asyncio.Future[ElicitAnswer] = asyncio.get_running_loop().create_future()
        first[key] = fut
        answer = await env.on_present(req)
        fut.set_result(answer)
        return answer

    async with plain_client(dataclasses.replace(env, on_present=on_present)) as client:
        yield client


async def test_scenarios_accept_another_client_factory() -> None:
    r = await run_scenario("seed", _dedup_client)
    assert list(r.presentation_counts.values()) == [1]
    assert [a.status for a in r.answers] == [202, 202]  # the stored answer, resubmitted
    assert r.outcome.code == -32000


async def test_answer_delivered_but_reported_failed(rig: Rig) -> None:
    """``deliver=True``: the server gets the answer, the client is told 500 (and ignores it)."""
    async with _presented(rig) as out:
        rig.proxy.fail_next_answer(HttpFault(500, {"error": "lost"}, deliver=True))
        rig.user.answer_open()
    assert "Deleted 3 files" in str(out[0])
    answer = next(ex for ex in rig.proxy.exchanges.values() if ex.is_answer)
    assert answer.status == 500
    delivered = [e for e in rig.proxy.log if e.detail == "delivered-then-faulted"]
    assert [e.status for e in delivered] == [202]
