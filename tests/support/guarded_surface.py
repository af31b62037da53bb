"""The tests every SDK line's guarded session passes, written once: the surface compared
with the installed SDK's (:mod:`support.surface`), each request method answering as the
plain SDK session does, and a held prompt or resource read whose interaction dies ending
with one typed error that is also the SDK's error class. The installed line is
:mod:`fsm.wire.sdk`'s; a line's test module subclasses :class:`GuardedSurfaceTests`
(``tests/e2e/test_guarded_surface.py`` on mcp 2.x, ``tests/e2e_v1/test_guarded_surface_v1.py``
on 1.x) and keeps the tests only its line has. Real servers on 127.0.0.1.
"""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import anyio
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

from fsm.adapters.core import RACED_METHODS
from fsm.errors import ResumeBudgetSpentError, SessionExpiredError
from fsm.wire.proxy import HttpFault, is_resume_get
from fsm.wire.rig import Rig
from fsm.wire.sdk import MCP_MAJOR, McpError, adapter, http_client, hx, open_client_streams
from fsm.wire.server import DEPRECATION, running_server
from support.scenarios import open_rig, through_proxy
from support.surface import offered, parameters_not_taken, signature_mismatches, unclassified

__all__ = [
    "HELD",
    "GuardedSurfaceTests",
    "assert_typed",
    "one_ending",
    "refuse_every_resume",
]

Call = Callable[[Any], Awaitable[Any]]

HELD: dict[str, Call] = {
    "get_prompt": lambda s: s.get_prompt("greeting", {"name": "Ada", "held": "yes"}),
    "read_resource": lambda s: s.read_resource(_uri("fsm://notes/held")),
}
"""A request the harness server holds open until released, by guarded method."""

METHOD = {"get_prompt": "prompts/get", "read_resource": "resources/read"}
"""The JSON-RPC method of each of :data:`HELD`."""


def _uri(text: str) -> Any:
    """A resource URI as the line's ``read_resource`` takes it (1.x: a pydantic ``AnyUrl``)."""
    if MCP_MAJOR >= 2:
        return text
    from pydantic import AnyUrl

    return AnyUrl(text)


def calls() -> dict[str, Call]:
    """One call of each request method a guarded session offers, against the harness
    server (``fsm.wire.server``: its prompt, resources and completion)."""
    prompt = types.PromptReference(type="ref/prompt", name="greeting")
    readme = _uri("fsm://notes/readme")
    ping: Any = types.PingRequest(method="ping")
    if MCP_MAJOR < 2:
        request_union: Any = types.ClientRequest  # 1.x sends the request union
        ping = request_union(ping)
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
        "send_request": lambda s: s.send_request(ping, types.EmptyResult),
        "set_logging_level": lambda s: s.set_logging_level("info"),
        "subscribe_resource": lambda s: s.subscribe_resource(readme),
        "unsubscribe_resource": lambda s: s.unsubscribe_resource(readme),
    }


async def _outcome(call: Call, session: Any) -> object:
    """``call(session)``'s result as JSON, or its error as its JSON-RPC code and message."""
    try:
        with warnings.catch_warnings():  # the SDK's deprecations (logging, subscriptions)
            warnings.simplefilter("ignore", DEPRECATION)
            result = await call(session)
    except McpError as err:
        return ("error", err.error.code, err.error.message)  # type: ignore[attr-defined]
    return result.model_dump(mode="json")


async def one_ending(call: Awaitable[Any]) -> BaseException:
    """What ``call`` raised within 20 s: exactly one exception (a result fails the test)."""
    try:
        with anyio.fail_after(20):
            result = await call
    except Exception as exc:
        return exc
    raise AssertionError(f"returned {result!r}")


def assert_typed(err: BaseException, reasons: dict[str, str]) -> None:
    """``err`` is one of the typed errors ``reasons`` names (class name -> reason), not
    in an exception group, and the SDK's error class with code -32000 and that reason."""
    assert isinstance(err, McpError) and not isinstance(err, BaseExceptionGroup)
    reason = getattr(err, "reason", None)
    assert reasons.get(type(err).__name__) == reason
    assert err.error.code == -32000 and err.error.data["reason"] == reason  # type: ignore[attr-defined]


