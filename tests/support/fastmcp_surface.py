"""fastmcp's ``Client`` surface against the guard (extra ``fastmcp``; 4.x on mcp 2.x, 3.x
on mcp 1.x).

fastmcp opens the SDK session itself, so it is guarded at the transport
(:class:`~fsm.adapters.core.GuardedConnection`): a request method is raced when the
application runs it through ``conn.call(run, method=...)``, naming the JSON-RPC method of
the request whose stream decides the call. :data:`RACED` says which method that is for
every public coroutine method of ``Client`` that sends a request, :data:`NOT_RACED` why
the others are not raced; :func:`unclassified` is what a new fastmcp release added (in
neither table). Both tables cover both lines: a name only one line has is in them once.

:func:`race_each` runs calls once each through a guarded connection to the rig's fault
proxy and records, per method, what reached the server (the proxy's log: the JSON-RPC
method and id of each request) and whether the guard saw each of those requests' streams
(its ``Began("post:<id>")`` observations), and how the call ended; :func:`problems` says
what in such a record breaks the tables' claims.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from mcp import types

from fsm.adapters.core import GuardedConnection
from fsm.properties import Began
from fsm.sse.guard import GuardConfig
from fsm.wire.rig import GUARDED_SCENARIO_CONFIG_KW, Rig
from fsm.wire.sdk import MCP_MAJOR, adapter
from fsm.wire.server import DEPRECATION
from support.surface import coroutine_methods

__all__ = [
    "NOT_RACED",
    "RACED",
    "SKILLS",
    "Raced",
    "calls",
    "open_guarded_fastmcp",
    "problems",
    "race_each",
    "unclassified",
]

RACED: Mapping[str, str | None] = {
    "call_tool": "tools/call",
    "call_tool_mcp": "tools/call",
    "complete": "completion/complete",
    "complete_mcp": "completion/complete",
    "get_prompt": "prompts/get",
    "get_prompt_mcp": "prompts/get",
    "list_prompts": "prompts/list",
    "list_prompts_mcp": "prompts/list",
    "list_resource_templates": "resources/templates/list",
    "list_resource_templates_mcp": "resources/templates/list",
    "list_resources": "resources/list",
    "list_resources_mcp": "resources/list",
    "list_tools": "tools/list",
    "list_tools_mcp": "tools/list",
    "read_resource": "resources/read",
    "read_resource_mcp": "resources/read",
    "ping": "ping",
    "set_logging_level": "logging/setLevel",
    # 4.x: skills served as resources
    "list_skill_resources": "resources/list",
    "read_skill": None,
    # 3.x: tasks
    "cancel_task": "tasks/cancel",
    "get_task_result": "tasks/result",
    "get_task_status": "tasks/get",
    "list_tasks": "tasks/list",
}
"""The request methods of fastmcp's ``Client`` (either line) by the JSON-RPC method to
pass as ``conn.call(..., method=...)``: the first request of that method the call sends
decides it. ``None``: the first request, whatever its method (``read_skill`` reads the
skill's manifest resource on a 2025-era connection, the guarded kind).
``list_skill_resources`` lists the resources, then reads the manifests it finds."""

_SKILLS = (
    "the Skills extension (skills/get, skills/list) needs protocol 2026-07-28: on a "
    "guarded connection (the 2025 handshake) fastmcp raises RuntimeError before sending "
    "anything; 2026-07-28 has no session-ful streams, its calls are guarded by "
    "fsm.adapters.mrtr"
)

SKILLS = frozenset({"get_skill", "get_skill_mcp", "list_skills", "list_skills_mcp"})
"""The request methods of the Skills extension: on a guarded connection, sent nothing."""

NOT_RACED: Mapping[str, str] = {
    "initialize": "the handshake: entering the Client runs it before any call; a second "
    "handshake on the same session is not something to race",
    "close": "closes the session and the transport; sends no request",
    "cancel": "a notification (notifications/cancelled): nothing answers it, so nothing "
    "can end it; guarded on the wire",
    "progress": "a notification (notifications/progress), same reason",
    "send_roots_list_changed": "a notification, same reason",
    **dict.fromkeys(sorted(SKILLS), _SKILLS),
}
"""The public coroutine methods of fastmcp's ``Client`` not raced on a guarded connection,
each with the reason."""

_MODE: dict[str, Any] = {"mode": "legacy"} if MCP_MAJOR >= 2 else {}
"""fastmcp 4.x negotiates 2026-07-28 by default, which has no session-ful streams."""


def unclassified(client: type = Client) -> set[str]:
    """The public coroutine methods of ``client`` in neither :data:`RACED` nor
    :data:`NOT_RACED`."""
    return coroutine_methods(client) - set(RACED) - set(NOT_RACED)


Call = Callable[[Any], Awaitable[Any]]


def calls(client: type = Client) -> dict[str, Call]:
    """One call of each method of :data:`RACED` and :data:`SKILLS` that ``client`` has,
    against the harness server (``fsm.wire.server``: its ``ping`` tool, ``greeting`` prompt, a note
    resource and the prompt's completion; no skills, no tasks)."""
    prompt = types.PromptReference(type="ref/prompt", name="greeting")
    skill = "skill://demo/SKILL.md"
    every: dict[str, Call] = {
        "call_tool": lambda c: c.call_tool("ping", {}),
        "call_tool_mcp": lambda c: c.call_tool_mcp("ping", {}),
        "complete": lambda c: c.complete(prompt, {"name": "name", "value": "a"}),
        "complete_mcp": lambda c: c.complete_mcp(prompt, {"name": "name", "value": "a"}),
        "get_prompt": lambda c: c.get_prompt("greeting", {"name": "Ada"}),
        "get_prompt_mcp": lambda c: c.get_prompt_mcp("greeting", {"name": "Ada"}),
        "list_prompts": lambda c: c.list_prompts(),
        "list_prompts_mcp": lambda c: c.list_prompts_mcp(),
        "list_resource_templates": lambda c: c.list_resource_templates(),
        "list_resource_templates_mcp": lambda c: c.list_resource_templates_mcp(),
        "list_resources": lambda c: c.list_resources(),
        "list_resources_mcp": lambda c: c.list_resources_mcp(),
        "list_tools": lambda c: c.list_tools(),
        "list_tools_mcp": lambda c: c.list_tools_mcp(),
        "read_resource": lambda c: c.read_resource("fsm://notes/readme"),
        "read_resource_mcp": lambda c: c.read_resource_mcp("fsm://notes/readme"),
        "ping": lambda c: c.ping(),
        "set_logging_level": lambda c: c.set_logging_level("info"),
        "get_skill": lambda c: c.get_skill(skill),
        "get_skill_mcp": lambda c: c.get_skill_mcp(skill),
        "list_skills": lambda c: c.list_skills(),
        "list_skills_mcp": lambda c: c.list_skills_mcp(),
        "list_skill_resources": lambda c: c.list_skill_resources(),
        "read_skill": lambda c: c.read_skill(skill),
        "cancel_task": lambda c: c.cancel_task("t1"),
        "get_task_result": lambda c: c.get_task_result("t1"),
        "get_task_status": lambda c: c.get_task_status("t1"),
        "list_tasks": lambda c: c.list_tasks(),
    }
    return {name: call for name, call in every.items() if hasattr(client, name)}


@contextlib.asynccontextmanager
async def open_guarded_fastmcp(
    url: str, http_client: Any, **client_kw: Any
) -> AsyncIterator[tuple[GuardedConnection, Any]]:
    """A guarded connection (the installed line's adapter, the scenarios' config) and a
    fastmcp ``Client`` on it, entered (initialized), with the handshake protocol
    versions. ``client_kw`` go to ``Client``."""
    config = GuardConfig(**GUARDED_SCENARIO_CONFIG_KW)
    async with adapter().guarded_connection(url, http_client=http_client, config=config) as conn:
        factory = cast(Any, conn.http_client)  # fastmcp types it for its own HTTP library
        transport = StreamableHttpTransport(url, httpx_client_factory=factory)
        async with Client(transport, **_MODE, **client_kw) as client:
            yield conn, client


@dataclass(frozen=True)
class Raced:
    """One method run once through ``conn.call``.

    ``sent``: ``(JSON-RPC method, id)`` of each request the server got during the call;
    ``unguarded``: the ids among them whose stream the guard did not see begin;
    ``result``: what it returned, or ``None``; ``error``: what it raised, or ``None``.
    """

    sent: list[tuple[str, Any]]
    unguarded: list[Any]
    result: Any
    error: BaseException | None


async def race_each(rig: Rig, calls: Mapping[str, Call]) -> dict[str, Raced]:
    """Run each of ``calls`` (:func:`calls`: ``name: call(client)``) once, in order, through
    ``conn.call(..., method=RACED.get(name))`` on one guarded fastmcp ``Client`` to the rig's
    proxy."""
    records: dict[str, Raced] = {}
    async with open_guarded_fastmcp(rig.proxy.url, rig.http) as (conn, client):
        for name, call in calls.items():
            mark = rig.proxy.last_seq
            seen = len(conn.observations())
            result: Any = None
            error: BaseException | None = None
            try:
                with warnings.catch_warnings():  # the SDK's deprecation of logging
                    warnings.simplefilter("ignore", DEPRECATION)
                    result = await conn.call(
                        functools.partial(call, client), method=RACED.get(name)
                    )
            except Exception as exc:
                error = exc
            sent = [
                (e.json["method"], e.json["id"])
                for e in rig.proxy.log
                if e.seq > mark
                and e.kind == "request"
                and isinstance(e.json, dict)
                and "method" in e.json
                and "id" in e.json
            ]
            began = {o.interaction for o, _ in conn.observations()[seen:] if isinstance(o, Began)}
            unguarded = [i for _, i in sent if f"post:{i}" not in began]
            records[name] = Raced(sent, unguarded, result, error)
    return records


def problems(records: Mapping[str, Raced]) -> list[str]:
    """What is wrong in :func:`race_each`'s records (empty: nothing): a raced method must
    have sent its :data:`RACED` method (any request for ``None``), every request it sent
    must have reached the server through the guard, and it must have ended with a result
    or one exception (not a group); a :data:`SKILLS` method must have sent nothing and
    raised ``RuntimeError``."""
    wrong = []
    for name, r in records.items():
        methods = [m for m, _ in r.sent]
        if isinstance(r.error, BaseExceptionGroup):
            wrong.append(f"{name}: ended with a group: {r.error!r}")
        if name in SKILLS:
            if methods or not isinstance(r.error, RuntimeError):
                wrong.append(f"{name}: sent {methods}, raised {r.error!r}")
            continue
        expected = RACED.get(name)
        if not methods or (expected is not None and expected not in methods):
            wrong.append(f"{name}: sent {methods}, not {expected or 'a request'}")
        if r.unguarded:
            wrong.append(f"{name}: ids {r.unguarded} reached the server unseen by the guard")
    return wrong
