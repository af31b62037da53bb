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
from dataclasses import replace
from typing import Any

import anyio
import httpx2
import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

from auth_upstream import (
    SESSION_NOT_FOUND_BODY,
    TOKENS,
    refused_in_rpc,
    running_auth_server,
)

from fsm.gateway.app import GATEWAY_GUARD, GatewayLimits
from support.gateway import running_gateway
from tests.gateway import scripted_upstream as scripted
from tests.gateway import threat_bed as threat

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]


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


@pytest.mark.parametrize("via", threat.VIAS)
@threat.B_TOKENS
async def test_a_preflight_proves_nothing(
    via: threat.Via, token: str | None, refused: threat.Reply
) -> None:
    """Row 1: the CORS layer answers B's preflight ``200``; B's answer to A's prompt then
    gets the upstream's refusal, as direct, and A's prompt stays A's. The upstream is
    asked nothing more than direct: the preflight sets off no probe of B's
    credentials."""
    async with threat.open_bed(via, cors=True) as bed, threat.alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, threat.STEP)
        pre = await bed.raw.request("OPTIONS", bed.target(0), headers=preflight(a.sid, token))
        seen = await threat.b_answers(bed, a, token)
        asked = [(r.method, rpc_method(r.message)) for r in bed.upstream.auth.refused]
    expected = threat.Seen(refused, False, threat.fate_expected(bed))
    assert (pre.status_code, seen, asked) == (200, expected, [("POST", None)])


@pytest.mark.parametrize("via", threat.VIAS)
async def test_a_preflight_then_a_404_does_not_end_the_session(via: threat.Via) -> None:
    """Row 2: after B's preflight with its own token, a server that hides other
    principals' sessions answers B's ``ping`` ``404``; A's session lives everywhere."""
    async with threat.open_bed(via, mode="404", cors=True) as bed, threat.alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, threat.STEP)
        pre = await bed.raw.request(
            "OPTIONS", bed.target(0), headers=preflight(a.sid, threat.B_TOKEN)
        )
        b = await threat.b_post(
            bed, bed.target(0), threat.B_PING, threat.rpc_headers(a.sid, threat.B_TOKEN)
        )
        fate = await a.fate()
        seen = threat.Seen(b, threat.reached(bed, "b-ping"), fate)
    expected = threat.Seen(
        threat.Reply(404, SESSION_NOT_FOUND_BODY), False, threat.fate_expected(bed)
    )
    assert (pre.status_code, seen) == (200, expected)


@pytest.mark.parametrize("via", threat.VIAS)
async def test_a_preflight_sets_no_protocol_version(via: threat.Via) -> None:
    """Row 3: B's preflight (no token) names a protocol version no server speaks; the
    gateway's own requests for A go on carrying A's, and A's call completes."""
    async with threat.open_bed(via, cors=True) as bed, threat.alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, threat.STEP)
        headers = preflight(a.sid, None, **{"mcp-protocol-version": "1999-01-01"})
        pre = await bed.raw.request("OPTIONS", bed.target(0), headers=headers)
        fate = await a.fate()
    assert (pre.status_code, fate) == (200, threat.fate_expected(bed))


async def test_preflights_naming_made_up_sessions_hold_none() -> None:
    """Row 4: a replica with room for two sessions holds A's; preflights naming three
    made-up ids (each answered ``200`` by the CORS layer) hold none of them, so A's idle
    session is still held, with its guard."""
    async with (
        running_auth_server(TOKENS, cors=True) as upstream,
        running_gateway(upstream.url, limits=GatewayLimits(max_sessions=2)) as gw,
        httpx2.AsyncClient(timeout=threat.STEP) as raw,
    ):
        _, headers, _ = await threat.post_rpc(
            raw, gw.url, threat.INITIALIZE, threat.rpc_headers(None, threat.A_TOKEN)
        )
        sid = headers["mcp-session-id"]
        statuses = []
        for n in range(3):
            pre = await raw.request("OPTIONS", gw.url, headers=preflight(f"made-up-{n}", None))
            statuses.append(pre.status_code)
        held = sorted(gw.gateway._sessions)
    assert (statuses, held) == ([200, 200, 200], [sid])


