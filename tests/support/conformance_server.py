"""The server the official conformance suite grades in server mode, on loopback (mcp 2.x).

``@modelcontextprotocol/conformance`` 0.1.16 (``tests/conformance``) connects to a server
as a client and calls the tools, prompts and resources its server scenarios name. This
module implements them as the suite's reference server (``everything-server.ts`` of the
conformance repository at ``v0.1.16``) does, with the mcp 2.x low-level ``Server`` (its
handlers return the reference server's results as they are, raw JSON schemas included):

- tools ``test_simple_text``, ``test_image_content``, ``test_audio_content``,
  ``test_embedded_resource``, ``test_multiple_content_types``, ``test_tool_with_logging``
  (three log notifications on the call's stream), ``test_tool_with_progress`` (three
  progress notifications for the caller's token; returns the token), ``test_error_handling``
  (``isError``), ``test_reconnection`` (closes the call's SSE stream, then returns: the
  result reaches a client that resumes with ``Last-Event-ID``), ``test_sampling(prompt)``,
  ``test_elicitation(message)``, ``test_elicitation_sep1034_defaults``,
  ``test_elicitation_sep1330_enums`` and ``json_schema_2020_12_tool`` (listed with its
  JSON Schema 2020-12 input schema unchanged);
- the server requests of the sampling and elicitation tools and the log notifications of
  ``resources/subscribe``, ``resources/unsubscribe`` and ``logging/setLevel`` are sent as
  the reference server sends them: related to no request, so the transport routes them to
  the session's standalone GET stream. The SDK only stores (never delivers) what it sends
  there before a GET attaches, and the suite's client opens its GET after initializing,
  in a task of its own: a tool call can overtake it, directly as well as through a
  gateway. So a server request waits, up to :data:`STANDALONE_WAIT_S`, until the
  session's GET stream is attached (:meth:`fsm.wire.server.ServerController.wait_standalone`)
  and is sent then: the scenarios' results do not depend on that race (notifications are
  sent at once: nothing checks them);
- resources ``test://static-text``, ``test://static-binary``, ``test://watched-resource``
  and the template ``test://template/{id}/data``; prompts ``test_simple_prompt``,
  ``test_prompt_with_arguments(arg1, arg2)``, ``test_prompt_with_embedded_resource
  (resourceUri)``, ``test_prompt_with_image``; ``completion/complete`` (no values);
- the SDK's DNS-rebinding protection for loopback (``Host``/``Origin`` of 127.0.0.1,
  localhost or [::1] only), a per-session event store (resumable streams, priming events
  with ``retry:``).

Limits: a test server (state in memory, loopback only). It shares the harness server's
(:mod:`fsm.wire.server`) per-session event-store views and its check of a session's
standalone stream, which read the SDK's session table (private details every supported
mcp 2.x release shares).
"""

from __future__ import annotations

import contextlib
import json
import socket
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from starlette.types import ASGIApp

from fsm.wire.server import ServerController, SessionScopedEventStore, install_scoped_views
from fsm.wire.serving import serving

__all__ = ["TOOL_NAMES", "build_conformance_app", "conformance_server"]

Ctx = ServerRequestContext[Any, Any]
_R = TypeVar("_R", bound=types.Result)

STANDALONE_WAIT_S = 5.0
"""Seconds a server request related to no request waits for the session's standalone GET
stream before it is sent anyway (and, with no stream attached, only stored)."""

IMAGE = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
    "rkJggg=="
)
"""A 1x1 red PNG pixel, base64 (the reference server's)."""
AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
"""A minimal WAV file, base64 (the reference server's)."""

JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}

SEP1034_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}


def _choices(pairs: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"const": value, "title": title} for value, title in pairs]


