"""Protocol input the gateway cannot pass on as it came, from a client or from the
upstream: it answers with a clear error (or passes on what it can), once, and no
traceback escapes it. (Event streams' own edges: ``test_sse_stream_edges.py``.)

Real loopback HTTP: the scripted upstream (:mod:`scripted_upstream`), or, for what an
ASGI server cannot send (a status outside 100-599, a body cut short of its
``Content-Length``), :class:`raw_http.RawUpstream`, a TCP server that writes the bytes
it is told.
Every wait is on a response or on EOF; the timeouts only stop a hang.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from support.gateway import RunningGateway, running_gateway  # noqa: E402
from support.log_records import captured  # noqa: E402
from tests.gateway import raw_http  # noqa: E402
from tests.gateway import scripted_upstream as scripted  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

GATEWAY_CODE = "fsm/gateway/app.py"
"""The gateway's own code: a logged traceback through it (uvicorn's "Exception in ASGI
application" for a request the gateway served) is an exception that escaped it."""

# --------------------------------------------------------------------------- helpers


def split_response(raw: bytes) -> tuple[int | None, bytes]:
    """The status of a raw HTTP/1.1 response (``None``: no response at all) and its
    body, de-chunked when it is chunked."""
    if not raw.startswith(b"HTTP/1."):
        return None, raw
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        out, rest = b"", body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0] or b"0", 16)
            if size == 0:
                break
            out, rest = out + rest[:size], rest[size + 2 :]
        body = out
    return status, body


def strict_json(data: bytes) -> Any:
    """``data`` as RFC 8259 JSON: ``NaN`` and ``Infinity`` are not JSON."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(data, parse_constant=refuse)


@contextlib.asynccontextmanager
async def raw_gateway(
    call: Callable[[], bytes], **kwargs: Any
) -> AsyncIterator[tuple[RunningGateway, raw_http.RawUpstream]]:
    """A :class:`~raw_http.RawUpstream` on loopback answering a call with ``call()``
    (:func:`raw_http.answering_calls_with`), and a gateway replica in front of it
    (keywords go to it)."""
    async with (
        raw_http.upstream(raw_http.answering_calls_with(call)) as (url, up),
        running_gateway(url, **kwargs) as gw,
    ):
        yield gw, up


async def call_through(port: int) -> tuple[int | None, bytes]:
    """``initialize``, then the call of :data:`CALL` in its session, both raw, to the
    gateway on ``port``; the call's status (``None``: no response) and body."""
    await raw_http.exchange(port, raw_http.request(port))
    raw = await raw_http.exchange(
        port, raw_http.request(port, scripted.IN_SESSION, body=json.dumps(scripted.CALL).encode())
    )
    return split_response(raw)


# --------------------------------------------------------------- a method in lower case


@pytest.mark.parametrize("method", ["post", "get", "delete"])
async def test_a_lower_case_method_is_not_sent_upstream_as_an_mcp_method(method: str) -> None:
    """HTTP methods are case-sensitive (RFC 9110 section 9.1): ``post`` is not ``POST``.
    The upstream connection (aiohttp) would send it upper-cased, past the guard as the
    MCP method it is not; a server reached directly refuses it. The gateway answers
    ``501`` and forwards nothing. (With the h11 parser the edge lets such a method in;
    llhttp refuses it itself.)"""
    up = scripted.Upstream(
        call=[scripted.sse("e1", scripted.elicit("q1")), scripted.sse("e2", scripted.result(7))]
    )
    async with scripted.gateway_for(up, http="h11") as gw:
        port = gw.port
        await raw_http.exchange(port, raw_http.request(port))
        before = len(up.requests)
        body = json.dumps(scripted.CALL).encode() if method == "post" else b""
        got = await raw_http.exchange(
            port, raw_http.request(port, scripted.IN_SESSION, body=body, method=method)
        )
    status, _ = split_response(got)
    assert (status, up.requests[before:]) == (501, [])


# ---------------------------------- an id that is not JSON, in the gateway's own errors


