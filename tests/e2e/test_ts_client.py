"""The official TypeScript SDK client, both lines, against the harness: v1
(``@modelcontextprotocol/sdk`` 1.32.2) and v2 (``@modelcontextprotocol/client`` 2.4.0),
each test run with each (the ``sdk`` fixture).

What it really does, plain, behind the fault proxy (no guard, no gateway), pinned like
``test_plain_client.py`` pins the Python SDK. The client runs in ``node``
(``tests/ts_client/client.mjs``, driven by :mod:`support.ts_client`); the scenarios
are the same as the Python client's (:mod:`support.scenarios`).

Where it differs from the mcp 2.3.0 Python client: every resume carries the newest event id
its previous stream delivered (so the seed incident presents the dead elicitation once, not
twice, and the call gets the tool's own "expired" result); a replayed cancellation withdraws
the presentation; a failed answer POST does not kill the transport; and an unresumable
stream (404) or a lost answer leaves the call waiting for the SDK's request timeout.
Where it does not: a request that died while the client was away is presented when its replay
arrives, and the late answer gets ``202`` and is dropped; nothing is retried or re-initialised.

v2 does all of that as v1 does (the seed incident included: one presentation, resumes from
``ev3``, ``ev5``, ``ev6``, the late answer 202, the tool's "expired" result; through the
gateway the same), except: a stream that ended with an *error* response is not resumed (v1
resumes it); its request timeout is an ``SdkError`` ``REQUEST_TIMEOUT`` with no JSON-RPC code
(v1: -32001); a non-2xx POST is an ``SdkHttpError`` ``CLIENT_HTTP_NOT_IMPLEMENTED`` with the
status in ``data.status`` (v1: the status as the code).
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId

from fsm.sse.guard import GuardConfig
from fsm.wire.proxy import ConnectionFault
from support.scenarios import (
    CONFIRM,
    EXPIRED_RESULT,
    GUARDED_SCENARIO_CONFIG_KW,
    Rig,
    ScenarioResult,
    open_rig,
    run_scenario,
)
from support.ts_client import (
    SDK_LINES,
    SdkLine,
    TsClient,
    TsClientUnavailable,
    open_ts_client,
    ts_scenario_client,
    ts_seed_run,
)

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]

REQUEST_TIMEOUT_MS = 2000
"""The SDK's per-request timeout where a call can end no other way (its default is 60 s)."""

TIMED_OUT: dict[SdkLine, tuple[int | None, str | None, str]] = {
    "v1": (-32001, None, "MCP error -32001: Request timed out"),
    "v2": (None, "REQUEST_TIMEOUT", "Request timed out"),
}
"""``(code, sdkCode, message)`` of a call ended by the line's request timeout (``data``
is ``{"timeout": ms}`` on both): v2 raises an ``SdkError`` with a string code, no JSON-RPC
code."""


Line = dict[str, Any]


@pytest.fixture(params=SDK_LINES)
def sdk(request: pytest.FixtureRequest) -> SdkLine:
    """Each test runs with both lines of the TypeScript SDK's client."""
    line: SdkLine = request.param
    return line


def _lines(lines: list[Line], kind: str, **match: Any) -> list[Line]:
    """The printed lines of one kind whose fields match."""
    return [e for e in lines if e["event"] == kind and all(e.get(k) == v for k, v in match.items())]


def _http_status(error: Line) -> int:
    """The HTTP status an ``error`` line carries: v1 makes it the error's code, v2 puts it
    in ``data.status`` (its ``sdkCode`` for a 404 is ``CLIENT_HTTP_NOT_IMPLEMENTED``)."""
    if error["sdkCode"] is None:
        return int(error["code"])
    assert error["sdkCode"] == "CLIENT_HTTP_NOT_IMPLEMENTED"
    return int(error["data"]["status"])


