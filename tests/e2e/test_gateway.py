"""The unmodified mcp client through a guarding gateway replica (fsm.gateway): the seed
incident and its relatives, against the real mcp server, faults at a proxy in front of the
gateway (between the client and the gateway), by explicit command."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
import httpx2
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from gateway_support import FAST, CursorLost, gateway_rig, serve_until, two_replica_resume

from fsm.wire.proxy import ConnectionFault, FaultProxy, HttpFault, is_resume_get
from fsm.wire.sdk import http_client
from support.scenarios import (
    EXHAUSTED,
    BackgroundCall,
    ClientEnv,
    User,
    plain_client,
    run_scenario,
)

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]


@contextlib.asynccontextmanager
async def calling(
    url: str, http: httpx2.AsyncClient, call: BackgroundCall, arguments: dict[str, object]
) -> AsyncIterator[User]:
    """The unmodified client through ``url`` runs ``delete_files`` with ``arguments`` as
    ``call``, in the background, presenting to a new user (yielded); on leaving, the call
    has ended."""
    user = User()
    env = ClientEnv(url, http, user.present, lambda: None)
    async with plain_client(env) as client, anyio.create_task_group() as tg:
        tg.start_soon(call.run, client, "delete_files", arguments)
        yield user


async def test_seed_through_the_gateway_presents_once() -> None:
    """The seed incident with the unmodified client: direct, it presents the dead request
    twice (tests/e2e/test_plain_client.py); through the gateway, once. Its stale resume
    cursor is rewritten to the newest event, so the replay never brings the request
    back; the client's own reconnection limit (two attempts) then ends the call."""
    async with gateway_rig() as rig:
        r = await run_scenario("seed", plain_client, rig=rig)
    assert list(r.presentation_counts.values()) == [1]
    first, second = r.resumes
    assert first.cursor == second.cursor  # the SDK's stale cursor...
    assert not any(i.endswith(".ev4") for i in second.delivered)  # ...rewritten upstream
    assert r.outcome.kind == "error" and r.outcome.text == EXHAUSTED


async def test_replayed_cancel_through_the_gateway_presents_once() -> None:
    async with gateway_rig() as rig:
        r = await run_scenario("replayed_cancel", plain_client, rig=rig)
    assert list(r.presentation_counts.values()) == [1]
    assert r.outcome.text == EXHAUSTED


async def test_an_expired_session_ends_the_call_once_and_answers_404() -> None:
    """The server forgets the session while the prompt is open: the call gets one error
    naming the reason, the user's late answer is dropped, every later request 404."""
    async with gateway_rig() as rig:
        r = await run_scenario("session_expired", plain_client, rig=rig)
    assert list(r.presentation_counts.values()) == [1]
    assert (r.outcome.code, r.outcome.text.split(":")[0]) == (-32000, "session-expired")
    assert r.outcome.reason == "session-expired"
    assert r.probe is not None and (r.probe.code, r.probe.text) == (-32600, "Session not found")
    assert [a.status for a in r.answers] == [404]


async def test_happy_path_through_the_gateway() -> None:
    async with gateway_rig() as rig:
        r = await run_scenario("happy", plain_client, rig=rig)
    assert list(r.presentation_counts.values()) == [1]
    assert r.outcome.kind == "result" and r.outcome.text.startswith("Deleted 3 files")
    assert [a.status for a in r.answers] == [202]


async def test_a_failed_answer_post_between_client_and_gateway_is_the_clients() -> None:
    """A limit, pinned: the client's own POST to the gateway fails (connection closed);
    the mcp 2.3.0 client's writer dies on it ('Connection closed') before the gateway
    sees the answer. Faults past the gateway are the gateway's (resubmitted, below)."""
    async with gateway_rig() as rig:
        r = await run_scenario("answer_conn_error", plain_client, rig=rig)
    assert list(r.presentation_counts.values()) == [1]
    assert r.outcome.text == "Connection closed"


