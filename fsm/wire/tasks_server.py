"""A real mcp 2.3.0 server of the tasks extension (``io.modelcontextprotocol/tasks``), for
the tasks end-to-end tests and the gateway's pass-through test.

Built on the SDK's extension API (:class:`mcp.server.extension.Extension`): the extension
intercepts ``tools/call`` of its task tools and binds ``tasks/get``, ``tasks/update`` and
``tasks/cancel`` (:class:`~mcp.server.extension.MethodBinding`). Served over streamable
HTTP on 127.0.0.1 (ephemeral port, uvicorn, this event loop), protocol 2026-07-28.

A client that declared the extension gets ``resultType: "task"`` (the flat
``CreateTaskResult``) for ``delete_files(count)``; one that did not gets the tool's plain
result (the server may answer a task only to a client that declared it). The task asks
"Delete <count> files?" under key ``confirm-1`` (status ``input_required``), takes the
answer through ``tasks/update`` and completes (``Deleted <count> files`` or ``Kept ...``).
``tasks/update`` answers every call with the empty acknowledgement, whatever it did with
the responses (the spec's eventual consistency: an answer to a key not outstanding is
ignored, and recorded in :class:`TasksLog`).

Faults are explicit commands on :class:`TasksServer` (no sleeps, no timers):

* :meth:`~TasksServer.supersede`: each outstanding key is replaced by a new key asking a
  reworded question (``... (updated)``);
* :meth:`~TasksServer.reask`: after an answer, the task asks the same question again
  under a new key before it completes;
* :meth:`~TasksServer.fail`: status ``failed`` with an ``error``;
* :meth:`~TasksServer.refuse_updates`: the next updates fail with -32603;
* :meth:`~TasksServer.lose_updates`: the next updates never reach the server (HTTP 502);
* :meth:`~TasksServer.complete_bare`: status ``completed`` without a ``result``;
* :meth:`~TasksServer.ask_malformed`: an elicitation without a ``message``;
* :meth:`~TasksServer.purge` / :meth:`~TasksServer.expire`: the task is gone; its
  requests get JSON-RPC -32602 ``"Task not found"`` / ``"Task has expired"``.

Every request's ``Mcp-Name`` header is recorded per method (:attr:`TasksLog.names`), so a
test sees what an intermediary routed on. Limits: a test server; tasks live in memory
(at most :data:`MAX_TASKS`, the oldest dropped first), ``createdAt`` is the wall clock.
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import socket
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolRequestParams, RequestParams
from pydantic import Field

from fsm.wire.serving import serving, whole_body

__all__ = [
    "EXTENSION",
    "MAX_TASKS",
    "ServerTask",
    "TasksLog",
    "TasksServer",
    "build_tasks_server",
    "running_tasks_server",
]

EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension's identifier."""

MAX_TASKS = 256
"""Tasks the server keeps; the oldest is dropped (then ``Task not found``) past it."""

TASK_TOOLS = frozenset({"delete_files"})
"""The tools that answer with a task when the client declared the extension."""

INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class TaskIdParams(RequestParams):
    """``tasks/get`` / ``tasks/cancel`` params."""

    task_id: str = Field(alias="taskId")


class UpdateParams(RequestParams):
    """``tasks/update`` params: the answers by key."""

    task_id: str = Field(alias="taskId")
    input_responses: dict[str, Any] = Field(alias="inputResponses", default_factory=dict)


@dataclass
class ServerTask:
    """One task: its status, outstanding requests (key -> ``{method, params}``) and end."""

    task_id: str
    count: int
    created_at: str
    ttl_ms: int
    poll_interval_ms: int
    status: str = "input_required"
    requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    keys: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    reasks: int = 0
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    gone: str | None = None  # "Task not found" / "Task has expired"

    def ask(self, message: str) -> str:
        key = f"confirm-{next(self.keys)}"
        schema = {"type": "object", "properties": {}}
        params = {"mode": "form", "message": message, "requestedSchema": schema}
        self.requests[key] = {"method": "elicitation/create", "params": params}
        self.status = "input_required"
        return key

    def wire(self) -> dict[str, Any]:
        """The task as ``tasks/get`` answers it (and, with ``resultType``, as created)."""
        body: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.created_at,
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_interval_ms,
        }
        if self.status == "input_required":
            body["inputRequests"] = {key: dict(req) for key, req in self.requests.items()}
        if self.result is not None:
            body["result"] = self.result
        if self.error is not None:
            body["error"] = self.error
        return body


