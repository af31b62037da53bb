"""The task rules around mcp 2.3.0's ``Client`` (the tasks extension,
``io.modelcontextprotocol/tasks``, protocol 2026-07-28).

mcp 2.3.0 has no tasks client; it has the public seams to build one, and this module uses
only those: a :class:`~mcp.client.extension.ClientExtension` whose
:class:`~mcp.client.extension.ResultClaim` claims ``resultType: "task"`` on ``tools/call``
(which also declares the extension to the server), ``ClientSession.send_request`` for
``tasks/get``, ``tasks/update`` and ``tasks/cancel`` (the SDK sets ``Mcp-Name`` to the
task id from :attr:`~mcp_types.Request.name_param`), and
``ClientSession.dispatch_input_request`` to present each input request through the
callbacks registered on the ``Client`` (``elicitation_callback``, ...). Two ways in::

    async with Client(url, elicitation_callback=ask, extensions=[GuardedTasks()]) as client:
        result = await client.call_tool("delete_files", {"count": 3})  # a task, resolved

    handle = await client.session.call_tool(name, args, allow_claimed=True)  # a TaskHandle
    result = await run_task(client.session, handle)

:func:`run_task` drives one task by :class:`fsm.tasks.task.TaskCall`'s actions: it polls
``tasks/get`` after the delay each :class:`~fsm.tasks.task.Poll` says (the task's
``pollIntervalMs``, bounded), presents each key at most once (the callback's
``context.request_id`` is the server's key), keeps polling while a prompt is up, takes a
prompt down by cancelling its callback's scope when the rules withdraw it (the key was
superseded, the task ended), sends each :class:`~fsm.tasks.task.Update` as
``tasks/update`` and ticks the rules at the task's ``createdAt + ttlMs``. It returns the
``CallToolResult`` the completed task carries (its ``result``) or raises exactly one
:class:`~fsm.errors.InteractionFailed` subclass, which is an ``MCPError`` too (code
-32000, ``error.data["reason"]`` its reason: :mod:`fsm.adapters.sdkerrors`):
:class:`~fsm.errors.TaskFailedError`, :class:`~fsm.errors.TaskCancelledError`,
:class:`~fsm.errors.TaskExpiredError` (-32602 or the TTL passed),
:class:`~fsm.errors.MalformedTaskError` (a bad poll result, or a completed task without a
``CallToolResult`` in ``result``), :class:`~fsm.errors.QuestionReaskedError`,
:class:`~fsm.errors.SubmissionFailedError`, :class:`~fsm.errors.CallRejectedError`,
:class:`~fsm.errors.TaskPollsExceededError`. The failing request's ``MCPError`` is its
cause when one ended the call.

A callback that returns ``ErrorData`` or raises, or an input request the SDK cannot parse
into its model (an elicitation without a ``message``), ends the call
(:class:`~fsm.errors.TaskCancelledError`, reason ``cancelled``, chained to what was raised;
its message tells the three apart: :mod:`fsm.adapters._asking`) and the task is cancelled
on the server (``tasks/cancel``, best effort). ``on_action`` sees every action the rules
emit (logs, the demo).

**Durable** (``store=``; the task id is the call's key in the store): the rules are a
:class:`~fsm.durable.calls.DurableCall`; each ``Persist`` is written to the store in a
worker thread and awaited before the next action (the wiring the MRTR adapter uses), so a key's
question is on disk before its callback runs and an answer before the ``tasks/update``
that carries it. A process started again calls ``run_task(session, task_id, store=store)``
with the persisted task id (the store's :meth:`~fsm.durable.store.Store.calls` lists them;
an unended ``"tasks"`` record is a task to resume): the rules restart from the record
(:meth:`~fsm.durable.calls.DurableCall.restart`) and polling goes on. An answered key or
question is never presented again (its stored answer is sent again while the key is
listed); a key on screen at the crash goes to its callback once more, with
``context.meta["fsm/reshown"]`` true (:data:`RESHOWN_META`, as for
MRTR), never twice; a task whose end was recorded raises its stored error, or
:class:`~fsm.errors.InteractionFailed` (reason ``ended-before-restart``) if it had
completed (its result is not stored). A task id with no record starts from
:class:`~fsm.tasks.task.TaskResumed` (polled at once). A crash before the first write
(the task created) leaves no record: the application calls the tool again. Only that
resumption by id is a restart: a task created just now (a ``TaskHandle``, what
:class:`GuardedTasks` resolves) starts a new record under its id, replacing whatever an
earlier task of the same id left (a restarted server may number its tasks from
``task-1`` again), so no earlier task's end or answer is ever taken for it. A write the
store refuses (a full disk, a record longer than ``codec.MAX_VALUE_BYTES``) ends the call
with that :class:`~fsm.errors.StoreError` itself (not an ``MCPError``, as a guarded
session's opening raises it); the task is left on the server.

Limits: ``clock`` is wall-clock seconds (``createdAt`` is an absolute time); one task per
:func:`run_task`; without a store a task resumed by its id after a restart may present
again what was answered before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

from fsm._extras import missing_extra

try:
    import anyio
    import pydantic
    from mcp import types
    from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
    from mcp.client.session import ClientSession
    from mcp_types import Request, RequestParams, Result
except ModuleNotFoundError as exc:
    raise missing_extra("mcp", "fsm.adapters.tasks", exc) from exc

from fsm import actions as act
from fsm import events as ev
from fsm.adapters import _asking, _stored
from fsm.adapters._stored import RESHOWN_META
from fsm.durable.store import Store
from fsm.errors import InteractionFailed, MalformedTaskError, RequestKey, TaskCancelledError
from fsm.tasks import task as tasks
from fsm.tasks.task import TaskAction, TaskCall, TaskConfig, TaskEvent

__all__ = [
    "EXTENSION",
    "RESHOWN_META",
    "CancelTaskRequest",
    "GetTaskRequest",
    "GuardedTasks",
    "RawTaskResult",
    "TaskHandle",
    "TaskIdParams",
    "UpdateTaskParams",
    "UpdateTaskRequest",
    "run_task",
]

EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension's identifier."""


