"""The wire scenarios: each a fault, injected on a real loopback MCP server, that a
client must get through without breaking P1-P7 (:mod:`fsm.properties`).

Every scenario is a :data:`~fsm.wire.rig.Step` on the rig (:mod:`fsm.wire.rig`): it starts
the destructive ``delete_files`` call (the tool asks "Delete 3 files?" by elicitation),
drives its faults by explicit command and synchronises on observed traffic, never on
sleeps. :data:`SCENARIOS` lists them by name with the fault each injects and the
properties it exercises; :func:`fsm.wire.run` runs one against a client and judges it.

``seed``
    The seed incident. The call's POST stream is cut abruptly after its priming event;
    while the resume GET is held, the tool elicits (stored, undelivered); the GET replays
    it (presentation 1). That GET is cut abruptly; while the next resume is held the
    **silent** deadline fires; the next GET replays from the client's cursor. That GET is
    cut too; the user answers everything still shown; then the tool returns
    "confirmation expired" (stored for a client that still resumes). mcp 2.3.0 plain
    client: the stale resume cursor replays the dead elicitation -> presented twice (same
    id, P2; the stale cursor is P7); two late answers -> 202, 202; the call fails with
    -32000 "SSE stream ended and reconnection attempts were exhausted".
``replayed_cancel``
    As ``seed`` with the **cancel-emitting** deadline: the second replay carries the
    request followed by its ``notifications/cancelled``. Plain client: the replayed
    request is dispatched again (a second presentation, P2), cancelled by the replayed
    cancel; the first presentation's late answer gets 202.
``replay_everything``
    A server whose event store replays the cursor's whole stream on every resume (the
    events the client already has, same ids, included). The elicitation is delivered
    live, the stream is cut abruptly, the resume replays it; the user answers what is
    shown. Plain client: it presents the replayed question again (P2); both answers are
    accepted (202), the first decides.
``answer_conn_error``
    Elicitation delivered live, the answer POST fails with a connection error (a
    retryable outcome: resubmit the same answer, never re-prompt). Plain client: the
    transport dies, the call fails with -32000 "Connection closed" (no property broken:
    it gives up rather than misbehaves).
``answer_rejected``
    Elicitation delivered live; the answer POST gets HTTP 500 wrapping the JSON-RPC error
    "no such pending request" (terminal: the question is dead); then the call's stream
    is cut; the deadline ends the tool. Plain client: it ignores the rejection and
    resumes the stream of a dead interaction (P3); the tool's "confirmation expired"
    reaches it on the resumed stream.
``half_open``
    Elicitation delivered live; the call's stream is cut abruptly on the client's side
    while the server keeps its side open (:mod:`fsm.wire.held`: a server that never saw
    its client go); it refuses every resume with the TypeScript SDK's 409 until it has
    refused three and held the old connection 1.5 s, then lets go; the user answers once
    a resume attached. Plain client: two refused resumes, then it gives up: the call fails
    with -32000 (no property broken; the guarded client waits the hold out and completes).
``session_expired``
    Elicitation delivered live, then the server expires the session; the user answers
    late; a probe call after. Plain client: two resume GETs get 404, the second after it
    was told the session is gone (P3); the late answer gets 404; the probe gets -32600
    "Session not found" (no re-initialisation).
``happy``
    The user confirms in time: one presentation, one answer (202), result
    ``"Deleted 3 files: a.txt, b.txt, c.txt"``. Every client passes; a control.

The MRTR scenarios (protocol 2026-07-28, on :mod:`fsm.wire.mrtr_rig`: the client's
``Client(url)`` against :mod:`fsm.wire.mrtr_server`, whose tools ask "Delete 3 files?"
in ``InputRequiredResult`` rounds, their state sealed by the SDK; mcp 2.x only):

``mrtr_expiry``
    The question is shown; while it is up the server's states expire and the client's
    clock passes 541 s (the question's client-side age is 540 s); then the user answers.
    mcp 2.3.0 plain client: it sends the late answer into the expired state (P6); the
    retry gets HTTP 400, JSON-RPC -32602 "Invalid or expired requestState"; the call
    fails with it. The guarded path sends nothing: it fails with
    ``RequestStateExpiredError`` (aged-out).
``mrtr_reask``
    A re-asking tool (``reasking_delete``): the answered question comes back in the next
    round under a fresh state. Plain client: shows it again (P2), the tool completes
    after two answers; the guarded path resubmits the stored answer and completes.
``mrtr_restart``
    The server restarts with a fresh key while the question is shown; the user answers in
    time. Plain client: the retry gets -32602 "Invalid or expired requestState" and the
    call fails with it, no retry after (no property broken); the guarded path fails with
    ``RequestStateExpiredError`` (invalid-request-state).

:func:`replayed_deadline` is the replay scenario with either deadline; :func:`settle` and
:func:`resumed_or_ended` are its synchronisation points, for scenarios of one's own.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

import anyio
from anyio.abc import TaskGroup

from fsm.wire.held import TYPESCRIPT_409, holding_tier
from fsm.wire.proxy import ConnectionFault, HttpFault, TrafficEvent
from fsm.wire.rig import (
    MRTR_PROTOCOL,
    SSE_PROTOCOL,
    BackgroundCall,
    ClientFactory,
    MiddleTier,
    Outcome,
    Rig,
    ScenarioClient,
    ScenarioResult,
    Step,
    open_rig,
    run_scenario,
    unless_ended,
)
from fsm.wire.sdk import MCP_MAJOR
from fsm.wire.server import StoreChoice

if TYPE_CHECKING:
    from fsm.wire.mrtr_rig import MrtrRig, MrtrStep

__all__ = [
    "SCENARIOS",
    "Scenario",
    "answer_conn_error",
    "answer_rejected",
    "half_open",
    "happy",
    "mrtr_expiry",
    "mrtr_reask",
    "mrtr_restart",
    "replay_everything",
    "replayed_cancel",
    "replayed_deadline",
    "resumed_or_ended",
    "seed",
    "session_expired",
    "settle",
]


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
) -> bool:
    """Wait until a resume GET sent after ``after`` has attached (its priming event was
    relayed), or the call already ended (a client that stopped resuming); whether a
    resume attached. ``TimeoutError`` if neither happens within ``timeout`` seconds.

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
        return await unless_ended(call.done, proxy.wait_for(attached, timeout, after)) is not None


