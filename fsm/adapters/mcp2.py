"""Guard an unmodified mcp 2.x client: ``guarded_session(url, ...)``.

::

    from fsm.adapters.mcp2 import guarded_session

    async with guarded_session(url, elicitation_callback=on_elicit) as session:
        result = await session.call_tool("delete_files", {"files": [...]})
        prompt = await session.get_prompt("review", {"path": "a.txt"})

The SDK's own ``ClientSession`` over its ``streamable_http_client`` runs unmodified on an
``httpx2.AsyncClient`` whose transport is the guarded-transport core
(:mod:`fsm.adapters.core`: how it works and what it cannot see). Accepts every mcp 2.x
release (:data:`SUPPORTED_SDK`); each from 2.0.0 to 2.3.0 is tested.

The yielded :class:`GuardedSession` stands in for the ``ClientSession``: each of its
request methods (:data:`fsm.adapters.core.RACED_METHODS`) has the SDK's signature and is
raced against the guard, so a dead interaction ends with its result or one typed error;
what it leaves out is :data:`fsm.adapters.core.NOT_RACED`, with the reasons.

What is specific to 2.x: server requests are dispatched concurrently (a prompt on screen
does not block the session); the SDK ignores the status of an answer POST (the core submits
answers itself, so outcomes are classified all the same); the SDK turns a request POST's
HTTP error into an ``MCPError`` for that request, so the core forwards those unchanged.
Every typed error a guarded session or connection raises is an ``MCPError`` too (code
-32000, ``error.data["reason"]`` its reason: :mod:`fsm.adapters.sdkerrors`), so an
application's ``except MCPError`` keeps catching what the guard ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from fsm._extras import missing_extra

try:
    import httpx2
    from mcp import ClientSession, types
    from mcp.client.session import ClientRequestContext
    from mcp.shared.message import ClientMessageMetadata
    from pydantic import TypeAdapter, ValidationError
    from typing_extensions import deprecated

    from fsm.adapters import core
    from fsm.adapters._stored import ERRORS, RESHOWN_META
    from fsm.adapters._transport.rejoin import params_of
    from fsm.adapters._transport.session import SameOnBothLines
    from fsm.adapters.core import GuardedConnection, GuardedTransport
except ModuleNotFoundError as exc:
    raise missing_extra("mcp", "fsm.adapters.mcp2", exc) from exc

from fsm import actions as act
from fsm.adapters.sdkversion import MCP1, MCP2
from fsm.adapters.sdkversion import check_sdk_version as _check
from fsm.durable.store import SseCall, Store
from fsm.errors import StoreCorruptError
from fsm.sse.guard import GuardConfig

if TYPE_CHECKING:  # the SDK's parameter types, named where 2.3.0 defines them
    from mcp.client.extension import NotificationBinding, ResultClaim
    from mcp.client.session import (
        ElicitationFnT,
        ListRootsFnT,
        LoggingFnT,
        MessageHandlerFnT,
        SamplingFnT,
    )
    from mcp.shared.dispatcher import ProgressFnT

    from fsm.adapters.core import LogTarget

__all__ = [
    "BINDING",
    "SUPPORTED_SDK",
    "GuardedConnection",
    "GuardedSession",
    "GuardedTransport",
    "check_sdk_version",
    "guarded_connection",
    "guarded_session",
]

SUPPORTED_SDK = MCP2
"""The mcp releases this adapter accepts (``mcp>=2.0.0,<3.0.0``)."""


def check_sdk_version(strict: bool = True) -> str:
    """The installed mcp version; raises ``RuntimeError`` naming the supported ranges if it
    is outside :data:`SUPPORTED_SDK` and ``strict``."""
    return _check(SUPPORTED_SDK, others=(MCP1,), strict=strict)


_RESUMED: dict[str, tuple[Any, Any]] = {
    "tools/call": (types.CallToolRequest, types.CallToolResult),
    "prompts/get": (types.GetPromptRequest, types.GetPromptResult),
    "resources/read": (types.ReadResourceRequest, types.ReadResourceResult),
}
"""What a stored call of each resumable method is sent as, and what it returns."""

_ELICIT: TypeAdapter[Any] = TypeAdapter(types.ElicitRequestParams)


class Rejoin:
    """How an mcp 2.x session rejoins a stored session (:mod:`fsm.adapters._transport.rejoin`):
    ``ClientSession.adopt`` of the stored ``InitializeResult`` (no wire traffic), request
    ids numbered past the stored ones, and a
    stored call sent again as ``send_request(..., metadata=ClientMessageMetadata(
    resumption_token=...))``, which the SDK sends as a ``GET`` with ``Last-Event-ID`` and
    whose replayed response it maps onto the new request id. A question is shown again
    through the elicitation callback with ``context.meta["fsm/reshown"]`` true."""

    def dump_initialize(self, result: Any) -> str:
        """``InitializeResult`` as JSON."""
        return str(result.model_dump_json(by_alias=True, exclude_none=True))

    def adopt(self, session: Any, initialize: str, next_id: int) -> None:
        """``session.adopt`` of the stored result; the SDK's request counter moved to
        ``next_id`` (a private seam: ``ClientSession._dispatcher._next_id``, the last id
        used; left alone on a release without it, where ids start again at 1). A stored
        result that is not an ``InitializeResult``: :class:`~fsm.errors.StoreCorruptError`."""
        try:
            result = types.InitializeResult.model_validate_json(initialize, by_name=False)
        except ValidationError as exc:
            raise StoreCorruptError(
                f"the stored InitializeResult does not read back ({exc.error_count()} errors)"
            ) from exc
        session.adopt(result)
        dispatcher: Any = getattr(session, "_dispatcher", None)
        if isinstance(getattr(dispatcher, "_next_id", None), int):
            dispatcher._next_id = max(dispatcher._next_id, next_id - 1)

    async def resume(self, session: Any, call: SseCall, token: str) -> Any:
        """``call`` resumed by the SDK's resumption, with ``token`` as its cursor
        (:class:`~fsm.errors.StoreCorruptError` for stored params that are not the
        method's)."""
        request_type, result_type = _RESUMED[call.method]
        try:
            request = request_type.model_validate(
                {"method": call.method, "params": params_of(call)}, by_name=False
            )
        except ValidationError as exc:
            raise StoreCorruptError(
                f"the stored {call.method} does not read back ({exc.error_count()} errors)"
            ) from exc
        metadata = ClientMessageMetadata(resumption_token=token)
        return await session.send_request(request, result_type, metadata=metadata)

    async def reshow(self, session: Any, callback: Any, shown: act.Reshown) -> Any:
        """The elicitation ``shown`` through ``callback``, marked; its answer as JSON."""
        if callback is None or shown.method != "elicitation/create":
            return None
        meta: Any = {RESHOWN_META: True}
        ctx = ClientRequestContext(session=session, request_id=shown.key[1], meta=meta)
        result = await callback(ctx, _ELICIT.validate_python(shown.params, by_name=False))
        if isinstance(result, types.ErrorData):
            return None
        return result.model_dump(by_alias=True, exclude_none=True, mode="json")


BINDING = core.SdkBinding(
    name="mcp 2.x",
    hx=httpx2,
    supported=MCP2,
    others=(MCP1,),
    connect=core.sdk_streams,
    session_class=ClientSession,
    cancel_result=lambda: types.ElicitResult(action="cancel"),
    errors=ERRORS,
    rejoin=Rejoin(),
)
"""The mcp 2.x line as the core sees it."""


class GuardedSession(SameOnBothLines):
    """An initialized mcp 2.x ``ClientSession`` with the guard in front of it, offering
    the session's request methods with its signatures.

    Each method is ``ClientSession``'s, raced against the guard
    (:meth:`~fsm.adapters.core.GuardedSession.raced`): it returns what the SDK returns, or
    raises exactly one :class:`~fsm.errors.InteractionFailed` subclass (an ``MCPError``
    too) when the guard decided the interaction cannot complete (its stream failed, the
    session expired: at once for every call after that), or what the SDK raises
    otherwise. A method the SDK declares once is derived from it
    (:func:`~fsm.adapters.core.raced_method`: the SDK's signature, for a type checker and
    for ``inspect.signature``). ``call_tool``, ``get_prompt`` and ``read_resource`` repeat
    the SDK's overloads: the result type follows ``allow_input_required`` (and
    ``allow_claimed``), which a type checker sees only through overloads (a derived
    signature keeps the first overload alone); ``set_logging_level`` and
    ``(un)subscribe_resource`` repeat the SDK's signature to carry its deprecation to a
    type checker (the SDK warns at run time). Keywords of a repeated signature left at
    their defaults are not passed on, so a 2.x release without one works while it is
    not used.
    ``session`` is the raw ``ClientSession``: what is not here
    (:data:`~fsm.adapters.core.NOT_RACED`, ``server_capabilities`` and the other
    attributes that send nothing) is there.
    """

    session: ClientSession

    @overload
    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: float | None = None,
        progress_callback: ProgressFnT | None = None,
        *,
        input_responses: types.InputResponses | None = None,
        request_state: str | None = None,
        meta: types.RequestParamsMeta | None = None,
        allow_input_required: Literal[False] = False,
        allow_claimed: Literal[False] = False,
    ) -> types.CallToolResult: ...

    @overload
    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: float | None = None,
        progress_callback: ProgressFnT | None = None,
        *,
        input_responses: types.InputResponses | None = None,
        request_state: str | None = None,
        meta: types.RequestParamsMeta | None = None,
        allow_input_required: bool,
        allow_claimed: Literal[False] = False,
    ) -> types.CallToolResult | types.InputRequiredResult: ...

    @overload
    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: float | None = None,
        progress_callback: ProgressFnT | None = None,
        *,
        input_responses: types.InputResponses | None = None,
        request_state: str | None = None,
        meta: types.RequestParamsMeta | None = None,
        allow_input_required: Literal[False] = False,
        allow_claimed: bool,
    ) -> types.CallToolResult | types.Result: ...

    @overload
    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: float | None = None,
        progress_callback: ProgressFnT | None = None,
        *,
        input_responses: types.InputResponses | None = None,
        request_state: str | None = None,
        meta: types.RequestParamsMeta | None = None,
        allow_input_required: bool,
        allow_claimed: bool,
    ) -> types.CallToolResult | types.InputRequiredResult | types.Result: ...

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: float | None = None,
        progress_callback: ProgressFnT | None = None,
        *,
        input_responses: types.InputResponses | None = None,
        request_state: str | None = None,
        meta: types.RequestParamsMeta | None = None,
        allow_input_required: bool = False,
        allow_claimed: bool = False,
    ) -> types.CallToolResult | types.InputRequiredResult | types.Result:
        """``ClientSession.call_tool`` (``tools/call``), raced against the guard."""
        return cast(
            "types.CallToolResult | types.InputRequiredResult | types.Result",
            await self.raced(
                "call_tool",
                name=name,
                arguments=arguments,
                read_timeout_seconds=read_timeout_seconds,
                progress_callback=progress_callback,
                input_responses=input_responses,
                request_state=request_state,
                meta=meta,
                allow_input_required=allow_input_required,
                allow_claimed=allow_claimed,
            ),
        )

    @overload
    async def get_prompt(
        self,
        name: str,
        arguments: dict[str, str] | None = None,
        *,
        input_responses: types.InputResponses | None = None,
        request_state: str | None = None,
        meta: types.RequestParamsMeta | None = None,
        allow_input_required: Literal[False] = False,
    ) -> types.GetPromptResult: ...

    @overload
    async def get_prompt(
        self,
        name: str,
        arguments: dict[str, str] | None = None,
        *,
        input_responses: types.InputResponses | None = None,
        request_state: str | None = None,
        meta: types.RequestParamsMeta | None = None,
        allow_input_required: bool,
    ) -> types.GetPromptResult | types.InputRequiredResult: ...

    async def get_prompt(
        self,
        name: str,
        arguments: dict[str, str] | None = None,
        *,
        input_responses: types.InputResponses | None = None,
        request_state: str | None = None,
        meta: types.RequestParamsMeta | None = None,
        allow_input_required: bool = False,
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """``ClientSession.get_prompt`` (``prompts/get``), raced against the guard."""
        return cast(
            "types.GetPromptResult | types.InputRequiredResult",
            await self.raced(
                "get_prompt",
                name=name,
                arguments=arguments,
                input_responses=input_responses,
                request_state=request_state,
                meta=meta,
                allow_input_required=allow_input_required,
            ),
        )

    list_prompts = core.raced_method(ClientSession.list_prompts)
    list_resource_templates = core.raced_method(ClientSession.list_resource_templates)
    list_resources = core.raced_method(ClientSession.list_resources)
    list_tools = core.raced_method(ClientSession.list_tools)

    @overload
    async def read_resource(
        self,
        uri: str,
        *,
        input_responses: types.InputResponses | None = None,
        request_state: str | None = None,
        meta: types.RequestParamsMeta | None = None,
        allow_input_required: Literal[False] = False,
    ) -> types.ReadResourceResult: ...

    @overload
    async def read_resource(
        self,
        uri: str,
        *,
        input_responses: types.InputResponses | None = None,
        request_state: str | None = None,
        meta: types.RequestParamsMeta | None = None,
        allow_input_required: bool,
    ) -> types.ReadResourceResult | types.InputRequiredResult: ...

    async def read_resource(
        self,
        uri: str,
        *,
        input_responses: types.InputResponses | None = None,
        request_state: str | None = None,
        meta: types.RequestParamsMeta | None = None,
        allow_input_required: bool = False,
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """``ClientSession.read_resource`` (``resources/read``), raced against the guard."""
        return cast(
            "types.ReadResourceResult | types.InputRequiredResult",
            await self.raced(
                "read_resource",
                uri=uri,
                input_responses=input_responses,
                request_state=request_state,
                meta=meta,
                allow_input_required=allow_input_required,
            ),
        )

    send_ping = core.raced_method(ClientSession.send_ping)
    send_request = core.raced_method(ClientSession.send_request)

    @deprecated("The logging capability is deprecated as of 2026-07-28 (SEP-2577).", category=None)
    async def set_logging_level(
        self, level: types.LoggingLevel, *, meta: types.RequestParamsMeta | None = None
    ) -> types.EmptyResult:
        """``ClientSession.set_logging_level`` (``logging/setLevel``), raced against the
        guard (deprecated by the SDK, which warns)."""
        return cast(
            "types.EmptyResult", await self.raced("set_logging_level", level=level, meta=meta)
        )

    @deprecated(
        "resources/subscribe is removed as of 2026-07-28; use Client.listen() instead.",
        category=None,
    )
    async def subscribe_resource(
        self, uri: str, *, meta: types.RequestParamsMeta | None = None
    ) -> types.EmptyResult:
        """``ClientSession.subscribe_resource`` (``resources/subscribe``), raced against
        the guard (deprecated by the SDK, which warns)."""
        return cast("types.EmptyResult", await self.raced("subscribe_resource", uri=uri, meta=meta))

    @deprecated(
        "resources/unsubscribe is removed as of 2026-07-28; use Client.listen() instead.",
        category=None,
    )
    async def unsubscribe_resource(
        self, uri: str, *, meta: types.RequestParamsMeta | None = None
    ) -> types.EmptyResult:
        """``ClientSession.unsubscribe_resource`` (``resources/unsubscribe``), raced against
        the guard (deprecated by the SDK, which warns)."""
        return cast(
            "types.EmptyResult", await self.raced("unsubscribe_resource", uri=uri, meta=meta)
        )


def guarded_connection(
    url: str,
    *,
    http_client: httpx2.AsyncClient | None = None,
    config: GuardConfig | None = None,
    clock: Callable[[], float] = time.monotonic,
    log: LogTarget | None = None,
    strict_sdk: bool = True,
) -> AbstractAsyncContextManager[GuardedConnection]:
    """The guard for one mcp 2.x session on ``url``, for a client that opens the SDK
    session itself, such as fastmcp 4.x's ``Client`` (a :class:`GuardedConnection`)::

        async with guarded_connection(url) as conn:
            transport = StreamableHttpTransport(url, httpx_client_factory=conn.http_client)
            async with fastmcp.Client(transport, elicitation_handler=handler) as client:
                result = await conn.call(lambda: client.call_tool("delete_files", {}))
                prompt = await conn.call(lambda: client.get_prompt("review"), method="prompts/get")

    with ``handler`` holding its prompt inside ``conn.prompt(context.request_id)``.
    Keywords as :func:`guarded_session`'s of the same names.
    """
    return core.open_guarded_connection(
        BINDING,
        url,
        http_client=http_client,
        config=config,
        clock=clock,
        log=log,
        strict_sdk=strict_sdk,
    )


def guarded_session(
    url: str,
    *,
    read_timeout_seconds: float | None = None,
    sampling_callback: SamplingFnT | None = None,
    elicitation_callback: ElicitationFnT | None = None,
    list_roots_callback: ListRootsFnT | None = None,
    logging_callback: LoggingFnT | None = None,
    message_handler: MessageHandlerFnT | None = None,
    client_info: types.Implementation | None = None,
    log_level: types.LoggingLevel | None = None,
    sampling_capabilities: types.SamplingCapability | None = None,
    extensions: dict[str, dict[str, Any]] | None = None,
    result_claims: Mapping[str, Sequence[ResultClaim[Any]]] | None = None,
    notification_bindings: Sequence[NotificationBinding[Any]] | None = None,
    http_client: httpx2.AsyncClient | None = None,
    terminate_on_close: bool = True,
    max_sse_event_size: int | None = 1048576,
    config: GuardConfig | None = None,
    clock: Callable[[], float] | None = None,
    log: LogTarget | None = None,
    strict_sdk: bool = True,
    store: Store | None = None,
) -> AbstractAsyncContextManager[GuardedSession]:
    """Open an initialized, guarded mcp 2.x session on ``url`` (streamable HTTP): enter
    the returned context manager for the :class:`GuardedSession`.

    ``ClientSession``'s parameters, with its defaults: ``read_timeout_seconds`` to
    ``notification_bindings`` (its ``read_stream``, ``write_stream`` and ``dispatcher``
    are the guard's: :data:`fsm.adapters.core.NOT_TAKEN`). ``streamable_http_client``'s:
    ``http_client`` (the application's client: all HTTP goes through it, its hooks, auth
    and timeouts apply, it is not closed here; default a client with a 30 s timeout and
    300 s to read), ``terminate_on_close``, ``max_sse_event_size``. Keywords left at
    their defaults are not passed on (a 2.x release without one works). The guard's:
    ``config`` (its policy), ``clock`` (its time source in seconds: ``time.monotonic``,
    or ``time.time`` with a store, whose deadlines must mean the same in the next
    process), ``log`` (a path or text stream that receives the event log as JSON Lines
    while it happens), ``strict_sdk`` (``RuntimeError`` on entering for an SDK release
    outside :data:`SUPPORTED_SDK`, unless ``False``), ``store`` (the guard is durable and
    writes ahead to it; a store holding a session the process before this one left with
    calls in flight rejoins it: :attr:`GuardedSession.restored_calls`,
    :meth:`GuardedSession.resume_call`, docs/durability.md).

    The signature is checked at the call: a misspelled keyword is a ``TypeError`` here,
    before any connection.
    """
    session_options = core.non_default(
        guarded_session,
        {
            "read_timeout_seconds": read_timeout_seconds,
            "sampling_callback": sampling_callback,
            "list_roots_callback": list_roots_callback,
            "logging_callback": logging_callback,
            "message_handler": message_handler,
            "client_info": client_info,
            "log_level": log_level,
            "sampling_capabilities": sampling_capabilities,
            "extensions": extensions,
            "result_claims": result_claims,
            "notification_bindings": notification_bindings,
        },
    )
    transport_options = core.non_default(
        guarded_session,
        {"terminate_on_close": terminate_on_close, "max_sse_event_size": max_sse_event_size},
    )
    return cast(
        "AbstractAsyncContextManager[GuardedSession]",
        core.open_guarded_session(
            BINDING,
            url,
            elicitation_callback=elicitation_callback,
            http_client=http_client,
            config=config,
            clock=clock or (time.monotonic if store is None else time.time),
            log=log,
            strict_sdk=strict_sdk,
            session_type=GuardedSession,
            transport_options=transport_options,
            store=store,
            **session_options,
        ),
    )
