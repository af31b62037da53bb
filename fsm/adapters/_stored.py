"""The store wiring the one-call adapters share (:mod:`fsm.adapters.mrtr`,
:mod:`fsm.adapters.tasks`): read a call's record at the start, write each
:class:`~fsm.actions.Persist` and wait for it before the next action, and what a call whose
end was recorded raises when it is started again.

Writes run in a worker thread (``anyio.to_thread``): a SQLite write with synchronous
commits must not block the event loop, and the caller awaits it, so the decision is on
disk before the action after it (a question before its callback runs, an answer before
the request that carries it, the end before the result is returned).
"""

from __future__ import annotations

from typing import Any

from fsm._extras import missing_extra

try:
    import anyio.to_thread
except ModuleNotFoundError as exc:
    raise missing_extra("mcp", "fsm.adapters._stored", exc) from exc

from fsm import actions as act
from fsm.durable.calls import CallRecord
from fsm.durable.store import Store
from fsm.errors import InteractionFailed

__all__ = ["RESHOWN_META", "ended", "load_record", "write_ahead"]

RESHOWN_META = "fsm/reshown"
"""The ``context.meta`` key that marks a question shown again after a restart."""


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
