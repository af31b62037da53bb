"""A server that still holds the old connection refuses resumes; the guarded client waits.

Against the unmodified mcp 2.3.0 server, behind a relay (:mod:`fsm.wire.held`) that
keeps the server's side of the call's event stream open when the fault proxy cuts the
client's side: the server holds the old, half-open connection, as one does that never saw
its client go. Meanwhile every resume is refused as the servers that hold a stream refuse
a second reader: the TypeScript SDK's 409, a 409 with ``Retry-After`` (IBM ContextForge's
listener claim), Render's 400 "session already exists" in plain text. The relay lets go at
the first refusal after it held the connection ``hold_s`` seconds and refused at least 3
resumes (a decision taken at each refusal: nothing sleeps, the time is only read); the next
resume reaches the server.

The server sends ``retry: 300``: the guard as it was waited 0.3 s after each refusal and
gave up at the third (``ResumeBudgetSpentError`` 0.9 s in, with the server holding for
1.5 s). Now the guarded mcp 2.x client waits the hold out: the user sees the prompt once,
answers once the stream is back, and the call returns the tool's result.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import pytest

from fsm import actions as act
from fsm import events as ev
from fsm.adapters._transport.http import http_result
from fsm.adapters.mcp2 import guarded_session
from fsm.sse.guard import GuardConfig
from fsm.wire.held import (
    CLAIMED_409,
    RENDER_400,
    TYPESCRIPT_409,
    HoldingRelay,
    Refusal,
    holding_tier,
)
from fsm.wire.proxy import Exchange
from fsm.wire.rig import open_rig
from support.scenarios import Rig, answer_once_resumed, elicit_to_user, through_proxy

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(120)]

CONFIG = GuardConfig(backoff_initial_s=0.05, backoff_max_s=1.0, resume_jitter=lambda: 0.5)
"""Short backoffs (the server's ``retry: 300`` starts them; at most 1 s), a fixed jitter
draw: each patient wait is three quarters of its step."""

RESULT = "Deleted 3 files: a.txt, b.txt, c.txt"


@dataclass
class Held:
    """What one call against a held connection showed."""

    outcome: Any = None
    refused: list[ev.ResumeRefused] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    """The waits the guard asked for after each refusal."""
    violations: list[Any] = field(default_factory=list)
    resumes: list[Exchange] = field(default_factory=list)


@contextlib.asynccontextmanager
async def held_rig(refusal: Refusal, hold_s: float) -> AsyncIterator[tuple[Rig, HoldingRelay]]:
    """The demo server (``retry: 300``), the holding relay in front of it, the proxy."""
    middle = functools.partial(holding_tier, refusal=refusal, hold_s=hold_s)
    async with open_rig(retry_interval_ms=300, middle=middle) as rig:
        yield rig, rig.middle.relay


async def held_call(rig: Rig) -> Held:
    """``delete_files`` with the guarded client; once the prompt shows, the proxy cuts the
    call's stream (the relay holds the server's side); the user answers once a resume
    attached the stream again."""
    held = Held()
    done = anyio.Event()
    async with (
        through_proxy(
            rig, guarded_session, CONFIG, elicitation_callback=elicit_to_user(rig)
        ) as session,
        anyio.create_task_group() as tg,
    ):
        feed = session.guard.feed

        def spy(event: ev.Event) -> tuple[act.Action, ...]:
            out = feed(event)
            if isinstance(event, ev.ResumeRefused):
                held.refused.append(event)
                held.waits += [a.delay_s for a in out if isinstance(a, act.Wait)]
            return out

        session.guard.feed = spy  # type: ignore[method-assign]

        async def call() -> None:
            try:
                held.outcome = await session.call_tool("delete_files", {"deadline": "silent"})
            except Exception as exc:
                held.outcome = exc
            finally:
                done.set()

        tg.start_soon(call)
        await rig.user.wait_presented(1)
        mark = rig.proxy.last_seq
        await rig.proxy.cut(rig.proxy.current_sse(), "abrupt")
        await answer_once_resumed(rig, done, mark, 60.0)
        held.violations = list(session.violations)
    held.resumes = [ex for ex in rig.proxy.exchanges.values() if ex.is_resume]
    return held


def _assert_waited_out(rig: Rig, relay: HoldingRelay, held: Held, hold_s: float) -> None:
    assert not isinstance(held.outcome, BaseException), held.outcome
    assert [c.text for c in held.outcome.content] == [RESULT]
    assert len(rig.user.presentations) == 1
    assert not rig.user.presentations[0].cancelled
    assert held.violations == []
    assert relay.released_after is not None and relay.released_after >= hold_s
    refusals = len(relay.refused)
    assert refusals >= 3  # where the guard as it was gave up
    assert len(held.refused) == refusals == len(held.waits)
    status = relay.refusal.status
    assert [ex.status for ex in held.resumes] == [status] * refusals + [200]
    cursors = {ex.last_event_id for ex in held.resumes}
    assert len(cursors) == 1  # every resume from the same newest id
    print(
        f"held {relay.released_after:.2f} s, {refusals} refusals, "
        f"waits {[round(w, 3) for w in held.waits]}"
    )


async def test_a_half_open_connection_held_for_1_5_s_is_waited_out() -> None:
    """The TypeScript SDK's 409, no ``Retry-After``: the guard backs off from the server's
    ``retry: 300`` with jitter, far past the three refusals it used to allow."""
    async with held_rig(TYPESCRIPT_409, hold_s=1.5) as (rig, relay):
        held = await held_call(rig)
        _assert_waited_out(rig, relay, held, 1.5)
        assert held.refused[0].body == {
            "jsonrpc": "2.0",
            "error": {
                "code": -32000,
                "message": "Conflict: Stream already has an active connection",
            },
            "id": None,
        }
        assert held.waits[:3] == pytest.approx([0.225, 0.45, 0.75])  # 0.3 s doubling, jittered


async def test_a_half_open_connection_held_for_5_s_with_retry_after_is_waited_out() -> None:
    """A 409 with ``Retry-After: 1`` (a listener claim): never sooner than asked."""
    async with held_rig(CLAIMED_409, hold_s=5.0) as (rig, relay):
        held = await held_call(rig)
        _assert_waited_out(rig, relay, held, 5.0)
        assert all(r.retry_after == 1.0 for r in held.refused)
        assert all(w >= 1.0 for w in held.waits)


async def test_a_session_that_already_exists_in_plain_text_is_waited_out() -> None:
    """Render's 400 "session already exists", a plain-text body: the adapter reads it as
    text for the table, which finds the server still holding the old connection."""
    async with held_rig(RENDER_400, hold_s=1.5) as (rig, relay):
        held = await held_call(rig)
        _assert_waited_out(rig, relay, held, 1.5)
        assert {r.text for r in held.refused} == {
            "Session registration failed: session already exists"
        }


async def test_a_plain_text_refusal_is_read_as_text() -> None:
    """What the outcome tables get of a refusal whose body is not a JSON object: its
    start as text (at most 1,024 characters); a JSON object's body gets none."""
    bodies = {
        "/text": (b"  Session registration failed: session already exists\n", "text/plain"),
        "/long": (b"x" * 70_000, "text/plain"),
        "/json": (b'{"error": {"code": -32000, "message": "m"}}', "application/json"),
        "/list": (b"[1, 2]", "application/json"),
        "/bad": (b"\xff\xfe conflict", "text/plain"),
    }

    def handler(request: httpx2.Request) -> httpx2.Response:
        content, ctype = bodies[request.url.path]
        return httpx2.Response(400, headers={"content-type": ctype}, content=content)

    got = {}
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as http:
        for path in bodies:
            req = http.build_request("GET", f"http://127.0.0.1:9{path}")
            got[path] = await http_result(await http.send(req, stream=True))
    assert got["/text"].text == "Session registration failed: session already exists"
    assert got["/long"].text == "x" * 1024 and got["/long"].body is None
    assert got["/json"].text is None and got["/json"].body is not None
    assert got["/list"].text == "[1, 2]"
    assert got["/bad"].text == "\ufffd\ufffd conflict"
