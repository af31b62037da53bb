"""The plain tasks requester: what an application written on mcp 2.3.0 alone does with a
``resultType: "task"`` (the SDK has no tasks client), for the tasks end-to-end tests and
the demo, beside :class:`fsm.adapters.tasks.GuardedTasks`.

:class:`PlainTasks` is a :class:`~mcp.client.extension.ClientExtension` whose claim
resolves a task with the ledger of the first SDK requester
(``@modelcontextprotocol/ext-tasks`` 0.2.2): poll ``tasks/get`` every ``pollIntervalMs``;
present each listed key its ledger does not hold, one at a time, through the client's
callbacks; send the answer with ``tasks/update``; commit the key to the ledger once the
update is acknowledged; release it if the update fails and go on polling (so the next
poll presents it again: where ext-tasks 0.2.2 releases the key too but ends its
execution, ``tests/e2e/test_ext_tasks_requester.py``, this loop retries as a hand-written
one would); return the ``result`` of ``completed``; raise ``RuntimeError`` on ``failed``
or ``cancelled``; let an ``MCPError`` (-32602) through.
What it does not do, by design (it is the baseline): withdraw a prompt whose key the
server superseded (it is not polling while the user answers), recognise an answered
question listed under a new key, or stop at the task's TTL. Bounded by ``max_polls`` only
so a test cannot hang.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
from mcp import types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientRequestContext
from pydantic import TypeAdapter

from fsm.adapters.tasks import (
    EXTENSION,
    GetTaskRequest,
    RawTaskResult,
    TaskHandle,
    TaskIdParams,
    UpdateTaskParams,
    UpdateTaskRequest,
)

__all__ = ["PlainTasks"]

_REQUEST: TypeAdapter[types.InputRequest] = TypeAdapter(types.InputRequest)


class PlainTasks(ClientExtension):
    """The plain requester (see the module docstring); ``presented`` lists the keys it
    showed, in order."""

    identifier = EXTENSION

    def __init__(self, *, max_polls: int = 200) -> None:
        self.max_polls = max_polls
        self.presented: list[str] = []

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=TaskHandle, resolve=self._resolve),)

    async def _resolve(self, handle: TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
        session, task_id = ctx.session, handle.task_id
        ledger: set[str] = set()
        body: dict[str, Any] = handle.model_dump(by_alias=True, mode="json")
        for _ in range(self.max_polls):
            status = body.get("status")
            if status == "completed":
                return types.CallToolResult.model_validate(body.get("result"), by_name=False)
            if status in ("failed", "cancelled"):
                raise RuntimeError(f"task {task_id} {status}: {body.get('error')}")
            for key, req in dict(body.get("inputRequests") or {}).items():
                if key in ledger:
                    continue
                self.presented.append(key)
                request = _REQUEST.validate_python(req)
                context = ClientRequestContext(session=session, request_id=key, meta=None)
                answer = await session.dispatch_input_request(context, request)
                if isinstance(answer, types.ErrorData):
                    answer = types.ElicitResult(action="cancel")
                dumped = answer.model_dump(by_alias=True, exclude_none=True, mode="json")
                params = UpdateTaskParams(taskId=task_id, inputResponses={key: dumped})
                try:
                    await session.send_request(UpdateTaskRequest(params=params), RawTaskResult)
                except Exception:  # released: presented again on the next poll
                    continue
                ledger.add(key)
            await anyio.sleep(float(body.get("pollIntervalMs") or 1000) / 1000.0)
            got = await session.send_request(
                GetTaskRequest(params=TaskIdParams(taskId=task_id)), RawTaskResult
            )
            body = got.model_dump(by_alias=True, mode="json")
        raise RuntimeError(f"task {task_id} still running after {self.max_polls} polls")