SEP1330_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {
            "type": "string",
            "description": "Select one option",
            "enum": ["option1", "option2", "option3"],
        },
        "titledSingle": {
            "type": "string",
            "description": "Select one option with titles",
            "oneOf": _choices(
                [
                    ("value1", "First Option"),
                    ("value2", "Second Option"),
                    ("value3", "Third Option"),
                ],
            ),
        },
        "legacyEnum": {
            "type": "string",
            "description": "Select one option (legacy)",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Select multiple options",
            "minItems": 1,
            "maxItems": 3,
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "description": "Select multiple options with titles",
            "minItems": 1,
            "maxItems": 3,
            "items": {
                "anyOf": _choices(
                    [
                        ("value1", "First Choice"),
                        ("value2", "Second Choice"),
                        ("value3", "Third Choice"),
                    ],
                )
            },
        },
    },
    "required": [],
}

NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _result(*content: dict[str, Any], is_error: bool = False) -> types.CallToolResult:
    body: dict[str, Any] = {"content": list(content)}
    if is_error:
        body["isError"] = True
    return types.CallToolResult.model_validate(body, by_name=False)


async def _log(ctx: Ctx, data: str, *, related: bool) -> None:
    """A ``notifications/message`` at ``info``: on the request's stream when ``related``,
    else related to no request (the standalone GET stream)."""
    note = types.LoggingMessageNotification(
        params=types.LoggingMessageNotificationParams(
            level="info", data=data, logger="conformance-test-server"
        )
    )
    await ctx.session.send_notification(note, ctx.request_id if related else None)


async def _standalone_request(ctx: Ctx, request: types.ServerRequest, result_type: type[_R]) -> _R:
    """Send ``request`` related to no request, as the reference server does (the transport
    routes it to the session's standalone GET stream), once that stream is attached or
    after :data:`STANDALONE_WAIT_S` (see the module docstring)."""
    controller: ServerController = ctx.lifespan_context
    session_id = ctx.request.headers.get("mcp-session-id", "") if ctx.request else ""
    with contextlib.suppress(TimeoutError):
        await controller.wait_standalone(session_id, STANDALONE_WAIT_S)
    return await ctx.session.send_request(request, result_type)


async def _elicit(ctx: Ctx, message: str, schema: dict[str, Any]) -> dict[str, Any]:
    """``elicitation/create`` related to no request (as the reference server sends it); the
    result as JSON (``MCPError`` when the client answers with an error)."""
    params = types.ElicitRequestFormParams.model_validate(
        {"mode": "form", "message": message, "requestedSchema": schema}, by_name=False
    )
    result = await _standalone_request(ctx, types.ElicitRequest(params=params), types.ElicitResult)
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


