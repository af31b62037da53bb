"""What proves a client's credentials for a session: only what the upstream says about the
session itself, never a status it gives before looking, or one that carries a refusal.

The bed of ``test_threat_model.py`` (A in the middle of its ``delete_files`` call, B
holding A's session id), with two upstreams that answer a stranger ``200``:

* behind a CORS layer (Starlette's ``CORSMiddleware`` in front of the auth check, as the
  mcp SDK documents for browser clients), which answers a preflight ``OPTIONS`` ``200``
  before any check of token or session;
* one that refuses another principal in its protocol layer: ``200`` with a JSON-RPC
  error (mode ``"rpc"`` of ``auth_upstream.py``).

| attacker | what they try | what they would get if any 2xx proved their credentials | what they get | test |
|---|---|---|---|---|
| B, no token or its own | a CORS preflight naming A's session, then answer A's prompt | the gateway takes B's answer (``202``) and submits it: the upstream refuses it and A's call fails | the upstream's ``401``/``403``, relayed: a method the transport does not define proves nothing and changes no state; A answers, the files are deleted once | ``test_a_preflight_proves_nothing`` |
| B, own token, against a server that answers ``404`` for other principals' sessions | a preflight, then a ``ping`` | the ``404`` ends A's session on every replica | the ``404``, relayed; A's session lives | ``test_a_preflight_then_a_404_does_not_end_the_session`` |
| B, no token | a preflight naming A's session with ``MCP-Protocol-Version: 1999-01-01`` | the gateway's own requests for A carry that version: A's answer is refused and A's call fails | nothing changes; A's call completes | ``test_a_preflight_sets_no_protocol_version`` |
| anyone | preflights naming made-up session ids, past ``max_sessions`` | each held as a session the upstream accepted; A's idle session dropped | no session held for them; A's kept | ``test_preflights_naming_made_up_sessions_hold_none`` |
| B, own token, against a server that checks ``POST``s but lets a ``GET`` through | open a standalone stream (``200``), then answer A's prompt | B's credentials proven by the stream: the gateway takes B's answer and submits it, the upstream refuses it, A's call fails | the upstream's ``403`` to the answer, relayed; A's answer ends A's call | ``test_a_get_the_upstream_lets_through_proves_nothing`` |
| B, own token, against a server that refuses it with ``200`` and a JSON-RPC error | answer A's prompt, or ``ping`` first and then answer | the gateway records A's prompt answered (A's own answer dropped, A's call waits forever), or takes B's answer after the ping | the upstream's ``200`` error, relayed both times; A's answer ends A's call | ``test_a_refusal_in_a_200_proves_nothing`` |

Real loopback HTTP throughout; every wait is on an observed event, with a safety timeout
that only elapses when the event never comes.
"""  # noqa: E501 (a Markdown table's rows are one line each)

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

from auth_upstream import (
    FORBIDDEN_BODY,
    SESSION_NOT_FOUND_BODY,
    TOKENS,
    UNAUTHORIZED_BODY,
    refused_in_rpc,
    running_auth_server,
)
from scripted_upstream import HEAD, PROGRESS, SID, Upstream, elicit, gateway_for, parse, result, sse
from test_threat_model import (
    A_TOKEN,
    B_CONTENT,
    B_TOKEN,
    INITIALIZE,
    STEP,
    VIAS,
    Reply,
    Seen,
    Via,
    alice,
    answer_of,
    b_answers,
    b_post,
    fate_expected,
    open_bed,
    post_rpc,
    reached,
    rpc_headers,
)

from fsm.gateway.app import GatewayLimits
from support.gateway import running_gateway

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]

PING: dict[str, Any] = {"jsonrpc": "2.0", "id": "b-ping", "method": "ping"}


def rpc_method(message: Any) -> str | None:
    """The JSON-RPC method of a message (``None``: a response, or not JSON-RPC)."""
    return message.get("method") if isinstance(message, dict) else None


def preflight(sid: str, token: str | None, **extra: str) -> dict[str, str]:
    """The headers of a CORS preflight for a ``POST`` of session ``sid`` (a browser sends
    no credentials with one; a raw client may)."""
    headers = {
        "mcp-session-id": sid,
        "origin": "http://127.0.0.1",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type, mcp-session-id, authorization",
        **extra,
    }
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return headers


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize(
    ("token", "refused"),
    [(None, Reply(401, UNAUTHORIZED_BODY)), (B_TOKEN, Reply(403, FORBIDDEN_BODY))],
    ids=["no-token", "own-token"],
)
async def test_a_preflight_proves_nothing(via: Via, token: str | None, refused: Reply) -> None:
    """Row 1: the CORS layer answers B's preflight ``200``; B's answer to A's prompt then
    gets the upstream's refusal, as direct, and A's prompt stays A's. The upstream is
    asked nothing more than direct: the preflight sets off no probe of B's
    credentials."""
    async with open_bed(via, cors=True) as bed, alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, STEP)
        pre = await bed.raw.request("OPTIONS", bed.target(0), headers=preflight(a.sid, token))
        seen = await b_answers(bed, a, token)
        asked = [(r.method, rpc_method(r.message)) for r in bed.upstream.auth.refused]
    expected = Seen(refused, False, fate_expected(bed))
    assert (pre.status_code, seen, asked) == (200, expected, [("POST", None)])


