"""The typed errors an adapter raises are the SDK's ``MCPError`` too (mcp 2.x): an
application's ``except MCPError`` catches them, ``except SessionExpiredError`` still does,
and the SDK's ``ErrorData`` carries code -32000 and ``data.reason``. Real mcp 2.3.0
clients and servers on 127.0.0.1; the 1.x line: ``tests/e2e_v1/test_sdk_errors_v1.py``."""

from __future__ import annotations

import pickle
from typing import Any

import anyio
import httpx2
import pytest
from mcp import MCPError, types
from mcp.client.streamable_http import streamable_http_client
from pydantic import ValidationError

from fsm.adapters.mcp2 import BINDING
from fsm.adapters.mrtr import guarded_call_tool
from fsm.errors import (
    InteractionFailed,
    MalformedInputRequiredError,
    RequestStateExpiredError,
    SessionExpiredError,
    UnknownPendingRequestError,
)
from fsm.wire.mrtr_server import running_mrtr_server
from fsm.wire.proxy import HttpFault
from fsm.wire.sdk import modern_client
from support.scenarios import Rig, guarded_client, run_scenario
from support.session_endings import errors_after_expiry

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(90)]


def _is_the_sdks(err: BaseException, reason: str) -> None:
    """``err`` is an ``MCPError`` carrying code -32000 and ``data.reason`` ``reason``, with
    the library's name and message."""
    assert isinstance(err, MCPError) and isinstance(err, InteractionFailed)
    assert isinstance(err.error, types.ErrorData)
    assert err.code == err.error.code == -32000
    assert err.data["reason"] == err.error.data["reason"] == err.reason == reason
    assert err.data == err.to_json() and err.data["error"] == type(err).__name__
    assert err.message == str(err) == err.args[0]


async def test_except_mcperror_catches_a_session_expired_error() -> None:
    """The call that meets the 404, and every call after it, raise an ``MCPError``; the
    library's class still catches."""
    caught, typed = await errors_after_expiry()
    assert len(caught) == 2
    for err in [*caught, typed]:
        assert isinstance(err, SessionExpiredError)
        _is_the_sdks(err, "session-expired")
    assert caught[0] is not caught[1]


async def test_except_mcperror_catches_the_typed_error_of_a_call(rig: Rig) -> None:
    """The answer is rejected as terminal: the call's one typed error is an MCPError."""
    caught: list[MCPError] = []
    async with guarded_client(rig.env()) as client, anyio.create_task_group() as tg:

        async def call() -> None:
            try:
                await client.call_tool("delete_files", {"deadline": "silent"})
            except MCPError as err:
                caught.append(err)

        tg.start_soon(call)
        await rig.user.wait_presented(1)
        rig.proxy.fail_next_answer(
            HttpFault.jsonrpc_error(500, -32602, "no such pending request", 1)
        )
        rig.user.answer_open()
    [err] = caught
    assert isinstance(err, UnknownPendingRequestError)
    _is_the_sdks(err, "unknown-pending-request")
    assert err.key == (rig.session_id(), 1)
    assert err.error.data["key"] == [rig.session_id(), 1]


async def test_a_framework_on_guarded_connection_gets_the_sdks_error_type_too() -> None:
    pytest.importorskip("fastmcp")
    from support.fastmcp_clients import guarded_fastmcp

    r = await run_scenario("session_expired", guarded_fastmcp)
    assert r.outcome.error_type == "SessionExpiredError"
    assert (r.outcome.code, r.outcome.reason) == (-32000, "session-expired")


async def test_except_mcperror_catches_an_mrtr_calls_typed_error() -> None:
    async with running_mrtr_server(ttl=30.0) as server:

        async def expire_then_accept(context: Any, params: Any) -> types.ElicitResult:
            server.expire_states()
            return types.ElicitResult(action="accept", content={})

        async with modern_client(server.url, elicitation_callback=expire_then_accept) as client:
            with pytest.raises(MCPError) as caught:
                await guarded_call_tool(client, "delete_files", {"count": 3})
    err = caught.value
    assert isinstance(err, RequestStateExpiredError)
    _is_the_sdks(err, "invalid-request-state")
    assert isinstance(err.__cause__, MCPError) and err.__cause__.code == -32602  # the server's


class WithoutResultType(httpx2.AsyncBaseTransport):
    """The client's HTTP transport, dropping ``resultType`` from an input-required result
    (as a server that omits it would send it): mcp 2.3.0 cannot parse such a result."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.dropped = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        marker = b'"resultType":"input_required",'
        if marker in body:
            self.dropped += 1
            body = body.replace(marker, b"", 1)
        headers = [(k, v) for k, v in response.headers.items() if k.lower() != "content-length"]
        return httpx2.Response(response.status_code, headers=headers, content=body)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_result_the_sdk_rejects_is_reported_as_the_sdks_rejection() -> None:
    shown: list[Any] = []

    async def never(context: Any, params: Any) -> types.ElicitResult:
        shown.append(params)
        return types.ElicitResult(action="accept", content={})

    transport = WithoutResultType()
    async with (
        running_mrtr_server(ttl=30.0) as server,
        httpx2.AsyncClient(transport=transport) as http,
        modern_client(
            streamable_http_client(server.url, http_client=http), elicitation_callback=never
        ) as client,
    ):
        with pytest.raises(MCPError) as caught:
            await guarded_call_tool(client, "delete_files", {"count": 3})
    err = caught.value
    assert transport.dropped == 1 and shown == []
    assert isinstance(err, MalformedInputRequiredError)
    _is_the_sdks(err, "unparseable-result")
    assert "the client's SDK rejected the server's result of round 0" in str(err)
    assert "server rejected" not in str(err)
    assert isinstance(err.__cause__, ValidationError)  # what the SDK said about it


class McpError(Exception):
    """mcp 1.x's error, as shaped there: built from an ``ErrorData``, its state in ``error``."""

    def __init__(self, error: types.ErrorData) -> None:
        super().__init__(error.message)
        self.error = error


def test_one_helper_serves_both_sdk_lines() -> None:
    """A 1.x-shaped error (``McpError(ErrorData)``, state in ``error`` only) and 2.x's
    ``MCPError`` get the same treatment; made classes are made once, and pickle."""
    from fsm.adapters.sdkerrors import CODE, SdkErrorType

    assert CODE == -32000

    one, two = SdkErrorType(McpError, types.ErrorData), BINDING.errors
    assert two == SdkErrorType(MCPError, types.ErrorData)
    plain = SessionExpiredError("gone", stream="post:3", evidence=("HTTP 404",))
    for line, base in ((one, McpError), (two, MCPError)):
        err = line.wrap(plain)
        assert isinstance(err, base) and isinstance(err, SessionExpiredError)
        assert type(err) is line.subclass(SessionExpiredError)
        assert type(err).__name__ == "SessionExpiredError" and str(err) == "gone"
        assert (err.key, err.stream, err.reason, err.evidence) == (
            None,
            "post:3",
            "session-expired",
            ("HTTP 404",),
        )
        assert (err.error.code, err.error.data["reason"]) == (-32000, "session-expired")
        assert line.wrap(err) is err
        again = pickle.loads(pickle.dumps(err))
        assert type(again) is type(err) and again.to_json() == err.to_json()
    assert not isinstance(plain, MCPError)  # the guard's own error stays the library's
