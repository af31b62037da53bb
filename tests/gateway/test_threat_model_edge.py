"""The gateway adds no authority at its edge: a request is filed under the session id and
credentials the upstream sees, and no run of made-up session ids keeps other sessions
from being served.

| attacker | what they try | what they would get | what they get | test |
|---|---|---|---|---|
| B, own token, A's session id | ``Connection: mcp-session-id`` (or another header the gateway reads, or a credential): the gateway reads the header, the upstream never sees it | B re-initializes inside A's gateway session; B's ``404`` then ends it | ``400`` at the edge, nothing forwarded; A's session lives | ``test_a_connection_naming_a_header_the_gateway_reads_is_refused``, ``test_b_cannot_reinitialize_inside_a_session`` |
| anyone | initializes carrying made-up session ids, each accepted under a new id | the made-up ids fill the table of sessions awaiting acceptance: every session not held here gets ``503`` | each made-up id leaves that table when its session is accepted; other sessions are served | ``test_sessions_accepted_under_new_ids_leave_no_waiting_entry`` |

Real loopback HTTP throughout; every wait is on a response, with a timeout only against
a hang.
"""  # noqa: E501 (a Markdown table's rows are one line each)

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

pytest.importorskip("uvicorn")

from auth_upstream import running_auth_server
from scripted_upstream import HEAD, Upstream, gateway_for, result, sse

from fsm.gateway.app import GatewayLimits
from support.gateway import running_gateway

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

PROTOCOL = "2025-11-25"
TOKENS = {"tok-a": "alice", "tok-b": "bob"}


def _init(rid: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "edge", "version": "1"},
        },
    }


def _ping(rid: int = 9) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "ping"}


def _head(token: str | None = None, sid: str | None = None, **extra: str) -> dict[str, str]:
    """A client's POST headers: its bearer token, its session id, ``extra``."""
    out = {**HEAD, "mcp-protocol-version": PROTOCOL}
    if token is not None:
        out["authorization"] = f"Bearer {token}"
    if sid is not None:
        out["mcp-session-id"] = sid
    return {**out, **extra}


@pytest.mark.parametrize(
    "connection",
    [
        "mcp-session-id",
        "MCP-Session-Id, keep-alive",
        "last-event-id",
        "mcp-protocol-version",
        "authorization",
        "cookie",
    ],
)
async def test_a_connection_naming_a_header_the_gateway_reads_is_refused(
    connection: str,
) -> None:
    upstream = Upstream(call=[sse("e1", result(9))])
    async with gateway_for(upstream) as gw, httpx2.AsyncClient(timeout=10) as http:
        head = _head("tok-a", "some-session", connection=connection)
        head.setdefault("cookie", "c=1")
        resp = await http.post(gw.url, json=_ping(), headers=head)
        assert resp.status_code == 400, resp.text
        assert "connection names" in resp.json()["error"]["message"]
        assert upstream.requests == []
        # a Connection naming only hop-by-hop fields still passes
        resp = await http.post(gw.url, json=_ping(), headers=_head(connection="keep-alive"))
        assert resp.status_code == 200
        assert len(upstream.requests) == 1


async def test_b_cannot_reinitialize_inside_a_session() -> None:
    async with (
        running_auth_server(TOKENS, mode="404") as up,
        running_gateway(up.url) as gw,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        resp = await http.post(gw.url, json=_init(), headers=_head("tok-a"))
        assert resp.status_code == 200
        sid_a = resp.headers["mcp-session-id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        resp = await http.post(gw.url, json=initialized, headers=_head("tok-a", sid_a))
        assert resp.status_code == 202
        hidden = _head("tok-b", sid_a, connection="mcp-session-id")
        resp = await http.post(gw.url, json=_init(5), headers=hidden)
        assert resp.status_code == 400, resp.text
        assert "mcp-session-id" not in resp.headers
        resp = await http.post(gw.url, json=_ping(), headers=_head("tok-b", sid_a))
        assert resp.status_code == 404  # the upstream hides A's session from B
        resp = await http.post(gw.url, json=_ping(), headers=_head("tok-a", sid_a))
        assert resp.status_code == 200, resp.text
        assert '"result"' in resp.text


async def test_sessions_accepted_under_new_ids_leave_no_waiting_entry() -> None:
    """The upstream answers an ``initialize`` that names a made-up session id with an id
    of its own; past ``max_unaccepted`` such initializes, a request for a session this
    replica does not hold is still served."""
    upstream = Upstream(call=[sse("e1", result(9))], issue_sessions=True)
    limits = GatewayLimits(max_unaccepted=2)
    async with gateway_for(upstream, limits=limits) as gw, httpx2.AsyncClient(timeout=10) as http:
        for n in range(4):
            resp = await http.post(gw.url, json=_init(n), headers=_head(sid=f"made-up-{n}"))
            assert resp.status_code == 200, resp.text
        issued = list(upstream.issued)
        assert len(issued) == 4
        resp = await http.post(gw.url, json=_ping(), headers=_head(sid="held-elsewhere"))
        assert resp.status_code == 200, resp.text
        assert json.loads(resp.text.split("data: ", 1)[1].split("\n", 1)[0])["id"] == 9
        for sid in issued:  # each session is served under the id the upstream gave it
            resp = await http.post(gw.url, json=_ping(), headers=_head(sid=sid))
            assert resp.status_code == 200, resp.text
