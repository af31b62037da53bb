"""Nothing secret is logged or told when the upstream fails: a client's URL carries its
query string to the upstream (where an upstream may take a key, ``?key=...``, a
credential), and no failure of the upstream connection puts that URL into a log line at
``INFO`` or above or into a client's answer.

| attacker | what they try | what they would get | what they get | test |
|---|---|---|---|---|
| anyone reading the gateway's logs | a client's call, its key in the URL's query, the upstream answering with a head aiohttp cannot parse, or cutting a body short, or every upstream connection busy past the wait for one | the key in a ``WARNING`` line (``POST failed without a response``, ``upstream response cut short``): aiohttp's text of a malformed response or a connect timeout holds the request's whole URL | the failure's type and what it says of the connection or the response; the URL nowhere in the logs nor in the client's answer | ``test_an_upstream_failure_logs_no_query_string`` |
| the same | any failure of the gateway's upstream transport (refused, malformed head, head cut, body cut, wait for a connection, read timeout) | the URL in the text, the ``repr`` or the traceback of the ``httpx2`` exception it raises (aiohttp's exception chained as its cause) | none of the three holds the URL's query | ``test_no_transport_failure_carries_the_request_url`` |
| the same | every kind of aiohttp failure the transport translates, those no loopback fault produces included (an invalid URL, a connection error naming the URL) | the URL in the text or in aiohttp's exception chained as the cause | none of the three holds the query | ``test_no_aiohttp_failure_passes_the_url_on`` |

Real loopback TCP; every wait is on a response, with a timeout only against a hang (and
the wait for an upstream connection and for a response, set to 0.1 s where that is the
case).
"""  # noqa: E501 (a Markdown table's rows are one line each)

from __future__ import annotations

import contextlib
import logging
import traceback
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from fsm.gateway.app import GatewayLimits  # noqa: E402
from fsm.gateway.upstream import AiohttpTransport  # noqa: E402
from support.gateway import running_gateway  # noqa: E402
from support.log_records import captured  # noqa: E402
from tests.gateway import raw_http  # noqa: E402
from tests.gateway import scripted_upstream as scripted  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SECRET = "s3cr3t-api-key-0123456789"
"""A client's key, in the query string of the URL it calls."""


MALFORMED_HEAD = b"HTTP/1.1 200 OK\r\nthis is not a header line\r\n\r\n"
"""A response head aiohttp's parser refuses (a header line without a colon)."""
CUT_HEAD = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-len"
"""A response head the upstream closes its connection inside."""
CUT_BODY = b'HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 100\r\n\r\n{"jsonrpc"'
"""A response whose body the upstream closes its connection inside."""
OPEN_STREAM = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
"""An event stream's head, its body never ended: the connection stays taken."""


@pytest.mark.parametrize("failure", ["malformed-head", "cut-body", "no-free-connection"], ids=str)
async def test_an_upstream_failure_logs_no_query_string(failure: str) -> None:
    """docs/gateway.md, Operating it: no query string is logged at ``INFO`` or above by
    the gateway's own code. A client authenticates by a key in its URL (``?key=...``, a
    credential the gateway passes upstream); its call then fails upstream: a head aiohttp
    cannot parse (the client gets ``502``), a body cut short (the client's response is
    cut short too), or, with one upstream connection allowed and another call's stream
    holding it, no connection within the wait for one (0.1 s here; ``504``).
    The key reaches the upstream, and appears in no log line at ``INFO`` or above (nor
    its traceback) and not in the client's answer."""
    limits, timeout = None, None
    call_answer: bytes | None = {"malformed-head": MALFORMED_HEAD, "cut-body": CUT_BODY}.get(
        failure, OPEN_STREAM
    )
    if failure == "no-free-connection":
        limits = GatewayLimits(upstream_connections=1)
        timeout = httpx2.Timeout(10.0, connect=0.1, pool=0.1)
    async with (
        raw_http.upstream(raw_http.answering_calls_with(lambda: call_answer)) as (upstream, up),
        running_gateway(upstream, limits=limits, timeout=timeout) as gw,
        httpx2.AsyncClient(timeout=20) as http,
    ):
        url = f"{gw.url}?key={SECRET}"
        r = await http.post(url, json=scripted.INIT, headers=scripted.HEAD)
        assert r.status_code == 200
        headers = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        async with contextlib.AsyncExitStack() as held:
            if failure == "no-free-connection":  # a call's open stream takes the connection
                call = scripted.tool_call(1)
                first = await held.enter_async_context(
                    http.stream("POST", gw.url, json=call, headers=headers)
                )
                assert first.status_code == 200
            with captured("fsm", logging.DEBUG) as logged:
                try:
                    r = await http.post(url, json=scripted.CALL, headers=headers)
                    status, told = r.status_code, r.text
                except httpx2.RemoteProtocolError:  # the body was cut short, as upstream
                    status, told = 0, ""
    assert any(SECRET in target for _, target, _, _ in up.seen)  # the key went upstream
    expected = {"malformed-head": 502, "cut-body": 0, "no-free-connection": 504}[failure]
    assert status == expected, (status, told)
    leaked = [line for line in logged.at_info_or_above() if SECRET in line]
    assert not leaked, leaked
    assert SECRET not in told and "127.0.0.1" not in told, told