@pytest.mark.parametrize("via", threat.VIAS)
@pytest.mark.parametrize("ping_first", [False, True], ids=["answer", "ping-then-answer"])
async def test_a_refusal_in_a_200_proves_nothing(via: threat.Via, ping_first: bool) -> None:
    """Row 5: the upstream refuses B (own token) with ``200`` and a JSON-RPC error, to a
    ``ping`` and to an answer to A's prompt alike; the gateway relays both refusals,
    records nothing, and A's own answer ends A's call."""
    async with threat.open_bed(via, mode="rpc") as bed, threat.alice(bed) as a:
        a.start()
        prompt = await bed.user.wait_presented(1, threat.STEP)
        pinged = None
        if ping_first:
            pinged = await threat.b_post(
                bed, bed.target(0), threat.B_PING, threat.rpc_headers(a.sid, threat.B_TOKEN)
            )
        answer = threat.answer_of(prompt.request.request_id, threat.B_CONTENT)
        b = await threat.b_post(
            bed, bed.target(0), answer, threat.rpc_headers(a.sid, threat.B_TOKEN)
        )
        fate = await a.fate()
        seen = threat.Seen(
            (pinged, b), threat.reached(bed, "bob") or threat.reached(bed, "b-ping"), fate
        )
    refused_ping = threat.Reply(200, refused_in_rpc(threat.B_PING)) if ping_first else None
    expected_b = (refused_ping, threat.Reply(200, refused_in_rpc(answer)))
    assert seen == threat.Seen(expected_b, False, threat.fate_expected(bed))


async def test_a_get_the_upstream_lets_through_proves_nothing() -> None:
    """Row 6: an upstream that checks a session's ``POST``s but lets a ``GET`` through
    opens B's standalone stream (``200``); B's answer to A's prompt then gets the
    upstream's ``403``, as direct, and A's own answer ends A's call."""
    up = scripted.asking(
        scripted.Upstream(
            accepts=scripted.only_a,
            unchecked=frozenset({"GET"}),
            standalone=[scripted.sse("s1", scripted.PROGRESS)],
        )
    )
    limits = GatewayLimits(standalone_hold_s=0)
    async with (
        scripted.gateway_for(up, limits=limits) as gw,
        httpx2.AsyncClient(timeout=threat.STEP) as http,
    ):

        async def b_acts() -> tuple[int, int]:
            async with http.stream("GET", gw.url, headers=scripted.B_HEAD) as b_get:
                b_status = b_get.status_code
            b = await http.post(gw.url, json=scripted.ANSWER, headers=scripted.B_HEAD)
            return b_status, b.status_code

        b_got, a, reached, messages = await scripted.while_a_is_asked(http, gw.url, up, b_acts)
    errors = [m for m in messages if "error" in m]
    assert (b_got, a, reached) == ((200, 403), 202, True)
    assert (messages[-1], errors) == (scripted.result(7), [])


@pytest.mark.parametrize("via", threat.VIAS)
async def test_a_refused_delete_does_not_end_the_session(via: threat.Via) -> None:
    """Row 7: the upstream refuses B's ``DELETE`` of A's session with ``200`` and a
    JSON-RPC error; the session lives on, on every replica, and A's call completes."""
    async with threat.open_bed(via, mode="rpc") as bed, threat.alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, threat.STEP)
        headers = threat.rpc_headers(a.sid, threat.B_TOKEN)
        deleted = await bed.raw.delete(bed.target(0), headers=headers)
        fate = await a.fate()
    assert (deleted.status_code, deleted.json(), fate) == (
        200,
        refused_in_rpc(None),
        threat.fate_expected(bed),
    )


