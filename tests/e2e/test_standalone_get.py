"""The standalone GET stream cut before any event id, again and again, on the real server.

A fresh standalone GET carries no priming event, so until the server sends something on
it there is no event id to resume from: the guard gives up on that connection, its body
ends cleanly, and the SDK opens a fresh GET after its reconnection delay. Each of those
connections is its own interaction (``get``, ``get/2``, ...), so the online monitor sees
each end once, while a tool call that elicits runs beside them undisturbed.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.client.session import ClientRequestContext

from fsm import properties as P
from fsm.adapters.mcp2 import guarded_session
from fsm.audit import audit_text
from fsm.errors import ResumeBudgetSpentError
from fsm.events import standalone_stream
from fsm.sse.guard import GuardConfig
from fsm.wire.proxy import Exchange, TrafficEvent
from support.scenarios import GUARDED_SCENARIO_CONFIG_KW, PresentationRequest, Rig

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(90)]

CUTS = 3
ANNOUNCED = 3
DELETED = "Deleted 3 files: a.txt, b.txt, c.txt"


async def _fresh_get(rig: Rig, after: int) -> tuple[Exchange, float]:
    """The next standalone GET (no ``Last-Event-ID``) after ``after``, once the server
    answered it 200; and when its request reached the proxy (``time.monotonic``)."""
    proxy = rig.proxy

    def fresh(e: TrafficEvent) -> bool:
        return e.kind == "request" and e.method == "GET" and e.last_event_id is None

    request = await proxy.wait_for(fresh, 10, after)
    arrived = time.monotonic()
    await proxy.wait_for(
        lambda e: e.kind == "response" and e.exchange == request.exchange, 10, request.seq - 1
    )
    exchange = proxy.exchanges[request.exchange]
    assert exchange.status == 200, exchange
    return exchange, arrived


async def test_standalone_get_cut_before_any_event_id_reopens_as_a_new_stream(rig: Rig) -> None:
    proxy, user = rig.proxy, rig.user
    announcements: list[str] = []
    heard = anyio.Event()

    async def on_elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        answer = await user.present(
            PresentationRequest(rig.session_id(), context.request_id, params.message)
        )
        return types.ElicitResult(action=answer.action, content=answer.content)

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        announcements.append(str(params.data))
        if len(announcements) >= ANNOUNCED:
            heard.set()

    outcome: list[Any] = []
    done = anyio.Event()
    gaps: list[float] = []
    async with (
        guarded_session(
            proxy.url,
            elicitation_callback=on_elicit,
            http_client=rig.http,
            config=GuardConfig(**GUARDED_SCENARIO_CONFIG_KW),
            logging_callback=on_log,
        ) as session,
        anyio.create_task_group() as tg,
    ):
        sid = session.session_id
        assert sid is not None
        get, _ = await _fresh_get(rig, 0)

        async def call() -> None:
            try:
                outcome.append(await session.call_tool("delete_files", {"deadline": "silent"}))
            finally:
                done.set()

        tg.start_soon(call)
        await user.wait_presented(1)

        # cut the standalone GET before it carried any event id, CUTS times; each time
        # the SDK opens a fresh GET (no Last-Event-ID) once the adapter ended the body
        for _ in range(CUTS):
            assert get.open and not get.sse_event_ids
            mark = proxy.last_seq
            await proxy.cut(get, "abrupt")
            cut_at = time.monotonic()
            get, arrived = await _fresh_get(rig, mark)
            gaps.append(arrived - cut_at)

        # the call beside it is undisturbed: the user answers, the tool completes
        user.answer_open()
        with anyio.fail_after(10):
            await done.wait()

        # the server's messages on the reopened GET (the fourth connection) arrive; were
        # the reopened GET not read (refused, or never tracked), the server would store
        # them and send them nowhere, and this wait would time out
        await rig.controller.wait_standalone(sid)
        result = await session.call_tool("announce", {"count": ANNOUNCED, "text": "after"})
        assert [c.text for c in result.content if isinstance(c, types.TextContent)] == [
            f"announced {ANNOUNCED}"
        ]
        with anyio.fail_after(10):
            await heard.wait()
        log = session.event_log()
        violations = session.violations
        failures = session.failures
        observations = [obs for obs, _ in session.observations()]

    assert [f"after {n}" for n in range(1, ANNOUNCED + 1)] == announcements
    assert len(get.sse_event_ids) == ANNOUNCED  # on the wire, on the fourth GET

    # one presentation, one outcome, no violation
    assert len(user.presentations) == 1
    (result_of_call,) = outcome
    assert [c.text for c in result_of_call.content if isinstance(c, types.TextContent)] == [DELETED]
    assert violations == []

    # each generation given up exactly once, for having nothing to resume from
    generations = [standalone_stream(g) for g in range(1, CUTS + 1)]
    ended = [o for o in observations if isinstance(o, P.Ended)]
    get_ends = [o for o in ended if o.interaction.startswith("get")]
    assert [(o.interaction, o.outcome, o.reason) for o in get_ends] == [
        (g, "failed", "no-cursor") for g in generations
    ]
    assert all(isinstance(failures[g], ResumeBudgetSpentError) for g in generations)
    fourth = standalone_stream(CUTS + 1)
    assert fourth not in failures
    # progress-like notifications' ids are coalesced in the log: the newest one is there
    seen = [o for o in observations if isinstance(o, P.EventSeen) and o.stream == fourth]
    assert seen and seen[-1].event_id == get.sse_event_ids[-1]
    calls = [o for o in ended if o.interaction.startswith("post:")]
    assert len(calls) == len({o.interaction for o in calls})  # every call ended once

    # the recorded log audits clean, complete (every interaction that began ended)
    audited = audit_text(log, budgets=P.Budgets(max_submissions=6), complete=True)
    assert audited.ok, audited.finding

    # the SDK reopens after its reconnection delay (1 s: a fresh GET carries no retry:)
    assert all(gap >= 0.9 for gap in gaps), gaps