@pytest.mark.parametrize("cursor_recorded", [True, False])
async def test_resume_on_the_other_replica_presents_once(cursor_recorded: bool) -> None:
    """Replica B never saw the stream. With A's cursor in the store, B rewrites the
    client's stale cursor to it and the server replays nothing old; without it, B resumes
    from the client's id, the server replays the elicitation A presented, and B's claim
    loses: it is blanked (its id kept). Either way: one presentation, the tool's result."""
    from fsm.gateway.store import MemoryStore

    r, rig = await two_replica_resume(MemoryStore() if cursor_recorded else CursorLost())
    assert list(r.presentation_counts.values()) == [1]
    assert r.outcome.kind == "result" and r.outcome.text.startswith("Deleted 3 files")
    first, second = r.resumes
    assert first.cursor == second.cursor  # the SDK's stale cursor, both times
    replayed = [i for i in second.delivered if i.endswith(".ev4")]  # the elicitation's id
    assert bool(replayed) is not cursor_recorded
    if not cursor_recorded:  # delivered as an empty event that keeps its id
        blank = [
            e
            for e in rig.proxy.events(lambda e: e.kind == "sse_event")
            if e.exchange == second.exchange and e.event_id == replayed[0]
        ]
        assert [e.data for e in blank] == [""]


@pytest.mark.parametrize("cursor_recorded", [True, False])
async def test_a_prompt_whose_replica_died_unanswered_ends_the_call_after_the_lease(
    cursor_recorded: bool,
) -> None:
    """A presented the prompt and died before any answer; the client's resume lands on B.
    Without A's cursor, the server replays the request there and B's claim loses; with
    it, nothing old is replayed and B finds A's claim among the stream's open claims.
    Nobody renews A's lease: when it lapses with no answer stored, B ends the call with
    one error, ``claim-lapsed``; the request is never presented a second time."""
    from fsm.gateway.app import GatewayLimits
    from fsm.gateway.store import MemoryStore

    limits = GatewayLimits(lease_s=1.0)  # renewed every 1/3 s: a loaded machine keeps it
    store = MemoryStore() if cursor_recorded else CursorLost()
    r, _ = await two_replica_resume(store, completes=False, limits=limits)
    assert list(r.presentation_counts.values()) == [1]
    assert (r.outcome.code, r.outcome.reason) == (-32000, "claim-lapsed")


