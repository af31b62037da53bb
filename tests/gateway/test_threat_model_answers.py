"""An answer relayed with credentials the upstream has not accepted for the session is
recorded (the prompt answered upstream, or the answer kept in the store for the replica
that presented it) only once the upstream accepts those credentials for the session (the
result of a ``ping`` carrying them), never on its ``202`` alone: the upstream of these
tests answers every response POST ``202`` before its protocol layer checks who sent it
(as the mcp SDK's streamable HTTP transport does), then drops a stranger's. So B, who
knows A's session id and A's prompt id, cannot end A's prompt or have its answer
submitted as A's; A's own answer, relayed through a replica that does not hold the
session, still counts; an answer whose probe times out is relayed as it came and
recorded nowhere. Where a test has a direct counterpart it runs both ways and expects
the same.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
import pytest

pytest.importorskip("uvicorn")

from fsm.gateway.app import GatewayLimits
from fsm.gateway.store import MemoryStore
from tests.gateway import scripted_upstream as scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

STEP = 5.0
"""Safety bound of one wait: it only elapses when the awaited thing never comes."""

DECLINED: dict[str, Any] = {**scripted.ANSWER, "result": {"action": "decline"}}


class ProtocolLayerCheck(scripted.PostScreen):
    """An upstream whose transport answers every JSON-RPC response POST ``202`` before
    its protocol layer looks at who sent it (as the mcp SDK's streamable HTTP transport
    answers responses and notifications), and whose protocol layer then drops a response
    from another principal than the session's (``tok-a``): it never reaches the pending
    request (it is in ``dropped``). Everything else goes to the scripted ``inner``
    upstream."""

    def __init__(self, inner: scripted.Upstream) -> None:
        super().__init__(inner)
        self.dropped: list[dict[str, Any]] = []

    async def screen(self, headers: dict[str, str], msg: Any, send: Any) -> bool:
        response = isinstance(msg, dict) and "method" not in msg
        if not response or scripted.only_a(headers):
            return False
        self.dropped.append(msg)  # accepted by the transport, dropped by the session
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return True


def answers_taken(up: scripted.Upstream) -> list[tuple[str | None, Any]]:
    """The answers that reached ``up``: (``Authorization``, result), in order."""
    return [
        (h.get("authorization"), json.loads(body)["result"])
        for m, h, body in up.requests
        if m == "POST" and body and "result" in json.loads(body)
    ]


@scripted.VIAS
async def test_a_strangers_answer_taken_202_unchecked_does_not_swallow_the_owners(
    via: str,
) -> None:
    """B (own token) answers A's open prompt "decline"; the upstream answers ``202`` and
    its protocol layer drops B's answer. A's own answer then reaches the server (``202``)
    and A's call ends with its result, as direct: B's ``202`` recorded nothing, since the
    ``ping`` the gateway asks with B's token (one, for B's one answer) is refused."""
    inner = scripted.asking(scripted.Upstream(accepts=scripted.only_a))
    up = ProtocolLayerCheck(inner)
    limits = GatewayLimits(standalone_hold_s=0)
    async with (
        scripted.served(via, up, limits=limits) as (url, _gw),
        httpx2.AsyncClient(timeout=STEP * 2) as http,
    ):

        async def b_answers() -> int:
            b = await http.post(url, json=DECLINED, headers=scripted.B_HEAD)
            return b.status_code

        b, a, reached, messages = await scripted.while_a_is_asked(http, url, inner, b_answers)
    assert (b, len(up.dropped)) == (202, 1)  # as direct: B's answer dropped upstream
    assert (a, reached) == (202, True), "A's answer never reached the upstream"
    assert messages[-1] == scripted.result(7)
    assert answers_taken(inner) == [("Bearer tok-a", {"action": "accept"})]
    assert inner.pings("tok-b") == (0 if via == "direct" else 1)


async def test_a_strangers_answer_on_another_replica_is_not_submitted_as_the_owners() -> None:
    """Two replicas on one store. A's call on replica 1 shows A's prompt (claimed there,
    under a lease, with the stream's cursor); A's connection breaks. B (own token)
    answers it "decline" through replica 2, which never saw the request; the upstream
    answers ``202`` and drops it (as direct: A's prompt stays A's). A resumes on replica
    2, which watches the claim replica 1 made on the stream: no answer of B's is in the
    store for it to submit, and none reaches the server with A's credentials."""
    inner = scripted.Upstream(accepts=scripted.only_a)
    gap = anyio.Event()  # the prompt comes in a read of its own, after A read e0
    inner.call = [
        scripted.sse("e0", scripted.PROGRESS),
        gap,
        scripted.sse("e1", scripted.elicit(1)),
        inner.answered,
        scripted.sse("e2", scripted.result(7)),
    ]
    inner.replay = lambda cursor: [inner.answered, scripted.sse("e2", scripted.result(7))]
    up = ProtocolLayerCheck(inner)
    store = MemoryStore()
    limits = GatewayLimits(standalone_hold_s=0, lease_s=0.3)
    async with (
        scripted.two_replicas_for(up, store=store, limits=limits) as (r1, r2),
        httpx2.AsyncClient(timeout=STEP * 2) as http,
    ):
        async with scripted.a_call(http, r1.url) as (a_head, pieces):
            seen = await scripted.read_until(pieces, b"progress")
            gap.set()
            seen += await scripted.read_until(pieces, b"elicitation/create")
        # A's connection broke with the prompt shown; B answers through replica 2
        b = await http.post(r2.url, json=DECLINED, headers=scripted.B_HEAD)
        stored = await store.answer_of(scripted.SID, 1)
        prompt_id = next(eid for eid, d in scripted.parse(seen) if "elicitation" in d)
        assert prompt_id is not None
        get = {**a_head, "accept": "text/event-stream", "last-event-id": prompt_id}
        async with http.stream("GET", r2.url, headers=get) as resumed:
            with anyio.move_on_after(STEP):  # elapses: no answer is to come
                await inner.answered.wait()
    assert (b.status_code, len(up.dropped)) == (202, 1)  # B's answer dropped, as direct
    assert stored is None, "B's answer was kept in the store as the prompt's"
    assert resumed.status_code == 200
    assert answers_taken(inner) == [], "B's answer reached the upstream with A's credentials"


async def test_the_owners_answer_through_a_replica_not_holding_the_session_is_kept() -> None:
    """Two replicas on one store. A's call on replica 1 shows A's prompt; A answers
    through replica 2, which does not hold A's session (a balancer without affinity, or
    a failover). Replica 2 relays it; the upstream takes it (``202``) and the ``ping``
    replica 2 asks with A's token proves it: A's answer is kept in the store for the
    replica that presented the prompt, replica 2 holds the session from then on, and
    A's call ends with its result."""
    inner = scripted.asking(scripted.Upstream(accepts=scripted.only_a))
    up = ProtocolLayerCheck(inner)
    store = MemoryStore()
    limits = GatewayLimits(standalone_hold_s=0)
    async with (
        scripted.two_replicas_for(up, store=store, limits=limits) as (r1, r2),
        httpx2.AsyncClient(timeout=STEP * 2) as http,
        scripted.a_call(http, r1.url) as (a_head, pieces),
    ):
        seen = await scripted.read_until(pieces, b"elicitation/create")
        a = await http.post(r2.url, json=scripted.ANSWER, headers=a_head)
        stored = await store.answer_of(scripted.SID, 1)
        held = sorted(r2.gateway._sessions)
        with anyio.fail_after(STEP):
            async for piece in pieces:
                seen += piece
    messages = [json.loads(d) for _, d in scripted.parse(seen) if d]
    assert a.status_code == 202
    assert stored == {"action": "accept"}
    assert held == [scripted.SID]
    assert inner.pings("tok-a") == 1  # replica 2's probe, once
    assert answers_taken(inner) == [("Bearer tok-a", {"action": "accept"})]
    assert messages[-1] == scripted.result(7)


@scripted.VIAS
async def test_an_answer_whose_probe_times_out_is_relayed_and_not_recorded(via: str) -> None:
    """A answers its prompt with a refreshed token (``tok-a2``, one the upstream takes,
    not yet proven for the session) against an upstream whose ``ping`` never answers.
    The answer goes upstream as it came, A gets the upstream's ``202`` and its call ends
    with its result, as direct; the probe (one) times out, so the gateway neither
    records the answer nor submits one of its own, and ``tok-a2`` stays unproven."""
    never = anyio.Event()
    inner = scripted.asking(scripted.Upstream(ping=[never]))
    limits = GatewayLimits(standalone_hold_s=0, probe_timeout_s=0.5)
    async with (
        scripted.served(via, inner, limits=limits) as (url, gw),
        httpx2.AsyncClient(timeout=STEP * 2) as http,
    ):
        guards = [gw.gateway] if gw is not None else []

        async def nothing() -> None:
            return None

        refreshed = {"authorization": "Bearer tok-a2"}
        _, a, reached, messages = await scripted.while_a_is_asked(
            http, url, inner, nothing, refreshed
        )
        observed = [g.session_guard(scripted.SID) for g in guards]
        states = [og.guard.state_of((scripted.SID, 1)) for og in observed]
        violations = [og.violations for og in observed]
        never.set()
    assert (a, reached) == (202, True)
    assert messages == [scripted.elicit(1), scripted.result(7)]
    assert answers_taken(inner) == [("Bearer tok-a2", {"action": "accept"})]
    assert inner.responses("error") == []  # no refusal of the prompt either
    assert inner.pings("tok-a2") == (0 if via == "direct" else 1)
    assert not {"answered", "submitting", "submitted"} & set(states)
    assert violations == ([] if via == "direct" else [[]])
