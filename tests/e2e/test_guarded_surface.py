"""The guarded session stands in for mcp 2.x's ``ClientSession``.

Every public coroutine method of the installed ``ClientSession`` is on
:class:`fsm.adapters.mcp2.GuardedSession` with the SDK's signature, or excluded with a
reason (:data:`fsm.adapters.core.NOT_RACED`); ``guarded_session`` takes every parameter
of ``ClientSession`` and ``streamable_http_client`` (or :data:`~fsm.adapters.core.NOT_TAKEN`
says why not) and checks its keywords at the call. Over real HTTP on 127.0.0.1, each
request method answers as the plain SDK session does, and a prompt or resource read
whose interaction dies ends with one typed error that is also ``MCPError``. The 1.x line:
``tests/e2e_v1/test_guarded_surface_v1.py``.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession, MCPError, types
from mcp.client.streamable_http import streamable_http_client

from fsm.adapters.core import NOT_RACED, NOT_TAKEN, RACED_METHODS
from fsm.adapters.mcp2 import GuardedSession, guarded_connection, guarded_session
from fsm.errors import InteractionFailed, ResumeBudgetSpentError, SessionExpiredError
from fsm.sse.guard import GuardConfig
from fsm.wire.proxy import HttpFault, is_resume_get
from fsm.wire.sdk import open_client_streams
from fsm.wire.server import DEPRECATION, running_server
from support.scenarios import GUARDED_SCENARIO_CONFIG_KW, Rig
from support.surface import (
    offered,
    parameters_not_taken,
    signature_mismatches,
    unclassified,
)

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(90)]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "adapter.md"

# --------------------------------------------------------------------------- the surface


def test_every_request_method_of_the_sdk_session_is_guarded_or_excluded() -> None:
    assert unclassified(ClientSession, GuardedSession) == set()
    assert offered(GuardedSession) == set(RACED_METHODS)
    missing = [name for name in RACED_METHODS if not hasattr(ClientSession, name)]
    assert missing == []  # nothing offered that the SDK does not have


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


def test_a_changed_sdk_signature_fails_the_signature_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def get_prompt(
        self: ClientSession, name: str, arguments: Any = None, *, version: str = "1"
    ) -> None:
        """``get_prompt`` as a release to come might have it."""

    monkeypatch.setattr(ClientSession, "get_prompt", get_prompt)
    assert signature_mismatches(ClientSession.get_prompt, GuardedSession.get_prompt) == [
        "version: missing"
    ]


def test_guarded_session_takes_every_parameter_of_the_sdk_session_and_transport() -> None:
    assert (
        parameters_not_taken(guarded_session, ClientSession.__init__, streamable_http_client) == []
    )


def test_a_new_sdk_session_parameter_fails_the_parameter_check() -> None:
    def init(self: Any, read_stream: Any, write_stream: Any, *, retry_policy: Any = None) -> None:
        """``ClientSession.__init__`` as a release to come might have it."""

    assert parameters_not_taken(guarded_session, init) == [
        f"{init.__qualname__}: retry_policy not taken"
    ]


def test_every_keyword_of_guarded_session_is_checked_at_the_call() -> None:
    """A misspelled keyword is a plain ``TypeError`` where ``guarded_session`` is called:
    not inside an ExceptionGroup, and before any request is sent."""
    sent: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(500)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    for opener in (guarded_session, guarded_connection):
        with pytest.raises(TypeError) as caught:
            opener("http://127.0.0.1:9/mcp", http_client=http, elicitation_calback=None)  # type: ignore[call-arg]
        assert type(caught.value) is TypeError
        assert "elicitation_calback" in str(caught.value)
    with pytest.raises(TypeError):
        guarded_session("http://127.0.0.1:9/mcp", None)  # type: ignore[misc]
    assert sent == []


def test_only_what_the_caller_set_is_passed_on() -> None:
    """Keywords at their defaults stay out of the SDK call (an older 2.x release without
    one works); a keyword given a value goes on."""
    sig = inspect.signature(GuardedSession.get_prompt)
    assert sig.parameters["allow_input_required"].default is False
    from fsm.adapters.core import non_default

    assert non_default(GuardedSession.get_prompt, {"name": "a", "meta": None}) == {"name": "a"}
    given = {"allow_input_required": True, "arguments": {"x": "1"}}
    assert non_default(GuardedSession.get_prompt, given) == given
    assert non_default(guarded_session, {"max_sse_event_size": 1048576}) == {}
    assert non_default(guarded_session, {"max_sse_event_size": None}) == {
        "max_sse_event_size": None
    }


async def test_raced_refuses_a_method_it_does_not_know() -> None:
    async with running_server() as server, guarded_session(server.url) as session:
        with pytest.raises(ValueError, match="initialize"):
            await session.raced("initialize")


def test_every_exclusion_is_documented() -> None:
    text = DOCS.read_text(encoding="utf-8")
    undocumented = [name for name in (*NOT_RACED, *NOT_TAKEN) if f"`{name}`" not in text]
    assert undocumented == []


# --------------------------------------------------------------------------- over HTTP


def _calls() -> dict[str, Callable[[Any], Awaitable[Any]]]:
    """One call of each request method a guarded session offers, against the harness
    server (``fsm.wire.server``: its prompt, resources and completion)."""
    prompt = types.PromptReference(type="ref/prompt", name="greeting")
    return {
        "call_tool": lambda s: s.call_tool("ping", {}),
        "complete": lambda s: s.complete(prompt, {"name": "name", "value": "a"}),
        "get_prompt": lambda s: s.get_prompt("greeting", {"name": "Ada"}),
        "list_prompts": lambda s: s.list_prompts(),
        "list_resource_templates": lambda s: s.list_resource_templates(),
        "list_resources": lambda s: s.list_resources(),
        "list_tools": lambda s: s.list_tools(),
        "read_resource": lambda s: s.read_resource("fsm://notes/readme"),
        "send_ping": lambda s: s.send_ping(),
        "send_request": lambda s: s.send_request(types.PingRequest(), types.EmptyResult),
        "set_logging_level": lambda s: s.set_logging_level("info"),
        "subscribe_resource": lambda s: s.subscribe_resource("fsm://notes/readme"),
        "unsubscribe_resource": lambda s: s.unsubscribe_resource("fsm://notes/readme"),
    }


async def _outcome(call: Callable[[Any], Awaitable[Any]], session: Any) -> object:
    """``call(session)``'s result as JSON, or its error as its type and JSON-RPC code
    and message."""
    try:
        with warnings.catch_warnings():  # the SDK's deprecations (logging, subscriptions)
            warnings.simplefilter("ignore", DEPRECATION)
            result = await call(session)
    except MCPError as err:
        return ("MCPError", err.error.code, err.error.message)
    return result.model_dump(mode="json")


async def test_each_request_method_answers_as_the_sdks_does() -> None:
    """The same call on a plain ``ClientSession`` and on the guarded session, against the
    same server: the same result, or the same ``MCPError`` (the server has no
    subscriptions or logging: the SDK's error for those)."""
    calls = _calls()
    assert set(calls) == set(RACED_METHODS)  # a new request method gets a call here
    async with running_server() as server, httpx2.AsyncClient() as http:
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
    assert expected["get_prompt"]["messages"][0]["content"]["text"] == "Hello, Ada!"  # type: ignore[index]


# --------------------------------------------------------------------------- dead interactions

HELD: dict[str, Callable[[GuardedSession], Awaitable[Any]]] = {
    "get_prompt": lambda s: s.get_prompt("greeting", {"name": "Ada", "held": "yes"}),
    "read_resource": lambda s: s.read_resource("fsm://notes/held"),
}
"""A request the harness server holds open until released, by guarded method."""

METHOD = {"get_prompt": "prompts/get", "read_resource": "resources/read"}


async def _one_ending(call: Awaitable[Any]) -> BaseException:
    """What ``call`` raised: exactly one exception (a result fails the test)."""
    try:
        with anyio.fail_after(20):
            result = await call
    except Exception as exc:
        return exc
    raise AssertionError(f"returned {result!r}")


def _is_typed_and_the_sdks(err: BaseException, error: type[InteractionFailed], reason: str) -> None:
    assert isinstance(err, error) and isinstance(err, MCPError)
    assert not isinstance(err, BaseExceptionGroup)
    assert err.error.code == -32000 and err.error.data["reason"] == err.reason == reason


@pytest.mark.parametrize("name", sorted(HELD))
async def test_a_request_whose_session_expires_ends_with_one_typed_error(name: str) -> None:
    """The server ends the session while the request is held: its stream ends, the
    guard's resume meets 404, and the call raises ``SessionExpiredError`` (an
    ``MCPError``); so does the same call afterwards, at once."""
    async with running_server() as server, guarded_session(server.url) as session:
        async with anyio.create_task_group() as tg:
            ending: list[BaseException] = []

            async def call() -> None:
                ending.append(await _one_ending(HELD[name](session)))

            tg.start_soon(call)
            await server.controller.wait_for(
                lambda e: e.kind == "held" and e.detail["what"] == METHOD[name]
            )
            assert session.session_id is not None
            await server.controller.expire_session(session.session_id)
        [err] = ending
        _is_typed_and_the_sdks(err, SessionExpiredError, "session-expired")
        again = await _one_ending(HELD[name](session))
        _is_typed_and_the_sdks(again, SessionExpiredError, "session-expired")
        assert again is not err and session.violations == []
        server.controller.release_held()


@asynccontextmanager
async def _guarded_via_proxy(rig: Rig) -> AsyncIterator[GuardedSession]:
    config = GuardConfig(**GUARDED_SCENARIO_CONFIG_KW)
    async with guarded_session(rig.proxy.url, http_client=rig.http, config=config) as session:
        yield session


@pytest.mark.parametrize("name", sorted(HELD))
async def test_a_request_whose_stream_the_guard_gave_up_ends_with_one_typed_error(
    rig: Rig, name: str
) -> None:
    """The held request's stream is cut and every resume refused (503): the guard gives
    up after its budget, and the call raises ``ResumeBudgetSpentError`` (an
    ``MCPError``) once; the session goes on."""
    async with _guarded_via_proxy(rig) as session:
        async with anyio.create_task_group() as tg:
            ending: list[BaseException] = []

            async def call() -> None:
                ending.append(await _one_ending(HELD[name](session)))

            tg.start_soon(call)
            request = await rig.proxy.wait_for(
                lambda e: e.kind == "request" and (e.json or {}).get("method") == METHOD[name]
            )
            await rig.proxy.wait_for(  # the priming event: the guard has a cursor
                lambda e: e.kind == "sse_event" and e.exchange == request.exchange and e.data == ""
            )
            rig.proxy.fail_next(HttpFault(503, b"unavailable"), is_resume_get, times=10)
            await rig.proxy.cut(rig.proxy.exchanges[request.exchange], "abrupt")
        [err] = ending
        _is_typed_and_the_sdks(err, ResumeBudgetSpentError, "resume-budget-spent")
        assert err.stream == f"post:{request.json['id']}"  # type: ignore[index]
        assert list(session.failures) == [err.stream] and session.violations == []
        rig.controller.release_held()
        assert (await session.send_ping()).model_dump(exclude_none=True) == {}


async def test_a_framework_races_a_prompt_through_guarded_connection(rig: Rig) -> None:
    """``GuardedConnection.call(..., method="prompts/get")`` gives a framework's prompt
    (fastmcp 4.x ``Client.get_prompt``) the same one typed error."""
    pytest.importorskip("fastmcp")
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    config = GuardConfig(**GUARDED_SCENARIO_CONFIG_KW)
    async with guarded_connection(rig.proxy.url, http_client=rig.http, config=config) as conn:
        factory: Any = conn.http_client
        transport = StreamableHttpTransport(rig.proxy.url, httpx_client_factory=factory)
        async with Client(transport, mode="legacy") as client, anyio.create_task_group() as tg:
            ending: list[BaseException] = []

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
                lambda e: e.kind == "sse_event" and e.exchange == request.exchange and e.data == ""
            )
            rig.proxy.fail_next(HttpFault(503, b"unavailable"), is_resume_get, times=10)
            await rig.proxy.cut(rig.proxy.exchanges[request.exchange], "abrupt")
        [err] = ending
        _is_typed_and_the_sdks(err, ResumeBudgetSpentError, "resume-budget-spent")
        rig.controller.release_held()