@pytest.mark.parametrize(
    "options", [[], ["--loop", "asyncio", "--http", "h11"]], ids=["defaults", "asyncio-h11"]
)
async def test_the_command_line_gateway_serves_a_plain_client(options: list[str]) -> None:
    """``python -m fsm gateway`` in a child process, in front of the real server: the
    happy path through it, then a clean stop; on the default stack (uvloop and httptools
    when installed) and on uvicorn's pure-Python one."""
    import subprocess
    import sys

    from fsm.wire.server import running_server

    async with running_server() as server:
        proc = await anyio.open_process(
            [
                sys.executable,
                "-m",
                "fsm",
                "gateway",
                "--upstream",
                server.url,
                "--listen",
                "127.0.0.1:0",
                *options,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None
            with anyio.fail_after(20):
                got = await BufferedByteReceiveStream(proc.stdout).receive_until(b"\n", 4096)
            line = got.decode() + "\n"
            assert line.startswith("http://127.0.0.1:") and line.endswith("/mcp\n"), line
            url = line.strip()  # the one line on stdout: the URL alone
            async with FaultProxy(url) as proxy, http_client() as http:
                call = BackgroundCall()
                async with calling(proxy.url, http, call, {}) as user:
                    await user.wait_presented(1)
                    user.answer_open()
            assert call.outcome.text.startswith("Deleted 3 files")
        finally:
            proc.terminate()
            with anyio.fail_after(20):
                assert await proc.wait() == 0


# ----------------------------------------------------------------- faults upstream


@pytest.mark.parametrize(
    "fault",
    [ConnectionFault("close"), HttpFault(503, b"busy")],
    ids=["connection-closed", "http-503"],
)
async def test_the_gateway_resubmits_an_answer_the_upstream_lost(fault: object) -> None:
    """The gateway's own answer POST fails (between it and the server): it is resubmitted
    with the same answer; the client's POST was answered 202 once and the call completes."""
    async with gateway_rig(upstream_faults=True) as rig:
        up = rig.middle.upstream_proxy
        assert up is not None
        call = BackgroundCall()
        async with plain_client(rig.env()) as client, anyio.create_task_group() as tg:
            tg.start_soon(call.run, client, "delete_files", {})
            await rig.user.wait_presented(1)
            up.fail_next_answer(fault)  # type: ignore[arg-type]
            rig.user.answer_open()
        answers = [ex for ex in up.exchanges.values() if ex.is_answer]
        client_answers = [ex for ex in rig.proxy.exchanges.values() if ex.is_answer]
    assert call.outcome.text.startswith("Deleted 3 files")
    assert len(answers) == 2 and answers[0].body == answers[1].body
    assert [ex.status for ex in client_answers] == [202]


async def test_an_upstream_cut_is_resumed_by_the_gateway_unseen_by_the_client() -> None:
    """The connection between the gateway and the server breaks mid-call: the gateway
    resumes it from the newest event; the client's stream never breaks, it sends no
    resume, the request is presented once and the call completes."""
    async with gateway_rig(upstream_faults=True) as rig:
        up = rig.middle.upstream_proxy
        assert up is not None
        call = BackgroundCall()
        async with plain_client(rig.env()) as client, anyio.create_task_group() as tg:
            tg.start_soon(call.run, client, "delete_files", {"gated": True})
            await rig.tools_call()
            pending = await rig.controller.wait_pending(state="gated")
            upstream_post = [ex for ex in up.exchanges.values() if ex.rpc_method == "tools/call"]
            hold = up.hold_next(is_resume_get)
            await up.cut(upstream_post[0], "abrupt")
            resume = await hold.wait_arrived()
            rig.controller.release(pending)
            hold.release()
            await rig.user.wait_presented(1)
            rig.user.answer_open()
        client_resumes = [ex for ex in rig.proxy.exchanges.values() if ex.is_resume]
    assert call.outcome.text.startswith("Deleted 3 files")
    assert client_resumes == []
    assert resume.last_event_id is not None and "." not in resume.last_event_id  # upstream id
    assert len(rig.user.presentations) == 1


async def test_an_upstream_restart_ends_the_call_once_and_the_session_with_404() -> None:
    """The server restarts mid-call (its sessions are gone) and is back before the
    gateway's resume budget is spent: the resume gets 404, the call ends with one JSON-RPC
    error (data.reason "session-expired") and every later request of the session is
    answered 404 by the gateway."""
    from fsm.sse.guard import GuardConfig
    from support.gateway import running_gateway

    stop_first, stop_second, stopped = anyio.Event(), anyio.Event(), anyio.Event()
    call = BackgroundCall()
    async with anyio.create_task_group() as servers:
        server = await servers.start(serve_until, stop_first, stopped, 0)
        async with (
            FaultProxy(server.url) as upstream,
            running_gateway(upstream.url, config=GuardConfig(**FAST)) as gw,
            FaultProxy(gw.url) as proxy,
            http_client() as http,
        ):
            async with calling(proxy.url, http, call, {"gated": True}) as user:
                await server.controller.wait_pending(state="gated")
                # the server stops (its sessions are gone); the gateway's resume is held
                # until the new server is up (a restart within the resume budget)
                hold = upstream.hold_next(is_resume_get)
                stop_first.set()
                await stopped.wait()
                await hold.wait_arrived()
                await servers.start(serve_until, stop_second, anyio.Event(), server.port)
                hold.release()
            sid = next(ex.session_id for ex in proxy.exchanges.values() if ex.session_id)
            after = await http.post(
                proxy.url,
                json={"jsonrpc": "2.0", "id": 99, "method": "tools/list"},
                headers={"mcp-session-id": sid, "accept": "application/json, text/event-stream"},
            )
        stop_second.set()
    assert (call.outcome.error_type, call.outcome.code) == ("MCPError", -32000)
    assert call.outcome.reason == "session-expired"
    assert after.status_code == 404
    assert user.presentations == []


async def test_an_upstream_that_stays_down_ends_the_call_with_resume_budget_spent() -> None:
    """The server stops mid-call and does not come back: the gateway's resumes are
    refused (connection refused) until the stream's budget is spent; the call ends with
    one error, ``data.reason`` ``resume-budget-spent``."""
    from fsm.sse.guard import GuardConfig
    from support.gateway import running_gateway

    stop, stopped = anyio.Event(), anyio.Event()
    call = BackgroundCall()
    async with anyio.create_task_group() as servers:
        server = await servers.start(serve_until, stop, stopped, 0)
        async with (
            running_gateway(server.url, config=GuardConfig(**FAST)) as gw,
            http_client() as http,
            calling(gw.url, http, call, {"gated": True}),
        ):
            await server.controller.wait_pending(state="gated")
            stop.set()
            await stopped.wait()
            await call.wait(20)  # ends by the guard's budget, not a timer here
    assert (call.outcome.error_type, call.outcome.code) == ("MCPError", -32000)
    assert call.outcome.reason == "resume-budget-spent"