async def seed(
    rig: Rig, client: ScenarioClient, call: BackgroundCall, tg: TaskGroup
) -> Outcome | None:
    """The seed incident (see the module docstring): a :data:`~fsm.wire.rig.Step`."""
    return await replayed_deadline(rig, client, call, tg, "silent")


async def replayed_cancel(
    rig: Rig, client: ScenarioClient, call: BackgroundCall, tg: TaskGroup
) -> Outcome | None:
    """As ``seed``, with the deadline that also stores ``notifications/cancelled``."""
    return await replayed_deadline(rig, client, call, tg, "cancel")


async def replay_everything(
    rig: Rig, client: ScenarioClient, call: BackgroundCall, tg: TaskGroup
) -> Outcome | None:
    """The question, delivered live, is replayed by a resume (run on a rig whose server
    replays whole streams: :attr:`Scenario.event_store`)."""
    tg.start_soon(call.run, client, "delete_files", {"deadline": "silent"})
    post = await rig.tools_call()
    await rig.user.wait_presented(1)
    await rig.cut_while_away(post)
    await settle(rig, client)
    rig.user.answer_open()
    await call.wait()
    await settle(rig, client)
    return None


async def answer_conn_error(
    rig: Rig, client: ScenarioClient, call: BackgroundCall, tg: TaskGroup
) -> Outcome | None:
    """The answer POST fails with a connection error."""
    tg.start_soon(call.run, client, "delete_files", {"deadline": "silent"})
    await rig.user.wait_presented(1)
    rig.proxy.fail_next_answer(ConnectionFault("close"))
    rig.user.answer_open()
    await call.wait()
    await settle(rig, client)
    return None


async def answer_rejected(
    rig: Rig, client: ScenarioClient, call: BackgroundCall, tg: TaskGroup
) -> Outcome | None:
    """The answer is rejected as terminal ("no such pending request"), then the call's
    stream is cut: a client that took the rejection for what it is does not resume."""
    proxy = rig.proxy
    tg.start_soon(call.run, client, "delete_files", {"deadline": "silent"})
    post = await rig.tools_call()
    presented = await rig.user.wait_presented(1)
    request_id = presented.request.request_id
    proxy.fail_next_answer(
        HttpFault.jsonrpc_error(500, -32602, "no such pending request", request_id)
    )
    rig.user.answer_open()
    await proxy.wait_for(lambda e: e.kind == "fault")
    await settle(rig, client)
    mark = proxy.last_seq
    if post.open:
        await proxy.cut(post, "abrupt")
    await resumed_or_ended(rig, call, mark)
    await rig.controller.fire_deadline(await rig.controller.wait_pending())
    await call.wait()
    await settle(rig, client)
    return None