@contextlib.asynccontextmanager
async def transport(**kwargs: Any) -> AsyncIterator[httpx2.AsyncClient]:
    """An ``httpx2`` client on the gateway's upstream transport (``kwargs`` to it)."""
    async with httpx2.AsyncClient(transport=AiohttpTransport(**kwargs)) as http:
        yield http


@pytest.mark.parametrize(
    ("failure", "raised"),
    [
        ("refused", httpx2.ConnectError),
        ("malformed-head", httpx2.RemoteProtocolError),
        ("cut-head", httpx2.RemoteProtocolError),
        ("cut-body", httpx2.RemoteProtocolError),
        ("no-free-connection", httpx2.ConnectTimeout),
        ("silent", httpx2.ReadTimeout),
    ],
    ids=["refused", "malformed-head", "cut-head", "cut-body", "no-free-connection", "silent"],
)
async def test_no_transport_failure_carries_the_request_url(
    failure: str, raised: type[Exception]
) -> None:
    """Each failure of the gateway's upstream transport (:mod:`fsm.gateway.upstream`) is
    raised as the ``httpx2`` exception the core handles, and neither its text, nor its
    ``repr``, nor its traceback as a log handler formats it holds the query string of
    the request's URL: a refused connection, a head aiohttp cannot parse, a head or a
    body cut short, no connection free within the wait for one (one allowed, held by an
    open stream; 0.1 s), no response within the read timeout (0.1 s)."""
    answer = {
        "malformed-head": MALFORMED_HEAD,
        "cut-head": CUT_HEAD,
        "cut-body": CUT_BODY,
        "no-free-connection": OPEN_STREAM,
    }.get(failure)
    timeout = httpx2.Timeout(10.0, connect=0.1, pool=0.1, read=0.1)
    async with (
        raw_http.upstream(lambda *_: answer) as (upstream, _up),
        transport(connections=1) as http,
    ):
        url = f"{upstream}?key={SECRET}"
        if failure == "refused":
            with contextlib.closing(__import__("socket").socket()) as sock:
                sock.bind(("127.0.0.1", 0))  # a port no one listens on
                url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp?key={SECRET}"
        async with contextlib.AsyncExitStack() as held:
            if failure == "no-free-connection":  # the one connection, taken
                request = http.build_request("GET", url, timeout=timeout)
                first = await http.send(request, stream=True)
                held.push_async_callback(first.aclose)
            with pytest.raises(raised) as caught:
                async with http.stream("GET", url, timeout=timeout) as resp:
                    await resp.aread()
    exc = caught.value
    told = [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    assert not [text for text in told if SECRET in text], told


def _failures_naming(url: str) -> list[BaseException]:
    """aiohttp's failures whose own text holds the request's ``url`` (a connect timeout, an
    invalid or non-HTTP URL, a malformed response), and one that names only the upstream's
    address (a refused connection)."""
    import aiohttp
    import yarl

    where = yarl.URL(url, encoded=True)
    info = aiohttp.RequestInfo(where, "GET", {}, where)  # type: ignore[arg-type]
    refused = aiohttp.ClientConnectorError(
        aiohttp.client_reqrep.ConnectionKey("127.0.0.1", 9, False, True, None, None, None),
        ConnectionRefusedError(111, "Connection refused"),
    )
    return [
        aiohttp.ConnectionTimeoutError(f"Connection timeout to host {url}"),
        aiohttp.InvalidURL(where),
        aiohttp.NonHttpUrlClientError(where),
        aiohttp.ClientResponseError(info, (), status=400, message="Bad status line"),
        aiohttp.ClientConnectionError(f"failed on {url}"),
        aiohttp.ClientError(url),
        refused,
    ]


@pytest.mark.parametrize(
    "index",
    range(7),
    ids=[
        "connect-timeout",
        "invalid-url",
        "non-http-url",
        "malformed-response",
        "connection-error",
        "client-error",
        "refused",
    ],
)
def test_no_aiohttp_failure_passes_the_url_on(index: int) -> None:
    """Every kind of aiohttp failure the gateway's upstream transport translates
    (:func:`fsm.gateway.upstream._translated`), including those whose own text is the
    request's URL and those no loopback fault produces (an invalid URL), comes out as an
    ``httpx2`` exception whose text, ``repr`` and traceback hold no part of the query."""
    from fsm.gateway import upstream

    url = f"http://127.0.0.1:9/mcp?key={SECRET}"
    failure = _failures_naming(url)[index]
    request = httpx2.Request("GET", url)
    with pytest.raises(httpx2.HTTPError) as caught, upstream._translated(request):
        raise failure
    exc = caught.value
    told = [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    assert not [text for text in told if SECRET in text], told