class TaskHandle(Result):
    """The flat ``CreateTaskResult`` a ``tools/call`` answers with: ``resultType: "task"``
    and the task's fields (kept as they came: the rules check them)."""

    model_config = pydantic.ConfigDict(extra="allow", populate_by_name=True)
    result_type: Literal["task"] = pydantic.Field(alias="resultType")
    task_id: str = pydantic.Field(alias="taskId")


class RawTaskResult(Result):
    """A ``tasks/*`` result as it came (the rules judge its shape, not pydantic)."""

    model_config = pydantic.ConfigDict(extra="allow")


class TaskIdParams(RequestParams):
    """``tasks/get`` and ``tasks/cancel`` params."""

    task_id: str = pydantic.Field(alias="taskId")


class UpdateTaskParams(RequestParams):
    """``tasks/update`` params: the answers by ``inputRequests`` key."""

    task_id: str = pydantic.Field(alias="taskId")
    input_responses: dict[str, Any] = pydantic.Field(alias="inputResponses")


class GetTaskRequest(Request[TaskIdParams, Literal["tasks/get"]]):
    """``tasks/get`` (``Mcp-Name``: the task id)."""

    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class UpdateTaskRequest(Request[UpdateTaskParams, Literal["tasks/update"]]):
    """``tasks/update`` (``Mcp-Name``: the task id)."""

    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class CancelTaskRequest(Request[TaskIdParams, Literal["tasks/cancel"]]):
    """``tasks/cancel`` (``Mcp-Name``: the task id)."""

    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


def _dump(model: pydantic.BaseModel) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


