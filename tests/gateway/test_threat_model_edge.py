"""The gateway adds no authority at its edge: a request is filed under the session id and
credentials the upstream sees, and no run of made-up session ids keeps other sessions
from being served.

| attacker | what they try | what they would get | what they get | test |
|---|---|---|---|---|
| B, own token, A's session id | ``Connection: mcp-session-id`` (or another header the gateway reads, or a credential): the gateway reads the header, the upstream never sees it | B re-initializes inside A's gateway session; B's ``404`` then ends it | ``400`` at the edge, nothing forwarded; A's session lives | ``test_a_connection_naming_a_header_the_gateway_reads_is_refused``, ``test_b_cannot_reinitialize_inside_a_session`` |
| B, no key, A's session id | answer A's prompt, against an upstream that takes an API key in the URL (``?key=``) or in ``X-API-Key`` | the gateway takes B's answer (``202``): B carries the same (no) ``Authorization`` and ``Cookie`` as A; A's own answer is submitted without A's query string and fails | the upstream's ``401``, relayed; A's answer, submitted to A's URL with A's key, ends A's call | ``test_a_keyless_answer_is_refused_when_the_upstream_takes_keys`` |
| anyone | initializes carrying made-up session ids (another client's, held on another replica), each accepted under a new id | the made-up ids fill the table of sessions awaiting acceptance: every session not held here gets ``503``; or a session held here under the id the client named, with the client's credentials proven for it | an ``initialize`` is filed as a new session whatever id it names, held under the id the upstream issues; other sessions are served | ``test_sessions_accepted_under_new_ids_leave_no_waiting_entry`` |

Real loopback HTTP throughout; every wait is on a response, with a timeout only against
a hang.
"""  # noqa: E501 (a Markdown table's rows are one line each)

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs

import anyio
import httpx2
import pytest

pytest.importorskip("uvicorn")

from auth_upstream import SessionAuth, running_auth_server