def _diagnostics(lines: list[Line]) -> list[str]:
    """What the SDK reported to ``onerror``, in order."""
    return [str(e["message"]) for e in _lines(lines, "diagnostic", source="onerror")]


async def _run(
    name: str, rig: Rig | None = None, **options: Any
) -> tuple[ScenarioResult, list[Line]]:
    sink: list[TsClient] = []
    result = await run_scenario(name, ts_scenario_client(sink=sink, **options), rig=rig)
    return result, [line for ts in sink for line in ts.lines]


async def test_happy_path_from_the_command_line(rig: Rig, sdk: SdkLine) -> None:
    """The tool named on the command line: presented once, answered, result, exit 0."""
    async with open_ts_client(rig.proxy.url, "delete_files", {"deadline": "silent"}, sdk=sdk) as ts:
        shown = await ts.wait_presented(1)
        assert (shown["requestId"], shown["message"]) == (1, "Delete 3 files?")
        assert shown["requestedSchema"]["required"] == ["confirm"]
        await ts.answer(None, "accept", {"confirm": True})
        outcome = await ts.wait_outcome("0")
        with anyio.fail_after(10):
            assert await ts.process.wait() == 0
    assert outcome["result"]["content"][0]["text"] == "Deleted 3 files: a.txt, b.txt, c.txt"
    assert outcome["result"]["isError"] is False
    assert len(ts.presented) == 1
    assert [(e["rpc"], e["status"]) for e in ts.events("http") if e.get("rpc") == "answer"] == [
        ("answer", 202)
    ]
    assert ts.events("connected")[0]["protocolVersion"] == "2025-11-25"
    assert ts.events("closed")


async def test_seed_presents_once_resuming_from_the_newest_event_id(sdk: SdkLine) -> None:
    """The seed incident: one presentation, three resumes each from the previous one's last
    event id, the late answer 202 and dropped, then the tool's own "expired" result."""
    run = await ts_seed_run(sdk=sdk)
    r, lines = run.result, run.lines

    assert run.presentations == 1 and list(r.presentation_counts.values()) == [1]
    assert [p.answer for p in r.presentations] == [CONFIRM]

    # resumes: Last-Event-ID is the newest id the previous stream delivered (priming events
    # of resumed streams included), so no resume replays what an earlier one delivered
    assert run.resume_gets == 3
    first, second, third = r.resumes
    assert [x.status for x in r.resumes] == [200, 200, 200]
    assert second.cursor == first.delivered[-1] and third.cursor == second.delivered[-1]
    assert not set(first.delivered) & set(second.delivered)
    tokens = [e["token"] for e in lines if e["event"] == "resumption" and e["callId"] == "c1"]
    assert [x.cursor for x in r.resumes] == [tokens[0], *(x.delivered[-1] for x in r.resumes[:2])]
    assert _diagnostics(lines).count("SSE stream disconnected: TypeError: terminated") == 3

    # the answer is for the dead request: accepted on the wire, ignored by the server
    assert [(a.request_id, a.status) for a in r.answers] == [(1, 202)]
    kinds = [e.kind for e in r.server_log]
    assert "deadline_fired" in kinds and "elicit_answered" not in kinds

    assert r.outcome.kind == "result" and not r.outcome.is_error
    assert r.outcome.text == EXPIRED_RESULT


async def test_replayed_cancel_withdraws_the_presentation(sdk: SdkLine) -> None:
    """The replay carries the request and its cancellation: shown once, then withdrawn
    (the handler's abort signal), no answer sent."""
    r, lines = await _run("replayed_cancel", sdk=sdk)

    assert list(r.presentation_counts.values()) == [1]
    assert [p.cancelled for p in r.presentations] == [True]
    withdrawn = _lines(lines, "withdrawn")
    assert [(e["n"], e["requestId"], e["reason"]) for e in withdrawn] == [
        (1, 1, "caller cancelled")
    ]
    assert r.answers == []
    assert len(r.resumes) == 3
    assert r.outcome.kind == "result" and r.outcome.text == EXPIRED_RESULT


