"""Bodies the gateway could read otherwise than the client and the upstream read them.

A call's event stream in a content coding the gateway's HTTP library does not decode
(``br`` without a brotli module) is never parsed as events: it reaches the client as the
upstream sent it (its bytes and its ``Content-Encoding``), as it would directly; and the
gateway asks the upstream only for codings it decodes (a client's ``Accept-Encoding``
less the others). An answer body holding both ``result`` and ``error`` (the mcp SDK's
server reads it as the error, a refusal) is no answer the guard reads: it goes upstream
as it came, and is neither submitted as an acceptance, nor recorded as answered, nor
kept in the store for another replica. Where a test has a direct counterpart it runs
both ways and expects the same.

Real loopback HTTP (scripted upstreams); every wait is on a response or an event.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from fsm.adapters._transport.http import decoded_codings, wrap_response  # noqa: E402
from fsm.adapters._transport.transport import bind  # noqa: E402
from fsm.gateway.app import GatewayLimits  # noqa: E402
from fsm.gateway.store import MemoryStore  # noqa: E402
from tests.gateway import scripted_upstream as scripted  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

STEP = 10.0
"""Safety bound of one wait: it only elapses when the awaited thing never comes."""

# ---------------------------------------------------------------- content codings

RESULT_7 = {
    "jsonrpc": "2.0",
    "id": 7,
    "result": {"content": [{"type": "text", "text": "done " * 40}], "isError": False},
}
"""The call's result :data:`BR_STREAM` carries."""

BR_STREAM = base64.b64decode(
    "Gy8ByBwFbntB/rgo8NwdCus0shiZraPA0pWguaX6XB5jbbBUjbqqovF5aMYJQBqFD51vQDohmqes2ZQgm+iTyqdW"
    "7CWsSINdvvfE+zAuZuOUtCeOVCvI2fh7eu4d2Orjf09CbqWqAA=="
)
"""``id: e1\\ndata: <RESULT_7>\\n\\n`` compressed with brotli (Node's
``zlib.brotliCompressSync``): what an upstream behind a compressing layer sends a client
whose ``Accept-Encoding`` names ``br`` (Node's fetch, browsers)."""

PLAIN_STREAM = scripted.sse("e1", RESULT_7)
"""The same event, in no coding."""

ASKING_STREAM = scripted.sse("s1", scripted.elicit(900))
"""A server request on a standalone stream, in no coding."""


def allows_br(headers: dict[str, str]) -> bool:
    """Whether a request with ``headers`` accepts ``br`` (RFC 9110, section 12.5.3): one
    without ``Accept-Encoding`` accepts any coding; one naming ``br`` or ``*`` without
    ``q=0`` accepts it."""
    value = headers.get("accept-encoding")
    if value is None:
        return True
    for element in value.split(","):
        name, _, params = element.partition(";")
        if name.strip().lower() in ("br", "*") and params.replace(" ", "") not in ("q=0", "q=0.0"):
            return True
    return False


async def coded_stream(
    send: Any, headers: dict[str, str], plain: bytes, brotli: bytes, *, always: bool = False
) -> None:
    """A ``200`` event stream: ``brotli`` in ``Content-Encoding: br`` when the request
    allows it (:func:`allows_br`), as a compressing layer in front of a server answers,
    or ``always``; else ``plain``."""
    br = always or allows_br(headers)
    head = [(b"content-type", b"text/event-stream")]
    head += [(b"content-encoding", b"br")] if br else []
    await send({"type": "http.response.start", "status": 200, "headers": head})
    await send({"type": "http.response.body", "body": brotli if br else plain})


class BrotliCall(scripted.SessionApp):
    """A call answered with :data:`BR_STREAM` in ``Content-Encoding: br`` when the request
    allows it, else :data:`PLAIN_STREAM` (:func:`coded_stream`); a standalone ``GET``
    the same way (:data:`ASKING_STREAM` when plain), then held open; any other request
    gets ``202``. ``gets``: the headers of each ``GET``. ``always_br``: the call's stream
    is in ``br`` whatever the request allows."""

    def __init__(self, *, always_br: bool = False) -> None:
        super().__init__()
        self.always_br = always_br
        self.gets: list[dict[str, str]] = []

    async def serve(
        self, scope: Any, headers: dict[str, str], msg: Any, receive: Any, send: Any
    ) -> None:
        if scope["method"] == "GET":
            self.gets.append(headers)
            await coded_stream(send, headers, ASKING_STREAM, BR_STREAM)
            while (await receive())["type"] != "http.disconnect":
                pass
        elif msg.get("method") == "tools/call":
            await coded_stream(send, headers, PLAIN_STREAM, BR_STREAM, always=self.always_br)
        else:
            await scripted.json_reply(send, 202, b"")


def offered(value: str) -> set[str]:
    """The codings an ``Accept-Encoding`` value names (lower case, parameters dropped)."""
    return {e.partition(";")[0].strip().lower() for e in value.split(",")} - {""}


