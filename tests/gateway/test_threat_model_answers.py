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

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import httpx2
import pytest

pytest.importorskip("uvicorn")

from fsm.gateway.app import GatewayLimits
from fsm.gateway.ids import EventIdKeys
from fsm.gateway.store import MemoryStore
from fsm.wire.serving import on_loopback, whole_body
from support.gateway import running_gateway
from tests.gateway import scripted_upstream as scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

STEP = 5.0
"""Safety bound of one wait: it only elapses when the awaited thing never comes."""

ANSWER: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "result": {"action": "accept"}}
DECLINED: dict[str, Any] = {**ANSWER, "result": {"action": "decline"}}


class ProtocolLayerCheck:
    """An upstream whose transport answers every JSON-RPC response POST ``202`` before
    its protocol layer looks at who sent it (as the mcp SDK's streamable HTTP transport
    answers responses and notifications), and whose protocol layer then drops a response
    from another principal than the session's (``tok-a``): it never reaches the pending
    request (it is in ``dropped``). Everything else goes to the scripted ``inner``
    upstream."""

    def __init__(self, inner: scripted.Upstream) -> None:
        self.inner = inner
        self.dropped: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.inner(scope, receive, send)
            return
        body = await whole_body(receive)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        msg = json.loads(body) if body else None
        if isinstance(msg, dict) and "method" not in msg and not scripted.only_a(headers):
            self.dropped.append(msg)  # accepted by the transport, dropped by the session
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        sent = False

        async def again() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.inner(scope, again, send)


def asking(up: scripted.Upstream) -> scripted.Upstream:
    """``up`` scripted so that a call (id 7) asks A (prompt id 1) and ends with its
    result once an answer reaches it."""
    up.call = [
        scripted.sse("e1", scripted.elicit(1)),
        up.answered,
        scripted.sse("e2", scripted.result(7)),
    ]
    return up


def pings(up: scripted.Upstream, token: str) -> int:
    """The ``ping``s with bearer ``token`` that reached ``up`` (the gateway's probes)."""
    return sum(
        m == "POST" and h.get("authorization") == f"Bearer {token}" and b'"ping"' in body
        for m, h, body in up.requests
    )


def answers_taken(up: scripted.Upstream) -> list[tuple[str | None, Any]]:
    """The answers that reached ``up``: (``Authorization``, result), in order."""
    return [
        (h.get("authorization"), json.loads(body)["result"])
        for m, h, body in up.requests
        if m == "POST" and body and "result" in json.loads(body)
    ]


async def while_a_is_asked(
    http: Any,
    url: str,
    meanwhile: Callable[[], Awaitable[Any]],
    up: scripted.Upstream,
    a_answers: dict[str, str] | None = None,
) -> tuple[Any, int, bool, list[Any]]:
    """A begins a session (``tok-a``) and calls a tool (id 7) until its prompt (id 1)
    shows; ``meanwhile()`` runs; A answers (with ``a_answers`` headers over its own, if
    given); then ``meanwhile()``'s value, the status of A's answer, whether it reached the
    upstream (within :data:`STEP`), and the call's messages as far as they came."""
    a_head = await scripted.a_session(http, url)
    async with http.stream("POST", url, json=scripted.CALL, headers=a_head) as stream:
        pieces = stream.aiter_raw()
        seen = b""
        while b"elicitation/create" not in seen:
            seen += await pieces.__anext__()
        got = await meanwhile()
        a = await http.post(url, json=ANSWER, headers={**a_head, **(a_answers or {})})
        with anyio.move_on_after(STEP):
            await up.answered.wait()
        reached = up.answered.is_set()
        rest = b""
        if reached:
            with anyio.move_on_after(STEP):
                async for piece in pieces:
                    rest += piece
    messages = [json.loads(d) for _, d in scripted.parse(seen + rest) if d]
    return got, a.status_code, reached, messages


@contextlib.asynccontextmanager
async def target(via: str, app: Any, **kwargs: Any) -> AsyncIterator[str]:
    """The URL clients use: ``app`` itself (``direct``) or a gateway replica in front of
    it (``gateway``; keywords go to it)."""
    if via == "direct":
        async with on_loopback(app) as url:
            yield url
    else:
        async with scripted.gateway_for(app, **kwargs) as gw:
            yield gw.url


VIAS = pytest.mark.parametrize("via", ["direct", "gateway"])