async def half_open(
    rig: Rig, client: ScenarioClient, call: BackgroundCall, tg: TaskGroup
) -> Outcome | None:
    """The call's stream is held half-open by the server, which refuses resumes (409)
    until it lets go (run behind :func:`fsm.wire.held.holding_tier`:
    :attr:`Scenario.middle`)."""
    proxy = rig.proxy
    tg.start_soon(call.run, client, "delete_files", {"deadline": "silent"})
    post = await rig.tools_call()
    await rig.user.wait_presented(1)
    mark = proxy.last_seq
    await proxy.cut(post, "abrupt")
    if await resumed_or_ended(rig, call, mark, HOLD_TIMEOUT_S):
        rig.user.answer_open()
    else:  # the client gave up resuming: the server need not hold on (nor hold its pings)
        rig.middle.relay.let_go()
    await call.wait(HOLD_TIMEOUT_S)
    await settle(rig, client)
    return None


HOLD_S = 1.5
"""How long the server of ``half_open`` holds the old connection, at least."""

HOLD_TIMEOUT_S = 30.0
"""The safety timeout of ``half_open``'s waits (the hold, then the call)."""


async def session_expired(
    rig: Rig, client: ScenarioClient, call: BackgroundCall, tg: TaskGroup
) -> Outcome | None:
    """The server expires the session while the elicitation is shown; a probe after."""
    tg.start_soon(call.run, client, "delete_files", {"deadline": "silent"})
    await rig.user.wait_presented(1)
    sid = rig.session_id()
    assert sid is not None
    await rig.controller.expire_session(sid)
    await call.wait()
    rig.user.answer_open()
    await settle(rig, client)
    try:
        with anyio.fail_after(10):
            return Outcome.of_result(await client.call_tool("ping", {}))
    except Exception as exc:
        return Outcome.of_exception(exc)


async def happy(
    rig: Rig, client: ScenarioClient, call: BackgroundCall, tg: TaskGroup
) -> Outcome | None:
    """The user confirms in time."""
    tg.start_soon(call.run, client, "delete_files", {"deadline": "silent"})
    await rig.user.wait_presented(1)
    rig.user.answer_open()
    await call.wait()
    await settle(rig, client)
    return None


async def mrtr_expiry(
    rig: MrtrRig, client: ScenarioClient, call: BackgroundCall, tg: TaskGroup
) -> Outcome | None:
    """The question's state expires, and its client-side age passes, while it is shown;
    then the user answers."""
    from fsm.wire.mrtr_rig import QUESTION_AGE_S

    tg.start_soon(call.run, client, "delete_files", {"count": 3})
    await rig.user.wait_presented(1)
    rig.server.expire_states()
    rig.clock.advance(QUESTION_AGE_S + 1.0)
    rig.user.answer_open()
    await call.wait()
    return None


async def mrtr_reask(
    rig: MrtrRig, client: ScenarioClient, call: BackgroundCall, tg: TaskGroup
) -> Outcome | None:
    """The tool asks the answered question again; the user answers whatever is shown
    until the call ends."""
    tg.start_soon(call.run, client, "reasking_delete", {"count": 3, "reasks": 1})
    shown = 0
    while await unless_ended(call.done, rig.user.wait_presented(shown + 1)) is not None:
        shown += 1
        rig.user.answer_open()
    await call.wait()
    return None


async def mrtr_restart(
    rig: MrtrRig, client: ScenarioClient, call: BackgroundCall, tg: TaskGroup
) -> Outcome | None:
    """The server restarts (a fresh key) while the question is shown; then the user
    answers."""
    tg.start_soon(call.run, client, "delete_files", {"count": 3})
    await rig.user.wait_presented(1)
    await rig.server.restart()
    rig.user.answer_open()
    await call.wait()
    return None