@pytest.mark.parametrize("via", threat.VIAS)
@pytest.mark.parametrize("replica", [0, 1], ids=["holding", "not-holding"])
async def test_an_initialize_answered_with_the_sessions_id_proves_nothing(
    via: threat.Via, replica: int
) -> None:
    """Row 8: B's ``initialize`` names A's session; the upstream refuses it with ``200``,
    a JSON-RPC error and A's session id (as the session's transport answers). That is
    no new session, on the replica that holds A's session or on one that does not: B's
    answer to A's prompt there then gets the upstream's refusal too."""
    async with threat.open_bed(via, mode="rpc") as bed, threat.alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, threat.STEP)
        init = {**threat.INITIALIZE, "id": "b-init"}
        began = await threat.b_post(
            bed, bed.target(replica), init, threat.rpc_headers(a.sid, threat.B_TOKEN)
        )
        seen = await threat.b_answers(bed, a, threat.B_TOKEN, replica)
    assert began == threat.Reply(200, refused_in_rpc(init))
    assert seen.b == threat.Reply(200, refused_in_rpc(threat.answer_of(1, threat.B_CONTENT)))
    assert (seen.b_reached, seen.a) == (False, threat.fate_expected(bed))


async def call_through(http: Any, url: str, headers: dict[str, str]) -> list[Any]:
    """A ``tools/call`` (id 7) with ``headers``: the messages of its event stream."""
    with anyio.fail_after(threat.STEP):  # only against a hang
        async with http.stream("POST", url, json=scripted.CALL, headers=headers) as r:
            raw = b"".join([piece async for piece in r.aiter_raw()])
    return [json.loads(data) for _, data in scripted.parse(raw) if data]


async def call_with_a_refreshed_token(up: scripted.Upstream, limits: GatewayLimits) -> list[Any]:
    """A begins a session through a gateway (``limits``) in front of ``up``, then calls a
    tool (id 7) with its refreshed token (``tok-a2``): the messages of the call's stream."""
    async with (
        scripted.gateway_for(up, limits=limits) as gw,
        httpx2.AsyncClient(timeout=threat.STEP) as http,
    ):
        headers = await scripted.a_session(http, gw.url)
        return await call_through(http, gw.url, {**headers, "authorization": "Bearer tok-a2"})


async def test_a_refreshed_tokens_probe_goes_before_its_request() -> None:
    """A's refreshed token (``tok-a2``) on a replica with one upstream connection: its
    credentials are asked about before its ``tools/call`` is sent, not while the call's
    stream holds the only connection."""
    up = scripted.Upstream(call=[scripted.sse("e1", scripted.result(7))])
    limits = GatewayLimits(upstream_connections=1, standalone_hold_s=0)
    messages = await call_with_a_refreshed_token(up, limits)
    order = [json.loads(body).get("method") for m, _, body in up.requests if m == "POST"]
    assert (messages, order[-2:]) == ([scripted.result(7)], ["ping", "tools/call"])


async def test_a_probe_the_upstream_never_answers_ends_in_time() -> None:
    """The upstream opens a ``ping``'s event stream and writes nothing: the probe of a
    refreshed token gives up after ``probe_timeout_s``, and the call goes on."""
    up = scripted.Upstream(call=[scripted.sse("e1", scripted.result(7))], ping=[anyio.Event()])
    limits = GatewayLimits(probe_timeout_s=0.2, standalone_hold_s=0)
    messages = await call_with_a_refreshed_token(up, limits)
    assert (messages, up.pings("tok-a2")) == ([scripted.result(7)], 1)