@scripted.VIAS
async def test_a_call_stream_in_a_coding_the_gateway_cannot_decode_reaches_the_client_as_it_came(
    via: str,
) -> None:
    """The client accepts ``br``; the upstream answers its call with a ``br`` event stream
    whatever it was asked for (a compressing layer that ignores ``Accept-Encoding``),
    which the gateway's HTTP library cannot decode (it would read the bytes as if they
    were in no coding). The client gets the upstream's bytes and ``Content-Encoding:
    br``, as directly, which it decodes to its result: never the compressed bytes
    labelled plain."""
    assert "br" not in decoded_codings(httpx2)  # what makes the stream opaque here
    up = BrotliCall(always_br=True)
    async with scripted.served(via, up) as (url, _gw), httpx2.AsyncClient(timeout=STEP) as http:
        await scripted.initialize(http, url)
        headers = {**scripted.HEAD, "mcp-session-id": scripted.SID, "accept-encoding": "br"}
        async with http.stream("POST", url, json=scripted.CALL, headers=headers) as r:
            raw = b"".join([c async for c in r.aiter_raw()])
            coding = r.headers.get("content-encoding")
    assert (coding, raw) == ("br", BR_STREAM)


async def test_a_passed_on_body_in_a_coding_the_library_cannot_decode_keeps_its_coding() -> None:
    """The core's forwarded body of a response in a coding its HTTP library does not
    decode (what the SDK's client reads, in the embedded adapters) keeps its
    ``Content-Encoding`` and its bytes as they came (a stack of codings, one the library
    decodes over one it does not, included: none of them undone); one in a coding it
    decodes is passed on decoded, the field dropped."""
    request = httpx2.Request("POST", "http://upstream.invalid/mcp")
    head = {"content-type": "text/event-stream"}

    async def forwarded(coding: str, body: bytes) -> tuple[str | None, bytes]:
        resp = httpx2.Response(
            200, headers={**head, "content-encoding": coding}, stream=Sent(body), request=request
        )
        out = wrap_response(httpx2, resp, request, bind(httpx2).passthrough(resp))
        data = b"".join([piece async for piece in out.stream])
        return out.headers.get("content-encoding"), data

    assert await forwarded("br", BR_STREAM) == ("br", BR_STREAM)
    stacked = gzip.compress(BR_STREAM)  # br, then gzip over it
    assert await forwarded("br, gzip", stacked) == ("br, gzip", stacked)
    assert await forwarded("gzip", gzip.compress(PLAIN_STREAM)) == (None, PLAIN_STREAM)