@dataclass
class TasksLog:
    """What the server saw: tasks created, polls, answers taken and ignored, cancels, and
    each method's ``Mcp-Name`` headers."""

    created: list[str] = field(default_factory=list)
    polls: int = 0
    answers: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    ignored: list[tuple[str, str]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    refused: int = 0
    lost: int = 0
    names: dict[str, list[str | None]] = field(default_factory=dict)


class _Tasks(Extension):
    """The extension: task tools, and the three ``tasks/*`` methods."""

    identifier = EXTENSION

    def __init__(self, handle: TasksServer) -> None:
        self.handle = handle

    def methods(self) -> tuple[MethodBinding, ...]:
        return (
            MethodBinding(method="tasks/get", params_type=TaskIdParams, handler=self._get),
            MethodBinding(method="tasks/update", params_type=UpdateParams, handler=self._update),
            MethodBinding(method="tasks/cancel", params_type=TaskIdParams, handler=self._cancel),
        )

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        self._saw("tools/call", ctx)
        caps = ctx.session.client_capabilities
        declared = caps.extensions if caps is not None else None
        if params.name not in TASK_TOOLS or not declared or EXTENSION not in declared:
            return await call_next(ctx)
        count = int((params.arguments or {}).get("count", 0))
        task = self.handle.create(count)
        return {"resultType": "task", **task.wire()}

    def _saw(self, method: str, ctx: ServerRequestContext[Any, Any]) -> None:
        request = ctx.request
        name = request.headers.get("mcp-name") if request is not None else None
        names = self.handle.log.names.setdefault(method, [])
        if len(names) < 1024:
            names.append(name)

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> Any:
        self._saw("tasks/get", ctx)
        self.handle.log.polls += 1
        return self.handle.task(params.task_id).wire()

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: UpdateParams) -> Any:
        self._saw("tasks/update", ctx)
        if self.handle._refuse_updates > 0:
            self.handle._refuse_updates -= 1
            self.handle.log.refused += 1
            raise MCPError(code=INTERNAL_ERROR, message="Failed to store the input responses")
        self.handle.take(self.handle.task(params.task_id), params.input_responses)
        return {}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> Any:
        self._saw("tasks/cancel", ctx)
        task = self.handle.task(params.task_id)
        if task.status in ("working", "input_required"):
            task.status, task.requests = "cancelled", {}
            self.handle.log.cancelled.append(task.task_id)
        return {}


def build_tasks_server(handle: TasksServer) -> MCPServer:
    """The server: the task extension over ``delete_files`` (a plain tool without it)."""
    server = MCPServer("tasks-harness", extensions=[_Tasks(handle)])

    @server.tool()
    async def delete_files(count: int) -> str:
        return f"Deleted {count} files (no task)"

    return server