async def test_failed_answer_post_is_not_retried_and_the_call_waits_for_its_timeout(
    rig: Rig, sdk: SdkLine
) -> None:
    """The answer POST fails at the connection: reported to ``onerror`` only, never
    retried; the transport lives on; the call ends by the SDK's request timeout. Its
    cancellation makes the server answer the call with an error, which ends the call's
    stream. v1 then resumes that finished stream (only a *result* counts as its
    response) and leaves the resume GET open; v2 counts the error as the response and
    resumes nothing."""
    proxy = rig.proxy
    async with open_ts_client(proxy.url, request_timeout_ms=REQUEST_TIMEOUT_MS, sdk=sdk) as ts:
        call = await ts.start_call("delete_files", {"deadline": "silent"})
        await ts.wait_presented(1)
        proxy.fail_next_answer(ConnectionFault("close"))
        await ts.answer(1, "accept", {"confirm": True})
        outcome = await ts.wait_outcome(call)
        error = await rig.stored("error")
        if sdk == "v1":
            resume = await proxy.wait_for(
                lambda e: e.kind == "request" and e.method == "GET" and e.last_event_id is not None
            )
        pong = await ts.call_tool("ping", {})  # sent after the error's stream ended
        if sdk == "v1":
            assert proxy.exchanges[resume.exchange].open
    if sdk == "v1":
        ended = await proxy.wait_for(lambda e: e.kind == "end" and e.exchange == resume.exchange)
        assert resume.last_event_id == error.detail["event_id"]
        assert ended.detail == "client_closed"  # open until the client closed
    else:
        assert [x for x in proxy.exchanges.values() if x.is_resume] == []

    assert len(ts.presented) == 1
    answers = [e for e in ts.events("http") if e.get("rpc") == "answer"]
    assert [e["error"] for e in answers] == ["SocketError: other side closed"]
    assert "Failed to send response: TypeError: fetch failed" in _diagnostics(ts.lines)
    assert (outcome["code"], outcome["sdkCode"], outcome["message"]) == TIMED_OUT[sdk]
    assert outcome["data"] == {"timeout": REQUEST_TIMEOUT_MS}
    cancels = [e for e in ts.events("http") if e.get("rpc") == "notifications/cancelled"]
    assert [e["status"] for e in cancels] == [202]
    assert pong.content[0].text == "pong"


async def test_session_expired_two_404_resumes_then_the_call_waits_for_its_timeout(
    sdk: SdkLine,
) -> None:
    r, lines = await _run("session_expired", request_timeout_ms=REQUEST_TIMEOUT_MS, sdk=sdk)

    assert list(r.presentation_counts.values()) == [1]
    # the stream ends cleanly; two resumes from the same cursor get 404 (maxRetries = 2)
    assert [x.status for x in r.resumes] == [404, 404]
    assert r.resumes[0].cursor == r.resumes[1].cursor
    assert "Maximum reconnection attempts (2) exceeded." in _diagnostics(lines)
    # ... after which nothing ends the call but the SDK's request timeout
    code, sdk_code, message = TIMED_OUT[sdk]
    assert (r.outcome.code, r.outcome.text) == (code, message)
    assert _lines(lines, "error", id="c1")[0]["sdkCode"] == sdk_code
    # the late answer gets the session-level 404, which the client only reports to onerror
    assert [(a.request_id, a.status) for a in r.answers] == [(1, 404)]
    assert r.answers[0].response_body["error"] == {"code": -32600, "message": "Session not found"}
    assert any(d.startswith("Failed to send response:") for d in _diagnostics(lines))
    # a later call fails with the HTTP status (and no new session is started)
    assert r.probe is not None and "Session not found" in r.probe.text
    assert _http_status(_lines(lines, "error", id="c2")[0]) == 404
    initializes = [e for e in _lines(lines, "http") if e.get("rpc") == "initialize"]
    assert len(initializes) == 1