class Sent(httpx2.AsyncByteStream):
    """A response body as it comes off the connection: ``data`` in one piece."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.data


async def test_the_standalone_stream_opened_ahead_comes_in_a_coding_any_client_reads() -> None:
    """The gateway opens the session's standalone ``GET`` ahead (on
    ``notifications/initialized``) for a client ``GET`` still to come, whose codings it
    cannot know: it asks for none but ``identity``, so an upstream that compresses
    whenever a request allows it (one without ``Accept-Encoding`` allows any coding)
    sends plain events, which the guard tracks and the client's ``GET`` (``gzip,
    deflate``) reads."""
    up = BrotliCall()
    async with (
        scripted.gateway_for(up, limits=GatewayLimits(standalone_hold_s=10)) as gw,
        httpx2.AsyncClient(timeout=STEP) as http,
    ):
        await scripted.initialize(http, gw.url)
        codings = {"mcp-session-id": scripted.SID, "accept-encoding": "gzip, deflate"}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(gw.url, json=note, headers={**scripted.HEAD, **codings})).is_success
        with anyio.fail_after(STEP):
            async with http.stream("GET", gw.url, headers=codings) as r:
                coding = r.headers.get("content-encoding")
                seen = await scripted.read_until(r.aiter_raw(), b"elicitation/create")
    assert [g.get("accept-encoding") for g in up.gets] == ["identity"]  # the one opened ahead
    assert coding is None and b"id: s1\n" not in seen  # tracked: its event id rewritten


@scripted.VIAS
async def test_the_upstream_is_asked_only_for_codings_the_gateway_decodes(via: str) -> None:
    """The client accepts ``br`` and ``gzip``. Through the gateway, the upstream is asked
    for no coding the gateway's HTTP library cannot decode (here ``br``), so the call's
    stream comes in one it reads and is tracked: the client gets its result in plain
    text. Directly, the upstream is asked for ``br`` and answers in it."""
    up = BrotliCall()
    async with scripted.served(via, up) as (url, _gw), httpx2.AsyncClient(timeout=STEP) as http:
        await scripted.initialize(http, url)
        headers = {
            **scripted.HEAD,
            "mcp-session-id": scripted.SID,
            "accept-encoding": "br, gzip;q=0.5",
        }
        async with http.stream("POST", url, json=scripted.CALL, headers=headers) as r:
            raw = b"".join([c async for c in r.aiter_raw()])
            coding = r.headers.get("content-encoding")
    asked = [h.get("accept-encoding", "") for _, h, m in up.requests if m.get("id") == 7]
    if via == "direct":
        assert (coding, raw) == ("br", BR_STREAM)
        return
    assert asked and all(offered(a) <= decoded_codings(httpx2) for a in asked), asked
    assert all(offered(a) <= {"br", "gzip", "identity"} for a in asked), asked
    assert coding is None
    assert [json.loads(d) for _, d in scripted.parse(raw) if d] == [RESULT_7]


# ---------------------------------------------------------------- an answer read two ways

BOTH = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {"action": "accept"},
    "error": {"code": -32001, "message": "the user declined"},
}
"""An answer to prompt 1 holding both ``result`` and ``error``: the mcp SDK's server reads
it as the error (``JSONRPCMessage`` validates it as ``JSONRPCError``), a refusal."""


def answers(up: scripted.Upstream) -> list[tuple[str | None, dict[str, Any]]]:
    """The JSON-RPC responses (answers, refusals) that reached ``up``: (``Authorization``,
    body), in order."""
    out = []
    for method, headers, body in up.requests:
        msg = json.loads(body) if method == "POST" and body else None
        if isinstance(msg, dict) and "method" not in msg:
            out.append((headers.get("authorization"), msg))
    return out


def gated(up: scripted.Upstream) -> anyio.Event:
    """``up``, whose call (:data:`scripted.CALL`) asks prompt 1 and ends with its result
    once the event returned is set (so what the gateway made of an answer is seen while
    the prompt is still open)."""
    gate = anyio.Event()
    up.call = [scripted.sse("e1", scripted.elicit(1)), gate, scripted.sse("e2", scripted.result(7))]
    return gate


@scripted.VIAS
@pytest.mark.parametrize("token", ["tok-a", "tok-a2"], ids=["proven", "refreshed"])
async def test_an_answer_holding_result_and_error_goes_upstream_as_it_came_and_is_not_taken(
    via: str, token: str
) -> None:
    """A answers its open prompt with :data:`BOTH`, with its own token (``tok-a``, the
    one proven for the session: the guard would submit the answer itself) or a refreshed
    one (``tok-a2``, which the upstream takes, not yet proven: the gateway relays the
    answer, and its ``ping`` with ``tok-a2`` is answered). The upstream gets that body as
    it came (and reads it as it would directly: a refusal), never a bare acceptance; the
    gateway's guard neither takes it as the prompt's answer nor records it as answered
    upstream; A's call ends with its result."""
    up = scripted.Upstream()
    gate = gated(up)
    limits = GatewayLimits(standalone_hold_s=0)
    async with (
        scripted.served(via, up, limits=limits) as (url, gw),
        httpx2.AsyncClient(timeout=STEP) as http,
    ):
        guards = [gw.gateway] if gw is not None else []
        async with scripted.a_call(http, url) as (a_head, pieces):
            seen = await scripted.read_until(pieces, b"elicitation/create")
            answer_head = {**a_head, "authorization": f"Bearer {token}"}
            a = await http.post(url, json=BOTH, headers=answer_head)
            key = (scripted.SID, 1)
            states = [g.session_guard(scripted.SID).guard.state_of(key) for g in guards]
            gate.set()
            with anyio.fail_after(STEP):
                async for piece in pieces:
                    seen += piece
    assert a.status_code == 202
    assert answers(up) == [(f"Bearer {token}", BOTH)]
    assert states == ([] if via == "direct" else ["presented"])
    assert [json.loads(d) for _, d in scripted.parse(seen) if d][-1] == scripted.result(7)


async def test_an_answer_holding_result_and_error_on_another_replica_is_not_kept() -> None:
    """Two replicas on one store. A's call on replica 1 shows A's prompt; A answers it
    with :data:`BOTH` through replica 2, which does not hold A's session. Replica 2
    relays it as it came (the upstream reads a refusal) and keeps nothing in the store
    for replica 1 to submit as A's acceptance."""
    up = scripted.asking(scripted.Upstream())
    store = MemoryStore()
    limits = GatewayLimits(standalone_hold_s=0)
    async with (
        scripted.two_replicas_for(up, store=store, limits=limits) as (r1, r2),
        httpx2.AsyncClient(timeout=STEP) as http,
        scripted.a_call(http, r1.url) as (a_head, pieces),
    ):
        seen = await scripted.read_until(pieces, b"elicitation/create")
        a = await http.post(r2.url, json=BOTH, headers=a_head)
        stored = await store.answer_of(scripted.SID, 1)
        with anyio.fail_after(STEP):
            await up.answered.wait()
            async for piece in pieces:
                seen += piece
    assert a.status_code == 202
    assert stored is None
    assert answers(up) == [("Bearer tok-a", BOTH)]
    assert [json.loads(d) for _, d in scripted.parse(seen) if d][-1] == scripted.result(7)