@dataclass
class TasksServer:
    """A running tasks test server: its URL, its log, its tasks and the explicit faults."""

    url: str
    port: int
    log: TasksLog
    ttl_ms: int
    poll_interval_ms: int
    tasks: OrderedDict[str, ServerTask] = field(default_factory=OrderedDict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _reask: int = 0
    _refuse_updates: int = 0
    _lose_updates: int = 0

    # -------------------------------------------------------------- the task's life

    def create(self, count: int) -> ServerTask:
        """A new task asking to confirm deleting ``count`` files."""
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
        task = ServerTask(f"task-{next(self._ids)}", count, now, self.ttl_ms, self.poll_interval_ms)
        task.reasks, self._reask = self._reask, 0
        task.ask(f"Delete {count} files?")
        self.tasks[task.task_id] = task
        while len(self.tasks) > MAX_TASKS:
            self.tasks.popitem(last=False)
        self.log.created.append(task.task_id)
        return task

    def task(self, task_id: str) -> ServerTask:
        """The task, or the -32602 a purged or expired task gets."""
        task = self.tasks.get(task_id)
        if task is None or task.gone is not None:
            message = task.gone if task is not None else "Task not found"
            raise MCPError(code=INVALID_PARAMS, message=f"Failed to retrieve task: {message}")
        return task

    def take(self, task: ServerTask, responses: dict[str, Any]) -> None:
        """Apply ``tasks/update``: answers to outstanding keys are taken, others ignored."""
        for key, answer in responses.items():
            if task.status != "input_required" or key not in task.requests:
                self.log.ignored.append((task.task_id, key))
                continue
            message = str(task.requests.pop(key)["params"]["message"])
            self.log.answers.append((task.task_id, key, dict(answer)))
            if task.reasks > 0:  # asks the answered question again, under a new key
                task.reasks -= 1
                task.ask(message)
                continue
            if not task.requests:
                accepted = isinstance(answer, dict) and answer.get("action") == "accept"
                text = f"{'Deleted' if accepted else 'Kept'} {task.count} files"
                task.status, task.requests = "completed", {}
                task.result = {
                    "resultType": "complete",
                    "content": [{"type": "text", "text": text}],
                    "structuredContent": {"result": text},  # the tool's output schema
                    "isError": False,
                }

    # -------------------------------------------------------------- explicit faults

    def latest(self) -> ServerTask:
        """The task created last."""
        return next(reversed(self.tasks.values()))

    def reask_next(self, times: int = 1) -> None:
        """The next task asks its question again under a new key ``times`` times after it
        was answered, before it completes."""
        self._reask = times

    def supersede(self, task_id: str) -> list[str]:
        """Replace each outstanding key by a new key asking a reworded question; the new
        keys."""
        task = self.task(task_id)
        old = list(task.requests.values())
        task.requests = {}
        return [task.ask(f"{req['params']['message']} (updated)") for req in old]

    def refuse_updates(self, times: int = 1) -> None:
        """The next ``times`` ``tasks/update`` requests fail with JSON-RPC -32603 (the
        responses not stored)."""
        self._refuse_updates = times

    def ask_malformed(self, task_id: str) -> str:
        """Replace the outstanding requests by an elicitation without a ``message``; its
        key."""
        task = self.task(task_id)
        key = task.ask("")
        task.requests = {key: {"method": "elicitation/create", "params": {"mode": "form"}}}
        return key

    def lose_updates(self, times: int = 1) -> None:
        """The next ``times`` ``tasks/update`` requests never reach the server: HTTP 502
        with no JSON-RPC body (a proxy in front lost them)."""
        self._lose_updates = times

    def complete_bare(self, task_id: str) -> None:
        """The task completes with no ``result`` (a malformed completion)."""
        task = self.task(task_id)
        task.status, task.requests = "completed", {}

    def fail(self, task_id: str, message: str = "the job crashed") -> None:
        """The task fails: status ``failed`` with an ``error``."""
        task = self.task(task_id)
        task.status, task.requests = "failed", {}
        task.error = {"code": -32603, "message": message}

    def purge(self, task_id: str) -> None:
        """The task is gone: -32602 ``Task not found`` from now on."""
        self.task(task_id).gone = "Task not found"

    def expire(self, task_id: str) -> None:
        """The task's TTL passed and the server dropped it: -32602 ``Task has expired``."""
        self.task(task_id).gone = "Task has expired"


class _LosingUpdates:
    """The served app, except that an armed ``tasks/update`` POST (by its ``Mcp-Method``
    header) is answered 502 without reaching it."""

    def __init__(self, app: Any, handle: TasksServer) -> None:
        self.app, self.handle = app, handle

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or ()) if scope["type"] == "http" else {}
        if self.handle._lose_updates <= 0 or headers.get(b"mcp-method") != b"tasks/update":
            await self.app(scope, receive, send)
            return
        self.handle._lose_updates -= 1
        self.handle.log.lost += 1
        await whole_body(receive)
        start = {"type": "http.response.start", "status": 502}
        await send({**start, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"upstream lost the request"})


@contextlib.asynccontextmanager
async def running_tasks_server(
    *, ttl_ms: int = 60_000, poll_interval_ms: int = 100
) -> AsyncIterator[TasksServer]:
    """Run the tasks test server on an ephemeral port of 127.0.0.1 until the block exits."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    handle = TasksServer(f"http://127.0.0.1:{port}/mcp", port, TasksLog(), ttl_ms, poll_interval_ms)
    try:
        app = _LosingUpdates(build_tasks_server(handle).streamable_http_app(), handle)
        async with serving(app, sock, shutdown_timeout=1):
            yield handle
    finally:
        sock.close()