async def test_a_strangers_resume_costs_the_upstream_one_probe() -> None:
    """B's resume of A's stream with its own token: one ``ping`` to ask about it (refused),
    then the resume as it came (the upstream lets a ``GET`` through); never a second
    probe for the same request."""
    up = scripted.Upstream(
        accepts=scripted.only_a,
        unchecked=frozenset({"GET"}),
        call=[scripted.sse("e1", scripted.PROGRESS), scripted.sse("e2", scripted.result(7))],
        replay=lambda cursor: [scripted.sse("e2", scripted.result(7))],
    )
    limits = GatewayLimits(standalone_hold_s=0)
    async with (
        scripted.gateway_for(up, limits=limits) as gw,
        httpx2.AsyncClient(timeout=threat.STEP) as http,
    ):
        async with scripted.a_call(http, gw.url) as (_, pieces):
            first = next(eid for eid, _ in scripted.parse(b"".join([p async for p in pieces])))
        resumed = await http.get(gw.url, headers={**scripted.B_HEAD, "last-event-id": first})
    assert (resumed.status_code, up.pings("tok-b")) == (200, 1)


async def test_a_request_at_the_stream_cap_is_asked_about_once() -> None:
    """B's standalone ``GET`` with its own token while A's call holds the session's one
    stream: its credentials are asked about once (before it is sent; the stream cap's
    question reuses the verdict), refused, and the ``GET`` gets ``503``."""
    release = anyio.Event()
    up = scripted.Upstream(
        accepts=scripted.only_a,
        call=[scripted.sse("e1", scripted.PROGRESS)],
        hold=release,
    )
    config = replace(GATEWAY_GUARD, max_streams=1)
    limits = GatewayLimits(standalone_hold_s=0)
    async with (
        scripted.gateway_for(up, config=config, limits=limits) as gw,
        httpx2.AsyncClient(timeout=threat.STEP) as http,
        scripted.a_call(http, gw.url) as (_, pieces),
    ):
        await pieces.__anext__()  # A's stream is open and read
        refused = await http.get(gw.url, headers=scripted.B_HEAD)
        release.set()
    assert (refused.status_code, up.pings("tok-b")) == (503, 1)


async def test_a_notification_answered_202_unchecked_proves_nothing() -> None:
    """Row 9: an upstream answers notifications ``202`` before any check (its check is
    in its protocol layer) but refuses B's answers; B's notification in A's session
    then proves nothing, and B's answer to A's prompt gets the upstream's ``403``."""
    up = scripted.asking(scripted.Upstream(accepts=scripted.only_a, unchecked_notifications=True))
    limits = GatewayLimits(standalone_hold_s=0)
    async with (
        scripted.gateway_for(up, limits=limits) as gw,
        httpx2.AsyncClient(timeout=threat.STEP) as http,
    ):

        async def b_acts() -> tuple[int, int]:
            note = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
            noted = await http.post(gw.url, json=note, headers=scripted.B_HEAD)
            b = await http.post(gw.url, json=scripted.ANSWER, headers=scripted.B_HEAD)
            return noted.status_code, b.status_code

        b_got, a, reached, messages = await scripted.while_a_is_asked(http, gw.url, up, b_acts)
    assert (b_got, a, reached, messages[-1]) == ((202, 403), 202, True, scripted.result(7))


async def test_a_session_held_elsewhere_with_a_stream_open_here_leaves_the_waiting_room() -> None:
    """A session this replica does not hold (another replica began it) opens a standalone
    stream here: the gateway asks about its credentials once the stream opens and holds
    it, so it does not wait, stream open, among the sessions not yet accepted (with
    ``max_unaccepted=1``, another such session is then still served)."""
    up = scripted.Upstream(standalone=[scripted.sse("s1", scripted.PROGRESS)])
    limits = GatewayLimits(max_unaccepted=1, standalone_hold_s=0)
    get = {**scripted.HEAD, "accept": "text/event-stream"}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with (
        scripted.gateway_for(up, limits=limits) as gw,
        httpx2.AsyncClient(timeout=threat.STEP) as http,
    ):
        first = {**get, "mcp-session-id": "held-1"}
        second = {**scripted.HEAD, "mcp-session-id": "held-2"}
        async with http.stream("GET", gw.url, headers=first) as g:
            opened = g.status_code
            other = await http.post(gw.url, json=note, headers=second)
            held = sorted(gw.gateway._sessions)
    assert (opened, other.status_code, held) == (200, 202, ["held-1"])