@pytest.mark.parametrize("via", VIAS)
async def test_a_preflight_then_a_404_does_not_end_the_session(via: Via) -> None:
    """Row 2: after B's preflight with its own token, a server that hides other
    principals' sessions answers B's ``ping`` ``404``; A's session lives everywhere."""
    async with open_bed(via, mode="404", cors=True) as bed, alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, STEP)
        pre = await bed.raw.request("OPTIONS", bed.target(0), headers=preflight(a.sid, B_TOKEN))
        b = await b_post(bed, bed.target(0), PING, rpc_headers(a.sid, B_TOKEN))
        fate = await a.fate()
        seen = Seen(b, reached(bed, "b-ping"), fate)
    expected = Seen(Reply(404, SESSION_NOT_FOUND_BODY), False, fate_expected(bed))
    assert (pre.status_code, seen) == (200, expected)


@pytest.mark.parametrize("via", VIAS)
async def test_a_preflight_sets_no_protocol_version(via: Via) -> None:
    """Row 3: B's preflight (no token) names a protocol version no server speaks; the
    gateway's own requests for A go on carrying A's, and A's call completes."""
    async with open_bed(via, cors=True) as bed, alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, STEP)
        headers = preflight(a.sid, None, **{"mcp-protocol-version": "1999-01-01"})
        pre = await bed.raw.request("OPTIONS", bed.target(0), headers=headers)
        fate = await a.fate()
    assert (pre.status_code, fate) == (200, fate_expected(bed))


async def test_preflights_naming_made_up_sessions_hold_none() -> None:
    """Row 4: a replica with room for two sessions holds A's; preflights naming three
    made-up ids (each answered ``200`` by the CORS layer) hold none of them, so A's idle
    session is still held, with its guard."""
    async with (
        running_auth_server(TOKENS, cors=True) as upstream,
        running_gateway(upstream.url, limits=GatewayLimits(max_sessions=2)) as gw,
        httpx2.AsyncClient(timeout=STEP) as raw,
    ):
        _, headers, _ = await post_rpc(raw, gw.url, INITIALIZE, rpc_headers(None, A_TOKEN))
        sid = headers["mcp-session-id"]
        statuses = []
        for n in range(3):
            pre = await raw.request("OPTIONS", gw.url, headers=preflight(f"made-up-{n}", None))
            statuses.append(pre.status_code)
        held = sorted(gw.gateway._sessions)
    assert (statuses, held) == ([200, 200, 200], [sid])


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("ping_first", [False, True], ids=["answer", "ping-then-answer"])
async def test_a_refusal_in_a_200_proves_nothing(via: Via, ping_first: bool) -> None:
    """Row 5: the upstream refuses B (own token) with ``200`` and a JSON-RPC error, to a
    ``ping`` and to an answer to A's prompt alike; the gateway relays both refusals,
    records nothing, and A's own answer ends A's call."""
    async with open_bed(via, mode="rpc") as bed, alice(bed) as a:
        a.start()
        prompt = await bed.user.wait_presented(1, STEP)
        pinged = None
        if ping_first:
            pinged = await b_post(bed, bed.target(0), PING, rpc_headers(a.sid, B_TOKEN))
        answer = answer_of(prompt.request.request_id, B_CONTENT)
        b = await b_post(bed, bed.target(0), answer, rpc_headers(a.sid, B_TOKEN))
        fate = await a.fate()
        seen = Seen((pinged, b), reached(bed, "bob") or reached(bed, "b-ping"), fate)
    refused_ping = Reply(200, refused_in_rpc(PING)) if ping_first else None
    expected_b = (refused_ping, Reply(200, refused_in_rpc(answer)))
    assert seen == Seen(expected_b, False, fate_expected(bed))


async def test_a_get_the_upstream_lets_through_proves_nothing() -> None:
    """Row 6: an upstream that checks a session's ``POST``s but lets a ``GET`` through
    opens B's standalone stream (``200``); B's answer to A's prompt then gets the
    upstream's ``403``, as direct, and A's own answer ends A's call."""
    up = Upstream(
        accepts=lambda headers: headers.get("authorization") == "Bearer tok-a",
        unchecked=frozenset({"GET"}),
        standalone=[sse("s1", PROGRESS)],
    )
    up.call = [sse("e1", elicit(1)), up.answered, sse("e2", result(7))]
    a_head = {**HEAD, "authorization": "Bearer tok-a"}
    b_head = {**HEAD, "authorization": "Bearer tok-b", "mcp-session-id": SID}
    limits = GatewayLimits(standalone_hold_s=0)
    async with gateway_for(up, limits=limits) as gw, httpx2.AsyncClient(timeout=STEP) as http:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
        assert (await http.post(gw.url, json=init, headers=a_head)).status_code == 200
        a_head["mcp-session-id"] = SID
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "x"}}
        async with http.stream("POST", gw.url, json=call, headers=a_head) as stream:
            pieces = stream.aiter_raw()
            seen = b""
            while b"elicitation/create" not in seen:
                seen += await pieces.__anext__()
            async with http.stream("GET", gw.url, headers=b_head) as b_get:
                b_status = b_get.status_code
            answer = {"jsonrpc": "2.0", "id": 1, "result": {"action": "accept", "content": {}}}
            b = await http.post(gw.url, json=answer, headers=b_head)
            a = await http.post(gw.url, json=answer, headers=a_head)
            rest = b"".join([piece async for piece in pieces])
    messages = [json.loads(data) for _, data in parse(seen + rest) if data]
    errors = [m for m in messages if "error" in m]
    assert (b_status, b.status_code, a.status_code, messages[-1], errors) == (
        200,
        403,
        202,
        result(7),
        [],
    )
