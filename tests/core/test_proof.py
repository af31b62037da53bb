"""What a response says of the credentials of the request it answers: the status rules
(``says_accepted``) and the JSON-RPC result a probe waits for (``holds_result``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

httpx2 = pytest.importorskip("httpx2")

from fsm.adapters._transport.http import holds_result, says_accepted  # noqa: E402

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:1/mcp"
SSE = {"content-type": "text/event-stream"}
JSON = {"content-type": "application/json"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def response(status: int, headers: dict[str, str] | None = None, body: bytes = b"") -> Any:
    return httpx2.Response(status, headers=headers or {}, content=body)


@pytest.mark.parametrize(
    ("method", "status", "headers", "accepted"),
    [
        ("POST", 202, {}, True),
        ("POST", 200, JSON, False),  # may be a JSON-RPC error
        ("POST", 200, SSE, False),
        ("POST", 204, {}, False),
        ("GET", 200, SSE, False),  # an upstream may let a GET through unchecked
        ("GET", 202, {}, False),
        ("DELETE", 200, {}, False),
        ("DELETE", 204, {}, False),
        ("DELETE", 404, {}, False),
        ("OPTIONS", 200, {}, False),
        ("HEAD", 200, SSE, False),
    ],
)
def test_only_a_status_that_cannot_carry_a_refusal_says_accepted(
    method: str, status: int, headers: dict[str, str], accepted: bool
) -> None:
    request = httpx2.Request(method, URL)
    assert says_accepted(request, response(status, headers)) is accepted


def event(message: Any, event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}data: {json.dumps(message)}\n\n".encode()


RESULT = {"jsonrpc": "2.0", "id": "p-1", "result": {}}
ERROR = {"jsonrpc": "2.0", "id": "p-1", "error": {"code": -32001, "message": "not yours"}}


@pytest.mark.parametrize(
    ("status", "headers", "body", "held"),
    [
        (200, JSON, json.dumps(RESULT).encode(), True),
        (200, JSON, json.dumps([ERROR, RESULT]).encode(), True),
        (200, JSON, json.dumps(ERROR).encode(), False),
        (200, JSON, json.dumps({**RESULT, "error": ERROR["error"]}).encode(), False),
        (200, JSON, json.dumps({**RESULT, "id": "p-2"}).encode(), False),
        (200, JSON, json.dumps({**RESULT, "method": "ping"}).encode(), False),
        (200, JSON, b"", False),
        (200, JSON, b"{not json", False),
        (202, {}, b"", False),
        (403, JSON, json.dumps(RESULT).encode(), False),
        (200, SSE, b": primed\n\n" + event(None, "0") + event(RESULT, "1"), True),
        (200, SSE, event({"jsonrpc": "2.0", "method": "ping", "id": 7}) + event(RESULT), True),
        (200, SSE, event(ERROR, "1"), False),
        (200, SSE, b"id: 1\ndata: \xff\xfe\n\n" + event(ERROR), False),
    ],
    ids=[
        "json-result",
        "batch-with-result",
        "json-error",
        "result-and-error",
        "another-id",
        "a-request",
        "empty",
        "not-json",
        "202",
        "403",
        "sse-result-after-priming",
        "sse-result-after-a-request",
        "sse-error",
        "sse-malformed-then-error",
    ],
)
async def test_only_the_requests_result_is_held(
    status: int, headers: dict[str, str], body: bytes, held: bool
) -> None:
    assert await holds_result(response(status, headers, body), "p-1") is held


@pytest.mark.parametrize(("got", "wanted"), [("1", 1), (1, "1"), (True, 1), (1.0, 1)])
async def test_an_id_of_another_type_is_another_id(got: Any, wanted: str | int) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": got, "result": {}}).encode()
    assert not await holds_result(response(200, JSON, body), wanted)


async def test_a_result_past_the_limit_is_not_read() -> None:
    padding = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"x": "y" * 500}}
    body = event(padding) * 4 + event(RESULT)
    assert await holds_result(response(200, SSE, body), "p-1", limit=len(body))
    assert not await holds_result(response(200, SSE, body), "p-1", limit=1_000)
    whole = json.dumps(RESULT).encode()
    assert not await holds_result(response(200, JSON, whole), "p-1", limit=len(whole) - 1)


class BrokenOff(httpx2.AsyncByteStream):
    """A body that breaks off after its first piece."""

    def __init__(self, first: bytes) -> None:
        self.first = first

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.first
        raise httpx2.ReadError("connection reset")


@pytest.mark.parametrize(
    ("headers", "first"),
    [(JSON, json.dumps(RESULT).encode()[:10]), (SSE, b'data: {"jsonrpc"')],
    ids=["json", "sse"],
)
async def test_a_body_that_breaks_off_holds_no_result(
    headers: dict[str, str], first: bytes
) -> None:
    resp = httpx2.Response(200, headers=headers, stream=BrokenOff(first))
    assert not await holds_result(resp, "p-1")


async def test_a_result_whose_last_line_end_is_a_bare_cr_is_held() -> None:
    """The stream's last byte is the CR that ends the result's event: the end of the body
    completes it (a CR is held in case an LF follows)."""
    body = b"data: " + json.dumps(RESULT).encode() + b"\r\r"
    assert await holds_result(response(200, SSE, body), "p-1")
