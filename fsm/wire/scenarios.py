"""The demo's scenario: the seed incident, on the rig (:mod:`fsm.wire.rig`).

The call's POST stream is cut abruptly after its priming event; while the resume GET is
held, the tool elicits (stored, undelivered); the GET replays it (presentation 1).  That
GET is cut abruptly; while the next resume is held the **silent** deadline fires; the
next GET replays from the client's cursor.  That GET is cut too; the user answers
everything still shown; then the tool returns "confirmation expired" (stored for a
client that still resumes).  mcp 2.3.0 plain client: the stale resume cursor replays
the dead elicitation -> presented twice (same id); two late answers -> 202, 202; the
call fails with -32000 "SSE stream ended and reconnection attempts were exhausted".
Steps wait only on what any resuming client does (it resumes after each cut); nothing
waits for a presentation after the first.

:func:`replayed_deadline` is the scenario with either deadline (``"silent"``, as here, or
``"cancel"``, which also stores the request's ``notifications/cancelled``); :func:`settle`
and :func:`resumed_or_ended` are its synchronisation points.
"""

from __future__ import annotations

import contextlib
from typing import Literal

import anyio
from anyio.abc import TaskGroup

from fsm.wire.proxy import TrafficEvent
from fsm.wire.rig import BackgroundCall, Outcome, Rig, ScenarioClient, unless_ended

__all__ = ["replayed_deadline", "resumed_or_ended", "seed", "settle"]


async def settle(rig: Rig, client: ScenarioClient) -> None:
    """Let the client act on everything it received, and let its answer POSTs finish.

    A ``ping`` round trip (hundreds of event-loop turns through proxy and server) gives the
    client's handlers time to run; then every answer POST the proxy has seen must end.
    Done twice so an answer enqueued behind the first ping is covered.  A dead client
    (ping raising) is fine.
    """
    for _ in range(2):
        with contextlib.suppress(Exception):
            with anyio.fail_after(10):
                await client.call_tool("ping", {})
        await rig.answers_quiet()


async def replayed_deadline(
    rig: Rig,
    client: ScenarioClient,
    call: BackgroundCall,
    tg: TaskGroup,
    flavour: Literal["silent", "cancel"],
) -> Outcome | None:
    """The stream is cut three times around a deadline that fires while the client is
    away (``flavour``: as the demo server's ``delete_files`` takes ``deadline``)."""
    proxy, controller, user = rig.proxy, rig.controller, rig.user
    args = {"deadline": flavour, "gated": True, "after_deadline": "hold"}
    tg.start_soon(call.run, client, "delete_files", args)
    post = await rig.tools_call()
    pending = await controller.wait_pending(state="gated")

    # 1. the POST stream breaks before the elicitation, which is sent while disconnected
    #    and delivered by the first resume's replay
    first_resume = await rig.cut_while_away(post, rig.elicit_while_away(pending))

    # 2. that resume breaks too; the deadline fires while the client is away
    async def deadline(mark: int) -> None:
        await controller.fire_deadline(pending)
        if flavour == "cancel":
            await rig.stored("notifications/cancelled", after=mark)

    second_resume = await rig.cut_while_away(first_resume, deadline)

    # 3. the stream breaks a third time; the user then answers whatever is still shown;
    #    finally the tool returns "expired" (reaches only a client still resuming)
    mark = proxy.last_seq
    await proxy.cut(second_resume, "abrupt")
    await settle(rig, client)
    user.answer_open()
    await settle(rig, client)
    await resumed_or_ended(rig, call, mark)
    controller.finish(pending)
    await call.wait()
    return None


async def resumed_or_ended(
    rig: Rig, call: BackgroundCall, after: int, timeout: float = 10.0
) -> None:
    """Wait until a resume GET sent after ``after`` has attached (its priming event was
    relayed), or the call already ended (a client that stopped resuming).

    The mcp 2.3.0 server attaches a resume's live tail only after the replay and its
    priming event; a result produced inside that window is stored but not sent on the
    attached connection, so finishing the tool earlier would race the server, not test
    the client.
    """
    proxy = rig.proxy

    def attached(e: TrafficEvent) -> bool:
        ex = proxy.exchanges.get(e.exchange)
        return e.kind == "sse_event" and e.data == "" and ex is not None and ex.is_resume

    with anyio.fail_after(timeout):
        await unless_ended(call.done, proxy.wait_for(attached, timeout, after))


async def seed(
    rig: Rig, client: ScenarioClient, call: BackgroundCall, tg: TaskGroup
) -> Outcome | None:
    """The seed incident (see the module docstring): a :data:`~fsm.wire.rig.Step`."""
    return await replayed_deadline(rig, client, call, tg, "silent")