@pytest.mark.parametrize("flavour", ["silent", "cancel"])
async def test_request_dead_before_its_replay_is_presented(
    rig: Rig, flavour: str, sdk: SdkLine
) -> None:
    """The elicitation is sent and its deadline fires while the client is away; the resume
    replays it: presented, dead. Silent: the answer gets 202 and is dropped. Cancel: the
    replayed cancellation withdraws it at once."""
    proxy, controller = rig.proxy, rig.controller
    async with open_ts_client(proxy.url, sdk=sdk) as ts:
        await ts.wait_line(lambda e: e["event"] == "connected")
        args = {"deadline": flavour, "gated": True, "after_deadline": "hold"}
        call = await ts.start_call("delete_files", args)
        post = await rig.tools_call()
        pending = await controller.wait_pending(state="gated")

        async def sent_then_dead(mark: int) -> None:
            await rig.elicit_while_away(pending)(mark)
            await controller.fire_deadline(pending)
            if flavour == "cancel":
                await rig.stored("notifications/cancelled", after=mark)

        await rig.cut_while_away(post, sent_then_dead)

        shown = await ts.wait_presented(1)
        assert shown["requestId"] == 1
        if flavour == "silent":
            await ts.answer(1, "accept", {"confirm": True})
            _, posted = await ts.wait_line(lambda e: e.get("rpc") == "answer")
            assert posted["status"] == 202
        else:
            _, gone = await ts.wait_line(lambda e: e["event"] == "withdrawn")
            assert (gone["n"], gone["reason"]) == (1, "caller cancelled")
        controller.finish(pending)
        outcome = await ts.wait_outcome(call)

    assert outcome["result"]["content"][0]["text"] == EXPIRED_RESULT
    assert len(ts.presented) == 1
    assert "elicit_answered" not in [e.kind for e in controller.log]


class ReplayFromStartStore(EventStore):
    """An event store whose resumes replay the cursor's whole stream, the cursor's own
    event included (a server that re-sends what the client already has)."""

    def __init__(self) -> None:
        self.rows: list[tuple[EventId, StreamId, Any]] = []

    async def store_event(self, stream_id: StreamId, message: Any) -> EventId:
        event_id = f"r{len(self.rows) + 1}"
        self.rows.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        stream = next((s for i, s, _ in self.rows if i == last_event_id), None)
        for event_id, stream_id, message in list(self.rows):
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


async def test_replayed_duplicate_is_presented_again(sdk: SdkLine) -> None:
    """A server replays the live elicitation the client already shows: the SDK dispatches
    it again (same id) and it is presented a second time; both answers get 202, the
    server uses the first."""
    async with (
        open_rig(event_store=ReplayFromStartStore()) as rig,
        open_ts_client(rig.proxy.url, sdk=sdk) as ts,
    ):
        call = await ts.start_call("delete_files", {"deadline": "silent"})
        await ts.wait_presented(1)
        post = await rig.tools_call()
        await rig.proxy.cut(post, "abrupt")
        await ts.wait_presented(2)
        for n in (1, 2):
            await ts.answer(n, "accept", {"confirm": True})
        outcome = await ts.wait_outcome(call)
        answers = await ts.wait_count(lambda e: e.get("rpc") == "answer", 2)
    assert [p["requestId"] for p in ts.presented] == [1, 1]
    resumes = [ex for ex in rig.proxy.exchanges.values() if ex.is_resume]
    assert [ex.last_event_id for ex in resumes] == [post.sse_event_ids[-1]]
    assert [e["status"] for e in answers] == [202, 202]
    assert [e.kind for e in rig.controller.log].count("elicit_answered") == 1
    assert outcome["result"]["content"][0]["text"] == "Deleted 3 files: a.txt, b.txt, c.txt"