from fsm.gateway.app import CREDENTIAL_HEADERS, Gateway, GatewayLimits
from fsm.wire.server import ServerController, build_app, running_server
from fsm.wire.serving import serving
from support.gateway import running_gateway
from tests.gateway import scripted_upstream as scripted

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
    out = {**scripted.HEAD, "mcp-protocol-version": PROTOCOL}
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
    upstream = scripted.Upstream(call=[scripted.sse("e1", scripted.result(9))])
    async with scripted.gateway_for(upstream) as gw, httpx2.AsyncClient(timeout=10) as http:
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
    upstream = scripted.Upstream(call=[scripted.sse("e1", scripted.result(9))], issue_sessions=True)
    limits = GatewayLimits(max_unaccepted=2)
    async with (
        scripted.gateway_for(upstream, limits=limits) as gw,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        for n in range(4):
            resp = await http.post(gw.url, json=_init(n), headers=_head(sid=f"made-up-{n}"))
            assert resp.status_code == 200, resp.text
        issued = list(upstream.issued)
        assert len(issued) == 4
        resp = await http.post(gw.url, json=_ping(), headers=_head(sid="held-elsewhere"))
        assert resp.status_code == 200, resp.text
        assert resp.json()["id"] == 9
        for sid in issued:  # each session is served under the id the upstream gave it
            resp = await http.post(gw.url, json=_ping(), headers=_head(sid=sid))
            assert resp.status_code == 200, resp.text
        held = set(gw.gateway._sessions)
        assert set(issued) <= held  # held under the ids the upstream issued ...
        assert not {f"made-up-{n}" for n in range(4)} & held  # ... never those named


# ------------------------------------------- credentials in the query string or X-API-Key

KEYS = {"ka": "tok-a"}
"""A's API key, and the bearer token :class:`KeyAuth` turns it into for the session
binding of :class:`~auth_upstream.SessionAuth`."""


class KeyAuth:
    """An upstream that authenticates by an API key, in the URL (``?key=``) or in
    ``X-API-Key`` (``where``): the key stands for a bearer token to the session-binding
    middleware behind it (a request without a known key carries none: ``401``)."""

    def __init__(self, app: Any, where: str) -> None:
        self.app, self.where = app, where

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            if self.where == "query":
                key = parse_qs(scope.get("query_string", b"").decode()).get("key", [""])[0]
            else:
                key = dict(scope["headers"]).get(b"x-api-key", b"").decode()
            kept = [(k, v) for k, v in scope["headers"] if k != b"authorization"]
            if key in KEYS:
                kept.append((b"authorization", f"Bearer {KEYS[key]}".encode()))
            scope = {**scope, "headers": kept}
        await self.app(scope, receive, send)


@pytest.mark.parametrize(
    ("where", "headers"),
    [("query", CREDENTIAL_HEADERS), ("header", CREDENTIAL_HEADERS), ("query", ())],
    ids=["query", "header", "query-and-no-credential-header"],
)
async def test_a_keyless_answer_is_refused_when_the_upstream_takes_keys(
    where: str, headers: tuple[str, ...]
) -> None:
    """B, with A's session id and no key, answers A's open prompt: the upstream's ``401``
    comes back and A's prompt stays A's; A's own answer (its key in the URL or a header)
    reaches the upstream, so A's call ends with it, with no credential header configured
    too (the query alone is then the credential)."""
    controller = ServerController()
    auth = SessionAuth(build_app(controller), {"tok-a": "alice"})
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    up = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    try:
        async with (
            serving(KeyAuth(auth, where), sock, shutdown_timeout=0.2, log_level="critical"),
            running_gateway(up, credential_headers=headers) as gw,
            httpx2.AsyncClient(timeout=10) as http,
        ):
            a_url = gw.url + "?key=ka" if where == "query" else gw.url
            a_key = {} if where == "query" else {"x-api-key": "ka"}
            resp = await http.post(a_url, json=_init(), headers=_head(**a_key))
            assert resp.status_code == 200, resp.text
            sid = resp.headers["mcp-session-id"]
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            resp = await http.post(a_url, json=initialized, headers=_head(sid=sid, **a_key))
            assert resp.status_code == 202
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "delete_files", "arguments": {}},
            }
            with anyio.fail_after(20):
                async with http.stream(
                    "POST", a_url, json=call, headers=_head(sid=sid, **a_key)
                ) as stream:
                    events = _data(stream.aiter_lines())
                    prompt = await anext(events)
                    assert prompt["method"] == "elicitation/create"
                    confirm = {"action": "accept", "content": {"confirm": True}}
                    b_answer = {"jsonrpc": "2.0", "id": prompt["id"], "result": confirm}
                    resp = await http.post(gw.url, json=b_answer, headers=_head(sid=sid))
                    assert resp.status_code == 401, resp.text
                    a_answer = {**b_answer, "result": {"action": "decline"}}
                    resp = await http.post(a_url, json=a_answer, headers=_head(sid=sid, **a_key))
                    assert resp.status_code == 202, resp.text
                    end = await anext(events)
            assert end["id"] == 2
            assert "Kept 3 files" in json.dumps(end["result"])
            assert [p.message["result"] for p in auth.answers_for(sid)] == [{"action": "decline"}]
    finally:
        sock.close()


async def _data(lines: AsyncIterator[str]) -> AsyncIterator[Any]:
    """The JSON messages of an SSE stream's ``data:`` lines (empty ones skipped)."""
    async for line in lines:
        if line.startswith("data:") and line[5:].strip():
            yield json.loads(line[5:])


def test_credential_headers_are_validated() -> None:
    assert "x-api-key" in CREDENTIAL_HEADERS
    gateway = Gateway("http://127.0.0.1:1/mcp", credential_headers=["Authorization", "X-Key"])
    assert gateway.credential_headers == ("authorization", "x-key")
    for bad in (["te"], ["host"], ["mcp-session-id"], ["bad name"], ["x:y"], "authorization"):
        with pytest.raises(ValueError, match="credential header"):
            Gateway("http://127.0.0.1:1/mcp", credential_headers=bad)


async def test_a_body_nested_past_the_parser_is_relayed_not_a_server_error() -> None:
    """An ``initialize``-looking body nested deeper than the JSON parser recurses, naming a
    session id: read as no ``initialize`` (its session id is the one it is filed under),
    relayed to the upstream, whose answer comes back; never a ``500``, and the replica
    serves the next session."""
    deep = b'{"method": "initialize", "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    async with (
        running_server() as server,
        running_gateway(server.url) as gw,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        direct = await http.post(server.url, content=deep, headers=_head(sid="nested"))
        resp = await http.post(gw.url, content=deep, headers=_head(sid="nested"))
        assert resp.status_code == direct.status_code != 500, resp.text
        resp = await http.post(gw.url, json=_init(), headers=_head())
        assert resp.status_code == 200, resp.text