async def run_task(
    session: ClientSession,
    handle: TaskHandle | str,
    *,
    config: TaskConfig | None = None,
    clock: Callable[[], float] = time.time,
    on_action: Callable[[TaskAction], None] | None = None,
    store: Store | None = None,
) -> types.CallToolResult:
    """Drive the task ``handle`` names (or the task of that id, resumed after a restart)
    to its end under the task rules; see the module docstring. With ``store``: a task
    named by its id (a string) is resumed from its stored record; a ``TaskHandle`` is a
    task created just now, which starts a new record whatever task the store holds under
    its id (an earlier one's, from a server that numbers its tasks again), never restarted
    from it. ``ValueError`` either way if the id is stored as an MRTR call."""
    task_id = handle if isinstance(handle, str) else handle.task_id
    decider = TaskCall(task_id, clock=clock, config=config)
    # only a persisted id resumes: a handle is a task the server created just now
    call, first = await _stored.start(decider, store, "tasks", resumed=isinstance(handle, str))
    created = None if isinstance(handle, str) else _dump(handle)
    events: list[TaskEvent] = []  # a restart from the store goes on from its actions
    if first is None:
        events = [tasks.TaskResumed() if created is None else tasks.TaskCreated(created)]
    prompts: dict[RequestKey, anyio.CancelScope] = {}
    inbox: _stored.Inbox[TaskEvent] = _stored.Inbox()
    post = inbox.post
    last: list[Any] = [created]  # the task as last seen: created (it may be done), then polled
    cause: list[BaseException] = []  # what ended the call: an SDK error, a callback's
    failure: InteractionFailed | None = None
    gave_up = False  # a callback refused or raised: the task is cancelled on the server
    done = False

    async def poll(delay: float) -> None:
        await anyio.sleep(delay)
        try:
            result = await session.send_request(
                GetTaskRequest(params=TaskIdParams(taskId=task_id)), RawTaskResult
            )
        except Exception as exc:  # every failed poll goes to the rules
            cause[:] = [exc]
            post(tasks.PollFailed(_stored.as_outcome(exc)))
            return
        last[0] = _dump(result)
        post(tasks.Polled(last[0]))

    async def update(responses: dict[str, Any]) -> None:
        params = UpdateTaskParams(taskId=task_id, inputResponses=responses)
        try:
            await session.send_request(UpdateTaskRequest(params=params), RawTaskResult)
        except Exception as exc:
            cause[:] = [exc]
            post(tasks.UpdateFailed(_stored.as_outcome(exc)))
            return
        post(tasks.UpdateAcked())

    async def ask(shown: act.Present) -> None:
        nonlocal gave_up
        with _stored.prompt_scope(prompts, shown.key):
            got = await _asking.ask_callback(session, shown)  # parsed from the poll or store
            if isinstance(got, _asking.Unanswered):  # the call ends, the task is cancelled
                if got.cause is not None:
                    cause[:] = [got.cause]
                gave_up = True
                post(tasks.TaskCancelled(got.reason))
            else:
                post(ev.UserAnswered(shown.key, _dump(got)))

    async def take(action: Any, event: TaskEvent | None) -> None:
        nonlocal failure, done
        if await _stored.take_common(action, store, on_action, prompts, tg, ask):
            return
        if isinstance(action, tasks.Poll):
            tg.start_soon(poll, action.delay_s)
        elif isinstance(action, tasks.Update):
            tg.start_soon(update, dict(action.input_responses))
        elif isinstance(action, act.Fail):
            failure, done = action.error, True
            if not isinstance(event, tasks.PollFailed | tasks.UpdateFailed | tasks.TaskCancelled):
                cause.clear()  # the rules' own verdict, not a request's error
        elif isinstance(action, act.Complete):
            done = True

    with _stored.store_failure():  # a refused write ends the call as that StoreError
        async with anyio.create_task_group() as tg:
            for action in first or ():
                await take(action, None)
            while not done:
                for event in events:
                    for action in call.feed(event):
                        await take(action, event)
                if done:
                    break
                events = await inbox.take(decider.deadline(), clock, tasks.Tick())
            tg.cancel_scope.cancel()
    if failure is not None:
        if gave_up and isinstance(failure, TaskCancelledError):
            await _cancel(session, task_id)
        raise _stored.ERRORS.wrap(failure) from (cause[0] if cause else None)
    return _final(task_id, last[0])


async def _cancel(session: ClientSession, task_id: str) -> None:
    """``tasks/cancel``, best effort (the call fails anyway), bounded in time."""
    with anyio.move_on_after(5.0):
        try:
            await session.send_request(
                CancelTaskRequest(params=TaskIdParams(taskId=task_id)), RawTaskResult
            )
        except Exception:  # the call's own error is what the caller gets
            return


def _final(task_id: str, polled: Any) -> types.CallToolResult:
    """The completed task's ``result`` as a ``CallToolResult``; a typed error if it has none."""
    body = polled.get("result") if isinstance(polled, dict) else None
    try:
        return types.CallToolResult.model_validate(body, by_name=False)
    except pydantic.ValidationError as exc:
        raise _stored.ERRORS.wrap(
            MalformedTaskError(
                f"{task_id}: the task completed without a CallToolResult in its result",
                key=(task_id, "result"),
                stream=task_id,
                evidence=(f"result {str(body)[:200]}",),
            )
        ) from exc


class GuardedTasks(ClientExtension):
    """The tasks extension for ``Client(extensions=[GuardedTasks()])``: declares it, and
    resolves every ``resultType: "task"`` of ``tools/call`` with :func:`run_task` (its
    keywords given here, ``store`` included), so ``client.call_tool`` returns the task's result."""

    identifier = EXTENSION

    def __init__(
        self,
        *,
        config: TaskConfig | None = None,
        clock: Callable[[], float] = time.time,
        on_action: Callable[[TaskAction], None] | None = None,
        store: Store | None = None,
    ) -> None:
        self.config, self.clock, self.on_action = config, clock, on_action
        self.store = store

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=TaskHandle, resolve=self._resolve),)

    async def _resolve(self, handle: TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
        return await run_task(
            ctx.session,
            handle,
            config=self.config,
            clock=self.clock,
            on_action=self.on_action,
            store=self.store,
        )
