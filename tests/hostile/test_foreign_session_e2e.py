"""Foreign-session replay against a real mcp 2.3.0 server whose event store is shared.

The python-sdk example event store keeps one log for every session, keyed by stream id,
and a POST stream's id is the JSON-RPC request id. Two sessions that make the same calls
therefore share stream ids: when session A resumes its ``tools/call`` stream, the server
replays session B's events of that stream to A.

Every test runs the same steps against one server (behind the fault proxy, all on
127.0.0.1):

1. session A (the client under test) calls ``delete_files`` on three files; either the
   prompt reaches A live, or (``a_elicits=False``) A's tool is parked before it elicits;
2. A's POST stream is cut abruptly and A's resume ``GET`` is held by the proxy;
3. session B (a plain client) makes the same call on one other file: its ``tools/call``
   has A's JSON-RPC id and its ``elicitation/create`` has A's elicitation id (both
   sessions count from the same start); B's user confirms and B's call completes;
4. A's resume is released.

With ``event_store="shared"`` the resume replays B's prompt and B's result to A. The
plain client presents B's prompt to A's user and returns B's result as A's; the guarded
client refuses B's prompt when its id is one A already holds (``id-reused``), but presents
it when the id is new to A, and takes B's result as A's own (same origin id): the residual
risk described in ``docs/hostile.md``. With ``event_store="scoped"`` nothing foreign is
replayed (control). Every wait is on observed traffic or state, with safety timeouts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx2
import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

from fsm import actions as act
from fsm import events as ev
from fsm import properties as P
from fsm.wire.proxy import Exchange, is_resume_get
from support.scenarios import (
    ClientEnv,
    ClientFactory,
    Outcome,
    Rig,
    User,
    guarded_client,
    open_rig,
    plain_client,
)

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]

A_FILES = ["a1.txt", "a2.txt", "a3.txt"]
B_FILES = ["b-only.txt"]
A_PROMPT = "Delete 3 files?"
B_PROMPT = "Delete 1 files?"
A_RESULT = "Deleted 3 files: a1.txt, a2.txt, a3.txt"
B_RESULT = "Deleted 1 files: b-only.txt"
STEP_TIMEOUT = 10.0


@dataclass
class Run:
    """What one run of the steps produced, from the wire, the users and the server."""

    sid_a: str
    sid_b: str
    outcome_a: Outcome
    outcome_b: Outcome
    user_a: User
    post_a: Exchange
    post_b: Exchange
    resume_a: Exchange
    replayed: list[dict[str, Any]]
    """JSON messages the server replayed on A's resume (on the wire, before any guard)."""
    replayed_ids: list[str | None]
    """Their SSE event ids."""
    live: list[dict[str, Any]]
    """JSON messages sent on A's resume after its replay (the live tail)."""
    a_pending_state: str
    """Server side: the state of A's own elicitation when the run ended."""
    decisions: list[tuple[ev.Event, tuple[act.Action, ...]]] = field(default_factory=list)
    observations: list[P.Observation] = field(default_factory=list)
    violations: list[Any] = field(default_factory=list)

    def decided(self, message: dict[str, Any]) -> tuple[act.Action, ...]:
        """The guard's actions for the SSE event carrying ``message`` on A's stream."""
        found = [
            actions
            for event, actions in self.decisions
            if isinstance(event, ev.SseEvent) and event.data == message
        ]
        assert len(found) == 1, found
        return found[0]


class _Call:
    def __init__(self) -> None:
        self.outcome = Outcome("pending")
        self.done = anyio.Event()

    async def run(self, client: Any, arguments: dict[str, Any]) -> None:
        try:
            self.outcome = Outcome.of_result(await client.call_tool("delete_files", arguments))
        except Exception as exc:
            self.outcome = Outcome.of_exception(exc)
        finally:
            self.done.set()

    async def wait(self) -> Outcome:
        with anyio.fail_after(STEP_TIMEOUT):
            await self.done.wait()
        return self.outcome


def _record_decisions(client: Any) -> list[tuple[ev.Event, tuple[act.Action, ...]]]:
    """Record every (event, actions) pair the guarded client's guard decides."""
    observed = client.session.guard
    decisions: list[tuple[ev.Event, tuple[act.Action, ...]]] = []
    feed = observed.feed

    def recording_feed(event: ev.Event) -> tuple[act.Action, ...]:
        actions: tuple[act.Action, ...] = feed(event)
        decisions.append((event, actions))
        return actions

    observed.feed = recording_feed
    return decisions


def _latest_session(rig: Rig) -> str:
    """The session id the proxy saw last (the session just initialized)."""
    sid = rig.session_id()
    assert sid is not None
    return sid


def _tools_call_of(rig: Rig, session_id: str) -> Exchange:
    found = [
        ex
        for ex in rig.proxy.exchanges.values()
        if ex.rpc_method == "tools/call" and ex.headers.get("mcp-session-id") == session_id
    ]
    assert len(found) == 1, found
    return found[0]


