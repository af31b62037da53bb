"""The guarded session stands in for mcp 1.x's ``ClientSession``: the surface compared
with the installed SDK's (every public coroutine method offered with 1.x's signature or
excluded with a reason; every parameter of ``ClientSession`` and
``streamable_http_client`` taken), each request method answering as the plain session
does, and a prompt or resource read whose interaction dies ending with one typed error
that is also ``McpError``. A real mcp 1.x client and server on 127.0.0.1; the 2.x line:
``tests/e2e/test_guarded_surface.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl

from fsm.adapters.core import RACED_METHODS
from fsm.adapters.mcp1 import GuardedSession, guarded_connection, guarded_session
from fsm.errors import ResumeBudgetSpentError, SessionExpiredError
from fsm.sse.guard import GuardConfig
from fsm.wire.proxy import HttpFault, is_resume_get
from fsm.wire.sdk import open_client_streams
from fsm.wire.server import running_server
from support.scenarios import GUARDED_SCENARIO_CONFIG_KW, open_rig
from support.surface import (
    offered,
    parameters_not_taken,
    signature_mismatches,
    unclassified,
)

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(90)]

# --------------------------------------------------------------------------- the surface


def test_every_request_method_of_the_sdk_session_is_guarded_or_excluded() -> None:
    assert unclassified(ClientSession, GuardedSession) == set()
    assert offered(GuardedSession) == set(RACED_METHODS)
    assert [name for name in RACED_METHODS if not hasattr(ClientSession, name)] == []


def test_a_method_a_new_sdk_release_adds_fails_the_surface_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def list_widgets(self: ClientSession) -> None:
        """A request method of an SDK release to come."""

    monkeypatch.setattr(ClientSession, "list_widgets", list_widgets, raising=False)
    assert unclassified(ClientSession, GuardedSession) == {"list_widgets"}


def test_each_guarded_method_has_the_sdks_signature() -> None:
    wrong = {
        name: signature_mismatches(getattr(ClientSession, name), getattr(GuardedSession, name))
        for name in RACED_METHODS
    }
    assert {name: w for name, w in wrong.items() if w} == {}


def test_guarded_session_takes_every_parameter_of_the_sdk_session_and_transport() -> None:
    taken = parameters_not_taken(guarded_session, ClientSession.__init__, streamable_http_client)
    assert taken == []


def test_every_keyword_of_guarded_session_is_checked_at_the_call() -> None:
    for opener in (guarded_session, guarded_connection):
        with pytest.raises(TypeError) as caught:
            opener("http://127.0.0.1:9/mcp", elicitation_calback=None)  # type: ignore[call-arg]
        assert type(caught.value) is TypeError
        assert "elicitation_calback" in str(caught.value)


# --------------------------------------------------------------------------- over HTTP


def _calls() -> dict[str, Callable[[Any], Awaitable[Any]]]:
    prompt = types.PromptReference(type="ref/prompt", name="greeting")
    readme = AnyUrl("fsm://notes/readme")
    return {
        "call_tool": lambda s: s.call_tool("ping", {}),
        "complete": lambda s: s.complete(prompt, {"name": "name", "value": "a"}),
        "get_prompt": lambda s: s.get_prompt("greeting", {"name": "Ada"}),
        "list_prompts": lambda s: s.list_prompts(),
        "list_resource_templates": lambda s: s.list_resource_templates(),
        "list_resources": lambda s: s.list_resources(),
        "list_tools": lambda s: s.list_tools(),
        "read_resource": lambda s: s.read_resource(readme),
        "send_ping": lambda s: s.send_ping(),
        "send_request": lambda s: s.send_request(
            types.ClientRequest(types.PingRequest(method="ping")), types.EmptyResult
        ),
        "set_logging_level": lambda s: s.set_logging_level("info"),
        "subscribe_resource": lambda s: s.subscribe_resource(readme),
        "unsubscribe_resource": lambda s: s.unsubscribe_resource(readme),
    }


async def _outcome(call: Callable[[Any], Awaitable[Any]], session: Any) -> object:
    try:
        result = await call(session)
    except McpError as err:
        return ("McpError", err.error.code, err.error.message)
    return result.model_dump(mode="json")


async def test_each_request_method_answers_as_the_sdks_does() -> None:
    calls = _calls()
    assert set(calls) == set(RACED_METHODS)
    async with running_server() as server, httpx.AsyncClient() as http:
        async with (
            open_client_streams(server.url, http) as (read, write),
            ClientSession(read, write) as plain,
        ):
            await plain.initialize()
            expected = {name: await _outcome(call, plain) for name, call in calls.items()}
        async with guarded_session(server.url, http_client=http) as session:
            got = {name: await _outcome(call, session) for name, call in calls.items()}
            assert session.violations == [] and session.failures == {}
    assert got == expected


# --------------------------------------------------------------------------- dead interactions

HELD: dict[str, Callable[[Any], Awaitable[Any]]] = {
    "get_prompt": lambda s: s.get_prompt("greeting", {"name": "Ada", "held": "yes"}),
    "read_resource": lambda s: s.read_resource(AnyUrl("fsm://notes/held")),
}
METHOD = {"get_prompt": "prompts/get", "read_resource": "resources/read"}


async def _one_ending(call: Awaitable[Any]) -> BaseException:
    try:
        with anyio.fail_after(20):
            result = await call
    except Exception as exc:
        return exc
    raise AssertionError(f"returned {result!r}")


def _is_typed_and_the_sdks(err: BaseException, reasons: dict[str, str]) -> None:
    """``err`` is one of the typed errors ``reasons`` names (class name -> reason), and a
    ``McpError`` with code -32000 and that reason."""
    assert isinstance(err, McpError) and not isinstance(err, BaseExceptionGroup)
    assert reasons.get(type(err).__name__) == getattr(err, "reason", None)
    assert err.error.code == -32000 and err.error.data["reason"] == getattr(err, "reason", None)


@pytest.mark.parametrize("name", sorted(HELD))
async def test_a_request_whose_session_expires_ends_with_one_typed_error(name: str) -> None:
    """The server ends the session while the request is held: one typed error (the resume
    meets 404, or 400 on the oldest 1.x servers: the stream cannot be resumed), and
    ``SessionExpiredError`` for the same call afterwards."""
    async with running_server() as server, guarded_session(server.url) as session:
        ending: list[BaseException] = []
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                ending.append(await _one_ending(HELD[name](session)))

            tg.start_soon(call)
            await server.controller.wait_for(
                lambda e: e.kind == "held" and e.detail["what"] == METHOD[name]
            )
            assert session.session_id is not None
            await server.controller.expire_session(session.session_id)
        [err] = ending
        ended = {
            "SessionExpiredError": "session-expired",
            "ResumeBudgetSpentError": "not-resumable",
        }
        _is_typed_and_the_sdks(err, ended)
        again = await _one_ending(HELD[name](session))
        assert isinstance(again, SessionExpiredError)
        _is_typed_and_the_sdks(again, {"SessionExpiredError": "session-expired"})
        assert session.violations == []
        server.controller.release_held()


@pytest.mark.parametrize("name", sorted(HELD))
async def test_a_request_whose_stream_the_guard_gave_up_ends_with_one_typed_error(
    name: str,
) -> None:
    async with open_rig() as rig:
        config = GuardConfig(**GUARDED_SCENARIO_CONFIG_KW)
        async with guarded_session(rig.proxy.url, http_client=rig.http, config=config) as session:
            ending: list[BaseException] = []
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    ending.append(await _one_ending(HELD[name](session)))

                tg.start_soon(call)
                request = await rig.proxy.wait_for(
                    lambda e: e.kind == "request" and (e.json or {}).get("method") == METHOD[name]
                )
                await rig.proxy.wait_for(
                    lambda e: (
                        e.kind == "sse_event" and e.exchange == request.exchange and e.data == ""
                    )
                )
                rig.proxy.fail_next(HttpFault(503, b"unavailable"), is_resume_get, times=10)
                await rig.proxy.cut(rig.proxy.exchanges[request.exchange], "abrupt")
            [err] = ending
            assert isinstance(err, ResumeBudgetSpentError)
            _is_typed_and_the_sdks(err, {"ResumeBudgetSpentError": "resume-budget-spent"})
            assert list(session.failures) == [err.stream] and session.violations == []
            rig.controller.release_held()
            await session.send_ping()  # the session goes on


async def test_a_framework_races_a_prompt_through_guarded_connection() -> None:
    """fastmcp 3.x's ``Client.get_prompt`` through ``conn.call(..., method=
    "prompts/get")``: fastmcp owns the SDK's write stream, so the call learns its typed
    error from the ending error the guard puts on the stream."""
    pytest.importorskip("fastmcp")
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    async with open_rig() as rig:
        config = GuardConfig(**GUARDED_SCENARIO_CONFIG_KW)
        async with (
            guarded_connection(rig.proxy.url, http_client=rig.http, config=config) as conn,
            Client(
                StreamableHttpTransport(rig.proxy.url, httpx_client_factory=conn.http_client)
            ) as client,
        ):
            ending: list[BaseException] = []
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    prompt = conn.call(
                        lambda: client.get_prompt("greeting", {"name": "Ada", "held": "yes"}),
                        method="prompts/get",
                    )
                    ending.append(await _one_ending(prompt))

                tg.start_soon(call)
                request = await rig.proxy.wait_for(
                    lambda e: e.kind == "request" and (e.json or {}).get("method") == "prompts/get"
                )
                await rig.proxy.wait_for(
                    lambda e: (
                        e.kind == "sse_event" and e.exchange == request.exchange and e.data == ""
                    )
                )
                rig.proxy.fail_next(HttpFault(503, b"unavailable"), is_resume_get, times=10)
                await rig.proxy.cut(rig.proxy.exchanges[request.exchange], "abrupt")
            [err] = ending
            assert isinstance(err, ResumeBudgetSpentError)
            _is_typed_and_the_sdks(err, {"ResumeBudgetSpentError": "resume-budget-spent"})
            rig.controller.release_held()


async def test_a_call_the_guard_failed_leaves_the_session_usable() -> None:
    """A tool call's stream is cut and every resume refused: the call raises the typed
    error at once, and the SDK's own request is not cancelled while the guard's ending
    error is delivered to it (1.x's receive loop would close on that, and the session
    with it): the next call works."""
    async with open_rig() as rig:
        config = GuardConfig(**GUARDED_SCENARIO_CONFIG_KW)
        async with guarded_session(rig.proxy.url, http_client=rig.http, config=config) as session:
            ending: list[BaseException] = []
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    ending.append(
                        await _one_ending(session.call_tool("delete_files", {"gated": True}))
                    )

                tg.start_soon(call)
                post = await rig.tools_call()
                await rig.controller.wait_pending(state="gated")
                rig.proxy.fail_next(HttpFault(503, b"unavailable"), is_resume_get, times=10)
                await rig.proxy.cut(post, "abrupt")
            [err] = ending
            assert isinstance(err, ResumeBudgetSpentError)
            with anyio.fail_after(10):
                result = await session.call_tool("ping", {})
            assert result.content[0].text == "pong"  # type: ignore[union-attr]
            assert session.violations == []