@VIAS
async def test_a_strangers_answer_taken_202_unchecked_does_not_swallow_the_owners(
    via: str,
) -> None:
    """B (own token) answers A's open prompt "decline"; the upstream answers ``202`` and
    its protocol layer drops B's answer. A's own answer then reaches the server (``202``)
    and A's call ends with its result, as direct: B's ``202`` recorded nothing, since the
    ``ping`` the gateway asks with B's token (one, for B's one answer) is refused."""
    inner = asking(scripted.Upstream(accepts=scripted.only_a))
    up = ProtocolLayerCheck(inner)
    limits = GatewayLimits(standalone_hold_s=0)
    async with (
        target(via, up, limits=limits) as url,
        httpx2.AsyncClient(timeout=STEP * 2) as http,
    ):

        async def b_answers() -> int:
            b = await http.post(url, json=DECLINED, headers=scripted.B_HEAD)
            return b.status_code

        b, a, reached, messages = await while_a_is_asked(http, url, b_answers, inner)
    assert (b, len(up.dropped)) == (202, 1)  # as direct: B's answer dropped upstream
    assert (a, reached) == (202, True), "A's answer never reached the upstream"
    assert messages[-1] == scripted.result(7)
    assert answers_taken(inner) == [("Bearer tok-a", {"action": "accept"})]
    assert pings(inner, "tok-b") == (0 if via == "direct" else 1)


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
    shared: dict[str, Any] = {
        "store": store,
        "id_keys": EventIdKeys.generate(),
        "limits": GatewayLimits(standalone_hold_s=0, lease_s=0.3),
    }
    async with (
        on_loopback(up) as url,
        running_gateway(url, **shared) as r1,
        running_gateway(url, **shared) as r2,
        httpx2.AsyncClient(timeout=STEP * 2) as http,
    ):
        a_head = await scripted.a_session(http, r1.url)
        async with http.stream("POST", r1.url, json=scripted.CALL, headers=a_head) as stream:
            seen = b""
            pieces = stream.aiter_raw()
            while b"progress" not in seen:
                seen += await pieces.__anext__()
            gap.set()
            while b"elicitation/create" not in seen:
                seen += await pieces.__anext__()
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
    inner = asking(scripted.Upstream(accepts=scripted.only_a))
    up = ProtocolLayerCheck(inner)
    store = MemoryStore()
    shared: dict[str, Any] = {
        "store": store,
        "id_keys": EventIdKeys.generate(),
        "limits": GatewayLimits(standalone_hold_s=0),
    }
    async with (
        on_loopback(up) as url,
        running_gateway(url, **shared) as r1,
        running_gateway(url, **shared) as r2,
        httpx2.AsyncClient(timeout=STEP * 2) as http,
    ):
        a_head = await scripted.a_session(http, r1.url)
        async with http.stream("POST", r1.url, json=scripted.CALL, headers=a_head) as stream:
            seen = b""
            pieces = stream.aiter_raw()
            while b"elicitation/create" not in seen:
                seen += await pieces.__anext__()
            a = await http.post(r2.url, json=ANSWER, headers=a_head)
            stored = await store.answer_of(scripted.SID, 1)
            held = sorted(r2.gateway._sessions)
            with anyio.fail_after(STEP):
                async for piece in pieces:
                    seen += piece
    messages = [json.loads(d) for _, d in scripted.parse(seen) if d]
    assert a.status_code == 202
    assert stored == {"action": "accept"}
    assert held == [scripted.SID]
    assert pings(inner, "tok-a") == 1  # replica 2's probe, once
    assert answers_taken(inner) == [("Bearer tok-a", {"action": "accept"})]
    assert messages[-1] == scripted.result(7)


@VIAS
async def test_an_answer_whose_probe_times_out_is_relayed_and_not_recorded(via: str) -> None:
    """A answers its prompt with a refreshed token (``tok-a2``, one the upstream takes,
    not yet proven for the session) against an upstream whose ``ping`` never answers.
    The answer goes upstream as it came, A gets the upstream's ``202`` and its call ends
    with its result, as direct; the probe (one) times out, so the gateway neither
    records the answer nor submits one of its own, and ``tok-a2`` stays unproven."""
    never = anyio.Event()
    inner = asking(scripted.Upstream(ping=[never]))
    limits = GatewayLimits(standalone_hold_s=0, probe_timeout_s=0.5)
    guards: list[Any] = []
    async with contextlib.AsyncExitStack() as stack:
        if via == "direct":
            url = await stack.enter_async_context(on_loopback(inner))
        else:
            gw = await stack.enter_async_context(scripted.gateway_for(inner, limits=limits))
            url = gw.url
            guards.append(gw.gateway)
        http = await stack.enter_async_context(httpx2.AsyncClient(timeout=STEP * 2))

        async def nothing() -> None:
            return None

        refreshed = {"authorization": "Bearer tok-a2"}
        _, a, reached, messages = await while_a_is_asked(http, url, nothing, inner, refreshed)
        observed = [g.session_guard(scripted.SID) for g in guards]
        states = [og.guard.state_of((scripted.SID, 1)) for og in observed]
        violations = [og.violations for og in observed]
        never.set()
    assert (a, reached) == (202, True)
    assert messages == [scripted.elicit(1), scripted.result(7)]
    assert answers_taken(inner) == [("Bearer tok-a2", {"action": "accept"})]
    assert inner.responses("error") == []  # no refusal of the prompt either
    assert pings(inner, "tok-a2") == (0 if via == "direct" else 1)
    assert not {"answered", "submitting", "submitted"} & set(states)
    assert violations == ([] if via == "direct" else [[]])