async def _run(
    event_store: Literal["shared", "scoped"],
    factory: ClientFactory,
    *,
    a_elicits: bool = True,
    a_presentations: int = 1,
) -> Run:
    """Run steps 1-4 (module docstring); A's call then ends by itself (a foreign result)
    or, when nothing foreign completed it, by A's user confirming A's own prompt.
    ``a_presentations``: how many presentations to A's user to wait for at the end."""
    async with (
        open_rig(event_store=event_store) as rig,
        httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=300.0)) as http_b,
    ):
        user_a, user_b = User(), User()
        sids: dict[str, str | None] = {}
        env_a = ClientEnv(rig.proxy.url, rig.http, user_a.present, lambda: sids.get("a"))
        env_b = ClientEnv(rig.proxy.url, http_b, user_b.present, lambda: sids.get("b"))
        guarded = factory is guarded_client
        with anyio.fail_after(30):
            async with factory(env_a) as a:
                sid_a = _latest_session(rig)
                sids["a"] = sid_a
                decisions = _record_decisions(a) if guarded else []
                async with plain_client(env_b) as b, anyio.create_task_group() as tg:
                    sid_b = _latest_session(rig)
                    assert sid_b != sid_a
                    sids["b"] = sid_b

                    # 1. A calls; its prompt arrives live, or its tool parks before eliciting
                    call_a = _Call()
                    tg.start_soon(call_a.run, a, {"files": A_FILES, "gated": not a_elicits})
                    if a_elicits:
                        await user_a.wait_presented(1, STEP_TIMEOUT)
                    else:
                        await rig.controller.wait_pending(state="gated", timeout=STEP_TIMEOUT)
                    post_a = _tools_call_of(rig, sid_a)
                    await rig.primed(post_a, STEP_TIMEOUT)
                    pending_a = rig.controller.pending[0]
                    assert pending_a.session_id == sid_a

                    # 2. A's stream breaks; its resume is parked before the server
                    hold = rig.proxy.hold_next(
                        lambda ex: is_resume_get(ex) and ex.headers.get("mcp-session-id") == sid_a
                    )
                    await rig.proxy.cut(post_a, "abrupt")
                    resume_a = await hold.wait_arrived(STEP_TIMEOUT)

                    # 3. B makes the same call (same JSON-RPC id) and completes it
                    call_b = _Call()
                    tg.start_soon(call_b.run, b, {"files": B_FILES})
                    prompt_b = await user_b.wait_presented(1, STEP_TIMEOUT)
                    assert prompt_b.request.message == B_PROMPT
                    user_b.answer(0)
                    outcome_b = await call_b.wait()
                    post_b = _tools_call_of(rig, sid_b)
                    assert post_b.json["id"] == post_a.json["id"]

                    # 4. A resumes
                    hold.release()
                    if event_store == "scoped":
                        # nothing foreign can end A's call: A's user confirms A's prompt
                        # once the resume has attached its live tail
                        await rig.primed(resume_a, STEP_TIMEOUT)
                        user_a.answer(0)
                    outcome_a = await call_a.wait()
                    await user_a.wait_presented(a_presentations, STEP_TIMEOUT)
                    # a full round trip on A: every handler of what A received has run
                    with anyio.fail_after(STEP_TIMEOUT):
                        await a.call_tool("ping", {})
                    a_pending_state = pending_a.state
                events = [
                    e for e in rig.proxy.log if e.kind == "sse_event" and e.exchange == resume_a.id
                ]
                # the replay comes first; the resume's priming event marks the live tail
                tail = next((i for i, e in enumerate(events) if not e.data), len(events))
                on_resume = [e for e in events[:tail] if e.data]
                run = Run(
                    sid_a=sid_a,
                    sid_b=sid_b,
                    outcome_a=outcome_a,
                    outcome_b=outcome_b,
                    user_a=user_a,
                    post_a=post_a,
                    post_b=post_b,
                    resume_a=resume_a,
                    replayed=[json.loads(e.data) for e in on_resume],
                    replayed_ids=[e.event_id for e in on_resume],
                    live=[json.loads(e.data) for e in events[tail:] if e.data],
                    a_pending_state=a_pending_state,
                    decisions=decisions,
                )
                if guarded:
                    session = a.session  # type: ignore[attr-defined]
                    run.observations = [o for o, _ in session.observations()]
                    run.violations = list(session.violations)
        return run


def _b_elicitation(run: Run) -> dict[str, Any]:
    found = [m for m in run.replayed if m.get("method") == "elicitation/create"]
    assert len(found) == 1, run.replayed
    return found[0]


def _b_result(run: Run) -> dict[str, Any]:
    found = [m for m in run.replayed if "result" in m]
    assert len(found) == 1, run.replayed
    return found[0]


