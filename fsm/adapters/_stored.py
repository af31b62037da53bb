"""What the one-call adapters share (:mod:`fsm.adapters.mrtr`, :mod:`fsm.adapters.tasks`):
the store wiring (:func:`start`: a resumed call's record read at the start and restarted
from, or its recorded end raised; :func:`write_ahead`: each :class:`~fsm.actions.Persist`
written and waited for before the next action; :func:`store_failure`: a refused write
ends the call with that one ``StoreError``), the actions both take alike (:func:`take_common`:
a prompt started or taken down), a prompt's scope (:func:`prompt_scope`), the loop's wait
for the next events or the decider's deadline (:class:`Inbox`), and how mcp 2.x's errors
meet the rules: a failed request read as an outcome (:func:`as_outcome`), a typed error
raised as an ``MCPError`` too (:data:`ERRORS`, the error type of
:data:`fsm.adapters.mcp2.BINDING` as well). How a prompt asks the application's callback
is :mod:`fsm.adapters._asking`.

Writes run in a worker thread (``anyio.to_thread``): a SQLite write with synchronous
commits must not block the event loop, and the caller awaits it, so the decision is on
disk before the action after it (a question before its callback runs, an answer before
the request that carries it, the end before the result is returned).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, Generic, TypeVar

from fsm._extras import missing_extra

try:
    import anyio
    import anyio.to_thread
    from anyio.abc import TaskGroup
    from mcp import types
    from mcp.shared.exceptions import MCPError
except ModuleNotFoundError as exc:
    raise missing_extra("mcp", "fsm.adapters._stored", exc) from exc

from fsm import actions as act
from fsm.adapters._transport.session import store_failure
from fsm.adapters.sdkerrors import SdkErrorType
from fsm.durable.calls import CallRecord, Decider, DurableCall
from fsm.durable.store import Store
from fsm.errors import InteractionFailed, RequestKey
from fsm.outcomes import SubmissionResult

__all__ = [
    "ERRORS",
    "RESHOWN_META",
    "Inbox",
    "as_outcome",
    "ended",
    "load_record",
    "prompt_scope",
    "start",
    "store_failure",
    "take_common",
    "write_ahead",
]

_E = TypeVar("_E")
_D = TypeVar("_D", bound=Decider)

RESHOWN_META = "fsm/reshown"
"""The ``context.meta`` key that marks a question shown again after a restart."""

ERRORS = SdkErrorType(MCPError, types.ErrorData)
"""What an mcp 2.x adapter raises is an ``MCPError`` too (:mod:`fsm.adapters.sdkerrors`)."""


def as_outcome(exc: BaseException) -> SubmissionResult:
    """A failed request of an mcp 2.x session as the rules read it (an MRTR round, a
    ``tasks/*`` request): a JSON-RPC error body (the SDK's
    ``MCPError`` does not carry the HTTP status, so none is claimed), or no response."""
    if isinstance(exc, MCPError):
        error: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            error["data"] = exc.data
        return SubmissionResult(None, {"jsonrpc": "2.0", "id": None, "error": error})
    return SubmissionResult(None, error=type(exc).__name__)


async def load_record(store: Store, call: str, era: str) -> CallRecord | None:
    """The stored record of ``call``, or ``None``; ``ValueError`` if it is stored as a call
    of another era (``"mrtr"``, ``"tasks"``)."""
    record = await anyio.to_thread.run_sync(store.call, call)
    if record is not None and record.era != era:
        raise ValueError(f"{call!r} is stored as a {record.era} call")
    return record


async def write_ahead(store: Store | None, action: Any) -> bool:
    """If ``action`` is a :class:`~fsm.actions.Persist`, write its delta to ``store`` and
    return once it is written (``True``: the caller takes nothing else for it); ``False``
    for any other action. A ``Persist`` without a store is a wiring bug (``ValueError``)."""
    if not isinstance(action, act.Persist):
        return False
    if store is None or not isinstance(action.delta, CallRecord):
        raise ValueError("a Persist of a call reached an adapter without a store")
    await anyio.to_thread.run_sync(store.write, action.delta)
    return True


def ended(record: CallRecord) -> InteractionFailed:
    """What a call whose end was recorded before the restart raises: its stored error, or,
    for a call that completed (its result is not stored), one typed error (reason
    ``ended-before-restart``)."""
    cause = record.snapshot.cause
    if cause is not None:
        return cause.build(record.call)
    return InteractionFailed(
        f"{record.call} ended before the restart; its result is not stored",
        stream=record.call,
        reason="ended-before-restart",
        evidence=(f"stored state {record.snapshot.state}",),
    )


async def start(
    decider: _D, store: Store | None, era: str, *, resumed: bool
) -> tuple[_D | DurableCall, tuple[Any, ...] | None]:
    """The call to feed and, when the call is ``resumed`` and ``store`` holds an unended
    record of ``decider``'s call, the actions its restart takes first (``None``: the call
    starts afresh). Without a store the decider itself; with one a :class:`DurableCall`.

    ``resumed``: the call is named by an id persisted before this call began (an MRTR
    call's ``call_id``, a task id handed to ``run_task`` after a restart), so the record
    under it is the call's own: restarted from, a recorded end raised as :func:`ended`
    (wrapped by :data:`ERRORS`). Not ``resumed``: the call was created just now (a task
    the server just made), so a record of ``era`` under its id is an earlier call's (a
    restarted server numbers its tasks again), never restarted from nor raised: the call
    starts a new record, and its first write replaces the old one. Either way a record of
    another era is ``ValueError`` (another call's, not overwritten)."""
    if store is None:
        return decider, None
    record = await load_record(store, decider.call_id, era)
    if record is None or not resumed:
        return DurableCall(decider), None
    if record.ended:
        raise ERRORS.wrap(ended(record))
    return DurableCall.restart(decider, record)


@contextlib.contextmanager
def prompt_scope(
    prompts: dict[RequestKey, anyio.CancelScope], key: RequestKey
) -> Iterator[anyio.CancelScope]:
    """The scope a question's prompt runs in, held in ``prompts`` under ``key`` while it
    runs (a ``Withdraw`` cancels it there: :func:`take_common`) and dropped from there
    however the prompt ends."""
    with anyio.CancelScope() as scope:
        prompts[key] = scope
        try:
            yield scope
        finally:
            prompts.pop(key, None)


async def take_common(
    action: Any,
    store: Store | None,
    on_action: Callable[[Any], None] | None,
    prompts: dict[RequestKey, anyio.CancelScope],
    tg: TaskGroup,
    ask: Callable[[act.Present], Coroutine[Any, Any, None]],
) -> bool:
    """Take what both adapters take alike: a ``Persist`` written ahead (nothing else is
    done for it), then ``on_action`` told, a ``Present`` started as ``ask`` in ``tg``, a
    ``Withdraw`` cancelling its prompt's scope in ``prompts``. ``True``: ``action`` needs
    nothing more; ``False``: the adapter takes the rest of it."""
    if await write_ahead(store, action):  # on disk before the next action
        return True
    if on_action is not None:
        on_action(action)
    if isinstance(action, act.Present):
        tg.start_soon(ask, action)
        return True
    if isinstance(action, act.Withdraw):
        scope = prompts.pop(action.key, None)
        if scope is not None:
            scope.cancel()
        return True
    return False


class Inbox(Generic[_E]):
    """The events a call's tasks post (a round's result, a poll, an answer), taken by the
    call's loop in the order posted."""

    def __init__(self) -> None:
        self._events: list[_E] = []
        self._wake = anyio.Event()

    def post(self, event: _E) -> None:
        """Queue ``event`` and wake the loop."""
        self._events.append(event)
        self._wake.set()

    async def take(self, deadline: float | None, clock: Callable[[], float], tick: _E) -> list[_E]:
        """The events posted, oldest first; when none is, wait for one until ``deadline``
        (on ``clock``; ``None``: no deadline) and return ``[tick]`` if it passed first."""
        if not self._events:
            if deadline is None:
                await self._wake.wait()
            else:
                with anyio.move_on_after(max(0.0, deadline - clock())):
                    await self._wake.wait()
        self._wake = anyio.Event()
        events, self._events = self._events or [tick], []
        return events