async def test_missing_install_is_a_clear_error(tmp_path: Any, sdk: SdkLine) -> None:
    (tmp_path / "client.mjs").write_text("")
    with pytest.raises(TsClientUnavailable, match="make ts-client"):
        async with open_ts_client("http://127.0.0.1:9/mcp", sdk=sdk, project=tmp_path):
            pass


async def test_non_loopback_url_is_refused(sdk: SdkLine) -> None:
    async with open_ts_client("http://192.0.2.1/mcp", sdk=sdk) as ts:
        _, line = await ts.wait_line(lambda e: e["event"] == "error")
        with anyio.fail_after(10):
            assert await ts.process.wait() == 2
        with pytest.raises(EOFError):
            await ts.wait_line(lambda e: e["event"] == "connected")
    assert line["id"] is None and "loopback URLs only" in line["message"]
    assert not ts.events("http")


# --------------------------------------------------------------------------- the gateway

GATEWAY: dict[str, Any] = {"config": GuardConfig(**GUARDED_SCENARIO_CONFIG_KW)}
"""A guarding gateway replica between the proxy and the server (:func:`open_rig`)."""


async def test_seed_through_the_gateway(sdk: SdkLine) -> None:
    """The seed incident through the gateway: what the client does is unchanged (one
    presentation, the late answer 202, the tool's own result); ids are the gateway's."""
    async with open_rig(gateway=GATEWAY) as rig:
        run = await ts_seed_run(rig, sdk=sdk)
    assert (run.presentations, run.resume_gets) == (1, 3)
    assert [a.status for a in run.result.answers] == [202]
    assert run.outcome.kind == "result" and run.outcome.text == EXPIRED_RESULT
    assert all(x.cursor not in ("ev3", "ev5", "ev6") for x in run.result.resumes)


async def test_replayed_duplicate_blanked_by_the_gateway(sdk: SdkLine) -> None:
    """The replay-from-start server through the gateway: the replayed elicitation reaches
    the client as a blank event, so it is presented once (twice without the gateway)."""
    async with (
        open_rig(event_store=ReplayFromStartStore(), gateway=GATEWAY) as rig,
        open_ts_client(rig.proxy.url, sdk=sdk) as ts,
    ):
        call = await ts.start_call("delete_files", {"deadline": "silent"})
        await ts.wait_presented(1)
        post = await rig.tools_call()
        await rig.proxy.cut(post, "abrupt")
        resume = await rig.proxy.wait_for(
            lambda e: e.kind == "request" and e.method == "GET" and e.last_event_id is not None
        )
        await rig.primed(rig.proxy.exchanges[resume.exchange])
        await ts.answer(1, "accept", {"confirm": True})
        outcome = await ts.wait_outcome(call)
    relayed = [
        (e.event_id, e.data)
        for e in rig.proxy.log
        if e.kind == "sse_event" and e.exchange == resume.exchange
    ]
    # the replayed elicitation arrives blank, keeping (the gateway's form of) its event id
    upstream_id = post.sse_event_ids[-1].rsplit(".", 1)[-1]
    assert relayed[0][0].endswith(f".{upstream_id}") and relayed[0][1] == ""
    assert not any("elicitation/create" in data for _, data in relayed)
    assert len(ts.presented) == 1
    assert outcome["result"]["content"][0]["text"] == "Deleted 3 files: a.txt, b.txt, c.txt"


async def test_session_expired_through_the_gateway_ends_the_call_at_once(sdk: SdkLine) -> None:
    """The gateway ends the dead call with one error naming the reason; without it the
    call waits for the SDK's request timeout (left at its 60 s default here)."""
    async with open_rig(gateway=GATEWAY) as rig:
        r, lines = await _run("session_expired", rig=rig, sdk=sdk)
    assert list(r.presentation_counts.values()) == [1]
    assert r.outcome.code == -32000 and "session-expired" in r.outcome.text
    assert [a.status for a in r.answers] == [404]
    assert _http_status(_lines(lines, "error", id="c2")[0]) == 404