@pytest.mark.parametrize("rid", [b"NaN", b"Infinity", b"-Infinity"])
async def test_the_gateways_own_error_for_a_nan_id_is_json(rid: bytes) -> None:
    """A request whose id is ``NaN`` (Python's :func:`json.loads` takes it, RFC 8259 does
    not) and whose upstream cannot be reached: the gateway's ``502`` names the id
    ``null`` (JSON-RPC 2.0: the id could not be read), so its body is JSON a client's
    parser reads (``"id": NaN`` would make ``JSON.parse`` throw)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    dead = sock.getsockname()[1]
    sock.close()  # nothing listens there: the upstream is unreachable
    async with running_gateway(f"http://127.0.0.1:{dead}/mcp") as gw:
        port = gw.port
        body = b'{"jsonrpc":"2.0","id":' + rid + b',"method":"ping"}'
        status, got = split_response(
            await raw_http.exchange(port, raw_http.request(port, body=body))
        )
    assert status == 502
    message = strict_json(got)
    assert message["id"] is None
    assert message["error"]["data"]["reason"] == "upstream-unreachable"


# --------------------------------------------------- an answer no submission could send


@pytest.mark.parametrize(
    "content",
    [b'{"confirm": NaN}', b'{"name": "\\ud800"}'],
    ids=["nan", "lone-surrogate"],
)
async def test_an_answer_the_gateway_cannot_send_is_not_taken(content: bytes) -> None:
    """A client's answer whose ``result`` holds ``NaN`` or a lone surrogate, which
    Python's :func:`json.loads` reads but no submission of the guard's can encode as
    JSON in UTF-8: it is not taken (not stored, not answered ``202`` by the gateway) but
    sent upstream as it came, which refuses it, as it would directly. The prompt stays
    open, and the client's corrected answer completes the call."""
    up = scripted.Upstream()
    up.call = [
        scripted.sse("e1", scripted.elicit("q1")),
        up.answered,
        scripted.sse("e2", scripted.result(7)),
    ]
    bad = b'{"jsonrpc":"2.0","id":"q1","result":{"action":"accept","content":' + content + b"}}"
    good = {"jsonrpc": "2.0", "id": "q1", "result": {"action": "accept", "content": {}}}
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        await http.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
        headers = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        with anyio.fail_after(20):
            async with http.stream("POST", gw.url, json=scripted.CALL, headers=headers) as r:
                chunks = r.aiter_raw()
                body = await chunks.__anext__()  # the prompt
                await http.post(gw.url, content=bad, headers=headers)
                await http.post(gw.url, json=good, headers=headers)
                body += b"".join([c async for c in chunks])
    messages = [json.loads(data) for _, data in scripted.parse(body) if data]
    assert messages[-1] == scripted.result(7), messages[-1]


# -------------------------------------------------- an upstream status no edge can send


@pytest.mark.parametrize("status", ["600 Beyond", "999 Weird", "101 Switching Protocols"])
async def test_an_upstream_status_the_edge_cannot_send_gets_a_clear_error(status: str) -> None:
    """aiohttp takes any three-digit status from the upstream (``999``) and hands on a
    ``101`` to a POST as a final response; uvicorn cannot write either (its status
    table covers 100-599; h11 refuses a ``101`` it did not switch to). The client gets
    ``502`` with a JSON-RPC error, as for any upstream response the gateway cannot use,
    and no traceback is logged."""

    def call() -> bytes:
        fields: list[tuple[str, Any]] = [("content-type", "application/json")]
        body = json.dumps(scripted.result(7)).encode()
        return raw_http.http_response(status, [*fields, ("content-length", len(body))], body)

    async with raw_gateway(call, http="h11") as (gw, _up):
        with captured("uvicorn.error") as logged:  # what uvicorn logs
            got, _body = await call_through(gw.port)
    assert got is not None and 200 <= got <= 599, got
    assert not logged.tracebacks(GATEWAY_CODE)


# --------------------------------------------- a forwarded body the upstream cuts short


async def test_a_forwarded_body_cut_short_logs_no_traceback() -> None:
    """The upstream answers a JSON body with ``Content-Length: 100``, writes 72 bytes and
    closes (a server that dies mid-response). The gateway passes on what came and cuts
    the client's response where the upstream cut its own (the connection closes short
    of the length), with a warning: no exception escapes the app."""
    whole = json.dumps(scripted.result(7)).encode()

    def call() -> bytes:
        fields = [("content-type", "application/json"), ("content-length", 100)]
        return raw_http.http_response("200 OK", [*fields, ("connection", "close")], whole)

    async with raw_gateway(call) as (gw, _up):
        with captured("uvicorn.error") as logged:  # what uvicorn logs
            status, body = await call_through(gw.port)
    assert (status, body) == (200, whole)  # cut where the upstream cut it
    assert not logged.tracebacks(GATEWAY_CODE)


# ----------------------------------------------------------------- Expect: 100-continue


async def test_a_forwarded_expect_100_continue_does_not_hold_the_body_back() -> None:
    """A client sends ``Expect: 100-continue`` (curl does for a large body): the
    gateway's own server answers it ``100 Continue`` and reads the whole body, so the
    field is not forwarded; the body goes upstream with the head. (Forwarded, it made
    the upstream connection send the head alone and wait for a ``100`` that a server
    waiting for the content never sends: RFC 9110 section 10.1.1.)"""
    answer = raw_http.json_response(scripted.result(7))
    async with raw_gateway(lambda: answer) as (gw, _up):
        port = gw.port
        await raw_http.exchange(port, raw_http.request(port))
        expect = "Expect: 100-continue"
        head = raw_http.request(
            port, scripted.IN_SESSION, expect, body=json.dumps(scripted.CALL).encode()
        )
        with anyio.move_on_after(5):  # answered in milliseconds once the body is sent
            got = await raw_http.exchange(port, head)
            status, body = split_response(got.replace(b"HTTP/1.1 100 Continue\r\n\r\n", b""))
            assert (status, json.loads(body)) == (200, scripted.result(7))
            return
    pytest.fail("no answer within 5 s: the upstream request waits for a 100 Continue")