async def refuse_every_resume(rig: Rig, method: str) -> Any:
    """Wait for the request of ``method`` and its stream's priming event (the guard has a
    cursor), then cut that stream abruptly with every resume refused (503): the request
    event, once cut."""
    request = await rig.proxy.wait_for(
        lambda e: e.kind == "request" and (e.json or {}).get("method") == method
    )
    await rig.proxy.wait_for(
        lambda e: e.kind == "sse_event" and e.exchange == request.exchange and e.data == ""
    )
    rig.proxy.fail_next(HttpFault(503, b"unavailable"), is_resume_get, times=10)
    await rig.proxy.cut(rig.proxy.exchanges[request.exchange], "abrupt")
    return request


async def _ending_of(
    call: Awaitable[Any], meanwhile: Callable[[], Awaitable[Any]]
) -> BaseException:
    """The one exception ``call`` ends with while ``meanwhile`` runs beside it."""
    ending: list[BaseException] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            ending.append(await one_ending(call))

        tg.start_soon(run)
        await meanwhile()
    [err] = ending
    return err


class GuardedSurfaceTests:
    """The installed line's guarded session against its ``ClientSession``. A subclass
    named ``Test...`` runs them; ``EXPIRY_ENDINGS`` names the typed errors (class name ->
    reason) a held request may end with when its session expires."""

    EXPIRY_ENDINGS: ClassVar[dict[str, str]] = {"SessionExpiredError": "session-expired"}

    # ------------------------------------------------------------------ the surface

    def test_every_request_method_of_the_sdk_session_is_guarded_or_excluded(self) -> None:
        guarded = adapter().GuardedSession
        assert unclassified(ClientSession, guarded) == set()
        assert offered(guarded) == set(RACED_METHODS)
        missing = [name for name in RACED_METHODS if not hasattr(ClientSession, name)]
        assert missing == []  # nothing offered that the SDK does not have

    def test_a_method_a_new_sdk_release_adds_fails_the_surface_check(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async def list_widgets(self: ClientSession) -> None:
            """A request method of an SDK release to come."""

        monkeypatch.setattr(ClientSession, "list_widgets", list_widgets, raising=False)
        assert unclassified(ClientSession, adapter().GuardedSession) == {"list_widgets"}

    def test_each_guarded_method_has_the_sdks_signature(self) -> None:
        guarded = adapter().GuardedSession
        wrong = {
            name: signature_mismatches(getattr(ClientSession, name), getattr(guarded, name))
            for name in RACED_METHODS
        }
        assert {name: w for name, w in wrong.items() if w} == {}

    def test_a_changed_sdk_signature_fails_the_signature_check(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async def get_prompt(
            self: ClientSession, name: str, arguments: Any = None, *, version: str = "1"
        ) -> None:
            """``get_prompt`` as a release to come might have it."""

        monkeypatch.setattr(ClientSession, "get_prompt", get_prompt)
        mismatches = signature_mismatches(
            ClientSession.get_prompt, adapter().GuardedSession.get_prompt
        )
        assert mismatches == ["version: missing"]

    def test_guarded_session_takes_every_parameter_of_the_sdk_session_and_transport(
        self,
    ) -> None:
        opener = adapter().guarded_session
        assert parameters_not_taken(opener, ClientSession.__init__, streamable_http_client) == []

    def test_a_new_sdk_session_parameter_fails_the_parameter_check(self) -> None:
        def init(
            self: Any, read_stream: Any, write_stream: Any, *, retry_policy: Any = None
        ) -> None:
            """``ClientSession.__init__`` as a release to come might have it."""

        assert parameters_not_taken(adapter().guarded_session, init) == [
            f"{init.__qualname__}: retry_policy not taken"
        ]

    def test_every_keyword_of_guarded_session_is_checked_at_the_call(self) -> None:
        """A misspelled keyword is a plain ``TypeError`` where the session or connection
        is opened: not inside an ExceptionGroup, and before any request is sent."""
        sent: list[Any] = []

        def handler(request: Any) -> Any:
            sent.append(request)
            return hx.Response(500)

        http = hx.AsyncClient(transport=hx.MockTransport(handler))
        line = adapter()
        for opener in (line.guarded_session, line.guarded_connection):
            with pytest.raises(TypeError) as caught:
                opener("http://127.0.0.1:9/mcp", http_client=http, elicitation_calback=None)
            assert type(caught.value) is TypeError
            assert "elicitation_calback" in str(caught.value)
        with pytest.raises(TypeError):
            line.guarded_session("http://127.0.0.1:9/mcp", None)
        assert sent == []

    async def test_raced_refuses_a_method_it_does_not_know(self) -> None:
        async with running_server() as server, adapter().guarded_session(server.url) as session:
            with pytest.raises(ValueError, match="initialize"):
                await session.raced("initialize")

    # ------------------------------------------------------------------ over HTTP

    async def test_each_request_method_answers_as_the_sdks_does(self) -> None:
        """The same call on a plain ``ClientSession`` and on the guarded session, against
        the same server: the same result, or the same SDK error (the server has no
        subscriptions or logging: the SDK's error for those)."""
        table = calls()
        assert set(table) == set(RACED_METHODS)  # a new request method gets a call here
        async with running_server() as server, http_client() as http:
            async with (
                open_client_streams(server.url, http) as (read, write),
                ClientSession(read, write) as plain,
            ):
                await plain.initialize()
                expected = {name: await _outcome(call, plain) for name, call in table.items()}
            async with adapter().guarded_session(server.url, http_client=http) as session:
                got = {name: await _outcome(call, session) for name, call in table.items()}
                assert session.violations == [] and session.failures == {}
        assert got == expected
        assert expected["get_prompt"]["messages"][0]["content"]["text"] == "Hello, Ada!"  # type: ignore[index]

    # ------------------------------------------------------------------ dead interactions

    @pytest.mark.parametrize("name", sorted(HELD))
    async def test_a_request_whose_session_expires_ends_with_one_typed_error(
        self, name: str
    ) -> None:
        """The server ends the session while the request is held: its stream ends, the
        guard's resume is refused, and the call raises one typed error (an SDK error);
        the same call afterwards raises ``SessionExpiredError`` at once."""
        async with running_server() as server, adapter().guarded_session(server.url) as session:

            async def expire() -> None:
                await server.controller.wait_for(
                    lambda e: e.kind == "held" and e.detail["what"] == METHOD[name]
                )
                assert session.session_id is not None
                await server.controller.expire_session(session.session_id)

            err = await _ending_of(HELD[name](session), expire)
            assert_typed(err, self.EXPIRY_ENDINGS)
            again = await one_ending(HELD[name](session))
            assert isinstance(again, SessionExpiredError)
            assert_typed(again, {"SessionExpiredError": "session-expired"})
            assert again is not err and session.violations == []
            server.controller.release_held()

    @pytest.mark.parametrize("name", sorted(HELD))
    async def test_a_request_whose_stream_the_guard_gave_up_ends_with_one_typed_error(
        self, name: str
    ) -> None:
        """The held request's stream is cut and every resume refused (503): the guard
        gives up after its budget, and the call raises ``ResumeBudgetSpentError`` (an SDK
        error) once; the session goes on."""
        async with (
            open_rig() as rig,
            through_proxy(rig, adapter().guarded_session) as session,
        ):
            cut: list[Any] = []

            async def give_up() -> None:
                cut.append(await refuse_every_resume(rig, METHOD[name]))

            err = await _ending_of(HELD[name](session), give_up)
            assert isinstance(err, ResumeBudgetSpentError)
            assert_typed(err, {"ResumeBudgetSpentError": "resume-budget-spent"})
            assert err.stream == f"post:{cut[0].json['id']}"
            assert list(session.failures) == [err.stream] and session.violations == []
            rig.controller.release_held()
            with anyio.fail_after(10):
                assert (await session.send_ping()).model_dump(exclude_none=True) == {}

    async def test_a_framework_races_a_prompt_through_guarded_connection(self) -> None:
        """fastmcp's ``Client.get_prompt`` (4.x on mcp 2.x, 3.x on 1.x) through
        ``conn.call(..., method="prompts/get")`` ends with the same one typed error. On
        1.x fastmcp owns the SDK's write stream, so the call learns its typed error from
        the ending error the guard puts on the stream."""
        pytest.importorskip("fastmcp")
        from fastmcp import Client
        from fastmcp.client.transports import StreamableHttpTransport

        from support.fastmcp_clients import CLIENT_MODE

        async with (
            open_rig() as rig,
            through_proxy(rig, adapter().guarded_connection) as conn,
        ):
            factory: Any = conn.http_client
            transport = StreamableHttpTransport(rig.proxy.url, httpx_client_factory=factory)
            async with Client(transport, **CLIENT_MODE) as client:
                prompt = conn.call(
                    lambda: client.get_prompt("greeting", {"name": "Ada", "held": "yes"}),
                    method="prompts/get",
                )
                err = await _ending_of(prompt, lambda: refuse_every_resume(rig, "prompts/get"))
                assert isinstance(err, ResumeBudgetSpentError)
                assert_typed(err, {"ResumeBudgetSpentError": "resume-budget-spent"})
                rig.controller.release_held()