def _assert_b_leaked_to_a(run: Run) -> None:
    """On the wire: A's resume carried B's prompt and B's result, nothing else."""
    assert run.outcome_b == Outcome("result", B_RESULT)
    elicit, result = _b_elicitation(run), _b_result(run)
    assert run.replayed == [elicit, result]
    assert elicit["params"]["message"] == B_PROMPT
    assert elicit["id"] == 1  # B's first elicitation: the same id as A's first one
    assert result["id"] == run.post_a.json["id"]
    assert result["result"]["content"][0]["text"] == B_RESULT
    # the very same stored events (same event ids) went to B live and to A on replay
    assert run.replayed_ids and set(run.replayed_ids) <= set(run.post_b.sse_event_ids)


# --------------------------------------------------------------------------- shared store


async def test_shared_store_plain_client_presents_foreign_prompt_and_result() -> None:
    run = await _run("shared", plain_client, a_presentations=2)

    _assert_b_leaked_to_a(run)
    # A's user is shown B's prompt, under A's session, with the id of A's own prompt
    prompts = [
        (p.request.session_id, p.request.request_id, p.request.message)
        for p in run.user_a.presentations
    ]
    assert prompts == [(run.sid_a, 1, A_PROMPT), (run.sid_a, 1, B_PROMPT)]
    # and A's call returns B's result: "deleted b-only.txt", while A's own tool on the
    # server is still waiting for A's confirmation
    assert run.outcome_a == Outcome("result", B_RESULT)
    assert run.a_pending_state == "asking"


async def test_shared_store_guard_refuses_colliding_prompt_but_takes_result() -> None:
    run = await _run("shared", guarded_client, a_presentations=1)

    _assert_b_leaked_to_a(run)
    key = (run.sid_a, 1)
    # detected: B's prompt reuses the id of A's open prompt with other params -> id-reused,
    # never presented (the SDK gets an empty event instead)
    elicit = run.decided(_b_elicitation(run))
    (ignore,) = elicit
    assert isinstance(ignore, act.Ignore)
    assert (ignore.reason, ignore.key) == ("id-reused", key)
    assert [p.request.message for p in run.user_a.presentations] == [A_PROMPT]
    assert sum(1 for o in run.observations if isinstance(o, P.Presented)) == 1
    # not detectable: B's response carries A's origin id, so it completes A's call with
    # B's result (the residual risk; only a session-scoped store prevents it)
    result = run.decided(_b_result(run))
    assert not any(isinstance(a, act.Ignore) for a in result)
    assert run.outcome_a == Outcome("result", B_RESULT)
    call = f"post:{run.post_a.json['id']}"
    ended = [o for o in run.observations if isinstance(o, P.Ended) and o.interaction == call]
    assert [o.outcome for o in ended] == ["completed"]
    # A's own prompt died with the call it belonged to: withdrawn, never answered
    assert [p.cancelled for p in run.user_a.presentations] == [True]
    assert not any(isinstance(o, P.Submitted) for o in run.observations)
    # the server still waits for A's confirmation; the monitor saw nothing wrong
    assert run.a_pending_state == "asking"
    assert run.violations == []


async def test_shared_store_guard_presents_foreign_prompt_with_new_id() -> None:
    run = await _run("shared", guarded_client, a_elicits=False, a_presentations=1)

    _assert_b_leaked_to_a(run)
    # not detectable: A never held elicitation id 1, so B's prompt looks like one sent
    # while A was disconnected, which replay must deliver: it is presented to A's user
    elicit = run.decided(_b_elicitation(run))
    assert any(isinstance(a, act.Present) for a in elicit)
    prompts = [
        (p.request.session_id, p.request.request_id, p.request.message)
        for p in run.user_a.presentations
    ]
    assert prompts == [(run.sid_a, 1, B_PROMPT)]
    # and B's result completes A's call (its own tool never asked anything)
    assert run.outcome_a == Outcome("result", B_RESULT)
    assert [p.cancelled for p in run.user_a.presentations] == [True]
    assert run.a_pending_state == "gated"
    assert run.violations == []


# --------------------------------------------------------------------------- control


@pytest.mark.parametrize("factory", [plain_client, guarded_client], ids=["plain", "guarded"])
async def test_scoped_store_replays_nothing_foreign(factory: ClientFactory) -> None:
    run = await _run("scoped", factory, a_presentations=1)

    assert run.outcome_b == Outcome("result", B_RESULT)
    assert run.post_b.json["id"] == run.post_a.json["id"]  # the same stream id as A's
    assert run.replayed == []
    assert [m["result"]["content"][0]["text"] for m in run.live] == [A_RESULT]
    assert not set(run.resume_a.sse_event_ids) & set(run.post_b.sse_event_ids)
    assert not set(run.post_a.sse_event_ids) & set(run.post_b.sse_event_ids)
    assert [p.request.message for p in run.user_a.presentations] == [A_PROMPT]
    # A's own confirmation completes A's own call
    assert run.outcome_a == Outcome("result", A_RESULT)
    assert run.a_pending_state == "answered"
    assert run.violations == []