async def _simple_text(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    return _result(_text("This is a simple text response for testing."))


async def _image(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    return _result({"type": "image", "data": IMAGE, "mimeType": "image/png"})


async def _audio(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    return _result({"type": "audio", "data": AUDIO, "mimeType": "audio/wav"})


async def _embedded(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    resource = {
        "uri": "test://embedded-resource",
        "mimeType": "text/plain",
        "text": "This is an embedded resource content.",
    }
    return _result({"type": "resource", "resource": resource})


async def _mixed(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    resource = {
        "uri": "test://mixed-content-resource",
        "mimeType": "application/json",
        "text": json.dumps({"test": "data", "value": 123}),
    }
    return _result(
        _text("Multiple content types test:"),
        {"type": "image", "data": IMAGE, "mimeType": "image/png"},
        {"type": "resource", "resource": resource},
    )


async def _with_logging(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    for data in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await _log(ctx, data, related=True)
    return _result(_text("Tool with logging executed successfully"))


async def _with_progress(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    for step in (0, 50, 100):  # for the caller's progress token (none asked: nothing sent)
        await ctx.session.report_progress(step, 100, f"Completed step {step} of 100")
    token = (ctx.meta or {}).get("progressToken", (ctx.meta or {}).get("progress_token", 0))
    return _result(_text(str(token)))


async def _error(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    return _result(_text("This tool intentionally returns an error for testing"), is_error=True)


async def _reconnection(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    if ctx.close_sse_stream is not None:  # only when the client can resume (an event store)
        await ctx.close_sse_stream()
    return _result(
        _text(
            "Reconnection test completed successfully. If you received this, the client "
            "properly reconnected after stream closure."
        )
    )


async def _sampling(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    params = types.CreateMessageRequestParams.model_validate(
        {
            "messages": [{"role": "user", "content": _text(str(args.get("prompt", "")))}],
            "maxTokens": 100,
        },
        by_name=False,
    )
    try:
        result = await _standalone_request(
            ctx, types.CreateMessageRequest(params=params), types.CreateMessageResult
        )
    except MCPError as exc:
        return _result(_text(f"Sampling not supported or error: {exc}"))
    content = result.content
    text = getattr(content, "text", None) or "No response"
    return _result(_text(f"LLM response: {text}"))


def _elicitation_tool(
    message: Callable[[dict[str, Any]], str], schema: dict[str, Any], prefix: str
) -> Callable[[Ctx, dict[str, Any]], Awaitable[types.CallToolResult]]:
    async def tool(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
        try:
            answer = await _elicit(ctx, message(args), schema)
        except MCPError as exc:
            return _result(_text(f"Elicitation not supported or error: {exc}"))
        content = json.dumps(answer.get("content") or {}, separators=(",", ":"))
        return _result(_text(f"{prefix}: action={answer['action']}, content={content}"))

    return tool


async def _json_schema_tool(ctx: Ctx, args: dict[str, Any]) -> types.CallToolResult:
    return _result(_text(f"JSON Schema 2020-12 tool called with: {json.dumps(args)}"))


ToolFn = Callable[[Ctx, dict[str, Any]], Awaitable[types.CallToolResult]]

_ELICIT_SCHEMA = {
    "type": "object",
    "properties": {"response": {"type": "string", "description": "User's response"}},
    "required": ["response"],
}

TOOLS: dict[str, tuple[str, dict[str, Any], ToolFn]] = {
    "test_simple_text": ("Tests simple text content response", NO_ARGUMENTS, _simple_text),
    "test_image_content": ("Tests image content response", NO_ARGUMENTS, _image),
    "test_audio_content": ("Tests audio content response", NO_ARGUMENTS, _audio),
    "test_embedded_resource": (
        "Tests embedded resource content response",
        NO_ARGUMENTS,
        _embedded,
    ),
    "test_multiple_content_types": (
        "Tests response with multiple content types (text, image, resource)",
        NO_ARGUMENTS,
        _mixed,
    ),
    "test_tool_with_logging": (
        "Tests tool that emits log messages during execution",
        NO_ARGUMENTS,
        _with_logging,
    ),
    "test_tool_with_progress": (
        "Tests tool that reports progress notifications",
        NO_ARGUMENTS,
        _with_progress,
    ),
    "test_error_handling": ("Tests error response handling", NO_ARGUMENTS, _error),
    "test_reconnection": (
        "Closes the call's SSE stream mid-call; the result reaches a resuming client",
        NO_ARGUMENTS,
        _reconnection,
    ),
    "test_sampling": (
        "Tests server-initiated sampling (LLM completion request)",
        {
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "description": "The prompt to send to the LLM"}
            },
            "required": ["prompt"],
        },
        _sampling,
    ),
    "test_elicitation": (
        "Tests server-initiated elicitation (user input request)",
        {
            "type": "object",
            "properties": {
                "message": {"type": "string", "description": "The message to show the user"}
            },
            "required": ["message"],
        },
        _elicitation_tool(lambda a: str(a.get("message", "")), _ELICIT_SCHEMA, "User response"),
    ),
    "test_elicitation_sep1034_defaults": (
        "Tests elicitation with default values per SEP-1034",
        NO_ARGUMENTS,
        _elicitation_tool(
            lambda a: "Please review and update the form fields with defaults",
            SEP1034_SCHEMA,
            "Elicitation completed",
        ),
    ),
    "test_elicitation_sep1330_enums": (
        "Tests elicitation with enum schema improvements per SEP-1330",
        NO_ARGUMENTS,
        _elicitation_tool(
            lambda a: "Please select options from the enum fields",
            SEP1330_SCHEMA,
            "Elicitation completed",
        ),
    ),
    "json_schema_2020_12_tool": (
        "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
        JSON_SCHEMA_2020_12,
        _json_schema_tool,
    ),
}
TOOL_NAMES = tuple(TOOLS)


async def _list_tools(
    ctx: Ctx, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    tools = [
        {"name": name, "description": description, "inputSchema": schema}
        for name, (description, schema, _) in TOOLS.items()
    ]
    return types.ListToolsResult.model_validate({"tools": tools}, by_name=False)


async def _call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    entry = TOOLS.get(params.name)
    if entry is None:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
    return await entry[2](ctx, dict(params.arguments or {}))


# --------------------------------------------------------------------- resources, prompts

_RESOURCES = [
    {
        "uri": "test://static-text",
        "name": "static-text",
        "title": "Static Text Resource",
        "description": "A static text resource for testing",
        "mimeType": "text/plain",
    },
    {
        "uri": "test://static-binary",
        "name": "static-binary",
        "title": "Static Binary Resource",
        "description": "A static binary resource (image) for testing",
        "mimeType": "image/png",
    },
    {
        "uri": "test://watched-resource",
        "name": "watched-resource",
        "title": "Watched Resource",
        "description": "A resource whose updates a client may subscribe to",
        "mimeType": "text/plain",
    },
]
_CONTENTS: dict[str, dict[str, Any]] = {
    "test://static-text": {
        "mimeType": "text/plain",
        "text": "This is the content of the static text resource.",
    },
    "test://static-binary": {"mimeType": "image/png", "blob": IMAGE},
    "test://watched-resource": {"mimeType": "text/plain", "text": "Watched resource content"},
}
_TEMPLATE_PREFIX, _TEMPLATE_SUFFIX = "test://template/", "/data"


async def _list_resources(
    ctx: Ctx, params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    return types.ListResourcesResult.model_validate({"resources": _RESOURCES}, by_name=False)


async def _list_templates(
    ctx: Ctx, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    template = {
        "uriTemplate": _TEMPLATE_PREFIX + "{id}" + _TEMPLATE_SUFFIX,
        "name": "template",
        "title": "Resource Template",
        "description": "A resource template with parameter substitution",
        "mimeType": "application/json",
    }
    return types.ListResourceTemplatesResult.model_validate(
        {"resourceTemplates": [template]}, by_name=False
    )


async def _read_resource(
    ctx: Ctx, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    uri = str(params.uri)
    content = _CONTENTS.get(uri)
    if content is None and uri.startswith(_TEMPLATE_PREFIX) and uri.endswith(_TEMPLATE_SUFFIX):
        ident = uri[len(_TEMPLATE_PREFIX) : -len(_TEMPLATE_SUFFIX)]
        data = {"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"}
        content = {"mimeType": "application/json", "text": json.dumps(data)}
    if content is None:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Resource not found: {uri}")
    return types.ReadResourceResult.model_validate(
        {"contents": [{"uri": uri, **content}]}, by_name=False
    )


async def _subscribe(ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
    await _log(ctx, f"Subscribed to resource: {params.uri}", related=False)
    return types.EmptyResult()


async def _unsubscribe(ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    await _log(ctx, f"Unsubscribed from resource: {params.uri}", related=False)
    return types.EmptyResult()


def _prompt(name: str, title: str, description: str, *arguments: str) -> dict[str, Any]:
    args = [{"name": a, "description": f"{a} of the prompt", "required": True} for a in arguments]
    return {"name": name, "title": title, "description": description, "arguments": args}


_PROMPTS = [
    _prompt("test_simple_prompt", "Simple Test Prompt", "A simple prompt without arguments"),
    _prompt(
        "test_prompt_with_arguments",
        "Prompt With Arguments",
        "A prompt with required arguments",
        "arg1",
        "arg2",
    ),
    _prompt(
        "test_prompt_with_embedded_resource",
        "Prompt With Embedded Resource",
        "A prompt that includes an embedded resource",
        "resourceUri",
    ),
    _prompt("test_prompt_with_image", "Prompt With Image", "A prompt that includes image content"),
]


def _user(content: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": content}


async def _list_prompts(
    ctx: Ctx, params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    return types.ListPromptsResult.model_validate({"prompts": _PROMPTS}, by_name=False)


async def _get_prompt(ctx: Ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    args = dict(params.arguments or {})
    if params.name == "test_simple_prompt":
        messages = [_user(_text("This is a simple prompt for testing."))]
    elif params.name == "test_prompt_with_arguments":
        text = f"Prompt with arguments: arg1='{args.get('arg1')}', arg2='{args.get('arg2')}'"
        messages = [_user(_text(text))]
    elif params.name == "test_prompt_with_embedded_resource":
        resource = {
            "uri": args.get("resourceUri", ""),
            "mimeType": "text/plain",
            "text": "Embedded resource content for testing.",
        }
        messages = [
            _user({"type": "resource", "resource": resource}),
            _user(_text("Please process the embedded resource above.")),
        ]
    elif params.name == "test_prompt_with_image":
        messages = [
            _user({"type": "image", "data": IMAGE, "mimeType": "image/png"}),
            _user(_text("Please analyze the image above.")),
        ]
    else:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {params.name}")
    return types.GetPromptResult.model_validate({"messages": messages}, by_name=False)


async def _set_level(ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
    await _log(ctx, f"Log level set to: {params.level}", related=False)
    return types.EmptyResult()


async def _complete(ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
    return types.CompleteResult.model_validate(
        {"completion": {"values": [], "total": 0, "hasMore": False}}, by_name=False
    )


# --------------------------------------------------------------------------- app + runner


@contextlib.asynccontextmanager
async def _yielding(controller: ServerController) -> AsyncIterator[ServerController]:
    yield controller


def build_conformance_app(*, retry_interval_ms: int = 5000) -> ASGIApp:
    """The server's ASGI app: the handlers above on the SDK's streamable HTTP transport
    (stateful sessions, a per-session event store, priming events carrying ``retry:
    retry_interval_ms`` as the reference server's 5000, DNS-rebinding protection for
    loopback)."""
    controller = ServerController()
    with warnings.catch_warnings():  # logging is deprecated in 2026-07-28, not in 2025-11-25
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        server: Server[ServerController] = Server(
            "mcp-conformance-test-server",
            version="1.0.0",
            lifespan=lambda _: _yielding(controller),
            on_list_tools=_list_tools,
            on_call_tool=_call_tool,
            on_list_resources=_list_resources,
            on_list_resource_templates=_list_templates,
            on_read_resource=_read_resource,
            on_subscribe_resource=_subscribe,
            on_unsubscribe_resource=_unsubscribe,
            on_list_prompts=_list_prompts,
            on_get_prompt=_get_prompt,
            on_completion=_complete,
            on_set_logging_level=_set_level,
        )
    store = SessionScopedEventStore()
    app = server.streamable_http_app(event_store=store, retry_interval=retry_interval_ms)
    install_scoped_views(server.session_manager, store)
    controller.manager = server.session_manager
    return app


@contextlib.asynccontextmanager
async def conformance_server() -> AsyncIterator[str]:
    """Serve :func:`build_conformance_app` on 127.0.0.1 (a free port) in this event loop
    for the block; yields its MCP endpoint URL. asyncio only (uvicorn)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    try:
        async with serving(build_conformance_app(), sock, shutdown_timeout=0.5):
            yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        sock.close()