@dataclass(frozen=True)
class Scenario:
    """One wire scenario: its ``name``, the ``step`` that drives it, the ``fault`` it
    injects (a sentence) and the properties (names of :data:`fsm.properties.PROPERTIES`)
    it exercises: what a client that mishandles the fault breaks. ``event_store``: the
    server's (:func:`fsm.wire.server.build_app`). ``protocol``: the era it runs in; an
    MRTR scenario's ``step`` is an :data:`~fsm.wire.mrtr_rig.MrtrStep` and runs on an
    :class:`~fsm.wire.mrtr_rig.MrtrRig` (``event_store``, ``retry_interval_ms`` and
    ``middle`` are the SSE rig's and do not apply)."""

    name: str
    step: Step | MrtrStep
    fault: str
    exercises: tuple[str, ...]
    event_store: StoreChoice = "scoped"
    retry_interval_ms: int = 50
    """The ``retry:`` the server advertises (the client's reconnect delay)."""
    middle: MiddleTier | None = None
    """What runs between the fault proxy and the server (:data:`fsm.wire.rig.MiddleTier`)."""
    protocol: str = SSE_PROTOCOL

    async def run(
        self, client: ClientFactory, *, timeout: float = 30.0, rig: Rig | None = None
    ) -> ScenarioResult:
        """Run it with ``client`` on a fresh rig with its event store (or on ``rig``) and
        return what was observed (:func:`fsm.wire.rig.run_scenario`; ``timeout`` as
        there). An MRTR scenario runs on a fresh :class:`~fsm.wire.mrtr_rig.MrtrRig`
        (``rig`` must be ``None``: ``ValueError`` otherwise)."""
        if self.protocol == MRTR_PROTOCOL:
            from fsm.wire.mrtr_rig import run_mrtr_scenario

            if rig is not None:
                raise ValueError(f"{self.name} runs on an MRTR rig of its own")
            step = cast("MrtrStep", self.step)
            return await run_mrtr_scenario(step, client, timeout=timeout, name=self.name)
        async with contextlib.AsyncExitStack() as stack:
            if rig is None:
                rig = await stack.enter_async_context(
                    open_rig(
                        event_store=self.event_store,
                        retry_interval_ms=self.retry_interval_ms,
                        middle=self.middle,
                    )
                )
            sse_step = cast(Step, self.step)
            return await run_scenario(sse_step, client, timeout=timeout, rig=rig, name=self.name)
        raise AssertionError("unreachable")


_MRTR_SCENARIOS = (
    ()
    if MCP_MAJOR < 2
    else (
        Scenario(
            "mrtr_expiry",
            mrtr_expiry,
            "protocol 2026-07-28: the question's state expires while it is shown and the "
            "user answers after its client-side age (541 s on the client's clock, age 540 s)",
            ("P6",),
            protocol=MRTR_PROTOCOL,
        ),
        Scenario(
            "mrtr_reask",
            mrtr_reask,
            "protocol 2026-07-28: the tool asks the answered question again in the next "
            "round (a fresh state, the same question)",
            ("P2",),
            protocol=MRTR_PROTOCOL,
        ),
        Scenario(
            "mrtr_restart",
            mrtr_restart,
            "protocol 2026-07-28: the server restarts with a fresh key while the question "
            "is shown (its state is unverifiable: -32602 invalid_request_state)",
            ("P3",),
            protocol=MRTR_PROTOCOL,
        ),
    )
)
"""The MRTR-era scenarios (mcp 2.x only: protocol 2026-07-28 needs its server and
``Client``)."""

SCENARIOS: Mapping[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "seed",
            seed,
            "the call's stream is cut around a deadline that fires silently while the "
            "client is away; the dead question is replayed from a stale cursor",
            ("P2", "P7"),
        ),
        Scenario(
            "replayed_cancel",
            replayed_cancel,
            "as seed, the deadline also emitting notifications/cancelled: the replay "
            "carries the question, then its cancellation",
            ("P1", "P2", "P7"),
        ),
        Scenario(
            "replay_everything",
            replay_everything,
            "the server replays the whole stream on a resume, the question the client "
            "already has included (same id, same event id)",
            ("P2",),
            event_store="replay_everything",
        ),
        Scenario(
            "answer_conn_error",
            answer_conn_error,
            "the answer POST fails with a connection error (retryable: resubmit, never re-prompt)",
            ("P2", "P4"),
        ),
        Scenario(
            "answer_rejected",
            answer_rejected,
            "the answer POST is rejected as terminal (HTTP 500, JSON-RPC 'no such pending "
            "request'), then the call's stream is cut",
            ("P1", "P3"),
        ),
        Scenario(
            "half_open",
            half_open,
            "the server holds the call's old stream half-open after a cut and refuses "
            "every resume with 409 until it lets go (at least 1.5 s)",
            ("P3", "L1"),
            retry_interval_ms=300,
            middle=functools.partial(holding_tier, refusal=TYPESCRIPT_409, hold_s=HOLD_S),
        ),
        Scenario(
            "session_expired",
            session_expired,
            "the server expires the session while the question is shown (404 on the "
            "session's requests)",
            ("P1", "P3"),
        ),
        Scenario(
            "happy",
            happy,
            "none: the user confirms in time (the control every client passes)",
            ("P5",),
        ),
        *_MRTR_SCENARIOS,
    )
}
"""Every scenario by name, in the order above (the module docstring tells what each
does and what the mcp 2.3.0 plain client does in it)."""
